"""Section 7.2 of chapter 07 (notebook 02_deep_sets): Deep Sets. Sets of digit images whose target is the sum
of their labels, the Deep Sets model rho(sum_m phi(x_m)) with sum, mean or max pooling, the permutation-
equivariant linear set layer, training by the book's loop, and the per-set-size mean baseline.

A set of M elements with F features is an array X (M, F), one element per row; a batch of sets is padded to
X (B, M, F) with a bool mask (B, M) (True = element).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..training import model_device, progress_bar, to_numpy, train_steps
from ..validation import (
    check_array,
    check_choice,
    check_int,
    check_labels,
    check_matrix,
    check_positive,
    check_rng,
    check_vector,
)


class DigitSets(NamedTuple):
    X: np.ndarray  # (n, max_size, F) the elements of each set, padded with zero rows
    mask: np.ndarray  # (n, max_size) bool, True where a row is an element
    labels: np.ndarray  # (n, max_size) the elements' labels, -1 on padding rows
    y: np.ndarray  # (n,) the target: the sum of the labels of each set


def make_digit_sets(images, labels, n: int, *, sizes=(2, 5), rng=None) -> DigitSets:
    """`n` random sets of images, each of a size drawn uniformly from ``sizes[0]..sizes[1]`` (distinct images
    within a set), with the target :math:`y = \\sum_{m} \\text{label}_m`. `images` (N, F) are flat images
    (e.g. ``load_digits_split().X_train``), `labels` (N,) their classes."""
    images = check_matrix(images, "images")
    labels = check_labels(labels, "labels", len(images))
    n = check_int(n, "n", 1)
    if not (isinstance(sizes, tuple | list) and len(sizes) == 2):
        raise TypeError(f"sizes must be a pair (smallest, largest set size), got {sizes!r}")
    low = check_int(sizes[0], "sizes[0]", 1)
    high = check_int(sizes[1], "sizes[1]", low, len(images))
    rng = check_rng(rng)
    X = np.zeros((n, high, images.shape[1]))
    mask = np.zeros((n, high), dtype=bool)
    set_labels = np.full((n, high), -1, dtype=np.int64)
    for s, size in enumerate(rng.integers(low, high + 1, size=n)):
        chosen = rng.choice(len(images), size=size, replace=False)
        X[s, :size], mask[s, :size], set_labels[s, :size] = images[chosen], True, labels[chosen]
    return DigitSets(X, mask, set_labels, np.where(mask, set_labels, 0).sum(axis=1).astype(np.float64))


def _set_batch(X: torch.Tensor, mask):
    """X as a batch (B, M, F) and the mask (B, M) (all True when None), and whether X was a single set (M, F)."""
    if not isinstance(X, torch.Tensor) or X.ndim not in (2, 3):
        shape = tuple(X.shape) if isinstance(X, torch.Tensor) else type(X).__name__
        raise ValueError(f"X must be a tensor (M, F) (one set) or (B, M, F) (a batch of sets), got {shape}")
    single = X.ndim == 2
    if single:
        X = X[None]
    if mask is None:
        mask = torch.ones(X.shape[:2], dtype=torch.bool, device=X.device)
    else:
        mask = torch.as_tensor(mask, device=X.device)
        mask = mask[None] if single and mask.ndim == 1 else mask
        if mask.dtype != torch.bool or tuple(mask.shape) != tuple(X.shape[:2]):
            raise ValueError(
                f"mask must be a bool tensor of shape {tuple(X.shape[:2])}, got {tuple(mask.shape)}"
            )
    return X, mask, single


def _pool(H: torch.Tensor, mask: torch.Tensor, pool: str) -> torch.Tensor:
    """The sum / mean / coordinate-wise max of the rows of H (B, M, D) where mask (B, M) is True."""
    if pool == "max":
        return H.masked_fill(~mask[..., None], float("-inf")).max(dim=1).values
    total = (H * mask[..., None].to(H.dtype)).sum(dim=1)
    return total / mask.sum(dim=1, keepdim=True).to(H.dtype) if pool == "mean" else total


class DeepSets(nn.Module):
    """Deep Sets, :math:`f(X) = \\rho\\big(\\bigoplus_{m} \\phi(x_m)\\big)` with a per-element network phi, a pooling
    :math:`\\bigoplus` (``"sum"``, ``"mean"`` or the coordinate-wise ``"max"``) and a readout network rho.

    ``forward(X, mask=None)`` takes one set X (M, F) or a batch (B, M, F) of sets padded to M rows with a bool
    mask (B, M) (True = element); padding rows are ignored.
    """

    def __init__(self, phi: nn.Module, rho: nn.Module, pool: str = "sum"):
        super().__init__()
        for module, name in ((phi, "phi"), (rho, "rho")):
            if not isinstance(module, nn.Module):
                raise TypeError(f"{name} must be a torch.nn.Module, got {type(module).__name__}")
        self.phi, self.rho = phi, rho
        self.pool = check_choice(pool, "pool", ("sum", "mean", "max"))

    def embed(self, X: torch.Tensor, mask=None) -> torch.Tensor:
        """The pooled latent vector :math:`\\bigoplus_m \\phi(x_m)`, (B, D) (or (D,) for one set)."""
        X, mask, single = _set_batch(X, mask)
        z = _pool(self.phi(X), mask, self.pool)
        return z[0] if single else z

    def forward(self, X: torch.Tensor, mask=None) -> torch.Tensor:
        return self.rho(self.embed(X, mask))


class EquivariantSetLayer(nn.Module):
    """The permutation-equivariant linear set layer of Deep Sets,
    :math:`y_m = x_m\\Lambda + \\big(\\bigoplus_k x_k\\big)\\Gamma + b`, i.e. :math:`Y = X\\Lambda + \\mathbf 1
    \\mathbf 1^\\top X\\Gamma + \\mathbf 1 b^\\top` for the sum, with :math:`\\Lambda, \\Gamma` (d_in, d_out): a
    special case of :math:`y_m = \\rho(x_m, \\sum_k \\phi(x_k))`. ``forward(X, mask=None)`` as in `DeepSets`;
    padding rows of the output are zero.
    """

    def __init__(self, d_in: int, d_out: int, pool: str = "sum"):
        super().__init__()
        d_in, d_out = check_int(d_in, "d_in", 1), check_int(d_out, "d_out", 1)
        self.pool = check_choice(pool, "pool", ("sum", "mean", "max"))
        self.Lam = nn.Linear(d_in, d_out)  # x_m Lambda + b
        self.Gam = nn.Linear(d_in, d_out, bias=False)  # (pooled x) Gamma

    def forward(self, X: torch.Tensor, mask=None) -> torch.Tensor:
        X, mask, single = _set_batch(X, mask)
        Y = self.Lam(X) + self.Gam(_pool(X, mask, self.pool))[:, None, :]
        Y = Y * mask[..., None].to(Y.dtype)
        return Y[0] if single else Y


def _check_padded_sets(X, mask) -> tuple[np.ndarray, np.ndarray]:
    """Padded sets X (n, M, F) as float64 and their bool mask (n, M)."""
    X = check_array(X, "X", ndim=3)
    mask = np.asarray(mask)
    if mask.dtype != bool or mask.shape != X.shape[:2]:
        raise ValueError(f"mask must be a bool array of shape {X.shape[:2]}, got {mask.dtype} {mask.shape}")
    return X, mask


def train_set_model(
    model: nn.Module,
    X,
    mask,
    y,
    *,
    epochs: int = 20,
    batch_size: int = 64,
    lr: float = 1e-3,
    rng=None,
    progress: bool = True,
) -> list[float]:
    """Train a set model ``model(X, mask) -> (B, 1)`` to regress targets y (n,) on padded sets X (n, M, F)
    with mask (n, M) by the mean squared error :math:`\\frac1B \\sum_b (f(X_b) - y_b)^2` with Adam (`lr`);
    return the mean training loss of each epoch.

    Each of the `epochs` passes shuffles the sets with `rng` and takes `batch_size` of them per step of
    `dlnotes.training.train_steps`, on the model's device in float32 (a bar over the epochs unless
    ``progress=False``). The model is left in the mode it came in.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    X, mask = _check_padded_sets(X, mask)
    y = check_array(y, "y", (len(X),))
    epochs, batch_size = check_int(epochs, "epochs", 1), check_int(batch_size, "batch_size", 1)
    rng = check_rng(rng)
    optimizer = torch.optim.Adam(model.parameters(), lr=check_positive(lr, "lr"))
    dev = model_device(model)
    Xt = torch.tensor(X, dtype=torch.float32, device=dev)
    Mt, yt = torch.tensor(mask, device=dev), torch.tensor(y, dtype=torch.float32, device=dev)

    def loss(model, batch):
        X_b, mask_b, y_b = batch
        return F.mse_loss(model(X_b, mask_b).reshape(-1), y_b)

    losses = []
    for _ in progress_bar(range(epochs), desc="epochs", enabled=progress):
        order = torch.as_tensor(rng.permutation(len(X)), device=dev)
        batches = [order[start : start + batch_size] for start in range(0, len(X), batch_size)]
        step_losses = train_steps(
            model, loss, optimizer, ((Xt[b], Mt[b], yt[b]) for b in batches), progress=False
        )
        total = 0.0
        for value, b in zip(step_losses, batches, strict=True):
            total += value * len(b)
        losses.append(float(total / len(X)))
    return losses


@torch.no_grad()
def predict_sets(model: nn.Module, X, mask) -> np.ndarray:
    """The model's outputs on padded sets X (n, M, F) with mask (n, M), as a NumPy array (n,): the model in
    eval mode (then back in the mode it came in), without gradients."""
    X, mask = _check_padded_sets(X, mask)
    param, was_training = next(model.parameters()), model.training
    model.eval()
    out = model(
        torch.tensor(X, dtype=param.dtype, device=param.device), torch.tensor(mask, device=param.device)
    )
    model.train(was_training)
    return to_numpy(out).reshape(len(X)).astype(np.float64)


def size_mean_baseline(y_train, sizes_train, sizes_test) -> np.ndarray:
    """The per-set-size mean predictor: for each test set, the mean training target of the sets of its size
    (the best constant per size; it sees how many elements a set has but not what they are)."""
    y_train = check_vector(y_train, "y_train")
    sizes_train = check_labels(sizes_train, "sizes_train", len(y_train))
    sizes_test = check_labels(sizes_test, "sizes_test")
    missing = sorted(set(sizes_test.tolist()) - set(sizes_train.tolist()))
    if missing:
        raise ValueError(f"sizes_test has set sizes {missing} that never occur in sizes_train")
    means = {s: y_train[sizes_train == s].mean() for s in np.unique(sizes_train)}
    return np.array([means[s] for s in sizes_test])
