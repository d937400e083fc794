"""Section 8.10 (the tricks compared): ensemble probabilities, mean ± spread and paired differences, against torch
and the statistics module. The trainer of the table, train_digits_classifier, is tested in test_tricks_common."""

import statistics

import numpy as np
import pytest
import torch
from torch import nn

from dlnotes.data import load_digits
from dlnotes.tricks.common import dropout_mlp
from dlnotes.tricks.compared import ensemble_probabilities, mean_spread, paired_difference

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


BAD_INPUT = [  # (call, error, message)
    (lambda: ensemble_probabilities([], X_SMALL), TypeError, "models must be a non-empty list"),
    (lambda: ensemble_probabilities([np.eye(3)], X_SMALL), TypeError, "models"),
    (lambda: ensemble_probabilities([nn.Linear(64, 10)], X_SMALL[0]), ValueError, "X must"),
    (lambda: mean_spread([0.9]), ValueError, "at least 2 runs"),
    (lambda: mean_spread(np.ones((2, 2))), ValueError, "values"),
    (lambda: paired_difference([0.9, 0.8, 0.7], [0.9, 0.8]), ValueError, "b must"),
]


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
