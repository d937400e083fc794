"""dlnotes.generative.gan, section 10.5: the GAN value, the optimal discriminator and JS against direct computations
and scipy; gradient play against the closed-form linear maps; W1 by sorting against scipy; mode coverage and the
gradient penalty against explicit computations; the GAN trainer against the alternating loop written out, the
critic's weight clipping, and both trainers on tiny problems."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy.spatial.distance import jensenshannon
from scipy.stats import norm, wasserstein_distance

from dlnotes.generative import common, gan
from dlnotes.training import device

from conftest import bad_input_test

rng = np.random.default_rng(105)


def test_optimal_discriminator_maximises_the_value_pointwise():
    p, q = rng.dirichlet(np.ones(6)), rng.dirichlet(np.ones(6))
    D_star = gan.optimal_discriminator(p, q)
    assert np.allclose(D_star, p / (p + q), atol=1e-15)
    for _ in range(50):
        D = np.clip(D_star + rng.normal(0, 0.05, 6), 1e-3, 1 - 1e-3)
        assert gan.gan_value(D, p, q) < gan.gan_value(D_star, p, q)
    assert gan.optimal_discriminator([0.0, 1.0], [0.0, 0.0])[0] == 0.5  # both vanish: 1/2


def test_gan_value_is_the_direct_sum_and_ignores_empty_terms():
    p, q, D = rng.dirichlet(np.ones(5)), rng.dirichlet(np.ones(5)), rng.uniform(0.1, 0.9, 5)
    assert math.isclose(gan.gan_value(D, p, q), np.sum(p * np.log(D) + q * np.log(1 - D)), rel_tol=1e-13)
    # D = 1 where only the data have mass is allowed (0 ln 0 = 0 for the generator's term)
    assert math.isclose(gan.gan_value([1.0, 0.0], [1.0, 0.0], [0.0, 1.0]), 0.0, abs_tol=1e-15)


def test_js_div_against_scipy_and_the_value_identity():
    x = np.linspace(-10, 10, 4001)
    dx = x[1] - x[0]
    p, q = norm.pdf(x, 0, 1), norm.pdf(x, 1, 1.5)
    js = gan.js_div(p, q, dx)
    assert math.isclose(js, jensenshannon(p * dx, q * dx) ** 2, rel_tol=1e-9)
    assert math.isclose(
        gan.gan_value(gan.optimal_discriminator(p, q), p, q, dx), 2 * js - math.log(4), abs_tol=1e-10
    )
    assert math.isclose(gan.js_div([1.0, 0.0], [0.0, 1.0]), math.log(2), rel_tol=1e-14)
    assert gan.js_div(p, p, dx) == 0.0


def test_game_steps_are_the_linear_maps_on_the_bilinear_game():
    def grad(theta, phi):
        return phi, theta

    eta, z = 0.3, rng.normal(size=2)
    A = np.array([[1, -eta], [eta, 1]])  # simultaneous
    B = np.array([[1, -eta], [eta, 1 - eta**2]])  # alternating: phi' = phi + eta (theta - eta phi)
    J = np.array([[0.0, 1.0], [-1.0, 0.0]])
    M = np.eye(2) - eta * J @ A  # extragradient
    for method, matrix in (("simultaneous", A), ("alternating", B), ("extragradient", M)):
        assert np.allclose(gan.game_step(grad, *z, eta, method), matrix @ z, atol=1e-15)
        path = gan.play_game(grad, z, eta, 10, method)
        assert path.shape == (11, 2) and np.allclose(
            path[10], np.linalg.matrix_power(matrix, 10) @ z, atol=1e-12
        )


def test_generator_logit_grads_equal_autograd():
    a = torch.linspace(-30, 30, 121, dtype=torch.float64, requires_grad=True)
    (sat,) = torch.autograd.grad(torch.log1p(-torch.sigmoid(a)).sum(), a)
    (ns,) = torch.autograd.grad(torch.nn.functional.logsigmoid(a).sum(), a)
    grads = gan.generator_logit_grads(a.detach().numpy())
    assert np.allclose(grads.saturating, sat.numpy(), atol=1e-12)
    assert np.allclose(grads.non_saturating, ns.numpy(), atol=1e-12)


def test_w1_1d_equals_scipy():
    for n in (1, 7, 500):
        a, b = rng.normal(size=n), rng.standard_t(3, size=n)
        assert math.isclose(gan.w1_1d(a, b), wasserstein_distance(a, b), rel_tol=1e-12, abs_tol=1e-15)


def test_ring_and_modes_covered():
    gmm = gan.ring_mixture(8, 2.0, 0.05)
    assert np.allclose(np.linalg.norm(gmm.means, axis=1), 2.0) and np.allclose(
        gmm.covs[3], 0.0025 * np.eye(2)
    )
    X, comp = common.mixture_sample(gmm, 800, 0)
    cov = gan.modes_covered(X, gmm.means, 0.2)
    assert cov.covered == 8 and cov.high_quality > 0.99
    assert np.array_equal(cov.counts, np.bincount(comp, minlength=8))  # with tight modes, nearest = component
    one = gan.modes_covered(X[comp == 2], gmm.means, 0.2)
    assert one.covered == 1 and one.counts[2] == np.sum(comp == 2)
    # a few stray samples do not make a mode covered
    few = np.vstack([X[comp == 0], gmm.means[1:2]])
    assert gan.modes_covered(few, gmm.means, 0.2).covered == 1


def test_gradient_penalty_against_autograd_of_a_linear_critic():
    real, fake = torch.randn(16, 2, dtype=torch.float64), torch.randn(16, 2, dtype=torch.float64)
    w = torch.tensor([[3.0], [4.0]], dtype=torch.float64)  # ||grad f|| = 5 everywhere

    def critic(x):
        return x @ w

    assert math.isclose(
        gan.gradient_penalty(critic, real, fake, lam=10.0, rng=0).item(), 10 * 16, rel_tol=1e-12
    )
    # a nonlinear critic: compare with a direct autograd computation at the same interpolates
    net = gan.gan_mlp([2, 8, 1], rng=1).double()
    alpha = torch.rand(16, 1, dtype=torch.float64)
    x_hat = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
    (g,) = torch.autograd.grad(net(x_hat).sum(), x_hat)
    expected = 10 * ((g.norm(dim=1) - 1) ** 2).mean()
    gp = gan.gradient_penalty(net, real, fake, 10.0, alpha)
    assert math.isclose(gp.item(), expected.item(), rel_tol=1e-12)
    gp.backward()  # it backpropagates into the critic's weights
    assert net[0].weight.grad is not None and net[0].weight.grad.abs().sum() > 0


def test_gan_mlp_is_reproducible_and_leaves_torch_alone():
    state = torch.get_rng_state()
    a, b = gan.gan_mlp([3, 5, 2], "sigmoid", rng=4), gan.gan_mlp([3, 5, 2], "sigmoid", rng=4)
    assert torch.equal(torch.get_rng_state(), state)
    x = torch.randn(4, 3)
    assert torch.equal(a(x), b(x)) and (a(x) > 0).all() and (a(x) < 1).all()


def test_train_gan_and_critic_run_and_learn_something():
    """Loose targets that hold for any draws (seeds 0-7 here; a GPU draws other numbers than the CPU)."""
    X = np.random.default_rng(0).normal([3.0, -1.0], 0.3, size=(500, 2))
    for loss in gan.GAN_LOSSES:
        trained = gan.train_gan(X, loss, steps=300, hidden=16, lr=3e-3, rng=0, progress=False)
        S = gan.gan_sample(trained.G, 400, rng=1)
        assert S.shape == (400, 2) and len(trained.history["g_loss"]) == 300
        assert np.linalg.norm(S.mean(0) - [3.0, -1.0]) < 2.0  # started near the origin, 3.2 away
    Y = X + np.array([1.0, 0.0])
    critic = gan.train_critic(X, Y, steps=300, hidden=16, lr=3e-3, rng=0, progress=False)
    scores = gan.critic_scores(critic, X, Y, rng=0)
    assert 0.8 < scores.gap < 1.3 and scores.grad_norms.shape == (500,)  # W1 = 1


def test_train_gan_is_the_alternating_loop_written_out():
    """n_critic discriminator steps, then one generator step, every draw from one torch generator seeded by rng."""
    X = np.random.default_rng(1).normal(size=(50, 2))
    for loss, n_critic in (("non-saturating", 2), ("wgan-gp", 3)):
        trained = gan.train_gan(
            X, loss, k=2, hidden=8, depth=1, steps=4, n_critic=n_critic, batch_size=16, lr=1e-2, rng=3,
            progress=False,
        )  # fmt: skip
        rng_ref, dev = np.random.default_rng(3), device()
        G, D = gan.gan_mlp([2, 8, 2], rng=rng_ref).to(dev), gan.gan_mlp([2, 8, 1], rng=rng_ref).to(dev)
        X_t = torch.as_tensor(X, dtype=torch.float32, device=dev)
        draws = torch.Generator(device=dev).manual_seed(int(rng_ref.integers(2**31)))
        opt_G = torch.optim.Adam(G.parameters(), lr=1e-2, betas=(0.5, 0.9))
        opt_D = torch.optim.Adam(D.parameters(), lr=1e-2, betas=(0.5, 0.9))
        ones, zeros = torch.ones(16, 1, device=dev), torch.zeros(16, 1, device=dev)
        for _ in range(4):
            for _ in range(n_critic):
                real = X_t[torch.randint(50, (16,), generator=draws, device=dev)]
                fake = G(torch.randn(16, 2, generator=draws, device=dev)).detach()
                if loss == "non-saturating":
                    d_loss = F.binary_cross_entropy_with_logits(D(real), ones)
                    d_loss = d_loss + F.binary_cross_entropy_with_logits(D(fake), zeros)
                else:
                    alpha = torch.rand(16, 1, generator=draws, device=dev)
                    d_loss = (
                        D(fake).mean() - D(real).mean() + gan.gradient_penalty(D, real, fake, 10.0, alpha)
                    )
                opt_D.zero_grad()
                d_loss.backward()
                opt_D.step()
            d_fake = D(G(torch.randn(16, 2, generator=draws, device=dev)))
            g_loss = (
                F.binary_cross_entropy_with_logits(d_fake, ones)
                if loss == "non-saturating"
                else -d_fake.mean()
            )
            opt_G.zero_grad()
            g_loss.backward()
            opt_G.step()
        for trained_net, net in ((trained.G, G), (trained.D, D)):
            assert not trained_net.training
            for a, b in zip(trained_net.parameters(), net.parameters(), strict=True):
                assert torch.allclose(a, b, atol=1e-6)
        assert trained.history["d_loss"][-1] == pytest.approx(d_loss.item(), abs=1e-5)
        assert trained.history["g_loss"][-1] == pytest.approx(g_loss.item(), abs=1e-5)


def test_a_clipped_critic_keeps_every_weight_in_the_box():
    X = np.random.default_rng(2).normal(size=(100, 2))
    critic = gan.train_critic(
        X, X + 1.0, constraint="clip", clip=0.05, hidden=8, steps=20, rng=0, progress=False
    )
    largest = max(p.abs().max() for p in critic.parameters())  # torch's initialisation reaches 0.7
    assert not critic.training and largest == torch.tensor(0.05)  # float32's 0.05: the box is reached


BAD_INPUT = [  # (call, error, message)
    (lambda: gan.optimal_discriminator([0.5, -0.1], [0.5, 0.5]), ValueError, "p must be a density"),
    (lambda: gan.gan_value([0.5, 1.5], [0.5, 0.5], [0.5, 0.5]), ValueError, "D must hold values in [0, 1]"),
    (lambda: gan.gan_value([0.5], [0.5, 0.5], [0.5, 0.5]), ValueError, "D must have shape (2,)"),
    (lambda: gan.js_div([0.5, 0.5], [1.0], 1.0), ValueError, "q must have shape (2,)"),
    (lambda: gan.js_div([0.5, 0.5], [0.5, 0.5], 0.0), ValueError, "dx must be a finite number in (0, inf)"),
    (lambda: gan.game_step(lambda t, p: (p, t), 1.0, 1.0, 0.1, "gradient"), ValueError, "method must be one of"),
    (lambda: gan.game_step(lambda t, p: p, 1.0, 1.0, 0.1), ValueError, "grad(theta, phi) must return the pair"),
    (lambda: gan.play_game(lambda t, p: (p, t), [1.0, 1.0, 1.0], 0.1, 5), ValueError, "z0 must have shape (2,)"),
    (lambda: gan.play_game(lambda t, p: (p, t), [1.0, 1.0], -0.1, 5), ValueError, "eta must be a finite number in (0, inf)"),
    (lambda: gan.play_game(1.0, [1.0, 1.0], 0.1, 5), TypeError, "grad must be callable"),
    (lambda: gan.w1_1d([1.0, 2.0], [1.0]), ValueError, "b must have shape (2,)"),
    (lambda: gan.ring_mixture(0), ValueError, "k must be an int in [1, inf)"),
    (lambda: gan.modes_covered(np.ones((4, 3)), np.ones((8, 2)), 0.1), ValueError, "X must have shape (any, 2)"),
    (lambda: gan.modes_covered(np.ones((4, 2)), np.ones((8, 2)), 0.0), ValueError, "radius must be a finite number"),
    (lambda: gan.gan_mlp([3]), ValueError, "sizes must list at least two widths"),
    (lambda: gan.gan_mlp([3, 2], out="tanh"), ValueError, "out must be one of"),
    (lambda: gan.gradient_penalty(lambda x: x, np.ones((2, 2)), np.ones((2, 2))), TypeError, "real and fake must be torch tensors"),
    (lambda: gan.gradient_penalty(lambda x: x, torch.ones(2, 2), torch.ones(3, 2)), ValueError, "one shape (n, d)"),
    (lambda: gan.gradient_penalty(lambda x: x, torch.ones(2, 2), torch.ones(2, 2), alpha=torch.ones(3, 1)), ValueError, "alpha must have shape (2, 1)"),
    (lambda: gan.train_gan(np.ones((5, 2)), "wasserstein"), ValueError, "loss must be one of"),
    (lambda: gan.train_gan(np.ones(5)), ValueError, "X must have shape (any, any)"),
    (lambda: gan.train_critic(np.ones((5, 2)), np.ones((5, 3))), ValueError, "Y must have shape (any, 2)"),
    (lambda: gan.train_critic(np.ones((5, 2)), np.ones((5, 2)), constraint="spectral"), ValueError, "constraint must be one of"),
    (lambda: gan.critic_scores(lambda x: x, np.ones((5, 2)), np.ones((4, 2))), ValueError, "Y must have shape (5, 2)"),
    (lambda: gan.gan_sample(gan.gan_mlp([2, 3]), 0), ValueError, "n must be an int in [1, inf)"),
    (lambda: gan.gan_sample(lambda z: z, 5), TypeError, "G must be a torch.nn.Module"),
]  # fmt: skip


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
