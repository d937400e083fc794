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
import torch
import torch.nn.functional as F
from scipy.integrate import trapezoid
from scipy.optimize import minimize
from scipy.special import expit, logsumexp
from torch import nn
from tqdm.auto import tqdm

from .training import device, make_loader, model_device, to_numpy
from .validation import (
    check_array,
    check_callable,
    check_choice,
    check_int,
    check_labels,
    check_matrix,
    check_number,
    check_positive,
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
    taus = np.unique(np.round(np.linspace(0, schedule.T, steps + 1)).astype(int))[::-1]  # T, ..., 0
    for t, s in zip(taus[:-1], taus[1:], strict=True):
        eps = _check_eps_fn(eps_fn, x, int(t))
        z = rng.standard_normal(x.shape) if s > 0 else None
        x = ddim_step(x, eps, int(t), int(s), schedule, eta, z)
    return x


def ddim_step(x_t, eps, t: int, s: int, schedule: Schedule, eta: float = 0.0, z=None) -> np.ndarray:
    """One DDIM step (10.42) from step t to an earlier step s < t:
    :math:`\\hat x_0 = (x_t - \\sqrt{1-\\bar\\alpha_t}\\varepsilon_\\theta)/\\sqrt{\\bar\\alpha_t}`,
    :math:`x_s = \\sqrt{\\bar\\alpha_s}\\hat x_0 + \\sqrt{1-\\bar\\alpha_s-\\sigma^2}\\,\\varepsilon_\\theta + \\sigma z`,
    :math:`\\sigma = \\eta\\sqrt{\\frac{1-\\bar\\alpha_s}{1-\\bar\\alpha_t}}\\sqrt{1-\\frac{\\bar\\alpha_t}{\\bar\\alpha_s}}`.
    x_t, eps and z (n, d); z = None means no noise (η = 0, or the last step)."""
    schedule = _check_schedule(schedule)
    t = check_int(t, "t", 1, schedule.T)
    s = check_int(s, "s", 0, t - 1)
    eta = check_number(eta, "eta", 0, 1)
    x_t = check_array(x_t, "x_t", (None, None))
    eps = check_array(eps, "eps", x_t.shape)
    a_t, a_s = schedule.alpha_bar[t], schedule.alpha_bar[s]
    x0_hat = (x_t - math.sqrt(1 - a_t) * eps) / math.sqrt(a_t)
    sigma = eta * math.sqrt((1 - a_s) / (1 - a_t) * (1 - a_t / a_s))
    x_s = math.sqrt(a_s) * x0_hat + math.sqrt(max(1 - a_s - sigma**2, 0.0)) * eps
    if z is not None:
        x_s = x_s + sigma * check_array(z, "z", x_t.shape)
    return x_s


# ----------------------------------------------------------------------------- 10.1 linear latent-variable models: PCA, factor analysis, PPCA


class PCAFit(NamedTuple):
    mu: np.ndarray  # (d,) the mean of the data
    U_k: np.ndarray  # (d, k) the top-k eigenvectors of the covariance, as columns
    lam: np.ndarray  # (d,) all eigenvalues of the covariance, in decreasing order


def pca(X, k: int) -> PCAFit:
    """Principal component analysis: the eigen-decomposition of the covariance
    :math:`S = \\frac1n (X-\\bar x)^\\top (X-\\bar x) = U\\,\\mathrm{diag}(\\lambda)\\,U^\\top`, by the SVD of the centred
    data. X (n, d), one example per row; returns the mean (d,), :math:`U_k` (d, k) and all eigenvalues
    :math:`\\lambda_1\\ge\\dots\\ge\\lambda_d` (d,) (10.1). The rank-k reconstruction is
    :math:`\\bar x + U_kU_k^\\top(x-\\bar x)`, its mean squared error :math:`\\sum_{i>k}\\lambda_i`."""
    X = check_array(X, "X", (None, None))
    n, d = X.shape
    k = check_int(k, "k", 1, d)
    mu = X.mean(axis=0)
    _, s, Vt = np.linalg.svd(X - mu, full_matrices=n < d)  # all d right singular vectors, never an (n, n) U
    lam = np.zeros(d)
    lam[: s.size] = s**2 / n
    return PCAFit(mu, Vt[:k].T, lam)


class LinearAE(NamedTuple):
    C: np.ndarray  # (k, d) encoder, z = C x
    D: np.ndarray  # (d, k) decoder, x_hat = D z
    losses: np.ndarray  # (steps + 1,) the loss before each step and after the last


def linear_ae_loss(X, C, D) -> float:
    """The loss of a linear autoencoder :math:`\\frac1n\\|X - XC^\\top D^\\top\\|_F^2` (X (n, d) centred, one example
    per row; encoder C (k, d), decoder D (d, k)): the mean squared reconstruction error per example (10.1)."""
    X = check_array(X, "X", (None, None))
    d = X.shape[1]
    C = check_array(C, "C", (None, d))
    D = check_array(D, "D", (d, C.shape[0]))
    return float(np.sum((X - X @ C.T @ D.T) ** 2) / len(X))


def train_linear_ae(
    X, k: int, eta: float = 0.5, steps: int = 2000, rng=None, progress: bool = True
) -> LinearAE:
    """A linear autoencoder :math:`\\hat x = DCx` trained by full-batch gradient descent on
    :math:`L(C,D)=\\frac1n\\|X - XC^\\top D^\\top\\|_F^2=\\mathrm{tr}\\,(I-DC)S(I-DC)^\\top`, :math:`S=\\frac1nX^\\top X`,
    with the gradients :math:`\\nabla_D L=-2(I-DC)SC^\\top`, :math:`\\nabla_C L=-2D^\\top(I-DC)S`, computed
    through S once per step in O(d²k) (the same numbers as from X, without its n rows).

    X (n, d) should be centred (the model has no bias); C (k, d) and D (d, k) start from N(0, 0.1²) entries
    drawn from `rng`. At a global minimum span(D) is the span of the top-k principal directions (10.1)."""
    X = check_array(X, "X", (None, None))
    n, d = X.shape
    k = check_int(k, "k", 1, d)
    eta = check_positive(eta, "eta")
    steps = check_int(steps, "steps", 0)
    rng = check_rng(rng)
    C = 0.1 * rng.standard_normal((k, d))
    D = 0.1 * rng.standard_normal((d, k))
    S = X.T @ X / n
    trace_S = np.trace(S)
    losses = np.empty(steps + 1)
    for step in tqdm(range(steps + 1), desc="gradient descent", disable=not progress, leave=False):
        SCt = S @ C.T  # (d, k)
        CSCt = C @ SCt  # (k, k)
        DtD = D.T @ D
        # L = tr S - 2 tr(D C S) + tr(D C S C^T D^T)
        losses[step] = trace_S - 2 * np.sum(D * SCt) + np.sum(DtD * CSCt)
        if step == steps:
            break
        grad_D = 2 * (D @ CSCt - SCt)  # -2 (I - DC) S C^T
        grad_C = 2 * (DtD @ SCt.T - D.T @ S)  # -2 D^T (I - DC) S
        C, D = C - eta * grad_C, D - eta * grad_D
    return LinearAE(C, D, losses)


def _check_fa(X, W, psi, mu) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    X = check_array(X, "X", (None, None))
    d = X.shape[1]
    W = check_array(W, "W", (d, None))
    psi = check_vector(psi, "psi", d)
    if np.any(psi <= 0):
        raise ValueError(f"psi (the diagonal of Psi) must be positive, got minimum {psi.min():.3g}")
    mu = check_vector(mu, "mu", d)
    return X, W, psi, mu


def fa_loglik(X, W, psi, mu) -> float:
    """The log-likelihood :math:`\\sum_i\\log\\mathcal N(x_i;\\mu, WW^\\top+\\Psi)` of factor analysis,
    :math:`x = \\mu + Wz + \\nu`, :math:`z\\sim\\mathcal N(0,I_k)`, :math:`\\nu\\sim\\mathcal N(0,\\Psi)`.
    X (n, d), W (d, k), psi (d,) the diagonal of Ψ, mu (d,); by a Cholesky factor of the covariance (10.1)."""
    X, W, psi, mu = _check_fa(X, W, psi, mu)
    n, d = X.shape
    L = np.linalg.cholesky(W @ W.T + np.diag(psi))
    A = np.linalg.solve(L, (X - mu).T)  # L^{-1} (x_i - mu), column i
    logdet = 2 * np.log(np.diag(L)).sum()
    return float(-0.5 * (n * d * math.log(2 * math.pi) + n * logdet + np.sum(A**2)))


class FAPosterior(NamedTuple):
    mean: np.ndarray  # (n, k) E[z | x_i], one row per example
    cov: np.ndarray  # (k, k) Cov[z | x], the same for every x


def fa_posterior(X, W, psi, mu) -> FAPosterior:
    """The posterior of the latent variable in factor analysis, in the k × k (Woodbury) form:
    :math:`\\Sigma_{z|x}=(I_k+W^\\top\\Psi^{-1}W)^{-1}`, :math:`\\mu_{z|x}=\\Sigma_{z|x}W^\\top\\Psi^{-1}(x-\\mu)`,
    equal to :math:`W^\\top(WW^\\top+\\Psi)^{-1}(x-\\mu)` and :math:`I-W^\\top(WW^\\top+\\Psi)^{-1}W`.
    X (n, d), W (d, k), psi (d,) the diagonal of Ψ, mu (d,) (10.1)."""
    X, W, psi, mu = _check_fa(X, W, psi, mu)
    k = W.shape[1]
    W_scaled = W / psi[:, None]  # Psi^{-1} W
    cov = np.linalg.inv(np.eye(k) + W.T @ W_scaled)
    cov = (cov + cov.T) / 2
    return FAPosterior((X - mu) @ W_scaled @ cov, cov)


class FAFit(NamedTuple):
    mu: np.ndarray  # (d,)
    W: np.ndarray  # (d, k)
    psi: np.ndarray  # (d,) the diagonal of Psi
    logliks: np.ndarray  # (steps + 1,) the log-likelihood before each EM step and after the last


def fa_em(X, k: int, steps: int = 300, rng=None, progress: bool = True) -> FAFit:
    """Factor analysis fitted by EM (Rubin and Thayer, 1982). With S the covariance of X (1/n),
    :math:`G=(I+W^\\top\\Psi^{-1}W)^{-1}` and :math:`B=GW^\\top\\Psi^{-1}` (so :math:`\\mathbb E[z|x]=B(x-\\bar x)`),
    one step is :math:`W\\leftarrow SB^\\top(G+BSB^\\top)^{-1}`, :math:`\\Psi\\leftarrow\\mathrm{diag}(S-WBS)`;
    :math:`\\hat\\mu=\\bar x`. X (n, d); W starts from N(0, 0.1² mean variance) entries drawn from `rng`,
    Ψ from diag(S). The log-likelihood never decreases (10.1)."""
    X = check_array(X, "X", (None, None))
    n, d = X.shape
    k = check_int(k, "k", 1, d)
    steps = check_int(steps, "steps", 0)
    rng = check_rng(rng)
    mu = X.mean(axis=0)
    S = (X - mu).T @ (X - mu) / n
    floor = 1e-8 * max(np.diag(S).mean(), 1e-300)
    W = 0.1 * math.sqrt(np.diag(S).mean()) * rng.standard_normal((d, k))
    psi = np.maximum(np.diag(S).copy(), floor)
    logliks = np.empty(steps + 1)
    for step in tqdm(range(steps + 1), desc="EM", disable=not progress, leave=False):
        logliks[step] = fa_loglik(X, W, psi, mu)
        if step == steps:
            break
        G = np.linalg.inv(np.eye(k) + W.T @ (W / psi[:, None]))
        B = G @ (W / psi[:, None]).T  # (k, d)
        SBt = S @ B.T
        W = SBt @ np.linalg.inv(G + B @ SBt)
        psi = np.maximum(np.diag(S) - np.einsum("ij,ji->i", W, B @ S), floor)
    return FAFit(mu, W, psi, logliks)


class PPCAFit(NamedTuple):
    mu: np.ndarray  # (d,)
    W: np.ndarray  # (d, k) W_ML = U_k (Lambda_k - sigma^2 I)^{1/2}
    sigma2: float  # sigma^2_ML, the mean of the d - k discarded eigenvalues


def ppca_mle(X, k: int, ddof: int = 1) -> PPCAFit:
    """Probabilistic PCA in closed form (Tipping and Bishop, 1999): :math:`x=\\mu+Wz+\\nu`,
    :math:`\\nu\\sim\\mathcal N(0,\\sigma^2I)`; with the eigenvalues :math:`\\lambda_i` and eigenvectors of the
    covariance of X, :math:`\\sigma^2_{ML}=\\frac1{d-k}\\sum_{i>k}\\lambda_i` and
    :math:`W_{ML}=U_k(\\Lambda_k-\\sigma^2I)^{1/2}` (up to a rotation :math:`W_{ML}Q`). X (n, d), 1 ≤ k < d.
    ``ddof=1`` uses the covariance with 1/(n−1), as scikit-learn's PCA; ``ddof=0`` (1/n) is the exact
    maximiser of the likelihood (10.1)."""
    X = check_array(X, "X", (None, None))
    n, d = X.shape
    k = check_int(k, "k", 1, d - 1)
    ddof = check_int(ddof, "ddof", 0, 1)
    if n - ddof < 1:
        raise ValueError(f"X must have more than ddof = {ddof} rows, got {n}")
    fit = pca(X, k)
    lam = fit.lam * n / (n - ddof)
    sigma2 = float(lam[k:].mean())
    W = fit.U_k * np.sqrt(np.maximum(lam[:k] - sigma2, 0.0))
    return PPCAFit(fit.mu, W, sigma2)


# ----------------------------------------------------------------------------- 10.2 the ELBO, the reparameterisation trick, the Gaussian KL


class LinearLogit(NamedTuple):
    w: np.ndarray  # (d,) weights of the logit
    b: float  # its bias


def generative_classifier(mu0, mu1) -> LinearLogit:
    """The logit of the Gaussian generative classifier (10.06): with :math:`p(x\\mid y) = \\mathcal N(\\mu_y, I)` and
    equal priors, Bayes' rule gives :math:`p(y{=}1\\mid x) = \\sigma(w^\\top x + b)` with :math:`w = \\mu_1 - \\mu_0`,
    :math:`b = \\frac12(\\|\\mu_0\\|^2 - \\|\\mu_1\\|^2)`. mu0, mu1 (d,); returns `LinearLogit` (w (d,), b)."""
    mu0 = check_vector(mu0, "mu0")
    mu1 = check_vector(mu1, "mu1", mu0.size)
    return LinearLogit(mu1 - mu0, float(0.5 * (mu0 @ mu0 - mu1 @ mu1)))


class ELBOTerms(NamedTuple):
    reconstruction: np.ndarray  # E_q log p(x | z)
    kl: np.ndarray  # KL(q(z | x) || p(z))
    elbo: np.ndarray  # reconstruction - beta kl (beta = 1: the ELBO)


def ppca_elbo(x, W, mu, sigma2: float, m, S) -> ELBOTerms:
    """The ELBO of the linear-Gaussian (probabilistic PCA) model :math:`p(z) = \\mathcal N(0, I_k)`,
    :math:`p(x\\mid z) = \\mathcal N(Wz + \\mu, \\sigma^2 I_d)` for a Gaussian :math:`q(z) = \\mathcal N(m, S)`, in
    closed form (10.07): :math:`\\mathbb E_q\\log p(x\\mid z) = -\\frac d2\\log 2\\pi\\sigma^2
    - \\frac{\\|x - \\mu - Wm\\|^2 + \\mathrm{tr}(WSW^\\top)}{2\\sigma^2}`, minus :math:`\\mathrm{KL}(q\\,\\Vert\\,p(z))`
    (`gauss_kl`). x, mu (d,), W (d, k), m (k,), S (k, k); returns `ELBOTerms` of floats."""
    x = check_vector(x, "x")
    d = x.size
    W = check_array(W, "W", (d, None))
    k = W.shape[1]
    mu = check_vector(mu, "mu", d)
    sigma2 = check_number(sigma2, "sigma2", 0, low_open=True)
    m = check_vector(m, "m", k)
    S = _check_cov(S, "S", k)
    residual = x - mu - W @ m
    reconstruction = -0.5 * d * math.log(2 * math.pi * sigma2) - (
        residual @ residual + np.trace(W @ S @ W.T)
    ) / (2 * sigma2)
    kl = gauss_kl(m, S, np.zeros(k), np.eye(k))
    return ELBOTerms(float(reconstruction), kl, float(reconstruction - kl))


class Conditional(NamedTuple):
    mean: np.ndarray  # (a,) mean of the free coordinates given the observed ones
    cov: np.ndarray  # (a, a) their covariance


def gauss_condition(mean, cov, observed, x_obs) -> Conditional:
    """The conditional of a Gaussian :math:`\\mathcal N(m, \\Sigma)` over coordinates (u, v) given v = x_obs:
    :math:`\\mathcal N(m_u + \\Sigma_{uv}\\Sigma_{vv}^{-1}(x_{obs} - m_v),\\ \\Sigma_{uu} - \\Sigma_{uv}\\Sigma_{vv}^{-1}\\Sigma_{vu})`
    (10.07, 10.12). mean (D,), cov (D, D), observed: the indices of v, x_obs (len(observed),); the free coordinates
    u are the others, in increasing order."""
    mean = check_vector(mean, "mean")
    D = mean.size
    cov = _check_cov(cov, "cov", D)
    obs = np.asarray(observed)
    if (
        obs.ndim != 1
        or not np.issubdtype(obs.dtype, np.integer)
        or len(set(obs.tolist())) != obs.size
        or obs.size >= D
        or np.any((obs < 0) | (obs >= D))
    ):
        raise ValueError(f"observed must be distinct indices in 0..{D - 1}, fewer than {D}, got {observed!r}")
    x_obs = check_vector(x_obs, "x_obs", obs.size)
    free = np.setdiff1d(np.arange(D), obs)
    gain = np.linalg.solve(cov[np.ix_(obs, obs)], cov[np.ix_(obs, free)]).T  # Sigma_uv Sigma_vv^-1
    return Conditional(
        mean[free] + gain @ (x_obs - mean[obs]), cov[np.ix_(free, free)] - gain @ cov[np.ix_(obs, free)]
    )


class GradientSamples(NamedTuple):
    d_mu: np.ndarray  # (n, d) one estimate of the gradient with respect to mu per draw
    d_sigma: np.ndarray  # (n, d) the same with respect to sigma


def _gradient_inputs(f, mu, sigma, n, rng):
    check_callable(f, "f")
    mu = check_vector(mu, "mu")
    sigma = check_vector(sigma, "sigma", mu.size)
    if np.any(sigma <= 0):
        raise ValueError(f"sigma must be positive (standard deviations), got {sigma}")
    n = check_int(n, "n", 1)
    eps = check_rng(rng).standard_normal((n, mu.size))
    return mu, sigma, eps


def _call_f(f, z: torch.Tensor) -> torch.Tensor:
    out = f(z)
    if not isinstance(out, torch.Tensor) or out.shape != z.shape[:1]:
        raise ValueError(
            f"f must map a tensor (n, d) to a tensor (n,), got {getattr(out, 'shape', type(out))}"
        )
    return out


def reparam_grad(f: Callable, mu, sigma, n: int, rng=None) -> GradientSamples:
    """Per-draw reparameterisation estimates of :math:`\\nabla\\,\\mathbb E_{z\\sim\\mathcal N(\\mu,\\mathrm{diag}\\,\\sigma^2)}f(z)`
    (10.09): :math:`z = \\mu + \\sigma\\odot\\varepsilon`, :math:`\\nabla_\\mu = \\nabla f(z)`,
    :math:`\\nabla_\\sigma = \\nabla f(z)\\odot\\varepsilon` (autograd, float64). f maps a torch tensor (n, d) to (n,);
    mu, sigma (d,). The mean over the n draws is the estimate, their variance its variance per draw."""
    mu, sigma, eps = _gradient_inputs(f, mu, sigma, n, rng)
    z = torch.tensor(mu + sigma * eps, requires_grad=True)
    (grad,) = torch.autograd.grad(_call_f(f, z).sum(), z)
    grad = to_numpy(grad)
    return GradientSamples(grad, grad * eps)


def score_function_grad(f: Callable, mu, sigma, n: int, rng=None) -> GradientSamples:
    """Per-draw score-function (REINFORCE) estimates of :math:`\\nabla\\,\\mathbb E_{z\\sim q}f(z)`,
    :math:`q = \\mathcal N(\\mu,\\mathrm{diag}\\,\\sigma^2)` (10.09): :math:`f(z)\\nabla\\log q(z)` with
    :math:`\\nabla_\\mu\\log q = (z-\\mu)/\\sigma^2`, :math:`\\nabla_\\sigma\\log q = ((z-\\mu)^2 - \\sigma^2)/\\sigma^3`;
    f is only evaluated, never differentiated. f maps a torch tensor (n, d) to (n,); mu, sigma (d,)."""
    mu, sigma, eps = _gradient_inputs(f, mu, sigma, n, rng)
    with torch.no_grad():
        values = to_numpy(_call_f(f, torch.tensor(mu + sigma * eps)))[:, None]
    return GradientSamples(values * eps / sigma, values * (eps**2 - 1) / sigma)


def diag_gauss_kl(mu, var) -> np.ndarray:
    """:math:`\\mathrm{KL}(\\mathcal N(\\mu, \\mathrm{diag}\\,\\sigma^2)\\,\\Vert\\,\\mathcal N(0, I)) =
    \\frac12\\sum_j(\\sigma_j^2 + \\mu_j^2 - 1 - \\ln\\sigma_j^2)` in nats over the last axis (10.10). mu and var
    (the variances σ², not the standard deviations) of equal shape (..., k); returns (...,)."""
    mu = check_array(mu, "mu")
    var = check_array(var, "var", mu.shape)
    if np.any(var <= 0):
        raise ValueError("var must hold positive variances")
    if mu.ndim == 0:
        raise ValueError("mu must have at least one axis (..., k), got a number")
    return 0.5 * np.sum(var + mu**2 - 1 - np.log(var), axis=-1)


class LinearGaussian(NamedTuple):
    weight: np.ndarray  # (d_out, d_in)
    bias: np.ndarray  # (d_out,)
    cov: np.ndarray  # (d_out, d_out)


def linear_gaussian(weight, bias, cov) -> LinearGaussian:
    """A linear-Gaussian conditional :math:`\\mathcal N(u;\\ Av + a,\\ \\Sigma)` of u (d_out,) given v (d_in,),
    validated: weight A (d_out, d_in), bias a (d_out,), covariance Σ (d_out, d_out) positive definite (10.12)."""
    weight = check_array(weight, "weight", (None, None))
    bias = check_vector(bias, "bias", weight.shape[0])
    return LinearGaussian(weight, bias, _check_cov(cov, "cov", weight.shape[0]))


def _gauss_logpdf(X: np.ndarray, M: np.ndarray, cov: np.ndarray) -> np.ndarray:
    """log N(x_i; m_i, cov) for the rows of X and M (n, d)."""
    L = np.linalg.cholesky(cov)
    white = np.linalg.solve(L, (X - M).T)  # (d, n)
    d = X.shape[1]
    return -0.5 * (white**2).sum(0) - np.log(np.diag(L)).sum() - 0.5 * d * math.log(2 * math.pi)


def _draw(cond: LinearGaussian, V: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    mean = V @ cond.weight.T + cond.bias
    return mean + rng.standard_normal(mean.shape) @ np.linalg.cholesky(cond.cov).T


def chain_joint(p_z1: LinearGaussian, p_x: LinearGaussian) -> tuple[np.ndarray, np.ndarray]:
    """Mean (D,) and covariance (D, D) of (z1, z2, x) under the two-level linear-Gaussian chain
    :math:`p(z_2) = \\mathcal N(0, I)`, :math:`p(z_1\\mid z_2) =` p_z1, :math:`p(x\\mid z_1) =` p_x (10.12)."""
    k1, k2 = p_z1.weight.shape
    if p_x.weight.shape[1] != k1:
        raise ValueError(f"p_x.weight must have {k1} columns (the size of z1), got shape {p_x.weight.shape}")
    A, B = p_z1.weight, p_x.weight
    S11 = A @ A.T + p_z1.cov
    cov = np.block(
        [
            [S11, A, S11 @ B.T],
            [A.T, np.eye(k2), A.T @ B.T],
            [B @ S11, B @ A, B @ S11 @ B.T + p_x.cov],
        ]
    )
    mean = np.concatenate([p_z1.bias, np.zeros(k2), B @ p_z1.bias + p_x.bias])
    return mean, cov


def hierarchical_log_weights(
    x, p_z1: LinearGaussian, p_x: LinearGaussian, q_z1: LinearGaussian, q_z2: LinearGaussian, n: int, rng=None
) -> np.ndarray:
    """n draws of :math:`\\log p(x, z_1, z_2) - \\log q(z_1, z_2\\mid x)`, :math:`(z_1, z_2)\\sim q`, for the
    two-level model :math:`p(z_2)p(z_1\\mid z_2)p(x\\mid z_1)` with :math:`p(z_2) = \\mathcal N(0, I)` and the
    encoder :math:`q(z_1\\mid x)\\,q(z_2\\mid z_1)` (10.12), all `LinearGaussian`. Their mean is a Monte Carlo
    ELBO; x (d,); returns (n,)."""
    for name, cond in (("p_z1", p_z1), ("p_x", p_x), ("q_z1", q_z1), ("q_z2", q_z2)):
        if not isinstance(cond, LinearGaussian):
            raise TypeError(
                f"{name} must be a LinearGaussian (from linear_gaussian), got {type(cond).__name__}"
            )
    k1, k2 = p_z1.weight.shape
    x = check_vector(x, "x", p_x.weight.shape[0])
    if p_x.weight.shape[1] != k1 or q_z1.weight.shape != (k1, x.size) or q_z2.weight.shape != (k2, k1):
        raise ValueError(
            f"the shapes do not chain: p_z1 {p_z1.weight.shape}, p_x {p_x.weight.shape}, q_z1 {q_z1.weight.shape} "
            f"(expected {(k1, x.size)}), q_z2 {q_z2.weight.shape} (expected {(k2, k1)})"
        )
    n = check_int(n, "n", 1)
    rng = check_rng(rng)
    X = np.broadcast_to(x, (n, x.size))
    z1 = _draw(q_z1, X, rng)
    z2 = _draw(q_z2, z1, rng)
    log_p = (
        _gauss_logpdf(z2, np.zeros_like(z2), np.eye(k2))
        + _gauss_logpdf(z1, z2 @ p_z1.weight.T + p_z1.bias, p_z1.cov)
        + _gauss_logpdf(X, z1 @ p_x.weight.T + p_x.bias, p_x.cov)
    )
    log_q = _gauss_logpdf(z1, X @ q_z1.weight.T + q_z1.bias, q_z1.cov) + _gauss_logpdf(
        z2, z1 @ q_z2.weight.T + q_z2.bias, q_z2.cov
    )
    return log_p - log_q


def kl_on_grid(log_p, log_q, grid) -> float:
    """:math:`\\mathrm{KL}(p\\,\\Vert\\,q) = \\int p\\,(\\log p - \\log q)\\,dx` by the trapezoidal rule, from the
    log-densities (m,) on an increasing grid (m,) (10.13)."""
    grid = check_vector(grid, "grid")
    if grid.size < 3 or np.any(np.diff(grid) <= 0):
        raise ValueError("grid must be increasing with at least 3 points")
    log_p = check_vector(log_p, "log_p", grid.size)
    log_q = check_vector(log_q, "log_q", grid.size)
    return float(trapezoid(np.exp(log_p) * (log_p - log_q), grid))


class GaussianFit(NamedTuple):
    mean: float
    std: float
    kl: float  # the divergence it minimises, at the fit


def fit_gaussian_kl(log_p, grid, direction: str = "forward", start=(0.0, 1.0)) -> GaussianFit:
    """The Gaussian :math:`q = \\mathcal N(m, s^2)` closest to a 1-D density p (10.13): ``"forward"`` minimises
    :math:`\\mathrm{KL}(p\\,\\Vert\\,q)` (mass-covering, maximum likelihood), ``"reverse"`` minimises
    :math:`\\mathrm{KL}(q\\,\\Vert\\,p)` (mode-seeking, variational inference), by quadrature on the grid (`kl_on_grid`)
    and Nelder–Mead over (m, log s) from start = (m, s), keeping q on the grid (s at most a eighth of its width,
    m within its middle half). log_p (m,) on an increasing grid (m,)."""
    direction = check_choice(direction, "direction", ("forward", "reverse"))
    grid = check_vector(grid, "grid")
    log_p = check_vector(log_p, "log_p", grid.size)
    start = check_vector(start, "start", 2)
    if start[1] <= 0:
        raise ValueError(f"start must be (mean, standard deviation > 0), got {tuple(start)}")

    width = grid[-1] - grid[0]
    centre = 0.5 * (grid[0] + grid[-1])

    def divergence(params):  # +inf where q would not fit on the grid (the quadrature would be meaningless)
        m, log_s = params
        if not (2 * (grid[1] - grid[0]) <= math.exp(log_s) <= width / 8 and abs(m - centre) <= width / 4):
            return np.inf
        log_q = -0.5 * ((grid - m) / math.exp(log_s)) ** 2 - log_s - 0.5 * math.log(2 * math.pi)
        return kl_on_grid(log_p, log_q, grid) if direction == "forward" else kl_on_grid(log_q, log_p, grid)

    result = minimize(
        divergence,
        [start[0], math.log(start[1])],
        method="Nelder-Mead",
        options={"xatol": 1e-9, "fatol": 1e-13, "maxiter": 4000},
    )
    return GaussianFit(float(result.x[0]), float(math.exp(result.x[1])), float(result.fun))


# ----------------------------------------------------------------------------- 10.2 a VAE on digits, beta-VAE


class VAE(nn.Module):
    """A variational autoencoder (10.08) with a Gaussian encoder
    :math:`q_\\phi(z\\mid x) = \\mathcal N(\\mu_\\phi(x), \\mathrm{diag}\\,\\sigma^2_\\phi(x))`, the prior
    :math:`\\mathcal N(0, I_k)` and a Bernoulli decoder :math:`p_\\theta(x\\mid z) = \\prod_j
    \\mathrm{Bern}(x_j; \\mathrm{sigmoid}(\\ell_\\theta(z)_j))`: MLPs d_in → d_h → (μ, log σ²) and d_z → d_h → logits ℓ."""

    def __init__(self, d_in: int, d_h: int, d_z: int):
        super().__init__()
        self.d_in, self.d_h, self.d_z = (
            check_int(d_in, "d_in", 1),
            check_int(d_h, "d_h", 1),
            check_int(d_z, "d_z", 1),
        )
        self.encoder = nn.Sequential(nn.Linear(d_in, d_h), nn.Tanh(), nn.Linear(d_h, 2 * d_z))
        self.decoder = nn.Sequential(nn.Linear(d_z, d_h), nn.Tanh(), nn.Linear(d_h, d_in))

    def _check_x(self, x) -> torch.Tensor:
        if not isinstance(x, torch.Tensor) or x.ndim != 2 or x.shape[1] != self.d_in:
            raise ValueError(f"x must be a tensor (n, {self.d_in}), got {getattr(x, 'shape', type(x))}")
        return x

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The encoder's mean μ and variance σ² (n, d_z) for x (n, d_in)."""
        mu, log_var = self.encoder(self._check_x(x)).chunk(2, dim=1)
        return mu, log_var.exp()

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """The decoder's logits ℓ (n, d_in) for z (n, d_z); the pixel probabilities are sigmoid(ℓ)."""
        return self.decoder(z)

    def elbo(self, x: torch.Tensor, beta: float = 1.0, eps: torch.Tensor | None = None) -> ELBOTerms:
        """Per-example terms (n,) of the β-ELBO :math:`\\log p_\\theta(x\\mid z) - \\beta\\,\\mathrm{KL}(q_\\phi(z\\mid x)
        \\Vert p(z))` with one reparameterised draw :math:`z = \\mu + \\sigma\\odot\\varepsilon` (ε (n, d_z) given, or
        drawn from torch's generator); the KL in closed form."""
        beta = check_number(beta, "beta", 0)
        mu, var = self.encode(x)
        if eps is None:
            eps = torch.randn_like(mu)
        elif eps.shape != mu.shape:
            raise ValueError(f"eps must have shape {tuple(mu.shape)}, got {tuple(eps.shape)}")
        logits = self.decode(mu + var.sqrt() * eps)
        reconstruction = -F.binary_cross_entropy_with_logits(logits, x, reduction="none").sum(1)
        kl = 0.5 * (var + mu**2 - 1 - var.log()).sum(1)
        return ELBOTerms(reconstruction, kl, reconstruction - beta * kl)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The per-example ELBO (n,) with one draw of ε."""
        return self.elbo(x).elbo


def _check_binary(X, name: str, d: int | None = None) -> np.ndarray:
    X = check_array(X, name, (None, d))
    if not np.isin(X, (0.0, 1.0)).all():
        raise ValueError(f"{name} must hold binary pixels (0 or 1) for a Bernoulli decoder")
    return X


class TrainedVAE(NamedTuple):
    model: VAE
    history: dict[
        str, list[float]
    ]  # "loss" (-beta-ELBO), "reconstruction", "kl", "beta": at init, then per epoch


def train_vae(
    X,
    d_h: int = 64,
    d_z: int = 2,
    beta: float = 1.0,
    epochs: int = 100,
    batch_size: int = 128,
    lr: float = 3e-3,
    kl_warmup: int = 0,
    rng=None,
    progress: bool = True,
) -> TrainedVAE:
    """Train a `VAE` (d, d_h, d_z) on binary data X (n, d) with Adam on the mean negative β-ELBO (10.08, 10.11).
    With ``kl_warmup = E > 0`` the KL weight grows linearly from 0 to β over the first E epochs (KL annealing).
    All randomness (initialisation, batches, ε) comes from `rng`; torch's global generator is left as it was."""
    X = _check_binary(X, "X")
    beta = check_number(beta, "beta", 0)
    epochs = check_int(epochs, "epochs", 1)
    batch_size = check_int(batch_size, "batch_size", 1)
    lr = check_positive(lr, "lr")
    kl_warmup = check_int(kl_warmup, "kl_warmup", 0)
    rng = check_rng(rng)
    history: dict[str, list[float]] = {"loss": [], "reconstruction": [], "kl": [], "beta": []}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(rng.integers(2**31)))
        model = VAE(X.shape[1], d_h, d_z)
        optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        data = torch.tensor(X, dtype=torch.float32)
        with torch.no_grad():  # index 0 of the history: the model at initialisation
            terms = model.elbo(data, beta * min(1.0, 1 / kl_warmup) if kl_warmup else beta)
        history["loss"].append(-terms.elbo.mean().item())
        history["reconstruction"].append(terms.reconstruction.mean().item())
        history["kl"].append(terms.kl.mean().item())
        history["beta"].append(beta * min(1.0, 1 / kl_warmup) if kl_warmup else beta)
        for epoch in tqdm(range(epochs), desc=f"VAE beta = {beta:g}", leave=False, disable=not progress):
            beta_now = beta * min(1.0, (epoch + 1) / kl_warmup) if kl_warmup else beta
            sums = np.zeros(3)
            for idx in torch.randperm(len(data)).split(batch_size):
                terms = model.elbo(data[idx], beta_now)
                loss = -terms.elbo.mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                sums += len(idx) * np.array(
                    [loss.item(), terms.reconstruction.mean().item(), terms.kl.mean().item()]
                )
            for key, value in zip(("loss", "reconstruction", "kl"), sums / len(data), strict=True):
                history[key].append(float(value))
            history["beta"].append(beta_now)
    return TrainedVAE(model, history)


def _check_vae(model) -> VAE:
    if not isinstance(model, VAE):
        raise TypeError(f"model must be a VAE, got {type(model).__name__}")
    return model


@torch.no_grad()
def evaluate_vae(model: VAE, X, samples: int = 10, rng=None) -> ELBOTerms:
    """The terms of the ELBO (β = 1) per example of binary X (n, d), each averaged over `samples` draws of ε
    (10.08): E_q log p(x|z) (a Monte Carlo mean), KL(q‖p) (exact) and their difference, as NumPy arrays (n,)."""
    model = _check_vae(model)
    X = _check_binary(X, "X", model.d_in)
    samples = check_int(samples, "samples", 1)
    rng = check_rng(rng)
    x = torch.tensor(X, dtype=torch.float32)
    model.eval()
    reconstruction = np.zeros(len(X))
    for _ in range(samples):
        eps = torch.tensor(rng.standard_normal((len(X), model.d_z)), dtype=torch.float32)
        terms = model.elbo(x, eps=eps)
        reconstruction += to_numpy(terms.reconstruction) / samples
    kl = to_numpy(terms.kl).astype(np.float64)
    return ELBOTerms(reconstruction, kl, reconstruction - kl)


@torch.no_grad()
def iwae_bound(model: VAE, X, K: int, rng=None) -> np.ndarray:
    """The importance-weighted bound (Burda et al.) per example of binary X (n, d) (10.08):
    :math:`\\mathcal L_K = \\mathbb E\\log\\frac1K\\sum_{i=1}^K\\frac{p_\\theta(x, z_i)}{q_\\phi(z_i\\mid x)}`,
    :math:`z_i\\sim q_\\phi(z\\mid x)`, one draw of the K samples; :math:`\\mathcal L_1` is the ELBO,
    :math:`\\mathcal L_K\\le\\mathcal L_{K+1}\\le\\log p_\\theta(x)`. Returns (n,)."""
    model = _check_vae(model)
    X = _check_binary(X, "X", model.d_in)
    K = check_int(K, "K", 1)
    rng = check_rng(rng)
    x = torch.tensor(X, dtype=torch.float32)
    model.eval()
    mu, var = model.encode(x)
    eps = torch.tensor(rng.standard_normal((K, *mu.shape)), dtype=torch.float32)
    z = mu + var.sqrt() * eps  # (K, n, d_z)
    log_px_z = -F.binary_cross_entropy_with_logits(
        model.decode(z), x.expand(K, -1, -1), reduction="none"
    ).sum(-1)
    log_pz = -0.5 * (z**2).sum(-1) - 0.5 * model.d_z * math.log(2 * math.pi)
    log_qz = (-0.5 * eps**2 - 0.5 * var.log() - 0.5 * math.log(2 * math.pi)).sum(-1)
    bound = torch.logsumexp(log_px_z + log_pz - log_qz, dim=0) - math.log(K)
    return to_numpy(bound).astype(np.float64)


def bernoulli_elbo_estimate(x, mu, var, eps, W, b) -> float:
    """The one-draw ELBO estimate of one example with a Bernoulli decoder with logits :math:`\\ell = Wz + b`
    (10.08): :math:`z = \\mu + \\sqrt{\\sigma^2}\\odot\\varepsilon`,
    :math:`\\sum_j [x_j\\log\\mathrm{sigmoid}(\\ell_j) + (1 - x_j)\\log\\mathrm{sigmoid}(-\\ell_j)] - \\mathrm{KL}` with
    the closed-form `diag_gauss_kl`. x (d,) binary, mu, var, eps (k,), W (d, k), b (d,)."""
    mu = check_vector(mu, "mu")
    k = mu.size
    var = check_vector(var, "var", k)
    eps = check_vector(eps, "eps", k)
    W = check_array(W, "W", (None, k))
    x = _check_binary(np.atleast_2d(x), "x", W.shape[0])[0]
    b = check_vector(b, "b", W.shape[0])
    logits = W @ (mu + np.sqrt(var) * eps) + b
    reconstruction = -np.sum(x * np.logaddexp(0, -logits) + (1 - x) * np.logaddexp(0, logits))
    return float(reconstruction - diag_gauss_kl(mu, var))


# ----------------------------------------------------------------------------- 10.3 normalising flows


class MaskedLinear(nn.Linear):
    """A dense layer whose weight is multiplied by a fixed 0/1 mask, :math:`y = (W\\odot M)x + b`; mask (n_out,
    n_in) (10.3, 10.4)."""

    def __init__(self, n_in: int, n_out: int, mask):
        n_in, n_out = check_int(n_in, "n_in", 1), check_int(n_out, "n_out", 1)
        super().__init__(n_in, n_out)
        mask = check_array(mask, "mask", (n_out, n_in))
        self.register_buffer("mask", torch.as_tensor(mask, dtype=self.weight.dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight * self.mask, self.bias)


def made_degrees(d: int, hidden: tuple[int, ...]) -> list[np.ndarray]:
    """The MADE degrees of the input (1..d), of every hidden layer (cycling through 1..d-1) and of the output
    (1..d): a hidden unit of degree m may see the inputs 1..m, an output of degree i only hidden units of degree
    < i, so output i depends on :math:`x_{<i}` only (10.3, 10.4)."""
    d = check_int(d, "d", 1)
    hidden = tuple(check_int(h, "hidden[...]", 1) for h in hidden)
    inner = max(d - 1, 1)
    return [np.arange(1, d + 1)] + [np.arange(h) % inner + 1 for h in hidden] + [np.arange(1, d + 1)]


class MADE(nn.Module):
    """A masked autoencoder for distribution estimation (Germain et al., 2015): a dense network x (n, d) ->
    (n, n_params, d) whose output ``[:, :, i]`` depends only on :math:`x_{<i}` (natural order), through masks
    :math:`M^{(l)}_{kj} = [m_l(k)\\ge m_{l-1}(j)]` and, for the output, :math:`[i > m_L(j)]` (10.3, 10.4)."""

    def __init__(self, d: int, hidden: tuple[int, ...] = (64,), n_params: int = 1, activation: str = "relu"):
        super().__init__()
        self.d = check_int(d, "d", 1)
        self.n_params = check_int(n_params, "n_params", 1)
        check_choice(activation, "activation", ("relu", "tanh"))
        degrees = made_degrees(self.d, tuple(hidden))
        layers: list[nn.Module] = []
        for m_in, m_out in zip(degrees[:-2], degrees[1:-1], strict=True):
            mask = (m_out[:, None] >= m_in[None, :]).astype(float)
            layers += [
                MaskedLinear(len(m_in), len(m_out), mask),
                nn.ReLU() if activation == "relu" else nn.Tanh(),
            ]
        m_last, m_out = degrees[-2], degrees[-1]
        out_mask = np.tile((m_out[:, None] > m_last[None, :]).astype(float), (self.n_params, 1))
        layers.append(MaskedLinear(len(m_last), self.n_params * self.d, out_mask))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim != 2 or x.shape[1] != self.d:
            raise ValueError(f"x must have shape (n, {self.d}), got {tuple(x.shape)}")
        return self.net(x).reshape(len(x), self.n_params, self.d)


def _standard_normal_log_prob(z: torch.Tensor) -> torch.Tensor:
    return -0.5 * (z**2).sum(dim=1) - 0.5 * z.shape[1] * math.log(2 * math.pi)


def _normal_draws(n: int, d: int, rng, like: torch.Tensor) -> torch.Tensor:
    n = check_int(n, "n", 1)
    z = check_rng(rng).standard_normal((n, d))
    return torch.as_tensor(z, dtype=like.dtype, device=like.device)


class _Flow(nn.Module):
    """What every flow of this chapter shares: ``forward(x) -> (z, log|det dz/dx|)``, ``inverse(z)`` and d.
    The density :math:`\\log p(x) = \\log\\mathcal N(z; 0, I) + \\log|\\det\\partial z/\\partial x|` and sampling
    by the inverse from :math:`z\\sim\\mathcal N(0, I)` follow from them."""

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        """:math:`\\log p(x)` (n,) for x (n, d)."""
        z, log_det = self(x)
        return _standard_normal_log_prob(z) + log_det

    @torch.no_grad()
    def sample(self, n: int, rng=None) -> np.ndarray:
        """n samples (n, d): z drawn from `rng`, mapped by the inverse."""
        like = next(self.parameters())
        return to_numpy(self.inverse(_normal_draws(n, self.d, rng, like)))


class MAF(_Flow):
    """A masked autoregressive flow layer: :math:`x_i = z_i e^{\\alpha_i} + \\mu_i` with
    :math:`(\\mu_i, \\alpha_i) = f(x_{<i})` from a MADE. The density pass :math:`z = (x-\\mu(x))\\odot
    e^{-\\alpha(x)}` is one network call, :math:`\\log|\\det\\partial z/\\partial x| = -\\sum_i\\alpha_i`;
    sampling inverts it with d sequential calls (pass k fixes :math:`x_k`). An IAF is the same map with the roles
    of x and z swapped (10.3)."""

    def __init__(self, d: int, hidden: tuple[int, ...] = (32,)):
        super().__init__()
        self.d = check_int(d, "d", 1)
        self.made = MADE(self.d, hidden, n_params=2, activation="tanh")

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The density pass x (n, d) -> (z (n, d), log|det dz/dx| (n,)), one call of the MADE."""
        mu, alpha = self.made(x).unbind(1)
        return (x - mu) * torch.exp(-alpha), -alpha.sum(dim=1)

    def inverse(self, z: torch.Tensor, passes: int | None = None) -> torch.Tensor:
        """The sampling direction z (n, d) -> x (n, d) by `passes` sequential MADE calls (d = exact)."""
        passes = self.d if passes is None else check_int(passes, "passes", 1)
        x = torch.zeros_like(z)
        for _ in range(passes):
            mu, alpha = self.made(x).unbind(1)
            x = z * torch.exp(alpha) + mu
        return x


def _check_halves(x, name: str) -> tuple[np.ndarray, int]:
    x = check_array(x, name, ndim=2)
    if x.shape[1] < 2:
        raise ValueError(f"{name} must have shape (n, d) with d >= 2, got shape {x.shape}")
    return x, x.shape[1] // 2


def _coupling_params(s_fn, t_fn, a: np.ndarray, d_b: int) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(check_callable(s_fn, "s_fn")(a), dtype=float)
    t = np.asarray(check_callable(t_fn, "t_fn")(a), dtype=float)
    for value, name in ((s, "s_fn"), (t, "t_fn")):
        if value.shape != (len(a), d_b):
            raise ValueError(f"{name}(x_a) must return shape ({len(a)}, {d_b}), got {value.shape}")
    return s, t


def affine_coupling(x, s_fn: Callable, t_fn: Callable) -> tuple[np.ndarray, np.ndarray]:
    """An affine coupling layer in NumPy, x = (x_a, x_b) split after the first d//2 columns:
    :math:`y_a = x_a`, :math:`y_b = x_b\\odot e^{s(x_a)} + t(x_a)`; returns (y (n, d), log|det J| =
    :math:`\\sum_j s_j(x_a)` (n,)). s_fn, t_fn map (n, d//2) -> (n, d - d//2) (10.3)."""
    x, m = _check_halves(x, "x")
    a, b = x[:, :m], x[:, m:]
    s, t = _coupling_params(s_fn, t_fn, a, b.shape[1])
    return np.concatenate([a, b * np.exp(s) + t], axis=1), s.sum(axis=1)


def affine_coupling_inverse(y, s_fn: Callable, t_fn: Callable) -> tuple[np.ndarray, np.ndarray]:
    """The inverse of `affine_coupling`: :math:`x_a = y_a`, :math:`x_b = (y_b - t(y_a))\\odot e^{-s(y_a)}`;
    returns (x (n, d), log|det J_inverse| = :math:`-\\sum_j s_j(y_a)` (n,)) (10.3)."""
    y, m = _check_halves(y, "y")
    a, b = y[:, :m], y[:, m:]
    s, t = _coupling_params(s_fn, t_fn, a, b.shape[1])
    return np.concatenate([a, (b - t) * np.exp(-s)], axis=1), -s.sum(axis=1)


class AffineCoupling(nn.Module):
    """The RealNVP coupling layer with a 0/1 mask b (d,) (1 = passed through and conditioned on):
    :math:`y = b\\odot x + (1-b)\\odot\\big(x\\odot e^{s(b\\odot x)} + t(b\\odot x)\\big)`,
    :math:`\\log|\\det J| = \\sum_j (1-b_j)\\,s_j(b\\odot x)`; s is a tanh times a learned scale, s and t share
    one hidden layer of width `hidden` (10.3)."""

    def __init__(self, mask, hidden: int = 64):
        super().__init__()
        mask = check_vector(mask, "mask")
        if not np.isin(mask, (0, 1)).all() or mask.min() == mask.max():
            raise ValueError(f"mask must hold both 0s and 1s and nothing else, got {mask}")
        d, hidden = mask.size, check_int(hidden, "hidden", 1)
        self.register_buffer("b", torch.as_tensor(mask, dtype=torch.get_default_dtype()))
        self.net = nn.Sequential(
            nn.Linear(d, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 2 * d)
        )
        self.scale = nn.Parameter(torch.ones(d))
        nn.init.zeros_(self.net[-1].weight)  # start at the identity map
        nn.init.zeros_(self.net[-1].bias)

    def _s_t(self, x_a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        s_raw, t = self.net(x_a).chunk(2, dim=1)
        return (1 - self.b) * self.scale * torch.tanh(s_raw), (1 - self.b) * t

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x (n, d) -> (y (n, d), log|det dy/dx| (n,))."""
        s, t = self._s_t(self.b * x)
        return self.b * x + (1 - self.b) * (x * torch.exp(s) + t), s.sum(dim=1)

    def inverse(self, y: torch.Tensor) -> torch.Tensor:
        """y (n, d) -> x (n, d): :math:`x = b\\odot y + (1-b)\\odot(y - t)\\odot e^{-s}`, s, t from b ⊙ y."""
        s, t = self._s_t(self.b * y)
        return self.b * y + (1 - self.b) * (y - t) * torch.exp(-s)


class RealNVP(_Flow):
    """A stack of `n_layers` affine couplings with alternating masks, read in the normalising direction
    :math:`z = T^{-1}(x)`: :math:`\\log p(x) = \\log\\mathcal N(T^{-1}(x); 0, I) + \\sum_\\ell \\log|\\det J_\\ell|`;
    sampling runs the inverses backwards from :math:`z\\sim\\mathcal N(0, I)` (Dinh et al., 2017) (10.3)."""

    def __init__(self, d: int = 2, n_layers: int = 6, hidden: int = 64):
        super().__init__()
        self.d = check_int(d, "d", 2)
        n_layers = check_int(n_layers, "n_layers", 1)
        first = (np.arange(self.d) < self.d // 2).astype(float)
        self.layers = nn.ModuleList(
            AffineCoupling(first if k % 2 == 0 else 1 - first, hidden) for k in range(n_layers)
        )

    def forward(self, x: torch.Tensor, upto: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """x (n, d) -> (z (n, d), summed log|det| (n,)) through the first `upto` layers (all by default)."""
        log_det = torch.zeros(len(x), dtype=x.dtype, device=x.device)
        for layer in self.layers[:upto]:
            x, ld = layer(x)
            log_det = log_det + ld
        return x, log_det

    def inverse(self, z: torch.Tensor, upto: int | None = None) -> torch.Tensor:
        """z (n, d) -> x (n, d), the inverse of ``forward(., upto)``."""
        for layer in reversed(self.layers[:upto]):
            z = layer.inverse(z)
        return z


class DensityFit(NamedTuple):
    train_nll: np.ndarray  # (epochs,) mean negative log-likelihood per example on the training set, in nats
    val_nll: np.ndarray  # (epochs,) the same on X_val (empty without X_val)


def fit_density(
    model: nn.Module,
    X,
    X_val=None,
    *,
    epochs: int = 100,
    batch_size: int = 256,
    lr: float = 1e-3,
    weight_decay: float = 0.0,
    rng=None,
) -> DensityFit:
    """Maximum likelihood: minimise :math:`-\\frac1n\\sum_i\\log p_\\theta(x_i)` with Adam over mini-batches of
    X (n, d); `model` has a ``log_prob(x) -> (n,)``. Returns the mean NLL per epoch (10.3, 10.4)."""
    if not isinstance(model, nn.Module) or not callable(getattr(model, "log_prob", None)):
        raise TypeError(f"model must be a torch.nn.Module with a log_prob method, got {type(model).__name__}")
    epochs = check_int(epochs, "epochs", 1)
    X = check_array(X, "X", ndim=2)
    lr = check_positive(lr, "lr")
    param = next(model.parameters())
    loader = make_loader(X, batch_size=batch_size, dtype=param.dtype, rng=rng)
    X_val_t = None
    if X_val is not None:
        X_val_t = torch.as_tensor(
            check_array(X_val, "X_val", (None, X.shape[1])), dtype=param.dtype, device=param.device
        )
    optimizer = torch.optim.Adam(
        model.parameters(), lr=lr, weight_decay=check_number(weight_decay, "weight_decay", 0)
    )
    train, val = [], []
    bar = tqdm(range(epochs), desc="epochs", leave=False)
    for _ in bar:
        model.train()
        total = 0.0
        for (xb,) in loader:
            loss = -model.log_prob(xb.to(param.device)).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * len(xb)
        train.append(total / len(X))
        if X_val_t is not None:
            model.eval()
            with torch.no_grad():
                val.append(-model.log_prob(X_val_t).mean().item())
        bar.set_postfix(nll=f"{train[-1]:.3f}")
    model.eval()
    return DensityFit(np.array(train), np.array(val))


# ----------------------------------------------------------------------------- 10.4 autoregressive models


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


# ----------------------------------------------------------------------------- 10.5 GANs: the game and its optimum


def _check_density(p, name: str, n: int | None = None) -> np.ndarray:
    p = check_vector(p, name, n)
    if np.any(p < 0):
        raise ValueError(f"{name} must be a density or probabilities (>= 0), got a minimum of {p.min():.3g}")
    return p


def optimal_discriminator(p, q) -> np.ndarray:
    """The optimal discriminator :math:`D^*(x) = \\frac{p(x)}{p(x) + p_\\theta(x)}` (10.21) of the data density p
    against the generator's density q = :math:`p_\\theta`, both given on the same grid (n,); 1/2 where both
    vanish (there V does not depend on D)."""
    p = _check_density(p, "p")
    q = _check_density(q, "q", p.size)
    total = p + q
    return np.divide(p, total, out=np.full_like(p, 0.5), where=total > 0)


def gan_value(D, p, q, dx: float = 1.0) -> float:
    """The value of the GAN game (10.20) by quadrature on a grid,
    :math:`V(D, G) = \\int p(x)\\ln D(x) + p_\\theta(x)\\ln(1 - D(x))\\,dx \\approx \\sum_i [p_i\\ln D_i
    + q_i\\ln(1 - D_i)]\\,dx`, for the discriminator's values D (n,) in (0, 1) and densities p, q (n,) on the
    same grid of spacing dx (dx = 1 for probabilities); terms where a density vanishes count 0, and D is kept
    within one rounding step of 0 and 1 (an optimal D rounds to 1 where the generator's density is negligible)."""
    p = _check_density(p, "p")
    q = _check_density(q, "q", p.size)
    D = check_vector(D, "D", p.size)
    if np.any(D < 0) or np.any(D > 1):
        raise ValueError(f"D must hold values in [0, 1], got values from {D.min():.3g} to {D.max():.3g}")
    dx = check_positive(dx, "dx")
    # D rounded to exactly 0 or 1 where the other density is negligible (far tails) would give 0 · (-inf)
    D = np.clip(D, np.finfo(float).tiny, 1 - np.finfo(float).epsneg)
    real = np.where(p > 0, p * np.log(D), 0.0)
    fake = np.where(q > 0, q * np.log1p(-D), 0.0)
    return float(np.sum(real + fake) * dx)


def js_div(p, q, dx: float = 1.0) -> float:
    """The Jensen–Shannon divergence (10.22) in nats, :math:`\\mathrm{JS}(p\\Vert q) = \\frac12\\mathrm{KL}(p\\Vert m)
    + \\frac12\\mathrm{KL}(q\\Vert m)`, :math:`m = \\frac{p+q}2`, by quadrature of densities p, q (n,) on a grid of
    spacing dx (dx = 1: probabilities). :math:`0 \\le \\mathrm{JS} \\le \\ln 2`."""
    p = _check_density(p, "p")
    q = _check_density(q, "q", p.size)
    dx = check_positive(dx, "dx")
    m = 0.5 * (p + q)

    def kl_to_m(a):
        return np.sum(np.where(a > 0, a * np.log(np.where(a > 0, a, 1.0) / np.where(a > 0, m, 1.0)), 0.0))

    return float(0.5 * (kl_to_m(p) + kl_to_m(q)) * dx)


GAME_METHODS = ("simultaneous", "alternating", "extragradient")


def _grad_pair(grad, theta, phi):
    g = grad(theta, phi)
    if not (isinstance(g, tuple | list) and len(g) == 2):
        raise ValueError(f"grad(theta, phi) must return the pair (dl/dtheta, dl/dphi), got {g!r:.80}")
    return np.asarray(g[0], dtype=float), np.asarray(g[1], dtype=float)


def game_step(grad: Callable, theta, phi, eta: float, method: str = "simultaneous"):
    """One step of gradient play on :math:`\\min_\\theta\\max_\\phi\\ell(\\theta, \\phi)` (10.24); `grad(theta, phi)`
    returns :math:`(\\nabla_\\theta\\ell, \\nabla_\\phi\\ell)`. Returns the new (theta, phi).

    ``"simultaneous"``: :math:`\\theta' = \\theta - \\eta\\nabla_\\theta\\ell(\\theta, \\phi)`,
    :math:`\\phi' = \\phi + \\eta\\nabla_\\phi\\ell(\\theta, \\phi)`.
    ``"alternating"``: :math:`\\theta' = \\theta - \\eta\\nabla_\\theta\\ell(\\theta, \\phi)`, then
    :math:`\\phi' = \\phi + \\eta\\nabla_\\phi\\ell(\\theta', \\phi)`.
    ``"extragradient"``: a look-ahead simultaneous step to :math:`(\\theta_{1/2}, \\phi_{1/2})`, then
    :math:`\\theta' = \\theta - \\eta\\nabla_\\theta\\ell(\\theta_{1/2}, \\phi_{1/2})`,
    :math:`\\phi' = \\phi + \\eta\\nabla_\\phi\\ell(\\theta_{1/2}, \\phi_{1/2})` (both at the look-ahead point)."""
    check_callable(grad, "grad")
    theta, phi = np.asarray(theta, dtype=float), np.asarray(phi, dtype=float)
    eta = check_positive(eta, "eta")
    method = check_choice(method, "method", GAME_METHODS)
    g_theta, g_phi = _grad_pair(grad, theta, phi)
    if method == "simultaneous":
        return theta - eta * g_theta, phi + eta * g_phi
    if method == "alternating":
        theta_new = theta - eta * g_theta
        return theta_new, phi + eta * _grad_pair(grad, theta_new, phi)[1]
    theta_half, phi_half = theta - eta * g_theta, phi + eta * g_phi
    g_theta, g_phi = _grad_pair(grad, theta_half, phi_half)
    return theta - eta * g_theta, phi + eta * g_phi


def play_game(grad: Callable, z0, eta: float, steps: int, method: str = "simultaneous") -> np.ndarray:
    """`steps` steps of `game_step` (10.24) from z0 = (theta_0, phi_0) for two scalar players; returns the
    iterates (steps + 1, 2), one row (theta_t, phi_t) per step, the first z0 (may grow without bound)."""
    check_callable(grad, "grad")
    z0 = check_vector(z0, "z0", 2)
    eta = check_positive(eta, "eta")
    steps = check_int(steps, "steps", 0)
    method = check_choice(method, "method", GAME_METHODS)
    path = np.empty((steps + 1, 2))
    path[0] = z0
    theta, phi = z0
    with np.errstate(over="ignore", invalid="ignore"):
        for t in range(1, steps + 1):
            theta, phi = game_step(grad, theta, phi, eta, method)
            path[t] = theta, phi
    return path


class SaturationGrads(NamedTuple):
    saturating: np.ndarray  # d/da ln(1 - sigmoid(a)) = -sigmoid(a): the minimax generator loss
    non_saturating: np.ndarray  # d/da ln sigmoid(a) = 1 - sigmoid(a): the non-saturating loss


def generator_logit_grads(a) -> SaturationGrads:
    """The gradients of the generator's two losses with respect to the discriminator's logit a, D = σ(a)
    (10.25): :math:`\\partial_a\\ln(1-\\sigma(a)) = -\\sigma(a)` (minimax, it vanishes as a → −∞, where a poor
    generator starts) and :math:`\\partial_a\\ln\\sigma(a) = 1-\\sigma(a)` (non-saturating, → 1). a: any shape."""
    a = check_array(a, "a")
    s = expit(a)
    return SaturationGrads(-s, 1 - s)


# ----------------------------------------------------------------------------- 10.5 training GANs: mode collapse, Wasserstein, gradient penalty


def w1_1d(a, b) -> float:
    """The Wasserstein-1 distance (10.28) between two empirical distributions on the line with n points each:
    the optimal coupling matches them in sorted order, :math:`W_1 = \\frac1n\\sum_i|a_{(i)} - b_{(i)}|`.
    a, b (n,)."""
    a = check_vector(a, "a")
    b = check_vector(b, "b", a.size)
    return float(np.mean(np.abs(np.sort(a) - np.sort(b))))


def ring_mixture(k: int = 8, radius: float = 2.0, std: float = 0.05) -> GaussianMixture:
    """The k-Gaussian ring (10.5): equal weights, means :math:`r(\\cos\\frac{2\\pi j}k, \\sin\\frac{2\\pi j}k)`,
    j = 0..k-1, covariance std² I (2-D)."""
    k = check_int(k, "k", 1)
    radius, std = check_positive(radius, "radius"), check_positive(std, "std")
    angles = 2 * np.pi * np.arange(k) / k
    means = radius * np.stack([np.cos(angles), np.sin(angles)], axis=1)
    return gaussian_mixture(np.full(k, 1 / k), means, np.tile(std**2 * np.eye(2), (k, 1, 1)))


class ModeCoverage(NamedTuple):
    covered: int  # modes that received at least min_fraction of the samples
    counts: np.ndarray  # (K,) samples within `radius` of each mode
    high_quality: float  # fraction of all samples within `radius` of some mode


def modes_covered(X, centres, radius: float, min_fraction: float = 0.02) -> ModeCoverage:
    """Mode coverage of samples X (n, d) (10.26): a sample belongs to its nearest centre (K, d) if it lies within
    `radius` of it; a mode counts as covered if at least min_fraction · n samples belong to it."""
    centres = check_array(centres, "centres", (None, None))
    X = check_array(X, "X", (None, centres.shape[1]))
    radius = check_positive(radius, "radius")
    min_fraction = check_number(min_fraction, "min_fraction", 0, 1, low_open=True)
    dist = np.linalg.norm(X[:, None, :] - centres[None], axis=2)  # (n, K)
    nearest, close_enough = dist.argmin(axis=1), dist.min(axis=1) <= radius
    counts = np.bincount(nearest[close_enough], minlength=len(centres))
    return ModeCoverage(int(np.sum(counts >= min_fraction * len(X))), counts, float(close_enough.mean()))


def mmd2(X, Y, bandwidth: float) -> float:
    """The unbiased squared maximum mean discrepancy (10.5; Gretton et al. 2012) with the Gaussian kernel
    :math:`k(x, y) = \\exp(-\\|x-y\\|^2/2h^2)`, h = bandwidth, between samples X (n, d) and Y (m, d):
    :math:`\\frac1{n(n-1)}\\sum_{i\\ne j}k(x_i,x_j) + \\frac1{m(m-1)}\\sum_{i\\ne j}k(y_i,y_j)
    - \\frac2{nm}\\sum_{i,j}k(x_i,y_j)` (can be slightly negative when the distributions agree)."""
    X = check_array(X, "X", (None, None))
    Y = check_array(Y, "Y", (None, X.shape[1]))
    if len(X) < 2 or len(Y) < 2:
        raise ValueError(f"X and Y need at least 2 rows each, got {len(X)} and {len(Y)}")
    h = check_positive(bandwidth, "bandwidth")

    def kernel(A, B):
        sq = (A**2).sum(1)[:, None] + (B**2).sum(1)[None] - 2 * A @ B.T
        return np.exp(-np.maximum(sq, 0) / (2 * h**2))

    n, m = len(X), len(Y)
    K_xx, K_yy = kernel(X, X), kernel(Y, Y)
    within = (K_xx.sum() - np.trace(K_xx)) / (n * (n - 1)) + (K_yy.sum() - np.trace(K_yy)) / (m * (m - 1))
    return float(within - 2 * kernel(X, Y).mean())


def gan_mlp(sizes, out: str = "identity", rng=None) -> nn.Sequential:
    """An MLP for widths ``sizes = [n, m_1, ..., m_L]`` with LeakyReLU(0.2) between the ``nn.Linear`` layers and
    `out` ("identity" or "sigmoid") after the last: a generator, a discriminator (its logit) or a critic (10.5).
    The weights follow torch's default initialisation, drawn from `rng` (torch's global generator is untouched)."""
    sizes = [check_int(k, "sizes entries", 1) for k in sizes]
    if len(sizes) < 2:
        raise ValueError(f"sizes must list at least two widths [n, ..., m_L], got {sizes!r}")
    out = check_choice(out, "out", ("identity", "sigmoid"))
    init = torch.Generator().manual_seed(int(check_rng(rng).integers(2**31)))
    layers: list[nn.Module] = []
    for l in range(len(sizes) - 1):
        linear = nn.Linear(sizes[l], sizes[l + 1], device="meta").to_empty(device="cpu")
        bound = 1 / math.sqrt(sizes[l])
        with torch.no_grad():
            linear.weight.uniform_(-bound, bound, generator=init)
            linear.bias.uniform_(-bound, bound, generator=init)
        layers += [linear, nn.LeakyReLU(0.2)] if l < len(sizes) - 2 else [linear]
    if out == "sigmoid":
        layers.append(nn.Sigmoid())
    return nn.Sequential(*layers)


def _uniform_like(x: torch.Tensor, rng) -> torch.Tensor:
    u = check_rng(rng).random((x.shape[0], 1))
    return torch.as_tensor(u, dtype=x.dtype, device=x.device)


def gradient_penalty(critic: Callable, real, fake, lam: float = 10.0, alpha=None, rng=None) -> torch.Tensor:
    """The WGAN-GP penalty (10.29) :math:`\\lambda\\,\\mathbb E_{\\hat x}(\\|\\nabla_{\\hat x}f(\\hat x)\\|_2 - 1)^2` at
    :math:`\\hat x = \\alpha x + (1-\\alpha)\\tilde x`, one :math:`\\alpha\\sim U[0,1]` per row (drawn from `rng`
    unless given, (n, 1)), for real x and fake :math:`\\tilde x` tensors (n, d) and a critic f: (n, d) -> (n, 1).
    Returns a scalar tensor that backpropagates into the critic (create_graph=True)."""
    check_callable(critic, "critic")
    lam = check_number(lam, "lam", 0)
    if not (isinstance(real, torch.Tensor) and isinstance(fake, torch.Tensor)):
        raise TypeError(
            f"real and fake must be torch tensors, got {type(real).__name__}, {type(fake).__name__}"
        )
    if real.ndim != 2 or real.shape != fake.shape:
        raise ValueError(
            f"real and fake must be tensors of one shape (n, d), got {tuple(real.shape)}, {tuple(fake.shape)}"
        )
    if alpha is None:
        alpha = _uniform_like(real, rng)
    alpha = torch.as_tensor(alpha, dtype=real.dtype, device=real.device)
    if alpha.shape != (real.shape[0], 1):
        raise ValueError(f"alpha must have shape ({real.shape[0]}, 1), got {tuple(alpha.shape)}")
    x_hat = (alpha * real.detach() + (1 - alpha) * fake.detach()).requires_grad_(True)
    (grad,) = torch.autograd.grad(critic(x_hat).sum(), x_hat, create_graph=True)
    return lam * ((grad.norm(dim=1) - 1) ** 2).mean()


class TrainedGAN(NamedTuple):
    G: nn.Sequential  # the generator: latent z (n, k) -> samples (n, d)
    D: nn.Sequential  # the discriminator: samples (n, d) -> logit (non-saturating) or critic (WGAN-GP) (n, 1)
    history: dict  # "d_loss", "g_loss": one value per generator step


GAN_LOSSES = ("non-saturating", "wgan-gp")


def train_gan(
    X,
    loss: str = "non-saturating",
    *,
    k: int = 2,
    hidden: int = 64,
    depth: int = 2,
    out: str = "identity",
    steps: int = 1000,
    n_critic: int | None = None,
    batch_size: int = 128,
    lr: float = 1e-3,
    lam: float = 10.0,
    rng=None,
    progress: bool = True,
) -> TrainedGAN:
    """A GAN trained on the rows of X (n, d) (10.5): generator `gan_mlp` [k, hidden × depth, d] with output `out`
    from z ~ N(0, I_k), discriminator [d, hidden × depth, 1], Adam (betas 0.5, 0.9), `steps` generator steps, each
    after `n_critic` discriminator steps (1 for the non-saturating GAN, 5 for WGAN-GP by default).

    ``"non-saturating"``: D maximises :math:`\\mathbb E\\ln D(x) + \\mathbb E\\ln(1-D(G(z)))`, G maximises
    :math:`\\mathbb E\\ln D(G(z))`, D = σ(logit). ``"wgan-gp"``: the critic f minimises
    :math:`\\mathbb E f(G(z)) - \\mathbb E f(x) + ` `gradient_penalty` (weight lam), G minimises
    :math:`-\\mathbb E f(G(z))`. Weights, batches and noise all come from `rng`."""
    X = check_matrix(X, "X")
    loss = check_choice(loss, "loss", GAN_LOSSES)
    k, hidden, depth = check_int(k, "k", 1), check_int(hidden, "hidden", 1), check_int(depth, "depth", 1)
    steps, batch_size = check_int(steps, "steps", 1), check_int(batch_size, "batch_size", 1)
    if n_critic is None:
        n_critic = 1 if loss == "non-saturating" else 5
    n_critic = check_int(n_critic, "n_critic", 1)
    lr, lam = check_positive(lr, "lr"), check_number(lam, "lam", 0)
    rng = check_rng(rng)
    d = X.shape[1]
    G = gan_mlp([k] + [hidden] * depth + [d], out, rng).to(device())
    D = gan_mlp([d] + [hidden] * depth + [1], "identity", rng).to(device())
    dev = device()
    X_t = torch.as_tensor(X, dtype=torch.float32, device=dev)
    torch_rng = torch.Generator(device=dev).manual_seed(int(rng.integers(2**31)))
    opt_G = torch.optim.Adam(G.parameters(), lr=lr, betas=(0.5, 0.9))
    opt_D = torch.optim.Adam(D.parameters(), lr=lr, betas=(0.5, 0.9))
    bce = nn.functional.binary_cross_entropy_with_logits
    history: dict[str, list[float]] = {"d_loss": [], "g_loss": []}

    def noise():
        return torch.randn(batch_size, k, generator=torch_rng, device=dev)

    for _ in tqdm(range(steps), desc="generator steps", disable=not progress, leave=False):
        for _ in range(n_critic):
            rows = torch.randint(len(X_t), (batch_size,), generator=torch_rng, device=dev)
            real, fake = X_t[rows], G(noise()).detach()
            if loss == "non-saturating":
                d_real, d_fake = D(real), D(fake)
                d_loss = bce(d_real, torch.ones_like(d_real)) + bce(d_fake, torch.zeros_like(d_fake))
            else:
                alpha = torch.rand(batch_size, 1, generator=torch_rng, device=dev)
                d_loss = D(fake).mean() - D(real).mean() + gradient_penalty(D, real, fake, lam, alpha)
            opt_D.zero_grad()
            d_loss.backward()
            opt_D.step()
        d_fake = D(G(noise()))
        g_loss = bce(d_fake, torch.ones_like(d_fake)) if loss == "non-saturating" else -d_fake.mean()
        opt_G.zero_grad()
        g_loss.backward()
        opt_G.step()
        history["d_loss"].append(d_loss.item())
        history["g_loss"].append(g_loss.item())
    return TrainedGAN(G.eval(), D.eval(), history)


@torch.no_grad()
def gan_sample(G: nn.Module, n: int, rng=None) -> np.ndarray:
    """n samples G(z), z ~ N(0, I_k) drawn from `rng`, of a trained generator G (k read from its first layer), as
    a numpy array (n, d)."""
    if not isinstance(G, nn.Module):
        raise TypeError(f"G must be a torch.nn.Module (a generator), got {type(G).__name__}")
    n = check_int(n, "n", 1)
    k = next(m for m in G.modules() if isinstance(m, nn.Linear)).in_features
    dev = model_device(G)
    z = torch.as_tensor(check_rng(rng).standard_normal((n, k)), dtype=torch.float32, device=dev)
    return to_numpy(G(z)).astype(np.float64)


def train_critic(
    X,
    Y,
    *,
    constraint: str = "penalty",
    lam: float = 10.0,
    clip: float = 0.01,
    hidden: int = 64,
    depth: int = 2,
    steps: int = 1000,
    batch_size: int = 256,
    lr: float = 1e-3,
    rng=None,
    progress: bool = True,
) -> nn.Sequential:
    """A critic f = `gan_mlp` [d, hidden × depth, 1] that maximises :math:`\\mathbb E_X f - \\mathbb E_Y f` over
    mini-batches of the rows of X (n, d) and Y (m, d) with Adam (10.28, 10.29). Its Lipschitz constant is held by
    ``constraint="penalty"`` (minus `gradient_penalty` with weight lam: the gap estimates :math:`W_1`) or
    ``"clip"`` (every weight clipped to [-clip, clip] after each step: the gap estimates :math:`K\\cdot W_1` for an
    unknown K set by clip and the architecture). Returns the critic in eval mode."""
    X = check_matrix(X, "X")
    Y = check_matrix(Y, "Y", cols=X.shape[1])
    constraint = check_choice(constraint, "constraint", ("penalty", "clip"))
    lam, clip = check_number(lam, "lam", 0), check_positive(clip, "clip")
    hidden, depth = check_int(hidden, "hidden", 1), check_int(depth, "depth", 1)
    steps, batch_size = check_int(steps, "steps", 1), check_int(batch_size, "batch_size", 1)
    lr = check_positive(lr, "lr")
    rng = check_rng(rng)
    dev = device()
    f = gan_mlp([X.shape[1]] + [hidden] * depth + [1], "identity", rng).to(dev)
    X_t = torch.as_tensor(X, dtype=torch.float32, device=dev)
    Y_t = torch.as_tensor(Y, dtype=torch.float32, device=dev)
    torch_rng = torch.Generator(device=dev).manual_seed(int(rng.integers(2**31)))
    opt = torch.optim.Adam(f.parameters(), lr=lr, betas=(0.5, 0.9))
    for _ in tqdm(range(steps), desc="critic steps", disable=not progress, leave=False):
        real = X_t[torch.randint(len(X_t), (batch_size,), generator=torch_rng, device=dev)]
        fake = Y_t[torch.randint(len(Y_t), (batch_size,), generator=torch_rng, device=dev)]
        objective = f(fake).mean() - f(real).mean()
        if constraint == "penalty":
            alpha = torch.rand(batch_size, 1, generator=torch_rng, device=dev)
            objective = objective + gradient_penalty(f, real, fake, lam, alpha)
        opt.zero_grad()
        objective.backward()
        opt.step()
        if constraint == "clip":
            with torch.no_grad():
                for p in f.parameters():
                    p.clamp_(-clip, clip)
    return f.eval()


class CriticScores(NamedTuple):
    gap: float  # mean f(X) - mean f(Y): the critic's estimate of (K times) W_1
    grad_norms: np.ndarray  # (n,) ||grad f|| at the interpolates alpha x_i + (1 - alpha) y_i


def critic_scores(critic: nn.Module, X, Y, rng=None) -> CriticScores:
    """The gap :math:`\\frac1n\\sum f(x_i) - \\frac1n\\sum f(y_i)` of a critic on samples X, Y (n, d) and the gradient
    norms :math:`\\|\\nabla f(\\hat x_i)\\|` at :math:`\\hat x_i = \\alpha_i x_i + (1-\\alpha_i)y_i`,
    :math:`\\alpha_i\\sim U[0,1]` from `rng` (10.29)."""
    check_callable(critic, "critic")
    X = check_matrix(X, "X")
    Y = check_matrix(Y, "Y", len(X), X.shape[1])
    dev = model_device(critic)
    X_t = torch.as_tensor(X, dtype=torch.float32, device=dev)
    Y_t = torch.as_tensor(Y, dtype=torch.float32, device=dev)
    alpha = _uniform_like(X_t, rng)
    x_hat = (alpha * X_t + (1 - alpha) * Y_t).requires_grad_(True)
    (grad,) = torch.autograd.grad(critic(x_hat).sum(), x_hat)
    with torch.no_grad():
        gap = (critic(X_t).mean() - critic(Y_t).mean()).item()
    return CriticScores(gap, to_numpy(grad.norm(dim=1)).astype(np.float64))


# ----------------------------------------------------------------------------- 10.6 diffusion: forward process, bound, reverse posterior


def forward_chains(x0, schedule: Schedule, record, rng=None) -> np.ndarray:
    """Run the forward chain :math:`x_t = \\sqrt{1-\\beta_t}\\,x_{t-1} + \\sqrt{\\beta_t}\\,\\varepsilon_t` step by
    step (10.30) from the rows of x0 (n, d) and return the states at the steps ``record`` (a list of
    integers in 0..T), shape (len(record), n, d)."""
    x = check_array(x0, "x0", (None, None))
    schedule = _check_schedule(schedule)
    record = [check_int(t, "record", 0, schedule.T) for t in record]
    if not record:
        raise ValueError("record must name at least one step in 0..T")
    rng = check_rng(rng)
    states, noise = {0: x.copy()}, np.empty_like(x)
    for t in range(1, max(record) + 1):
        rng.standard_normal(out=noise)
        x *= math.sqrt(schedule.alpha[t])  # in place: x is check_array's copy
        x += math.sqrt(schedule.beta[t]) * noise
        if t in record:
            states[t] = x.copy()
    return np.stack([states[t] for t in record])


def second_moment(c: float, schedule: Schedule) -> np.ndarray:
    """The per-coordinate second moment :math:`m_t = \\mathbb E\\|x_t\\|^2/d` of the forward process (10.31) by
    the recursion :math:`m_t = (1-\\beta_t)m_{t-1} + \\beta_t`, :math:`m_0 = c = \\mathbb E\\|x_0\\|^2/d`;
    returns (T + 1,), t = 0..T."""
    c = check_number(c, "c", 0)
    schedule = _check_schedule(schedule)
    m = np.empty(schedule.T + 1)
    m[0] = c
    for t in range(1, schedule.T + 1):
        m[t] = schedule.alpha[t] * m[t - 1] + schedule.beta[t]
    return m


class Posterior(NamedTuple):
    mean: np.ndarray  # (n, d) the mean mu_tilde_t of q(x_{t-1} | x_t, x_0)
    var: float  # beta_tilde_t, the same for every coordinate


def q_posterior(x0, x_t, t: int, schedule: Schedule) -> Posterior:
    """The reverse posterior :math:`q(x_{t-1}\\mid x_t, x_0) = \\mathcal N(\\tilde\\mu_t, \\tilde\\beta_t I)` (10.34),
    :math:`\\tilde\\mu_t = \\frac{\\sqrt{\\bar\\alpha_{t-1}}\\beta_t}{1-\\bar\\alpha_t}x_0
    + \\frac{\\sqrt{\\alpha_t}(1-\\bar\\alpha_{t-1})}{1-\\bar\\alpha_t}x_t`,
    :math:`\\tilde\\beta_t = \\frac{1-\\bar\\alpha_{t-1}}{1-\\bar\\alpha_t}\\beta_t`; x0 and x_t (n, d), t in 1..T."""
    schedule = _check_schedule(schedule)
    t = check_int(t, "t", 1, schedule.T)
    x0 = check_array(x0, "x0", (None, None))
    x_t = check_array(x_t, "x_t", x0.shape)
    beta, alpha, a_bar = schedule.beta[t], schedule.alpha[t], schedule.alpha_bar
    mean = (math.sqrt(a_bar[t - 1]) * beta * x0 + math.sqrt(alpha) * (1 - a_bar[t - 1]) * x_t) / (
        1 - a_bar[t]
    )
    return Posterior(mean, float((1 - a_bar[t - 1]) / (1 - a_bar[t]) * beta))


def mean_from_eps(x_t, eps, t: int, schedule: Schedule) -> np.ndarray:
    """The reverse-posterior mean written with the noise (10.35),
    :math:`\\tilde\\mu_t = \\frac1{\\sqrt{\\alpha_t}}\\big(x_t - \\frac{\\beta_t}{\\sqrt{1-\\bar\\alpha_t}}\\varepsilon\\big)`
    (with a predicted :math:`\\varepsilon_\\theta` in place of ε it is the model's mean :math:`\\mu_\\theta`);
    x_t and eps (n, d), t in 1..T."""
    schedule = _check_schedule(schedule)
    t = check_int(t, "t", 1, schedule.T)
    x_t = check_array(x_t, "x_t", (None, None))
    eps = check_array(eps, "eps", x_t.shape)
    beta, alpha, a_bar = schedule.beta[t], schedule.alpha[t], schedule.alpha_bar[t]
    return (x_t - beta / math.sqrt(1 - a_bar) * eps) / math.sqrt(alpha)


class ReverseKernels(NamedTuple):
    a: np.ndarray  # (T + 1,) p(x_{t-1} | x_t) = N(a[t] x_t + b[t], var[t]) for t = 1..T (index 0 unused)
    b: np.ndarray  # (T + 1,)
    var: np.ndarray  # (T + 1,)
    prior_mean: float  # p(x_T) = N(prior_mean, prior_var)
    prior_var: float


def gaussian_reverse_kernels(mean: float, var: float, schedule: Schedule) -> ReverseKernels:
    """The exact reverse kernels :math:`q(x_{t-1}\\mid x_t)` and the marginal :math:`q(x_T)` of the forward
    process for 1-D Gaussian data :math:`x_0\\sim\\mathcal N(m, v)` (10.33), by Gaussian conditioning of
    :math:`x_t = \\sqrt{\\alpha_t}x_{t-1} + \\sqrt{\\beta_t}\\varepsilon` with
    :math:`x_{t-1}\\sim\\mathcal N(\\sqrt{\\bar\\alpha_{t-1}}m, v_{t-1})`, :math:`v_t = \\bar\\alpha_t v + 1-\\bar\\alpha_t`:
    :math:`a_t = \\sqrt{\\alpha_t}v_{t-1}/v_t`, :math:`b_t = \\sqrt{\\bar\\alpha_{t-1}}m - a_t\\sqrt{\\bar\\alpha_t}m`,
    variance :math:`v_{t-1} - \\alpha_t v_{t-1}^2/v_t`."""
    mean = check_number(mean, "mean")
    var = check_positive(var, "var")
    schedule = _check_schedule(schedule)
    a_bar = schedule.alpha_bar
    mu = np.sqrt(a_bar) * mean  # (T + 1,) marginal means
    v = a_bar * var + 1 - a_bar  # (T + 1,) marginal variances
    a, b, s2 = np.zeros_like(v), np.zeros_like(v), np.zeros_like(v)
    a[1:] = np.sqrt(schedule.alpha[1:]) * v[:-1] / v[1:]
    b[1:] = mu[:-1] - a[1:] * mu[1:]
    s2[1:] = v[:-1] - schedule.alpha[1:] * v[:-1] ** 2 / v[1:]
    return ReverseKernels(a, b, s2, float(mu[-1]), float(v[-1]))


def _check_kernels(kernels, schedule: Schedule) -> ReverseKernels:
    if not isinstance(kernels, ReverseKernels):
        raise TypeError(f"kernels must be ReverseKernels, got {type(kernels).__name__}")
    for name in ("a", "b", "var"):
        check_array(getattr(kernels, name), f"kernels.{name}", (schedule.T + 1,))
    if np.any(kernels.var[1:] <= 0) or kernels.prior_var <= 0:
        raise ValueError("kernels.var[1:] and kernels.prior_var must be positive")
    return kernels


class DiffusionBound(NamedTuple):
    prior: np.ndarray  # (n,) L_T = KL(q(x_T | x_0) || p(x_T))
    steps: np.ndarray  # (n, T - 1) L_{t-1} = E KL(q(x_{t-1} | x_t, x_0) || p(x_{t-1} | x_t)), t = 2..T
    decoder: np.ndarray  # (n,) L_0 = -E log p(x_0 | x_1)
    total: np.ndarray  # (n,) the bound on -log p(x_0)


def _kl_1d(m0, v0, m1, v1):
    return 0.5 * (np.log(v1 / v0) - 1 + v0 / v1 + (m0 - m1) ** 2 / v1)


def gaussian_diffusion_bound(x0, kernels: ReverseKernels, schedule: Schedule) -> DiffusionBound:
    """The variational bound (10.33)
    :math:`-\\log p_\\theta(x_0)\\le L_T + \\sum_{t=2}^T L_{t-1} + L_0` of a 1-D linear-Gaussian reverse model
    :math:`p_\\theta(x_{t-1}\\mid x_t) = \\mathcal N(a_tx_t + b_t, \\sigma_t^2)`, every term in closed form: the
    expectations over :math:`x_t\\sim q(x_t\\mid x_0)` of squares of affine functions of :math:`x_t` are exact.
    x0 (n,); returns the terms per example."""
    x0 = check_vector(x0, "x0")
    schedule = _check_schedule(schedule)
    kernels = _check_kernels(kernels, schedule)
    T, a_bar, beta, alpha = schedule.T, schedule.alpha_bar, schedule.beta, schedule.alpha
    prior = _kl_1d(math.sqrt(a_bar[T]) * x0, 1 - a_bar[T], kernels.prior_mean, kernels.prior_var)
    steps = np.empty((x0.size, T - 1))
    for t in range(2, T + 1):
        c0 = math.sqrt(a_bar[t - 1]) * beta[t] / (1 - a_bar[t])  # mu_tilde = c0 x0 + c1 x_t
        c1 = math.sqrt(alpha[t]) * (1 - a_bar[t - 1]) / (1 - a_bar[t])
        var_tilde = (1 - a_bar[t - 1]) / (1 - a_bar[t]) * beta[t]
        slope = c1 - kernels.a[t]  # mu_tilde - mu_theta = slope x_t + c0 x0 - b_t
        sq = (slope * math.sqrt(a_bar[t]) * x0 + c0 * x0 - kernels.b[t]) ** 2 + slope**2 * (1 - a_bar[t])
        steps[:, t - 2] = 0.5 * (np.log(kernels.var[t] / var_tilde) - 1 + var_tilde / kernels.var[t])
        steps[:, t - 2] += 0.5 * sq / kernels.var[t]
    a1, b1, s1 = kernels.a[1], kernels.b[1], kernels.var[1]
    sq0 = ((1 - a1 * math.sqrt(a_bar[1])) * x0 - b1) ** 2 + a1**2 * (1 - a_bar[1])
    decoder = 0.5 * np.log(2 * np.pi * s1) + 0.5 * sq0 / s1
    return DiffusionBound(prior, steps, decoder, prior + steps.sum(axis=1) + decoder)


def reverse_model_nll(x0, kernels: ReverseKernels) -> np.ndarray:
    """The exact :math:`-\\log p_\\theta(x_0)` of a 1-D linear-Gaussian reverse model (10.33): its marginal is
    Gaussian, with mean and variance pushed from :math:`p(x_T)` through
    :math:`\\mu\\leftarrow a_t\\mu + b_t`, :math:`v\\leftarrow a_t^2v + \\sigma_t^2` for t = T..1. x0 (n,) -> (n,)."""
    x0 = check_vector(x0, "x0")
    if not isinstance(kernels, ReverseKernels):
        raise TypeError(f"kernels must be ReverseKernels, got {type(kernels).__name__}")
    mu, v = kernels.prior_mean, kernels.prior_var
    for t in range(kernels.a.size - 1, 0, -1):
        mu, v = kernels.a[t] * mu + kernels.b[t], kernels.a[t] ** 2 * v + kernels.var[t]
    return 0.5 * np.log(2 * np.pi * v) + 0.5 * (x0 - mu) ** 2 / v


# ----------------------------------------------------------------------------- 10.6 sampling: scores, SDEs, guidance, DDIM


def noised_mixture(gmm: GaussianMixture, t: int, schedule: Schedule) -> GaussianMixture:
    """The distribution :math:`q_t` of :math:`x_t` when the data follow a `GaussianMixture` (10.38): the mixture
    :math:`\\sum_k\\pi_k\\mathcal N(\\sqrt{\\bar\\alpha_t}m_k, \\bar\\alpha_tS_k + (1-\\bar\\alpha_t)I)`, t in 0..T."""
    if not isinstance(gmm, GaussianMixture):
        raise TypeError(f"gmm must be a GaussianMixture, got {type(gmm).__name__}")
    schedule = _check_schedule(schedule)
    t = check_int(t, "t", 0, schedule.T)
    a_bar, d = schedule.alpha_bar[t], gmm.means.shape[1]
    return GaussianMixture(
        gmm.weights, math.sqrt(a_bar) * gmm.means, a_bar * gmm.covs + (1 - a_bar) * np.eye(d)
    )


def mixture_eps_fn(gmm: GaussianMixture, schedule: Schedule) -> Callable[[np.ndarray, int], np.ndarray]:
    """The optimal noise predictor ε*(x, t) of `mixture_eps` as a fast function ``eps_fn(x, t)`` for the samplers
    (10.37): the precisions and log-determinants of every noised component are computed once per step and
    cached, and the responsibilities use a plain log-sum-exp. Same values as `mixture_eps` (to rounding)."""
    if not isinstance(gmm, GaussianMixture):
        raise TypeError(f"gmm must be a GaussianMixture, got {type(gmm).__name__}")
    schedule = _check_schedule(schedule)
    d = gmm.means.shape[1]
    cache: dict[int, tuple] = {}

    def eps_fn(x, t):
        if t not in cache:
            q_t = noised_mixture(gmm, check_int(t, "t", 1, schedule.T), schedule)
            prec = np.linalg.inv(q_t.covs)
            const = np.log(q_t.weights) - 0.5 * np.linalg.slogdet(q_t.covs)[1]
            cache[t] = (q_t.means[:, None, :], prec, const, math.sqrt(1 - schedule.alpha_bar[t]))
        means, prec, const, scale = cache[t]
        x = np.asarray(x, dtype=float)
        if x.ndim != 2 or x.shape[1] != d:
            raise ValueError(f"x must have shape (any, {d}), got shape {x.shape}")
        diff = x[None] - means  # (K, n, d)
        solved = diff @ prec  # (K, n, d): C_k^{-1} (x - mean_k), C_k symmetric
        log_joint = const[:, None] - 0.5 * np.sum(solved * diff, axis=2)  # (K, n)
        r = np.exp(log_joint - log_joint.max(axis=0))
        r /= r.sum(axis=0)
        return scale * np.einsum("kn,knd->nd", r, solved)

    return eps_fn


def vp_alpha_bar(t, beta_min: float = 0.1, beta_max: float = 20.0) -> np.ndarray:
    """:math:`\\bar\\alpha(t) = \\exp(-\\int_0^t\\beta(s)ds)` of the variance-preserving SDE with the linear rate
    :math:`\\beta(t) = \\beta_{\\min} + t(\\beta_{\\max}-\\beta_{\\min})`, t in [0, 1] (10.39): the continuous-time
    limit of the linear schedule with :math:`\\beta_t = \\beta(t/T)/T`."""
    t = check_array(t, "t", ndim=None)
    beta_min = check_positive(beta_min, "beta_min")
    beta_max = check_number(beta_max, "beta_max", beta_min)
    if np.any(t < 0) or np.any(t > 1):
        raise ValueError("t must lie in [0, 1]")
    return np.exp(-(beta_min * t + 0.5 * (beta_max - beta_min) * t**2))


def _reverse_vp(score_fn, x_1, steps, beta_min, beta_max, rng, ode: bool) -> np.ndarray:
    check_callable(score_fn, "score_fn")
    x = check_array(x_1, "x_1", ndim=None)
    steps = check_int(steps, "steps", 1)
    beta_min = check_positive(beta_min, "beta_min")
    beta_max = check_number(beta_max, "beta_max", beta_min)
    dt = 1.0 / steps
    for k in range(steps, 0, -1):  # from t = 1 down to t = dt
        t = k * dt
        beta = beta_min + t * (beta_max - beta_min)
        score = np.asarray(score_fn(x, t), dtype=float)
        if score.shape != x.shape:
            raise ValueError(f"score_fn(x, t) must return the shape of x {x.shape}, got {score.shape}")
        if ode:
            x = x + (0.5 * beta * x + 0.5 * beta * score) * dt
        else:
            x = x + (0.5 * beta * x + beta * score) * dt + math.sqrt(beta * dt) * rng.standard_normal(x.shape)
    return x


def reverse_sde_sample(
    score_fn: Callable, x_1, steps: int = 1000, beta_min: float = 0.1, beta_max: float = 20.0, rng=None
) -> np.ndarray:
    """Samples of the reverse-time SDE :math:`dx = [-\\frac12\\beta(t)x - \\beta(t)\\nabla\\log q_t(x)]dt
    + \\sqrt{\\beta(t)}d\\bar w` (10.39), integrated by Euler–Maruyama from t = 1 to 0 with
    :math:`\\Delta t = 1/\\text{steps} > 0`: :math:`x\\leftarrow x + (\\frac12\\beta x + \\beta\\,
    \\mathrm{score}(x, t))\\Delta t + \\sqrt{\\beta\\Delta t}\\,z`. ``score_fn(x, t)`` takes x of the shape of x_1
    and a time t in (0, 1]; returns x at t = 0."""
    rng = check_rng(rng)
    return _reverse_vp(score_fn, x_1, steps, beta_min, beta_max, rng, ode=False)


def probability_flow_sample(
    score_fn: Callable, x_1, steps: int = 1000, beta_min: float = 0.1, beta_max: float = 20.0
) -> np.ndarray:
    """The probability-flow ODE :math:`dx = [-\\frac12\\beta(t)x - \\frac12\\beta(t)\\nabla\\log q_t(x)]dt`
    (10.44), integrated by Euler from t = 1 to 0: deterministic, with the same marginals :math:`q_t` as the SDE."""
    return _reverse_vp(score_fn, x_1, steps, beta_min, beta_max, None, ode=True)


class StepEntropies(NamedTuple):
    forward: float  # H(x_t | x_{t-1})
    reverse: float  # H(x_{t-1} | x_t), from the conditional variance
    before: float  # H(x_{t-1})
    after: float  # H(x_t)


def gaussian_step_entropies(var: float, beta: float) -> StepEntropies:
    """The entropies (nats) of one forward step :math:`x_t = \\sqrt{1-\\beta}x_{t-1} + \\sqrt\\beta\\varepsilon` for
    1-D Gaussian :math:`x_{t-1}` of variance v (10.40): :math:`H(x_t\\mid x_{t-1}) = \\frac12\\ln 2\\pi e\\beta`,
    :math:`H(x_{t-1}) = \\frac12\\ln2\\pi ev`, :math:`H(x_t) = \\frac12\\ln2\\pi e((1-\\beta)v + \\beta)` and, from the
    variance :math:`v\\beta/((1-\\beta)v+\\beta)` of :math:`x_{t-1}` given :math:`x_t`, :math:`H(x_{t-1}\\mid x_t)`."""
    var = check_positive(var, "var")
    beta = check_number(beta, "beta", 0, 1, low_open=True, high_open=True)

    def h(v):
        return 0.5 * math.log(2 * math.pi * math.e * v)

    after_var = (1 - beta) * var + beta
    return StepEntropies(h(beta), h(var * beta / after_var), h(var), h(after_var))


def cfg(eps_c, eps_u, w: float) -> np.ndarray:
    """Classifier-free guidance (10.41): :math:`\\tilde\\varepsilon = (1+w)\\,\\varepsilon_\\theta(x_t, t, c)
    - w\\,\\varepsilon_\\theta(x_t, t)`; w = 0 is the conditional model, w > 0 pushes away from the unconditional
    one. eps_c and eps_u of the same shape."""
    eps_c = check_array(eps_c, "eps_c")
    eps_u = check_array(eps_u, "eps_u", eps_c.shape)
    w = check_number(w, "w", 0)
    return (1 + w) * eps_c - w * eps_u


def dsm_loss(score, x_t, eps, t: int, schedule: Schedule) -> np.ndarray:
    """The denoising score-matching loss per example (10.44),
    :math:`\\|s(x_t) - \\nabla_{x_t}\\log q(x_t\\mid x_0)\\|^2 = \\|s(x_t) + \\varepsilon/\\sqrt{1-\\bar\\alpha_t}\\|^2`
    for :math:`x_t = \\sqrt{\\bar\\alpha_t}x_0 + \\sqrt{1-\\bar\\alpha_t}\\varepsilon`: score = the model's values
    s(x_t) (n, d), x_t and eps (n, d), t in 1..T; returns (n,). Its mean differs from the explicit loss
    :math:`\\mathbb E\\|s(x_t) - \\nabla\\log q_t(x_t)\\|^2` by a constant that does not depend on s."""
    schedule = _check_schedule(schedule)
    t = check_int(t, "t", 1, schedule.T)
    x_t = check_array(x_t, "x_t", (None, None))
    score = check_array(score, "score", x_t.shape)
    eps = check_array(eps, "eps", x_t.shape)
    return np.sum((score + eps / math.sqrt(1 - schedule.alpha_bar[t])) ** 2, axis=1)


def tweedie_x0(x_t, score, t: int, schedule: Schedule) -> np.ndarray:
    """Tweedie's formula (10.44): :math:`\\mathbb E[x_0\\mid x_t] = (x_t + (1-\\bar\\alpha_t)\\nabla\\log q_t(x_t))
    /\\sqrt{\\bar\\alpha_t}`; x_t and score (n, d), t in 1..T."""
    schedule = _check_schedule(schedule)
    t = check_int(t, "t", 1, schedule.T)
    x_t = check_array(x_t, "x_t", (None, None))
    score = check_array(score, "score", x_t.shape)
    a_bar = schedule.alpha_bar[t]
    return (x_t + (1 - a_bar) * score) / math.sqrt(a_bar)


PREDICTIONS = ("eps", "x0", "v")


def convert_prediction(x_t, pred, t: int, schedule: Schedule, source: str, target: str) -> np.ndarray:
    """Convert a network's output between the three parameterisations (10.44) at step t, using
    :math:`x_t = \\sqrt{\\bar\\alpha_t}x_0 + \\sqrt{1-\\bar\\alpha_t}\\varepsilon` and
    :math:`v = \\sqrt{\\bar\\alpha_t}\\varepsilon - \\sqrt{1-\\bar\\alpha_t}x_0`: source and target are ``"eps"``,
    ``"x0"`` or ``"v"``; x_t and pred (n, d), t in 1..T."""
    schedule = _check_schedule(schedule)
    t = check_int(t, "t", 1, schedule.T)
    source = check_choice(source, "source", PREDICTIONS)
    target = check_choice(target, "target", PREDICTIONS)
    x_t = check_array(x_t, "x_t", (None, None))
    pred = check_array(pred, "pred", x_t.shape)
    a, b = math.sqrt(schedule.alpha_bar[t]), math.sqrt(1 - schedule.alpha_bar[t])  # a^2 + b^2 = 1
    if source == "eps":
        eps = pred
    elif source == "x0":
        eps = (x_t - a * pred) / b
    else:  # v: a x_t + ... gives eps = b x_t + a v
        eps = b * x_t + a * pred
    if target == "eps":
        return eps
    x0 = (x_t - b * eps) / a
    return x0 if target == "x0" else a * eps - b * x0


# ----------------------------------------------------------------------------- 10.6 training a diffusion model


class EpsMLP(nn.Module):
    """A noise predictor :math:`\\varepsilon_\\theta(x_t, t, c)` for vectors (10.36): an MLP on the concatenation of
    x_t (n, d), a sinusoidal embedding of the step t (n,), :math:`(\\sin t\\omega_j, \\cos t\\omega_j)_{j<h}` with
    :math:`\\omega_j = 10000^{-j/h}`, h = time_dim // 2 (the Transformer's positional encoding), and,
    if ``n_classes > 0``, a learned embedding of the class c (n,) in 0..n_classes, where c = n_classes is the
    empty condition "no class" of classifier-free guidance. `depth` hidden layers of width `hidden`, SiLU."""

    def __init__(self, d: int, hidden: int = 128, depth: int = 3, n_classes: int = 0, time_dim: int = 32):
        super().__init__()
        self.d = check_int(d, "d", 1)
        hidden, depth = check_int(hidden, "hidden", 1), check_int(depth, "depth", 1)
        self.n_classes = check_int(n_classes, "n_classes", 0)
        time_dim = check_int(time_dim, "time_dim", 2)
        half = time_dim // 2
        self.register_buffer("freqs", torch.exp(-math.log(10_000.0) * torch.arange(half) / half))
        self.class_embedding = nn.Embedding(self.n_classes + 1, hidden) if self.n_classes else None
        widths = [d + 2 * half + (hidden if self.n_classes else 0)] + [hidden] * depth
        layers: list[nn.Module] = []
        for a, b in zip(widths[:-1], widths[1:], strict=True):
            layers += [nn.Linear(a, b), nn.SiLU()]
        self.net = nn.Sequential(*layers, nn.Linear(hidden, d))

    def forward(self, x: torch.Tensor, t: torch.Tensor, c: torch.Tensor | None = None) -> torch.Tensor:
        angles = t.to(x.dtype)[:, None] * self.freqs.to(x.dtype)[None]
        parts = [x, torch.sin(angles), torch.cos(angles)]
        if self.class_embedding is not None:
            if c is None:
                c = torch.full_like(t, self.n_classes)
            parts.append(self.class_embedding(c))
        return self.net(torch.cat(parts, dim=1))


class TrainedEps(NamedTuple):
    model: EpsMLP  # the trained noise predictor (in eval mode)
    losses: np.ndarray  # (steps,) the loss of each training batch


def train_eps_model(
    X,
    schedule: Schedule,
    steps: int = 4000,
    *,
    labels=None,
    n_classes: int | None = None,
    p_uncond: float = 0.1,
    hidden: int = 128,
    depth: int = 3,
    lr: float = 2e-3,
    batch_size: int = 256,
    rng=None,
    progress: bool = True,
) -> TrainedEps:
    """Train an `EpsMLP` on the simplified loss of Ho et al. (10.36),
    :math:`\\mathbb E_{t,x_0,\\varepsilon}\\,\\tfrac1d\\|\\varepsilon-\\varepsilon_\\theta(\\sqrt{\\bar\\alpha_t}x_0
    +\\sqrt{1-\\bar\\alpha_t}\\varepsilon, t)\\|^2` with t ~ U{1..T}, by Adam (step `lr`, cosine decay to 0) on
    `steps` batches of `batch_size` rows of X (n, d). With `labels` (n,) in 0..n_classes-1 the model is
    class-conditional and each label is replaced by the empty condition with probability `p_uncond` (condition
    dropout, for classifier-free guidance). Batches, steps, noise and initial weights come from `rng`.
    Returns a `TrainedEps` (model, loss per step)."""
    X = check_matrix(X, "X")
    schedule = _check_schedule(schedule)
    steps, batch_size = check_int(steps, "steps", 1), check_int(batch_size, "batch_size", 1)
    hidden, depth = check_int(hidden, "hidden", 1), check_int(depth, "depth", 1)
    lr = check_positive(lr, "lr")
    p_uncond = check_number(p_uncond, "p_uncond", 0, 1)
    rng = check_rng(rng)
    n, d = X.shape
    if labels is not None:
        if n_classes is None:
            raise ValueError("n_classes must be given with labels (the number of classes)")
        n_classes = check_int(n_classes, "n_classes", 1)
        labels = torch.as_tensor(check_labels(labels, "labels", n, n_classes=n_classes))
    else:
        n_classes = 0
    dev = device()
    generator = torch.Generator().manual_seed(int(rng.integers(2**31)))
    model = EpsMLP(d, hidden, depth, n_classes)
    with torch.no_grad():  # PyTorch's default initialisation, drawn from `rng`
        for layer in model.modules():
            if isinstance(layer, nn.Linear):
                bound = 1 / math.sqrt(layer.in_features)
                layer.weight.uniform_(-bound, bound, generator=generator)
                layer.bias.uniform_(-bound, bound, generator=generator)
            elif isinstance(layer, nn.Embedding):
                layer.weight.normal_(generator=generator)
    model = model.to(dev)
    data = torch.as_tensor(X, dtype=torch.float32)
    sqrt_a = torch.as_tensor(np.sqrt(schedule.alpha_bar), dtype=torch.float32)
    sqrt_1ma = torch.as_tensor(np.sqrt(1 - schedule.alpha_bar), dtype=torch.float32)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, fused=True)  # fused: one kernel for all tensors
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, steps)
    losses = np.empty(steps)
    model.train()
    for step in tqdm(range(steps), desc="training eps_theta", leave=False, disable=not progress):
        rows = torch.randint(n, (batch_size,), generator=generator)
        t = torch.randint(1, schedule.T + 1, (batch_size,), generator=generator)
        eps = torch.randn(batch_size, d, generator=generator)
        x_t = sqrt_a[t, None] * data[rows] + sqrt_1ma[t, None] * eps
        c = None
        if n_classes:
            drop = torch.rand(batch_size, generator=generator) < p_uncond
            c = torch.where(drop, n_classes, labels[rows]).to(dev)
        loss = ((model(x_t.to(dev), t.to(dev), c) - eps.to(dev)) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        losses[step] = loss.item()
    return TrainedEps(model.eval(), losses)


def eps_predictor(model: EpsMLP, c=None, w: float = 0.0) -> Callable:
    """The numpy noise predictor ``eps_fn(x, t)`` of a trained `EpsMLP`, for `ddpm_sample`, `ddim_sample` and
    `noise_prediction_loss`: x (n, d), t one step or (n,) steps, returns (n, d). With a class `c` (an int or
    (n,) labels) and guidance weight `w`, classifier-free guidance (10.41):
    :math:`\\tilde\\varepsilon = (1+w)\\,\\varepsilon_\\theta(x_t, t, c) - w\\,\\varepsilon_\\theta(x_t, t)`."""
    if not isinstance(model, EpsMLP):
        raise TypeError(f"model must be an EpsMLP, got {type(model).__name__}")
    w = check_number(w, "w", 0)
    if c is not None:
        if not model.n_classes:
            raise ValueError("c needs a class-conditional model (n_classes > 0), got an unconditional one")
        c = check_labels(np.atleast_1d(c), "c", n_classes=model.n_classes)
    dev = next(model.parameters()).device

    def eps_fn(x, t):
        x = check_matrix(x, "x", cols=model.d)
        n = x.shape[0]
        steps = torch.as_tensor(np.broadcast_to(np.asarray(t, dtype=np.int64), (n,)).copy(), device=dev)
        xs = torch.as_tensor(x, dtype=torch.float32, device=dev)
        with torch.no_grad():
            if c is None:
                return to_numpy(model(xs, steps)).astype(np.float64)
            if c.size not in (1, n):
                raise ValueError(f"c must be one class or one class per row of x ({n}), got {c.size}")
            cs = torch.as_tensor(np.broadcast_to(c, (n,)).copy(), device=dev)
            if w == 0:
                return to_numpy(model(xs, steps, cs)).astype(np.float64)
            empty = torch.full_like(cs, model.n_classes)  # one pass for both predictions
            both = to_numpy(model(torch.cat([xs, xs]), torch.cat([steps, steps]), torch.cat([cs, empty])))
            return cfg(both[:n], both[n:], w)

    return eps_fn


def noise_prediction_loss(eps_fn: Callable, x0, t, schedule: Schedule, rng=None) -> np.ndarray:
    """The simplified loss of each row (10.36),
    :math:`\\tfrac1d\\|\\varepsilon-\\varepsilon_\\theta(\\sqrt{\\bar\\alpha_t}x_0+\\sqrt{1-\\bar\\alpha_t}\\varepsilon, t)\\|^2`
    with fresh noise ε from `rng`: x0 (n, d), t one step or (n,) steps in 1..T, ``eps_fn(x, t)`` called once
    with x (n, d) and t (n,). Returns (n,)."""
    check_callable(eps_fn, "eps_fn")
    x0 = check_matrix(x0, "x0")
    schedule = _check_schedule(schedule)
    t = _check_steps(t, schedule, x0.shape[0])
    if np.any(t < 1):
        raise ValueError("t must be in 1..T (t = 0 is the data, there is no noise to predict)")
    x_t, eps = q_sample(x0, t, schedule, rng)
    pred = np.asarray(eps_fn(x_t, t), dtype=float)
    if pred.shape != x0.shape:
        raise ValueError(f"eps_fn(x, t) must return the shape of x {x0.shape}, got {pred.shape}")
    return np.mean((eps - pred) ** 2, axis=1)


def gaussian_optimal_eps_loss(cov, schedule: Schedule) -> np.ndarray:
    """The smallest simplified loss any predictor reaches on Gaussian data :math:`\\mathcal N(\\mu, \\Sigma)` at each
    step t = 1..T, per coordinate (10.36): the error of :math:`\\mathbb E[\\varepsilon\\mid x_t]
    = \\sqrt{1-\\bar\\alpha_t}\\,C_t^{-1}(x_t-\\sqrt{\\bar\\alpha_t}\\mu)`,
    :math:`\\tfrac1d\\mathrm{tr}[I-(1-\\bar\\alpha_t)C_t^{-1}]`, :math:`C_t = \\bar\\alpha_t\\Sigma+(1-\\bar\\alpha_t)I`.
    For other data with covariance Σ it is the loss of the best affine predictor. cov (d, d); returns (T,)."""
    schedule = _check_schedule(schedule)
    cov = check_matrix(cov, "cov")
    d = cov.shape[0]
    cov = _check_cov(cov, "cov", d)
    lam = np.linalg.eigvalsh(cov)  # tr C^-1 = sum 1 / (a lam + 1 - a) in the eigenbasis
    a = schedule.alpha_bar[1:, None]
    return 1 - np.mean((1 - a) / (a * lam[None] + 1 - a), axis=1)


def mmd(X, Y, bandwidth: float = 1.0) -> float:
    """The unbiased estimate of the squared maximum mean discrepancy with the Gaussian kernel
    :math:`k(x, y) = e^{-\\|x-y\\|^2/2h^2}` (h = `bandwidth`) between samples X (n, d) and Y (m, d), n, m ≥ 2:
    :math:`\\frac{1}{n(n-1)}\\sum_{i\\ne j}k(x_i,x_j)+\\frac{1}{m(m-1)}\\sum_{i\\ne j}k(y_i,y_j)-\\frac2{nm}\\sum_{i,j}k(x_i,y_j)`
    (10.6; it can be slightly negative when the distributions are equal)."""
    X = check_matrix(X, "X")
    Y = check_matrix(Y, "Y", cols=X.shape[1])
    h = check_positive(bandwidth, "bandwidth")
    n, m = len(X), len(Y)
    if n < 2 or m < 2:
        raise ValueError(f"X and Y need at least 2 rows each, got {n} and {m}")

    def gram(A, B):
        sq = (A * A).sum(1)[:, None] + (B * B).sum(1)[None] - 2 * A @ B.T
        return np.exp(-np.maximum(sq, 0) / (2 * h * h))

    Kxx, Kyy, Kxy = gram(X, X), gram(Y, Y), gram(X, Y)
    return float(
        (Kxx.sum() - np.trace(Kxx)) / (n * (n - 1))
        + (Kyy.sum() - np.trace(Kyy)) / (m * (m - 1))
        - 2 * Kxy.mean()
    )
