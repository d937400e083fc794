"""Section 10.6 of chapter 10, denoising diffusion: the noise schedule, the forward process, the reverse posterior
and the variational bound (notebook 08_diffusion); the optimal noise predictor of a mixture, ancestral and DDIM
sampling, the reverse SDE and the probability-flow ODE, guidance, score matching and the three parameterisations
(notebook 09_diffusion_sampling); a noise predictor and its training (notebook 10_diffusion_training).

Conventions: a `Schedule` is indexed by the step t = 0..T with t = 0 the data (beta[0] = 0, alpha_bar[0] = 1), so
that ``alpha_bar[t]`` is the book's :math:`\\bar\\alpha_t`; a noise predictor is a function ``eps_fn(x, t)`` of a
batch x (n, d) and one step t that returns (n, d).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import torch

from ..training import device, to_numpy, train_steps
from ..validation import (
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
from .common import EpsMLP, GaussianMixture, _check_cov, _init_like_torch, _mixture_responsibilities

# ----------------------------------------------------------------------------- the forward process, the bound, the reverse posterior (08_diffusion)


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


# ----------------------------------------------------------------------------- sampling: scores, SDEs, guidance, DDIM (09_diffusion_sampling)


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
    noised = noised_mixture(gmm, t, schedule)
    _, r = _mixture_responsibilities(noised, x)
    diff = x[:, None, :] - noised.means[None]  # (n, K, d)
    eps_k = math.sqrt(1 - a_bar) * np.einsum("kij,nkj->nki", np.linalg.inv(noised.covs), diff)
    return np.einsum("nk,nki->ni", r, eps_k)


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


DDIM_SPACINGS = ("uniform", "quadratic")


def ddim_steps(T: int, steps: int, spacing: str = "uniform") -> np.ndarray:
    """The steps :math:`T = \\tau_S > \\dots > \\tau_0 = 0` that DDIM visits (10.42): ``"uniform"``
    :math:`\\tau_i = \\mathrm{round}(iT/S)`, or ``"quadratic"`` :math:`\\tau_i = \\mathrm{round}(T(i/S)^2)`, which
    spends more of the steps at small t, where the data's shape appears (Song et al. use it on CIFAR-10). Steps
    that round to the same t are visited once."""
    T = check_int(T, "T", 1)
    steps = check_int(steps, "steps", 1, T)
    spacing = check_choice(spacing, "spacing", DDIM_SPACINGS)
    grid = np.linspace(0, 1, steps + 1)
    return np.unique(np.round(T * (grid if spacing == "uniform" else grid**2)).astype(int))[::-1]


def ddim_sample(
    eps_fn: Callable,
    x_T,
    schedule: Schedule,
    steps: int | None = None,
    eta: float = 0.0,
    rng=None,
    spacing: str = "uniform",
):
    """DDIM sampling (10.42) from x_T (n, d) on ``steps`` steps
    :math:`T = \\tau_S > \\dots > \\tau_1 \\ge 1` (all T by default), with :math:`\\tau_0 = 0`, spaced as
    `ddim_steps` says (evenly by default). From t to the
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
    taus = ddim_steps(schedule.T, steps, spacing)  # T, ..., 0
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


# ----------------------------------------------------------------------------- training a diffusion model (10_diffusion_training)


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
    fourier: int = 0,
    lr: float = 2e-3,
    batch_size: int = 256,
    rng=None,
    progress: bool = True,
) -> TrainedEps:
    """Train an `EpsMLP` on the simplified loss of Ho et al. (10.36),
    :math:`\\mathbb E_{t,x_0,\\varepsilon}\\,\\tfrac1d\\|\\varepsilon-\\varepsilon_\\theta(\\sqrt{\\bar\\alpha_t}x_0
    +\\sqrt{1-\\bar\\alpha_t}\\varepsilon, t)\\|^2` with t ~ U{1..T}, by Adam (step `lr`, cosine decay to 0) through
    `training.train_steps` on `training.device`, on `steps` batches of `batch_size` rows of X (n, d), each with its
    steps t and noise ε. With `labels` (n,) in 0..n_classes-1 the model is class-conditional and each label is
    replaced by the empty condition with probability `p_uncond` (condition dropout, for classifier-free guidance).
    `fourier` octaves of Fourier features of x_t enter the network (see `EpsMLP`).
    Batches, steps, noise and initial weights come from `rng`. Returns a `TrainedEps` (the model in eval mode, the
    loss per step)."""
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
    generator = torch.Generator().manual_seed(int(rng.integers(2**31)))
    model = _init_like_torch(EpsMLP(d, hidden, depth, n_classes, fourier=fourier), generator).to(device())
    data = torch.as_tensor(X, dtype=torch.float32)
    sqrt_a = torch.as_tensor(np.sqrt(schedule.alpha_bar), dtype=torch.float32)
    sqrt_1ma = torch.as_tensor(np.sqrt(1 - schedule.alpha_bar), dtype=torch.float32)

    def batches():  # x_t, t, the noise eps in x_t and the condition c (None: unconditional), drawn on the CPU
        while True:
            rows = torch.randint(n, (batch_size,), generator=generator)
            t = torch.randint(1, schedule.T + 1, (batch_size,), generator=generator)
            eps = torch.randn(batch_size, d, generator=generator)
            x_t = sqrt_a[t, None] * data[rows] + sqrt_1ma[t, None] * eps
            c = None
            if n_classes:
                drop = torch.rand(batch_size, generator=generator) < p_uncond
                c = torch.where(drop, n_classes, labels[rows])
            yield x_t, t, eps, c

    def loss(model, batch):
        x_t, t, eps, c = batch
        return ((model(x_t, t, c) - eps) ** 2).mean()

    optimizer = torch.optim.Adam(model.parameters(), lr=lr, fused=True)  # fused: one kernel for all tensors
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, steps)
    losses = train_steps(
        model,
        loss,
        optimizer,
        batches(),
        steps,
        scheduler=scheduler,
        desc="training eps_theta",
        progress=progress,
    )
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
