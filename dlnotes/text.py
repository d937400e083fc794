"""Text as data, shared by the chapters on embeddings, recurrent networks and transformers: words, vocabularies,
token ids, random strings of tokens, what a language model returns, and how one is trained on a long text (random
windows, the next-token loss)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from itertools import pairwise
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F

from .training import to_numpy
from .validation import check_int, check_rng


def tokenize(text: str) -> list[str]:
    """Lower-case words (letters, with inner apostrophes) of a text."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return re.findall(r"[a-z]+(?:'[a-z]+)?", text.lower())


class Vocabulary(NamedTuple):
    tokens: list[str]  # the special tokens, then the others, most frequent first: token k has the id k
    counts: np.ndarray  # how often each of them occurs in the text, (len(tokens),) int64


def build_vocab(tokens, min_count: int = 5, size: int | None = None, specials=()) -> Vocabulary:
    """The vocabulary of a text given as tokens (words, characters, ...): the `specials` first (ids 0, 1, ...,
    e.g. ``("[UNK]", "[MASK]")``), then the other tokens occurring at least `min_count` times, most frequent
    first (ties in alphabetical order), at most `size` of them (None: all); with their counts in the text."""
    min_count = check_int(min_count, "min_count", 1)
    size = None if size is None else check_int(size, "size", 1)
    if isinstance(specials, str) or not all(isinstance(s, str) for s in specials):
        raise TypeError(f"specials must be a sequence of str, e.g. ('[UNK]',), got {specials!r}")
    counts = Counter(tokens)
    words = sorted(
        (w for w, c in counts.items() if c >= min_count and w not in specials), key=lambda w: (-counts[w], w)
    )
    vocabulary = list(specials) + words[:size]
    return Vocabulary(vocabulary, np.array([counts[w] for w in vocabulary], dtype=np.int64))


def check_tokens(
    x, name: str, vocab: int, length: int | None = None, max_length: int | None = None
) -> torch.Tensor:
    """Token ids (batch, length) as an int64 tensor, each in 0..vocab-1, from a tensor or an array; `length`
    fixes the number of columns, `max_length` bounds it."""
    t = x if isinstance(x, torch.Tensor) else torch.as_tensor(np.ascontiguousarray(x))
    if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
        raise TypeError(f"{name} must hold integer token ids, got dtype {t.dtype}")
    columns = (
        str(length) if length is not None else "length" if max_length is None else f"length <= {max_length}"
    )
    if (
        t.ndim != 2
        or t.numel() == 0
        or (length is not None and t.shape[1] != length)
        or (max_length is not None and t.shape[1] > max_length)
    ):
        raise ValueError(f"{name} must have shape (batch, {columns}), got {tuple(t.shape)}")
    if (t < 0).any() or (t >= vocab).any():
        raise ValueError(f"{name} must hold token ids in 0..{vocab - 1}, got {int(t.min())}..{int(t.max())}")
    return t.long()


def random_strings(n: int, length: int, vocab: int, rng=None, exclude=None) -> np.ndarray:
    """`n` strings of `length` symbols drawn uniformly from 0..vocab-1, (n, length) int64; the strings may
    repeat each other, but none is a row of `exclude` (token ids (N', length): the training strings when a
    held-out set is drawn)."""
    n, length = check_int(n, "n", 1), check_int(length, "length", 1)
    vocab, rng = check_int(vocab, "vocab", 2), check_rng(rng)
    if exclude is None:
        return rng.integers(vocab, size=(n, length))
    seen = {row.tobytes() for row in to_numpy(check_tokens(exclude, "exclude", vocab, length))}
    if len(seen) >= vocab**length:
        raise ValueError(f"exclude holds all {vocab}^{length} strings: nothing is left to draw")
    rows: list[np.ndarray] = []
    while len(rows) < n:  # draw in rounds of 2n, keep the new strings in the order drawn
        rows += [row for row in rng.integers(vocab, size=(2 * n, length)) if row.tobytes() not in seen]
    return np.array(rows[:n])


class LMOutput(NamedTuple):
    """What a language model returns for token ids (B, T): the logits, and for a recurrent model its states."""

    # (B, T, vocab): scores of the token at each position (the next one for a causal model)
    logits: torch.Tensor
    Z: torch.Tensor | None = None  # hidden states z_t of a recurrent model, (B, T, m)
    state: tuple | None = None  # a recurrent model's last state (z_T, C_T), to continue from


def random_windows(ids: torch.Tensor, seq_len: int, batch_size: int, rng) -> Iterator[torch.Tensor]:
    """Endless batches (batch_size, seq_len + 1) of windows of consecutive tokens of the 1-D tensor `ids`, each
    starting at a position drawn uniformly by the generator `rng`: the batches of a language model's training."""
    if not isinstance(ids, torch.Tensor) or ids.ndim != 1:
        raise TypeError(f"ids must be a 1-D tensor of token ids, got {type(ids).__name__}")
    seq_len, batch_size, rng = (
        check_int(seq_len, "seq_len", 1),
        check_int(batch_size, "batch_size", 1),
        check_rng(rng),
    )
    if len(ids) < seq_len + 2:
        raise ValueError(f"ids must hold more than seq_len + 1 = {seq_len + 1} tokens, got {len(ids)}")
    offsets = torch.arange(seq_len + 1, device=ids.device)

    def batches():  # a generator of its own, so that bad arguments fail at the call, not at the first batch
        while True:
            starts = rng.integers(0, len(ids) - seq_len, batch_size)  # the last start is T - L - 1
            yield ids[torch.as_tensor(starts, device=ids.device)[:, None] + offsets]

    return batches()


def next_token_loss(model: torch.nn.Module, window: torch.Tensor) -> torch.Tensor:
    """``-mean_t log p(y_t | y_<t)`` of a language model on windows (B, T + 1): it reads y_0..y_{T-1} and is scored on
    y_1..y_T (teacher forcing)."""
    logits = model(window[:, :-1]).logits
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), window[:, 1:].reshape(-1))


# Byte-pair encoding: the text is cut into pieces (a word with the space before it, a run of punctuation, a run
# of white space); a piece starts as its characters, and each merge joins an adjacent pair of symbols into one.
_PIECES = re.compile(r" ?\w+| ?[^\w\s]+|\s+(?!\S)|\s+")


def bpe_pieces(text: str) -> list[str]:
    """The pieces byte-pair encoding cuts `text` into before it merges: joined, they give the text back."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return _PIECES.findall(text)


class BPE(NamedTuple):
    merges: list[tuple[str, str]]  # the pairs merged, in the order learnt
    # the characters of the training text (sorted), then one token per merge: token k has id k
    tokens: list[str]


def _merge(symbols: tuple, pair: tuple[str, str]) -> tuple:
    """The symbols with every occurrence of `pair` (taken left to right, not overlapping) joined into one."""
    out, k = [], 0
    while k < len(symbols):
        if k + 1 < len(symbols) and (symbols[k], symbols[k + 1]) == pair:
            out.append(symbols[k] + symbols[k + 1])
            k += 2
        else:
            out.append(symbols[k])
            k += 1
    return tuple(out)


def train_bpe(text: str, n_merges: int) -> BPE:
    """Byte-pair encoding learnt from `text`: `n_merges` times, join the adjacent pair of symbols that occurs most
    often (counted over the distinct pieces times their frequencies; ties: the smallest pair in string order).
    Stops early, with fewer merges, when every piece is a single symbol."""
    if not isinstance(text, str) or not text:
        raise TypeError(f"text must be a non-empty str, got {type(text).__name__} {text!r:.40}")
    n_merges = check_int(n_merges, "n_merges", 0)
    words = {tuple(piece): count for piece, count in Counter(bpe_pieces(text)).items()}
    pairs: Counter = Counter()  # pair -> occurrences in the text
    where: dict = {}  # pair -> the words holding it
    for word, count in words.items():
        for pair in pairwise(word):
            pairs[pair] += count
            where.setdefault(pair, set()).add(word)
    merges = []
    while len(merges) < n_merges and pairs:
        best = min(pairs, key=lambda p: (-pairs[p], p))
        merges.append(best)
        for word in list(where.pop(best)):
            count = words.pop(word)
            new = _merge(word, best)
            words[new] = words.get(new, 0) + count
            for pair in pairwise(word):  # take the old word's pairs out, put the new word's in
                pairs[pair] -= count
                where.get(pair, set()).discard(word)
                if pairs[pair] == 0:  # the pair no longer occurs
                    del pairs[pair]
                    where.pop(pair, None)
            for pair in pairwise(new):
                pairs[pair] += count
                where.setdefault(pair, set()).add(new)
    return BPE(merges, sorted(set(text)) + [a + b for a, b in merges])


def bpe_encode(text: str, bpe: BPE) -> np.ndarray:
    """The token ids (int64) of `text`: each piece starts as its characters and the learnt merges are applied in
    their order. A character the training text did not contain raises a ValueError naming it."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    ids: dict = {}
    for k, token in enumerate(bpe.tokens):  # two merges may give the same string: the first id is used
        ids.setdefault(token, k)
    rank = {pair: k for k, pair in enumerate(bpe.merges)}
    unknown = set(text) - set(bpe.tokens[: len(bpe.tokens) - len(bpe.merges)])
    if unknown:
        c = min(unknown, key=text.index)
        raise ValueError(
            f"text holds the character {c!r} (position {text.index(c)}), unseen in the training text"
        )
    done: dict = {}  # piece -> its token ids (a text repeats its pieces)
    out = []
    for piece in bpe_pieces(text):
        if piece not in done:
            word = tuple(piece)
            while len(word) > 1:  # the earliest learnt merge among the adjacent pairs, until none applies
                pair = min(pairwise(word), key=lambda p: rank.get(p, len(rank)))
                if pair not in rank:
                    break
                word = _merge(word, pair)
            done[piece] = [ids[s] for s in word]
        out += done[piece]
    return np.array(out, dtype=np.int64)


def bpe_decode(ids, bpe: BPE) -> str:
    """The text of token ids: their tokens joined."""
    ids = np.asarray(ids)
    if ids.ndim != 1 or (ids.size and not np.issubdtype(ids.dtype, np.integer)):
        raise TypeError(
            f"ids must be a 1-D sequence of integer token ids, got {ids.dtype} of shape {ids.shape}"
        )
    if ids.size and (ids.min() < 0 or ids.max() >= len(bpe.tokens)):
        raise ValueError(f"ids must be token ids in 0..{len(bpe.tokens) - 1}, got {ids.min()}..{ids.max()}")
    return "".join(bpe.tokens[k] for k in ids.tolist())
