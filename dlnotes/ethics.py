"""Chapter 11 — ethics: adversarial examples and attacks, robust training, certified robustness,
interpretability (saliency, Shapley values) and fairness criteria.

Conventions: an input is a row x (d,) of pixels in [0, 1] (the 8×8 digits scaled by
``load_digits_split(scaling="unit")``), a batch is X (n, d); a classifier is a torch module that maps (n, d) to
logits (n, K); attacks take and return numpy arrays and work in the dtype of the model's parameters (float64
models for checks at 1e-8); a budget ε is measured in the norm ``p`` ∈ {2, inf}.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from scipy import stats
from scipy.optimize import minimize
from scipy.special import expit, xlogy
from sklearn.linear_model import LogisticRegression
from torch import nn
from tqdm.auto import tqdm

from .training import make_loader, to_numpy
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


def lp_norm(x, p: float) -> np.ndarray | float:
    """:math:`\\lVert x\\rVert_p = (\\sum_i |x_i|^p)^{1/p}` for p ≥ 1, :math:`\\max_i|x_i|` for p = inf and the
    count of non-zero entries for p = 0 (not a norm); of a vector (d,) a float, of a batch (n, d) one per row
    (11.1)."""
    x = check_array(x, "x")
    if x.ndim not in (1, 2):
        raise ValueError(f"x must be a vector (d,) or a batch of rows (n, d), got shape {x.shape}")
    if isinstance(p, str) or p != math.inf:
        p = check_number(p, "p", 0)
    if 0 < p < 1:
        raise ValueError(f"p must be 0, a number >= 1 or inf (below 1 it is not a norm), got {p!r}")
    a = np.abs(x)
    if p == 0:
        out = (a > 0).sum(axis=-1).astype(np.float64)
    elif p == math.inf:
        out = a.max(axis=-1)
    else:
        scale = a.max(axis=-1, keepdims=True)  # divide by the largest entry: no overflow for large p
        scale[scale == 0] = 1.0
        out = scale[..., 0] * ((a / scale) ** p).sum(axis=-1) ** (1 / p)
    return float(out) if x.ndim == 1 else out


def _check_p(p) -> float:
    if p in ("inf", math.inf):
        return math.inf
    return float(check_choice(p, "p", (2, "inf")))


def project_lp(delta, eps: float, p="inf") -> np.ndarray:
    """The Euclidean projection of a perturbation onto the ball :math:`\\lVert\\delta\\rVert_p\\le\\epsilon`: for
    p = inf clip every entry to [−ε, ε], for p = 2 rescale :math:`\\delta\\min(1, \\epsilon/\\lVert\\delta\\rVert_2)`
    (a point inside stays where it is). δ (d,) or one row per example (n, d) (11.3)."""
    delta = check_array(delta, "delta")
    if delta.ndim not in (1, 2):
        raise ValueError(f"delta must be a vector (d,) or a batch of rows (n, d), got shape {delta.shape}")
    eps, p = check_number(eps, "eps", 0), _check_p(p)
    if p == math.inf:
        return np.clip(delta, -eps, eps)
    norm = np.linalg.norm(delta, axis=-1, keepdims=True)
    return delta * np.minimum(1.0, eps / np.maximum(norm, 1e-300))


def mlp(hidden=(64, 64), d: int = 64, K: int = 10, dtype: torch.dtype = torch.float32) -> nn.Sequential:
    """The chapter's classifier: d inputs, ReLU hidden layers of the widths in `hidden`, K logits;
    ``hidden=()`` is softmax (multinomial logistic) regression. Initialised from torch's generator (11.1)."""
    widths = [check_int(d, "d", 1), *(check_int(h, "hidden", 1) for h in hidden)]
    layers: list[nn.Module] = []
    for n_in, n_out in zip(widths[:-1], widths[1:], strict=True):
        layers += [nn.Linear(n_in, n_out), nn.ReLU()]
    layers.append(nn.Linear(widths[-1], check_int(K, "K", 2)))
    return nn.Sequential(*layers).to(dtype)


def _dtype(model: nn.Module) -> torch.dtype:
    parameter = next(model.parameters(), None)
    return parameter.dtype if parameter is not None else torch.float32


def _inputs(model: nn.Module, X, name: str = "X") -> torch.Tensor:
    if not isinstance(model, nn.Module):
        raise TypeError(
            f"model must be a torch.nn.Module mapping (n, d) to logits (n, K), got {type(model).__name__}"
        )
    X = check_array(X, name)
    if X.ndim != 2:
        raise ValueError(f"{name} must be a batch of rows (n, d), got shape {X.shape}")
    return torch.as_tensor(X, dtype=_dtype(model))


def train_classifier(
    model: nn.Module,
    X,
    y,
    epochs: int = 60,
    lr: float = 3e-3,
    batch_size: int = 64,
    attack=None,
    rng=None,
    progress: bool = True,
) -> list[float]:
    """Train `model` by Adam on the cross-entropy of (X (n, d), y (n,)) and return the mean loss per epoch.

    With ``attack(model, X_batch, y_batch) -> X_adv`` (numpy arrays) every batch is replaced by its
    adversarial version before the step: adversarial training
    :math:`\\min_\\theta \\mathbb E \\max_{\\lVert\\delta\\rVert\\le\\epsilon} L(f_\\theta(x+\\delta), y)` (11.4).
    Batches are shuffled with `rng`; the model is left in eval mode.
    """
    X = _inputs(model, X)
    y = check_labels(y, "y", len(X))
    if attack is not None:
        check_callable(attack, "attack")
    optimizer = torch.optim.Adam(model.parameters(), lr=check_positive(lr, "lr"))
    loader = make_loader(X, y, batch_size=batch_size, dtype=X.dtype, rng=check_rng(rng))
    losses = []
    for _ in tqdm(range(check_int(epochs, "epochs", 1)), desc="epochs", leave=False, disable=not progress):
        total = 0.0
        for xb, yb in loader:
            if attack is not None:
                model.eval()
                xb = torch.as_tensor(attack(model, to_numpy(xb), to_numpy(yb)), dtype=X.dtype)
            model.train()
            loss = F.cross_entropy(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * len(xb)
        losses.append(total / len(X))
    model.eval()
    return losses


@torch.no_grad()
def predict(model: nn.Module, X) -> np.ndarray:
    """The predicted classes :math:`\\arg\\max_k f_k(x)` of a batch X (n, d), as int64 (n,)."""
    return to_numpy(model(_inputs(model, X)).argmax(dim=1))


def _loss_gradient(
    model: nn.Module, x: torch.Tensor, labels: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-example cross-entropy L(f(x_i), labels_i) (n,) and its gradient with respect to x (n, d)."""
    x = x.detach().requires_grad_(True)
    loss = F.cross_entropy(model(x), labels, reduction="none")
    (grad,) = torch.autograd.grad(loss.sum(), x)
    return loss.detach(), grad


def _check_attack(model, X, y, eps, p="inf"):
    x = _inputs(model, X)
    y = torch.as_tensor(check_labels(y, "y", len(x)))
    return x, y, check_number(eps, "eps", 0), _check_p(p)


def fgsm(model: nn.Module, X, y, eps: float, clip: bool = True) -> np.ndarray:
    """The fast gradient sign method: :math:`x + \\epsilon\\,\\mathrm{sign}\\,\\nabla_x L(f(x), y)`, one ℓ∞
    step on the linearised cross-entropy; with ``clip`` the result is clipped to the pixel box [0, 1].
    X (n, d), y (n,) -> X_adv (n, d) (11.3)."""
    x, y, eps, _ = _check_attack(model, X, y, eps)
    _, grad = _loss_gradient(model, x, y)
    x_adv = x + eps * grad.sign()
    return to_numpy(x_adv.clamp(0, 1) if clip else x_adv)


def pgd_step(x, delta, grad, eps: float, alpha: float, p="inf", clip: bool = True) -> np.ndarray:
    """One step of projected gradient ascent on the input: :math:`\\delta \\leftarrow \\Pi(\\delta + \\alpha g)`
    with :math:`g = \\mathrm{sign}(\\nabla)` for p = inf and :math:`g = \\nabla/\\lVert\\nabla\\rVert_2` for p = 2,
    Π the projection onto the ball :math:`\\lVert\\delta\\rVert_p\\le\\epsilon` (`project_lp`) followed, with
    ``clip``, by the pixel box: :math:`\\delta \\leftarrow \\mathrm{clip}(x + \\delta, 0, 1) - x`.

    x, delta and grad (the gradient of the loss at x + δ; pass the gradient of −L(f(x + δ), t) for a targeted
    step) are vectors (d,) or rows (n, d) of the same shape; returns the new δ (11.3).
    """
    x = check_array(x, "x")
    if x.ndim not in (1, 2):
        raise ValueError(f"x must be a vector (d,) or a batch of rows (n, d), got shape {x.shape}")
    delta, grad = check_array(delta, "delta", x.shape), check_array(grad, "grad", x.shape)
    eps, alpha, p = check_number(eps, "eps", 0), check_positive(alpha, "alpha"), _check_p(p)
    if p == math.inf:
        step = np.sign(grad)
    else:
        step = grad / np.maximum(np.linalg.norm(grad, axis=-1, keepdims=True), 1e-12)
    delta = project_lp(delta + alpha * step, eps, p)
    return np.clip(x + delta, 0.0, 1.0) - x if clip else delta


def pgd(
    model: nn.Module,
    X,
    y,
    eps: float,
    alpha: float,
    steps: int,
    p="inf",
    target=None,
    random_start: bool = True,
    clip: bool = True,
    rng=None,
) -> np.ndarray:
    """Projected gradient descent on the input:
    :math:`\\delta_{\\tau+1} = \\Pi_{\\lVert\\delta\\rVert_p\\le\\epsilon}(\\delta_\\tau \\pm \\alpha g_\\tau)`, with
    :math:`g_\\tau = \\mathrm{sign}\\,\\nabla_x L` for p = inf and :math:`\\nabla_x L/\\lVert\\nabla_x L\\rVert_2` for
    p = 2; untargeted it ascends L(f(x + δ), y), with `target` (n,) it descends L(f(x + δ), t).

    The start is drawn uniformly from the ε-ball with `rng` (``random_start``) or is δ = 0; with ``clip``
    every iterate is also kept in the pixel box [0, 1]. X (n, d), y (n,) -> X_adv (n, d) (11.3).
    """
    x, y, eps, p = _check_attack(model, X, y, eps, p)
    alpha, steps = check_positive(alpha, "alpha"), check_int(steps, "steps", 1)
    labels, sign = y, 1.0
    if target is not None:
        labels, sign = torch.as_tensor(check_labels(target, "target", len(x))), -1.0
    x_np = to_numpy(x).astype(np.float64)
    delta = np.zeros_like(x_np)
    if random_start:
        delta = _uniform_ball(len(x), x.shape[1], eps, p, check_rng(rng))
        delta = np.clip(x_np + delta, 0.0, 1.0) - x_np if clip else delta
    for _ in range(steps):
        _, grad = _loss_gradient(model, x + torch.as_tensor(delta, dtype=x.dtype), labels)
        delta = pgd_step(x_np, delta, sign * to_numpy(grad), eps, alpha, p, clip)
    return (x_np + delta).astype(to_numpy(x).dtype)


def _uniform_ball(n: int, d: int, eps: float, p: float, rng: np.random.Generator) -> np.ndarray:
    """n points drawn uniformly from the ℓp ball of radius ε in R^d (p = inf: a cube; p = 2: a Gaussian
    direction with radius ε U^(1/d))."""
    if p == math.inf:
        return rng.uniform(-eps, eps, size=(n, d))
    direction = rng.normal(size=(n, d))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    return direction * eps * rng.uniform(size=(n, 1)) ** (1 / d)


def robust_accuracy(model: nn.Module, X, y, attack) -> float:
    """The fraction of examples still classified correctly after ``attack(model, X, y) -> X_adv``
    (e.g. ``lambda m, X, y: pgd(m, X, y, 0.1, 0.025, 20)``); the clean accuracy for ``attack=None`` (11.3)."""
    X = check_matrix(X, "X")
    y = check_labels(y, "y", len(X))
    X_attacked = X if attack is None else check_callable(attack, "attack")(model, X, y)
    return float((predict(model, X_attacked) == y).mean())


# ----------------------------------------------------------------------------- 11.1 threat model and norms


def _dual_exponent(p) -> tuple[float, float]:
    """(p, q) with 1/p + 1/q = 1 for p in [1, inf]."""
    if isinstance(p, str) and p == "inf":
        p = math.inf
    if isinstance(p, str) or p != math.inf:
        p = check_number(p, "p")
        if p < 1:
            raise ValueError(f"p must be a number >= 1 or inf (below 1 there is no norm, no dual), got {p!r}")
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


# ----------------------------------------------------------------------------- 11.2 linear classifiers


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
    rows = torch.arange(len(x))
    with torch.no_grad():
        y = model(x).argmax(dim=1)
    r_total = torch.zeros_like(x)
    iterations = torch.zeros(len(x), dtype=torch.int64)
    active = torch.ones(len(x), dtype=torch.bool)
    for _ in range(steps):
        idx = active.nonzero().squeeze(1)
        if len(idx) == 0:
            break
        logits, jac = _logit_jacobian(model, x[idx] + (1 + overshoot) * r_total[idx])
        y_i = y[idx]
        f_diff = logits - logits[rows[: len(idx)], y_i][:, None]  # f_k - f_y, (m, K)
        w_diff = jac - jac[rows[: len(idx)], y_i][:, None, :]  # grad f_k - grad f_y, (m, K, d)
        norms = w_diff.norm(dim=2)
        dist = f_diff.abs() / norms.clamp_min(1e-30)
        dist[rows[: len(idx)], y_i] = math.inf
        j = dist.argmin(dim=1)
        w_j = w_diff[rows[: len(idx)], j]
        step = (f_diff[rows[: len(idx)], j].abs() / norms[rows[: len(idx)], j].clamp_min(1e-30) ** 2)[:, None]
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
    y_t = torch.as_tensor(check_labels(y, "y", len(x)))
    radius_max = check_positive(radius_max, "radius_max")
    direction = check_choice(direction, "direction", ("l2", "sign"))
    grid = check_int(grid, "grid", 2)
    _, grad = _loss_gradient(model, x, y_t)
    u = grad if direction == "l2" else grad.sign()
    u = u / u.norm(dim=1, keepdim=True).clamp_min(1e-30)

    def changed(t: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return model(x + t[:, None] * u).argmax(dim=1) != y_t

    radii = torch.linspace(0, radius_max, grid + 1, dtype=x.dtype)
    first = torch.full((len(x),), grid + 1, dtype=torch.int64)
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


# ----------------------------------------------------------------------------- 11.3 attacks on networks


def _models(models) -> list[nn.Module]:
    if isinstance(models, nn.Module) or not isinstance(models, list | tuple) or not models:
        raise TypeError(
            f"models must be a non-empty list or tuple of torch.nn.Module classifiers, got {type(models).__name__}"
        )
    for i, model in enumerate(models):
        if not isinstance(model, nn.Module):
            raise TypeError(f"models[{i}] must be a torch.nn.Module, got {type(model).__name__}")
    return list(models)


@torch.no_grad()
def class_probabilities(model: nn.Module, X) -> np.ndarray:
    """The softmax of the logits, :math:`P(k\\mid x) = e^{f_k(x)}/\\sum_j e^{f_j(x)}`, of a batch X (n, d), as
    (n, K) (11.3)."""
    return to_numpy(torch.softmax(model(_inputs(model, X)), dim=1))


@torch.no_grad()
def example_losses(model: nn.Module, X, y) -> np.ndarray:
    """The cross-entropy of every example, :math:`L(f(x_i), y_i) = -\\log P(y_i\\mid x_i)`, of X (n, d) with
    labels y (n,), as (n,) (11.3)."""
    x = _inputs(model, X)
    y = torch.as_tensor(check_labels(y, "y", len(x)))
    return to_numpy(F.cross_entropy(model(x), y, reduction="none"))


def accuracy_curve(model: nn.Module, X, y, attack, eps_grid) -> np.ndarray:
    """Accuracy under attack as a function of the budget:
    :math:`\\mathrm{acc}(\\epsilon) = \\frac1n\\sum_i \\mathbb 1[\\arg\\max_k f_k(x_i^{\\mathrm{adv}}(\\epsilon)) = y_i]`
    with ``attack(model, X, y, eps) -> X_adv``; at ε = 0 it is the clean accuracy (the attack is not called).
    X (n, d), y (n,), eps_grid (m,) of budgets ≥ 0 -> (m,) (11.3)."""
    X = check_matrix(X, "X")
    y = check_labels(y, "y", len(X))
    attack = check_callable(attack, "attack")
    eps_grid = check_array(eps_grid, "eps_grid", (None,))
    if len(eps_grid) == 0 or np.any(eps_grid < 0):
        raise ValueError(f"eps_grid must be a non-empty vector of budgets >= 0, got {eps_grid}")
    return np.array(
        [
            robust_accuracy(
                model, X, y, None if eps == 0 else (lambda m, X, y, eps=eps: attack(m, X, y, eps))
            )
            for eps in eps_grid
        ]
    )


def transfer_matrix(models, X, y, attack) -> np.ndarray:
    """How adversarial examples transfer: entry [s, t] is the accuracy of ``models[t]`` on
    ``attack(models[s], X, y)``, the examples crafted on the source model s. The diagonal is each model's
    white-box accuracy, an off-diagonal entry a black-box (transfer) attack. X (n, d), y (n,) -> (S, S) (11.3)."""
    models = _models(models)
    X = check_matrix(X, "X")
    y = check_labels(y, "y", len(X))
    attack = check_callable(attack, "attack")
    matrix = np.empty((len(models), len(models)))
    for s, source in enumerate(models):
        X_adv = attack(source, X, y)
        for t, target in enumerate(models):
            matrix[s, t] = float((predict(target, X_adv) == y).mean())
    return matrix


# ----------------------------------------------------------------------------- 11.4 robust training and distributional robustness


class LinearModel(NamedTuple):
    """A binary linear classifier :math:`\\mathrm{sign}(w^\\top x + b)`: weights w (d,) and bias b."""

    w: np.ndarray
    b: float


def _binary_data(w, b, X, y):
    w = check_vector(w, "w")
    b = check_number(b, "b")
    X = check_array(X, "X")
    if X.ndim not in (1, 2) or X.shape[-1] != len(w):
        raise ValueError(
            f"X must be a vector ({len(w)},) or a batch of rows (n, {len(w)}), got shape {X.shape}"
        )
    y = np.asarray(y)
    y = check_labels(y.reshape(-1), "y", 1 if X.ndim == 1 else len(X), values=(-1, 1))
    return w, b, np.atleast_2d(X), y


def robust_logistic_loss(w, b, X, y, eps: float) -> np.ndarray | float:
    """The worst-case logistic loss of a linear model over an ℓ∞ ball, in closed form:
    :math:`\\max_{\\lVert\\delta\\rVert_\\infty\\le\\epsilon}\\log(1+e^{-y(w^\\top(x+\\delta)+b)})
    = \\log(1+e^{-y(w^\\top x+b)+\\epsilon\\lVert w\\rVert_1})`, attained at :math:`\\delta=-\\epsilon y\\,\\mathrm{sign}(w)`.

    w (d,), b a number, X (d,) or (n, d), labels y ∈ {−1, +1} (a number or (n,)), ε ≥ 0 (ε = 0: the plain
    logistic loss); a float for one x, (n,) for a batch. No box constraint on x + δ (11.4).
    """
    w, b, X2, y = _binary_data(w, b, X, y)
    eps = check_number(eps, "eps", 0)
    z = -y * (X2 @ w + b) + eps * np.abs(w).sum()
    loss = np.logaddexp(0.0, z)  # log(1 + e^z) without overflow
    return float(loss[0]) if np.ndim(X) == 1 else loss


def fit_robust_logistic(X, y, eps: float, lam: float = 1e-3) -> LinearModel:
    """Adversarial training of a linear model, solved exactly: the minimiser of the mean robust logistic loss
    plus a small ridge term,
    :math:`\\frac1n\\sum_i\\log(1+e^{-y_i(w^\\top x_i+b)+\\epsilon\\lVert w\\rVert_1})+\\frac\\lambda2\\lVert w\\rVert_2^2`.

    The ℓ1 norm is made smooth by the split w = u − v, u, v ≥ 0 (L-BFGS-B with bounds); the problem is convex.
    X (n, d), y (n,) in {−1, +1}, ε ≥ 0, λ > 0 (keeps w finite on separable data) -> LinearModel(w, b) (11.4).
    """
    X = check_matrix(X, "X")
    y = check_labels(y, "y", len(X), values=(-1, 1))
    eps, lam = check_number(eps, "eps", 0), check_positive(lam, "lam")
    n, d = X.shape
    yX = y[:, None] * X

    def objective(theta):
        u, v, b = theta[:d], theta[d : 2 * d], theta[-1]
        w = u - v
        z = -(yX @ w) - y * b + eps * (u + v).sum()
        s = 0.5 * (1 + np.tanh(z / 2))  # the sigmoid of z, stable for large |z|
        g_w = -(s @ yX) / n + lam * w
        g_l1 = eps * s.mean()
        grad = np.concatenate([g_w + g_l1, -g_w + g_l1, [-(s @ y) / n]])
        return np.logaddexp(0.0, z).mean() + 0.5 * lam * w @ w, grad

    bounds = [(0, None)] * (2 * d) + [(None, None)]
    result = minimize(
        objective,
        np.zeros(2 * d + 1),
        jac=True,
        method="L-BFGS-B",
        bounds=bounds,
        options={"maxiter": 5000, "ftol": 1e-15, "gtol": 1e-10},
    )
    theta = result.x
    return LinearModel(theta[:d] - theta[d : 2 * d], float(theta[-1]))


def linear_two_class(w, b, dtype: torch.dtype = torch.float64) -> nn.Sequential:
    """The binary linear model as a two-class torch classifier for the attacks: logits (0, w^T x + b), so
    the cross-entropy of label 1 is :math:`\\log(1+e^{-(w^\\top x+b)})` and that of label 0 is
    :math:`\\log(1+e^{w^\\top x+b})` — the logistic loss with y = 2·label − 1. w (d,), b a number (11.4)."""
    w, b = check_vector(w, "w"), check_number(b, "b")
    layer = nn.Linear(len(w), 2, dtype=dtype)
    with torch.no_grad():
        layer.weight.copy_(torch.as_tensor(np.stack([np.zeros_like(w), w]), dtype=dtype))
        layer.bias.copy_(torch.as_tensor([0.0, b], dtype=dtype))
    return nn.Sequential(layer)


class Shifted(NamedTuple):
    """A distribution Q on finitely many points: support X (m, d), labels y (m,), probabilities (m,), and the
    cost of the transport plan that makes it from the empirical distribution."""

    X: np.ndarray
    y: np.ndarray
    weights: np.ndarray
    cost: float


def w1_mass_shift(X, y, w, i: int, rho: float, kappa: float) -> Shifted:
    """The near-worst distribution of the W1 ball (ℓ∞ transport cost) around the empirical distribution
    of (X, y) for a linear model: mass κ of point i moves by :math:`(\\rho/\\kappa)` along
    :math:`-y_i\\,\\mathrm{sign}(w)`, the rest stays; the plan costs :math:`\\kappa\\cdot\\rho/\\kappa=\\rho`.

    X (n, d), y (n,) in {−1, +1}, w (d,), 0 < κ ≤ 1/n (the mass point i has) -> Shifted with n + 1
    support points (the moved copy last) (11.4).
    """
    X = check_matrix(X, "X")
    n = len(X)
    y = check_labels(y, "y", n, values=(-1, 1))
    w = check_vector(w, "w", X.shape[1])
    i = check_int(i, "i", 0, n - 1)
    rho = check_number(rho, "rho", 0)
    kappa = check_number(kappa, "kappa", 0, 1 / n, low_open=True)
    move = -(rho / kappa) * y[i] * np.sign(w)
    weights = np.full(n + 1, 1 / n)
    weights[i] -= kappa
    weights[-1] = kappa
    cost = kappa * float(np.abs(move).max())
    return Shifted(np.vstack([X, X[i] + move]), np.append(y, y[i]), weights, cost)


# ----------------------------------------------------------------------------- 11.5 certified robustness


ABSTAIN = -1  # the label of a smoothed classifier that declines to predict


def add_noise(X, sigma: float, rng=None) -> np.ndarray:
    """The Gaussian-noise copy :math:`x + \\xi`, :math:`\\xi \\sim \\mathcal N(0, \\sigma^2 I)`, of every row of X
    (n, d) -> (n, d), without clipping to [0, 1]: the noise of randomised smoothing and of training for it
    (11.5)."""
    X = check_matrix(X, "X")
    sigma = check_number(sigma, "sigma", 0)
    return X + sigma * check_rng(rng).normal(size=X.shape)


@torch.no_grad()
def noise_counts(model: nn.Module, X, sigma: float, n: int, rng=None, batch_size: int = 20_000) -> np.ndarray:
    """How often the base classifier f predicts each class under noise: counts[i, c] =
    :math:`\\#\\{s \\le n : f(x_i + \\xi_s) = c\\}`, :math:`\\xi_s \\sim \\mathcal N(0, \\sigma^2 I)` i.i.d.
    X (m, d) -> int64 (m, K), every row summing to n (11.5)."""
    x = _inputs(model, X)
    sigma, n = check_positive(sigma, "sigma"), check_int(n, "n", 1)
    batch_size = check_int(batch_size, "batch_size", 1)
    generator = torch.Generator().manual_seed(int(check_rng(rng).integers(2**62)))  # torch draws faster
    m, d = x.shape
    K = None
    flat = []
    for start in range(0, m * n, batch_size):
        rows = torch.arange(start, min(start + batch_size, m * n)) // n  # the point of each noisy copy
        noise = torch.randn((len(rows), d), generator=generator, dtype=x.dtype)
        logits = model(x[rows] + sigma * noise)
        K = logits.shape[1]
        flat.append(to_numpy(rows * K + logits.argmax(dim=1)))
    return np.bincount(np.concatenate(flat), minlength=m * K).reshape(m, K).astype(np.int64)


def smoothed_predict(model: nn.Module, X, sigma: float, n: int = 1000, rng=None) -> np.ndarray:
    """The smoothed classifier :math:`g(x) = \\arg\\max_c \\mathbb P_\\xi(f(x + \\xi) = c)`,
    :math:`\\xi \\sim \\mathcal N(0, \\sigma^2 I)`, estimated by the majority vote of n noisy copies of each row
    of X (m, d) -> int64 (m,) (11.5). (Cohen et al.'s PREDICT also abstains when a binomial test cannot tell the
    two leading classes apart; this estimate always answers.)"""
    return noise_counts(model, X, sigma, n, rng).argmax(axis=1)


def clopper_pearson_lower(k, n: int, alpha: float) -> np.ndarray:
    """The one-sided Clopper–Pearson lower confidence bound of a binomial proportion: with probability at least
    1 − α, :math:`p \\ge \\underline p = B^{-1}(\\alpha;\\,k,\\,n-k+1)` (the α-quantile of a Beta distribution;
    0 for k = 0), for k successes in n trials. k (m,) -> (m,) (11.5)."""
    n = check_int(n, "n", 1)
    k = check_array(np.atleast_1d(k), "k", ndim=1)
    if np.any(k < 0) or np.any(k > n) or np.any(k != np.round(k)):
        raise ValueError(f"k must hold whole numbers of successes in [0, n = {n}], got {k}")
    alpha = check_number(alpha, "alpha", 0, 1, low_open=True, high_open=True)
    with np.errstate(invalid="ignore"):
        lower = stats.beta.ppf(alpha, np.maximum(k, 1), n - k + 1)
    return np.where(k == 0, 0.0, lower)


def smoothing_radius(p_lower, sigma: float) -> np.ndarray:
    """The certified ℓ2 radius of randomised smoothing,
    :math:`R = \\frac\\sigma2\\big(\\Phi^{-1}(\\underline{p_A}) - \\Phi^{-1}(\\overline{p_B})\\big)
    = \\sigma\\,\\Phi^{-1}(\\underline{p_A})` with :math:`\\overline{p_B} = 1 - \\underline{p_A}`; 0 (abstain) where
    :math:`\\underline{p_A} \\le \\frac12`. p_lower (m,) -> (m,) (11.5)."""
    p_lower = check_array(np.atleast_1d(p_lower), "p_lower", ndim=1)
    if np.any(p_lower < 0) or np.any(p_lower > 1):
        raise ValueError(f"p_lower must hold probabilities in [0, 1], got {p_lower}")
    sigma = check_positive(sigma, "sigma")
    return np.where(p_lower > 0.5, sigma * stats.norm.ppf(np.maximum(p_lower, 0.5)), 0.0)


class Certificate(NamedTuple):
    label: np.ndarray  # (m,) the class of g, ABSTAIN (-1) where the bound p_lower <= 1/2
    radius: np.ndarray  # (m,) the certified l2 radius sigma Phi^-1(p_lower), 0 where g abstains
    p_lower: np.ndarray  # (m,) the Clopper-Pearson lower bound of p_A


def certify(
    model: nn.Module, X, sigma: float, n0: int = 100, n: int = 10_000, alpha: float = 1e-3, rng=None
) -> Certificate:
    """CERTIFY of Cohen et al. (2019) for every row of X (m, d): guess the top class
    :math:`\\hat c_A` from n0 noisy copies, count it among n *fresh* copies, bound
    :math:`p_A \\ge \\underline{p_A}` by Clopper–Pearson at level 1 − α, and return
    :math:`\\hat c_A` with :math:`R = \\sigma\\Phi^{-1}(\\underline{p_A})`, or abstain if
    :math:`\\underline{p_A} \\le \\frac12`. With probability ≥ 1 − α per point, g is constant on the ℓ2 ball of
    radius R. Returns a `Certificate` of three (m,) arrays (11.5)."""
    rng = check_rng(rng)
    alpha = check_number(alpha, "alpha", 0, 1, low_open=True, high_open=True)
    guess = noise_counts(model, X, sigma, check_int(n0, "n0", 1), rng).argmax(axis=1)
    counts = noise_counts(model, X, sigma, n, rng)  # fresh samples: the guess must not see them
    p_lower = clopper_pearson_lower(counts[np.arange(len(guess)), guess], n, alpha)
    radius = smoothing_radius(p_lower, sigma)
    return Certificate(np.where(p_lower > 0.5, guess, ABSTAIN), radius, p_lower)


def certified_accuracy(label, radius, y, radii) -> np.ndarray:
    """The certified accuracy at each radius r: the fraction of points whose certified label is the true one
    with a certified radius of at least r, :math:`\\frac1m\\#\\{i : \\hat c_i = y_i,\\ R_i \\ge r\\}`.
    label, radius, y (m,), radii (k,) -> (k,) (11.5)."""
    label = check_array(label, "label", ndim=1)
    radius = check_array(radius, "radius", (len(label),))
    y = check_labels(y, "y", len(label))
    radii = check_array(np.atleast_1d(radii), "radii", ndim=1)
    correct = label == y
    return np.array([np.mean(correct & (radius >= r)) for r in radii])


class _SoftSmoothed(nn.Module):
    def __init__(self, model: nn.Module, sigma: float, m: int, generator: torch.Generator):
        super().__init__()
        self.model, self.sigma, self.m, self.generator = model, sigma, m, generator

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        noise = torch.randn((self.m, *x.shape), generator=self.generator, dtype=x.dtype)
        probs = F.softmax(self.model(x.unsqueeze(0) + self.sigma * noise), dim=-1)
        return probs.mean(dim=0).clamp_min(1e-30).log()


def soft_smoothed(model: nn.Module, sigma: float, m: int = 32, rng=None) -> nn.Module:
    """A torch module for attacking the smoothed classifier: the log of the noise-averaged softmax,
    :math:`\\log \\frac1m\\sum_{s\\le m}\\mathrm{softmax}(f(x + \\xi_s))`, fresh
    :math:`\\xi_s \\sim \\mathcal N(0, \\sigma^2 I)` at every call; its cross-entropy is
    :math:`-\\log G_y(x)`, so ``pgd(soft_smoothed(f, sigma), X, y, ...)`` attacks g rather than f (Salman et
    al.'s SmoothAdv). (n, d) -> (n, K) (11.5)."""
    if not isinstance(model, nn.Module):
        raise TypeError(
            f"model must be a torch.nn.Module mapping (n, d) to logits (n, K), got {type(model).__name__}"
        )
    generator = torch.Generator().manual_seed(int(check_rng(rng).integers(2**62)))
    return _SoftSmoothed(model, check_positive(sigma, "sigma"), check_int(m, "m", 1), generator).to(
        _dtype(model)
    )


_NON_DECREASING = (nn.ReLU, nn.LeakyReLU, nn.Sigmoid, nn.Tanh, nn.Identity)


class Bounds(NamedTuple):
    lo: np.ndarray  # (n, K) lower bounds (of the logits, or of one layer's outputs)
    hi: np.ndarray  # (n, K) upper bounds


def ibp_affine(lo, hi, W, b) -> Bounds:
    """The exact interval of an affine map over a box: for :math:`l \\le x \\le u` (rows (n, d) or one (d,)),
    centre :math:`c = (l + u)/2` and radius :math:`r = (u - l)/2`, :math:`Wx + b` lies in
    :math:`[Wc + b - |W|r,\\ Wc + b + |W|r]`, and both ends are attained at corners of the box. W (k, d),
    b (k,) -> Bounds (n, k) or (k,) (11.5)."""
    lo, hi = check_array(lo, "lo"), check_array(hi, "hi")
    if lo.ndim not in (1, 2) or hi.shape != lo.shape:
        raise ValueError(
            f"lo and hi must be equal-shaped vectors (d,) or rows (n, d), got {lo.shape} and {hi.shape}"
        )
    if np.any(lo > hi):
        raise ValueError("lo must be <= hi entrywise (an empty box)")
    W = check_matrix(W, "W", cols=lo.shape[-1])
    b = check_array(b, "b", (W.shape[0],))
    c, r = (lo + hi) / 2, (hi - lo) / 2
    centre, radius = c @ W.T + b, r @ np.abs(W).T
    return Bounds(centre - radius, centre + radius)


def ibp_bounds(model: nn.Module, X, eps: float) -> Bounds:
    """Interval bound propagation: bounds [lo, hi] (n, K) on every logit of `model` over the ℓ∞ box
    :math:`[x - \\epsilon, x + \\epsilon] \\cap [0, 1]^d` around each row of X (n, d).

    A box with centre c and radius r goes through an affine layer as :math:`c' = Wc + b`, :math:`r' = |W|\\,r`
    and through a non-decreasing activation as :math:`[l, u] \\mapsto [\\varphi(l), \\varphi(u)]`. `model` is an
    ``nn.Sequential`` of ``Linear`` layers and non-decreasing activations (ReLU, LeakyReLU with a slope ≥ 0,
    Sigmoid, Tanh); the bounds are computed in float64 and hold for the network evaluated in float64 (11.5).
    """
    X = _inputs(model, X)
    eps = check_number(eps, "eps", 0)
    if not isinstance(model, nn.Sequential):
        raise TypeError(
            f"model must be an nn.Sequential of Linear layers and activations, got {type(model).__name__}"
        )
    x = X.to(torch.float64)
    lo, hi = (x - eps).clamp(0, 1), (x + eps).clamp(0, 1)
    with torch.no_grad():
        for layer in model:
            if isinstance(layer, nn.Linear):
                b = layer.bias if layer.bias is not None else torch.zeros(layer.out_features)
                box = ibp_affine(to_numpy(lo), to_numpy(hi), to_numpy(layer.weight), to_numpy(b))
                lo, hi = torch.as_tensor(box.lo), torch.as_tensor(box.hi)
            elif isinstance(layer, _NON_DECREASING) and getattr(layer, "negative_slope", 0.0) >= 0:
                lo, hi = layer(lo), layer(hi)
            else:
                raise TypeError(
                    "model must consist of Linear layers and non-decreasing activations (ReLU, LeakyReLU with a "
                    f"slope >= 0, Sigmoid, Tanh), got {layer!r}"
                )
    return Bounds(to_numpy(lo), to_numpy(hi))


def ibp_certify(model: nn.Module, X, y, eps: float) -> np.ndarray:
    """Certified by IBP: :math:`\\underline{f_y}(x) - \\max_{j\\ne y}\\overline{f_j}(x) > 0`, so that no point of
    the ε-box (clipped to [0, 1]) changes the prediction away from the true class y. X (n, d), y (n,) ->
    bool (n,) (11.5)."""
    lo, hi = ibp_bounds(model, X, eps)
    y = check_labels(y, "y", len(lo), n_classes=lo.shape[1])
    rows = np.arange(len(y))
    others = hi.copy()
    others[rows, y] = -np.inf
    return lo[rows, y] - others.max(axis=1) > 0


def lipschitz_radius(model: nn.Module, X, y) -> np.ndarray:
    """The Lipschitz-margin certificate of Tsuzuku et al. (2018): with
    :math:`L = \\prod_l \\lVert W_l\\rVert_2` (an upper bound of the ℓ2 Lipschitz constant of x ↦ f(x) for
    1-Lipschitz activations), the prediction cannot change within
    :math:`R = (f_y(x) - \\max_{j\\ne y} f_j(x))/(\\sqrt2\\,L)`; 0 where x is misclassified.
    X (n, d), y (n,) -> (n,) (11.5)."""
    x = _inputs(model, X)
    if not isinstance(model, nn.Sequential):
        raise TypeError(
            f"model must be an nn.Sequential of Linear layers and activations, got {type(model).__name__}"
        )
    lipschitz = 1.0
    for layer in model:
        if isinstance(layer, nn.Linear):
            lipschitz *= float(torch.linalg.matrix_norm(layer.weight.detach().to(torch.float64), ord=2))
        elif not isinstance(layer, (nn.ReLU, nn.Tanh, nn.Sigmoid, nn.Identity)):
            raise TypeError(
                f"model must consist of Linear layers and 1-Lipschitz activations (ReLU, Tanh, Sigmoid), got {layer!r}"
            )
    with torch.no_grad():
        logits = to_numpy(model(x)).astype(np.float64)
    y = check_labels(y, "y", len(logits), n_classes=logits.shape[1])
    rows = np.arange(len(y))
    others = logits.copy()
    others[rows, y] = -np.inf
    margin = logits[rows, y] - others.max(axis=1)
    return np.maximum(margin, 0.0) / (math.sqrt(2) * lipschitz)


# ----------------------------------------------------------------------------- 11.6 local explanations: profiles and saliency


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
        return torch.full((len(x),), check_int(k, "k", 0), dtype=torch.int64)
    return torch.as_tensor(check_labels(k, "k", len(x)))


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
        x0 = torch.as_tensor(baseline, dtype=x.dtype).expand(n, d)
    classes = _classes(model, x, k)
    alphas = (torch.arange(steps, dtype=x.dtype) + 0.5) / steps  # the midpoints of m equal cells of [0, 1]
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
    xi = torch.as_tensor(check_rng(rng).normal(0.0, sigma, size=(samples, n, d)), dtype=x.dtype)
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


# ----------------------------------------------------------------------------- 11.6 attribution by removal: Shapley values, SHAP and SAGE


REDUNDANT_FEATURES = (
    "x_a",
    "x_c (irrelevant)",
    "x_b",
    "x_b (copy)",
)  # the columns of redundant_logistic_data


class LabelledData(NamedTuple):
    X: np.ndarray  # (n, d) features, one example per row
    y: np.ndarray  # (n,) labels in {0, 1}


def redundant_logistic_data(n: int, rng=None) -> LabelledData:
    """Synthetic logistic data with an irrelevant and a duplicated feature: independent
    :math:`x_a, x_b, x_c \\sim \\mathcal N(0, 1)`, :math:`P(Y=1\\mid x) = \\sigma(2x_a + 2x_b)`, and the columns
    of X (n, 4) are :math:`(x_a, x_c, x_b, x_b)` (`REDUNDANT_FEATURES`); y (n,) in {0, 1} (11.6)."""
    n, rng = check_int(n, "n", 1), check_rng(rng)
    x_a, x_b, x_c = rng.standard_normal((3, n))
    y = (rng.uniform(size=n) < expit(2 * x_a + 2 * x_b)).astype(np.int64)
    return LabelledData(np.column_stack([x_a, x_c, x_b, x_b]), y)


def _model_outputs(f, Z: np.ndarray, name: str = "f") -> np.ndarray:
    """f applied to the rows of Z (N, d), checked to return one finite number per row."""
    out = np.asarray(f(Z), dtype=np.float64)
    if out.shape != (len(Z),):
        raise ValueError(f"{name} must map rows (N, d) to one number per row (N,), got shape {out.shape}")
    if not np.isfinite(out).all():
        raise ValueError(f"{name} returned NaN or infinity")
    return out


def missing_info(f, x, j: int, X_ref) -> float:
    """The missing-information attribution of feature j at x:
    :math:`f(x) - \\mathbb E[f(X)\\mid X_{-j} = x_{-j}]`, with the expectation estimated by putting the
    column j of the sample X_ref (m, d) into x. For independent features X_ref is any sample of X (the
    conditional law of X_j is its marginal); otherwise its column j must be drawn from X_j given
    :math:`X_{-j} = x_{-j}`. f maps rows (N, d) to (N,); x (d,) (11.6)."""
    check_callable(f, "f")
    x = check_vector(x, "x")
    d = len(x)
    j = check_int(j, "j", 0, d - 1)
    X_ref = check_matrix(X_ref, "X_ref", cols=d)
    Z = np.repeat(x[None], len(X_ref), axis=0)
    Z[:, j] = X_ref[:, j]
    return float(_model_outputs(f, x[None])[0] - _model_outputs(f, Z).mean())


class Utility(NamedTuple):
    utility: float  # risk without x_j - risk with x_j, in nats
    risk_with: float  # test log-loss of the model trained on all features
    risk_without: float  # test log-loss of the model retrained without feature j


def logistic_risk(X, y, X_test, y_test, features=None) -> float:
    """The test log-loss (mean cross-entropy in nats) of a logistic regression (scikit-learn, default L2 penalty
    C = 1) trained on the columns `features` of (X (n, d), y (n,)); no feature: the constant prediction
    :math:`\\bar y`. :math:`-\\frac1{n'}\\sum_i [y_i\\log\\hat p_i + (1-y_i)\\log(1-\\hat p_i)]` on
    (X_test (n', d), y_test (n',)) (11.6)."""
    X = check_matrix(X, "X")
    y = check_labels(y, "y", len(X), values=(0, 1))
    X_test = check_matrix(X_test, "X_test", cols=X.shape[1])
    y_test = check_labels(y_test, "y_test", len(X_test), values=(0, 1))
    columns = list(range(X.shape[1])) if features is None else features
    columns = [check_int(c, "features", 0, X.shape[1] - 1) for c in columns]
    if columns:
        model = LogisticRegression().fit(X[:, columns], y)
        p_hat = model.predict_proba(X_test[:, columns])[:, 1]
    else:
        p_hat = np.full(len(X_test), y.mean())
    return _binary_log_loss(p_hat, y_test).mean()


def _binary_log_loss(p_hat, y) -> np.ndarray:
    p_hat = np.clip(p_hat, 1e-15, 1 - 1e-15)
    return -(xlogy(y, p_hat) + xlogy(1 - y, 1 - p_hat))


def predictive_utility(X, y, j: int, X_test, y_test) -> Utility:
    """The predictive utility of feature j: the test log-loss of a logistic regression *retrained* without
    column j minus that of the one trained on all columns,
    :math:`\\mathcal R(f_{-j}) - \\mathcal R(f)`; for a well-specified model and much data it approaches the
    conditional mutual information :math:`I(X_j; Y\\mid X_{-j})`. X (n, d), y (n,) in {0, 1}, test data alike
    (11.6)."""
    X = check_matrix(X, "X")
    j = check_int(j, "j", 0, X.shape[1] - 1)
    risk_with = logistic_risk(X, y, X_test, y_test)
    others = [c for c in range(X.shape[1]) if c != j]
    risk_without = logistic_risk(X, y, X_test, y_test, others)
    return Utility(float(risk_without - risk_with), float(risk_with), float(risk_without))


def _coalition(mask: int, d: int) -> tuple[int, ...]:
    return tuple(k for k in range(d) if mask >> k & 1)


def _game_values(value_fn, d: int) -> np.ndarray:
    """v(S) for all 2^d coalitions, indexed by the bit mask of S."""
    check_callable(value_fn, "value_fn")
    d = check_int(d, "d", 1, 20)
    return np.array([check_number(value_fn(_coalition(m, d)), "value_fn(S)") for m in range(2**d)])


def _semivalue(values: np.ndarray, d: int, weight) -> np.ndarray:
    """:math:`\\phi_j = \\sum_{S \\not\\ni j} w(|S|)[v(S\\cup j) - v(S)]` from the values (2^d, ...) of all
    coalitions (any trailing axes, e.g. one per example)."""
    sizes = np.array([bin(m).count("1") for m in range(2**d)])
    phi = np.zeros((d, *values.shape[1:]))
    for j in range(d):
        without = np.array([m for m in range(2**d) if not m >> j & 1])
        w = np.array([weight(s) for s in sizes[without]]).reshape(-1, *([1] * (values.ndim - 1)))
        phi[j] = (w * (values[without | 1 << j] - values[without])).sum(axis=0)
    return phi


def shapley_weight(s: int, d: int) -> float:
    """The Shapley weight of a coalition of size s among d players, :math:`\\frac{s!\\,(d-s-1)!}{d!}`: the
    probability that, in a random order of the players, exactly the members of S come before j (11.6)."""
    d = check_int(d, "d", 1)
    s = check_int(s, "s", 0, d - 1)
    return math.factorial(s) * math.factorial(d - s - 1) / math.factorial(d)


def shapley_exact(value_fn, d: int) -> np.ndarray:
    """The Shapley values of the game v on the players N = {0, …, d−1}, by enumerating all coalitions,
    :math:`\\phi_j = \\sum_{S\\subseteq N\\setminus\\{j\\}} \\frac{|S|!\\,(d-|S|-1)!}{d!}\\,[v(S\\cup\\{j\\}) - v(S)]`.
    ``value_fn(S)`` takes a sorted tuple of player indices and returns a number; it is called 2^d times.
    Returns φ (d,) (11.6)."""
    values = _game_values(value_fn, d)
    return _semivalue(values, int(d), lambda s: shapley_weight(s, int(d)))


def banzhaf_exact(value_fn, d: int) -> np.ndarray:
    """The Banzhaf values, the same sum with every coalition weighted alike,
    :math:`\\beta_j = \\frac1{2^{d-1}}\\sum_{S\\subseteq N\\setminus\\{j\\}}[v(S\\cup\\{j\\}) - v(S)]`; unlike the
    Shapley value they need not sum to v(N) − v(∅). Returns β (d,) (11.6)."""
    values = _game_values(value_fn, d)
    return _semivalue(values, int(d), lambda s: 0.5 ** (int(d) - 1))


def kernel_shap(value_fn, d: int) -> np.ndarray:
    """The Shapley values as the solution of KernelSHAP's weighted least squares over all coalitions
    (Lundberg & Lee 2017):
    :math:`\\min_\\phi \\sum_{0<|S|<d} \\pi(S)\\,\\big(v(S) - v(\\varnothing) - \\sum_{j\\in S}\\phi_j\\big)^2` with
    :math:`\\pi(S) = \\frac{d-1}{\\binom d{|S|}\\,|S|\\,(d-|S|)}`, subject to
    :math:`\\sum_j\\phi_j = v(N) - v(\\varnothing)`; solved exactly (KKT system). Returns φ (d,) (11.6)."""
    values = _game_values(value_fn, d)
    d = int(d)
    total = values[-1] - values[0]
    if d == 1:
        return np.array([total])
    masks = range(1, 2**d - 1)
    A = np.array([[m >> k & 1 for k in range(d)] for m in masks], dtype=np.float64)
    sizes = A.sum(axis=1)
    pi = (d - 1) / (np.array([math.comb(d, int(s)) for s in sizes]) * sizes * (d - sizes))
    b = values[1:-1] - values[0]
    kkt = np.zeros((d + 1, d + 1))
    kkt[:d, :d] = 2 * A.T @ (pi[:, None] * A)
    kkt[:d, d] = kkt[d, :d] = 1.0
    rhs = np.concatenate([2 * A.T @ (pi * b), [total]])
    return np.linalg.solve(kkt, rhs)[:d]


def interventional_value(f, x, S, X_background) -> float:
    """SHAP's value of a coalition S at x for a fixed model f, the interventional expectation
    :math:`v(S) = \\mathbb E[f(x_S, X_{\\bar S})] \\approx \\frac1m\\sum_b f(x_S, x^{(b)}_{\\bar S})`: the features
    in S keep their values, the others are taken from each row of X_background (m, d). It equals the
    conditional :math:`\\mathbb E[f(X)\\mid X_S = x_S]` only for independent features. f maps (N, d) to (N,);
    x (d,); S an iterable of feature indices (11.6)."""
    x = check_vector(x, "x")
    X_background = check_matrix(X_background, "X_background", cols=len(x))
    S = [check_int(k, "S", 0, len(x) - 1) for k in S]
    Z = X_background.copy()
    Z[:, S] = x[S]
    return float(_model_outputs(check_callable(f, "f"), Z).mean())


def _coalition_means(f, X: np.ndarray, X_background: np.ndarray) -> np.ndarray:
    """For every coalition mask (2^d) and row x_i of X: the mean over the background of f(x_S, x^(b)_S̄), (2^d, n)."""
    n, d = X.shape
    out = np.empty((2**d, n))
    for m in range(2**d):
        keep = np.array([m >> k & 1 for k in range(d)], dtype=bool)
        Z = np.where(keep, X[:, None, :], X_background[None, :, :]).reshape(-1, d)
        out[m] = _model_outputs(f, Z).reshape(n, len(X_background)).mean(axis=1)
    return out


def shap_values(f, X, X_background) -> np.ndarray:
    """The (interventional) SHAP values of the fixed model f at every row of X (n, d): the Shapley values of the
    games :math:`v_x(S) = \\mathbb E[f(x_S, X_{\\bar S})]` over the background sample X_background (m, d),
    exactly by enumeration (2^d · n · m evaluations of f, which maps (N, d) to (N,)). They sum to
    :math:`f(x) - \\frac1m\\sum_b f(x^{(b)})`. Returns φ (n, d) (11.6)."""
    check_callable(f, "f")
    X = check_matrix(X, "X")
    X_background = check_matrix(X_background, "X_background", cols=X.shape[1])
    d = check_int(X.shape[1], "the number of columns of X", 1, 12)
    return _semivalue(_coalition_means(f, X, X_background), d, lambda s: shapley_weight(s, d)).T


def sage_values(f, X, y, X_background) -> np.ndarray:
    """SAGE values (Covert et al. 2020): the Shapley values of the game
    :math:`v(S) = -\\mathbb E\\,L(f_S(X_S), Y)` for the fixed probabilistic classifier f (rows (N, d) ->
    P(Y = 1 | x) (N,)), with :math:`f_S(x_S) = \\mathbb E[f(x_S, X_{\\bar S})]` over X_background (m, d) and L the
    log-loss in nats, averaged over (X (n, d), y (n,) in {0, 1}). They sum to the risk of the constant
    prediction :math:`\\mathbb E f(X)` minus the risk of f. Returns φ (d,) (11.6)."""
    check_callable(f, "f")
    X = check_matrix(X, "X")
    y = check_labels(y, "y", len(X), values=(0, 1))
    X_background = check_matrix(X_background, "X_background", cols=X.shape[1])
    d = check_int(X.shape[1], "the number of columns of X", 1, 12)
    p_S = _coalition_means(f, X, X_background)
    if ((p_S < 0) | (p_S > 1)).any():
        raise ValueError("f must return probabilities P(Y = 1 | x) in [0, 1]")
    values = -_binary_log_loss(p_S, y[None, :]).mean(axis=1)
    return _semivalue(values, d, lambda s: shapley_weight(s, d))


# ----------------------------------------------------------------------------- 11.7 fairness


class CreditPopulation(NamedTuple):
    """A synthetic credit population: features X (n, 3), protected attribute a (n,) in {0, 1} and outcome
    y (n,) in {0, 1} (1 = repays)."""

    X: np.ndarray
    a: np.ndarray
    y: np.ndarray


def credit_population(
    n: int, shift: float = 0.8, noise=(0.5, 1.2), p_group: float = 0.4, rng=None
) -> CreditPopulation:
    """Draw n applicants of a synthetic credit population in which the group changes the base rate and the
    quality of the main feature (11.7).

    :math:`A\\sim\\mathrm{Bernoulli}(p_{\\mathrm{group}})`; creditworthiness
    :math:`z\\sim\\mathcal N(-\\mathrm{shift}\\cdot A, 1)`; outcome :math:`Y = 1\\{z + 0.5\\,\\zeta_0 > -0.2\\}`;
    features :math:`x_1 = z + \\mathrm{noise}_A\\,\\zeta_1` (a credit score, noisier in one group),
    :math:`x_2 = z/2 + \\zeta_2` (a weaker second signal) and :math:`x_3 = A + 0.6\\,\\zeta_3` (a proxy of A, e.g. the
    neighbourhood), with independent standard normal :math:`\\zeta_j`. Returns X (n, 3) without A, a (n,), y (n,).
    """
    n = check_int(n, "n", 1)
    shift = check_number(shift, "shift")
    noise = check_array(noise, "noise", (2,))
    if (noise < 0).any():
        raise ValueError(f"noise must hold two standard deviations >= 0 (groups 0 and 1), got {noise}")
    p_group = check_number(p_group, "p_group", 0, 1)
    rng = check_rng(rng)
    a = (rng.random(n) < p_group).astype(np.int64)
    z = rng.normal(size=n) - shift * a
    y = (z + 0.5 * rng.normal(size=n) > -0.2).astype(np.int64)
    x1 = z + noise[a] * rng.normal(size=n)
    x2 = 0.5 * z + rng.normal(size=n)
    x3 = a + 0.6 * rng.normal(size=n)
    return CreditPopulation(np.column_stack([x1, x2, x3]), a, y)


def group_aware_features(X, a) -> np.ndarray:
    """The features of a group-aware linear model: :math:`[X, A, A\\cdot X]`, so that a logistic regression can
    have one intercept and one slope per group. X (n, d), a (n,) -> (n, 2d + 1) (11.7)."""
    X = check_matrix(X, "X")
    a = _check_groups(a, len(X))
    return np.column_stack([X, a, a[:, None] * X])


def _check_groups(a, n: int | None = None) -> np.ndarray:
    a = check_labels(a, "a", n)
    if a.min() < 0:
        raise ValueError(f"a must hold group labels 0, 1, ..., G - 1, got {a.min()}")
    missing = sorted(set(range(int(a.max()) + 1)) - set(np.unique(a).tolist()))
    if missing or a.max() < 1:
        raise ValueError(
            f"a must hold at least two groups labelled 0, 1, ..., G - 1, each present; got groups "
            f"{np.unique(a).tolist()}"
        )
    return a


def _check_outcomes(y, y_hat, a):
    a = _check_groups(a)
    y = check_labels(y, "y", len(a), values=(0, 1))
    y_hat = check_labels(y_hat, "y_hat", len(a), values=(0, 1))
    return y, y_hat, a


class GroupConfusion(NamedTuple):
    """Confusion-matrix counts per group, each (G,): true positives, false positives, false negatives, true
    negatives."""

    TP: np.ndarray
    FP: np.ndarray
    FN: np.ndarray
    TN: np.ndarray


def confusion_by_group(y, y_hat, a) -> GroupConfusion:
    """The confusion matrix of each group :math:`A = a`: :math:`TP_a = \\#\\{Y=1,\\hat Y=1,A=a\\}`, and FP, FN, TN
    likewise. y, y_hat (n,) in {0, 1}, a (n,) in {0, ..., G−1} -> four count arrays (G,) (11.7)."""
    y, y_hat, a = _check_outcomes(y, y_hat, a)
    G = int(a.max()) + 1
    cell = a * 4 + 2 * y + y_hat  # one count per (group, y, y_hat)
    counts = np.bincount(cell, minlength=4 * G).reshape(G, 2, 2)
    return GroupConfusion(counts[:, 1, 1], counts[:, 0, 1], counts[:, 1, 0], counts[:, 0, 0])


class GroupRates(NamedTuple):
    """Rates per group, each (G,): TPR = TP/(TP+FN), FPR = FP/(FP+TN), FNR = FN/(TP+FN), PPV = TP/(TP+FP), the
    positive rate P(Ŷ=1|A=a) and the base rate π_a = P(Y=1|A=a); NaN where a denominator is 0."""

    TPR: np.ndarray
    FPR: np.ndarray
    FNR: np.ndarray
    PPV: np.ndarray
    positive_rate: np.ndarray
    base_rate: np.ndarray


def _ratio(num, den) -> np.ndarray:
    num, den = np.asarray(num, dtype=np.float64), np.asarray(den, dtype=np.float64)
    return np.divide(num, den, out=np.full(num.shape, np.nan), where=den > 0)


def group_rates(y, y_hat, a) -> GroupRates:
    """The error rates of each group from its confusion matrix:
    :math:`\\mathrm{TPR}_a = P(\\hat Y=1\\mid Y=1, A=a)`, :math:`\\mathrm{FPR}_a = P(\\hat Y=1\\mid Y=0, A=a)`,
    :math:`\\mathrm{FNR}_a = 1-\\mathrm{TPR}_a`, :math:`\\mathrm{PPV}_a = P(Y=1\\mid\\hat Y=1, A=a)`, the positive
    rate :math:`P(\\hat Y=1\\mid A=a)` and the base rate :math:`\\pi_a = P(Y=1\\mid A=a)`.
    y, y_hat (n,) in {0, 1}, a (n,) -> six arrays (G,) (11.7)."""
    TP, FP, FN, TN = confusion_by_group(y, y_hat, a)
    n_a = TP + FP + FN + TN
    return GroupRates(
        _ratio(TP, TP + FN),
        _ratio(FP, FP + TN),
        _ratio(FN, TP + FN),
        _ratio(TP, TP + FP),
        _ratio(TP + FP, n_a),
        _ratio(TP + FN, n_a),
    )


class FairnessGaps(NamedTuple):
    """The largest differences between groups: Δ_DP (positive rates), Δ_EO = max(TPR gap, FPR gap), and the TPR,
    FPR and PPV gaps."""

    dp: float
    eo: float
    tpr: float
    fpr: float
    ppv: float


def fairness_gaps(y, y_hat, a) -> FairnessGaps:
    """The gaps of the three criteria between groups (for two groups the absolute difference; for more, max − min):
    :math:`\\Delta_{\\mathrm{DP}} = |P(\\hat Y=1|A=0) - P(\\hat Y=1|A=1)|`,
    :math:`\\Delta_{\\mathrm{EO}} = \\max_{y\\in\\{0,1\\}}|P(\\hat Y=1|A=0,Y=y) - P(\\hat Y=1|A=1,Y=y)|`, the TPR gap
    (equality of opportunity), the FPR gap and the PPV gap (sufficiency). y, y_hat, a (n,) (11.7)."""
    r = group_rates(y, y_hat, a)

    def spread(v):
        return float(v.max() - v.min())

    tpr, fpr = spread(r.TPR), spread(r.FPR)
    return FairnessGaps(spread(r.positive_rate), max(tpr, fpr), tpr, fpr, spread(r.PPV))


def threshold_by_group(score, a, thresholds) -> np.ndarray:
    """The decisions of per-group thresholds, :math:`\\hat Y = 1\\{\\hat p \\ge t_A\\}`.
    score (n,), a (n,) in {0, ..., G−1}, thresholds (G,) -> y_hat (n,) in {0, 1} (11.7)."""
    score = check_vector(score, "score")
    a = _check_groups(a, len(score))
    thresholds = check_array(thresholds, "thresholds", (int(a.max()) + 1,), finite=False)
    if np.isnan(thresholds).any():
        raise ValueError("thresholds must not hold NaN")
    return (score >= thresholds[a]).astype(np.int64)


def _top_k_threshold(values: np.ndarray, k: int) -> float:
    """The threshold that accepts the k largest values (inf for k = 0; ties accept all equal values)."""
    return math.inf if k == 0 else float(np.sort(values)[len(values) - k])


def thresholds_for_rate(score, a, rate: float) -> np.ndarray:
    """Per-group thresholds for demographic parity: :math:`t_a` accepts the fraction `rate` of group a (its
    :math:`\\lfloor n_a\\,\\mathrm{rate}\\rceil` highest scores), so :math:`P(\\hat Y=1\\mid A=a) = \\mathrm{rate}`
    for every a on these data. score (n,), a (n,) -> thresholds (G,) (11.7)."""
    score = check_vector(score, "score")
    a = _check_groups(a, len(score))
    rate = check_number(rate, "rate", 0, 1)
    groups = range(int(a.max()) + 1)
    return np.array([_top_k_threshold(score[a == g], round(rate * np.sum(a == g))) for g in groups])


def thresholds_for_tpr(score, y, a, tpr: float) -> np.ndarray:
    """Per-group thresholds for equality of opportunity: :math:`t_a` accepts the fraction `tpr` of the positives
    (Y = 1) of group a, so :math:`\\mathrm{TPR}_a = \\mathrm{tpr}` for every a on these data.
    score (n,), y (n,) in {0, 1}, a (n,) -> thresholds (G,) (11.7)."""
    score = check_vector(score, "score")
    a = _check_groups(a, len(score))
    y = check_labels(y, "y", len(score), values=(0, 1))
    tpr = check_number(tpr, "tpr", 0, 1)
    thresholds = []
    for g in range(int(a.max()) + 1):
        positives = score[(a == g) & (y == 1)]
        if len(positives) == 0:
            raise ValueError(f"group {g} has no positive example (y = 1): its TPR is undefined")
        thresholds.append(_top_k_threshold(positives, round(tpr * len(positives))))
    return np.array(thresholds)


def thresholds_for_ppv(score, y, a, ppv: float, min_accepted: int = 500) -> np.ndarray:
    """Per-group thresholds for sufficiency of the decision: :math:`t_a` is the threshold among those accepting at
    least `min_accepted` examples of group a whose precision :math:`\\mathrm{PPV}_a = P(Y=1\\mid\\hat Y=1, A=a)`
    is closest to `ppv` (the smallest accepted sets are too noisy). score (n,), y (n,), a (n,) -> (G,) (11.7)."""
    score = check_vector(score, "score")
    a = _check_groups(a, len(score))
    y = check_labels(y, "y", len(score), values=(0, 1))
    ppv = check_number(ppv, "ppv", 0, 1)
    min_accepted = check_int(min_accepted, "min_accepted", 1)
    thresholds = []
    for g in range(int(a.max()) + 1):
        order = np.argsort(-score[a == g], kind="stable")
        ranked, outcome = score[a == g][order], y[a == g][order]
        precision = np.cumsum(outcome) / np.arange(1, len(outcome) + 1)  # PPV of the top k, k = 1..n_a
        start = min(min_accepted, len(outcome)) - 1
        k = start + int(np.argmin(np.abs(precision[start:] - ppv)))
        thresholds.append(float(ranked[k]))
    return np.array(thresholds)


def chouldechova_fpr(base_rate, ppv, fnr) -> np.ndarray | float:
    """The false-positive rate that a base rate, a PPV and an FNR leave (Chouldechova's identity):
    :math:`\\mathrm{FPR} = \\frac{\\pi}{1-\\pi}\\,\\frac{1-\\mathrm{PPV}}{\\mathrm{PPV}}\\,(1-\\mathrm{FNR})`,
    with π in (0, 1), PPV in (0, 1], FNR in [0, 1]; numbers or arrays of one shape (11.7)."""
    base_rate, ppv, fnr = (
        check_array(v, name) for v, name in ((base_rate, "base_rate"), (ppv, "ppv"), (fnr, "fnr"))
    )
    if not base_rate.shape == ppv.shape == fnr.shape:
        raise ValueError(
            f"base_rate, ppv and fnr must have one shape, got {base_rate.shape}, {ppv.shape}, {fnr.shape}"
        )
    if ((base_rate <= 0) | (base_rate >= 1)).any():
        raise ValueError(f"base_rate must lie in (0, 1), got {base_rate}")
    if ((ppv <= 0) | (ppv > 1)).any():
        raise ValueError(f"ppv must lie in (0, 1], got {ppv}")
    if ((fnr < 0) | (fnr > 1)).any():
        raise ValueError(f"fnr must lie in [0, 1], got {fnr}")
    fpr = base_rate / (1 - base_rate) * (1 - ppv) / ppv * (1 - fnr)
    return float(fpr) if fpr.ndim == 0 else fpr


class GroupCalibration(NamedTuple):
    """Reliability per group and score bin, each (G, bins): the mean score, the observed frequency of Y = 1 and
    the count (NaN means in empty bins)."""

    mean_score: np.ndarray
    mean_outcome: np.ndarray
    count: np.ndarray


def calibration_by_group(score, y, a, bins: int = 10) -> GroupCalibration:
    """Calibration by group (sufficiency, :math:`Y\\perp A\\mid\\hat p`): in each of `bins` equal-width bins of
    the score in [0, 1], the mean score and :math:`P(Y=1\\mid \\hat p\\in\\text{bin}, A=a)`; a score is calibrated in
    group a when the two agree. score (n,) in [0, 1], y (n,) in {0, 1}, a (n,) -> three arrays (G, bins) (11.7)."""
    score = check_vector(score, "score")
    if score.min() < 0 or score.max() > 1:
        raise ValueError(
            f"score must hold probabilities in [0, 1], got values in [{score.min()}, {score.max()}]"
        )
    a = _check_groups(a, len(score))
    y = check_labels(y, "y", len(score), values=(0, 1))
    bins = check_int(bins, "bins", 1)
    G = int(a.max()) + 1
    cell = a * bins + np.minimum((score * bins).astype(np.int64), bins - 1)
    count = np.bincount(cell, minlength=G * bins).reshape(G, bins)
    score_sum = np.bincount(cell, weights=score, minlength=G * bins).reshape(G, bins)
    outcome_sum = np.bincount(cell, weights=y, minlength=G * bins).reshape(G, bins)
    return GroupCalibration(_ratio(score_sum, count), _ratio(outcome_sum, count), count)
