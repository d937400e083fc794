"""dlnotes.ethics.linear (11.1-11.2): the dual norm and its maximiser against linear programming and SLSQP,
the minimal perturbations of binary and multiclass linear models against constrained minimisation, DeepFool
against the exact minimum of an affine model, and the line search against its closed form for a linear model."""

import math

import numpy as np
import pytest
import torch
from scipy.optimize import linprog, minimize

from dlnotes.ethics.common import lp_norm, mlp, predict
from dlnotes.ethics.linear import (
    deepfool,
    dual_norm,
    dual_norm_maximiser,
    gradient_line_search,
    linear_linf_worst,
    linear_min_l2,
    multiclass_distances,
    multiclass_min_l2,
)

from conftest import bad_input_test

rng = np.random.default_rng(112)


def max_linear_over_ball(w, eps, p):
    """max w^T delta over ||delta||_p <= eps by an optimiser: linprog for p = 1 and inf, SLSQP otherwise."""
    d = len(w)
    if p == math.inf:
        return -linprog(-w, bounds=[(-eps, eps)] * d).fun
    if p == 1:  # delta = u - v, u, v >= 0, sum(u + v) <= eps
        res = linprog(
            np.concatenate([-w, w]), A_ub=np.ones((1, 2 * d)), b_ub=[eps], bounds=[(0, None)] * (2 * d)
        )
        return -res.fun
    ball = {"type": "ineq", "fun": lambda z: eps**p - np.sum(np.abs(z) ** p)}
    res = minimize(lambda z: -w @ z, np.full(d, eps / d), constraints=[ball], method="SLSQP", tol=1e-12)
    return -res.fun


@pytest.mark.parametrize("p", [1, 1.5, 2, 3, math.inf, "inf"])
def test_dual_norm_is_the_maximum_of_a_linear_function_over_the_ball(p):
    w, eps = rng.normal(size=6), 0.3
    p_num = math.inf if p == "inf" else p
    best = max_linear_over_ball(w, eps, p_num)
    assert eps * dual_norm(w, p) == pytest.approx(best, rel=1e-6)
    delta = dual_norm_maximiser(w, eps, p)
    assert w @ delta == pytest.approx(best, rel=1e-6)
    assert lp_norm(delta, p_num) <= eps * (1 + 1e-12)
    q = {1: math.inf, 1.5: 3.0, 2: 2.0, 3: 1.5}.get(p, 1.0)
    assert dual_norm(w, p) == pytest.approx(np.linalg.norm(w, ord=q), rel=1e-12)


def test_dual_norm_of_rows_and_the_maximiser_of_special_vectors():
    W = rng.normal(size=(4, 5))
    assert np.allclose(dual_norm(W, math.inf), np.abs(W).sum(axis=1))
    assert np.array_equal(dual_norm_maximiser(np.array([0.5, -2.0, 1.0]), 0.1, 1), [0.0, -0.1, 0.0])
    assert np.array_equal(dual_norm_maximiser(np.zeros(3), 0.1, 2), np.zeros(3))
    assert np.allclose(dual_norm_maximiser(np.array([3.0, -4.0]), 1.0, 2), [0.6, -0.8])


def test_linear_min_l2_is_the_closest_point_of_the_boundary():
    w, b = rng.normal(size=5), 0.4
    X = rng.normal(size=(6, 5))
    delta = linear_min_l2(X, w, b)
    for x, dl in zip(X, delta, strict=True):
        on_boundary = {"type": "eq", "fun": lambda z, x=x: w @ (x + z) + b}
        res = minimize(lambda z: z @ z, np.zeros(5), constraints=[on_boundary], method="SLSQP", tol=1e-14)
        assert np.allclose(dl, res.x, atol=1e-7)
    s = X @ w + b
    assert np.all(np.sign((X + (1 + 1e-9) * delta) @ w + b) == -np.sign(s))
    assert np.allclose(np.linalg.norm(delta, axis=1), np.abs(s) / np.linalg.norm(w))


def test_linear_linf_worst_case_is_the_linear_programme_minimum():
    d, eps = 5, 0.2
    w, b = rng.normal(size=d), 0.1
    X, y = rng.normal(size=(8, d)) * 0.5, rng.choice([-1, 1], size=8)
    worst = linear_linf_worst(X, y, w, b, eps)
    for x, yi, x_adv, m in zip(X, y, worst.X_adv, worst.margin, strict=True):
        res = linprog(yi * w, bounds=[(-eps, eps)] * d)  # min over delta of y w^T delta
        assert res.fun + m == pytest.approx(yi * (w @ x_adv + b), abs=1e-10)
        assert m == pytest.approx(yi * (w @ x + b))
    assert np.array_equal(worst.flipped, y * (worst.X_adv @ w + b) <= 0)


def random_linear_model(K, d):
    W = rng.normal(size=(K, d)) * rng.uniform(0.3, 3.0, size=(K, 1))
    return W, rng.normal(size=K)


def test_multiclass_distances_by_brute_force():
    W, b = random_linear_model(4, 3)
    X = rng.normal(size=(5, 3))
    y = rng.integers(0, 4, size=5)
    result = multiclass_distances(X, y, W, b)
    for i in range(5):
        for j in range(4):
            if j == y[i]:
                assert result.margins[i, j] == 0 and result.distances[i, j] == math.inf
                continue
            m = (W[y[i]] - W[j]) @ X[i] + b[y[i]] - b[j]
            assert result.margins[i, j] == pytest.approx(m)
            assert result.distances[i, j] == pytest.approx(m / np.linalg.norm(W[y[i]] - W[j]))


def test_multiclass_min_l2_is_the_constrained_minimum():
    K, d = 5, 4
    W, b = random_linear_model(K, d)
    X = rng.normal(size=(4, d))
    delta = multiclass_min_l2(X, W, b)
    for x, dl in zip(X, delta, strict=True):
        y = int(np.argmax(W @ x + b))
        best = None
        for j in set(range(K)) - {
            y
        }:  # min ||delta|| s.t. class j reaches class y: f_j(x + delta) >= f_y(x + delta)
            reach = {"type": "ineq", "fun": lambda z, j=j, x=x, y=y: (W[j] - W[y]) @ (x + z) + b[j] - b[y]}
            res = minimize(lambda z: z @ z, np.zeros(d), constraints=[reach], method="SLSQP", tol=1e-14)
            if best is None or res.fun < best.fun:
                best = res
        assert np.allclose(dl, best.x, atol=1e-6)
        assert np.argmax(W @ (x + (1 + 1e-9) * dl) + b) != y
        assert np.argmax(W @ (x + (1 - 1e-9) * dl) + b) == y


def affine_model(W, b):
    layer = torch.nn.Linear(W.shape[1], W.shape[0]).double()
    with torch.no_grad():
        layer.weight[:] = torch.tensor(W)
        layer.bias[:] = torch.tensor(b)
    return torch.nn.Sequential(layer)


def test_deepfool_is_exact_on_an_affine_model():
    W, b = random_linear_model(6, 5)
    X = rng.normal(size=(10, 5))
    exact = multiclass_min_l2(X, W, b)
    model = affine_model(W, b)
    plain = deepfool(model, X, overshoot=0.0)
    assert np.abs(plain.delta - exact).max() < 1e-10
    pushed = deepfool(model, X, overshoot=0.02)
    assert np.abs(pushed.delta - 1.02 * exact).max() < 1e-10
    assert pushed.fooled.all() and np.all(pushed.iterations == 1)
    assert np.allclose(pushed.X_adv, X + pushed.delta)
    # binary case: eta* = (f_1 - f_2) / ||w_2 - w_1||^2 (w_2 - w_1) for a point of class 1
    W2, b2 = W[:2], b[:2]
    x = X[:1] + (W2[0] - W2[1]) * 2.0  # pushed into class 0 (the lecture's class 1)
    f = W2 @ x[0] + b2
    assert f[0] > f[1]
    eta = (f[0] - f[1]) / np.sum((W2[1] - W2[0]) ** 2) * (W2[1] - W2[0])
    assert np.allclose(deepfool(affine_model(W2, b2), x, overshoot=0.0).delta[0], eta, atol=1e-10)


def test_deepfool_fools_a_small_network_with_a_small_step():
    torch.manual_seed(0)
    model = mlp((16,), d=4, K=3, dtype=torch.float64)
    X = rng.normal(size=(30, 4))
    result = deepfool(model, X)
    assert result.fooled.mean() >= 0.95
    assert np.array_equal(predict(model, result.X_adv) != predict(model, X), result.fooled)
    search = gradient_line_search(model, X, predict(model, X), radius_max=20.0)
    both = result.fooled & search.fooled
    assert np.median(np.linalg.norm(result.delta[both], axis=1)) <= 2 * np.median(search.radius[both])


def test_line_search_matches_the_closed_form_of_a_binary_linear_model():
    d = 6
    w, b = rng.normal(size=d), 0.2
    W, bias = np.stack([np.zeros(d), w]), np.array([0.0, b])
    model = affine_model(W, bias)
    X = rng.normal(size=(8, d)) * 0.3
    y = predict(model, X)
    s = X @ w + b
    along_gradient = gradient_line_search(model, X, y, radius_max=10.0)
    assert along_gradient.fooled.all()
    assert np.allclose(along_gradient.radius, np.abs(s) / np.linalg.norm(w), atol=1e-9)
    along_sign = gradient_line_search(model, X, y, radius_max=10.0, direction="sign")
    assert np.allclose(along_sign.radius, np.abs(s) * math.sqrt(d) / np.abs(w).sum(), atol=1e-9)
    too_short = gradient_line_search(model, X, y, radius_max=1e-6)
    assert not too_short.fooled.any() and np.all(too_short.radius == math.inf)
    assert np.array_equal(too_short.X_adv, X)


BAD_INPUT = [  # (call, error, message)
    (lambda: dual_norm(np.ones(3), 0.5), ValueError, "p must be a number >= 1 or inf"),
    (lambda: dual_norm(np.ones((2, 2, 2)), 2), ValueError, "w must be a vector (d,) or a batch of rows (n, d)"),
    (lambda: dual_norm_maximiser(np.ones((2, 3)), 0.1, 2), ValueError, "w must have shape (any,)"),
    (lambda: dual_norm_maximiser(np.ones(3), -0.1, 2), ValueError, "eps must be a finite number in [0, inf)"),
    (lambda: linear_min_l2(np.ones((2, 3)), np.ones(4), 0.0), ValueError, "w must have shape (3,)"),
    (lambda: linear_min_l2(np.ones((2, 3)), np.zeros(3), 0.0), ValueError, "w must not be zero"),
    (lambda: linear_linf_worst(np.ones((2, 3)), [0, 1], np.ones(3), 0.0, 0.1), ValueError, "y must hold labels in [-1, 1]"),
    (lambda: multiclass_distances(np.ones((2, 3)), [0, 5], np.ones((3, 3)) * [[1], [2], [3]], np.zeros(3)), ValueError, "y must hold labels in 0..2"),
    (lambda: multiclass_min_l2(np.ones((2, 3)), np.ones((1, 3)), np.zeros(1)), ValueError, "W must have one row per class"),
    (lambda: multiclass_min_l2(np.ones((2, 3)), np.ones((2, 3)), np.zeros(2)), ValueError, "W has two equal rows"),
    (lambda: deepfool(mlp(), np.ones((2, 64)), steps=0), ValueError, "steps must be an int in [1, inf)"),
    (lambda: deepfool("model", np.ones((2, 64))), TypeError, "model must be a torch.nn.Module"),
    (lambda: gradient_line_search(mlp(), np.ones((2, 64)), [0, 1], direction="linf"), ValueError, "direction must be one of ['l2', 'sign']"),
    (lambda: gradient_line_search(mlp(), np.ones((2, 64)), [0, 1], radius_max=0.0), ValueError, "radius_max must be a finite number in (0, inf)"),
    (lambda: gradient_line_search(mlp(), np.ones((2, 64)), [0, 10]), ValueError, "y must hold labels in 0..9"),
]  # fmt: skip


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
