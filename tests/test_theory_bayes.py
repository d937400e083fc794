"""Section 9.2 (dlnotes.theory.bayes): the Gaussian likelihood and the energy against scipy's densities,
importance weights against scipy's softmax, grid quadrature against the closed-form Bayesian linear regression, and
the expected calibration error against a hand count and a loop."""

import numpy as np
from scipy import special, stats

from dlnotes.theory import bayes, common

from conftest import bad_input_test
from test_theory_common import linear_problem

rng = np.random.default_rng(92)


def test_log_likelihood_and_energy_match_scipy_densities():
    X, y, noise_var, prior_var = linear_problem(rng)
    thetas = rng.normal(size=(6, 2))
    predictions = thetas @ X.T
    constant = -0.5 * len(y) * np.log(2 * np.pi * noise_var)
    exact = stats.norm(predictions, np.sqrt(noise_var)).logpdf(y).sum(axis=1)
    assert np.allclose(bayes.log_likelihood(y, predictions, noise_var) + constant, exact, atol=1e-10)
    assert isinstance(bayes.log_likelihood(y, predictions[0], noise_var), float)
    # -log p(theta|S) = E(theta) + c: the difference to the exact Gaussian posterior is one constant
    posterior = common.bayes_linreg(X, y, noise_var, prior_var * np.eye(2))
    log_post = stats.multivariate_normal(posterior.mean, posterior.cov).logpdf(thetas)
    c = log_post + bayes.energy(y, predictions, thetas, noise_var, prior_var)
    assert np.ptp(c) < 1e-9
    # one prior variance per parameter: a diagonal prior covariance
    prior_vars = np.array([0.5, 2.0])
    diagonal = common.bayes_linreg(X, y, noise_var, np.diag(prior_vars))
    c_diag = stats.multivariate_normal(diagonal.mean, diagonal.cov).logpdf(thetas) + bayes.energy(
        y, predictions, thetas, noise_var, prior_vars
    )
    assert np.ptp(c_diag) < 1e-9


def test_importance_weights_are_a_stable_softmax_of_the_log_ratio():
    a, b = rng.normal(size=9) * 4, rng.normal(size=9)
    assert np.allclose(bayes.importance_weights(a, b), special.softmax(a - b), atol=1e-15)
    assert np.allclose(bayes.importance_weights(a), special.softmax(a), atol=1e-15)
    far = bayes.importance_weights(a - 5000.0, b)  # exp(-5000) is 0 in float64; the weights are not
    assert np.allclose(far, special.softmax(a - b), atol=1e-15)


def test_importance_ensemble_on_a_grid_is_the_closed_form_predictive():
    X, y, noise_var, prior_var = linear_problem(rng, n=12, d=1)
    grid = np.linspace(-6, 6, 3001)[:, None]
    x_new = np.array([-2.0, 0.5, 3.0])
    ensemble = bayes.importance_ensemble(
        grid * x_new[None, :], -bayes.energy(y, grid @ X.T, grid, noise_var, prior_var)
    )
    posterior = common.bayes_linreg(X, y, noise_var, prior_var * np.eye(1))
    assert np.allclose(ensemble.mean, x_new * posterior.mean[0], atol=1e-10)
    assert np.allclose(ensemble.var, x_new**2 * posterior.cov[0, 0], atol=1e-10)
    assert np.isclose(ensemble.weights.sum(), 1.0) and 1 < ensemble.ess < len(grid)
    flat = bayes.importance_ensemble(rng.normal(size=(50, 3)), np.zeros(50))
    assert np.isclose(flat.ess, 50.0)


def test_expected_calibration_error_against_a_hand_count_and_a_loop():
    # four predictions in 2 bins: (0, 0.5] holds confidences 0.4 (right) and 0.5 (wrong): |1/2 - 0.45| = 0.05;
    # (0.5, 1] holds 0.7 (right) and 0.9 (wrong): |1/2 - 0.8| = 0.3. ECE = 2/4 * 0.05 + 2/4 * 0.3 = 0.175
    probs = np.array([[0.4, 0.3, 0.3], [0.5, 0.5, 0.0], [0.1, 0.7, 0.2], [0.05, 0.05, 0.9]])
    y = np.array([0, 1, 1, 0])
    result = bayes.expected_calibration_error(probs, y, bins=2)
    assert np.isclose(result.ece, 0.175) and result.counts.tolist() == [2, 2]
    assert np.allclose(result.confidence, [0.45, 0.8]) and np.allclose(result.accuracy, [0.5, 0.5])
    # many random predictions against a loop over the bins
    logits = rng.normal(size=(500, 4)) * 2
    P = special.softmax(logits, axis=1)
    labels = rng.integers(0, 4, size=500)
    ece_loop = 0.0
    for b in range(15):
        inside = (P.max(1) > b / 15) & (P.max(1) <= (b + 1) / 15)
        if inside.any():
            gap = np.mean(P.argmax(1)[inside] == labels[inside]) - P.max(1)[inside].mean()
            ece_loop += inside.mean() * abs(gap)
    assert np.isclose(bayes.expected_calibration_error(P, labels, 15).ece, ece_loop, atol=1e-12)
    # a perfectly calibrated and a perfectly confident, always right classifier
    assert bayes.expected_calibration_error(np.eye(3)[[0, 1, 2, 0]], np.array([0, 1, 2, 0])).ece == 0.0


# ----------------------------------------------------------------------------- bad input

BAD_INPUT = [  # (call, error, message)
    (lambda: bayes.log_likelihood(np.ones(3), np.ones(4), 1.0), ValueError, "predictions must have shape (3,) or (k, 3)"),
    (lambda: bayes.log_likelihood(np.ones(3), np.ones(3), -1.0), ValueError, "noise_var must be a finite number"),
    (lambda: bayes.energy(np.ones(3), np.ones((2, 3)), np.ones((3, 2)), 1.0, 1.0), ValueError, "theta must hold one parameter vector per row"),
    (lambda: bayes.energy(np.ones(3), np.ones(3), np.ones(2), 1.0, np.ones(3)), ValueError, "prior_var must have shape (2,)"),
    (lambda: bayes.energy(np.ones(3), np.ones(3), np.ones(2), 1.0, np.array([1.0, -1.0])), ValueError, "prior_var must hold variances > 0"),
    (lambda: bayes.importance_weights(np.ones(3), np.ones(4)), ValueError, "log_proposal must have shape (3,)"),
    (lambda: bayes.importance_weights([np.nan, 1.0]), ValueError, "log_target must hold finite numbers"),
    (lambda: bayes.importance_ensemble(np.ones((4, 2)), np.zeros(3)), ValueError, "outputs must have one row per weight (3)"),
    (lambda: bayes.expected_calibration_error(np.ones((2, 2)), [0, 1]), ValueError, "probs must hold probabilities"),
    (lambda: bayes.expected_calibration_error(np.eye(2), [0, 2]), ValueError, "y must hold labels in 0..1"),
    (lambda: bayes.expected_calibration_error(np.eye(2), [0, 1], bins=0), ValueError, "bins must be an int in [1, inf)"),
]  # fmt: skip


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
