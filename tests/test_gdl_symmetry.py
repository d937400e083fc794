"""Tests of chapter 07, section 7.1 (groups, permutations, the invariance and equivariance testers)."""

import itertools
import math

import networkx as nx
import numpy as np
import pytest
import torch

from dlnotes import gdl

from conftest import bad_input_test

# ----------------------------------------------------------------------------- permutations


@pytest.mark.parametrize("M", [2, 3, 5, 8])
def test_random_permutation_convention_and_not_identity(M):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(M, 3))
    for _ in range(30):
        P, pi = gdl.random_permutation(M, rng)
        assert sorted(pi.tolist()) == list(range(M)) and not np.array_equal(pi, np.arange(M))
        assert np.array_equal(P @ X, X[pi])  # (P X)[i] = X[pi[i]]
        assert all(P[i, pi[i]] == 1 for i in range(M)) and P.sum() == M
        assert np.array_equal(P @ P.T, np.eye(M))


def test_random_permutation_is_uniform_over_the_non_identity_ones():
    rng = np.random.default_rng(1)
    counts = {}
    for _ in range(5000):
        key = tuple(gdl.random_permutation(3, rng).pi.tolist())
        counts[key] = counts.get(key, 0) + 1
    assert len(counts) == 5 and (0, 1, 2) not in counts  # 3! - 1 permutations
    assert all(abs(c / 5000 - 0.2) < 0.03 for c in counts.values())
    assert np.array_equal(gdl.random_permutation(1).P, np.eye(1))


# ----------------------------------------------------------------------------- testers on sets

X64 = np.random.default_rng(2).normal(size=(7, 4))
W = np.random.default_rng(3).normal(size=(7, 4))


@pytest.mark.parametrize("pool", [np.sum, np.mean, np.max])
def test_pooling_is_invariant_not_equivariant(pool):
    assert gdl.check_invariant(lambda X: pool(X, axis=0), X64, rng=0)
    assert not gdl.check_invariant(lambda X: (W * X).sum(0), X64, rng=0)  # position-weighted sum


def test_elementwise_map_is_equivariant_position_map_is_not():
    assert gdl.check_equivariant(lambda X: np.tanh(X @ W[:4].T), X64, rng=0)
    assert not gdl.check_equivariant(lambda X: W * X, X64, rng=0)
    assert not gdl.check_invariant(np.tanh, X64, rng=0)  # equivariant, not invariant
    # f(X) = X[::-1] is equivariant only for palindromic permutations: fails with random P
    assert not gdl.check_equivariant(lambda X: X[::-1], X64, rng=0)


def test_torch_inputs_keep_type_and_dtype():
    seen = []

    def f(X):
        seen.append((type(X), X.dtype))
        return X.sum(0)

    X32 = torch.tensor(X64, dtype=torch.float32)
    assert gdl.check_invariant(f, X32, n=3, rng=0, atol=1e-5)
    assert all(t is torch.Tensor and d == torch.float32 for t, d in seen)
    seen.clear()
    assert gdl.check_invariant(f, X64.astype(np.float32), n=3, rng=0, atol=1e-5)
    assert all(t is np.ndarray and d == np.float32 for t, d in seen)
    layer = torch.nn.Linear(4, 3)  # outputs that require grad are fine
    assert gdl.check_equivariant(layer, X32, rng=0, atol=1e-6)
    assert isinstance(gdl.check_equivariant(layer, X32, rng=0, atol=1e-6), bool)


def test_tolerance_matters():
    noise = np.random.default_rng(4)

    def f(X):
        return X.sum(0) + 1e-8 * noise.normal()

    assert not gdl.check_invariant(f, X64, rng=0)
    assert gdl.check_invariant(f, X64, rng=0, atol=1e-6)


# ----------------------------------------------------------------------------- testers on graphs


def test_graph_testers_against_brute_force_permutations():
    G = nx.karate_club_graph()
    A = nx.to_numpy_array(G, weight=None)
    X = np.random.default_rng(5).normal(size=(34, 3))
    A_bar = A + np.eye(34)

    def layer(X, A):  # a mean over the node and its neighbours: equivariant
        A1 = A + np.eye(len(A))
        return A1 @ X / A1.sum(1, keepdims=True)

    assert gdl.check_equivariant(layer, X, A, rng=0)
    assert gdl.check_invariant(lambda X, A: layer(X, A).sum(0), X, A, rng=0)
    # using a fixed A (ignoring the permuted graph) breaks equivariance
    assert not gdl.check_equivariant(lambda X, A: A_bar @ X, X, A, rng=0)
    # the permuted graph is P A P^T: compare with the explicit matrix product
    seen = []
    gdl.check_invariant(lambda X_, A_: seen.append((X_, A_)) or 0.0, X, A, n=1, rng=7)
    pi = gdl.random_permutation(34, np.random.default_rng(7)).pi
    P = np.eye(34)[pi]
    assert np.array_equal(seen[1][0], P @ X) and np.array_equal(seen[1][1], P @ A @ P.T)
    At = torch.tensor(A)
    Xt = torch.tensor(X)
    assert gdl.check_equivariant(lambda X, A: (A + torch.eye(34, dtype=A.dtype)) @ X, Xt, At, rng=0)


def test_all_permutations_of_three_brute_force():
    X = np.random.default_rng(6).normal(size=(3, 2))
    for pi in itertools.permutations(range(3)):
        P = np.eye(3)[list(pi)]
        assert np.allclose(np.tanh(P @ X), P @ np.tanh(X))
    assert math.factorial(3) == len(list(itertools.permutations(range(3))))


# ----------------------------------------------------------------------------- bad input

BAD_INPUT = [  # (call, error, message)
    (lambda: gdl.random_permutation(0), ValueError, "M must be an int"),
    (lambda: gdl.random_permutation(2.0), TypeError, "M must be an int"),
    (lambda: gdl.random_permutation(3, rng="a"), TypeError, "rng must be"),
    (lambda: gdl.check_invariant("sum", X64), TypeError, "f must be callable"),
    (lambda: gdl.check_invariant(np.sum, [1, 2, 3]), TypeError, "X must be a NumPy array or a torch tensor"),
    (lambda: gdl.check_invariant(np.sum, np.ones((1, 3))), ValueError, "M >= 2"),
    (
        lambda: gdl.check_invariant(np.sum, np.ones((3, 2)), np.ones((4, 4))),
        ValueError,
        r"A must have shape (3, 3)",
    ),
    (lambda: gdl.check_invariant(np.sum, X64, n=0), ValueError, "n must be an int"),
    (lambda: gdl.check_invariant(np.sum, X64, atol=-1.0), ValueError, "atol"),
    (lambda: gdl.check_equivariant(np.sum, X64), ValueError, "one row per element"),
]


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
