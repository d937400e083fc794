"""Certified robustness (11.5): the Monte Carlo counts of randomised smoothing against the exact probability of a
linear classifier, the Clopper–Pearson bound against scipy's exact binomial interval, the certified radius against
Cohen et al.'s two-class formula, interval bounds against linear programming and sampling, and the
Lipschitz-margin radius against a direct computation and an attack."""

import math

import numpy as np
import pytest
import torch
from scipy.optimize import linprog
from scipy.stats import binomtest, norm

from dlnotes.ethics.certified import (
    ABSTAIN,
    add_noise,
    certified_accuracy,
    certify,
    clopper_pearson_lower,
    ibp_affine,
    ibp_bounds,
    ibp_certify,
    lipschitz_radius,
    noise_counts,
    smoothed_predict,
    smoothing_radius,
    soft_smoothed,
)
from dlnotes.ethics.common import linear_two_class, mlp, pgd, predict
from dlnotes.training import to_numpy

from conftest import bad_input_test

rng = np.random.default_rng(115)


def _random_mlp(activation=torch.nn.ReLU, d=6, K=4, seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(d, 8), activation(), torch.nn.Linear(8, 8), activation(), torch.nn.Linear(8, K)
    ).double()


def test_noise_counts_follow_the_exact_probability_of_a_linear_classifier():
    w, b, sigma, n = rng.normal(size=5), 0.3, 0.7, 20_000
    X = rng.normal(size=(6, 5)) * 0.5
    counts = noise_counts(linear_two_class(w, b), X, sigma, n, rng=1)
    assert counts.shape == (6, 2) and np.all(counts.sum(axis=1) == n)
    p1 = norm.cdf((X @ w + b) / (sigma * np.linalg.norm(w)))  # P(w^T (x + xi) + b > 0)
    z = (counts[:, 1] / n - p1) / np.sqrt(p1 * (1 - p1) / n)
    assert np.abs(z).max() < 4.5
    assert np.array_equal(counts, noise_counts(linear_two_class(w, b), X, sigma, n, rng=1))  # same seed


def test_smoothed_predict_with_tiny_noise_is_the_base_prediction():
    model = _random_mlp(d=64, K=10)
    X = rng.uniform(size=(20, 64))
    assert np.array_equal(smoothed_predict(model, X, 1e-9, n=5, rng=0), predict(model, X))


def test_clopper_pearson_lower_matches_scipys_exact_interval():
    n, alpha = 200, 0.01
    k = np.array([1, 17, 100, 183, 200])
    ours = clopper_pearson_lower(k, n, alpha)
    # the one-sided bound at level 1 - alpha is the lower end of the two-sided interval at level 1 - 2 alpha
    reference = [binomtest(int(ki), n).proportion_ci(1 - 2 * alpha, method="exact").low for ki in k]
    assert np.allclose(ours, reference, rtol=1e-10, atol=1e-12)
    assert clopper_pearson_lower([0], n, alpha)[0] == 0.0
    assert clopper_pearson_lower([n], n, alpha)[0] == pytest.approx(alpha ** (1 / n), rel=1e-12)


def test_clopper_pearson_covers_the_true_proportion():
    p, n, alpha = 0.8, 50, 0.1
    k = np.random.default_rng(0).binomial(n, p, size=20_000)
    miss = np.mean(clopper_pearson_lower(k, n, alpha) > p)
    assert miss <= alpha  # conservative: at most alpha


def test_smoothing_radius_is_cohens_two_class_formula():
    p, sigma = np.array([0.2, 0.5, 0.51, 0.9, 0.999]), 0.4
    radius = smoothing_radius(p, sigma)
    general = sigma / 2 * (norm.ppf(p) - norm.ppf(1 - p))  # with p_B upper = 1 - p_A lower
    assert np.allclose(radius[p > 0.5], general[p > 0.5], rtol=1e-12)
    assert np.all(radius[p <= 0.5] == 0)


def test_certify_is_sound_and_nearly_tight_for_a_linear_classifier():
    w, b, sigma = rng.normal(size=8), 0.1, 0.5
    X = rng.normal(size=(30, 8)) * 0.4
    score = X @ w + b
    cert = certify(linear_two_class(w, b), X, sigma, n=10_000, alpha=1e-3, rng=3)
    exact = np.abs(score) / np.linalg.norm(w)  # the distance to the boundary
    answered = cert.label != ABSTAIN
    assert np.all(cert.label[answered] == (score[answered] > 0))
    assert np.all(cert.radius <= exact) and np.all(cert.radius[~answered] == 0)
    far = exact > 0.3 * sigma * np.linalg.norm(w)
    assert np.all(cert.radius[far] > 0.6 * exact[far])
    on_boundary = certify(linear_two_class(w, 0.0), np.zeros((1, 8)), sigma, n=2000, rng=0)
    assert on_boundary.label[0] == ABSTAIN  # p_A = 1/2: no certificate


def test_certified_accuracy_counts_correct_points_with_large_enough_radius():
    label, radius = np.array([0, 1, -1, 2, 1]), np.array([0.5, 0.1, 0.0, 0.9, 0.3])
    y, radii = np.array([0, 1, 1, 0, 1]), np.array([0.0, 0.2, 0.5, 1.0])
    brute = [np.mean([label[i] == y[i] and radius[i] >= r for i in range(5)]) for r in radii]
    assert np.allclose(certified_accuracy(label, radius, y, radii), brute)


def test_soft_smoothed_is_the_noise_averaged_softmax():
    model = _random_mlp(d=5, K=3)
    X = torch.tensor(rng.uniform(size=(4, 5)))
    tiny = soft_smoothed(model, 1e-12, m=3, rng=0)(X)
    assert torch.allclose(tiny, torch.log_softmax(model(X), dim=1), atol=1e-10)
    sigma, m = 0.3, 20_000
    smooth = soft_smoothed(model, sigma, m=m, rng=0)(X).exp()
    noise = torch.tensor(np.random.default_rng(1).normal(size=(m, 4, 5)))
    reference = torch.softmax(model(X + sigma * noise), dim=-1).mean(dim=0)
    assert torch.allclose(smooth, reference, atol=0.01)
    assert torch.allclose(smooth.sum(dim=1), torch.ones(4, dtype=torch.float64))


def test_ibp_affine_matches_linear_programming():
    d, k = 5, 3
    W, b = rng.normal(size=(k, d)), rng.normal(size=k)
    lo = rng.uniform(-1, 0, size=d)
    hi = lo + rng.uniform(0, 1, size=d)
    bounds = ibp_affine(lo, hi, W, b)
    for j in range(k):
        low = linprog(W[j], bounds=list(zip(lo, hi, strict=True))).fun + b[j]
        high = -linprog(-W[j], bounds=list(zip(lo, hi, strict=True))).fun + b[j]
        assert bounds.lo[j] == pytest.approx(low, abs=1e-8) and bounds.hi[j] == pytest.approx(high, abs=1e-8)
    rows = ibp_affine(np.stack([lo, lo]), np.stack([hi, hi]), W, b)
    assert rows.lo.shape == (2, k) and np.allclose(rows.lo[1], bounds.lo)


@pytest.mark.parametrize("activation", [torch.nn.ReLU, torch.nn.Tanh, torch.nn.Sigmoid])
def test_ibp_bounds_contain_every_output_of_the_box(activation):
    model = _random_mlp(activation, d=6, K=4)
    X, eps = rng.uniform(size=(3, 6)), 0.05
    lo, hi = ibp_bounds(model, X, eps)
    samples = rng.uniform(-eps, eps, size=(3, 5000, 6)) + X[:, None]
    samples = np.clip(samples, 0, 1)  # the box is clipped to the pixel range
    with torch.no_grad():
        out = to_numpy(model(torch.tensor(samples)))
    assert np.all(out >= lo[:, None] - 1e-12) and np.all(out <= hi[:, None] + 1e-12)
    lo0, hi0 = ibp_bounds(model, X, 0.0)  # a point: the bounds are the output itself
    with torch.no_grad():
        assert np.allclose(lo0, to_numpy(model(torch.tensor(X))), atol=1e-12) and np.allclose(lo0, hi0)


def test_ibp_certify_is_sound_and_reduces_to_correctness_at_eps_zero():
    model = _random_mlp(d=6, K=3)
    X = rng.uniform(size=(200, 6))
    y = predict(model, X)
    y[:20] = (y[:20] + 1) % 3  # some wrong labels
    assert np.array_equal(ibp_certify(model, X, y, 0.0), predict(model, X) == y)
    certified = ibp_certify(model, X, y, 0.02)
    assert 0 < certified.sum() < 200
    idx = np.flatnonzero(certified)
    noisy = np.clip(X[idx][:, None] + rng.uniform(-0.02, 0.02, size=(len(idx), 500, 6)), 0, 1)
    assert np.all(predict(model, noisy.reshape(-1, 6)).reshape(len(idx), 500) == y[idx][:, None])


def test_lipschitz_radius_for_a_linear_model_and_an_attack():
    model = mlp(hidden=(), d=8, K=4, dtype=torch.float64)
    X = rng.uniform(size=(40, 8))
    y = predict(model, X)
    W, b = to_numpy(model[0].weight), to_numpy(model[0].bias)
    logits = X @ W.T + b
    margin = np.sort(logits, axis=1)[:, -1] - np.sort(logits, axis=1)[:, -2]
    radius = lipschitz_radius(model, X, y)
    assert np.allclose(radius, margin / (math.sqrt(2) * np.linalg.norm(W, 2)), rtol=1e-12)
    assert np.all(lipschitz_radius(model, X, (y + 1) % 4) == 0)  # misclassified: no certificate
    for i in range(10):  # l2 PGD within the radius cannot change the prediction
        X_adv = pgd(model, X[i : i + 1], y[i : i + 1], radius[i], radius[i] / 4, 20, p=2, clip=False, rng=i)
        assert predict(model, X_adv)[0] == y[i]


BAD_INPUT = [  # (call, error, message)
    (lambda: add_noise(np.ones(3), 0.1), ValueError, "X must have shape (any, any), got shape (3,)"),
    (lambda: noise_counts(mlp(), np.ones((2, 64)), 0.0, 10), ValueError, "sigma must be a finite number in (0, inf)"),
    (lambda: noise_counts(mlp(), np.ones((2, 64)), 0.1, 0), ValueError, "n must be an int in [1, inf)"),
    (lambda: smoothed_predict("f", np.ones((2, 64)), 0.1), TypeError, "model must be a torch.nn.Module"),
    (lambda: clopper_pearson_lower([5], 4, 0.01), ValueError, "k must hold whole numbers of successes in [0, n = 4]"),
    (lambda: clopper_pearson_lower([2], 4, 1.5), ValueError, "alpha must be a finite number in (0, 1)"),
    (lambda: smoothing_radius([1.2], 0.5), ValueError, "p_lower must hold probabilities in [0, 1]"),
    (lambda: certify(mlp(), np.ones((2, 64)), 0.25, n0=0), ValueError, "n0 must be an int in [1, inf)"),
    (lambda: certified_accuracy([0, 1], [0.1], [0, 1], [0.0]), ValueError, "radius must"),
    (lambda: soft_smoothed(mlp(), 0.25, m=0), ValueError, "m must be an int in [1, inf)"),
    (lambda: ibp_affine(np.ones(2), np.zeros(2), np.ones((1, 2)), np.ones(1)), ValueError, "lo must be <= hi"),
    (lambda: ibp_affine(np.zeros(2), np.ones(2), np.ones((1, 3)), np.ones(1)), ValueError, "W must"),
    (lambda: ibp_bounds(torch.nn.Sequential(torch.nn.Linear(64, 3), torch.nn.GELU()), np.ones((1, 64)), 0.1), TypeError, "non-decreasing activations"),
    (lambda: ibp_bounds(torch.nn.Sequential(torch.nn.Linear(64, 3), torch.nn.LeakyReLU(-0.5)), np.ones((1, 64)), 0.1), TypeError, "non-decreasing activations"),
    (lambda: ibp_bounds(mlp(), np.ones((1, 64)), -0.1), ValueError, "eps must be a finite number in [0, inf)"),
    (lambda: ibp_certify(mlp(), np.ones((2, 64)), [0, 10], 0.1), ValueError, "y must"),
    (lambda: lipschitz_radius(torch.nn.Sequential(torch.nn.Linear(64, 3), torch.nn.GELU()), np.ones((1, 64)), [0]), TypeError, "1-Lipschitz activations"),
]  # fmt: skip


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
