"""Section 10.2 of chapter 10, the evidence lower bound and the variational autoencoder: the ELBO of linear-Gaussian
models, its gradient estimators and the Gaussian KLs (notebook 02_elbo), then a VAE on digits, its training,
evaluation and importance-weighted bound (notebook 03_vae).
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
from torch import nn

from ..training import device, model_device, progress_bar, to_numpy, train_steps
from ..validation import (
    check_array,
    check_callable,
    check_choice,
    check_int,
    check_number,
    check_positive,
    check_rng,
    check_vector,
)
from .common import _check_cov, _eval_mode, gauss_kl

# ----------------------------------------------------------------------------- the ELBO, the reparameterisation trick, the Gaussian KL (02_elbo)


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


# ----------------------------------------------------------------------------- a VAE on digits, beta-VAE (03_vae)


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


class ConvVAE(VAE):
    """The `VAE` with convolutional networks for 8 × 8 images given as rows of 64 pixels (10.08): the encoder is two
    3 × 3 convolutions of stride 2 (1 → c → 2c channels, 8 × 8 → 4 × 4 → 2 × 2, SiLU) and a linear map to
    (μ, log σ²); the decoder mirrors it with two 4 × 4 transposed convolutions of stride 2 (2 × 2 → 4 × 4 → 8 × 8) to
    the 64 logits. Same ELBO, encode and decode as the `VAE`; `d_h` is the channel count c."""

    def __init__(self, d_z: int, channels: int = 16):
        super().__init__(64, channels, d_z)
        c = self.d_h
        self.encoder = nn.Sequential(
            nn.Unflatten(1, (1, 8, 8)),
            nn.Conv2d(1, c, 3, stride=2, padding=1),
            nn.SiLU(),
            nn.Conv2d(c, 2 * c, 3, stride=2, padding=1),
            nn.SiLU(),
            nn.Flatten(),
            nn.Linear(8 * c, 2 * self.d_z),
        )
        self.decoder = nn.Sequential(
            nn.Linear(self.d_z, 8 * c),
            nn.SiLU(),
            nn.Unflatten(1, (2 * c, 2, 2)),
            nn.ConvTranspose2d(2 * c, c, 4, stride=2, padding=1),
            nn.SiLU(),
            nn.ConvTranspose2d(c, 1, 4, stride=2, padding=1),
            nn.Flatten(),
        )


def _check_binary(X, name: str, d: int | None = None) -> np.ndarray:
    X = check_array(X, name, (None, d))
    if not np.isin(X, (0.0, 1.0)).all():
        raise ValueError(f"{name} must hold binary pixels (0 or 1) for a Bernoulli decoder")
    return X


class TrainedVAE(NamedTuple):
    model: VAE  # on the CPU, in eval mode
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
    conv: bool = False,
    rng=None,
    progress: bool = True,
) -> TrainedVAE:
    """Train a `VAE` (d, d_h, d_z) on binary data X (n, d) with Adam on the mean negative β-ELBO (10.08, 10.11), by
    `training.train_steps` once per epoch over a fresh shuffle of X in batches of `batch_size`, on
    `training.device`. With ``kl_warmup = E > 0`` the KL weight grows linearly from 0 to β over the first E epochs
    (KL annealing). With ``conv=True`` the model is a `ConvVAE` (X must be 8 × 8 images, d = 64; `d_h` is its
    channel count). All randomness (initialisation, batches, ε) comes from `rng`; torch's global generator is left
    as it was. Returns the model on the CPU in eval mode, and the history at initialisation and after each epoch."""
    X = _check_binary(X, "X")
    beta = check_number(beta, "beta", 0)
    epochs = check_int(epochs, "epochs", 1)
    batch_size = check_int(batch_size, "batch_size", 1)
    lr = check_positive(lr, "lr")
    kl_warmup = check_int(kl_warmup, "kl_warmup", 0)
    rng = check_rng(rng)

    def beta_at(epoch: int) -> float:  # the KL weight of epoch 1, 2, ...
        return beta * min(1.0, epoch / kl_warmup) if kl_warmup else beta

    history: dict[str, list[float]] = {"loss": [], "reconstruction": [], "kl": [], "beta": []}
    batch_terms: list[tuple[int, torch.Tensor, torch.Tensor]] = []  # (size, reconstruction, KL) of each batch

    def negative_elbo(model, batch):  # batch: x, its draws eps, the KL weight
        x, eps, beta_now = batch
        terms = model.elbo(x, beta_now, eps=eps)
        batch_terms.append((len(x), terms.reconstruction.mean(), terms.kl.mean()))
        return -terms.elbo.mean()

    def record(loss: float, reconstruction: float, kl: float, beta_now: float):
        for key, value in zip(history, (loss, reconstruction, kl, beta_now), strict=True):
            history[key].append(float(value))

    def epoch_means(losses) -> np.ndarray:  # (loss, reconstruction, KL), each batch weighted by its size
        sums = np.zeros(3)
        for loss, (size, reconstruction, kl) in zip(losses, batch_terms, strict=True):
            sums += size * np.array([loss, reconstruction.item(), kl.item()])
        batch_terms.clear()
        return sums / len(X)

    dev = device()
    with torch.random.fork_rng(devices=[]):  # ε and the shuffles from torch's CPU generator, seeded from rng
        torch.manual_seed(int(rng.integers(2**31)))
        if conv and X.shape[1] != 64:
            raise ValueError(f"conv=True needs 8 x 8 images (64 columns of X), got {X.shape[1]} columns")
        model = (ConvVAE(d_z, d_h) if conv else VAE(X.shape[1], d_h, d_z)).to(dev)
        optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        data = torch.tensor(X, dtype=torch.float32)
        with torch.no_grad():  # index 0 of the history: the model at initialisation
            terms = model.elbo(data.to(dev), beta_at(1), eps=torch.randn(len(data), d_z).to(dev))
        record(-terms.elbo.mean(), terms.reconstruction.mean(), terms.kl.mean(), beta_at(1))
        for epoch in progress_bar(range(1, epochs + 1), desc=f"VAE beta = {beta:g}", enabled=progress):
            shuffle = torch.randperm(len(data)).split(batch_size)
            batches = ((data[idx], torch.randn(len(idx), d_z), beta_at(epoch)) for idx in shuffle)
            losses = train_steps(model, negative_elbo, optimizer, batches, progress=False)
            record(*epoch_means(losses), beta_at(epoch))
    return TrainedVAE(model.cpu().eval(), history)


def _check_vae_data(model, X) -> tuple[VAE, torch.Tensor]:
    """The VAE and binary X (n, d_in) as a float32 tensor on the model's device."""
    if not isinstance(model, VAE):
        raise TypeError(f"model must be a VAE, got {type(model).__name__}")
    X = _check_binary(X, "X", model.d_in)
    return model, torch.tensor(X, dtype=torch.float32, device=model_device(model))


@torch.no_grad()
def evaluate_vae(model: VAE, X, samples: int = 10, rng=None) -> ELBOTerms:
    """The terms of the ELBO (β = 1) per example of binary X (n, d), each averaged over `samples` draws of ε
    (10.08): E_q log p(x|z) (a Monte Carlo mean), KL(q‖p) (exact) and their difference, as NumPy arrays (n,).
    The model is evaluated in eval mode on its device and left in the mode it came in."""
    model, x = _check_vae_data(model, X)
    samples = check_int(samples, "samples", 1)
    rng = check_rng(rng)
    reconstruction = np.zeros(len(x))
    with _eval_mode(model):
        for _ in range(samples):
            eps = torch.tensor(rng.standard_normal((len(x), model.d_z)), dtype=torch.float32, device=x.device)
            terms = model.elbo(x, eps=eps)
            reconstruction += to_numpy(terms.reconstruction) / samples
    kl = to_numpy(terms.kl).astype(np.float64)
    return ELBOTerms(reconstruction, kl, reconstruction - kl)


@torch.no_grad()
def iwae_bound(model: VAE, X, K: int, rng=None) -> np.ndarray:
    """The importance-weighted bound (Burda et al.) per example of binary X (n, d) (10.08):
    :math:`\\mathcal L_K = \\mathbb E\\log\\frac1K\\sum_{i=1}^K\\frac{p_\\theta(x, z_i)}{q_\\phi(z_i\\mid x)}`,
    :math:`z_i\\sim q_\\phi(z\\mid x)`, one draw of the K samples; :math:`\\mathcal L_1` is the ELBO,
    :math:`\\mathcal L_K\\le\\mathcal L_{K+1}\\le\\log p_\\theta(x)`. Returns (n,). The model is evaluated in eval
    mode on its device and left in the mode it came in."""
    model, x = _check_vae_data(model, X)
    K = check_int(K, "K", 1)
    rng = check_rng(rng)
    with _eval_mode(model):
        mu, var = model.encode(x)
        eps = torch.tensor(rng.standard_normal((K, *mu.shape)), dtype=torch.float32, device=x.device)
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
