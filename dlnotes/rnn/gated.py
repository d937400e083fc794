"""Chapter 05, section 5.3 (notebook 03_gated_memory): the LSTM and GRU cells written from the lecture's
formulas, loading the weights of ``torch.nn.LSTM``/``torch.nn.GRU`` and running on NumPy arrays or on torch
tensors (so that autograd goes through the same formulas), and the adding problem they are trained on.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import torch

from ..activations import sigmoid
from ..training import to_numpy
from ..validation import check_choice, check_int, check_matrix, check_rng, check_vector


class _Backend(NamedTuple):
    """The few array operations the cells' formulas need, from NumPy or from torch."""

    asarray: Callable
    concatenate: Callable
    stack: Callable
    tanh: Callable
    sigmoid: Callable
    zeros: Callable


_NUMPY = _Backend(
    lambda a: np.asarray(a, dtype=np.float64), np.concatenate, np.stack, np.tanh, sigmoid, np.zeros
)


def _backend(*arrays) -> _Backend:
    """torch when one of the arrays is a tensor (in the dtype and on the device of the first tensor), else
    NumPy. The cells write each formula once against this, so autograd runs through the code that the NumPy
    checks test."""
    like = next((a for a in arrays if isinstance(a, torch.Tensor)), None)
    if like is None:
        return _NUMPY
    dtype = like.dtype if like.is_floating_point() else torch.float64
    return _Backend(
        lambda a: torch.as_tensor(a, dtype=dtype, device=like.device),
        torch.cat,
        torch.stack,
        torch.tanh,
        torch.sigmoid,
        lambda n: torch.zeros(n, dtype=dtype, device=like.device),
    )


def _step_vector(v, name: str, n: int, xp: _Backend):
    """A vector (n,) of the backend: a tensor keeps its autograd graph, anything else goes through
    check_vector."""
    if isinstance(v, torch.Tensor):
        if tuple(v.shape) != (n,):
            raise ValueError(f"{name} must have shape ({n},), got shape {tuple(v.shape)}")
        return xp.asarray(v)
    return xp.asarray(check_vector(v, name, n))


def _sequence(X, name: str, n: int):
    """A sequence (T, n): a tensor as it is, anything else as a float64 NumPy array."""
    if isinstance(X, torch.Tensor):
        if X.ndim != 2 or X.shape[1] != n or len(X) == 0:
            raise ValueError(f"{name} must have shape (any, {n}), got shape {tuple(X.shape)}")
        return X
    return check_matrix(X, name, None, n)


class _GatedCell:
    """What the LSTM and GRU cells share: weights named as in the lecture (NumPy arrays, or torch tensors
    after `to_torch`), and step formulas written once for both array libraries: NumPy in, NumPy out; a tensor
    in (input, state or weight), a tensor out with its autograd graph."""

    WEIGHTS: tuple[str, ...] = ()

    def parameters(self) -> dict:
        """The weights by name."""
        return {name: getattr(self, name) for name in self.WEIGHTS}

    def to_torch(self, requires_grad: bool = True):
        """A copy of the cell whose weights are float64 torch leaf tensors: `forward` and `run` then build an
        autograd graph through the same formulas, and after ``loss.backward()`` each weight's ``.grad`` holds
        dL/d(weight)."""
        cell = copy.copy(self)
        for name, w in self.parameters().items():
            w = w.detach().clone() if isinstance(w, torch.Tensor) else torch.tensor(w)
            setattr(cell, name, w.to(torch.float64).requires_grad_(requires_grad))
        return cell

    def _weights(self, xp: _Backend) -> tuple:
        return tuple(xp.asarray(w) for w in self.parameters().values())


class LSTMRun(NamedTuple):
    Z: np.ndarray  # hidden states z_1..z_T, (T, m) (a tensor when the cell ran on tensors)
    C: np.ndarray  # cell memories C_1..C_T, (T, m)


class LSTMCell(_GatedCell):
    """LSTM cell from the lecture's formulas, with x~ = [x_t, z_{t-1}]: gates ``f = sigma(F x~ + b_F)``,
    ``i = sigma(G x~ + b_G)``, ``o = sigma(H x~ + b_H)``; ``C_t = f * C_{t-1} + i * tanh(V x~ + b_V)``,
    ``z_t = o * tanh(C_t)`` (section 5.3). Runs on NumPy arrays or torch tensors (see `to_torch`)."""

    WEIGHTS = ("F", "G", "H", "V", "b_F", "b_G", "b_H", "b_V")

    def __init__(self, n_in: int, n_hid: int, rng=None):
        rng = check_rng(rng)
        self.n_in, self.n_hid = check_int(n_in, "n_in", 1), check_int(n_hid, "n_hid", 1)
        bound = 1 / np.sqrt(n_hid)  # the initialisation of torch.nn.LSTM
        for name in "FGHV":
            setattr(self, name, rng.uniform(-bound, bound, (n_hid, n_in + n_hid)))
            setattr(self, f"b_{name}", rng.uniform(-bound, bound, n_hid))

    def forward(self, x, state=None) -> tuple:
        """One step: (z_{t-1}, C_{t-1}) -> (z_t, C_t); state=None starts from zeros."""
        xp = _backend(x, *(state if state is not None else ()), *self.parameters().values())
        z, C = state if state is not None else (xp.zeros(self.n_hid), xp.zeros(self.n_hid))
        z, C = _step_vector(z, "z", self.n_hid, xp), _step_vector(C, "C", self.n_hid, xp)
        x_tilde = xp.concatenate([_step_vector(x, "x", self.n_in, xp), z])
        F, G, H, V, b_F, b_G, b_H, b_V = self._weights(xp)
        f = xp.sigmoid(F @ x_tilde + b_F)
        i = xp.sigmoid(G @ x_tilde + b_G)
        o = xp.sigmoid(H @ x_tilde + b_H)
        C = f * C + i * xp.tanh(V @ x_tilde + b_V)
        return o * xp.tanh(C), C

    def run(self, X, state=None) -> LSTMRun:
        """All states for a sequence X (T, n_in), starting from `state` (zeros when None)."""
        X = _sequence(X, "X", self.n_in)
        Z, C = [], []
        for x in X:
            state = self.forward(x, state)
            Z.append(state[0])
            C.append(state[1])
        xp = _backend(*Z)
        return LSTMRun(xp.stack(Z), xp.stack(C))

    def load_torch(self, lstm) -> LSTMCell:
        """Copy the weights of a one-layer ``torch.nn.LSTM``: its row blocks are i, f, g, o, so
        G = [W_ii, W_hi], F = [W_if, W_hf], V = [W_ig, W_hg], H = [W_io, W_ho], biases b_ih + b_hh."""
        W = np.hstack([to_numpy(lstm.weight_ih_l0), to_numpy(lstm.weight_hh_l0)]).astype(np.float64)
        if W.shape != (4 * self.n_hid, self.n_in + self.n_hid):
            raise ValueError(f"the LSTM's weights {W.shape} do not fit n_in={self.n_in}, n_hid={self.n_hid}")
        b = to_numpy(lstm.bias_ih_l0 + lstm.bias_hh_l0).astype(np.float64) if lstm.bias else np.zeros(len(W))
        for name, block in zip("GFVH", range(4), strict=True):
            rows = slice(block * self.n_hid, (block + 1) * self.n_hid)
            setattr(self, name, W[rows])
            setattr(self, f"b_{name}", b[rows])
        return self


class GRUCell(_GatedCell):
    """GRU cell written with the lecture's update gate u (the weight of the new state):
    ``u = sigma(G [x, z] + b_G)``, ``r = sigma(H [x, z] + b_H)``, ``z_t = (1 - u) * z_{t-1} + u * z~`` with

    - variant="torch" (PyTorch's form, reset after the product):
      ``z~ = tanh(V_x x + b_x + r * (V_z z + b_z))``;
    - variant="sheet" (the lecture's form, reset before it): ``z~ = tanh(V [x, r * z] + b)``, V = [V_x, V_z],
      b = b_z + b_x.

    Section 5.3. Runs on NumPy arrays or torch tensors (see `to_torch`)."""

    WEIGHTS = ("G", "H", "V_x", "V_z", "b_G", "b_H", "b_x", "b_z")

    def __init__(self, n_in: int, n_hid: int, rng=None, *, variant: str = "torch"):
        rng = check_rng(rng)
        self.n_in, self.n_hid = check_int(n_in, "n_in", 1), check_int(n_hid, "n_hid", 1)
        self.variant = check_choice(variant, "variant", ("torch", "sheet"))
        bound = 1 / np.sqrt(n_hid)
        self.G, self.H = (rng.uniform(-bound, bound, (n_hid, n_in + n_hid)) for _ in range(2))
        self.V_x, self.V_z = (
            rng.uniform(-bound, bound, (n_hid, n_in)),
            rng.uniform(-bound, bound, (n_hid, n_hid)),
        )
        self.b_G, self.b_H, self.b_x, self.b_z = (rng.uniform(-bound, bound, n_hid) for _ in range(4))

    def forward(self, x, z=None):
        """One step z_{t-1} -> z_t; z=None starts from zeros."""
        xp = _backend(x, z, *self.parameters().values())
        z = xp.zeros(self.n_hid) if z is None else _step_vector(z, "z", self.n_hid, xp)
        x = _step_vector(x, "x", self.n_in, xp)
        G, H, V_x, V_z, b_G, b_H, b_x, b_z = self._weights(xp)
        x_tilde = xp.concatenate([x, z])
        u = xp.sigmoid(G @ x_tilde + b_G)
        r = xp.sigmoid(H @ x_tilde + b_H)
        if self.variant == "torch":
            z_new = xp.tanh(V_x @ x + b_x + r * (V_z @ z + b_z))
        else:
            z_new = xp.tanh(V_z @ (r * z) + V_x @ x + b_z + b_x)
        return (1 - u) * z + u * z_new

    def run(self, X, z=None):
        """All states z_1..z_T (T, n_hid) for a sequence X (T, n_in), starting from z (zeros when None)."""
        X = _sequence(X, "X", self.n_in)
        Z = []
        for x in X:
            z = self.forward(x, z)
            Z.append(z)
        return _backend(*Z).stack(Z)

    def load_torch(self, gru) -> GRUCell:
        """Copy the weights of a one-layer ``torch.nn.GRU`` (row blocks r, z, n). Torch keeps z_torch * h, so
        the lecture's u = 1 - z_torch = sigma(-(...)): G and b_G are the negated z-block."""
        W_ih, W_hh = (to_numpy(w).astype(np.float64) for w in (gru.weight_ih_l0, gru.weight_hh_l0))
        if W_ih.shape != (3 * self.n_hid, self.n_in) or W_hh.shape != (3 * self.n_hid, self.n_hid):
            raise ValueError(
                f"the GRU's weights {W_ih.shape}, {W_hh.shape} do not fit "
                f"n_in={self.n_in}, n_hid={self.n_hid}"
            )
        if gru.bias:
            b_ih, b_hh = (to_numpy(b).astype(np.float64) for b in (gru.bias_ih_l0, gru.bias_hh_l0))
        else:
            b_ih = b_hh = np.zeros(3 * self.n_hid)
        r, u, n = (slice(k * self.n_hid, (k + 1) * self.n_hid) for k in range(3))
        self.H, self.b_H = np.hstack([W_ih[r], W_hh[r]]), b_ih[r] + b_hh[r]
        self.G, self.b_G = -np.hstack([W_ih[u], W_hh[u]]), -(b_ih[u] + b_hh[u])
        self.V_x, self.b_x, self.V_z, self.b_z = W_ih[n], b_ih[n], W_hh[n], b_hh[n]
        return self


class AddingTask(NamedTuple):
    X: np.ndarray  # (N, T, 2): channel 0 the values, channel 1 the two markers
    y: np.ndarray  # (N,): the sum of the two marked values


def make_adding_task(n: int, T: int, rng=None) -> AddingTask:
    """The adding problem (Hochreiter and Schmidhuber, 1997): each of n sequences of length T carries values
    v_t ~ U(0, 1) and markers delta_t in {0, 1} with exactly two ones, one in the first half (t < T // 2) and
    one in the second half; the target is the sum of the two marked values, ``y = sum_t delta_t v_t``.
    Predicting the mean 1 for every sequence has the mean squared error Var(y) = 2/12 = 1/6: a model must
    remember a value for up to T - 1 steps to do better (section 5.3). Returns X (n, T, 2) and y (n,)."""
    n, T, rng = check_int(n, "n", 1), check_int(T, "T", 2), check_rng(rng)
    values = rng.uniform(0, 1, (n, T))
    markers = np.zeros((n, T))
    rows = np.arange(n)
    markers[rows, rng.integers(0, T // 2, n)] = 1
    markers[rows, rng.integers(T // 2, T, n)] = 1
    return AddingTask(np.stack([values, markers], axis=-1), (values * markers).sum(axis=1))
