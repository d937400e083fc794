"""dlnotes.generative.diffusion, section 10.6. The forward process, bound and reverse posterior: the schedules against
their formulas, q_sample and the forward chain against their marginals, the posterior against Gaussian conditioning,
the bound against its Monte Carlo definition. Sampling: the exact noise predictor of a mixture against the autograd
score of its noised density, the ancestral, DDIM, SDE and ODE samplers against exact Gaussian answers, the
entropies against scipy, the score-matching and parameterisation identities against their definitions. Training:
the noise predictor, its training, the simplified loss and the Gaussian-optimal loss."""

import math

import numpy as np
import pytest
import torch
from scipy import integrate, stats
from torch.distributions import MultivariateNormal

from dlnotes.generative import common, diffusion
from dlnotes.training import model_device, to_numpy

from conftest import bad_input_test
from test_generative_common import three_blobs

rng = np.random.default_rng(106)
SCH = diffusion.noise_schedule(200)


# ----------------------------------------------------------------------------- forward process, bound, posterior


def test_noise_schedules_follow_their_formulas():
    lin = diffusion.noise_schedule(1000)
    assert lin.T == 1000 and lin.beta[0] == 0 and lin.alpha_bar[0] == 1
    assert lin.beta[1] == pytest.approx(1e-4) and lin.beta[1000] == pytest.approx(0.02)
    assert np.allclose(lin.alpha_bar, np.cumprod(1 - lin.beta), rtol=1e-14)
    cos = diffusion.noise_schedule(1000, "cosine")
    f = np.cos((np.arange(1001) / 1000 + 0.008) / 1.008 * np.pi / 2) ** 2
    assert np.allclose(cos.alpha_bar[:900], f[:900] / f[0], rtol=1e-10)  # unclipped part
    assert cos.beta.max() == pytest.approx(0.999) and cos.alpha_bar[-1] > 0


def test_q_sample_has_the_closed_form_moments():
    sch = diffusion.noise_schedule(1000)
    x0 = np.tile([[1.5, -0.5]], (100_000, 1))
    for t in (10, 500):
        xt, eps = diffusion.q_sample(x0, t, sch, np.random.default_rng(t))
        assert np.allclose(xt, math.sqrt(sch.alpha_bar[t]) * x0 + math.sqrt(1 - sch.alpha_bar[t]) * eps)
        se = math.sqrt((1 - sch.alpha_bar[t]) / 100_000)
        assert np.all(np.abs(xt.mean(0) - math.sqrt(sch.alpha_bar[t]) * x0[0]) < 5 * se)
        assert np.allclose(xt.var(0), 1 - sch.alpha_bar[t], rtol=0.03)
    xt, _ = diffusion.q_sample(x0[:3], np.array([0, 0, 0]), sch, np.random.default_rng(0))
    assert np.array_equal(xt, x0[:3])  # t = 0 is the data


def test_forward_chains_reach_the_marginal():
    x0 = np.array([[1.0, -2.0]])
    states = diffusion.forward_chains(np.repeat(x0, 20_000, axis=0), SCH, [0, 50, 200], rng=1)
    assert states.shape == (3, 20_000, 2)
    assert np.array_equal(states[0], np.repeat(x0, 20_000, axis=0))
    for x_t, t in zip(states[1:], (50, 200), strict=True):
        a = SCH.alpha_bar[t]
        z = (x_t - math.sqrt(a) * x0) / math.sqrt(1 - a)
        assert stats.kstest(z[:, 0], "norm").pvalue > 1e-3
        assert abs(z.var() - 1) < 0.03


def test_second_moment_is_one_plus_alpha_bar_times_the_excess():
    for c in (0.0, 1.0, 3.5):
        assert np.allclose(diffusion.second_moment(c, SCH), 1 + SCH.alpha_bar * (c - 1), atol=1e-13)


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
        post = diffusion.q_posterior(x0, x_t, t, SCH)
        assert np.allclose(post.mean, mean, atol=1e-12)
        assert math.isclose(post.var, cov[0, 0] - gain * cov[0, 1], abs_tol=1e-14)


def test_mean_from_eps_is_the_posterior_mean():
    rng = np.random.default_rng(3)
    x0 = rng.normal(size=(5, 2))
    for t in (2, 100, 200):
        x_t, eps = diffusion.q_sample(x0, t, SCH, rng)
        assert np.allclose(
            diffusion.mean_from_eps(x_t, eps, t, SCH), diffusion.q_posterior(x0, x_t, t, SCH).mean, atol=1e-10
        )


def test_exact_reverse_kernels_give_the_data_marginal_and_a_tight_bound():
    sch = diffusion.noise_schedule(15, beta_1=0.02, beta_T=0.4)
    kernels = diffusion.gaussian_reverse_kernels(-0.7, 2.0, sch)
    x0 = np.linspace(-4, 3, 9)
    assert np.allclose(
        diffusion.reverse_model_nll(x0, kernels), -stats.norm.logpdf(x0, -0.7, math.sqrt(2.0)), atol=1e-12
    )
    bound = diffusion.gaussian_diffusion_bound(x0, kernels, sch)
    assert bound.steps.shape == (9, 14)
    assert np.allclose(bound.total, diffusion.reverse_model_nll(x0, kernels), atol=1e-9)
    # the kernel of step t is the regression of x_{t-1} on x_t under the forward process
    rng = np.random.default_rng(4)
    t = 6
    x_prev = diffusion.q_sample(-0.7 + math.sqrt(2.0) * rng.standard_normal((200_000, 1)), t - 1, sch, rng)[
        0
    ][:, 0]
    x_next = math.sqrt(sch.alpha[t]) * x_prev + math.sqrt(sch.beta[t]) * rng.standard_normal(x_prev.size)
    slope, intercept = np.polyfit(x_next, x_prev, 1)
    assert abs(slope - kernels.a[t]) < 0.01 and abs(intercept - kernels.b[t]) < 0.01


def test_bound_of_perturbed_kernels_matches_its_monte_carlo_definition():
    sch = diffusion.noise_schedule(8, beta_1=0.05, beta_T=0.5)
    exact = diffusion.gaussian_reverse_kernels(0.5, 0.4, sch)
    model = diffusion.ReverseKernels(exact.a * 1.05, exact.b + 0.05, exact.var * 1.1, 0.1, 1.2)
    x0 = 1.1
    bound = diffusion.gaussian_diffusion_bound([x0], model, sch).total[0]
    assert bound > diffusion.reverse_model_nll([x0], model)[0] + 1e-3
    path = diffusion.forward_chains(np.full((100_000, 1), x0), sch, list(range(9)), rng=5)[:, :, 0]
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


def test_mixture_eps_is_minus_root_one_minus_alpha_bar_times_the_score():
    gmm, sch = three_blobs(), diffusion.noise_schedule(1000)
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
        assert np.allclose(
            diffusion.mixture_eps(gmm, x, t, sch), -math.sqrt(1 - a) * score.numpy(), atol=1e-9
        )


def test_samplers_with_the_exact_noise_predictor_reproduce_a_gaussian():
    m, S = np.array([1.0, -2.0]), np.array([[0.5, 0.2], [0.2, 0.3]])
    gmm, sch = (
        common.gaussian_mixture([1.0], [m], [S]),
        diffusion.noise_schedule(200, beta_1=5e-4, beta_T=0.1),
    )

    def eps_fn(x, t):
        return diffusion.mixture_eps(gmm, x, t, sch)

    n = 20_000
    x_T = np.random.default_rng(1).standard_normal((n, 2))
    for x0 in (
        diffusion.ddpm_sample(eps_fn, x_T, sch, rng=np.random.default_rng(2)),
        diffusion.ddpm_sample(eps_fn, x_T, sch, sigma="beta", rng=np.random.default_rng(2)),
        diffusion.ddim_sample(eps_fn, x_T, sch),  # with 50 of the 200 steps the variance shrinks by 10 %
    ):
        assert np.allclose(x0.mean(0), m, atol=0.03)
        assert np.allclose(np.cov(x0.T), S, atol=0.03)
    # DDIM with eta = 1 on every step is ancestral sampling with sigma_t^2 = beta_tilde, draw for draw
    ddpm = diffusion.ddpm_sample(eps_fn, x_T[:100], sch, rng=np.random.default_rng(3))
    ddim = diffusion.ddim_sample(eps_fn, x_T[:100], sch, eta=1.0, rng=np.random.default_rng(3))
    assert np.allclose(ddim, ddpm, atol=1e-10)
    # eta = 0 is deterministic
    assert np.array_equal(
        diffusion.ddim_sample(eps_fn, x_T[:5], sch, 20), diffusion.ddim_sample(eps_fn, x_T[:5], sch, 20)
    )


def test_noised_mixture_and_the_cached_eps_fn():
    gmm = three_blobs()
    q_t = diffusion.noised_mixture(gmm, 80, SCH)
    X0 = common.mixture_sample(gmm, 200_000, rng=6)[0]
    X_t = diffusion.q_sample(X0, 80, SCH, rng=7)[0]
    mean = q_t.weights @ q_t.means
    assert np.allclose(X_t.mean(axis=0), mean, atol=0.02)
    cov = sum(w * (S + np.outer(m, m)) for w, m, S in zip(*q_t, strict=True)) - np.outer(mean, mean)
    assert np.allclose(np.cov(X_t.T), cov, atol=0.03)
    eps_fn = diffusion.mixture_eps_fn(gmm, SCH)
    x = np.random.default_rng(8).normal(size=(50, 2)) * 3
    for t in (1, 5, 200):
        assert np.allclose(eps_fn(x, t), diffusion.mixture_eps(gmm, x, t, SCH), atol=1e-12)


def test_vp_alpha_bar_integrates_beta():
    for t in (0.0, 0.3, 1.0):
        integral = integrate.quad(lambda s: 0.1 + s * 19.9, 0, t)[0]
        assert math.isclose(float(diffusion.vp_alpha_bar(t)), math.exp(-integral), rel_tol=1e-12)


def gaussian_score(m, v):
    def score(x, t):
        a = diffusion.vp_alpha_bar(t)
        return -(x - np.sqrt(a) * m) / (a * v + 1 - a)

    return score


def test_reverse_sde_and_probability_flow_recover_gaussian_data():
    score = gaussian_score(-1.0, 0.3)
    x = diffusion.reverse_sde_sample(
        score, np.random.default_rng(9).standard_normal(100_000), steps=500, rng=10
    )
    assert abs(x.mean() + 1.0) < 0.02 and abs(x.var() / 0.3 - 1) < 0.05
    x1 = np.random.default_rng(11).standard_normal(500)
    a1 = diffusion.vp_alpha_bar(1.0)
    exact = -1.0 + math.sqrt(0.3) * (x1 + math.sqrt(a1)) / math.sqrt(a1 * 0.3 + 1 - a1)
    assert np.abs(diffusion.probability_flow_sample(score, x1, steps=2000) - exact).max() < 5e-3


def test_step_entropies_against_scipy():
    v, beta = 2.5, 0.1
    h = diffusion.gaussian_step_entropies(v, beta)
    joint = np.array([[v, math.sqrt(1 - beta) * v], [math.sqrt(1 - beta) * v, (1 - beta) * v + beta]])
    assert math.isclose(h.before, stats.norm(scale=math.sqrt(v)).entropy(), rel_tol=1e-12)
    assert math.isclose(h.after, stats.norm(scale=math.sqrt(joint[1, 1])).entropy(), rel_tol=1e-12)
    assert math.isclose(h.forward, stats.norm(scale=math.sqrt(beta)).entropy(), rel_tol=1e-12)
    h_joint = stats.multivariate_normal(cov=joint).entropy()
    assert math.isclose(h.reverse, h_joint - h.after, rel_tol=1e-10)


def test_cfg_is_an_extrapolation_from_the_unconditional_prediction():
    rng = np.random.default_rng(12)
    e_c, e_u = rng.normal(size=(6, 2)), rng.normal(size=(6, 2))
    assert np.array_equal(diffusion.cfg(e_c, e_u, 0.0), e_c)
    assert np.allclose(diffusion.cfg(e_c, e_u, 3.0), e_u + 4.0 * (e_c - e_u), atol=1e-14)


def test_ddim_steps_compose_to_ddim_sample():
    gmm = three_blobs()
    eps_fn = diffusion.mixture_eps_fn(gmm, SCH)
    x_T = np.random.default_rng(13).standard_normal((40, 2))
    ref = diffusion.ddim_sample(eps_fn, x_T, SCH, steps=20, eta=0.5, rng=np.random.default_rng(14))
    rng = np.random.default_rng(14)
    taus = np.unique(np.round(np.linspace(0, SCH.T, 21)).astype(int))[::-1]
    x = x_T
    for t, s in zip(taus[:-1], taus[1:], strict=True):
        z = rng.standard_normal(x.shape) if s > 0 else None
        x = diffusion.ddim_step(x, eps_fn(x, int(t)), int(t), int(s), SCH, eta=0.5, z=z)
    assert np.allclose(x, ref, atol=1e-12)


def test_dsm_loss_and_tweedie_for_gaussian_data():
    m, v, t = np.array([1.0, -0.5]), 0.6, 60
    a = SCH.alpha_bar[t]
    rng = np.random.default_rng(15)
    x0 = m + math.sqrt(v) * rng.standard_normal((400_000, 2))
    x_t, eps = diffusion.q_sample(x0, t, SCH, rng)
    var_t = a * v + 1 - a
    true_score = -(x_t - math.sqrt(a) * m) / var_t
    # DSM - ESM is the same constant for any score model
    consts = []
    for model in (true_score, 0.5 * true_score + 0.2, -x_t):
        consts.append(
            np.mean(diffusion.dsm_loss(model, x_t, eps, t, SCH) - np.sum((model - true_score) ** 2, axis=1))
        )
    assert np.ptp(consts) < 0.05
    eps_theta = rng.normal(size=x_t.shape)
    assert np.allclose(
        diffusion.dsm_loss(-eps_theta / math.sqrt(1 - a), x_t, eps, t, SCH) * (1 - a),
        np.sum((eps - eps_theta) ** 2, axis=1),
    )
    # Tweedie against Gaussian conditioning
    posterior_mean = m + math.sqrt(a) * v / var_t * (x_t[:5] - math.sqrt(a) * m)
    assert np.allclose(diffusion.tweedie_x0(x_t[:5], true_score[:5], t, SCH), posterior_mean, atol=1e-12)


def test_convert_prediction_round_trips_and_definitions():
    rng = np.random.default_rng(16)
    x0, t = rng.normal(size=(7, 3)), 120
    x_t, eps = diffusion.q_sample(x0, t, SCH, rng)
    a, b = math.sqrt(SCH.alpha_bar[t]), math.sqrt(1 - SCH.alpha_bar[t])
    truth = {"eps": eps, "x0": x0, "v": a * eps - b * x0}
    for source in diffusion.PREDICTIONS:
        for target in diffusion.PREDICTIONS:
            got = diffusion.convert_prediction(x_t, truth[source], t, SCH, source, target)
            assert np.allclose(got, truth[target], atol=1e-10)


# ----------------------------------------------------------------------------- training


def gaussian_data():
    return np.array([0.5, -1.0]), np.array([[1.5, 0.6], [0.6, 0.5]])


def test_gaussian_optimal_loss_matches_monte_carlo_with_the_exact_gaussian_denoiser():
    m, S = gaussian_data()
    sch = diffusion.noise_schedule(1000)
    gmm = common.gaussian_mixture([1.0], [m], [S])
    optimal = diffusion.gaussian_optimal_eps_loss(S, sch)
    assert optimal.shape == (1000,)
    rng = np.random.default_rng(0)
    x0 = common.mixture_sample(gmm, 100_000, rng)[0]
    for t in (1, 10, 100, 400, 1000):
        x_t, eps = diffusion.q_sample(x0, t, sch, rng)
        err = np.mean(
            (eps - diffusion.mixture_eps(gmm, x_t, t, sch)) ** 2, axis=1
        )  # E[eps | x_t] of Gaussian data
        assert abs(err.mean() - optimal[t - 1]) < 5 * err.std() / math.sqrt(err.size)
    # for white data the formula is tr[I - (1 - a) I] / d = alpha_bar_t
    assert np.allclose(diffusion.gaussian_optimal_eps_loss(np.eye(3), sch), sch.alpha_bar[1:], atol=1e-12)


def test_noise_prediction_loss_is_the_squared_error_of_the_noise_that_q_sample_draws():
    m, S = gaussian_data()
    sch = diffusion.noise_schedule(50)
    x0 = np.random.default_rng(1).multivariate_normal(m, S, 40)
    t = np.random.default_rng(2).integers(1, 51, 40)

    def eps_fn(x, steps):
        return 0.3 * x + steps[:, None] / 100

    got = diffusion.noise_prediction_loss(eps_fn, x0, t, sch, rng=np.random.default_rng(3))
    x_t, eps = diffusion.q_sample(x0, t, sch, rng=np.random.default_rng(3))
    a = sch.alpha_bar[t][:, None]
    assert np.allclose(x_t, np.sqrt(a) * x0 + np.sqrt(1 - a) * eps)
    expected = [np.mean((eps[i] - 0.3 * x_t[i] - t[i] / 100) ** 2) for i in range(40)]
    assert np.allclose(got, expected, atol=1e-12)
    # the zero predictor scores E||eps||^2 / d = 1
    zero = diffusion.noise_prediction_loss(lambda x, s: np.zeros_like(x), x0, t, sch, rng=4)
    assert abs(zero.mean() - 1) < 0.25


def test_eps_mlp_embeds_the_step_with_sines_and_cosines():
    torch.manual_seed(0)
    model = diffusion.EpsMLP(2, hidden=16, depth=2, n_classes=3, time_dim=8)
    x, t, c = torch.randn(5, 2), torch.tensor([1, 5, 50, 500, 999]), torch.tensor([0, 1, 2, 3, 0])
    assert model(x, t, c).shape == (5, 2)
    freqs = 10_000.0 ** (-np.arange(4) / 4)
    angles = t.numpy()[:, None] * freqs
    features = torch.cat(
        [
            x,
            torch.tensor(np.sin(angles), dtype=torch.float32),
            torch.tensor(np.cos(angles), dtype=torch.float32),
        ]
        + [model.class_embedding(c)],
        dim=1,
    )
    assert torch.allclose(model.net(features), model(x, t, c), atol=1e-5)
    # no class is the empty condition n_classes
    assert torch.allclose(model(x, t), model(x, t, torch.full((5,), 3)))


def test_ddim_steps_are_even_or_quadratic_and_the_sampler_visits_them():
    assert list(diffusion.ddim_steps(1000, 4)) == [1000, 750, 500, 250, 0]
    squares = [1000, 810, 640, 490, 360, 250, 160, 90, 40, 10, 0]
    assert list(diffusion.ddim_steps(1000, 10, "quadratic")) == squares
    repeats_once = [10, 8, 6, 5, 4, 2, 1, 0]  # round(10 (i/10)^2) repeats 0 and 2
    assert list(diffusion.ddim_steps(10, 10, "quadratic")) == repeats_once
    sch = diffusion.noise_schedule(100)
    visited = []

    def eps_fn(x, t):
        visited.append(t)
        return np.zeros_like(x)

    diffusion.ddim_sample(eps_fn, np.ones((3, 2)), sch, steps=5, spacing="quadratic")
    assert visited == list(diffusion.ddim_steps(100, 5, "quadratic")[:-1])


def test_eps_mlp_fourier_features_are_sines_and_cosines_of_x_at_doubling_frequencies():
    torch.manual_seed(0)
    model = diffusion.EpsMLP(2, hidden=8, depth=1, time_dim=4, fourier=3)
    x, t = torch.randn(6, 2, dtype=torch.float64), torch.tensor([1, 2, 3, 10, 100, 1000])
    model = model.double()
    waves = x.numpy()[:, :, None] * (np.pi / 2 * 2.0 ** np.arange(3))  # (6, 2, 3)
    angles = t.numpy()[:, None] * 10_000.0 ** (-np.arange(2) / 2)
    parts = [
        x.numpy(),
        np.sin(angles),
        np.cos(angles),
        np.sin(waves).reshape(6, -1),
        np.cos(waves).reshape(6, -1),
    ]
    features = torch.tensor(np.concatenate(parts, axis=1))
    assert model.net[0].in_features == 2 * 7 + 4
    assert torch.allclose(model.net(features), model(x, t), atol=1e-12)


def test_a_trained_model_beats_the_zero_predictor_and_nears_the_gaussian_optimum():
    m, S = gaussian_data()
    sch = diffusion.noise_schedule(100, beta_1=1e-3, beta_T=0.1)
    X = np.random.default_rng(6).multivariate_normal(m, 0.1 * S, 500)
    trained = diffusion.train_eps_model(X, sch, 400, hidden=32, depth=2, lr=3e-3, rng=7, progress=False)
    assert trained.losses.shape == (400,) and not trained.model.training
    fresh = np.random.default_rng(8).multivariate_normal(m, 0.1 * S, 20_000)
    t = np.random.default_rng(9).integers(1, 101, 20_000)
    loss = diffusion.noise_prediction_loss(
        diffusion.eps_predictor(trained.model), fresh, t, sch, rng=10
    ).mean()
    optimum = diffusion.gaussian_optimal_eps_loss(0.1 * S, sch).mean()
    assert loss < 0.5 and loss < optimum + 0.05, (loss, optimum)


def test_conditional_model_and_classifier_free_guidance():
    rng = np.random.default_rng(11)
    labels = rng.integers(0, 2, 400)
    X = np.where(labels[:, None] == 1, 2.0, -2.0) + 0.3 * rng.normal(size=(400, 2))
    sch = diffusion.noise_schedule(50, beta_1=1e-3, beta_T=0.2)
    trained = diffusion.train_eps_model(
        X, sch, 30, labels=labels, n_classes=2, p_uncond=0.2, hidden=16, rng=12, progress=False
    )
    model = trained.model
    x, c = rng.normal(size=(6, 2)), np.array([0, 1, 0, 1, 1, 0])
    dev = model_device(model)  # the trainer's device, a GPU where there is one
    with torch.no_grad():
        xs, ts = torch.tensor(x, dtype=torch.float32, device=dev), torch.full((6,), 20, device=dev)
        eps_c = to_numpy(model(xs, ts, torch.tensor(c, device=dev)))
        eps_u = to_numpy(model(xs, ts, torch.full((6,), 2, device=dev)))
    assert np.allclose(diffusion.eps_predictor(model, c, 0.0)(x, 20), eps_c, atol=1e-6)
    assert np.allclose(diffusion.eps_predictor(model)(x, 20), eps_u, atol=1e-6)
    assert np.allclose(diffusion.eps_predictor(model, c, 3.0)(x, 20), 4 * eps_c - 3 * eps_u, atol=1e-5)
    # same rng, same model and losses
    again = diffusion.train_eps_model(
        X, sch, 30, labels=labels, n_classes=2, p_uncond=0.2, hidden=16, rng=12, progress=False
    )
    assert np.array_equal(again.losses, trained.losses)


def tiny_model(n_classes=0):
    return diffusion.EpsMLP(2, hidden=4, depth=1, n_classes=n_classes)


BAD_INPUT = [  # (call, error, message)
    (lambda: diffusion.noise_schedule(100, "quadratic"), ValueError, "kind must be one of"),
    (lambda: diffusion.noise_schedule(0), ValueError, "T must be an int in [1, inf)"),
    (lambda: diffusion.q_sample(np.ones((2, 2)), 11, diffusion.noise_schedule(10)), ValueError, "t must be in 0..T = 0..10"),
    (lambda: diffusion.q_sample(np.ones((2, 2)), 1.5, diffusion.noise_schedule(10)), ValueError, "t must be an integer step"),
    (lambda: diffusion.q_sample(np.ones((2, 2)), 1, (1, 2, 3)), TypeError, "schedule must be a Schedule"),
    (lambda: diffusion.mixture_eps(three_blobs(), np.ones((2, 2)), 0, diffusion.noise_schedule(10)), ValueError, "t must be an int in [1, 10]"),
    (lambda: diffusion.ddpm_sample(lambda x, t: x[:, :1], np.ones((2, 2)), diffusion.noise_schedule(10)), ValueError, "eps_fn(x, t) must return the shape of x"),
    (lambda: diffusion.ddpm_sample(lambda x, t: x, np.ones((2, 2)), diffusion.noise_schedule(10), sigma="zero"), ValueError, "sigma must be one of"),
    (lambda: diffusion.ddim_sample(lambda x, t: x, np.ones((2, 2)), diffusion.noise_schedule(10), steps=11), ValueError, "steps must be an int in [1, 10]"),
    (lambda: diffusion.ddim_sample(lambda x, t: x, np.ones((2, 2)), diffusion.noise_schedule(10), eta=2.0), ValueError, "eta must be a finite number in [0, 1]"),
    (lambda: diffusion.forward_chains(np.ones((2, 2)), SCH, [300]), ValueError, "record must be an int in [0, 200]"),
    (lambda: diffusion.forward_chains(np.ones((2, 2)), SCH, []), ValueError, "record must name at least one step"),
    (lambda: diffusion.second_moment(-1.0, SCH), ValueError, "c must be a finite number in [0, inf)"),
    (lambda: diffusion.q_posterior(np.ones((2, 2)), np.ones((2, 2)), 0, SCH), ValueError, "t must be an int in [1, 200]"),
    (lambda: diffusion.q_posterior(np.ones((2, 2)), np.ones((3, 2)), 5, SCH), ValueError, "x_t must have shape (2, 2)"),
    (lambda: diffusion.mean_from_eps(np.ones((2, 2)), np.ones(2), 5, SCH), ValueError, "eps must have shape (2, 2)"),
    (lambda: diffusion.gaussian_reverse_kernels(0.0, 0.0, SCH), ValueError, "var must be a finite number in (0, inf)"),
    (lambda: diffusion.gaussian_diffusion_bound([0.0], (1, 2), SCH), TypeError, "kernels must be ReverseKernels"),
    (lambda: diffusion.gaussian_diffusion_bound([0.0], diffusion.gaussian_reverse_kernels(0, 1, diffusion.noise_schedule(5)), SCH), ValueError, "kernels.a must have shape (201,)"),
    (lambda: diffusion.reverse_model_nll(np.ones((2, 2)), diffusion.gaussian_reverse_kernels(0, 1, SCH)), ValueError, "x0 must have shape (any,)"),
    (lambda: diffusion.noised_mixture("gmm", 1, SCH), TypeError, "gmm must be a GaussianMixture"),
    (lambda: diffusion.mixture_eps_fn(three_blobs(), SCH)(np.ones((2, 3)), 5), ValueError, "x must have shape (any, 2)"),
    (lambda: diffusion.mixture_eps_fn(three_blobs(), SCH)(np.ones((2, 2)), 0), ValueError, "t must be an int in [1, 200]"),
    (lambda: diffusion.vp_alpha_bar(1.5), ValueError, "t must lie in [0, 1]"),
    (lambda: diffusion.reverse_sde_sample(lambda x, t: x[:1], np.ones(3)), ValueError, "score_fn(x, t) must return the shape of x"),
    (lambda: diffusion.probability_flow_sample(lambda x, t: x, np.ones(3), steps=0), ValueError, "steps must be an int in [1, inf)"),
    (lambda: diffusion.gaussian_step_entropies(1.0, 1.0), ValueError, "beta must be a finite number in (0, 1)"),
    (lambda: diffusion.cfg(np.ones((2, 2)), np.ones((2, 3)), 1.0), ValueError, "eps_u must have shape (2, 2)"),
    (lambda: diffusion.cfg(np.ones(2), np.ones(2), -1.0), ValueError, "w must be a finite number in [0, inf)"),
    (lambda: diffusion.ddim_step(np.ones((2, 2)), np.ones((2, 2)), 5, 5, SCH), ValueError, "s must be an int in [0, 4]"),
    (lambda: diffusion.dsm_loss(np.ones((2, 1)), np.ones((2, 2)), np.ones((2, 2)), 5, SCH), ValueError, "score must have shape (2, 2)"),
    (lambda: diffusion.tweedie_x0(np.ones((2, 2)), np.ones((2, 2)), 201, SCH), ValueError, "t must be an int in [1, 200]"),
    (lambda: diffusion.convert_prediction(np.ones((2, 2)), np.ones((2, 2)), 5, SCH, "score", "x0"), ValueError, "source must be one of"),
    (lambda: diffusion.EpsMLP(0), ValueError, "d must be an int in [1, inf)"),
    (lambda: diffusion.EpsMLP(2, time_dim=1), ValueError, "time_dim must be an int in [2, inf)"),
    (lambda: diffusion.EpsMLP(2, fourier=-1), ValueError, "fourier must be an int in [0, inf)"),
    (lambda: diffusion.ddim_steps(10, 11), ValueError, "steps must be an int in [1, 10]"),
    (lambda: diffusion.ddim_steps(10, 5, "cubic"), ValueError, "spacing must be one of"),
    (lambda: diffusion.train_eps_model(np.ones((5, 2)), diffusion.noise_schedule(10), 0), ValueError, "steps must be an int in [1, inf)"),
    (lambda: diffusion.train_eps_model(np.ones(5), diffusion.noise_schedule(10), 1), ValueError, "X must have shape (any, any)"),
    (lambda: diffusion.train_eps_model(np.ones((5, 2)), (1, 2), 1), TypeError, "schedule must be a Schedule"),
    (lambda: diffusion.train_eps_model(np.ones((5, 2)), diffusion.noise_schedule(10), 1, labels=[0, 1, 0, 1, 0]), ValueError, "n_classes must be given with labels"),
    (lambda: diffusion.train_eps_model(np.ones((5, 2)), diffusion.noise_schedule(10), 1, labels=[0, 1, 2, 1, 0], n_classes=2), ValueError, "labels must hold labels in 0..1"),
    (lambda: diffusion.train_eps_model(np.ones((5, 2)), diffusion.noise_schedule(10), 1, p_uncond=1.5), ValueError, "p_uncond must be a finite number in [0, 1]"),
    (lambda: diffusion.eps_predictor("model"), TypeError, "model must be an EpsMLP"),
    (lambda: diffusion.eps_predictor(tiny_model(), c=1), ValueError, "c needs a class-conditional model"),
    (lambda: diffusion.eps_predictor(tiny_model(2), c=1, w=-1.0), ValueError, "w must be a finite number in [0, inf)"),
    (lambda: diffusion.eps_predictor(tiny_model(2), c=2), ValueError, "c must hold labels in 0..1"),
    (lambda: diffusion.eps_predictor(tiny_model(2), c=[0, 1])(np.ones((3, 2)), 1), ValueError, "c must be one class or one class per row"),
    (lambda: diffusion.eps_predictor(tiny_model())(np.ones((3, 3)), 1), ValueError, "x must have shape (any, 2)"),
    (lambda: diffusion.noise_prediction_loss(lambda x, t: x, np.ones((3, 2)), 0, diffusion.noise_schedule(10)), ValueError, "t must be in 1..T"),
    (lambda: diffusion.noise_prediction_loss(lambda x, t: x[:, :1], np.ones((3, 2)), 1, diffusion.noise_schedule(10)), ValueError, "eps_fn(x, t) must return the shape of x"),
    (lambda: diffusion.noise_prediction_loss(3, np.ones((3, 2)), 1, diffusion.noise_schedule(10)), TypeError, "eps_fn must be callable"),
    (lambda: diffusion.gaussian_optimal_eps_loss(np.ones((2, 3)), diffusion.noise_schedule(10)), ValueError, "cov must have shape (2, 2)"),
    (lambda: diffusion.gaussian_optimal_eps_loss(-np.eye(2), diffusion.noise_schedule(10)), ValueError, "cov must be positive definite"),
]  # fmt: skip


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
