"""The tools of chapter 11 that several sections use (notebooks 11.1 to 11.6): the p-norms and the projection onto
an ℓp ball, the chapter's classifier (`mlp`) and its training, with an adversary or noise per batch
(`train_classifier`, through `training.fit`), predictions, the fast gradient sign method and projected gradient
descent (`fgsm`, `pgd_step`, `pgd`), robust accuracy, and the two-logit form of a binary linear model
(`linear_two_class`).

Conventions of the chapter: an input is a row x (d,) of pixels in [0, 1], a batch is X (n, d); a classifier is a
torch module that maps (n, d) to logits (n, K); attacks take and return numpy arrays, work in the dtype of the
model's parameters and on the model's device; a budget ε is measured in the norm ``p`` ∈ {2, inf}.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..training import fit, make_loader, model_device, to_numpy
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


def _check_model(model) -> nn.Module:
    if not isinstance(model, nn.Module):
        raise TypeError(
            f"model must be a torch.nn.Module mapping (n, d) to logits (n, K), got {type(model).__name__}"
        )
    return model


def _rows(X, name: str = "X") -> np.ndarray:
    X = check_array(X, name)
    if X.ndim != 2:
        raise ValueError(f"{name} must be a batch of rows (n, d), got shape {X.shape}")
    return X


def _inputs(model: nn.Module, X, name: str = "X") -> torch.Tensor:
    """A batch X (n, d) as a tensor of the model's dtype on the model's device."""
    return torch.as_tensor(_rows(X, name), dtype=_dtype(_check_model(model)), device=model_device(model))


class _RowBatches:
    """Shuffled batches (X[i], y[i]) of tensors, the indices i drawn by a loader of indices: the same draws as
    ``make_loader(X, y, batch_size, rng=rng)`` makes (one sampler, one generator), without collating the rows one
    by one; re-iterable, one pass per epoch."""

    def __init__(self, X: torch.Tensor, y: torch.Tensor, batch_size: int, rng: np.random.Generator):
        self.X, self.y = X, y
        self.order = make_loader(np.arange(len(X)), batch_size=batch_size, rng=rng)

    def __len__(self) -> int:
        return len(self.order)

    def __iter__(self):
        for (i,) in self.order:
            yield self.X[i], self.y[i]


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
    adversarial (or noisy) version before the step, with the model in eval mode: adversarial training
    :math:`\\min_\\theta \\mathbb E \\max_{\\lVert\\delta\\rVert\\le\\epsilon} L(f_\\theta(x+\\delta), y)` (11.4).
    The loop is `training.fit` with the attack as its per-batch ``transform``, on the model's device; batches
    are shuffled with `rng`. The model is left in eval mode.
    """
    X = _inputs(model, X)
    y = torch.as_tensor(check_labels(y, "y", len(X)), dtype=torch.int64, device=X.device)
    if attack is not None:
        check_callable(attack, "attack")
    optimizer = torch.optim.Adam(model.parameters(), lr=check_positive(lr, "lr"))
    batches = _RowBatches(X, y, batch_size, check_rng(rng))

    def adversary(model: nn.Module, batch) -> tuple[torch.Tensor, torch.Tensor]:
        X_batch, y_batch = batch
        X_adv = attack(model, to_numpy(X_batch), to_numpy(y_batch))
        return torch.as_tensor(X_adv, dtype=X_batch.dtype, device=X_batch.device), y_batch

    transform = None if attack is None else adversary
    history = fit(model, F.cross_entropy, optimizer, batches, epochs, transform=transform, progress=progress)
    model.eval()
    return history["train_loss"]


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
    y = torch.as_tensor(check_labels(y, "y", len(x)), device=x.device)
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
        labels, sign = torch.as_tensor(check_labels(target, "target", len(x)), device=x.device), -1.0
    x_np = to_numpy(x).astype(np.float64)
    delta = np.zeros_like(x_np)
    if random_start:
        delta = _uniform_ball(len(x), x.shape[1], eps, p, check_rng(rng))
        delta = np.clip(x_np + delta, 0.0, 1.0) - x_np if clip else delta
    for _ in range(steps):
        _, grad = _loss_gradient(model, x + torch.as_tensor(delta, dtype=x.dtype, device=x.device), labels)
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
