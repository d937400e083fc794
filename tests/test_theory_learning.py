"""Section 9.4 (dlnotes.theory.learning): the generalisation gap of a trained MLP, Hoeffding's epsilon, exact
binomial tails, growth functions, Sauer's lemma, the VC bound and Rademacher complexities, each against a direct
computation (math.comb, enumeration of all sign vectors, scipy, simulation) or a closed form."""

import itertools
import math

import numpy as np
import pytest

from dlnotes.theory import learning

from conftest import bad_input_test

rng = np.random.default_rng(94)


def test_generalisation_gap_curve_is_reproducible_and_fits_small_sets():
    kwargs = {"hidden": 32, "steps": 200, "n_test": 500, "progress": False}
    curve = learning.generalisation_gap_curve([20, 100], repeats=1, rng=3, **kwargs)
    again = learning.generalisation_gap_curve([20, 100], repeats=1, rng=3, **kwargs)
    assert curve.train_error.shape == curve.test_error.shape == (2, 1)
    assert np.array_equal(curve.train_error, again.train_error)
    assert np.array_equal(curve.test_error, again.test_error)
    assert np.all(curve.train_error[0] <= 0.1)  # 20 points are (nearly) memorised
    assert np.all((curve.test_error > 0.02) & (curve.test_error < 0.5))  # noise 0.3: not perfect, not chance


def test_hoeffding_epsilon_solves_the_exponential_tail():
    for n, delta, size in [(1, 0.5, 1), (100, 0.05, 1), (1000, 0.01, 50), (30, 0.2, 2**30)]:
        eps = learning.hoeffding_epsilon(n, delta, size)
        assert math.isclose(size * math.exp(-2 * n * eps**2), delta, rel_tol=1e-12)
    assert learning.hoeffding_epsilon(100, 0.05) == pytest.approx(math.sqrt(math.log(20) / 200), rel=1e-14)
    assert learning.hoeffding_epsilon(10, 0.1, 2**3000) > 10  # huge classes are fine (Python ints)


def test_violation_probability_equals_a_direct_binomial_sum_and_obeys_hoeffding():
    for n, eps, p in [(20, 0.2, 0.5), (50, 0.1, 0.3), (101, 0.05, 0.5), (40, 0.25, 0.5)]:
        direct = sum(math.comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(n + 1) if k / n < p - eps)
        assert learning.violation_probability(n, eps, p) == pytest.approx(direct, rel=1e-10, abs=1e-300)
    losses = rng.random((200_000, 30)) < 0.4
    simulated = np.mean(0.4 - losses.mean(axis=1) > 0.1)
    exact = learning.violation_probability(30, 0.1, 0.4)
    assert abs(simulated - exact) < 4 * math.sqrt(exact / 200_000)
    for n in (10, 100, 1000):
        for p in np.linspace(0.05, 0.95, 7):
            eps = learning.hoeffding_epsilon(n, 0.05)
            assert learning.violation_probability(n, eps, p) <= 0.05


def test_dichotomies_of_thresholds_and_intervals_meet_sauers_bound():
    for n in range(1, 9):
        x = rng.normal(size=n)
        thresholds, intervals = learning.dichotomies_1d(x), learning.dichotomies_1d(x, "interval")
        assert len(thresholds) == n + 1 == learning.sauer_bound(n, 1)
        assert len(intervals) == 1 + n * (n + 1) // 2 == learning.sauer_bound(n, 2)
        assert set(np.unique(intervals)) <= {-1, 1} and intervals.shape[1] == n
    assert len(learning.dichotomies_1d(np.array([0.0, 0.0, 1.0]))) == 3  # equal points get equal labels


def test_dichotomies_1d_equal_the_labelings_of_randomly_drawn_predictors():
    x = np.sort(rng.uniform(-1, 1, 5))
    t = rng.uniform(-1.5, 1.5, 20_000)
    a, b = np.sort(rng.uniform(-1.5, 1.5, (2, 20_000)), axis=0)
    sampled_t = {tuple(np.where(x > s, 1, -1)) for s in t}
    sampled_ab = {tuple(np.where((x > lo) & (x < hi), 1, -1)) for lo, hi in zip(a, b, strict=True)}
    assert sampled_t == {tuple(row) for row in learning.dichotomies_1d(x)}
    assert sampled_ab == {tuple(row) for row in learning.dichotomies_1d(x, "interval")}


def test_sauer_bound_and_log_vc_bound_against_direct_evaluation():
    assert learning.sauer_bound(10, 3) == 1 + 10 + 45 + 120
    assert learning.sauer_bound(5, 7) == learning.sauer_bound(5, 5) == 32
    assert learning.sauer_bound(0, 0) == 1
    for n, vc, eps in [(10, 3, 0.5), (40, 2, 0.9), (8, 20, 1.0), (200, 5, 0.3)]:
        growth = min(2**n, sum(math.comb(n, i) for i in range(vc + 1)))
        direct = 8 * growth * math.exp(-n * eps**2 / 32)
        assert math.exp(learning.log_vc_bound(n, vc, eps)) == pytest.approx(direct, rel=1e-12)
    exact = (
        math.log(8 * learning.sauer_bound(5000, 300)) - 5000 * 0.2**2 / 32
    )  # the log-space sum for VC > 100
    assert learning.log_vc_bound(5000, 300, 0.2) == pytest.approx(exact, rel=1e-12)
    assert learning.log_vc_bound(60_000, 10**6, 1.0) > 0
    assert learning.log_vc_bound(200_000, 3, 0.1) < math.log(0.05)


def test_rademacher_linear_equals_the_exact_average_over_all_sign_vectors():
    X = rng.normal(size=(10, 3)) * rng.uniform(0.2, 3, size=(10, 1))
    signs = np.array(list(itertools.product([-1.0, 1.0], repeat=10)))
    exact = 2.0 * np.linalg.norm(signs @ X, axis=1).mean() / 10
    estimate = learning.rademacher_linear(X, B=2.0, n_mc=20_000, rng=1)
    assert abs(estimate.mean - exact) < 4 * estimate.stderr
    root_sum = np.sqrt(np.sum(X**2))
    assert 2.0 * root_sum / (np.sqrt(2) * 10) <= exact <= 2.0 * root_sum / 10


def test_rademacher_exact_against_a_loop_and_known_classes():
    A = rng.normal(size=(4, 6))
    loop = np.mean([max(np.dot(s, a) for a in A) / 6 for s in itertools.product([-1, 1], repeat=6)])
    assert learning.rademacher_exact(A) == pytest.approx(loop, rel=1e-12)
    every_labeling = np.array(list(itertools.product([-1.0, 1.0], repeat=7)))
    assert learning.rademacher_exact(every_labeling) == pytest.approx(1.0)
    assert learning.rademacher_exact(rng.normal(size=(1, 8))) == pytest.approx(0.0, abs=1e-12)
    big = np.sign(rng.normal(size=(3, 15)))  # more than one chunk of 2^14 sign vectors
    loop = np.mean([(np.array(s) @ big.T).max() / 15 for s in itertools.product([-1, 1], repeat=15)])
    assert learning.rademacher_exact(big) == pytest.approx(loop, rel=1e-12)


def test_massart_bound_formula_and_that_it_bounds_the_exact_value():
    for k, n in [(2, 5), (10, 8), (40, 12)]:
        A = rng.normal(size=(k, n))
        bound = learning.massart_bound(A)
        assert bound == pytest.approx(np.linalg.norm(A, axis=1).max() * math.sqrt(2 * math.log(k)) / n)
        assert learning.rademacher_exact(A) <= bound


# ----------------------------------------------------------------------------- bad input

BAD_INPUT = [  # (call, error, message)
    (lambda: learning.generalisation_gap_curve([1, 10]), ValueError, "ns entries must be an int in [2, inf)"),
    (lambda: learning.generalisation_gap_curve([10], lr=0.0), ValueError, "lr must be a finite number"),
    (lambda: learning.hoeffding_epsilon(0, 0.05), ValueError, "n must be an int in [1, inf)"),
    (lambda: learning.hoeffding_epsilon(10, 1.0), ValueError, "delta must be a finite number in (0, 1)"),
    (lambda: learning.hoeffding_epsilon(10, 0.1, 0), ValueError, "class_size must be an int in [1, inf)"),
    (lambda: learning.violation_probability(10, 0.1, 1.5), ValueError, "p must be a finite number in [0, 1]"),
    (lambda: learning.dichotomies_1d(np.ones((2, 2))), ValueError, "x must have shape (any,)"),
    (lambda: learning.dichotomies_1d(np.ones(3), "rectangle"), ValueError, "kind must be one of"),
    (lambda: learning.sauer_bound(5, -1), ValueError, "vc must be an int in [0, inf)"),
    (lambda: learning.log_vc_bound(10, 2, 0.0), ValueError, "eps must be a finite number in (0, inf)"),
    (lambda: learning.rademacher_linear(np.ones(3)), ValueError, "X must have shape (any, any)"),
    (lambda: learning.rademacher_linear(np.ones((3, 2)), B=-1.0), ValueError, "B must be a finite number"),
    (lambda: learning.rademacher_exact(np.ones((2, 21))), ValueError, "at most 20 columns"),
    (lambda: learning.massart_bound(np.ones(4)), ValueError, "A must have shape (any, any)"),
]  # fmt: skip


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
