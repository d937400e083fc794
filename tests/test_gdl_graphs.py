"""Section 7.3 (message passing and GCN): graph matrices against networkx, the GCN matrix against its
element-wise formula and its spectrum, message passing against a per-node loop (NumPy and torch), the GCN
layer against NumPy, and the GCN node classifier on the karate club."""

import networkx as nx
import numpy as np
import pytest
import torch

from dlnotes.data import load_karate_club
from dlnotes.gdl.graphs import (
    GCN,
    GCNLayer,
    gcn_norm_adj,
    graph_matrices,
    label_propagation,
    make_sbm_task,
    message_passing,
    train_gcn,
)
from dlnotes.gdl.symmetry import check_equivariant

from conftest import bad_input_test

rng = np.random.default_rng(7)
G_KARATE, Y_KARATE = load_karate_club()
A_KARATE = nx.to_numpy_array(G_KARATE, weight=None)


def test_graph_matrices_karate_against_networkx():
    A, D = graph_matrices(G_KARATE)
    nodes = list(G_KARATE.nodes)
    for i, j in G_KARATE.edges:
        assert A[nodes.index(i), nodes.index(j)] == A[nodes.index(j), nodes.index(i)] == 1
    assert A.sum() == 2 * G_KARATE.number_of_edges() == 156  # not 462: edge weights are ignored
    assert np.array_equal(np.diag(D), [G_KARATE.degree(v) for v in nodes])
    assert np.array_equal(A, A.T) and not np.diag(A).any() and A.dtype == np.float64


def test_graph_matrices_keeps_node_order():
    G = nx.Graph([("c", "a"), ("a", "b")])  # nodes in insertion order c, a, b
    A, D = graph_matrices(G)
    assert np.array_equal(A, [[0, 1, 0], [1, 0, 1], [0, 1, 0]])
    assert np.array_equal(np.diag(D), [1, 2, 1])


def test_gcn_norm_adj_elementwise_and_spectrum():
    A_bar = gcn_norm_adj(A_KARATE)
    d = A_KARATE.sum(1)
    M = len(A_KARATE)
    ref = np.array(
        [[(A_KARATE[i, j] + (i == j)) / np.sqrt((1 + d[i]) * (1 + d[j])) for j in range(M)] for i in range(M)]
    )
    np.testing.assert_allclose(A_bar, ref, rtol=0, atol=1e-15)
    lam, U = np.linalg.eigh(A_bar)
    assert lam.min() > -1 and abs(lam.max() - 1) < 1e-12
    u = np.sqrt(1 + d)
    np.testing.assert_allclose(A_bar @ u, u, atol=1e-12)
    assert abs(abs(U[:, -1] @ u) / np.linalg.norm(u) - 1) < 1e-12


def test_gcn_norm_adj_isolated_node_keeps_itself():
    A = np.zeros((3, 3))
    A[0, 1] = A[1, 0] = 1
    A_bar = gcn_norm_adj(A)
    assert A_bar[2, 2] == 1 and A_bar[0, 1] == pytest.approx(0.5)


def loop_message_passing(X, A, psi, aggregate, phi=None):
    """One node at a time, the neighbours as a Python list."""
    H = psi(X)
    out = np.zeros((len(X), H.shape[1]))
    for m in range(len(X)):
        msgs = [H[n] for n in range(len(X)) if A[m, n]]
        if msgs:
            out[m] = {"sum": np.sum, "mean": np.mean, "max": np.max}[aggregate](msgs, axis=0)
    return out if phi is None else phi(X, out)


@pytest.mark.parametrize("aggregate", ["sum", "mean", "max"])
def test_message_passing_against_loop_numpy_and_torch(aggregate):
    A = A_KARATE.copy()
    A[5, :] = A[:, 5] = 0  # an isolated node receives 0
    X = rng.normal(size=(34, 3))
    W = rng.normal(size=(3, 4))

    def psi(Z):
        return np.tanh(Z @ W)

    def phi(Z, H):
        return np.concatenate([Z, H], axis=1) ** 2

    ref = loop_message_passing(X, A, psi, aggregate, phi)
    out = message_passing(X, A, psi, aggregate, phi)
    np.testing.assert_allclose(out, ref, atol=1e-12)
    assert np.all(out[5, 3:] == 0)
    Wt = torch.tensor(W)
    out_t = message_passing(
        torch.tensor(X),
        torch.tensor(A),
        lambda Z: torch.tanh(Z @ Wt),
        aggregate,
        lambda Z, H: torch.cat([Z, H], 1) ** 2,
    )
    assert isinstance(out_t, torch.Tensor)
    np.testing.assert_allclose(out_t.numpy(), ref, atol=1e-12)
    assert check_equivariant(lambda Z, B: message_passing(Z, B, psi, aggregate, phi), X, A, rng=1)


def test_message_passing_max_gradient_flows_to_the_maximum():
    X = torch.tensor([[1.0], [3.0], [2.0]], requires_grad=True)
    A = torch.tensor([[0.0, 1, 1], [1, 0, 0], [1, 0, 0]])
    message_passing(X, A, lambda Z: Z, "max")[0].sum().backward()
    assert X.grad.tolist() == [[0.0], [1.0], [0.0]]


def test_gcn_layer_against_numpy():
    torch.manual_seed(0)
    layer = GCNLayer(3, 5, bias=True)
    with torch.no_grad():
        layer.b.normal_()
    X = rng.normal(size=(34, 3))
    A_bar = gcn_norm_adj(A_KARATE)
    W, b = layer.W.detach().double().numpy(), layer.b.detach().double().numpy()
    ref = np.maximum(A_bar @ X @ W + b, 0)
    out = layer(torch.tensor(X), torch.tensor(A_bar))
    np.testing.assert_allclose(out.detach().numpy(), ref, atol=1e-12)
    linear = GCNLayer(3, 5, activation=None)
    out_lin = linear(torch.tensor(X), torch.tensor(A_bar)).detach().numpy()
    np.testing.assert_allclose(out_lin, A_bar @ X @ linear.W.detach().double().numpy(), atol=1e-12)


def test_gcn_equivariant_and_two_layer_formula():
    torch.manual_seed(1)
    model = GCN(4, 8, 3).double().eval()
    X = rng.normal(size=(34, 4))
    A_bar = gcn_norm_adj(A_KARATE)
    W0, W1 = (layer.W.detach().numpy() for layer in (model.layer1, model.layer2))
    ref = A_bar @ np.maximum(A_bar @ X @ W0, 0) @ W1
    with torch.no_grad():
        np.testing.assert_allclose(model(torch.tensor(X), torch.tensor(A_bar)).numpy(), ref, atol=1e-12)

    def f(Z, B):
        with torch.no_grad():
            return model(Z, torch.tensor(gcn_norm_adj(B.numpy())))

    assert check_equivariant(f, torch.tensor(X), torch.tensor(A_KARATE), rng=2)


def test_train_gcn_karate_one_label_per_club():
    torch.manual_seed(0)
    result = train_gcn(np.eye(34), A_KARATE, Y_KARATE, [0, 33])
    assert result.accuracy > 0.9
    assert result.losses[-1] < result.losses[0]
    rest = np.setdiff1d(np.arange(34), [0, 33])
    assert result.accuracy == pytest.approx(np.mean(result.predicted[rest] == Y_KARATE[rest]))
    np.testing.assert_allclose(result.proba.sum(1), 1, atol=1e-6)
    assert not result.model.training  # returned in eval mode, on dlnotes.training.device()
    dev = next(result.model.parameters()).device
    with torch.no_grad():
        A_bar = torch.tensor(gcn_norm_adj(A_KARATE), dtype=torch.float32, device=dev)
        logits = result.model(torch.eye(34, device=dev), A_bar)
    assert np.array_equal(result.predicted, logits.argmax(1).cpu().numpy())


X3 = np.ones((3, 2))
A3 = np.array([[0.0, 1, 0], [1, 0, 1], [0, 1, 0]])


def test_label_propagation_is_the_sum_of_propagated_labels():
    labelled = np.array([0, 33])
    F_scores = label_propagation(A_KARATE, Y_KARATE, labelled, alpha=0.9)
    A_bar = gcn_norm_adj(A_KARATE)
    Y0 = np.zeros((34, 2))
    Y0[labelled, Y_KARATE[labelled]] = 1
    series, term = np.zeros_like(Y0), Y0.copy()
    for _ in range(2000):  # sum_k (0.9 A_bar)^k Y0, a geometric series
        series += term
        term = 0.9 * A_bar @ term
    assert np.allclose(F_scores, series, rtol=0, atol=1e-10)
    assert F_scores[0].argmax() == 0 and F_scores[33].argmax() == 1


def test_sbm_task_blocks_and_features():
    task = make_sbm_task((60, 40), p_in=0.3, p_out=0.0, F=4, signal=3.0, rng=1)
    assert task.A.shape == (100, 100) and np.array_equal(task.A, task.A.T) and not np.diag(task.A).any()
    assert not task.A[:60, 60:].any() and task.A[:60, :60].mean() > 0.2  # no edge between the blocks
    assert np.array_equal(np.bincount(task.y), [60, 40])
    means = np.array([task.X[task.y == c].mean(0) for c in (0, 1)])
    assert np.allclose(np.linalg.norm(means, axis=1), 3.0, atol=0.6)  # signal * unit vector + noise mean


BAD_INPUT = [  # (call, error, message)
    (lambda: graph_matrices(A3), TypeError, "networkx.Graph"),
    (lambda: graph_matrices(nx.DiGraph([(0, 1)])), TypeError, "undirected"),
    (lambda: graph_matrices(nx.Graph()), ValueError, "at least one node"),
    (lambda: graph_matrices(nx.Graph([(0, 0), (0, 1)])), ValueError, "self-loops"),
    (lambda: gcn_norm_adj(np.ones((2, 3))), ValueError, "square"),
    (lambda: gcn_norm_adj(np.triu(A3)), ValueError, "symmetric"),
    (lambda: gcn_norm_adj(A3 + np.eye(3)), ValueError, "zero diagonal"),
    (lambda: gcn_norm_adj(2 * A3), ValueError, "only 0 and 1"),
    (lambda: message_passing(X3, A3, "tanh"), TypeError, "psi must be callable"),
    (lambda: message_passing(X3, A3, np.tanh, "min"), ValueError, "aggregate must be one of"),
    (lambda: message_passing(X3, A3, np.tanh, phi=1), TypeError, "phi must be callable"),
    (lambda: message_passing(X3, np.ones((2, 2)), np.tanh), ValueError, r"A must have shape (3, 3)"),
    (lambda: message_passing(torch.ones(3, 2), A3, torch.tanh), TypeError, "both"),
    (lambda: message_passing(X3, -A3, np.tanh), ValueError, "non-negative"),
    (lambda: message_passing(X3, A3, lambda Z: Z[:2]), ValueError, "psi must map"),
    (lambda: GCNLayer(0, 3), ValueError, "F_in"),
    (lambda: GCNLayer(2, 3, activation="relu"), TypeError, "activation must be callable"),
    (lambda: GCNLayer(2, 3)(torch.ones(3, 4), torch.eye(3)), ValueError, r"X must have shape (M, 2)"),
    (
        lambda: GCNLayer(2, 3)(torch.ones(3, 2), torch.eye(4)),
        ValueError,
        r"A_bar must have shape (3, 3)",
    ),
    (lambda: GCN(2, 4, 1), ValueError, "n_classes"),
    (lambda: train_gcn(X3, A3, [0, 1, 0], [0, 5]), ValueError, "labelled must hold node indices in 0..2"),
    (lambda: train_gcn(X3, A3, [0, 1, 0], [0.5]), TypeError, "labelled must hold integer node indices"),
    (lambda: label_propagation(A3, [0, 1, 0], [0], alpha=1), ValueError, "alpha"),
    (lambda: label_propagation(A3, [0, 1], [0]), ValueError, "y must"),
    (lambda: make_sbm_task((5,)), ValueError, "at least two blocks"),
    (lambda: make_sbm_task(p_in=1.5), ValueError, "p_in"),
    (lambda: make_sbm_task(rng="a"), TypeError, "rng"),
    (lambda: train_gcn(X3, A3, [0, 1], [0]), ValueError, "y must"),
    (lambda: train_gcn(X3, A3, [0, 1, 0], [0, 1, 2]), ValueError, "unlabelled"),
    (lambda: train_gcn(X3, A3, [0, 1, 0], [0], lr=0), ValueError, "lr"),
]


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
