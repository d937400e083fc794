"""Graded exercises of chapter 01 — connectionism."""

from __future__ import annotations

from math import comb

import numpy as np

from ..connectionism import cover_count, hopfield_hebbian, sgn
from .core import Hint, close, grader


def _threshold_cases(rng):
    cases = [(rng.normal(size=(6, 3)), rng.normal(size=3), float(rng.normal())) for _ in range(4)]
    w = np.array([1.0, -2.0, 0.5])
    X_ties = np.array([[2.0, 1.0, 0.0], [0.0, 0.25, 1.0], [1.0, 1.0, 1.0]])  # w^T x = 0, 0, -0.5
    return [*cases, (X_ties, w, 0.0), (X_ties, w, 0.5)]


grade_threshold_unit = grader(
    "threshold_unit",
    "X, w, b",
    lambda X, w, b: sgn(X @ w + b),
    _threshold_cases,
    hints=(
        Hint(
            lambda a, e, g: (np.asarray(g) == 0).any(), "np.sign(0) is 0, but the unit outputs sgn(0) = +1."
        ),
        Hint(lambda a, e, g: close(sgn(a[0] @ a[1] - a[2]), g), "the bias is added: sgn(w^T x + b)."),
    ),
    mistakes=(
        (lambda X, w, b: np.sign(X @ w + b), "sgn(0) = +1"),
        (lambda X, w, b: np.where(X @ w - b >= 0, 1, -1), "the bias is added"),
    ),
)


def perceptron_update_reference(w, b, x, y):
    """One step of the perceptron: on a mistake, sgn(w^T x + b) != y, move w by y x and b by y."""
    if sgn(w @ x + b) != y:
        return w + y * x, b + y
    return w, b


def _perceptron_cases(rng):
    cases = [
        (rng.normal(size=3), float(rng.normal()), rng.normal(size=3), int(rng.choice([-1, 1])))
        for _ in range(8)
    ]
    w, x = np.array([1.0, -1.0]), np.array([2.0, 2.0])  # w^T x = 0: a tie
    return [*cases, (w, 0.0, x, 1), (w, 0.0, x, -1)]  # sgn(0) = +1: right for y = +1, a mistake for y = -1


def _always_update(w, b, x, y):
    return w + y * x, b + y


def _margin_rule(w, b, x, y):
    return (w + y * x, b + y) if y * (w @ x + b) <= 0 else (w, b)


grade_perceptron_update = grader(
    "perceptron_update",
    "w, b, x, y",
    perceptron_update_reference,
    _perceptron_cases,
    hints=(
        Hint(
            lambda a, e, g: a[0] @ a[2] + a[1] == 0,
            "on the boundary, w^T x + b = 0, the unit says sgn(0) = +1: right for y = +1, a mistake for y = -1.",
        ),
        Hint(
            lambda a, e, g: close(_always_update(*a), g),
            "update only on a mistake, when sgn(w^T x + b) != y.",
        ),
        Hint(lambda a, e, g: close(e[0], g[0]) and not close(e[1], g[1]), "the bias moves too: b + y."),
    ),
    mistakes=(
        (_always_update, "update only on a mistake"),
        (_margin_rule, "sgn(0) = +1"),
        (lambda w, b, x, y: (w + y * x, b) if sgn(w @ x + b) != y else (w, b), "the bias moves too"),
    ),
)


def _cover_cases(rng):
    return [(1, 1), (3, 5), (5, 5), (6, 2), (10, 3), (20, 7), (40, 10)]


grade_cover_count = grader(
    "cover_count",
    "s, n",
    cover_count,
    _cover_cases,
    hints=(
        Hint(lambda a, e, g: g == 2 * a[0], "2s is C(s, 2), the count in the plane only."),
        Hint(
            lambda a, e, g: g == 2 * sum(comb(a[1], i) for i in range(a[1] + 1)),
            "the sum runs over binom(s - 1, i); yours does not depend on s.",
        ),
        Hint(
            lambda a, e, g: g == 2 * sum(comb(a[0] - 1, i) for i in range(a[1] + 1)),
            "the sum runs over i = 0, ..., n - 1 (n terms).",
        ),
        Hint(lambda a, e, g: a[0] <= a[1], "for s <= n every labeling is realisable: C(s, n) = 2^s."),
    ),
    mistakes=(
        (lambda s, n: 2 * s, "count in the plane"),
        (lambda s, n: 2 * sum(comb(n, i) for i in range(n + 1)), "does not depend on s"),
        (lambda s, n: 2 * sum(comb(s - 1, i) for i in range(n + 1)), "i = 0, ..., n - 1"),
    ),
)


def _hebb_cases(rng):
    return [(rng.choice([-1.0, 1.0], size=(s, n)),) for s, n in [(1, 5), (3, 8), (4, 16)]]


grade_hebbian_weights = grader(
    "hebbian_weights",
    "P",
    hopfield_hebbian,
    _hebb_cases,
    hints=(
        Hint(
            lambda a, e, g: (np.diag(g) != 0).any(),
            "no self-connections: the diagonal of W is 0 (subtract s I).",
        ),
        Hint(lambda a, e, g: close(e * a[0].shape[1], g), "divide by the number of units n."),
        Hint(lambda a, e, g: close(e * a[0].shape[1] / len(a[0]), g), "divide by n, not by s."),
    ),
    mistakes=(
        (lambda P: P.T @ P / P.shape[1], "diagonal of W is 0"),
        (lambda P: P.T @ P - len(P) * np.eye(P.shape[1]), "divide by the number of units"),
    ),
)
