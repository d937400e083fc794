"""Input checks for every public function of dlnotes, in the style of scikit-learn's ``check_*`` helpers.

Each helper returns the value in the form the caller computes with (an int, a float, a float64 array, a
random generator) or raises a ``TypeError`` (wrong kind of thing) or ``ValueError`` (right kind, wrong
shape or range) whose message names the argument, says what was expected and shows what was given.

Randomness enters every function through one argument, ``rng``: ``None`` means the package generator
(`PACKAGE_RNG`, reseeded by ``dlnotes.seed_everything``), an int seeds a new generator, and a
``numpy.random.Generator`` is used as it is.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence

import numpy as np

PACKAGE_RNG = np.random.default_rng(0)  # reseeded in place by seed_everything; never rebound


def _range_text(low, high, low_open: bool = False, high_open: bool = False) -> str:
    left = "(" if low_open or low is None else "["
    right = ")" if high_open or high is None else "]"
    return f"{left}{'-inf' if low is None else low}, {'inf' if high is None else high}{right}"


def check_int(value, name: str, low: int | None = None, high: int | None = None) -> int:
    """An integer (Python or NumPy; not a bool, not a float) in ``[low, high]``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {value!r} ({type(value).__name__})")
    if (low is not None and value < low) or (high is not None and value > high):
        raise ValueError(f"{name} must be an int in {_range_text(low, high)}, got {value!r}")
    return int(value)


def check_number(
    value,
    name: str,
    low: float | None = None,
    high: float | None = None,
    *,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    """A finite real number (not a bool) in the interval from `low` to `high`, each end closed unless
    ``low_open``/``high_open``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r} ({type(value).__name__})")
    value = float(value)
    below = low is not None and (value <= low if low_open else value < low)
    above = high is not None and (value >= high if high_open else value > high)
    if not math.isfinite(value) or below or above:
        interval = _range_text(low, high, low_open, high_open)
        raise ValueError(f"{name} must be a finite number in {interval}, got {value!r}")
    return value


def check_positive(value, name: str) -> float:
    """A finite number > 0."""
    return check_number(value, name, 0, low_open=True)


def _shape_text(shape: Sequence[int | None]) -> str:
    inner = ", ".join("any" if n is None else str(n) for n in shape)
    return f"({inner},)" if len(shape) == 1 else f"({inner})"


def check_array(
    x,
    name: str,
    shape: Sequence[int | None] | None = None,
    *,
    ndim: int | None = None,
    dtype=np.float64,
    finite: bool = True,
) -> np.ndarray:
    """A non-empty array, converted to `dtype` (a copy, so the caller's array is never modified).

    `shape` fixes the shape, with None for an axis of any length (``(None, 3)``: any number of rows of 3);
    `ndim` fixes only the number of axes. NaN and infinity are refused unless ``finite=False`` (for
    iterates of a method that may diverge).
    """
    try:
        x = np.array(x, dtype=dtype)
    except (TypeError, ValueError):
        raise TypeError(
            f"{name} must be an array of {np.dtype(dtype).name} numbers, got {type(x).__name__}"
        ) from None
    if shape is not None and (
        x.ndim != len(shape) or any(n is not None and n != k for n, k in zip(shape, x.shape, strict=True))
    ):
        raise ValueError(f"{name} must have shape {_shape_text(shape)}, got shape {x.shape}")
    if ndim is not None and x.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} axes, got shape {x.shape}")
    if x.size == 0:
        raise ValueError(f"{name} must not be empty, got shape {x.shape}")
    if finite and np.issubdtype(x.dtype, np.inexact) and not np.isfinite(x).all():
        raise ValueError(f"{name} must hold finite numbers, got NaN or infinity")
    return x


def check_vector(v, name: str, n: int | None = None) -> np.ndarray:
    """A float64 vector (n,) (any length when n is None)."""
    return check_array(v, name, (n,))


def check_matrix(X, name: str, rows: int | None = None, cols: int | None = None) -> np.ndarray:
    """A float64 matrix (rows, cols), either fixed or free (None)."""
    return check_array(X, name, (rows, cols))


def check_labels(
    y, name: str, n: int | None = None, *, values: Sequence[int] | None = None, n_classes: int | None = None
) -> np.ndarray:
    """Labels (n,) as int64: whole numbers from the set `values` (e.g. ``(-1, 1)``) or in ``0..n_classes-1``."""
    y = np.asarray(y)
    if y.dtype == bool or not (np.issubdtype(y.dtype, np.integer) or np.issubdtype(y.dtype, np.floating)):
        raise TypeError(f"{name} must hold integer labels, got dtype {y.dtype}")
    if y.ndim != 1 or y.size == 0 or (n is not None and len(y) != n):
        raise ValueError(
            f"{name} must be a non-empty 1-D array of {n or 'any number of'} labels, got shape {y.shape}"
        )
    if not np.array_equal(y, np.round(y)):
        raise ValueError(f"{name} must hold whole numbers (labels), got {y[y != np.round(y)][:3]}")
    y = y.astype(np.int64)
    if values is not None and not np.isin(y, values).all():
        raise ValueError(
            f"{name} must hold labels in {sorted(values)}, got {sorted(set(y.tolist()) - set(values))[:5]}"
        )
    if n_classes is not None and ((y < 0) | (y >= n_classes)).any():
        raise ValueError(
            f"{name} must hold labels in 0..{n_classes - 1} (n_classes = {n_classes}), got {y.min()}..{y.max()}"
        )
    return y


def check_choice(value, name: str, options: Sequence):
    """One of `options`."""
    if value not in options:
        raise ValueError(f"{name} must be one of {list(options)}, got {value!r}")
    return value


def check_callable(f, name: str) -> Callable:
    if not callable(f):
        raise TypeError(f"{name} must be callable (a function), got {type(f).__name__}")
    return f


def check_rng(rng, name: str = "rng") -> np.random.Generator:
    """The random generator to draw from: None -> `PACKAGE_RNG`, an int -> a new generator seeded with it,
    a ``numpy.random.Generator`` -> itself."""
    if rng is None:
        return PACKAGE_RNG
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, numbers.Integral) and not isinstance(rng, (bool, np.bool_)) and rng >= 0:
        return np.random.default_rng(int(rng))
    raise TypeError(f"{name} must be None, a seed (an int >= 0) or a numpy.random.Generator, got {rng!r}")
