"""Chapter 05, section 5.5 continued (notebook 07_ctc): connectionist temporal classification: the collapse
map, the label probability by brute force over all paths and by the forward recursion (plain and in log
space), best-path decoding, and a synthetic task of unsegmented sequences.
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

import numpy as np

from ..validation import check_int, check_matrix, check_number, check_rng


def ctc_collapse(path, blank: str = "-") -> str:
    """The CTC collapse B: merge repeated symbols, then delete blanks (``B("aa-ab") = "aab"``)."""
    merged = [symbol for symbol, _ in itertools.groupby(path)]
    return "".join(symbol for symbol in merged if symbol != blank)


def _check_ctc(Y, label, alphabet) -> np.ndarray:
    Y = check_matrix(Y, "Y")
    if Y.shape[1] != len(alphabet) or not np.allclose(Y.sum(axis=1), 1) or (Y < 0).any():
        raise ValueError(f"Y must be (T, {len(alphabet)}) per-frame probabilities over {alphabet!r}")
    if any(symbol not in alphabet[1:] for symbol in label):
        raise ValueError(
            f"label symbols must be in {alphabet[1:]!r} (the blank is {alphabet[0]!r}), got {label!r}"
        )
    return Y


def ctc_bruteforce(Y, label: str, alphabet: str = "-ab") -> float:
    """``p(label | x) = sum over paths pi with B(pi) = label of prod_t Y[t, pi_t]`` by enumerating all
    |alphabet|^T paths (alphabet[0] is the blank); for checking only."""
    Y = _check_ctc(Y, label, alphabet)
    total = 0.0
    for path in itertools.product(range(len(alphabet)), repeat=len(Y)):
        if ctc_collapse((alphabet[k] for k in path), alphabet[0]) == label:
            total += np.prod(Y[np.arange(len(Y)), path])
    return float(total)


def _padded_label(label: str, alphabet: str) -> np.ndarray:
    """The blank-padded label l' = (-, l_1, -, l_2, ..., l_|l|, -) as ids, S = 2 |l| + 1."""
    padded = [0]
    for symbol in label:
        padded += [alphabet.index(symbol), 0]
    return np.array(padded)


def _skip_allowed(padded: np.ndarray, repeat_rule: bool) -> np.ndarray:
    """Where alpha_{t-1}(s-2) enters alpha_t(s): s >= 2 (0-based), l'_s not a blank and, with the repeat rule,
    l'_s != l'_{s-2}."""
    allowed = padded != 0
    allowed[:2] = False
    if repeat_rule:
        allowed[2:] &= padded[2:] != padded[:-2]
    return allowed


def ctc_alpha(Y, label: str, alphabet: str = "-ab", repeat_rule: bool = True) -> np.ndarray:
    """The CTC forward variables alpha_t(s) (T, S) over the blank-padded label l', S = 2|l| + 1:
    ``alpha_1(1) = y^1_-``, ``alpha_1(2) = y^1_{l_1}``, and
    ``alpha_t(s) = y^t_{l'_s} (alpha_{t-1}(s) + alpha_{t-1}(s-1) + [l'_s != - and l'_s != l'_{s-2}] alpha_{t-1}(s-2))``.
    ``repeat_rule=False`` drops the condition l'_s != l'_{s-2} (a wrong recursion, for comparison)."""
    Y = _check_ctc(Y, label, alphabet)
    padded = _padded_label(label, alphabet)
    skip = _skip_allowed(padded, bool(repeat_rule))
    alpha = np.zeros((len(Y), len(padded)))
    alpha[0, :2] = Y[0, padded[:2]]
    for t in range(1, len(Y)):
        previous = alpha[t - 1]
        total = previous.copy()
        total[1:] += previous[:-1]
        total[2:] += np.where(skip[2:], previous[:-2], 0.0)
        alpha[t] = total * Y[t, padded]
    return alpha


def ctc_forward(Y, label: str, alphabet: str = "-ab", repeat_rule: bool = True) -> float:
    """``p(label | x) = alpha_T(S) + alpha_T(S-1)`` by the forward recursion `ctc_alpha` over the blank-padded
    label l' = (-, l_1, -, l_2, ..., -) (alpha_T(S) alone for the empty label)."""
    alpha = ctc_alpha(Y, label, alphabet, repeat_rule)
    return float(alpha[-1, -1] + (alpha[-1, -2] if alpha.shape[1] > 1 else 0.0))


def ctc_log_forward(log_Y, label: str, alphabet: str = "-ab") -> float:
    """``log p(label | x)`` by the forward recursion in log space, ``log alpha_t(s) = log y^t_{l'_s} +
    logsumexp(...)`` of the same terms as `ctc_alpha`: no underflow for long sequences, where the alpha
    themselves fall below the smallest float. log_Y (T, |alphabet|) holds log-probabilities per frame."""
    log_Y = check_matrix(log_Y, "log_Y")
    if log_Y.shape[1] != len(alphabet) or not np.allclose(np.exp(log_Y).sum(axis=1), 1):
        raise ValueError(f"log_Y must be (T, {len(alphabet)}) per-frame log-probabilities over {alphabet!r}")
    _check_ctc(np.exp(log_Y[:1]), label, alphabet)  # the label's symbols
    padded = _padded_label(label, alphabet)
    skip = _skip_allowed(padded, True)
    log_alpha = np.full(len(padded), -np.inf)
    log_alpha[:2] = log_Y[0, padded[:2]]
    with np.errstate(divide="ignore"):
        for t in range(1, len(log_Y)):
            terms = np.full((3, len(padded)), -np.inf)
            terms[0] = log_alpha
            terms[1, 1:] = log_alpha[:-1]
            terms[2, 2:] = np.where(skip[2:], log_alpha[:-2], -np.inf)
            log_alpha = np.logaddexp(np.logaddexp(terms[0], terms[1]), terms[2]) + log_Y[t, padded]
    return float(np.logaddexp(log_alpha[-1], log_alpha[-2]) if len(padded) > 1 else log_alpha[-1])


def ctc_best_path(Y, alphabet: str = "-ab") -> str:
    """Best-path decoding: the most probable symbol of every frame, then the collapse B. Exact for the most
    probable *path* (the frames are independent given x), an approximation of the most probable *label*."""
    Y = _check_ctc(Y, "", alphabet)
    return ctc_collapse((alphabet[k] for k in Y.argmax(axis=1)), alphabet[0])


class CTCTask(NamedTuple):
    X: np.ndarray  # frames (N, T_max, vocab + 1), zero-padded after each sequence's length
    input_lengths: np.ndarray  # (N,) frames per sequence
    targets: np.ndarray  # (N, 4) label ids 1..vocab, zero-padded
    target_lengths: np.ndarray  # (N,) label lengths 1..4


def make_ctc_task(n: int, vocab: int = 4, noise: float = 0.35, rng=None) -> CTCTask:
    """Unsegmented synthetic sequences for CTC: a label of 1–4 symbols from 1..vocab, each symbol shown for 2–4
    frames as the noisy one-hot vector e_k, symbols separated by 1–2 'silence' frames e_0 (plus 0–2 at each
    end), Gaussian noise of standard deviation `noise` on every frame. The alignment is not given."""
    n, vocab, rng = check_int(n, "n", 1), check_int(vocab, "vocab", 1), check_rng(rng)
    noise = check_number(noise, "noise", 0)
    labels, frames = [], []
    for _ in range(n):
        label = rng.integers(1, vocab + 1, rng.integers(1, 5))
        sequence = [0] * int(rng.integers(0, 3))
        for position, symbol in enumerate(label):
            sequence += [0] * int(rng.integers(1, 3)) if position > 0 else []
            sequence += [int(symbol)] * int(rng.integers(2, 5))
        labels.append(label)
        frames.append(sequence + [0] * int(rng.integers(0, 3)))
    input_lengths = np.array([len(f) for f in frames])
    X = np.zeros((n, input_lengths.max(), vocab + 1))
    targets = np.zeros((n, 4), dtype=np.int64)
    for i, (sequence, label) in enumerate(zip(frames, labels, strict=True)):
        jitter = noise * rng.normal(size=(len(sequence), vocab + 1))
        X[i, : len(sequence)] = np.eye(vocab + 1)[sequence] + jitter
        targets[i, : len(label)] = label
    return CTCTask(X, input_lengths, targets, np.array([len(label) for label in labels]))
