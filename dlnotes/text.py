"""Text as data, shared by the chapters on embeddings, recurrent networks and transformers: words, vocabularies."""

from __future__ import annotations

import re
from collections import Counter

import numpy as np

from .validation import check_int


def tokenize(text: str) -> list[str]:
    """Lower-case words (letters, with inner apostrophes) of a text."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return re.findall(r"[a-z]+(?:'[a-z]+)?", text.lower())


def build_vocab(tokens, min_count: int = 5) -> tuple[list[str], np.ndarray]:
    """Tokens (words, characters, ...) occurring at least `min_count` times, most frequent first (ties in
    alphabetical order), and their counts."""
    min_count = check_int(min_count, "min_count", 1)
    counts = Counter(tokens)
    words = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))
    return words, np.array([counts[w] for w in words], dtype=np.int64)
