"""Chapter 05, section 5.5 continued (notebook 06_language_models): characters as ids, the plug-in entropy of
the next character, a character-level LSTM language model, its training by teacher forcing on random windows
(`train_char_lm`, also used for chapter 06's GPT), bits per character, and generation by free running.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..text import LMOutput, next_token_loss, random_windows
from ..training import model_device, to_numpy, train_steps
from ..validation import check_int, check_labels, check_number, check_positive, check_rng


def char_vocabulary(text: str) -> str:
    """The distinct characters of `text`, sorted: the vocabulary of a character-level model, character
    ``vocabulary[k]`` having the id k."""
    if not isinstance(text, str) or not text:
        raise TypeError(f"text must be a non-empty str, got {type(text).__name__}")
    return "".join(sorted(set(text)))


def encode_chars(text: str, vocabulary: str) -> np.ndarray:
    """The ids (len(text),) of the characters of `text` in `vocabulary` (int64)."""
    if not isinstance(text, str) or not isinstance(vocabulary, str):
        raise TypeError(
            f"text and vocabulary must be str, got {type(text).__name__}, {type(vocabulary).__name__}"
        )
    index = {c: k for k, c in enumerate(vocabulary)}
    missing = sorted(set(text) - set(index))
    if missing:
        raise ValueError(f"text has characters that are not in the vocabulary: {''.join(missing[:10])!r}")
    return np.fromiter((index[c] for c in text), dtype=np.int64, count=len(text))


def decode_chars(ids, vocabulary: str) -> str:
    """The text whose characters have the ids `ids` in `vocabulary`."""
    ids = check_labels(ids, "ids", n_classes=len(vocabulary))
    return "".join(vocabulary[k] for k in ids)


def conditional_entropy(ids, n_symbols: int, context: int = 0) -> float:
    """Plug-in entropy in bits of the next symbol given the `context` symbols before it, from the counts in
    `ids`: ``H = -sum_c p(c) sum_y p(y | c) log2 p(y | c)``. ``context=0`` is the unigram entropy
    ``-sum_y p(y) log2 p(y)``, ``context=1`` the bigram entropy ``H(y_t | y_{t-1})``."""
    n_symbols = check_int(n_symbols, "n_symbols", 1)
    ids = check_labels(ids, "ids", n_classes=n_symbols)
    context = check_int(context, "context", 0, 8)
    if len(ids) <= context:
        raise ValueError(f"ids must be longer than context = {context}, got {len(ids)} symbols")
    windows = np.lib.stride_tricks.sliding_window_view(ids, context + 1)  # rows (context..., y)
    n = len(windows)
    _, joint = np.unique(windows, axis=0, return_counts=True)  # rows, not one number per row: no overflow
    marginal = np.unique(windows[:, :-1], axis=0, return_counts=True)[1] if context else np.array([n])
    return float(-(joint / n) @ np.log2(joint / n) + (marginal / n) @ np.log2(marginal / n))


def _check_ids(ids, vocab_size: int) -> torch.Tensor:
    if not isinstance(ids, torch.Tensor):
        raise TypeError(f"ids must be an int64 tensor (batch, time), got {type(ids).__name__}")
    if ids.dtype != torch.int64 or ids.ndim != 2 or ids.numel() == 0:
        raise ValueError(
            f"ids must be a non-empty int64 tensor (batch, time), got {ids.dtype} of shape {tuple(ids.shape)}"
        )
    if ids.min() < 0 or ids.max() >= vocab_size:
        raise ValueError(f"ids must lie in 0..{vocab_size - 1}, got {int(ids.min())}..{int(ids.max())}")
    return ids


class CharLSTM(nn.Module):
    """A character-level language model with the output fed back as the next input: the embedding of
    y_{t-1} enters the LSTM, ``z_t = LSTM(z_{t-1}, C_{t-1}, e(y_{t-1}))``, and ``softmax(W z_t + b)`` is
    p(y_t | y_1..y_{t-1})."""

    def __init__(self, vocab_size: int, hidden: int = 128, embedding: int = 32):
        super().__init__()
        self.vocab_size = check_int(vocab_size, "vocab_size", 2)
        self.embed = nn.Embedding(vocab_size, check_int(embedding, "embedding", 1))
        self.lstm = nn.LSTM(embedding, check_int(hidden, "hidden", 1), batch_first=True)
        self.W = nn.Linear(hidden, vocab_size)

    def forward(self, ids: torch.Tensor, state=None) -> LMOutput:
        """ids (B, T) of y_0..y_{T-1} -> logits of y_1..y_T, states z_1..z_T, and the last state."""
        Z, state = self.lstm(self.embed(_check_ids(ids, self.vocab_size)), state)
        return LMOutput(self.W(Z), Z, state)


def train_char_lm(
    model: nn.Module,
    ids,
    steps: int,
    *,
    seq_len: int = 64,
    batch_size: int = 32,
    lr: float = 1e-2,
    clip_grad_norm: float | None = 1.0,
    rng=None,
    progress: bool = True,
) -> np.ndarray:
    """Teacher forcing by `training.train_steps`: `steps` Adam updates of the model on `batch_size` random
    windows of ``seq_len + 1`` characters of `ids` per step, each window's characters fed as the inputs and the
    same characters shifted by one as the targets; the loss is the mean cross-entropy
    ``-mean_t log p(y_t | y_<t)``, the gradient norm clipped to `clip_grad_norm` (None: not clipped). Any model
    with ``vocab_size`` that maps ids (B, T) to an `LMOutput` trains this way (chapter 06's GPT too). Returns the
    training loss of every step, in bits; the model is left in the mode it came in."""
    ids = check_labels(ids, "ids", n_classes=model.vocab_size)
    steps, lr = check_int(steps, "steps", 1), check_positive(lr, "lr")
    windows = random_windows(torch.as_tensor(ids, device=model_device(model)), seq_len, batch_size, rng)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    nats = train_steps(
        model,
        next_token_loss,
        optimizer,
        windows,
        steps,
        clip_grad_norm=clip_grad_norm,
        progress=progress,
        desc="training",
    )
    return nats / np.log(2)


def bits_per_character(model: CharLSTM, ids, rows: int = 64) -> float:
    """``-mean_t log2 p(y_t | y_<t)`` on a text, teacher-forced. The text is cut into `rows` contiguous
    pieces run side by side; every character but the first of each piece is predicted."""
    ids = check_labels(ids, "ids", n_classes=model.vocab_size)
    rows = check_int(rows, "rows", 1, max(1, len(ids) // 2))
    length = len(ids) // rows
    pieces = torch.as_tensor(ids[: rows * length].reshape(rows, length), device=model_device(model))
    with torch.no_grad():
        logits = model(pieces[:, :-1]).logits
        nats = F.cross_entropy(logits.reshape(-1, model.vocab_size), pieces[:, 1:].reshape(-1))
    return nats.item() / np.log(2)


class Generation(NamedTuple):
    ids: np.ndarray  # generated ids, (B, n)
    Z: np.ndarray  # the states z_t that produced them, (B, n, m)


def generate(model: CharLSTM, prefix, n: int, temperature: float = 0.0, rng=None) -> Generation:
    """Free running: read the prefixes (B, P), then n times draw ``y_t ~ softmax(logits / temperature)``
    (``temperature=0``: the most probable symbol, greedy) and feed it back as the next input."""
    prefix = check_labels(np.ravel(prefix), "prefix", n_classes=model.vocab_size).reshape(np.shape(prefix))
    if prefix.ndim != 2:
        raise ValueError(f"prefix must have shape (batch, length), got shape {prefix.shape}")
    n, rng = check_int(n, "n", 1), check_rng(rng)
    temperature = check_number(temperature, "temperature", 0)
    ids, states = np.zeros((len(prefix), n), dtype=np.int64), []
    with torch.no_grad():
        out = model(torch.as_tensor(prefix, device=model_device(model)))
        for t in range(n):
            logits, z = out.logits[:, -1].double(), out.Z[:, -1]
            if temperature == 0:
                ids[:, t] = to_numpy(logits.argmax(dim=1))
            else:
                p = to_numpy(torch.softmax(logits / temperature, dim=1))
                u = rng.random((len(p), 1))  # inverse-CDF draw from each row
                ids[:, t] = np.minimum((np.cumsum(p, axis=1) < u).sum(axis=1), p.shape[1] - 1)
            states.append(to_numpy(z))
            out = model(torch.as_tensor(ids[:, t : t + 1], device=logits.device), out.state)
    return Generation(ids, np.stack(states, axis=1))


def sample(model: CharLSTM, prefix: str, n: int, vocabulary: str, temperature: float = 1.0, rng=None) -> str:
    """n characters generated after the text `prefix` at the given temperature (0: greedy)."""
    if len(vocabulary) != model.vocab_size:
        raise ValueError(
            f"vocabulary must have the model's {model.vocab_size} symbols, got {len(vocabulary)}"
        )
    return decode_chars(
        generate(model, encode_chars(prefix, vocabulary)[None], n, temperature, rng).ids[0], vocabulary
    )
