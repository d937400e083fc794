"""Section 7.1 of chapter 07 (notebook 01_symmetry): permutations and their matrices, the invariance and
equivariance testers used throughout the chapter, and finite groups (the symmetric and cyclic groups, the
group axioms checked by brute force).

Conventions: a set or a graph's node features are an array X (M, F), one element / node per row; a permutation
matrix is P = I[pi], so (P X)[i] = X[pi[i]], and a graph A (M, M) is permuted as (P X, P A P^T).
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

import numpy as np
import torch

from ..training import to_numpy
from ..validation import check_array, check_callable, check_int, check_number, check_rng


class Permutation(NamedTuple):
    P: np.ndarray  # the permutation matrix (M, M), P[i, pi[i]] = 1
    pi: np.ndarray  # the permutation as an int array (M,): row i of P X is row pi[i] of X


def random_permutation(M: int, rng=None) -> Permutation:
    """A uniformly random permutation pi of ``range(M)``, different from the identity when M >= 2, and its
    matrix ``P = np.eye(M)[pi]``, i.e. :math:`P_{i,\\pi(i)} = 1`, so that ``(P @ X)[i] == X[pi[i]]`` and
    :math:`P^{-1} = P^\\top`."""
    M = check_int(M, "M", 1)
    rng = check_rng(rng)
    pi = rng.permutation(M)
    while M >= 2 and np.array_equal(pi, np.arange(M)):  # uniform over the M! - 1 others
        pi = rng.permutation(M)
    return Permutation(np.eye(M)[pi], pi)


def _as_data(X, name: str):
    """X as it is (a NumPy array or a torch tensor) after checking that it has a first axis of length >= 2."""
    if isinstance(X, torch.Tensor):
        shape = tuple(X.shape)
    elif isinstance(X, np.ndarray):
        shape = X.shape
    else:
        raise TypeError(f"{name} must be a NumPy array or a torch tensor, got {type(X).__name__}")
    if len(shape) == 0 or shape[0] < 2:
        raise ValueError(
            f"{name} must have shape (M, ...) with M >= 2 elements (rows) to permute, got {shape}"
        )
    return X


def _permute(X, pi: np.ndarray, both: bool = False):
    """P X (rows pi), or P X P^T when `both` (rows and columns pi), of the same type and dtype as X."""
    index = torch.as_tensor(pi, device=X.device) if isinstance(X, torch.Tensor) else pi
    out = X[index]
    return out[:, index] if both else out


def _as_float64(y) -> np.ndarray:
    if isinstance(y, torch.Tensor):
        y = to_numpy(y)
    return np.asarray(y, dtype=np.float64)


def _symmetry_test(f, X, A, n, rng, atol, equivariant: bool) -> bool:
    f = check_callable(f, "f")
    X = _as_data(X, "X")
    M = X.shape[0]
    if A is not None:
        A = _as_data(A, "A")
        if tuple(A.shape) != (M, M):
            raise ValueError(
                f"A must have shape ({M}, {M}) (one row and column per row of X), got {tuple(A.shape)}"
            )
    n = check_int(n, "n", 1)
    rng = check_rng(rng)
    atol = check_number(atol, "atol", 0)

    def apply(X_, A_):
        return _as_float64(f(X_) if A_ is None else f(X_, A_))

    y = apply(X, A)
    if equivariant and (y.ndim == 0 or y.shape[0] != M):
        raise ValueError(
            f"f must return one row per element (shape ({M}, ...)) to be equivariant, got {y.shape}"
        )
    for _ in range(n):
        pi = random_permutation(M, rng).pi
        y_perm = apply(_permute(X, pi), None if A is None else _permute(A, pi, both=True))
        target = y[pi] if equivariant else y
        if y_perm.shape != target.shape or not np.allclose(y_perm, target, rtol=0, atol=atol):
            return False
    return True


def check_invariant(f, X, A=None, *, n: int = 10, rng=None, atol: float = 1e-10) -> bool:
    """Whether f is permutation-invariant at X: :math:`f(PX) = f(X)` for `n` random :math:`P \\neq I`, or, with a
    graph A, :math:`f(PX, PAP^\\top) = f(X, A)`.

    X (M, ...) and A (M, M) may be NumPy arrays or torch tensors; the permuted copies have the same type and
    dtype. The outputs are compared as float64 arrays with ``np.allclose(..., rtol=0, atol=atol)``: use
    ``atol=1e-10`` in float64 and about ``1e-5`` (times the output's scale) in float32, where a permutation
    changes the order of summation.
    """
    return _symmetry_test(f, X, A, n, rng, atol, equivariant=False)


def check_equivariant(f, X, A=None, *, n: int = 10, rng=None, atol: float = 1e-10) -> bool:
    """Whether f is permutation-equivariant at X: :math:`f(PX) = P f(X)` for `n` random :math:`P \\neq I`, or, with
    a graph A, :math:`f(PX, PAP^\\top) = P f(X, A)`; f must return one row per element (per node).

    Types, dtypes and tolerance as in `check_invariant`.
    """
    return _symmetry_test(f, X, A, n, rng, atol, equivariant=True)


def permutation_group(M: int) -> np.ndarray:
    """The symmetric group :math:`S_M` as its M! permutation matrices ``np.eye(M)[pi]``, an array (M!, M, M), the
    permutations pi in lexicographic order (the identity first)."""
    M = check_int(M, "M", 1, 7)
    return np.stack([np.eye(M)[list(pi)] for pi in itertools.permutations(range(M))])


def cyclic_shifts(M: int) -> np.ndarray:
    """The cyclic group :math:`C_M` as M permutation matrices (M, M, M): shift s sends row i to row (i + s) mod M,
    ``pi = (arange(M) + s) % M``."""
    M = check_int(M, "M", 1)
    return np.stack([np.eye(M)[(np.arange(M) + s) % M] for s in range(M)])


class GroupAxioms(NamedTuple):
    closure: bool  # g h is in G for all g, h
    associativity: bool  # (g h) k = g (h k)
    identity: bool  # some e in G with e g = g e = g for all g
    inverses: bool  # every g has an h in G with g h = h g = e
    abelian: bool  # g h = h g for all g, h (not an axiom: a property some groups have)


def group_axioms(elements, atol: float = 1e-12) -> GroupAxioms:
    """Check the group axioms for a finite set of square matrices under matrix multiplication by brute force
    over all pairs and triples: closure, associativity, an identity e and inverses :math:`g^{-1}`, and whether
    the group is abelian (:math:`gh = hg`). `elements` is an array (n, d, d) of distinct matrices."""
    G = check_array(elements, "elements", ndim=3)
    if G.shape[1] != G.shape[2]:
        raise ValueError(f"elements must be square matrices, an array (n, d, d), got shape {G.shape}")
    atol = check_number(atol, "atol", 0)
    n = len(G)
    flat = G.reshape(n, -1)

    def index_of(Y):  # index of each matrix of Y (..., d, d) in G, or -1
        dist = np.abs(Y.reshape(-1, 1, flat.shape[1]) - flat[None]).max(axis=2)
        found = dist.min(axis=1) <= atol
        return np.where(found, dist.argmin(axis=1), -1).reshape(Y.shape[:-2])

    products = np.einsum("gij,hjk->ghik", G, G)  # products[g, h] = G[g] @ G[h]
    table = index_of(products)
    closure = bool((table >= 0).all())
    left = np.einsum("ghij,kjl->ghkil", products, G)  # (g h) k
    right = np.einsum("gij,hkjl->ghkil", G, products)  # g (h k)
    associativity = bool(np.allclose(left, right, rtol=0, atol=atol))
    is_identity = [
        np.allclose(products[e], G, rtol=0, atol=atol) and np.allclose(products[:, e], G, rtol=0, atol=atol)
        for e in range(n)
    ]
    identity = any(is_identity)
    inverses = False
    if identity:
        e = is_identity.index(True)
        inverses = bool(((table == e) & (table.T == e)).any(axis=1).all())
    abelian = bool(np.allclose(products, products.transpose(1, 0, 2, 3), rtol=0, atol=atol))
    return GroupAxioms(closure, associativity, identity, inverses, abelian)
