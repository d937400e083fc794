"""Section 7.6 (graph learning in practice): edge-list message passing against the dense layers and a loop,
multi-head GAT against dense GAT heads, batches of graphs against the block-diagonal union, the degree task's
graphs, a short training run, and Laplacian positional encodings against eigh."""

import networkx as nx
import numpy as np
import pytest
import torch

from dlnotes.gdl.depth_wl import GATLayer, GINLayer
from dlnotes.gdl.graphs import message_passing
from dlnotes.gdl.practice import (
    GraphClassifier,
    MultiHeadGAT,
    batch_graphs,
    edge_list,
    graph_scores,
    laplacian_pe,
    make_degree_graphs,
    readout,
    scatter_aggregate,
    sparse_message_passing,
    train_graph_classifier,
)
from dlnotes.gdl.spectral import laplacian

from conftest import bad_input_test

rng = np.random.default_rng(3)


def _random_graph(M=15, p=0.25):
    upper = np.triu(rng.random((M, M)) < p, 1)
    A = (upper | upper.T).astype(float)
    A[0] = A[:, 0] = 0  # node 0 is isolated: it receives no message
    return A


def test_edge_list_holds_both_directions():
    A = nx.to_numpy_array(nx.path_graph(3), weight=None)
    assert edge_list(A).tolist() == [[1, 0, 2, 1], [0, 1, 1, 2]]


@pytest.mark.parametrize("aggregate", ["sum", "mean", "max"])
def test_sparse_message_passing_equals_the_dense_layer(aggregate):
    A = _random_graph()
    X = torch.as_tensor(rng.normal(size=(15, 3)))
    dense = message_passing(X, torch.as_tensor(A), torch.sin, aggregate)
    sparse = sparse_message_passing(X, edge_list(A), lambda x_m, x_n, e: torch.sin(x_n), aggregate)
    assert torch.allclose(dense, sparse, rtol=0, atol=1e-12) and not sparse[0].any()


def test_messages_with_receiver_and_edge_features_against_a_loop():
    A = _random_graph()
    edges = edge_list(A)
    X = torch.as_tensor(rng.normal(size=(15, 2)))
    e = torch.as_tensor(rng.normal(size=(edges.shape[1], 1)))

    def psi(x_m, x_n, e_mn):
        return x_m * x_n + e_mn

    out = sparse_message_passing(X, edges, psi, "sum", phi=lambda X, H: X + H, edge_attr=e)
    expected = X.clone()
    for k, (n, m) in enumerate(edges.T.tolist()):
        expected[m] += X[m] * X[n] + e[k]
    assert torch.allclose(out, expected, rtol=0, atol=1e-12)


def test_scatter_aggregate_is_a_groupby():
    messages = torch.tensor([[1.0], [3.0], [-2.0], [5.0]])
    receivers = torch.tensor([0, 0, 2, 2])
    for aggregate, expected in (("sum", [4, 0, 3]), ("mean", [2, 0, 1.5]), ("max", [3, 0, 5])):
        assert scatter_aggregate(messages, receivers, 3, aggregate)[:, 0].tolist() == expected


@pytest.mark.parametrize("concat", [True, False])
def test_multi_head_gat_equals_dense_heads(concat):
    A = _random_graph()
    X = torch.as_tensor(rng.normal(size=(15, 4)))
    gat = MultiHeadGAT(4, 3, heads=2, concat=concat).double()
    heads = []
    for k in range(2):
        layer = GATLayer(4, 3).double()
        with torch.no_grad():
            layer.W.copy_(gat.W[k])
            layer.a.copy_(gat.a[k])
        heads.append(layer(X, A))
    expected = torch.cat(heads, dim=1) if concat else torch.stack(heads).mean(dim=0)
    with torch.no_grad():
        assert torch.allclose(gat(X, edge_list(A)), expected, rtol=0, atol=1e-12)


def test_batch_is_the_block_diagonal_union_and_readout_groups_graphs():
    graphs = [nx.cycle_graph(4), nx.path_graph(3)]
    pairs = [(torch.ones(len(G), 2), edge_list(nx.to_numpy_array(G, weight=None))) for G in graphs]
    batch = batch_graphs(pairs)
    A = torch.zeros(7, 7)
    A[batch.edges[1], batch.edges[0]] = 1
    blocks = torch.block_diag(*(torch.as_tensor(nx.to_numpy_array(G, weight=None)).float() for G in graphs))
    assert torch.equal(A, blocks) and batch.graph_index.tolist() == [0, 0, 0, 0, 1, 1, 1]
    assert readout(batch.X, batch.graph_index, 2, "sum").tolist() == [[4, 4], [3, 3]]
    assert readout(batch.X, batch.graph_index, 2, "mean").tolist() == [[1, 1], [1, 1]]


def test_classifier_layer_is_a_gin_layer():
    model = GraphClassifier(2, 5, 2, layers=1).double()
    A = _random_graph(8, 0.5)
    X = torch.as_tensor(rng.normal(size=(8, 2)))
    gin = GINLayer(2, 5, hidden=5).double()
    with torch.no_grad():
        gin.mlp[0].weight.copy_(model.mlps[0][0].weight)
        gin.mlp[0].bias.copy_(model.mlps[0][0].bias)
        gin.mlp[2].weight.copy_(model.mlps[0][2].weight)
        gin.mlp[2].bias.copy_(model.mlps[0][2].bias)
        H = torch.relu(gin(X, A))  # the classifier's MLP ends with a ReLU
        expected = model.head(H.sum(dim=0, keepdim=True))
        assert torch.allclose(model(batch_graphs([(X, edge_list(A))])), expected, rtol=0, atol=1e-12)


def test_degree_graphs_have_equal_sizes_and_the_promised_degrees():
    graphs, y = make_degree_graphs(6, 10, rng=1)
    assert y.tolist() == [0, 1, 0, 1, 0, 1]
    for (X, edges), label in zip(graphs, y, strict=True):
        degrees = np.bincount(edges[1].numpy(), minlength=10)
        assert X.shape == (10, 1) and edges.shape[1] == 30
        assert sorted(degrees) == ([3] * 10 if label == 0 else [2] * 5 + [4] * 5)


def test_sum_classifier_learns_the_degree_task_and_mean_cannot():
    torch.manual_seed(0)
    graphs, y = make_degree_graphs(80, 10, rng=2)
    scores = {}
    for aggregate in ("sum", "mean"):
        model = GraphClassifier(1, 16, 2, layers=2, aggregate=aggregate)
        losses = train_graph_classifier(model, graphs[:60], y[:60], steps=60, batch_size=20, rng=0)
        scores[aggregate] = graph_scores(model, graphs[60:])
        assert model.training and len(losses) == 60
    assert (scores["sum"].argmax(1) == y[60:]).mean() >= 0.9
    assert np.ptp(scores["mean"], axis=0).max() < 1e-4  # every graph the same scores, up to float32 rounding


def test_laplacian_pe_are_the_eigenvectors_after_the_first():
    L = laplacian(_random_graph(10, 0.6)[1:, 1:], normalized=True)
    U = laplacian_pe(L, 3)
    lam = np.linalg.eigvalsh(L)
    assert U.shape == (9, 3) and np.allclose(L @ U, U * lam[1:4], atol=1e-10)


A3 = nx.to_numpy_array(nx.path_graph(3), weight=None)
X3 = torch.ones(3, 2)
E3 = edge_list(A3)

BAD_INPUT = [
    (lambda: edge_list(np.ones((2, 3))), ValueError, "square"),
    (lambda: sparse_message_passing(X3, E3.float(), torch.sin), TypeError, "edges must be an int64 tensor"),
    (lambda: sparse_message_passing(X3, E3 + 5, torch.sin), ValueError, "node indices in 0..2"),
    (lambda: sparse_message_passing(X3.numpy(), E3, torch.sin), ValueError, "X must be a tensor"),
    (lambda: sparse_message_passing(X3, E3, "sin"), TypeError, "psi must be callable"),
    (lambda: sparse_message_passing(X3, E3, lambda a, b, e: b[:1]), ValueError, "one message per edge"),
    (
        lambda: sparse_message_passing(X3, E3, lambda a, b, e: b, edge_attr=torch.ones(2, 1)),
        ValueError,
        "edge_attr",
    ),
    (
        lambda: scatter_aggregate(torch.ones(4, 1), torch.zeros(4, dtype=torch.int64), 3, "min"),
        ValueError,
        "aggregate",
    ),
    (
        lambda: scatter_aggregate(torch.ones(4, 1), torch.zeros(3, dtype=torch.int64), 3),
        ValueError,
        "receivers",
    ),
    (lambda: MultiHeadGAT(2, 3, heads=0), ValueError, "heads"),
    (lambda: MultiHeadGAT(2, 3)(torch.ones(3, 5), E3), ValueError, r"X must be a tensor (M, 2)"),
    (lambda: batch_graphs([]), TypeError, "non-empty list"),
    (lambda: readout(X3, torch.zeros(3, dtype=torch.int64), 1, "max"), ValueError, "how"),
    (lambda: GraphClassifier(1, 4, 2, aggregate="max"), ValueError, "aggregate"),
    (lambda: make_degree_graphs(4, 11), ValueError, "M must be even"),
    (lambda: make_degree_graphs(0), ValueError, "n_graphs"),
    (
        lambda: train_graph_classifier(GraphClassifier(1, 4, 2), [(X3[:, :1], E3)], [0, 1]),
        ValueError,
        "y must",
    ),
    (lambda: laplacian_pe(np.eye(3), 3), ValueError, "k"),
]


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
