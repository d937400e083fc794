"""Input checks shared by the chapter modules: each raises an error that names the argument,
the expected shape or range, and what it got."""

from __future__ import annotations

import numpy as np


def as_matrix(X, name: str = "X") -> np.ndarray:
    """X as a non-empty float64 matrix (s, n)."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.size == 0:
        raise ValueError(f"{name} must be a non-empty 2-D array (s, n), got shape {X.shape}")
    return X


def as_array(x, name: str) -> np.ndarray:
    """A float64 copy of a non-empty array of any shape."""
    x = np.array(x, dtype=np.float64)
    if x.size == 0:
        raise ValueError(f"{name} must be a non-empty array, got shape {x.shape}")
    return x


def positive(value, name: str) -> float:
    """A number > 0."""
    if not np.isscalar(value) or not value > 0:
        raise ValueError(f"{name} must be a positive number, got {value!r}")
    return float(value)


def positive_int(value, name: str) -> int:
    """An int >= 1 (bools are refused)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return int(value)
