"""Sections 8.7 and 8.9 (notebook 06_residual_reparam): the norm of signals through scaled residual stacks, and
gradients of Gaussian expectations by the reparameterisation (pathwise) and score-function estimators.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from ..validation import (
    check_callable,
    check_int,
    check_number,
    check_positive,
    check_rng,
)


def residual_stack_norms(
    d: int, L: int, alpha: float, *, n_nets: int = 1, dense: bool = False, rng=None
) -> np.ndarray:
    """Squared norm ratios ||y_k||^2 / ||y_0||^2, k = 0..L, of random linear residual stacks (n_nets, L + 1).

    y_k = y_{k-1} + alpha Theta_k y_{k-1} with Theta_k (d, d) i.i.d. N(0, 1/d), fresh per layer, and y_0 a
    Gaussian vector; in expectation ||y_L||^2 = (1 + alpha^2)^L ||y_0||^2. For one input Theta_k y is exactly
    N(0, ||y||^2 I / d), so by default that vector is drawn instead of the matrix (O(L d) per net);
    ``dense=True`` draws the matrices (O(L d^2), for comparison).
    """
    d = check_int(d, "d", 1)
    L = check_int(L, "L", 1)
    alpha = check_number(alpha, "alpha")
    n_nets = check_int(n_nets, "n_nets", 1)
    if not isinstance(dense, bool):
        raise TypeError(f"dense must be True or False, got {dense!r}")
    rng = check_rng(rng)
    ratios = np.empty((n_nets, L + 1))
    for net in range(n_nets):
        y = rng.standard_normal(d)
        start = y @ y
        ratios[net, 0] = 1.0
        for k in range(1, L + 1):
            if dense:
                branch = (rng.standard_normal((d, d)) / math.sqrt(d)) @ y
            else:
                branch = rng.standard_normal(d) * math.sqrt(y @ y / d)
            y = y + alpha * branch
            ratios[net, k] = (y @ y) / start
    return ratios


class GradEstimate(NamedTuple):
    g_mu: float  # Monte-Carlo estimate of d/dmu E[f(z)]
    g_var: float  # Monte-Carlo estimate of d/dsigma^2 E[f(z)]
    se_mu: float  # standard error of g_mu (sample standard deviation / sqrt(n))
    se_var: float  # standard error of g_var


def _estimate(samples_mu: np.ndarray, samples_var: np.ndarray) -> GradEstimate:
    n = len(samples_mu)
    return GradEstimate(
        float(samples_mu.mean()),
        float(samples_var.mean()),
        float(samples_mu.std(ddof=1) / math.sqrt(n)),
        float(samples_var.std(ddof=1) / math.sqrt(n)),
    )


def _gaussian_args(mu, sigma, n, rng):
    mu = check_number(mu, "mu")
    sigma = check_positive(sigma, "sigma")
    n = check_int(n, "n", 2)
    return mu, sigma, n, check_rng(rng)


def pathwise_grad(df: Callable, mu: float, sigma: float, *, n: int = 100_000, rng=None) -> GradEstimate:
    """The reparameterisation (pathwise) estimates of the gradients of E[f(z)], z ~ N(mu, sigma^2), 1-D.

    z = mu + sigma xi, xi ~ N(0, 1), so d/dmu E[f(z)] = E[f'(z)] and d/dsigma E[f(z)] = E[f'(z) xi], hence
    d/dsigma^2 E[f(z)] = E[f'(z) xi] / (2 sigma) (= E[f''(z)] / 2 by Stein's lemma). `df` is f' (vectorised);
    n samples.
    """
    df = check_callable(df, "df")
    mu, sigma, n, rng = _gaussian_args(mu, sigma, n, rng)
    xi = rng.standard_normal(n)
    slope = np.asarray(df(mu + sigma * xi), dtype=float)
    return _estimate(slope, slope * xi / (2 * sigma))


def score_function_grad(f: Callable, mu: float, sigma: float, *, n: int = 100_000, rng=None) -> GradEstimate:
    """The score-function (log-derivative, REINFORCE) estimates of the gradients of E[f(z)], z ~ N(mu, sigma^2).

    d/dtheta E[f(z)] = E[f(z) d/dtheta log p(z)] with d/dmu log p = (z - mu)/sigma^2 and
    d/dsigma^2 log p = ((z - mu)^2/sigma^2 - 1) / (2 sigma^2). Needs only f, not f'; `f` is vectorised.
    """
    f = check_callable(f, "f")
    mu, sigma, n, rng = _gaussian_args(mu, sigma, n, rng)
    xi = rng.standard_normal(n)
    value = np.asarray(f(mu + sigma * xi), dtype=float)
    return _estimate(value * xi / sigma, value * (xi**2 - 1) / (2 * sigma**2))
