"""Graded exercises of chapter 05 — recurrent networks."""

from __future__ import annotations

import itertools

import numpy as np

from ..activations import sigmoid
from ..rnn import LSTMCell, attention_context, clip_by_norm, ctc_collapse, elman_rnn, scan_combine
from .core import Hint, close, grader

# ----------------------------------------------------------------------------- 5.1 simple RNNs


def elman_states_reference(X, U, V):
    """The states z_1..z_T (T, m) of z_t = tanh(U z_{t-1} + V x_t), z_0 = 0."""
    return elman_rnn(X, U, V, np.eye(len(U))).Z


def _elman_cases(rng):
    return [
        (rng.normal(size=(T, n)), 0.6 * rng.normal(size=(m, m)), rng.normal(size=(m, n)))
        for T, n, m in [(5, 3, 4), (8, 2, 6), (3, 4, 2)]
    ]


def _shifted_states(X, U, V):
    Z = elman_states_reference(X, U, V)
    return np.vstack([np.zeros(len(U)), Z[:-1]])


def _transposed_U(X, U, V):
    return elman_states_reference(X, U.T, V)


def _phi_outside(X, U, V):
    z, Z = np.zeros(len(U)), []
    for x in X:
        z = np.tanh(U @ z) + V @ x
        Z.append(z)
    return np.array(Z)


grade_elman_states = grader(
    "elman_states",
    "X, U, V",
    elman_states_reference,
    _elman_cases,
    hints=(
        Hint(
            lambda a, e, g: close(_shifted_states(*a), g),
            "row t of the result is the state after reading x_t: start from z_0 = 0, but do not return it; "
            "the first row is tanh(V x_1).",
        ),
        Hint(
            lambda a, e, g: close(np.tanh(a[0] @ a[2].T), g),
            "the state feeds back: z_t = tanh(U z_{t-1} + V x_t), with the previous state z_{t-1}.",
        ),
        Hint(
            lambda a, e, g: close(_phi_outside(*a), g),
            "apply tanh to the whole pre-activation U z_{t-1} + V x_t, not to U z_{t-1} alone.",
        ),
        Hint(
            lambda a, e, g: close(_transposed_U(*a), g),
            "the recurrence is U @ z (row i of U collects what unit i receives), not U.T @ z or z @ U.",
        ),
    ),
    mistakes=(
        (_shifted_states, "start from z_0 = 0"),
        (lambda X, U, V: np.tanh(X @ V.T), "the state feeds back"),
        (_phi_outside, "whole pre-activation"),
        (_transposed_U, "not U.T @ z"),
    ),
)


# ----------------------------------------------------------------------------- 5.2 vanishing gradients


def _clip_cases(rng):
    return [
        (3 * rng.normal(size=10), 1.0),  # ||g|| > c: rescaled
        (0.1 * rng.normal(size=6), 1.0),  # ||g|| < c: unchanged
        (rng.normal(size=(3, 4)) + 2, 2.5),  # a matrix of gradients: the norm of all its entries
    ]


grade_clip_by_norm = grader(
    "clip_by_norm",
    "g, c",
    clip_by_norm,
    _clip_cases,
    hints=(
        Hint(
            lambda a, e, g: close(np.clip(a[0], -a[1], a[1]), g),
            "clipping by norm rescales the whole vector, g * c / ||g||; clipping each component to [-c, c] "
            "changes the direction.",
        ),
        Hint(
            lambda a, e, g: close(a[0] * min(1, a[1] / np.sum(a[0] ** 2)), g),
            "||g|| is the square root of the sum of squares.",
        ),
        Hint(
            lambda a, e, g: close(a[0] * a[1] / np.linalg.norm(a[0]), g),
            "only a gradient with ||g|| > c is rescaled; a smaller one stays as it is (factor min(1, c / ||g||)).",
        ),
        Hint(
            lambda a, e, g: a[0].ndim == 2 and close(a[0] * min(1, a[1] / np.linalg.norm(a[0], 2)), g),
            "np.linalg.norm(g, 2) of a matrix is its spectral norm sigma_1; clipping uses the norm of all entries "
            "together (np.linalg.norm(g) without the 2, or np.sqrt(np.sum(g**2))).",
        ),
    ),
    mistakes=(
        (lambda g, c: np.clip(g, -c, c), "each component"),
        (lambda g, c: g * min(1, c / np.sum(g**2)), "square root"),
        (lambda g, c: g * c / np.linalg.norm(g), "stays as it is"),
        (lambda g, c: g * min(1, c / np.linalg.norm(g, 2)), "spectral norm"),
    ),
)


# ----------------------------------------------------------------------------- 5.3 gated memory


def lstm_step_reference(x, z, C, F, G, H, V):
    """One LSTM step without biases: x~ = [x, z], f = sigma(F x~), i = sigma(G x~), o = sigma(H x~),
    C_t = f * C + i * tanh(V x~), z_t = o * tanh(C_t); returns (z_t, C_t)."""
    cell = LSTMCell(len(x), len(z))
    cell.F, cell.G, cell.H, cell.V = F, G, H, V
    cell.b_F = cell.b_G = cell.b_H = cell.b_V = np.zeros(len(z))
    return cell.forward(x, (z, C))


def _lstm_step_cases(rng):
    cases = []
    for n, m in [(3, 4), (2, 5), (4, 2)]:
        weights = (rng.normal(size=(m, n + m)) for _ in range(4))
        cases.append((rng.normal(size=n), rng.normal(size=m), rng.normal(size=m), *weights))
    return cases


def _lstm_step_variant(
    x, z, C, F, G, H, V, *, output_tanh=True, input_gate=True, swap_gates=False, old_C=False, z_first=False
):
    """Typical wrong LSTM steps: z_t = o * C_t, no input gate, the forget and input gates swapped, the output
    made from the old memory C_{t-1}, or x~ = [z, x] instead of [x, z]."""
    x_tilde = np.concatenate([z, x] if z_first else [x, z])
    f, i = sigmoid(F @ x_tilde), sigmoid(G @ x_tilde)
    if swap_gates:
        f, i = i, f
    C_new = f * C + (i if input_gate else 1) * np.tanh(V @ x_tilde)
    C_out = C if old_C else C_new
    return sigmoid(H @ x_tilde) * (np.tanh(C_out) if output_tanh else C_out), C_new


def _lstm_hint(**variant):
    return lambda a, e, g: close(_lstm_step_variant(*a, **variant), g)


grade_lstm_step = grader(
    "lstm_step",
    "x, z, C, F, G, H, V",
    lstm_step_reference,
    _lstm_step_cases,
    hints=(
        Hint(
            lambda a, e, g: close((e[1], e[0]), g),
            "return the pair (z_t, C_t): the hidden state first, then the cell memory.",
        ),
        Hint(
            _lstm_hint(output_tanh=False),
            "the output squashes the memory first: z_t = o_t * tanh(C_t), not o_t * C_t.",
        ),
        Hint(
            _lstm_hint(input_gate=False),
            "the candidate tanh(V x~) enters through the input gate: C_t = f_t * C_{t-1} + i_t * tanh(V x~).",
        ),
        Hint(
            _lstm_hint(swap_gates=True),
            "F makes the forget gate (it multiplies C_{t-1}), G the input gate (it multiplies the candidate).",
        ),
        Hint(
            _lstm_hint(old_C=True),
            "the output reads the new memory: z_t = o_t * tanh(C_t), with C_t computed first in this step.",
        ),
        Hint(
            _lstm_hint(z_first=True),
            "x~ = [x_t, z_{t-1}]: the input first, then the previous state (the columns of F, G, H, V follow "
            "this order).",
        ),
    ),
    mistakes=(
        (lambda *a: _lstm_step_variant(*a, output_tanh=False), "o_t * tanh(C_t)"),
        (lambda *a: _lstm_step_variant(*a, input_gate=False), "enters through the input gate"),
        (lambda *a: _lstm_step_variant(*a, swap_gates=True), "forget gate"),
        (lambda *a: lstm_step_reference(*a)[::-1], "the hidden state first"),
        (lambda *a: _lstm_step_variant(*a, old_C=True), "reads the new memory"),
        (lambda *a: _lstm_step_variant(*a, z_first=True), "the input first"),
    ),
)

# ----------------------------------------------------------------------------- 5.4 linear recurrences


def _combine_cases(rng):
    return [tuple(rng.normal(size=n) for _ in range(4)) for n in (1, 3, 6)] + [
        (np.array([0.5, 2.0]), np.array([1.0, -1.0]), np.array([3.0, 0.25]), np.array([0.0, 4.0]))
    ]


grade_scan_combine = grader(
    "scan_combine",
    "a, b, a2, b2",
    scan_combine,
    _combine_cases,
    hints=(
        Hint(
            lambda args, e, g: close((args[0] * args[2], args[0] * args[3] + args[1]), g),
            "(a, b) is applied first: z -> a2 (a z + b) + b2 = (a2 a) z + (a2 b + b2); you applied (a2, b2) first.",
        ),
        Hint(
            lambda args, e, g: close((args[0] * args[2], args[1] + args[3]), g),
            "the offset b of the first step also passes through the second step: it is multiplied by a2.",
        ),
        Hint(
            lambda args, e, g: close(args[0] + args[2], g[0]),
            "two multipliers compose by multiplication: a2 a, not a + a2.",
        ),
    ),
    mistakes=(
        (lambda a, b, a2, b2: (a * a2, a * b2 + b), "applied (a2, b2) first"),
        (lambda a, b, a2, b2: (a * a2, b + b2), "multiplied by a2"),
        (lambda a, b, a2, b2: (a + a2, a2 * b + b2), "by multiplication"),
    ),
)


# ----------------------------------------------------------------------------- 5.5 seq2seq and attention


def attention_context_reference(scores, states):
    """(weights, contexts): a_ij = softmax over j of e_ij (each row), c_i = sum_j a_ij zeta_j."""
    return tuple(attention_context(scores, states))


def _attention_cases(rng):
    return [
        (rng.normal(size=(n, m)) * 2, rng.normal(size=(m, h)))
        for n, m, h in [(3, 5, 4), (6, 4, 2), (4, 4, 3)]
    ]


def _softmax_columns(scores, states):
    weights = np.exp(scores) / np.exp(scores).sum(axis=0, keepdims=True)
    return weights, weights @ states


grade_attention_context = grader(
    "attention_context",
    "scores, states",
    attention_context_reference,
    _attention_cases,
    hints=(
        Hint(
            lambda a, e, g: close(_softmax_columns(*a)[0], g[0]),
            "normalise over the encoder positions j, along each row of the scores (axis=1): every decoder step "
            "i distributes its attention over the source, sum_j a_ij = 1.",
        ),
        Hint(
            lambda a, e, g: close(np.exp(a[0]), g[0]),
            "divide by the sum: a_ij = exp(e_ij) / sum_k exp(e_ik), so that each row of weights sums to 1.",
        ),
        Hint(
            lambda a, e, g: close(e[0], g[0]) and close(a[0] @ a[1], g[1]),
            "the context weighs the encoder states with the weights a_ij, not with the raw scores e_ij.",
        ),
    ),
    mistakes=(
        (_softmax_columns, "along each row"),
        (lambda scores, states: (np.exp(scores), np.exp(scores) @ states), "divide by the sum"),
        (
            lambda scores, states: (attention_context_reference(scores, states)[0], scores @ states),
            "raw scores",
        ),
    ),
)


# ----------------------------------------------------------------------------- 5.5 language models


def bits_per_character_reference(P, y):
    """``-mean_t log2 P[t, y_t]``: the bits per character of the true characters y under the rows of P."""
    return -np.mean(np.log2(P[np.arange(len(y)), y]))


def _distribution_cases(rng):
    cases = []
    for T, K in [(5, 4), (20, 10), (50, 30)]:
        P = rng.dirichlet(np.ones(K), size=T)
        cases.append((P, rng.integers(0, K, T)))
    return cases


grade_bits_per_character = grader(
    "bits_per_character",
    "P, y",
    bits_per_character_reference,
    _distribution_cases,
    hints=(
        Hint(
            lambda a, e, g: close(e * np.log(2), g),
            "that is in nats: use the base-2 logarithm (np.log2), or divide by ln 2.",
        ),
        Hint(lambda a, e, g: close(e * len(a[1]), g), "average over the characters, do not sum."),
        Hint(
            lambda a, e, g: close(-np.mean(np.log2(a[0].max(axis=1))), g),
            "take the probability of the true character P[t, y_t], not the largest probability of row t.",
        ),
        Hint(
            lambda a, e, g: close(-np.mean(np.log2(a[0][:, a[1]])), g),
            "P[:, y] is a T x T matrix (every row at every true character); pick one entry per row, "
            "P[np.arange(T), y].",
        ),
    ),
    mistakes=(
        (lambda P, y: -np.mean(np.log(P[np.arange(len(y)), y])), "nats"),
        (lambda P, y: -np.sum(np.log2(P[np.arange(len(y)), y])), "do not sum"),
        (lambda P, y: -np.mean(np.log2(P.max(axis=1))), "true character"),
        (lambda P, y: -np.mean(np.log2(P[:, y])), "one entry per row"),
    ),
)


# ----------------------------------------------------------------------------- 5.5 sequences of different lengths


def masked_mean_reference(losses, lengths):
    """The mean of the per-token losses (batch, T) over the real tokens: row b counts its first lengths[b]."""
    mask = np.arange(losses.shape[1])[None, :] < np.asarray(lengths)[:, None]
    return float((losses * mask).sum() / mask.sum())


def _masked_mean_cases(rng):
    cases = []
    for B, T in [(3, 5), (4, 7), (2, 3)]:
        lengths = rng.integers(1, T + 1, B)
        lengths[0] = T  # the longest row has no padding
        cases.append((rng.exponential(size=(B, T)), lengths))
    return cases


def _mean_of_row_means(losses, lengths):
    return float(np.mean([losses[b, :n].mean() for b, n in enumerate(lengths)]))


grade_masked_mean = grader(
    "masked_mean",
    "losses, lengths",
    masked_mean_reference,
    _masked_mean_cases,
    hints=(
        Hint(
            lambda a, e, g: close(float(np.mean(a[0])), g),
            "the padded positions are in the mean: keep only t < lengths[b] in row b.",
        ),
        Hint(
            lambda a, e, g: close(_mean_of_row_means(*a), g),
            "that is the mean of the per-sequence means, which weighs a token of a short sequence more; divide "
            "the sum over all real tokens by their number.",
        ),
        Hint(
            lambda a, e, g: close(masked_mean_reference(*a) * np.sum(a[1]), g),
            "divide the sum of the real tokens' losses by their number, sum(lengths).",
        ),
    ),
    mistakes=(
        (lambda losses, lengths: float(np.mean(losses)), "padded positions"),
        (_mean_of_row_means, "per-sequence means"),
        (lambda losses, lengths: masked_mean_reference(losses, lengths) * np.sum(lengths), "sum(lengths)"),
    ),
)


# ----------------------------------------------------------------------------- 5.5 CTC


def _collapse_cases(rng):
    chosen = ["aa-ab", "a-a", "--ab-bb-", "aaa", "-", "ab-ba"]
    return [(path,) for path in chosen] + [("".join(rng.choice(list("-ab"), size=9)),) for _ in range(6)]


grade_ctc_collapse = grader(
    "ctc_collapse",
    "path",
    ctc_collapse,
    _collapse_cases,
    hints=(
        Hint(
            lambda a, e, g: g == ctc_collapse(a[0].replace("-", "")),
            "merge repeats first, then delete blanks: the blank in 'a-a' separates two a's, so B('a-a') = 'aa'.",
        ),
        Hint(lambda a, e, g: g == a[0].replace("-", ""), "merge repeated symbols: B('aa') = 'a'."),
        Hint(
            lambda a, e, g: g == "".join(s for s, _ in itertools.groupby(a[0])),
            "after merging the repeats, delete the blanks '-'.",
        ),
    ),
    mistakes=(
        (lambda path: ctc_collapse(path.replace("-", "")), "merge repeats first"),
        (lambda path: path.replace("-", ""), "merge repeated symbols"),
        (lambda path: "".join(s for s, _ in itertools.groupby(path)), "delete the blanks"),
    ),
    compare=lambda expected, got: isinstance(got, str) and got == expected,
)
