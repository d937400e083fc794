"""Tests of section 10.6 (training a diffusion model) in dlnotes.generative: the noise predictor, its training,
the simplified loss, the Gaussian-optimal loss and the kernel MMD."""

import math

import numpy as np
import torch

import dlnotes.generative as gen

from conftest import bad_input_test


def gaussian_data():
    return np.array([0.5, -1.0]), np.array([[1.5, 0.6], [0.6, 0.5]])


def test_gaussian_optimal_loss_matches_monte_carlo_with_the_exact_gaussian_denoiser():
    m, S = gaussian_data()
    sch = gen.noise_schedule(1000)
    gmm = gen.gaussian_mixture([1.0], [m], [S])
    optimal = gen.gaussian_optimal_eps_loss(S, sch)
    assert optimal.shape == (1000,)
    rng = np.random.default_rng(0)
    x0 = gen.mixture_sample(gmm, 100_000, rng)[0]
    for t in (1, 10, 100, 400, 1000):
        x_t, eps = gen.q_sample(x0, t, sch, rng)
        err = np.mean((eps - gen.mixture_eps(gmm, x_t, t, sch)) ** 2, axis=1)  # E[eps | x_t] of Gaussian data
        assert abs(err.mean() - optimal[t - 1]) < 5 * err.std() / math.sqrt(err.size)
    # for white data the formula is tr[I - (1 - a) I] / d = alpha_bar_t
    assert np.allclose(gen.gaussian_optimal_eps_loss(np.eye(3), sch), sch.alpha_bar[1:], atol=1e-12)


def test_noise_prediction_loss_is_the_squared_error_of_the_noise_that_q_sample_draws():
    m, S = gaussian_data()
    sch = gen.noise_schedule(50)
    x0 = np.random.default_rng(1).multivariate_normal(m, S, 40)
    t = np.random.default_rng(2).integers(1, 51, 40)

    def eps_fn(x, steps):
        return 0.3 * x + steps[:, None] / 100

    got = gen.noise_prediction_loss(eps_fn, x0, t, sch, rng=np.random.default_rng(3))
    x_t, eps = gen.q_sample(x0, t, sch, rng=np.random.default_rng(3))
    a = sch.alpha_bar[t][:, None]
    assert np.allclose(x_t, np.sqrt(a) * x0 + np.sqrt(1 - a) * eps)
    expected = [np.mean((eps[i] - 0.3 * x_t[i] - t[i] / 100) ** 2) for i in range(40)]
    assert np.allclose(got, expected, atol=1e-12)
    # the zero predictor scores E||eps||^2 / d = 1
    zero = gen.noise_prediction_loss(lambda x, s: np.zeros_like(x), x0, t, sch, rng=4)
    assert abs(zero.mean() - 1) < 0.25


def test_mmd_matches_a_double_loop_and_separates_distributions():
    rng = np.random.default_rng(5)
    X, Y, h = rng.normal(size=(7, 3)), rng.normal(size=(5, 3)) + 0.5, 0.8

    def k(a, b):
        return math.exp(-np.sum((a - b) ** 2) / (2 * h * h))

    xx = sum(k(X[i], X[j]) for i in range(7) for j in range(7) if i != j) / (7 * 6)
    yy = sum(k(Y[i], Y[j]) for i in range(5) for j in range(5) if i != j) / (5 * 4)
    xy = sum(k(X[i], Y[j]) for i in range(7) for j in range(5)) / 35
    assert abs(gen.mmd(X, Y, h) - (xx + yy - 2 * xy)) < 1e-12
    assert abs(gen.mmd(X, Y, h) - gen.mmd(Y, X, h)) < 1e-12
    same = gen.mmd(rng.normal(size=(500, 2)), rng.normal(size=(500, 2)))
    shifted = gen.mmd(rng.normal(size=(500, 2)), rng.normal(size=(500, 2)) + 1)
    assert abs(same) < 0.01 < 0.1 < shifted


def test_eps_mlp_embeds_the_step_with_sines_and_cosines():
    torch.manual_seed(0)
    model = gen.EpsMLP(2, hidden=16, depth=2, n_classes=3, time_dim=8)
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


def test_a_trained_model_beats_the_zero_predictor_and_nears_the_gaussian_optimum():
    m, S = gaussian_data()
    sch = gen.noise_schedule(100, beta_1=1e-3, beta_T=0.1)
    X = np.random.default_rng(6).multivariate_normal(m, 0.1 * S, 500)
    trained = gen.train_eps_model(X, sch, 400, hidden=32, depth=2, lr=3e-3, rng=7, progress=False)
    assert trained.losses.shape == (400,) and not trained.model.training
    fresh = np.random.default_rng(8).multivariate_normal(m, 0.1 * S, 20_000)
    t = np.random.default_rng(9).integers(1, 101, 20_000)
    loss = gen.noise_prediction_loss(gen.eps_predictor(trained.model), fresh, t, sch, rng=10).mean()
    optimum = gen.gaussian_optimal_eps_loss(0.1 * S, sch).mean()
    assert loss < 0.5 and loss < optimum + 0.05, (loss, optimum)


def test_conditional_model_and_classifier_free_guidance():
    rng = np.random.default_rng(11)
    labels = rng.integers(0, 2, 400)
    X = np.where(labels[:, None] == 1, 2.0, -2.0) + 0.3 * rng.normal(size=(400, 2))
    sch = gen.noise_schedule(50, beta_1=1e-3, beta_T=0.2)
    trained = gen.train_eps_model(
        X, sch, 30, labels=labels, n_classes=2, p_uncond=0.2, hidden=16, rng=12, progress=False
    )
    model = trained.model
    x, c = rng.normal(size=(6, 2)), np.array([0, 1, 0, 1, 1, 0])
    with torch.no_grad():
        xs, ts = torch.tensor(x, dtype=torch.float32), torch.full((6,), 20)
        eps_c = model(xs, ts, torch.tensor(c)).numpy()
        eps_u = model(xs, ts, torch.full((6,), 2)).numpy()
    assert np.allclose(gen.eps_predictor(model, c, 0.0)(x, 20), eps_c, atol=1e-6)
    assert np.allclose(gen.eps_predictor(model)(x, 20), eps_u, atol=1e-6)
    assert np.allclose(gen.eps_predictor(model, c, 3.0)(x, 20), 4 * eps_c - 3 * eps_u, atol=1e-5)
    # same rng, same model and losses
    again = gen.train_eps_model(
        X, sch, 30, labels=labels, n_classes=2, p_uncond=0.2, hidden=16, rng=12, progress=False
    )
    assert np.array_equal(again.losses, trained.losses)


def tiny_model(n_classes=0):
    return gen.EpsMLP(2, hidden=4, depth=1, n_classes=n_classes)


BAD_INPUT = [  # (call, error, message)
    (lambda: gen.EpsMLP(0), ValueError, "d must be an int in [1, inf)"),
    (lambda: gen.EpsMLP(2, time_dim=1), ValueError, "time_dim must be an int in [2, inf)"),
    (lambda: gen.train_eps_model(np.ones((5, 2)), gen.noise_schedule(10), 0), ValueError, "steps must be an int in [1, inf)"),
    (lambda: gen.train_eps_model(np.ones(5), gen.noise_schedule(10), 1), ValueError, "X must have shape (any, any)"),
    (lambda: gen.train_eps_model(np.ones((5, 2)), (1, 2), 1), TypeError, "schedule must be a Schedule"),
    (lambda: gen.train_eps_model(np.ones((5, 2)), gen.noise_schedule(10), 1, labels=[0, 1, 0, 1, 0]), ValueError, "n_classes must be given with labels"),
    (lambda: gen.train_eps_model(np.ones((5, 2)), gen.noise_schedule(10), 1, labels=[0, 1, 2, 1, 0], n_classes=2), ValueError, "labels must hold labels in 0..1"),
    (lambda: gen.train_eps_model(np.ones((5, 2)), gen.noise_schedule(10), 1, p_uncond=1.5), ValueError, "p_uncond must be a finite number in [0, 1]"),
    (lambda: gen.eps_predictor("model"), TypeError, "model must be an EpsMLP"),
    (lambda: gen.eps_predictor(tiny_model(), c=1), ValueError, "c needs a class-conditional model"),
    (lambda: gen.eps_predictor(tiny_model(2), c=1, w=-1.0), ValueError, "w must be a finite number in [0, inf)"),
    (lambda: gen.eps_predictor(tiny_model(2), c=2), ValueError, "c must hold labels in 0..1"),
    (lambda: gen.eps_predictor(tiny_model(2), c=[0, 1])(np.ones((3, 2)), 1), ValueError, "c must be one class or one class per row"),
    (lambda: gen.eps_predictor(tiny_model())(np.ones((3, 3)), 1), ValueError, "x must have shape (any, 2)"),
    (lambda: gen.noise_prediction_loss(lambda x, t: x, np.ones((3, 2)), 0, gen.noise_schedule(10)), ValueError, "t must be in 1..T"),
    (lambda: gen.noise_prediction_loss(lambda x, t: x[:, :1], np.ones((3, 2)), 1, gen.noise_schedule(10)), ValueError, "eps_fn(x, t) must return the shape of x"),
    (lambda: gen.noise_prediction_loss(3, np.ones((3, 2)), 1, gen.noise_schedule(10)), TypeError, "eps_fn must be callable"),
    (lambda: gen.gaussian_optimal_eps_loss(np.ones((2, 3)), gen.noise_schedule(10)), ValueError, "cov must have shape (2, 2)"),
    (lambda: gen.gaussian_optimal_eps_loss(-np.eye(2), gen.noise_schedule(10)), ValueError, "cov must be positive definite"),
    (lambda: gen.mmd(np.ones((3, 2)), np.ones((3, 3))), ValueError, "Y must have shape (any, 2)"),
    (lambda: gen.mmd(np.ones((1, 2)), np.ones((3, 2))), ValueError, "X and Y need at least 2 rows each"),
    (lambda: gen.mmd(np.ones((3, 2)), np.ones((3, 2)), bandwidth=0.0), ValueError, "bandwidth must be a finite number in (0, inf)"),
]  # fmt: skip


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
