"""Section 8.11 (notebook 08_practitioners_toolkit): the learning-rate range test, temperature scaling, loss
scaling of float16 gradients and averaged weights, the tools a practitioner reaches for around the tricks of
this chapter.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import torch
from scipy import optimize
from torch import nn

from ..activations import log_softmax
from ..training import train_steps
from ..validation import check_callable, check_int, check_labels, check_matrix, check_number, check_positive


class RangeTest(NamedTuple):
    lrs: np.ndarray  # (steps,) the learning rate of every step
    losses: np.ndarray  # (steps,) the loss of every step's batch, before that step's update


def lr_range_test(
    model: nn.Module,
    loss: Callable,
    optimizer: torch.optim.Optimizer,
    batches,
    steps: int,
    *,
    lr_min: float = 1e-5,
    lr_max: float = 1.0,
) -> RangeTest:
    r"""Smith's learning-rate range test: `steps` steps of `train_steps` with the rate growing exponentially,
    $\eta_k=\eta_{\min}(\eta_{\max}/\eta_{\min})^{k/(\text{steps}-1)}$, $k=0,\dots,\text{steps}-1$, recording the
    loss of every step. The loss falls slowly while the rate is too small, fastest around good rates, and blows
    up once the rate is too large; a rate somewhat below the fastest fall (a common rule: the rate of the
    smallest loss divided by 10) is a good choice. The model and the optimizer are trained in the process: pass
    copies. `batches` must yield at least `steps` batches (a generator of random batches, or several epochs)."""
    check_callable(loss, "loss")
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"optimizer must be a torch optimizer, got {type(optimizer).__name__}")
    steps = check_int(steps, "steps", 2)
    lr_min = check_positive(lr_min, "lr_min")
    lr_max = check_number(lr_max, "lr_max", lr_min, low_open=True)
    for group in optimizer.param_groups:
        group["lr"] = lr_min
        group.pop("initial_lr", None)
    growth = (lr_max / lr_min) ** (1 / (steps - 1))
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda k: growth**k)
    losses = train_steps(model, loss, optimizer, batches, steps, scheduler=schedule, progress=False)
    if len(losses) < steps:
        raise ValueError(f"batches must yield at least steps = {steps} batches, got {len(losses)}")
    return RangeTest(lr_min * growth ** np.arange(steps), losses)


def tempered_nll(logits, y, T: float) -> float:
    r"""The mean negative log-likelihood $-\frac1N\sum_i\log\mathrm{softmax}(G_i/T)_{y_i}$ of logits G (N, K) at
    temperature T > 0 for labels y (N,): what temperature scaling minimises over T on validation data."""
    logits = check_matrix(logits, "logits")
    y = check_labels(y, "y", len(logits), n_classes=logits.shape[1])
    T = check_positive(T, "T")
    return float(-log_softmax(logits / T, axis=1)[np.arange(len(y)), y].mean())


def fit_temperature(logits, y, *, T_range: tuple[float, float] = (0.05, 20.0)) -> float:
    r"""Temperature scaling (Guo et al., 2017): the one number T > 0 that minimises `tempered_nll` of the logits
    (N, K) of held-out data with labels y (N,), searched over $\log T$ in `T_range` (a bounded scalar
    minimisation). Dividing the logits by T > 1 softens an over-confident network's probabilities; T does not
    change the arg-max, so the accuracy stays the same."""
    logits = check_matrix(logits, "logits")
    y = check_labels(y, "y", len(logits), n_classes=logits.shape[1])
    low, high = (check_positive(t, "T_range entries") for t in T_range)
    if not low < high:
        raise ValueError(f"T_range must be (low, high) with low < high, got {T_range!r}")
    result = optimize.minimize_scalar(
        lambda log_T: tempered_nll(logits, y, math.exp(log_T)),
        bounds=(math.log(low), math.log(high)),
        method="bounded",
        options={"xatol": 1e-6},
    )
    return float(math.exp(result.x))


class ScaledGradient(NamedTuple):
    plain: torch.Tensor  # the gradient computed in float16 without scaling (underflows to 0 when tiny)
    scaled: torch.Tensor  # the gradient of scale * loss in float16, unscaled in float32 afterwards


def half_precision_gradients(loss_fn: Callable, w, *, scale: float = 2.0**16) -> ScaledGradient:
    r"""The gradient of ``loss_fn(w)`` for float16 parameters w, computed twice: plainly, and with the loss
    multiplied by `scale` before the backward pass and the gradient divided by it afterwards in float32 (loss
    scaling, what ``torch.amp.GradScaler`` automates; Micikevicius et al., 2018). The loss is taken in float32,
    as under autocast, and the computation inside `loss_fn` in float16. A gradient below float16's smallest
    subnormal number, $2^{-24}\approx6\cdot10^{-8}$, is 0 in the plain pass and survives the scaled one; a scale
    that lifts a gradient above float16's largest number, 65504, makes it infinite (``GradScaler`` then skips the
    step and halves its scale)."""
    check_callable(loss_fn, "loss_fn")
    scale = check_positive(scale, "scale")
    w = torch.as_tensor(w).detach().to(torch.float16)
    grads = []
    for factor in (1.0, scale):
        w_k = w.clone().requires_grad_(True)
        (factor * loss_fn(w_k).float()).backward()  # the loss in float32, as autocast leaves it
        grads.append(w_k.grad.float() / factor)
    return ScaledGradient(*grads)


class Autocast(nn.Module):
    r"""A module run under ``torch.autocast``: its matrix products in `dtype` (bfloat16 by default, which runs on
    the CPU too; float16 on a GPU), its output returned in float32 so that the loss is computed in full
    precision. The parameters stay float32 (mixed precision: low-precision arithmetic, full-precision weights and
    updates)."""

    def __init__(self, model: nn.Module, dtype: torch.dtype = torch.bfloat16):
        super().__init__()
        if not isinstance(model, nn.Module):
            raise TypeError(f"model must be a torch module, got {type(model).__name__}")
        if dtype not in (torch.bfloat16, torch.float16):
            raise ValueError(f"dtype must be torch.bfloat16 or torch.float16, got {dtype}")
        self.model, self.dtype = model, dtype

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device_type=x.device.type, dtype=self.dtype):
            return self.model(x).float()


def averaged_model(models) -> nn.Module:
    r"""The equal-weight average $\bar\theta=\frac1S\sum_s\theta_s$ of the parameters of S snapshots of one
    network (stochastic weight averaging, Izmailov et al., 2018, averages the iterates at the end of every
    epoch of a constant or cyclic rate); a new module, the snapshots untouched. Buffers (batch norm's running
    statistics) are copied from the last snapshot and must be recomputed on training data
    (``torch.optim.swa_utils.update_bn``)."""
    models = list(models) if isinstance(models, list | tuple) else None
    if not models or not all(isinstance(m, nn.Module) for m in models):
        raise TypeError("models must be a non-empty list of torch modules (snapshots of one network)")
    average = copy.deepcopy(models[-1])
    with torch.no_grad():
        for name, param in average.named_parameters():
            param.copy_(torch.stack([dict(m.named_parameters())[name] for m in models]).mean(dim=0))
    return average
