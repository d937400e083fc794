"""Graded exercises of chapter 06 — attention and transformers."""

from __future__ import annotations

import numpy as np

from ..transformers import elmo_mix, patchify, sinusoidal_pe, top_k_filter
from .core import Hint, close, grader

# ----------------------------------------------------------------------------- 6.1 attention


def _softmax(S, axis):
    E = np.exp(S - S.max(axis=axis, keepdims=True))
    return E / E.sum(axis=axis, keepdims=True)


def scaled_dot_product_attention_reference(Q, K, V):
    """softmax_row(Q K^T / sqrt(q)) V, the softmax over the keys (each row of weights sums to 1)."""
    return _softmax(Q @ K.T / np.sqrt(Q.shape[1]), axis=1) @ V


def _attention_cases(rng):
    return [
        (rng.normal(size=(t_q, q)) * 2, rng.normal(size=(t_k, q)) * 2, rng.normal(size=(t_k, d_v)))
        for t_q, t_k, q, d_v in [(4, 4, 4, 3), (3, 6, 9, 2), (5, 5, 16, 4)]
    ]


def _sdpa_with(scale, axis=1):
    return lambda Q, K, V: _softmax(scale(Q.shape[1]) * (Q @ K.T), axis=axis) @ V


def _sdpa_scaled_by_length(Q, K, V):
    """Scores divided by sqrt(number of keys) instead of sqrt(q): a mistake."""
    return _softmax(Q @ K.T / np.sqrt(len(K)), axis=1) @ V


def _sdpa_sums_without_keepdims(Q, K, V):
    """``E / E.sum(axis=1)`` without keepdims: the row sums are broadcast along the last axis, so entry (i, j)
    is divided by the sum of row j (runs only when T_q = T_k): a mistake."""
    S = Q @ K.T / np.sqrt(Q.shape[1])
    E = np.exp(S - S.max())
    return (E / E.sum(axis=1)) @ V


grade_scaled_dot_product_attention = grader(
    "scaled_dot_product_attention",
    "Q, K, V",
    scaled_dot_product_attention_reference,
    _attention_cases,
    hints=(
        Hint(
            lambda a, e, g: close(_sdpa_with(lambda q: 1 / np.sqrt(q), axis=0)(*a), g),
            "the softmax runs over the keys, along each row of Q K^T (axis=1): every query's weights sum to 1.",
        ),
        Hint(
            lambda a, e, g: close(_sdpa_sums_without_keepdims(*a), g),
            "divide each row by its own sum: E / E.sum(axis=1, keepdims=True). Without keepdims the sums (T_q,) "
            "are broadcast along the last axis and entry (i, j) is divided by the sum of row j.",
        ),
        Hint(
            lambda a, e, g: (
                close(_sdpa_scaled_by_length(*a), g)
                or close(_softmax(a[0] @ a[1].T / np.sqrt(len(a[0])), axis=1) @ a[2], g)
            ),
            "scale by 1/sqrt(q), q the width of a query and key (Q.shape[1]), not by the square root of the "
            "number of queries or keys: the variance of a score depends on the width only.",
        ),
        Hint(
            lambda a, e, g: close(_sdpa_with(lambda q: 1 / q)(*a), g),
            "divide the scores by sqrt(q), not by q: the dot product of q unit-variance terms has variance q.",
        ),
        Hint(
            lambda a, e, g: close(_sdpa_with(lambda q: 1.0)(*a), g),
            "scale the scores by 1/sqrt(q) before the softmax, softmax(Q K^T / sqrt(q)).",
        ),
        Hint(
            lambda a, e, g: np.shape(g) != np.shape(e),
            "the output has one row per query and the width of V: (T_q, d_v) = softmax(...) @ V.",
        ),
    ),
    mistakes=(
        (_sdpa_with(lambda q: 1 / np.sqrt(q), axis=0), "over the keys"),
        (_sdpa_with(lambda q: 1 / q), "not by q"),
        (_sdpa_with(lambda q: 1.0), "before the softmax"),
        (_sdpa_scaled_by_length, "number of queries or keys"),
        (_sdpa_sums_without_keepdims, "keepdims"),
    ),
)


# ----------------------------------------------------------------------------- 6.2 positions, blocks, cost


def _pe_variant(T, d, exponent, layout="paired"):
    """Sinusoidal encodings with frequencies ``10000 ** exponent(i)`` (i = 0..d/2-1) in one of three layouts."""
    angles = np.arange(T)[:, None] * 1e4 ** exponent(np.arange(d // 2), d)
    if layout == "halves":  # all sines first, then all cosines
        return np.hstack([np.sin(angles), np.cos(angles)])
    P = np.empty((T, d))
    first, second = (np.cos, np.sin) if layout == "cos first" else (np.sin, np.cos)
    P[:, 0::2], P[:, 1::2] = first(angles), second(angles)
    return P


def _right_exponent(i, d):
    return -2 * i / d


grade_sinusoidal_pe = grader(
    "sinusoidal_pe",
    "T, d",
    sinusoidal_pe,
    lambda rng: [(6, 4), (12, 8), (int(rng.integers(10, 30)), 2 * int(rng.integers(3, 9))), (50, 64)],
    hints=(
        Hint(
            lambda a, e, g: close(_pe_variant(*a, lambda i, d: 2 * i / d), g),
            "the exponent is negative: omega_i = C^(-2i/d), so the frequencies fall from omega_0 = 1 (the fastest "
            "column pair) to C^(-(d-2)/d); C^(+2i/d) makes them grow instead.",
        ),
        Hint(
            lambda a, e, g: close(_pe_variant(*a, lambda i, d: -i / d), g),
            "omega_i = C^(-2i/d): the exponent has 2i (the column index of the sine), not i; with C^(-i/d) the "
            "slowest frequency is only C^(-1/2).",
        ),
        Hint(
            lambda a, e, g: close(_pe_variant(*a, _right_exponent, "halves"), g),
            "pair sin and cos of the same frequency in neighbouring columns: p_(t,2i) = sin(t omega_i), "
            "p_(t,2i+1) = cos(t omega_i) (not all sines first and then all cosines).",
        ),
        Hint(
            lambda a, e, g: close(_pe_variant(*a, _right_exponent, "cos first"), g),
            "the even columns hold the sines, p_(t,2i) = sin(t omega_i), and the odd ones the cosines.",
        ),
        Hint(
            lambda a, e, g: close(sinusoidal_pe(a[0] + 1, a[1])[1:], g),
            "the positions are t = 0..T-1 (np.arange(T)), not 1..T: the first row is p_0 = (0, 1, 0, 1, ...).",
        ),
        Hint(
            lambda a, e, g: np.shape(g) != np.shape(e), "P has one row per position t = 0..T-1: shape (T, d)."
        ),
    ),
    mistakes=(
        (lambda T, d: _pe_variant(T, d, lambda i, d: 2 * i / d), "exponent is negative"),
        (lambda T, d: _pe_variant(T, d, lambda i, d: -i / d), "not i"),
        (lambda T, d: _pe_variant(T, d, _right_exponent, "halves"), "neighbouring columns"),
        (lambda T, d: _pe_variant(T, d, _right_exponent, "cos first"), "even columns hold the sines"),
        (lambda T, d: sinusoidal_pe(T + 1, d)[1:], "not 1..T"),
    ),
)


# ----------------------------------------------------------------------------- 6.3 encoder-decoder transformers


def _cross_attention(Y, M, W_Q, W_K, W_V, causal=False):
    Q, K, V = Y @ W_Q, M @ W_K, M @ W_V
    S = Q @ K.T / np.sqrt(Q.shape[1])
    if causal:  # the decoder's self-attention mask, wrongly applied to cross-attention
        S = np.where(np.tril(np.ones(S.shape, dtype=bool)), S, -np.inf)
    return _softmax(S, axis=1) @ V


def cross_attention_reference(Y, M, W_Q, W_K, W_V):
    """Cross-attention of decoder states Y (n, d) on the encoder's output M (m, d): Q = Y W_Q, K = M W_K,
    V = M W_V, ``softmax_row(Q K^T / sqrt(q)) V``, shape (n, d_v), no mask."""
    return _cross_attention(Y, M, W_Q, W_K, W_V)


def _cross_attention_cases(rng):
    return [
        (rng.normal(size=(n, d)), rng.normal(size=(m, d)), *(rng.normal(size=(d, q)) for _ in range(3)))
        for n, m, d, q in [(3, 5, 4, 4), (4, 4, 6, 3), (5, 7, 8, 4), (2, 6, 10, 2)]  # d != q from the 2nd on
    ]


def _cross_attention_scaled_by_width(Y, M, W_Q, W_K, W_V):
    """Scores divided by sqrt(d), the width of the states, instead of sqrt(q): a mistake (equal when d = q)."""
    return _softmax((Y @ W_Q) @ (M @ W_K).T / np.sqrt(Y.shape[1]), axis=1) @ (M @ W_V)


grade_cross_attention = grader(
    "cross_attention",
    "Y, M, W_Q, W_K, W_V",
    cross_attention_reference,
    _cross_attention_cases,
    hints=(
        Hint(
            lambda a, e, g: close(_cross_attention(*a, causal=True), g),
            "no mask in cross-attention: every target position may look at the whole source (the causal mask "
            "belongs to the decoder's self-attention, which must not see later target words).",
        ),
        Hint(
            lambda a, e, g: close(_cross_attention(a[1], a[0], *a[2:]), g),
            "the queries come from the decoder, Q = Y W_Q, and the keys and values from the encoder, K = M W_K, "
            "V = M W_V: the output has one row per target position, (n, d_v).",
        ),
        Hint(
            lambda a, e, g: close(_softmax(a[0] @ a[2] @ (a[1] @ a[3]).T, axis=1) @ a[1] @ a[4], g),
            "scale the scores by 1/sqrt(q) before the softmax.",
        ),
        Hint(
            lambda a, e, g: close(_cross_attention_scaled_by_width(*a), g),
            "scale by 1/sqrt(q), q = W_Q.shape[1] the width of queries and keys, not by 1/sqrt(d) (the width "
            "of the decoder states): the two agree only when d = q.",
        ),
    ),
    mistakes=(
        (lambda Y, M, W_Q, W_K, W_V: _cross_attention(Y, M, W_Q, W_K, W_V, causal=True), "no mask"),
        (lambda Y, M, W_Q, W_K, W_V: _cross_attention(M, Y, W_Q, W_K, W_V), "queries come from the decoder"),
        (lambda Y, M, W_Q, W_K, W_V: _softmax(Y @ W_Q @ (M @ W_K).T, axis=1) @ M @ W_V, "1/sqrt(q)"),
        (_cross_attention_scaled_by_width, "not by 1/sqrt(d)"),
    ),
)


# ----------------------------------------------------------------------------- 6.3 pre-training


def _top_k_cases(rng):
    return [(3 * rng.normal(size=n), k) for n, k in [(8, 3), (10, 1), (12, 5), (6, 6), (20, 4)]]


def elmo_reference(H, w, gamma):
    """ELMo's mix of the layers H (L+1, T, m) with the raw weights w (L+1,) and the scale gamma:
    ``gamma sum_j softmax(w)_j h_j``, shape (T, m)."""
    return elmo_mix(H, _softmax(w, axis=-1), gamma)


def _elmo_cases(rng):
    return [
        (rng.normal(size=(J, T, m)), rng.normal(size=J) * 2, float(rng.uniform(0.5, 2.5)))
        for J, T, m in [(3, 4, 6), (3, 5, 5), (2, 3, 8), (4, 6, 4)]
    ]


def _elmo_raw_weights(H, w, gamma):
    """The raw w as weights, without the softmax: a mistake."""
    return gamma * np.tensordot(w, H, axes=1)


def _elmo_normalised_by_sum(H, w, gamma):
    """w / sum(w) as weights: they sum to 1 but may be negative, and differ from the softmax: a mistake."""
    return gamma * np.tensordot(w / w.sum(), H, axes=1)


grade_elmo_mix = grader(
    "elmo_mix",
    "H, w, gamma",
    elmo_reference,
    _elmo_cases,
    hints=(
        Hint(
            lambda a, e, g: close(_elmo_raw_weights(*a), g),
            "the layer weights are s = softmax(w), not w itself: the softmax makes them positive and sum to 1.",
        ),
        Hint(
            lambda a, e, g: close(_elmo_normalised_by_sum(*a), g),
            "s = softmax(w) = exp(w) / sum(exp(w)); dividing w by its sum gives other (possibly negative) weights.",
        ),
        Hint(lambda a, e, g: close(e / a[2], g), "multiply the mix by gamma, the task's overall scale."),
        Hint(
            lambda a, e, g: close(a[2] * a[0].mean(axis=0), g),
            "weight the layers by s_j = softmax(w)_j; a plain mean over the layers ignores w.",
        ),
        Hint(
            lambda a, e, g: np.shape(g) != np.shape(e),
            "sum over the layer axis (axis 0 of H): the result has one vector per token, shape (T, m).",
        ),
    ),
    mistakes=(
        (_elmo_raw_weights, "not w itself"),
        (_elmo_normalised_by_sum, "dividing w by its sum"),
        (lambda H, w, gamma: elmo_mix(H, _softmax(w, axis=-1)), "gamma"),
        (lambda H, w, gamma: gamma * H.mean(axis=0), "plain mean"),
        (lambda H, w, gamma: gamma * (H * _softmax(w, axis=-1)[:, None, None]).sum(axis=1), "layer axis"),
    ),
)


def _k_smallest(z, k):
    return np.where(z <= np.sort(z)[k - 1], z, -np.inf)


grade_top_k_filter = grader(
    "top_k_filter",
    "z, k",
    top_k_filter,
    _top_k_cases,
    hints=(
        Hint(
            lambda a, e, g: np.array_equal(np.isfinite(g), np.isfinite(_k_smallest(*a))),
            "keep the k *largest* logits (the most probable tokens), not the k smallest.",
        ),
        Hint(
            lambda a, e, g: close(np.where(np.isfinite(e), e, 0.0), g),
            "set the removed logits to -inf, not 0: exp(0) = 1, so a logit of 0 still gets probability.",
        ),
        Hint(
            lambda a, e, g: close(_softmax(e, axis=-1), g),
            "return the filtered logits, not probabilities: the softmax (with the temperature) comes after.",
        ),
        Hint(
            lambda a, e, g: np.isfinite(np.asarray(g, dtype=float)).sum() == len(a[0]) - a[1],
            "np.sort sorts in increasing order, so np.sort(z)[k] keeps the len(z) - k largest logits; the k-th "
            "largest is np.sort(z)[-k].",
        ),
        Hint(
            lambda a, e, g: np.isfinite(np.asarray(g, dtype=float)).sum() == a[1] + 1,
            "you kept k + 1 logits: the k-th largest is np.sort(z)[-k] (index -k, not -k - 1).",
        ),
    ),
    mistakes=(
        (_k_smallest, "k *largest*"),
        (lambda z, k: np.where(z >= np.sort(z)[-k], z, 0.0), "not 0"),
        (lambda z, k: _softmax(np.where(z >= np.sort(z)[-k], z, -np.inf), axis=-1), "not probabilities"),
        (lambda z, k: np.where(z >= np.sort(z)[max(-k - 1, -len(z))], z, -np.inf), "k + 1"),
        (lambda z, k: np.where(z >= np.sort(z)[k], z, -np.inf), "increasing order"),
    ),
)


# ----------------------------------------------------------------------------- 6.4 vision transformer


def _patches_hwc(img, p):
    """Patches flattened in (row, column, channel) order, as from an image stored (H, W, c): a mistake."""
    c, H, W = img.shape
    x = img.transpose(1, 2, 0).reshape(H // p, p, W // p, p, c).transpose(0, 2, 1, 3, 4)
    return x.reshape((H // p) * (W // p), p * p * c)


def _patches_column_major(img, p):
    """The right patch vectors, but the tokens in column-major order (patch (i, j) as token j H/p + i)."""
    c, H, W = img.shape
    return patchify(img, p).reshape(H // p, W // p, c * p * p).transpose(1, 0, 2).reshape(-1, c * p * p)


def _patchify_cases(rng):
    return [(rng.normal(size=(c, s, s)), p) for c, s, p in [(1, 4, 2), (3, 4, 2), (3, 6, 3), (2, 8, 4)]] + [
        (rng.normal(size=(3, 4, 6)), 2)
    ]


grade_patchify = grader(
    "patchify",
    "img, p",
    patchify,
    _patchify_cases,
    hints=(
        Hint(
            lambda a, e, g: close(_patches_hwc(*a), g),
            "flatten each patch in (channel, row, column) order, the order of Conv2d's weight (n, c, p, p): "
            "channel 0's p x p pixels first, then channel 1's; your order (row, column, channel) comes from "
            "treating the image as (H, W, c).",
        ),
        Hint(
            lambda a, e, g: close(_patches_column_major(*a), g),
            "number the patches row by row (row-major): patch (i, j) is token i * (W/p) + j, not j * (H/p) + i.",
        ),
        Hint(
            lambda a, e, g: close(np.reshape(a[0], (-1, a[0].shape[0] * a[1] ** 2)), g),
            "a plain reshape to (T, c p^2) cuts the image's memory into consecutive runs of c p^2 numbers (parts "
            "of pixel rows), not into p x p squares: reshape to (c, H/p, p, W/p, p), move the axes to "
            "(H/p, W/p, c, p, p) with transpose, then reshape.",
        ),
        Hint(
            lambda a, e, g: np.shape(g) != np.shape(e),
            "the result has one row per patch, T = (H/p)(W/p), and c p^2 columns.",
        ),
    ),
    mistakes=(
        (_patches_hwc, "(channel, row, column)"),
        (_patches_column_major, "row-major"),
        (lambda img, p: patchify(img, p).ravel(), "one row per patch"),
        (lambda img, p: img.reshape(-1, img.shape[0] * p * p), "plain reshape"),
    ),
)
