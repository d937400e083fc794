"""Section 7.6 of chapter 07 (notebook 07_graph_practice): graph learning as graph libraries write it. Message
passing over an edge list with ``index_add_`` / ``scatter_reduce`` (sum, mean, max) and messages that may
depend on the receiver, the sender and the edge's features; multi-head graph attention over an edge list;
mini-batches of graphs as one disjoint union with a batch vector; a GIN-style graph classifier with sum or
mean aggregation, trained by the book's loop; generated graphs whose classes 1-WL separates; Laplacian
positional encodings.

A graph with M nodes is an edge list ``edges`` (2, E), a torch int64 tensor: ``edges[0]`` the senders n,
``edges[1]`` the receivers m; an undirected edge appears once in each direction. Node features are X (M, F).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import networkx as nx
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..training import eval_mode, model_device, to_numpy, train_steps
from ..validation import (
    check_callable,
    check_choice,
    check_int,
    check_labels,
    check_number,
    check_positive,
    check_rng,
)
from .common import check_adjacency, check_symmetric

AGGREGATIONS = ("sum", "mean", "max")


def edge_list(A) -> torch.Tensor:
    """The edge list (2, E) of a graph given by its adjacency matrix A (M, M): a column (n, m) for every
    ``a_mn != 0``, i.e. every undirected edge once in each direction (senders in row 0, receivers in row 1)."""
    A = check_adjacency(A, weighted=True)
    receivers, senders = np.nonzero(A)
    return torch.as_tensor(np.stack([senders, receivers]), dtype=torch.int64)


def _check_edges(edges, M: int) -> torch.Tensor:
    if (
        not isinstance(edges, torch.Tensor)
        or edges.dtype != torch.int64
        or edges.ndim != 2
        or len(edges) != 2
    ):
        raise TypeError(
            f"edges must be an int64 tensor (2, E) of senders and receivers, got "
            f"{getattr(edges, 'dtype', type(edges).__name__)} {tuple(getattr(edges, 'shape', ()))}"
        )
    if edges.numel() and (edges.min() < 0 or edges.max() >= M):
        raise ValueError(f"edges must hold node indices in 0..{M - 1}, got {edges.min()}..{edges.max()}")
    return edges


def scatter_aggregate(messages: torch.Tensor, receivers: torch.Tensor, M: int, aggregate: str = "sum"):
    """Aggregate one message per edge (E, F') at its receiver: (M, F') by ``index_add_`` (sum; the mean divides
    by the number of messages) or ``scatter_reduce(..., "amax")`` (max). A node without messages gets 0.
    Memory and time are O(E F'), not O(M^2 F') as for a dense adjacency matrix."""
    aggregate = check_choice(aggregate, "aggregate", AGGREGATIONS)
    M = check_int(M, "M", 1)
    if messages.ndim != 2 or receivers.shape != (len(messages),):
        raise ValueError(
            f"messages must be (E, F') and receivers (E,), got {tuple(messages.shape)} and {tuple(receivers.shape)}"
        )
    out = messages.new_zeros(M, messages.shape[1])
    if aggregate == "max":
        index = receivers[:, None].expand_as(messages)
        return out.scatter_reduce(0, index, messages, reduce="amax", include_self=False)
    out = out.index_add(0, receivers, messages)
    if aggregate == "mean":
        count = messages.new_zeros(M).index_add(0, receivers, messages.new_ones(len(receivers)))
        out = out / count.clamp(min=1)[:, None]
    return out


def sparse_message_passing(X, edges, psi: Callable, aggregate: str = "sum", phi=None, edge_attr=None):
    """One round of message passing over an edge list, ``x_m' = phi(x_m, AGG_{n in N(m)} psi(x_m, x_n, e_mn))``.

    X (M, F) a tensor, edges (2, E) (senders, receivers). ``psi(x_receiver, x_sender, e)`` is called once on all
    edges with tensors (E, F), (E, F) and ``edge_attr`` (E, F_e) or None, and returns the messages (E, F').
    ``aggregate`` is "sum", "mean" or "max" (`scatter_aggregate`); ``phi(X, H) -> X_new`` (None: H itself).
    """
    if not isinstance(X, torch.Tensor) or X.ndim != 2:
        raise ValueError(f"X must be a tensor (M, F), got {getattr(X, 'shape', type(X).__name__)}")
    senders, receivers = _check_edges(edges, len(X))
    psi = check_callable(psi, "psi")
    if edge_attr is not None and (not isinstance(edge_attr, torch.Tensor) or len(edge_attr) != len(senders)):
        raise ValueError(f"edge_attr must be a tensor with one row per edge ({len(senders)})")
    messages = psi(X[receivers], X[senders], edge_attr)
    if not isinstance(messages, torch.Tensor) or messages.shape[:1] != (len(senders),) or messages.ndim != 2:
        raise ValueError(
            f"psi must return one message per edge, (E, F'), got {getattr(messages, 'shape', None)}"
        )
    H = scatter_aggregate(messages, receivers, len(X), aggregate)
    return H if phi is None else check_callable(phi, "phi")(X, H)


class MultiHeadGAT(nn.Module):
    """Graph attention with K heads over an edge list (Velickovic et al., 2018). Head k has its own W_k (F_in,
    F_out) and a_k (2 F_out,): ``z = x W_k``, ``e_mn = LeakyReLU_slope(a_k^T [z_m || z_n])``, ``q_mn`` the softmax
    of e_mn over the senders n of m (and m itself: a self-loop is added), ``h_m^k = sum_n q_mn z_n``. The heads
    are concatenated, (M, K F_out), or averaged, (M, F_out) (``concat=False``, the paper's output layer).
    ``forward(X, edges)``; ``attention(X, edges)`` returns the edges with self-loops and q (E + M, K)."""

    def __init__(self, F_in: int, F_out: int, heads: int = 4, *, concat: bool = True, slope: float = 0.2):
        super().__init__()
        F_in, F_out = check_int(F_in, "F_in", 1), check_int(F_out, "F_out", 1)
        self.heads, self.concat = check_int(heads, "heads", 1), bool(concat)
        self.slope = check_number(slope, "slope", 0, 1)
        self.W = nn.Parameter(torch.randn(heads, F_in, F_out) * (2.0 / (F_in + F_out)) ** 0.5)
        self.a = nn.Parameter(torch.randn(heads, 2 * F_out) * F_out**-0.5)

    def _project(self, X) -> torch.Tensor:
        if not isinstance(X, torch.Tensor) or X.ndim != 2 or X.shape[1] != self.W.shape[1]:
            raise ValueError(f"X must be a tensor (M, {self.W.shape[1]}), got {getattr(X, 'shape', type(X))}")
        return torch.einsum("mf,kfo->mko", X, self.W.to(X.dtype))  # (M, K, F_out)

    def attention(self, X, edges) -> tuple[torch.Tensor, torch.Tensor]:
        Z = self._project(X)
        loops = torch.arange(len(X), device=X.device).repeat(2, 1)
        edges = torch.cat([_check_edges(edges, len(X)).to(X.device), loops], dim=1)
        senders, receivers = edges
        F_out, a = Z.shape[2], self.a.to(X.dtype)
        e = F.leaky_relu(
            (Z[receivers] * a[:, :F_out]).sum(-1) + (Z[senders] * a[:, F_out:]).sum(-1), self.slope
        )
        e_max = scatter_aggregate(e, receivers, len(X), "max")  # per receiver and head: a stable softmax
        w = torch.exp(e - e_max[receivers])
        return edges, w / scatter_aggregate(w, receivers, len(X), "sum")[receivers]

    def forward(self, X, edges) -> torch.Tensor:
        (senders, receivers), q = self.attention(X, edges)
        Z = self._project(X)
        H = scatter_aggregate((q[:, :, None] * Z[senders]).flatten(1), receivers, len(X)).view(Z.shape)
        return H.flatten(1) if self.concat else H.mean(dim=1)


class GraphBatch(NamedTuple):
    X: torch.Tensor  # node features of all graphs, stacked (sum of M_b, F)
    edges: torch.Tensor  # edge list (2, E) with node indices shifted by the graph's offset
    graph_index: torch.Tensor  # the graph of every node (sum of M_b,), 0..B-1 (the batch vector)
    n_graphs: int


def batch_graphs(graphs) -> GraphBatch:
    """B graphs, each a pair (X_b (M_b, F), edges_b (2, E_b)), as ONE graph, their disjoint union: features
    stacked, edge indices shifted by the number of nodes before the graph, and a batch vector that says which
    graph each node belongs to. Its adjacency matrix is block diagonal, ``block_diag(A_1, ..., A_B)``, so message
    passing never mixes two graphs; a readout sums or averages the nodes of each graph (`readout`)."""
    if not isinstance(graphs, (list, tuple)) or not graphs:
        raise TypeError("graphs must be a non-empty list of pairs (X, edges)")
    offsets = np.cumsum([0] + [len(X) for X, _ in graphs])
    edges = [_check_edges(E, len(X)) + int(offset) for (X, E), offset in zip(graphs, offsets, strict=False)]
    graph_index = torch.repeat_interleave(torch.arange(len(graphs)), torch.as_tensor(np.diff(offsets)))
    return GraphBatch(torch.cat([X for X, _ in graphs]), torch.cat(edges, dim=1), graph_index, len(graphs))


def readout(H: torch.Tensor, graph_index: torch.Tensor, n_graphs: int, how: str = "sum") -> torch.Tensor:
    """One vector per graph, (B, F): the sum or the mean of the rows of H that `graph_index` (the batch vector)
    assigns to each graph."""
    return scatter_aggregate(H, graph_index.to(H.device), n_graphs, check_choice(how, "how", ("sum", "mean")))


class GraphClassifier(nn.Module):
    """A graph classifier of GIN layers (Xu et al., 2019, with eps = 0) over an edge list: ``h_m <- MLP(h_m +
    AGG_{n in N(m)} h_n)`` with AGG the sum (GIN) or the mean, `layers` times; the readout concatenates every
    layer's per-graph sum (``aggregate="sum"``) or mean (``"mean"``), and a linear map gives the class scores.
    ``forward(batch: GraphBatch)`` -> (B, n_classes)."""

    def __init__(self, F_in: int, hidden: int, n_classes: int, *, layers: int = 3, aggregate: str = "sum"):
        super().__init__()
        F_in, hidden = check_int(F_in, "F_in", 1), check_int(hidden, "hidden", 1)
        self.aggregate = check_choice(aggregate, "aggregate", ("sum", "mean"))
        widths = [F_in] + [hidden] * check_int(layers, "layers", 1)
        self.mlps = nn.ModuleList(
            nn.Sequential(nn.Linear(a, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
            for a in widths[:-1]
        )
        self.head = nn.Linear(hidden * len(self.mlps), check_int(n_classes, "n_classes", 2))

    def forward(self, graphs: GraphBatch) -> torch.Tensor:
        H, pooled = graphs.X, []
        for mlp in self.mlps:
            H = mlp(H + sparse_message_passing(H, graphs.edges, lambda x_m, x_n, e: x_n, self.aggregate))
            pooled.append(readout(H, graphs.graph_index, graphs.n_graphs, self.aggregate))
        return self.head(torch.cat(pooled, dim=1))


def make_degree_graphs(n_graphs: int, M: int = 12, rng=None) -> tuple[list, np.ndarray]:
    """Random graphs on M nodes (M even) with the same number of edges, 3M/2, in two classes: class 0 is 3-regular,
    class 1 has M/2 nodes of degree 2 and M/2 of degree 4. The node features are constant, X = 1 (M, 1), so only
    the structure tells the classes apart: 1-WL separates them after one round (the degrees), a mean aggregation
    of constant features cannot (every node stays the same vector). Returns the graphs as pairs (X, edges), and
    their labels, alternating 0, 1, 0, ..."""
    n_graphs, M = check_int(n_graphs, "n_graphs", 1), check_int(M, "M", 6)
    if M % 2:
        raise ValueError(f"M must be even (a 3-regular graph needs an even number of nodes), got {M}")
    rng = check_rng(rng)
    graphs, y = [], np.arange(n_graphs) % 2
    for label in y:
        seed = int(rng.integers(2**31))
        if label == 0:
            G = nx.random_regular_graph(3, M, seed=seed)
        else:
            G = nx.random_degree_sequence_graph([2, 4] * (M // 2), seed=seed, tries=100)
        A = nx.to_numpy_array(G, nodelist=range(M), weight=None)
        graphs.append((torch.ones(M, 1), edge_list(A)))
    return graphs, y


def train_graph_classifier(
    model: GraphClassifier, graphs, y, *, steps: int = 200, batch_size: int = 32, lr: float = 0.01, rng=None
) -> np.ndarray:
    """Train `model` on the labelled graphs (pairs (X, edges), labels y) with Adam and the cross-entropy, by
    `dlnotes.training.train_steps`, one random mini-batch of `batch_size` graphs (`batch_graphs`) per step;
    return the losses. The model stays on its device; batches are drawn from `rng`."""
    y = check_labels(y, "y", len(graphs))
    steps, batch_size = check_int(steps, "steps", 1), check_int(batch_size, "batch_size", 1)
    rng = check_rng(rng)
    yt = torch.as_tensor(y)

    def batches():
        while True:
            chosen = rng.choice(len(graphs), min(batch_size, len(graphs)), replace=False)
            yield batch_graphs([graphs[i] for i in chosen]), yt[chosen]

    def loss(model, batch):
        graph_batch, targets = batch
        return F.cross_entropy(model(graph_batch), targets)

    optimizer = torch.optim.Adam(model.parameters(), lr=check_positive(lr, "lr"))
    return train_steps(model, loss, optimizer, batches(), steps, progress=False)


def graph_scores(model: GraphClassifier, graphs) -> np.ndarray:
    """The class scores (B, n_classes) of every graph (pairs (X, edges)), in one batch, with the model in eval
    mode; the predicted class is ``graph_scores(model, graphs).argmax(1)``."""
    X, edges, graph_index, n_graphs = batch_graphs(graphs)
    dev = model_device(model)
    with eval_mode(model), torch.no_grad():
        logits = model(GraphBatch(X.to(dev), edges.to(dev), graph_index.to(dev), n_graphs))
    return to_numpy(logits)


def laplacian_pe(L, k: int) -> np.ndarray:
    """Laplacian positional encodings (M, k): the eigenvectors u_1, ..., u_k of a graph Laplacian L after the
    first (the smoothest non-trivial ones), as `numpy.linalg.eigh` returns them. Each is defined only up to its
    sign (and inside a repeated eigenvalue only up to a rotation), so the encoding of a node depends on choices
    that have nothing to do with the graph."""
    L = check_symmetric(L, "L")
    k = check_int(k, "k", 1, len(L) - 1)
    return np.linalg.eigh(L)[1][:, 1 : k + 1]
