"""The tools of dlnotes.generative that several sections of chapter 10 use: the Gaussian KL against torch's,
Gaussian mixtures against scipy, the noise schedules against their defining formulas, the forward process
against its moments, the exact noise predictor of a mixture against the autograd score of its noised density,
and the ancestral and DDIM samplers against the moments of a Gaussian they should reproduce."""

import math

import numpy as np
import pytest
import torch
from scipy import stats
from torch.distributions import MultivariateNormal, kl_divergence

from dlnotes import generative as gen

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
        assert gen.gauss_kl(mu0, S0, mu1, S1) == pytest.approx(float(expected), rel=1e-10)
    m0, s0, m1, s1 = 0.3, 0.7, -1.1, 1.9
    one_d = math.log(s1 / s0) + (s0**2 + (m0 - m1) ** 2) / (2 * s1**2) - 0.5
    assert gen.gauss_kl([m0], [[s0**2]], [m1], [[s1**2]]) == pytest.approx(one_d, rel=1e-12)
    assert gen.gauss_kl(mu0, S0, mu0, S0) == pytest.approx(0, abs=1e-12)


def three_blobs():
    return gen.gaussian_mixture([0.2, 0.3, 0.5], [[-2, 0], [2, 0], [0, 2]], np.array([0.1 * np.eye(2)] * 3))


def test_mixture_log_prob_and_samples_match_scipy():
    gmm = gen.gaussian_mixture(
        [0.3, 0.7], [[0, 1], [2, -1]], np.stack([random_cov(2, rng), random_cov(2, rng)])
    )
    X = rng.normal(size=(50, 2))
    expected = np.log(sum(w * stats.multivariate_normal(m, S).pdf(X) for w, m, S in zip(*gmm, strict=True)))
    assert np.allclose(gen.mixture_log_prob(gmm, X), expected, rtol=1e-12)
    x, k = gen.mixture_sample(gmm, 200_000, np.random.default_rng(0))
    assert abs((k == 1).mean() - 0.7) < 5 * math.sqrt(0.21 / 200_000)
    assert np.allclose(np.cov(x[k == 0].T), gmm.covs[0], atol=0.05)
    assert np.allclose(x[k == 1].mean(0), gmm.means[1], atol=0.02)


def test_noise_schedules_follow_their_formulas():
    lin = gen.noise_schedule(1000)
    assert lin.T == 1000 and lin.beta[0] == 0 and lin.alpha_bar[0] == 1
    assert lin.beta[1] == pytest.approx(1e-4) and lin.beta[1000] == pytest.approx(0.02)
    assert np.allclose(lin.alpha_bar, np.cumprod(1 - lin.beta), rtol=1e-14)
    cos = gen.noise_schedule(1000, "cosine")
    f = np.cos((np.arange(1001) / 1000 + 0.008) / 1.008 * np.pi / 2) ** 2
    assert np.allclose(cos.alpha_bar[:900], f[:900] / f[0], rtol=1e-10)  # unclipped part
    assert cos.beta.max() == pytest.approx(0.999) and cos.alpha_bar[-1] > 0


def test_q_sample_has_the_closed_form_moments():
    sch = gen.noise_schedule(1000)
    x0 = np.tile([[1.5, -0.5]], (100_000, 1))
    for t in (10, 500):
        xt, eps = gen.q_sample(x0, t, sch, np.random.default_rng(t))
        assert np.allclose(xt, math.sqrt(sch.alpha_bar[t]) * x0 + math.sqrt(1 - sch.alpha_bar[t]) * eps)
        se = math.sqrt((1 - sch.alpha_bar[t]) / 100_000)
        assert np.all(np.abs(xt.mean(0) - math.sqrt(sch.alpha_bar[t]) * x0[0]) < 5 * se)
        assert np.allclose(xt.var(0), 1 - sch.alpha_bar[t], rtol=0.03)
    xt, _ = gen.q_sample(x0[:3], np.array([0, 0, 0]), sch, np.random.default_rng(0))
    assert np.array_equal(xt, x0[:3])  # t = 0 is the data


def test_mixture_eps_is_minus_root_one_minus_alpha_bar_times_the_score():
    gmm, sch = three_blobs(), gen.noise_schedule(1000)
    x = rng.normal(size=(20, 2)) * 2
    for t in (1, 100, 700):
        a = sch.alpha_bar[t]
        xt = torch.tensor(x, requires_grad=True)
        comps = [
            MultivariateNormal(torch.tensor(math.sqrt(a) * m), torch.tensor(a * S + (1 - a) * np.eye(2)))
            for m, S in zip(gmm.means, gmm.covs, strict=True)
        ]
        log_q = torch.logsumexp(
            torch.stack([math.log(w) + c.log_prob(xt) for w, c in zip(gmm.weights, comps, strict=True)]), 0
        )
        (score,) = torch.autograd.grad(log_q.sum(), xt)
        assert np.allclose(gen.mixture_eps(gmm, x, t, sch), -math.sqrt(1 - a) * score.numpy(), atol=1e-9)


def test_samplers_with_the_exact_noise_predictor_reproduce_a_gaussian():
    m, S = np.array([1.0, -2.0]), np.array([[0.5, 0.2], [0.2, 0.3]])
    gmm, sch = gen.gaussian_mixture([1.0], [m], [S]), gen.noise_schedule(200, beta_1=5e-4, beta_T=0.1)

    def eps_fn(x, t):
        return gen.mixture_eps(gmm, x, t, sch)

    n = 20_000
    x_T = np.random.default_rng(1).standard_normal((n, 2))
    for x0 in (
        gen.ddpm_sample(eps_fn, x_T, sch, rng=np.random.default_rng(2)),
        gen.ddpm_sample(eps_fn, x_T, sch, sigma="beta", rng=np.random.default_rng(2)),
        gen.ddim_sample(eps_fn, x_T, sch),  # with 50 of the 200 steps the variance shrinks by 10 %
    ):
        assert np.allclose(x0.mean(0), m, atol=0.03)
        assert np.allclose(np.cov(x0.T), S, atol=0.03)
    # DDIM with eta = 1 on every step is ancestral sampling with sigma_t^2 = beta_tilde, draw for draw
    ddpm = gen.ddpm_sample(eps_fn, x_T[:100], sch, rng=np.random.default_rng(3))
    ddim = gen.ddim_sample(eps_fn, x_T[:100], sch, eta=1.0, rng=np.random.default_rng(3))
    assert np.allclose(ddim, ddpm, atol=1e-10)
    # eta = 0 is deterministic
    assert np.array_equal(
        gen.ddim_sample(eps_fn, x_T[:5], sch, 20), gen.ddim_sample(eps_fn, x_T[:5], sch, 20)
    )


BAD_INPUT = [  # (call, error, message)
    (lambda: gen.gauss_kl([0, 0], np.eye(2), [0], np.eye(1)), ValueError, "mu1 must have shape (2,)"),
    (lambda: gen.gauss_kl([0], [[-1.0]], [0], [[1.0]]), ValueError, "cov0 must be positive definite"),
    (lambda: gen.gauss_kl([0, 0], [[1, 0.5], [0, 1]], [0, 0], np.eye(2)), ValueError, "cov0 must be a symmetric"),
    (lambda: gen.gaussian_mixture([0.5, 0.6], [[0], [1]], np.ones((2, 1, 1))), ValueError, "weights must be positive and sum to 1"),
    (lambda: gen.gaussian_mixture([1.0], [[0, 1]], np.ones((1, 1, 1))), ValueError, "covs must have shape (1, 2, 2)"),
    (lambda: gen.mixture_sample(three_blobs(), 0), ValueError, "n must be an int in [1, inf)"),
    (lambda: gen.mixture_log_prob(three_blobs(), np.ones((3, 3))), ValueError, "X must have shape (any, 2)"),
    (lambda: gen.noise_schedule(100, "quadratic"), ValueError, "kind must be one of"),
    (lambda: gen.noise_schedule(0), ValueError, "T must be an int in [1, inf)"),
    (lambda: gen.q_sample(np.ones((2, 2)), 11, gen.noise_schedule(10)), ValueError, "t must be in 0..T = 0..10"),
    (lambda: gen.q_sample(np.ones((2, 2)), 1.5, gen.noise_schedule(10)), ValueError, "t must be an integer step"),
    (lambda: gen.q_sample(np.ones((2, 2)), 1, (1, 2, 3)), TypeError, "schedule must be a Schedule"),
    (lambda: gen.mixture_eps(three_blobs(), np.ones((2, 2)), 0, gen.noise_schedule(10)), ValueError, "t must be an int in [1, 10]"),
    (lambda: gen.ddpm_sample(lambda x, t: x[:, :1], np.ones((2, 2)), gen.noise_schedule(10)), ValueError, "eps_fn(x, t) must return the shape of x"),
    (lambda: gen.ddpm_sample(lambda x, t: x, np.ones((2, 2)), gen.noise_schedule(10), sigma="zero"), ValueError, "sigma must be one of"),
    (lambda: gen.ddim_sample(lambda x, t: x, np.ones((2, 2)), gen.noise_schedule(10), steps=11), ValueError, "steps must be an int in [1, 10]"),
    (lambda: gen.ddim_sample(lambda x, t: x, np.ones((2, 2)), gen.noise_schedule(10), eta=2.0), ValueError, "eta must be a finite number in [0, 1]"),
]  # fmt: skip


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
