"""Graded exercises of chapter 04 — convolutional networks."""

from __future__ import annotations

import numpy as np

from ..cnn import conv1d_direct, conv2d_direct, maxpool2d, receptive_field
from .core import Hint, close, grader


def circular_convolution_reference(f, h):
    """(f (*) h)[u] = sum_t f[t] h[(u - t) mod n] for two signals of length n."""
    n = len(f)
    return np.array([sum(f[t] * h[(u - t) % n] for t in range(n)) for u in range(n)])


def _pairs(rng, lengths):
    return [(rng.normal(size=n), rng.normal(size=m)) for n, m in lengths]


grade_circular_convolution = grader(
    "circular_convolution",
    "f, h",
    circular_convolution_reference,
    lambda rng: _pairs(rng, [(5, 5), (8, 8), (12, 12)]),
    hints=(
        Hint(
            lambda a, e, g: close(circular_convolution_reference(a[0], np.roll(a[1][::-1], 1)), g),
            "a convolution flips one signal: h[(u - t) mod n], not h[(t - u) mod n] (that is a correlation).",
        ),
        Hint(
            lambda a, e, g: close(np.convolve(*a)[: len(a[0])], g),
            "the indices wrap around: take (u - t) mod n.",
        ),
    ),
    mistakes=(
        (lambda f, h: circular_convolution_reference(f, np.roll(h[::-1], 1)), "a correlation"),
        (lambda f, h: np.convolve(f, h)[: len(f)], "wrap around"),
    ),
)

grade_conv1d_full = grader(
    "conv1d_full",
    "f, h",
    lambda f, h: conv1d_direct(f, h, "full"),
    lambda rng: _pairs(rng, [(6, 3), (10, 4), (4, 4)]),
    hints=(
        Hint(lambda a, e, g: np.shape(g) != np.shape(e), "the full convolution has n + m - 1 outputs."),
        Hint(
            lambda a, e, g: close(np.convolve(a[0], a[1][::-1]), g),
            "flip the kernel: f[u - t] h[t], not f[u + t] h[t].",
        ),
    ),
    mistakes=(
        (lambda f, h: np.convolve(f, h, "valid"), "n + m - 1 outputs"),
        (lambda f, h: np.convolve(f, h[::-1]), "flip the kernel"),
    ),
)


def _conv2d_cases(rng):
    return [
        (rng.normal(size=(c_in, 6, 7)), rng.normal(size=(c_out, c_in, k, k)), rng.normal(size=c_out))
        for c_in, c_out, k in [(1, 1, 3), (3, 2, 3), (2, 4, 2)]
    ]


grade_conv2d = grader(
    "conv2d",
    "x, w, b",
    conv2d_direct,
    _conv2d_cases,
    hints=(
        Hint(
            lambda a, e, g: close(conv2d_direct(a[0], a[1][..., ::-1, ::-1], a[2]), g),
            "layers compute cross-correlations: slide w as it is, without flipping it.",
        ),
        Hint(
            lambda a, e, g: close(e - a[2][:, None, None], g),
            "add the bias b[r] to every position of channel r.",
        ),
        Hint(lambda a, e, g: np.shape(g) != np.shape(e), "the output is (C_out, H - k + 1, W - k + 1)."),
    ),
    mistakes=(
        (lambda x, w, b: conv2d_direct(x, w[..., ::-1, ::-1], b), "without flipping"),
        (lambda x, w, b: conv2d_direct(x, w), "add the bias"),
    ),
)


def _maxpool_cases(rng):
    cases = []
    for c, h, w, r in [(1, 4, 4, 2), (2, 6, 6, 3), (3, 4, 6, 2)]:
        x = (
            rng.permutation(c * h * w).reshape(c, h, w).astype(float)
        )  # distinct values: one maximum per window
        cases.append((x, r, rng.normal(size=(c, h // r, w // r))))
    return cases


def maxpool_backward_reference(x, r, grad_y):
    """The gradient of max pooling: each window's gradient goes to its maximum, the other entries get 0."""
    _, mask = maxpool2d(x, r)
    return mask * np.repeat(np.repeat(grad_y, r, axis=1), r, axis=2)


grade_maxpool_backward = grader(
    "maxpool_backward",
    "x, r, grad_y",
    maxpool_backward_reference,
    _maxpool_cases,
    hints=(
        Hint(
            lambda a, e, g: close(np.repeat(np.repeat(a[2], a[1], axis=1), a[1], axis=2) / a[1] ** 2, g),
            "that is average pooling's gradient: in max pooling only the maximum of each window gets the gradient.",
        ),
        Hint(
            lambda a, e, g: close(np.repeat(np.repeat(a[2], a[1], axis=1), a[1], axis=2), g),
            "only the maximum of each window gets the gradient; the other entries get 0.",
        ),
    ),
    mistakes=(
        (lambda x, r, grad_y: np.repeat(np.repeat(grad_y, r, axis=1), r, axis=2) / r**2, "average pooling"),
        (lambda x, r, grad_y: np.repeat(np.repeat(grad_y, r, axis=1), r, axis=2), "other entries get 0"),
    ),
)


def _field_cases(rng):
    return [
        ([(3, 1, 1), (3, 1, 1)],),
        ([(3, 2, 1), (3, 2, 1), (3, 1, 1)],),
        ([(2, 1, 1), (2, 1, 2), (2, 1, 4), (2, 1, 8)],),
        ([(5, 2, 1), (3, 1, 2), (3, 2, 1), (3, 1, 1)],),
    ]


def _no_strides(layers):
    return 1 + sum(d * (k - 1) for k, s, d in layers)


def _no_dilation(layers):
    return receptive_field([(k, s, 1) for k, s, d in layers])


grade_receptive_field = grader(
    "receptive_field",
    "layers",
    receptive_field,
    _field_cases,
    hints=(
        Hint(
            lambda a, e, g: g == _no_strides(a[0]),
            "a layer's taps are spaced by the product of the strides of the layers below it.",
        ),
        Hint(
            lambda a, e, g: g == _no_dilation(a[0]),
            "a dilated layer spans d (k - 1) + 1 inputs of its own input.",
        ),
    ),
    mistakes=((_no_strides, "product of the strides"), (_no_dilation, "dilated layer")),
)


def confusion_matrix_reference(y_true, y_pred, K):
    """C[i, j] = the number of examples of true class i predicted as class j."""
    C = np.zeros((K, K), dtype=int)
    np.add.at(C, (y_true, y_pred), 1)
    return C


def _confusion_cases(rng):
    return [(rng.integers(K, size=s), rng.integers(K, size=s), K) for s, K in [(20, 3), (100, 10), (7, 4)]]


grade_confusion_matrix = grader(
    "confusion_matrix",
    "y_true, y_pred, K",
    confusion_matrix_reference,
    _confusion_cases,
    hints=(
        Hint(
            lambda a, e, g: close(e.T, g),
            "rows are the true classes, columns the predictions: C[y_true, y_pred].",
        ),
        Hint(
            lambda a, e, g: close(e / e.sum(axis=1, keepdims=True), g),
            "count the examples; do not normalise.",
        ),
        Hint(lambda a, e, g: np.sum(g) < np.sum(e), "C[i, j] += 1 for every example, also when i, j repeat."),
    ),
    mistakes=(
        (
            lambda y_true, y_pred, K: confusion_matrix_reference(y_pred, y_true, K),
            "rows are the true classes",
        ),
        (
            lambda y_true, y_pred, K: (
                confusion_matrix_reference(y_true, y_pred, K)
                / np.maximum(confusion_matrix_reference(y_true, y_pred, K).sum(axis=1, keepdims=True), 1)
            ),
            "do not normalise",
        ),
    ),
)


def causal_conv1d_reference(x, w, d):
    """y_t = sum_j w_j x_(t - d j), with x_t' = 0 for t' < 0: the output at t sees only x_0, ..., x_t."""
    padded = np.concatenate([np.zeros(d * (len(w) - 1)), x])
    return np.array(
        [sum(w[j] * padded[t + d * (len(w) - 1) - d * j] for j in range(len(w))) for t in range(len(x))]
    )


def _causal_cases(rng):
    return [(rng.normal(size=n), rng.normal(size=k), d) for n, k, d in [(8, 2, 1), (12, 3, 2), (20, 2, 4)]]


def _future(x, w, d):
    padded = np.concatenate([x, np.zeros(d * (len(w) - 1))])
    return np.array([sum(w[j] * padded[t + d * j] for j in range(len(w))) for t in range(len(x))])


grade_causal_conv1d = grader(
    "causal_conv1d",
    "x, w, d",
    causal_conv1d_reference,
    _causal_cases,
    hints=(
        Hint(
            lambda a, e, g: close(_future(*a), g),
            "y_t may use only x_t and earlier inputs: x_(t - d j), not x_(t + d j).",
        ),
        Hint(
            lambda a, e, g: close(causal_conv1d_reference(a[0], a[1], 1), g),
            "the taps are d apart: x_(t - d j).",
        ),
        Hint(
            lambda a, e, g: np.shape(g) != np.shape(e),
            "pad d (k - 1) zeros on the left: the output keeps the input's length.",
        ),
    ),
    mistakes=(
        (_future, "only x_t and earlier"),
        (lambda x, w, d: causal_conv1d_reference(x, w, 1), "taps are d apart"),
    ),
)


def negative_sampling_loss_reference(x, y_pos, Y_neg):
    """-log sigma(x^T y_pos) - sum_k log sigma(-x^T y_k), with log sigma(z) = -log(1 + e^-z) computed stably."""
    return float(np.logaddexp(0, -x @ y_pos) + np.logaddexp(0, Y_neg @ x).sum())


def _sampling_cases(rng):
    cases = [(rng.normal(size=8), rng.normal(size=8), rng.normal(size=(5, 8))) for _ in range(3)]
    x = np.full(8, 3.0)
    return [*cases, (x, x, np.tile(x, (5, 1)))]  # scores of 72: sigma(72) rounds to 1


def _literal(x, y_pos, Y_neg):
    sigma = 1 / (1 + np.exp(-np.concatenate([[x @ y_pos], Y_neg @ x])))
    return float(-np.log(sigma[0]) - np.log(1 - sigma[1:]).sum())


grade_negative_sampling_loss = grader(
    "negative_sampling_loss",
    "x, y_pos, Y_neg",
    negative_sampling_loss_reference,
    _sampling_cases,
    hints=(
        Hint(
            lambda a, e, g: not np.isfinite(g),
            "log(1 - sigma(z)) is -inf once sigma(z) rounds to 1: use log sigma(-z) = -np.logaddexp(0, z).",
        ),
        Hint(
            lambda a, e, g: close(np.logaddexp(0, -a[0] @ a[1]) + np.logaddexp(0, -(a[2] @ a[0])).sum(), g),
            "a noise word should get a low score: -log sigma(-x^T y_k), with the minus inside.",
        ),
    ),
    mistakes=(
        (_literal, "log sigma(-z)"),
        (
            lambda x, y_pos, Y_neg: float(np.logaddexp(0, -x @ y_pos) + np.logaddexp(0, -(Y_neg @ x)).sum()),
            "minus inside",
        ),
    ),
)
