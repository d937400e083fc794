"""Tests of the depth, attention and Weisfeiler-Lehman block of dlnotes.gdl (section 7.3-7.4)."""

import warnings

import networkx as nx
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from dlnotes.data import load_karate_club
from dlnotes.gdl.depth_wl import (
    GATLayer,
    GINLayer,
    node_influence,
    oversmoothing_curve,
    pair_norm,
    wl_colors,
    wl_test,
)
from dlnotes.gdl.graphs import GCNLayer, gcn_norm_adj, graph_matrices
from dlnotes.gdl.symmetry import check_equivariant

from conftest import bad_input_test

KARATE, CLUB = load_karate_club()
A_K = graph_matrices(KARATE).A
A_BAR = gcn_norm_adj(A_K)


def _distances(G):
    d = dict(nx.shortest_path_length(G))
    return np.array([[d[i][j] for j in G] for i in G])


def test_node_influence_of_a_linear_layer_is_the_propagation_matrix():
    rng = np.random.default_rng(0)
    X, W = rng.normal(size=(34, 3)), rng.normal(size=(3, 2))
    A_t, W_t = torch.as_tensor(A_BAR), torch.as_tensor(W)
    got = node_influence(lambda X: A_t @ X @ W_t, X)
    np.testing.assert_allclose(got, A_BAR * np.abs(W).sum(), atol=1e-12)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_node_influence_of_k_tanh_layers_is_the_k_hop_neighbourhood(k):
    torch.manual_seed(k)
    layers = [GCNLayer(3, 3, activation=torch.tanh).double() for _ in range(k)]
    A_t = torch.as_tensor(A_BAR)

    def f(X):
        for layer in layers:
            X = layer(X, A_t)
        return X

    influence = node_influence(f, np.random.default_rng(k).normal(size=(34, 3)))
    np.testing.assert_array_equal(influence > 0, _distances(KARATE) <= k)


def test_oversmoothing_curve_against_the_power_and_the_degrees():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(34, 4))
    r = oversmoothing_curve(X, A_BAR, [0, 3, 10])
    d_tilde = 1 + A_K.sum(1)
    u = np.sqrt(d_tilde) / np.linalg.norm(np.sqrt(d_tilde))
    np.testing.assert_allclose(r.u, u, atol=1e-10)
    for k, dist in zip([0, 3, 10], r.distances, strict=True):
        expected = np.linalg.norm(np.linalg.matrix_power(A_BAR, k) @ X - np.outer(u, u @ X))
        assert dist == pytest.approx(expected, rel=1e-10)
    assert (r.distances <= r.bound + 1e-12).all()
    lam = np.sort(np.abs(np.linalg.eigvalsh(A_BAR)))
    assert r.lam2 == pytest.approx(lam[-2])


def _gat(seed=0, **kwargs):
    torch.manual_seed(seed)
    return GATLayer(5, 3, **kwargs).double()


def _gat_reference(X, A, W, a, slope, self_loops):
    """An independent loop over the nodes, with numpy."""
    Z = X @ W
    M = len(X)
    Q = np.zeros((M, M))
    for i in range(M):
        nbrs = [j for j in range(M) if A[i, j] or (self_loops and i == j)]
        e = np.array([np.concatenate([Z[i], Z[j]]) @ a for j in nbrs])
        e = np.where(e > 0, e, slope * e)
        Q[i, nbrs] = np.exp(e) / np.exp(e).sum()
    return Q, Q @ Z


@pytest.mark.parametrize("self_loops", [True, False])
def test_gat_layer_against_a_loop(self_loops):
    layer = _gat(self_loops=self_loops, slope=0.1)
    X = np.random.default_rng(2).normal(size=(34, 5))
    Q, H = _gat_reference(X, A_K, layer.W.detach().numpy(), layer.a.detach().numpy(), 0.1, self_loops)
    Xt = torch.as_tensor(X)
    np.testing.assert_allclose(layer.attention(Xt, A_K).detach().numpy(), Q, atol=1e-12)
    np.testing.assert_allclose(layer(Xt, A_K).detach().numpy(), H, atol=1e-12)
    assert check_equivariant(lambda X, A: layer(X, A), Xt, torch.as_tensor(A_K))


def test_gat_with_zero_attention_vector_is_the_mean():
    layer = _gat(activation=torch.tanh)
    with torch.no_grad():
        layer.a.zero_()
    X = torch.as_tensor(np.random.default_rng(3).normal(size=(34, 5)))
    A1 = A_K + np.eye(34)
    expected = np.tanh(A1 / A1.sum(1, keepdims=True) @ X.numpy() @ layer.W.detach().numpy())
    np.testing.assert_allclose(layer(X, A_K).detach().numpy(), expected, atol=1e-12)


def test_gat_scores_rank_the_keys_the_same_for_every_query():
    E = _gat(4).scores(torch.as_tensor(np.random.default_rng(4).normal(size=(34, 5)))).detach().numpy()
    order = np.argsort(E, axis=1)
    assert (order == order[0]).all()


def test_gin_layer_against_torch():
    torch.manual_seed(5)
    layer = GINLayer(4, 2, hidden=8, eps=0.3).double()
    X = torch.as_tensor(np.random.default_rng(5).normal(size=(34, 4)))
    lin1, lin2 = layer.mlp[0], layer.mlp[2]
    h = 1.3 * X + torch.as_tensor(A_K) @ X
    expected = F.linear(F.relu(F.linear(h, lin1.weight, lin1.bias)), lin2.weight, lin2.bias)
    torch.testing.assert_close(layer(X, A_K), expected)
    assert check_equivariant(lambda X, A: layer(X, A), X, torch.as_tensor(A_K))


def test_pair_norm_centres_and_fixes_the_mean_pairwise_distance():
    H = torch.as_tensor(np.random.default_rng(2).normal(3.0, 2.0, size=(12, 4)))
    out = pair_norm(H, s=1.5)
    assert torch.allclose(out.mean(dim=0), torch.zeros(4, dtype=torch.float64), atol=1e-12)
    assert torch.isclose(out.pow(2).sum(dim=1).mean(), torch.tensor(2.25, dtype=torch.float64))
    assert torch.isclose(torch.cdist(out, out).pow(2).mean(), torch.tensor(2 * 2.25, dtype=torch.float64))
    centred = H - H.mean(dim=0)
    assert torch.allclose(out, centred * 1.5 / centred.pow(2).sum(dim=1).mean().sqrt())


def test_gin_forward_leaves_the_layer_unchanged():
    torch.manual_seed(6)
    layer = GINLayer(3, 2)  # float32
    state = {name: value.clone() for name, value in layer.state_dict().items()}
    X = torch.as_tensor(np.random.default_rng(6).normal(size=(34, 3)))  # float64
    out = layer(X, A_K)
    assert all(p.dtype == torch.float32 for p in layer.parameters()) and out.dtype == torch.float32
    assert all(torch.equal(value, state[name]) for name, value in layer.state_dict().items())
    torch.testing.assert_close(out, layer.mlp((X + torch.as_tensor(A_K) @ X).float()))


@pytest.mark.parametrize(
    "dev",
    ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU"))],
)
def test_gat_and_gin_run_on_the_device_of_their_inputs(dev):
    gat, gin = _gat(), GINLayer(5, 2).double()
    X = torch.as_tensor(np.random.default_rng(7).normal(size=(34, 5)))
    with torch.no_grad():
        expected = gat.attention(X, A_K), gin(X, A_K)  # on the CPU
        gat, gin, X = gat.to(dev), gin.to(dev), X.to(dev)
        for A in (A_K, torch.as_tensor(A_K)):  # an array, or a tensor on the CPU
            Q, H = gat.attention(X, A), gin(X, A)
            assert Q.device == H.device == gat(X, A).device == X.device
            torch.testing.assert_close((Q.cpu(), H.cpu()), expected)


def _hash(G, h):
    """networkx's WL hash (it starts from the degrees and warns that its hashes changed in 3.5)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return nx.weisfeiler_lehman_graph_hash(G, iterations=h)


PAIRS = [
    (nx.disjoint_union(nx.cycle_graph(3), nx.cycle_graph(3)), nx.cycle_graph(6)),
    (nx.path_graph(4), nx.star_graph(3)),
    (nx.petersen_graph(), nx.circular_ladder_graph(5)),
    (nx.path_graph(6), nx.relabel_nodes(nx.path_graph(6), {i: 5 - i for i in range(6)})),
    (nx.Graph([(0, 1), (1, 2), (2, 3), (3, 4), (2, 5)]), nx.Graph([(0, 1), (1, 2), (2, 3), (3, 4), (1, 5)])),
    (KARATE, nx.relabel_nodes(KARATE, {v: (v * 7) % 34 for v in KARATE})),
    (KARATE, nx.Graph(list(KARATE.edges) + [(0, 9)])),
]


@pytest.mark.parametrize(("G1", "G2"), PAIRS)
def test_wl_test_agrees_with_networkx(G1, G2):
    h = max(len(G1), len(G2))
    assert wl_test(G1, G2) == (_hash(G1, h) == _hash(G2, h))


def test_wl_colors_share_one_table_and_stop_when_stable():
    c1, c2 = wl_colors([nx.path_graph(3), nx.path_graph(5)])
    assert c1[1][0] == c2[1][0] and c1[1][1] == c2[1][1]  # the same signatures get the same id in both graphs
    assert len(set(c1[-1].values()) | set(c2[-1].values())) == len(
        set(c1[-2].values()) | set(c2[-2].values())
    )
    assert len(wl_colors([nx.path_graph(5)], iters=1)[0]) == 2


BAD_INPUT = [  # (call, error, message)
    (lambda: node_influence("f", np.ones((3, 2))), TypeError, "f must be callable"),
    (lambda: node_influence(lambda X: X.sum(1), np.ones((3, 2))), ValueError, "one row per node"),
    (lambda: node_influence(lambda X: X, np.ones(3)), ValueError, "X must have 2 axes"),
    (
        lambda: oversmoothing_curve(np.ones((3, 2)), A_BAR, [1]),
        ValueError,
        r"X must have shape (34, any)",
    ),
    (lambda: oversmoothing_curve(np.ones((34, 2)), A_BAR, [-1]), ValueError, "ks"),
    (lambda: oversmoothing_curve(np.ones((2, 2)), np.eye(2), [1]), ValueError, "simple top eigenvalue"),
    (lambda: oversmoothing_curve(np.ones((2, 2)), np.ones((2, 3)), [1]), ValueError, "A_bar must be"),
    (lambda: GATLayer(0, 2), ValueError, "F_in"),
    (lambda: GATLayer(2, 2, slope=2.0), ValueError, "slope"),
    (
        lambda: GATLayer(2, 2)(torch.ones(3, 4), np.zeros((3, 3))),
        ValueError,
        r"X must be a tensor (M, 2)",
    ),
    (
        lambda: GATLayer(2, 2)(torch.ones(3, 2), np.zeros((2, 2))),
        ValueError,
        r"A must have shape (3, 3)",
    ),
    (
        lambda: GATLayer(2, 2, self_loops=False)(torch.ones(2, 2), np.zeros((2, 2))),
        ValueError,
        "every node needs a neighbour",
    ),
    (lambda: GINLayer(2, 2, hidden=0), ValueError, "hidden"),
    (lambda: pair_norm(np.ones((3, 2))), ValueError, "H must be a tensor"),
    (lambda: pair_norm(torch.ones(3, 2), s=0), ValueError, "s"),
    (
        lambda: GINLayer(2, 2)(torch.ones(3, 2), np.zeros((2, 2))),
        ValueError,
        r"A must have shape (3, 3)",
    ),
    (lambda: wl_colors(nx.path_graph(3)), TypeError, "graphs must be a non-empty list"),
    (lambda: wl_colors([nx.DiGraph([(0, 1)])]), TypeError, r"graphs[0] must be an undirected"),
    (lambda: wl_colors([nx.path_graph(3)], iters=-1), ValueError, "iters"),
    (lambda: wl_test(nx.path_graph(3), "G"), TypeError, r"graphs[1]"),
]


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
