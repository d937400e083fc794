"""Chapter 05, section 5.4 (notebook 04_linear_recurrences): linear recurrences ``z_t = a_t z_{t-1} + b_t`` by a
loop and by parallel scans, linear state-space models and their convolution kernels, the LRU's eigenvalue
parametrisation and ring initialisation, the linear GRU, the recall task, and the `LRULayer`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from ..activations import sigmoid
from ..validation import check_array, check_int, check_matrix, check_number, check_rng


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
    ``z_t = sum_{s=1}^t K_{t-s} x_s`` (K already holds B; section 5.4)."""
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
    r_max well below 1 where that matters. Unlike Orvieto et al.'s LRU there is no skip term ``D x_t`` in the
    output: here the input reaches the readout only through the states."""

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
        """The complex input matrix B~ = B_re + i B_im (m, n_in), before the normalisation by gamma."""
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
