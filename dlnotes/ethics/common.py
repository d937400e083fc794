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
    p = _norm_order(p, allow_zero=True)
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


def _norm_order(p, allow_zero: bool = False) -> float:
    """The order p of a norm as a float: a number >= 1, inf or "inf" (and 0, the count, with `allow_zero`)."""
    if isinstance(p, str) and p == "inf":
        return math.inf
    if not isinstance(p, str) and p == math.inf:
        return math.inf
    p = check_number(p, "p", 0)
    if p < 1 and not (allow_zero and p == 0):
        zero = "0, " if allow_zero else ""
        raise ValueError(f"p must be {zero}a number >= 1 or inf (below 1 it is not a norm), got {p!r}")
    return float(p)


def _check_p(p) -> float:
    """The norm of an attack's budget: 2 or inf."""
    if not isinstance(p, str) and p in (2, math.inf):
        return float(p)
    return _norm_order(check_choice(p, "p", (2, "inf")))


def _budget(value, name: str, shape: tuple, positive: bool = False) -> float | np.ndarray:
    """A budget (or step size) for a vector (d,) or rows (n, d): one number, or with rows one per row (n,),
    returned as a column (n, 1) that broadcasts over the row."""
    if np.ndim(value) == 0 or len(shape) == 1:
        return check_positive(value, name) if positive else check_number(value, name, 0)
    value = check_vector(value, name, shape[0])
    if not np.all(np.isfinite(value)) or np.any(value <= 0 if positive else value < 0):
        bound = "> 0" if positive else ">= 0"
        raise ValueError(f"{name} must hold one finite number {bound} per row, got {value[:5]}")
    return value[:, None]


def project_lp(delta, eps, p="inf") -> np.ndarray:
    """The Euclidean projection of a perturbation onto the ball :math:`\\lVert\\delta\\rVert_p\\le\\epsilon`: for
    p = inf clip every entry to [−ε, ε], for p = 2 rescale :math:`\\delta\\min(1, \\epsilon/\\lVert\\delta\\rVert_2)`
    (a point inside stays where it is). δ (d,) or one row per example (n, d); ε a number or, for rows, one
    per row (n,) (11.3)."""
    delta = check_array(delta, "delta")
    if delta.ndim not in (1, 2):
        raise ValueError(f"delta must be a vector (d,) or a batch of rows (n, d), got shape {delta.shape}")
    eps, p = _budget(eps, "eps", delta.shape), _check_p(p)
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


def _labels(model: nn.Module, x: torch.Tensor, y, name: str = "y") -> torch.Tensor:
    """Labels y (n,) of the rows x as an int64 tensor on x's device, each a class of the model: in 0..K-1,
    K the number of logits (one forward pass of the first row tells K)."""
    with torch.no_grad():
        n_classes = model(x[:1]).shape[1]
    return torch.as_tensor(check_labels(y, name, len(x), n_classes=n_classes), device=x.device)


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
    augment=None,
    rng=None,
    progress: bool = True,
) -> list[float]:
    """Train `model` by Adam on the cross-entropy of (X (n, d), y (n,)) and return the mean loss per epoch.

    With ``augment(model, X_batch, y_batch) -> X_new`` (numpy arrays) every batch is replaced before the step,
    with the model in eval mode: by its adversarial version for adversarial training
    :math:`\\min_\\theta \\mathbb E \\max_{\\lVert\\delta\\rVert\\le\\epsilon} L(f_\\theta(x+\\delta), y)` (11.4),
    or by a noisy copy for noise augmentation (11.5). The loop is `training.fit` with `augment` as its
    per-batch ``transform``, on the model's device; batches are shuffled with `rng`. The model is left in eval
    mode.
    """
    X = _inputs(model, X)
    y = _labels(model, X, y)
    if augment is not None:
        check_callable(augment, "augment")
    optimizer = torch.optim.Adam(model.parameters(), lr=check_positive(lr, "lr"))
    batches = _RowBatches(X, y, batch_size, check_rng(rng))

    def transform(model: nn.Module, batch) -> tuple[torch.Tensor, torch.Tensor]:
        X_batch, y_batch = batch
        X_new = augment(model, to_numpy(X_batch), to_numpy(y_batch))
        return torch.as_tensor(X_new, dtype=X_batch.dtype, device=X_batch.device), y_batch

    history = fit(
        model,
        F.cross_entropy,
        optimizer,
        batches,
        epochs,
        transform=None if augment is None else transform,
        progress=progress,
    )
    model.eval()
    return history["train_loss"]


@torch.no_grad()
def predict(model: nn.Module, X) -> np.ndarray:
    """The predicted classes :math:`\\arg\\max_k f_k(x)` of a batch X (n, d), as int64 (n,)."""
    return to_numpy(model(_inputs(model, X)).argmax(dim=1))


def margin_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The margin (Carlini–Wagner) loss of every row, :math:`\\max_{j\\ne c} f_j - f_c` for the label c: positive
    exactly where the prediction is not c; unlike the cross-entropy it does not saturate once the softmax is
    confident. Logits (n, K), labels (n,) -> (n,) (11.3)."""
    own = logits.gather(1, labels[:, None])[:, 0]
    others = logits.scatter(1, labels[:, None], -math.inf)
    return others.max(dim=1).values - own


_LOSSES = {
    "cross_entropy": lambda logits, labels: F.cross_entropy(logits, labels, reduction="none"),
    "margin": margin_loss,
}


def _loss_gradient(
    model: nn.Module, x: torch.Tensor, labels: torch.Tensor, loss: str = "cross_entropy"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-example loss L(f(x_i), labels_i) (n,) (cross-entropy or margin) and its gradient in x (n, d)."""
    x = x.detach().requires_grad_(True)
    values = _LOSSES[loss](model(x), labels)
    (grad,) = torch.autograd.grad(values.sum(), x)
    return values.detach(), grad


def loss_gradient(model: nn.Module, X, y, loss: str = "cross_entropy") -> np.ndarray:
    """The gradient :math:`\\nabla_x L(f(x_i), y_i)` of every example's loss (cross-entropy or `margin_loss`)
    with respect to its input: X (n, d), labels y (n,) in 0..K-1 -> (n, d), the direction PGD follows (11.3)."""
    x = _inputs(model, X)
    loss = check_choice(loss, "loss", tuple(_LOSSES))
    return to_numpy(_loss_gradient(model, x, _labels(model, x, y), loss)[1])


def _check_attack(model, X, y, eps, p="inf"):
    x = _inputs(model, X)
    return x, _labels(model, x, y), _budget(eps, "eps", tuple(x.shape)), _check_p(p)


def fgsm(model: nn.Module, X, y, eps: float, clip: bool = True) -> np.ndarray:
    """The fast gradient sign method: :math:`x + \\epsilon\\,\\mathrm{sign}\\,\\nabla_x L(f(x), y)`, one ℓ∞
    step on the linearised cross-entropy; with ``clip`` the result is clipped to the pixel box [0, 1].
    X (n, d), y (n,) labels in 0..K-1 -> X_adv (n, d) (11.3)."""
    x, y, _, _ = _check_attack(model, X, y, eps)
    eps = check_number(eps, "eps", 0)
    _, grad = _loss_gradient(model, x, y)
    x_adv = x + eps * grad.sign()
    return to_numpy(x_adv.clamp(0, 1) if clip else x_adv)


def pgd_step(x, delta, grad, eps, alpha, p="inf", clip: bool = True) -> np.ndarray:
    """One step of projected gradient ascent on the input: :math:`\\delta \\leftarrow \\Pi(\\delta + \\alpha g)`
    with :math:`g = \\mathrm{sign}(\\nabla)` for p = inf and :math:`g = \\nabla/\\lVert\\nabla\\rVert_2` for p = 2,
    Π the projection onto the ball :math:`\\lVert\\delta\\rVert_p\\le\\epsilon` (`project_lp`) followed, with
    ``clip``, by the pixel box: :math:`\\delta \\leftarrow \\mathrm{clip}(x + \\delta, 0, 1) - x`.

    x, delta and grad (the gradient of the loss at x + δ; pass the gradient of −L(f(x + δ), t) for a targeted
    step) are vectors (d,) or rows (n, d) of the same shape; ε and α are numbers or, for rows, one per row
    (n,); returns the new δ (11.3).
    """
    x = check_array(x, "x")
    if x.ndim not in (1, 2):
        raise ValueError(f"x must be a vector (d,) or a batch of rows (n, d), got shape {x.shape}")
    delta, grad = check_array(delta, "delta", x.shape), check_array(grad, "grad", x.shape)
    alpha, p = _budget(alpha, "alpha", x.shape, positive=True), _check_p(p)
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
    eps,
    alpha,
    steps: int,
    p="inf",
    target=None,
    random_start: bool = True,
    clip: bool = True,
    loss: str = "cross_entropy",
    restarts: int = 1,
    rng=None,
) -> np.ndarray:
    """Projected gradient descent on the input:
    :math:`\\delta_{\\tau+1} = \\Pi_{\\lVert\\delta\\rVert_p\\le\\epsilon}(\\delta_\\tau \\pm \\alpha g_\\tau)`, with
    :math:`g_\\tau = \\mathrm{sign}\\,\\nabla_x L` for p = inf and :math:`\\nabla_x L/\\lVert\\nabla_x L\\rVert_2` for
    p = 2; untargeted it ascends L(f(x + δ), y), with `target` (n,) it descends L(f(x + δ), t). The loss L is
    the cross-entropy or the margin loss :math:`\\max_{j\\ne c}f_j-f_c` (``loss="margin"``, `margin_loss`).

    The start is drawn uniformly from the ε-ball with `rng` (``random_start``) or is δ = 0; with ``clip``
    every iterate is also kept in the pixel box [0, 1]. With ``restarts`` > 1 (random starts) the attack is
    run that many times and every example keeps its worst case: a run that succeeds (the prediction leaves y,
    or reaches t) over one that does not, else the higher loss. X (n, d), y (n,) labels in 0..K-1; ε and α
    numbers or one per example (n,) -> X_adv (n, d) (11.3).
    """
    x, y, eps_rows, p = _check_attack(model, X, y, eps, p)
    _budget(alpha, "alpha", tuple(x.shape), positive=True)
    steps = check_int(steps, "steps", 1)
    loss = check_choice(loss, "loss", tuple(_LOSSES))
    restarts = check_int(restarts, "restarts", 1)
    if restarts > 1 and not random_start:
        raise ValueError("restarts > 1 needs random_start=True (runs from delta = 0 are all the same)")
    labels, sign = (y, 1.0) if target is None else (_labels(model, x, target, "target"), -1.0)
    x_np = to_numpy(x).astype(np.float64)
    rng = check_rng(rng)
    best, best_score = x_np.copy(), np.full(len(x), -math.inf)
    for _ in range(restarts):
        delta = np.zeros_like(x_np)
        if random_start:
            delta = _uniform_ball(len(x), x.shape[1], eps_rows, p, rng)
            delta = np.clip(x_np + delta, 0.0, 1.0) - x_np if clip else delta
        for _ in range(steps):
            x_adv = x + torch.as_tensor(delta, dtype=x.dtype, device=x.device)
            _, grad = _loss_gradient(model, x_adv, labels, loss)
            delta = pgd_step(x_np, delta, sign * to_numpy(grad), eps, alpha, p, clip)
        score = _attack_score(model, x + torch.as_tensor(delta, dtype=x.dtype, device=x.device), labels, sign)
        better = score > best_score
        best[better], best_score[better] = x_np[better] + delta[better], score[better]
    return best.astype(to_numpy(x).dtype)


@torch.no_grad()
def _attack_score(model: nn.Module, x_adv: torch.Tensor, labels: torch.Tensor, sign: float) -> np.ndarray:
    """How well an attack did on every row, for choosing among restarts: a success ranks above every failure
    (shifted up by 1e9), then the margin loss ±(max_{j≠c} f_j − f_c), higher is better for the attacker."""
    value = sign * margin_loss(model(x_adv), labels)
    return to_numpy(torch.where(value > 0, value + 1e9, value)).astype(np.float64)


def _uniform_ball(n: int, d: int, eps, p: float, rng: np.random.Generator) -> np.ndarray:
    """n points drawn uniformly from the ℓp ball of radius ε (a number or a column (n, 1)) in R^d (p = inf: a
    cube; p = 2: a Gaussian direction with radius ε U^(1/d))."""
    if p == math.inf:
        return eps * rng.uniform(-1.0, 1.0, size=(n, d))
    direction = rng.normal(size=(n, d))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    return direction * eps * rng.uniform(size=(n, 1)) ** (1 / d)


def robust_accuracy(model: nn.Module, X, y, attack) -> float:
    """The fraction of examples still classified correctly after ``attack(model, X, y) -> X_adv``
    (e.g. ``lambda m, X, y: pgd(m, X, y, 0.1, 0.025, 20)``); the clean accuracy for ``attack=None``.
    With a list of attacks an example counts only if it is classified correctly after every one of them (the
    worst case per example, as AutoAttack scores its ensemble). Labels y (n,) in 0..K-1 (11.3)."""
    X = check_matrix(X, "X")
    y = to_numpy(_labels(model, _inputs(model, X), y))
    if attack is None:
        return float((predict(model, X) == y).mean())
    if isinstance(attack, list | tuple):
        attacks = [check_callable(one, f"attack[{i}]") for i, one in enumerate(attack)]
    else:
        attacks = [check_callable(attack, "attack")]
    correct = np.ones(len(y), dtype=bool)
    for one in attacks:
        correct &= predict(model, one(model, X, y)) == y
    return float(correct.mean())


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
