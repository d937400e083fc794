"""Section 8.10 (notebook 07_tricks_compared): ensemble probabilities, mean and spread over runs, paired
differences of arms, their Student-t interval and test, and Holm's correction for several comparisons. The
trainer of the table, `train_digits_classifier`, is in `common`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy import stats
from torch import nn

from ..validation import (
    check_matrix,
    check_number,
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


class PairedTest(NamedTuple):
    mean: float  # the mean paired difference d_bar
    sd: float  # the sample standard deviation s_d of the differences
    half_width: float  # t_{1 - (1 - level)/2, r - 1} s_d / sqrt(r): the interval is mean -+ half_width
    p_value: float  # two-sided p-value of the paired t-test of "mean difference 0"


def paired_t_test(a, b, *, level: float = 0.95) -> PairedTest:
    r"""Student's paired t-test of two arms run on the same r >= 2 seeds: $d_j=a_j-b_j$,
    $t=\bar d/(s_d/\sqrt r)$ with r - 1 degrees of freedom, the two-sided p-value and the interval
    $\bar d\pm t_{1-(1-\text{level})/2,\,r-1}\,s_d/\sqrt r$ (`scipy.stats.t.ppf`; for r = 3 and level 0.95
    the factor is 4.30, not 2). A difference that is the same in every run (s_d = 0) has p-value 0 when it is
    not 0, and 1 when it is."""
    level = check_number(level, "level", 0, 1, low_open=True, high_open=True)
    d = paired_difference(a, b)
    r = len(check_vector(a, "a"))
    standard_error = d.sd / np.sqrt(r)
    half_width = float(stats.t.ppf(1 - (1 - level) / 2, r - 1) * standard_error)
    if standard_error == 0:
        p_value = 1.0 if d.mean == 0 else 0.0
    else:
        p_value = float(2 * stats.t.sf(abs(d.mean) / standard_error, r - 1))
    return PairedTest(d.mean, d.sd, half_width, p_value)


def holm_adjusted(p_values) -> np.ndarray:
    r"""Holm's step-down adjustment of m p-values for m comparisons: sort them, $p_{(1)}\le\dots\le p_{(m)}$,
    multiply $p_{(i)}$ by $m-i+1$, make the sequence non-decreasing and cap it at 1. Rejecting where the
    adjusted value is below $\alpha$ keeps the probability of *any* false positive among the m at most
    $\alpha$ (Bonferroni's $m\,p_i$ does too, with less power). Returns the adjusted values in the input's order."""
    p_values = check_vector(p_values, "p_values")
    if ((p_values < 0) | (p_values > 1)).any():
        raise ValueError(
            f"p_values must lie in [0, 1], got values from {p_values.min():.3g} to {p_values.max():.3g}"
        )
    m = len(p_values)
    order = np.argsort(p_values)
    stepped = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p_values[order]))
    adjusted = np.empty(m)
    adjusted[order] = stepped
    return adjusted
