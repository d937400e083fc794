"""Tests of chapter 07, section 7.1 (permutations, the invariance and equivariance testers, groups)."""

import itertools
import math

import networkx as nx
import numpy as np
import pytest
import torch

from dlnotes.gdl.symmetry import (
    check_equivariant,
    check_invariant,
    cyclic_shifts,
    group_axioms,
    permutation_group,
    random_permutation,
)

from conftest import bad_input_test

# ----------------------------------------------------------------------------- permutations


@pytest.mark.parametrize("M", [2, 3, 5, 8])
def test_random_permutation_convention_and_not_identity(M):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(M, 3))
    for _ in range(30):
        P, pi = random_permutation(M, rng)
        assert sorted(pi.tolist()) == list(range(M)) and not np.array_equal(pi, np.arange(M))
        assert np.array_equal(P @ X, X[pi])  # (P X)[i] = X[pi[i]]
        assert all(P[i, pi[i]] == 1 for i in range(M)) and P.sum() == M
        assert np.array_equal(P @ P.T, np.eye(M))


def test_random_permutation_is_uniform_over_the_non_identity_ones():
    rng = np.random.default_rng(1)
    counts = {}
    for _ in range(5000):
        key = tuple(random_permutation(3, rng).pi.tolist())
        counts[key] = counts.get(key, 0) + 1
    assert len(counts) == 5 and (0, 1, 2) not in counts  # 3! - 1 permutations
    assert all(abs(c / 5000 - 0.2) < 0.03 for c in counts.values())
    assert np.array_equal(random_permutation(1).P, np.eye(1))


# ----------------------------------------------------------------------------- testers on sets

X64 = np.random.default_rng(2).normal(size=(7, 4))
W = np.random.default_rng(3).normal(size=(7, 4))


@pytest.mark.parametrize("pool", [np.sum, np.mean, np.max])
def test_pooling_is_invariant_not_equivariant(pool):
    assert check_invariant(lambda X: pool(X, axis=0), X64, rng=0)
    assert not check_invariant(lambda X: (W * X).sum(0), X64, rng=0)  # position-weighted sum


def test_elementwise_map_is_equivariant_position_map_is_not():
    assert check_equivariant(lambda X: np.tanh(X @ W[:4].T), X64, rng=0)
    assert not check_equivariant(lambda X: W * X, X64, rng=0)
    assert not check_invariant(np.tanh, X64, rng=0)  # equivariant, not invariant
    # f(X) = X[::-1] is equivariant only for palindromic permutations: fails with random P
    assert not check_equivariant(lambda X: X[::-1], X64, rng=0)


def test_torch_inputs_keep_type_and_dtype():
    seen = []

    def f(X):
        seen.append((type(X), X.dtype))
        return X.sum(0)

    X32 = torch.tensor(X64, dtype=torch.float32)
    assert check_invariant(f, X32, n=3, rng=0, atol=1e-5)
    assert all(t is torch.Tensor and d == torch.float32 for t, d in seen)
    seen.clear()
    assert check_invariant(f, X64.astype(np.float32), n=3, rng=0, atol=1e-5)
    assert all(t is np.ndarray and d == np.float32 for t, d in seen)
    layer = torch.nn.Linear(4, 3)  # outputs that require grad are fine
    assert check_equivariant(layer, X32, rng=0, atol=1e-6)
    assert isinstance(check_equivariant(layer, X32, rng=0, atol=1e-6), bool)


def test_tolerance_matters():
    noise = np.random.default_rng(4)

    def f(X):
        return X.sum(0) + 1e-8 * noise.normal()

    assert not check_invariant(f, X64, rng=0)
    assert check_invariant(f, X64, rng=0, atol=1e-6)


# ----------------------------------------------------------------------------- testers on graphs


def test_graph_testers_against_brute_force_permutations():
    G = nx.karate_club_graph()
    A = nx.to_numpy_array(G, weight=None)
    X = np.random.default_rng(5).normal(size=(34, 3))
    A_bar = A + np.eye(34)

    def layer(X, A):  # a mean over the node and its neighbours: equivariant
        A1 = A + np.eye(len(A))
        return A1 @ X / A1.sum(1, keepdims=True)

    assert check_equivariant(layer, X, A, rng=0)
    assert check_invariant(lambda X, A: layer(X, A).sum(0), X, A, rng=0)
    # using a fixed A (ignoring the permuted graph) breaks equivariance
    assert not check_equivariant(lambda X, A: A_bar @ X, X, A, rng=0)
    # the permuted graph is P A P^T: compare with the explicit matrix product
    seen = []
    check_invariant(lambda X_, A_: seen.append((X_, A_)) or 0.0, X, A, n=1, rng=7)
    pi = random_permutation(34, np.random.default_rng(7)).pi
    P = np.eye(34)[pi]
    assert np.array_equal(seen[1][0], P @ X) and np.array_equal(seen[1][1], P @ A @ P.T)
    At = torch.tensor(A)
    Xt = torch.tensor(X)
    assert check_equivariant(lambda X, A: (A + torch.eye(34, dtype=A.dtype)) @ X, Xt, At, rng=0)


def test_all_permutations_of_three_brute_force():
    X = np.random.default_rng(6).normal(size=(3, 2))
    for pi in itertools.permutations(range(3)):
        P = np.eye(3)[list(pi)]
        assert np.allclose(np.tanh(P @ X), P @ np.tanh(X))
    assert math.factorial(3) == len(list(itertools.permutations(range(3))))


# ----------------------------------------------------------------------------- groups


def test_permutation_group_against_itertools():
    for M in (1, 2, 3, 4):
        S = permutation_group(M)
        assert S.shape == (math.factorial(M), M, M) and np.array_equal(S[0], np.eye(M))
        pis = [tuple(int(np.argmax(P[i])) for i in range(M)) for P in S]  # P[i, pi[i]] = 1
        assert pis == list(itertools.permutations(range(M)))


def test_cyclic_shifts_are_the_powers_of_one_shift():
    C = cyclic_shifts(5)
    for s in range(5):
        assert np.array_equal(C[s], np.linalg.matrix_power(C[1], s))
    X = np.arange(5.0)
    assert np.array_equal(C[2] @ X, np.roll(X, -2))


def test_group_axioms_brute_force():
    assert group_axioms(permutation_group(4)) == (True, True, True, True, False)
    assert group_axioms(permutation_group(2)) == (True, True, True, True, True)
    assert group_axioms(cyclic_shifts(6)) == (True, True, True, True, True)
    assert not group_axioms(permutation_group(3)[1:]).identity
    # {I, 2I}: closed? no (4I missing); identity yes; inverses no (1/2 I missing)
    axioms = group_axioms(np.stack([np.eye(2), 2 * np.eye(2)]))
    assert axioms.identity and not axioms.closure and not axioms.inverses
    # rotations by multiples of 90 degrees: a group, abelian; with a reflection: the dihedral group D4
    R = np.array([[0.0, -1.0], [1.0, 0.0]])
    rotations = np.stack([np.linalg.matrix_power(R, k) for k in range(4)])
    assert all(group_axioms(rotations))
    F = np.diag([1.0, -1.0])
    dihedral = np.concatenate([rotations, rotations @ F])
    assert group_axioms(dihedral) == (True, True, True, True, False)
    # a non-associative "operation" cannot arise from matrices: associativity holds for any matrix set
    assert group_axioms(np.random.default_rng(0).normal(size=(3, 2, 2))).associativity


# ----------------------------------------------------------------------------- bad input

BAD_INPUT = [  # (call, error, message)
    (lambda: random_permutation(0), ValueError, "M must be an int"),
    (lambda: random_permutation(2.0), TypeError, "M must be an int"),
    (lambda: random_permutation(3, rng="a"), TypeError, "rng must be"),
    (lambda: check_invariant("sum", X64), TypeError, "f must be callable"),
    (lambda: check_invariant(np.sum, [1, 2, 3]), TypeError, "X must be a NumPy array or a torch tensor"),
    (lambda: check_invariant(np.sum, np.ones((1, 3))), ValueError, "M >= 2"),
    (
        lambda: check_invariant(np.sum, np.ones((3, 2)), np.ones((4, 4))),
        ValueError,
        r"A must have shape (3, 3)",
    ),
    (lambda: check_invariant(np.sum, X64, n=0), ValueError, "n must be an int"),
    (lambda: check_invariant(np.sum, X64, atol=-1.0), ValueError, "atol"),
    (lambda: check_equivariant(np.sum, X64), ValueError, "one row per element"),
    (lambda: permutation_group(8), ValueError, "M must be an int"),
    (lambda: cyclic_shifts(0), ValueError, "M must be an int"),
    (lambda: group_axioms(np.ones((2, 2, 3))), ValueError, "square"),
    (lambda: group_axioms(np.ones((2, 2))), ValueError, "elements must have 3 axes"),
]


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
