import numpy as np
import scipy.stats
import torch
from sklearn.linear_model import Ridge

from dlnotes import feedforward as ff
from dlnotes.activations import relu, softmax

from conftest import bad_input_test

rng = np.random.default_rng(2024)


# ----------------------------------------------------------------------------- 2.0 background


def test_gaussian_pdf_matches_scipy_and_mle_matches_numpy():
    X = rng.normal(size=(200, 3)) @ rng.normal(size=(3, 3)) + 1.0
    mu, Sigma = ff.gaussian_mle(X)
    assert np.allclose(mu, X.mean(axis=0)) and np.allclose(Sigma, np.cov(X.T, bias=True))
    reference = scipy.stats.multivariate_normal(mu, Sigma).pdf(X)
    assert np.allclose(ff.gaussian_pdf(X, mu, Sigma), reference, rtol=1e-12)


def test_entropy_cross_entropy_and_kl():
    p, q = rng.dirichlet(np.ones(6), size=4), rng.dirichlet(np.ones(6), size=4)
    assert np.allclose(ff.cross_entropy(p, q), ff.entropy(p) + ff.kl(p, q))
    assert (ff.kl(p, q) > 0).all() and np.allclose(ff.kl(p, p), 0)
    assert np.isclose(ff.entropy([0.5, 0.5, 0.0]), np.log(2))  # 0 log 0 = 0
    assert ff.kl([0.5, 0.5], [1.0, 0.0]) == np.inf
    assert np.allclose(ff.entropy(p), scipy.stats.entropy(p, axis=-1))


# ----------------------------------------------------------------------------- 2.1 linear regression


def test_least_squares_gradient_matches_finite_differences():
    X, y, w = rng.normal(size=(30, 4)), rng.normal(size=30), rng.normal(size=4)
    eps = 1e-6
    numeric = [
        (ff.least_squares_loss(X, y, w + eps * e) - ff.least_squares_loss(X, y, w - eps * e)) / (2 * eps)
        for e in np.eye(4)
    ]
    assert np.allclose(ff.least_squares_grad(X, y, w), numeric, atol=1e-8)


def test_closed_forms_match_numpy_and_sklearn():
    X, y = rng.normal(size=(50, 5)), rng.normal(size=50)
    assert np.allclose(ff.lstsq_closed_form(X, y), np.linalg.lstsq(X, y, rcond=None)[0], atol=1e-10)
    lam = 0.7
    w_ridge = ff.lstsq_closed_form(X, y, ridge=lam)
    assert np.allclose(w_ridge, Ridge(alpha=lam, fit_intercept=False).fit(X, y).coef_, atol=1e-10)
    assert np.allclose(w_ridge, ff.ridge_dual(X, y, lam), atol=1e-10)


def test_pinv_via_ridge_converges_to_the_pseudo_inverse():
    X = rng.normal(size=(4, 9))
    errors = [np.linalg.norm(ff.pinv_via_ridge(X, eps) - np.linalg.pinv(X)) for eps in (1e-2, 1e-4, 1e-6)]
    assert errors[0] > 50 * errors[1] > 2500 * errors[2]


def test_gradient_descent_from_zero_finds_the_minimum_norm_solution():
    X, y = rng.normal(size=(5, 20)), rng.normal(size=5)
    eta = len(X) / np.linalg.eigvalsh(X.T @ X).max()
    fit = ff.gd_linear_regression(X, y, eta=eta, steps=2000)
    assert np.linalg.norm(fit.w - np.linalg.pinv(X) @ y) < 1e-6 and (np.diff(fit.losses) <= 1e-15).all()


def test_sgd_lms_recovers_noiseless_weights():
    X, w_true = rng.normal(size=(40, 4)), rng.normal(size=4)
    w = ff.sgd_lms(X, X @ w_true, eta=1 / np.max(np.sum(X**2, axis=1)), steps=5000, rng=0)
    assert np.linalg.norm(w - w_true) < 1e-4


def test_gaussian_nll_is_minimised_by_least_squares():
    X, y = rng.normal(size=(30, 3)), rng.normal(size=30)
    w = np.linalg.lstsq(X, y, rcond=None)[0]
    assert all(
        ff.gaussian_nll(X, y, w, 0.5) < ff.gaussian_nll(X, y, w + 0.01 * d, 0.5)
        for d in rng.normal(size=(5, 3))
    )
    residual = y - X @ w
    expected = residual @ residual / (2 * 0.25) + 15 * np.log(2 * np.pi * 0.25)
    assert np.isclose(ff.gaussian_nll(X, y, w, 0.5), expected)


def test_polynomial_features():
    assert np.allclose(ff.polynomial_features(np.array([2.0, 3.0]), 2), [[1, 2, 4], [1, 3, 9]])


# ----------------------------------------------------------------------------- 2.2 logistic / softmax


def test_bce_matches_torch():
    z = np.linspace(-50, 50, 101)
    y = (rng.uniform(size=z.size) < 0.5).astype(float)
    reference = torch.nn.functional.binary_cross_entropy_with_logits(torch.tensor(z), torch.tensor(y)).item()
    assert np.isclose(ff.bce_with_logits(z, y), reference, rtol=1e-12)


def test_logistic_gradient_matches_autograd():
    X, y, w = rng.normal(size=(20, 3)), (rng.uniform(size=20) < 0.5).astype(float), rng.normal(size=3)
    w_t = torch.tensor(w, requires_grad=True)
    torch.nn.functional.binary_cross_entropy_with_logits(torch.tensor(X) @ w_t, torch.tensor(y)).backward()
    assert np.allclose(ff.logistic_regression_grad(X, y, w), w_t.grad.numpy(), atol=1e-12)


def test_logistic_hessian_matches_autograd():
    X, w = rng.normal(size=(20, 3)), rng.normal(size=3)
    y = (rng.uniform(size=20) < 0.5).astype(float)

    def loss(w_t):
        return torch.nn.functional.binary_cross_entropy_with_logits(torch.tensor(X) @ w_t, torch.tensor(y))

    H = torch.autograd.functional.hessian(loss, torch.tensor(w)).numpy()
    assert np.allclose(ff.logistic_regression_hessian(X, w), H, atol=1e-12)


def test_softmax_cross_entropy_is_stable_and_matches_torch():
    z = rng.normal(size=(5, 7)) * 1000
    y = rng.integers(7, size=5)
    torch_ce = torch.nn.functional.cross_entropy(torch.tensor(z), torch.tensor(y)).item()
    assert np.isclose(ff.softmax_cross_entropy(z, y), torch_ce, rtol=1e-12)


def test_softmax_jacobian_matches_autograd():
    z = rng.normal(size=6)
    J = torch.autograd.functional.jacobian(lambda t: torch.softmax(t, 0), torch.tensor(z)).numpy()
    assert np.allclose(ff.softmax_jacobian(z), J, atol=1e-12)


def test_softmax_regression_reaches_the_optimum_of_its_loss():
    X = rng.normal(size=(90, 2))
    y = np.argmax(X @ rng.normal(size=(2, 3)) + 0.5 * rng.normal(size=(90, 3)), axis=1)
    W = ff.softmax_regression(X, y, 3, eta=0.5, steps=3000, lam=0.01)
    Xb = np.hstack([X, np.ones((90, 1))])
    gradient = Xb.T @ (softmax(Xb @ W) - np.eye(3)[y]) / 90 + 0.01 * W
    assert np.abs(gradient).max() < 1e-6
    assert np.allclose(ff.softmax_regression_logits(X, W), Xb @ W)


# ----------------------------------------------------------------------------- 2.3 layers


def test_mlp_matches_nn_sequential_with_copied_weights():
    torch.manual_seed(0)
    mlp = ff.MLP([4, 8, 3], activation="tanh")
    reference = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    with torch.no_grad():
        for dense, linear in zip(mlp, reference[::2], strict=True):
            linear.weight.copy_(dense.W)
            linear.bias.copy_(dense.b)
    x = torch.randn(10, 4)
    assert torch.allclose(mlp(x), reference(x), atol=1e-6)
    assert sum(p.numel() for p in mlp.parameters()) == 8 * (4 + 1) + 3 * (8 + 1)


def test_residual_layer_with_zero_weights_is_the_identity():
    layer = ff.Residual(5, "sigmoid")
    with torch.no_grad():
        layer.W.zero_()
        layer.b.zero_()
    x = torch.randn(3, 5)
    assert torch.allclose(layer(x), x, atol=1e-6)  # x + sigmoid(0) - sigmoid(0), up to float rounding
    model = ff.MLP([5, 5, 5, 2], residual=True)
    assert (
        isinstance(model[1], ff.Residual)
        and isinstance(model[2], ff.Dense)
        and not isinstance(model[2], ff.Residual)
    )


def test_residual_layer_scales_its_branch_by_alpha():
    layer = ff.Residual(4, "tanh", alpha=0.25).double()
    x = torch.randn(6, 4, dtype=torch.float64)
    expected = x + 0.25 * torch.tanh(x @ layer.W.T + layer.b)
    assert torch.allclose(layer(x), expected, atol=1e-14)


def test_permuting_hidden_units_keeps_the_function():
    torch.manual_seed(1)
    mlp = ff.MLP([3, 6, 4, 2])
    permuted = ff.permute_hidden(mlp, 0, [5, 3, 1, 0, 2, 4])
    x = torch.randn(7, 3)
    assert torch.allclose(mlp(x), permuted(x), atol=1e-6) and not torch.equal(mlp[0].W, permuted[0].W)


# ----------------------------------------------------------------------------- 2.4 approximation


def test_random_feature_fit_interpolates_with_enough_units():
    a, c = rng.uniform(-5, 5, 30), rng.uniform(-1, 1, 30)
    x = np.linspace(-1, 1, 20)
    g, v = ff.random_feature_fit(np.cos, a, c, x, x)
    assert v.shape == (31,) and np.allclose(g, np.cos(x), atol=1e-8)


def test_maurey_mse_decays_like_one_over_m():
    small = np.mean([ff.maurey_mse(3, 10, rng=k) for k in range(10)])
    large = np.mean([ff.maurey_mse(3, 1000, rng=k) for k in range(10)])
    assert 30 < small / large < 300


# ----------------------------------------------------------------------------- 2.5 ReLU networks


def test_region_count_by_lp_attains_zaslavsky_in_general_position():
    for n, m in ((1, 4), (2, 5), (3, 5)):
        W, b = rng.normal(size=(m, n)), rng.normal(size=m)
        assert ff.count_regions_lp(W, b) == ff.zaslavsky_bound(m, n)
    parallel = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    assert ff.count_regions_lp(parallel, np.array([0.0, 1.0, 0.0])) == 6 < ff.zaslavsky_bound(3, 2)


def test_grid_patterns_never_exceed_the_exact_count():
    W, b = rng.normal(size=(5, 2)), rng.normal(size=5)
    grid = np.stack(np.meshgrid(np.linspace(-50, 50, 400), np.linspace(-50, 50, 400)), -1).reshape(-1, 2)
    seen = len(np.unique(ff.relu_net_patterns(grid, [W], [b]), axis=0))
    assert seen <= ff.count_regions_lp(W, b) and seen >= 0.8 * ff.count_regions_lp(W, b)
    assert (ff.activation_patterns(grid, W, b) == (grid @ W.T + b > 0)).all()


def test_bounds_and_the_sawtooth():
    assert ff.zaslavsky_bound(8, 2) == 1 + 8 + 28 and ff.zaslavsky_bound(3, 5) == 8
    assert ff.montufar_bound(4, 2, 3) == ff.zaslavsky_bound(4, 2) * 2**4
    for L in range(1, 7):
        assert ff.count_linear_pieces(ff.sawtooth_net(L), 0, 1) == 2**L
    assert (
        ff.count_linear_pieces(np.abs, -1, 1, n_grid=1000) == 2
    )  # a break inside a grid interval counts once


def test_relu_representation_reconstructs_the_interpolant():
    x = np.sort(rng.uniform(0, 1, 7))
    v = rng.normal(size=7)
    r = ff.relu_representation(x, v)
    t = np.linspace(x[0], x[-1], 500)
    g = r.a * t + r.b + relu(t[:, None] - x[1:-1]) @ r.c
    assert np.allclose(g, np.interp(t, x, v))


# ----------------------------------------------------------------------------- bad input

X3, Y3 = rng.normal(size=(3, 6)), rng.normal(size=3)
MLP_3642 = ff.MLP([3, 6, 4, 2])
BAD_INPUT = [  # (call, error, message)
    (
        lambda: ff.gaussian_pdf(np.ones((4, 3)), np.zeros(3), np.eye(2)),
        ValueError,
        r"Sigma must have shape (3, 3)",
    ),
    (lambda: ff.entropy([0.5, 0.6]), ValueError, "p must hold probabilities"),
    (
        lambda: ff.least_squares_loss(X3, Y3, np.ones(5)),
        ValueError,
        r"w must have shape (6,), got shape (5,)",
    ),
    (lambda: ff.least_squares_grad(X3, Y3, np.ones((6, 1))), ValueError, r"w must have shape (6,)"),
    (lambda: ff.least_squares_loss(X3, np.ones(4), np.ones(6)), ValueError, r"y must have shape (3,)"),
    (lambda: ff.lstsq_closed_form(X3, Y3), ValueError, "singular"),
    (lambda: ff.lstsq_closed_form(X3, Y3, ridge=-1), ValueError, "ridge"),
    (lambda: ff.pinv_via_ridge(X3, 0.0), ValueError, "eps"),
    (lambda: ff.gd_linear_regression(X3, Y3, eta=0.1, steps=1, w0=np.zeros(3)), ValueError, "w0"),
    (lambda: ff.gd_linear_regression(X3, Y3, eta=0.1, steps=0), ValueError, "steps"),
    (lambda: ff.sgd_lms(X3, Y3, eta=0.1, steps=2.5), TypeError, "steps must be an int"),
    (lambda: ff.gaussian_nll(X3, Y3, np.ones(6), sigma=0), ValueError, "sigma"),
    (lambda: ff.polynomial_features(np.ones(3), -1), ValueError, "degree"),
    (lambda: ff.polynomial_features(np.ones((3, 1)), 2), ValueError, r"x must have shape (any,)"),
    (
        lambda: ff.bce_with_logits(np.zeros(3), np.array([0, 2, 1])),
        ValueError,
        r"y must hold labels in [0, 1]",
    ),
    (
        lambda: ff.logistic_regression_grad(X3, np.array([0, 1, 1]), np.ones(2)),
        ValueError,
        "w must have shape",
    ),
    (lambda: ff.softmax_jacobian(np.ones((2, 3))), ValueError, r"z must have shape (any,)"),
    (lambda: ff.softmax_cross_entropy(np.zeros((2, 3)), np.array([0.5, 1.0])), ValueError, "whole numbers"),
    (lambda: ff.softmax_cross_entropy(np.zeros((2, 3)), np.array([0, 3])), ValueError, r"labels in 0..2"),
    (
        lambda: ff.softmax_regression(X3, np.array([0, 1, 3]), 3, 0.1, 10),
        ValueError,
        r"y must hold labels in 0..2 (n_classes = 3)",
    ),
    (lambda: ff.softmax_regression(X3, np.array([0, 1, 1]), 1, 0.1, 10), ValueError, "n_classes"),
    (
        lambda: ff.softmax_regression_logits(np.ones((4, 3)), np.ones((3, 2))),
        ValueError,
        r"W must have shape (4, any)",
    ),
    (lambda: ff.MLP([4]), ValueError, "sizes"),
    (lambda: ff.MLP([4, 2.0]), TypeError, "sizes entries must be an int"),
    (lambda: ff.MLP([4, 2], activation="swish"), ValueError, "activation must be one of"),
    (lambda: ff.Dense(0, 3), ValueError, "n must be an int"),
    (lambda: ff.Residual(3, alpha=0), ValueError, "alpha"),
    (lambda: ff.permute_hidden(MLP_3642, 0, [0, 0, 1, 2, 3, 4]), ValueError, "permutation"),
    (lambda: ff.permute_hidden(MLP_3642, 2, [0, 1]), ValueError, r"layer must be an int in [0, 1]"),
    (
        lambda: ff.random_feature_fit(np.cos, np.ones(4), np.ones(3), np.ones(5), np.ones(5)),
        ValueError,
        r"c must have shape (4,)",
    ),
    (
        lambda: ff.random_feature_fit("cos", np.ones(4), np.ones(4), np.ones(5), np.ones(5)),
        TypeError,
        "f must be callable",
    ),
    (lambda: ff.maurey_mse(2, 0), ValueError, "m must"),
    (
        lambda: ff.activation_patterns(np.ones((5, 2)), np.ones((3, 3)), np.ones(3)),
        ValueError,
        r"W must have shape (any, 2)",
    ),
    (
        lambda: ff.activation_patterns(np.ones((5, 2)), np.ones((3, 2)), np.ones(2)),
        ValueError,
        r"b must have shape (3,)",
    ),
    (lambda: ff.relu_net_patterns(np.ones((5, 2)), [], []), ValueError, "weights and biases"),
    (lambda: ff.count_regions_lp(np.ones((3, 2)), np.ones(2)), ValueError, r"b must have shape (3,)"),
    (lambda: ff.zaslavsky_bound(-1, 2), ValueError, "m must"),
    (lambda: ff.montufar_bound(1, 2, 2), ValueError, r"m must be an int in [2, inf)"),
    (lambda: ff.sawtooth_net(0), ValueError, "L must"),
    (lambda: ff.count_linear_pieces(np.abs, 1, 0), ValueError, "b must be a finite number in"),
    (lambda: ff.count_linear_pieces(np.abs, 0, 1, n_grid=2), ValueError, "n_grid"),
    (lambda: ff.relu_representation([0.0, 0.0], [1.0, 2.0]), ValueError, "strictly increasing"),
    (lambda: ff.relu_representation([0.0, 1.0], [1.0]), ValueError, r"values must have shape (2,)"),
]


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
