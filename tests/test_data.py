import networkx as nx
import numpy as np
import pytest

from dlnotes.data import (
    ARRESTS_FEATURES,
    FASHION_CLASSES,
    load_arrests,
    load_diabetes,
    load_digits,
    load_digits_split,
    load_fashion_mnist,
    load_karate_club,
    load_novel,
    sample_moons,
)

from conftest import bad_input_test


def test_arrests_match_the_documented_counts():
    # the counts of carData's documentation: 5226 arrests, 4334 released, 1288 Black, 443 female
    data = load_arrests()
    assert data.X.shape == (5226, len(ARRESTS_FEATURES)) and data.a.shape == data.y.shape == (5226,)
    female = data.X[:, ARRESTS_FEATURES.index("female")]
    assert (data.y.sum(), data.a.sum(), female.sum()) == (4334, 1288, 443)
    years, checks = data.X[:, 0], data.X[:, ARRESTS_FEATURES.index("checks")]
    assert years.min() == 1997 and years.max() == 2002 and checks.min() == 0 and checks.max() == 6


def test_digits():
    images, labels = load_digits()
    assert images.shape == (1797, 8, 8) and labels.shape == (1797,)
    assert images.min() == 0 and images.max() == 16
    assert set(labels) == set(range(10))


def test_digits_split_is_stratified_and_standardised():
    X_train, X_test, y_train, y_test = load_digits_split(rng=0)
    assert X_train.shape == (1347, 64) and X_test.shape == (450, 64)
    assert np.allclose(X_train.mean(axis=0), 0) and np.allclose(
        X_train.std(axis=0)[X_train.std(axis=0) > 0], 1
    )
    assert np.abs(np.bincount(y_test) - 0.25 * np.bincount(load_digits()[1])).max() <= 1  # stratified
    again = load_digits_split(rng=0)
    assert all(np.array_equal(a, b) for a, b in zip(again, (X_train, X_test, y_train, y_test), strict=True))
    assert not np.array_equal(load_digits_split(rng=1).y_test, y_test)  # another draw, another split


def test_digits_split_global_scaling_keeps_the_contrast_between_pixels():
    pixelwise, global_ = load_digits_split(rng=0), load_digits_split(rng=0, scaling="global")
    assert np.isclose(global_.X_train.mean(), 0) and np.isclose(global_.X_train.std(), 1)
    assert np.array_equal(global_.y_test, pixelwise.y_test)  # the same split
    # one affine map for all pixels: the 17 grey levels 0..16 stay 17 equally spaced values
    levels = np.unique(np.concatenate([global_.X_train, global_.X_test]).round(10))
    assert len(levels) == 17 and np.allclose(np.diff(levels), levels[1] - levels[0])
    assert len(np.unique(pixelwise.X_train.round(10))) > 17  # per-pixel scaling does not keep them


def test_digits_split_unit_scaling_is_the_grey_level_over_16():
    unit, pixelwise = load_digits_split(rng=0, scaling="unit"), load_digits_split(rng=0)
    images, _ = load_digits()
    assert np.array_equal(unit.y_test, pixelwise.y_test)  # the same split
    levels = np.unique(np.concatenate([unit.X_train, unit.X_test]))
    assert np.array_equal(levels, np.arange(17) / 16)  # all 17 grey levels, 0 and 1 included
    assert np.isclose(np.concatenate([unit.X_train, unit.X_test]).sum(), images.sum() / 16)


def test_diabetes():
    X, y, names = load_diabetes()
    assert X.shape == (442, 10) and y.shape == (442,) and len(names) == 10 and "bmi" in names
    assert np.allclose(X.mean(axis=0), 0, atol=1e-10)


@pytest.mark.parametrize(("split", "per_class"), [("train", 2000), ("test", 400)])
def test_fashion_mnist_subset_is_balanced(split, per_class):
    X, y = load_fashion_mnist(split)
    assert X.shape == (10 * per_class, 28, 28) and X.dtype == np.uint8
    assert y.shape == (10 * per_class,)
    assert (np.bincount(y) == per_class).all() and len(FASHION_CLASSES) == 10
    assert X.max() == 255 and X.min() == 0


def test_sample_moons_is_iid_on_sklearns_arcs():
    """Noise-free draws lie on make_moons's two half-circles; the class sizes vary like Binomial(n, 1/2) (make_moons
    fixes them at n/2) and the positions t along an arc are uniform (Kolmogorov-Smirnov)."""
    from scipy.stats import kstest
    from sklearn.datasets import make_moons

    X, y = sample_moons(4000, noise=0.0, rng=0)
    arcs, arc_labels = make_moons(20_000, noise=0.0, shuffle=False)
    for label in (0, 1):
        distance = np.linalg.norm(X[y == label, None] - arcs[None, arc_labels == label], axis=2).min(axis=1)
        assert distance.max() < 1e-3
    t = np.arccos(np.clip(X[y == 0, 0], -1, 1))
    assert kstest(t / np.pi, "uniform").pvalue > 1e-3
    counts = [sample_moons(100, rng=seed)[1].sum() for seed in range(200)]
    assert 3 < np.std(counts) < 7  # Binomial(100, 1/2): std 5
    X_noisy, y_noisy = sample_moons(4000, noise=0.2, rng=0)
    assert (y_noisy == y).all() and abs(np.std(X_noisy - X) - 0.2) < 0.01
    assert np.array_equal(sample_moons(50, rng=1)[0], sample_moons(50, rng=1)[0])


def test_fashion_mnist_train_and_test_differ():
    X_train, _ = load_fashion_mnist("train")
    X_test, _ = load_fashion_mnist("test")
    train_rows = {row.tobytes() for row in X_train.reshape(len(X_train), -1)}
    assert sum(row.tobytes() in train_rows for row in X_test.reshape(len(X_test), -1)) < 10


BAD_INPUT = [  # (call, error, message)
    (lambda: load_digits_split(test_size=1.5), ValueError, "test_size"),
    (lambda: load_digits_split(rng=0.5), TypeError, "rng"),
    (lambda: load_digits_split(scaling="image"), ValueError, "scaling"),
    (lambda: load_fashion_mnist("validation"), ValueError, "split must be one of"),
    (lambda: sample_moons(0), ValueError, "n"),
    (lambda: sample_moons(10, noise=-0.1), ValueError, "noise"),
    (lambda: sample_moons(10, rng=0.5), TypeError, "rng"),
]


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)


def test_novel_is_pride_and_prejudice():
    text = load_novel()
    assert text.startswith("PRIDE AND PREJUDICE")
    assert "It is a truth universally acknowledged" in text
    assert 650_000 < len(text) < 750_000 and text.isascii()


def test_karate_club():
    G, y = load_karate_club()
    assert isinstance(G, nx.Graph) and G.number_of_nodes() == 34 and G.number_of_edges() == 78
    assert y.shape == (34,) and y[0] == 0 and y[33] == 1 and np.bincount(y).tolist() == [17, 17]
