"""Section 11.7 of chapter 11, fairness (notebook 08_fairness): a synthetic credit population, the
confusion matrix and error rates per group, the gaps of demographic parity, equalised odds and sufficiency,
per-group thresholds for each criterion, Chouldechova's identity and calibration by group.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..validation import (
    check_array,
    check_int,
    check_labels,
    check_matrix,
    check_number,
    check_rng,
    check_vector,
)


class CreditPopulation(NamedTuple):
    """A synthetic credit population: features X (n, 3), protected attribute a (n,) in {0, 1} and outcome
    y (n,) in {0, 1} (1 = repays)."""

    X: np.ndarray
    a: np.ndarray
    y: np.ndarray


def credit_population(
    n: int, shift: float = 0.8, noise=(0.5, 1.2), p_group: float = 0.4, rng=None
) -> CreditPopulation:
    """Draw n applicants of a synthetic credit population in which the group changes the base rate and the
    quality of the main feature (11.7).

    :math:`A\\sim\\mathrm{Bernoulli}(p_{\\mathrm{group}})`; creditworthiness
    :math:`z\\sim\\mathcal N(-\\mathrm{shift}\\cdot A, 1)`; outcome :math:`Y = 1\\{z + 0.5\\,\\zeta_0 > -0.2\\}`;
    features :math:`x_1 = z + \\mathrm{noise}_A\\,\\zeta_1` (a credit score, noisier in one group),
    :math:`x_2 = z/2 + \\zeta_2` (a weaker second signal) and :math:`x_3 = A + 0.6\\,\\zeta_3` (a proxy of A, e.g. the
    neighbourhood), with independent standard normal :math:`\\zeta_j`. Returns X (n, 3) without A, a (n,), y (n,).
    """
    n = check_int(n, "n", 1)
    shift = check_number(shift, "shift")
    noise = check_array(noise, "noise", (2,))
    if (noise < 0).any():
        raise ValueError(f"noise must hold two standard deviations >= 0 (groups 0 and 1), got {noise}")
    p_group = check_number(p_group, "p_group", 0, 1)
    rng = check_rng(rng)
    a = (rng.random(n) < p_group).astype(np.int64)
    z = rng.normal(size=n) - shift * a
    y = (z + 0.5 * rng.normal(size=n) > -0.2).astype(np.int64)
    x1 = z + noise[a] * rng.normal(size=n)
    x2 = 0.5 * z + rng.normal(size=n)
    x3 = a + 0.6 * rng.normal(size=n)
    return CreditPopulation(np.column_stack([x1, x2, x3]), a, y)


def group_aware_features(X, a) -> np.ndarray:
    """The features of a group-aware linear model: :math:`[X, A, A\\cdot X]`, so that a logistic regression can
    have one intercept and one slope per group. X (n, d), a (n,) -> (n, 2d + 1) (11.7)."""
    X = check_matrix(X, "X")
    a = _check_groups(a, len(X))
    return np.column_stack([X, a, a[:, None] * X])


def _check_groups(a, n: int | None = None) -> np.ndarray:
    a = check_labels(a, "a", n)
    if a.min() < 0:
        raise ValueError(f"a must hold group labels 0, 1, ..., G - 1, got {a.min()}")
    missing = sorted(set(range(int(a.max()) + 1)) - set(np.unique(a).tolist()))
    if missing or a.max() < 1:
        raise ValueError(
            f"a must hold at least two groups labelled 0, 1, ..., G - 1, each present; got groups "
            f"{np.unique(a).tolist()}"
        )
    return a


def _check_outcomes(y, y_hat, a):
    a = _check_groups(a)
    y = check_labels(y, "y", len(a), values=(0, 1))
    y_hat = check_labels(y_hat, "y_hat", len(a), values=(0, 1))
    return y, y_hat, a


class GroupConfusion(NamedTuple):
    """Confusion-matrix counts per group, each (G,): true positives, false positives, false negatives, true
    negatives."""

    TP: np.ndarray
    FP: np.ndarray
    FN: np.ndarray
    TN: np.ndarray


def confusion_by_group(y, y_hat, a) -> GroupConfusion:
    """The confusion matrix of each group :math:`A = a`: :math:`TP_a = \\#\\{Y=1,\\hat Y=1,A=a\\}`, and FP, FN, TN
    likewise. y, y_hat (n,) in {0, 1}, a (n,) in {0, ..., G−1} -> four count arrays (G,) (11.7)."""
    y, y_hat, a = _check_outcomes(y, y_hat, a)
    G = int(a.max()) + 1
    cell = a * 4 + 2 * y + y_hat  # one count per (group, y, y_hat)
    counts = np.bincount(cell, minlength=4 * G).reshape(G, 2, 2)
    return GroupConfusion(counts[:, 1, 1], counts[:, 0, 1], counts[:, 1, 0], counts[:, 0, 0])


class GroupRates(NamedTuple):
    """Rates per group, each (G,): TPR = TP/(TP+FN), FPR = FP/(FP+TN), FNR = FN/(TP+FN), PPV = TP/(TP+FP), the
    positive rate P(Ŷ=1|A=a) and the base rate π_a = P(Y=1|A=a); NaN where a denominator is 0."""

    TPR: np.ndarray
    FPR: np.ndarray
    FNR: np.ndarray
    PPV: np.ndarray
    positive_rate: np.ndarray
    base_rate: np.ndarray


def _ratio(num, den) -> np.ndarray:
    num, den = np.asarray(num, dtype=np.float64), np.asarray(den, dtype=np.float64)
    return np.divide(num, den, out=np.full(num.shape, np.nan), where=den > 0)


def group_rates(y, y_hat, a) -> GroupRates:
    """The error rates of each group from its confusion matrix:
    :math:`\\mathrm{TPR}_a = P(\\hat Y=1\\mid Y=1, A=a)`, :math:`\\mathrm{FPR}_a = P(\\hat Y=1\\mid Y=0, A=a)`,
    :math:`\\mathrm{FNR}_a = 1-\\mathrm{TPR}_a`, :math:`\\mathrm{PPV}_a = P(Y=1\\mid\\hat Y=1, A=a)`, the positive
    rate :math:`P(\\hat Y=1\\mid A=a)` and the base rate :math:`\\pi_a = P(Y=1\\mid A=a)`.
    y, y_hat (n,) in {0, 1}, a (n,) -> six arrays (G,) (11.7)."""
    TP, FP, FN, TN = confusion_by_group(y, y_hat, a)
    n_a = TP + FP + FN + TN
    return GroupRates(
        _ratio(TP, TP + FN),
        _ratio(FP, FP + TN),
        _ratio(FN, TP + FN),
        _ratio(TP, TP + FP),
        _ratio(TP + FP, n_a),
        _ratio(TP + FN, n_a),
    )


class FairnessGaps(NamedTuple):
    """The largest differences between groups: Δ_DP (positive rates), Δ_EO = max(TPR gap, FPR gap), and the TPR,
    FPR and PPV gaps."""

    dp: float
    eo: float
    tpr: float
    fpr: float
    ppv: float


def fairness_gaps(y, y_hat, a) -> FairnessGaps:
    """The gaps of the three criteria between groups (for two groups the absolute difference; for more, max − min):
    :math:`\\Delta_{\\mathrm{DP}} = |P(\\hat Y=1|A=0) - P(\\hat Y=1|A=1)|`,
    :math:`\\Delta_{\\mathrm{EO}} = \\max_{y\\in\\{0,1\\}}|P(\\hat Y=1|A=0,Y=y) - P(\\hat Y=1|A=1,Y=y)|`, the TPR gap
    (equality of opportunity), the FPR gap and the PPV gap (sufficiency). y, y_hat, a (n,) (11.7)."""
    r = group_rates(y, y_hat, a)

    def spread(v):
        return float(v.max() - v.min())

    tpr, fpr = spread(r.TPR), spread(r.FPR)
    return FairnessGaps(spread(r.positive_rate), max(tpr, fpr), tpr, fpr, spread(r.PPV))


def threshold_by_group(score, a, thresholds) -> np.ndarray:
    """The decisions of per-group thresholds, :math:`\\hat Y = 1\\{\\hat p \\ge t_A\\}`.
    score (n,), a (n,) in {0, ..., G−1}, thresholds (G,) -> y_hat (n,) in {0, 1} (11.7)."""
    score = check_vector(score, "score")
    a = _check_groups(a, len(score))
    thresholds = check_array(thresholds, "thresholds", (int(a.max()) + 1,), finite=False)
    if np.isnan(thresholds).any():
        raise ValueError("thresholds must not hold NaN")
    return (score >= thresholds[a]).astype(np.int64)


def _top_k_threshold(values: np.ndarray, k: int) -> float:
    """The threshold that accepts the k largest values (inf for k = 0; ties accept all equal values)."""
    return math.inf if k == 0 else float(np.sort(values)[len(values) - k])


def thresholds_for_rate(score, a, rate: float) -> np.ndarray:
    """Per-group thresholds for demographic parity: :math:`t_a` accepts the fraction `rate` of group a (its
    :math:`\\lfloor n_a\\,\\mathrm{rate}\\rceil` highest scores), so :math:`P(\\hat Y=1\\mid A=a) = \\mathrm{rate}`
    for every a on these data. score (n,), a (n,) -> thresholds (G,) (11.7)."""
    score = check_vector(score, "score")
    a = _check_groups(a, len(score))
    rate = check_number(rate, "rate", 0, 1)
    groups = range(int(a.max()) + 1)
    return np.array([_top_k_threshold(score[a == g], round(rate * np.sum(a == g))) for g in groups])


def thresholds_for_tpr(score, y, a, tpr: float) -> np.ndarray:
    """Per-group thresholds for equality of opportunity: :math:`t_a` accepts the fraction `tpr` of the positives
    (Y = 1) of group a, so :math:`\\mathrm{TPR}_a = \\mathrm{tpr}` for every a on these data.
    score (n,), y (n,) in {0, 1}, a (n,) -> thresholds (G,) (11.7)."""
    score = check_vector(score, "score")
    a = _check_groups(a, len(score))
    y = check_labels(y, "y", len(score), values=(0, 1))
    tpr = check_number(tpr, "tpr", 0, 1)
    thresholds = []
    for g in range(int(a.max()) + 1):
        positives = score[(a == g) & (y == 1)]
        if len(positives) == 0:
            raise ValueError(f"group {g} has no positive example (y = 1): its TPR is undefined")
        thresholds.append(_top_k_threshold(positives, round(tpr * len(positives))))
    return np.array(thresholds)


def thresholds_for_ppv(score, y, a, ppv: float, min_accepted: int = 500) -> np.ndarray:
    """Per-group thresholds for sufficiency of the decision: :math:`t_a` is the threshold among those accepting at
    least `min_accepted` examples of group a whose precision :math:`\\mathrm{PPV}_a = P(Y=1\\mid\\hat Y=1, A=a)`
    is closest to `ppv` (the smallest accepted sets are too noisy). score (n,), y (n,), a (n,) -> (G,) (11.7)."""
    score = check_vector(score, "score")
    a = _check_groups(a, len(score))
    y = check_labels(y, "y", len(score), values=(0, 1))
    ppv = check_number(ppv, "ppv", 0, 1)
    min_accepted = check_int(min_accepted, "min_accepted", 1)
    thresholds = []
    for g in range(int(a.max()) + 1):
        order = np.argsort(-score[a == g], kind="stable")
        ranked, outcome = score[a == g][order], y[a == g][order]
        precision = np.cumsum(outcome) / np.arange(1, len(outcome) + 1)  # PPV of the top k, k = 1..n_a
        start = min(min_accepted, len(outcome)) - 1
        k = start + int(np.argmin(np.abs(precision[start:] - ppv)))
        thresholds.append(float(ranked[k]))
    return np.array(thresholds)


def chouldechova_fpr(base_rate, ppv, fnr) -> np.ndarray | float:
    """The false-positive rate that a base rate, a PPV and an FNR leave (Chouldechova's identity):
    :math:`\\mathrm{FPR} = \\frac{\\pi}{1-\\pi}\\,\\frac{1-\\mathrm{PPV}}{\\mathrm{PPV}}\\,(1-\\mathrm{FNR})`,
    with π in (0, 1), PPV in (0, 1], FNR in [0, 1]; numbers or arrays of one shape (11.7)."""
    base_rate, ppv, fnr = (
        check_array(v, name) for v, name in ((base_rate, "base_rate"), (ppv, "ppv"), (fnr, "fnr"))
    )
    if not base_rate.shape == ppv.shape == fnr.shape:
        raise ValueError(
            f"base_rate, ppv and fnr must have one shape, got {base_rate.shape}, {ppv.shape}, {fnr.shape}"
        )
    if ((base_rate <= 0) | (base_rate >= 1)).any():
        raise ValueError(f"base_rate must lie in (0, 1), got {base_rate}")
    if ((ppv <= 0) | (ppv > 1)).any():
        raise ValueError(f"ppv must lie in (0, 1], got {ppv}")
    if ((fnr < 0) | (fnr > 1)).any():
        raise ValueError(f"fnr must lie in [0, 1], got {fnr}")
    fpr = base_rate / (1 - base_rate) * (1 - ppv) / ppv * (1 - fnr)
    return float(fpr) if fpr.ndim == 0 else fpr


class GroupCalibration(NamedTuple):
    """Reliability per group and score bin, each (G, bins): the mean score, the observed frequency of Y = 1 and
    the count (NaN means in empty bins)."""

    mean_score: np.ndarray
    mean_outcome: np.ndarray
    count: np.ndarray


def calibration_by_group(score, y, a, bins: int = 10) -> GroupCalibration:
    """Calibration by group (sufficiency, :math:`Y\\perp A\\mid\\hat p`): in each of `bins` equal-width bins of
    the score in [0, 1], the mean score and :math:`P(Y=1\\mid \\hat p\\in\\text{bin}, A=a)`; a score is calibrated in
    group a when the two agree. score (n,) in [0, 1], y (n,) in {0, 1}, a (n,) -> three arrays (G, bins) (11.7)."""
    score = check_vector(score, "score")
    if score.min() < 0 or score.max() > 1:
        raise ValueError(
            f"score must hold probabilities in [0, 1], got values in [{score.min()}, {score.max()}]"
        )
    a = _check_groups(a, len(score))
    y = check_labels(y, "y", len(score), values=(0, 1))
    bins = check_int(bins, "bins", 1)
    G = int(a.max()) + 1
    cell = a * bins + np.minimum((score * bins).astype(np.int64), bins - 1)
    count = np.bincount(cell, minlength=G * bins).reshape(G, bins)
    score_sum = np.bincount(cell, weights=score, minlength=G * bins).reshape(G, bins)
    outcome_sum = np.bincount(cell, weights=y, minlength=G * bins).reshape(G, bins)
    return GroupCalibration(_ratio(score_sum, count), _ratio(outcome_sum, count), count)
