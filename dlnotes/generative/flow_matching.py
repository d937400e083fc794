"""Chapter 10.7 — flow matching and Langevin sampling: the exact velocity of the straight-line path to a Gaussian,
a velocity network trained on the conditional flow-matching loss, Euler's method for the ODE, the score of a
Gaussian mixture, and (annealed) Langevin dynamics.

Time runs from s = 0 (noise, x_0 ~ N(0, I)) to s = 1 (data x_1); the path is x_s = (1 - s) x_0 + s x_1.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import torch

from ..training import device, to_numpy, train_steps
from ..validation import (
    check_array,
    check_callable,
    check_int,
    check_matrix,
    check_number,
    check_positive,
    check_rng,
)
from .common import EpsMLP, GaussianMixture, _check_cov, _init_like_torch, _mixture_responsibilities

# ----------------------------------------------------------------------------- flow matching (10.45)

TIME_SCALE = (
    1000.0  # the network sees t = 1000 s, the range of the diffusion steps its time embedding was made for
)


def gaussian_fm_velocity(x, s: float, mu, cov) -> np.ndarray:
    """The exact marginal velocity of the straight-line path from N(0, I) to data N(mu, cov) (10.45):
    :math:`v^*(x, s) = \\mathbb E[x_1 - x_0\\mid x_s = x] = \\mu + (s\\Sigma - (1-s)I)\\,C_s^{-1}(x - s\\mu)`,
    :math:`C_s = (1-s)^2I + s^2\\Sigma`, the covariance of x_s (conditioning of the jointly Gaussian pair).
    x (n, d), s in [0, 1]; returns (n, d)."""
    mu = check_array(mu, "mu", (None,))
    d = mu.size
    cov = _check_cov(check_matrix(cov, "cov", d, d), "cov", d)
    x = check_matrix(x, "x", cols=d)
    s = check_number(s, "s", 0, 1)
    C = (1 - s) ** 2 * np.eye(d) + s**2 * cov
    cross = s * cov - (1 - s) * np.eye(d)  # Cov(x_1 - x_0, x_s)
    return mu + np.linalg.solve(C, (x - s * mu).T).T @ cross.T


class TrainedVelocity(NamedTuple):
    model: EpsMLP  # the trained velocity network v_theta(x, s), called with t = 1000 s (in eval mode)
    losses: np.ndarray  # (steps,) the loss of each training batch


def train_velocity_model(
    X,
    steps: int = 3000,
    *,
    hidden: int = 64,
    depth: int = 3,
    fourier: int = 0,
    lr: float = 3e-3,
    batch_size: int = 512,
    rng=None,
    progress: bool = True,
) -> TrainedVelocity:
    """Train a velocity network :math:`v_\\theta(x, s)` (an `EpsMLP` on t = 1000 s) on the conditional flow-matching
    loss of Lipman et al. and Liu et al. (10.45), :math:`\\mathbb E_{s, x_0, x_1}\\tfrac1d\\|v_\\theta((1-s)x_0 + s x_1, s)
    - (x_1 - x_0)\\|^2` with s ~ U[0, 1], x_0 ~ N(0, I) and x_1 a row of X (n, d), by Adam (step `lr`, cosine decay)
    through `training.train_steps` on `training.device`. Batches and initial weights come from `rng`."""
    X = check_matrix(X, "X")
    steps, batch_size = check_int(steps, "steps", 1), check_int(batch_size, "batch_size", 1)
    lr = check_positive(lr, "lr")
    rng = check_rng(rng)
    n, d = X.shape
    generator = torch.Generator().manual_seed(int(rng.integers(2**31)))
    model = _init_like_torch(EpsMLP(d, hidden, depth, fourier=fourier), generator).to(device())
    data = torch.as_tensor(X, dtype=torch.float32)

    def batches():  # the point x_s on the path, its time s and the target velocity x_1 - x_0
        while True:
            x_1 = data[torch.randint(n, (batch_size,), generator=generator)]
            x_0 = torch.randn(batch_size, d, generator=generator)
            s = torch.rand(batch_size, generator=generator)
            yield (1 - s[:, None]) * x_0 + s[:, None] * x_1, s, x_1 - x_0

    def loss(model, batch):
        x_s, s, target = batch
        return ((model(x_s, TIME_SCALE * s) - target) ** 2).mean()

    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, steps)
    losses = train_steps(
        model,
        loss,
        optimizer,
        batches(),
        steps,
        scheduler=scheduler,
        desc="training v_theta",
        progress=progress,
    )
    return TrainedVelocity(model.eval(), losses)


def velocity_predictor(model: EpsMLP) -> Callable:
    """The numpy velocity ``v_fn(x, s)`` of a network trained by `train_velocity_model`: x (n, d), s a time in
    [0, 1] or (n,) times; returns (n, d)."""
    if not isinstance(model, EpsMLP):
        raise TypeError(f"model must be an EpsMLP, got {type(model).__name__}")
    dev = next(model.parameters()).device

    def v_fn(x, s):
        x = check_matrix(x, "x", cols=model.d)
        times = np.broadcast_to(np.asarray(s, dtype=np.float32), (x.shape[0],)).copy()
        with torch.no_grad():
            v = model(
                torch.as_tensor(x, dtype=torch.float32, device=dev),
                torch.as_tensor(TIME_SCALE * times, device=dev),
            )
        return to_numpy(v).astype(np.float64)

    return v_fn


def euler_sample(velocity_fn: Callable, x_0, steps: int) -> np.ndarray:
    """Solve :math:`dx/ds = v(x, s)` from s = 0 to 1 by Euler's method with `steps` equal steps (10.45):
    :math:`x \\leftarrow x + v(x, s_k)/S`, :math:`s_k = k/S`. x_0 (n, d); returns x at s = 1 (n, d)."""
    check_callable(velocity_fn, "velocity_fn")
    x = check_matrix(x_0, "x_0").copy()
    steps = check_int(steps, "steps", 1)
    for k in range(steps):
        v = np.asarray(velocity_fn(x, k / steps), dtype=float)
        if v.shape != x.shape:
            raise ValueError(f"velocity_fn(x, s) must return the shape of x {x.shape}, got {v.shape}")
        x = x + v / steps
    return x


# ----------------------------------------------------------------------------- Langevin sampling (10.46)


def mixture_score(gmm: GaussianMixture, x) -> np.ndarray:
    """The score :math:`\\nabla\\log p(x) = -\\sum_k p(k\\mid x)\\,S_k^{-1}(x - m_k)` of a `GaussianMixture` (10.46),
    x (n, d); returns (n, d)."""
    if not isinstance(gmm, GaussianMixture):
        raise TypeError(f"gmm must be a GaussianMixture, got {type(gmm).__name__}")
    x = check_matrix(x, "x", cols=gmm.means.shape[1])
    _, r = _mixture_responsibilities(gmm, x)  # (n, K)
    pulls = -np.einsum("kij,nkj->nki", np.linalg.inv(gmm.covs), x[:, None, :] - gmm.means[None])
    return np.einsum("nk,nki->ni", r, pulls)


def _langevin_steps(score_fn, x: np.ndarray, eta: float, steps: int, rng, *args) -> np.ndarray:
    for _ in range(steps):
        x = (
            x
            + eta * np.asarray(score_fn(x, *args), dtype=float)
            + np.sqrt(2 * eta) * rng.standard_normal(x.shape)
        )
    return x


def langevin_sample(score_fn: Callable, x_0, eta: float, steps: int, rng=None) -> np.ndarray:
    """Unadjusted Langevin dynamics (10.46): `steps` updates
    :math:`x\\leftarrow x + \\eta\\,\\nabla\\log p(x) + \\sqrt{2\\eta}\\,z`, z ~ N(0, I) from `rng`, with
    ``score_fn(x)`` the score. Its stationary law tends to p as η → 0. x_0 (n, d); returns (n, d)."""
    check_callable(score_fn, "score_fn")
    x = check_matrix(x_0, "x_0")
    eta = check_positive(eta, "eta")
    return _langevin_steps(score_fn, x, eta, check_int(steps, "steps", 1), check_rng(rng))


def annealed_langevin_sample(score_fn: Callable, x_0, sigmas, eta: float, steps: int, rng=None) -> np.ndarray:
    """Annealed Langevin dynamics of Song and Ermon (10.46): for each noise level σ_i of the decreasing `sigmas`,
    `steps` Langevin updates on the score ``score_fn(x, sigma)`` of the data convolved with N(0, σ_i² I), with the
    step :math:`\\eta_i = \\eta\\,\\sigma_i^2/\\sigma_L^2` (σ_L the last level). Broad early levels let the samples
    find every mode in proportion to its mass; the last level is close to the data. x_0 (n, d); returns (n, d)."""
    check_callable(score_fn, "score_fn")
    x = check_matrix(x_0, "x_0")
    sigmas = check_array(sigmas, "sigmas", (None,))
    if sigmas.size == 0 or np.any(sigmas <= 0) or np.any(np.diff(sigmas) >= 0):
        raise ValueError(f"sigmas must be positive and strictly decreasing, got {sigmas}")
    eta = check_positive(eta, "eta")
    steps, rng = check_int(steps, "steps", 1), check_rng(rng)
    for sigma in sigmas:
        x = _langevin_steps(score_fn, x, eta * (sigma / sigmas[-1]) ** 2, steps, rng, float(sigma))
    return x
