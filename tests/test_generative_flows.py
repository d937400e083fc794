"""dlnotes.generative.flows, section 10.3: the MAF against the Gaussian it must be when its conditioner is constant
and against its autograd Jacobian, the affine coupling layers (NumPy and torch) against finite differences and
autograd, RealNVP against a grid integral. (MADE and `fit_density` are in test_generative_common.)"""

import numpy as np
import torch
from torch.func import jacrev, vmap

from dlnotes.generative import flows

from conftest import bad_input_test
from test_generative_common import randomise

rng = np.random.default_rng(103)


def test_maf_with_a_constant_conditioner_is_a_diagonal_gaussian():
    maf = flows.MAF(3, hidden=(8,)).double()
    with torch.no_grad():
        for p in maf.parameters():
            p.zero_()
        maf.made.net[-1].bias.copy_(torch.tensor([0.5, -1.0, 2.0, 0.3, -0.2, 0.1]))  # mu (3), then alpha (3)
    mu, sigma = torch.tensor([0.5, -1.0, 2.0]), torch.exp(torch.tensor([0.3, -0.2, 0.1]))
    x = torch.tensor(rng.normal(size=(10, 3)))
    expected = torch.distributions.Normal(mu, sigma).log_prob(x).sum(1)
    assert torch.allclose(maf.log_prob(x), expected, atol=1e-12)


def test_maf_density_pass_log_det_and_sequential_inverse():
    maf = randomise(flows.MAF(4, hidden=(16,)).double(), std=0.8)
    x = torch.tensor(rng.normal(size=(6, 4)))
    z, log_det = maf(x)
    J = vmap(jacrev(lambda v: maf(v[None])[0][0]))(x)
    assert torch.allclose(log_det, torch.linalg.slogdet(J)[1], atol=1e-10)
    assert torch.allclose(maf.inverse(z), x, atol=1e-10)
    assert (maf.inverse(z, passes=3) - x).abs().max() > 1e-6
    samples = maf.sample(5, rng=1)
    assert samples.shape == (5, 4) and np.array_equal(samples, maf.sample(5, rng=1))


def s_net(a):
    return np.tanh(a @ np.array([[0.7, -0.4, 0.2], [0.3, 0.9, -0.5]]))


def t_net(a):
    return np.sin(a @ np.array([[1.1, 0.2, -0.3], [-0.6, 0.5, 0.8]]))


def test_numpy_affine_coupling_inverse_and_log_det_by_finite_differences():
    x = rng.normal(size=(4, 5))
    y, log_det = flows.affine_coupling(x, s_net, t_net)
    assert np.array_equal(y[:, :2], x[:, :2])
    x_back, log_det_inv = flows.affine_coupling_inverse(y, s_net, t_net)
    np.testing.assert_allclose(x_back, x, atol=1e-12)
    np.testing.assert_allclose(log_det_inv, -log_det, atol=1e-14)
    h = 1e-6
    for row in range(4):
        J = np.zeros((5, 5))
        for j in range(5):
            e = np.zeros(5)
            e[j] = h
            plus = flows.affine_coupling(x[row : row + 1] + e, s_net, t_net)[0][0]
            minus = flows.affine_coupling(x[row : row + 1] - e, s_net, t_net)[0][0]
            J[:, j] = (plus - minus) / (2 * h)
        assert abs(np.linalg.slogdet(J)[1] - log_det[row]) < 1e-6


def test_torch_coupling_layer_against_autograd():
    layer = randomise(flows.AffineCoupling(np.array([1.0, 0.0, 1.0, 0.0]), hidden=8).double())
    x = torch.tensor(rng.normal(size=(9, 4)))
    y, log_det = layer(x)
    assert torch.equal(y[:, [0, 2]], x[:, [0, 2]])
    assert torch.allclose(layer.inverse(y), x, atol=1e-12)
    J = vmap(jacrev(lambda v: layer(v[None])[0][0]))(x)
    assert torch.allclose(log_det, torch.linalg.slogdet(J)[1], atol=1e-12)
    fresh = flows.AffineCoupling(np.array([1.0, 0.0]), hidden=4)
    x2 = torch.randn(3, 2)
    assert torch.allclose(fresh(x2)[0], x2) and torch.all(fresh(x2)[1] == 0)  # starts at the identity


def test_realnvp_is_a_normalised_density_and_inverts():
    flow = randomise(flows.RealNVP(2, n_layers=4, hidden=16).double(), std=0.3)
    grid = np.linspace(-8, 8, 321)
    X = torch.tensor(np.stack(np.meshgrid(grid, grid), -1).reshape(-1, 2))
    with torch.no_grad():
        mass = flow.log_prob(X).exp().sum().item() * (grid[1] - grid[0]) ** 2
    assert abs(mass - 1) < 1e-3
    x = torch.tensor(rng.normal(size=(5, 2)))
    z, log_det = flow(x)
    assert torch.allclose(flow.inverse(z), x, atol=1e-12)
    J = vmap(jacrev(lambda v: flow(v[None])[0][0]))(x)
    assert torch.allclose(log_det, torch.linalg.slogdet(J)[1], atol=1e-12)
    z1, _ = flow(x, upto=1)
    assert torch.allclose(flow.inverse(z1, upto=1), x, atol=1e-12)
    assert np.array_equal(flow.sample(4, rng=3), flow.sample(4, rng=3))


BAD_INPUT = [  # (call, error, message)
    (lambda: flows.MAF(3).inverse(torch.zeros(1, 3), passes=0), ValueError, "passes must be an int in [1, inf)"),
    (lambda: flows.affine_coupling(np.ones((3, 1)), s_net, t_net), ValueError, "x must have shape (n, d) with d >= 2"),
    (lambda: flows.affine_coupling(np.ones((3, 4)), s_net, t_net), ValueError, "s_fn(x_a) must return shape (3, 2)"),
    (lambda: flows.affine_coupling_inverse(np.ones((3, 5)), 1.0, t_net), TypeError, "s_fn must be callable"),
    (lambda: flows.AffineCoupling(np.array([1.0, 1.0])), ValueError, "mask must hold both 0s and 1s"),
    (lambda: flows.RealNVP(d=1), ValueError, "d must be an int in [2, inf)"),
    (lambda: flows.RealNVP().sample(0), ValueError, "n must be an int in [1, inf)"),
]  # fmt: skip


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
