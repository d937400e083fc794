"""Chapter 05, section 5.5 continued (notebook 08_variable_length): sequences of different lengths. Special tokens
(padding, begin and end of sequence), padded batches with their lengths, the masked cross-entropy, a GRU
encoder–decoder that reads packed batches, and decoding that stops at the end token: greedy and beam search,
with exhaustive search as the reference. The task is run-length decoding ("3a1b" -> "aaab"), whose output
length differs from the input length.
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence

from ..training import model_device, to_numpy
from ..validation import check_int, check_rng

SOURCE = "_123abcd"  # the source alphabet: "_" is the padding, then the run lengths and the letters
TARGET = "_^$abcd"  # the target alphabet: padding, begin of sequence "^", end of sequence "$", the letters
PAD, BOS, EOS = 0, 1, 2  # their ids (the padding is 0 in both alphabets)


class RunLengthTask(NamedTuple):
    sources: list  # the encoded strings, e.g. "3a1b"
    targets: list  # the decoded strings, e.g. "aaab"


def make_run_length_task(n: int, max_runs: int = 3, rng=None) -> RunLengthTask:
    """n random run-length codes of 1..max_runs runs, each a count 1..3 and a letter from "abcd" (neighbouring
    runs differ in their letter), with their decoded strings: the target is 1 to 3 times as long as half
    the source."""
    n, max_runs, rng = check_int(n, "n", 1), check_int(max_runs, "max_runs", 1), check_rng(rng)
    sources, targets = [], []
    for _ in range(n):
        runs, letter = [], None
        for _ in range(rng.integers(1, max_runs + 1)):
            letter = rng.choice([c for c in "abcd" if c != letter])
            runs.append((int(rng.integers(1, 4)), letter))
        sources.append("".join(f"{count}{c}" for count, c in runs))
        targets.append("".join(count * c for count, c in runs))
    return RunLengthTask(sources, targets)


class Padded(NamedTuple):
    ids: torch.Tensor  # (batch, longest length), int64, padded with PAD at the end
    lengths: torch.Tensor  # (batch,), the real length of each row


def pad_batch(strings, alphabet: str, bos: bool = False, eos: bool = False) -> Padded:
    """Encode strings over `alphabet` as one padded batch; `bos`/`eos` put the begin/end token around each
    (these need the target alphabet, which has them)."""
    if isinstance(strings, str) or not all(isinstance(s, str) for s in strings) or not len(strings):
        raise TypeError("strings must be a non-empty list of str")
    if (bos or eos) and alphabet != TARGET:
        raise ValueError("bos and eos need the target alphabet TARGET, which has these tokens")
    unknown = sorted(set("".join(strings)) - set(alphabet[3 if alphabet == TARGET else 1 :]))
    if unknown:
        raise ValueError(f"strings must use the symbols of {alphabet!r} (no padding), got {unknown}")
    rows = [[BOS] * bos + [alphabet.index(c) for c in s] + [EOS] * eos for s in strings]
    lengths = torch.tensor([len(r) for r in rows])
    ids = torch.full((len(rows), int(lengths.max())), PAD, dtype=torch.int64)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r, dtype=torch.int64)
    return Padded(ids, lengths)


def masked_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The mean cross-entropy over the real (non-padding) target tokens: logits (batch, T, K), targets
    (batch, T) with PAD where a sequence has ended. Each real token counts once, however the batch is
    padded."""
    if logits.ndim != 3 or targets.shape != logits.shape[:2]:
        raise ValueError(
            f"logits must be (batch, T, K) and targets (batch, T), got {tuple(logits.shape)} and {tuple(targets.shape)}"
        )
    mask = targets != PAD
    per_token = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")  # (batch, T)
    return (per_token * mask).sum() / mask.sum()


class EncoderDecoder(nn.Module):
    """A GRU encoder that reads the packed source (so the padding is never read) and a GRU decoder that
    starts from the encoder's last real state, reads y_{t-1} (BOS first) and scores y_t over TARGET."""

    def __init__(self, hidden: int = 64, embedding: int = 16):
        super().__init__()
        hidden, embedding = check_int(hidden, "hidden", 1), check_int(embedding, "embedding", 1)
        self.embed_source = nn.Embedding(len(SOURCE), embedding, padding_idx=PAD)
        self.embed_target = nn.Embedding(len(TARGET), embedding, padding_idx=PAD)
        self.encoder = nn.GRU(embedding, hidden, batch_first=True)
        self.decoder = nn.GRU(embedding, hidden, batch_first=True)
        self.W = nn.Linear(hidden, len(TARGET))

    def encode(self, source: Padded) -> torch.Tensor:
        """The encoder's state after the last real token of each source, (1, batch, hidden)."""
        packed = pack_padded_sequence(
            self.embed_source(source.ids), source.lengths.cpu(), batch_first=True, enforce_sorted=False
        )
        return self.encoder(packed)[1]

    def forward(self, source: Padded, target_in: torch.Tensor) -> torch.Tensor:
        """Teacher forcing: the logits (batch, T, K) of y_1..y_T given the inputs BOS, y_1, .., y_{T-1}."""
        return self.W(self.decoder(self.embed_target(target_in), self.encode(source))[0])

    def step(self, y_prev: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One decoder step: log p(y_t | y_<t, x) over TARGET, (batch, K), and the new state."""
        out, h = self.decoder(self.embed_target(y_prev[:, None]), h)
        return F.log_softmax(self.W(out[:, 0]), dim=-1), h


def run_length_batches(task: RunLengthTask, batch_size: int, rng=None):
    """Endless random batches (source, target) of the task for `train_steps`: padded sources, and padded
    targets with BOS in front and EOS behind."""
    batch_size, rng = check_int(batch_size, "batch_size", 1), check_rng(rng)
    while True:
        rows = rng.integers(0, len(task.sources), batch_size)
        yield (
            pad_batch([task.sources[i] for i in rows], SOURCE),
            pad_batch([task.targets[i] for i in rows], TARGET, bos=True, eos=True),
        )


def seq2seq_loss(model: EncoderDecoder, pair: tuple[Padded, Padded]) -> torch.Tensor:
    """The masked teacher-forcing loss of a batch, the pair (sources, targets with BOS and EOS), for
    `train_steps`."""
    source, target = pair
    return masked_cross_entropy(model(source, target.ids[:, :-1]), target.ids[:, 1:])


def greedy_decode(model: EncoderDecoder, sources, max_len: int = 20) -> list[str]:
    """Decode a batch of source strings greedily, one argmax per step; each sequence stops at its EOS, or is
    returned as it is after `max_len` tokens."""
    max_len = check_int(max_len, "max_len", 1)
    source = pad_batch(sources, SOURCE)
    dev = model_device(model)
    with torch.no_grad():
        h = model.encode(Padded(source.ids.to(dev), source.lengths))
        y = torch.full((len(sources),), BOS, dtype=torch.int64, device=dev)
        out, done = [], torch.zeros(len(sources), dtype=torch.bool, device=dev)
        for _ in range(max_len):
            log_p, h = model.step(y, h)
            log_p[:, [PAD, BOS]] = -torch.inf  # never emitted
            y = log_p.argmax(dim=1)
            out.append(torch.where(done, PAD, y))
            done |= y == EOS
            if done.all():
                break
    ids = to_numpy(torch.stack(out, dim=1))
    return [
        "".join(TARGET[k] for k in itertools.takewhile(lambda k: k != EOS, row) if k != PAD) for row in ids
    ]


class Hypothesis(NamedTuple):
    text: str  # the decoded string, without BOS and EOS
    log_p: float  # log p(y_1..y_L, EOS | x), the sum of the step log-probabilities


def _search_start(model: EncoderDecoder, source: str) -> torch.Tensor:
    dev = model_device(model)
    s = pad_batch([source], SOURCE)
    return model.encode(Padded(s.ids.to(dev), s.lengths))


def beam_search(model: EncoderDecoder, source: str, beam_width: int, max_len: int = 20) -> Hypothesis:
    """Beam search: keep the `beam_width` most probable unfinished prefixes; at each step extend each by every
    symbol and by EOS, keep the best `beam_width` extensions, and set aside those that end with EOS. Returns
    the most probable finished sequence (at most `max_len` tokens with EOS); if none ended, the best
    unfinished prefix with log_p = -inf. Width 1 is greedy decoding."""
    beam_width, max_len = check_int(beam_width, "beam_width", 1), check_int(max_len, "max_len", 1)
    dev = model_device(model)
    finished = []
    with torch.no_grad():
        texts, scores, h, last = [""], np.zeros(1), _search_start(model, source), [BOS]
        for _ in range(max_len):
            log_p, h = model.step(torch.tensor(last, device=dev), h)
            total = scores[:, None] + to_numpy(log_p).astype(np.float64)[:, EOS:]  # (beams, EOS + symbols)
            best = np.argsort(-total, axis=None, kind="stable")[:beam_width]
            rows, cols = np.unravel_index(best, total.shape)
            live = cols > 0  # column 0 is EOS: that sequence is finished
            finished += [Hypothesis(texts[r], float(total[r, 0])) for r in rows[~live]]
            if not live.any():
                break
            rows, cols = rows[live], cols[live]
            texts = [texts[r] + TARGET[EOS + c] for r, c in zip(rows, cols, strict=True)]
            scores, h, last = total[rows, cols], h[:, torch.as_tensor(rows, device=dev)], list(EOS + cols)
    if not finished:  # nothing ended within max_len tokens: the best prefix, as greedy decoding returns it
        return Hypothesis(texts[0], -np.inf)
    return max(finished, key=lambda hyp: hyp.log_p)


def exhaustive_search(model: EncoderDecoder, source: str, max_len: int) -> Hypothesis:
    """The most probable sequence of at most `max_len` tokens ending with EOS, by scoring every one of them
    (4^0 + 4^1 + ... + 4^(max_len-1) sequences): the reference for beam search."""
    max_len = check_int(max_len, "max_len", 1, 6)
    dev = model_device(model)
    best = Hypothesis("", -np.inf)
    with torch.no_grad():
        h0 = _search_start(model, source)
        for length in range(max_len):
            texts = ["".join(t) for t in itertools.product("abcd", repeat=length)]
            y = torch.tensor([[BOS] + [TARGET.index(c) for c in t] for t in texts], device=dev)
            h = h0.expand(-1, len(texts), -1).contiguous()
            log_p = torch.zeros(len(texts), dtype=torch.float64, device=dev)
            for t in range(length + 1):
                step, h = model.step(y[:, t], h)
                nxt = y[:, t + 1] if t < length else torch.full_like(y[:, 0], EOS)
                log_p += step.double().gather(1, nxt[:, None])[:, 0]
            k = int(log_p.argmax())
            if log_p[k].item() > best.log_p:
                best = Hypothesis(texts[k], log_p[k].item())
    return best
