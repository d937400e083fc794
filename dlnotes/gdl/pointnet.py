"""Section 7.2 (continued) of chapter 07 (notebook 03_pointnet): PointNet. Point clouds sampled from the
surfaces of randomly stretched and rotated shapes, invariant histograms of them for baselines, PointNet's
orthogonality penalty and segmentation features, the T-Net and a small PointNet for classification and
segmentation, and its training by the book's loop.

A cloud of M points in 3-D is an array X (M, 3), one point per row; a batch of clouds is X (B, M, 3).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..training import model_device, progress_bar, train_steps
from ..validation import (
    check_array,
    check_choice,
    check_int,
    check_labels,
    check_matrix,
    check_number,
    check_positive,
    check_rng,
)

POINT_CLOUD_SHAPES = ("sphere", "cube", "cylinder", "cone", "octahedron")
ROTATIONS = ("3d", "z", "none")
HISTOGRAM_KINDS = ("radius", "distance", "height_radius")


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


def rotation_about_z(angle: float) -> np.ndarray:
    """The rotation by `angle` (radians) about the vertical axis x_3, acting on row vectors as ``x^T R``."""
    c, s = np.cos(check_number(angle, "angle")), np.sin(angle)
    return np.array([[c, s, 0.0], [-s, c, 0.0], [0.0, 0.0, 1.0]])


def sample_surface(shape: str, n_points: int, rng=None) -> np.ndarray:
    """`n_points` points drawn uniformly (by area) from the surface of a unit shape, (n_points, 3):

    "sphere" (radius 1), "cube" (the faces of [-1, 1]^3), "cylinder" (radius 1, axis x_3 in [-1, 1], side and
    both caps; the side has 2/3 of the area), "cone" (apex (0, 0, 1), base disc of radius 1 at x_3 = -1; the
    side has sqrt5 / (1 + sqrt5) of the area) or "octahedron" (|x_1| + |x_2| + |x_3| = 1, eight equal faces).
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
    if shape == "octahedron":
        # Uniform on the triangle x_1 + x_2 + x_3 = 1, x_i >= 0 (normalised exponentials: Dirichlet(1, 1, 1)),
        # then random signs pick one of the eight faces.
        E = rng.exponential(size=(n, 3))
        return E / E.sum(axis=1, keepdims=True) * rng.choice([-1.0, 1.0], size=(n, 3))
    angle = rng.uniform(0, 2 * np.pi, size=n)
    if shape == "cylinder":
        radius = np.where(
            rng.random(n) < 2 / 3, 1.0, np.sqrt(rng.random(n))
        )  # side (2/3 of the area) or a cap
        z = np.where(radius == 1.0, rng.uniform(-1, 1, size=n), rng.choice([-1.0, 1.0], size=n))
    else:  # cone: on the side the area within distance t of the apex grows as t^2, so t = sqrt(U)
        side = rng.random(n) < np.sqrt(5) / (1 + np.sqrt(5))  # side area pi sqrt5, base pi
        radius = np.sqrt(rng.random(n))
        z = np.where(side, 1 - 2 * radius, -1.0)
    return np.stack([radius * np.cos(angle), radius * np.sin(angle), z], axis=1)


class PointClouds(NamedTuple):
    X: np.ndarray  # the clouds (n, n_points, 3), one point per row of X[i]
    y: np.ndarray  # the class of each cloud (n,), an index into `shapes`


def make_point_clouds(
    n: int,
    n_points: int = 256,
    shapes=POINT_CLOUD_SHAPES,
    *,
    rotate="3d",
    scale=(1.0, 1.0),
    stretch: float = 0.0,
    noise: float = 0.02,
    normalize: bool = False,
    rng=None,
) -> PointClouds:
    """A data set of `n` point clouds, about n / len(shapes) of each shape of `sample_surface`, in random order.

    Cloud i is built from the surface points S_i (n_points, 3) of its shape in this order: each axis is
    stretched by its own factor drawn uniformly from [1 - `stretch`, 1 + `stretch`] (0 by default; the points
    are then no longer uniform by area), the cloud is scaled by a factor drawn uniformly from `scale` (low,
    high), rotated (`rotate`: "3d" a uniformly random rotation, `random_rotation`; "z" a random rotation about
    the vertical axis x_3, the upright objects of Qi et al.'s augmentation; "none"; True and False mean "3d"
    and "none") and jittered by Gaussian noise of standard deviation `noise` (times the scale factor).
    ``normalize=True`` finally centres the cloud at its centroid and divides it by its largest point norm
    (PointNet's normalisation into the unit ball), which removes the scale. Returns `PointClouds` (X float64,
    y int64).
    """
    n = check_int(n, "n", 1)
    n_points = check_int(n_points, "n_points", 1)
    if isinstance(shapes, str) or len(shapes) == 0:
        raise TypeError(
            f"shapes must be a non-empty sequence of names from {POINT_CLOUD_SHAPES}, got {shapes!r}"
        )
    shapes = [check_choice(s, "shapes", POINT_CLOUD_SHAPES) for s in shapes]
    if isinstance(rotate, bool):
        rotate = "3d" if rotate else "none"
    rotate = check_choice(rotate, "rotate", ROTATIONS)
    low, high = (check_positive(s, "scale") for s in scale)
    if low > high:
        raise ValueError(f"scale must be (low, high) with low <= high, got {tuple(scale)}")
    stretch = check_number(stretch, "stretch", 0, 1, high_open=True)
    noise = check_number(noise, "noise", 0)
    rng = check_rng(rng)
    y = rng.permutation(np.arange(n) % len(shapes))
    X = np.empty((n, n_points, 3))
    for i, label in enumerate(y):
        S = sample_surface(shapes[label], n_points, rng)
        if stretch:
            S = S * rng.uniform(1 - stretch, 1 + stretch, size=3)
        s = rng.uniform(low, high)
        X[i] = s * S
        if rotate == "3d":
            X[i] = X[i] @ random_rotation(rng)
        elif rotate == "z":
            X[i] = X[i] @ rotation_about_z(rng.uniform(0, 2 * np.pi))
        X[i] += s * noise * rng.normal(size=(n_points, 3))
        if normalize:
            X[i] -= X[i].mean(axis=0)
            X[i] /= np.linalg.norm(X[i], axis=1).max()
    return PointClouds(X, y.astype(np.int64))


def invariant_histograms(X, kind: str = "radius", bins: int = 20) -> np.ndarray:
    """Hand-made features of clouds X (n, M, 3) that ignore the order of the points and the scale, one row of
    frequencies (summing to 1) per cloud, the inputs of the baselines of section 7.2:

    - "radius": the histogram (`bins` bins on [0, 1]) of the distances ||x_m - xbar|| of the points from the
      centroid, divided by the largest; invariant to every rotation about the centroid;
    - "distance": Osada et al.'s D2 shape distribution, the histogram of all pairwise distances ||x_m - x_k||
      (m < k) divided by the largest; invariant to rotations, reflections and translations;
    - "height_radius": the joint histogram (`bins` x `bins`, flattened) of the height x_3 - xbar_3 and the
      distance from the vertical axis through the centroid, both divided by the largest radius; invariant to
      rotations about the vertical axis only.
    """
    X = check_array(X, "X", (None, None, 3))
    if X.shape[1] < 2:
        raise ValueError(f"X must hold at least 2 points per cloud, got shape {X.shape}")
    kind = check_choice(kind, "kind", HISTOGRAM_KINDS)
    bins = check_int(bins, "bins", 1)
    Xc = X - X.mean(axis=1, keepdims=True)
    radius = np.linalg.norm(Xc, axis=2)
    r_max = radius.max(axis=1, keepdims=True)
    r_max = np.where(r_max > 0, r_max, 1.0)
    if kind == "radius":
        return np.stack([np.histogram(r, bins=bins, range=(0, 1))[0] for r in radius / r_max]) / X.shape[1]
    if kind == "distance":
        i, k = np.triu_indices(X.shape[1], 1)
        rows = []
        for cloud in X:
            d = np.linalg.norm(cloud[i] - cloud[k], axis=1)
            rows.append(np.histogram(d / max(d.max(), 1e-300), bins=bins, range=(0, 1))[0])
        return np.stack(rows) / len(i)
    height, axial = Xc[..., 2] / r_max, np.hypot(Xc[..., 0], Xc[..., 1]) / r_max
    return (
        np.stack(
            [
                np.histogram2d(h, a, bins=bins, range=[[-1, 1], [0, 1]])[0].ravel()
                for h, a in zip(height, axial, strict=True)
            ]
        )
        / X.shape[1]
    )


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
    general linear map (no translation), not constrained to be a rotation.
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
    transform, :math:`\\ell = \\mathrm{CE} + \\mathrm{reg}\\,\\|I - A_{feat} A_{feat}^\\top\\|_F^2` (PointNet's
    regulariser), the learning rate decaying from `lr` to 0 on a cosine over all steps; return the mean
    training loss of each epoch.

    X (n, M, 3); y (n,) class labels, or (n, M) per-point labels for a segmentation model. Each epoch shuffles
    the clouds with `rng` into about n / `batch_size` batches, one step of `dlnotes.training.train_steps`
    each, on the model's device; the bar over the epochs shows the loss (none with ``progress=False``). The
    model is left in the mode it came in.
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
    dtype, dev = next(model.parameters()).dtype, model_device(model)
    X_t = torch.as_tensor(X, dtype=dtype, device=dev)
    y_t = torch.as_tensor(y, device=dev)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    n_batches = max(1, round(len(X) / batch_size))
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, epochs * n_batches)

    def loss(model, batch):
        X_b, y_b = batch
        out = model.outputs(X_b)
        value = F.cross_entropy(out.logits.reshape(-1, model.n_classes), y_b.reshape(-1))
        if reg and out.A_feature is not None:
            value = value + reg * orthogonality_penalty(out.A_feature)
        return value

    losses = []
    bar = progress_bar(range(epochs), desc="epochs", enabled=progress)
    for _ in bar:
        batches = np.array_split(rng.permutation(len(X)), n_batches)
        step_losses = train_steps(
            model, loss, optimizer, ((X_t[b], y_t[b]) for b in batches), scheduler=scheduler, progress=False
        )
        total = 0.0
        for value, b in zip(step_losses, batches, strict=True):
            total += value * len(b)
        losses.append(float(total / len(X)))
        bar.set_postfix(loss=f"{losses[-1]:.3f}")
    return losses
