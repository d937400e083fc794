"""Section 10.2: the ELBO, its gradients and the VAE. The generative classifier against Bayes' rule, the PPCA ELBO
and the Gaussian conditioning against scipy and the precision-matrix form, the gradient estimators against exact
per-draw derivatives and torch.distributions, the Gaussian KLs against gauss_kl and torch, the hierarchical
chain against an independent construction, the KL fits against closed forms, the VAE's ELBO, IWAE bound and
training against torch, scipy and quadrature."""

import math

import numpy as np
import pytest
import torch
from scipy import integrate, stats
from scipy.special import expit

from dlnotes.generative import common, vae

from conftest import bad_input_test

rng = np.random.default_rng(102)


def test_generative_classifier_is_bayes_rule():
    mu0, mu1 = rng.normal(size=3), rng.normal(size=3)
    X = 2 * rng.normal(size=(50, 3))
    p0 = stats.multivariate_normal(mu0, np.eye(3)).pdf(X)
    p1 = stats.multivariate_normal(mu1, np.eye(3)).pdf(X)
    logit = vae.generative_classifier(mu0, mu1)
    assert np.allclose(expit(X @ logit.w + logit.b), p1 / (p0 + p1), atol=1e-13)


def _ppca(d=4, k=2):
    W, mu = rng.normal(size=(d, k)), rng.normal(size=d)
    return W, mu, 0.7, rng.normal(size=d)


def test_gauss_condition_equals_the_precision_matrix_form():
    A = rng.normal(size=(5, 5))
    cov, mean = A @ A.T + np.eye(5), rng.normal(size=5)
    obs, free, x_obs = np.array([4, 1]), np.array([0, 2, 3]), rng.normal(size=2)
    cond = vae.gauss_condition(mean, cov, obs, x_obs)
    P = np.linalg.inv(cov)
    P_uu = P[np.ix_(free, free)]
    assert np.allclose(cond.cov, np.linalg.inv(P_uu), atol=1e-12)
    expected = mean[free] - np.linalg.solve(P_uu, P[np.ix_(free, obs)] @ (x_obs - mean[obs]))
    assert np.allclose(cond.mean, expected, atol=1e-12)


def test_ppca_elbo_plus_gap_is_the_log_likelihood_and_its_terms_match_monte_carlo():
    W, mu, s2, x = _ppca()
    k = W.shape[1]
    log_px = stats.multivariate_normal(mu, W @ W.T + s2 * np.eye(4)).logpdf(x)
    joint = np.block([[np.eye(k), W.T], [W, W @ W.T + s2 * np.eye(4)]])
    post = vae.gauss_condition(np.concatenate([np.zeros(k), mu]), joint, np.arange(k, k + 4), x)
    B = rng.normal(size=(k, k))
    m, S = rng.normal(size=k), B @ B.T + 0.2 * np.eye(k)
    terms = vae.ppca_elbo(x, W, mu, s2, m, S)
    assert abs(terms.elbo + common.gauss_kl(m, S, post.mean, post.cov) - log_px) < 1e-10
    assert abs(vae.ppca_elbo(x, W, mu, s2, post.mean, post.cov).elbo - log_px) < 1e-10
    z = rng.multivariate_normal(m, S, size=200_000)
    mc = stats.multivariate_normal(np.zeros(4), s2 * np.eye(4)).logpdf(x - mu - z @ W.T)
    assert abs(mc.mean() - terms.reconstruction) < 5 * mc.std() / math.sqrt(len(mc))
    assert terms.kl == pytest.approx(common.gauss_kl(m, S, np.zeros(k), np.eye(k)))


def test_gradient_estimators_per_draw_and_against_torch_distributions():
    mu, sigma = np.array([0.3, -1.0]), np.array([0.5, 2.0])

    def f(z):
        return (z**3).sum(1) + torch.sin(z[:, 0] * z[:, 1])

    rep = vae.reparam_grad(f, mu, sigma, 1000, rng=7)
    eps = np.random.default_rng(7).standard_normal((1000, 2))
    z = torch.tensor(mu + sigma * eps, requires_grad=True)
    (g,) = torch.autograd.grad(f(z).sum(), z)
    assert np.allclose(rep.d_mu, g.numpy(), atol=1e-12) and np.allclose(
        rep.d_sigma, g.numpy() * eps, atol=1e-12
    )

    sf = vae.score_function_grad(f, mu, sigma, 1000, rng=7)
    mu_t, sigma_t = torch.tensor(mu, requires_grad=True), torch.tensor(sigma, requires_grad=True)
    z0 = torch.tensor(mu + sigma * eps)
    log_q = torch.distributions.Normal(mu_t, sigma_t).log_prob(z0)  # (n, 2), one factor per coordinate
    values = f(z0).detach()
    for j in range(2):
        gm, gs = torch.autograd.grad(log_q[:, j].sum(), (mu_t, sigma_t), retain_graph=True)
        # per draw, d log q / d mu_j only involves coordinate j: recover it column by column
        d_mu = values * (z0[:, j] - mu_t[j]).detach() / sigma_t[j].detach() ** 2
        assert np.allclose(sf.d_mu[:, j], d_mu.numpy(), atol=1e-10)
        assert gm[j].item() == pytest.approx(((z0[:, j] - mu[j]) / sigma[j] ** 2).sum().item(), rel=1e-10)
        assert gs[j].item() == pytest.approx(
            (((z0[:, j] - mu[j]) ** 2 - sigma[j] ** 2) / sigma[j] ** 3).sum().item(), rel=1e-10
        )
    d_sigma = values[:, None].numpy() * (eps**2 - 1) / sigma
    assert np.allclose(sf.d_sigma, d_sigma, atol=1e-10)


def test_both_gradient_estimators_are_unbiased():
    mu, sigma, n = np.array([0.7]), np.array([0.4]), 200_000

    def cube(z):
        return z[:, 0] ** 3

    exact = (3 * mu**2 + 3 * sigma**2, 6 * mu * sigma)  # E z^3 = mu^3 + 3 mu sigma^2
    for estimator in (vae.reparam_grad, vae.score_function_grad):
        est = estimator(cube, mu, sigma, n, rng=1)
        for samples, target in zip((est.d_mu, est.d_sigma), exact, strict=True):
            assert abs(samples.mean() - target[0]) < 5 * samples.std() / math.sqrt(n)


def test_diag_gauss_kl_equals_gauss_kl_and_torch():
    mu, var = rng.normal(size=(6, 3)), rng.uniform(0.1, 3, size=(6, 3))
    ours = vae.diag_gauss_kl(mu, var)
    assert ours.shape == (6,)
    for i in range(6):
        assert ours[i] == pytest.approx(
            common.gauss_kl(mu[i], np.diag(var[i]), np.zeros(3), np.eye(3)), abs=1e-12
        )
    q = torch.distributions.Normal(torch.tensor(mu), torch.tensor(np.sqrt(var)))
    p = torch.distributions.Normal(torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64))
    assert np.allclose(ours, torch.distributions.kl_divergence(q, p).sum(-1).numpy(), atol=1e-12)
    assert vae.diag_gauss_kl(np.zeros(4), np.ones(4)) == 0


def _chain():
    p_z1 = vae.linear_gaussian(rng.normal(size=(2, 1)), rng.normal(size=2), np.diag([0.4, 0.6]))
    p_x = vae.linear_gaussian(rng.normal(size=(3, 2)), rng.normal(size=3), 0.3 * np.eye(3))
    return p_z1, p_x


def test_chain_joint_equals_the_covariance_of_the_linear_map():
    p_z1, p_x = _chain()
    A, a, B, b = p_z1.weight, p_z1.bias, p_x.weight, p_x.bias
    L1, L0 = np.linalg.cholesky(p_z1.cov), np.linalg.cholesky(p_x.cov)
    # (z1, z2, x) = M (z2, e1, e0) + c with standard normal (z2, e1, e0)
    M = np.zeros((6, 6))
    M[0:2, 0:1], M[0:2, 1:3] = A, L1
    M[2, 0] = 1.0
    M[3:6, 0:1], M[3:6, 1:3], M[3:6, 3:6] = B @ A, B @ L1, L0
    mean, cov = vae.chain_joint(p_z1, p_x)
    assert np.allclose(cov, M @ M.T, atol=1e-12)
    assert np.allclose(mean, np.concatenate([a, [0.0], B @ a + b]), atol=1e-12)


def test_hierarchical_log_weights_against_scipy_with_the_same_draws():
    p_z1, p_x = _chain()
    x = rng.normal(size=3)
    q_z1 = vae.linear_gaussian(rng.normal(size=(2, 3)), rng.normal(size=2), np.diag([0.3, 0.5]))
    q_z2 = vae.linear_gaussian(rng.normal(size=(1, 2)), rng.normal(size=1), [[0.4]])
    log_w = vae.hierarchical_log_weights(x, p_z1, p_x, q_z1, q_z2, 50, rng=3)
    draws = np.random.default_rng(3)
    z1 = q_z1.weight @ x + q_z1.bias + draws.standard_normal((50, 2)) @ np.linalg.cholesky(q_z1.cov).T
    z2 = z1 @ q_z2.weight.T + q_z2.bias + draws.standard_normal((50, 1)) * math.sqrt(0.4)
    expected = []
    for i in range(50):
        log_p = (
            stats.norm.logpdf(z2[i, 0])
            + stats.multivariate_normal(p_z1.weight @ z2[i] + p_z1.bias, p_z1.cov).logpdf(z1[i])
            + stats.multivariate_normal(p_x.weight @ z1[i] + p_x.bias, p_x.cov).logpdf(x)
        )
        log_q = stats.multivariate_normal(q_z1.weight @ x + q_z1.bias, q_z1.cov).logpdf(
            z1[i]
        ) + stats.norm.logpdf(z2[i, 0], (q_z2.weight @ z1[i] + q_z2.bias)[0], math.sqrt(0.4))
        expected.append(log_p - log_q)
    assert np.allclose(log_w, expected, atol=1e-10)


def test_kl_on_grid_and_the_two_gaussian_fits():
    grid = np.linspace(-15, 15, 3001)
    log_p = stats.norm.logpdf(grid, 0.5, 1.3)
    log_q = stats.norm.logpdf(grid, -0.4, 0.8)
    closed = common.gauss_kl([0.5], [[1.3**2]], [-0.4], [[0.8**2]])
    assert vae.kl_on_grid(log_p, log_q, grid) == pytest.approx(closed, abs=1e-8)
    for direction in ("forward", "reverse"):  # a Gaussian target is recovered exactly in both directions
        fit = vae.fit_gaussian_kl(log_p, grid, direction, (0.0, 1.0))
        assert fit.mean == pytest.approx(0.5, abs=1e-5) and fit.std == pytest.approx(1.3, abs=1e-5)
        assert fit.kl < 1e-9
    # a skewed target: the forward fit matches its moments, the reverse fit does not
    gmm = common.gaussian_mixture([0.3, 0.7], [[-2.0], [1.0]], [[[0.5]], [[1.0]]])
    log_m = common.mixture_log_prob(gmm, grid[:, None])
    fwd = vae.fit_gaussian_kl(log_m, grid, "forward")
    mean = 0.3 * -2 + 0.7 * 1
    var = 0.3 * (0.5 + 4) + 0.7 * (1 + 1) - mean**2
    assert fwd.mean == pytest.approx(mean, abs=1e-5) and fwd.std**2 == pytest.approx(var, abs=1e-5)
    rev = vae.fit_gaussian_kl(log_m, grid, "reverse", (1.0, 1.0))
    assert rev.kl < vae.kl_on_grid(stats.norm.logpdf(grid, fwd.mean, fwd.std), log_m, grid)


def _binary(n, d):
    return (rng.random((n, d)) < 0.4).astype(float)


def test_vae_elbo_terms_against_scipy_and_torch():
    torch.manual_seed(0)
    model = vae.VAE(6, 5, 2)
    X = _binary(8, 6)
    x = torch.tensor(X, dtype=torch.float32)
    eps = torch.randn(8, 2)
    terms = model.elbo(x, beta=2.5, eps=eps)
    with torch.no_grad():
        mu, var = model.encode(x)
        logits = model.decode(mu + var.sqrt() * eps).double().numpy()
    rec = stats.bernoulli.logpmf(X, expit(logits)).sum(1)
    kl = vae.diag_gauss_kl(mu.double().numpy(), var.double().numpy())
    assert np.allclose(terms.reconstruction.detach().numpy(), rec, atol=1e-4)
    assert np.allclose(terms.kl.detach().numpy(), kl, atol=1e-5)
    assert np.allclose(terms.elbo.detach().numpy(), rec - 2.5 * kl, atol=1e-4)


def test_train_vae_is_reproducible_learns_and_leaves_torch_alone():
    X = (np.random.default_rng(0).random((200, 10)) < np.linspace(0.1, 0.9, 10)).astype(float)
    state = torch.get_rng_state()
    a = vae.train_vae(X, d_h=8, d_z=2, epochs=15, batch_size=50, lr=1e-2, rng=4, progress=False)
    assert torch.equal(torch.get_rng_state(), state)
    b = vae.train_vae(X, d_h=8, d_z=2, epochs=15, batch_size=50, lr=1e-2, rng=4, progress=False)
    assert a.history == b.history and len(a.history["loss"]) == 16
    assert not a.model.training and next(a.model.parameters()).device.type == "cpu"
    assert a.history["loss"][-1] < a.history["loss"][0] - 0.5  # independent pixels: little to learn
    warm = vae.train_vae(X, d_h=8, d_z=2, epochs=6, kl_warmup=3, rng=4, progress=False)
    assert np.allclose(warm.history["beta"], [1 / 3, 1 / 3, 2 / 3, 1, 1, 1, 1])


def test_conv_vae_maps_images_through_convolutions_and_trains_on_the_elbo():
    model = vae.ConvVAE(3, channels=4)
    x = torch.tensor(rng.integers(0, 2, (5, 64)), dtype=torch.float32)
    mu, var = model.encode(x)
    assert mu.shape == var.shape == (5, 3) and model.decode(mu).shape == (5, 64)
    # translation equivariance of the first layer: a shifted image gives shifted first-layer maps
    image = torch.zeros(1, 64)
    image[0, 2 * 8 + 2] = 1.0  # pixel (2, 2)
    shifted = torch.zeros(1, 64)
    shifted[0, 4 * 8 + 4] = 1.0  # pixel (4, 4): two stride-2 steps down and right
    first = model.encoder[:2]
    assert torch.allclose(first(image)[0, :, 1, 1], first(shifted)[0, :, 2, 2])
    X = (rng.random((120, 64)) < np.linspace(0.1, 0.9, 64)).astype(float)
    trained = vae.train_vae(
        X, d_h=4, d_z=2, epochs=40, batch_size=40, lr=1e-2, conv=True, rng=1, progress=False
    )
    assert isinstance(trained.model, vae.ConvVAE)
    p = X.mean(axis=0)  # independent pixels: the best model has -ELBO near their entropy (KL -> 0)
    entropy = -np.sum(p * np.log(p) + (1 - p) * np.log(1 - p))
    assert trained.history["loss"][-1] < entropy + 2 < trained.history["loss"][0]


def test_evaluate_vae_and_iwae_bound_against_quadrature():
    X = (np.random.default_rng(1).random((300, 8)) < np.linspace(0.2, 0.8, 8)).astype(float)
    model = vae.train_vae(X, d_h=16, d_z=1, epochs=20, batch_size=50, lr=1e-2, rng=0, progress=False).model
    x_eval = X[:5]
    terms = vae.evaluate_vae(model, x_eval, samples=4, rng=0)
    with torch.no_grad():
        mu, var = model.encode(torch.tensor(x_eval, dtype=torch.float32))
    assert np.allclose(terms.kl, vae.diag_gauss_kl(mu.double().numpy(), var.double().numpy()), atol=1e-5)
    # log p(x) by quadrature over the one-dimensional latent
    z_grid = np.linspace(-8, 8, 4001)
    with torch.no_grad():
        probs = (
            torch.sigmoid(model.decode(torch.tensor(z_grid[:, None], dtype=torch.float32))).double().numpy()
        )
    log_px = []
    for x in x_eval:
        log_lik = stats.bernoulli.logpmf(x, probs).sum(1) + stats.norm.logpdf(z_grid)
        peak = log_lik.max()
        log_px.append(peak + math.log(integrate.trapezoid(np.exp(log_lik - peak), z_grid)))
    log_px = np.array(log_px)
    big = np.mean([vae.iwae_bound(model, x_eval, 2000, rng=s) for s in range(3)], axis=0)
    assert np.all(big <= log_px + 1e-2) and np.allclose(big, log_px, atol=0.02)  # float32 decoder
    small = np.mean([vae.iwae_bound(model, x_eval, 1, rng=s) for s in range(400)], axis=0)
    elbo = vae.evaluate_vae(model, x_eval, samples=400, rng=9).elbo
    assert np.allclose(small, elbo, atol=0.1) and np.all(small < big)


def test_evaluate_vae_and_iwae_bound_leave_the_model_in_the_mode_it_came_in():
    model, X = vae.VAE(4, 3, 2), _binary(6, 4)
    for training in (True, False):
        model.train(training)
        vae.evaluate_vae(model, X, samples=2, rng=0)
        assert model.training == training
        vae.iwae_bound(model, X, 3, rng=0)
        assert model.training == training


def test_bernoulli_elbo_estimate_against_torch():
    d, k = 7, 3
    x, W, b = _binary(1, d)[0], rng.normal(size=(d, k)), rng.normal(size=d)
    mu, var, eps = rng.normal(size=k), rng.uniform(0.2, 2, k), rng.normal(size=k)
    logits = torch.tensor(W @ (mu + np.sqrt(var) * eps) + b)
    rec = -torch.nn.functional.binary_cross_entropy_with_logits(logits, torch.tensor(x), reduction="sum")
    q = torch.distributions.Normal(torch.tensor(mu), torch.tensor(np.sqrt(var)))
    kl = torch.distributions.kl_divergence(q, torch.distributions.Normal(0.0, 1.0)).sum()
    assert vae.bernoulli_elbo_estimate(x, mu, var, eps, W, b) == pytest.approx((rec - kl).item(), abs=1e-10)


BAD_INPUT = [  # (call, error, message)
    (lambda: vae.generative_classifier([0, 1], [1]), ValueError, "mu1 must have shape (2,)"),
    (lambda: vae.ppca_elbo(np.ones(3), np.ones((3, 2)), np.zeros(3), 0.0, np.zeros(2), np.eye(2)), ValueError, "sigma2 must be a finite number"),
    (lambda: vae.ppca_elbo(np.ones(3), np.ones((3, 2)), np.zeros(3), 1.0, np.zeros(2), -np.eye(2)), ValueError, "S must be positive definite"),
    (lambda: vae.gauss_condition(np.zeros(3), np.eye(3), [3], [0.0]), ValueError, "observed must be distinct indices"),
    (lambda: vae.gauss_condition(np.zeros(3), np.eye(3), [0, 0], [0.0, 1.0]), ValueError, "observed must be distinct indices"),
    (lambda: vae.gauss_condition(np.zeros(3), np.eye(3), [1], [0.0, 1.0]), ValueError, "x_obs must have shape (1,)"),
    (lambda: vae.reparam_grad(lambda z: z.sum(1), [0.0], [-1.0], 10), ValueError, "sigma must be positive"),
    (lambda: vae.reparam_grad(lambda z: z, [0.0, 1.0], [1.0, 1.0], 10), ValueError, "f must map a tensor (n, d) to a tensor (n,)"),
    (lambda: vae.score_function_grad("f", [0.0], [1.0], 10), TypeError, "f must be callable"),
    (lambda: vae.score_function_grad(lambda z: z.sum(1), [0.0], [1.0], 0), ValueError, "n must be an int in [1, inf)"),
    (lambda: vae.diag_gauss_kl(np.zeros(3), np.ones(2)), ValueError, "var must have shape (3,)"),
    (lambda: vae.diag_gauss_kl(np.zeros(2), np.array([1.0, 0.0])), ValueError, "var must hold positive variances"),
    (lambda: vae.linear_gaussian(np.ones((2, 1)), np.ones(3), np.eye(2)), ValueError, "bias must have shape (2,)"),
    (lambda: vae.hierarchical_log_weights(np.ones(3), *_chain(), "q", "q", 5), TypeError, "q_z1 must be a LinearGaussian"),
    (lambda: vae.hierarchical_log_weights(np.ones(3), *_chain(), *_chain(), 5), ValueError, "the shapes do not chain"),
    (lambda: vae.kl_on_grid(np.zeros(3), np.zeros(3), [0.0, 2.0, 1.0]), ValueError, "grid must be increasing"),
    (lambda: vae.fit_gaussian_kl(np.zeros(5), np.arange(5.0), "both"), ValueError, "direction must be one of"),
    (lambda: vae.fit_gaussian_kl(np.zeros(5), np.arange(5.0), start=(0.0, -1.0)), ValueError, "start must be (mean, standard deviation > 0)"),
    (lambda: vae.VAE(0, 4, 2), ValueError, "d_in must be an int in [1, inf)"),
    (lambda: vae.VAE(4, 4, 2).elbo(torch.ones(3, 5)), ValueError, "x must be a tensor (n, 4)"),
    (lambda: vae.VAE(4, 4, 2).elbo(torch.ones(3, 4), eps=torch.ones(3, 1)), ValueError, "eps must have shape (3, 2)"),
    (lambda: vae.VAE(4, 4, 2).elbo(torch.ones(3, 4), beta=-1.0), ValueError, "beta must be a finite number in [0, inf)"),
    (lambda: vae.train_vae(np.full((5, 3), 0.5), epochs=1), ValueError, "X must hold binary pixels"),
    (lambda: vae.train_vae(np.ones((5, 3)), kl_warmup=-1), ValueError, "kl_warmup must be an int in [0, inf)"),
    (lambda: vae.train_vae(np.ones((5, 3)), conv=True), ValueError, "conv=True needs 8 x 8 images"),
    (lambda: vae.ConvVAE(0), ValueError, "d_z must be an int in [1, inf)"),
    (lambda: vae.evaluate_vae("model", np.ones((2, 4))), TypeError, "model must be a VAE"),
    (lambda: vae.iwae_bound(vae.VAE(4, 4, 2), np.ones((2, 4)), 0), ValueError, "K must be an int in [1, inf)"),
    (lambda: vae.iwae_bound(vae.VAE(4, 4, 2), np.ones((2, 3)), 5), ValueError, "X must have shape (any, 4)"),
    (lambda: vae.bernoulli_elbo_estimate(np.ones(3), np.zeros(2), np.ones(2), np.zeros(2), np.ones((3, 1)), np.zeros(3)), ValueError, "W must have shape (any, 2)"),
]  # fmt: skip


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
