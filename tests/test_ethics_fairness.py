"""Section 11.7: the confusion matrices per group against sklearn's confusion_matrix, the rates and gaps against
direct frequencies, the per-group thresholds against brute-force searches, Chouldechova's identity against the
rates of real confusion matrices, calibration by group against a loop over the bins, and the population's
base rates against its closed form."""

import math

import numpy as np
from scipy.stats import norm
from sklearn.metrics import confusion_matrix

from dlnotes.ethics.fairness import (
    calibration_by_group,
    chouldechova_fpr,
    confusion_by_group,
    credit_population,
    fairness_gaps,
    group_aware_features,
    group_rates,
    threshold_by_group,
    thresholds_for_ppv,
    thresholds_for_rate,
    thresholds_for_tpr,
)

from conftest import bad_input_test

rng = np.random.default_rng(11)


def random_outcomes(n=3000, G=2):
    a = rng.integers(0, G, size=n)
    y = (rng.random(n) < 0.3 + 0.3 * (a == 0)).astype(int)
    score = np.clip(0.35 * y + 0.15 * a + rng.random(n) * 0.6, 0, 1)
    y_hat = (score > 0.5).astype(int)
    return y, y_hat, a, score


def test_confusion_by_group_equals_sklearn_per_group():
    for G in (2, 3):
        y, y_hat, a, _ = random_outcomes(G=G)
        counts = confusion_by_group(y, y_hat, a)
        for g in range(G):
            tn, fp, fn, tp = confusion_matrix(y[a == g], y_hat[a == g], labels=[0, 1]).ravel()
            assert (counts.TP[g], counts.FP[g], counts.FN[g], counts.TN[g]) == (tp, fp, fn, tn)
        assert sum(c.sum() for c in counts) == len(y)


def test_group_rates_are_conditional_frequencies():
    y, y_hat, a, _ = random_outcomes(G=3)
    rates = group_rates(y, y_hat, a)
    for g in range(3):
        m = a == g
        assert math.isclose(rates.TPR[g], y_hat[m & (y == 1)].mean(), abs_tol=1e-14)
        assert math.isclose(rates.FPR[g], y_hat[m & (y == 0)].mean(), abs_tol=1e-14)
        assert math.isclose(rates.FNR[g], 1 - y_hat[m & (y == 1)].mean(), abs_tol=1e-14)
        assert math.isclose(rates.PPV[g], y[m & (y_hat == 1)].mean(), abs_tol=1e-14)
        assert math.isclose(rates.positive_rate[g], y_hat[m].mean(), abs_tol=1e-14)
        assert math.isclose(rates.base_rate[g], y[m].mean(), abs_tol=1e-14)
    # no predicted positive in a group: its PPV is undefined (NaN), the other rates are not
    y_hat0 = np.where(a == 1, 0, y_hat)
    rates0 = group_rates(y, y_hat0, a)
    assert np.isnan(rates0.PPV[1]) and rates0.TPR[1] == 0 and not np.isnan(rates0.PPV[0])


def test_fairness_gaps_against_direct_differences():
    y, y_hat, a, _ = random_outcomes()

    def p(mask):
        return y_hat[mask].mean()

    tpr = abs(p((a == 0) & (y == 1)) - p((a == 1) & (y == 1)))
    fpr = abs(p((a == 0) & (y == 0)) - p((a == 1) & (y == 0)))
    gaps = fairness_gaps(y, y_hat, a)
    assert math.isclose(gaps.dp, abs(p(a == 0) - p(a == 1)), abs_tol=1e-14)
    assert math.isclose(gaps.tpr, tpr, abs_tol=1e-14) and math.isclose(gaps.fpr, fpr, abs_tol=1e-14)
    assert math.isclose(gaps.eo, max(tpr, fpr), abs_tol=1e-14)
    ppv = abs(y[(a == 0) & (y_hat == 1)].mean() - y[(a == 1) & (y_hat == 1)].mean())
    assert math.isclose(gaps.ppv, ppv, abs_tol=1e-14)
    # the gaps do not depend on how the groups are numbered
    assert np.allclose(fairness_gaps(y, y_hat, 1 - a), gaps, atol=1e-14)


def test_threshold_by_group_applies_each_groups_threshold():
    score, a = np.array([0.2, 0.6, 0.6, 0.9, 0.1]), np.array([0, 0, 1, 1, 1])
    assert threshold_by_group(score, a, [0.5, 0.7]).tolist() == [0, 1, 0, 1, 0]
    assert threshold_by_group(score, a, [math.inf, 0.0]).tolist() == [0, 0, 1, 1, 1]


def test_thresholds_for_rate_and_tpr_reach_their_targets_exactly():
    y, _, a, _ = random_outcomes(n=4000)
    score = rng.random(4000) + 0.3 * y  # distinct scores, no ties
    for rate in (0.0, 0.25, 0.5, 1.0):
        t = thresholds_for_rate(score, a, rate)
        decided = threshold_by_group(score, a, t)
        for g in (0, 1):
            assert decided[a == g].sum() == round(rate * np.sum(a == g))
    t = thresholds_for_tpr(score, y, a, 0.8)
    decided = threshold_by_group(score, a, t)
    for g in (0, 1):
        positives = (a == g) & (y == 1)
        assert decided[positives].sum() == round(0.8 * positives.sum())
        # the threshold is the smallest score it accepts: one step lower would accept one more positive
        assert t[g] == score[positives & (decided == 1)].min()
    assert fairness_gaps(y, decided, a).tpr < 1e-3


def test_thresholds_for_ppv_against_a_brute_force_search():
    y, _, a, _ = random_outcomes(n=3000)
    score = rng.random(3000) + 0.5 * y
    t = thresholds_for_ppv(score, y, a, 0.8, min_accepted=50)
    for g in (0, 1):
        m = a == g
        candidates = np.unique(score[m])
        best, best_err = None, math.inf
        for c in candidates[::-1]:  # from the highest threshold down, as the function ranks them
            accepted = m & (score >= c)
            if accepted.sum() < 50:
                continue
            err = abs(y[accepted].mean() - 0.8)
            if err < best_err:
                best, best_err = c, err
        assert t[g] == best
    got = group_rates(y, threshold_by_group(score, a, t), a).PPV
    assert np.abs(got - 0.8).max() < 0.02


def test_chouldechova_identity_holds_for_confusion_matrices():
    y, y_hat, a, _ = random_outcomes(G=3)
    r = group_rates(y, y_hat, a)
    assert np.allclose(chouldechova_fpr(r.base_rate, r.PPV, r.FNR), r.FPR, rtol=1e-12, atol=0)
    assert math.isclose(chouldechova_fpr(0.5, 0.5, 0.0), 1.0)
    assert isinstance(chouldechova_fpr(0.3, 0.7, 0.2), float)


def test_calibration_by_group_against_a_loop():
    y, _, a, score = random_outcomes(n=2000, G=3)
    cal = calibration_by_group(score, y, a, bins=5)
    edges = np.linspace(0, 1, 6)
    for g in range(3):
        for k in range(5):
            upper = score <= 1 if k == 4 else score < edges[k + 1]
            m = (a == g) & (score >= edges[k]) & upper
            assert cal.count[g, k] == m.sum()
            if m.any():
                assert math.isclose(cal.mean_score[g, k], score[m].mean(), abs_tol=1e-12)
                assert math.isclose(cal.mean_outcome[g, k], y[m].mean(), abs_tol=1e-12)
            else:
                assert np.isnan(cal.mean_score[g, k])


def test_credit_population_base_rates_and_noise():
    pop = credit_population(200_000, rng=0)
    assert pop.X.shape == (200_000, 3) and set(np.unique(pop.a)) == {0, 1}
    # P(Y = 1 | A = a) = P(z + 0.5 xi > -0.2) with z ~ N(-shift a, 1): Phi((0.2 - shift a) / sqrt(1.25))
    for g in (0, 1):
        expected = norm.cdf((0.2 - 0.8 * g) / math.sqrt(1.25))
        assert abs(pop.y[pop.a == g].mean() - expected) < 0.01
    assert abs(pop.a.mean() - 0.4) < 0.01
    # x1 - 2 x2 = noise_a xi1 - 2 xi2 has variance noise_a^2 + 4, whatever z
    for g, s in enumerate((0.5, 1.2)):
        resid = pop.X[pop.a == g, 0] - 2 * pop.X[pop.a == g, 1]
        assert abs(resid.var() - (s**2 + 4)) < 0.1
    assert np.array_equal(credit_population(50, rng=3).X, credit_population(50, rng=3).X)
    features = group_aware_features(pop.X[:5], pop.a[:5])
    assert np.array_equal(features, np.column_stack([pop.X[:5], pop.a[:5], pop.a[:5, None] * pop.X[:5]]))


BAD_INPUT = [  # (call, error, message)
    (lambda: confusion_by_group([0, 1, 1], [0, 1, 2], [0, 1, 1]), ValueError, "y_hat must hold labels in [0, 1]"),
    (lambda: confusion_by_group([0, 1], [0, 1, 1], [0, 1, 1]), ValueError, "y must be a non-empty 1-D array of 3 labels"),
    (lambda: group_rates([0, 1, 1], [0, 1, 1], [0, 0, 0]), ValueError, "a must hold at least two groups"),
    (lambda: group_rates([0, 1, 1], [0, 1, 1], [0, 2, 2]), ValueError, "each present"),
    (lambda: fairness_gaps([0, 1], [0, 1], [-1, 0]), ValueError, "a must hold group labels 0, 1"),
    (lambda: fairness_gaps([0, 1], [True, False], [0, 1]), TypeError, "y_hat must hold integer labels"),
    (lambda: threshold_by_group([0.1, 0.2], [0, 1], [0.5]), ValueError, "thresholds must have shape (2,)"),
    (lambda: thresholds_for_rate([0.1, 0.2], [0, 1], 1.5), ValueError, "rate must be a finite number in [0, 1]"),
    (lambda: thresholds_for_tpr([0.1, 0.2], [0, 1], [0, 1], 0.5), ValueError, "group 0 has no positive example"),
    (lambda: thresholds_for_ppv([0.1, 0.2], [0, 1], [0, 1], 0.5, min_accepted=0), ValueError, "min_accepted must be an int in [1, inf)"),
    (lambda: chouldechova_fpr(1.0, 0.5, 0.1), ValueError, "base_rate must lie in (0, 1)"),
    (lambda: chouldechova_fpr(0.5, [0.5, 0.6], 0.1), ValueError, "must have one shape"),
    (lambda: calibration_by_group([0.1, 1.2], [0, 1], [0, 1]), ValueError, "score must hold probabilities in [0, 1]"),
    (lambda: credit_population(0), ValueError, "n must be an int in [1, inf)"),
    (lambda: credit_population(10, noise=(0.5, -1.0)), ValueError, "noise must hold two standard deviations"),
    (lambda: credit_population(10, rng="seed"), TypeError, "rng must be None, a seed"),
    (lambda: group_aware_features(np.ones(3), [0, 1, 1]), ValueError, "X must have shape (any, any)"),
]  # fmt: skip


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
