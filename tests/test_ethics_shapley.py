"""Section 11.6 (attribution by removal): Shapley values against the average over all orderings of the players,
KernelSHAP against exact enumeration, SHAP of a linear model against its closed form, SAGE and the
missing-information attribution against direct loops, the predictive utility against scikit-learn's log-loss."""

import itertools
import math

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss

from dlnotes.ethics.shapley import (
    banzhaf_exact,
    interventional_value,
    kernel_shap,
    logistic_risk,
    missing_info,
    predictive_utility,
    redundant_logistic_data,
    sage_values,
    shap_values,
    shapley_exact,
    shapley_weight,
)

from conftest import bad_input_test

rng = np.random.default_rng(21)


def random_game(d):
    table = rng.normal(size=2**d)

    def v(S):
        return float(table[sum(1 << k for k in S)])

    return v


def by_orderings(v, d):
    """The Shapley value as the average marginal contribution over all d! orderings of the players."""
    phi = np.zeros(d)
    for order in itertools.permutations(range(d)):
        before = []
        for j in order:
            phi[j] += v(tuple(sorted([*before, j]))) - v(tuple(sorted(before)))
            before.append(j)
    return phi / math.factorial(d)


def test_shapley_exact_is_the_average_over_orderings_and_satisfies_the_axioms():
    for d in (1, 2, 3, 5):
        v = random_game(d)
        phi = shapley_exact(v, d)
        assert np.allclose(phi, by_orderings(v, d), atol=1e-12)
        assert phi.sum() == pytest.approx(v(tuple(range(d))) - v(()), abs=1e-12)  # efficiency
    v, w = random_game(4), random_game(4)
    assert np.allclose(  # linearity
        shapley_exact(lambda S: 2 * v(S) - w(S), 4), 2 * shapley_exact(v, 4) - shapley_exact(w, 4)
    )

    def with_null_and_twins(S):  # player 3 adds nothing; players 0 and 1 are interchangeable
        S = set(S) - {3}
        return v(tuple(sorted(S | ({0, 1} if S & {0, 1} else set()))))

    phi = shapley_exact(with_null_and_twins, 4)
    assert phi[3] == pytest.approx(0, abs=1e-12) and phi[0] == pytest.approx(phi[1], abs=1e-12)


def test_unanimity_games_shapley_shares_equally_and_banzhaf_loses_efficiency():
    d = 4
    for size in range(1, d + 1):
        for T in itertools.combinations(range(d), size):

            def unanimity(S, T=T):
                return float(set(T) <= set(S))

            expected = np.array([1 / size if j in T else 0.0 for j in range(d)])
            assert np.allclose(shapley_exact(unanimity, d), expected, atol=1e-12)
            banzhaf = banzhaf_exact(unanimity, d)
            assert np.allclose(banzhaf, [0.5 ** (size - 1) if j in T else 0.0 for j in range(d)], atol=1e-12)
            assert (banzhaf.sum() < 1 - 0.2) == (size >= 3)


def test_banzhaf_exact_is_the_mean_marginal_contribution_over_all_coalitions():
    v = random_game(4)
    for j in range(4):
        others = [k for k in range(4) if k != j]
        contributions = [
            v(tuple(sorted((*S, j)))) - v(S)
            for size in range(4)
            for S in itertools.combinations(others, size)
        ]
        assert banzhaf_exact(v, 4)[j] == pytest.approx(np.mean(contributions), abs=1e-12)


def test_shapley_weight_is_the_probability_that_exactly_S_precedes_j():
    d = 5
    for s in range(d):
        orders = list(itertools.permutations(range(d)))
        S, j = set(range(s)), d - 1  # a coalition of size s not containing j
        hits = sum(set(order[: order.index(j)]) == S for order in orders)
        assert shapley_weight(s, d) == pytest.approx(hits / len(orders), abs=1e-15)
    assert sum(math.comb(d - 1, s) * shapley_weight(s, d) for s in range(d)) == pytest.approx(1.0)


def test_kernel_shap_solves_to_the_shapley_values():
    for d in (1, 2, 4, 6):
        v = random_game(d)
        assert np.allclose(kernel_shap(v, d), shapley_exact(v, d), atol=1e-10)


def test_shap_values_of_a_linear_model_and_of_a_nonlinear_one():
    w, b = rng.normal(size=4), 0.3
    X, X_background = rng.normal(size=(6, 4)), rng.normal(size=(30, 4)) + 1.0
    phi = shap_values(lambda Z: Z @ w + b, X, X_background)
    assert np.allclose(phi, w * (X - X_background.mean(axis=0)), atol=1e-12)

    def f(Z):
        return np.tanh(Z[:, 0] * Z[:, 1]) + Z[:, 2] ** 2

    phi = shap_values(f, X, X_background)
    for x, phi_x in zip(X, phi, strict=True):

        def v(S, x=x):  # the interventional value by a loop over the background rows
            rows = []
            for z in X_background:
                z = z.copy()
                z[list(S)] = x[list(S)]
                rows.append(f(z[None])[0])
            return float(np.mean(rows))

        assert np.allclose(phi_x, shapley_exact(v, 4), atol=1e-12)
        assert v((0, 2)) == pytest.approx(interventional_value(f, x, (0, 2), X_background), abs=1e-12)
        assert phi_x.sum() == pytest.approx(f(x[None])[0] - f(X_background).mean(), abs=1e-12)


def test_sage_values_are_the_shapley_values_of_the_negative_log_loss():
    data = redundant_logistic_data(400, rng=3)
    model = LogisticRegression().fit(data.X, data.y)

    def f(Z):
        return model.predict_proba(Z)[:, 1]

    X, y, background = data.X[:40], data.y[:40], data.X[300:320]

    def v(S):
        p = [interventional_value(f, x, S, background) for x in X]
        return -log_loss(y, p, labels=[0, 1])

    phi = sage_values(f, X, y, background)
    assert np.allclose(phi, shapley_exact(v, 4), atol=1e-10)
    constant = np.full(len(y), f(background).mean())
    assert phi.sum() == pytest.approx(log_loss(y, constant) - log_loss(y, f(X)), abs=1e-10)


def test_missing_info_against_a_loop_and_a_closed_form():
    def f(Z):
        return 2 * Z[:, 0] + Z[:, 1] ** 2 + Z[:, 0] * Z[:, 2]

    x, X_ref = rng.normal(size=3), rng.normal(size=(50, 3))
    for j in range(3):
        replaced = [f(np.array([[*x[:j], r, *x[j + 1 :]]]))[0] for r in X_ref[:, j]]
        assert missing_info(f, x, j, X_ref) == pytest.approx(f(x[None])[0] - np.mean(replaced), abs=1e-12)
    expected = 2 * (x[0] - X_ref[:, 0].mean()) + x[2] * (x[0] - X_ref[:, 0].mean())
    assert missing_info(f, x, 0, X_ref) == pytest.approx(expected, abs=1e-12)


def test_redundant_data_and_predictive_utility():
    data, test = redundant_logistic_data(20000, rng=1), redundant_logistic_data(4000, rng=2)
    assert data.X.shape == (20000, 4) and np.array_equal(data.X[:, 2], data.X[:, 3])
    assert set(np.unique(data.y)) == {0, 1}
    coef = LogisticRegression(C=1e6).fit(data.X[:, :3], data.y).coef_[0]
    assert np.allclose(coef, [2, 0, 2], atol=0.15)  # logit 2 x_a + 2 x_b, x_c irrelevant
    without_a = LogisticRegression().fit(data.X[:, 1:], data.y).predict_proba(test.X[:, 1:])[:, 1]
    full = LogisticRegression().fit(data.X, data.y).predict_proba(test.X)[:, 1]
    result = predictive_utility(data.X, data.y, 0, test.X, test.y)
    assert result.risk_with == pytest.approx(log_loss(test.y, full), abs=1e-10)
    assert result.risk_without == pytest.approx(log_loss(test.y, without_a), abs=1e-10)
    assert result.utility == pytest.approx(result.risk_without - result.risk_with)
    constant = np.full(len(test.y), data.y.mean())
    risk_empty = logistic_risk(data.X, data.y, test.X, test.y, features=[])
    assert risk_empty == pytest.approx(log_loss(test.y, constant), abs=1e-12)


BAD_INPUT = [  # (call, error, message)
    (lambda: redundant_logistic_data(0), ValueError, "n must be an int in [1, inf)"),
    (lambda: missing_info(lambda Z: Z[:, 0], np.ones(3), 3, np.ones((5, 3))), ValueError, "j must be an int in [0, 2]"),
    (lambda: missing_info(lambda Z: Z[:, 0], np.ones(3), 0, np.ones((5, 2))), ValueError, "X_ref must have shape (any, 3)"),
    (lambda: missing_info(lambda Z: Z, np.ones(3), 0, np.ones((5, 3))), ValueError, "f must map rows (N, d) to one number per row"),
    (lambda: predictive_utility(np.ones((4, 2)), [0, 1, 2, 0], 0, np.ones((2, 2)), [0, 1]), ValueError, "y must hold labels in [0, 1]"),
    (lambda: logistic_risk(np.ones((4, 2)), [0, 1, 1, 0], np.ones((2, 2)), [0, 1], features=[2]), ValueError, "features must be an int in [0, 1]"),
    (lambda: shapley_exact("v", 3), TypeError, "value_fn must be callable"),
    (lambda: shapley_exact(lambda S: 1.0, 0), ValueError, "d must be an int in [1, 20]"),
    (lambda: shapley_exact(lambda S: "high", 2), TypeError, "value_fn(S) must be a real number"),
    (lambda: shapley_weight(3, 3), ValueError, "s must be an int in [0, 2]"),
    (lambda: kernel_shap(lambda S: math.nan, 2), ValueError, "value_fn(S) must be a finite number"),
    (lambda: interventional_value(lambda Z: Z[:, 0], np.ones(2), (5,), np.ones((3, 2))), ValueError, "S must be an int in [0, 1]"),
    (lambda: shap_values(lambda Z: Z[:, 0], np.ones(3), np.ones((3, 3))), ValueError, "X must have shape (any, any)"),
    (lambda: sage_values(lambda Z: Z[:, 0] + 2, np.ones((2, 2)), [0, 1], np.ones((3, 2))), ValueError, "f must return probabilities"),
]  # fmt: skip


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
