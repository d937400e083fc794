"""Section 5.3: the LSTM and GRU cells on NumPy arrays and on torch tensors (outputs and autograd gradients
against torch.nn.LSTM and torch.nn.GRU), the sheets' GRU variant, the additive cell path, and the adding problem."""

import numpy as np
import pytest
import torch

from dlnotes.rnn import gated

from conftest import bad_input_test

rng = np.random.default_rng(53)
T, N_IN, N_HID = 7, 3, 5


def _sequence(requires_grad=True):
    return torch.tensor(rng.normal(size=(T, N_IN)), requires_grad=requires_grad)


@pytest.mark.parametrize("bias", [True, False])
def test_lstm_cell_on_tensors_has_the_outputs_and_gradients_of_torch_lstm(bias):
    lstm = torch.nn.LSTM(N_IN, N_HID, bias=bias).double()
    X = _sequence()
    outputs, (_, c) = lstm(X[:, None])
    weights = torch.tensor(rng.normal(size=(T, N_HID)))
    (torch.sum(outputs[:, 0] * weights) + c.sum()).backward()

    cell = gated.LSTMCell(N_IN, N_HID).load_torch(lstm).to_torch()
    X_cell = X.detach().clone().requires_grad_()
    Z, C = cell.run(X_cell)
    (torch.sum(Z * weights) + C[-1].sum()).backward()

    assert isinstance(Z, torch.Tensor) and Z.dtype == torch.float64
    assert torch.allclose(Z, outputs[:, 0], atol=1e-12) and torch.allclose(C[-1], c[0, 0], atol=1e-12)
    assert torch.allclose(X_cell.grad, X.grad, atol=1e-12)
    for name, block in zip("GFVH", range(4), strict=True):  # torch's row blocks i, f, g, o
        rows = slice(block * N_HID, (block + 1) * N_HID)
        expected = torch.hstack([lstm.weight_ih_l0.grad[rows], lstm.weight_hh_l0.grad[rows]])
        assert torch.allclose(getattr(cell, name).grad, expected, atol=1e-12), name
        if bias:
            assert torch.allclose(getattr(cell, f"b_{name}").grad, lstm.bias_ih_l0.grad[rows], atol=1e-12)
            assert torch.allclose(lstm.bias_ih_l0.grad[rows], lstm.bias_hh_l0.grad[rows])


@pytest.mark.parametrize("bias", [True, False])
def test_gru_cell_on_tensors_has_the_outputs_and_gradients_of_torch_gru(bias):
    gru = torch.nn.GRU(N_IN, N_HID, bias=bias).double()
    X = _sequence()
    outputs, _ = gru(X[:, None])
    weights = torch.tensor(rng.normal(size=(T, N_HID)))
    torch.sum(outputs[:, 0] * weights).backward()

    cell = gated.GRUCell(N_IN, N_HID).load_torch(gru).to_torch()
    X_cell = X.detach().clone().requires_grad_()
    Z = cell.run(X_cell)
    torch.sum(Z * weights).backward()

    assert torch.allclose(Z, outputs[:, 0], atol=1e-12)
    assert torch.allclose(X_cell.grad, X.grad, atol=1e-12)
    r, u, n = (slice(k * N_HID, (k + 1) * N_HID) for k in range(3))
    W_ih, W_hh = gru.weight_ih_l0.grad, gru.weight_hh_l0.grad
    assert torch.allclose(cell.H.grad, torch.hstack([W_ih[r], W_hh[r]]), atol=1e-12)
    assert torch.allclose(cell.G.grad, -torch.hstack([W_ih[u], W_hh[u]]), atol=1e-12)  # u = 1 - z_torch
    assert torch.allclose(cell.V_x.grad, W_ih[n], atol=1e-12)
    assert torch.allclose(cell.V_z.grad, W_hh[n], atol=1e-12)
    if bias:
        assert torch.allclose(cell.b_x.grad, gru.bias_ih_l0.grad[n], atol=1e-12)
        assert torch.allclose(cell.b_z.grad, gru.bias_hh_l0.grad[n], atol=1e-12)


def test_lstm_cell_equals_torch_lstm():
    lstm = torch.nn.LSTM(3, 4).double()
    X = torch.randn(6, 1, 3, dtype=torch.float64)
    outputs, (h, c) = lstm(X)
    cell = gated.LSTMCell(3, 4).load_torch(lstm)
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
    cell = gated.GRUCell(3, 4).load_torch(gru)
    z = None
    for t, x in enumerate(X[:, 0].numpy()):
        z = cell.forward(x, z)
        assert np.allclose(z, outputs[t, 0].detach().numpy(), atol=1e-12)


def test_the_sheet_gru_resets_before_the_product_and_differs_from_torch():
    gru = torch.nn.GRU(N_IN, N_HID).double()
    X = rng.normal(size=(T, N_IN))
    sheet = gated.GRUCell(N_IN, N_HID, variant="sheet").load_torch(gru)
    # the sheets' formulas, written out: z~ = tanh(V [r * z, x] + b) with V = [W_hn, W_in], b = b_hn + b_in
    W_ih, W_hh = (w.detach().numpy() for w in (gru.weight_ih_l0, gru.weight_hh_l0))
    b_ih, b_hh = (b.detach().numpy() for b in (gru.bias_ih_l0, gru.bias_hh_l0))
    r_, u_, n_ = (slice(k * N_HID, (k + 1) * N_HID) for k in range(3))
    V = np.hstack([W_hh[n_], W_ih[n_]])
    sigma = lambda a: 1 / (1 + np.exp(-a))  # noqa: E731
    z, expected = np.zeros(N_HID), []
    for x in X:
        r = sigma(W_ih[r_] @ x + W_hh[r_] @ z + b_ih[r_] + b_hh[r_])
        u = 1 - sigma(W_ih[u_] @ x + W_hh[u_] @ z + b_ih[u_] + b_hh[u_])
        z = (1 - u) * z + u * np.tanh(V @ np.concatenate([r * z, x]) + b_hh[n_] + b_ih[n_])
        expected.append(z)
    Z_sheet = sheet.run(X)
    assert isinstance(Z_sheet, np.ndarray) and np.allclose(Z_sheet, expected, atol=1e-12)
    torch_states = gru(torch.tensor(X)[:, None])[0][:, 0].detach().numpy()
    assert np.abs(Z_sheet - torch_states).max() > 1e-3
    assert np.allclose(gated.GRUCell(N_IN, N_HID).load_torch(gru).run(X), torch_states, atol=1e-12)


def test_numpy_in_numpy_out_and_to_torch_leaves_the_cell_unchanged():
    cell = gated.LSTMCell(N_IN, N_HID, rng=1)
    X = rng.normal(size=(T, N_IN))
    run = cell.run(X)
    assert isinstance(run.Z, np.ndarray) and run.Z.shape == run.C.shape == (T, N_HID)
    z, C = cell.forward(X[0])
    assert np.allclose(z, run.Z[0]) and np.allclose(C, run.C[0])
    twin = cell.to_torch()
    assert isinstance(cell.F, np.ndarray) and twin.F.requires_grad and twin.F.is_leaf
    assert torch.allclose(twin.run(X).Z, torch.tensor(run.Z), atol=1e-12)  # NumPy input, tensor weights
    assert isinstance(gated.GRUCell(N_IN, N_HID).run(X), np.ndarray)


def test_the_cell_path_jacobian_is_diag_f():
    cell = gated.LSTMCell(N_IN, N_HID, rng=2)
    x, z, C = rng.normal(size=N_IN), rng.normal(size=N_HID), rng.normal(size=N_HID)
    J = torch.autograd.functional.jacobian(lambda C_prev: cell.forward(x, (z, C_prev))[1], torch.tensor(C))
    f = 1 / (1 + np.exp(-(cell.F @ np.concatenate([x, z]) + cell.b_F)))
    assert np.allclose(J.numpy(), np.diag(f), atol=1e-14)


def test_the_adding_task():
    X, y = gated.make_adding_task(4000, 20, rng=0)
    assert X.shape == (4000, 20, 2) and y.shape == (4000,)
    values, markers = X[..., 0], X[..., 1]
    assert ((values >= 0) & (values < 1)).all() and set(np.unique(markers)) == {0.0, 1.0}
    assert (markers[:, :10].sum(axis=1) == 1).all() and (markers[:, 10:].sum(axis=1) == 1).all()
    first, second = np.argmax(markers[:, :10], axis=1), 10 + np.argmax(markers[:, 10:], axis=1)
    rows = np.arange(4000)
    assert np.allclose(y, values[rows, first] + values[rows, second])
    # predicting 1 has the MSE Var(y) = 1/6 (the sd of this mean is about 0.003)
    assert abs(np.mean((y - 1) ** 2) - 1 / 6) < 0.015
    assert np.array_equal(gated.make_adding_task(5, 9, rng=3).X, gated.make_adding_task(5, 9, rng=3).X)
    assert len(np.unique(first)) == 10 and len(np.unique(second)) == 10  # every position is used


# ----------------------------------------------------------------------------- bad input

BAD_INPUT = [  # (call, error, message)
    (
        lambda: gated.GRUCell(3, 4, variant="lecture"),
        ValueError,
        r"variant must be one of ['torch', 'sheet']",
    ),
    (lambda: gated.LSTMCell(3, 4).forward(torch.zeros(2)), ValueError, r"x must have shape (3,)"),
    (
        lambda: gated.LSTMCell(3, 4).forward(torch.zeros(3), (torch.zeros(4), torch.zeros(5))),
        ValueError,
        r"C must have shape (4,)",
    ),
    (
        lambda: gated.GRUCell(3, 4).forward(torch.zeros(3), torch.zeros(3)),
        ValueError,
        r"z must have shape (4,)",
    ),
    (lambda: gated.LSTMCell(3, 4).run(np.zeros((5, 2))), ValueError, r"X must have shape (any, 3)"),
    (lambda: gated.GRUCell(3, 4).run(torch.zeros(5, 2)), ValueError, r"X must have shape (any, 3)"),
    (lambda: gated.GRUCell(3, 4).load_torch(torch.nn.GRU(3, 5)), ValueError, "do not fit"),
    (lambda: gated.LSTMCell(2, 4).load_torch(torch.nn.LSTM(3, 4)), ValueError, "do not fit"),
    (lambda: gated.LSTMCell(3, 4).forward(np.zeros(2)), ValueError, r"x must have shape (3,)"),
    (lambda: gated.LSTMCell(3, 0), ValueError, "n_hid"),
    (lambda: gated.GRUCell(3, 4).forward(np.zeros(2)), ValueError, r"x must have shape (3,)"),
    (lambda: gated.GRUCell(3, 4).forward(np.zeros(3), np.zeros(2)), ValueError, r"z must have shape (4,)"),
    (lambda: gated.make_adding_task(10, 1), ValueError, "T"),
    (lambda: gated.make_adding_task(0, 10), ValueError, "n"),
    (lambda: gated.make_adding_task(10, 10, rng="seed"), TypeError, "rng"),
]


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
