"""Sections 11.1 and 11.2 of chapter 11 (notebooks 01_threat_model and 02_linear_attacks): the dual norm and
the perturbation that attains it, then the minimal perturbations of linear classifiers (binary and multiclass,
ℓ2 and ℓ∞) and what carries over to networks by linearisation: DeepFool and the line search along the
gradient.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from ..training import to_numpy
from ..validation import (
    check_array,
    check_choice,
    check_int,
    check_labels,
    check_matrix,
    check_number,
    check_positive,
    check_vector,
)
from .common import _inputs, _labels, _loss_gradient, _norm_order, lp_norm


def _dual_exponent(p) -> tuple[float, float]:
    """(p, q) with 1/p + 1/q = 1 for p in [1, inf]."""
    p = _norm_order(p)
    if p == 1:
        return 1.0, math.inf
    if p == math.inf:
        return math.inf, 1.0
    return float(p), p / (p - 1)


def dual_norm(w, p) -> np.ndarray | float:
    """The dual norm :math:`\\max_{\\lVert\\delta\\rVert_p\\le1} w^\\top\\delta = \\lVert w\\rVert_q` with
    :math:`\\frac1p+\\frac1q=1` (p = 1 ↔ q = inf, p = 2 ↔ q = 2, p = inf ↔ q = 1); p in [1, inf] or "inf".
    w (d,) -> float, or rows (n, d) -> (n,) (11.1)."""
    w = check_array(w, "w")
    if w.ndim not in (1, 2):
        raise ValueError(f"w must be a vector (d,) or a batch of rows (n, d), got shape {w.shape}")
    _, q = _dual_exponent(p)
    return lp_norm(w, q)


def dual_norm_maximiser(w, eps: float, p) -> np.ndarray:
    """A perturbation that attains :math:`\\max_{\\lVert\\delta\\rVert_p\\le\\epsilon} w^\\top\\delta =
    \\epsilon\\lVert w\\rVert_q`: :math:`\\delta_i = \\epsilon\\,\\mathrm{sign}(w_i)|w_i|^{q-1}/\\lVert w\\rVert_q^{q-1}`,
    i.e. :math:`\\epsilon\\,\\mathrm{sign}(w)` for p = inf, :math:`\\epsilon w/\\lVert w\\rVert_2` for p = 2 and
    :math:`\\epsilon\\,\\mathrm{sign}(w_i)e_i` at the largest :math:`|w_i|` for p = 1. w (d,) -> δ (d,)
    (11.1)."""
    w = check_vector(w, "w")
    eps = check_number(eps, "eps", 0)
    p, q = _dual_exponent(p)
    a, s = np.abs(w), np.sign(w)
    if not a.any():
        return np.zeros_like(w)
    if p == math.inf:
        return eps * s
    if p == 1:
        delta = np.zeros_like(w)
        i = int(a.argmax())
        delta[i] = eps * s[i]
        return delta
    scaled = a / a.max()  # scale-free: |w_i|^(q-1) / ||w||_q^(q-1) is unchanged by scaling w
    return eps * s * scaled ** (q - 1) / lp_norm(scaled, q) ** (q - 1)


def linear_min_l2(X, w, b: float) -> np.ndarray:
    """The smallest ℓ2 perturbation that puts x on the decision boundary of :math:`f(x) = w^\\top x + b`:
    :math:`\\delta^* = -\\frac{w^\\top x + b}{\\lVert w\\rVert_2^2}\\,w`, of norm
    :math:`|w^\\top x + b|/\\lVert w\\rVert_2`. X (n, d), w (d,) -> δ* (n, d) (11.2)."""
    X = check_matrix(X, "X")
    w = check_vector(w, "w", X.shape[1])
    b = check_number(b, "b")
    if not w.any():
        raise ValueError("w must not be zero (a constant model has no decision boundary)")
    return -((X @ w + b) / (w @ w))[:, None] * w


class LinfWorstCase(NamedTuple):
    X_adv: np.ndarray  # (n, d) the worst case x - eps y sign(w), without the pixel box
    margin: np.ndarray  # (n,) y (w^T x + b)
    flipped: np.ndarray  # (n,) bool: margin <= eps ||w||_1


def linear_linf_worst(X, y, w, b: float, eps: float) -> LinfWorstCase:
    """The ℓ∞ worst case of a binary linear model :math:`f(x) = w^\\top x + b` with labels y in {−1, +1}:
    :math:`\\delta = -\\epsilon\\,y\\,\\mathrm{sign}(w)` lowers the margin :math:`y(w^\\top x + b)` by
    :math:`\\epsilon\\lVert w\\rVert_1`, so the label flips iff :math:`y(w^\\top x+b)\\le\\epsilon\\lVert w\\rVert_1`
    (no pixel box). X (n, d), y (n,), w (d,) -> `LinfWorstCase` (11.2)."""
    X = check_matrix(X, "X")
    y = check_labels(y, "y", len(X), values=(-1, 1))
    w = check_vector(w, "w", X.shape[1])
    b, eps = check_number(b, "b"), check_number(eps, "eps", 0)
    margin = y * (X @ w + b)
    X_adv = X - eps * y[:, None] * np.sign(w)
    return LinfWorstCase(X_adv, margin, margin <= eps * np.abs(w).sum())


class MulticlassDistances(NamedTuple):
    margins: np.ndarray  # (n, K) m_j(x) = (w_y - w_j)^T x + (b_y - b_j); 0 at j = y
    distances: np.ndarray  # (n, K) m_j / ||w_y - w_j||_2; inf at j = y


def _linear_model(W, b, d=None):
    W = check_matrix(W, "W", None, d)
    if W.shape[0] < 2:
        raise ValueError(f"W must have one row per class, K >= 2 rows, got shape {W.shape}")
    return W, check_vector(b, "b", W.shape[0])


def multiclass_distances(X, y, W, b) -> MulticlassDistances:
    """Margins and distances of a multiclass linear model :math:`f_k(x) = w_k^\\top x + b_k` to the boundaries
    of class y: :math:`m_j(x) = (w_y - w_j)^\\top x + (b_y - b_j)` and the ℓ2 distance
    :math:`m_j(x)/\\lVert w_y - w_j\\rVert_2` to the hyperplane :math:`m_j = 0`.
    X (n, d), y (n,), W (K, d), b (K,) -> `MulticlassDistances` of (n, K) arrays (11.2)."""
    X = check_matrix(X, "X")
    W, b = _linear_model(W, b, X.shape[1])
    y = check_labels(y, "y", len(X), n_classes=len(W))
    scores = X @ W.T + b
    margins = scores[np.arange(len(X)), y][:, None] - scores
    gaps = np.linalg.norm(W[y][:, None, :] - W[None, :, :], axis=2)  # ||w_y - w_j||_2, (n, K)
    mine = np.arange(len(W))[None, :] == y[:, None]
    if (gaps[~mine] == 0).any():
        raise ValueError("W has two equal rows: the boundary between those classes is not a hyperplane")
    distances = np.where(mine, np.inf, margins / np.where(mine, 1.0, gaps))
    return MulticlassDistances(np.where(mine, 0.0, margins), distances)


def multiclass_min_l2(X, W, b) -> np.ndarray:
    """The smallest ℓ2 perturbation that moves x onto the decision boundary of a multiclass linear model, for
    the predicted class y: the step :math:`\\delta^* = -\\frac{m_j}{\\lVert w_y - w_j\\rVert_2^2}(w_y - w_j)`
    to the nearest hyperplane, :math:`j = \\arg\\min_{j\\ne y} m_j/\\lVert w_y - w_j\\rVert_2` (exact: the
    region of class y is the intersection of the half-spaces :math:`m_j \\ge 0`).
    X (n, d), W (K, d), b (K,) -> δ* (n, d) (11.2)."""
    X = check_matrix(X, "X")
    W, b = _linear_model(W, b, X.shape[1])
    y = np.argmax(X @ W.T + b, axis=1)
    margins, distances = multiclass_distances(X, y, W, b)
    j = distances.argmin(axis=1)
    rows = np.arange(len(X))
    direction = W[y] - W[j]  # (n, d)
    return -(margins[rows, j] / (direction**2).sum(axis=1))[:, None] * direction


class DeepFoolResult(NamedTuple):
    X_adv: np.ndarray  # (n, d) x + (1 + overshoot) r, without the pixel box
    delta: np.ndarray  # (n, d) the perturbation X_adv - X
    iterations: np.ndarray  # (n,) linearisation steps taken
    fooled: np.ndarray  # (n,) bool: the prediction at X_adv differs from the one at X


def _logit_jacobian(model: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits (n, K) and their Jacobian with respect to the input, (n, K, d) (one backward pass per class)."""
    x = x.detach().requires_grad_(True)
    logits = model(x)
    rows = [
        torch.autograd.grad(logits[:, k].sum(), x, retain_graph=k < logits.shape[1] - 1)[0]
        for k in range(logits.shape[1])
    ]
    return logits.detach(), torch.stack(rows, dim=1)


def deepfool(model: nn.Module, X, steps: int = 50, overshoot: float = 0.02) -> DeepFoolResult:
    """DeepFool: linearise the logits at the current point, take the minimal ℓ2 step to the nearest
    linearised boundary of the original prediction y,
    :math:`r = \\frac{|f_j - f_y|}{\\lVert\\nabla f_j - \\nabla f_y\\rVert_2^2}(\\nabla f_j - \\nabla f_y)`,
    add it to the total r, evaluate at :math:`x + (1 + \\text{overshoot})\\,r` and repeat until the prediction
    changes or `steps` are spent. For an affine model the first step is the exact minimal perturbation
    (`multiclass_min_l2`). No pixel box. X (n, d) -> `DeepFoolResult` (11.2)."""
    x = _inputs(model, X)
    steps = check_int(steps, "steps", 1)
    overshoot = check_number(overshoot, "overshoot", 0)
    rows = torch.arange(len(x), device=x.device)
    with torch.no_grad():
        y = model(x).argmax(dim=1)
    r_total = torch.zeros_like(x)
    iterations = torch.zeros(len(x), dtype=torch.int64, device=x.device)
    active = torch.ones(len(x), dtype=torch.bool, device=x.device)
    for _ in range(steps):
        idx = active.nonzero().squeeze(1)
        if len(idx) == 0:
            break
        logits, jac = _logit_jacobian(model, x[idx] + (1 + overshoot) * r_total[idx])
        y_i, m = y[idx], rows[: len(idx)]  # m: the rows of the active examples
        f_diff = logits - logits[m, y_i][:, None]  # f_k - f_y, (m, K)
        w_diff = jac - jac[m, y_i][:, None, :]  # grad f_k - grad f_y, (m, K, d)
        norms = w_diff.norm(dim=2)
        dist = f_diff.abs() / norms.clamp_min(1e-30)
        dist[m, y_i] = math.inf
        j = dist.argmin(dim=1)
        w_j = w_diff[m, j]
        step = (f_diff[m, j].abs() / norms[m, j].clamp_min(1e-30) ** 2)[:, None]
        r_total[idx] = r_total[idx] + step * w_j
        iterations[idx] += 1
        with torch.no_grad():
            still = model(x[idx] + (1 + overshoot) * r_total[idx]).argmax(dim=1) == y_i
        active[idx] = still
    x_adv = x + (1 + overshoot) * r_total
    with torch.no_grad():
        fooled = model(x_adv).argmax(dim=1) != y
    return DeepFoolResult(to_numpy(x_adv), to_numpy(x_adv - x), to_numpy(iterations), to_numpy(fooled))


class LineSearchResult(NamedTuple):
    X_adv: np.ndarray  # (n, d) x + radius u, where the prediction first changes (no pixel box)
    radius: np.ndarray  # (n,) the ℓ2 length of the step; inf where no step up to radius_max changes it
    fooled: np.ndarray  # (n,) bool


def gradient_line_search(
    model: nn.Module, X, y, radius_max: float = 5.0, direction: str = "l2", grid: int = 100
) -> LineSearchResult:
    """The smallest step :math:`t\\le` `radius_max` along a fixed unit direction u that changes the prediction
    from y: u = :math:`\\nabla_x L/\\lVert\\nabla_x L\\rVert_2` (``direction="l2"``) or
    :math:`\\mathrm{sign}\\,\\nabla_x L/\\sqrt d` (``"sign"``, the FGSM direction), the loss gradient at x.
    The first of `grid` equally spaced radii that changes the prediction is refined by 40 bisections, so
    t is the ℓ2 norm of the perturbation. X (n, d), y (n,) -> `LineSearchResult` (11.2)."""
    x = _inputs(model, X)
    y_t = _labels(model, x, y)
    radius_max = check_positive(radius_max, "radius_max")
    direction = check_choice(direction, "direction", ("l2", "sign"))
    grid = check_int(grid, "grid", 2)
    _, grad = _loss_gradient(model, x, y_t)
    u = grad if direction == "l2" else grad.sign()
    u = u / u.norm(dim=1, keepdim=True).clamp_min(1e-30)

    def changed(t: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return model(x + t[:, None] * u).argmax(dim=1) != y_t

    radii = torch.linspace(0, radius_max, grid + 1, dtype=x.dtype, device=x.device)
    first = torch.full((len(x),), grid + 1, dtype=torch.int64, device=x.device)
    for k in range(grid, 0, -1):  # from the outside in: the last assignment is the first change
        first[changed(radii[k].expand(len(x)))] = k
    fooled = first <= grid
    hi = radii[first.clamp_max(grid)]  # the prediction has changed at hi (where fooled) ...
    lo = radii[(first - 1).clamp_max(grid)]  # ... and not yet at lo
    for _ in range(40):
        mid = (lo + hi) / 2
        flip = changed(mid)
        hi, lo = torch.where(flip, mid, hi), torch.where(flip, lo, mid)
    radius = torch.where(fooled, hi, torch.full_like(hi, math.inf))
    x_adv = x + torch.where(fooled, hi, torch.zeros_like(hi))[:, None] * u
    return LineSearchResult(to_numpy(x_adv), to_numpy(radius), to_numpy(fooled))
