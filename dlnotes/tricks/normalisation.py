"""Section 8.5 (notebook 04_normalisation): batch normalisation as a function and as a torch module, group,
layer and RMS normalisation, weight normalisation and its gradients.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from ..validation import (
    check_int,
    check_matrix,
    check_number,
    check_vector,
)


class BatchNormResult(NamedTuple):
    out: np.ndarray | torch.Tensor  # (B, d) normalised, scaled and shifted features
    running_mean: np.ndarray | torch.Tensor | None  # (d,) updated in train mode, as given in eval mode
    running_var: np.ndarray | torch.Tensor | None


def _norm_arrays(F, per_feature: dict) -> tuple:
    """F (B, d) and the per-feature vectors (d,) (None allowed) in one array library. All NumPy (or lists):
    float64 arrays checked by dlnotes.validation. Any torch tensor among them: all tensors (`_as_tensors`)."""
    like = next((a for a in (F, *per_feature.values()) if isinstance(a, torch.Tensor)), None)
    if like is not None:
        return _as_tensors(F, per_feature, like)
    F = check_matrix(F, "F")
    return F, {k: None if v is None else check_vector(v, k, F.shape[1]) for k, v in per_feature.items()}


def _as_tensors(F, per_feature: dict, like: torch.Tensor) -> tuple:
    """F and the per-feature vectors as tensors with the dtype (float64 if it is an integer type) and device of
    the tensor `like`. A tensor keeps its autograd graph; NumPy input is checked as NumPy input first."""
    dtype = like.dtype if like.is_floating_point() else torch.float64

    def as_tensor(a, name: str, check):  # check: the NumPy validation of a, used when a is not a tensor
        return torch.as_tensor(
            a if isinstance(a, torch.Tensor) else check(a, name), dtype=dtype, device=like.device
        )

    F = as_tensor(F, "F", check_matrix)
    if F.ndim != 2 or F.numel() == 0:
        raise ValueError(
            f"F must have shape (any, any) (a batch of feature vectors), got shape {tuple(F.shape)}"
        )
    vectors = {k: None if v is None else as_tensor(v, k, check_vector) for k, v in per_feature.items()}
    for k, v in vectors.items():
        if v is not None and tuple(v.shape) != (F.shape[1],):
            raise ValueError(f"{k} must have shape ({F.shape[1]},), got shape {tuple(v.shape)}")
    return F, vectors


def batch_norm(
    F,
    gamma,
    beta,
    *,
    running_mean=None,
    running_var=None,
    training: bool = True,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> BatchNormResult:
    r"""Batch normalisation of a batch F (B, d), each feature over the B examples (section 8.5).

    Train mode: $\mu_B=\frac1B\sum_bF_b$, $\sigma_B^2=\frac1B\sum_b(F_b-\mu_B)^2$ (the *biased* variance) and
    $\gamma\odot(F_b-\mu_B)/\sqrt{\sigma_B^2+\epsilon}+\beta$; when running statistics are given they are
    returned updated, $(1-m)\,\mathrm{running} + m\,\mathrm{batch}$ with momentum $m$, the variance entering
    *unbiased*, $\sigma_B^2\,B/(B-1)$. Eval mode: the running statistics replace $\mu_B,\sigma_B^2$, so each
    example's output no longer depends on the rest of the batch. The same computation as
    ``torch.nn.BatchNorm1d(d, eps, momentum)`` on a (B, d) input in ``train()`` and ``eval()`` mode.

    NumPy arrays in, NumPy arrays out; if any argument is a torch tensor the result is a tensor with its autograd
    graph (the running statistics are computed from detached batch statistics), which `BatchNorm` uses.
    """
    if not isinstance(training, (bool, np.bool_)):
        raise TypeError(f"training must be True or False, got {training!r}")
    momentum = check_number(momentum, "momentum", 0, 1)
    eps = check_number(eps, "eps", 0)
    F, v = _norm_arrays(
        F, {"gamma": gamma, "beta": beta, "running_mean": running_mean, "running_var": running_var}
    )
    if (v["running_mean"] is None) != (v["running_var"] is None):
        raise ValueError("give both running_mean and running_var, or neither")
    B = F.shape[0]
    if not training:
        if v["running_mean"] is None:
            raise ValueError(
                "eval mode (training=False) normalises with the running statistics: give running_mean and running_var"
            )
        if (v["running_var"] < 0).any():
            raise ValueError("running_var must be >= 0")
        out = v["gamma"] * (F - v["running_mean"]) / (v["running_var"] + eps) ** 0.5 + v["beta"]
        return BatchNormResult(out, v["running_mean"], v["running_var"])
    if B < 2:
        raise ValueError(
            f"batch norm in train mode needs at least 2 examples per batch (the variance of one is 0), got F of shape {tuple(F.shape)}"
        )
    mu_B = F.mean(0)
    var_B = ((F - mu_B) ** 2).mean(0)  # biased: divided by B
    if eps == 0 and (var_B == 0).any():
        raise ValueError("a feature is constant over the batch: with eps = 0 it cannot be normalised")
    out = v["gamma"] * (F - mu_B) / (var_B + eps) ** 0.5 + v["beta"]
    running_mean, running_var = v["running_mean"], v["running_var"]
    if running_mean is not None:
        if isinstance(mu_B, torch.Tensor):
            mu_B, var_B = mu_B.detach(), var_B.detach()
        running_mean = (1 - momentum) * running_mean + momentum * mu_B
        running_var = (1 - momentum) * running_var + momentum * var_B * B / (B - 1)  # unbiased
    return BatchNormResult(out, running_mean, running_var)


class BatchNorm(nn.Module):
    r"""Batch normalisation as a torch module for inputs (B, d), written from the formulas of `batch_norm`:
    learned scale $\gamma$ (ones) and shift $\beta$ (zeros), running mean (zeros) and variance (ones) updated
    in ``train()`` mode with momentum 0.1 and used in ``eval()`` mode. Equal to ``nn.BatchNorm1d(d)`` (whose
    weight is $\gamma$ and bias $\beta$) in both modes."""

    def __init__(self, d: int, *, eps: float = 1e-5, momentum: float = 0.1):
        super().__init__()
        self.d = check_int(d, "d", 1)
        self.eps = check_number(eps, "eps", 0)
        self.momentum = check_number(momentum, "momentum", 0, 1)
        self.gamma = nn.Parameter(torch.ones(self.d))
        self.beta = nn.Parameter(torch.zeros(self.d))
        self.register_buffer("running_mean", torch.zeros(self.d))
        self.register_buffer("running_var", torch.ones(self.d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"x must be a torch tensor (B, d), got {type(x).__name__}")
        if x.ndim != 2 or x.shape[1] != self.d:
            raise ValueError(f"x must have shape (any, {self.d}), got shape {tuple(x.shape)}")
        result = batch_norm(
            x,
            self.gamma,
            self.beta,
            running_mean=self.running_mean,
            running_var=self.running_var,
            training=self.training,
            momentum=self.momentum,
            eps=self.eps,
        )
        if self.training:
            with torch.no_grad():
                self.running_mean.copy_(result.running_mean)
                self.running_var.copy_(result.running_var)
        return result.out

    def extra_repr(self) -> str:
        return f"{self.d}, eps={self.eps}, momentum={self.momentum}"


def group_norm(F, gamma, beta, *, groups: int, eps: float = 1e-5) -> np.ndarray:
    r"""Group normalisation of F (B, d): the d features of each example are split into `groups` consecutive
    groups of d/groups, each normalised by its own mean and biased variance, then scaled and shifted per
    feature, $\gamma_i(f_i-\mu_{G(i)})/\sqrt{\sigma^2_{G(i)}+\epsilon}+\beta_i$. ``groups=1`` is layer
    normalisation (statistics over all d features of one example, ``nn.LayerNorm(d)``); ``groups=d`` normalises
    every feature alone. No statistic crosses examples, so the output of an example does not depend on the
    batch. Same as ``nn.GroupNorm(groups, d)`` on a (B, d) input (section 8.5)."""
    F = check_matrix(F, "F")
    B, d = F.shape
    groups = check_int(groups, "groups", 1, d)
    if d % groups:
        raise ValueError(f"groups must divide the number of features d = {d}, got groups={groups}")
    gamma = check_vector(gamma, "gamma", d)
    beta = check_vector(beta, "beta", d)
    eps = check_number(eps, "eps", 0)
    G = F.reshape(B, groups, d // groups)
    mu = G.mean(axis=2, keepdims=True)
    var = ((G - mu) ** 2).mean(axis=2, keepdims=True)
    return gamma * ((G - mu) / np.sqrt(var + eps)).reshape(B, d) + beta


def rms_norm(F, gamma, *, eps: float = 1e-6) -> np.ndarray:
    r"""RMS normalisation of every example (row) of F (B, d): $\gamma\odot f/\sqrt{\frac1d\sum_if_i^2+\epsilon}$,
    layer normalisation without centring and without a shift. Same as ``nn.RMSNorm(d, eps=eps)`` (section 8.5)."""
    F = check_matrix(F, "F")
    gamma = check_vector(gamma, "gamma", F.shape[1])
    eps = check_number(eps, "eps", 0)
    return gamma * F / np.sqrt((F**2).mean(axis=1, keepdims=True) + eps)


def _check_weight_norm(v, g) -> tuple[np.ndarray, np.ndarray]:
    v = check_matrix(v, "v")
    g = check_vector(g, "g", v.shape[0])
    if not (np.linalg.norm(v, axis=1) > 0).all():
        raise ValueError("every row of v must be non-zero (its direction v/||v|| is used)")
    return v, g


def weight_norm(v, g) -> np.ndarray:
    r"""Weight normalisation of a weight matrix (m, n), one output unit per row: $w_i=g_i\,v_i/\lVert v_i\rVert$,
    direction $v_i$ and length $g_i$ (v (m, n), g (m,)). The parametrisation of
    ``torch.nn.utils.parametrizations.weight_norm(layer)`` (``dim=0``, ``original0`` = g, ``original1`` = v)
    (section 8.5)."""
    v, g = _check_weight_norm(v, g)
    return g[:, None] * v / np.linalg.norm(v, axis=1, keepdims=True)


class WeightNormGrads(NamedTuple):
    grad_v: np.ndarray  # (m, n)
    grad_g: np.ndarray  # (m,)


def weight_norm_grads(v, g, grad_w) -> WeightNormGrads:
    r"""The gradients of a loss E with respect to direction and length of weight-normalised rows
    $w_i=g_i v_i/\lVert v_i\rVert$, given $\nabla_wE$ (m, n): $\partial_{g_i}E=\nabla_{w_i}E\cdot v_i/\lVert v_i\rVert$ and
    $\nabla_{v_i}E=\frac{g_i}{\lVert v_i\rVert}\big(I-\frac{w_iw_i^\top}{\lVert w_i\rVert^2}\big)\nabla_{w_i}E$: the
    component of the gradient along $w_i$ is projected out, so $v_i^\top\nabla_{v_i}E=0$ (section 8.5)."""
    v, g = _check_weight_norm(v, g)
    grad_w = check_matrix(grad_w, "grad_w", *v.shape)
    norm_v = np.linalg.norm(v, axis=1, keepdims=True)
    u = v / norm_v  # unit direction, = w / ||w|| up to the sign of g
    along = (grad_w * u).sum(axis=1)
    grad_v = g[:, None] / norm_v * (grad_w - along[:, None] * u)
    return WeightNormGrads(grad_v, along)
