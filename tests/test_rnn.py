import numpy as np
import pytest
import torch
import torch.nn.functional as F

from dlnotes import rnn

from conftest import bad_input_test

rng = np.random.default_rng(5)


def random_rnn(T=7, n=3, m=5, k=2):
    return (rng.normal(size=(T, n)), *(rng.normal(size=s) * 0.5 for s in ((m, m), (m, n), (k, m))))


def test_elman_rnn_equals_torch_rnn():
    X, U, V, W = random_rnn()
    Z, Y_hat = rnn.elman_rnn(X, U, V, W)
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
    grads = rnn.bptt(X, Y, U, V, W)
    U_t, V_t, W_t = (torch.tensor(A, requires_grad=True) for A in (U, V, W))
    z, loss = torch.zeros(5, dtype=torch.float64), 0.0
    for x, y in zip(torch.tensor(X), torch.tensor(Y), strict=True):
        z = torch.tanh(U_t @ z + V_t @ x)
        loss = loss + 0.5 * torch.sum((W_t @ z - y) ** 2)
    loss.backward()
    assert np.isclose(grads.L, loss.item())
    for ours, tensor in ((grads.dU, U_t), (grads.dV, V_t), (grads.dW, W_t)):
        assert np.allclose(ours, tensor.grad.numpy(), atol=1e-10)


def test_lstm_cell_equals_torch_lstm():
    lstm = torch.nn.LSTM(3, 4).double()
    X = torch.randn(6, 1, 3, dtype=torch.float64)
    outputs, (h, c) = lstm(X)
    cell = rnn.LSTMCell(3, 4).load_torch(lstm)
    state = None
    for t, x in enumerate(X[:, 0].numpy()):
        state = cell.forward(x, state)
        assert np.allclose(state[0], outputs[t, 0].detach().numpy(), atol=1e-12)
    assert np.allclose(state[1], c[0, 0].detach().numpy(), atol=1e-12)


@pytest.mark.parametrize("bias", [True, False])
def test_gru_cell_equals_torch_gru(bias):
    gru = torch.nn.GRU(3, 4, bias=bias).double()
    X = torch.randn(6, 1, 3, dtype=torch.float64)
    outputs, _ = gru(X)
    cell = rnn.GRUCell(3, 4).load_torch(gru)
    z = None
    for t, x in enumerate(X[:, 0].numpy()):
        z = cell.forward(x, z)
        assert np.allclose(z, outputs[t, 0].detach().numpy(), atol=1e-12)


def test_parallel_scan_equals_the_loop_in_log_rounds():
    T, m = 37, 4
    lam = rng.uniform(0.5, 0.99, m) * np.exp(1j * rng.uniform(0, 2 * np.pi, m))
    a = np.tile(lam, (T, 1))
    b = rng.normal(size=(T, m)) + 1j * rng.normal(size=(T, m))
    Z, rounds = rnn.linear_recurrence_scan(a, b)
    assert np.allclose(Z, rnn.linear_recurrence_loop(a, b), atol=1e-10)
    assert rounds == int(np.ceil(np.log2(T)))
    real = rng.normal(size=(T, m))
    assert rnn.linear_recurrence_scan(real, real).Z.dtype == np.float64


def test_ctc_collapse_brute_force_forward_and_torch_agree():
    assert rnn.ctc_collapse("aa-ab") == "aab" and rnn.ctc_collapse("-a--a-") == "aa"
    Y = rng.dirichlet(np.ones(3), size=5)  # 5 frames over ("-", "a", "b")
    for label in ("ab", "aa", "a", "bab"):
        brute = rnn.ctc_bruteforce(Y, label)
        assert np.isclose(rnn.ctc_forward(Y, label), brute, rtol=1e-10)
        targets = torch.tensor([["-ab".index(s) for s in label]])
        loss = F.ctc_loss(
            torch.tensor(np.log(Y))[:, None], targets, [5], [len(label)], blank=0, reduction="sum"
        )
        assert np.isclose(np.exp(-loss.item()), brute, rtol=1e-8), label


# ----------------------------------------------------------------------------- bad input

X7, U5, V5, W5 = random_rnn()
Y5 = rng.dirichlet(np.ones(3), size=5)
BAD_INPUT = [  # (call, error, message)
    (lambda: rnn.elman_rnn(X7, U5[:4], V5, W5), ValueError, r"U must have shape (4, 4)"),
    (lambda: rnn.elman_rnn(X7, U5, V5[:, :2], W5), ValueError, r"V must have shape (5, 3)"),
    (lambda: rnn.bptt(X7, np.ones((3, 2)), U5, V5, W5), ValueError, r"Y must have shape (7, 2)"),
    (lambda: rnn.LSTMCell(2, 4).load_torch(torch.nn.LSTM(3, 4)), ValueError, "do not fit"),
    (lambda: rnn.LSTMCell(3, 4).forward(np.zeros(2)), ValueError, r"x must have shape (3,)"),
    (lambda: rnn.LSTMCell(3, 0), ValueError, "n_hid"),
    (lambda: rnn.GRUCell(3, 4).forward(np.zeros(2)), ValueError, r"x must have shape (3,)"),
    (lambda: rnn.GRUCell(3, 4).forward(np.zeros(3), np.zeros(2)), ValueError, r"z must have shape (4,)"),
    (lambda: rnn.GRUCell(3, 4).load_torch(torch.nn.GRU(2, 4)), ValueError, "do not fit"),
    (
        lambda: rnn.linear_recurrence_scan(np.ones((5, 2)), np.ones((3, 2))),
        ValueError,
        r"b must have shape (5, 2)",
    ),
    (lambda: rnn.linear_recurrence_loop(1.0, 1.0), ValueError, "time axis"),
    (lambda: rnn.ctc_forward(Y5, "abc"), ValueError, "label"),
    (lambda: rnn.ctc_forward(Y5[:, :2], "ab"), ValueError, "probabilities"),
]


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
