"""Chapter 10 — generative models: linear latent-variable models (PCA, factor analysis, probabilistic PCA),
variational autoencoders, normalising flows, autoregressive models, generative adversarial networks and
denoising diffusion.

Conventions: a data set is X (n, d), one example per row; Gaussians are given by a mean and a covariance
matrix (variances, not standard deviations); a diffusion `Schedule` is indexed by the step t = 0..T with
t = 0 the data (beta[0] = 0, alpha_bar[0] = 1), so that ``alpha_bar[t]`` is the book's
:math:`\\bar\\alpha_t`; a noise predictor is a function ``eps_fn(x, t)`` of a batch x (n, d) and one step t
that returns (n, d).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from scipy.special import logsumexp

from .validation import (
    check_array,
    check_callable,
    check_choice,
    check_int,
    check_number,
    check_rng,
    check_vector,
)

# ----------------------------------------------------------------------------- tools used by several sections


def _check_cov(cov, name: str, d: int) -> np.ndarray:
    cov = check_array(cov, name, (d, d))
    if not np.allclose(cov, cov.T):
        raise ValueError(f"{name} must be a symmetric covariance matrix ({d}, {d})")
    if np.linalg.eigvalsh(cov).min() <= 0:
        raise ValueError(
            f"{name} must be positive definite, its smallest eigenvalue is {np.linalg.eigvalsh(cov).min():.3g}"
        )
    return cov


def gauss_kl(mu0, cov0, mu1, cov1) -> float:
    """:math:`\\mathrm{KL}(\\mathcal N(\\mu_0,\\Sigma_0)\\,\\Vert\\,\\mathcal N(\\mu_1,\\Sigma_1))
    = \\frac12[\\ln\\frac{|\\Sigma_1|}{|\\Sigma_0|} - d + \\mathrm{tr}\\,\\Sigma_1^{-1}\\Sigma_0
    + (\\mu_1-\\mu_0)^\\top\\Sigma_1^{-1}(\\mu_1-\\mu_0)]` in nats, for means (d,) and covariances (d, d)
    (10.2, 10.6)."""
    mu0 = check_vector(mu0, "mu0")
    d = mu0.size
    mu1 = check_vector(mu1, "mu1", d)
    cov0, cov1 = _check_cov(cov0, "cov0", d), _check_cov(cov1, "cov1", d)
    delta = mu1 - mu0
    logdet0, logdet1 = np.linalg.slogdet(cov0)[1], np.linalg.slogdet(cov1)[1]
    trace = np.trace(np.linalg.solve(cov1, cov0))
    return float(0.5 * (logdet1 - logdet0 - d + trace + delta @ np.linalg.solve(cov1, delta)))


class GaussianMixture(NamedTuple):
    weights: np.ndarray  # (K,) mixing weights, summing to 1
    means: np.ndarray  # (K, d)
    covs: np.ndarray  # (K, d, d)


def gaussian_mixture(weights, means, covs) -> GaussianMixture:
    """A Gaussian mixture :math:`\\sum_k \\pi_k\\,\\mathcal N(m_k, S_k)`, validated: weights (K,) positive and
    summing to 1, means (K, d), covariances (K, d, d) symmetric positive definite."""
    weights = check_vector(weights, "weights")
    if np.any(weights <= 0) or abs(weights.sum() - 1) > 1e-9:
        raise ValueError(f"weights must be positive and sum to 1, got {weights}")
    K = weights.size
    means = check_array(means, "means", (K, None))
    d = means.shape[1]
    covs = check_array(covs, "covs", (K, d, d))
    for k in range(K):
        _check_cov(covs[k], f"covs[{k}]", d)
    return GaussianMixture(weights, means, covs)


def mixture_sample(gmm: GaussianMixture, n: int, rng=None) -> tuple[np.ndarray, np.ndarray]:
    """n draws from a `GaussianMixture`: the points (n, d) and the component of each (n,)."""
    n = check_int(n, "n", 1)
    rng = check_rng(rng)
    component = rng.choice(gmm.weights.size, size=n, p=gmm.weights)
    L = np.linalg.cholesky(gmm.covs)  # (K, d, d)
    noise = rng.standard_normal((n, gmm.means.shape[1]))
    return gmm.means[component] + np.einsum("nij,nj->ni", L[component], noise), component


def _mixture_responsibilities(gmm: GaussianMixture, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """log p(x) (n,) and the responsibilities r[i, k] = p(k | x_i) (n, K)."""
    diff = X[:, None, :] - gmm.means[None]  # (n, K, d)
    prec = np.linalg.inv(gmm.covs)
    maha = np.einsum("nki,kij,nkj->nk", diff, prec, diff)
    logdet = np.linalg.slogdet(gmm.covs)[1]
    d = X.shape[1]
    log_joint = np.log(gmm.weights) - 0.5 * (maha + logdet + d * np.log(2 * np.pi))  # (n, K)
    log_px = logsumexp(log_joint, axis=1)
    return log_px, np.exp(log_joint - log_px[:, None])


def mixture_log_prob(gmm: GaussianMixture, X) -> np.ndarray:
    """:math:`\\log\\sum_k\\pi_k\\mathcal N(x; m_k, S_k)` for each row of X (n, d), computed with log-sum-exp."""
    X = check_array(X, "X", (None, gmm.means.shape[1]))
    return _mixture_responsibilities(gmm, X)[0]


# ----------------------------------------------------------------------------- diffusion: schedule, forward process, samplers


class Schedule(NamedTuple):
    beta: np.ndarray  # (T + 1,) beta_t, with beta[0] = 0 (t = 0 is the data)
    alpha: np.ndarray  # (T + 1,) alpha_t = 1 - beta_t
    alpha_bar: np.ndarray  # (T + 1,) alpha_bar_t = prod_{s <= t} alpha_s, alpha_bar[0] = 1

    @property
    def T(self) -> int:
        return self.beta.size - 1


def noise_schedule(
    T: int = 1000, kind: str = "linear", beta_1: float = 1e-4, beta_T: float = 0.02, s: float = 0.008
):
    """The noise schedule of a diffusion model with T steps (10.6), as a `Schedule` indexed t = 0..T.

    ``"linear"``: :math:`\\beta_t` from beta_1 to beta_T in equal steps (Ho et al.).
    ``"cosine"``: :math:`\\bar\\alpha_t = f(t)/f(0)`, :math:`f(t) = \\cos^2(\\frac{t/T + s}{1 + s}\\frac\\pi2)`, with
    :math:`\\beta_t = \\min(1 - \\bar\\alpha_t/\\bar\\alpha_{t-1}, 0.999)` (Nichol and Dhariwal; unclipped,
    :math:`\\beta_T = 1`), and :math:`\\bar\\alpha_t` recomputed from the clipped betas.
    """
    T = check_int(T, "T", 1)
    kind = check_choice(kind, "kind", ("linear", "cosine"))
    if kind == "linear":
        check_number(beta_1, "beta_1", 0, 1, low_open=True, high_open=True)
        check_number(beta_T, "beta_T", beta_1, 1, high_open=True)
        beta = np.concatenate([[0.0], np.linspace(beta_1, beta_T, T)])
    else:
        check_number(s, "s", 0, 1, low_open=True)
        f = np.cos((np.arange(T + 1) / T + s) / (1 + s) * np.pi / 2) ** 2
        beta = np.concatenate([[0.0], np.minimum(1 - f[1:] / f[:-1], 0.999)])
    alpha = 1 - beta
    return Schedule(beta, alpha, np.cumprod(alpha))


def _check_schedule(schedule) -> Schedule:
    if not isinstance(schedule, Schedule):
        raise TypeError(f"schedule must be a Schedule (from noise_schedule), got {type(schedule).__name__}")
    return schedule


def _check_steps(t, schedule: Schedule, n: int) -> np.ndarray:
    t = np.asarray(t)
    if not np.issubdtype(t.dtype, np.integer) or t.ndim > 1 or (t.ndim == 1 and t.size != n):
        raise ValueError(f"t must be an integer step or an integer array ({n},), got {t!r:.80}")
    if np.any(t < 0) or np.any(t > schedule.T):
        raise ValueError(f"t must be in 0..T = 0..{schedule.T}, got values from {t.min()} to {t.max()}")
    return np.broadcast_to(t, (n,))


def q_sample(x0, t, schedule: Schedule, rng=None) -> tuple[np.ndarray, np.ndarray]:
    """A draw of :math:`x_t \\sim q(x_t\\mid x_0) = \\mathcal N(\\sqrt{\\bar\\alpha_t}x_0, (1-\\bar\\alpha_t)I)`:
    :math:`x_t = \\sqrt{\\bar\\alpha_t}x_0 + \\sqrt{1-\\bar\\alpha_t}\\,\\varepsilon` for each row of x0 (n, d),
    t one step or one per row (n,). Returns (x_t, ε), both (n, d) (10.30)."""
    x0 = check_array(x0, "x0", (None, None))
    schedule = _check_schedule(schedule)
    t = _check_steps(t, schedule, x0.shape[0])
    rng = check_rng(rng)
    eps = rng.standard_normal(x0.shape)
    a_bar = schedule.alpha_bar[t][:, None]
    return np.sqrt(a_bar) * x0 + np.sqrt(1 - a_bar) * eps, eps


def mixture_eps(gmm: GaussianMixture, x, t: int, schedule: Schedule) -> np.ndarray:
    """The optimal noise predictor :math:`\\varepsilon^*(x_t, t) = \\mathbb E[\\varepsilon\\mid x_t]` when the data
    follow a `GaussianMixture` (10.6), from the responsibilities of the noised mixture
    :math:`q_t = \\sum_k\\pi_k\\mathcal N(\\sqrt{\\bar\\alpha_t}m_k, \\bar\\alpha_t S_k + (1-\\bar\\alpha_t)I)`:
    :math:`\\mathbb E[\\varepsilon\\mid x_t, k] = (1-\\bar\\alpha_t)^{1/2}\\,C_k^{-1}(x_t - \\sqrt{\\bar\\alpha_t}m_k)`
    with :math:`C_k` that component's covariance, averaged over k with the weights p(k | x_t). x (n, d), t in 1..T."""
    schedule = _check_schedule(schedule)
    t = check_int(t, "t", 1, schedule.T)
    d = gmm.means.shape[1]
    x = check_array(x, "x", (None, d))
    a_bar = schedule.alpha_bar[t]
    noised = GaussianMixture(
        gmm.weights, np.sqrt(a_bar) * gmm.means, a_bar * gmm.covs + (1 - a_bar) * np.eye(d)
    )
    _, r = _mixture_responsibilities(noised, x)
    diff = x[:, None, :] - noised.means[None]  # (n, K, d)
    eps_k = math.sqrt(1 - a_bar) * np.einsum("kij,nkj->nki", np.linalg.inv(noised.covs), diff)
    return np.einsum("nk,nki->ni", r, eps_k)


def _check_eps_fn(eps_fn, x: np.ndarray, t: int) -> np.ndarray:
    eps = np.asarray(eps_fn(x, t), dtype=float)
    if eps.shape != x.shape:
        raise ValueError(f"eps_fn(x, t) must return the shape of x {x.shape}, got {eps.shape} at t = {t}")
    return eps


def ddpm_sample(eps_fn: Callable, x_T, schedule: Schedule, sigma: str = "beta_tilde", rng=None) -> np.ndarray:
    """Ancestral sampling (10.37) from x_T (n, d): for t = T, ..., 1
    :math:`x_{t-1} = \\frac1{\\sqrt{\\alpha_t}}(x_t - \\frac{\\beta_t}{\\sqrt{1-\\bar\\alpha_t}}\\varepsilon_\\theta(x_t, t))
    + \\sigma_t z`, z ~ N(0, I) drawn for t > 1 only (z = 0 at t = 1), with
    :math:`\\sigma_t^2 = \\tilde\\beta_t = \\frac{1-\\bar\\alpha_{t-1}}{1-\\bar\\alpha_t}\\beta_t` (``"beta_tilde"``) or
    :math:`\\beta_t` (``"beta"``). Returns x_0 (n, d)."""
    check_callable(eps_fn, "eps_fn")
    x = check_array(x_T, "x_T", (None, None))
    schedule = _check_schedule(schedule)
    sigma = check_choice(sigma, "sigma", ("beta_tilde", "beta"))
    rng = check_rng(rng)
    beta, alpha, a_bar = schedule
    for t in range(schedule.T, 0, -1):
        eps = _check_eps_fn(eps_fn, x, t)
        x = (x - beta[t] / math.sqrt(1 - a_bar[t]) * eps) / math.sqrt(alpha[t])
        if t > 1:
            var = beta[t] * (1 - a_bar[t - 1]) / (1 - a_bar[t]) if sigma == "beta_tilde" else beta[t]
            x = x + math.sqrt(var) * rng.standard_normal(x.shape)
    return x


def ddim_sample(
    eps_fn: Callable, x_T, schedule: Schedule, steps: int | None = None, eta: float = 0.0, rng=None
):
    """DDIM sampling (10.42) from x_T (n, d) on ``steps`` evenly spaced steps
    :math:`T = \\tau_S > \\dots > \\tau_1 \\ge 1` (all T by default), with :math:`\\tau_0 = 0`. From t to the
    next step s < t: :math:`\\hat x_0 = (x_t - \\sqrt{1-\\bar\\alpha_t}\\varepsilon_\\theta)/\\sqrt{\\bar\\alpha_t}`,
    :math:`x_s = \\sqrt{\\bar\\alpha_s}\\hat x_0 + \\sqrt{1-\\bar\\alpha_s-\\sigma^2}\\,\\varepsilon_\\theta + \\sigma z`,
    :math:`\\sigma = \\eta\\sqrt{\\frac{1-\\bar\\alpha_s}{1-\\bar\\alpha_t}}\\sqrt{1-\\frac{\\bar\\alpha_t}{\\bar\\alpha_s}}`.
    eta = 0 is deterministic; with eta = 1 on all steps it is ancestral sampling with
    :math:`\\sigma_t^2 = \\tilde\\beta_t` (z is drawn only where s > 0, as in `ddpm_sample`). Returns x_0 (n, d)."""
    check_callable(eps_fn, "eps_fn")
    x = check_array(x_T, "x_T", (None, None))
    schedule = _check_schedule(schedule)
    steps = schedule.T if steps is None else check_int(steps, "steps", 1, schedule.T)
    eta = check_number(eta, "eta", 0, 1)
    rng = check_rng(rng)
    a_bar = schedule.alpha_bar
    taus = np.unique(np.round(np.linspace(0, schedule.T, steps + 1)).astype(int))[::-1]  # T, ..., 0
    for t, s in zip(taus[:-1], taus[1:], strict=True):
        eps = _check_eps_fn(eps_fn, x, int(t))
        x0_hat = (x - math.sqrt(1 - a_bar[t]) * eps) / math.sqrt(a_bar[t])
        sigma = eta * math.sqrt((1 - a_bar[s]) / (1 - a_bar[t]) * (1 - a_bar[t] / a_bar[s]))
        x = math.sqrt(a_bar[s]) * x0_hat + math.sqrt(max(1 - a_bar[s] - sigma**2, 0.0)) * eps
        if s > 0:
            x = x + sigma * rng.standard_normal(x.shape)
    return x


# ----------------------------------------------------------------------------- 10.1 linear latent-variable models: PCA, factor analysis, PPCA


# ----------------------------------------------------------------------------- 10.2 the ELBO, the reparameterisation trick, the Gaussian KL


# ----------------------------------------------------------------------------- 10.2 a VAE on digits, beta-VAE


# ----------------------------------------------------------------------------- 10.3 normalising flows


# ----------------------------------------------------------------------------- 10.4 autoregressive models


# ----------------------------------------------------------------------------- 10.5 GANs: the game and its optimum


# ----------------------------------------------------------------------------- 10.5 training GANs: mode collapse, Wasserstein, gradient penalty


# ----------------------------------------------------------------------------- 10.6 diffusion: forward process, bound, reverse posterior


# ----------------------------------------------------------------------------- 10.6 sampling: scores, SDEs, guidance, DDIM


# ----------------------------------------------------------------------------- 10.6 training a diffusion model
