"""Sections 8.2–8.3 (notebook 02_weight_decay): the weight-decay step and AdamW, shrinkage along the Hessian's
eigenvectors, early stopping as its counterpart, L1 against L2, the risk of ridge regression, and early
stopping with patience.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..training import Step
from ..validation import (
    check_array,
    check_int,
    check_matrix,
    check_number,
    check_positive,
    check_rng,
    check_vector,
)


def _decay_arguments(theta, g, eta, mu) -> tuple[np.ndarray, np.ndarray, float, float]:
    theta = check_array(theta, "theta")
    g = check_array(g, "g", theta.shape)
    return theta, g, check_positive(eta, "eta"), check_number(mu, "mu", 0)


def weight_decay_step(theta, g, state: dict, eta: float, mu: float) -> Step:
    """One gradient step on ``R(theta) + mu/2 ||theta||^2`` with ``g = grad R(theta)``: the multiplicative
    shrink ``theta <- (1 - eta mu) theta - eta g`` (torch's ``SGD(weight_decay=mu)`` without momentum).
    The step keeps no state: `state` is returned as it came, because every optimizer step of the book has the
    signature ``step(theta, g, state, **hyper) -> Step(theta, state)`` that `run_optimizer` drives (`adamw_step`,
    beside it, does keep its moments there)."""
    theta, g, eta, mu = _decay_arguments(theta, g, eta, mu)
    return Step((1 - eta * mu) * theta - eta * g, state)


def adamw_step(
    theta, g, state: dict, eta: float, mu: float, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8
) -> Step:
    """AdamW (decoupled weight decay): Adam's moments of the loss gradient g alone,
    ``m = beta1 m + (1 - beta1) g``, ``v = beta2 v + (1 - beta2) g^2``, ``m_hat = m / (1 - beta1^t)``,
    ``v_hat = v / (1 - beta2^t)``, and ``theta <- (1 - eta mu) theta - eta m_hat / (sqrt(v_hat) + eps)``
    (``torch.optim.AdamW(lr=eta, weight_decay=mu)``). State: ``t``, ``m``, ``v``."""
    theta, g, eta, mu = _decay_arguments(theta, g, eta, mu)
    beta1 = check_number(beta1, "beta1", 0, 1, high_open=True)
    beta2 = check_number(beta2, "beta2", 0, 1, high_open=True)
    eps = check_positive(eps, "eps")
    state = dict(state)
    t = state["t"] = state.get("t", 0) + 1
    state["m"] = beta1 * state.get("m", 0.0) + (1 - beta1) * g
    state["v"] = beta2 * state.get("v", 0.0) + (1 - beta2) * g**2
    m_hat, v_hat = state["m"] / (1 - beta1**t), state["v"] / (1 - beta2**t)
    return Step((1 - eta * mu) * theta - eta * m_hat / (np.sqrt(v_hat) + eps), state)


def _check_psd(H, name: str = "H") -> np.ndarray:
    H = check_matrix(H, name)
    if H.shape[0] != H.shape[1] or not np.allclose(H, H.T, atol=1e-10 * max(1.0, np.abs(H).max())):
        raise ValueError(f"{name} must be a symmetric square matrix (a Hessian), got shape {H.shape}")
    return (H + H.T) / 2


class Shrinkage(NamedTuple):
    theta_mu: np.ndarray  # the minimiser with weight decay, Q diag(lambda / (lambda + mu)) Q^T theta*
    lams: np.ndarray  # eigenvalues lambda_i of H, ascending
    Q: np.ndarray  # eigenvectors, one per column
    factors: np.ndarray  # lambda_i / (lambda_i + mu): how much of theta* survives along eigenvector i


def weight_decay_minimiser(H, theta_star, mu: float) -> Shrinkage:
    """The minimiser of the local quadratic with weight decay,
    ``R(theta*) + (theta - theta*)^T H (theta - theta*) / 2 + mu/2 ||theta||^2``:
    ``theta*_mu = (H + mu I)^{-1} H theta* = Q diag(lambda_i / (lambda_i + mu)) Q^T theta*`` with
    ``H = Q Lambda Q^T`` symmetric positive semi-definite and ``mu > 0``."""
    H = _check_psd(H)
    theta_star = check_vector(theta_star, "theta_star", len(H))
    mu = check_positive(mu, "mu")
    lams, Q = np.linalg.eigh(H)
    if lams.min() < -1e-10 * max(1.0, np.abs(lams).max()):
        raise ValueError(f"H must be positive semi-definite, got the eigenvalue {lams.min():.3g}")
    lams = np.clip(lams, 0, None)
    factors = lams / (lams + mu)
    return Shrinkage(Q @ (factors * (Q.T @ theta_star)), lams, Q, factors)


def early_stopping_factors(lams, eta: float, k: int) -> np.ndarray:
    """How much of ``theta*`` gradient descent from ``theta_0 = 0`` has reached after k steps along each
    eigenvector of a quadratic with Hessian eigenvalues ``lams``:
    ``Q^T theta_k = [I - (I - eta Lambda)^k] Q^T theta*``, so the factors are ``1 - (1 - eta lambda_i)^k``
    (compare ``lambda_i / (lambda_i + mu)`` for ``k ~ 1/(eta mu)``)."""
    lams = check_array(lams, "lams", ndim=1)
    if (lams < 0).any():
        raise ValueError(f"lams must be eigenvalues of a PSD Hessian (>= 0), got {lams.min():.3g}")
    eta = check_positive(eta, "eta")
    k = check_int(k, "k", 0)
    return 1 - (1 - eta * lams) ** k


def _check_diagonal_problem(theta_star, h, lam) -> tuple[np.ndarray, np.ndarray, float]:
    theta_star = check_array(theta_star, "theta_star", ndim=1)
    h = check_array(h, "h", theta_star.shape)
    if (h <= 0).any():
        raise ValueError(f"h must hold positive curvatures h_i > 0, got {h.min():.3g}")
    return theta_star, h, check_number(lam, "lam", 0)


def soft_threshold(b, t) -> np.ndarray:
    """``sgn(b) max(0, |b| - t)`` elementwise, for thresholds ``t >= 0`` (a number or an array like b)."""
    b = check_array(b, "b")
    t = check_array(t, "t")
    if (t < 0).any():
        raise ValueError(f"t must be >= 0, got {t.min():.3g}")
    return np.sign(b) * np.maximum(0.0, np.abs(b) - t)


def l1_minimiser(theta_star, h, lam: float) -> np.ndarray:
    """The minimiser of ``sum_i h_i (theta_i - theta*_i)^2 / 2 + lam ||theta||_1`` (a diagonal Hessian
    ``diag(h)``, h_i > 0): soft thresholding ``theta_i = sgn(theta*_i) max(0, |theta*_i| - lam / h_i)``."""
    theta_star, h, lam = _check_diagonal_problem(theta_star, h, lam)
    return soft_threshold(theta_star, lam / h)


def l2_minimiser(theta_star, h, lam: float) -> np.ndarray:
    """The minimiser of ``sum_i h_i (theta_i - theta*_i)^2 / 2 + lam/2 ||theta||_2^2``:
    ``theta_i = h_i / (h_i + lam) theta*_i`` (shrunk, never exactly zero)."""
    theta_star, h, lam = _check_diagonal_problem(theta_star, h, lam)
    return h / (h + lam) * theta_star


def ridge_risk(
    mus, n_samples: int = 50, dim: int = 20, u: float = 1.0, sigma: float = 1.0, problems: int = 200, rng=None
) -> np.ndarray:
    """The mean squared estimation error ``||w_hat_mu - w||^2`` of ridge regression for each ``mu`` in `mus`,
    averaged over `problems` simulated problems ``y = X w + noise``: X (n_samples, dim) with N(0, 1) entries,
    ``w ~ N(0, u^2 I)``, noise ``N(0, sigma^2 I)``, ``w_hat_mu = (X^T X + mu I)^{-1} X^T y`` (the minimiser of
    the summed loss ``||y - X w||^2 / 2 + mu/2 ||w||^2``). Theory: the error is smallest at
    ``mu* = sigma^2 / u^2``."""
    mus = check_array(mus, "mus", ndim=1)
    if (mus < 0).any():
        raise ValueError(f"mus must hold strengths mu >= 0, got {mus.min():.3g}")
    n_samples, dim = check_int(n_samples, "n_samples", 1), check_int(dim, "dim", 1)
    u, sigma = check_positive(u, "u"), check_positive(sigma, "sigma")
    problems, rng = check_int(problems, "problems", 1), check_rng(rng)
    if n_samples < dim and (mus == 0).any():
        raise ValueError(
            f"mus must be > 0 when n_samples < dim (X^T X is singular), got n_samples = {n_samples}"
        )
    errors = np.zeros(len(mus))
    for _ in range(problems):
        X = rng.normal(size=(n_samples, dim))
        w = u * rng.normal(size=dim)
        y = X @ w + sigma * rng.normal(size=n_samples)
        s, V = np.linalg.eigh(X.T @ X)  # w_hat_mu = V diag(1 / (s + mu)) V^T X^T y
        b = V.T @ (X.T @ y)
        w_hats = (b[None, :] / (s[None, :] + mus[:, None])) @ V.T  # (len(mus), dim)
        errors += ((w_hats - w) ** 2).sum(axis=1)
    return errors / problems


class EarlyStop(NamedTuple):
    stop: int  # the epoch at which training stops (the last epoch if patience never runs out)
    best: int  # the epoch of the checkpoint kept: the lowest validation loss up to `stop`


def patience_stop(val_losses, patience: int) -> EarlyStop:
    """Early stopping with patience p on a recorded validation curve (epochs 0, 1, ...): the best epoch is the
    one with the lowest validation loss so far (a strict improvement moves it); training stops at the first
    epoch that is p epochs after the best one, and the best checkpoint is kept."""
    val_losses = check_array(val_losses, "val_losses", ndim=1)
    patience = check_int(patience, "patience", 1)
    best = 0
    for epoch in range(1, len(val_losses)):
        if val_losses[epoch] < val_losses[best]:
            best = epoch
        elif epoch - best >= patience:
            return EarlyStop(epoch, best)
    return EarlyStop(len(val_losses) - 1, best)
