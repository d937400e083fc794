"""Chapter 08's shared tools, what several of its sections use: the dropout layer and the book's digits MLP
(`Dropout`, `dropout_mlp`, `predict_logits`; section 8.4, used again in 8.8 and 8.10), the digit augmentation
of 8.6 (`transform_digits`, `augment_digits`), the tempered softmax and the soft cross-entropy of 8.8
(`tempered_softmax`, `soft_cross_entropy`), and the chapter's one trainer of digit classifiers, every trick a
keyword (`train_digits_classifier`; notebooks 03_dropout_ensembles, 05_augmentation_distillation and
07_tricks_compared).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch
from scipy import ndimage
from torch import nn

from ..activations import softmax
from ..training import device, eval_mode, model_device, progress_bar, to_numpy, train_steps
from ..validation import (
    check_array,
    check_int,
    check_labels,
    check_matrix,
    check_number,
    check_positive,
    check_rng,
    check_vector,
)

# ----------------------------------------------------------------------------- 8.4 the dropout layer and the MLP


class Dropout(nn.Module):
    r"""Inverted dropout as a torch layer with keep probability $\pi$: in ``train()`` mode
    $x\odot b/\pi$ with $b_i\sim\mathrm{Bern}(\pi)$, in ``eval()`` mode the identity. The same computation as
    ``torch.nn.Dropout(p=1 - pi)``. With ``rng=None`` the masks come from torch's global generator, the
    same masks as ``nn.Dropout`` draws from the same state; an int or a NumPy generator seeds a torch generator
    of the layer's own, so that its masks do not depend on torch's global state."""

    def __init__(self, pi: float, rng=None):
        super().__init__()
        self.pi = check_number(pi, "pi", 0, 1, low_open=True)
        self.generator = None
        if rng is not None:
            self.generator = torch.Generator().manual_seed(int(check_rng(rng).integers(2**31)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.pi == 1:
            return x
        if self.generator is None:
            mask = torch.empty_like(x).bernoulli_(self.pi)
        else:  # the layer's own generator lives on the CPU: draw there, whatever the device of x
            mask = torch.empty(x.shape, dtype=x.dtype).bernoulli_(self.pi, generator=self.generator)
            mask = mask.to(x.device)
        return x * mask / self.pi

    def extra_repr(self) -> str:
        return f"pi={self.pi:g} (keep probability; torch's p = {1 - self.pi:g})"


def dropout_mlp(sizes, pi: float = 0.5, *, pi_input: float = 1.0, rng=None) -> nn.Sequential:
    r"""An MLP for layer widths ``sizes = [n, m_1, ..., m_L]``: ``nn.Linear`` layers with ReLU between them and
    `Dropout` with keep probability ``pi`` after every hidden ReLU (``pi_input`` on the inputs; 1 = no dropout).
    The weights are drawn as torch's default ``nn.Linear`` initialisation, U[-1/sqrt(n), 1/sqrt(n)], but from
    `rng`: two calls with the same integer `rng` give the same initial weights whatever `pi` is (paired arms)."""
    sizes = [check_int(k, "sizes entries", 1) for k in sizes]
    if len(sizes) < 2:
        raise ValueError(f"sizes must list at least two widths [n, ..., m_L], got {sizes!r}")
    pi = check_number(pi, "pi", 0, 1, low_open=True)
    pi_input = check_number(pi_input, "pi_input", 0, 1, low_open=True)
    init_seed, mask_seed = (int(s) for s in check_rng(rng).integers(2**31, size=2))
    init, masks = torch.Generator().manual_seed(init_seed), check_rng(mask_seed)
    layers: list[nn.Module] = [Dropout(pi_input, masks)] if pi_input < 1 else []
    for l in range(len(sizes) - 1):
        # allocated without drawing (torch's global generator is left alone), then drawn from `init`
        linear = nn.Linear(sizes[l], sizes[l + 1], device="meta").to_empty(device="cpu")
        bound = 1 / math.sqrt(sizes[l])
        with torch.no_grad():
            linear.weight.uniform_(-bound, bound, generator=init)
            linear.bias.uniform_(-bound, bound, generator=init)
        layers.append(linear)
        if l < len(sizes) - 2:
            layers += [nn.ReLU(), Dropout(pi, masks)] if pi < 1 else [nn.ReLU()]
    return nn.Sequential(*layers)


@torch.no_grad()
def predict_logits(model: nn.Module, X) -> np.ndarray:
    """The logits (N, K) of `model` in eval mode for inputs X (N, d), as a numpy array; the model is left in the
    mode it came in."""
    X = check_matrix(X, "X")
    with eval_mode(model):
        return to_numpy(model(torch.as_tensor(X, dtype=torch.float32, device=model_device(model))))


# ----------------------------------------------------------------------------- 8.6 digit augmentation


def transform_digits(X, shifts, angles) -> np.ndarray:
    """Digit images X (N, h, w) rotated by ``angles`` (N,) degrees counter-clockwise about their centre (linear
    interpolation) and then shifted by whole pixels ``shifts`` (N, 2) = (down, right); pixels that come in
    from outside are 0 (the background, for pixels scaled to [0, 1]). ``angles = 90`` is ``np.rot90``."""
    X = check_array(X, "X", ndim=3)
    shifts = check_array(shifts, "shifts", (len(X), 2))
    if not np.array_equal(shifts, np.round(shifts)):
        raise ValueError(f"shifts must hold whole pixels, got {shifts[shifts != np.round(shifts)][:3]}")
    angles = check_vector(angles, "angles", len(X))
    out = np.empty_like(X)
    for i, (image, (down, right), angle) in enumerate(zip(X, shifts, angles, strict=True)):
        if angle != 0:
            image = ndimage.rotate(image, angle, reshape=False, order=1, mode="constant", cval=0.0)
        out[i] = ndimage.shift(image, (down, right), order=0, mode="constant", cval=0.0)
    return out


def augment_digits(X, *, shifts: int = 1, max_angle: float = 10.0, rng=None) -> np.ndarray:
    """One randomly transformed copy T(x) of every digit: a rotation by an angle drawn uniformly from
    [-max_angle, max_angle] degrees, then a shift by whole pixels drawn uniformly from {-shifts, ..., shifts} in
    each direction (see `transform_digits`; label-preserving for small transforms). X is (N, h, w) or flat
    (N, h*w) with square images; the result has X's shape. Scale pixels to [0, 1] first: the pixels shifted in
    are 0. The draws are the shifts (N, 2), then the angles (N,)."""
    X = check_array(X, "X")
    shifts = check_int(shifts, "shifts", 0)
    max_angle = check_number(max_angle, "max_angle", 0, 180)
    rng = check_rng(rng)
    if X.ndim == 2:
        side = math.isqrt(X.shape[1])
        if side * side != X.shape[1]:
            raise ValueError(f"X must hold square images, (N, h, w) or (N, h*w), got shape {X.shape}")
        images = X.reshape(len(X), side, side)
    elif X.ndim == 3:
        images = X
    else:
        raise ValueError(f"X must have shape (N, h, w) or (N, h*w), got shape {X.shape}")
    moves = rng.integers(-shifts, shifts + 1, size=(len(X), 2))
    angles = rng.uniform(-max_angle, max_angle, size=len(X))
    return transform_digits(images, moves, angles).reshape(X.shape)


# ----------------------------------------------------------------------------- 8.8 soft targets


def tempered_softmax(F, T: float = 1.0) -> np.ndarray:
    """Softened class probabilities ``softmax(F / T)`` of logits F (N, K) (or one vector (K,)) at temperature
    T > 0: T = 1 is the ordinary softmax, T -> infinity the uniform distribution."""
    F = check_array(F, "F")
    if F.ndim not in (1, 2):
        raise ValueError(f"F must have shape (K,) or (N, K), got shape {F.shape}")
    T = check_positive(T, "T")
    return softmax(F / T, axis=-1)


def soft_cross_entropy(logits: torch.Tensor, targets: torch.Tensor, T: float = 1.0) -> torch.Tensor:
    """``T^2 * mean_i -sum_y t_iy log softmax(G_i / T)_y`` in torch for student logits G (N, K) and target
    distributions t (N, K) (teacher probabilities softmax(F / T), smoothed or mixed labels). The T^2 keeps the
    gradient's scale independent of T (Hinton et al.); for T = 1 it is the cross-entropy with soft targets."""
    if not isinstance(logits, torch.Tensor) or not isinstance(targets, torch.Tensor):
        raise TypeError(
            f"logits and targets must be torch tensors, got {type(logits).__name__} and {type(targets).__name__}"
        )
    if logits.ndim != 2 or targets.shape != logits.shape:
        raise ValueError(
            f"logits and targets must both have shape (N, K), got {tuple(logits.shape)} and {tuple(targets.shape)}"
        )
    T = check_positive(T, "T")
    log_q = torch.log_softmax(logits / T, dim=1)
    return T**2 * -(targets * log_q).sum(dim=1).mean()


# ----------------------------------------------------------------------------- 8.10 the one trainer of the chapter


class TrainedClassifier(NamedTuple):
    model: nn.Sequential  # the trained network in eval mode (with `patience`: the best-validation checkpoint)
    history: (
        dict  # "train_loss" per epoch (masks on); with validation data also "val_loss" (eval mode) per epoch
    )
    best_epoch: int  # how many training epochs the kept weights have seen (the last epoch without patience)


def train_digits_classifier(
    X,
    y,
    *,
    hidden: int = 256,
    pi: float = 1.0,
    pi_input: float = 1.0,
    weight_decay: float = 0.0,
    batch_norm: bool = False,
    augment: int = 0,
    label_smoothing: float = 0.0,
    mixup: float = 0.0,
    temperature: float = 1.0,
    X_val=None,
    y_val=None,
    patience: int | None = None,
    epochs: int = 300,
    lr: float = 1e-2,
    batch_size: int | None = None,
    rng=None,
    progress: bool = True,
) -> TrainedClassifier:
    r"""Train the chapter's MLP on inputs X (N, d), every trick of chapter 08 a keyword (the chapter's one trainer).

    The MLP is ``[Dropout ->] Linear(d, hidden) [-> BatchNorm1d] -> ReLU [-> Dropout] -> Linear(hidden, K)``, trained
    by `train_steps` with ``torch.optim.AdamW`` for `epochs` passes, full batch by default. The keywords:

    - ``pi < 1``: dropout after the hidden layer with keep probability $\pi$ (`Dropout`, torch's p = 1 - pi);
      ``pi_input < 1`` also on the inputs (section 8.4);
    - ``weight_decay = mu > 0``: decoupled weight decay on the weight matrices (not on biases or BN's
      $\gamma,\beta$), $\theta\leftarrow(1-\eta\mu)\theta-\eta\,\hat m/(\sqrt{\hat v}+\epsilon)$ (AdamW; with
      ``mu = 0`` its steps are Adam's, to the bit);
    - ``batch_norm``: ``nn.BatchNorm1d`` on the hidden pre-activations (batch statistics in training, running
      statistics at evaluation);
    - ``augment = c > 0``: the training set plus c copies transformed by `augment_digits` (pixels in [0, 1]);
    - ``label_smoothing = eps``: targets $(1-\varepsilon)e_y+\varepsilon/K$ (torch's ``label_smoothing``);
    - ``mixup = a > 0``: at every step each example of the batch is mixed with a random partner of the same
      batch (a fresh permutation), $\tilde x=\lambda x_i+(1-\lambda)x_j$, $\tilde t=\lambda t_i+(1-\lambda)t_j$
      with a fresh $\lambda\sim\mathrm{Beta}(a,a)$ per example (t: the one-hot or smoothed labels, or the
      target distributions), trained with `soft_cross_entropy` (Zhang et al.);
    - ``patience = p`` with ``X_val, y_val``: early stopping on the validation cross-entropy, stopping p epochs
      after the best one and restoring its weights (the rule of `patience_stop`);
    - ``batch_size``: mini-batches in a new random order every epoch instead of the full batch. The data stay
      on the device as whole tensors and batches are sliced from them: no DataLoader, whose per-example
      collation would cost more than training these small networks.

    y holds labels (N,), or target distributions (N, K) (teacher probabilities $\mathrm{softmax}(F/T)$ for
    distillation, smoothed or mixed labels), then the loss is `soft_cross_entropy` at `temperature` ($T^2$
    times the tempered cross-entropy). The initial weights are those of `dropout_mlp` drawn from `rng`, then
    augmentation and batch order from a second seed: the same integer `rng` gives every arm the same initial
    weights (a paired comparison). With ``X_val, y_val`` the history holds the validation cross-entropy after
    every epoch. Returns the model in eval mode.
    """
    X = check_matrix(X, "X")
    y = np.asarray(y)
    if y.ndim == 1:
        y = check_labels(y, "y", len(X))
        n_classes = int(y.max()) + 1
    else:
        y = check_matrix(y, "y", len(X))
        if (y < 0).any() or not np.allclose(y.sum(axis=1), 1.0, atol=1e-6):
            raise ValueError("y must hold labels (N,) or probability rows (N, K) that sum to 1")
        n_classes = y.shape[1]
    hidden, epochs = check_int(hidden, "hidden", 1), check_int(epochs, "epochs", 1)
    pi = check_number(pi, "pi", 0, 1, low_open=True)
    pi_input = check_number(pi_input, "pi_input", 0, 1, low_open=True)
    weight_decay = check_number(weight_decay, "weight_decay", 0)
    if not isinstance(batch_norm, (bool, np.bool_)):
        raise TypeError(f"batch_norm must be True or False, got {batch_norm!r}")
    augment = check_int(augment, "augment", 0)
    if augment and (X.min() < 0 or X.max() > 1):
        raise ValueError(
            f"X must hold pixels in [0, 1] to be augmented (the background must be 0), got values from "
            f"{X.min():.3g} to {X.max():.3g}"
        )
    label_smoothing = check_number(label_smoothing, "label_smoothing", 0, 1)
    mixup = check_number(mixup, "mixup", 0)
    if label_smoothing and y.ndim == 2:
        raise ValueError("label_smoothing needs labels y (N,), got target distributions (N, K)")
    temperature = check_positive(temperature, "temperature")
    if (X_val is None) != (y_val is None):
        raise ValueError("give both X_val and y_val, or neither")
    if X_val is not None:
        X_val = check_matrix(X_val, "X_val", cols=X.shape[1])
        y_val = check_labels(y_val, "y_val", len(X_val), n_classes=n_classes)
    if patience is not None:
        patience = check_int(patience, "patience", 1)
        if X_val is None:
            raise ValueError("patience needs validation data X_val, y_val")
    lr = check_positive(lr, "lr")
    if batch_size is not None:
        batch_size = check_int(batch_size, "batch_size", 1)
    model_seed, data_seed = (int(s) for s in check_rng(rng).integers(2**31, size=2))

    model = dropout_mlp([X.shape[1], hidden, n_classes], pi, pi_input=pi_input, rng=model_seed)
    if batch_norm:
        first = 2 if pi_input < 1 else 1  # the layers up to the first Linear
        model = nn.Sequential(*model[:first], nn.BatchNorm1d(hidden), *model[first:])
    model = model.to(device())
    if augment:
        images = check_rng(data_seed)
        X = np.concatenate([X] + [augment_digits(X, rng=images) for _ in range(augment)])
        y = np.concatenate([y] * (augment + 1))
    dev = model_device(model)
    inputs = torch.as_tensor(X, dtype=torch.float32, device=dev)
    if mixup:
        targets = (
            torch.as_tensor(y, device=dev)
            if y.ndim == 1
            else torch.as_tensor(y, dtype=torch.float32, device=dev)
        )
        mixing = check_rng(data_seed + 1)  # the partners and weights, apart from the batch order

        def loss(model, batch):
            X_b, t_b = batch
            if t_b.ndim == 1:  # labels -> (smoothed) one-hot distributions
                t_b = (1 - label_smoothing) * nn.functional.one_hot(
                    t_b, n_classes
                ) + label_smoothing / n_classes
            lam = torch.as_tensor(
                mixing.beta(mixup, mixup, size=(len(X_b), 1)), dtype=torch.float32, device=dev
            )
            partner = torch.as_tensor(mixing.permutation(len(X_b)), device=dev)
            mixed_t = lam * t_b + (1 - lam) * t_b[partner]
            return soft_cross_entropy(model(lam * X_b + (1 - lam) * X_b[partner]), mixed_t, temperature)
    elif y.ndim == 1:
        targets = torch.as_tensor(y, device=dev)

        def loss(model, batch):
            X_b, y_b = batch
            return nn.functional.cross_entropy(model(X_b), y_b, label_smoothing=label_smoothing)
    else:
        targets = torch.as_tensor(y, dtype=torch.float32, device=dev)

        def loss(model, batch):
            X_b, t_b = batch
            return soft_cross_entropy(model(X_b), t_b, temperature)

    weights = [p for p in model.parameters() if p.ndim >= 2]
    others = [p for p in model.parameters() if p.ndim < 2]
    optimizer = torch.optim.AdamW(
        [{"params": weights, "weight_decay": weight_decay}, {"params": others, "weight_decay": 0.0}], lr=lr
    )
    order = torch.Generator().manual_seed(data_seed)
    if X_val is not None:
        X_val, y_val = (
            torch.as_tensor(X_val, dtype=torch.float32, device=dev),
            torch.as_tensor(y_val, device=dev),
        )
    val_losses: list[float] = []
    sizes: list[list[int]] = []  # the size of every batch, epoch by epoch
    kept = {"epoch": epochs, "loss": math.inf, "state": None}  # early stopping's checkpoint

    def batches():
        # The batches of one epoch after the other, all trained by one call of train_steps. It asks for the next
        # batch only after the step on the last one, so the code after an epoch's batches sees the model trained
        # on them: there the validation loss is recorded and the patience rule may end training.
        with progress_bar(range(1, epochs + 1), desc="epochs", enabled=progress) as bar:
            for epoch in bar:
                if batch_size is None or batch_size >= len(inputs):
                    epoch_batches = [(inputs, targets)]
                else:
                    rows = torch.randperm(len(inputs), generator=order).to(dev).split(batch_size)
                    epoch_batches = [(inputs[r], targets[r]) for r in rows]
                yield from epoch_batches
                sizes.append([len(b[0]) for b in epoch_batches])
                if X_val is None:
                    continue
                with eval_mode(model), torch.no_grad():
                    val_losses.append(nn.functional.cross_entropy(model(X_val), y_val).item())
                if patience is None:
                    continue
                if val_losses[-1] < kept["loss"]:  # a strict improvement moves the checkpoint
                    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
                    kept.update(epoch=epoch, loss=val_losses[-1], state=state)
                elif epoch - kept["epoch"] >= patience:
                    return

    losses = train_steps(model, loss, optimizer, batches(), progress=False)
    per_epoch = np.split(losses, np.cumsum([len(s) for s in sizes])[:-1])
    history = {"train_loss": [float(np.average(l, weights=w)) for l, w in zip(per_epoch, sizes, strict=True)]}
    if X_val is not None:
        history["val_loss"] = val_losses
    if kept["state"] is not None:
        model.load_state_dict(kept["state"])
    return TrainedClassifier(model.eval(), history, kept["epoch"])
