"""Section 10.3 of chapter 10, normalising flows (notebook 04_flows): the change-of-variables density of a flow,
the masked autoregressive flow (MAF), affine coupling layers (in NumPy and in torch) and RealNVP. They are
trained by `common.fit_density`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from ..training import to_numpy
from ..validation import (
    check_array,
    check_callable,
    check_int,
    check_vector,
)
from .common import MADE, _normal_draws


def _standard_normal_log_prob(z: torch.Tensor) -> torch.Tensor:
    return -0.5 * (z**2).sum(dim=1) - 0.5 * z.shape[1] * math.log(2 * math.pi)


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
    :math:`\\log|\\det J| = \\sum_j (1-b_j)\\,s_j(b\\odot x)`; s and t share one trunk, an MLP with two hidden
    ReLU layers of width `hidden` whose 2d outputs are split into s (a tanh times a learned scale) and t (10.3)."""

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
