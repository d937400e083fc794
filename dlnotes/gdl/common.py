"""Chapter 07's shared tools: the one validation of a graph's adjacency matrix and of a symmetric graph matrix,
used by 7.3 message passing and GCN (`graphs`, notebook 04), 7.3–7.4 depth and attention (`depth_wl`, notebook
05) and 7.5 spectral graph theory (`spectral`, notebook 06).

A graph is a symmetric adjacency matrix A (M, M) with zero diagonal (float64): ``a_mn > 0`` (1 for an
unweighted graph, the edge's weight otherwise) when m and n are joined by an edge.
"""

from __future__ import annotations

import numpy as np

from ..validation import check_matrix


def check_adjacency(A, name: str = "A", M: int | None = None, *, weighted: bool = False) -> np.ndarray:
    """The adjacency matrix A (M, M) of an undirected graph without self-loops, as float64, after checking it:
    square (M rows and columns when M is given), :math:`A = A^\\top` (to 1e-12), :math:`a_{mm} = 0`, and
    :math:`a_{mn} \\in \\{0, 1\\}`, or with ``weighted=True`` any edge weights :math:`a_{mn} \\ge 0`."""
    A = check_matrix(A, name, M, M)
    if A.shape[0] != A.shape[1]:
        raise ValueError(f"{name} must be a square adjacency matrix (M, M), got shape {A.shape}")
    if not weighted and not np.isin(A, (0.0, 1.0)).all():
        raise ValueError(f"{name} must hold only 0 and 1 (an unweighted graph), got {np.unique(A)[:5]}")
    if (A < 0).any():
        raise ValueError(f"{name} must have non-negative entries (edge weights), got minimum {A.min():.3g}")
    if not np.allclose(A, A.T, rtol=0, atol=1e-12):
        gap = np.abs(A - A.T).max()
        raise ValueError(f"{name} must be symmetric (an undirected graph), got max |A - A^T| = {gap:.3g}")
    if np.diag(A).any():
        raise ValueError(
            f"{name} must have a zero diagonal (no self-loops), got diagonal {np.diag(A)[:5]}..."
        )
    return A


def check_nodes(idx, name: str, M: int) -> np.ndarray:
    """Node indices (k,) as int64 after checking them: a non-empty 1-D array of whole numbers in 0..M-1 (a graph
    with M nodes)."""
    idx = np.asarray(idx)
    if idx.dtype == bool or not np.issubdtype(idx.dtype, np.integer):
        raise TypeError(f"{name} must hold integer node indices, got dtype {idx.dtype}")
    if idx.ndim != 1 or idx.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array of node indices, got shape {idx.shape}")
    if ((idx < 0) | (idx >= M)).any():
        raise ValueError(f"{name} must hold node indices in 0..{M - 1}, got {idx.min()}..{idx.max()}")
    return idx.astype(np.int64)


def check_symmetric(L, name: str = "L") -> np.ndarray:
    """A symmetric matrix L (M, M) of a graph (a Laplacian, the GCN matrix A_bar) as float64, made exactly
    symmetric, :math:`(L + L^\\top) / 2`, after checking that it is square and :math:`L = L^\\top` to 1e-10."""
    L = check_matrix(L, name)
    if L.shape[0] != L.shape[1]:
        raise ValueError(f"{name} must be a square matrix (M, M), got shape {L.shape}")
    if not np.allclose(L, L.T, rtol=0, atol=1e-10):
        gap = np.abs(L - L.T).max()
        raise ValueError(
            f"{name} must be symmetric (an undirected graph), got max |{name} - {name}^T| = {gap:.3g}"
        )
    return (L + L.T) / 2
