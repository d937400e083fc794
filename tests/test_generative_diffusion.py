"""Sections 10.6 of dlnotes.generative (forward process, bound, reverse posterior; sampling): the forward chain
against its marginal, the posterior against Gaussian conditioning, the bound against its Monte Carlo definition,
the SDE/ODE samplers and DDIM steps against exact Gaussian answers, the entropies against scipy, the
score-matching and parameterisation identities against their definitions."""

import math

import numpy as np
from scipy import integrate, stats

from dlnotes import generative as gen

from conftest import bad_input_test

SCH = gen.noise_schedule(200)


def three_blobs():
    return gen.gaussian_mixture(
        [0.2, 0.3, 0.5], [[-2.0, 0.0], [2.0, 0.0], [0.0, 2.0]], np.array([0.1 * np.eye(2)] * 3)
    )


# ----------------------------------------------------------------------------- forward process, bound, posterior


def test_forward_chains_reach_the_marginal():
    x0 = np.array([[1.0, -2.0]])
    states = gen.forward_chains(np.repeat(x0, 20_000, axis=0), SCH, [0, 50, 200], rng=1)
    assert states.shape == (3, 20_000, 2)
    assert np.array_equal(states[0], np.repeat(x0, 20_000, axis=0))
    for x_t, t in zip(states[1:], (50, 200), strict=True):
        a = SCH.alpha_bar[t]
        z = (x_t - math.sqrt(a) * x0) / math.sqrt(1 - a)
        assert stats.kstest(z[:, 0], "norm").pvalue > 1e-3
        assert abs(z.var() - 1) < 0.03


def test_second_moment_is_one_plus_alpha_bar_times_the_excess():
    for c in (0.0, 1.0, 3.5):
        assert np.allclose(gen.second_moment(c, SCH), 1 + SCH.alpha_bar * (c - 1), atol=1e-13)


def test_q_posterior_is_gaussian_conditioning():
    rng = np.random.default_rng(2)
    x0, x_t = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))
    for t in (1, 2, 37, 200):
        a_prev, alpha, beta = SCH.alpha_bar[t - 1], SCH.alpha[t], SCH.beta[t]
        # (x_{t-1}, x_t) given x0: joint Gaussian, condition the first on the second
        var_prev = 1 - a_prev
        cov = np.array(
            [[var_prev, math.sqrt(alpha) * var_prev], [math.sqrt(alpha) * var_prev, alpha * var_prev + beta]]
        )
        gain = cov[0, 1] / cov[1, 1]
        mean = math.sqrt(a_prev) * x0 + gain * (x_t - math.sqrt(SCH.alpha_bar[t]) * x0)
        post = gen.q_posterior(x0, x_t, t, SCH)
        assert np.allclose(post.mean, mean, atol=1e-12)
        assert math.isclose(post.var, cov[0, 0] - gain * cov[0, 1], abs_tol=1e-14)


def test_mean_from_eps_is_the_posterior_mean():
    rng = np.random.default_rng(3)
    x0 = rng.normal(size=(5, 2))
    for t in (2, 100, 200):
        x_t, eps = gen.q_sample(x0, t, SCH, rng)
        assert np.allclose(
            gen.mean_from_eps(x_t, eps, t, SCH), gen.q_posterior(x0, x_t, t, SCH).mean, atol=1e-10
        )


def test_exact_reverse_kernels_give_the_data_marginal_and_a_tight_bound():
    sch = gen.noise_schedule(15, beta_1=0.02, beta_T=0.4)
    kernels = gen.gaussian_reverse_kernels(-0.7, 2.0, sch)
    x0 = np.linspace(-4, 3, 9)
    assert np.allclose(
        gen.reverse_model_nll(x0, kernels), -stats.norm.logpdf(x0, -0.7, math.sqrt(2.0)), atol=1e-12
    )
    bound = gen.gaussian_diffusion_bound(x0, kernels, sch)
    assert bound.steps.shape == (9, 14)
    assert np.allclose(bound.total, gen.reverse_model_nll(x0, kernels), atol=1e-9)
    # the kernel of step t is the regression of x_{t-1} on x_t under the forward process
    rng = np.random.default_rng(4)
    t = 6
    x_prev = gen.q_sample(-0.7 + math.sqrt(2.0) * rng.standard_normal((200_000, 1)), t - 1, sch, rng)[0][:, 0]
    x_next = math.sqrt(sch.alpha[t]) * x_prev + math.sqrt(sch.beta[t]) * rng.standard_normal(x_prev.size)
    slope, intercept = np.polyfit(x_next, x_prev, 1)
    assert abs(slope - kernels.a[t]) < 0.01 and abs(intercept - kernels.b[t]) < 0.01


def test_bound_of_perturbed_kernels_matches_its_monte_carlo_definition():
    sch = gen.noise_schedule(8, beta_1=0.05, beta_T=0.5)
    exact = gen.gaussian_reverse_kernels(0.5, 0.4, sch)
    model = gen.ReverseKernels(exact.a * 1.05, exact.b + 0.05, exact.var * 1.1, 0.1, 1.2)
    x0 = 1.1
    bound = gen.gaussian_diffusion_bound([x0], model, sch).total[0]
    assert bound > gen.reverse_model_nll([x0], model)[0] + 1e-3
    path = gen.forward_chains(np.full((100_000, 1), x0), sch, list(range(9)), rng=5)[:, :, 0]
    log_q = sum(
        stats.norm.logpdf(path[t], math.sqrt(sch.alpha[t]) * path[t - 1], math.sqrt(sch.beta[t]))
        for t in range(1, 9)
    )
    log_p = stats.norm.logpdf(path[8], model.prior_mean, math.sqrt(model.prior_var)) + sum(
        stats.norm.logpdf(path[t - 1], model.a[t] * path[t] + model.b[t], math.sqrt(model.var[t]))
        for t in range(1, 9)
    )
    diff = log_q - log_p
    assert abs(diff.mean() - bound) < 5 * diff.std() / math.sqrt(diff.size)


# ----------------------------------------------------------------------------- sampling


def test_noised_mixture_and_the_cached_eps_fn():
    gmm = three_blobs()
    q_t = gen.noised_mixture(gmm, 80, SCH)
    X0 = gen.mixture_sample(gmm, 200_000, rng=6)[0]
    X_t = gen.q_sample(X0, 80, SCH, rng=7)[0]
    mean = q_t.weights @ q_t.means
    assert np.allclose(X_t.mean(axis=0), mean, atol=0.02)
    cov = sum(w * (S + np.outer(m, m)) for w, m, S in zip(*q_t, strict=True)) - np.outer(mean, mean)
    assert np.allclose(np.cov(X_t.T), cov, atol=0.03)
    eps_fn = gen.mixture_eps_fn(gmm, SCH)
    x = np.random.default_rng(8).normal(size=(50, 2)) * 3
    for t in (1, 5, 200):
        assert np.allclose(eps_fn(x, t), gen.mixture_eps(gmm, x, t, SCH), atol=1e-12)


def test_vp_alpha_bar_integrates_beta():
    for t in (0.0, 0.3, 1.0):
        integral = integrate.quad(lambda s: 0.1 + s * 19.9, 0, t)[0]
        assert math.isclose(float(gen.vp_alpha_bar(t)), math.exp(-integral), rel_tol=1e-12)


def gaussian_score(m, v):
    def score(x, t):
        a = gen.vp_alpha_bar(t)
        return -(x - np.sqrt(a) * m) / (a * v + 1 - a)

    return score


def test_reverse_sde_and_probability_flow_recover_gaussian_data():
    score = gaussian_score(-1.0, 0.3)
    x = gen.reverse_sde_sample(score, np.random.default_rng(9).standard_normal(100_000), steps=500, rng=10)
    assert abs(x.mean() + 1.0) < 0.02 and abs(x.var() / 0.3 - 1) < 0.05
    x1 = np.random.default_rng(11).standard_normal(500)
    a1 = gen.vp_alpha_bar(1.0)
    exact = -1.0 + math.sqrt(0.3) * (x1 + math.sqrt(a1)) / math.sqrt(a1 * 0.3 + 1 - a1)
    assert np.abs(gen.probability_flow_sample(score, x1, steps=2000) - exact).max() < 5e-3


def test_step_entropies_against_scipy():
    v, beta = 2.5, 0.1
    h = gen.gaussian_step_entropies(v, beta)
    joint = np.array([[v, math.sqrt(1 - beta) * v], [math.sqrt(1 - beta) * v, (1 - beta) * v + beta]])
    assert math.isclose(h.before, stats.norm(scale=math.sqrt(v)).entropy(), rel_tol=1e-12)
    assert math.isclose(h.after, stats.norm(scale=math.sqrt(joint[1, 1])).entropy(), rel_tol=1e-12)
    assert math.isclose(h.forward, stats.norm(scale=math.sqrt(beta)).entropy(), rel_tol=1e-12)
    h_joint = stats.multivariate_normal(cov=joint).entropy()
    assert math.isclose(h.reverse, h_joint - h.after, rel_tol=1e-10)


def test_cfg_is_an_extrapolation_from_the_unconditional_prediction():
    rng = np.random.default_rng(12)
    e_c, e_u = rng.normal(size=(6, 2)), rng.normal(size=(6, 2))
    assert np.array_equal(gen.cfg(e_c, e_u, 0.0), e_c)
    assert np.allclose(gen.cfg(e_c, e_u, 3.0), e_u + 4.0 * (e_c - e_u), atol=1e-14)


def test_ddim_steps_compose_to_ddim_sample():
    gmm = three_blobs()
    eps_fn = gen.mixture_eps_fn(gmm, SCH)
    x_T = np.random.default_rng(13).standard_normal((40, 2))
    ref = gen.ddim_sample(eps_fn, x_T, SCH, steps=20, eta=0.5, rng=np.random.default_rng(14))
    rng = np.random.default_rng(14)
    taus = np.unique(np.round(np.linspace(0, SCH.T, 21)).astype(int))[::-1]
    x = x_T
    for t, s in zip(taus[:-1], taus[1:], strict=True):
        z = rng.standard_normal(x.shape) if s > 0 else None
        x = gen.ddim_step(x, eps_fn(x, int(t)), int(t), int(s), SCH, eta=0.5, z=z)
    assert np.allclose(x, ref, atol=1e-12)


def test_dsm_loss_and_tweedie_for_gaussian_data():
    m, v, t = np.array([1.0, -0.5]), 0.6, 60
    a = SCH.alpha_bar[t]
    rng = np.random.default_rng(15)
    x0 = m + math.sqrt(v) * rng.standard_normal((400_000, 2))
    x_t, eps = gen.q_sample(x0, t, SCH, rng)
    var_t = a * v + 1 - a
    true_score = -(x_t - math.sqrt(a) * m) / var_t
    # DSM - ESM is the same constant for any score model
    consts = []
    for model in (true_score, 0.5 * true_score + 0.2, -x_t):
        consts.append(
            np.mean(gen.dsm_loss(model, x_t, eps, t, SCH) - np.sum((model - true_score) ** 2, axis=1))
        )
    assert np.ptp(consts) < 0.05
    eps_theta = rng.normal(size=x_t.shape)
    assert np.allclose(
        gen.dsm_loss(-eps_theta / math.sqrt(1 - a), x_t, eps, t, SCH) * (1 - a),
        np.sum((eps - eps_theta) ** 2, axis=1),
    )
    # Tweedie against Gaussian conditioning
    posterior_mean = m + math.sqrt(a) * v / var_t * (x_t[:5] - math.sqrt(a) * m)
    assert np.allclose(gen.tweedie_x0(x_t[:5], true_score[:5], t, SCH), posterior_mean, atol=1e-12)


def test_convert_prediction_round_trips_and_definitions():
    rng = np.random.default_rng(16)
    x0, t = rng.normal(size=(7, 3)), 120
    x_t, eps = gen.q_sample(x0, t, SCH, rng)
    a, b = math.sqrt(SCH.alpha_bar[t]), math.sqrt(1 - SCH.alpha_bar[t])
    truth = {"eps": eps, "x0": x0, "v": a * eps - b * x0}
    for source in gen.PREDICTIONS:
        for target in gen.PREDICTIONS:
            got = gen.convert_prediction(x_t, truth[source], t, SCH, source, target)
            assert np.allclose(got, truth[target], atol=1e-10)


BAD_INPUT = [  # (call, error, message)
    (lambda: gen.forward_chains(np.ones((2, 2)), SCH, [300]), ValueError, "record must be an int in [0, 200]"),
    (lambda: gen.forward_chains(np.ones((2, 2)), SCH, []), ValueError, "record must name at least one step"),
    (lambda: gen.second_moment(-1.0, SCH), ValueError, "c must be a finite number in [0, inf)"),
    (lambda: gen.q_posterior(np.ones((2, 2)), np.ones((2, 2)), 0, SCH), ValueError, "t must be an int in [1, 200]"),
    (lambda: gen.q_posterior(np.ones((2, 2)), np.ones((3, 2)), 5, SCH), ValueError, "x_t must have shape (2, 2)"),
    (lambda: gen.mean_from_eps(np.ones((2, 2)), np.ones(2), 5, SCH), ValueError, "eps must have shape (2, 2)"),
    (lambda: gen.gaussian_reverse_kernels(0.0, 0.0, SCH), ValueError, "var must be a finite number in (0, inf)"),
    (lambda: gen.gaussian_diffusion_bound([0.0], (1, 2), SCH), TypeError, "kernels must be ReverseKernels"),
    (lambda: gen.gaussian_diffusion_bound([0.0], gen.gaussian_reverse_kernels(0, 1, gen.noise_schedule(5)), SCH), ValueError, "kernels.a must have shape (201,)"),
    (lambda: gen.reverse_model_nll(np.ones((2, 2)), gen.gaussian_reverse_kernels(0, 1, SCH)), ValueError, "x0 must have shape (any,)"),
    (lambda: gen.noised_mixture("gmm", 1, SCH), TypeError, "gmm must be a GaussianMixture"),
    (lambda: gen.mixture_eps_fn(three_blobs(), SCH)(np.ones((2, 3)), 5), ValueError, "x must have shape (any, 2)"),
    (lambda: gen.mixture_eps_fn(three_blobs(), SCH)(np.ones((2, 2)), 0), ValueError, "t must be an int in [1, 200]"),
    (lambda: gen.vp_alpha_bar(1.5), ValueError, "t must lie in [0, 1]"),
    (lambda: gen.reverse_sde_sample(lambda x, t: x[:1], np.ones(3)), ValueError, "score_fn(x, t) must return the shape of x"),
    (lambda: gen.probability_flow_sample(lambda x, t: x, np.ones(3), steps=0), ValueError, "steps must be an int in [1, inf)"),
    (lambda: gen.gaussian_step_entropies(1.0, 1.0), ValueError, "beta must be a finite number in (0, 1)"),
    (lambda: gen.cfg(np.ones((2, 2)), np.ones((2, 3)), 1.0), ValueError, "eps_u must have shape (2, 2)"),
    (lambda: gen.cfg(np.ones(2), np.ones(2), -1.0), ValueError, "w must be a finite number in [0, inf)"),
    (lambda: gen.ddim_step(np.ones((2, 2)), np.ones((2, 2)), 5, 5, SCH), ValueError, "s must be an int in [0, 4]"),
    (lambda: gen.dsm_loss(np.ones((2, 1)), np.ones((2, 2)), np.ones((2, 2)), 5, SCH), ValueError, "score must have shape (2, 2)"),
    (lambda: gen.tweedie_x0(np.ones((2, 2)), np.ones((2, 2)), 201, SCH), ValueError, "t must be an int in [1, 200]"),
    (lambda: gen.convert_prediction(np.ones((2, 2)), np.ones((2, 2)), 5, SCH, "score", "x0"), ValueError, "source must be one of"),
]  # fmt: skip


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
