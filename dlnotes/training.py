"""Reproducibility, threads and devices, and the book's one training loop with a progress bar.

`train_steps` is the loop every model of the book is trained by, written out: for each batch, (transform it),
loss, ``zero_grad``, backward, (clip), ``step``, (schedule). What differs between models is an argument: the
loss of a batch, the batches, the optimizer and its schedule, a per-batch transform (augmentation, an
adversary, noise). `fit` runs it for epochs over a loader with a loss of (output, target), the form of chapter 02:
a batch from a loader made by `make_loader` is ``(X, y)``, or ``(X,)`` for data without targets, in which case
the loss compares the model's output with its input (autoencoders).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import random
import zlib
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import threadpoolctl
import torch
from IPython import get_ipython
from IPython.display import display
from tqdm.auto import tqdm as auto_tqdm
from tqdm.notebook import tqdm as notebook_tqdm

from .validation import PACKAGE_RNG, check_callable, check_int, check_positive, check_rng

SEED_VARIABLE, THREADS_VARIABLE = "DLNOTES_SEED", "DLNOTES_THREADS"


class Step(NamedTuple):
    """What every from-scratch optimizer step returns, ``step(theta, g, state, **hyper) -> Step(theta, state)``
    (chapter 03's methods, chapter 08's weight decay), so that `optimization.run_optimizer` drives them all."""

    theta: np.ndarray  # the new parameters
    state: dict  # what the method remembers for the next step


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


def seed_each_cell(seed: int) -> None:
    """Before every cell of the running notebook, seed the generators from `seed` and the cell's text: Python's,
    NumPy's global state, dlnotes' package generator, PyTorch's, and the notebook's own ``rng`` (a NumPy
    Generator of that name). A cell re-run, alone or out of order, draws what it drew the first time and prints
    the numbers on the page. Calling it again replaces the earlier hook; outside IPython it does nothing."""
    seed = check_int(seed, "seed", 0)
    shell = get_ipython()
    if shell is None:
        return

    def seed_the_cell(info) -> None:
        cell = np.random.SeedSequence([seed, zlib.crc32(info.raw_cell.encode())])
        seed_everything(int(cell.generate_state(1, np.uint64)[0]) % 2**63)
        rng = shell.user_ns.get("rng")
        if isinstance(rng, np.random.Generator):
            rng.bit_generator.state = type(rng.bit_generator)(cell).state

    for callback in list(shell.events.callbacks["pre_run_cell"]):
        if getattr(callback, "__qualname__", "").startswith(seed_each_cell.__name__ + "."):
            shell.events.unregister("pre_run_cell", callback)
    shell.events.register("pre_run_cell", seed_the_cell)


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


def model_device(model: torch.nn.Module) -> torch.device:
    """The device of the model's parameters (the CPU for a model without any)."""
    parameter = next(model.parameters(), None)
    return parameter.device if parameter is not None else torch.device("cpu")


@contextlib.contextmanager
def eval_mode(model: torch.nn.Module):
    """``with eval_mode(model):`` the model in eval mode (dropout off, batch norm's running statistics) inside
    the block, and back in the mode it came in after it."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)


class _NotebookBar(notebook_tqdm):
    """tqdm's notebook widget whose saved text is the finished bar: the text a notebook keeps beside a widget
    (what GitHub's preview and plain nbconvert show) is otherwise the bar's first state, "0%| 0/300"."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, display=False, **kwargs)
        self._shown = None if self.disable else display(self.container, display_id=True)

    def close(self):
        super().close()
        if self._shown is not None:
            self._shown.update(self.container)  # the same widget, with the text of its last state
            self._shown = None


def progress_bar(iterable=None, *, total: int | None = None, desc: str = "", enabled: bool = True):
    """A progress bar over `iterable` (a widget in a notebook, a line of text elsewhere) that stays when it
    finishes: every place a notebook is read shows where training ended. ``enabled=False`` shows none."""
    bar = _NotebookBar if issubclass(auto_tqdm, notebook_tqdm) else auto_tqdm
    return bar(iterable, total=total, desc=desc, disable=not enabled, leave=True)


def _to(batch, dev: torch.device):
    """A batch (a tensor, or a tuple or list of tensors and other things) on the device `dev`."""
    if isinstance(batch, torch.Tensor):
        return batch.to(dev)
    if isinstance(batch, tuple | list):
        items = [_to(item, dev) for item in batch]
        return type(batch)(*items) if hasattr(batch, "_fields") else type(batch)(items)  # NamedTuple or not
    return batch


def _inputs_targets(batch) -> tuple[torch.Tensor, torch.Tensor]:
    return batch[0], (batch[1] if len(batch) > 1 else batch[0])


def train_steps(
    model: torch.nn.Module,
    loss: Callable,
    optimizer: torch.optim.Optimizer,
    batches,
    steps: int | None = None,
    *,
    transform: Callable | None = None,
    scheduler=None,
    clip_grad_norm: float | None = None,
    progress: bool = True,
    desc: str = "steps",
) -> np.ndarray:
    """The book's training loop: one optimizer step per batch of `batches` (at most `steps` of them); return the
    loss of every step.

    A step moves the batch to the model's device, replaces it by ``transform(model, batch)`` if given (with the
    model in eval mode: an adversary attacks the model as it is evaluated; augmentation, noise), computes
    ``loss(model, batch)`` (a scalar tensor) with the model in training mode, then ``zero_grad``, backward,
    clips the gradient to norm `clip_grad_norm` if given, ``step``, and ``scheduler.step()`` if a schedule is
    given. `batches` is any iterable: a loader, a list, a generator that draws a random batch per step (then
    give `steps`). The model is left in the mode it came in.
    """
    check_callable(loss, "loss")
    if transform is not None:
        check_callable(transform, "transform")
    if clip_grad_norm is not None:
        clip_grad_norm = check_positive(clip_grad_norm, "clip_grad_norm")
    total = check_int(steps, "steps", 1) if steps is not None else _length(batches)
    dev, was_training = model_device(model), model.training
    losses = []
    # one iterator, run to its end unless `steps` says otherwise: a DataLoader draws its order when an iterator is
    # made and again after its last batch, so a second iterator or an unfinished one changes the next epoch's order
    batches = iter(batches) if steps is None else itertools.islice(batches, total)
    bar = progress_bar(batches, total=total, desc=desc, enabled=progress)
    model.train()
    try:
        for batch in bar:
            batch = _to(batch, dev)
            if transform is not None:
                with eval_mode(model):
                    batch = transform(model, batch)
            value = loss(model, batch)
            optimizer.zero_grad()
            value.backward()
            if clip_grad_norm is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip_grad_norm)
            optimizer.step()
            if scheduler is not None:
                scheduler.step()
            losses.append(value.item())
            if len(losses) % 10 == 0 or len(losses) == total:
                bar.set_postfix(loss=f"{losses[-1]:.3f}", refresh=False)
    finally:
        bar.close()
        model.train(was_training)
    if not losses:
        raise ValueError("batches must yield at least one batch, got an empty loader")
    return np.array(losses)


def _length(batches) -> int | None:
    try:
        return len(batches)
    except TypeError:  # a generator: the bar counts without a total
        return None


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
    transform: Callable | None = None,
    progress: bool = True,
) -> dict[str, list[float]]:
    """Train `model` for `epochs` passes over `train_loader` by `train_steps`, the loss of a batch (X, y) being
    ``loss_fn(model(X), y)`` (y = X for a batch (X,) without targets); return the history.

    `scheduler` steps once per batch, `clip_grad_norm` and `transform` are those of `train_steps`. The history
    holds the mean training loss per epoch (``"train_loss"``, each batch weighted by its size) and, with
    `val_loader`, the validation loss and every metric per epoch (``"val_loss"``, ``"val_<name>"``). The model
    is left in the mode it came in.
    """
    epochs = check_int(epochs, "epochs", 1)
    check_callable(loss_fn, "loss_fn")
    sizes: list[int] = []

    def loss(model, batch):
        X, target = _inputs_targets(batch)
        sizes.append(len(X))
        return loss_fn(model(X), target)

    val_metrics = {"loss": loss_fn, **(metrics or {})}
    history: dict[str, list[float]] = {"train_loss": []}
    bar = progress_bar(range(epochs), desc="epochs", enabled=progress)
    for _ in bar:
        sizes.clear()
        losses = train_steps(
            model, loss, optimizer, train_loader, transform=transform, scheduler=scheduler,
            clip_grad_norm=clip_grad_norm, progress=False,
        )  # fmt: skip
        history["train_loss"].append(float(np.average(losses, weights=sizes)))
        postfix = {"loss": f"{history['train_loss'][-1]:.3f}"}
        if val_loader is not None:
            for name, value in evaluate(model, val_loader, val_metrics).items():
                history.setdefault(f"val_{name}", []).append(value)
                postfix[f"val_{name}"] = f"{value:.3f}"
        bar.set_postfix(postfix)
    bar.close()
    return history


@torch.no_grad()
def evaluate(model: torch.nn.Module, loader, metrics: dict[str, Callable] | None = None) -> dict[str, float]:
    """Each metric ``f(output, target) -> float`` averaged over the examples of `loader` (model in eval mode).

    ``evaluate(model, loader, {"accuracy": accuracy, "loss": loss_fn})``; metrics that are means over a batch
    (accuracy, mean losses) are weighted by the batch size, so the result is the mean over all examples.
    """
    if not metrics:
        raise ValueError('metrics must name at least one function, e.g. {"accuracy": accuracy}')
    dev = model_device(model)
    sums, total = dict.fromkeys(metrics, 0.0), 0
    with eval_mode(model):
        for batch in loader:
            X, target = _inputs_targets(_to(batch, dev))
            output = model(X)
            for name, metric in metrics.items():
                value = metric(output, target)
                sums[name] += (value.item() if isinstance(value, torch.Tensor) else float(value)) * len(X)
            total += len(X)
    if total == 0:
        raise ValueError("loader must yield at least one example, got an empty loader")
    return {name: value / total for name, value in sums.items()}
