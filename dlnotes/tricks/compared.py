"""Section 8.10 (notebook 07_tricks_compared): ensemble probabilities, mean and spread over runs, and paired
differences of arms. The trainer of the table, `train_digits_classifier`, is in `common`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from torch import nn

from ..validation import (
    check_matrix,
    check_positive,
    check_vector,
)
from .common import predict_logits, tempered_softmax


def ensemble_probabilities(models, X, *, temperature: float = 1.0) -> np.ndarray:
    r"""The ensemble's class probabilities $\frac1K\sum_k\mathrm{softmax}(G_k/T)$ (N, C): the mean of the K members'
    tempered softmax outputs (`tempered_softmax`) on inputs X (N, d); ``temperature = 1`` is the plain average
    of bagging, T > 1 the softened targets a distilled student learns from."""
    models = list(models) if isinstance(models, list | tuple) else None
    if not models or not all(isinstance(m, nn.Module) for m in models):
        raise TypeError("models must be a non-empty list of torch modules (the ensemble's members)")
    X = check_matrix(X, "X")
    temperature = check_positive(temperature, "temperature")
    return np.mean([tempered_softmax(predict_logits(m, X), temperature) for m in models], axis=0)


class Spread(NamedTuple):
    mean: float  # the mean over the runs (seeds)
    sd: float  # their sample standard deviation (divided by r - 1), the spread from run to run


def mean_spread(values) -> Spread:
    r"""Mean and sample standard deviation $s=\sqrt{\frac1{r-1}\sum_j(v_j-\bar v)^2}$ of r >= 2 runs."""
    values = check_vector(values, "values")
    if len(values) < 2:
        raise ValueError(f"values must hold at least 2 runs to have a spread, got {len(values)}")
    return Spread(float(values.mean()), float(values.std(ddof=1)))


def paired_difference(a, b) -> Spread:
    r"""The paired difference of two arms run on the same r seeds (same split, same initial weights): the mean
    and sample standard deviation of $d_j=a_j-b_j$. Pairing removes what both arms share (a hard split, a lucky
    initialisation), so $s_d$ is usually far below the unpaired $\sqrt{s_a^2+s_b^2}$."""
    a = check_vector(a, "a")
    b = check_vector(b, "b", len(a))
    return mean_spread(a - b)
