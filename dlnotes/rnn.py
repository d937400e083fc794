"""Chapter 05 — recurrent networks: the Elman RNN and backpropagation through time, LSTM and GRU cells,
linear recurrences and their parallel scan, connectionist temporal classification (CTC).

Conventions: a sequence is an array (T, n) with time first; states z_t (m,), z_0 = 0. The cells hold NumPy
weights named as in the lecture and can load the weights of the corresponding ``torch.nn`` module.
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

import numpy as np

from .activations import sigmoid
from .training import to_numpy
from .validation import check_array, check_int, check_matrix, check_rng, check_vector

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


def bptt(X, Y, U, V, W) -> BPTTResult:
    """Backpropagation through time for the tanh Elman RNN with linear outputs and the loss
    ``L = sum_t ||W z_t - y_t||^2 / 2``: the backward recursion ``g_t = dl_t/dz_t + U^T (phi'(a_{t+1}) * g_{t+1})``
    and the summed gradients ``dL/dU = sum_t (phi'(a_t) * g_t) z_{t-1}^T`` etc. Returns L, dU, dV, dW."""
    X, U, V, W = _check_rnn(X, U, V, W)
    Y = check_matrix(Y, "Y", len(X), len(W))
    Z, Y_hat = elman_rnn(X, U, V, W)
    Z_prev = np.vstack([np.zeros(U.shape[0]), Z[:-1]])
    phi_prime = 1 - Z**2  # tanh'(a_t) = 1 - z_t^2
    error = Y_hat - Y  # dl_t / dy_hat_t
    G = np.zeros_like(Z)
    g_next = np.zeros(U.shape[0])  # phi'(a_{T+1}) * g_{T+1} = 0
    for t in reversed(range(len(X))):
        G[t] = W.T @ error[t] + U.T @ g_next
        g_next = phi_prime[t] * G[t]
    delta = phi_prime * G  # phi'(a_t) * g_t, one row per step
    return BPTTResult(float(0.5 * np.sum(error**2)), delta.T @ Z_prev, delta.T @ X, error.T @ Z)


# ----------------------------------------------------------------------------- 5.3 gated cells


class LSTMCell:
    """LSTM cell from the lecture's formulas, with x~ = [x_t, z_{t-1}]: gates ``f = sigma(F x~ + b_F)``,
    ``i = sigma(G x~ + b_G)``, ``o = sigma(H x~ + b_H)``; ``C_t = f * C_{t-1} + i * tanh(V x~ + b_V)``,
    ``z_t = o * tanh(C_t)``."""

    def __init__(self, n_in: int, n_hid: int, rng=None):
        rng = check_rng(rng)
        self.n_in, self.n_hid = check_int(n_in, "n_in", 1), check_int(n_hid, "n_hid", 1)
        bound = 1 / np.sqrt(n_hid)  # the initialisation of torch.nn.LSTM
        for name in "FGHV":
            setattr(self, name, rng.uniform(-bound, bound, (n_hid, n_in + n_hid)))
            setattr(self, f"b_{name}", rng.uniform(-bound, bound, n_hid))

    def forward(self, x, state=None) -> tuple[np.ndarray, np.ndarray]:
        """One step: (z_{t-1}, C_{t-1}) -> (z_t, C_t); state=None starts from zeros."""
        z, C = state if state is not None else (np.zeros(self.n_hid), np.zeros(self.n_hid))
        z, C = check_vector(z, "z", self.n_hid), check_vector(C, "C", self.n_hid)
        x_tilde = np.concatenate([check_vector(x, "x", self.n_in), z])
        f = sigmoid(self.F @ x_tilde + self.b_F)
        i = sigmoid(self.G @ x_tilde + self.b_G)
        o = sigmoid(self.H @ x_tilde + self.b_H)
        C = f * C + i * np.tanh(self.V @ x_tilde + self.b_V)
        return o * np.tanh(C), C

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


class GRUCell:
    """GRU cell in PyTorch's form, written with the lecture's update gate u (the weight of the new state):
    ``u = sigma(G [x, z] + b_G)``, ``r = sigma(H [x, z] + b_H)``,
    ``z~ = tanh(V_x x + b_x + r * (V_z z + b_z))``, ``z_t = (1 - u) * z_{t-1} + u * z~``."""

    def __init__(self, n_in: int, n_hid: int, rng=None):
        rng = check_rng(rng)
        self.n_in, self.n_hid = check_int(n_in, "n_in", 1), check_int(n_hid, "n_hid", 1)
        bound = 1 / np.sqrt(n_hid)
        self.G, self.H = (rng.uniform(-bound, bound, (n_hid, n_in + n_hid)) for _ in range(2))
        self.V_x, self.V_z = (
            rng.uniform(-bound, bound, (n_hid, n_in)),
            rng.uniform(-bound, bound, (n_hid, n_hid)),
        )
        self.b_G, self.b_H, self.b_x, self.b_z = (rng.uniform(-bound, bound, n_hid) for _ in range(4))

    def forward(self, x, z=None) -> np.ndarray:
        """One step z_{t-1} -> z_t; z=None starts from zeros."""
        z = np.zeros(self.n_hid) if z is None else check_vector(z, "z", self.n_hid)
        x = check_vector(x, "x", self.n_in)
        x_tilde = np.concatenate([x, z])
        u = sigmoid(self.G @ x_tilde + self.b_G)
        r = sigmoid(self.H @ x_tilde + self.b_H)
        z_new = np.tanh(self.V_x @ x + self.b_x + r * (self.V_z @ z + self.b_z))
        return (1 - u) * z + u * z_new

    def load_torch(self, gru) -> GRUCell:
        """Copy the weights of a one-layer ``torch.nn.GRU`` (row blocks r, z, n). Torch keeps z_torch * h, so the
        lecture's u = 1 - z_torch = sigma(-(...)): G and b_G are the negated z-block."""
        W_ih, W_hh = (to_numpy(w).astype(np.float64) for w in (gru.weight_ih_l0, gru.weight_hh_l0))
        if W_ih.shape != (3 * self.n_hid, self.n_in):
            raise ValueError(
                f"the GRU's weights {W_ih.shape} do not fit n_in={self.n_in}, n_hid={self.n_hid}"
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
    shift, rounds = 1, 0
    while shift < len(B):
        # element t composes with element t - shift, which was applied before it
        A_new, B_new = A.copy(), B.copy()
        A_new[shift:] = A[shift:] * A[:-shift]
        B_new[shift:] = A[shift:] * B[:-shift] + B[shift:]
        A, B, shift, rounds = A_new, B_new, 2 * shift, rounds + 1
    return ScanResult(B, rounds)


# ----------------------------------------------------------------------------- 5.6 CTC


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


def ctc_forward(Y, label: str, alphabet: str = "-ab") -> float:
    """The same probability by the forward (alpha) recursion over the blank-padded label
    l' = (-, l_1, -, l_2, ..., -): alpha_t(s) = (alpha_{t-1}(s) + alpha_{t-1}(s-1) [+ alpha_{t-1}(s-2) when
    l'_s is not a blank and differs from l'_{s-2}]) Y[t, l'_s]."""
    Y = _check_ctc(Y, label, alphabet)
    padded = [0]
    for symbol in label:
        padded += [alphabet.index(symbol), 0]
    alpha = np.zeros(len(padded))
    alpha[0] = Y[0, padded[0]]
    if len(padded) > 1:
        alpha[1] = Y[0, padded[1]]
    for t in range(1, len(Y)):
        previous = alpha.copy()
        for s in range(len(padded)):
            total = previous[s] + (previous[s - 1] if s >= 1 else 0.0)
            if s >= 2 and padded[s] != 0 and padded[s] != padded[s - 2]:
                total += previous[s - 2]
            alpha[s] = total * Y[t, padded[s]]
    return float(alpha[-1] + (alpha[-2] if len(padded) > 1 else 0.0))
