"""Chapter 05 — recurrent networks: the Elman RNN and backpropagation through time, deep and bidirectional RNNs,
the Jacobian product bound and gradient clipping, LSTM and GRU cells, linear recurrences (the LRU) and their
parallel scans, encoder–decoder models with attention, a character-level language model, and connectionist
temporal classification (CTC); with the synthetic tasks the chapter trains on (adding, recall, reversal, CTC).

Conventions: a sequence is an array (T, n) with time first (a batch of them (B, T, n)); states z_t (m,),
z_0 = 0. The NumPy cells hold weights named as in the lecture, load the weights of the corresponding
``torch.nn`` module, and run on torch tensors too, so that autograd goes through the same formulas.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from .activations import ACTIVATIONS, log_softmax, sigmoid, softmax
from .training import model_device, to_numpy
from .validation import (
    check_array,
    check_choice,
    check_int,
    check_labels,
    check_matrix,
    check_number,
    check_positive,
    check_rng,
    check_vector,
)

# ----------------------------------------------------------------------------- 5.1 Elman RNN and BPTT


def _check_rnn(X, U, V, W) -> tuple[np.ndarray, ...]:
    X = check_matrix(X, "X")  # (T, n)
    U = check_matrix(U, "U")
    m = len(U)
    U = check_matrix(U, "U", m, m)
    return X, U, check_matrix(V, "V", m, X.shape[1]), check_matrix(W, "W", None, m)


class RNNRun(NamedTuple):
    Z: np.ndarray  # states z_1..z_T, (T, m)
    Y_hat: np.ndarray  # outputs, (T, k)


def elman_rnn(X, U, V, W, phi=np.tanh, psi=None) -> RNNRun:
    """States ``z_t = phi(U z_{t-1} + V x_t)`` (z_0 = 0) and outputs ``y_hat_t = psi(W z_t)`` of an Elman RNN
    for a sequence X (T, n); returns Z (T, m) and Y_hat (T, k). psi=None is the identity."""
    X, U, V, W = _check_rnn(X, U, V, W)
    Z = np.zeros((len(X), U.shape[0]))
    z = np.zeros(U.shape[0])
    for t, x in enumerate(X):
        z = phi(U @ z + V @ x)
        Z[t] = z
    A = Z @ W.T
    return RNNRun(Z, A if psi is None else psi(A))


class BPTTResult(NamedTuple):
    L: float
    dU: np.ndarray
    dV: np.ndarray
    dW: np.ndarray


def bptt(X, Y, U, V, W, loss: str = "mse") -> BPTTResult:
    """Backpropagation through time for the tanh Elman RNN: the backward recursion
    ``g_t = dl_t/dz_t + U^T (phi'(a_{t+1}) * g_{t+1})`` (g_{T+1} = 0) and the summed gradients
    ``dL/dU = sum_t (phi'(a_t) * g_t) z_{t-1}^T``, ``dL/dV = sum_t (phi'(a_t) * g_t) x_t^T``,
    ``dL/dW = sum_t e_t z_t^T`` with ``dl_t/dz_t = W^T e_t``. Returns L, dU, dV, dW.

    loss="mse": linear outputs ``y_hat_t = W z_t``, ``L = sum_t ||y_hat_t - y_t||^2 / 2``, so ``e_t = y_hat_t - y_t``.
    loss="cross_entropy": ``y_hat_t = softmax(W z_t)``, ``L = -sum_t y_t^T log y_hat_t`` with rows of Y that are
    probabilities (one-hot targets), and again ``e_t = y_hat_t - y_t`` (section 5.1)."""
    X, U, V, W = _check_rnn(X, U, V, W)
    Y = check_matrix(Y, "Y", len(X), len(W))
    check_choice(loss, "loss", ["mse", "cross_entropy"])
    Z, A = elman_rnn(X, U, V, W)
    if loss == "mse":
        error = A - Y  # dl_t / dy_hat_t
        L = 0.5 * np.sum(error**2)
    else:
        if (Y < 0).any() or not np.allclose(Y.sum(axis=1), 1):
            raise ValueError("with loss='cross_entropy' every row of Y must be a probability vector")
        error = softmax(A) - Y  # dl_t / d(W z_t) for softmax + cross-entropy
        L = -np.sum(Y * log_softmax(A))
    Z_prev = np.vstack([np.zeros(U.shape[0]), Z[:-1]])
    phi_prime = 1 - Z**2  # tanh'(a_t) = 1 - z_t^2
    G = np.zeros_like(Z)
    g_next = np.zeros(U.shape[0])  # phi'(a_{T+1}) * g_{T+1} = 0
    for t in reversed(range(len(X))):
        G[t] = W.T @ error[t] + U.T @ g_next
        g_next = phi_prime[t] * G[t]
    delta = phi_prime * G  # phi'(a_t) * g_t, one row per step
    return BPTTResult(float(L), delta.T @ Z_prev, delta.T @ X, error.T @ Z)


def torch_rnn_weights(net, layer: int = 0, reverse: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The lecture's (U, V) of one layer (and direction) of a ``torch.nn.RNN`` without biases, as float64:
    ``U = weight_hh_l{layer}``, ``V = weight_ih_l{layer}`` (``..._reverse`` for the backward direction)."""
    if not all(hasattr(net, name) for name in ("num_layers", "bidirectional", "bias")):
        raise TypeError(f"net must be a torch.nn.RNN, got {type(net).__name__}")
    layer = check_int(layer, "layer", 0, net.num_layers - 1)
    if reverse and not net.bidirectional:
        raise ValueError("reverse=True needs a bidirectional RNN")
    if net.bias:
        raise ValueError("the lecture's RNN has no biases: build the torch.nn.RNN with bias=False")
    suffix = f"_l{layer}" + ("_reverse" if reverse else "")
    U = to_numpy(getattr(net, "weight_hh" + suffix)).astype(np.float64)
    return U, to_numpy(getattr(net, "weight_ih" + suffix)).astype(np.float64)


def deep_rnn(X, weights, phi=np.tanh) -> np.ndarray:
    """A stacked (deep) RNN, ``z_{t,l} = phi(U_l z_{t-1,l} + V_l z_{t,l-1})`` with ``z_{t,0} = x_t`` and
    ``z_{0,l} = 0``; `weights` is a list of (U_l, V_l), layer 1 first. Returns the top layer's states (T, m_L)."""
    Z = check_matrix(X, "X")
    if not isinstance(weights, list | tuple) or not weights:
        raise TypeError("weights must be a non-empty list of (U_l, V_l) pairs, one per layer")
    for l, pair in enumerate(weights, start=1):
        if not isinstance(pair, list | tuple) or len(pair) != 2:
            raise TypeError(f"weights[{l - 1}] must be a pair (U_{l}, V_{l})")
        U_l = check_matrix(pair[0], f"U_{l}")
        U_l = check_matrix(U_l, f"U_{l}", len(U_l), len(U_l))
        V_l = check_matrix(pair[1], f"V_{l}", len(U_l), Z.shape[1])
        Z = elman_rnn(Z, U_l, V_l, np.eye(len(U_l)), phi).Z  # the states of layer l are the inputs of l + 1
    return Z


class BiRNNRun(NamedTuple):
    Z_forward: np.ndarray  # z->_t, read from t = 1 to T, (T, m)
    Z_backward: np.ndarray  # z<-_t, read from t = T down to 1, (T, m)


def bidirectional_rnn(X, U, V, U_rev, V_rev, phi=np.tanh) -> BiRNNRun:
    """A bidirectional RNN: ``z->_t = phi(U z->_{t-1} + V x_t)`` (z->_0 = 0) and, with its own weights,
    ``z<-_t = phi(U~ z<-_{t+1} + V~ x_t)`` (z<-_{T+1} = 0). The output map acts on [z->_t; z<-_t]."""
    X = check_matrix(X, "X")
    U = check_matrix(U, "U")
    m = len(U)
    U, U_rev = check_matrix(U, "U", m, m), check_matrix(U_rev, "U_rev", m, m)
    V, V_rev = check_matrix(V, "V", m, X.shape[1]), check_matrix(V_rev, "V_rev", m, X.shape[1])
    identity = np.eye(m)
    forward = elman_rnn(X, U, V, identity, phi).Z
    backward = elman_rnn(X[::-1], U_rev, V_rev, identity, phi).Z[::-1]
    return BiRNNRun(forward, backward)


# ----------------------------------------------------------------------------- 5.2 vanishing and exploding gradients


class PowerIteration(NamedTuple):
    sigma: float  # the estimate of sigma_1(A) after the last iteration
    v: np.ndarray  # the last iterate, an estimate of the top right singular vector (n,)
    estimates: np.ndarray  # ||A v_k|| after k = 1..iters iterations
    iterates: np.ndarray  # v_k, (iters, n)


def spectral_norm(A, iters: int = 100, rng=None) -> PowerIteration:
    """The spectral norm ``||A||_2 = max_{||x|| = 1} ||A x|| = sigma_1(A)`` by power iteration on ``A^T A``:
    ``v_k = A^T A v_{k-1} / ||A^T A v_{k-1}||`` from a random unit v_0, estimate ``||A v_k||`` (the square root of
    the Rayleigh quotient ``v_k^T A^T A v_k``). The iterate's angle to the top singular vector decays like
    ``(sigma_2/sigma_1)^(2k)``, the estimate's relative error like ``(sigma_2/sigma_1)^(4k)`` (section 5.2)."""
    A = check_matrix(A, "A")
    iters = check_int(iters, "iters", 1)
    v = check_rng(rng).normal(size=A.shape[1])
    v /= np.linalg.norm(v)
    estimates, iterates = np.zeros(iters), np.zeros((iters, A.shape[1]))
    for k in range(iters):
        w = A.T @ (A @ v)
        norm = np.linalg.norm(w)
        if norm == 0:  # v lies in the null space (A = 0, or an unlucky start): ||A v|| = 0 from here on
            iterates[k:] = v
            break
        v = w / norm
        estimates[k], iterates[k] = np.linalg.norm(A @ v), v
    return PowerIteration(float(estimates[-1]), v, estimates, iterates)


GAMMA = {"tanh": 1.0, "relu": 1.0, "identity": 1.0, "sigmoid": 0.25}  # gamma = sup |phi'| of each phi


def jacobian_norms(X, U, V, phi: str = "tanh") -> np.ndarray:
    """``||dz_T / dz_0||_2`` for T = 1..len(X) (X: the inputs, (T, n)) along the trajectory ``z_t = phi(U z_{t-1} + V x_t)``, z_0 = 0:
    the ordered product ``dz_T/dz_0 = diag(phi'(a_T)) U ... diag(phi'(a_1)) U`` (the step T leftmost), whose
    norm is at most ``(gamma sigma_1(U))^T`` with ``gamma = sup |phi'|`` (`GAMMA`). phi is one of "tanh",
    "relu", "identity" (linear) or "sigmoid"."""
    X = check_matrix(X, "X")
    U = check_matrix(U, "U")
    m = len(U)
    U = check_matrix(U, "U", m, m)
    V = check_matrix(V, "V", m, X.shape[1])
    activation = ACTIVATIONS[check_choice(phi, "phi", list(GAMMA))]
    z, J = np.zeros(m), np.eye(m)
    norms = np.zeros(len(X))
    for t, x in enumerate(X):
        a = U @ z + V @ x
        J = activation.derivative(a)[:, None] * (U @ J)  # diag(phi'(a_t)) U J_{t-1}
        z = activation.phi(a)
        norms[t] = np.linalg.norm(J, 2)
    return norms


def clip_by_norm(g, max_norm: float) -> np.ndarray:
    """Gradient clipping by norm: ``g * min(1, c / ||g||_2)`` with c = max_norm; the direction is kept and the
    norm becomes at most c (``torch.nn.utils.clip_grad_norm_`` does this to all parameters' gradients at once)."""
    g = check_array(g, "g")
    max_norm = check_positive(max_norm, "max_norm")
    norm = np.linalg.norm(g)
    return g * min(1.0, max_norm / norm) if norm > 0 else g


# ----------------------------------------------------------------------------- 5.3 gated cells


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
    - variant="sheet" (the lecture's form, reset before it): ``z~ = tanh(V [r * z, x] + b)``, V = [V_z, V_x],
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


# ----------------------------------------------------------------------------- 5.4 linear recurrences


def _coefficients(a, b) -> tuple[np.ndarray, np.ndarray]:
    """a and b (T, ...) of one shape, as complex128 if either is complex, else float64."""
    dtype = np.result_type(np.asarray(a), np.asarray(b), np.float64)
    a = check_array(a, "a", dtype=dtype)
    if a.ndim == 0:
        raise ValueError("a must have a time axis: shape (T, ...), got a scalar")
    return a, check_array(b, "b", a.shape, dtype=dtype)


def linear_recurrence_loop(a, b) -> np.ndarray:
    """``z_t = a_t * z_{t-1} + b_t`` (z_0 = 0) by a loop over t; a, b (T, ...) real or complex."""
    a, b = _coefficients(a, b)
    Z = np.zeros(b.shape, dtype=b.dtype)
    z = np.zeros(b.shape[1:], dtype=Z.dtype)
    for t in range(len(b)):
        z = a[t] * z + b[t]
        Z[t] = z
    return Z


class ScanResult(NamedTuple):
    Z: np.ndarray  # the states z_1..z_T
    rounds: int  # the number of vectorised rounds, ceil(log2 T)


def linear_recurrence_scan(a, b) -> ScanResult:
    """The same states by a Hillis–Steele prefix scan with the associative operator
    ``(a, b) • (a', b') = (a' a, a' b + b')`` ((a, b) applied first): ceil(log2 T) rounds, each of which is one
    vectorised operation. Returns the states and the number of rounds."""
    A, B = _coefficients(a, b)
    A_new, B_new = np.empty_like(A), np.empty_like(B)  # two buffers, swapped every round: no allocations
    shift, rounds = 1, 0
    while shift < len(B):
        # element t composes with element t - shift, which was applied before it
        A_new[:shift], B_new[:shift] = A[:shift], B[:shift]
        np.multiply(A[shift:], A[:-shift], out=A_new[shift:])
        np.multiply(A[shift:], B[:-shift], out=B_new[shift:])
        B_new[shift:] += B[shift:]
        A, A_new, B, B_new = A_new, A, B_new, B
        shift, rounds = 2 * shift, rounds + 1
    return ScanResult(B, rounds)


def linear_recurrence_scan_work_efficient(a, b) -> ScanResult:
    """The same states with O(T) work (the idea of Blelloch's scan): compose neighbouring pairs
    ``(a_{2k}, b_{2k}) • (a_{2k+1}, b_{2k+1})``, solve the half-length recurrence for the odd positions
    recursively, then fill in the even ones, ``z_{2k} = a_{2k} z_{2k-1} + b_{2k}``. Two vectorised rounds per
    halving: about 2 log2 T rounds, but only about 2T combinations in all (Hillis–Steele needs T log2 T)."""
    A, B = _coefficients(a, b)

    def solve(A, B) -> tuple[np.ndarray, int]:
        T = len(B)
        if T == 1:
            return B.copy(), 0
        half = T // 2
        first, second = slice(0, 2 * half, 2), slice(1, 2 * half, 2)
        z_odd, rounds = solve(A[second] * A[first], A[second] * B[first] + B[second])
        Z = np.empty_like(B)
        Z[1::2], Z[0] = z_odd, B[0]
        Z[2::2] = A[2::2] * z_odd[: (T - 1) // 2] + B[2::2]
        return Z, rounds + 2

    return ScanResult(*solve(A, B))


def scan_combine(a, b, a2, b2) -> tuple[np.ndarray, np.ndarray]:
    """The associative operator of the scan, ``(a, b) • (a', b') = (a' a, a' b + b')``: the step
    ``z -> a z + b`` followed by ``z -> a' z + b'`` is the step ``z -> a' a z + (a' b + b')``. Elementwise, real or
    complex."""
    dtype = np.result_type(*(np.asarray(v) for v in (a, b, a2, b2)), np.float64)
    a = check_array(a, "a", dtype=dtype)
    b, a2, b2 = (check_array(v, name, a.shape, dtype=dtype) for v, name in ((b, "b"), (a2, "a2"), (b2, "b2")))
    return a2 * a, a2 * b + b2


def _check_ssm(A, B) -> tuple[np.ndarray, np.ndarray]:
    dtype = np.result_type(np.asarray(A), np.asarray(B), np.float64)
    A = check_array(A, "A", (None, None), dtype=dtype)
    A = check_array(A, "A", (len(A), len(A)), dtype=dtype)
    return A, check_array(B, "B", (len(A), None), dtype=dtype)


def linear_ssm(X, A, B) -> np.ndarray:
    """States of the linear state-space model ``z_t = A z_{t-1} + B x_t``, z_0 = 0, by a loop over t;
    X (T, n), A (m, m), B (m, n) real or complex; returns Z (T, m) (section 5.4)."""
    A, B = _check_ssm(A, B)
    X = check_array(X, "X", (None, B.shape[1]), dtype=np.result_type(A, np.asarray(X)))
    Z = np.zeros((len(X), len(A)), dtype=np.result_type(A, X))
    z = np.zeros(len(A), dtype=Z.dtype)
    for t, x in enumerate(X):
        z = A @ z + B @ x
        Z[t] = z
    return Z


def ssm_kernel(A, B, T: int) -> np.ndarray:
    """The convolution kernel ``K_k = A^k B``, k = 0..T-1, of the linear state-space model, shape (T, m, n):
    ``z_t = sum_{s=1}^t K_{t-s} B x_s`` (section 5.4)."""
    A, B = _check_ssm(A, B)
    T = check_int(T, "T", 1)
    K = np.empty((T, *B.shape), dtype=B.dtype)
    K[0] = B
    for k in range(1, T):
        K[k] = A @ K[k - 1]
    return K


def lru_lambda(nu, theta) -> np.ndarray:
    """The LRU's eigenvalues ``lambda_j = exp(-exp(nu_j) + i theta_j)``: |lambda_j| = exp(-exp(nu_j)) < 1 for
    every real nu_j (section 5.4)."""
    nu = check_array(nu, "nu")
    theta = check_array(theta, "theta", nu.shape)
    return np.exp(-np.exp(nu) + 1j * theta)


def lru_nu(r) -> np.ndarray:
    """The inverse of the magnitude map: ``nu = log(-log r)`` for r in (0, 1), so that exp(-exp(nu)) = r."""
    r = check_array(r, "r")
    if ((r <= 0) | (r >= 1)).any():
        raise ValueError(f"r must lie in (0, 1), got values in [{r.min()}, {r.max()}]")
    return np.log(-np.log(r))


class LRUParams(NamedTuple):
    nu: np.ndarray  # log(-log |lambda_j|), (m,)
    theta: np.ndarray  # arg lambda_j, (m,)


def lru_params(m: int, r_min: float = 0.0, r_max: float = 1.0, rng=None) -> LRUParams:
    """Ring initialisation of the LRU: lambda_j uniform (by area) on the ring r_min <= |lambda| <= r_max,
    ``|lambda| = sqrt(u_1 (r_max^2 - r_min^2) + r_min^2)``, ``arg lambda = 2 pi u_2``, u_1, u_2 ~ U(0, 1);
    returned as nu = log(-log |lambda|) and theta (section 5.4)."""
    m = check_int(m, "m", 1)
    r_max = check_number(r_max, "r_max", 0, 1, low_open=True)
    r_min = check_number(r_min, "r_min", 0, r_max, high_open=True)
    rng = check_rng(rng)
    u1, u2 = rng.uniform(size=m), rng.uniform(size=m)
    r = np.sqrt(u1 * (r_max**2 - r_min**2) + r_min**2)
    r = np.clip(r, np.finfo(float).tiny, 1 - 1e-12)  # keep nu finite at the ends of [0, 1]
    return LRUParams(np.log(-np.log(r)), 2 * np.pi * u2)


def linear_gru(X, G, V) -> np.ndarray:
    """The linear GRU, whose gate sees the input only: ``a_t = sigma(G x_t)``,
    ``z_t = a_t * z_{t-1} + (1 - a_t) * V x_t``, z_0 = 0, by a loop over t; X (T, n), G and V (m, n); returns
    Z (T, m). Linear in z, so the states are also a scan over (a_t, (1 - a_t) * V x_t) (section 5.4)."""
    X = check_matrix(X, "X")
    G = check_matrix(G, "G", None, X.shape[1])
    V = check_matrix(V, "V", len(G), X.shape[1])
    Z = np.zeros((len(X), len(G)))
    z = np.zeros(len(G))
    for t, x in enumerate(X):
        a = sigmoid(G @ x)
        z = a * z + (1 - a) * (V @ x)
        Z[t] = z
    return Z


class RecallTask(NamedTuple):
    X: np.ndarray  # tokens (n, T), int64 in 0..vocab-1
    y: np.ndarray  # the token `lag` steps before the last one, (n,)


def make_recall_task(n: int, T: int, lag: int, vocab: int, rng=None) -> RecallTask:
    """n random token sequences of length T over `vocab` symbols; the target is the token seen `lag` steps
    before the last step, ``y = X[:, T - 1 - lag]`` (section 5.4)."""
    n, T, vocab = check_int(n, "n", 1), check_int(T, "T", 1), check_int(vocab, "vocab", 2)
    lag = check_int(lag, "lag", 0, T - 1)
    X = check_rng(rng).integers(vocab, size=(n, T))
    return RecallTask(X, X[:, T - 1 - lag].copy())


class LRULayer(nn.Module):
    """A linear recurrent unit: ``zeta_t = Lambda zeta_{t-1} + gamma * (B~ x_t)`` with the diagonal complex
    ``Lambda = diag(exp(-exp(nu) + i theta))``, ring initialisation on r_min <= |lambda| <= r_max, the input
    normalisation ``gamma_j = sqrt(1 - |lambda_j|^2)`` (stored as log gamma, trainable), and the readout
    ``y_t = MLP(Re(G zeta_t))`` with G complex (k, m) and the MLP k -> k (ReLU) -> n_out. The states are computed
    by a Hillis–Steele scan over time (ceil(log2 T) rounds). Input (batch, T, n_in), output (batch, T, n_out)
    (section 5.4). In float32, |lambda| rounds to 1 once nu < -17 (r > 1 - 3e-8): use ``.double()`` or keep
    r_max well below 1 where that matters."""

    def __init__(
        self,
        n_in: int,
        m: int,
        k: int,
        r_min: float = 0.9,
        r_max: float = 0.999,
        n_out: int | None = None,
        rng=None,
    ):
        super().__init__()
        self.n_in, self.m, self.k = check_int(n_in, "n_in", 1), check_int(m, "m", 1), check_int(k, "k", 1)
        n_out = self.k if n_out is None else check_int(n_out, "n_out", 1)
        rng = check_rng(rng)
        nu, theta = lru_params(m, r_min, r_max, rng)
        r = np.exp(-np.exp(nu))
        self.nu, self.theta = nn.Parameter(torch.tensor(nu)), nn.Parameter(torch.tensor(theta))
        self.log_gamma = nn.Parameter(torch.tensor(0.5 * np.log1p(-(r**2))))
        self.B_re, self.B_im = (
            nn.Parameter(torch.tensor(rng.normal(0, (2 * n_in) ** -0.5, (m, n_in)))) for _ in "ri"
        )
        self.G_re, self.G_im = (nn.Parameter(torch.tensor(rng.normal(0, m**-0.5, (k, m)))) for _ in "ri")
        self.float()
        self.mlp = nn.Sequential(nn.Linear(k, k), nn.ReLU(), nn.Linear(k, n_out))

    def lam(self) -> torch.Tensor:
        """The eigenvalues lambda_j = exp(-exp(nu_j) + i theta_j), a complex tensor (m,)."""
        return torch.exp(torch.complex(-torch.exp(self.nu), self.theta))

    def B_tilde(self) -> torch.Tensor:
        return torch.complex(self.B_re, self.B_im)

    def states(self, x: torch.Tensor) -> torch.Tensor:
        """The states zeta_1..zeta_T (batch, T, m), complex, for an input x (batch, T, n_in)."""
        if not isinstance(x, torch.Tensor) or x.ndim != 3 or x.shape[-1] != self.n_in:
            shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"x must be a tensor of shape (batch, T, {self.n_in}), got {shape}")
        lam = self.lam()
        z = x.to(lam.dtype) @ (torch.exp(self.log_gamma)[:, None] * self.B_tilde()).T  # gamma * (B~ x_t)
        shift, lam_shift = 1, lam
        while shift < z.shape[1]:  # z_t += lambda^shift z_(t - shift): a time-invariant Hillis–Steele round
            z = torch.cat([z[:, :shift], lam_shift * z[:, :-shift] + z[:, shift:]], dim=1)
            shift, lam_shift = 2 * shift, lam_shift * lam_shift
        return z

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        G = torch.complex(self.G_re, self.G_im)
        return self.mlp((self.states(x) @ G.T).real)


# ----------------------------------------------------------------------------- 5.5 sequence to sequence and attention


class ReverseTask(NamedTuple):
    X: np.ndarray  # source strings (N, length), digits 0..vocab-1
    Y: np.ndarray  # target strings: each row of X reversed


def make_reverse_task(n: int, length: int, vocab: int = 10, rng=None, exclude=None) -> ReverseTask:
    """`n` random strings of `length` symbols 0..vocab-1 and their reversals, ``y_i = x_{m+1-i}``.

    `exclude` (an array (N', length)) lists strings that must not be drawn, e.g. the training strings when a
    held-out set is made; the strings drawn may repeat each other."""
    n, length = check_int(n, "n", 1), check_int(length, "length", 1)
    vocab, rng = check_int(vocab, "vocab", 2), check_rng(rng)
    if exclude is None:
        X = rng.integers(vocab, size=(n, length))
    else:
        seen = {row.tobytes() for row in to_numpy(_tokens(exclude, "exclude", vocab, length))}
        if len(seen) >= vocab**length:
            raise ValueError(f"exclude holds all {vocab}^{length} strings: nothing is left to draw")
        rows = []
        while len(rows) < n:
            for row in rng.integers(vocab, size=(2 * n, length)):
                if row.tobytes() not in seen and len(rows) < n:
                    rows.append(row)
        X = np.array(rows)
    return ReverseTask(X, X[:, ::-1].copy())


def _tokens(x, name: str, vocab: int, length: int | None = None) -> torch.Tensor:
    """Token ids (batch, length) as an int64 tensor, each in 0..vocab-1."""
    t = x if isinstance(x, torch.Tensor) else torch.as_tensor(np.ascontiguousarray(x))
    if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
        raise TypeError(f"{name} must hold integer token ids, got dtype {t.dtype}")
    if t.ndim != 2 or t.numel() == 0 or (length is not None and t.shape[1] != length):
        raise ValueError(
            f"{name} must have shape (batch, {'length' if length is None else length}), got {tuple(t.shape)}"
        )
    if (t < 0).any() or (t >= vocab).any():
        raise ValueError(f"{name} must hold token ids in 0..{vocab - 1}, got {int(t.min())}..{int(t.max())}")
    return t.long()


class Attention(NamedTuple):
    weights: torch.Tensor | np.ndarray  # a_ij over the encoder positions j, (..., m); each row sums to 1
    context: torch.Tensor | np.ndarray  # c_i = sum_j a_ij zeta_j, (..., hidden)


def attention_context(scores, states) -> Attention:
    """Attention weights and contexts from scores, in NumPy: ``a_ij = exp(e_ij) / sum_k exp(e_ik)`` (a
    softmax over the encoder positions j, for each decoder step i) and ``c_i = sum_j a_ij zeta_j``.
    scores (n, m) = e_ij, states (m, h) = zeta_j; returns weights (n, m) and contexts (n, h)."""
    scores = check_matrix(scores, "scores")
    states = check_matrix(states, "states", scores.shape[1])
    weights = softmax(scores, axis=1)
    return Attention(weights, weights @ states)


class Decoded(NamedTuple):
    tokens: torch.Tensor  # the greedy output (batch, n)
    attention: torch.Tensor | None  # a_ij (batch, n, m), or None without attention


class Seq2Seq(nn.Module):
    """A GRU encoder–decoder for token sequences, ``p(y_{1:n} | x_{1:m}) = prod_i p(y_i | y_{<i}, x_{1:m})``.

    Encoder: ``zeta_j = GRU(zeta_{j-1}, E x_j)``, j = 1..m. Decoder: ``z_0 = zeta_m``, ``z_i = GRU(z_{i-1},
    [E' y_{i-1}, c_i])`` with y_0 the start symbol (token id `vocab`), and ``p(y_i | y_{<i}, x) =
    softmax(W [z_i, c_i] + b)``. With ``attention=True`` the context is additive (Bahdanau) attention,
    ``a_ij = softmax_j v^T tanh(W_z z_{i-1} + W_zeta zeta_j + b_a)`` (an MLP of [z_{i-1}, zeta_j]),
    ``c_i = sum_j a_ij zeta_j``; without attention there is no c_i and the decoder sees x only through
    z_0 = zeta_m (the bottleneck). Section 5.5."""

    def __init__(self, vocab: int, hidden: int, attention: bool = False, embed: int = 16):
        super().__init__()
        self.vocab, self.hidden = check_int(vocab, "vocab", 2), check_int(hidden, "hidden", 1)
        self.attention = check_choice(attention, "attention", (False, True))
        embed = check_int(embed, "embed", 1)
        self.source_embedding = nn.Embedding(vocab, embed)
        self.target_embedding = nn.Embedding(vocab + 1, embed)  # + the start symbol, id `vocab`
        self.encoder = nn.GRU(embed, hidden, batch_first=True)
        self.decoder = nn.GRU(embed + (hidden if attention else 0), hidden, batch_first=True)
        if attention:
            self.W_z = nn.Linear(hidden, hidden, bias=False)
            self.W_zeta = nn.Linear(hidden, hidden)  # its bias is b_a
            self.v = nn.Linear(hidden, 1, bias=False)
        self.output = nn.Linear(2 * hidden if attention else hidden, vocab)

    def encode(self, x) -> tuple[torch.Tensor, torch.Tensor]:
        """The encoder states zeta_1..zeta_m (batch, m, hidden) and the last one, zeta_m (batch, hidden)."""
        x = _tokens(x, "x", self.vocab).to(self.output.weight.device)
        states, last = self.encoder(self.source_embedding(x))
        return states, last[0]

    def attend(self, z, states) -> Attention:
        """Additive attention of decoder state(s) z_{i-1} (batch, hidden) on the encoder states (batch, m,
        hidden): the weights a_ij = softmax_j e_ij, e_ij = v^T tanh(W_z z_{i-1} + W_zeta zeta_j + b_a), and the
        context c_i = sum_j a_ij zeta_j."""
        if not self.attention:
            raise ValueError("this model has no attention: build it with Seq2Seq(..., attention=True)")
        if states.ndim != 3 or z.shape != (len(states), self.hidden) or states.shape[2] != self.hidden:
            raise ValueError(
                f"z must be (batch, {self.hidden}) and states (batch, m, {self.hidden}), got "
                f"{tuple(z.shape)} and {tuple(states.shape)}"
            )
        scores = self.v(torch.tanh(self.W_z(z)[:, None] + self.W_zeta(states)))[..., 0]  # e_ij, (batch, m)
        weights = torch.softmax(scores, dim=1)  # over the encoder positions j
        return Attention(weights, torch.einsum("bj,bjh->bh", weights, states))

    def _step(self, y_prev, z, states) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """One decoder step: (y_{i-1}, z_{i-1}) -> (logits of y_i, z_i, a_i)."""
        inputs, weights = self.target_embedding(y_prev), None
        if self.attention:
            weights, context = self.attend(z, states)
            inputs = torch.cat([inputs, context], dim=1)
        _, z = self.decoder(inputs[:, None], z[None].contiguous())
        z = z[0]
        return self.output(torch.cat([z, context], dim=1) if self.attention else z), z, weights

    def forward(self, x, y) -> torch.Tensor:
        """Teacher forcing: the logits (batch, n, vocab) of p(y_i | y_{<i}, x) for i = 1..n, the decoder being
        fed the true previous symbols y_0 (start), y_1, ..., y_{n-1}."""
        y = _tokens(y, "y", self.vocab).to(self.output.weight.device)
        states, z = self.encode(x)
        if len(y) != len(states):
            raise ValueError(f"x and y must hold the same number of strings, got {len(states)} and {len(y)}")
        y_prev = torch.cat([torch.full_like(y[:, :1], self.vocab), y[:, :-1]], dim=1)
        if not self.attention:  # the inputs are all known: one call of the GRU over the n steps
            Z, _ = self.decoder(self.target_embedding(y_prev), z[None].contiguous())
            return self.output(Z)
        logits = []
        for i in range(y.shape[1]):
            step_logits, z, _ = self._step(y_prev[:, i], z, states)
            logits.append(step_logits)
        return torch.stack(logits, dim=1)

    def sequence_log_prob(self, x, y) -> torch.Tensor:
        """``log p(y_{1:n} | x) = sum_i log p(y_i | y_{<i}, x)`` for every string of the batch, (batch,)."""
        log_p = torch.log_softmax(self(x, y), dim=-1)
        y = _tokens(y, "y", self.vocab).to(log_p.device)
        return log_p.gather(2, y[..., None])[..., 0].sum(dim=1)

    @torch.no_grad()
    def greedy_decode(self, x, n: int) -> Decoded:
        """Greedy decoding of `n` symbols: ``y_i = argmax p(y_i | y_{<i}, x)``, each fed back as the next input.
        Returns the tokens (batch, n) and, with attention, the weights a_ij (batch, n, m)."""
        n = check_int(n, "n", 1)
        states, z = self.encode(x)
        y_prev = torch.full((len(states),), self.vocab, dtype=torch.long, device=states.device)
        tokens, weights = [], []
        for _ in range(n):
            logits, z, a = self._step(y_prev, z, states)
            y_prev = logits.argmax(dim=1)
            tokens.append(y_prev)
            weights.append(a)
        return Decoded(torch.stack(tokens, dim=1), torch.stack(weights, dim=1) if self.attention else None)


def train_seq2seq(
    model: Seq2Seq,
    X,
    Y,
    steps: int,
    batch_size: int = 64,
    lr: float = 1e-2,
    clip_grad_norm: float | None = 1.0,
    rng=None,
    progress: bool = True,
) -> list[float]:
    """Train with teacher forcing for a fixed number of `steps`: each step draws `batch_size` pairs of rows of
    (X, Y) at random, minimises the cross-entropy ``-(1/n) sum_i log p(y_i | y_{<i}, x)`` averaged over the
    batch with Adam, its learning rate decaying from `lr` to 0 on a cosine, gradients clipped to norm
    `clip_grad_norm`. Returns the loss of every step."""
    X, Y = _tokens(X, "X", model.vocab), _tokens(Y, "Y", model.vocab)
    if len(X) != len(Y):
        raise ValueError(f"X and Y must hold the same number of strings, got {len(X)} and {len(Y)}")
    steps, batch_size = check_int(steps, "steps", 1), check_int(batch_size, "batch_size", 1)
    lr, rng = check_positive(lr, "lr"), check_rng(rng)
    if clip_grad_norm is not None:
        clip_grad_norm = check_positive(clip_grad_norm, "clip_grad_norm")
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, steps)
    losses = []
    model.train()
    bar = tqdm(range(steps), desc="steps", disable=not progress)
    for _ in bar:
        rows = torch.as_tensor(rng.integers(len(X), size=batch_size))
        logits = model(X[rows], Y[rows])
        loss = F.cross_entropy(logits.reshape(-1, model.vocab), Y[rows].reshape(-1).to(logits.device))
        optimizer.zero_grad()
        loss.backward()
        if clip_grad_norm is not None:
            nn.utils.clip_grad_norm_(model.parameters(), clip_grad_norm)
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
        bar.set_postfix(loss=f"{losses[-1]:.3f}", refresh=False)
    model.eval()
    return losses


class Seq2SeqScore(NamedTuple):
    token_accuracy: float  # fraction of output symbols right
    exact_match: float  # fraction of strings right in every symbol
    per_position: np.ndarray  # token accuracy at each output position i, (n,)
    prediction: np.ndarray  # the greedy output (N, n)
    attention: np.ndarray | None  # a_ij (N, n, m), or None


def evaluate_seq2seq(model: Seq2Seq, X, Y) -> Seq2SeqScore:
    """Greedy-decode every row of X (as many symbols as Y has columns) and compare with Y."""
    X, Y = _tokens(X, "X", model.vocab), _tokens(Y, "Y", model.vocab)
    if len(X) != len(Y):
        raise ValueError(f"X and Y must hold the same number of strings, got {len(X)} and {len(Y)}")
    model.eval()
    tokens, attention = model.greedy_decode(X, Y.shape[1])
    prediction = to_numpy(tokens)
    right = prediction == to_numpy(Y)
    return Seq2SeqScore(
        float(right.mean()),
        float(right.all(axis=1).mean()),
        right.mean(axis=0),
        prediction,
        None if attention is None else to_numpy(attention),
    )


# ----------------------------------------------------------------------------- 5.5 teacher forcing and language models


def char_vocabulary(text: str) -> str:
    """The distinct characters of `text`, sorted: the vocabulary of a character-level model, character
    ``vocabulary[k]`` having the id k."""
    if not isinstance(text, str) or not text:
        raise TypeError(f"text must be a non-empty str, got {type(text).__name__}")
    return "".join(sorted(set(text)))


def encode_chars(text: str, vocabulary: str) -> np.ndarray:
    """The ids (len(text),) of the characters of `text` in `vocabulary` (int64)."""
    if not isinstance(text, str) or not isinstance(vocabulary, str):
        raise TypeError(
            f"text and vocabulary must be str, got {type(text).__name__}, {type(vocabulary).__name__}"
        )
    index = {c: k for k, c in enumerate(vocabulary)}
    missing = sorted(set(text) - set(index))
    if missing:
        raise ValueError(f"text has characters that are not in the vocabulary: {''.join(missing[:10])!r}")
    return np.fromiter((index[c] for c in text), dtype=np.int64, count=len(text))


def decode_chars(ids, vocabulary: str) -> str:
    """The text whose characters have the ids `ids` in `vocabulary`."""
    ids = check_labels(ids, "ids", n_classes=len(vocabulary))
    return "".join(vocabulary[k] for k in ids)


def conditional_entropy(ids, n_symbols: int, context: int = 0) -> float:
    """Plug-in entropy in bits of the next symbol given the `context` symbols before it, from the counts in
    `ids`: ``H = -sum_c p(c) sum_y p(y | c) log2 p(y | c)``. ``context=0`` is the unigram entropy
    ``-sum_y p(y) log2 p(y)``, ``context=1`` the bigram entropy ``H(y_t | y_{t-1})``."""
    n_symbols = check_int(n_symbols, "n_symbols", 1)
    ids = check_labels(ids, "ids", n_classes=n_symbols)
    context = check_int(context, "context", 0, 8)
    if len(ids) <= context:
        raise ValueError(f"ids must be longer than context = {context}, got {len(ids)} symbols")
    windows = np.lib.stride_tricks.sliding_window_view(ids, context + 1)
    codes = windows @ n_symbols ** np.arange(context, -1, -1, dtype=np.int64)  # (context..., y) as one number
    _, joint = np.unique(codes, return_counts=True)
    _, marginal = np.unique(codes // n_symbols, return_counts=True)  # counts of the contexts alone
    n = len(codes)
    return float(-(joint / n) @ np.log2(joint / n) + (marginal / n) @ np.log2(marginal / n))


class LMOutput(NamedTuple):
    logits: torch.Tensor  # (B, T, K): scores of y_t given y_1..y_{t-1}
    Z: torch.Tensor  # hidden states z_t, (B, T, m)
    state: tuple[torch.Tensor, torch.Tensor]  # (z_T, C_T), to continue from


def _check_ids(ids, vocab_size: int) -> torch.Tensor:
    if not isinstance(ids, torch.Tensor):
        raise TypeError(f"ids must be an int64 tensor (batch, time), got {type(ids).__name__}")
    if ids.dtype != torch.int64 or ids.ndim != 2 or ids.numel() == 0:
        raise ValueError(
            f"ids must be a non-empty int64 tensor (batch, time), got {ids.dtype} of shape {tuple(ids.shape)}"
        )
    if ids.min() < 0 or ids.max() >= vocab_size:
        raise ValueError(f"ids must lie in 0..{vocab_size - 1}, got {int(ids.min())}..{int(ids.max())}")
    return ids


class CharLSTM(nn.Module):
    """A character-level language model with the output fed back as the next input: the embedding of
    y_{t-1} enters the LSTM, ``z_t = LSTM(z_{t-1}, C_{t-1}, e(y_{t-1}))``, and ``softmax(W z_t + b)`` is
    p(y_t | y_1..y_{t-1})."""

    def __init__(self, vocab_size: int, hidden: int = 128, embedding: int = 32):
        super().__init__()
        self.vocab_size = check_int(vocab_size, "vocab_size", 2)
        self.embed = nn.Embedding(vocab_size, check_int(embedding, "embedding", 1))
        self.lstm = nn.LSTM(embedding, check_int(hidden, "hidden", 1), batch_first=True)
        self.W = nn.Linear(hidden, vocab_size)

    def forward(self, ids: torch.Tensor, state=None) -> LMOutput:
        """ids (B, T) of y_0..y_{T-1} -> logits of y_1..y_T, states z_1..z_T, and the last state."""
        Z, state = self.lstm(self.embed(_check_ids(ids, self.vocab_size)), state)
        return LMOutput(self.W(Z), Z, state)


def train_char_lm(
    model: CharLSTM,
    ids,
    steps: int,
    *,
    seq_len: int = 64,
    batch_size: int = 32,
    lr: float = 1e-2,
    clip: float = 1.0,
    rng=None,
) -> np.ndarray:
    """Teacher forcing: `steps` Adam updates of the model on random windows of `ids`, each window's
    characters fed as the inputs and the same characters shifted by one as the targets; the loss is the mean
    cross-entropy, the gradient norm clipped to `clip`. Returns the training loss of every step, in bits."""
    ids = check_labels(ids, "ids", n_classes=model.vocab_size)
    steps, seq_len = check_int(steps, "steps", 1), check_int(seq_len, "seq_len", 1)
    batch_size, rng = check_int(batch_size, "batch_size", 1), check_rng(rng)
    lr, clip = check_positive(lr, "lr"), check_positive(clip, "clip")
    if len(ids) < seq_len + 2:
        raise ValueError(f"ids must hold more than seq_len + 1 = {seq_len + 1} symbols, got {len(ids)}")
    data = torch.as_tensor(ids, device=model_device(model))
    offsets = torch.arange(seq_len + 1, device=data.device)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    losses = np.zeros(steps)
    model.train()
    for step in tqdm(range(steps), desc="training", leave=False):
        starts = torch.as_tensor(rng.integers(0, len(ids) - seq_len - 1, batch_size), device=data.device)
        window = data[starts[:, None] + offsets]  # (batch, seq_len + 1)
        logits = model(window[:, :-1]).logits
        loss = F.cross_entropy(logits.reshape(-1, model.vocab_size), window[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        losses[step] = loss.item() / np.log(2)
    model.eval()
    return losses


def bits_per_character(model: CharLSTM, ids, rows: int = 64) -> float:
    """``-mean_t log2 p(y_t | y_<t)`` on a text, teacher-forced. The text is cut into `rows` contiguous
    pieces run side by side; every character but the first of each piece is predicted."""
    ids = check_labels(ids, "ids", n_classes=model.vocab_size)
    rows = check_int(rows, "rows", 1, max(1, len(ids) // 2))
    length = len(ids) // rows
    pieces = torch.as_tensor(ids[: rows * length].reshape(rows, length), device=model_device(model))
    with torch.no_grad():
        logits = model(pieces[:, :-1]).logits
        nats = F.cross_entropy(logits.reshape(-1, model.vocab_size), pieces[:, 1:].reshape(-1))
    return nats.item() / np.log(2)


class Generation(NamedTuple):
    ids: np.ndarray  # generated ids, (B, n)
    Z: np.ndarray  # the states z_t that produced them, (B, n, m)


def generate(model: CharLSTM, prefix, n: int, temperature: float = 0.0, rng=None) -> Generation:
    """Free running: read the prefixes (B, P), then n times draw ``y_t ~ softmax(logits / temperature)``
    (``temperature=0``: the most probable symbol, greedy) and feed it back as the next input."""
    prefix = check_labels(np.ravel(prefix), "prefix", n_classes=model.vocab_size).reshape(np.shape(prefix))
    if prefix.ndim != 2:
        raise ValueError(f"prefix must have shape (batch, length), got shape {prefix.shape}")
    n, rng = check_int(n, "n", 1), check_rng(rng)
    temperature = check_number(temperature, "temperature", 0)
    ids, states = np.zeros((len(prefix), n), dtype=np.int64), []
    with torch.no_grad():
        out = model(torch.as_tensor(prefix, device=model_device(model)))
        for t in range(n):
            logits, z = out.logits[:, -1].double(), out.Z[:, -1]
            if temperature == 0:
                ids[:, t] = to_numpy(logits.argmax(dim=1))
            else:
                p = to_numpy(torch.softmax(logits / temperature, dim=1))
                u = rng.random((len(p), 1))  # inverse-CDF draw from each row
                ids[:, t] = np.minimum((np.cumsum(p, axis=1) < u).sum(axis=1), p.shape[1] - 1)
            states.append(to_numpy(z))
            out = model(torch.as_tensor(ids[:, t : t + 1], device=logits.device), out.state)
    return Generation(ids, np.stack(states, axis=1))


def sample(model: CharLSTM, prefix: str, n: int, vocabulary: str, temperature: float = 1.0, rng=None) -> str:
    """n characters generated after the text `prefix` at the given temperature (0: greedy)."""
    if len(vocabulary) != model.vocab_size:
        raise ValueError(
            f"vocabulary must have the model's {model.vocab_size} symbols, got {len(vocabulary)}"
        )
    return decode_chars(
        generate(model, encode_chars(prefix, vocabulary)[None], n, temperature, rng).ids[0], vocabulary
    )


# ----------------------------------------------------------------------------- 5.5 CTC


def ctc_collapse(path, blank: str = "-") -> str:
    """The CTC collapse B: merge repeated symbols, then delete blanks (``B("aa-ab") = "aab"``)."""
    merged = [symbol for symbol, _ in itertools.groupby(path)]
    return "".join(symbol for symbol in merged if symbol != blank)


def _check_ctc(Y, label, alphabet) -> np.ndarray:
    Y = check_matrix(Y, "Y")
    if Y.shape[1] != len(alphabet) or not np.allclose(Y.sum(axis=1), 1) or (Y < 0).any():
        raise ValueError(f"Y must be (T, {len(alphabet)}) per-frame probabilities over {alphabet!r}")
    if any(symbol not in alphabet[1:] for symbol in label):
        raise ValueError(
            f"label symbols must be in {alphabet[1:]!r} (the blank is {alphabet[0]!r}), got {label!r}"
        )
    return Y


def ctc_bruteforce(Y, label: str, alphabet: str = "-ab") -> float:
    """``p(label | x) = sum over paths pi with B(pi) = label of prod_t Y[t, pi_t]`` by enumerating all
    |alphabet|^T paths (alphabet[0] is the blank); for checking only."""
    Y = _check_ctc(Y, label, alphabet)
    total = 0.0
    for path in itertools.product(range(len(alphabet)), repeat=len(Y)):
        if ctc_collapse((alphabet[k] for k in path), alphabet[0]) == label:
            total += np.prod(Y[np.arange(len(Y)), path])
    return float(total)


def _padded_label(label: str, alphabet: str) -> np.ndarray:
    """The blank-padded label l' = (-, l_1, -, l_2, ..., l_|l|, -) as ids, S = 2 |l| + 1."""
    padded = [0]
    for symbol in label:
        padded += [alphabet.index(symbol), 0]
    return np.array(padded)


def _skip_allowed(padded: np.ndarray, repeat_rule: bool) -> np.ndarray:
    """Where alpha_{t-1}(s-2) enters alpha_t(s): s >= 2 (0-based), l'_s not a blank and, with the repeat rule,
    l'_s != l'_{s-2}."""
    allowed = padded != 0
    allowed[:2] = False
    if repeat_rule:
        allowed[2:] &= padded[2:] != padded[:-2]
    return allowed


def ctc_alpha(Y, label: str, alphabet: str = "-ab", repeat_rule: bool = True) -> np.ndarray:
    """The CTC forward variables alpha_t(s) (T, S) over the blank-padded label l', S = 2|l| + 1:
    ``alpha_1(1) = y^1_-``, ``alpha_1(2) = y^1_{l_1}``, and
    ``alpha_t(s) = y^t_{l'_s} (alpha_{t-1}(s) + alpha_{t-1}(s-1) + [l'_s != - and l'_s != l'_{s-2}] alpha_{t-1}(s-2))``.
    ``repeat_rule=False`` drops the condition l'_s != l'_{s-2} (a wrong recursion, for comparison)."""
    Y = _check_ctc(Y, label, alphabet)
    padded = _padded_label(label, alphabet)
    skip = _skip_allowed(padded, bool(repeat_rule))
    alpha = np.zeros((len(Y), len(padded)))
    alpha[0, :2] = Y[0, padded[:2]]
    for t in range(1, len(Y)):
        previous = alpha[t - 1]
        total = previous.copy()
        total[1:] += previous[:-1]
        total[2:] += np.where(skip[2:], previous[:-2], 0.0)
        alpha[t] = total * Y[t, padded]
    return alpha


def ctc_forward(Y, label: str, alphabet: str = "-ab", repeat_rule: bool = True) -> float:
    """``p(label | x) = alpha_T(S) + alpha_T(S-1)`` by the forward recursion `ctc_alpha` over the blank-padded
    label l' = (-, l_1, -, l_2, ..., -) (alpha_T(S) alone for the empty label)."""
    alpha = ctc_alpha(Y, label, alphabet, repeat_rule)
    return float(alpha[-1, -1] + (alpha[-1, -2] if alpha.shape[1] > 1 else 0.0))


def ctc_log_forward(log_Y, label: str, alphabet: str = "-ab") -> float:
    """``log p(label | x)`` by the forward recursion in log space, ``log alpha_t(s) = log y^t_{l'_s} +
    logsumexp(...)`` of the same terms as `ctc_alpha`: no underflow for long sequences, where the alpha
    themselves fall below the smallest float. log_Y (T, |alphabet|) holds log-probabilities per frame."""
    log_Y = check_matrix(log_Y, "log_Y")
    if log_Y.shape[1] != len(alphabet) or not np.allclose(np.exp(log_Y).sum(axis=1), 1):
        raise ValueError(f"log_Y must be (T, {len(alphabet)}) per-frame log-probabilities over {alphabet!r}")
    _check_ctc(np.exp(log_Y[:1]), label, alphabet)  # the label's symbols
    padded = _padded_label(label, alphabet)
    skip = _skip_allowed(padded, True)
    log_alpha = np.full(len(padded), -np.inf)
    log_alpha[:2] = log_Y[0, padded[:2]]
    with np.errstate(divide="ignore"):
        for t in range(1, len(log_Y)):
            terms = np.full((3, len(padded)), -np.inf)
            terms[0] = log_alpha
            terms[1, 1:] = log_alpha[:-1]
            terms[2, 2:] = np.where(skip[2:], log_alpha[:-2], -np.inf)
            log_alpha = np.logaddexp(np.logaddexp(terms[0], terms[1]), terms[2]) + log_Y[t, padded]
    return float(np.logaddexp(log_alpha[-1], log_alpha[-2]) if len(padded) > 1 else log_alpha[-1])


def ctc_best_path(Y, alphabet: str = "-ab") -> str:
    """Best-path decoding: the most probable symbol of every frame, then the collapse B. Exact for the most
    probable *path* (the frames are independent given x), an approximation of the most probable *label*."""
    Y = _check_ctc(Y, "", alphabet)
    return ctc_collapse((alphabet[k] for k in Y.argmax(axis=1)), alphabet[0])


class CTCTask(NamedTuple):
    X: np.ndarray  # frames (N, T_max, vocab + 1), zero-padded after each sequence's length
    input_lengths: np.ndarray  # (N,) frames per sequence
    targets: np.ndarray  # (N, 4) label ids 1..vocab, zero-padded
    target_lengths: np.ndarray  # (N,) label lengths 1..4


def make_ctc_task(n: int, vocab: int = 4, noise: float = 0.35, rng=None) -> CTCTask:
    """Unsegmented synthetic sequences for CTC: a label of 1–4 symbols from 1..vocab, each symbol shown for 2–4
    frames as the noisy one-hot vector e_k, symbols separated by 1–2 'silence' frames e_0 (plus 0–2 at each
    end), Gaussian noise of standard deviation `noise` on every frame. The alignment is not given."""
    n, vocab, rng = check_int(n, "n", 1), check_int(vocab, "vocab", 1), check_rng(rng)
    noise = check_number(noise, "noise", 0)
    labels, frames = [], []
    for _ in range(n):
        label = rng.integers(1, vocab + 1, rng.integers(1, 5))
        sequence = [0] * int(rng.integers(0, 3))
        for position, symbol in enumerate(label):
            sequence += [0] * int(rng.integers(1, 3)) if position > 0 else []
            sequence += [int(symbol)] * int(rng.integers(2, 5))
        labels.append(label)
        frames.append(sequence + [0] * int(rng.integers(0, 3)))
    input_lengths = np.array([len(f) for f in frames])
    X = np.zeros((n, input_lengths.max(), vocab + 1))
    targets = np.zeros((n, 4), dtype=np.int64)
    for i, (sequence, label) in enumerate(zip(frames, labels, strict=True)):
        jitter = noise * rng.normal(size=(len(sequence), vocab + 1))
        X[i, : len(sequence)] = np.eye(vocab + 1)[sequence] + jitter
        targets[i, : len(label)] = label
    return CTCTask(X, input_lengths, targets, np.array([len(label) for label in labels]))
