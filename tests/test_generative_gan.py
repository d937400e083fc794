"""Section 10.5: the GAN value, the optimal discriminator and JS against direct computations and scipy; gradient
play against the closed-form linear maps; W1 by sorting against scipy; mode coverage, MMD and the gradient
penalty against explicit computations; the GAN and critic trainers on tiny problems."""

import math

import numpy as np
import torch
from scipy.spatial.distance import jensenshannon
from scipy.stats import norm, wasserstein_distance

from dlnotes import generative as gen

from conftest import bad_input_test

rng = np.random.default_rng(105)


def test_optimal_discriminator_maximises_the_value_pointwise():
    p, q = rng.dirichlet(np.ones(6)), rng.dirichlet(np.ones(6))
    D_star = gen.optimal_discriminator(p, q)
    assert np.allclose(D_star, p / (p + q), atol=1e-15)
    for _ in range(50):
        D = np.clip(D_star + rng.normal(0, 0.05, 6), 1e-3, 1 - 1e-3)
        assert gen.gan_value(D, p, q) < gen.gan_value(D_star, p, q)
    assert gen.optimal_discriminator([0.0, 1.0], [0.0, 0.0])[0] == 0.5  # both vanish: 1/2


def test_gan_value_is_the_direct_sum_and_ignores_empty_terms():
    p, q, D = rng.dirichlet(np.ones(5)), rng.dirichlet(np.ones(5)), rng.uniform(0.1, 0.9, 5)
    assert math.isclose(gen.gan_value(D, p, q), np.sum(p * np.log(D) + q * np.log(1 - D)), rel_tol=1e-13)
    # D = 1 where only the data have mass is allowed (0 ln 0 = 0 for the generator's term)
    assert math.isclose(gen.gan_value([1.0, 0.0], [1.0, 0.0], [0.0, 1.0]), 0.0, abs_tol=1e-15)


def test_js_div_against_scipy_and_the_value_identity():
    x = np.linspace(-10, 10, 4001)
    dx = x[1] - x[0]
    p, q = norm.pdf(x, 0, 1), norm.pdf(x, 1, 1.5)
    js = gen.js_div(p, q, dx)
    assert math.isclose(js, jensenshannon(p * dx, q * dx) ** 2, rel_tol=1e-9)
    assert math.isclose(
        gen.gan_value(gen.optimal_discriminator(p, q), p, q, dx), 2 * js - math.log(4), abs_tol=1e-10
    )
    assert math.isclose(gen.js_div([1.0, 0.0], [0.0, 1.0]), math.log(2), rel_tol=1e-14)
    assert gen.js_div(p, p, dx) == 0.0


def test_game_steps_are_the_linear_maps_on_the_bilinear_game():
    def grad(theta, phi):
        return phi, theta

    eta, z = 0.3, rng.normal(size=2)
    A = np.array([[1, -eta], [eta, 1]])  # simultaneous
    B = np.array([[1, -eta], [eta, 1 - eta**2]])  # alternating: phi' = phi + eta (theta - eta phi)
    J = np.array([[0.0, 1.0], [-1.0, 0.0]])
    M = np.eye(2) - eta * J @ A  # extragradient
    for method, matrix in (("simultaneous", A), ("alternating", B), ("extragradient", M)):
        assert np.allclose(gen.game_step(grad, *z, eta, method), matrix @ z, atol=1e-15)
        path = gen.play_game(grad, z, eta, 10, method)
        assert path.shape == (11, 2) and np.allclose(
            path[10], np.linalg.matrix_power(matrix, 10) @ z, atol=1e-12
        )


def test_generator_logit_grads_equal_autograd():
    a = torch.linspace(-30, 30, 121, dtype=torch.float64, requires_grad=True)
    (sat,) = torch.autograd.grad(torch.log1p(-torch.sigmoid(a)).sum(), a)
    (ns,) = torch.autograd.grad(torch.nn.functional.logsigmoid(a).sum(), a)
    grads = gen.generator_logit_grads(a.detach().numpy())
    assert np.allclose(grads.saturating, sat.numpy(), atol=1e-12)
    assert np.allclose(grads.non_saturating, ns.numpy(), atol=1e-12)


def test_w1_1d_equals_scipy():
    for n in (1, 7, 500):
        a, b = rng.normal(size=n), rng.standard_t(3, size=n)
        assert math.isclose(gen.w1_1d(a, b), wasserstein_distance(a, b), rel_tol=1e-12, abs_tol=1e-15)


def test_ring_and_modes_covered():
    gmm = gen.ring_mixture(8, 2.0, 0.05)
    assert np.allclose(np.linalg.norm(gmm.means, axis=1), 2.0) and np.allclose(
        gmm.covs[3], 0.0025 * np.eye(2)
    )
    X, comp = gen.mixture_sample(gmm, 800, 0)
    cov = gen.modes_covered(X, gmm.means, 0.2)
    assert cov.covered == 8 and cov.high_quality > 0.99
    assert np.array_equal(cov.counts, np.bincount(comp, minlength=8))  # with tight modes, nearest = component
    one = gen.modes_covered(X[comp == 2], gmm.means, 0.2)
    assert one.covered == 1 and one.counts[2] == np.sum(comp == 2)
    # a few stray samples do not make a mode covered
    few = np.vstack([X[comp == 0], gmm.means[1:2]])
    assert gen.modes_covered(few, gmm.means, 0.2).covered == 1


def test_mmd2_against_the_explicit_double_sums():
    X, Y, h = rng.normal(size=(6, 3)), rng.normal(1, 1, size=(5, 3)), 1.3

    def k(a, b):
        return math.exp(-np.sum((a - b) ** 2) / (2 * h**2))

    xx = sum(k(X[i], X[j]) for i in range(6) for j in range(6) if i != j) / 30
    yy = sum(k(Y[i], Y[j]) for i in range(5) for j in range(5) if i != j) / 20
    xy = sum(k(x, y) for x in X for y in Y) / 30
    assert math.isclose(gen.mmd2(X, Y, h), xx + yy - 2 * xy, rel_tol=1e-12)


def test_gradient_penalty_against_autograd_of_a_linear_critic():
    real, fake = torch.randn(16, 2, dtype=torch.float64), torch.randn(16, 2, dtype=torch.float64)
    w = torch.tensor([[3.0], [4.0]], dtype=torch.float64)  # ||grad f|| = 5 everywhere

    def critic(x):
        return x @ w

    assert math.isclose(
        gen.gradient_penalty(critic, real, fake, lam=10.0, rng=0).item(), 10 * 16, rel_tol=1e-12
    )
    # a nonlinear critic: compare with a direct autograd computation at the same interpolates
    net = gen.gan_mlp([2, 8, 1], rng=1).double()
    alpha = torch.rand(16, 1, dtype=torch.float64)
    x_hat = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
    (g,) = torch.autograd.grad(net(x_hat).sum(), x_hat)
    expected = 10 * ((g.norm(dim=1) - 1) ** 2).mean()
    gp = gen.gradient_penalty(net, real, fake, 10.0, alpha)
    assert math.isclose(gp.item(), expected.item(), rel_tol=1e-12)
    gp.backward()  # it backpropagates into the critic's weights
    assert net[0].weight.grad is not None and net[0].weight.grad.abs().sum() > 0


def test_gan_mlp_is_reproducible_and_leaves_torch_alone():
    state = torch.get_rng_state()
    a, b = gen.gan_mlp([3, 5, 2], "sigmoid", rng=4), gen.gan_mlp([3, 5, 2], "sigmoid", rng=4)
    assert torch.equal(torch.get_rng_state(), state)
    x = torch.randn(4, 3)
    assert torch.equal(a(x), b(x)) and (a(x) > 0).all() and (a(x) < 1).all()


def test_train_gan_and_critic_run_and_learn_something():
    X = np.random.default_rng(0).normal([3.0, -1.0], 0.3, size=(500, 2))
    for loss in gen.GAN_LOSSES:
        trained = gen.train_gan(X, loss, steps=150, hidden=16, rng=0, progress=False)
        S = gen.gan_sample(trained.G, 400, rng=1)
        assert S.shape == (400, 2) and len(trained.history["g_loss"]) == 150
        assert np.linalg.norm(S.mean(0) - [3.0, -1.0]) < 1.5  # started near the origin, 3.2 away
    Y = X + np.array([1.0, 0.0])
    critic = gen.train_critic(X, Y, steps=300, hidden=16, rng=0, progress=False)
    scores = gen.critic_scores(critic, X, Y, rng=0)
    assert 0.6 < scores.gap < 1.4 and scores.grad_norms.shape == (500,)


BAD_INPUT = [  # (call, error, message)
    (lambda: gen.optimal_discriminator([0.5, -0.1], [0.5, 0.5]), ValueError, "p must be a density"),
    (lambda: gen.gan_value([0.5, 1.5], [0.5, 0.5], [0.5, 0.5]), ValueError, "D must hold values in [0, 1]"),
    (lambda: gen.gan_value([0.5], [0.5, 0.5], [0.5, 0.5]), ValueError, "D must have shape (2,)"),
    (lambda: gen.js_div([0.5, 0.5], [1.0], 1.0), ValueError, "q must have shape (2,)"),
    (lambda: gen.js_div([0.5, 0.5], [0.5, 0.5], 0.0), ValueError, "dx must be a finite number in (0, inf)"),
    (lambda: gen.game_step(lambda t, p: (p, t), 1.0, 1.0, 0.1, "gradient"), ValueError, "method must be one of"),
    (lambda: gen.game_step(lambda t, p: p, 1.0, 1.0, 0.1), ValueError, "grad(theta, phi) must return the pair"),
    (lambda: gen.play_game(lambda t, p: (p, t), [1.0, 1.0, 1.0], 0.1, 5), ValueError, "z0 must have shape (2,)"),
    (lambda: gen.play_game(lambda t, p: (p, t), [1.0, 1.0], -0.1, 5), ValueError, "eta must be a finite number in (0, inf)"),
    (lambda: gen.play_game(1.0, [1.0, 1.0], 0.1, 5), TypeError, "grad must be callable"),
    (lambda: gen.w1_1d([1.0, 2.0], [1.0]), ValueError, "b must have shape (2,)"),
    (lambda: gen.ring_mixture(0), ValueError, "k must be an int in [1, inf)"),
    (lambda: gen.modes_covered(np.ones((4, 3)), np.ones((8, 2)), 0.1), ValueError, "X must have shape (any, 2)"),
    (lambda: gen.modes_covered(np.ones((4, 2)), np.ones((8, 2)), 0.0), ValueError, "radius must be a finite number"),
    (lambda: gen.mmd2(np.ones((1, 2)), np.ones((3, 2)), 1.0), ValueError, "need at least 2 rows"),
    (lambda: gen.gan_mlp([3]), ValueError, "sizes must list at least two widths"),
    (lambda: gen.gan_mlp([3, 2], out="tanh"), ValueError, "out must be one of"),
    (lambda: gen.gradient_penalty(lambda x: x, np.ones((2, 2)), np.ones((2, 2))), TypeError, "real and fake must be torch tensors"),
    (lambda: gen.gradient_penalty(lambda x: x, torch.ones(2, 2), torch.ones(3, 2)), ValueError, "one shape (n, d)"),
    (lambda: gen.gradient_penalty(lambda x: x, torch.ones(2, 2), torch.ones(2, 2), alpha=torch.ones(3, 1)), ValueError, "alpha must have shape (2, 1)"),
    (lambda: gen.train_gan(np.ones((5, 2)), "wasserstein"), ValueError, "loss must be one of"),
    (lambda: gen.train_gan(np.ones(5)), ValueError, "X must have shape (any, any)"),
    (lambda: gen.train_critic(np.ones((5, 2)), np.ones((5, 3))), ValueError, "Y must have shape (any, 2)"),
    (lambda: gen.train_critic(np.ones((5, 2)), np.ones((5, 2)), constraint="spectral"), ValueError, "constraint must be one of"),
    (lambda: gen.critic_scores(lambda x: x, np.ones((5, 2)), np.ones((4, 2))), ValueError, "Y must have shape (5, 2)"),
    (lambda: gen.gan_sample(gen.gan_mlp([2, 3]), 0), ValueError, "n must be an int in [1, inf)"),
    (lambda: gen.gan_sample(lambda z: z, 5), TypeError, "G must be a torch.nn.Module"),
]  # fmt: skip


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
