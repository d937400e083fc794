"""Graded exercises of chapter 07 — geometric deep learning."""

from __future__ import annotations

import numpy as np

from ..gdl import chebyshev_filter, gcn_norm_adj, laplacian, segmentation_features
from .core import Hint, close, grader

# ----------------------------------------------------------------------------- 7.1 symmetry


def permute_graph_reference(X, A, pi):
    """(P X, P A P^T) with the permutation matrix P = I[pi], P[i, pi[i]] = 1."""
    P = np.eye(len(pi))[pi]
    return P @ X, P @ A @ P.T


def _graphs_and_permutations(rng):
    cases = []
    for M in (4, 6, 9):
        upper = np.triu(rng.random((M, M)) < 0.4, 1)
        pi = rng.permutation(M)
        while np.array_equal(np.argsort(pi), pi):  # not an involution: pi and its inverse differ
            pi = rng.permutation(M)
        cases.append((rng.normal(size=(M, 3)), (upper + upper.T).astype(float), pi))
    return cases


grade_permute_graph = grader(
    "permute_graph",
    "X, A, pi",
    permute_graph_reference,
    _graphs_and_permutations,
    hints=(
        Hint(
            lambda a, e, g: close(a[1][a[2]], g[1]),
            "a node indexes both the rows and the columns of A: permute both, P A P^T (A[pi][:, pi]), not P A.",
        ),
        Hint(
            lambda a, e, g: close((np.eye(len(a[2]))[a[2]] @ a[1] @ np.eye(len(a[2]))[a[2]]), g[1]),
            "undo the permutation on the column side with the transpose: P A P^T, not P A P "
            "(the two agree only when P = P^T).",
        ),
        Hint(
            lambda a, e, g: close(permute_graph_reference(a[0], a[1], np.argsort(a[2])), g),
            "row i of P X is row pi[i] of X (P = np.eye(M)[pi]); you used the inverse permutation.",
        ),
    ),
    mistakes=(
        (lambda X, A, pi: (X[pi], A[pi]), "both the rows and the columns"),
        (lambda X, A, pi: permute_graph_reference(X, A, np.argsort(pi)), "inverse permutation"),
        (lambda X, A, pi: (X[pi], np.eye(len(pi))[pi] @ A @ np.eye(len(pi))[pi]), "not P A P"),
    ),
)


# ----------------------------------------------------------------------------- 7.2 Deep Sets


def equivariant_layer_reference(X, Lam, Gam, b):
    """The linear equivariant set layer y_m = x_m Lam + (sum_k x_k) Gam + b, i.e. X Lam + 1 1^T X Gam + 1 b^T."""
    ones = np.ones((len(X), 1))
    return X @ Lam + ones @ ones.T @ X @ Gam + ones @ b[None]


def _sets_and_weights(rng):
    return [
        (
            rng.normal(size=(M, d_in)),
            rng.normal(size=(d_in, d_out)),
            rng.normal(size=(d_in, d_out)),
            rng.normal(size=d_out),
        )
        for M, d_in, d_out in [(3, 2, 2), (5, 4, 3), (8, 3, 5)]
    ]


grade_equivariant_layer = grader(
    "equivariant_layer",
    "X, Lam, Gam, b",
    equivariant_layer_reference,
    _sets_and_weights,
    hints=(
        Hint(
            lambda a, e, g: close(a[0] @ a[1] + a[0].mean(0) @ a[2] + a[3], g),
            "pool with the sum over the elements, sum_k x_k (X.sum(axis=0)), not the mean.",
        ),
        Hint(
            lambda a, e, g: close(np.broadcast_to(a[0].sum(0) @ a[2] + a[3], e.shape), g),
            "every output row needs its own term x_m Lam: without it all rows are equal (invariant, not equivariant).",
        ),
        Hint(
            lambda a, e, g: close(a[0] @ a[1] + a[0].sum(0) @ a[2], g),
            "add the bias b to every row: y_m = x_m Lam + (sum_k x_k) Gam + b.",
        ),
        Hint(
            lambda a, e, g: close(a[0] @ a[1] + a[0] @ a[2] + a[3], g),
            "the second term pools over all elements: (sum_k x_k) Gam, the same for every row, not x_m Gam.",
        ),
    ),
    mistakes=(
        (lambda X, Lam, Gam, b: X @ Lam + X.mean(0) @ Gam + b, "not the mean"),
        (lambda X, Lam, Gam, b: np.broadcast_to(X.sum(0) @ Gam + b, (len(X), len(b))), "its own term"),
        (lambda X, Lam, Gam, b: X @ Lam + X @ Gam + b, "pools over all elements"),
        (lambda X, Lam, Gam, b: X @ Lam + X.sum(0) @ Gam, "add the bias"),
    ),
)


# ----------------------------------------------------------------------------- 7.2 PointNet


def _trunk_cases(rng):
    return [
        (
            rng.normal(size=(M, 3)),
            rng.normal(size=(3, F1)),
            rng.normal(size=F1),
            rng.normal(size=(F1, F2)),
            rng.normal(size=F2),
        )
        for M, F1, F2 in [(5, 4, 6), (9, 6, 3), (12, 5, 8)]
    ]


def _seg_features_with(X, W1, b1, W2, b2, pool=np.max, axis=0, local_first=True):
    H = np.maximum(X @ W1 + b1, 0)
    g = pool(np.maximum(H @ W2 + b2, 0), axis=axis)
    G = np.tile(g, (len(X), 1))
    return np.hstack([H, G] if local_first else [G, H])


grade_segmentation_features = grader(
    "segmentation_features",
    "X, W1, b1, W2, b2",
    segmentation_features,
    _trunk_cases,
    hints=(
        Hint(
            lambda a, e, g: close(_seg_features_with(*a, pool=np.mean), g),
            "PointNet pools with the coordinate-wise maximum over the points, not the mean.",
        ),
        Hint(
            lambda a, e, g: close(_seg_features_with(*a, pool=np.sum), g),
            "PointNet pools with the coordinate-wise maximum over the points, not the sum.",
        ),
        Hint(
            lambda a, e, g: close(_seg_features_with(*a, local_first=False), g),
            "row m is [h_m, g]: the point's local feature first, then the global feature.",
        ),
        Hint(
            lambda a, e, g: np.shape(g) != np.shape(e),
            "the result is (M, F1 + F2): g has one entry per feature (the max over the points, axis 0), "
            "repeated on every row.",
        ),
    ),
    mistakes=(
        (lambda X, W1, b1, W2, b2: _seg_features_with(X, W1, b1, W2, b2, pool=np.mean), "not the mean"),
        (
            lambda X, W1, b1, W2, b2: _seg_features_with(X, W1, b1, W2, b2, local_first=False),
            "local feature first",
        ),
        (lambda X, W1, b1, W2, b2: _seg_features_with(X, W1, b1, W2, b2, axis=1), "max over the points"),
        (lambda X, W1, b1, W2, b2: _seg_features_with(X, W1, b1, W2, b2, pool=np.sum), "not the sum"),
    ),
)


# ----------------------------------------------------------------------------- 7.3 message passing and GCN


def _connected_graphs(rng):
    """Adjacency matrices of a few connected graphs: a cycle plus random chords, and a star."""
    graphs = []
    for M in (4, 7, 10):
        A = np.zeros((M, M))
        for i in range(M):
            A[i, (i + 1) % M] = A[(i + 1) % M, i] = 1
        extra = np.triu(rng.random((M, M)) < 0.3, 2)
        A = np.maximum(A, extra + extra.T)
        np.fill_diagonal(A, 0)
        graphs.append((A,))
    star = np.zeros((5, 5))
    star[0, 1:] = star[1:, 0] = 1
    return [*graphs, (star,)]


def _without_self_loops(A):
    s = 1 / np.sqrt(A.sum(1))
    return s[:, None] * A * s


def _no_plus_one(A):
    s = 1 / np.sqrt(A.sum(1))
    return s[:, None] * (A + np.eye(len(A))) * s


def _elementwise_diagonal(A):
    D_inv_sqrt = np.diag(1 / np.sqrt(1 + A.sum(1)))
    return D_inv_sqrt * (A + np.eye(len(A))) * D_inv_sqrt


def _row_normalised(A):
    A_loop = A + np.eye(len(A))
    return A_loop / A_loop.sum(1, keepdims=True)


grade_gcn_matrix = grader(
    "gcn_matrix",
    "A",
    gcn_norm_adj,
    _connected_graphs,
    hints=(
        Hint(
            lambda a, e, g: close(_without_self_loops(a[0]), g),
            "add the self-loops: each node keeps its own features, A + I, with degrees d~ = 1 + d.",
        ),
        Hint(
            lambda a, e, g: close(_no_plus_one(a[0]), g),
            "normalise with the degrees of A + I, d~_m = 1 + d_m, not with the degrees d_m of A.",
        ),
        Hint(
            lambda a, e, g: close(_elementwise_diagonal(a[0]), g),
            "multiply the matrices with @, D~^{-1/2} @ (A + I) @ D~^{-1/2}: the element-wise * with a diagonal "
            "matrix keeps only the diagonal.",
        ),
        Hint(
            lambda a, e, g: close(_row_normalised(a[0]), g),
            "normalise symmetrically, D~^{-1/2} (A + I) D~^{-1/2}; D~^{-1} (A + I) is the row-wise mean, "
            "not symmetric.",
        ),
    ),
    mistakes=(
        (_without_self_loops, "self-loops"),
        (_no_plus_one, "1 + d_m"),
        (_row_normalised, "symmetrically"),
        (_elementwise_diagonal, "element-wise"),
    ),
)


# ----------------------------------------------------------------------------- 7.3 depth, attention; 7.4 Weisfeiler-Lehman


def gat_attention_reference(X, A, W, a):
    """The GAT coupling Q (M, M): e_ij = LeakyReLU_0.2(a^T [z_i || z_j]), z = X W, softmax over j in N(i) and i."""
    return _gat_with(X, A, W, a)


def _gat_with(X, A, W, a, *, self_loops=True, masked=True, axis=1, slope=0.2):
    """The coupling as the reference computes it, or with one typical mistake: no self-loops, no mask (every
    j attends), normalised over the other axis, or no LeakyReLU (slope 1)."""
    Z = X @ W
    s = (Z @ a[: W.shape[1]])[:, None] + (Z @ a[W.shape[1] :])[None, :]
    e = np.where(s > 0, s, slope * s)
    if masked:
        e = np.where((A + np.eye(len(A)) if self_loops else A) > 0, e, -np.inf)
    q = np.exp(e - e.max(axis=axis, keepdims=True))
    return q / q.sum(axis=axis, keepdims=True)


def _gat_no_self_loops(X, A, W, a):
    return _gat_with(X, A, W, a, self_loops=False)


def _gat_unmasked(X, A, W, a):
    return _gat_with(X, A, W, a, masked=False)


def _gat_columns(X, A, W, a):
    return _gat_with(X, A, W, a, axis=0)


def _gat_no_leaky_relu(X, A, W, a):
    return _gat_with(X, A, W, a, slope=1.0)


def _gat_torch_slope(X, A, W, a):
    return _gat_with(X, A, W, a, slope=0.01)


def _gat_cases(rng):
    cases = []
    for M, F_in, F_out in [(5, 3, 2), (7, 4, 3), (6, 2, 4)]:
        A = np.zeros((M, M))
        for i in range(M - 1):  # a path keeps the graph connected
            A[i, i + 1] = A[i + 1, i] = 1
        extra = np.triu(rng.random((M, M)) < 0.3, 2)
        A = np.maximum(A, extra + extra.T)
        cases.append(
            (rng.normal(size=(M, F_in)), A, rng.normal(size=(F_in, F_out)), rng.normal(size=2 * F_out))
        )
    return cases


grade_gat_attention = grader(
    "gat_attention",
    "X, A, W, a",
    gat_attention_reference,
    _gat_cases,
    hints=(
        Hint(
            lambda a, e, g: close(_gat_no_self_loops(*a), g),
            "include node i itself: softmax over N(i) and i, i.e. the non-zero entries of A + I.",
        ),
        Hint(
            lambda a, e, g: close(_gat_unmasked(*a), g),
            "mask the scores: q_ij = 0 when j is not a neighbour of i (set e_ij = -inf before the softmax).",
        ),
        Hint(
            lambda a, e, g: close(_gat_columns(*a), g),
            "normalise each row (over j for a fixed query i): the rows of Q sum to 1, not the columns.",
        ),
        Hint(
            lambda a, e, g: close(_gat_no_leaky_relu(*a), g),
            "apply the LeakyReLU (slope 0.2 for negative scores) to a^T [z_i || z_j] before the softmax.",
        ),
        Hint(
            lambda a, e, g: close(_gat_torch_slope(*a), g),
            "GAT's LeakyReLU has the negative slope 0.2; 0.01 is torch's default "
            "(F.leaky_relu(s, negative_slope=0.2)).",
        ),
    ),
    mistakes=(
        (_gat_no_self_loops, "include node i itself"),
        (_gat_unmasked, "mask the scores"),
        (_gat_columns, "normalise each row"),
        (_gat_no_leaky_relu, "apply the LeakyReLU"),
        (_gat_torch_slope, "torch's default"),
    ),
)


# ----------------------------------------------------------------------------- 7.5 spectral graph theory


def chebyshev_filter_reference(L, thetas, lam_max):
    """sum_k theta_k T_k(L^), L^ = 2 L / lam_max - I, T_0 = I, T_1 = L^, T_k = 2 L^ T_{k-1} - T_{k-2}."""
    return chebyshev_filter(L, thetas, lam_max)


def _chebyshev_with(rescale, factor=2.0, *, T_0=np.eye, product=np.matmul):
    """A Chebyshev filter with one typical mistake: another rescaling of L, another factor in the recursion, T_0
    as the scalar 1 (``T_0=np.ones``: it broadcasts to the all-ones matrix) or the element-wise product in the
    recursion (``product=np.multiply``)."""

    def wrong(L, thetas, lam_max):
        L_hat = rescale(np.asarray(L, dtype=float), lam_max)
        T = [T_0((len(L_hat), len(L_hat))) if T_0 is np.ones else T_0(len(L_hat)), L_hat]
        for _ in range(2, len(thetas)):
            T.append(factor * product(L_hat, T[-1]) - T[-2])
        return sum(theta * T_k for theta, T_k in zip(thetas, T, strict=False))

    return wrong


def _right_rescale(L, lam_max):
    return 2 * L / lam_max - np.eye(len(L))


def _rescale_with_two(L, lam_max):
    return 2 * L / 2.0 - np.eye(len(L))


def _rescale_with_eigvalsh(L, lam_max):
    return 2 * L / np.linalg.eigvalsh(L)[-1] - np.eye(len(L))


def _chebyshev_cases(rng):
    cases = []
    for M, K in [(6, 3), (8, 2), (7, 4), (5, 1)]:
        A = np.triu((rng.random((M, M)) < 0.5).astype(float), 1)
        A[np.arange(M - 1), np.arange(1, M)] = 1.0  # a path through all nodes: connected, no isolated node
        L = laplacian(A + A.T, normalized=True)
        lam_max = float(np.linalg.eigvalsh(L)[-1]) if K % 2 else 2.0
        cases.append((L, rng.normal(size=K + 1), lam_max))
    return cases


grade_chebyshev_filter = grader(
    "chebyshev_filter",
    "L, thetas, lam_max",
    chebyshev_filter_reference,
    _chebyshev_cases,
    hints=(
        Hint(
            lambda a, e, g: close(_chebyshev_with(lambda L, lam_max: L)(*a), g),
            "rescale first: the polynomials act on L^ = 2 L / lam_max - I (spectrum in [-1, 1]), not on L.",
        ),
        Hint(
            lambda a, e, g: close(_chebyshev_with(lambda L, lam_max: 2 * L / lam_max)(*a), g),
            "subtract the identity: L^ = 2 L / lam_max - I maps the spectrum [0, lam_max] onto [-1, 1].",
        ),
        Hint(
            lambda a, e, g: close(_chebyshev_with(_right_rescale, factor=1.0)(*a), g),
            "the recursion has a factor 2: T_k = 2 L^ T_{k-1} - T_{k-2}.",
        ),
        Hint(
            lambda a, e, g: close(_chebyshev_with(_right_rescale, T_0=np.ones)(*a), g),
            "T_0 is the identity matrix I, not the scalar 1: a 1 added to a matrix broadcasts to all-ones.",
        ),
        Hint(
            lambda a, e, g: close(_chebyshev_with(_right_rescale, product=np.multiply)(*a), g),
            "the recursion multiplies matrices, 2 L^ @ T_{k-1}: the element-wise * is not a polynomial in L.",
        ),
        Hint(
            lambda a, e, g: close(_chebyshev_with(_rescale_with_two)(*a), g),
            "use the lam_max you are given: L^ = 2 L / lam_max - I, not always 2 L / 2 - I.",
        ),
        Hint(
            lambda a, e, g: close(_chebyshev_with(_rescale_with_eigvalsh)(*a), g),
            "use the lam_max you are given (it may be the bound 2), not the largest eigenvalue you compute.",
        ),
        Hint(
            lambda a, e, g: np.shape(g) != np.shape(e),
            "the filter is a matrix (M, M): sum_k theta_k T_k(L^), with T_0 = I the identity matrix.",
        ),
    ),
    mistakes=(
        (_chebyshev_with(lambda L, lam_max: L), "rescale first"),
        (_chebyshev_with(lambda L, lam_max: 2 * L / lam_max), "subtract the identity"),
        (_chebyshev_with(_right_rescale, factor=1.0), "factor 2"),
        (_chebyshev_with(_right_rescale, T_0=np.ones), "not the scalar 1"),
        (_chebyshev_with(_right_rescale, product=np.multiply), "element-wise"),
        (_chebyshev_with(_rescale_with_two), "not always 2 L / 2"),
        (_chebyshev_with(_rescale_with_eigvalsh), "largest eigenvalue you compute"),
    ),
)


# ----------------------------------------------------------------------------- 7.6 graph learning in practice


def scatter_mean_reference(messages, receivers, M):
    """(M, F): the mean of the messages (E, F) that each node receives (receivers (E,)), 0 where none arrives."""
    return _scatter_mean_with(messages, receivers, M)


def _scatter_mean_with(messages, receivers, M, *, buffered=False, divide="count"):
    """The scatter mean as the reference computes it, or with one typical mistake: a buffered fancy-index
    ``+=`` (one message per receiver survives), no mean (the sum), or a division by the raw count (0/0 = nan)."""
    total = np.zeros((M, messages.shape[1]))
    if buffered:
        total[receivers] += messages
    else:
        np.add.at(total, receivers, messages)
    count = np.bincount(receivers, minlength=M).astype(float)[:, None]
    if divide == "sum":
        return total
    with np.errstate(invalid="ignore", divide="ignore"):
        return total / (count if divide == "raw" else np.maximum(count, 1))


def _scatter_cases(rng):
    cases = []
    for M, E, F in [(5, 9, 2), (8, 20, 3), (6, 4, 1)]:
        receivers = rng.integers(M - 1, size=E)  # the last node receives nothing
        receivers[:2] = 0  # node 0 receives at least two messages
        cases.append((rng.normal(size=(E, F)), receivers, M))
    return cases


grade_scatter_mean = grader(
    "scatter_mean",
    "messages, receivers, M",
    scatter_mean_reference,
    _scatter_cases,
    hints=(
        Hint(
            lambda a, e, g: close(_scatter_mean_with(*a, buffered=True), g),
            "out[receivers] += messages adds only one message per receiver (the fancy-indexed += is buffered): "
            "use np.add.at(out, receivers, messages).",
        ),
        Hint(
            lambda a, e, g: close(_scatter_mean_with(*a, divide="sum"), g),
            "divide each node's sum by the number of messages it receives (np.bincount(receivers, minlength=M)).",
        ),
        Hint(
            lambda a, e, g: np.shape(g) == np.shape(e) and bool(np.isnan(np.asarray(g, dtype=float)).any()),
            "a node that receives no message must get 0, not 0/0 = nan: divide by max(count, 1).",
        ),
    ),
    mistakes=(
        (lambda m, r, M: _scatter_mean_with(m, r, M, buffered=True), "np.add.at"),
        (lambda m, r, M: _scatter_mean_with(m, r, M, divide="sum"), "number of messages"),
        (lambda m, r, M: _scatter_mean_with(m, r, M, divide="raw"), "not 0/0"),
    ),
)
