"""Section 8.1 (notebook 01_initialisation): initialisation schemes (LeCun, Glorot, He, orthogonal, PyTorch's
default), Haar-random orthogonal matrices, and the forward and backward statistics of a deep network at
initialisation.
"""

from __future__ import annotations

import math
import numbers
from typing import NamedTuple

import numpy as np

from ..validation import (
    check_choice,
    check_int,
    check_matrix,
    check_number,
    check_positive,
    check_rng,
)

INIT_SCHEMES = ("lecun", "glorot", "he", "orthogonal", "torch_default")
INIT_DISTS = ("normal", "uniform")
DEPTH_ACTIVATIONS = ("linear", "tanh", "relu")


def init_std(n: int, m: int, scheme: str = "lecun", gain: float = 1.0) -> float:
    """The standard deviation sigma of the initial weights of a layer W (m, n) with fan-in n, fan-out m.

    LeCun sigma^2 = 1/n (keeps the forward variance of a linear layer), Glorot/Xavier sigma^2 = 2/(n + m)
    (between the forward 1/n and the backward 1/m), He/Kaiming sigma^2 = 2/n (ReLU halves the second moment),
    ``"torch_default"`` sigma^2 = 1/(3n), the variance of U[-1/sqrt(n), 1/sqrt(n)] that ``nn.Linear`` draws
    (``kaiming_uniform_(a=sqrt(5))``; not LeCun), ``"orthogonal"`` sigma^2 = 1/max(n, m), the variance of one
    entry of a matrix with orthonormal columns or rows (1/n for a square Q (n, n)). `gain` multiplies sigma.
    """
    n = check_int(n, "n", 1)
    m = check_int(m, "m", 1)
    scheme = check_choice(scheme, "scheme", INIT_SCHEMES)
    gain = check_positive(gain, "gain")
    variance = {"lecun": 1 / n, "glorot": 2 / (n + m), "he": 2 / n, "orthogonal": 1 / max(n, m)}.get(
        scheme, 1 / (3 * n)
    )
    return gain * math.sqrt(variance)


def fixed_init(shape, sigma: float, dist: str = "normal", rng=None) -> np.ndarray:
    """Weights of the given shape with variance sigma^2: N(0, sigma^2) or U[-sqrt(3) sigma, sqrt(3) sigma]
    (a uniform U[-b, b] has variance b^2/3, so both have the same variance)."""
    if isinstance(shape, numbers.Integral):
        shape = (shape,)
    if not isinstance(shape, tuple | list) or not all(
        isinstance(k, numbers.Integral) and not isinstance(k, bool) and k >= 1 for k in shape
    ):
        raise ValueError(f"shape must be a tuple of ints >= 1, got {shape!r}")
    sigma = check_number(sigma, "sigma", 0)
    dist = check_choice(dist, "dist", INIT_DISTS)
    rng = check_rng(rng)
    if dist == "normal":
        return sigma * rng.standard_normal(tuple(shape))
    bound = math.sqrt(3) * sigma
    return rng.uniform(-bound, bound, size=tuple(shape))


def haar_orthogonal(n: int, m: int | None = None, rng=None) -> np.ndarray:
    """A random matrix Q (m, n) with orthonormal columns (m >= n) or rows (m < n), Haar-distributed: the QR
    decomposition of a Gaussian matrix, with the signs of diag(R) moved into Q. Without that fix Q is not
    uniformly distributed: numpy's (LAPACK's Householder) QR gives R_11 the sign opposite to the matrix's
    first entry, so Q_11 = a_11 / R_11 < 0 in every draw, and the other columns carry similar sign conventions
    (diag(R) itself is negative about half of the time)."""
    n = check_int(n, "n", 1)
    m = n if m is None else check_int(m, "m", 1)
    rng = check_rng(rng)
    big, small = max(n, m), min(n, m)
    q, r = np.linalg.qr(rng.standard_normal((big, small)))
    q = q * np.where(np.diag(r) < 0, -1.0, 1.0)
    return q if m >= n else q.T


def init_weights(n: int, m: int, scheme: str = "lecun", dist: str = "normal", gain: float = 1.0, rng=None):
    """Initial weights W (m, n) (fan-out m, fan-in n, as ``nn.Linear(n, m).weight``); biases start at 0.

    ``scheme`` picks the variance (see `init_std`: ``"lecun"`` 1/n, ``"glorot"`` 2/(n + m), ``"he"`` 2/n,
    ``"torch_default"`` 1/(3n)), ``dist`` the distribution with that variance (``"normal"`` N(0, sigma^2),
    ``"uniform"`` U[-sqrt(3) sigma, sqrt(3) sigma]), `gain` multiplies sigma. ``"orthogonal"`` returns
    W = gain * Q with Q Haar-random orthogonal (`haar_orthogonal`), so W^T W = gain^2 I when m >= n (``dist``
    is ignored). Equal in distribution to ``torch.nn.init``'s ``kaiming_normal_(w, nonlinearity="linear")``
    (LeCun), ``xavier_normal_``/``xavier_uniform_`` (Glorot), ``kaiming_normal_(w, nonlinearity="relu")``
    (He), ``orthogonal_(w, gain)``.
    """
    sigma = init_std(n, m, scheme, gain)
    dist = check_choice(dist, "dist", INIT_DISTS)
    rng = check_rng(rng)
    if scheme == "orthogonal":
        return gain * haar_orthogonal(n, m, rng)
    return fixed_init((m, n), sigma, dist, rng)


def _activate(a: np.ndarray, activation: str) -> tuple[np.ndarray, np.ndarray]:
    """phi(a) and phi'(a) for the activations of the depth experiment."""
    if activation == "linear":
        return a, np.ones_like(a)
    if activation == "tanh":
        h = np.tanh(a)
        return h, 1 - h**2
    return np.maximum(a, 0), (a > 0).astype(a.dtype)


class DepthStats(NamedTuple):
    forward: np.ndarray  # (depth,) RMS of the pre-activations a_l of layers l = 1..depth
    backward: np.ndarray  # (depth,) RMS of the gradients dE/da_l, back-propagated from a random dE/da_depth


def propagate_stats(
    x,
    depth: int,
    *,
    scheme: str = "lecun",
    dist: str = "normal",
    activation: str = "linear",
    gain: float = 1.0,
    rng=None,
) -> DepthStats:
    """Forward and backward statistics of a deep network of constant width d at initialisation.

    x (B, d) goes through ``depth`` layers a_l = W_l h_{l-1}, h_l = phi(a_l) (h_0 = x, no biases), with
    W_l (d, d) from `init_weights` (``scheme``, ``dist``, ``gain``). Backward, a random unit-variance gradient
    G = dE/da_depth (B, d) is propagated by dE/da_{l-1} = (dE/da_l W_l) * phi'(a_{l-1}). Returns the RMS
    sqrt(mean(a_l^2)) of every layer's pre-activations and of their gradients. The random draws are the
    weights W_1, ..., W_depth in order, then G.
    """
    x = check_matrix(x, "x")
    depth = check_int(depth, "depth", 1)
    activation = check_choice(activation, "activation", DEPTH_ACTIVATIONS)
    rng = check_rng(rng)
    d = x.shape[1]
    weights = [init_weights(d, d, scheme, dist, gain=gain, rng=rng) for _ in range(depth)]
    grad = rng.standard_normal(x.shape)
    pre, derivatives, h = [], [], x
    for W in weights:
        a = h @ W.T
        h, derivative = _activate(a, activation)
        pre.append(a)
        derivatives.append(derivative)
    backward = np.empty(depth)
    for layer in range(depth - 1, -1, -1):
        backward[layer] = np.sqrt(np.mean(grad**2))
        if layer > 0:
            grad = (grad @ weights[layer]) * derivatives[layer - 1]
    forward = np.array([np.sqrt(np.mean(a**2)) for a in pre])
    return DepthStats(forward, backward)
