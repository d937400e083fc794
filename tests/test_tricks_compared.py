"""Section 8.10 (the tricks compared): ensemble probabilities, mean ± spread and paired differences, against torch
and the statistics module. The trainer of the table, train_digits_classifier, is tested in test_tricks_common."""

import statistics

import numpy as np
import pytest
import torch
from scipy import stats
from torch import nn

from dlnotes.data import load_digits
from dlnotes.tricks.common import dropout_mlp
from dlnotes.tricks.compared import (
    ensemble_probabilities,
    holm_adjusted,
    mean_spread,
    paired_difference,
    paired_t_test,
)

from conftest import bad_input_test

_images, _labels = load_digits()
X_SMALL = _images.reshape(len(_images), -1)[:120] / 16  # pixels in [0, 1]


def test_ensemble_probabilities_average_the_tempered_softmaxes():
    members = [dropout_mlp([64, 12, 10], 1.0, rng=seed) for seed in range(3)]
    X = torch.as_tensor(X_SMALL[:20], dtype=torch.float32)
    for T in (1.0, 4.0):
        with torch.no_grad():
            expected = torch.stack([torch.softmax(m(X).double() / T, dim=1) for m in members]).mean(0).numpy()
        got = ensemble_probabilities(members, X_SMALL[:20], temperature=T)
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(got.sum(axis=1), 1.0, rtol=1e-10)


def test_mean_spread_and_paired_difference_match_the_statistics_module():
    rng = np.random.default_rng(0)
    base = 0.94 + 0.01 * rng.normal(size=5)
    trick = base + 0.004 + 0.002 * rng.normal(size=5)
    spread = mean_spread(trick)
    assert spread.mean == pytest.approx(statistics.mean(trick))
    assert spread.sd == pytest.approx(statistics.stdev(trick))
    paired = paired_difference(trick, base)
    differences = [a - b for a, b in zip(trick, base, strict=True)]
    assert paired.mean == pytest.approx(statistics.mean(differences))
    assert paired.sd == pytest.approx(statistics.stdev(differences))
    # pairing removes the shared run-to-run variation
    assert paired.sd < np.sqrt(statistics.variance(trick) + statistics.variance(base))


def test_paired_t_test_matches_scipy():
    rng = np.random.default_rng(1)
    base = 0.9 + 0.02 * rng.normal(size=4)
    trick = base + 0.01 + 0.01 * rng.normal(size=4)
    got = paired_t_test(trick, base)
    reference = stats.ttest_rel(trick, base)
    assert got.p_value == pytest.approx(reference.pvalue, rel=1e-10)
    interval = reference.confidence_interval(0.95)
    assert got.mean - got.half_width == pytest.approx(interval.low, rel=1e-10)
    assert got.mean + got.half_width == pytest.approx(interval.high, rel=1e-10)
    # three runs: the factor is t_{0.975, 2} = 4.30, not 2
    three = paired_t_test([1.0, 2.0, 4.0], [0.0, 0.0, 0.0])
    assert three.half_width / (three.sd / np.sqrt(3)) == pytest.approx(4.3027, rel=1e-4)
    assert paired_t_test([1.0, 1.0], [0.0, 0.0]).p_value == 0.0
    assert paired_t_test([1.0, 1.0], [1.0, 1.0]).p_value == 1.0


def test_holm_adjusted_against_the_step_down_rule():
    p = np.array([0.01, 0.04, 0.03, 0.005])
    # sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 = 0.02, 0.03, 0.06, 0.04 -> monotone 0.02, 0.03, 0.06, 0.06
    np.testing.assert_allclose(holm_adjusted(p), [0.03, 0.06, 0.06, 0.02])
    assert holm_adjusted([0.5, 0.6]).max() == 1.0
    assert np.all(holm_adjusted(p) >= p) and np.all(holm_adjusted(p) <= np.minimum(1, len(p) * p))


BAD_INPUT = [  # (call, error, message)
    (lambda: ensemble_probabilities([], X_SMALL), TypeError, "models must be a non-empty list"),
    (lambda: ensemble_probabilities([np.eye(3)], X_SMALL), TypeError, "models"),
    (lambda: ensemble_probabilities([nn.Linear(64, 10)], X_SMALL[0]), ValueError, "X must"),
    (lambda: mean_spread([0.9]), ValueError, "at least 2 runs"),
    (lambda: mean_spread(np.ones((2, 2))), ValueError, "values"),
    (lambda: paired_difference([0.9, 0.8, 0.7], [0.9, 0.8]), ValueError, "b must"),
    (lambda: paired_t_test([0.9, 0.8], [0.9, 0.7], level=1.0), ValueError, "level"),
    (lambda: paired_t_test([0.9], [0.8]), ValueError, "at least 2 runs"),
    (lambda: holm_adjusted([0.5, 1.5]), ValueError, "p_values must lie in [0, 1]"),
]


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
