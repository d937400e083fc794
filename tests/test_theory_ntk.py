"""Section 9.1 (dlnotes.theory.ntk): the empirical NTK against a Jacobian built one example at a time with
torch.autograd and against the hand-derived kernel of the 2-layer net, the linearised network against the tangent
features, the closed-form gradient flow against scipy's matrix exponential and a fine Euler integration, and kernel
regression against scikit-learn's KernelRidge and least squares."""

import numpy as np
import pytest
import torch
from scipy.linalg import expm
from sklearn.kernel_ridge import KernelRidge

from dlnotes.theory import common, infinite_width, ntk

from conftest import bad_input_test
from test_theory_common import random_kernel

rng = np.random.default_rng(91)


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
    net = common.two_layer_net(3, 7, activation, rng=1)
    f, theta0 = common.flat_function(net)
    X1, X2 = torch.tensor(rng.normal(size=(5, 3))), torch.tensor(rng.normal(size=(4, 3)))
    J1, J2 = jacobian_by_loop(net, X1), jacobian_by_loop(net, X2)
    assert np.allclose(ntk.tangent_features(f, theta0, X1), J1, atol=1e-14)
    K12 = ntk.empirical_ntk(f, theta0, X1, X2)
    assert K12.shape == (5, 4) and np.allclose(K12, J1 @ J2.T, atol=1e-13)
    assert np.allclose(ntk.empirical_ntk(f, theta0, X1), J1 @ J1.T, atol=1e-13)
    W, v = net.W.detach().numpy(), net.v.detach().numpy()
    assert np.allclose(common.ntk_two_layer(X1.numpy(), X2.numpy(), W, v, activation), K12, atol=1e-13)
    # a numpy input works too, and a deeper network
    deep = infinite_width.DeepReLUNet(3, 6, 3, sigma_b2=0.5, rng=2)
    f_deep, theta_deep = common.flat_function(deep)
    J = jacobian_by_loop(deep, X1)
    assert np.allclose(ntk.empirical_ntk(f_deep, theta_deep, X1.numpy()), J @ J.T, atol=1e-12)


def test_linearize_is_the_first_order_taylor_expansion():
    net = common.two_layer_net(2, 16, "tanh", rng=3)
    f, theta0 = common.flat_function(net)
    h = ntk.linearize(f, theta0)
    X = torch.tensor(rng.normal(size=(6, 2)))
    beta = torch.tensor(rng.normal(size=theta0.shape))
    Phi = ntk.tangent_features(f, theta0, X)
    f0 = f(theta0, X).detach().numpy()
    assert np.allclose(h(beta, X).detach().numpy(), f0 + Phi @ beta.numpy(), atol=1e-13)
    assert torch.equal(h(torch.zeros_like(theta0), X), f(theta0, X).detach())
    # the remainder f(theta0 + r u) - h(r u) is second order: halving r quarters it
    u = beta / beta.norm()
    gaps = [(f(theta0 + r * u, X) - h(r * u, X)).abs().sum().item() for r in (1e-2, 5e-3)]
    assert 3.9 < gaps[0] / gaps[1] < 4.1


def test_ntk_flow_equals_the_matrix_exponential_and_euler_integration():
    K, f0, y = random_kernel(rng, 6), rng.normal(size=6), rng.normal(size=6)
    t = 0.7
    assert np.allclose(ntk.ntk_flow(K, f0, y, t), y + expm(-K * t) @ (f0 - y), atol=1e-12)
    times = np.array([0.0, 0.3, 2.0])
    path = ntk.ntk_flow(K, f0, y, times)
    assert path.shape == (3, 6) and np.allclose(path[0], f0, atol=1e-14)
    assert np.allclose(path[2], y + expm(-2 * K) @ (f0 - y), atol=1e-12)
    # new points: integrate f' = K (y - f) and f*' = K* (y - f) with small Euler steps
    K_star, f0_star = rng.normal(size=(4, 6)) / 3, rng.normal(size=4)
    f, f_star, dt = f0.copy(), f0_star.copy(), 1e-5
    for _ in range(round(t / dt)):
        f, f_star = f + dt * K @ (y - f), f_star + dt * K_star @ (y - f)
    assert np.allclose(ntk.ntk_flow(K, f0, y, t), f, atol=1e-4)
    assert np.allclose(ntk.ntk_flow(K, f0, y, t, K_star, f0_star), f_star, atol=1e-4)


def test_ntk_flow_on_a_singular_kernel_converges_to_kernel_regression_with_the_offset():
    K = random_kernel(rng, 6, rank=3)  # rank 3: the flow only moves f inside the range of K
    f0, y = rng.normal(size=6), rng.normal(size=6)
    Phi_star = rng.normal(size=(4, 6))
    K_star = Phi_star @ K  # new points whose kernel row lies in the range of K
    f0_star = rng.normal(size=4)
    late = ntk.ntk_flow(K, f0, y, 1e6, K_star, f0_star)
    interpolant = f0_star + K_star @ np.linalg.pinv(K) @ (y - f0)
    assert np.allclose(late, interpolant, atol=1e-8)
    # on the training set f_infinity - y is the part of f0 - y in the null space of K
    P = np.eye(6) - K @ np.linalg.pinv(K)
    assert np.allclose(ntk.ntk_flow(K, f0, y, 1e6), y + P @ (f0 - y), atol=1e-8)


def test_kernel_regression_equals_kernel_ridge_and_minimum_norm_least_squares():
    Phi, Phi_star, y = rng.normal(size=(8, 20)), rng.normal(size=(5, 20)), rng.normal(size=8)
    K, K_star = Phi @ Phi.T, Phi_star @ Phi.T
    ridge = ntk.kernel_regression(K, K_star, y, ridge=0.3)
    reference = KernelRidge(alpha=0.3, kernel="precomputed").fit(K, y)
    assert np.allclose(ridge.prediction, reference.predict(K_star), atol=1e-12)
    assert np.allclose(ridge.alpha, reference.dual_coef_, atol=1e-12)
    exact = ntk.kernel_regression(K, K_star, y)
    beta = np.linalg.lstsq(Phi, y, rcond=None)[0]  # the minimum-norm solution of Phi beta = y (8 < 20)
    assert np.allclose(exact.prediction, Phi_star @ beta, atol=1e-10)
    assert np.allclose(Phi.T @ exact.alpha, beta, atol=1e-10) and np.allclose(K @ exact.alpha, y, atol=1e-10)


# ----------------------------------------------------------------------------- bad input

F_NET = common.flat_function(common.two_layer_net(2, 3, rng=0))
F_VECTOR = common.flat_function(torch.nn.Linear(2, 2).double())

BAD_INPUT = [  # (call, error, message)
    (lambda: ntk.tangent_features(3, F_NET.theta0, np.ones((2, 2))), TypeError, "f must be callable"),
    (lambda: ntk.tangent_features(F_NET.f, np.ones(9), np.ones((2, 2))), TypeError, "theta must be a non-empty 1-D torch tensor"),
    (lambda: ntk.empirical_ntk(*F_VECTOR, np.ones((3, 2))), ValueError, "f must return one number per input"),
    (lambda: ntk.linearize(F_NET.f, F_NET.theta0)(torch.zeros(4), torch.ones(2, 2)), ValueError, "beta must have the shape of theta0"),
    (lambda: ntk.ntk_flow(np.array([[1.0, 2.0], [0.0, 1.0]]), np.ones(2), np.ones(2), 1.0), ValueError, "K must be a symmetric square"),
    (lambda: ntk.ntk_flow(np.eye(2), np.ones(3), np.ones(2), 1.0), ValueError, "f0 must have shape (2,)"),
    (lambda: ntk.ntk_flow(np.eye(2), np.ones(2), np.ones(2), -1.0), ValueError, "t must be >= 0"),
    (lambda: ntk.ntk_flow(np.eye(2), np.ones(2), np.ones(2), 1.0, f0_star=np.ones(2)), ValueError, "f0_star needs K_star"),
    (lambda: ntk.ntk_flow(np.eye(2), np.ones(2), np.ones(2), 1.0, np.ones((3, 2)), np.ones(2)), ValueError, "f0_star must have shape (3,)"),
    (lambda: ntk.kernel_regression(np.eye(2), np.ones((3, 3)), np.ones(2)), ValueError, "K_star must have shape (any, 2)"),
    (lambda: ntk.kernel_regression(np.eye(2), np.ones((3, 2)), np.ones(2), ridge=-1.0), ValueError, "ridge must be a finite number in [0.0, inf)"),
]  # fmt: skip


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
