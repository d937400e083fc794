"""Section 10.4 of dlnotes.generative: the Bernoulli MADE against torch's Bernoulli and an exact sum over all
binary vectors, chain-rule sampling of a discrete table against its probabilities, and the linear Gaussian AR
model's sampler, least-squares fit and likelihood against explicit loops, scipy and the covariance of the
triangular map."""

import itertools

import numpy as np
import torch
from scipy import stats

from dlnotes.generative import autoregressive

from conftest import bad_input_test
from test_generative_common import randomise

rng = np.random.default_rng(104)


def random_made(d, seed=0, std=0.7):
    return randomise(autoregressive.BernoulliMADE(d, hidden=(12,)).double(), std, seed)


def test_bernoulli_made_log_prob_is_a_normalised_distribution():
    made = random_made(4)
    X = torch.tensor(list(itertools.product([0.0, 1.0], repeat=4)), dtype=torch.float64)
    log_p = made.log_prob(X)
    expected = torch.distributions.Bernoulli(logits=made.logits(X)).log_prob(X).sum(1)
    assert torch.allclose(log_p, expected, atol=1e-12)
    assert abs(log_p.exp().sum().item() - 1) < 1e-12


def test_bernoulli_made_samples_follow_its_probabilities():
    made = random_made(3, seed=1)
    X = torch.tensor(list(itertools.product([0.0, 1.0], repeat=3)), dtype=torch.float64)
    probs = made.log_prob(X).exp().detach().numpy()
    samples = made.sample(40_000, rng=5)
    codes = (samples @ np.array([4, 2, 1])).astype(int)
    freq = np.bincount(codes, minlength=8) / len(samples)
    se = np.sqrt(probs * (1 - probs) / len(samples))
    assert np.all(np.abs(freq - probs) < 5 * se + 1e-4)
    assert np.array_equal(samples, made.sample(40_000, rng=5))


def test_sample_discrete_chain_matches_the_table():
    P = rng.dirichlet(np.ones(12)).reshape(2, 3, 2)
    X = autoregressive.sample_discrete_chain(P, 60_000, rng=2)
    counts = np.zeros(P.shape)
    np.add.at(counts, tuple(X.T), 1)
    assert stats.chisquare(counts.ravel(), 60_000 * P.ravel()).pvalue > 1e-3
    one_d = autoregressive.sample_discrete_chain(np.array([0.2, 0.8]), 20_000, rng=0)
    assert one_d.shape == (20_000, 1) and abs(one_d.mean() - 0.8) < 0.02


def ar_loglik_loop(x, theta, sigma2):
    total = 0.0
    for i in range(len(x)):
        mean = sum(theta[k] * x[i - 1 - k] for k in range(len(theta)) if i - 1 - k >= 0)
        total += stats.norm.logpdf(x[i], mean, np.sqrt(sigma2))
    return total


def test_ar_log_likelihood_against_a_loop_and_the_gaussian_of_the_triangular_map():
    theta, sigma2 = np.array([0.5, -0.2, 0.1]), 0.7
    x = rng.normal(size=40)
    assert abs(autoregressive.ar_log_likelihood(x, theta, sigma2) - ar_loglik_loop(x, theta, sigma2)) < 1e-10
    L = np.eye(40) - sum(theta[k] * np.eye(40, k=-(k + 1)) for k in range(3))
    Linv = np.linalg.inv(L)
    mvn = stats.multivariate_normal(np.zeros(40), sigma2 * Linv @ Linv.T).logpdf(x)
    assert abs(autoregressive.ar_log_likelihood(x, theta, sigma2) - mvn) < 1e-9


def test_ar_sample_has_the_covariance_of_the_triangular_map():
    theta, sigma2 = np.array([0.6, -0.3]), 1.5
    paths = np.array([autoregressive.ar_sample(theta, sigma2, 3, rng=r) for r in range(20_000)])
    L = np.eye(3) - theta[0] * np.eye(3, k=-1) - theta[1] * np.eye(3, k=-2)
    Linv = np.linalg.inv(L)
    np.testing.assert_allclose(np.cov(paths.T), sigma2 * Linv @ Linv.T, atol=0.08)
    long = autoregressive.ar_sample(theta, sigma2, 50, rng=1, burn_in=10)
    assert long.shape == (50,) and np.array_equal(
        long, autoregressive.ar_sample(theta, sigma2, 50, rng=1, burn_in=10)
    )


def test_fit_ar_is_least_squares_on_the_lagged_values():
    x = autoregressive.ar_sample([0.4, 0.3], 1.0, 3000, rng=3, burn_in=100)
    fit = autoregressive.fit_ar(x, 2)
    A = np.column_stack([x[1:-1], x[:-2]])  # (x_{i-1}, x_{i-2}) for i = 3..n
    theta_ref = np.linalg.lstsq(A, x[2:], rcond=None)[0]
    np.testing.assert_allclose(fit.theta, theta_ref, atol=1e-12)
    assert abs(fit.sigma2 - np.mean((x[2:] - A @ theta_ref) ** 2)) < 1e-12
    assert np.abs(fit.theta - [0.4, 0.3]).max() < 0.06


BAD_INPUT = [  # (call, error, message)
    (lambda: autoregressive.BernoulliMADE(0), ValueError, "d must be an int in [1, inf)"),
    (lambda: autoregressive.BernoulliMADE(3).sample(0), ValueError, "n must be an int in [1, inf)"),
    (lambda: autoregressive.sample_discrete_chain([[0.5, 0.6]], 3), ValueError, "P must be non-negative and sum to 1"),
    (lambda: autoregressive.sample_discrete_chain([0.5, 0.5], 3, rng="a"), TypeError, "rng"),
    (lambda: autoregressive.ar_sample([0.5], -1.0, 10), ValueError, "sigma2 must be"),
    (lambda: autoregressive.ar_sample([0.5], 1.0, 10, burn_in=-1), ValueError, "burn_in must be an int in [0, inf)"),
    (lambda: autoregressive.fit_ar(np.ones(4), 2), ValueError, "x must have more than 2 K = 4 values"),
    (lambda: autoregressive.fit_ar(np.ones((4, 2)), 1), ValueError, "x must have shape (any,)"),
    (lambda: autoregressive.ar_log_likelihood(np.ones(5), [[0.5]], 1.0), ValueError, "theta must have shape (any,)"),
]  # fmt: skip


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
