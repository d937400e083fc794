import itertools

import numpy as np
import pytest
import torch
from sklearn.svm import SVC

from dlnotes import connectionism as cn
from dlnotes import seed_everything

from conftest import bad_input_test

rng = np.random.default_rng(12345)


# ----------------------------------------------------------------------------- 1.0 background


def test_sgn_maps_zero_to_plus_one():
    z = np.array([-3.0, -0.0, 0.0, 2.5])
    assert cn.sgn(z).tolist() == [-1, 1, 1, 1]
    nonzero = rng.normal(size=100)
    assert (cn.sgn(nonzero) == np.sign(nonzero)).all()


def test_projection_lands_on_the_hyperplane_at_the_signed_distance():
    X, w, b = rng.normal(size=(50, 4)), rng.normal(size=4), 0.7
    P = cn.project_onto_hyperplane(X, w, b)
    assert np.allclose(P @ w + b, 0)
    assert np.allclose(cn.project_onto_hyperplane(P, w, b), P)
    assert np.allclose(np.linalg.norm(X - P, axis=1), np.abs(cn.signed_distance(X, w, b)))
    assert np.isclose(cn.signed_distance(np.zeros((1, 4)), w, b)[0], b / np.linalg.norm(w))


def test_general_position():
    assert cn.in_general_position(rng.normal(size=(7, 3)))
    assert cn.in_general_position(rng.normal(size=(2, 3)))  # fewer points than dimensions
    assert not cn.in_general_position(np.array([[1.0, 0, 0], [0, 1, 0], [1, 1, 0]]))
    assert not cn.in_general_position(np.array([[1.0, 2.0], [2.0, 4.0], [0.0, 1.0]]))


# ----------------------------------------------------------------------------- 1.1 history


def test_mp_neuron_and_or():
    X = np.array(list(itertools.product((0, 1), repeat=2)))
    assert cn.mp_neuron(X, [1, 1], 2).tolist() == [0, 0, 0, 1]
    assert cn.mp_neuron(X, [1, 1], 1).tolist() == [0, 1, 1, 1]
    assert cn.mp_neuron(np.array([1, 0]), [1, -1], 1) == 1


def test_delta_rule_is_a_gradient_step_on_the_mean_squared_error():
    X = np.hstack([rng.normal(size=(6, 3)), np.ones((6, 1))])
    T, W = rng.normal(size=(6, 2)), rng.normal(size=(2, 4))
    W_t = torch.tensor(W, requires_grad=True)
    loss = 0.5 * ((torch.tensor(T) - torch.tensor(X) @ W_t.T) ** 2).sum() / len(X)
    loss.backward()
    assert np.allclose(cn.delta_rule(W, X, T, X @ W.T, eta=0.3), W - 0.3 * W_t.grad.numpy(), atol=1e-12)


def test_pdp_network_learns_and():
    X = np.array(list(itertools.product((0, 1), repeat=2)), dtype=float)
    net = cn.PDPNetwork(W=rng.normal(size=(1, 3)), environment=(X, X.prod(axis=1, keepdims=True)))
    errors = [net.squared_error()]
    for _ in range(200):
        net.learn(eta=0.5)
        errors.append(net.squared_error())
    assert (np.diff(errors) <= 1e-12).all()
    assert ((net.activations[:, 0] > 0.5) == X.prod(axis=1).astype(bool)).all()


# ----------------------------------------------------------------------------- 1.2 perceptron


def reference_perceptron(X, y, max_epochs, bias=True):
    """An independent, deliberately plain implementation of Rosenblatt's rule."""
    w, b, updates = [0.0] * X.shape[1], 0.0, 0
    for _ in range(max_epochs):
        clean = True
        for x_i, y_i in zip(X.tolist(), y.tolist(), strict=True):
            activation = sum(wj * xj for wj, xj in zip(w, x_i, strict=True)) + b
            if (1 if activation >= 0 else -1) != y_i:
                w = [wj + y_i * xj for wj, xj in zip(w, x_i, strict=True)]
                b += y_i if bias else 0
                updates += 1
                clean = False
        if clean:
            break
    return np.array(w), b, updates


@pytest.mark.parametrize("bias", [True, False])
def test_perceptron_matches_a_plain_reference(bias):
    X, y, _ = cn.make_separable(120, 4, 0.1, rng=1)
    result = cn.perceptron_train(X, y, max_epochs=1000, bias=bias)
    w_ref, b_ref, n_ref = reference_perceptron(X, y, 1000, bias)
    assert np.allclose(result.w, w_ref) and np.isclose(result.b, b_ref) and result.n_updates == n_ref
    assert result.history["w"].shape == (n_ref + 1, 4) and np.allclose(result.history["w"][-1], result.w)
    assert result.history["mistakes"][-1] == 0 and sum(result.history["mistakes"]) == n_ref
    assert (cn.sgn(X @ result.w + result.b) == y).all()


def test_perceptron_respects_novikoff():
    X, y, w_star = cn.make_separable(300, 5, 0.1, rng=2)
    gamma, R = np.min(y * (X @ w_star)), np.linalg.norm(X, axis=1).max()
    assert cn.perceptron_train(X, y, max_epochs=10_000, bias=False).n_updates <= (R / gamma) ** 2


def test_make_separable_has_the_requested_margin():
    X, y, w_star = cn.make_separable(200, 6, 0.3, rng=0)
    assert X.shape == (200, 6) and np.isclose(np.linalg.norm(w_star), 1)
    assert (y * (X @ w_star) >= 0.3).all()
    assert np.array_equal(
        cn.make_separable(20, 2, 0.1, rng=np.int64(4)).X, cn.make_separable(20, 2, 0.1, rng=4).X
    )


def test_geometric_margin_is_the_worst_signed_distance():
    X, y = rng.normal(size=(30, 3)), cn.sgn(rng.normal(size=30))
    w, b = rng.normal(size=3), 0.2
    loop = min(y_i * (w @ x_i + b) / np.linalg.norm(w) for x_i, y_i in zip(X, y, strict=True))
    assert np.isclose(cn.geometric_margin(X, y, w, b), loop)
    assert np.isclose(cn.geometric_margin(X, y, 5 * w, 5 * b), loop)


def test_linear_separability():
    xor_X = np.array(list(itertools.product((0, 1), repeat=2)))
    assert not cn.is_linearly_separable(xor_X, np.array([-1, 1, 1, -1]), homogeneous=False)
    assert cn.is_linearly_separable(xor_X, np.array([-1, -1, -1, 1]), homogeneous=False)
    line = np.array([[1.0], [2.0]])  # separable by a threshold, not through the origin
    assert cn.is_linearly_separable(line, np.array([1, -1]), homogeneous=False)
    assert not cn.is_linearly_separable(line, np.array([1, -1]), homogeneous=True)


def test_separating_weights_satisfy_the_constraints():
    X, y, _ = cn.make_separable(40, 3, 0.2, rng=3)
    w = cn.separating_weights(X, y)
    assert w.shape == (3,) and (y * (X @ w) >= 1 - 1e-9).all()
    wb = cn.separating_weights(X + 5.0, y, homogeneous=False)
    assert wb.shape == (4,) and (y * ((X + 5.0) @ wb[:3] + wb[3]) >= 1 - 1e-9).all()
    assert (
        cn.separating_weights(np.array([[0.0, 0], [0, 1], [1, 0], [1, 1]]), np.array([-1, 1, 1, -1]), False)
        is None
    )


def test_max_margin_matches_sklearn_svm():
    X = np.vstack([rng.normal(-2, 0.7, size=(25, 2)), rng.normal(2, 0.7, size=(25, 2))])
    y = np.repeat([-1, 1], 25)
    w, b = cn.max_margin_classifier(X, y)
    svm = SVC(kernel="linear", C=1e8, tol=1e-8).fit(X, y)
    assert np.allclose(w, svm.coef_[0], rtol=1e-3) and np.isclose(b, svm.intercept_[0], rtol=1e-3, atol=1e-4)
    assert np.isclose(cn.geometric_margin(X, y, w, b), 1 / np.linalg.norm(w), rtol=1e-6)


def test_version_space_fraction_is_an_arc():
    assert np.isclose(cn.version_space_fraction(np.array([[1.0, 0.0]]), np.array([1])), 0.5)
    # two constraints at an angle phi leave an arc of pi - phi
    phi = 0.8
    X = np.array([[1.0, 0.0], [np.cos(phi), np.sin(phi)]])
    assert np.isclose(
        cn.version_space_fraction(X, np.array([1, 1]), 36_000), (np.pi - phi) / (2 * np.pi), atol=1e-4
    )


# ----------------------------------------------------------------------------- 1.4 Cover


def test_cover_count_values_and_recursion():
    assert (
        cn.cover_count(1, 5) == 2
        and cn.cover_count(3, 0) == 0
        and cn.cover_count(4, 2) == 8
        and cn.cover_count(6, 3) == 32
    )
    for s in range(1, 15):
        for n in range(1, 8):
            expected = 2**s if s <= n else cn.cover_count(s - 1, n) + cn.cover_count(s - 1, n - 1)
            assert cn.cover_count(s, n) == expected
    assert all(cn.cover_count(2 * n, n) * 2 == 2 ** (2 * n) for n in range(1, 40))


@pytest.mark.parametrize(("s", "n"), [(5, 2), (6, 3)])
def test_bruteforce_counts_match_cover(s, n):
    X = rng.normal(size=(s, n))
    assert cn.count_dichotomies_bruteforce(X) == cn.cover_count(s, n)
    assert cn.count_dichotomies_bruteforce(X, homogeneous=False) == cn.cover_count(s, n + 1)


def test_bruteforce_count_drops_below_cover_without_general_position():
    X = np.array([[1.0, 0.0], [2.0, 0.0], [0.0, 1.0], [0.0, -1.0]])  # (1,0) and (2,0) are parallel
    assert cn.count_dichotomies_bruteforce(X) < cn.cover_count(4, 2)


# ----------------------------------------------------------------------------- 1.5 Hopfield


def random_patterns(s, n):
    return rng.choice([-1.0, 1.0], size=(s, n))


def test_hebbian_weights_are_the_outer_product_rule():
    P = random_patterns(4, 20)
    W = cn.hopfield_hebbian(P)
    explicit = sum(np.outer(x, x) for x in P) / 20
    np.fill_diagonal(explicit, 0)
    assert np.allclose(W, explicit) and np.allclose(W, W.T) and (np.diag(W) == 0).all()


def test_energy_equals_the_double_sum():
    n = 12
    W = rng.normal(size=(n, n))
    W = (W + W.T) / 2
    np.fill_diagonal(W, 0)
    b, X = rng.normal(size=n), random_patterns(5, n)
    double_sum = [
        -0.5 * sum(W[i, j] * x[i] * x[j] for i in range(n) for j in range(n) if i != j) + b @ x for x in X
    ]
    assert np.allclose(cn.hopfield_energy(X, W, b), double_sum)
    assert np.isclose(cn.hopfield_energy(X[0], W, b), double_sum[0])


def test_async_dynamics_descend_the_energy_to_a_fixed_point():
    n = 30
    W = rng.normal(size=(n, n))
    W = (W + W.T) / 2
    np.fill_diagonal(W, 0)
    b = rng.normal(size=n)
    run = cn.hopfield_run(random_patterns(1, n)[0], W, b, rng=0)
    assert (np.diff(run.energies) <= 1e-12).all() and np.array_equal(run.states[-1], run.x)
    assert np.allclose(run.energies, [cn.hopfield_energy(state, W, b) for state in run.states])
    assert (np.abs(np.diff(run.states, axis=0)).sum(axis=1) <= 2).all()  # one unit at a time
    assert cn.hopfield_is_fixed_point(run.x, W, b)


def test_a_wrong_update_rule_would_show_in_the_recorded_energies():
    """The energies come from the visited states: with the threshold's sign flipped the energy can rise."""
    n = 30
    W = rng.normal(size=(n, n))
    W = (W + W.T) / 2
    np.fill_diagonal(W, 0)
    b = 3 * rng.normal(size=n)
    run = cn.hopfield_run(random_patterns(1, n)[0], W, -b, rng=0)  # the dynamics of -b, the energy of b
    assert (np.diff(cn.hopfield_energy(run.states, W, b)) > 1e-9).any()


def test_ties_count_as_zero_fields():
    """Hebbian fields are multiples of 1/n; rounding must not turn an exact 0 into -2.8e-17 and flip a unit."""
    n = 100
    P = np.ones((2, n))
    P[1, 1::2] = -1  # x^1 . x^2 = 0, so (W x^1)_i = (1 - 2/n) x^1_i + ... exactly representable ties
    P[0, 0] = P[1, 0] = -1
    W = cn.hopfield_hebbian(P)
    field = 0.3 * np.ones(n) - 0.1 - 0.1 - 0.1  # 2.8e-17 away from 0 in floating point
    assert field[0] != 0 and cn._threshold(field).tolist() == [1.0] * n
    assert cn.hopfield_is_fixed_point(P, W).dtype == bool


def test_sync_dynamics_can_oscillate():
    W = np.array([[0.0, -1.0], [-1.0, 0.0]])
    run = cn.hopfield_run(np.array([1.0, 1.0]), W, mode="sync", max_sweeps=6)
    assert (
        run.x.tolist() == [1.0, 1.0] and len(run.energies) == 7
    )  # never settled: back at the start after 6 steps
    x_async = cn.hopfield_run(np.array([1.0, 1.0]), W, mode="async", rng=0).x
    assert cn.hopfield_is_fixed_point(x_async, W)


def test_crosstalk_matches_its_definition():
    s, n = 5, 16
    P = random_patterns(s, n)
    C = cn.crosstalk(P)
    loop = np.array(
        [
            [
                sum(P[r, i] * P[r, j] * P[t, j] for j in range(n) if j != i for r in range(s) if r != t) / n
                for i in range(n)
            ]
            for t in range(s)
        ]
    )
    assert np.allclose(C, loop)
    W = cn.hopfield_hebbian(P)
    assert np.allclose(P @ W.T, (1 - 1 / n) * P + C)


def test_flip_bits_and_recall():
    x = random_patterns(1, 40)[0]
    flipped = cn.flip_bits(x, 7, rng=0)
    assert np.sum(flipped != x) == 7
    P = np.array([np.tile([1.0, -1.0], 32), np.repeat([1.0, -1.0], 32)])  # orthogonal patterns
    assert cn.recall_rate(P, n_flips=5, n_trials=20, rng=0) == 1.0


def test_digit_prototypes_are_nearly_orthogonal():
    P = cn.digit_prototypes((0, 1, 7))
    assert P.shape == (3, 64) and np.isin(P, (-1, 1)).all()
    overlaps = np.abs(P @ P.T) / 64
    assert (overlaps[~np.eye(3, dtype=bool)] < 0.2).all()


def test_randomness_comes_from_rng_and_none_means_the_package_generator():
    x = random_patterns(1, 40)[0]
    seed_everything(0)
    first = cn.flip_bits(x, 5)
    seed_everything(0)
    assert np.array_equal(cn.flip_bits(x, 5), first)
    assert np.array_equal(cn.flip_bits(x, 5, rng=3), cn.flip_bits(x, 5, rng=np.random.default_rng(3)))


# ----------------------------------------------------------------------------- bad input

XOR_X, XOR_Y = np.array([[0.0, 0], [0, 1], [1, 0], [1, 1]]), np.array([-1, 1, 1, -1])
W8 = cn.hopfield_hebbian(np.array([np.tile([1.0, -1.0], 4), np.repeat([1.0, -1.0], 4)]))
BAD_INPUT = [  # (call, error, message)
    (lambda: cn.sgn(np.array(["a"])), TypeError, "z must be real numbers"),
    (lambda: cn.signed_distance(np.ones((2, 2)), np.zeros(2), 1.0), ValueError, "w must be non-zero"),
    (
        lambda: cn.project_onto_hyperplane(np.ones((2, 3)), np.ones(2), 0.0),
        ValueError,
        r"w must have shape (3,)",
    ),
    (lambda: cn.signed_distance(np.ones(3), np.ones(3), 0.0), ValueError, r"X must have shape (any, any)"),
    (lambda: cn.mp_neuron(np.array([1, 0]), [1, 0.5], 1), ValueError, "sigma must hold whole numbers"),
    (lambda: cn.mp_neuron(np.array([1, 0]), [1, 0], 1), ValueError, r"sigma must hold labels in [-1, 1]"),
    (lambda: cn.mp_neuron(np.array([1, 2]), [1, 1], 1), ValueError, "x must be binary"),
    (lambda: cn.mp_neuron(np.array([1, 0, 1]), [1, 1], 1), ValueError, "x must be binary"),
    (
        lambda: cn.delta_rule(np.ones((2, 3)), np.ones((4, 3)), np.ones((4, 2)), np.ones((4, 3)), 0.1),
        ValueError,
        r"A must have shape (4, 2)",
    ),
    (
        lambda: cn.delta_rule(np.ones((2, 3)), np.ones((4, 3)), np.ones((4, 2)), np.ones((4, 2)), -1),
        ValueError,
        "eta",
    ),
    (lambda: cn.make_separable(10, 2, 5.0), ValueError, "margin"),
    (lambda: cn.make_separable(0, 2, 0.1), ValueError, "n_points"),
    (lambda: cn.make_separable(np.int64(10), 2.0, 0.1), TypeError, "dim must be an int"),
    (lambda: cn.make_separable(10, 2, 0.1, rng="0"), TypeError, "rng"),
    (
        lambda: cn.perceptron_train(np.ones((3, 2)), np.array([1, 0, 1])),
        ValueError,
        r"y must hold labels in [-1, 1]",
    ),
    (lambda: cn.perceptron_train(np.ones((3, 2)), np.array([1, -1])), ValueError, "3 labels"),
    (
        lambda: cn.perceptron_train(np.ones((3, 2)), np.array([1, -1, 1]), max_epochs=0),
        ValueError,
        "max_epochs",
    ),
    (
        lambda: cn.perceptron_train(np.ones((3, 2)), np.array([1, -1, 1]), max_epochs=True),
        TypeError,
        "max_epochs",
    ),
    (lambda: cn.perceptron_train(np.ones((3, 2)), np.array([1, -1, 1]), w0=np.zeros(3)), ValueError, "w0"),
    (
        lambda: cn.geometric_margin(np.ones((3, 2)), np.array([1, -1, 1]), np.ones(3), 0.0),
        ValueError,
        "w must have shape",
    ),
    (lambda: cn.max_margin_classifier(XOR_X, XOR_Y), ValueError, "linearly separable"),
    (lambda: cn.version_space_fraction(np.ones((2, 3)), np.array([1, 1])), ValueError, r"(s, 2)"),
    (lambda: cn.version_space_fraction(XOR_X, XOR_Y, n_angles=0), ValueError, "n_angles"),
    (lambda: cn.cover_count(0, 2), ValueError, "s must be an int in"),
    (lambda: cn.cover_count(3, -1), ValueError, "n must be an int in"),
    (lambda: cn.cover_count(2.0, 2), TypeError, "s must be an int"),
    (lambda: cn.cover_count(True, 2), TypeError, "s must be an int"),
    (lambda: cn.hopfield_hebbian(np.array([[1, 0, -1]])), ValueError, "patterns must hold states"),
    (lambda: cn.hopfield_energy(np.ones(3), np.ones((3, 4))), ValueError, "square"),
    (lambda: cn.hopfield_energy(np.ones(8), W8, np.ones(3)), ValueError, r"b must have shape (8,)"),
    (lambda: cn.hopfield_run(np.ones(8), W8, mode="parallel"), ValueError, "mode must be one of"),
    (lambda: cn.hopfield_run(np.ones(7), W8), ValueError, "x0"),
    (lambda: cn.hopfield_run(np.ones((2, 8)), W8), ValueError, "x0 must be a single state"),
    (lambda: cn.hopfield_run(np.ones(8), W8, max_sweeps=0), ValueError, "max_sweeps"),
    (lambda: cn.hopfield_run(np.ones(8), np.eye(8)), ValueError, "zero diagonal"),
    (lambda: cn.flip_bits(np.ones(40), 41), ValueError, r"n_flips must be an int in [0, 40]"),
    (lambda: cn.recall_rate(np.ones((1, 8)), 1, n_trials=0), ValueError, "n_trials"),
    (lambda: cn.digit_prototypes((1, 1)), ValueError, "digits"),
    (lambda: cn.digit_prototypes((1, 10)), ValueError, "digits entries"),
]


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
