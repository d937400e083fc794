"""Section 10.4 of chapter 10, autoregressive models (notebook 05_autoregressive): the Bernoulli MADE on binary
images (trained by `common.fit_density`), chain-rule sampling of a discrete joint table, and the Gaussian AR(K)
model: sampling, least squares, likelihood.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F

from ..training import to_numpy
from ..validation import (
    check_array,
    check_int,
    check_positive,
    check_rng,
    check_vector,
)
from .common import MADE


class BernoulliMADE(MADE):
    """An autoregressive model of binary vectors: :math:`p(x) = \\prod_i \\mathrm{Bern}(x_i;
    \\sigma(\\ell_i(x_{<i})))` with the logits :math:`\\ell` of a one-output MADE (Germain et al., 2015) (10.4)."""

    def __init__(self, d: int, hidden: tuple[int, ...] = (128,)):
        super().__init__(d, hidden, n_params=1, activation="relu")

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """The logits (n, d); entry i depends on :math:`x_{<i}` only."""
        return self(x)[:, 0]

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        """:math:`\\sum_i x_i\\log\\sigma(\\ell_i) + (1-x_i)\\log(1-\\sigma(\\ell_i))` (n,), in nats."""
        return -F.binary_cross_entropy_with_logits(self.logits(x), x, reduction="none").sum(dim=1)

    @torch.no_grad()
    def sample(self, n: int, rng=None) -> np.ndarray:
        """n binary vectors (n, d) drawn pixel by pixel: d passes, pass i draws :math:`x_i` given :math:`x_{<i}`."""
        rng = check_rng(rng)
        like = next(self.parameters())
        u = torch.as_tensor(rng.random((check_int(n, "n", 1), self.d)), dtype=like.dtype, device=like.device)
        x = torch.zeros_like(u)
        for i in range(self.d):
            x[:, i] = (u[:, i] < torch.sigmoid(self.logits(x)[:, i])).to(x.dtype)
        return to_numpy(x)


def sample_discrete_chain(P, n: int, rng=None) -> np.ndarray:
    """n draws (n, m) from a joint table P (k_1, ..., k_m) by the chain rule: :math:`x_1\\sim p(x_1)`, then
    :math:`x_i\\sim p(x_i\\mid x_{<i}) = p(x_{\\le i}) / p(x_{<i})` with the marginals of P (10.4)."""
    P = check_array(P, "P")
    if P.min() < 0 or abs(P.sum() - 1) > 1e-9:
        raise ValueError(
            f"P must be non-negative and sum to 1, got minimum {P.min():.3g} and sum {P.sum():.6g}"
        )
    n, rng = check_int(n, "n", 1), check_rng(rng)
    m = P.ndim
    X = np.zeros((n, m), dtype=np.int64)
    for i in range(m):
        marginal = P.sum(axis=tuple(range(i + 1, m)))  # p(x_1..x_i)
        joint = marginal[tuple(X[:, :i].T)] if i else np.broadcast_to(marginal, (n, P.shape[0]))
        # joint (n, k_i): p(x_<i, x_i = .) for every draw
        cdf = np.cumsum(joint / joint.sum(axis=1, keepdims=True), axis=1)
        X[:, i] = np.minimum((rng.random((n, 1)) > cdf).sum(axis=1), P.shape[i] - 1)
    return X


class ARFit(NamedTuple):
    theta: np.ndarray  # (K,) the coefficients, theta[k-1] multiplies x_{i-k}
    sigma2: float  # the variance of the innovations


def _check_ar(theta, sigma2) -> tuple[np.ndarray, float]:
    return check_vector(theta, "theta"), check_positive(sigma2, "sigma2")


def ar_sample(theta, sigma2: float, n: int, rng=None, burn_in: int = 0) -> np.ndarray:
    """A path (n,) of the Gaussian AR(K) process :math:`x_i = \\sum_{k\\le K}\\theta_kx_{i-k} + \\sigma\\epsilon_i`,
    started from :math:`x_{\\le 0} = 0`; the first `burn_in` steps are dropped (10.4)."""
    theta, sigma2 = _check_ar(theta, sigma2)
    n, burn_in = check_int(n, "n", 1), check_int(burn_in, "burn_in", 0)
    K = theta.size
    noise = math.sqrt(sigma2) * check_rng(rng).standard_normal(n + burn_in)
    x = np.zeros(K + n + burn_in)
    for i in range(n + burn_in):
        x[K + i] = theta @ x[K + i - 1 : i - 1 if i else None : -1] + noise[i]  # x_{i-1}, ..., x_{i-K}
    return x[K + burn_in :]


def _ar_design(x: np.ndarray, K: int) -> np.ndarray:
    """The lagged inputs (n, K): row i is (x_{i-1}, ..., x_{i-K}) with x_{<0} = 0."""
    padded = np.concatenate([np.zeros(K), x])
    return np.stack([padded[K - k : K - k + x.size] for k in range(1, K + 1)], axis=1)


def fit_ar(x, K: int) -> ARFit:
    """Least squares for an AR(K) model of a path x (n,): :math:`\\hat\\theta = \\arg\\min_\\theta
    \\sum_{i>K}(x_i - \\sum_k\\theta_kx_{i-k})^2`, :math:`\\hat\\sigma^2` = the mean squared residual (10.4)."""
    x = check_vector(x, "x")
    K = check_int(K, "K", 1)
    if x.size <= 2 * K:
        raise ValueError(f"x must have more than 2 K = {2 * K} values to fit an AR({K}) model, got {x.size}")
    A, y = _ar_design(x, K)[K:], x[K:]
    theta = np.linalg.lstsq(A, y, rcond=None)[0]
    return ARFit(theta, float(np.mean((y - A @ theta) ** 2)))


def ar_log_likelihood(x, theta, sigma2: float) -> float:
    """:math:`\\sum_{i=1}^n\\log\\mathcal N(x_i; \\sum_{k\\le K}\\theta_kx_{i-k}, \\sigma^2)` for a path x (n,),
    with :math:`x_{\\le 0} = 0` (10.4)."""
    x = check_vector(x, "x")
    theta, sigma2 = _check_ar(theta, sigma2)
    residual = x - _ar_design(x, theta.size) @ theta
    return float(-0.5 * np.sum(residual**2) / sigma2 - 0.5 * x.size * math.log(2 * math.pi * sigma2))
