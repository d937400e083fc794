"""The tools of dlnotes.theory.common that several sections of chapter 09 use: the network as a function of one
flat parameter vector against the module itself, Hessian-vector products against the full Hessian, power iteration
against numpy's eigenvalues, L-BFGS against a linear solve, the 2-layer net in NTK parametrisation against explicit
loops and its hand-written gradient descent against autograd, the ReLU Gaussian moments against Monte Carlo and
quadrature, the Bayesian linear-regression posterior against the conditioning of the joint Gaussian, the tanh
network (numpy and torch), its squared loss and energy gradient against torch, and the training of a two-class
classifier. Also the chapter's test helpers, which the other test modules import."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy import integrate, stats
from torch import nn

from dlnotes.theory import common

from conftest import bad_input_test

rng = np.random.default_rng(9)


def small_mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 2)).double()


# the chapter's test helpers (the other test modules import them): data drawn from the caller's rng


def linear_problem(rng, n=15, d=2, noise_var=0.3, prior_var=0.8):
    """A linear-Gaussian data set X (n, d), y (n,) drawn from rng, with its noise and prior variances."""
    X = rng.normal(size=(n, d))
    y = X @ rng.normal(size=d) + np.sqrt(noise_var) * rng.normal(size=n)
    return X, y, noise_var, prior_var


def random_kernel(rng, n, rank=None):
    """A random positive semi-definite Gram matrix (n, n) of the given rank."""
    A = rng.normal(size=(n, rank or n))
    return A @ A.T / n


def quadratic(A, b=None):
    """L(theta) = theta^T A theta / 2 + b^T theta for a symmetric A (a torch function of a flat vector)."""
    A_t = torch.tensor(A)
    b_t = torch.zeros(len(A), dtype=torch.float64) if b is None else torch.tensor(b)
    return lambda theta: 0.5 * theta @ A_t @ theta + b_t @ theta


def random_psd(rng, d, low=0.1, high=5.0):
    """A random symmetric matrix (d, d) with the eigenvalues linspace(low, high, d), and those eigenvalues."""
    Q = np.linalg.qr(rng.normal(size=(d, d)))[0]
    lams = np.linspace(low, high, d)
    return Q @ np.diag(lams) @ Q.T, lams


def test_flat_function_reproduces_the_model_and_its_gradient():
    model = small_mlp()
    X = torch.tensor(rng.normal(size=(7, 3)))
    f, theta0 = common.flat_function(model)
    assert theta0.shape == (sum(p.numel() for p in model.parameters()),)
    assert torch.allclose(f(theta0, X), model(X), atol=1e-15)
    # the gradient in theta, laid out like torch.nn.utils.parameters_to_vector of the module's gradients
    model(X).sum().backward()
    grads = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
    theta = theta0.clone().requires_grad_(True)
    f(theta, X).sum().backward()
    assert torch.allclose(theta.grad, grads, atol=1e-14)
    # another theta changes the output and leaves the module alone
    shifted = f(theta0 + 0.1, X)
    assert (shifted - model(X)).abs().max() > 1e-3
    assert torch.equal(torch.nn.utils.parameters_to_vector(model.parameters()).detach(), theta0)


def test_hvp_and_hessian_matrix_agree_and_match_a_quadratic():
    A = torch.tensor(rng.normal(size=(6, 6)))
    A = A + A.T
    b = torch.tensor(rng.normal(size=6))

    def quadratic(theta):
        return 0.5 * theta @ A @ theta + b @ theta + torch.sin(theta).sum()

    theta, v = torch.tensor(rng.normal(size=6)), torch.tensor(rng.normal(size=6))
    H = common.hessian_matrix(quadratic, theta)
    assert torch.allclose(H, A - torch.diag(torch.sin(theta)), atol=1e-12)
    assert torch.allclose(common.hvp(quadratic, theta, v), H @ v, atol=1e-12)
    assert torch.equal(common.hvp(lambda t: (b * t).sum(), theta, v), torch.zeros(6, dtype=torch.float64))


def test_power_iteration_finds_the_largest_absolute_eigenvalue():
    Q = np.linalg.qr(rng.normal(size=(8, 8)))[0]
    lams = np.array([5.0, -3.0, 2.0, 1.0, 0.5, -0.2, 0.1, 0.0])
    A = Q @ np.diag(lams) @ Q.T
    result = common.power_iteration(lambda v: A @ v, 8, iters=200, rng=0)
    assert abs(result.norm - 5.0) < 1e-10 and abs(result.rayleigh - 5.0) < 1e-10
    assert abs(abs(result.vector @ Q[:, 0]) - 1) < 1e-8
    # an indefinite matrix with the pair +-4 on top: the norm still converges, the vector does not
    pair = Q @ np.diag([4.0, -4.0, 1.0, 0.5, 0.2, 0.1, 0.0, 0.0]) @ Q.T
    paired = common.power_iteration(lambda v: pair @ v, 8, iters=100, rng=1)
    assert abs(paired.norm - 4.0) < 1e-10 and len(paired.history) == 100
    assert abs(paired.norm - np.abs(np.linalg.eigvalsh(pair)).max()) < 1e-10
    # a warm start from the top eigenvector (not normalised) is there after one step; v0 draws nothing from rng
    warm = common.power_iteration(lambda v: A @ v, 8, iters=1, v0=3 * Q[:, 0])
    assert abs(warm.rayleigh - 5.0) < 1e-12 and abs(abs(warm.vector @ Q[:, 0]) - 1) < 1e-12
    draws = np.random.default_rng(4)
    common.power_iteration(lambda v: A @ v, 8, iters=3, rng=draws, v0=Q[:, 1])
    assert draws.random() == np.random.default_rng(4).random()


def test_lbfgs_minimise_solves_a_convex_quadratic():
    A, _ = random_psd(rng, 5)
    b = rng.normal(size=5)
    theta = common.lbfgs_minimise(quadratic(A, b), torch.zeros(5, dtype=torch.float64))
    assert np.allclose(theta.numpy(), np.linalg.solve(A, -b), atol=1e-8)


@pytest.mark.parametrize("activation", ["relu", "tanh"])
def test_two_layer_net_computes_the_formula_in_torch_and_numpy(activation):
    X, W, v = rng.normal(size=(6, 3)), rng.normal(size=(5, 3)), rng.normal(size=5)
    phi = (lambda z: np.maximum(z, 0.0)) if activation == "relu" else np.tanh
    loop = np.array([sum(v[j] * phi(W[j] @ x) for j in range(5)) / math.sqrt(5) for x in X])
    net = common.TwoLayerNet(W, v, activation)
    assert np.allclose(net(torch.tensor(X)).detach().numpy(), loop, atol=1e-14)
    assert np.allclose(common.two_layer_output(X, W, v, activation), loop, atol=1e-14)
    drawn = common.two_layer_net(3, 4, activation, rng=5)
    again = np.random.default_rng(5)
    assert np.array_equal(drawn.W.detach().numpy(), again.standard_normal((4, 3)))
    assert np.array_equal(drawn.v.detach().numpy(), again.standard_normal(4))


@pytest.mark.parametrize("activation", ["relu", "tanh"])
def test_train_two_layer_equals_gradient_descent_with_autograd(activation):
    X, y = rng.normal(size=(7, 3)), rng.normal(size=7)
    net = common.two_layer_net(3, 9, activation, rng=4)
    W0, v0 = net.W.detach().numpy().copy(), net.v.detach().numpy().copy()
    run = common.train_two_layer(X, y, W0, v0, 25, eta=0.05, activation=activation, progress=False)
    f, theta = common.flat_function(net)
    Xt, yt, losses = torch.tensor(X), torch.tensor(y), []
    for _ in range(25):
        theta = theta.detach().requires_grad_(True)
        loss = 0.5 * ((f(theta, Xt) - yt) ** 2).sum()
        losses.append(loss.item())
        theta = theta - 0.05 * torch.autograd.grad(loss, theta)[0]
    assert np.allclose(np.concatenate([run.W.ravel(), run.v]), theta.detach().numpy(), atol=1e-12)
    assert np.allclose(run.losses[:-1], losses, atol=1e-12) and run.eta == 0.05
    default = common.train_two_layer(X, y, W0, v0, 0, activation=activation, progress=False)
    top = np.linalg.eigvalsh(common.ntk_two_layer(X, X, W0, v0, activation))[-1]
    assert math.isclose(default.eta, 1 / top) and len(default.losses) == 1


def test_train_two_layer_reports_divergence():
    X, y = rng.normal(size=(5, 2)), rng.normal(size=5)
    W, v = rng.normal(size=(4, 2)), rng.normal(size=4)
    with pytest.raises(FloatingPointError, match="diverged"):
        common.train_two_layer(X, y, W, v, 500, eta=50.0, progress=False)


def test_relu_gaussian_moments_match_quadrature_and_monte_carlo():
    k11, k22, k12 = 2.0, 0.5, -0.6

    def expectation(g):  # E g(u, u') by quadrature over the 2-D Gaussian
        cov = np.array([[k11, k12], [k12, k22]])
        density = stats.multivariate_normal(np.zeros(2), cov).pdf
        return integrate.dblquad(lambda b, a: g(a, b) * density([a, b]), 0, 12, 0, 12)[0]

    value, derivative = common.relu_gaussian_moments(k11, k12, k22)
    assert abs(value - expectation(lambda a, b: a * b)) < 1e-6
    assert abs(derivative - expectation(lambda a, b: 1.0)) < 1e-6
    # w ~ N(0, I): u = w.x, u' = w.x'; arrays work elementwise
    X = rng.normal(size=(4, 3))
    G = X @ X.T
    sq = np.diag(G)
    values, derivatives = common.relu_gaussian_moments(sq[:, None], G, sq[None, :])
    W = rng.normal(size=(3, 400_000))
    U = X @ W
    assert np.abs(values - np.maximum(U, 0) @ np.maximum(U, 0).T / W.shape[1]).max() < 0.02 * values.max()
    assert np.abs(derivatives - (U > 0) @ (U > 0).T.astype(float) / W.shape[1]).max() < 5e-3
    assert np.allclose(np.diag(values), sq / 2) and np.allclose(np.diag(derivatives), 0.5)


def test_bayes_linreg_equals_gaussian_conditioning():
    X, y = rng.normal(size=(12, 4)), rng.normal(size=12)
    L = rng.normal(size=(4, 4))
    prior = L @ L.T + 0.5 * np.eye(4)
    noise = 0.3
    posterior = common.bayes_linreg(X, y, noise, prior)
    # condition the joint Gaussian of (w, y): cov(w, y) = prior X^T, cov(y) = X prior X^T + noise I
    gain = prior @ X.T @ np.linalg.inv(X @ prior @ X.T + noise * np.eye(12))
    assert np.allclose(posterior.mean, gain @ y, atol=1e-12)
    assert np.allclose(posterior.cov, prior - gain @ X @ prior, atol=1e-12)
    ridge = np.linalg.solve(
        X.T @ X + noise * np.eye(4), X.T @ y
    )  # the identity prior: ridge with lambda = noise
    assert np.allclose(common.bayes_linreg(X, y, noise).mean, ridge, atol=1e-12)


def test_tanh_mlp_and_its_energy_gradient_match_torch():
    d, m, n = 2, 6, 9
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(d, m), nn.Tanh(), nn.Linear(m, 1)).double()
    f, theta0 = common.flat_function(model)
    X, y = rng.normal(size=(n, d)), rng.normal(size=n)
    thetas = np.stack([theta0.numpy(), rng.normal(size=len(theta0))])
    ours = common.tanh_mlp(X, thetas, m)
    for theta, row in zip(thetas, ours, strict=True):
        assert np.allclose(
            row, f(torch.tensor(theta), torch.tensor(X)).reshape(-1).detach().numpy(), atol=1e-12
        )
    prior_var = rng.uniform(0.5, 2.0, size=len(theta0))
    grad_energy_batch = common.tanh_mlp_grad_energy(X, y, m, 0.2, prior_var)
    idx = np.array([[0, 3, 5], [8, 1, 2]])
    ours_grad = grad_energy_batch(thetas, idx)
    for c in range(2):
        theta = torch.tensor(thetas[c], requires_grad=True)
        rows = torch.tensor(idx[c])
        residual = torch.tensor(y)[rows] - f(theta, torch.tensor(X)[rows]).reshape(-1)
        E = n / 3 * (residual**2).sum() / (2 * 0.2) + 0.5 * (theta**2 / torch.tensor(prior_var)).sum()
        E.backward()
        assert np.allclose(ours_grad[c], theta.grad.numpy(), atol=1e-10)


def test_tanh_mlp_of_tensors_is_the_torch_network_of_each_row_and_differentiable():
    X = torch.tensor(rng.normal(size=(9, 3)))
    hidden, thetas = 4, torch.tensor(rng.normal(size=(5, 4 * 5 + 1)))
    net = nn.Sequential(nn.Linear(3, hidden), nn.Tanh(), nn.Linear(hidden, 1)).double()
    expected = []
    for theta in thetas:
        torch.nn.utils.vector_to_parameters(theta, net.parameters())
        expected.append(net(X).squeeze(-1).detach())
    outputs = common.tanh_mlp(X, thetas, hidden)
    assert isinstance(outputs, torch.Tensor) and torch.allclose(outputs, torch.stack(expected), atol=1e-13)
    assert np.allclose(common.tanh_mlp(X.numpy(), thetas.numpy(), hidden), outputs.numpy(), atol=1e-14)
    assert torch.allclose(
        common.tanh_mlp(X.numpy(), thetas, hidden), outputs, atol=0
    )  # numpy X, tensor theta
    theta = thetas[-1:].clone().requires_grad_(True)  # the network holds the last row
    common.tanh_mlp(X, theta, hidden).sum().backward()
    net_grad = torch.cat([g.reshape(-1) for g in torch.autograd.grad(net(X).sum(), list(net.parameters()))])
    assert torch.allclose(theta.grad[0], net_grad, atol=1e-13)


def test_tanh_mlp_mse_matches_autograd():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 1)).double()
    f, theta0 = common.flat_function(model)
    X, y = rng.normal(size=(11, 3)), rng.normal(size=11)
    theta = theta0.clone().requires_grad_(True)
    loss = 0.5 * ((f(theta, torch.tensor(X)).squeeze(-1) - torch.tensor(y)) ** 2).mean()
    loss.backward()
    ours = common.tanh_mlp_mse(theta0.numpy(), X, y)
    assert ours.loss == pytest.approx(loss.item(), rel=1e-13)
    assert np.allclose(ours.grad, theta.grad.numpy(), atol=1e-14)


def test_train_binary_classifier_follows_a_hand_written_adam_loop():
    X = rng.normal(size=(40, 2))
    y = (X[:, 0] > 0).astype(int)
    models = []
    for _ in range(2):
        torch.manual_seed(0)
        models.append(nn.Sequential(nn.Linear(2, 4), nn.Tanh(), nn.Linear(4, 1)))
    history = common.train_binary_classifier(models[0], X, y, steps=50, lr=0.1, progress=False)
    assert history.shape == (50,) and history[-1] < 0.5 * history[0] and models[0].training
    model, Xt, yt = models[1], torch.tensor(X, dtype=torch.float32), torch.tensor(y, dtype=torch.float32)
    optimizer, losses = torch.optim.Adam(model.parameters(), lr=0.1), []
    for _ in range(50):
        loss = F.binary_cross_entropy_with_logits(model(Xt).squeeze(-1), yt)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert np.array_equal(history, losses)
    assert all(torch.equal(a, b) for a, b in zip(models[0].parameters(), model.parameters(), strict=True))


# ----------------------------------------------------------------------------- bad input

BAD_INPUT = [  # (call, error, message)
    (lambda: common.flat_function(lambda x: x), TypeError, "model must be a torch.nn.Module"),
    (lambda: common.flat_function(small_mlp()).f(torch.zeros(3), torch.zeros(1, 3)), ValueError, "theta must have shape"),
    (lambda: common.hvp(3, torch.zeros(2), torch.zeros(2)), TypeError, "loss must be callable"),
    (lambda: common.hvp(torch.sum, np.zeros(2), torch.zeros(2)), TypeError, "theta must be a non-empty 1-D torch tensor"),
    (lambda: common.hvp(torch.sum, torch.zeros(2), torch.zeros(3)), ValueError, "v must have the shape of theta"),
    (lambda: common.hessian_matrix(torch.sum, torch.zeros(2, 2)), TypeError, "theta must be a non-empty 1-D"),
    (lambda: common.power_iteration(lambda v: v, 0), ValueError, "dim must be an int in [1, inf)"),
    (lambda: common.power_iteration(lambda v: v[:2], 3), ValueError, "matvec must return a vector of shape (3,)"),
    (lambda: common.power_iteration(lambda v: v, 3, iters=2.5), TypeError, "iters must be an int"),
    (lambda: common.power_iteration(lambda v: v, 3, v0=np.ones(2)), ValueError, "v0 must have shape (3,)"),
    (lambda: common.power_iteration(lambda v: v, 3, v0=np.zeros(3)), ValueError, "v0 must be a non-zero vector"),
    (lambda: common.lbfgs_minimise(torch.sum, np.zeros(2)), TypeError, "theta0 must be a non-empty 1-D torch tensor"),
    (lambda: common.TwoLayerNet(np.ones((3, 2)), np.ones(4)), ValueError, "v must have shape (3,)"),
    (lambda: common.TwoLayerNet(np.ones((3, 2)), np.ones(3), "sigmoid"), ValueError, "activation must be one of"),
    (lambda: common.two_layer_net(2, 0), ValueError, "m must be an int in [1, inf)"),
    (lambda: common.two_layer_output(np.ones((4, 3)), np.ones((5, 2)), np.ones(5)), ValueError, "X must have shape (any, 2)"),
    (lambda: common.ntk_two_layer(np.ones((4, 2)), np.ones((4, 3)), np.ones((5, 2)), np.ones(5)), ValueError, "X2 must have shape (any, 2)"),
    (lambda: common.train_two_layer(np.ones((3, 2)), np.ones(3), np.ones((4, 2)), np.ones(4), 1.5), TypeError, "steps must be an int"),
    (lambda: common.train_two_layer(np.ones((3, 2)), np.ones(3), np.ones((4, 2)), np.ones(4), 5, eta=0.0), ValueError, "eta must be a finite number"),
    (lambda: common.train_two_layer(np.ones((3, 2)), np.ones(2), np.ones((4, 2)), np.ones(4), 5), ValueError, "y must have shape (3,)"),
    (lambda: common.relu_gaussian_moments(0.0, 0.0, 1.0), ValueError, "k11 must hold variances > 0"),
    (lambda: common.relu_gaussian_moments(1.0, 2.0, 1.0), ValueError, "|k12| <= sqrt(k11 k22)"),
    (lambda: common.relu_ntk_deep(np.ones((2, 2)), np.ones((2, 2)), 0), ValueError, "depth must be an int in [1, inf)"),
    (lambda: common.relu_ntk_deep(np.zeros((2, 2)), np.ones((2, 2)), 3), ValueError, "give sigma_b2 > 0 or nonzero inputs"),
    (lambda: common.relu_ntk_deep(np.ones((2, 2)), np.ones((2, 2)), 2, sigma_b2=-0.1), ValueError, "sigma_b2 must be a finite number"),
    (lambda: common.bayes_linreg(np.ones((3, 2)), np.ones(4), 1.0), ValueError, "y must have shape (3,)"),
    (lambda: common.bayes_linreg(np.ones((3, 2)), np.ones(3), 0.0), ValueError, "noise_var must be a finite number"),
    (lambda: common.bayes_linreg(np.ones((3, 2)), np.ones(3), 1.0, -np.eye(2)), ValueError, "prior_cov must be symmetric positive definite"),
    (lambda: common.bayes_linreg(np.ones((3, 2)), np.ones(3), 1.0, np.eye(3)), ValueError, "prior_cov must have shape (2, 2)"),
    (lambda: common.tanh_mlp(np.ones((3, 2)), np.ones((2, 9)), 3), ValueError, "theta must have shape (k, 13)"),
    (lambda: common.tanh_mlp(np.ones((3, 2)), np.ones((2, 9)), 0), ValueError, "width must be an int in [1, inf)"),
    (lambda: common.tanh_mlp(torch.ones(3, 2, 2), torch.ones(2, 9), 2), ValueError, "X must have shape (n, d)"),
    (lambda: common.tanh_mlp(torch.ones(3, 2), torch.ones(2, 8), 2), ValueError, "theta must have shape (k, 9)"),
    (lambda: common.tanh_mlp_mse(np.zeros(10), np.ones((4, 2)), np.ones(4)), ValueError, "theta must have m (d + 2) + 1 entries"),
    (lambda: common.tanh_mlp_grad_energy(np.ones((3, 1)), np.ones(4), 2, 1.0, 1.0), ValueError, "y must have shape (3,)"),
    (lambda: common.train_binary_classifier(nn.Linear(2, 1), np.ones((4, 2)), [0, 1, 2, 1]), ValueError, "y must hold labels in [0, 1]"),
]  # fmt: skip


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
