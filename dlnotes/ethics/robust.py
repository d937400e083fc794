"""Section 11.4 of chapter 11 (notebook 04_robust_training), robust training and distributional
robustness: the worst-case logistic loss of a linear model in closed form, adversarial training of a linear
model solved exactly, and the near-worst shift of a Wasserstein ball. The adversarial training of networks is
`common.train_classifier` with an attack.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.optimize import minimize

from ..validation import (
    check_array,
    check_int,
    check_labels,
    check_matrix,
    check_number,
    check_positive,
    check_vector,
)


class LinearModel(NamedTuple):
    """A binary linear classifier :math:`\\mathrm{sign}(w^\\top x + b)`: weights w (d,) and bias b."""

    w: np.ndarray
    b: float


def _binary_data(w, b, X, y):
    w = check_vector(w, "w")
    b = check_number(b, "b")
    X = check_array(X, "X")
    if X.ndim not in (1, 2) or X.shape[-1] != len(w):
        raise ValueError(
            f"X must be a vector ({len(w)},) or a batch of rows (n, {len(w)}), got shape {X.shape}"
        )
    y = np.asarray(y)
    y = check_labels(y.reshape(-1), "y", 1 if X.ndim == 1 else len(X), values=(-1, 1))
    return w, b, np.atleast_2d(X), y


def robust_logistic_loss(w, b, X, y, eps: float) -> np.ndarray | float:
    """The worst-case logistic loss of a linear model over an ℓ∞ ball, in closed form:
    :math:`\\max_{\\lVert\\delta\\rVert_\\infty\\le\\epsilon}\\log(1+e^{-y(w^\\top(x+\\delta)+b)})
    = \\log(1+e^{-y(w^\\top x+b)+\\epsilon\\lVert w\\rVert_1})`, attained at :math:`\\delta=-\\epsilon y\\,\\mathrm{sign}(w)`.

    w (d,), b a number, X (d,) or (n, d), labels y ∈ {−1, +1} (a number or (n,)), ε ≥ 0 (ε = 0: the plain
    logistic loss); a float for one x, (n,) for a batch. No box constraint on x + δ (11.4).
    """
    w, b, X2, y = _binary_data(w, b, X, y)
    eps = check_number(eps, "eps", 0)
    z = -y * (X2 @ w + b) + eps * np.abs(w).sum()
    loss = np.logaddexp(0.0, z)  # log(1 + e^z) without overflow
    return float(loss[0]) if np.ndim(X) == 1 else loss


def fit_robust_logistic(X, y, eps: float, lam: float = 1e-3) -> LinearModel:
    """Adversarial training of a linear model, solved exactly: the minimiser of the mean robust logistic loss
    plus a small ridge term,
    :math:`\\frac1n\\sum_i\\log(1+e^{-y_i(w^\\top x_i+b)+\\epsilon\\lVert w\\rVert_1})+\\frac\\lambda2\\lVert w\\rVert_2^2`.

    The ℓ1 norm is made smooth by the split w = u − v, u, v ≥ 0 (L-BFGS-B with bounds); the problem is convex.
    X (n, d), y (n,) in {−1, +1}, ε ≥ 0, λ > 0 (keeps w finite on separable data) -> LinearModel(w, b) (11.4).
    """
    X = check_matrix(X, "X")
    y = check_labels(y, "y", len(X), values=(-1, 1))
    eps, lam = check_number(eps, "eps", 0), check_positive(lam, "lam")
    n, d = X.shape
    yX = y[:, None] * X

    def objective(theta):
        u, v, b = theta[:d], theta[d : 2 * d], theta[-1]
        w = u - v
        z = -(yX @ w) - y * b + eps * (u + v).sum()
        s = 0.5 * (1 + np.tanh(z / 2))  # the sigmoid of z, stable for large |z|
        g_w = -(s @ yX) / n + lam * w
        g_l1 = eps * s.mean()
        grad = np.concatenate([g_w + g_l1, -g_w + g_l1, [-(s @ y) / n]])
        return np.logaddexp(0.0, z).mean() + 0.5 * lam * w @ w, grad

    bounds = [(0, None)] * (2 * d) + [(None, None)]
    result = minimize(
        objective,
        np.zeros(2 * d + 1),
        jac=True,
        method="L-BFGS-B",
        bounds=bounds,
        options={"maxiter": 5000, "ftol": 1e-15, "gtol": 1e-10},
    )
    theta = result.x
    return LinearModel(theta[:d] - theta[d : 2 * d], float(theta[-1]))


class Shifted(NamedTuple):
    """A distribution Q on finitely many points: support X (m, d), labels y (m,), probabilities (m,), and the
    cost of the transport plan that makes it from the empirical distribution."""

    X: np.ndarray
    y: np.ndarray
    weights: np.ndarray
    cost: float


def w1_mass_shift(X, y, w, i: int, rho: float, kappa: float) -> Shifted:
    """The near-worst distribution of the W1 ball (ℓ∞ transport cost) around the empirical distribution
    of (X, y) for a linear model: mass κ of point i moves by :math:`(\\rho/\\kappa)` along
    :math:`-y_i\\,\\mathrm{sign}(w)`, the rest stays; the plan costs :math:`\\kappa\\cdot\\rho/\\kappa=\\rho`.

    X (n, d), y (n,) in {−1, +1}, w (d,), 0 < κ ≤ 1/n (the mass point i has) -> Shifted with n + 1
    support points (the moved copy last) (11.4).
    """
    X = check_matrix(X, "X")
    n = len(X)
    y = check_labels(y, "y", n, values=(-1, 1))
    w = check_vector(w, "w", X.shape[1])
    i = check_int(i, "i", 0, n - 1)
    rho = check_number(rho, "rho", 0)
    kappa = check_number(kappa, "kappa", 0, 1 / n, low_open=True)
    move = -(rho / kappa) * y[i] * np.sign(w)
    weights = np.full(n + 1, 1 / n)
    weights[i] -= kappa
    weights[-1] = kappa
    cost = kappa * float(np.abs(move).max())
    return Shifted(np.vstack([X, X[i] + move]), np.append(y, y[i]), weights, cost)
