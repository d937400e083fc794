"""Section 9.1: the 2-layer net in NTK parametrisation against explicit loops, the empirical NTK against a
Jacobian built one example at a time with torch.autograd, the hand-derived NTK against it, the linearised network
against the tangent features, the closed-form gradient flow against scipy's matrix exponential and a fine Euler
integration, kernel regression against scikit-learn's KernelRidge and least squares, the hand-written gradient
descent against autograd, the infinite-width kernels against Monte Carlo and the NNGP recursion of 9.3."""

import math

import numpy as np
import pytest
import torch
from scipy.linalg import expm
from sklearn.kernel_ridge import KernelRidge

from dlnotes import theory

from conftest import bad_input_test

rng = np.random.default_rng(91)


def relu(z):
    return np.maximum(z, 0.0)


@pytest.mark.parametrize("activation", ["relu", "tanh"])
def test_two_layer_net_computes_the_formula_in_torch_and_numpy(activation):
    X, W, v = rng.normal(size=(6, 3)), rng.normal(size=(5, 3)), rng.normal(size=5)
    phi = relu if activation == "relu" else np.tanh
    loop = np.array([sum(v[j] * phi(W[j] @ x) for j in range(5)) / math.sqrt(5) for x in X])
    net = theory.TwoLayerNet(W, v, activation)
    assert np.allclose(net(torch.tensor(X)).detach().numpy(), loop, atol=1e-14)
    assert np.allclose(theory.two_layer_output(X, W, v, activation), loop, atol=1e-14)
    drawn = theory.two_layer_net(3, 4, activation, rng=5)
    again = np.random.default_rng(5)
    assert np.array_equal(drawn.W.detach().numpy(), again.standard_normal((4, 3)))
    assert np.array_equal(drawn.v.detach().numpy(), again.standard_normal(4))


def jacobian_by_loop(model, X):
    """Row i: the gradient of the model's output at x_i with respect to all its parameters, by backward()."""
    rows = []
    for x in X:
        model.zero_grad()
        model(x[None]).sum().backward()
        rows.append(torch.cat([p.grad.reshape(-1) for p in model.parameters()]).clone())
    return torch.stack(rows).numpy()


@pytest.mark.parametrize("activation", ["relu", "tanh"])
def test_empirical_ntk_equals_the_jacobian_gram_matrix_and_the_hand_derived_kernel(activation):
    net = theory.two_layer_net(3, 7, activation, rng=1)
    f, theta0 = theory.flat_function(net)
    X1, X2 = torch.tensor(rng.normal(size=(5, 3))), torch.tensor(rng.normal(size=(4, 3)))
    J1, J2 = jacobian_by_loop(net, X1), jacobian_by_loop(net, X2)
    assert np.allclose(theory.tangent_features(f, theta0, X1), J1, atol=1e-14)
    K12 = theory.empirical_ntk(f, theta0, X1, X2)
    assert K12.shape == (5, 4) and np.allclose(K12, J1 @ J2.T, atol=1e-13)
    assert np.allclose(theory.empirical_ntk(f, theta0, X1), J1 @ J1.T, atol=1e-13)
    W, v = net.W.detach().numpy(), net.v.detach().numpy()
    assert np.allclose(theory.ntk_two_layer(X1.numpy(), X2.numpy(), W, v, activation), K12, atol=1e-13)
    # a numpy input works too, and a deeper network
    deep = theory.DeepReLUNet(3, 6, 3, sigma_b2=0.5, rng=2)
    f_deep, theta_deep = theory.flat_function(deep)
    J = jacobian_by_loop(deep, X1)
    assert np.allclose(theory.empirical_ntk(f_deep, theta_deep, X1.numpy()), J @ J.T, atol=1e-12)


def test_linearize_is_the_first_order_taylor_expansion():
    net = theory.two_layer_net(2, 16, "tanh", rng=3)
    f, theta0 = theory.flat_function(net)
    h = theory.linearize(f, theta0)
    X = torch.tensor(rng.normal(size=(6, 2)))
    beta = torch.tensor(rng.normal(size=theta0.shape))
    Phi = theory.tangent_features(f, theta0, X)
    f0 = f(theta0, X).detach().numpy()
    assert np.allclose(h(beta, X).detach().numpy(), f0 + Phi @ beta.numpy(), atol=1e-13)
    assert torch.equal(h(torch.zeros_like(theta0), X), f(theta0, X).detach())
    # the remainder f(theta0 + r u) - h(r u) is second order: halving r quarters it
    u = beta / beta.norm()
    gaps = [(f(theta0 + r * u, X) - h(r * u, X)).abs().sum().item() for r in (1e-2, 5e-3)]
    assert 3.9 < gaps[0] / gaps[1] < 4.1


def random_kernel(n, rank=None):
    A = rng.normal(size=(n, rank or n))
    return A @ A.T / n


def test_ntk_flow_equals_the_matrix_exponential_and_euler_integration():
    K, f0, y = random_kernel(6), rng.normal(size=6), rng.normal(size=6)
    t = 0.7
    assert np.allclose(theory.ntk_flow(K, f0, y, t), y + expm(-K * t) @ (f0 - y), atol=1e-12)
    times = np.array([0.0, 0.3, 2.0])
    path = theory.ntk_flow(K, f0, y, times)
    assert path.shape == (3, 6) and np.allclose(path[0], f0, atol=1e-14)
    assert np.allclose(path[2], y + expm(-2 * K) @ (f0 - y), atol=1e-12)
    # new points: integrate f' = K (y - f) and f*' = K* (y - f) with small Euler steps
    K_star, f0_star = rng.normal(size=(4, 6)) / 3, rng.normal(size=4)
    f, f_star, dt = f0.copy(), f0_star.copy(), 1e-5
    for _ in range(round(t / dt)):
        f, f_star = f + dt * K @ (y - f), f_star + dt * K_star @ (y - f)
    assert np.allclose(theory.ntk_flow(K, f0, y, t), f, atol=1e-4)
    assert np.allclose(theory.ntk_flow(K, f0, y, t, K_star, f0_star), f_star, atol=1e-4)


def test_ntk_flow_on_a_singular_kernel_converges_to_kernel_regression_with_the_offset():
    K = random_kernel(6, rank=3)  # rank 3: the flow only moves f inside the range of K
    f0, y = rng.normal(size=6), rng.normal(size=6)
    Phi_star = rng.normal(size=(4, 6))
    K_star = Phi_star @ K  # new points whose kernel row lies in the range of K
    f0_star = rng.normal(size=4)
    late = theory.ntk_flow(K, f0, y, 1e6, K_star, f0_star)
    interpolant = f0_star + K_star @ np.linalg.pinv(K) @ (y - f0)
    assert np.allclose(late, interpolant, atol=1e-8)
    # on the training set f_infinity - y is the part of f0 - y in the null space of K
    P = np.eye(6) - K @ np.linalg.pinv(K)
    assert np.allclose(theory.ntk_flow(K, f0, y, 1e6), y + P @ (f0 - y), atol=1e-8)


def test_kernel_regression_equals_kernel_ridge_and_minimum_norm_least_squares():
    Phi, Phi_star, y = rng.normal(size=(8, 20)), rng.normal(size=(5, 20)), rng.normal(size=8)
    K, K_star = Phi @ Phi.T, Phi_star @ Phi.T
    ridge = theory.kernel_regression(K, K_star, y, ridge=0.3)
    reference = KernelRidge(alpha=0.3, kernel="precomputed").fit(K, y)
    assert np.allclose(ridge.prediction, reference.predict(K_star), atol=1e-12)
    assert np.allclose(ridge.alpha, reference.dual_coef_, atol=1e-12)
    exact = theory.kernel_regression(K, K_star, y)
    beta = np.linalg.lstsq(Phi, y, rcond=None)[0]  # the minimum-norm solution of Phi beta = y (8 < 20)
    assert np.allclose(exact.prediction, Phi_star @ beta, atol=1e-10)
    assert np.allclose(Phi.T @ exact.alpha, beta, atol=1e-10) and np.allclose(K @ exact.alpha, y, atol=1e-10)


@pytest.mark.parametrize("activation", ["relu", "tanh"])
def test_train_two_layer_equals_gradient_descent_with_autograd(activation):
    X, y = rng.normal(size=(7, 3)), rng.normal(size=7)
    net = theory.two_layer_net(3, 9, activation, rng=4)
    W0, v0 = net.W.detach().numpy().copy(), net.v.detach().numpy().copy()
    run = theory.train_two_layer(X, y, W0, v0, 25, eta=0.05, activation=activation, progress=False)
    f, theta = theory.flat_function(net)
    Xt, yt, losses = torch.tensor(X), torch.tensor(y), []
    for _ in range(25):
        theta = theta.detach().requires_grad_(True)
        loss = 0.5 * ((f(theta, Xt) - yt) ** 2).sum()
        losses.append(loss.item())
        theta = theta - 0.05 * torch.autograd.grad(loss, theta)[0]
    assert np.allclose(np.concatenate([run.W.ravel(), run.v]), theta.detach().numpy(), atol=1e-12)
    assert np.allclose(run.losses[:-1], losses, atol=1e-12) and run.eta == 0.05
    default = theory.train_two_layer(X, y, W0, v0, 0, activation=activation, progress=False)
    top = np.linalg.eigvalsh(theory.ntk_two_layer(X, X, W0, v0, activation))[-1]
    assert math.isclose(default.eta, 1 / top) and len(default.losses) == 1


def test_train_two_layer_reports_divergence():
    X, y = rng.normal(size=(5, 2)), rng.normal(size=5)
    W, v = rng.normal(size=(4, 2)), rng.normal(size=4)
    with pytest.raises(FloatingPointError, match="diverged"):
        theory.train_two_layer(X, y, W, v, 500, eta=50.0, progress=False)


def test_relu_ntk_limit_is_the_mean_of_the_finite_width_kernel():
    X = rng.normal(size=(4, 3))
    limit = theory.relu_ntk_limit(X, X)
    W, v = rng.normal(size=(200_000, 3)), rng.normal(size=200_000)
    assert np.abs(theory.ntk_two_layer(X, X, W, v) - limit).max() < 0.02 * np.abs(limit).max()
    # on the diagonal psi = 0: k(x, x) = ||x||^2 / 2 + ||x||^2 / 2
    assert np.allclose(np.diag(limit), (X**2).sum(1), rtol=1e-7)


def test_relu_ntk_deep_matches_the_two_layer_limit_the_nngp_recursion_and_monte_carlo():
    X1, X2 = rng.normal(size=(4, 3)), rng.normal(size=(3, 3))
    # one hidden layer, sigma_w = 1 and inputs scaled by sqrt(d): the 2-layer net of relu_ntk_limit
    two = theory.relu_ntk_deep(math.sqrt(3) * X1, math.sqrt(3) * X2, 2, sigma_w2=1.0)
    assert np.allclose(two.ntk, theory.relu_ntk_limit(X1, X2), atol=1e-7)
    deep = theory.relu_ntk_deep(X1, X2, 4, sigma_w2=1.7, sigma_b2=0.3)
    assert np.allclose(deep.nngp, theory.relu_nngp(X1, X2, 4, sigma_w2=1.7, sigma_b2=0.3), atol=1e-12)
    linear = theory.relu_ntk_deep(X1, X2, 1, sigma_w2=1.7, sigma_b2=0.3)
    assert np.allclose(linear.ntk, 1.7 * X1 @ X2.T / 3 + 0.3, atol=1e-14)
    # the mean NTK of random nets of width 64 over 150 nets: within 4 standard errors of the recursion
    X = rng.normal(size=(3, 3))
    limit = theory.relu_ntk_deep(X, X, 3, sigma_b2=0.2).ntk
    kernels = []
    for seed in range(150):
        f, theta = theory.flat_function(theory.DeepReLUNet(3, 64, 3, sigma_b2=0.2, rng=seed))
        kernels.append(theory.empirical_ntk(f, theta, X))
    kernels = np.array(kernels)
    z = (kernels.mean(0) - limit) / (kernels.std(0) / math.sqrt(len(kernels)))
    assert np.abs(z).max() < 4


def test_deep_relu_net_computes_the_ntk_parametrised_forward_pass():
    net = theory.DeepReLUNet(3, 5, 3, sigma_w2=2.0, sigma_b2=0.5, rng=6)
    Ws = [W.detach().numpy() for W in net.weights]
    bs = [b.detach().numpy() for b in net.biases]
    assert [W.shape for W in Ws] == [(5, 3), (5, 5), (1, 5)]
    X = rng.normal(size=(4, 3))
    h = X
    for layer, (W, b) in enumerate(zip(Ws, bs, strict=True)):
        h = math.sqrt(2.0 / W.shape[1]) * (h if layer == 0 else relu(h)) @ W.T + math.sqrt(0.5) * b
    assert np.allclose(net(X).detach().numpy(), h[:, 0], atol=1e-14)


def test_kernel_drift_and_alignment():
    K0, KT = random_kernel(5), random_kernel(5)
    assert math.isclose(theory.kernel_drift(K0, KT), np.sqrt(((KT - K0) ** 2).sum() / (K0**2).sum()))
    y = rng.normal(size=5)
    Y = np.outer(y, y)  # the alignment is the cosine between K and y y^T in the Frobenius inner product
    cosine = (K0 * Y).sum() / (np.linalg.norm(K0) * np.linalg.norm(Y))
    assert math.isclose(theory.kernel_alignment(K0, y), cosine, rel_tol=1e-12)
    assert math.isclose(theory.kernel_alignment(3 * Y, -2 * y), 1.0)
    assert theory.kernel_alignment(np.eye(5), np.ones(5)) == pytest.approx(1 / math.sqrt(5))


def test_lazy_training_measures_the_kernel_before_and_after():
    X = np.c_[np.linspace(-1, 1, 8), np.ones(8)]
    y = np.sin(3 * X[:, 0])
    run = theory.lazy_training(X, y, 32, 100, "tanh", rng=7, progress=False)
    net = theory.two_layer_net(2, 32, "tanh", rng=7)
    W0, v0 = net.W.detach().numpy(), net.v.detach().numpy()
    assert np.allclose(run.K0, theory.ntk_two_layer(X, X, W0, v0, "tanh"), atol=1e-14)
    trained = theory.train_two_layer(X, y, W0, v0, 100, activation="tanh", progress=False)
    assert np.allclose(run.KT, theory.ntk_two_layer(X, X, trained.W, trained.v, "tanh"), atol=1e-14)
    assert run.m == 32 and run.drift == theory.kernel_drift(run.K0, run.KT) and run.losses[-1] < run.losses[0]


# ----------------------------------------------------------------------------- bad input

F_NET = theory.flat_function(theory.two_layer_net(2, 3, rng=0))
F_VECTOR = theory.flat_function(torch.nn.Linear(2, 2).double())

BAD_INPUT = [  # (call, error, message)
    (lambda: theory.TwoLayerNet(np.ones((3, 2)), np.ones(4)), ValueError, "v must have shape (3,)"),
    (lambda: theory.TwoLayerNet(np.ones((3, 2)), np.ones(3), "sigmoid"), ValueError, "activation must be one of"),
    (lambda: theory.two_layer_net(2, 0), ValueError, "m must be an int in [1, inf)"),
    (lambda: theory.two_layer_output(np.ones((4, 3)), np.ones((5, 2)), np.ones(5)), ValueError, "X must have shape (any, 2)"),
    (lambda: theory.ntk_two_layer(np.ones((4, 2)), np.ones((4, 3)), np.ones((5, 2)), np.ones(5)), ValueError, "X2 must have shape (any, 2)"),
    (lambda: theory.tangent_features(3, F_NET.theta0, np.ones((2, 2))), TypeError, "f must be callable"),
    (lambda: theory.tangent_features(F_NET.f, np.ones(9), np.ones((2, 2))), TypeError, "theta must be a non-empty 1-D torch tensor"),
    (lambda: theory.empirical_ntk(*F_VECTOR, np.ones((3, 2))), ValueError, "f must return one number per input"),
    (lambda: theory.linearize(F_NET.f, F_NET.theta0)(torch.zeros(4), torch.ones(2, 2)), ValueError, "beta must have the shape of theta0"),
    (lambda: theory.ntk_flow(np.array([[1.0, 2.0], [0.0, 1.0]]), np.ones(2), np.ones(2), 1.0), ValueError, "K must be a symmetric square"),
    (lambda: theory.ntk_flow(np.eye(2), np.ones(3), np.ones(2), 1.0), ValueError, "f0 must have shape (2,)"),
    (lambda: theory.ntk_flow(np.eye(2), np.ones(2), np.ones(2), -1.0), ValueError, "t must be >= 0"),
    (lambda: theory.ntk_flow(np.eye(2), np.ones(2), np.ones(2), 1.0, f0_star=np.ones(2)), ValueError, "f0_star needs K_star"),
    (lambda: theory.ntk_flow(np.eye(2), np.ones(2), np.ones(2), 1.0, np.ones((3, 2)), np.ones(2)), ValueError, "f0_star must have shape (3,)"),
    (lambda: theory.kernel_regression(np.eye(2), np.ones((3, 3)), np.ones(2)), ValueError, "K_star must have shape (any, 2)"),
    (lambda: theory.kernel_regression(np.eye(2), np.ones((3, 2)), np.ones(2), ridge=-1.0), ValueError, "ridge must be a finite number in [0.0, inf)"),
    (lambda: theory.train_two_layer(np.ones((3, 2)), np.ones(3), np.ones((4, 2)), np.ones(4), 1.5), TypeError, "steps must be an int"),
    (lambda: theory.train_two_layer(np.ones((3, 2)), np.ones(3), np.ones((4, 2)), np.ones(4), 5, eta=0.0), ValueError, "eta must be a finite number"),
    (lambda: theory.train_two_layer(np.ones((3, 2)), np.ones(2), np.ones((4, 2)), np.ones(4), 5), ValueError, "y must have shape (3,)"),
    (lambda: theory.relu_ntk_limit(np.zeros((2, 2)), np.ones((2, 2))), ValueError, "X1 must not contain the zero vector"),
    (lambda: theory.relu_ntk_deep(np.ones((2, 2)), np.ones((2, 2)), 0), ValueError, "depth must be an int in [1, inf)"),
    (lambda: theory.relu_ntk_deep(np.zeros((2, 2)), np.ones((2, 2)), 3), ValueError, "give sigma_b2 > 0 or nonzero inputs"),
    (lambda: theory.relu_ntk_deep(np.ones((2, 2)), np.ones((2, 2)), 2, sigma_b2=-0.1), ValueError, "sigma_b2 must be a finite number"),
    (lambda: theory.DeepReLUNet(2, 4, 2, sigma_w2=0.0), ValueError, "sigma_w2 must be a finite number"),
    (lambda: theory.kernel_drift(np.eye(2), np.eye(3)), ValueError, "KT must have shape (2, 2)"),
    (lambda: theory.kernel_alignment(np.eye(3), np.ones(2)), ValueError, "y must have shape (3,)"),
    (lambda: theory.lazy_training(np.ones((3, 2)), np.ones(3), 4, 2, "relu", rng=-1), TypeError, "rng must be None"),
]  # fmt: skip


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
