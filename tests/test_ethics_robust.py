"""dlnotes.ethics.robust (11.4): the robust logistic loss against a brute-force maximum over the corners of the
ℓ∞ box and against PGD on the float64 linear model, the robust logistic regression against scikit-learn (ε = 0)
and its optimality conditions (ε > 0), and the W1 mass shift against an optimal-transport linear program."""

import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy.optimize import linprog
from sklearn.linear_model import LogisticRegression

from dlnotes.ethics.common import linear_two_class, pgd
from dlnotes.ethics.robust import fit_robust_logistic, robust_logistic_loss, w1_mass_shift

from conftest import bad_input_test

rng = np.random.default_rng(114)


def test_robust_logistic_loss_is_the_maximum_over_the_corners_of_the_box():
    # the logistic loss is convex in delta, so its maximum over the box |delta|_inf <= eps is at a corner
    d = 4
    corners = np.array(list(itertools.product([-1.0, 1.0], repeat=d)))
    for _ in range(5):
        w, b, eps = rng.normal(size=d), float(rng.normal()), float(rng.uniform(0.01, 0.5))
        X, y = rng.normal(size=(6, d)), rng.choice([-1, 1], size=6)
        brute = [
            np.max(np.log1p(np.exp(-y_i * ((x + eps * corners) @ w + b))))
            for x, y_i in zip(X, y, strict=True)
        ]
        assert np.allclose(robust_logistic_loss(w, b, X, y, eps), brute, rtol=1e-12)
        assert robust_logistic_loss(w, b, X[0], y[0], eps) == pytest.approx(brute[0], rel=1e-12)


def test_robust_logistic_loss_at_eps_0_is_torch_logistic_loss_and_does_not_overflow():
    w, b = rng.normal(size=5), 0.4
    X, y = rng.normal(size=(7, 5)), rng.choice([-1, 1], size=7)
    reference = F.binary_cross_entropy_with_logits(
        torch.tensor(X @ w + b), torch.tensor((y + 1) / 2), reduction="none"
    ).numpy()
    assert np.allclose(robust_logistic_loss(w, b, X, y, 0.0), reference, rtol=1e-12)
    big = robust_logistic_loss(1e3 * w, b, X, y, 1.0)  # log(1 + e^z) = z + log(1 + e^-z) ~ z for large z
    z = -y * (X @ (1e3 * w) + b) + 1e3 * np.abs(w).sum()
    assert np.all(np.isfinite(big)) and np.allclose(big[z > 50], z[z > 50], rtol=1e-12)


def test_linear_two_class_cross_entropy_is_the_logistic_loss_and_pgd_finds_the_closed_form():
    w, b, eps = rng.normal(size=6), -0.2, 0.15
    X, y = rng.uniform(size=(9, 6)), rng.choice([-1, 1], size=9)
    labels = (y + 1) // 2
    model = linear_two_class(w, b)
    assert next(model.parameters()).dtype == torch.float64
    ce = F.cross_entropy(model(torch.tensor(X)), torch.tensor(labels), reduction="none").detach().numpy()
    assert np.allclose(ce, robust_logistic_loss(w, b, X, y, 0.0), rtol=1e-12)
    X_adv = pgd(model, X, labels, eps, eps / 4, 10, clip=False, rng=0)
    ce_adv = (
        F.cross_entropy(model(torch.tensor(X_adv)), torch.tensor(labels), reduction="none").detach().numpy()
    )
    assert np.allclose(ce_adv, robust_logistic_loss(w, b, X, y, eps), rtol=1e-10)


def _separable_ish(n=120, d=5):
    y = rng.choice([-1, 1], size=n)
    X = y[:, None] * rng.uniform(0.0, 0.6, size=d) + rng.normal(size=(n, d))
    return X, y


def test_fit_robust_logistic_at_eps_0_is_ridge_logistic_regression():
    X, y = _separable_ish()
    lam = 1e-2
    ours = fit_robust_logistic(X, y, 0.0, lam=lam)
    sk = LogisticRegression(C=1 / (len(X) * lam), tol=1e-12, max_iter=10_000).fit(X, y)
    assert np.allclose(ours.w, sk.coef_[0], atol=1e-5)
    assert ours.b == pytest.approx(sk.intercept_[0], abs=1e-5)


def test_fit_robust_logistic_meets_the_optimality_conditions_and_beats_nearby_points():
    X, y = _separable_ish()
    eps, lam = 0.3, 1e-2
    fit = fit_robust_logistic(X, y, eps, lam=lam)
    w, b = fit
    # subgradient conditions of mean softplus(-y(w^T x + b) + eps ||w||_1) + lam/2 ||w||^2
    s = 1 / (1 + np.exp(-(-y * (X @ w + b) + eps * np.abs(w).sum())))
    g = -(s * y) @ X / len(X) + lam * w
    nonzero = np.abs(w) > 1e-8
    assert (~nonzero).any() and nonzero.any()  # the l1 term has set some weights exactly to 0
    assert np.allclose(g[nonzero] + eps * s.mean() * np.sign(w[nonzero]), 0, atol=1e-6)
    assert np.all(np.abs(g[~nonzero]) <= eps * s.mean() + 1e-6)
    assert abs(np.mean(s * y)) < 1e-6

    def objective(w_, b_):
        return robust_logistic_loss(w_, b_, X, y, eps).mean() + lam / 2 * w_ @ w_

    best = objective(w, b)
    for _ in range(50):  # convex problem: no nearby point is better
        step = 1e-3 * rng.normal(size=len(w) + 1)
        assert objective(w + step[:-1], b + step[-1]) >= best - 1e-12


def test_w1_mass_shift_costs_rho_and_no_plan_is_cheaper_than_it_claims():
    n, d, rho, kappa = 6, 3, 0.2, 0.05
    X, y, w = rng.normal(size=(n, d)), rng.choice([-1, 1], size=n), rng.normal(size=d)
    shift = w1_mass_shift(X, y, w, 2, rho, kappa)
    assert shift.weights.sum() == pytest.approx(1.0) and shift.weights.min() >= 0
    assert shift.cost == pytest.approx(rho, rel=1e-12)
    assert np.allclose(shift.X[-1], X[2] - rho / kappa * y[2] * np.sign(w)) and shift.y[-1] == y[2]
    # W1 with the l_inf cost between the empirical distribution and Q, by the transport linear program
    m = len(shift.X)
    cost = np.abs(X[:, None, :] - shift.X[None, :, :]).max(axis=2).ravel()
    rows = np.kron(np.eye(n), np.ones(m))  # mass leaving each source point
    cols = np.kron(np.ones(n), np.eye(m))  # mass arriving at each point of Q
    plan = linprog(cost, A_eq=np.vstack([rows, cols]), b_eq=np.append(np.full(n, 1 / n), shift.weights))
    assert plan.status == 0 and plan.fun <= shift.cost + 1e-9
    # the risk under Q is within kappa log(1 + e^{m_i}) of the bound clean + rho ||w||_1, and below it
    b = 0.1
    losses = robust_logistic_loss(w, b, shift.X, shift.y, 0.0)
    bound = robust_logistic_loss(w, b, X, y, 0.0).mean() + rho * np.abs(w).sum()
    margin = y[2] * (X[2] @ w + b)
    assert bound - kappa * np.logaddexp(0, margin) - 1e-12 <= shift.weights @ losses <= bound + 1e-12


BAD_INPUT = [  # (call, error, message)
    (lambda: robust_logistic_loss(np.ones(3), 0.0, np.ones((2, 4)), [1, -1], 0.1), ValueError, "X must be a vector (3,) or a batch of rows (n, 3)"),
    (lambda: robust_logistic_loss(np.ones(3), 0.0, np.ones((2, 3)), [1, 0], 0.1), ValueError, "y must hold labels in [-1, 1]"),
    (lambda: robust_logistic_loss(np.ones(3), 0.0, np.ones((2, 3)), [1, -1], -0.1), ValueError, "eps must be a finite number in [0, inf)"),
    (lambda: robust_logistic_loss(np.ones(3), "b", np.ones(3), 1, 0.1), TypeError, "b must be a real number"),
    (lambda: fit_robust_logistic(np.ones((3, 2)), [1, -1, 1], 0.1, lam=0.0), ValueError, "lam must be a finite number in (0, inf)"),
    (lambda: fit_robust_logistic(np.ones((3, 2)), [1, -1], 0.1), ValueError, "y must be a non-empty 1-D array of 3 labels"),
    (lambda: linear_two_class(np.ones((2, 2)), 0.0), ValueError, "w must"),
    (lambda: w1_mass_shift(np.ones((4, 2)), [1, -1, 1, 1], np.ones(2), 0, 0.1, 0.5), ValueError, "kappa must be a finite number in (0, 0.25]"),
    (lambda: w1_mass_shift(np.ones((4, 2)), [1, -1, 1, 1], np.ones(2), 4, 0.1, 0.1), ValueError, "i must be an int in [0, 3]"),
    (lambda: w1_mass_shift(np.ones((4, 2)), [1, -1, 1, 1], np.ones(3), 0, 0.1, 0.1), ValueError, "w must"),
]  # fmt: skip


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
