"""Reproducibility, threads and devices, and one small explicit training loop with a progress bar.

``fit`` is the textbook loop, written out: for each batch, forward, loss, ``zero_grad``, backward,
(clip), ``step``. A batch from a loader made by `make_loader` is ``(X, y)``, or ``(X,)`` for data without
targets, in which case the loss compares the model's output with its input (autoencoders).
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable

import numpy as np
import threadpoolctl
import torch
from tqdm.auto import tqdm

from .validation import PACKAGE_RNG, check_int, check_positive, check_rng

SEED_VARIABLE, THREADS_VARIABLE = "DLNOTES_SEED", "DLNOTES_THREADS"


def seed_everything(seed: int | None = None) -> int:
    """Seed Python, NumPy (the legacy global state and dlnotes' package generator) and PyTorch; return the seed.

    With ``seed=None`` the seed is read from the environment variable ``DLNOTES_SEED`` (default 0), so a whole
    notebook can be re-run under another seed without editing it: ``DLNOTES_SEED=1 pytest chapters``.
    """
    if seed is None:
        raw = os.environ.get(SEED_VARIABLE, "0")
        if not raw.isdigit():
            raise ValueError(f"{SEED_VARIABLE} must be a non-negative integer, got {raw!r}")
        seed = int(raw)
    seed = check_int(seed, "seed", 0)
    random.seed(seed)
    np.random.seed(seed % 2**32)  # noqa: NPY002 - legacy global state, for code that uses it
    PACKAGE_RNG.bit_generator.state = np.random.PCG64(seed).state
    torch.manual_seed(seed)
    return seed


def use_threads(n: int | None = None) -> int:
    """Let PyTorch and NumPy's BLAS use `n` threads; return n.

    With ``n=None`` it is read from ``DLNOTES_THREADS`` (default 1). The book's models are small: one thread
    is as fast as several on an idle machine and 3–10 times faster on a busy one (two notebooks built side
    by side, Colab's two shared cores), where threads wait for each other.
    """
    if n is None:
        raw = os.environ.get(THREADS_VARIABLE, "1")
        if not raw.isdigit() or int(raw) < 1:
            raise ValueError(f"{THREADS_VARIABLE} must be a positive integer, got {raw!r}")
        n = int(raw)
    n = check_int(n, "n", 1)
    torch.set_num_threads(n)
    threadpoolctl.threadpool_limits(n)
    return n


def device() -> torch.device:
    """The device to train on: the GPU when there is one, else the CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """A tensor's values as a NumPy array, from any device (the one way out of torch in dlnotes)."""
    return tensor.detach().cpu().numpy()


def count_parameters(model: torch.nn.Module) -> int:
    """Number of trainable numbers; a dense layer from n to m has ``m (n + 1)``."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def make_loader(
    X,
    y=None,
    batch_size: int = 64,
    shuffle: bool = True,
    dtype: torch.dtype = torch.float32,
    rng=None,
    drop_last: bool = False,
) -> torch.utils.data.DataLoader:
    """A DataLoader over inputs ``X`` (N, ...) and targets ``y`` (N, ...) of any shape, or over X alone (y=None).

    Floating-point arrays are converted to `dtype` (float32, the dtype of torch's layers, by default);
    integer arrays (class labels, token ids) stay int64. Shuffling draws from `rng`. With ``drop_last=True``
    the last, incomplete batch of an epoch is skipped (a batch of 3 would give batch norm noisy statistics).
    """

    def tensor(a, name: str) -> torch.Tensor:
        t = torch.as_tensor(np.asarray(a) if not isinstance(a, torch.Tensor) else a)
        if t.ndim == 0 or len(t) == 0:
            raise ValueError(f"{name} must have shape (N, ...) with N >= 1, got {tuple(t.shape)}")
        if t.is_floating_point():
            return t.to(dtype)
        if t.dtype == torch.bool or t.is_complex():
            raise TypeError(f"{name} must hold real numbers or integer labels, got {t.dtype}")
        return t.long()

    tensors = [tensor(X, "X")]
    if y is not None:
        tensors.append(tensor(y, "y"))
        if len(tensors[1]) != len(tensors[0]):
            raise ValueError(
                f"y must have one target per row of X ({len(tensors[0])}), got {len(tensors[1])}"
            )
    generator = torch.Generator().manual_seed(int(check_rng(rng).integers(2**31)))
    return torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(*tensors),
        batch_size=check_int(batch_size, "batch_size", 1),
        shuffle=shuffle,
        generator=generator,
        drop_last=bool(drop_last),
    )


def accuracy(logits: torch.Tensor, y: torch.Tensor) -> float:
    """Fraction of rows of ``logits`` (N, K) whose arg-max equals the label ``y`` (N,)."""
    if logits.ndim != 2 or y.shape != logits.shape[:1]:
        raise ValueError(f"logits must be (N, K) and y (N,), got {tuple(logits.shape)} and {tuple(y.shape)}")
    return (logits.argmax(dim=1) == y).float().mean().item()


def _inputs_targets(batch, dev: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    X = batch[0].to(dev)
    return X, (batch[1].to(dev) if len(batch) > 1 else X)


def model_device(model: torch.nn.Module) -> torch.device:
    """The device of the model's parameters (the CPU for a model without any)."""
    parameter = next(model.parameters(), None)
    return parameter.device if parameter is not None else torch.device("cpu")


@torch.no_grad()
def evaluate(model: torch.nn.Module, loader, metrics: dict[str, Callable] | None = None) -> dict[str, float]:
    """Each metric ``f(output, target) -> float`` averaged over the examples of `loader` (model in eval mode).

    ``evaluate(model, loader, {"accuracy": accuracy, "loss": loss_fn})``; metrics that are means over a batch
    (accuracy, mean losses) are weighted by the batch size, so the result is the mean over all examples.
    """
    if not metrics:
        raise ValueError('metrics must name at least one function, e.g. {"accuracy": accuracy}')
    model.eval()
    dev = model_device(model)
    sums, total = dict.fromkeys(metrics, 0.0), 0
    for batch in loader:
        X, target = _inputs_targets(batch, dev)
        output = model(X)
        for name, metric in metrics.items():
            value = metric(output, target)
            sums[name] += (value.item() if isinstance(value, torch.Tensor) else float(value)) * len(X)
        total += len(X)
    if total == 0:
        raise ValueError("loader must yield at least one example, got an empty loader")
    return {name: value / total for name, value in sums.items()}


def fit(
    model: torch.nn.Module,
    loss_fn: Callable,
    optimizer: torch.optim.Optimizer,
    train_loader,
    epochs: int,
    val_loader=None,
    metrics: dict[str, Callable] | None = None,
    scheduler=None,
    clip_grad_norm: float | None = None,
    progress: bool = True,
) -> dict[str, list[float]]:
    """Train `model` for `epochs` passes over `train_loader`; return the history.

    One step: forward, ``loss_fn(output, target)``, ``zero_grad``, backward, optionally clip the gradient to
    norm `clip_grad_norm`, ``step``, then ``scheduler.step()`` if a learning-rate schedule is given (once per
    batch). The history holds the mean training loss per epoch (``"train_loss"``) and, with `val_loader`, the
    validation loss and every metric per epoch (``"val_loss"``, ``"val_<name>"``).
    """
    epochs = check_int(epochs, "epochs", 1)
    if clip_grad_norm is not None:
        clip_grad_norm = check_positive(clip_grad_norm, "clip_grad_norm")
    dev = model_device(model)
    val_metrics = {"loss": loss_fn, **(metrics or {})}
    history: dict[str, list[float]] = {"train_loss": []}
    bar = tqdm(range(epochs), desc="epochs", disable=not progress)
    for _ in bar:
        model.train()
        loss_sum, total = 0.0, 0
        for batch in train_loader:
            X, target = _inputs_targets(batch, dev)
            loss = loss_fn(model(X), target)
            optimizer.zero_grad()
            loss.backward()
            if clip_grad_norm is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip_grad_norm)
            optimizer.step()
            if scheduler is not None:
                scheduler.step()
            loss_sum += loss.item() * len(X)
            total += len(X)
        if total == 0:
            raise ValueError("train_loader must yield at least one example, got an empty loader")
        history["train_loss"].append(loss_sum / total)
        postfix = {"loss": f"{history['train_loss'][-1]:.3f}"}
        if val_loader is not None:
            for name, value in evaluate(model, val_loader, val_metrics).items():
                history.setdefault(f"val_{name}", []).append(value)
                postfix[f"val_{name}"] = f"{value:.3f}"
        bar.set_postfix(postfix)
    return history
