"""Tests of chapter 07, section 7.2 PointNet (point clouds, the orthogonality penalty, MiniPointNet)."""

import numpy as np
import pytest
import torch

from dlnotes.gdl.pointnet import (
    POINT_CLOUD_SHAPES,
    MiniPointNet,
    TNet,
    invariant_histograms,
    make_point_clouds,
    orthogonality_penalty,
    random_rotation,
    rotation_about_z,
    sample_surface,
    segmentation_features,
    train_pointnet,
)
from dlnotes.gdl.symmetry import check_equivariant, check_invariant

from conftest import bad_input_test

# ----------------------------------------------------------------------------- data


def test_random_rotation_is_a_uniform_rotation():
    rng = np.random.default_rng(0)
    Rs = np.array([random_rotation(rng) for _ in range(2000)])
    assert np.allclose(Rs @ Rs.transpose(0, 2, 1), np.eye(3), atol=1e-12)
    assert np.allclose(np.linalg.det(Rs), 1)
    assert np.abs(Rs.mean(axis=0)).max() < 0.05  # Haar: E[R] = 0
    assert np.allclose((Rs**2).mean(axis=0), 1 / 3, atol=0.03)  # each entry has variance 1/3


@pytest.mark.parametrize("shape", POINT_CLOUD_SHAPES)
def test_sample_surface_lies_on_the_surface(shape):
    S = sample_surface(shape, 4000, np.random.default_rng(1))
    assert S.shape == (4000, 3)
    r = np.hypot(S[:, 0], S[:, 1])  # distance from the vertical axis
    if shape == "sphere":
        assert np.allclose(np.linalg.norm(S, axis=1), 1)
        assert np.abs(S.mean(axis=0)).max() < 0.05
    elif shape == "cube":
        assert np.allclose(np.abs(S).max(axis=1), 1) and np.abs(S).max() <= 1
        faces = np.argmax(np.abs(S), axis=1) * 2 + (S[np.arange(4000), np.argmax(np.abs(S), axis=1)] > 0)
        assert np.allclose(np.bincount(faces, minlength=6) / 4000, 1 / 6, atol=0.03)  # equal areas
    elif shape == "cylinder":
        side = np.isclose(r, 1)
        assert np.all(side | np.isclose(np.abs(S[:, 2]), 1)) and r.max() <= 1 + 1e-12
        assert abs(side.mean() - 2 / 3) < 0.03  # side area 4 pi of 6 pi
        cap = ~side
        assert abs((r[cap] ** 2).mean() - 0.5) < 0.03  # uniform on the disc: E r^2 = 1/2
    elif shape == "cone":
        base = np.isclose(S[:, 2], -1)
        assert (
            np.all(base | np.isclose(r, (1 - S[:, 2]) / 2)) and r.max() <= 1 + 1e-12
        )  # side: r = (1 - x_3)/2
        assert abs(base.mean() - 1 / (1 + np.sqrt(5))) < 0.03  # base area pi of pi (1 + sqrt5)
        assert abs((r[base] ** 2).mean() - 0.5) < 0.03
        # uniform by area on the side: the fraction within distance t of the apex is (t / sqrt5)^2
        assert abs((r[~base] < 0.5).mean() - 0.25) < 0.03
    else:  # octahedron
        assert np.allclose(np.abs(S).sum(axis=1), 1)
        octant = (S > 0) @ [1, 2, 4]
        assert np.allclose(np.bincount(octant, minlength=8) / 4000, 1 / 8, atol=0.03)  # eight equal faces
        assert np.allclose(np.abs(S).mean(axis=0), 1 / 3, atol=0.01)  # the face's centroid is (1, 1, 1) / 3


def test_make_point_clouds_shapes_labels_and_geometry():
    rng = np.random.default_rng(2)
    data = make_point_clouds(30, 64, POINT_CLOUD_SHAPES[:3], rng=rng, noise=0.0, scale=(1.0, 1.0))
    assert data.X.shape == (30, 64, 3) and data.y.shape == (30,)
    assert np.array_equal(np.bincount(data.y), [10, 10, 10])
    norms = np.linalg.norm(data.X, axis=2)
    spheres = data.y == POINT_CLOUD_SHAPES.index("sphere")
    assert np.allclose(norms[spheres], 1)  # a rotation keeps the norms
    cubes = data.y == POINT_CLOUD_SHAPES.index("cube")
    assert norms[cubes].max() <= np.sqrt(3) + 1e-12 and norms[cubes].min() >= 1 - 1e-12
    upright = make_point_clouds(
        9, 32, POINT_CLOUD_SHAPES[:3], rotate=False, noise=0.0, scale=(2.0, 2.0), rng=rng
    )
    cube = upright.X[upright.y == 1][0]
    assert np.allclose(np.abs(cube).max(axis=1), 2)  # axis-aligned, scaled by 2
    assert np.array_equal(np.bincount(make_point_clouds(10, 8, rng=rng).y), [2] * 5)  # all five shapes


def test_make_point_clouds_stretch_rotation_about_z_and_normalisation():
    rng = np.random.default_rng(8)
    cones = make_point_clouds(
        20, 200, ("cone",), rotate="z", stretch=0.3, scale=(0.5, 2.0), noise=0.0, rng=rng
    )
    for cloud in cones.X:
        base = np.isclose(cloud[:, 2], cloud[:, 2].min())
        assert (
            0.2 < base.mean() < 0.45
        )  # the base (31% of the area) stays horizontal under a rotation about x_3
    # stretching: the axis extents of upright, unrotated cubes vary between 1 - stretch and 1 + stretch
    boxes = make_point_clouds(40, 300, ("cube",), rotate="none", stretch=0.3, noise=0.0, rng=rng)
    half = np.abs(boxes.X).max(axis=1)
    assert half.min() >= 0.7 - 1e-12 and half.max() <= 1.3 + 1e-12 and half.std() > 0.1
    # normalisation: centroid 0, largest norm 1, and the shape unchanged (the same draw, up to scale and shift)
    raw = make_point_clouds(6, 50, rotate="3d", scale=(0.5, 3.0), stretch=0.2, noise=0.01, rng=3)
    unit = make_point_clouds(
        6, 50, rotate="3d", scale=(0.5, 3.0), stretch=0.2, noise=0.01, normalize=True, rng=3
    )
    assert np.allclose(unit.X.mean(axis=1), 0) and np.allclose(np.linalg.norm(unit.X, axis=2).max(axis=1), 1)
    centred = raw.X - raw.X.mean(axis=1, keepdims=True)
    assert np.allclose(unit.X, centred / np.linalg.norm(centred, axis=2).max(axis=1)[:, None, None])
    R = rotation_about_z(0.7)
    assert np.allclose(R @ R.T, np.eye(3)) and np.allclose(np.array([0, 0, 2.0]) @ R, [0, 0, 2])


def test_invariant_histograms_are_invariant_and_tell_what_they_should():
    rng = np.random.default_rng(9)
    X = make_point_clouds(4, 60, rotate="none", stretch=0.3, rng=rng).X
    perm = rng.permutation(60)
    R3, Rz = random_rotation(rng), rotation_about_z(1.1)
    moved = 2.5 * X[:, perm] @ R3 + np.array([1.0, -2.0, 3.0])  # permuted, rotated, scaled, shifted
    for kind in ("radius", "distance"):
        H = invariant_histograms(X, kind, bins=10)
        assert H.shape == (4, 10) and np.allclose(H.sum(axis=1), 1)
        assert np.allclose(invariant_histograms(moved, kind, bins=10), H)
    H = invariant_histograms(X, "height_radius", bins=6)
    assert H.shape == (4, 36) and np.allclose(H.sum(axis=1), 1)
    assert np.allclose(invariant_histograms(2.5 * X[:, perm] @ Rz, "height_radius", bins=6), H)
    assert not np.allclose(invariant_histograms(X @ R3, "height_radius", bins=6), H)  # only about x_3
    # against a direct computation: radii of a sphere all in the last bin, D2 by scipy's pdist
    sphere = make_point_clouds(1, 1000, ("sphere",), noise=0.0, rng=rng).X
    assert np.array_equal(invariant_histograms(sphere, "radius", bins=5)[0], [0, 0, 0, 0, 1])
    from scipy.spatial.distance import pdist

    d = pdist(X[0])
    expected = np.histogram(d / d.max(), bins=10, range=(0, 1))[0] / len(d)
    assert np.allclose(invariant_histograms(X[:1], "distance", bins=10)[0], expected)


# ----------------------------------------------------------------------------- penalty and features


def test_orthogonality_penalty_against_singular_values():
    rng = np.random.default_rng(3)
    A = rng.normal(size=(5, 4, 4))
    sigma = np.linalg.svd(A, compute_uv=False)
    expected = ((1 - sigma**2) ** 2).sum(axis=1).mean()  # ||I - A A^T||_F^2 = sum_i (1 - sigma_i^2)^2
    assert np.isclose(orthogonality_penalty(A), expected)
    assert np.isclose(orthogonality_penalty(torch.tensor(A)).item(), expected)
    assert np.isclose(orthogonality_penalty(A[0]), ((1 - sigma[0] ** 2) ** 2).sum())
    assert orthogonality_penalty(random_rotation(rng)) < 1e-24


def test_segmentation_features_against_torch_and_equivariant():
    rng = np.random.default_rng(4)
    X, W1, b1, W2, b2 = (rng.normal(size=s) for s in [(7, 3), (3, 5), 5, (5, 6), 6])
    out = segmentation_features(X, W1, b1, W2, b2)
    t = torch.tensor
    H = torch.relu(t(X) @ t(W1) + t(b1))
    g = torch.relu(H @ t(W2) + t(b2)).amax(dim=0)
    assert np.allclose(out, torch.cat([H, g.expand(7, -1)], dim=1).numpy(), atol=1e-12)
    assert check_equivariant(lambda Z: segmentation_features(Z, W1, b1, W2, b2), X)
    assert check_invariant(lambda Z: segmentation_features(Z, W1, b1, W2, b2)[0, 5:], X)


# ----------------------------------------------------------------------------- MiniPointNet


@pytest.fixture
def clouds():
    return torch.tensor(make_point_clouds(4, 40, rng=5).X)


def test_tnet_starts_at_the_identity(clouds):
    torch.manual_seed(0)
    A = TNet(3, 8).double()(clouds)
    assert A.shape == (4, 3, 3) and torch.equal(A, torch.eye(3, dtype=A.dtype).expand(4, 3, 3))


def test_classifier_invariant_and_segmentation_equivariant(clouds):
    torch.manual_seed(1)
    cls = MiniPointNet(3, width=16, global_dim=32).double().eval()
    seg = MiniPointNet(4, seg=True, width=16, global_dim=32).double().eval()
    for net in (cls, seg):  # perturb the T-Nets' zero-initialised last layers: A != I
        for tnet in (net.input_tnet, net.feature_tnet):
            torch.nn.init.normal_(tnet.head[-1].weight, std=0.1)
    with torch.no_grad():
        assert cls(clouds).shape == (4, 3) and cls(clouds[0]).shape == (3,)
        assert seg(clouds).shape == (4, 40, 4) and seg(clouds[0]).shape == (40, 4)
        assert torch.allclose(cls(clouds)[2], cls(clouds[2]))
        assert check_invariant(cls, clouds[0])
        assert check_equivariant(seg, clouds[0])
        assert not check_invariant(seg, clouds[0])  # a per-point output is not invariant
        R = torch.tensor(random_rotation(6))
        assert (cls(clouds[0] @ R) - cls(clouds[0])).abs().max() > 1e-4  # not rotation-invariant


def test_critical_points_determine_the_output(clouds):
    torch.manual_seed(2)
    net = MiniPointNet(3, width=16, global_dim=32).double().eval()
    for tnet in (net.input_tnet, net.feature_tnet):
        torch.nn.init.normal_(tnet.head[-1].weight, std=0.1)
    with torch.no_grad():
        out = net.outputs(clouds[1])
        kept = clouds[1][out.critical]
        assert 0 < len(kept) < 40
        assert torch.allclose(net(kept), out.logits, atol=1e-12)
        assert out.A_input.shape == (3, 3) and out.A_feature.shape == (16, 16)
        # deleting one critical point changes some maximum, hence (generically) the output
        changed = [
            not torch.allclose(net(clouds[1][torch.arange(40) != i]), out.logits, atol=1e-12)
            for i in np.flatnonzero(out.critical.numpy())
        ]
        assert any(changed)


def test_train_pointnet_lowers_the_loss():
    torch.manual_seed(3)
    data = make_point_clouds(24, 32, POINT_CLOUD_SHAPES[:3], rng=7)
    net = MiniPointNet(3, width=8, global_dim=16)
    losses = train_pointnet(net, data.X, data.y, epochs=15, batch_size=8, lr=1e-2, rng=7, progress=False)
    assert len(losses) == 15 and losses[-1] < losses[0]
    seg = MiniPointNet(2, seg=True, width=8, global_dim=16)
    parts = (np.abs(data.X[..., 2]) > 0.5).astype(int)
    seg_losses = train_pointnet(seg, data.X, parts, epochs=3, rng=7, progress=False)
    assert len(seg_losses) == 3 and np.isfinite(seg_losses).all()


# ----------------------------------------------------------------------------- bad input

NET = MiniPointNet(3, width=8, global_dim=8)
SEG = MiniPointNet(2, seg=True, width=8, global_dim=8)
C4 = np.zeros((4, 10, 3))
BAD_INPUT = [  # (call, error, message)
    (lambda: random_rotation(rng=-1), TypeError, "rng must be"),
    (lambda: sample_surface("torus", 10), ValueError, "shape must be one of"),
    (lambda: sample_surface("cube", 0), ValueError, "n_points must be"),
    (lambda: make_point_clouds(0), ValueError, "n must be"),
    (lambda: make_point_clouds(5, shapes="cube"), TypeError, "shapes must be a non-empty sequence"),
    (lambda: make_point_clouds(5, shapes=("cube", "torus")), ValueError, "shapes must be one of"),
    (lambda: make_point_clouds(5, rotate="x"), ValueError, "rotate must be one of"),
    (lambda: make_point_clouds(5, stretch=1.0), ValueError, "stretch"),
    (lambda: invariant_histograms(np.zeros((2, 5, 3)), "angle"), ValueError, "kind must be one of"),
    (lambda: invariant_histograms(np.zeros((2, 5, 3)), bins=0), ValueError, "bins"),
    (lambda: invariant_histograms(np.zeros((5, 3))), ValueError, "X"),
    (lambda: invariant_histograms(np.zeros((2, 1, 3))), ValueError, "at least 2 points"),
    (lambda: make_point_clouds(5, scale=(1.2, 0.8)), ValueError, "low <= high"),
    (lambda: make_point_clouds(5, noise=-0.1), ValueError, "noise"),
    (lambda: orthogonality_penalty(np.ones((3, 4))), ValueError, r"A must have shape (k, k)"),
    (lambda: orthogonality_penalty(torch.ones(3)), ValueError, r"A must have shape (k, k)"),
    (
        lambda: segmentation_features(
            np.ones((5, 2)), np.ones((3, 4)), np.ones(4), np.ones((4, 2)), np.ones(2)
        ),
        ValueError,
        r"X must have shape (any, 3)",
    ),
    (
        lambda: segmentation_features(
            np.ones((5, 3)), np.ones((3, 4)), np.ones(4), np.ones((5, 2)), np.ones(2)
        ),
        ValueError,
        r"W2 must have shape (4, any)",
    ),
    (lambda: TNet(0), ValueError, "k must be"),
    (lambda: MiniPointNet(1), ValueError, "n_classes must be"),
    (lambda: NET(torch.ones(5, 2)), ValueError, r"X must have shape (B, M, 3)"),
    (lambda: NET([[0.0, 0.0, 0.0]]), TypeError, "X must be a torch tensor"),
    (lambda: train_pointnet("net", C4, np.zeros(4, int)), TypeError, "model must be a MiniPointNet"),
    (lambda: train_pointnet(NET, C4, np.zeros(3, int)), ValueError, r"y must have shape (4,)"),
    (lambda: train_pointnet(SEG, C4, np.zeros(4, int)), ValueError, r"one label per point"),
    (lambda: train_pointnet(NET, C4, np.full(4, 3)), ValueError, "y must hold labels in 0..2"),
    (lambda: train_pointnet(NET, C4, np.zeros(4, int), lr=0), ValueError, "lr"),
]


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
