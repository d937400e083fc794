"""Section 7.3 of chapter 07 (notebook 04_message_passing): graph neural networks. The adjacency and degree
matrices of a networkx graph, the GCN matrix A_bar, one round of message passing with sum, mean or max
aggregation, the GCN layer and the two-layer GCN node classifier, trained by the book's loop.

A graph is a symmetric adjacency matrix A (M, M) with zero diagonal (float64), its node features an array
X (M, F), one node per row.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import NamedTuple

import networkx as nx
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..training import device, to_numpy, train_steps
from ..validation import (
    check_callable,
    check_choice,
    check_int,
    check_labels,
    check_matrix,
    check_number,
    check_positive,
    check_rng,
)
from .common import check_adjacency, check_nodes


class GraphMatrices(NamedTuple):
    A: np.ndarray  # adjacency (M, M), float64 0/1, symmetric, zero diagonal
    D: np.ndarray  # degree matrix diag(d_m), (M, M)


def graph_matrices(G) -> GraphMatrices:
    """The adjacency matrix A and the degree matrix D = diag(d_m), d_m = sum_n a_nm, of an undirected
    networkx graph, nodes in ``G``'s order, as float64 arrays.

    Edge attributes are ignored (``nx.to_numpy_array(G, weight=None)``): networkx's karate club stores
    interaction counts as ``weight``, which would give sum_m d_m = 462 instead of 2|E| = 156.
    """
    if not isinstance(G, nx.Graph) or G.is_directed() or G.is_multigraph():
        raise TypeError(f"G must be an undirected networkx.Graph (not a multigraph), got {type(G).__name__}")
    if G.number_of_nodes() == 0:
        raise ValueError("G must have at least one node, got an empty graph")
    if nx.number_of_selfloops(G):
        raise ValueError(f"G must have no self-loops (zero diagonal), got {nx.number_of_selfloops(G)}")
    A = nx.to_numpy_array(G, weight=None, dtype=np.float64)
    return GraphMatrices(A, np.diag(A.sum(axis=1)))


def gcn_norm_adj(A) -> np.ndarray:
    """The GCN matrix ``A_bar = D~^{-1/2} (A + I) D~^{-1/2}``, d~_m = 1 + d_m (Kipf and Welling, 2017):
    ``a_bar_ij = (a_ij + delta_ij) / sqrt(d~_i d~_j)``. Symmetric, spectrum in (-1, 1], top eigenvector
    proportional to D~^{1/2} 1. A: square symmetric 0/1 matrix with zero diagonal (NumPy in, NumPy out)."""
    A = check_adjacency(A)
    s = 1 / np.sqrt(1 + A.sum(axis=1))
    return s[:, None] * (A + np.eye(len(A))) * s[None, :]


def message_passing(X, A, psi: Callable, aggregate: str = "sum", phi: Callable | None = None):
    """One round of message passing, ``x_m' = phi(x_m, AGG_{n in N(m)} psi(x_n))``.

    X (M, F) node features and A (M, M) adjacency (``a_mn != 0``: n is a neighbour of m), both NumPy arrays
    or both torch tensors; the result has the same type. ``psi`` maps the feature rows to messages, called
    once on all rows: ``psi(X) -> (M, F')`` (it must act on each row alone, e.g. an MLP). ``aggregate`` is
    "sum" (``A psi(X)``), "mean" (``D^{-1} A psi(X)``) or "max" (coordinate-wise over the neighbours); a node
    without neighbours receives 0. ``phi(X, H) -> X_new`` combines each node with its aggregate H (M, F');
    None returns H itself.
    """
    psi = check_callable(psi, "psi")
    aggregate = check_choice(aggregate, "aggregate", ("sum", "mean", "max"))
    if phi is not None:
        phi = check_callable(phi, "phi")
    is_torch = isinstance(X, torch.Tensor)
    if is_torch != isinstance(A, torch.Tensor):
        raise TypeError(
            f"X and A must both be NumPy arrays or both torch tensors, got {type(X).__name__} "
            f"and {type(A).__name__}"
        )
    if is_torch:
        if X.ndim != 2 or A.ndim != 2 or A.shape != (len(X), len(X)):
            raise ValueError(
                f"X must have shape (M, F) and A shape (M, M), got {tuple(X.shape)} and {tuple(A.shape)}"
            )
        A = A.to(X.dtype)
    else:
        X = check_matrix(X, "X")
        A = check_matrix(A, "A", len(X), len(X))
    if (A < 0).any():
        raise ValueError("A must have non-negative entries (an adjacency matrix)")
    H = psi(X)
    if tuple(H.shape[:1]) != (len(X),) or H.ndim != 2:
        raise ValueError(f"psi must map X (M, F) to messages (M, F'), got shape {tuple(H.shape)}")
    if aggregate in ("sum", "mean"):
        agg = A @ H
        if aggregate == "mean":
            deg = A.sum(1, keepdims=True)
            agg = agg / (deg.clamp(min=1) if is_torch else np.maximum(deg, 1))
    else:
        mask = (A != 0)[:, :, None]  # (M, M, 1): node m, neighbour n
        if is_torch:
            agg = torch.where(mask, H[None], H.new_full((), -torch.inf)).amax(dim=1)
            agg = torch.where(mask.any(dim=1), agg, torch.zeros_like(agg))
        else:
            agg = np.where(mask, H[None], -np.inf).max(axis=1)
            agg = np.where(mask.any(axis=1), agg, 0.0)
    return agg if phi is None else phi(X, agg)


class GCNLayer(nn.Module):
    """A graph convolution ``X+ = sigma(A_bar X W)`` (Kipf and Welling, 2017), W (F_in, F_out) acting on the
    features, A_bar = `gcn_norm_adj` (A) mixing the nodes.

    ``forward(X, A_bar)``: X (M, F_in), A_bar (M, M) torch tensors -> (M, F_out). ``activation`` is a callable
    (default ``torch.relu``) or None for the identity; ``bias`` adds b (F_out,) inside sigma. W is
    Glorot-initialised from torch's generator.
    """

    def __init__(self, F_in: int, F_out: int, activation: Callable | None = torch.relu, bias: bool = False):
        super().__init__()
        self.F_in, self.F_out = check_int(F_in, "F_in", 1), check_int(F_out, "F_out", 1)
        self.activation = None if activation is None else check_callable(activation, "activation")
        self.W = nn.Parameter(torch.empty(F_in, F_out))
        nn.init.xavier_uniform_(self.W)
        self.b = nn.Parameter(torch.zeros(F_out)) if bias else None

    def forward(self, X: torch.Tensor, A_bar: torch.Tensor) -> torch.Tensor:
        if X.ndim != 2 or X.shape[1] != self.F_in:
            raise ValueError(f"X must have shape (M, {self.F_in}), got {tuple(X.shape)}")
        if A_bar.shape != (len(X), len(X)):
            raise ValueError(f"A_bar must have shape ({len(X)}, {len(X)}), got {tuple(A_bar.shape)}")
        out = A_bar.to(X.dtype) @ (X @ self.W.to(X.dtype))
        if self.b is not None:
            out = out + self.b.to(X.dtype)
        return out if self.activation is None else self.activation(out)


class GCN(nn.Module):
    """The two-layer GCN node classifier ``logits = A_bar ReLU(A_bar X W0) W1`` (the softmax is in the
    loss): ``forward(X, A_bar)`` -> (M, n_classes). ``dropout`` acts on the input of each layer (training
    only)."""

    def __init__(self, F_in: int, hidden: int, n_classes: int, dropout: float = 0.0):
        super().__init__()
        self.layer1 = GCNLayer(F_in, check_int(hidden, "hidden", 1))
        self.layer2 = GCNLayer(hidden, check_int(n_classes, "n_classes", 2), activation=None)
        self.dropout = check_number(dropout, "dropout", 0, 1, high_open=True)

    def embed(self, X: torch.Tensor, A_bar: torch.Tensor) -> torch.Tensor:
        """The hidden node features ReLU(A_bar X W0), (M, hidden)."""
        return self.layer1(F.dropout(X, self.dropout, self.training), A_bar)

    def forward(self, X: torch.Tensor, A_bar: torch.Tensor) -> torch.Tensor:
        return self.layer2(F.dropout(self.embed(X, A_bar), self.dropout, self.training), A_bar)


class GCNTraining(NamedTuple):
    model: GCN  # the trained model (in eval mode)
    losses: np.ndarray  # training loss (cross-entropy on the labelled nodes) of every epoch, (epochs,)
    predicted: np.ndarray  # predicted class of every node, (M,)
    accuracy: float  # accuracy on the unlabelled nodes
    proba: np.ndarray  # predicted class probabilities (softmax of the logits) of every node, (M, n_classes)


def train_gcn(
    X,
    A,
    y,
    labelled,
    *,
    hidden: int = 16,
    epochs: int = 200,
    lr: float = 0.01,
    weight_decay: float = 5e-4,
    dropout: float = 0.0,
    progress: bool = True,
) -> GCNTraining:
    """Semi-supervised node classification: a two-layer `GCN` on features X (M, F) and the graph A (M, M,
    0/1, normalised here by `gcn_norm_adj`), trained with Adam on the cross-entropy of the ``labelled`` nodes
    only, :math:`-\\frac{1}{|L|}\\sum_{m \\in L} \\log p_{m, y_m}`, one full-batch step of
    `dlnotes.training.train_steps` per epoch (a bar unless ``progress=False``); the accuracy is measured on
    all other nodes.

    The weights are drawn from torch's generator (seeded by ``seed_everything``); the model trains on
    ``device()`` and is returned in eval mode.
    """
    X = check_matrix(X, "X")
    A_bar = gcn_norm_adj(check_adjacency(A, "A", len(X)))
    y = check_labels(y, "y", len(X))
    labelled = np.unique(check_nodes(labelled, "labelled", len(X)))
    if len(labelled) == len(X):
        raise ValueError("labelled must leave at least one node unlabelled to measure the accuracy")
    n_classes = max(int(y.max()) + 1, 2)
    epochs = check_int(epochs, "epochs", 1)
    dev = device()
    model = GCN(X.shape[1], hidden, n_classes, dropout=dropout).to(dev)
    Xt = torch.as_tensor(X, dtype=torch.float32, device=dev)
    At = torch.as_tensor(A_bar, dtype=torch.float32, device=dev)
    yt, idx = torch.as_tensor(y, device=dev), torch.as_tensor(labelled, device=dev)
    optimizer = torch.optim.Adam(
        model.parameters(),
        lr=check_positive(lr, "lr"),
        weight_decay=check_number(weight_decay, "weight_decay", 0),
    )

    def loss(model, graph):
        X_graph, A_graph = graph
        return F.cross_entropy(model(X_graph, A_graph)[idx], yt[idx])

    graph = (Xt, At)  # full batch: every step sees the whole graph
    losses = train_steps(
        model, loss, optimizer, itertools.repeat(graph), epochs, progress=progress, desc="training GCN"
    )
    model.eval()
    with torch.no_grad():
        proba = to_numpy(torch.softmax(model(Xt, At), dim=1)).astype(np.float64)
    predicted = proba.argmax(1)
    rest = np.setdiff1d(np.arange(len(X)), labelled)
    return GCNTraining(model, losses, predicted, float((predicted[rest] == y[rest]).mean()), proba)


def label_propagation(A, y, labelled, alpha: float = 0.9) -> np.ndarray:
    """Scores of untrained label propagation (Zhou et al., 2004, with the GCN matrix), F = (I - alpha A_bar)^{-1}
    Y_0, (M, n_classes): Y_0 holds the one-hot labels of the ``labelled`` nodes and zeros elsewhere, and
    F = sum_k alpha^k A_bar^k Y_0 spreads them along the walks of the graph. Predict with ``F.argmax(1)``.
    A (M, M) 0/1 adjacency, y (M,) labels (only those of ``labelled`` are read), 0 < alpha < 1.
    """
    A_bar = gcn_norm_adj(A)
    M = len(A_bar)
    y = check_labels(y, "y", M)
    labelled = check_nodes(labelled, "labelled", M)
    alpha = check_number(alpha, "alpha", 0, 1, low_open=True, high_open=True)
    Y0 = np.zeros((M, max(int(y.max()) + 1, 2)))
    Y0[labelled, y[labelled]] = 1.0
    return np.linalg.solve(np.eye(M) - alpha * A_bar, Y0)


class NodeTask(NamedTuple):
    A: np.ndarray  # adjacency (M, M), 0/1, symmetric, zero diagonal
    X: np.ndarray  # node features (M, F)
    y: np.ndarray  # class of every node (M,)


def make_sbm_task(
    sizes=(100, 100), p_in: float = 0.05, p_out: float = 0.02, F: int = 16, signal: float = 0.5, rng=None
) -> NodeTask:
    """A node-classification task whose graph and features both carry part of the answer: a stochastic block
    model (one block per class; an edge inside a block with probability ``p_in``, between blocks ``p_out``)
    and noisy features ``x_m = signal * mu_{y_m} + N(0, I_F)`` with one random unit vector mu_c per class.
    Nodes are ordered by class (block 0 first)."""
    sizes = [check_int(s, "sizes[i]", 1) for s in np.atleast_1d(sizes)]
    if len(sizes) < 2:
        raise ValueError(f"sizes must give at least two blocks (classes), got {sizes}")
    p_in, p_out = check_number(p_in, "p_in", 0, 1), check_number(p_out, "p_out", 0, 1)
    F, signal = check_int(F, "F", 1), check_number(signal, "signal", 0)
    rng = check_rng(rng)
    y = np.repeat(np.arange(len(sizes)), sizes)
    upper = np.triu(rng.random((len(y), len(y))) < np.where(y[:, None] == y[None, :], p_in, p_out), 1)
    mu = rng.normal(size=(len(sizes), F))
    mu /= np.linalg.norm(mu, axis=1, keepdims=True)
    X = signal * mu[y] + rng.normal(size=(len(y), F))
    return NodeTask((upper | upper.T).astype(np.float64), X, y)
