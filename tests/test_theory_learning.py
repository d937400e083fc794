"""Section 9.4: learning theory (Hoeffding's epsilon, exact binomial tails, growth functions, Sauer's lemma, the
VC bound, Rademacher complexities) and bias, variance and double descent, each against a direct computation
(math.comb, enumeration of all sign vectors, scipy, scikit-learn, torch) or a closed form."""

import itertools
import math

import numpy as np
import pytest
import torch
from scipy.special import eval_legendre
from sklearn.linear_model import Ridge
from sklearn.neural_network import MLPClassifier

from dlnotes import theory

from conftest import bad_input_test

rng = np.random.default_rng(94)


# ----------------------------------------------------------------------------- PAC, VC, Rademacher


def test_generalisation_gap_curve_is_reproducible_and_fits_small_sets():
    kwargs = {"hidden": 32, "steps": 200, "n_test": 500, "progress": False}
    curve = theory.generalisation_gap_curve([20, 100], repeats=1, rng=3, **kwargs)
    again = theory.generalisation_gap_curve([20, 100], repeats=1, rng=3, **kwargs)
    assert curve.train_error.shape == curve.test_error.shape == (2, 1)
    assert np.array_equal(curve.train_error, again.train_error)
    assert np.array_equal(curve.test_error, again.test_error)
    assert np.all(curve.train_error[0] <= 0.1)  # 20 points are (nearly) memorised
    assert np.all((curve.test_error > 0.02) & (curve.test_error < 0.5))  # noise 0.3: not perfect, not chance


def test_hoeffding_epsilon_solves_the_exponential_tail():
    for n, delta, size in [(1, 0.5, 1), (100, 0.05, 1), (1000, 0.01, 50), (30, 0.2, 2**30)]:
        eps = theory.hoeffding_epsilon(n, delta, size)
        assert math.isclose(size * math.exp(-2 * n * eps**2), delta, rel_tol=1e-12)
    assert theory.hoeffding_epsilon(100, 0.05) == pytest.approx(math.sqrt(math.log(20) / 200), rel=1e-14)
    assert theory.hoeffding_epsilon(10, 0.1, 2**3000) > 10  # huge classes are fine (Python ints)


def test_violation_probability_equals_a_direct_binomial_sum_and_obeys_hoeffding():
    for n, eps, p in [(20, 0.2, 0.5), (50, 0.1, 0.3), (101, 0.05, 0.5), (40, 0.25, 0.5)]:
        direct = sum(math.comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(n + 1) if k / n < p - eps)
        assert theory.violation_probability(n, eps, p) == pytest.approx(direct, rel=1e-10, abs=1e-300)
    losses = rng.random((200_000, 30)) < 0.4
    simulated = np.mean(0.4 - losses.mean(axis=1) > 0.1)
    exact = theory.violation_probability(30, 0.1, 0.4)
    assert abs(simulated - exact) < 4 * math.sqrt(exact / 200_000)
    for n in (10, 100, 1000):
        for p in np.linspace(0.05, 0.95, 7):
            eps = theory.hoeffding_epsilon(n, 0.05)
            assert theory.violation_probability(n, eps, p) <= 0.05


def test_dichotomies_of_thresholds_and_intervals_meet_sauers_bound():
    for n in range(1, 9):
        x = rng.normal(size=n)
        thresholds, intervals = theory.dichotomies_1d(x), theory.dichotomies_1d(x, "interval")
        assert len(thresholds) == n + 1 == theory.sauer_bound(n, 1)
        assert len(intervals) == 1 + n * (n + 1) // 2 == theory.sauer_bound(n, 2)
        assert set(np.unique(intervals)) <= {-1, 1} and intervals.shape[1] == n
    assert len(theory.dichotomies_1d(np.array([0.0, 0.0, 1.0]))) == 3  # equal points get equal labels


def test_dichotomies_1d_equal_the_labelings_of_randomly_drawn_predictors():
    x = np.sort(rng.uniform(-1, 1, 5))
    t = rng.uniform(-1.5, 1.5, 20_000)
    a, b = np.sort(rng.uniform(-1.5, 1.5, (2, 20_000)), axis=0)
    sampled_t = {tuple(np.where(x > s, 1, -1)) for s in t}
    sampled_ab = {tuple(np.where((x > lo) & (x < hi), 1, -1)) for lo, hi in zip(a, b, strict=True)}
    assert sampled_t == {tuple(row) for row in theory.dichotomies_1d(x)}
    assert sampled_ab == {tuple(row) for row in theory.dichotomies_1d(x, "interval")}


def test_sauer_bound_and_log_vc_bound_against_direct_evaluation():
    assert theory.sauer_bound(10, 3) == 1 + 10 + 45 + 120
    assert theory.sauer_bound(5, 7) == theory.sauer_bound(5, 5) == 32
    assert theory.sauer_bound(0, 0) == 1
    for n, vc, eps in [(10, 3, 0.5), (40, 2, 0.9), (8, 20, 1.0), (200, 5, 0.3)]:
        growth = min(2**n, sum(math.comb(n, i) for i in range(vc + 1)))
        direct = 8 * growth * math.exp(-n * eps**2 / 32)
        assert math.exp(theory.log_vc_bound(n, vc, eps)) == pytest.approx(direct, rel=1e-12)
    exact = math.log(8 * theory.sauer_bound(5000, 300)) - 5000 * 0.2**2 / 32  # the log-space sum for VC > 100
    assert theory.log_vc_bound(5000, 300, 0.2) == pytest.approx(exact, rel=1e-12)
    assert theory.log_vc_bound(60_000, 10**6, 1.0) > 0
    assert theory.log_vc_bound(200_000, 3, 0.1) < math.log(0.05)


def test_rademacher_linear_equals_the_exact_average_over_all_sign_vectors():
    X = rng.normal(size=(10, 3)) * rng.uniform(0.2, 3, size=(10, 1))
    signs = np.array(list(itertools.product([-1.0, 1.0], repeat=10)))
    exact = 2.0 * np.linalg.norm(signs @ X, axis=1).mean() / 10
    estimate = theory.rademacher_linear(X, B=2.0, n_mc=20_000, rng=1)
    assert abs(estimate.mean - exact) < 4 * estimate.stderr
    root_sum = np.sqrt(np.sum(X**2))
    assert 2.0 * root_sum / (np.sqrt(2) * 10) <= exact <= 2.0 * root_sum / 10


def test_rademacher_exact_against_a_loop_and_known_classes():
    A = rng.normal(size=(4, 6))
    loop = np.mean([max(np.dot(s, a) for a in A) / 6 for s in itertools.product([-1, 1], repeat=6)])
    assert theory.rademacher_exact(A) == pytest.approx(loop, rel=1e-12)
    every_labeling = np.array(list(itertools.product([-1.0, 1.0], repeat=7)))
    assert theory.rademacher_exact(every_labeling) == pytest.approx(1.0)
    assert theory.rademacher_exact(rng.normal(size=(1, 8))) == pytest.approx(0.0, abs=1e-12)
    big = np.sign(rng.normal(size=(3, 15)))  # more than one chunk of 2^14 sign vectors
    loop = np.mean([(np.array(s) @ big.T).max() / 15 for s in itertools.product([-1, 1], repeat=15)])
    assert theory.rademacher_exact(big) == pytest.approx(loop, rel=1e-12)


def test_massart_bound_formula_and_that_it_bounds_the_exact_value():
    for k, n in [(2, 5), (10, 8), (40, 12)]:
        A = rng.normal(size=(k, n))
        bound = theory.massart_bound(A)
        assert bound == pytest.approx(np.linalg.norm(A, axis=1).max() * math.sqrt(2 * math.log(k)) / n)
        assert theory.rademacher_exact(A) <= bound


# ----------------------------------------------------------------------------- bias, variance, double descent


def test_legendre_features_equal_scipys_legendre_polynomials():
    x = rng.uniform(-1, 1, 50)
    Phi = theory.legendre_features(x, 6)
    assert Phi.shape == (50, 7)
    assert np.allclose(Phi, np.stack([eval_legendre(k, x) for k in range(7)], axis=1), atol=1e-13)


def test_risk_decomposition_adds_up_and_has_the_closed_form_approximation_error():
    result = theory.risk_decomposition(lambda x: np.sin(np.pi * x), [1, 2, 3, 5], sets=50, rng=0)
    assert np.allclose(result.excess, result.estimation + result.approximation, rtol=1e-9)  # Pythagoras
    assert np.all(np.diff(result.approximation) <= 1e-12)  # nested classes
    # the best line through sin(pi x) on U[-1, 1] has slope 3/pi: error 1/2 - 3/pi^2
    assert result.approximation[0] == pytest.approx(0.5 - 3 / np.pi**2, rel=2e-3)
    assert result.approximation[1] == pytest.approx(result.approximation[0], rel=1e-9)  # x^2 does not help


def test_bias_variance_terms_in_closed_form_for_the_mean_and_by_simulation():
    x = np.linspace(-1, 1, 8)
    f_star, f_test = x**2, np.array([0.3, 0.9])
    constant = theory.bias_variance_terms(np.ones((8, 1)), f_star, np.ones((2, 1)), f_test, 0.5)
    assert np.allclose(constant.bias, f_star.mean() - f_test) and np.allclose(constant.variance, 0.5 / 8)
    Phi, Phi_test = rng.normal(size=(15, 4)), rng.normal(size=(6, 4))
    f_star, f_test = rng.normal(size=15), rng.normal(size=6)
    terms = theory.bias_variance_terms(Phi, f_star, Phi_test, f_test, 0.3)
    fits = np.array(
        [
            Phi_test @ np.linalg.solve(Phi.T @ Phi, Phi.T @ (f_star + np.sqrt(0.3) * rng.normal(size=15)))
            for _ in range(20_000)
        ]
    )
    se = np.sqrt(terms.variance / 20_000)
    assert np.all(np.abs(fits.mean(axis=0) - f_test - terms.bias) < 5 * se)
    assert np.allclose(fits.var(axis=0), terms.variance, rtol=0.05)


def test_bias_variance_mc_matches_the_terms_and_the_mse_is_their_sum_plus_noise():
    Phi, Phi_test = theory.legendre_features(np.linspace(-1, 1, 20), 3), rng.normal(size=(5, 4))
    f_star, f_test = np.sin(np.pi * np.linspace(-1, 1, 20)), rng.normal(size=5)
    terms = theory.bias_variance_terms(Phi, f_star, Phi_test, f_test, 0.25)
    mc = theory.bias_variance_mc(Phi, f_star, Phi_test, f_test, 0.25, sets=40_000, rng=2)
    assert mc.fits.shape == (40_000, 5)
    assert np.allclose(mc.variance, terms.variance, rtol=0.03)
    assert np.all(np.abs(np.sqrt(mc.bias2) - np.abs(terms.bias)) < 5 * np.sqrt(terms.variance / 40_000))
    assert np.allclose(mc.mse, terms.bias**2 + terms.variance + 0.25, rtol=0.03)


def test_relu_features_equal_a_torch_relu_layer():
    X, W = rng.normal(size=(7, 3)), rng.normal(size=(11, 3))
    layer = torch.nn.Linear(3, 11, bias=False, dtype=torch.float64)
    layer.weight.data = torch.tensor(W)
    expected = torch.relu(layer(torch.tensor(X))).detach().numpy() / np.sqrt(11)
    assert np.allclose(theory.relu_features(X, W), expected, atol=1e-14)


def test_random_features_curve_against_direct_fits_with_the_same_weights():
    X, y = rng.normal(size=(12, 3)), rng.normal(size=12)
    X_test, y_test = rng.normal(size=(30, 3)), rng.normal(size=30)
    ps = np.array([3, 12, 40])
    curve = theory.random_features_curve(X, y, X_test, y_test, ps, draws=1, rng=7)
    ridge = theory.random_features_curve(X, y, X_test, y_test, ps, draws=1, ridge=0.5, rng=7)
    W = np.random.default_rng(7).standard_normal((40, 3)) / np.sqrt(3)
    for j, p in enumerate(ps):
        Phi, Phi_test = theory.relu_features(X, W[:p]), theory.relu_features(X_test, W[:p])
        a = np.linalg.lstsq(Phi, y, rcond=None)[0]  # the minimum-norm least-squares solution
        assert curve.test_mse[j] == pytest.approx(np.mean((Phi_test @ a - y_test) ** 2), rel=1e-8)
        fit = Ridge(alpha=0.5, fit_intercept=False).fit(Phi, y)
        assert ridge.test_mse[j] == pytest.approx(np.mean((fit.predict(Phi_test) - y_test) ** 2), rel=1e-8)
    assert curve.train_mse[1] < 1e-20 and curve.train_mse[2] < 1e-20  # p >= n interpolates


def test_max_margin_direction_beats_every_direction_on_a_fine_grid():
    X = rng.normal(size=(40, 2))
    X = X[np.abs(X @ np.array([1.0, 0.6])) > 0.2]  # separable through the origin with a margin
    y = np.sign(X @ np.array([1.0, 0.6])).astype(int)
    w = theory.max_margin_direction(X, y)
    angles = np.linspace(0, 2 * np.pi, 200_000, endpoint=False)
    U = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    best = (y[:, None] * (X @ U.T)).min(axis=0).max()
    assert np.linalg.norm(w) == pytest.approx(1.0) and (y * (X @ w)).min() >= best - 1e-6


def test_fit_until_memorised_stops_at_the_target_and_repeats_sklearns_loop():
    X, y = rng.normal(size=(60, 5)), rng.integers(0, 3, size=60)
    run = theory.fit_until_memorised(X, y, X, y, hidden=64, target=0.9, max_epochs=300, rng=5, progress=False)
    assert run.epochs == len(run.history) and run.train_accuracy >= 0.9 > run.history[:-1].max(initial=0)
    seed = int(np.random.default_rng(5).integers(2**31))
    model, history = MLPClassifier(hidden_layer_sizes=(64,), learning_rate_init=1e-2, random_state=seed), []
    for _ in range(run.epochs):
        model.partial_fit(X, y, classes=np.arange(3))
        history.append(model.score(X, y))
    assert np.array_equal(history, run.history) and run.test_accuracy == run.train_accuracy


BAD_INPUT = [  # (call, error, message)
    (lambda: theory.generalisation_gap_curve([1, 10]), ValueError, "ns entries must be an int in [2, inf)"),
    (lambda: theory.generalisation_gap_curve([10], lr=0.0), ValueError, "lr must be a finite number"),
    (lambda: theory.hoeffding_epsilon(0, 0.05), ValueError, "n must be an int in [1, inf)"),
    (lambda: theory.hoeffding_epsilon(10, 1.0), ValueError, "delta must be a finite number in (0, 1)"),
    (lambda: theory.hoeffding_epsilon(10, 0.1, 0), ValueError, "class_size must be an int in [1, inf)"),
    (lambda: theory.violation_probability(10, 0.1, 1.5), ValueError, "p must be a finite number in [0, 1]"),
    (lambda: theory.dichotomies_1d(np.ones((2, 2))), ValueError, "x must have shape (any,)"),
    (lambda: theory.dichotomies_1d(np.ones(3), "rectangle"), ValueError, "kind must be one of"),
    (lambda: theory.sauer_bound(5, -1), ValueError, "vc must be an int in [0, inf)"),
    (lambda: theory.log_vc_bound(10, 2, 0.0), ValueError, "eps must be a finite number in (0, inf)"),
    (lambda: theory.rademacher_linear(np.ones(3)), ValueError, "X must have shape (any, any)"),
    (lambda: theory.rademacher_linear(np.ones((3, 2)), B=-1.0), ValueError, "B must be a finite number"),
    (lambda: theory.rademacher_exact(np.ones((2, 21))), ValueError, "at most 20 columns"),
    (lambda: theory.massart_bound(np.ones(4)), ValueError, "A must have shape (any, any)"),
    (lambda: theory.legendre_features(np.ones(3), 2.0), TypeError, "degree must be an int"),
    (lambda: theory.risk_decomposition(3.0, [1]), TypeError, "f_star must be callable"),
    (lambda: theory.risk_decomposition(lambda x: x[:1], [1]), ValueError, "f_star must map an array of shape (m,)"),
    (lambda: theory.bias_variance_terms(np.ones((4, 2)), np.ones(3), np.ones((2, 2)), np.ones(2), 1.0), ValueError, "f_star must have shape (4,)"),
    (lambda: theory.bias_variance_terms(np.ones((4, 2)), np.ones(4), np.ones((2, 3)), np.ones(2), 1.0), ValueError, "Phi_test must have shape (any, 2)"),
    (lambda: theory.bias_variance_mc(np.ones((4, 2)), np.ones(4), np.ones((2, 2)), np.ones(2), -1.0), ValueError, "noise_var must be a finite number in [0, inf)"),
    (lambda: theory.relu_features(np.ones((3, 2)), np.ones((4, 3))), ValueError, "W must have shape (any, 2)"),
    (lambda: theory.random_features_curve(np.ones((3, 2)), np.ones(3), np.ones((2, 2)), np.ones(2), [0]), ValueError, "ps entries must be an int in [1, inf)"),
    (lambda: theory.random_features_curve(np.ones((3, 2)), np.ones(3), np.ones((2, 2)), np.ones(2), [2], ridge=-1.0), ValueError, "ridge must be a finite number in [0, inf)"),
    (lambda: theory.max_margin_direction(np.array([[1.0], [2.0]]), np.array([1, -1])), ValueError, "linearly separable"),
    (lambda: theory.max_margin_direction(np.ones((2, 2)), np.array([0, 1])), ValueError, "y must hold labels in [-1, 1]"),
    (lambda: theory.fit_until_memorised(np.ones((4, 2)), np.zeros(4), np.ones((2, 3)), np.zeros(2)), ValueError, "X_test must have shape (any, 2)"),
    (lambda: theory.fit_until_memorised(np.ones((4, 2)), np.zeros(4), np.ones((2, 2)), np.zeros(2), target=1.5), ValueError, "target must be a finite number in [0, 1]"),
]  # fmt: skip


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
