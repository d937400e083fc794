"""dlnotes.generative.flow_matching, section 10.7. The exact Gaussian velocity against a regression of simulated
pairs and against the exact transport of N(0, I) to the data; the trained velocity network against it; Euler's
method; the mixture score against autograd of the mixture's log-density; Langevin dynamics against the stationary
moments of a Gaussian; annealed Langevin against the mode weights of a mixture."""

import numpy as np
import torch
from torch.distributions import Categorical, MixtureSameFamily, MultivariateNormal

from dlnotes.generative import common, flow_matching

from conftest import bad_input_test
from test_generative_common import three_blobs

rng = np.random.default_rng(107)
MU, COV = np.array([1.0, -0.5]), np.array([[2.0, 0.8], [0.8, 0.5]])


def test_the_gaussian_velocity_is_the_regression_of_the_target_velocity_on_the_point():
    s, n = 0.3, 200_000
    x_0, x_1 = rng.standard_normal((n, 2)), rng.multivariate_normal(MU, COV, n)
    x_s = (1 - s) * x_0 + s * x_1
    design = np.c_[np.ones(n), x_s]
    coef = np.linalg.lstsq(design, x_1 - x_0, rcond=None)[0]  # E[x_1 - x_0 | x_s] is affine for Gaussians
    probe = rng.standard_normal((50, 2))
    assert (
        np.abs(np.c_[np.ones(50), probe] @ coef - flow_matching.gaussian_fm_velocity(probe, s, MU, COV)).max()
        < 0.02
    )


def test_euler_on_the_exact_velocity_carries_the_noise_to_the_gaussian():
    x_0 = rng.standard_normal((4, 2))
    v_fn = lambda x, s: flow_matching.gaussian_fm_velocity(x, s, MU, COV)  # noqa: E731
    fine, coarse = flow_matching.euler_sample(v_fn, x_0, 4000), flow_matching.euler_sample(v_fn, x_0, 10)
    # the exact flow map is affine: x_1 = mu + Sigma^(1/2) x_0 for the symmetric root (C_s stays a function of Sigma)
    lam, U = np.linalg.eigh(COV)
    exact = MU + x_0 @ (U * np.sqrt(lam)) @ U.T
    assert np.abs(fine - exact).max() < 2e-3 < np.abs(coarse - exact).max()
    assert np.allclose(flow_matching.gaussian_fm_velocity(x_0, 0.0, MU, COV), MU - x_0)  # s = 0: x_s = x_0


def test_a_trained_velocity_network_learns_the_gaussian_velocity():
    X = rng.multivariate_normal(MU, COV, 4000)
    trained = flow_matching.train_velocity_model(X, 1500, hidden=32, depth=2, lr=3e-3, rng=1, progress=False)
    assert not trained.model.training and trained.losses.shape == (1500,)
    v_fn = flow_matching.velocity_predictor(trained.model)
    s = rng.uniform(0.05, 0.95, 2000)
    x_s = (1 - s[:, None]) * rng.standard_normal((2000, 2)) + s[:, None] * rng.multivariate_normal(
        MU, COV, 2000
    )
    exact = np.array(
        [flow_matching.gaussian_fm_velocity(x[None], si, MU, COV)[0] for x, si in zip(x_s, s, strict=True)]
    )
    error = np.mean((v_fn(x_s, s) - exact) ** 2)
    blind = np.mean((MU - exact) ** 2)  # the best velocity that ignores x: E[x_1 - x_0] = mu
    assert error < 0.1 * blind


def test_the_mixture_score_is_the_gradient_of_its_log_density():
    gmm = three_blobs()
    x = torch.tensor(rng.normal(size=(6, 2)), requires_grad=True)
    dist = MixtureSameFamily(
        Categorical(torch.tensor(gmm.weights)),
        MultivariateNormal(torch.tensor(gmm.means), torch.tensor(gmm.covs)),
    )
    (grad,) = torch.autograd.grad(dist.log_prob(x).sum(), x)
    assert np.allclose(flow_matching.mixture_score(gmm, x.detach().numpy()), grad.numpy(), atol=1e-10)


def test_langevin_reaches_the_stationary_moments_of_a_gaussian():
    m, v, eta = 2.0, 0.5, 0.01
    x = flow_matching.langevin_sample(lambda x: -(x - m) / v, np.zeros((20_000, 1)), eta, 2000, rng=2)
    # the discretised chain is Gaussian with variance v / (1 - eta / (2 v)) (slightly above v)
    assert abs(x.mean() - m) < 0.02 and abs(x.var() / (v / (1 - eta / (2 * v))) - 1) < 0.03


def test_annealed_langevin_finds_the_mode_weights_that_plain_langevin_misses():
    gmm = common.gaussian_mixture([0.2, 0.3, 0.5], [[-2, 0], [2, 0], [0, 2]], np.array([0.1 * np.eye(2)] * 3))

    def noised_score(x, sigma):
        return flow_matching.mixture_score(
            common.gaussian_mixture(gmm.weights, gmm.means, gmm.covs + sigma**2 * np.eye(2)), x
        )

    def weights(Y):
        return np.bincount(((Y[:, None] - gmm.means[None]) ** 2).sum(-1).argmin(1), minlength=3) / len(Y)

    start = 3 * rng.standard_normal((3000, 2))
    plain = flow_matching.langevin_sample(
        lambda x: flow_matching.mixture_score(gmm, x), start, 0.002, 500, rng=3
    )
    annealed = flow_matching.annealed_langevin_sample(
        noised_score, start, np.geomspace(3, 0.1, 10), 0.002, 50, rng=3
    )
    assert (
        np.abs(weights(annealed) - gmm.weights).max()
        < 0.04
        < 0.1
        < np.abs(weights(plain) - gmm.weights).max()
    )


BAD_INPUT = [  # (call, error, message)
    (lambda: flow_matching.gaussian_fm_velocity(np.ones((3, 3)), 0.5, MU, COV), ValueError, "x must have shape (any, 2)"),
    (lambda: flow_matching.gaussian_fm_velocity(np.ones((3, 2)), 1.5, MU, COV), ValueError, "s must be a finite number in [0, 1]"),
    (lambda: flow_matching.gaussian_fm_velocity(np.ones((3, 2)), 0.5, MU, -COV), ValueError, "cov must be positive definite"),
    (lambda: flow_matching.train_velocity_model(np.ones((4, 2)), 0), ValueError, "steps must be an int in [1, inf)"),
    (lambda: flow_matching.velocity_predictor("net"), TypeError, "model must be an EpsMLP"),
    (lambda: flow_matching.euler_sample(lambda x, s: x[:, :1], np.ones((3, 2)), 2), ValueError, "velocity_fn(x, s) must return the shape of x"),
    (lambda: flow_matching.euler_sample(lambda x, s: x, np.ones((3, 2)), 0), ValueError, "steps must be an int in [1, inf)"),
    (lambda: flow_matching.mixture_score("gmm", np.ones((3, 2))), TypeError, "gmm must be a GaussianMixture"),
    (lambda: flow_matching.langevin_sample(lambda x: x, np.ones((3, 2)), 0.0, 5), ValueError, "eta must be a finite number in (0, inf)"),
    (lambda: flow_matching.annealed_langevin_sample(lambda x, s: x, np.ones((3, 2)), [0.1, 1.0], 0.01, 5), ValueError, "sigmas must be positive and strictly decreasing"),
]  # fmt: skip


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
