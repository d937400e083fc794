"""dlnotes.generative.common, the tools that several sections of chapter 10 use: the Gaussian KL against torch's,
Gaussian mixtures against scipy, the masked layer and MADE against their autograd Jacobians, maximum-likelihood
training (`fit_density`) of a flow, and the unbiased MMD against explicit double sums."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy import stats
from torch.distributions import MultivariateNormal, kl_divergence
from torch.func import jacrev, vmap

from dlnotes.generative import common, flows

from conftest import bad_input_test

rng = np.random.default_rng(10)


def random_cov(d, rng):
    A = rng.normal(size=(d, d))
    return A @ A.T + 0.5 * np.eye(d)


def test_gauss_kl_matches_torch_and_the_1d_formula():
    for d in (1, 3):
        mu0, mu1 = rng.normal(size=d), rng.normal(size=d)
        S0, S1 = random_cov(d, rng), random_cov(d, rng)
        expected = kl_divergence(
            MultivariateNormal(torch.tensor(mu0), torch.tensor(S0)),
            MultivariateNormal(torch.tensor(mu1), torch.tensor(S1)),
        )
        assert common.gauss_kl(mu0, S0, mu1, S1) == pytest.approx(float(expected), rel=1e-10)
    m0, s0, m1, s1 = 0.3, 0.7, -1.1, 1.9
    one_d = math.log(s1 / s0) + (s0**2 + (m0 - m1) ** 2) / (2 * s1**2) - 0.5
    assert common.gauss_kl([m0], [[s0**2]], [m1], [[s1**2]]) == pytest.approx(one_d, rel=1e-12)
    assert common.gauss_kl(mu0, S0, mu0, S0) == pytest.approx(0, abs=1e-12)


def three_blobs():
    return common.gaussian_mixture(
        [0.2, 0.3, 0.5], [[-2, 0], [2, 0], [0, 2]], np.array([0.1 * np.eye(2)] * 3)
    )


def test_mixture_log_prob_and_samples_match_scipy():
    gmm = common.gaussian_mixture(
        [0.3, 0.7], [[0, 1], [2, -1]], np.stack([random_cov(2, rng), random_cov(2, rng)])
    )
    X = rng.normal(size=(50, 2))
    expected = np.log(sum(w * stats.multivariate_normal(m, S).pdf(X) for w, m, S in zip(*gmm, strict=True)))
    assert np.allclose(common.mixture_log_prob(gmm, X), expected, rtol=1e-12)
    x, k = common.mixture_sample(gmm, 200_000, np.random.default_rng(0))
    assert abs((k == 1).mean() - 0.7) < 5 * math.sqrt(0.21 / 200_000)
    assert np.allclose(np.cov(x[k == 0].T), gmm.covs[0], atol=0.05)
    assert np.allclose(x[k == 1].mean(0), gmm.means[1], atol=0.02)


def randomise(module, std=0.5, seed=0):
    torch.manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.normal_(0, std)
    return module


def test_masked_linear_is_a_linear_layer_with_the_masked_weight():
    mask = (rng.random((4, 3)) > 0.5).astype(float)
    layer = common.MaskedLinear(3, 4, mask).double()
    x = torch.tensor(rng.normal(size=(5, 3)))
    expected = F.linear(x, layer.weight * torch.tensor(mask), layer.bias)
    assert torch.allclose(layer(x), expected, atol=1e-14)


@pytest.mark.parametrize(("d", "hidden", "n_params"), [(5, (16,), 1), (6, (12, 9), 2), (2, (4,), 2)])
def test_made_output_i_depends_exactly_on_the_inputs_before_i(d, hidden, n_params):
    made = randomise(common.MADE(d, hidden, n_params=n_params, activation="tanh").double())
    x = torch.tensor(rng.normal(size=(7, d)))
    J = vmap(jacrev(lambda v: made(v[None])[0]))(x).detach().numpy()  # (n, n_params, d, d)
    assert J.shape == (7, n_params, d, d)
    assert np.abs(np.triu(J)).max() == 0
    below = np.abs(J).max(axis=(0, 1))[np.tril_indices(d, -1)]
    assert below.min() > 1e-8  # every earlier input is used


def test_made_degrees_follow_the_rule():
    degrees = common.made_degrees(4, (5,))
    assert [list(m) for m in degrees] == [[1, 2, 3, 4], [1, 2, 3, 1, 2], [1, 2, 3, 4]]


def test_fit_density_lowers_the_nll_towards_the_entropy():
    torch.manual_seed(0)
    X = rng.normal(size=(600, 2)) * [2.0, 0.5] + [1.0, -1.0]
    flow = flows.RealNVP(2, n_layers=2, hidden=8)
    fit = common.fit_density(flow, X, X[:100], epochs=30, batch_size=100, lr=1e-2, rng=0)
    entropy = 0.5 * np.log(np.linalg.det(2 * math.pi * math.e * np.diag([4.0, 0.25])))
    assert fit.train_nll.shape == (30,) and fit.val_nll.shape == (30,)
    assert fit.train_nll[0] > entropy + 0.5 and abs(fit.train_nll[-1] - entropy) < 0.15


def test_fit_density_leaves_the_model_in_the_mode_it_came_in():
    X = rng.normal(size=(40, 2))
    for training in (True, False):
        flow = flows.RealNVP(2, n_layers=2, hidden=4).train(training)
        fit = common.fit_density(flow, X, X[:10], epochs=2, batch_size=16, rng=0, progress=False)
        assert flow.training == training and fit.train_nll.shape == fit.val_nll.shape == (2,)


def test_mmd2_against_the_explicit_double_sums_and_separates_distributions():
    rng = np.random.default_rng(5)
    X, Y, h = rng.normal(size=(7, 3)), rng.normal(size=(5, 3)) + 0.5, 0.8

    def k(a, b):
        return math.exp(-np.sum((a - b) ** 2) / (2 * h * h))

    xx = sum(k(X[i], X[j]) for i in range(7) for j in range(7) if i != j) / (7 * 6)
    yy = sum(k(Y[i], Y[j]) for i in range(5) for j in range(5) if i != j) / (5 * 4)
    xy = sum(k(X[i], Y[j]) for i in range(7) for j in range(5)) / 35
    assert abs(common.mmd2(X, Y, h) - (xx + yy - 2 * xy)) < 1e-12
    assert abs(common.mmd2(X, Y, h) - common.mmd2(Y, X, h)) < 1e-12
    same = common.mmd2(rng.normal(size=(500, 2)), rng.normal(size=(500, 2)), 1.0)
    shifted = common.mmd2(rng.normal(size=(500, 2)), rng.normal(size=(500, 2)) + 1, 1.0)
    assert abs(same) < 0.01 < 0.1 < shifted


def test_frechet_distance_is_the_w2_distance_of_the_fitted_gaussians():
    from scipy.linalg import sqrtm

    F = rng.normal(size=(300, 4))
    G = rng.normal(size=(250, 4)) @ rng.normal(size=(4, 4)) + 1.0
    cov_F, cov_G = np.cov(F.T), np.cov(G.T)
    reference = np.sum((F.mean(0) - G.mean(0)) ** 2) + np.trace(cov_F + cov_G - 2 * sqrtm(cov_F @ cov_G).real)
    assert abs(common.frechet_distance(F, G) - reference) < 1e-9
    assert abs(common.frechet_distance(F, F)) < 1e-9
    assert abs(common.frechet_distance(F, F + 2.0) - 4 * 4.0) < 1e-9  # a shift adds |shift|^2


BAD_INPUT = [  # (call, error, message)
    (lambda: common.gauss_kl([0, 0], np.eye(2), [0], np.eye(1)), ValueError, "mu1 must have shape (2,)"),
    (lambda: common.gauss_kl([0], [[-1.0]], [0], [[1.0]]), ValueError, "cov0 must be positive definite"),
    (lambda: common.gauss_kl([0, 0], [[1, 0.5], [0, 1]], [0, 0], np.eye(2)), ValueError, "cov0 must be a symmetric"),
    (lambda: common.gaussian_mixture([0.5, 0.6], [[0], [1]], np.ones((2, 1, 1))), ValueError, "weights must be positive and sum to 1"),
    (lambda: common.gaussian_mixture([1.0], [[0, 1]], np.ones((1, 1, 1))), ValueError, "covs must have shape (1, 2, 2)"),
    (lambda: common.mixture_sample(three_blobs(), 0), ValueError, "n must be an int in [1, inf)"),
    (lambda: common.mixture_log_prob(three_blobs(), np.ones((3, 3))), ValueError, "X must have shape (any, 2)"),
    (lambda: common.MaskedLinear(3, 4, np.ones((3, 4))), ValueError, "mask must have shape (4, 3)"),
    (lambda: common.MADE(0), ValueError, "d must be an int in [1, inf)"),
    (lambda: common.MADE(3, activation="sigmoid"), ValueError, "activation must be one of"),
    (lambda: common.MADE(3)(torch.zeros(2, 4)), ValueError, "x must have shape (n, 3)"),
    (lambda: common.fit_density(torch.nn.Linear(2, 2), np.ones((4, 2))), TypeError, "model must be a torch.nn.Module with a log_prob"),
    (lambda: common.fit_density(flows.RealNVP(), np.ones((4, 2)), np.ones((4, 3))), ValueError, "X_val must have shape (any, 2)"),
    (lambda: common.fit_density(flows.RealNVP(), np.ones((4, 2)), lr=0), ValueError, "lr must be"),
    (lambda: common.mmd2(np.ones((3, 2)), np.ones((3, 3)), 1.0), ValueError, "Y must have shape (any, 2)"),
    (lambda: common.mmd2(np.ones((1, 2)), np.ones((3, 2)), 1.0), ValueError, "X and Y need at least 2 rows each"),
    (lambda: common.mmd2(np.ones((3, 2)), np.ones((3, 2)), bandwidth=0.0), ValueError, "bandwidth must be a finite number in (0, inf)"),
    (lambda: common.frechet_distance(np.ones((3, 2)), np.ones((3, 3))), ValueError, "G must have shape (any, 2)"),
    (lambda: common.frechet_distance(np.ones((1, 2)), np.ones((3, 2))), ValueError, "F and G need at least 2 rows each"),
]  # fmt: skip


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
