"""Reproducibility, devices and a small explicit training loop with a progress bar."""

from __future__ import annotations

import os
import random

import numpy as np
import torch
from tqdm.auto import tqdm

SEED_VARIABLE = "DLNOTES_SEED"


def seed_everything(seed: int | None = None) -> int:
    """Seed Python, NumPy and PyTorch; return the seed used.

    With ``seed=None`` the seed is read from the environment variable
    ``DLNOTES_SEED`` (default 0), so a whole notebook can be re-run under
    another seed without editing it: ``DLNOTES_SEED=1 pytest chapters``.
    """
    if seed is None:
        raw = os.environ.get(SEED_VARIABLE, "0")
        try:
            seed = int(raw)
        except ValueError:
            raise ValueError(f"{SEED_VARIABLE} must be a non-negative integer, got {raw!r}") from None
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer or None, got {seed!r}")
    seed = int(seed)
    random.seed(seed)
    np.random.seed(seed % 2**32)  # noqa: NPY002 - legacy global state, for code that uses it
    torch.manual_seed(seed)
    return seed


def device() -> torch.device:
    """The device to train on: the GPU when there is one, else the CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def make_loader(X, y, batch_size: int = 64, shuffle: bool = True) -> torch.utils.data.DataLoader:
    """A DataLoader over the tensors ``X`` (N, ...) and ``y`` (N,)."""
    X, y = torch.as_tensor(X), torch.as_tensor(y)
    if X.ndim < 1 or y.ndim != 1 or len(X) != len(y):
        raise ValueError(
            f"X must have shape (N, ...) and y shape (N,), got X {tuple(X.shape)} and y {tuple(y.shape)}"
        )
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    dataset = torch.utils.data.TensorDataset(X, y)
    return torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=shuffle)


def accuracy(logits: torch.Tensor, y: torch.Tensor) -> float:
    """Fraction of rows of ``logits`` (N, K) whose arg-max equals the label ``y`` (N,)."""
    if logits.ndim != 2 or y.shape != logits.shape[:1]:
        raise ValueError(f"logits must be (N, K) and y (N,), got {tuple(logits.shape)} and {tuple(y.shape)}")
    return (logits.argmax(dim=1) == y).float().mean().item()


@torch.no_grad()
def evaluate(model: torch.nn.Module, loader, loss_fn=None) -> dict[str, float]:
    """Mean loss (if `loss_fn` is given) and accuracy of a classifier over a loader."""
    model.eval()
    dev = next(model.parameters()).device
    total, loss_sum, correct = 0, 0.0, 0.0
    for X, y in loader:
        X, y = X.to(dev), y.to(dev)
        logits = model(X)
        if loss_fn is not None:
            loss_sum += loss_fn(logits, y).item() * len(y)
        correct += accuracy(logits, y) * len(y)
        total += len(y)
    result = {"accuracy": correct / total}
    if loss_fn is not None:
        result["loss"] = loss_sum / total
    return result


def fit(
    model: torch.nn.Module,
    loss_fn,
    optimizer: torch.optim.Optimizer,
    train_loader,
    epochs: int,
    val_loader=None,
    scheduler=None,
    progress: bool = True,
) -> dict[str, list[float]]:
    """Train a classifier for `epochs` passes over `train_loader`.

    One step is the textbook one: forward, loss, ``zero_grad``, backward,
    ``step`` (then ``scheduler.step()``, if a learning-rate schedule is given:
    it is advanced once per batch). Returns the history of the mean training
    loss per epoch and, with `val_loader`, the validation accuracy per epoch.
    """
    if not isinstance(epochs, int) or epochs < 1:
        raise ValueError(f"epochs must be a positive int, got {epochs!r}")
    dev = next(model.parameters()).device
    history: dict[str, list[float]] = {"train_loss": []}
    if val_loader is not None:
        history["val_accuracy"] = []
    bar = tqdm(range(epochs), desc="epochs", disable=not progress)
    for _ in bar:
        model.train()
        loss_sum, total = 0.0, 0
        for X, y in train_loader:
            X, y = X.to(dev), y.to(dev)
            loss = loss_fn(model(X), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if scheduler is not None:
                scheduler.step()
            loss_sum += loss.item() * len(y)
            total += len(y)
        history["train_loss"].append(loss_sum / total)
        postfix = {"loss": f"{history['train_loss'][-1]:.3f}"}
        if val_loader is not None:
            history["val_accuracy"].append(evaluate(model, val_loader)["accuracy"])
            postfix["val_acc"] = f"{history['val_accuracy'][-1]:.3f}"
        bar.set_postfix(postfix)
    return history
