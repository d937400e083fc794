"""Chapter 05, sections 5.1 and 5.2 (notebooks 01_simple_rnns and 02_vanishing_gradients): the Elman RNN and
backpropagation through time, deep and bidirectional RNNs with PyTorch's weights; the spectral norm by power
iteration, the norms of the Jacobian products dz_T/dz_0 and their bound, and gradient clipping.

Conventions: a sequence is an array (T, n) with time first; states z_t (m,), z_0 = 0.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..activations import ACTIVATIONS, log_softmax, softmax
from ..training import to_numpy
from ..validation import check_array, check_choice, check_int, check_matrix, check_positive, check_rng

# ----------------------------------------------------------------------------- 5.1 Elman RNN and BPTT


def _check_rnn(X, U, V, W) -> tuple[np.ndarray, ...]:
    X = check_matrix(X, "X")  # (T, n)
    U = check_matrix(U, "U")
    m = len(U)
    U = check_matrix(U, "U", m, m)
    return X, U, check_matrix(V, "V", m, X.shape[1]), check_matrix(W, "W", None, m)


def _states(X, U, V, phi) -> np.ndarray:
    # the states z_1..z_T (T, m) of z_t = phi(U z_{t-1} + V x_t), z_0 = 0; the arrays are already checked
    Z = np.zeros((len(X), len(U)))
    z = np.zeros(len(U))
    for t, x in enumerate(X):
        z = phi(U @ z + V @ x)
        Z[t] = z
    return Z


class RNNRun(NamedTuple):
    Z: np.ndarray  # states z_1..z_T, (T, m)
    Y_hat: np.ndarray  # outputs, (T, k)


def elman_rnn(X, U, V, W, phi=np.tanh, psi=None) -> RNNRun:
    """States ``z_t = phi(U z_{t-1} + V x_t)`` (z_0 = 0) and outputs ``y_hat_t = psi(W z_t)`` of an Elman RNN
    for a sequence X (T, n); returns Z (T, m) and Y_hat (T, k). psi=None is the identity."""
    X, U, V, W = _check_rnn(X, U, V, W)
    Z = _states(X, U, V, phi)
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
        Z = _states(Z, U_l, V_l, phi)  # the states of layer l are the inputs of layer l + 1
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
    forward = _states(X, U, V, phi)
    backward = _states(X[::-1], U_rev, V_rev, phi)[::-1]  # run from t = T down to 1
    return BiRNNRun(forward, backward)


# ----------------------------------------------------------------------------- 5.2 vanishing and exploding gradients


class PowerIteration(NamedTuple):
    sigma: float  # the estimate of sigma_1(A) after the last iteration
    v: np.ndarray  # the last iterate, an estimate of the top right singular vector (n,)
    estimates: np.ndarray  # ||A v_k|| after k = 1..iters iterations
    iterates: np.ndarray  # v_k, (iters, n)


def power_iteration(A, iters: int = 100, rng=None) -> PowerIteration:
    """The spectral norm ``||A||_2 = max_{||x|| = 1} ||A x|| = sigma_1(A)`` by power iteration on ``A^T A``
    (its estimate is the field ``sigma``):
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
