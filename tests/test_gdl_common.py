"""Tests of chapter 07's shared tools (dlnotes.gdl.common): the one validation of adjacency matrices (the GCN
matrix of 7.3 and the Laplacians of 7.5 go through it) and of symmetric graph matrices."""

import networkx as nx
import numpy as np
import pytest

from dlnotes.gdl.common import check_adjacency, check_symmetric

from conftest import bad_input_test

A3 = np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]])


def test_check_adjacency_returns_a_float64_copy_of_a_graph_from_networkx():
    G = nx.karate_club_graph()
    A = nx.to_numpy_array(G, weight=None, dtype=int)
    checked = check_adjacency(A, M=34)
    assert checked.dtype == np.float64 and np.array_equal(checked, A) and checked is not A
    weights = nx.to_numpy_array(G)  # the interaction counts as edge weights
    assert np.array_equal(check_adjacency(weights, weighted=True), weights)


def test_check_adjacency_tolerates_rounding_in_the_symmetry_of_weights_only():
    W = np.array([[0.0, 0.3, 0.0], [0.3, 0.0, 0.7], [0.0, 0.7 + 1e-14, 0.0]])
    assert np.array_equal(check_adjacency(W, weighted=True), W)
    with pytest.raises(ValueError, match="symmetric"):
        check_adjacency(W + np.triu(np.full((3, 3), 1e-6), 1), weighted=True)


def test_check_symmetric_makes_the_matrix_exactly_symmetric():
    L = nx.laplacian_matrix(nx.cycle_graph(5)).toarray().astype(float)
    noisy = L.copy()
    noisy[0, 1] += 1e-12
    out = check_symmetric(noisy)
    assert np.array_equal(out, out.T) and np.allclose(out, L, rtol=0, atol=1e-12)
    assert np.array_equal(check_symmetric(L), L)


BAD_INPUT = [  # (call, error, message)
    (lambda: check_adjacency("A"), TypeError, "A must be an array"),
    (lambda: check_adjacency(np.ones(3)), ValueError, "A must have shape (any, any)"),
    (lambda: check_adjacency(np.zeros((2, 3))), ValueError, "square adjacency matrix"),
    (lambda: check_adjacency(A3, M=4), ValueError, "A must have shape (4, 4)"),
    (lambda: check_adjacency(2 * A3), ValueError, "only 0 and 1"),
    (lambda: check_adjacency(-A3, weighted=True), ValueError, "non-negative"),
    (lambda: check_adjacency(np.triu(A3)), ValueError, "symmetric"),
    (lambda: check_adjacency(A3 + np.eye(3), "A_G"), ValueError, "A_G must have a zero diagonal"),
    (lambda: check_symmetric(np.ones((2, 3))), ValueError, "L must be a square matrix"),
    (lambda: check_symmetric(np.triu(np.ones((3, 3))), "A_bar"), ValueError, "A_bar must be symmetric"),
]


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
