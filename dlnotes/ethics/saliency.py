"""Section 11.6 of chapter 11, local explanations (notebook 06_saliency): the model's outputs, gradient
saliency, integrated gradients, SmoothGrad, the similarity of saliency maps, and ceteris-paribus profiles.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from ..training import to_numpy
from ..validation import (
    check_array,
    check_callable,
    check_choice,
    check_int,
    check_labels,
    check_matrix,
    check_number,
    check_rng,
)
from .common import _inputs


def model_outputs(model: nn.Module, X, output: str = "logit") -> np.ndarray:
    """The model's outputs for a batch X (n, d) as numpy (n, K): the logits :math:`f_k(x)` or, with
    ``output="probability"``, the softmax probabilities :math:`p_k(x) = e^{f_k(x)}/\\sum_j e^{f_j(x)}` (11.6)."""
    x = _inputs(model, X)
    output = check_choice(output, "output", ("logit", "probability"))
    with torch.no_grad():
        logits = model(x)
    return to_numpy(logits.softmax(dim=1) if output == "probability" else logits)


def _classes(model: nn.Module, x: torch.Tensor, k) -> torch.Tensor:
    """The class of every row: the predicted one for k None, else k (an int or labels (n,))."""
    if k is None:
        with torch.no_grad():
            return model(x).argmax(dim=1)
    if np.ndim(k) == 0:  # one class for every row
        return torch.full((len(x),), check_int(k, "k", 0), dtype=torch.int64, device=x.device)
    return torch.as_tensor(check_labels(k, "k", len(x)), device=x.device)


def _logit_gradient(model: nn.Module, x: torch.Tensor, classes: torch.Tensor) -> torch.Tensor:
    """The gradient of the logit f_{classes_i} at every row x_i (n, d)."""
    x = x.detach().requires_grad_(True)
    logits = model(x)
    if classes.max() >= logits.shape[1] or classes.min() < 0:
        raise ValueError(
            f"k must hold classes in 0..{logits.shape[1] - 1}, got {classes.min()}..{classes.max()}"
        )
    (grad,) = torch.autograd.grad(logits.gather(1, classes[:, None]).sum(), x)
    return grad


def saliency(model: nn.Module, X, k=None) -> np.ndarray:
    """Gradient saliency (sensitivity): the gradient of the logit of class k with respect to the input,
    :math:`s_k(x) = \\nabla_x f_k(x)`, i.e. :math:`\\partial f_k(x)/\\partial x_j` for every pixel j.

    k None explains the predicted class :math:`\\arg\\max_k f_k(x)` of every row; an int explains the same class
    for all rows, labels (n,) one class per row. X (n, d) -> saliency maps (n, d) (11.6).
    """
    x = _inputs(model, X)
    return to_numpy(_logit_gradient(model, x, _classes(model, x, k)))


def integrated_gradients(model: nn.Module, X, k=None, baseline=None, steps: int = 64) -> np.ndarray:
    """Integrated gradients (Sundararajan et al., 2017) along the straight path from a baseline x' to x, by the
    midpoint rule with m = `steps` points:
    :math:`\\mathrm{IG}_j(x) = (x_j - x'_j)\\,\\frac1m\\sum_{i=1}^m \\partial_j f_k\\big(x' + \\tfrac{i - 1/2}{m}(x - x')\\big)`.

    Completeness: :math:`\\sum_j \\mathrm{IG}_j(x) \\to f_k(x) - f_k(x')` as m grows. k as in `saliency`
    (the predicted class at x for None); baseline None = the black image 0, a vector (d,) or one row per input
    (n, d). X (n, d) -> attributions (n, d) (11.6).
    """
    x = _inputs(model, X)
    n, d = x.shape
    steps = check_int(steps, "steps", 1)
    if baseline is None:
        x0 = torch.zeros_like(x)
    else:
        baseline = check_array(baseline, "baseline")
        if baseline.shape not in ((d,), (n, d)):
            raise ValueError(f"baseline must have shape ({d},) or ({n}, {d}), got shape {baseline.shape}")
        x0 = torch.as_tensor(baseline, dtype=x.dtype, device=x.device).expand(n, d)
    classes = _classes(model, x, k)
    alphas = (
        torch.arange(steps, dtype=x.dtype, device=x.device) + 0.5
    ) / steps  # the midpoints of m equal cells of [0, 1]
    path = x0[None] + alphas[:, None, None] * (x - x0)[None]  # (m, n, d)
    grads = _logit_gradient(model, path.reshape(-1, d), classes.repeat(steps)).reshape(steps, n, d)
    return to_numpy((x - x0) * grads.mean(dim=0))


def smoothgrad(model: nn.Module, X, k=None, sigma: float = 0.1, samples: int = 50, rng=None) -> np.ndarray:
    """SmoothGrad (Smilkov et al., 2017): the saliency averaged over noisy copies of the input,
    :math:`\\frac1N\\sum_{i=1}^N \\nabla_x f_k(x + \\xi_i)`, :math:`\\xi_i \\sim \\mathcal N(0, \\sigma^2 I)`,
    N = `samples` drawn from `rng`. k as in `saliency` (None: the class predicted at the clean x).
    X (n, d) -> maps (n, d) (11.6)."""
    x = _inputs(model, X)
    n, d = x.shape
    sigma, samples = check_number(sigma, "sigma", 0), check_int(samples, "samples", 1)
    classes = _classes(model, x, k)
    xi = torch.as_tensor(
        check_rng(rng).normal(0.0, sigma, size=(samples, n, d)), dtype=x.dtype, device=x.device
    )
    noisy = (x[None] + xi).reshape(-1, d)
    return to_numpy(_logit_gradient(model, noisy, classes.repeat(samples)).reshape(samples, n, d).mean(dim=0))


def mean_pairwise_cosine(S, labels=None) -> float:
    """The mean cosine similarity :math:`\\frac{s_a^\\top s_b}{\\lVert s_a\\rVert\\lVert s_b\\rVert}` over all pairs
    a ≠ b of rows of S (n, d) (e.g. saliency maps); with `labels` (n,) only over pairs with equal labels,
    averaged over the labels that occur at least twice (11.6)."""
    S = check_matrix(S, "S")
    norms = np.linalg.norm(S, axis=1, keepdims=True)
    if (norms == 0).any():
        raise ValueError("S must not have a row of zeros (its cosine similarity is undefined)")
    groups = np.zeros(len(S), dtype=np.int64) if labels is None else check_labels(labels, "labels", len(S))
    U, means = S / norms, []
    for g in np.unique(groups):
        A = U[groups == g]
        if len(A) > 1:
            means.append(((A @ A.T).sum() - len(A)) / (len(A) * (len(A) - 1)))
    if not means:
        raise ValueError("S must have two rows (with the same label) to compare")
    return float(np.mean(means))


def ceteris_paribus(f, x, j: int, grid) -> np.ndarray:
    """The ceteris-paribus profile of feature j: :math:`t \\mapsto f(x_1, \\dots, x_{j-1}, t, x_{j+1}, \\dots, x_d)`
    for every t of `grid` (G,), all other features held fixed.

    `f` maps a batch (m, d) to outputs (m,) or (m, K) (e.g. ``lambda Z: model_outputs(model, Z)[:, k]``).
    One input x (d,) gives the profile (G,) (or (G, K)); a batch X (n, d) gives one profile per row, the ICE
    curves (n, G) (or (n, G, K)) whose mean over the rows is the partial dependence (11.6).
    """
    f = check_callable(f, "f")
    x = check_array(x, "x")
    if x.ndim not in (1, 2):
        raise ValueError(f"x must be an input (d,) or a batch of rows (n, d), got shape {x.shape}")
    rows = np.atleast_2d(x)
    n, d = rows.shape
    j = check_int(j, "j", 0, d - 1)
    grid = check_array(grid, "grid", (None,))
    Z = np.repeat(rows[:, None, :], len(grid), axis=1)  # (n, G, d)
    Z[:, :, j] = grid
    out = np.asarray(f(Z.reshape(-1, d)), dtype=np.float64)
    if out.ndim not in (1, 2) or len(out) != n * len(grid):
        raise ValueError(
            f"f must map a batch ({n * len(grid)}, {d}) to ({n * len(grid)},) or "
            f"({n * len(grid)}, K), got shape {out.shape}"
        )
    out = out.reshape(n, len(grid), *out.shape[1:])
    return out[0] if x.ndim == 1 else out
