"""Graded exercises of chapter 02 — feedforward networks."""

from __future__ import annotations

import numpy as np

from ..activations import relu, softmax
from ..feedforward import lstsq_closed_form, relu_representation
from .core import Hint, close, grader


def _ridge_cases(rng):
    return [
        (rng.normal(size=(s, n)), rng.normal(size=s), lam)
        for s, n, lam in [(20, 3, 0.5), (8, 5, 2.0), (30, 4, 10.0)]
    ]


grade_ridge = grader(
    "ridge",
    "X, y, lam",
    lambda X, y, lam: lstsq_closed_form(X, y, ridge=lam),
    _ridge_cases,
    hints=(
        Hint(lambda a, e, g: close(np.linalg.lstsq(a[0], a[1], rcond=None)[0], g), "add lam I to X^T X."),
        Hint(
            lambda a, e, g: close(np.linalg.solve(a[0].T @ a[0] + a[2], a[0].T @ a[1]), g),
            "lam goes on the diagonal only: X^T X + lam I, not X^T X + lam.",
        ),
    ),
    mistakes=(
        (lambda X, y, lam: np.linalg.lstsq(X, y, rcond=None)[0], "add lam I"),
        (lambda X, y, lam: np.linalg.solve(X.T @ X + lam, X.T @ y), "diagonal only"),
    ),
)


def _softmax_cases(rng):
    return [
        (rng.normal(size=5),),
        (rng.normal(scale=3, size=(4, 6)),),
        (np.array([1000.0, 999.0, -1000.0]),),
        (np.array([[-1000.0, -1001.0], [700.0, 800.0]]),),
    ]


def _naive_softmax(z):
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


grade_softmax = grader(
    "softmax",
    "z",
    softmax,
    _softmax_cases,
    hints=(
        Hint(
            lambda a, e, g: not np.isfinite(g).all(),
            "exp overflows beyond 709: subtract each row's maximum before exponentiating (the result is the same).",
        ),
        Hint(
            lambda a, e, g: np.ndim(a[0]) == 2 and np.isclose(np.sum(g), 1),
            "normalise each row on its own: sum over the last axis with keepdims=True.",
        ),
    ),
    mistakes=(
        (_naive_softmax, "subtract each row's maximum"),
        (lambda z: np.exp(z - z.max()) / np.exp(z - z.max()).sum(), "normalise each row"),
    ),
)


def mlp_forward_reference(X, weights, biases):
    """x^l = relu(W^l x^(l-1) + b^l) for the hidden layers and W^L x^(L-1) + b^L at the end, for every row of X."""
    x = X
    for W, b in zip(weights[:-1], biases[:-1], strict=True):
        x = relu(x @ W.T + b)
    return x @ weights[-1].T + biases[-1]


def _mlp_cases(rng):
    cases = []
    for sizes in ([3, 5, 2], [4, 6, 6, 3], [2, 1]):
        weights = [rng.normal(size=(m, n)) for n, m in zip(sizes, sizes[1:], strict=False)]
        biases = [rng.normal(size=m) for m in sizes[1:]]
        cases.append((rng.normal(size=(7, sizes[0])), weights, biases))
    return cases


grade_mlp_forward = grader(
    "mlp_forward",
    "X, weights, biases",
    mlp_forward_reference,
    _mlp_cases,
    hints=(
        Hint(
            lambda a, e, g: close(relu(e), g),
            "no activation after the last layer: the network returns logits.",
        ),
        Hint(
            lambda a, e, g: close(mlp_forward_reference(a[0], a[1], [0 * b for b in a[2]]), g),
            "add the bias b^l in every layer.",
        ),
        Hint(
            lambda a, e, g: g.shape != e.shape,
            "a layer maps x (rows of X) to W x + b, which for a matrix X of rows is X @ W.T + b.",
        ),
    ),
    mistakes=(
        (
            lambda X, weights, biases: relu(mlp_forward_reference(X, weights, biases)),
            "no activation after the last",
        ),
        (
            lambda X, weights, biases: mlp_forward_reference(X, weights, [0 * b for b in biases]),
            "add the bias",
        ),
    ),
)


def tanh_to_sigmoid_reference(W, b, v, c):
    """Parameters of v'^T sigma(W' x + b') + c' equal to v^T tanh(W x + b) + c: tanh z = 2 sigma(2z) - 1."""
    return 2 * W, 2 * b, 2 * v, c - v.sum()


def _network_outputs(params, x) -> np.ndarray:
    W, b, v, c = (np.asarray(p, dtype=float) for p in params)
    return (1 / (1 + np.exp(-(x @ W.T + b)))) @ v + c


def _same_network(expected, got) -> bool:
    """Two sigmoid networks are equal if they compute the same function (a sign flip of a unit is allowed)."""
    if not isinstance(got, tuple | list) or len(got) != 4:
        return False
    x = np.linspace(-3, 3, 41)[:, None] * np.array([1.0, -0.5, 0.25])[: np.shape(expected[0])[1]]
    try:
        return close(_network_outputs(expected, x), _network_outputs(got, x))
    except (ValueError, TypeError):
        return False


def _tanh_cases(rng):
    return [
        (rng.normal(size=(m, n)), rng.normal(size=m), rng.normal(size=m), float(rng.normal()))
        for m, n in [(4, 1), (6, 3)]
    ]


grade_tanh_to_sigmoid = grader(
    "tanh_to_sigmoid",
    "W, b, v, c",
    tanh_to_sigmoid_reference,
    _tanh_cases,
    compare=_same_network,
    hints=(
        Hint(
            lambda a, e, g: close(g[0], e[0]) and close(g[2], e[2]) and not close(g[3], e[3]),
            "2 sigma(2z) - 1 has the constant -1 per unit: the output bias becomes c - sum_j v_j.",
        ),
        Hint(
            lambda a, e, g: close(g[0], a[0]),
            "tanh z = 2 sigma(2z) - 1: the hidden weights and biases double.",
        ),
    ),
    mistakes=(
        (lambda W, b, v, c: (2 * W, 2 * b, 2 * v, c), "c - sum_j v_j"),
        (lambda W, b, v, c: (W, b, 2 * v, c - v.sum()), "weights and biases double"),
    ),
)


def _interpolant_cases(rng):
    cases = []
    for m in (2, 4, 7):
        nodes = np.sort(rng.uniform(-3, 3, size=m))
        cases.append((nodes, rng.normal(size=m)))
    return cases


grade_relu_interpolant = grader(
    "relu_interpolant",
    "nodes, values",
    lambda nodes, values: tuple(relu_representation(nodes, values)),
    _interpolant_cases,
    hints=(
        Hint(
            lambda a, e, g: len(a[0]) > 2 and close(np.diff(a[1])[1:] / np.diff(a[0])[1:], g[2]),
            "c_i is the change of slope at x_i (the next slope minus the previous one), not the slope itself.",
        ),
        Hint(
            lambda a, e, g: close(e[0], g[0]) and not close(e[1], g[1]),
            "b makes a x + b pass through (x_0, y_0).",
        ),
    ),
    mistakes=(
        (
            lambda nodes, values: (
                *tuple(relu_representation(nodes, values))[:2],
                (np.diff(values) / np.diff(nodes))[1:],
            ),
            "change of slope",
        ),
        (
            lambda nodes, values: (
                tuple(relu_representation(nodes, values))[0],
                values[0],
                tuple(relu_representation(nodes, values))[2],
            ),
            "pass through",
        ),
    ),
)
