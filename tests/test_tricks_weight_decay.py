"""Sections 8.2-8.3: the weight-decay step against torch's SGD, AdamW against torch.optim.AdamW, the shrinkage
along Hessian eigen-directions against a linear solve, the early-stopping factors against gradient descent, L1
and L2 minimisers against scipy, the ridge risk against a direct computation, patience against a brute force."""

import numpy as np
import pytest
import torch
from scipy.optimize import minimize_scalar

from dlnotes.tricks.weight_decay import (
    adamw_step,
    early_stopping_factors,
    l1_minimiser,
    l2_minimiser,
    patience_stop,
    ridge_risk,
    soft_threshold,
    weight_decay_minimiser,
    weight_decay_step,
)

from conftest import bad_input_test

rng = np.random.default_rng(8)


def test_weight_decay_step_equals_torch_sgd():
    theta, g = rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    p = torch.nn.Parameter(torch.tensor(theta))
    p.grad = torch.tensor(g)
    torch.optim.SGD([p], lr=0.1, weight_decay=0.3).step()
    step = weight_decay_step(theta, g, {}, eta=0.1, mu=0.3)
    assert np.allclose(step.theta, p.detach().numpy(), atol=1e-14) and step.state == {}
    assert np.array_equal(weight_decay_step(theta, g, {}, 0.1, 0.0).theta, theta - 0.1 * g)


def test_adamw_step_equals_torch_adamw_and_not_adam_with_weight_decay():
    theta0 = rng.normal(size=6)
    grads = rng.normal(size=(15, 6))
    p_w = torch.nn.Parameter(torch.tensor(theta0))
    p_a = torch.nn.Parameter(torch.tensor(theta0))
    adamw = torch.optim.AdamW([p_w], lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.2)
    adam = torch.optim.Adam([p_a], lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.2)
    theta, state = theta0, {}
    for g in grads:
        for p, opt in ((p_w, adamw), (p_a, adam)):
            p.grad = torch.tensor(g)
            opt.step()
        theta, state = adamw_step(theta, g, state, 0.01, 0.2, beta1=0.8, beta2=0.99, eps=1e-6)
    assert np.allclose(theta, p_w.detach().numpy(), atol=1e-13) and state["t"] == len(grads)
    assert np.abs(theta - p_a.detach().numpy()).max() > 1e-4
    # mu = 0 is Adam
    p0 = torch.nn.Parameter(torch.tensor(theta0))
    p0.grad = torch.tensor(grads[0])
    torch.optim.Adam([p0], lr=0.01).step()
    assert np.allclose(adamw_step(theta0, grads[0], {}, 0.01, 0.0).theta, p0.detach().numpy(), atol=1e-14)


def test_adamw_step_does_not_modify_the_callers_state():
    state = {}
    adamw_step(np.ones(2), np.ones(2), state, 0.1, 0.1)
    assert state == {}


def test_weight_decay_minimiser_equals_solve_and_zeroes_the_gradient():
    A = rng.normal(size=(5, 3))
    H = A @ A.T  # rank 3: two zero eigenvalues
    theta_star, mu = rng.normal(size=5), 0.7
    result = weight_decay_minimiser(H, theta_star, mu)
    assert np.allclose(result.theta_mu, np.linalg.solve(H + mu * np.eye(5), H @ theta_star), atol=1e-12)
    assert np.allclose(H @ (result.theta_mu - theta_star) + mu * result.theta_mu, 0, atol=1e-12)
    assert np.allclose(result.Q @ np.diag(result.lams) @ result.Q.T, H, atol=1e-12)
    assert np.allclose(result.factors[:2], 0, atol=1e-12) and np.all(np.diff(result.lams) >= 0)


def test_early_stopping_factors_equal_gradient_descent_from_zero():
    Q = np.linalg.qr(rng.normal(size=(4, 4)))[0]
    lams = np.array([0.05, 0.5, 2.0, 8.0])
    H, theta_star, eta = Q @ np.diag(lams) @ Q.T, rng.normal(size=4), 0.1
    theta = np.zeros(4)
    for k in range(1, 40):
        theta = theta - eta * H @ (theta - theta_star)
        predicted = Q @ (early_stopping_factors(lams, eta, k) * (Q.T @ theta_star))
        assert np.allclose(theta, predicted, atol=1e-12)
    assert np.array_equal(early_stopping_factors(lams, eta, 0), np.zeros(4))


def test_early_stopping_matches_weight_decay_for_k_one_over_eta_mu():
    lams = np.logspace(-3, 2, 200)
    gap = np.abs(early_stopping_factors(lams, 1e-3, 10_000) - lams / (lams + 0.1)).max()
    assert gap < 0.25


@pytest.mark.parametrize("penalty", ["l1", "l2"])
def test_l1_and_l2_minimisers_equal_scalar_minimisation(penalty):
    theta_star, h, lam = 2 * rng.normal(size=12), rng.uniform(0.2, 3, size=12), 0.9
    function = l1_minimiser if penalty == "l1" else l2_minimiser
    closed = function(theta_star, h, lam)
    for t_star, h_i, got in zip(theta_star, h, closed, strict=True):
        pen = (lambda t: lam * abs(t)) if penalty == "l1" else (lambda t: 0.5 * lam * t**2)
        ref = minimize_scalar(
            lambda t, t_star=t_star, h_i=h_i, pen=pen: 0.5 * h_i * (t - t_star) ** 2 + pen(t),
            bounds=(-abs(t_star) - 1, abs(t_star) + 1),
            method="bounded",
            options={"xatol": 1e-11},
        ).x
        assert abs(got - ref) < 1e-7
    if penalty == "l1":
        assert np.array_equal(closed == 0, np.abs(theta_star) <= lam / h)


def test_soft_threshold_values():
    assert np.array_equal(soft_threshold([-3.0, -0.5, 0.0, 0.5, 3.0], 1.0), [-2.0, 0.0, 0.0, 0.0, 2.0])
    assert np.array_equal(soft_threshold([2.0, -2.0], [1.0, 3.0]), [1.0, 0.0])


def test_ridge_risk_equals_a_direct_simulation_and_is_smallest_near_sigma2_over_u2():
    mus = np.array([0.5, 4.0, 40.0])
    risk = ridge_risk(mus, n_samples=15, dim=4, u=0.5, sigma=1.0, problems=30, rng=3)
    draw, direct = np.random.default_rng(3), np.zeros(3)
    for _ in range(30):
        X = draw.normal(size=(15, 4))
        w = 0.5 * draw.normal(size=4)
        y = X @ w + draw.normal(size=15)
        for i, mu in enumerate(mus):
            direct[i] += np.sum((np.linalg.solve(X.T @ X + mu * np.eye(4), X.T @ y) - w) ** 2) / 30
    assert np.allclose(risk, direct, rtol=1e-10)
    grid = np.logspace(-1, 2, 31)
    best = grid[ridge_risk(grid, u=0.5, sigma=1.0, problems=200, rng=0).argmin()]
    assert 2 <= best <= 8  # mu* = sigma^2 / u^2 = 4


def _brute_patience(losses, p):
    best = 0
    for epoch in range(len(losses)):
        best = min(range(epoch + 1), key=lambda e: (losses[e], e))  # the first epoch with the lowest loss
        if epoch - best >= p:
            return epoch, best
    return len(losses) - 1, best


def test_patience_stop_equals_a_brute_force():
    draw = np.random.default_rng(5)
    for _ in range(200):
        losses = np.round(np.cumsum(draw.normal(size=int(draw.integers(1, 40)))), 1)
        p = int(draw.integers(1, 8))
        assert tuple(patience_stop(losses, p)) == _brute_patience(losses, p)
    stop = patience_stop([5.0, 4.0, 3.0, 3.5, 3.2, 3.1, 2.0], patience=3)
    assert stop.stop == 5 and stop.best == 2


# ----------------------------------------------------------------------------- bad input

BAD_INPUT = [  # (call, error, message)
    (
        lambda: weight_decay_step(np.ones(3), np.ones(2), {}, 0.1, 0.1),
        ValueError,
        r"g must have shape (3,)",
    ),
    (lambda: weight_decay_step(np.ones(3), np.ones(3), {}, 0.0, 0.1), ValueError, "eta"),
    (lambda: weight_decay_step(np.ones(3), np.ones(3), {}, 0.1, -1.0), ValueError, "mu"),
    (lambda: adamw_step(np.ones(3), np.ones(3), {}, 0.1, 0.1, beta1=1.0), ValueError, "beta1"),
    (lambda: adamw_step(np.ones(3), np.ones(3), {}, 0.1, 0.1, eps=0), ValueError, "eps"),
    (lambda: adamw_step("abc", np.ones(3), {}, 0.1, 0.1), TypeError, "theta must be an array"),
    (lambda: weight_decay_minimiser(np.ones((2, 3)), np.ones(2), 0.1), ValueError, "symmetric square"),
    (
        lambda: weight_decay_minimiser(np.array([[1.0, 2.0], [0.0, 1.0]]), np.ones(2), 0.1),
        ValueError,
        "symmetric",
    ),
    (
        lambda: weight_decay_minimiser(-np.eye(2), np.ones(2), 0.1),
        ValueError,
        "positive semi-definite",
    ),
    (
        lambda: weight_decay_minimiser(np.eye(2), np.ones(3), 0.1),
        ValueError,
        r"theta_star must have shape (2,)",
    ),
    (lambda: weight_decay_minimiser(np.eye(2), np.ones(2), 0.0), ValueError, "mu"),
    (lambda: early_stopping_factors([1.0, -1.0], 0.1, 3), ValueError, "lams"),
    (lambda: early_stopping_factors([1.0], 0.1, 2.5), TypeError, "k must be an int"),
    (lambda: early_stopping_factors(np.ones((2, 2)), 0.1, 3), ValueError, "lams must have 1 axes"),
    (lambda: soft_threshold([1.0, 2.0], -1.0), ValueError, "t must be >= 0"),
    (lambda: l1_minimiser(np.ones(3), np.ones(2), 1.0), ValueError, r"h must have shape (3,)"),
    (lambda: l1_minimiser(np.ones(2), np.array([1.0, 0.0]), 1.0), ValueError, "positive curvatures"),
    (lambda: l2_minimiser(np.ones(2), np.ones(2), -0.5), ValueError, "lam"),
    (lambda: ridge_risk([-1.0, 1.0]), ValueError, "mus"),
    (lambda: ridge_risk([1.0], sigma=0.0), ValueError, "sigma"),
    (lambda: ridge_risk([0.0], n_samples=5, dim=8), ValueError, "n_samples < dim"),
    (lambda: ridge_risk([1.0], problems=0), ValueError, "problems"),
    (lambda: ridge_risk([1.0], rng="seed"), TypeError, "rng"),
    (lambda: patience_stop([1.0, 2.0], patience=0), ValueError, "patience"),
    (lambda: patience_stop([], patience=3), ValueError, "val_losses must"),
]


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
