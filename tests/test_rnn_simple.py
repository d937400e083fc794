"""Sections 5.1-5.2: the Elman RNN, deep and bidirectional RNNs against torch.nn.RNN, BPTT (squared error and
cross-entropy) against autograd,
power iteration, the Jacobian norms of an RNN against autograd, gradient clipping against torch."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from dlnotes.rnn import simple

from conftest import bad_input_test

rng = np.random.default_rng(11)


def torch_rnn(n, m, **kwargs):
    net = torch.nn.RNN(n, m, bias=False, **kwargs).double()
    with torch.no_grad():
        for p in net.parameters():
            p.normal_(0, 0.5)
    return net


def random_rnn(T=7, n=3, m=5, k=2):
    return (rng.normal(size=(T, n)), *(rng.normal(size=s) * 0.5 for s in ((m, m), (m, n), (k, m))))


def test_elman_rnn_equals_torch_rnn():
    X, U, V, W = random_rnn()
    Z, Y_hat = simple.elman_rnn(X, U, V, W)
    net = torch.nn.RNN(3, 5, bias=False).double()
    with torch.no_grad():
        net.weight_ih_l0.copy_(torch.tensor(V))
        net.weight_hh_l0.copy_(torch.tensor(U))
    states, _ = net(torch.tensor(X)[:, None])
    assert np.allclose(Z, states[:, 0].detach().numpy(), atol=1e-12)
    assert np.allclose(Y_hat, Z @ W.T)


def test_bptt_equals_autograd():
    X, U, V, W = random_rnn(T=9)
    Y = rng.normal(size=(9, 2))
    grads = simple.bptt(X, Y, U, V, W)
    U_t, V_t, W_t = (torch.tensor(A, requires_grad=True) for A in (U, V, W))
    z, loss = torch.zeros(5, dtype=torch.float64), 0.0
    for x, y in zip(torch.tensor(X), torch.tensor(Y), strict=True):
        z = torch.tanh(U_t @ z + V_t @ x)
        loss = loss + 0.5 * torch.sum((W_t @ z - y) ** 2)
    loss.backward()
    assert np.isclose(grads.L, loss.item())
    for ours, tensor in ((grads.dU, U_t), (grads.dV, V_t), (grads.dW, W_t)):
        assert np.allclose(ours, tensor.grad.numpy(), atol=1e-10)


def test_torch_rnn_weights_and_deep_rnn_equal_torch():
    net = torch_rnn(3, 5, num_layers=3)
    X = rng.normal(size=(8, 3))
    weights = [simple.torch_rnn_weights(net, layer) for layer in range(3)]
    assert weights[0][0].shape == (5, 5) and weights[0][1].shape == (5, 3) and weights[1][1].shape == (5, 5)
    states, _ = net(torch.tensor(X)[:, None])
    assert np.allclose(simple.deep_rnn(X, weights), states[:, 0].detach().numpy(), atol=1e-12)
    one_layer = simple.deep_rnn(X, weights[:1])
    assert np.allclose(one_layer, simple.elman_rnn(X, *weights[0], np.eye(5)).Z)


def test_bidirectional_rnn_equals_torch():
    net = torch_rnn(2, 4, bidirectional=True)
    X = rng.normal(size=(6, 2))
    result = simple.bidirectional_rnn(
        X, *simple.torch_rnn_weights(net), *simple.torch_rnn_weights(net, reverse=True)
    )
    out = net(torch.tensor(X)[:, None])[0][:, 0].detach().numpy()  # (T, 2m): [forward; backward]
    assert np.allclose(np.hstack(result), out, atol=1e-12)
    # the backward state at t = T has read only x_T
    assert np.allclose(result.Z_backward[-1], np.tanh(simple.torch_rnn_weights(net, reverse=True)[1] @ X[-1]))


def test_bptt_cross_entropy_equals_autograd():
    T, n, m, k = 7, 3, 5, 4
    X = rng.normal(size=(T, n))
    U, V, W = rng.normal(size=(m, m)) * 0.5, rng.normal(size=(m, n)), rng.normal(size=(k, m))
    labels = rng.integers(k, size=T)
    ours = simple.bptt(X, np.eye(k)[labels], U, V, W, loss="cross_entropy")
    U_t, V_t, W_t = (torch.tensor(A, requires_grad=True) for A in (U, V, W))
    z, logits = torch.zeros(m, dtype=torch.float64), []
    for x in torch.tensor(X):
        z = torch.tanh(U_t @ z + V_t @ x)
        logits.append(W_t @ z)
    loss = F.cross_entropy(torch.stack(logits), torch.tensor(labels), reduction="sum")
    loss.backward()
    assert np.isclose(ours.L, loss.item(), rtol=1e-12)
    for grad, tensor in ((ours.dU, U_t), (ours.dV, V_t), (ours.dW, W_t)):
        assert np.allclose(grad, tensor.grad.numpy(), atol=1e-10)


def test_spectral_norm_by_power_iteration():
    Q1, _ = np.linalg.qr(rng.normal(size=(12, 12)))
    Q2, _ = np.linalg.qr(rng.normal(size=(9, 9)))
    s = np.array([3.0, 2.0, 1.5, 1.0, 0.9, 0.5, 0.3, 0.2, 0.1])
    A = Q1[:, :9] @ np.diag(s) @ Q2.T  # 12 x 9 with a known gap s_2 / s_1 = 2/3
    result = simple.power_iteration(A, 100, rng=0)
    assert np.isclose(result.sigma, np.linalg.norm(A, 2), rtol=1e-12)
    assert np.isclose(abs(result.v @ Q2[:, 0]), 1, atol=1e-12)
    assert result.estimates.shape == (100,) and result.iterates.shape == (100, 9)
    assert np.all(np.diff(result.estimates) >= -1e-12)  # the Rayleigh quotient never decreases
    assert simple.power_iteration(np.zeros((3, 3)), 5, rng=0).sigma == 0


@pytest.mark.parametrize("phi", ["tanh", "relu", "identity", "sigmoid"])
def test_jacobian_norms_equal_autograd(phi):
    m, n, T = 6, 3, 9
    U, V, X = rng.normal(size=(m, m)) * 0.6, rng.normal(size=(m, n)), rng.normal(size=(T, n))
    f = {"tanh": torch.tanh, "relu": torch.relu, "identity": lambda a: a, "sigmoid": torch.sigmoid}[phi]

    def z_T(z0, steps):
        z = z0
        for x in torch.tensor(X[:steps]):
            z = f(torch.tensor(U) @ z + torch.tensor(V) @ x)
        return z

    zero = torch.zeros(m, dtype=torch.float64)
    reference = [
        np.linalg.norm(torch.autograd.functional.jacobian(lambda z, s=s: z_T(z, s), zero).numpy(), 2)
        for s in range(1, T + 1)
    ]
    norms = simple.jacobian_norms(X, U, V, phi)
    assert np.allclose(norms, reference, rtol=1e-10)
    bound = (simple.GAMMA[phi] * np.linalg.norm(U, 2)) ** np.arange(1, T + 1)
    assert np.all(norms <= bound * (1 + 1e-12))


def test_clip_by_norm_equals_torch_clip_grad_norm():
    params = [torch.nn.Parameter(torch.zeros(s, dtype=torch.float64)) for s in ((3, 4), (5,))]
    grads = [rng.normal(size=p.shape) * 3 for p in params]
    for p, g in zip(params, grads, strict=True):
        p.grad = torch.tensor(g)
    torch.nn.utils.clip_grad_norm_(params, max_norm=1.0)
    flat = np.concatenate([g.ravel() for g in grads])
    clipped = simple.clip_by_norm(flat, 1.0)
    assert np.allclose(clipped, np.concatenate([p.grad.numpy().ravel() for p in params]), rtol=1e-5)
    assert np.isclose(np.linalg.norm(clipped), 1.0) and np.isclose(clipped @ flat, np.linalg.norm(flat))
    small = 0.01 * flat
    assert np.array_equal(simple.clip_by_norm(small, 1.0), small)


# ----------------------------------------------------------------------------- bad input

U4, V4, X6 = np.eye(4), np.ones((4, 2)), np.ones((6, 2))
X7, U5, V5, W5 = random_rnn()
BAD_INPUT = [  # (call, error, message)
    (lambda: simple.elman_rnn(X7, U5[:4], V5, W5), ValueError, r"U must have shape (4, 4)"),
    (lambda: simple.elman_rnn(X7, U5, V5[:, :2], W5), ValueError, r"V must have shape (5, 3)"),
    (lambda: simple.bptt(X7, np.ones((3, 2)), U5, V5, W5), ValueError, r"Y must have shape (7, 2)"),
    (lambda: simple.bptt(X6, np.ones((6, 4)), U4, V4, U4, loss="hinge"), ValueError, "loss must be one of"),
    (
        lambda: simple.bptt(X6, np.ones((6, 4)), U4, V4, U4, loss="cross_entropy"),
        ValueError,
        "probability vector",
    ),
    (lambda: simple.torch_rnn_weights(torch.nn.Linear(2, 3)), TypeError, "torch.nn.RNN"),
    (lambda: simple.torch_rnn_weights(torch.nn.RNN(2, 3, bias=False), layer=1), ValueError, "layer"),
    (
        lambda: simple.torch_rnn_weights(torch.nn.RNN(2, 3, bias=False), reverse=True),
        ValueError,
        "bidirectional",
    ),
    (lambda: simple.torch_rnn_weights(torch.nn.RNN(2, 3)), ValueError, "bias=False"),
    (lambda: simple.deep_rnn(X6, []), TypeError, "weights must be a non-empty list"),
    (lambda: simple.deep_rnn(X6, [(U4, V4), (U4, V4)]), ValueError, r"V_2 must have shape (4, 4)"),
    (lambda: simple.deep_rnn(X6, [U4]), TypeError, r"weights[0] must be a pair"),
    (
        lambda: simple.bidirectional_rnn(X6, U4, V4, U4, V4[:, :1]),
        ValueError,
        r"V_rev must have shape (4, 2)",
    ),
    (lambda: simple.power_iteration(np.ones(3)), ValueError, "A must have shape"),
    (lambda: simple.power_iteration(U4, iters=0), ValueError, "iters"),
    (lambda: simple.jacobian_norms(X6, U4, V4, phi="gelu"), ValueError, "phi must be one of"),
    (lambda: simple.jacobian_norms(np.ones((6, 3)), U4, V4), ValueError, r"V must have shape (4, 3)"),
    (lambda: simple.clip_by_norm(np.ones(3), 0.0), ValueError, "max_norm"),
    (lambda: simple.clip_by_norm("abc", 1.0), TypeError, "g must be an array"),
]


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
