"""Chapter 07 — geometric deep learning: groups and permutations, invariance and equivariance testers, Deep Sets
and PointNet, graph data, message passing, the GCN and GAT layers, oversmoothing, Weisfeiler-Lehman colour
refinement, graph Laplacians, the graph Fourier transform and spectral, polynomial and Chebyshev filters.

Conventions: a set or a graph's node features are an array X (M, F), one element / node per row; a graph is a
symmetric adjacency matrix A (M, M) with zero diagonal (float64); a permutation matrix is P = I[pi], so
(P X)[i] = X[pi[i]], and a graph is permuted as (P X, P A P^T).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable
from typing import NamedTuple

import networkx as nx
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from .training import device, to_numpy
from .validation import (
    check_array,
    check_callable,
    check_choice,
    check_int,
    check_labels,
    check_matrix,
    check_number,
    check_positive,
    check_rng,
    check_vector,
)

# ----------------------------------------------------------------------------- 7.1 symmetry


class Permutation(NamedTuple):
    P: np.ndarray  # the permutation matrix (M, M), P[i, pi[i]] = 1
    pi: np.ndarray  # the permutation as an int array (M,): row i of P X is row pi[i] of X


def random_permutation(M: int, rng=None) -> Permutation:
    """A uniformly random permutation pi of ``range(M)``, different from the identity when M >= 2, and its
    matrix ``P = np.eye(M)[pi]``, i.e. :math:`P_{i,\\pi(i)} = 1`, so that ``(P @ X)[i] == X[pi[i]]`` and
    :math:`P^{-1} = P^\\top`."""
    M = check_int(M, "M", 1)
    rng = check_rng(rng)
    pi = rng.permutation(M)
    while M >= 2 and np.array_equal(pi, np.arange(M)):  # uniform over the M! - 1 others
        pi = rng.permutation(M)
    return Permutation(np.eye(M)[pi], pi)


def _as_data(X, name: str):
    """X as it is (a NumPy array or a torch tensor) after checking that it has a first axis of length >= 2."""
    if isinstance(X, torch.Tensor):
        shape = tuple(X.shape)
    elif isinstance(X, np.ndarray):
        shape = X.shape
    else:
        raise TypeError(f"{name} must be a NumPy array or a torch tensor, got {type(X).__name__}")
    if len(shape) == 0 or shape[0] < 2:
        raise ValueError(
            f"{name} must have shape (M, ...) with M >= 2 elements (rows) to permute, got {shape}"
        )
    return X


def _permute(X, pi: np.ndarray, both: bool = False):
    """P X (rows pi), or P X P^T when `both` (rows and columns pi), of the same type and dtype as X."""
    index = torch.as_tensor(pi, device=X.device) if isinstance(X, torch.Tensor) else pi
    out = X[index]
    return out[:, index] if both else out


def _as_float64(y) -> np.ndarray:
    if isinstance(y, torch.Tensor):
        y = to_numpy(y)
    return np.asarray(y, dtype=np.float64)


def _symmetry_test(f, X, A, n, rng, atol, equivariant: bool) -> bool:
    f = check_callable(f, "f")
    X = _as_data(X, "X")
    M = X.shape[0]
    if A is not None:
        A = _as_data(A, "A")
        if tuple(A.shape) != (M, M):
            raise ValueError(
                f"A must have shape ({M}, {M}) (one row and column per row of X), got {tuple(A.shape)}"
            )
    n = check_int(n, "n", 1)
    rng = check_rng(rng)
    atol = check_number(atol, "atol", 0)

    def apply(X_, A_):
        return _as_float64(f(X_) if A_ is None else f(X_, A_))

    y = apply(X, A)
    if equivariant and (y.ndim == 0 or y.shape[0] != M):
        raise ValueError(
            f"f must return one row per element (shape ({M}, ...)) to be equivariant, got {y.shape}"
        )
    for _ in range(n):
        pi = random_permutation(M, rng).pi
        y_perm = apply(_permute(X, pi), None if A is None else _permute(A, pi, both=True))
        target = y[pi] if equivariant else y
        if y_perm.shape != target.shape or not np.allclose(y_perm, target, rtol=0, atol=atol):
            return False
    return True


def check_invariant(f, X, A=None, *, n: int = 10, rng=None, atol: float = 1e-10) -> bool:
    """Whether f is permutation-invariant at X: :math:`f(PX) = f(X)` for `n` random :math:`P \\neq I`, or, with a
    graph A, :math:`f(PX, PAP^\\top) = f(X, A)`.

    X (M, ...) and A (M, M) may be NumPy arrays or torch tensors; the permuted copies have the same type and
    dtype. The outputs are compared as float64 arrays with ``np.allclose(..., rtol=0, atol=atol)``: use
    ``atol=1e-10`` in float64 and about ``1e-5`` (times the output's scale) in float32, where a permutation
    changes the order of summation.
    """
    return _symmetry_test(f, X, A, n, rng, atol, equivariant=False)


def check_equivariant(f, X, A=None, *, n: int = 10, rng=None, atol: float = 1e-10) -> bool:
    """Whether f is permutation-equivariant at X: :math:`f(PX) = P f(X)` for `n` random :math:`P \\neq I`, or, with
    a graph A, :math:`f(PX, PAP^\\top) = P f(X, A)`; f must return one row per element (per node).

    Types, dtypes and tolerance as in `check_invariant`.
    """
    return _symmetry_test(f, X, A, n, rng, atol, equivariant=True)


def permutation_group(M: int) -> np.ndarray:
    """The symmetric group :math:`S_M` as its M! permutation matrices ``np.eye(M)[pi]``, an array (M!, M, M), the
    permutations pi in lexicographic order (the identity first)."""
    M = check_int(M, "M", 1, 7)
    return np.stack([np.eye(M)[list(pi)] for pi in itertools.permutations(range(M))])


def cyclic_shifts(M: int) -> np.ndarray:
    """The cyclic group :math:`C_M` as M permutation matrices (M, M, M): shift s sends row i to row (i + s) mod M,
    ``pi = (arange(M) + s) % M``."""
    M = check_int(M, "M", 1)
    return np.stack([np.eye(M)[(np.arange(M) + s) % M] for s in range(M)])


class GroupAxioms(NamedTuple):
    closure: bool  # g h is in G for all g, h
    associativity: bool  # (g h) k = g (h k)
    identity: bool  # some e in G with e g = g e = g for all g
    inverses: bool  # every g has an h in G with g h = h g = e
    abelian: bool  # g h = h g for all g, h (not an axiom: a property some groups have)


def group_axioms(elements, atol: float = 1e-12) -> GroupAxioms:
    """Check the group axioms for a finite set of square matrices under matrix multiplication by brute force
    over all pairs and triples: closure, associativity, an identity e and inverses :math:`g^{-1}`, and whether
    the group is abelian (:math:`gh = hg`). `elements` is an array (n, d, d) of distinct matrices."""
    G = check_array(elements, "elements", ndim=3)
    if G.shape[1] != G.shape[2]:
        raise ValueError(f"elements must be square matrices, an array (n, d, d), got shape {G.shape}")
    atol = check_number(atol, "atol", 0)
    n = len(G)
    flat = G.reshape(n, -1)

    def index_of(Y):  # index of each matrix of Y (..., d, d) in G, or -1
        dist = np.abs(Y.reshape(-1, 1, flat.shape[1]) - flat[None]).max(axis=2)
        found = dist.min(axis=1) <= atol
        return np.where(found, dist.argmin(axis=1), -1).reshape(Y.shape[:-2])

    products = np.einsum("gij,hjk->ghik", G, G)  # products[g, h] = G[g] @ G[h]
    table = index_of(products)
    closure = bool((table >= 0).all())
    left = np.einsum("ghij,kjl->ghkil", products, G)  # (g h) k
    right = np.einsum("gij,hkjl->ghkil", G, products)  # g (h k)
    associativity = bool(np.allclose(left, right, rtol=0, atol=atol))
    is_identity = [
        np.allclose(products[e], G, rtol=0, atol=atol) and np.allclose(products[:, e], G, rtol=0, atol=atol)
        for e in range(n)
    ]
    identity = any(is_identity)
    inverses = False
    if identity:
        e = is_identity.index(True)
        inverses = bool(((table == e) & (table.T == e)).any(axis=1).all())
    abelian = bool(np.allclose(products, products.transpose(1, 0, 2, 3), rtol=0, atol=atol))
    return GroupAxioms(closure, associativity, identity, inverses, abelian)


# ----------------------------------------------------------------------------- 7.2 Deep Sets


class DigitSets(NamedTuple):
    X: np.ndarray  # (n, max_size, F) the elements of each set, padded with zero rows
    mask: np.ndarray  # (n, max_size) bool, True where a row is an element
    labels: np.ndarray  # (n, max_size) the elements' labels, -1 on padding rows
    y: np.ndarray  # (n,) the target: the sum of the labels of each set


def make_digit_sets(images, labels, n: int, *, sizes=(2, 5), rng=None) -> DigitSets:
    """`n` random sets of images, each of a size drawn uniformly from ``sizes[0]..sizes[1]`` (distinct images
    within a set), with the target :math:`y = \\sum_{m} \\text{label}_m`. `images` (N, F) are flat images
    (e.g. ``load_digits_split().X_train``), `labels` (N,) their classes."""
    images = check_matrix(images, "images")
    labels = check_labels(labels, "labels", len(images))
    n = check_int(n, "n", 1)
    if not (isinstance(sizes, tuple | list) and len(sizes) == 2):
        raise TypeError(f"sizes must be a pair (smallest, largest set size), got {sizes!r}")
    low = check_int(sizes[0], "sizes[0]", 1)
    high = check_int(sizes[1], "sizes[1]", low, len(images))
    rng = check_rng(rng)
    X = np.zeros((n, high, images.shape[1]))
    mask = np.zeros((n, high), dtype=bool)
    set_labels = np.full((n, high), -1, dtype=np.int64)
    for s, size in enumerate(rng.integers(low, high + 1, size=n)):
        chosen = rng.choice(len(images), size=size, replace=False)
        X[s, :size], mask[s, :size], set_labels[s, :size] = images[chosen], True, labels[chosen]
    return DigitSets(X, mask, set_labels, np.where(mask, set_labels, 0).sum(axis=1).astype(np.float64))


def _set_batch(X: torch.Tensor, mask):
    """X as a batch (B, M, F) and the mask (B, M) (all True when None), and whether X was a single set (M, F)."""
    if not isinstance(X, torch.Tensor) or X.ndim not in (2, 3):
        shape = tuple(X.shape) if isinstance(X, torch.Tensor) else type(X).__name__
        raise ValueError(f"X must be a tensor (M, F) (one set) or (B, M, F) (a batch of sets), got {shape}")
    single = X.ndim == 2
    if single:
        X = X[None]
    if mask is None:
        mask = torch.ones(X.shape[:2], dtype=torch.bool, device=X.device)
    else:
        mask = torch.as_tensor(mask, device=X.device)
        mask = mask[None] if single and mask.ndim == 1 else mask
        if mask.dtype != torch.bool or tuple(mask.shape) != tuple(X.shape[:2]):
            raise ValueError(
                f"mask must be a bool tensor of shape {tuple(X.shape[:2])}, got {tuple(mask.shape)}"
            )
    return X, mask, single


def _pool(H: torch.Tensor, mask: torch.Tensor, pool: str) -> torch.Tensor:
    """The sum / mean / coordinate-wise max of the rows of H (B, M, D) where mask (B, M) is True."""
    if pool == "max":
        return H.masked_fill(~mask[..., None], float("-inf")).max(dim=1).values
    total = (H * mask[..., None].to(H.dtype)).sum(dim=1)
    return total / mask.sum(dim=1, keepdim=True).to(H.dtype) if pool == "mean" else total


class DeepSets(nn.Module):
    """Deep Sets, :math:`f(X) = \\rho\\big(\\bigoplus_{m} \\phi(x_m)\\big)` with a per-element network phi, a pooling
    :math:`\\bigoplus` (``"sum"``, ``"mean"`` or the coordinate-wise ``"max"``) and a readout network rho.

    ``forward(X, mask=None)`` takes one set X (M, F) or a batch (B, M, F) of sets padded to M rows with a bool
    mask (B, M) (True = element); padding rows are ignored.
    """

    def __init__(self, phi: nn.Module, rho: nn.Module, pool: str = "sum"):
        super().__init__()
        for module, name in ((phi, "phi"), (rho, "rho")):
            if not isinstance(module, nn.Module):
                raise TypeError(f"{name} must be a torch.nn.Module, got {type(module).__name__}")
        self.phi, self.rho = phi, rho
        self.pool = check_choice(pool, "pool", ("sum", "mean", "max"))

    def embed(self, X: torch.Tensor, mask=None) -> torch.Tensor:
        """The pooled latent vector :math:`\\bigoplus_m \\phi(x_m)`, (B, D) (or (D,) for one set)."""
        X, mask, single = _set_batch(X, mask)
        z = _pool(self.phi(X), mask, self.pool)
        return z[0] if single else z

    def forward(self, X: torch.Tensor, mask=None) -> torch.Tensor:
        return self.rho(self.embed(X, mask))


class EquivariantSetLayer(nn.Module):
    """The permutation-equivariant linear set layer of Deep Sets,
    :math:`y_m = x_m\\Lambda + \\big(\\bigoplus_k x_k\\big)\\Gamma + b`, i.e. :math:`Y = X\\Lambda + \\mathbf 1
    \\mathbf 1^\\top X\\Gamma + \\mathbf 1 b^\\top` for the sum, with :math:`\\Lambda, \\Gamma` (d_in, d_out): a
    special case of :math:`y_m = \\rho(x_m, \\sum_k \\phi(x_k))`. ``forward(X, mask=None)`` as in `DeepSets`;
    padding rows of the output are zero.
    """

    def __init__(self, d_in: int, d_out: int, pool: str = "sum"):
        super().__init__()
        d_in, d_out = check_int(d_in, "d_in", 1), check_int(d_out, "d_out", 1)
        self.pool = check_choice(pool, "pool", ("sum", "mean", "max"))
        self.Lam = nn.Linear(d_in, d_out)  # x_m Lambda + b
        self.Gam = nn.Linear(d_in, d_out, bias=False)  # (pooled x) Gamma

    def forward(self, X: torch.Tensor, mask=None) -> torch.Tensor:
        X, mask, single = _set_batch(X, mask)
        Y = self.Lam(X) + self.Gam(_pool(X, mask, self.pool))[:, None, :]
        Y = Y * mask[..., None].to(Y.dtype)
        return Y[0] if single else Y


def train_set_model(
    model: nn.Module,
    X,
    mask,
    y,
    *,
    epochs: int = 20,
    batch_size: int = 64,
    lr: float = 1e-3,
    rng=None,
    progress: bool = True,
) -> list[float]:
    """Train a set model ``model(X, mask) -> (B, 1)`` on padded sets X (n, M, F) with mask (n, M) to regress
    targets y (n,) by the mean squared error with Adam (`lr`), `epochs` passes in mini-batches drawn from
    `rng` (with a progress bar unless ``progress=False``); returns the mean training loss of each epoch. The
    model is trained in float32."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    X = check_array(X, "X", ndim=3)
    mask = np.asarray(mask)
    if mask.dtype != bool or mask.shape != X.shape[:2]:
        raise ValueError(f"mask must be a bool array of shape {X.shape[:2]}, got {mask.dtype} {mask.shape}")
    y = check_array(y, "y", (len(X),))
    epochs, batch_size = check_int(epochs, "epochs", 1), check_int(batch_size, "batch_size", 1)
    rng = check_rng(rng)
    optimizer = torch.optim.Adam(model.parameters(), lr=check_positive(lr, "lr"))
    dev = next(model.parameters()).device
    Xt = torch.tensor(X, dtype=torch.float32, device=dev)
    Mt, yt = torch.tensor(mask, device=dev), torch.tensor(y, dtype=torch.float32, device=dev)
    losses = []
    model.train()
    for _ in tqdm(range(epochs), desc="epochs", disable=not progress):
        order, total = torch.as_tensor(rng.permutation(len(X)), device=dev), 0.0
        for start in range(0, len(X), batch_size):
            batch = order[start : start + batch_size]
            loss = F.mse_loss(model(Xt[batch], Mt[batch]).reshape(-1), yt[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * len(batch)
        losses.append(total / len(X))
    model.eval()
    return losses


def predict_sets(model: nn.Module, X, mask) -> np.ndarray:
    """The model's outputs on padded sets X (n, M, F) with mask (n, M), as a NumPy array (n,) (no gradients)."""
    X = check_array(X, "X", ndim=3)
    mask = np.asarray(mask)
    if mask.dtype != bool or mask.shape != X.shape[:2]:
        raise ValueError(f"mask must be a bool array of shape {X.shape[:2]}, got {mask.dtype} {mask.shape}")
    param = next(model.parameters())
    with torch.no_grad():
        out = model(
            torch.tensor(X, dtype=param.dtype, device=param.device), torch.tensor(mask, device=param.device)
        )
    return to_numpy(out).reshape(len(X)).astype(np.float64)


def size_mean_baseline(y_train, sizes_train, sizes_test) -> np.ndarray:
    """The per-set-size mean predictor: for each test set, the mean training target of the sets of its size
    (the best constant per size; it sees how many elements a set has but not what they are)."""
    y_train = check_vector(y_train, "y_train")
    sizes_train = check_labels(sizes_train, "sizes_train", len(y_train))
    sizes_test = check_labels(sizes_test, "sizes_test")
    missing = sorted(set(sizes_test.tolist()) - set(sizes_train.tolist()))
    if missing:
        raise ValueError(f"sizes_test has set sizes {missing} that never occur in sizes_train")
    means = {s: y_train[sizes_train == s].mean() for s in np.unique(sizes_train)}
    return np.array([means[s] for s in sizes_test])


# ----------------------------------------------------------------------------- 7.2 PointNet


POINT_CLOUD_SHAPES = ("sphere", "cube", "cylinder")


def random_rotation(rng=None) -> np.ndarray:
    """A uniformly random rotation R of 3-D space (Haar measure on SO(3)): R^T R = I, det R = +1.

    The Q factor of a Gaussian 3 x 3 matrix with the signs of R's diagonal made positive is Haar-distributed on
    O(3); flipping one column when det = -1 gives SO(3).
    """
    rng = check_rng(rng)
    Q, R = np.linalg.qr(rng.normal(size=(3, 3)))
    Q = Q * np.sign(np.diag(R))
    if np.linalg.det(Q) < 0:
        Q[:, 0] = -Q[:, 0]
    return Q


def sample_surface(shape: str, n_points: int, rng=None) -> np.ndarray:
    """`n_points` points drawn uniformly (by area) from the surface of a unit shape centred at 0, (n_points, 3):

    "sphere" (radius 1), "cube" (the faces of [-1, 1]^3) or "cylinder" (radius 1, axis z in [-1, 1], side and
    both caps; the side has 2/3 of the area).
    """
    shape = check_choice(shape, "shape", POINT_CLOUD_SHAPES)
    n = check_int(n_points, "n_points", 1)
    rng = check_rng(rng)
    if shape == "sphere":
        Z = rng.normal(size=(n, 3))
        return Z / np.linalg.norm(Z, axis=1, keepdims=True)
    if shape == "cube":
        X = rng.uniform(-1, 1, size=(n, 3))
        axis = rng.integers(3, size=n)  # which pair of faces (all six have the same area)
        X[np.arange(n), axis] = rng.choice([-1.0, 1.0], size=n)
        return X
    angle = rng.uniform(0, 2 * np.pi, size=n)
    radius = np.where(rng.random(n) < 2 / 3, 1.0, np.sqrt(rng.random(n)))  # side (2/3 of the area) or a cap
    z = np.where(radius == 1.0, rng.uniform(-1, 1, size=n), rng.choice([-1.0, 1.0], size=n))
    return np.stack([radius * np.cos(angle), radius * np.sin(angle), z], axis=1)


class PointClouds(NamedTuple):
    X: np.ndarray  # the clouds (n, n_points, 3), one point per row of X[i]
    y: np.ndarray  # the class of each cloud (n,), an index into `shapes`


def make_point_clouds(
    n: int,
    n_points: int = 256,
    shapes=POINT_CLOUD_SHAPES,
    *,
    rotate: bool = True,
    scale=(1.0, 1.0),
    noise: float = 0.02,
    rng=None,
) -> PointClouds:
    """A data set of `n` point clouds, about n / len(shapes) of each shape of `sample_surface`, in random order.

    Each cloud is scaled by a factor drawn uniformly from `scale` (low, high; 1 by default: PointNet's data are
    normalised to a common size), rotated by a uniformly random
    rotation (`random_rotation`, unless ``rotate=False``), jittered by Gaussian noise of standard deviation
    `noise`, and stored as the rows of X[i] (n_points, 3): cloud i is ``(s_i S_i R_i + noise)``, S_i the surface
    points. Returns `PointClouds` (X float64, y int64).
    """
    n = check_int(n, "n", 1)
    n_points = check_int(n_points, "n_points", 1)
    if isinstance(shapes, str) or len(shapes) == 0:
        raise TypeError(
            f"shapes must be a non-empty sequence of names from {POINT_CLOUD_SHAPES}, got {shapes!r}"
        )
    shapes = [check_choice(s, "shapes", POINT_CLOUD_SHAPES) for s in shapes]
    low, high = (check_positive(s, "scale") for s in scale)
    if low > high:
        raise ValueError(f"scale must be (low, high) with low <= high, got {tuple(scale)}")
    noise = check_number(noise, "noise", 0)
    rng = check_rng(rng)
    y = rng.permutation(np.arange(n) % len(shapes))
    X = np.empty((n, n_points, 3))
    for i, label in enumerate(y):
        X[i] = rng.uniform(low, high) * sample_surface(shapes[label], n_points, rng)
        if rotate:
            X[i] = X[i] @ random_rotation(rng)
        X[i] += noise * rng.normal(size=(n_points, 3))
    return PointClouds(X, y.astype(np.int64))


def orthogonality_penalty(A):
    """PointNet's regulariser of a predicted transform, :math:`\\|I - AA^\\top\\|_F^2`: 0 exactly when A is orthogonal.

    A (k, k), or a batch (B, k, k) whose penalties are averaged; a NumPy array (float64 result) or a torch tensor
    (a differentiable scalar tensor).
    """
    if isinstance(A, torch.Tensor):
        if A.ndim not in (2, 3) or A.shape[-1] != A.shape[-2]:
            raise ValueError(f"A must have shape (k, k) or (B, k, k), got {tuple(A.shape)}")
        eye = torch.eye(A.shape[-1], dtype=A.dtype, device=A.device)
        return ((eye - A @ A.transpose(-1, -2)) ** 2).sum(dim=(-2, -1)).mean()
    A = check_array(A, "A")
    if A.ndim not in (2, 3) or A.shape[-1] != A.shape[-2]:
        raise ValueError(f"A must have shape (k, k) or (B, k, k), got {A.shape}")
    return float(((np.eye(A.shape[-1]) - A @ np.swapaxes(A, -1, -2)) ** 2).sum(axis=(-2, -1)).mean())


def segmentation_features(X, W1, b1, W2, b2) -> np.ndarray:
    """The input of PointNet's segmentation head in NumPy, for one cloud X (M, 3) and a two-layer trunk:

    local features :math:`h_m = \\mathrm{ReLU}(x_m^\\top W_1 + b_1)` (F1,), global feature
    :math:`g = \\max_m \\mathrm{ReLU}(h_m^\\top W_2 + b_2)` (F2,, coordinate-wise max over the points), and row m of
    the result is :math:`[h_m \\Vert g]`, an array (M, F1 + F2). W1 (3, F1), b1 (F1,), W2 (F1, F2), b2 (F2,).
    """
    X = check_matrix(X, "X", None, 3)
    W1 = check_matrix(W1, "W1", 3)
    b1 = check_array(b1, "b1", (W1.shape[1],))
    W2 = check_matrix(W2, "W2", W1.shape[1])
    b2 = check_array(b2, "b2", (W2.shape[1],))
    H = np.maximum(X @ W1 + b1, 0)
    g = np.maximum(H @ W2 + b2, 0).max(axis=0)
    return np.hstack([H, np.broadcast_to(g, (len(X), len(g)))])


def _max_pool(H: torch.Tensor, critical: torch.Tensor) -> torch.Tensor:
    """Coordinate-wise max over the points (axis 1) of H (B, M, C); marks in `critical` (B, M) every point
    that attains one of the maxima."""
    g, index = H.max(dim=1)
    critical.scatter_(1, index, True)
    return g


class TNet(nn.Module):
    """A T-Net: predicts one k x k matrix from a whole set of k-d points, ``A = I + h(max_m mlp(x_m))``.

    ``mlp`` is a shared per-point MLP k -> width -> 2 width (ReLU), the max over the points makes A permutation
    invariant, ``h`` is an MLP 2 width -> width -> k^2 whose last layer starts at zero, so A starts as I. A is a
    general (affine-linear) matrix, not constrained to be a rotation.
    """

    def __init__(self, k: int, width: int = 32):
        super().__init__()
        self.k, width = check_int(k, "k", 1), check_int(width, "width", 1)
        self.mlp = nn.Sequential(nn.Linear(k, width), nn.ReLU(), nn.Linear(width, 2 * width), nn.ReLU())
        self.head = nn.Sequential(nn.Linear(2 * width, width), nn.ReLU(), nn.Linear(width, k * k))
        nn.init.zeros_(self.head[-1].weight)
        nn.init.zeros_(self.head[-1].bias)

    def forward(self, X: torch.Tensor, critical: torch.Tensor | None = None) -> torch.Tensor:
        """X (B, M, k) -> A (B, k, k); `critical` (B, M) bool, if given, marks the points that attain a maximum."""
        if critical is None:
            critical = torch.zeros(X.shape[:2], dtype=torch.bool, device=X.device)
        g = _max_pool(self.mlp(X), critical)
        return torch.eye(self.k, dtype=X.dtype, device=X.device) + self.head(g).view(-1, self.k, self.k)


class PointNetOutput(NamedTuple):
    logits: torch.Tensor  # (B, n_classes), or (B, M, n_classes) for segmentation
    A_input: torch.Tensor | None  # the input transform (B, 3, 3) of the input T-Net (None without one)
    A_feature: torch.Tensor | None  # the feature transform (B, width, width) (None without a feature T-Net)
    critical: torch.Tensor  # (B, M) bool: the points that attain a maximum in some max-pool


class MiniPointNet(nn.Module):
    """A small PointNet for clouds X (B, M, 3) (or one cloud (M, 3)), one point per row.

    Points, as rows, are mapped by the input T-Net's matrix, ``x_m^T A_in``; a shared per-point MLP 3 -> width ->
    width gives the local features h_m, mapped by the feature T-Net, ``h_m^T A_feat``; a shared per-point MLP
    width -> 2 width -> `global_dim` and a coordinate-wise max over the points give the global feature
    :math:`g = \\max_m \\phi(x_m)`. Classification: an MLP on g -> logits (B, n_classes) (invariant);
    segmentation (``seg=True``): a per-point MLP on :math:`[h_m \\Vert g]` -> logits (B, M, n_classes)
    (equivariant). All MLPs use ReLU; no batch normalisation, so a cloud's output depends on that cloud only.
    """

    def __init__(
        self,
        n_classes: int,
        seg: bool = False,
        *,
        width: int = 64,
        global_dim: int = 256,
        input_tnet: bool = True,
        feature_tnet: bool = True,
    ):
        super().__init__()
        self.n_classes = check_int(n_classes, "n_classes", 2)
        width, global_dim = check_int(width, "width", 1), check_int(global_dim, "global_dim", 1)
        self.seg = bool(seg)
        self.input_tnet = TNet(3, width // 2) if input_tnet else None
        self.local = nn.Sequential(nn.Linear(3, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU())
        self.feature_tnet = TNet(width, width // 2) if feature_tnet else None
        self.phi = nn.Sequential(
            nn.Linear(width, 2 * width), nn.ReLU(), nn.Linear(2 * width, global_dim), nn.ReLU()
        )
        head_in = width + global_dim if seg else global_dim
        self.head = nn.Sequential(nn.Linear(head_in, width), nn.ReLU(), nn.Linear(width, n_classes))

    def _points(self, X) -> tuple[torch.Tensor, bool]:
        p = next(self.parameters())
        if isinstance(X, np.ndarray):
            X = torch.as_tensor(X, dtype=p.dtype, device=p.device)
        if not isinstance(X, torch.Tensor):
            raise TypeError(f"X must be a torch tensor or a NumPy array of points, got {type(X).__name__}")
        if X.ndim not in (2, 3) or X.shape[-1] != 3 or X.shape[-2] < 1:
            raise ValueError(
                f"X must have shape (B, M, 3) or (M, 3) (one 3-D point per row), got {tuple(X.shape)}"
            )
        return (X[None], True) if X.ndim == 2 else (X, False)

    def outputs(self, X) -> PointNetOutput:
        """The logits together with both predicted transforms and the critical points (see `PointNetOutput`)."""
        X, single = self._points(X)
        critical = torch.zeros(X.shape[:2], dtype=torch.bool, device=X.device)
        A_in = A_feat = None
        if self.input_tnet is not None:
            A_in = self.input_tnet(X, critical)
            X = X @ A_in
        H = self.local(X)  # local features h_m (B, M, width)
        if self.feature_tnet is not None:
            A_feat = self.feature_tnet(H, critical)
            H = H @ A_feat
        g = _max_pool(self.phi(H), critical)  # global feature (B, global_dim)
        if self.seg:
            logits = self.head(torch.cat([H, g[:, None].expand(-1, H.shape[1], -1)], dim=-1))
        else:
            logits = self.head(g)
        if single:
            return PointNetOutput(
                logits[0],
                None if A_in is None else A_in[0],
                None if A_feat is None else A_feat[0],
                critical[0],
            )
        return PointNetOutput(logits, A_in, A_feat, critical)

    def forward(self, X) -> torch.Tensor:
        """The logits: (B, n_classes) for classification, (B, M, n_classes) for segmentation (no batch axis for
        one cloud (M, 3))."""
        return self.outputs(X).logits


def train_pointnet(
    model: MiniPointNet,
    X,
    y,
    *,
    epochs: int = 20,
    batch_size: int = 32,
    lr: float = 1e-3,
    reg: float = 1e-3,
    rng=None,
    progress: bool = True,
) -> list[float]:
    """Train `model` with Adam on the cross-entropy plus ``reg`` times `orthogonality_penalty` of the feature
    transform (PointNet's regulariser), the learning rate decaying from `lr` to 0 on a cosine over all steps;
    return the mean training loss of each epoch.

    X (n, M, 3); y (n,) class labels, or (n, M) per-point labels for a segmentation model. Shuffling draws from
    `rng`; the progress bar shows the loss.
    """
    if not isinstance(model, MiniPointNet):
        raise TypeError(f"model must be a MiniPointNet, got {type(model).__name__}")
    X = check_array(X, "X", (None, None, 3))
    y = np.asarray(y)
    expected = X.shape[:2] if model.seg else X.shape[:1]
    if y.shape != expected:
        raise ValueError(
            f"y must have shape {expected} (one label per {'point' if model.seg else 'cloud'}), got {y.shape}"
        )
    y = check_labels(y.ravel(), "y", n_classes=model.n_classes).reshape(expected)
    epochs, batch_size = check_int(epochs, "epochs", 1), check_int(batch_size, "batch_size", 1)
    lr, reg = check_positive(lr, "lr"), check_number(reg, "reg", 0)
    rng = check_rng(rng)
    p = next(model.parameters())
    X_t = torch.as_tensor(X, dtype=p.dtype, device=p.device)
    y_t = torch.as_tensor(y, device=p.device)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    n_batches = max(1, round(len(X) / batch_size))
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, epochs * n_batches)
    losses = []
    bar = tqdm(range(epochs), desc="epochs", disable=not progress)
    for _ in bar:
        model.train()
        total = 0.0
        for batch in np.array_split(rng.permutation(len(X)), n_batches):
            out = model.outputs(X_t[batch])
            loss = F.cross_entropy(out.logits.reshape(-1, model.n_classes), y_t[batch].reshape(-1))
            if reg and out.A_feature is not None:
                loss = loss + reg * orthogonality_penalty(out.A_feature)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
            total += loss.item() * len(batch)
        losses.append(total / len(X))
        bar.set_postfix(loss=f"{losses[-1]:.3f}")
    return losses


# ----------------------------------------------------------------------------- 7.3 message passing and GCN


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


def _check_adjacency(A, name: str = "A", rows: int | None = None) -> np.ndarray:
    """A square symmetric 0/1 float64 matrix with zero diagonal."""
    A = check_matrix(A, name, rows, rows)
    if A.shape[0] != A.shape[1]:
        raise ValueError(f"{name} must be a square adjacency matrix (M, M), got shape {A.shape}")
    if not np.isin(A, (0.0, 1.0)).all():
        raise ValueError(f"{name} must hold only 0 and 1 (an unweighted graph), got {np.unique(A)[:5]}")
    if not np.array_equal(A, A.T):
        raise ValueError(f"{name} must be symmetric (an undirected graph), got A != A^T")
    if np.diag(A).any():
        raise ValueError(
            f"{name} must have a zero diagonal (no self-loops), got {int(np.diag(A).sum())} ones"
        )
    return A


def gcn_norm_adj(A) -> np.ndarray:
    """The GCN matrix ``A_bar = D~^{-1/2} (A + I) D~^{-1/2}``, d~_m = 1 + d_m (Kipf and Welling, 2017):
    ``a_bar_ij = (a_ij + delta_ij) / sqrt(d~_i d~_j)``. Symmetric, spectrum in (-1, 1], top eigenvector
    proportional to D~^{1/2} 1. A: square symmetric 0/1 matrix with zero diagonal (NumPy in, NumPy out)."""
    A = _check_adjacency(A)
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
    proba: (
        np.ndarray
    )  # the predicted class probabilities (softmax of the logits) of every node, (M, n_classes)


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
) -> GCNTraining:
    """Semi-supervised node classification: a two-layer `GCN` on features X (M, F) and the graph A (M, M,
    0/1, normalised here by `gcn_norm_adj`), trained with Adam (full batch, `epochs` steps) on the
    cross-entropy of the ``labelled`` nodes only; the accuracy is measured on all other nodes. The weights
    are drawn from torch's generator (seeded by ``seed_everything``); the model trains on ``device()``."""
    X = check_matrix(X, "X")
    A_bar = gcn_norm_adj(_check_adjacency(A, "A", len(X)))
    y = check_labels(y, "y", len(X))
    labelled = np.unique(check_labels(labelled, "labelled", n_classes=len(X)))
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
    losses = np.zeros(epochs)
    model.train()
    for epoch in tqdm(range(epochs), desc="training GCN", leave=False):
        loss = F.cross_entropy(model(Xt, At)[idx], yt[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses[epoch] = loss.item()
    model.eval()
    with torch.no_grad():
        proba = to_numpy(torch.softmax(model(Xt, At), dim=1)).astype(np.float64)
    predicted = proba.argmax(1)
    rest = np.setdiff1d(np.arange(len(X)), labelled)
    return GCNTraining(model, losses, predicted, float((predicted[rest] == y[rest]).mean()), proba)


# ----------------------------------------------------------------------------- 7.3 depth, attention; 7.4 Weisfeiler-Lehman


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
    A_bar = check_matrix(A_bar, "A_bar")
    M = A_bar.shape[0]
    if A_bar.shape != (M, M) or not np.allclose(A_bar, A_bar.T, atol=1e-12):
        raise ValueError(f"A_bar must be a symmetric square matrix, got shape {A_bar.shape}")
    X = check_array(X, "X", (M, None))
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


class GATLayer(nn.Module):
    """A graph attention layer (Velickovic et al. 2018), one head: ``x_i' = sigma(sum_j q_ij z_j)``, z = X W.

    Scores ``e_ij = LeakyReLU(a^T [z_i || z_j])`` (slope `slope`), attention ``q_ij = softmax_j e_ij`` over the
    neighbours j of i, including i itself when ``self_loops=True`` (the paper's choice: A + I). W is (F_in,
    F_out), a is (2 F_out,). `activation` is sigma (None: the identity).
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

    def _check(self, X, A) -> tuple[torch.Tensor, torch.Tensor]:
        if not isinstance(X, torch.Tensor) or X.ndim != 2 or X.shape[1] != self.W.shape[0]:
            raise ValueError(f"X must be a tensor (M, {self.W.shape[0]}), got {getattr(X, 'shape', type(X))}")
        A = torch.as_tensor(A, dtype=X.dtype)
        M = X.shape[0]
        if A.shape != (M, M):
            raise ValueError(f"A must have shape ({M}, {M}), got shape {tuple(A.shape)}")
        return X, A

    def scores(self, X) -> torch.Tensor:
        """All scores e_ij (M, M), for every pair i, j, before masking by the graph."""
        Z = X @ self.W.to(X.dtype)
        a = self.a.to(X.dtype)
        F_out = Z.shape[1]
        s = (Z @ a[:F_out])[:, None] + (Z @ a[F_out:])[None, :]
        return F.leaky_relu(s, self.slope)

    def attention(self, X, A) -> torch.Tensor:
        """The coupling Q (M, M): rows sum to 1 over the neighbours (and i), zero off the graph."""
        X, A = self._check(X, A)
        mask = (A + torch.eye(len(A), dtype=A.dtype) if self.self_loops else A) > 0
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
    """

    def __init__(self, F_in: int, F_out: int, *, hidden: int = 16, eps: float = 0.0) -> None:
        super().__init__()
        F_in, F_out = check_int(F_in, "F_in", 1), check_int(F_out, "F_out", 1)
        self.eps = check_number(eps, "eps")
        self.mlp = nn.Sequential(
            nn.Linear(F_in, check_int(hidden, "hidden", 1)), nn.ReLU(), nn.Linear(hidden, F_out)
        )

    def forward(self, X, A) -> torch.Tensor:
        if not isinstance(X, torch.Tensor) or X.ndim != 2 or X.shape[1] != self.mlp[0].in_features:
            raise ValueError(
                f"X must be a tensor (M, {self.mlp[0].in_features}), got {getattr(X, 'shape', type(X))}"
            )
        A = torch.as_tensor(A, dtype=X.dtype)
        if A.shape != (X.shape[0], X.shape[0]):
            raise ValueError(f"A must have shape ({X.shape[0]}, {X.shape[0]}), got shape {tuple(A.shape)}")
        return self.mlp.to(X.dtype)((1 + self.eps) * X + A @ X)


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


# ----------------------------------------------------------------------------- 7.5 spectral graph theory


def _adjacency(A, name: str = "A") -> np.ndarray:
    """A float64 weighted adjacency matrix (M, M): symmetric, zero diagonal, entries >= 0."""
    A = check_matrix(A, name)
    if A.shape[0] != A.shape[1]:
        raise ValueError(f"{name} must be a square adjacency matrix (M, M), got shape {A.shape}")
    if not np.allclose(A, A.T, rtol=0, atol=1e-12):
        gap = np.abs(A - A.T).max()
        raise ValueError(f"{name} must be symmetric (an undirected graph), got max |A - A^T| = {gap:.3g}")
    if np.any(np.diag(A) != 0):
        raise ValueError(
            f"{name} must have a zero diagonal (no self-loops), got diagonal {np.diag(A)[:5]}..."
        )
    if (A < 0).any():
        raise ValueError(f"{name} must have non-negative entries (edge weights), got minimum {A.min():.3g}")
    return A


def laplacian(A, normalized: bool = False) -> np.ndarray:
    """The graph Laplacian L = D - A or, with ``normalized=True``, L~ = I - D^{-1/2} A D^{-1/2}.

    A is a symmetric (weighted) adjacency matrix (M, M) with zero diagonal, D = diag(d_m), d_m = sum_n A_mn.
    L is symmetric positive semi-definite, L 1 = 0, and x^T L x = sum over edges {m, n} of A_mn (x_m - x_n)^2.
    The spectrum of L~ lies in [0, 2]. An isolated node (d_m = 0) gets (D^{-1/2})_mm = 0: its row of L~ is e_m.
    """
    A = _adjacency(A)
    if not isinstance(normalized, (bool, np.bool_)):
        raise TypeError(f"normalized must be a bool, got {normalized!r}")
    d = A.sum(axis=1)
    if not normalized:
        return np.diag(d) - A
    inv_sqrt = np.zeros_like(d)
    inv_sqrt[d > 0] = 1.0 / np.sqrt(d[d > 0])
    return np.eye(len(d)) - inv_sqrt[:, None] * A * inv_sqrt[None, :]


class GraphSpectrum(NamedTuple):
    lam: np.ndarray  # (M,) eigenvalues (graph frequencies), ascending
    U: np.ndarray  # (M, M) orthonormal eigenvectors as columns: U[:, k] belongs to lam[k]


def _symmetric(L, name: str) -> np.ndarray:
    L = check_matrix(L, name)
    if L.shape[0] != L.shape[1]:
        raise ValueError(f"{name} must be a square matrix (M, M), got shape {L.shape}")
    if not np.allclose(L, L.T, rtol=0, atol=1e-10):
        gap = np.abs(L - L.T).max()
        raise ValueError(
            f"{name} must be symmetric (an undirected graph), got max |{name} - {name}^T| = {gap:.3g}"
        )
    return (L + L.T) / 2


def graph_fourier(L) -> GraphSpectrum:
    """The graph Fourier basis: L = U diag(lam) U^T with lam ascending (low to high frequency).

    The graph Fourier transform of a signal x (M,) is x^ = U^T x, its inverse x = U x^. Each eigenvector is
    defined only up to sign (and, for a repeated eigenvalue, up to a rotation within its eigenspace); for
    reproducible figures the sign is fixed so that the entry of largest magnitude is positive.
    """
    lam, U = np.linalg.eigh(_symmetric(L, "L"))
    biggest = U[np.abs(U).argmax(axis=0), np.arange(U.shape[1])]
    return GraphSpectrum(lam, U * np.where(biggest < 0, -1.0, 1.0))


def spectral_filter(L, g: Callable) -> np.ndarray:
    """The spectral filter g(L) = U g(Lambda) U^T (M, M) of a symmetric L = U Lambda U^T.

    `g` maps the array of eigenvalues (M,) to the filter's response (M,), e.g. ``lambda lam: np.exp(-s * lam)``.
    The matrix depends only on the values of g on the spectrum, not on the eigenvectors chosen (signs, bases of
    repeated eigenspaces). It needs the O(M^3) eigendecomposition and is dense (not localised) in general.
    """
    lam, U = graph_fourier(L)
    check_callable(g, "g")
    response = check_vector(np.asarray(g(lam), dtype=float), "g(lam)", len(lam))
    return (U * response) @ U.T


FILTERS = ("low-pass", "high-pass", "heat kernel")


def filter_response(lam, kind: str = "heat kernel", s: float = 1.0) -> np.ndarray:
    """The response g(lam) of three spectral filters with strength s >= 0:

    "low-pass"    g = 1 / (1 + s lam)      (Tikhonov: g(L) y = argmin_x |x - y|^2 + s x^T L x = (I + s L)^{-1} y)
    "high-pass"   g = s lam / (1 + s lam)  (what the low-pass removes: the two add up to the identity)
    "heat kernel" g = exp(-s lam)          (g(L) = e^{-sL}, heat diffusion on the graph for a time s)
    """
    lam = check_array(lam, "lam", ndim=1)
    check_choice(kind, "kind", FILTERS)
    s = check_number(s, "s", 0)
    if kind == "heat kernel":
        return np.exp(-s * lam)
    low = 1.0 / (1.0 + s * lam)
    return low if kind == "low-pass" else 1.0 - low


def poly_filter(L, alphas) -> np.ndarray:
    """The polynomial filter sum_{k=0}^{K} alpha_k L^k = U (sum_k alpha_k Lambda^k) U^T, without an
    eigendecomposition. It is K-hop localised: its entry (i, j) is 0 when dist(i, j) > K."""
    L = _symmetric(L, "L")
    alphas = check_vector(alphas, "alphas")
    out, power = np.zeros_like(L), np.eye(len(L))
    for k, alpha in enumerate(alphas):
        if k:
            power = power @ L
        out += alpha * power
    return out


def poly_conv(X, L, alphas, b=None) -> np.ndarray:
    """A polynomial graph convolution layer (no non-linearity) on signals X (M, F_in):

    out[:, i] = sum_j p_ij(L) X[:, j] + b_i,  p_ij(L) = sum_{k=0}^{K} alphas[k, j, i] L^k,

    one polynomial per pair of input channel j and output channel i; alphas (K + 1, F_in, F_out), b (F_out,).
    Computed as sum_k (L^k X) alphas[k] + b, with K products L (L^{k-1} X) (no power of L is formed).
    """
    X = check_matrix(X, "X")
    M, F_in = X.shape
    L = _symmetric(L, "L")
    if L.shape != (M, M):
        raise ValueError(f"L must have shape ({M}, {M}) (one row and column per node of X), got {L.shape}")
    alphas = check_array(alphas, "alphas", (None, F_in, None))
    b = np.zeros(alphas.shape[2]) if b is None else check_vector(b, "b", alphas.shape[2])
    out, Z = np.zeros((M, alphas.shape[2])), X
    for k in range(len(alphas)):
        if k:
            Z = L @ Z
        out += Z @ alphas[k]
    return out + b


def rescaled_laplacian(L, lam_max: float | None = None) -> np.ndarray:
    """L^ = 2 L / lam_max - I, whose spectrum lies in [-1, 1] (lam_max: the largest eigenvalue of L, computed
    when None; for the normalised Laplacian ChebNet often uses the bound lam_max = 2)."""
    L = _symmetric(L, "L")
    lam_max = float(np.linalg.eigvalsh(L)[-1]) if lam_max is None else check_positive(lam_max, "lam_max")
    if lam_max <= 0:
        raise ValueError("L must have a positive largest eigenvalue (a graph with at least one edge)")
    return 2.0 * L / lam_max - np.eye(len(L))


def chebyshev_polynomials(L_hat, K: int) -> list[np.ndarray]:
    """[T_0(L^), ..., T_K(L^)] by the recursion T_0 = I, T_1 = L^, T_k = 2 L^ T_{k-1} - T_{k-2}."""
    L_hat = _symmetric(L_hat, "L_hat")
    K = check_int(K, "K", 0)
    T = [np.eye(len(L_hat)), L_hat]
    for _ in range(2, K + 1):
        T.append(2.0 * L_hat @ T[-1] - T[-2])
    return T[: K + 1]


def chebyshev_filter(L, thetas, lam_max: float | None = None) -> np.ndarray:
    """ChebNet's filter sum_{k=0}^{K} theta_k T_k(L^) with L^ = 2 L / lam_max - I (spectrum in [-1, 1]),
    K = len(thetas) - 1: strictly K-hop localised, no eigendecomposition (except for lam_max=None)."""
    thetas = check_vector(thetas, "thetas")
    T = chebyshev_polynomials(rescaled_laplacian(L, lam_max), len(thetas) - 1)
    return sum(theta * T_k for theta, T_k in zip(thetas, T, strict=True))
