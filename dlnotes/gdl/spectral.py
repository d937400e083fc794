"""Section 7.5 of chapter 07 (notebook 06_spectral): spectral graph theory and graph filters. The graph
Laplacian and its normalised form, the graph Fourier transform, spectral filters g(L) (low-pass, high-pass,
heat kernel), polynomial filters and convolutions, and ChebNet's Chebyshev filters.

A graph is a symmetric (weighted) adjacency matrix A (M, M) with zero diagonal; a signal on it is x (M,),
several signals are the columns of X (M, F).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from ..validation import (
    check_array,
    check_callable,
    check_choice,
    check_int,
    check_matrix,
    check_number,
    check_positive,
    check_vector,
)
from .common import check_adjacency, check_symmetric


def laplacian(A, normalized: bool = False) -> np.ndarray:
    """The graph Laplacian L = D - A or, with ``normalized=True``, L~ = D^{-1/2} (D - A) D^{-1/2}.

    A is a symmetric (weighted) adjacency matrix (M, M) with zero diagonal, D = diag(d_m), d_m = sum_n A_mn.
    L is symmetric positive semi-definite, L 1 = 0, and x^T L x = sum over edges {m, n} of A_mn (x_m - x_n)^2.
    Without isolated nodes L~ = I - D^{-1/2} A D^{-1/2}, with spectrum in [0, 2]. An isolated node (d_m = 0)
    gets (D^{-1/2})_mm = 0, as in networkx: its row and column of L~ are 0 (one more zero eigenvalue), where
    I - D^{-1/2} A D^{-1/2} would put a 1 on the diagonal.
    """
    A = check_adjacency(A, weighted=True)
    if not isinstance(normalized, (bool, np.bool_)):
        raise TypeError(f"normalized must be a bool, got {normalized!r}")
    d = A.sum(axis=1)
    if not normalized:
        return np.diag(d) - A
    inv_sqrt = np.zeros_like(d)
    inv_sqrt[d > 0] = 1.0 / np.sqrt(d[d > 0])
    return inv_sqrt[:, None] * (np.diag(d) - A) * inv_sqrt[None, :]


class GraphSpectrum(NamedTuple):
    lam: np.ndarray  # (M,) eigenvalues (graph frequencies), ascending
    U: np.ndarray  # (M, M) orthonormal eigenvectors as columns: U[:, k] belongs to lam[k]


def graph_fourier(L) -> GraphSpectrum:
    """The graph Fourier basis: L = U diag(lam) U^T with lam ascending (low to high frequency).

    The graph Fourier transform of a signal x (M,) is x^ = U^T x, its inverse x = U x^. Each eigenvector is
    defined only up to sign (and, for a repeated eigenvalue, up to a rotation within its eigenspace); for
    reproducible figures the sign is fixed so that the entry of largest magnitude is positive.
    """
    lam, U = np.linalg.eigh(check_symmetric(L, "L"))
    biggest = U[np.abs(U).argmax(axis=0), np.arange(U.shape[1])]
    return GraphSpectrum(lam, U * np.where(biggest < 0, -1.0, 1.0))


def spectral_filter(L, g: Callable) -> np.ndarray:
    """The spectral filter g(L) = U g(Lambda) U^T (M, M) of a symmetric L = U Lambda U^T.

    `g` maps the array of eigenvalues (M,) to the filter's response (M,), e.g. ``lambda lam: np.exp(-s * lam)``.
    The matrix depends only on the values of g on the spectrum, not on the eigenvectors chosen (signs, bases of
    repeated eigenspaces). It needs the O(M^3) eigendecomposition and is dense (not localised) in general.
    """
    lam, U = graph_fourier(L)
    check_callable(g, "g")
    response = check_vector(np.asarray(g(lam), dtype=float), "g(lam)", len(lam))
    return (U * response) @ U.T


FILTERS = ("low-pass", "high-pass", "heat kernel")


def filter_response(lam, kind: str = "heat kernel", s: float = 1.0) -> np.ndarray:
    """The response g(lam) of three spectral filters with strength s >= 0:

    "low-pass"    g = 1 / (1 + s lam)      (Tikhonov: g(L) y = argmin_x |x - y|^2 + s x^T L x = (I + s L)^{-1} y)
    "high-pass"   g = s lam / (1 + s lam)  (what the low-pass removes: the two add up to the identity)
    "heat kernel" g = exp(-s lam)          (g(L) = e^{-sL}, heat diffusion on the graph for a time s)
    """
    lam = check_array(lam, "lam", ndim=1)
    check_choice(kind, "kind", FILTERS)
    s = check_number(s, "s", 0)
    if kind == "heat kernel":
        return np.exp(-s * lam)
    low = 1.0 / (1.0 + s * lam)
    return low if kind == "low-pass" else 1.0 - low


def poly_filter(L, alphas) -> np.ndarray:
    """The polynomial filter sum_{k=0}^{K} alpha_k L^k = U (sum_k alpha_k Lambda^k) U^T, without an
    eigendecomposition. It is K-hop localised: its entry (i, j) is 0 when dist(i, j) > K."""
    L = check_symmetric(L, "L")
    alphas = check_vector(alphas, "alphas")
    out, power = np.zeros_like(L), np.eye(len(L))
    for k, alpha in enumerate(alphas):
        if k:
            power = power @ L
        out += alpha * power
    return out


def poly_conv(X, L, alphas, b=None) -> np.ndarray:
    """A polynomial graph convolution layer (no non-linearity) on signals X (M, F_in):

    out[:, i] = sum_j p_ij(L) X[:, j] + b_i,  p_ij(L) = sum_{k=0}^{K} alphas[k, j, i] L^k,

    one polynomial per pair of input channel j and output channel i; alphas (K + 1, F_in, F_out), b (F_out,).
    Computed as sum_k (L^k X) alphas[k] + b, with K products L (L^{k-1} X) (no power of L is formed).
    """
    X = check_matrix(X, "X")
    M, F_in = X.shape
    L = check_symmetric(L, "L")
    if L.shape != (M, M):
        raise ValueError(f"L must have shape ({M}, {M}) (one row and column per node of X), got {L.shape}")
    alphas = check_array(alphas, "alphas", (None, F_in, None))
    b = np.zeros(alphas.shape[2]) if b is None else check_vector(b, "b", alphas.shape[2])
    out, Z = np.zeros((M, alphas.shape[2])), X
    for k in range(len(alphas)):
        if k:
            Z = L @ Z
        out += Z @ alphas[k]
    return out + b


def rescaled_laplacian(L, lam_max: float | None = None) -> np.ndarray:
    """L^ = 2 L / lam_max - I, whose spectrum lies in [-1, 1] (lam_max: the largest eigenvalue of L, computed
    when None; for the normalised Laplacian ChebNet often uses the bound lam_max = 2)."""
    L = check_symmetric(L, "L")
    lam_max = float(np.linalg.eigvalsh(L)[-1]) if lam_max is None else check_positive(lam_max, "lam_max")
    if lam_max <= 0:
        raise ValueError("L must have a positive largest eigenvalue (a graph with at least one edge)")
    return 2.0 * L / lam_max - np.eye(len(L))


def chebyshev_polynomials(L_hat, K: int) -> list[np.ndarray]:
    """[T_0(L^), ..., T_K(L^)] by the recursion T_0 = I, T_1 = L^, T_k = 2 L^ T_{k-1} - T_{k-2}."""
    L_hat = check_symmetric(L_hat, "L_hat")
    K = check_int(K, "K", 0)
    T = [np.eye(len(L_hat)), L_hat]
    for _ in range(2, K + 1):
        T.append(2.0 * L_hat @ T[-1] - T[-2])
    return T[: K + 1]


def chebyshev_filter(L, thetas, lam_max: float | None = None) -> np.ndarray:
    """ChebNet's filter sum_{k=0}^{K} theta_k T_k(L^) with L^ = 2 L / lam_max - I (spectrum in [-1, 1]),
    K = len(thetas) - 1: strictly K-hop localised, no eigendecomposition (except for lam_max=None)."""
    thetas = check_vector(thetas, "thetas")
    T = chebyshev_polynomials(rescaled_laplacian(L, lam_max), len(thetas) - 1)
    return sum(theta * T_k for theta, T_k in zip(thetas, T, strict=True))
