"""The `check` function: the contract between the text of the book and its code."""

from __future__ import annotations

import re

import numpy as np

CONCEPT_ID = re.compile(r"\d\d\.\d\d")


def check(concept_id: str, condition, message: str = "") -> None:
    """Assert a claim of the lecture and print it.

    Prints ``✔ [CC.NN] message`` when `condition` holds and raises
    ``AssertionError("[CC.NN] message")`` when it does not, so a notebook
    whose claim is false fails under nbval and in the book build.

    `concept_id` is a syllabus id ``CC.NN`` (chapter, concept); `condition`
    is a single truth value (Python/numpy bool or a one-element array/tensor).
    """
    if not isinstance(concept_id, str) or not CONCEPT_ID.fullmatch(concept_id):
        raise ValueError(f"concept_id must be a string 'CC.NN' such as '01.14', got {concept_id!r}")
    if not isinstance(message, str):
        raise TypeError(f"message must be a str, got {type(message).__name__}")
    if hasattr(condition, "detach"):  # a torch tensor, possibly on a GPU
        condition = condition.detach().cpu().numpy()
    value = np.asarray(condition)
    if condition is None or value.size != 1:
        raise TypeError(
            "condition must be a single truth value (reduce arrays with .all() or .any()), "
            f"got {type(condition).__name__} of size {value.size}"
        )
    text = f"[{concept_id}] {message}".rstrip()
    if not bool(value.item()):
        raise AssertionError(text)
    print(f"✔ {text}")
