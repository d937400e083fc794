"""Section 9.1 continued (dlnotes.theory.infinite_width): the infinite-width NTK against the mean of the finite-width
kernel, the deep recursion (common.relu_ntk_deep) against the two-layer limit, the NNGP kernel of 9.3 and Monte Carlo
over random networks, the NTK-parametrised forward pass against a loop, kernel drift and alignment against their
formulas, and lazy training against its parts."""

import math

import numpy as np
import pytest

from dlnotes.theory import common, gp, infinite_width, ntk

from conftest import bad_input_test
from test_theory_common import random_kernel

rng = np.random.default_rng(96)


def test_relu_ntk_limit_is_the_mean_of_the_finite_width_kernel():
    X = rng.normal(size=(4, 3))
    limit = infinite_width.relu_ntk_limit(X, X)
    W, v = rng.normal(size=(200_000, 3)), rng.normal(size=200_000)
    assert np.abs(common.ntk_two_layer(X, X, W, v) - limit).max() < 0.02 * np.abs(limit).max()
    # on the diagonal psi = 0: k(x, x) = ||x||^2 / 2 + ||x||^2 / 2
    assert np.allclose(np.diag(limit), (X**2).sum(1), rtol=1e-7)


def test_relu_ntk_deep_matches_the_two_layer_limit_the_nngp_recursion_and_monte_carlo():
    X1, X2 = rng.normal(size=(4, 3)), rng.normal(size=(3, 3))
    # one hidden layer, sigma_w = 1 and inputs scaled by sqrt(d): the 2-layer net of relu_ntk_limit
    two = common.relu_ntk_deep(math.sqrt(3) * X1, math.sqrt(3) * X2, 2, sigma_w2=1.0)
    assert np.allclose(two.ntk, infinite_width.relu_ntk_limit(X1, X2), atol=1e-7)
    deep = common.relu_ntk_deep(X1, X2, 4, sigma_w2=1.7, sigma_b2=0.3)
    assert np.allclose(deep.nngp, gp.relu_nngp(X1, X2, 4, sigma_w2=1.7, sigma_b2=0.3), atol=1e-12)
    linear = common.relu_ntk_deep(X1, X2, 1, sigma_w2=1.7, sigma_b2=0.3)
    assert np.allclose(linear.ntk, 1.7 * X1 @ X2.T / 3 + 0.3, atol=1e-14)
    # the mean NTK of random nets of width 64 over 150 nets: within 4 standard errors of the recursion
    X = rng.normal(size=(3, 3))
    limit = common.relu_ntk_deep(X, X, 3, sigma_b2=0.2).ntk
    kernels = []
    for seed in range(150):
        f, theta = common.flat_function(infinite_width.DeepReLUNet(3, 64, 3, sigma_b2=0.2, rng=seed))
        kernels.append(ntk.empirical_ntk(f, theta, X))
    kernels = np.array(kernels)
    z = (kernels.mean(0) - limit) / (kernels.std(0) / math.sqrt(len(kernels)))
    assert np.abs(z).max() < 4


def test_deep_relu_net_computes_the_ntk_parametrised_forward_pass():
    net = infinite_width.DeepReLUNet(3, 5, 3, sigma_w2=2.0, sigma_b2=0.5, rng=6)
    Ws = [W.detach().numpy() for W in net.weights]
    bs = [b.detach().numpy() for b in net.biases]
    assert [W.shape for W in Ws] == [(5, 3), (5, 5), (1, 5)]
    X = rng.normal(size=(4, 3))
    h = X
    for layer, (W, b) in enumerate(zip(Ws, bs, strict=True)):
        h = math.sqrt(2.0 / W.shape[1]) * (h if layer == 0 else np.maximum(h, 0.0)) @ W.T + math.sqrt(0.5) * b
    assert np.allclose(net(X).detach().numpy(), h[:, 0], atol=1e-14)


def test_kernel_drift_and_alignment():
    K0, KT = random_kernel(rng, 5), random_kernel(rng, 5)
    assert math.isclose(infinite_width.kernel_drift(K0, KT), np.sqrt(((KT - K0) ** 2).sum() / (K0**2).sum()))
    y = rng.normal(size=5)
    Y = np.outer(y, y)  # the alignment is the cosine between K and y y^T in the Frobenius inner product
    cosine = (K0 * Y).sum() / (np.linalg.norm(K0) * np.linalg.norm(Y))
    assert math.isclose(infinite_width.kernel_alignment(K0, y), cosine, rel_tol=1e-12)
    assert math.isclose(infinite_width.kernel_alignment(3 * Y, -2 * y), 1.0)
    assert infinite_width.kernel_alignment(np.eye(5), np.ones(5)) == pytest.approx(1 / math.sqrt(5))


def test_lazy_training_measures_the_kernel_before_and_after():
    X = np.c_[np.linspace(-1, 1, 8), np.ones(8)]
    y = np.sin(3 * X[:, 0])
    run = infinite_width.lazy_training(X, y, 32, 100, "tanh", rng=7, progress=False)
    net = common.two_layer_net(2, 32, "tanh", rng=7)
    W0, v0 = net.W.detach().numpy(), net.v.detach().numpy()
    assert np.allclose(run.K0, common.ntk_two_layer(X, X, W0, v0, "tanh"), atol=1e-14)
    trained = common.train_two_layer(X, y, W0, v0, 100, activation="tanh", progress=False)
    assert np.allclose(run.KT, common.ntk_two_layer(X, X, trained.W, trained.v, "tanh"), atol=1e-14)
    assert (
        run.m == 32
        and run.drift == infinite_width.kernel_drift(run.K0, run.KT)
        and run.losses[-1] < run.losses[0]
    )


def test_ntk_ensemble_pairs_cancel_at_init_and_follow_the_kernel_flow():
    """At steps = 0 each antithetic pair averages to exactly 0; a member equals `train_two_layer` from the same draw;
    wide ensembles approach the infinite-width flow, narrow ones less so."""
    X = np.c_[np.linspace(-2, 2, 6), np.ones(6)]
    y = np.sin(1.5 * X[:, 0])
    X_star = np.c_[np.linspace(-3, 3, 9), np.ones(9)]
    start = infinite_width.ntk_ensemble(X, y, X_star, 16, 3, 0, 0.1, rng=1)
    assert start.outputs.shape == (6, 9) and np.abs(start.mean).max() < 1e-14
    assert np.abs(start.outputs[0]).max() > 0.1 and np.allclose(start.outputs[1], -start.outputs[0])
    run = infinite_width.ntk_ensemble(X, y, X_star, 32, 1, 50, 0.05, rng=2)
    net = common.two_layer_net(2, 32, rng=2)
    W0, v0 = net.W.detach().numpy(), net.v.detach().numpy()
    trained = common.train_two_layer(X, y, W0, -v0, 50, 0.05, progress=False)
    assert np.allclose(run.outputs[1], common.two_layer_output(X_star, trained.W, trained.v), atol=1e-12)
    K = infinite_width.relu_ntk_limit(X, X)
    eta = 1 / np.linalg.eigvalsh(K)[-1]
    limit = ntk.ntk_flow(K, np.zeros(6), y, 200 * eta, infinite_width.relu_ntk_limit(X_star, X), np.zeros(9))
    errors = [
        np.abs(infinite_width.ntk_ensemble(X, y, X_star, m, 4, 200, eta, rng=3).mean - limit).max()
        for m in (16, 2048)
    ]
    assert errors[1] < 0.15 * np.abs(limit).max() and errors[1] < errors[0] / 2, errors


# ----------------------------------------------------------------------------- bad input

BAD_INPUT = [  # (call, error, message)
    (lambda: infinite_width.relu_ntk_limit(np.zeros((2, 2)), np.ones((2, 2))), ValueError, "X1 must not contain the zero vector"),
    (lambda: infinite_width.DeepReLUNet(2, 4, 2, sigma_w2=0.0), ValueError, "sigma_w2 must be a finite number"),
    (lambda: infinite_width.kernel_drift(np.eye(2), np.eye(3)), ValueError, "KT must have shape (2, 2)"),
    (lambda: infinite_width.kernel_alignment(np.eye(3), np.ones(2)), ValueError, "y must have shape (3,)"),
    (lambda: infinite_width.lazy_training(np.ones((3, 2)), np.ones(3), 4, 2, "relu", rng=-1), TypeError, "rng must be None"),
    (lambda: infinite_width.ntk_ensemble(np.ones((3, 2)), np.ones(3), np.ones((4, 3)), 4, 2, 2, 0.1), ValueError, "X_star must have shape"),
    (lambda: infinite_width.ntk_ensemble(np.ones((3, 2)), np.ones(3), np.ones((4, 2)), 4, 0, 2, 0.1), ValueError, "pairs must be an int"),
]  # fmt: skip


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
