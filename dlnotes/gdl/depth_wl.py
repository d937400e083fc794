"""Sections 7.3–7.4 of chapter 07 (notebook 05_depth_attention_wl): depth, attention and the Weisfeiler-Lehman
test. The receptive field of stacked message-passing layers (node influence by autograd), oversmoothing of
deep GCNs, the graph attention (GAT) and graph isomorphism network (GIN) layers, and 1-WL colour refinement.

A graph is a symmetric adjacency matrix A (M, M) with zero diagonal, its node features X (M, F), one node per
row; the GCN matrix A_bar is `dlnotes.gdl.graphs.gcn_norm_adj` (A).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import NamedTuple

import networkx as nx
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..training import to_numpy
from ..validation import check_array, check_callable, check_int, check_number, check_positive
from .common import check_symmetric


def node_influence(f: Callable, X) -> np.ndarray:
    """How much each output row of a node map depends on each input row: ``I[i, j] = sum_ab |d f(X)_ia / d X_jb|``.

    `f` maps a torch tensor X (M, F) to node features (M, F'); the Jacobian is taken by autograd at `X`
    (float64). ``I[i, j] != 0`` means that node j lies in the receptive field of node i: after k message-passing
    layers this is the case only when dist(i, j) <= k.
    """
    f = check_callable(f, "f")
    X = torch.as_tensor(check_array(X, "X", ndim=2))
    H = f(X)
    if not isinstance(H, torch.Tensor) or H.ndim != 2 or H.shape[0] != X.shape[0]:
        raise ValueError(
            f"f must return a tensor (M, F') with one row per node (M = {X.shape[0]}), got "
            f"{getattr(H, 'shape', type(H).__name__)}"
        )
    J = torch.autograd.functional.jacobian(f, X)  # (M, F', M, F)
    return to_numpy(J.abs().sum(dim=(1, 3)))


class Oversmoothing(NamedTuple):
    distances: np.ndarray  # ||A_bar^k X - u u^T X||_F for each k
    bound: np.ndarray  # |lambda_2|^k ||X - u u^T X||_F, an upper bound of the distances
    u: np.ndarray  # the top eigenvector of A_bar (M,), positive
    lam2: float  # |lambda_2|, the second-largest eigenvalue modulus of A_bar


def oversmoothing_curve(X, A_bar, ks) -> Oversmoothing:
    """Distance of ``A_bar^k X`` from its limit ``u u^T X`` for each k in `ks`.

    For a connected graph the GCN matrix A_bar has the simple top eigenvalue 1 with eigenvector
    u = D~^{1/2} 1 / ||D~^{1/2} 1|| and all other eigenvalues in (-1, 1), so
    ``||A_bar^k X - u u^T X||_F <= |lambda_2|^k ||X - u u^T X||_F -> 0``: deep linear GCN features collapse
    onto the rows sqrt(d~_i) c^T of one common vector c.
    """
    A_bar = check_symmetric(A_bar, "A_bar")
    X = check_array(X, "X", (len(A_bar), None))
    ks = [check_int(k, "ks[i]", 0) for k in np.atleast_1d(ks)]
    lam, U = np.linalg.eigh(A_bar)
    order = np.argsort(-np.abs(lam))
    if not np.isclose(lam[order[0]], 1.0) or np.isclose(abs(lam[order[1]]), 1.0):
        raise ValueError(
            "A_bar must have a simple top eigenvalue 1 and all others in (-1, 1) (a GCN matrix of a connected "
            f"graph), got eigenvalues {lam[order[0]]:.4g} and {lam[order[1]]:.4g}"
        )
    u = U[:, order[0]] * np.sign(U[:, order[0]].sum())
    limit = np.outer(u, u @ X)
    lam2 = float(abs(lam[order[1]]))
    dist, Xk, done = [], X.copy(), 0
    for k in sorted(set(ks)):
        for _ in range(k - done):
            Xk = A_bar @ Xk
        done = k
        dist.append((k, np.linalg.norm(Xk - limit)))
    dist = dict(dist)
    start = np.linalg.norm(X - limit)
    return Oversmoothing(np.array([dist[k] for k in ks]), np.array([lam2**k * start for k in ks]), u, lam2)


def pair_norm(H: torch.Tensor, s: float = 1.0) -> torch.Tensor:
    """PairNorm (Zhao and Akoglu, 2020): centre the node features, ``H~ = H - 1 mean_m(h_m)^T``, then scale all
    rows together so that their mean squared norm is s^2, ``s H~ / sqrt(mean_m ||h~_m||^2)``. The mean pairwise
    squared distance between the rows is then fixed (2 s^2), so stacked layers cannot collapse the nodes onto
    one vector. H (M, F) a tensor."""
    if not isinstance(H, torch.Tensor) or H.ndim != 2:
        raise ValueError(f"H must be a tensor (M, F), got {getattr(H, 'shape', type(H).__name__)}")
    s = check_positive(s, "s")
    centred = H - H.mean(dim=0, keepdim=True)
    return s * centred / centred.pow(2).sum(dim=1).mean().clamp_min(1e-30).sqrt()


def _node_inputs(X, A, F_in: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Node features X (M, F_in), a tensor, and the graph A (M, M) as a tensor of X's dtype on X's device."""
    if not isinstance(X, torch.Tensor) or X.ndim != 2 or X.shape[1] != F_in:
        raise ValueError(f"X must be a tensor (M, {F_in}), got {getattr(X, 'shape', type(X))}")
    A = torch.as_tensor(A, dtype=X.dtype, device=X.device)
    M = X.shape[0]
    if A.shape != (M, M):
        raise ValueError(f"A must have shape ({M}, {M}), got shape {tuple(A.shape)}")
    return X, A


class GATLayer(nn.Module):
    """A graph attention layer (Velickovic et al. 2018), one head: ``x_i' = sigma(sum_j q_ij z_j)``, z = X W.

    Scores ``e_ij = LeakyReLU(a^T [z_i || z_j])`` (slope `slope`), attention ``q_ij = softmax_j e_ij`` over the
    neighbours j of i, including i itself when ``self_loops=True`` (the paper's choice: A + I). W is (F_in,
    F_out), a is (2 F_out,). `activation` is sigma (None: the identity). ``forward(X, A)``: X (M, F_in) a
    tensor, A (M, M) a tensor or an array (moved to X's device and dtype) -> (M, F_out).
    """

    def __init__(
        self, F_in: int, F_out: int, *, slope: float = 0.2, self_loops: bool = True, activation=None
    ) -> None:
        super().__init__()
        F_in, F_out = check_int(F_in, "F_in", 1), check_int(F_out, "F_out", 1)
        self.slope = check_number(slope, "slope", 0, 1)
        self.self_loops = bool(self_loops)
        self.activation = activation if activation is None else check_callable(activation, "activation")
        self.W = nn.Parameter(torch.randn(F_in, F_out) * (2.0 / (F_in + F_out)) ** 0.5)
        self.a = nn.Parameter(torch.randn(2 * F_out) * F_out**-0.5)

    def scores(self, X) -> torch.Tensor:
        """All scores e_ij (M, M), for every pair i, j, before masking by the graph."""
        Z = X @ self.W.to(X.dtype)
        a = self.a.to(X.dtype)
        F_out = Z.shape[1]
        s = (Z @ a[:F_out])[:, None] + (Z @ a[F_out:])[None, :]
        return F.leaky_relu(s, self.slope)

    def attention(self, X, A) -> torch.Tensor:
        """The coupling Q (M, M): rows sum to 1 over the neighbours (and i), zero off the graph."""
        X, A = _node_inputs(X, A, self.W.shape[0])
        if self.self_loops:
            A = A + torch.eye(len(A), dtype=A.dtype, device=A.device)
        mask = A > 0
        if not mask.any(dim=1).all():
            raise ValueError("every node needs a neighbour (an isolated node without self_loops has none)")
        return torch.softmax(self.scores(X).masked_fill(~mask, -torch.inf), dim=1)

    def forward(self, X, A) -> torch.Tensor:
        H = self.attention(X, A) @ (X @ self.W.to(X.dtype))
        return H if self.activation is None else self.activation(H)


class GINLayer(nn.Module):
    """A graph isomorphism network layer (Xu et al. 2019): ``x_i' = MLP((1 + eps) x_i + sum_{j in N(i)} x_j)``.

    The sum keeps multiplicities and the MLP (two linear maps with a ReLU between, `hidden` units) can be
    injective on them, so stacked GIN layers separate what 1-WL colour refinement separates.
    ``forward(X, A)``: X (M, F_in) a tensor, A (M, M) -> (M, F_out); the sum is formed in X's dtype and cast
    to the layer's (float32, or float64 after ``.double()``), so the output has the layer's dtype.
    """

    def __init__(self, F_in: int, F_out: int, *, hidden: int = 16, eps: float = 0.0) -> None:
        super().__init__()
        F_in, F_out = check_int(F_in, "F_in", 1), check_int(F_out, "F_out", 1)
        self.eps = check_number(eps, "eps")
        self.mlp = nn.Sequential(
            nn.Linear(F_in, check_int(hidden, "hidden", 1)), nn.ReLU(), nn.Linear(hidden, F_out)
        )

    def forward(self, X, A) -> torch.Tensor:
        X, A = _node_inputs(X, A, self.mlp[0].in_features)
        H = (1 + self.eps) * X + A @ X
        return self.mlp(H.to(self.mlp[0].weight.dtype))


def _check_graphs(graphs) -> list:
    if isinstance(graphs, nx.Graph) or not isinstance(graphs, (list, tuple)) or not graphs:
        raise TypeError("graphs must be a non-empty list of networkx graphs")
    for i, G in enumerate(graphs):
        if not isinstance(G, nx.Graph) or G.is_directed():
            raise TypeError(f"graphs[{i}] must be an undirected networkx graph, got {type(G).__name__}")
    return list(graphs)


def wl_colors(graphs, iters: int | None = None) -> list[list[dict]]:
    """1-WL colour refinement of several graphs with ONE shared colour table.

    Every node starts with colour 0; a refinement gives node v the id of its signature
    ``(c_v, sorted multiset of its neighbours' colours)`` in a table shared by all graphs, so equal ids mean
    equal signatures in any of the graphs: ``c_v^{(k+1)} = hash(c_v^{(k)}, {{c_u^{(k)} : u in N(v)}})``.
    `iters` refinements, or (None) until the joint partition is stable. Returns, per graph, the list of its
    colourings c^{(0)}, c^{(1)}, ... (dicts node -> colour id).
    """
    graphs = _check_graphs(graphs)
    if iters is not None:
        iters = check_int(iters, "iters", 0)
    colours = [[{v: 0 for v in G}] for G in graphs]
    k = 0
    while iters is None or k < iters:
        table: dict = {}
        new = []
        for G, cs in zip(graphs, colours, strict=True):
            c = cs[-1]
            sig = {v: (c[v], tuple(sorted(c[u] for u in G[v]))) for v in G}
            new.append({v: table.setdefault(s, len(table)) for v, s in sig.items()})
        n_old = len({c for cs in colours for c in cs[-1].values()})
        for cs, c in zip(colours, new, strict=True):
            cs.append(c)
        k += 1
        if iters is None and len(table) == n_old:
            break
    return colours


def wl_test(G1, G2, iters: int | None = None) -> bool:
    """1-WL verdict on two graphs: False = certainly not isomorphic (their colour histograms differ after some
    refinement), True = 1-WL cannot tell them apart (inconclusive: they may still differ).

    Both graphs are refined together with one shared colour table (`wl_colors`), `iters` times or to stability.
    """
    c1, c2 = wl_colors([G1, G2], iters)
    return all(Counter(a.values()) == Counter(b.values()) for a, b in zip(c1, c2, strict=True))
