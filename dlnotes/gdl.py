"""Chapter 07 — geometric deep learning: groups and permutations, invariance and equivariance testers, Deep Sets
and PointNet, graph data, message passing, the GCN and GAT layers, oversmoothing, Weisfeiler-Lehman colour
refinement, graph Laplacians, the graph Fourier transform and spectral, polynomial and Chebyshev filters.

Conventions: a set or a graph's node features are an array X (M, F), one element / node per row; a graph is a
symmetric adjacency matrix A (M, M) with zero diagonal (float64); a permutation matrix is P = I[pi], so
(P X)[i] = X[pi[i]], and a graph is permuted as (P X, P A P^T).
"""

from __future__ import annotations

# ----------------------------------------------------------------------------- 7.1 symmetry


# ----------------------------------------------------------------------------- 7.2 Deep Sets


# ----------------------------------------------------------------------------- 7.2 PointNet


# ----------------------------------------------------------------------------- 7.3 message passing and GCN


# ----------------------------------------------------------------------------- 7.3 depth, attention; 7.4 Weisfeiler-Lehman


# ----------------------------------------------------------------------------- 7.5 spectral graph theory
