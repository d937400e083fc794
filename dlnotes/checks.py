"""Checking claims: `check`, the contract between the text of the book and its code, and the
finite-difference gradient check that many claims rest on.

When the environment variable ``DLNOTES_CHECK_LOG`` names a file, every check that holds appends a line
``<notebook>\\t<concept id>`` to it (the notebook is ``DLNOTES_NOTEBOOK``, set by the book's build for each
page), so the build can compare the checks that really ran with the book's list of concepts.
"""

from __future__ import annotations

import os
import re
import textwrap
from collections.abc import Callable

import numpy as np

from .training import to_numpy
from .validation import check_array, check_callable, check_positive

CONCEPT_ID = re.compile(r"\d\d\.\d\d")
LOG_VARIABLE, NOTEBOOK_VARIABLE = "DLNOTES_CHECK_LOG", "DLNOTES_NOTEBOOK"
LINE_WIDTH = 100  # characters of a printed check: a notebook's output area is about 110 wide in JupyterLab


def _truth(condition) -> bool:
    """A single boolean: Python's, NumPy's, or a one-element bool array or tensor (on any device)."""
    if hasattr(condition, "detach"):  # a torch tensor, possibly on a GPU
        condition = to_numpy(condition)
    if isinstance(condition, (bool, np.bool_)):
        return bool(condition)
    if isinstance(condition, np.ndarray) and condition.dtype == bool and condition.size == 1:
        return bool(condition.item())
    kind = (
        f"array of dtype {condition.dtype} and size {condition.size}"
        if isinstance(condition, np.ndarray)
        else repr(condition)
    )
    raise TypeError(
        "condition must be a single boolean, e.g. `a <= b`, `np.allclose(a, b)` or `(x > 0).all()`; "
        f"got {kind} ({type(condition).__name__})"
    )


def check(concept_id: str, condition, message: str = "") -> None:
    """Assert a claim of the lecture and print it.

    Prints ``✔ [CC.NN] message`` when `condition` holds (wrapped between words at LINE_WIDTH characters:
    JupyterLab breaks a long output line anywhere, mid-word too) and raises ``AssertionError`` saying that the claim
    did not hold when it does not, so a notebook whose claim is false fails under nbval and in the book build.

    `concept_id` is a syllabus id ``CC.NN`` (chapter, concept); `condition` a single boolean (Python's,
    NumPy's, or a one-element bool array or tensor). Anything else, a number or a string included, is a
    ``TypeError``: ``check(id, 0.3)`` would otherwise pass for any non-zero value.
    """
    if not isinstance(concept_id, str) or not CONCEPT_ID.fullmatch(concept_id):
        raise ValueError(f"concept_id must be a string 'CC.NN' such as '01.14', got {concept_id!r}")
    if not isinstance(message, str):
        raise TypeError(f"message must be a str, got {type(message).__name__}")
    if not _truth(condition):
        raise AssertionError(f"✘ [{concept_id}] the claim did not hold" + (f": {message}" if message else ""))
    lines = f"✔ [{concept_id}] {message}".rstrip().splitlines()
    print("\n".join(textwrap.fill(line, LINE_WIDTH, subsequent_indent=" " * 10, break_long_words=False,
                                   break_on_hyphens=False) for line in lines))  # fmt: skip
    log = os.environ.get(LOG_VARIABLE)
    if log:
        with open(log, "a", encoding="utf-8") as f:
            f.write(f"{os.environ.get(NOTEBOOK_VARIABLE, '?')}\t{concept_id}\n")


def numerical_gradient(f: Callable, x, eps: float = 1e-6) -> np.ndarray:
    """Central differences ``(f(x + eps e_i) - f(x - eps e_i)) / (2 eps)`` for every entry of x (any shape)."""
    check_callable(f, "f")
    x = check_array(x, "x")
    eps = check_positive(eps, "eps")
    g = np.empty_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        g[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return g


def check_grad(f: Callable, grad, x, eps: float = 1e-6) -> float:
    """Largest deviation of the gradient `grad` (an array, or a function of x) from central differences of f
    at x, relative to the largest gradient entry: ``max|g - g_num| / max|g_num|``."""
    x = check_array(x, "x")
    g = check_array(grad(x) if callable(grad) else grad, "the gradient", x.shape)
    g_num = numerical_gradient(f, x, eps)
    return float(np.max(np.abs(g - g_num)) / max(np.max(np.abs(g_num)), np.finfo(float).tiny))
