"""Section 5.4: linear recurrences by a loop and by parallel scans, state-space models against scipy, the LRU."""

import numpy as np
import scipy.signal
import torch

from dlnotes.rnn import linear

from conftest import bad_input_test

rng = np.random.default_rng(54)


def random_ssm(m=4, n=3, radius=0.9):
    A = rng.normal(size=(m, m))
    A *= radius / np.abs(np.linalg.eigvals(A)).max()
    return A, rng.normal(size=(m, n))


def test_linear_ssm_and_its_kernel_equal_scipy_dlsim():
    A, B = random_ssm()
    X = rng.normal(size=(25, 3))
    # scipy: s_(k+1) = A s_k + B u_k, y_k = C s_k + D u_k; with C = A, D = B the output y_k is our z_k
    _, Y, _ = scipy.signal.dlsim((A, B, A, B, 1), X)
    Z = linear.linear_ssm(X, A, B)
    assert np.allclose(Z, Y, atol=1e-12)
    K = linear.ssm_kernel(A, B, 25)
    assert np.allclose(K[3], np.linalg.matrix_power(A, 3) @ B)
    conv = np.array([sum(K[t - s] @ X[s] for s in range(t + 1)) for t in range(25)])
    assert np.allclose(conv, Y, atol=1e-12)


def test_parallel_scan_equals_the_loop_in_log_rounds():
    T, m = 37, 4
    lam = rng.uniform(0.5, 0.99, m) * np.exp(1j * rng.uniform(0, 2 * np.pi, m))
    a = np.tile(lam, (T, 1))
    b = rng.normal(size=(T, m)) + 1j * rng.normal(size=(T, m))
    Z, rounds = linear.linear_recurrence_scan(a, b)
    assert np.allclose(Z, linear.linear_recurrence_loop(a, b), atol=1e-10)
    assert rounds == int(np.ceil(np.log2(T)))
    real = rng.normal(size=(T, m))
    assert linear.linear_recurrence_scan(real, real).Z.dtype == np.float64


def test_work_efficient_scan_equals_the_loop_for_every_length():
    for T in (1, 2, 3, 7, 16, 37):
        lam = rng.uniform(0.5, 0.99, 5) * np.exp(1j * rng.uniform(0, 2 * np.pi, 5))
        a = lam * np.exp(0.1j * rng.normal(size=(T, 5)))  # time-varying coefficients
        b = rng.normal(size=(T, 5)) + 1j * rng.normal(size=(T, 5))
        Z, rounds = linear.linear_recurrence_scan_work_efficient(a, b)
        assert np.allclose(Z, linear.linear_recurrence_loop(a, b), atol=1e-12)
        assert rounds == 2 * int(np.floor(np.log2(T)))  # two rounds per halving


def test_scan_combine_composes_the_affine_maps():
    a, b, a2, b2 = (rng.normal(size=4) + 1j * rng.normal(size=4) for _ in range(4))
    A, B = linear.scan_combine(a, b, a2, b2)
    z = rng.normal(size=4)
    assert np.allclose(A * z + B, a2 * (a * z + b) + b2)


def test_lru_lambda_inverse_and_ring_initialisation():
    r = np.linspace(0.01, 0.999, 50)
    assert np.allclose(np.abs(linear.lru_lambda(linear.lru_nu(r), np.zeros(50))), r, rtol=1e-12)
    nu, theta = linear.lru_params(20_000, 0.5, 0.9, rng=1)
    lam = linear.lru_lambda(nu, theta)
    modulus = np.abs(lam)
    assert modulus.min() >= 0.5 - 1e-12 and modulus.max() <= 0.9 + 1e-12
    # area-uniform: P(|lambda| <= s) = (s^2 - r_min^2) / (r_max^2 - r_min^2)
    assert abs(np.mean(modulus <= 0.7) - (0.49 - 0.25) / (0.81 - 0.25)) < 0.02
    assert abs(np.mean(np.angle(lam) > 0) - 0.5) < 0.02


def test_linear_gru_is_a_scan_and_its_gate_sees_only_the_input():
    X = rng.normal(size=(30, 3))
    G, V = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))
    a = 1 / (1 + np.exp(-X @ G.T))
    Z = linear.linear_gru(X, G, V)
    assert np.allclose(Z, linear.linear_recurrence_loop(a, (1 - a) * (X @ V.T)), atol=1e-12)
    assert np.allclose(Z[0], (1 - a[0]) * (V @ X[0]))


def test_recall_task_targets_the_token_lag_steps_before_the_end():
    X, y = linear.make_recall_task(50, 12, 4, 5, rng=0)
    assert X.shape == (50, 12) and X.min() >= 0 and X.max() <= 4
    assert np.array_equal(y, X[:, 7])
    assert np.array_equal(linear.make_recall_task(50, 12, 4, 5, rng=0).X, X)


def test_lru_layer_states_equal_the_loop_and_its_output_the_readout():
    layer = linear.LRULayer(3, 6, 5, r_min=0.8, r_max=0.99, n_out=2, rng=0).double()
    x = torch.tensor(rng.normal(size=(2, 13, 3)))
    lam = linear.lru_lambda(layer.nu.detach().numpy(), layer.theta.detach().numpy())
    gamma = np.exp(layer.log_gamma.detach().numpy())
    assert np.allclose(gamma, np.sqrt(1 - np.abs(lam) ** 2))  # the normalisation at initialisation
    B = layer.B_re.detach().numpy() + 1j * layer.B_im.detach().numpy()
    states = layer.states(x).detach().numpy()
    for i in range(2):
        b = (x[i].numpy() @ B.T) * gamma
        expected = linear.linear_recurrence_loop(np.tile(lam, (13, 1)), b)
        assert np.allclose(states[i], expected, atol=1e-12)
    G = layer.G_re.detach().numpy() + 1j * layer.G_im.detach().numpy()
    readout = torch.tensor((states @ G.T).real)
    assert torch.allclose(layer(x), layer.mlp(readout), atol=1e-12)
    assert layer(x).shape == (2, 13, 2)


def test_lru_layer_stays_stable_under_training_steps():
    layer = linear.LRULayer(2, 8, 4, r_min=0.95, r_max=0.999, rng=0).double()
    optimizer = torch.optim.SGD([layer.nu], lr=10.0)
    for _ in range(20):  # push every |lambda| towards 1 as hard as possible
        loss = -torch.log(layer.lam().abs()).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert (layer.lam().abs() < 1).all()


# ----------------------------------------------------------------------------- bad input

BAD_INPUT = [  # (call, error, message)
    (
        lambda: linear.linear_recurrence_scan(np.ones((5, 2)), np.ones((3, 2))),
        ValueError,
        r"b must have shape (5, 2)",
    ),
    (lambda: linear.linear_recurrence_loop(1.0, 1.0), ValueError, "time axis"),
    (
        lambda: linear.linear_ssm(np.ones((5, 2)), np.ones((3, 3)), np.ones((3, 4))),
        ValueError,
        r"X must have shape",
    ),
    (
        lambda: linear.linear_ssm(np.ones((5, 2)), np.ones((3, 2)), np.ones((3, 2))),
        ValueError,
        r"A must have shape",
    ),
    (lambda: linear.ssm_kernel(np.eye(2), np.ones((3, 1)), 4), ValueError, r"B must have shape (2, any)"),
    (lambda: linear.ssm_kernel(np.eye(2), np.ones((2, 1)), 0), ValueError, "T must be"),
    (
        lambda: linear.scan_combine(np.ones(3), np.ones(2), np.ones(3), np.ones(3)),
        ValueError,
        "b must have shape",
    ),
    (
        lambda: linear.linear_recurrence_scan_work_efficient(np.ones(3), np.ones(4)),
        ValueError,
        "b must have shape",
    ),
    (lambda: linear.lru_lambda(np.ones(3), np.ones(2)), ValueError, r"theta must have shape (3,)"),
    (lambda: linear.lru_nu([0.5, 1.0]), ValueError, r"r must lie in (0, 1)"),
    (lambda: linear.lru_params(4, 0.9, 0.5), ValueError, "r_min"),
    (lambda: linear.lru_params(4, 0.0, 1.5), ValueError, "r_max"),
    (lambda: linear.lru_params(0), ValueError, "m must be"),
    (
        lambda: linear.linear_gru(np.ones((5, 2)), np.ones((3, 2)), np.ones((4, 2))),
        ValueError,
        "V must have shape",
    ),
    (lambda: linear.make_recall_task(10, 5, 5, 8), ValueError, "lag"),
    (lambda: linear.make_recall_task(10, 5, 2, 1), ValueError, "vocab"),
    (
        lambda: linear.LRULayer(3, 4, 2)(torch.zeros(2, 5, 2)),
        ValueError,
        r"x must be a tensor of shape (batch, T, 3)",
    ),
    (lambda: linear.LRULayer(3, 4, 2, r_min=0.5, r_max=0.4), ValueError, "r_min"),
]


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
