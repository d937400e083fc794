"""Offline data sets: the only module that knows where the book's data lives.

Nothing is downloaded, ever. The shipped files are made once by the scripts
in ``scripts/`` and installed with the package (``dlnotes/datafiles/``).

============================  ==============================================  ================  ===============
loader                        source                                          licence           size
============================  ==============================================  ================  ===============
``load_digits``,              scikit-learn's copy of the UCI optical digits   CC BY 4.0         1797 × 8×8
``load_digits_split``
``load_diabetes``             scikit-learn's copy of Efron et al.'s diabetes  with sklearn      442 × 10
                              study (2004)                                    (BSD-3)
``load_fashion_mnist``        Zalando's Fashion-MNIST, Debian                 MIT               20 000 train +
                              ``dataset-fashion-mnist``, balanced subset                        4 000 test 28×28
``load_novel``                Jane Austen, *Pride and Prejudice* (1813),      public domain     ≈ 0.7 MB text
                              Debian ``r-cran-janeaustenr``
``load_karate_club``          Zachary's karate club, ``networkx``             public            34 nodes
``load_arrests``              Toronto arrests for marijuana possession        GPL (>= 2), with  5226 × 8
                              1997–2002 (Toronto Star), carData's             carData
                              ``Arrests``, Debian ``r-cran-cardata``
``sample_moons``              two interleaved half-circles, drawn i.i.d.      made here         any n
============================  ==============================================  ================  ===============
"""

from __future__ import annotations

from importlib import resources
from typing import NamedTuple

import networkx as nx
import numpy as np
import sklearn.datasets
import sklearn.model_selection

from .validation import check_choice, check_int, check_number, check_rng

FASHION_CLASSES = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)


def _datafile(name: str):
    return resources.files("dlnotes") / "datafiles" / name


def load_digits() -> tuple[np.ndarray, np.ndarray]:
    """The 8×8 hand-written digits: images (1797, 8, 8) with grey levels 0..16, labels (1797,)."""
    digits = sklearn.datasets.load_digits()
    return digits.images.astype(np.float64), digits.target.astype(np.int64)


class Split(NamedTuple):
    X_train: np.ndarray
    X_test: np.ndarray
    y_train: np.ndarray
    y_test: np.ndarray


def load_digits_split(test_size: float = 0.25, rng=None, scaling: str = "pixel") -> Split:
    """Digits as flat vectors (s, 64), split into stratified train/test sets (drawn from `rng`) and
    standardised with statistics of the training set only (or scaled to [0, 1]).

    ``scaling="pixel"`` standardises every pixel on its own (pixels constant in training stay unscaled): right
    for models that treat the 64 inputs as unrelated features. ``scaling="global"`` subtracts one mean and
    divides by one standard deviation over all training pixels: it keeps the image's contrast between
    pixels, which is what a convolution sees (per-pixel scaling inflates the rarely inked border pixels).
    ``scaling="unit"`` divides the grey levels 0..16 by 16: pixels in [0, 1], the box in which an attack's
    budget is measured (chapter 11).
    """
    test_size = check_number(test_size, "test_size", 0, 1, low_open=True, high_open=True)
    scaling = check_choice(scaling, "scaling", ("pixel", "global", "unit"))
    images, labels = load_digits()
    X = images.reshape(len(images), -1)
    X_train, X_test, y_train, y_test = sklearn.model_selection.train_test_split(
        X, labels, test_size=test_size, stratify=labels, random_state=int(check_rng(rng).integers(2**31))
    )
    if scaling == "unit":
        mean, std = 0.0, 16.0
    elif scaling == "global":
        mean, std = X_train.mean(), X_train.std()
    else:
        mean, std = X_train.mean(axis=0), X_train.std(axis=0)
        std[std == 0] = 1.0
    return Split((X_train - mean) / std, (X_test - mean) / std, y_train, y_test)


def load_diabetes() -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Diabetes progression: ten standardised baseline variables (442, 10), the disease progression one
    year later (442,), and the variables' names."""
    data = sklearn.datasets.load_diabetes()
    return data.data.astype(np.float64), data.target.astype(np.float64), list(data.feature_names)


def load_fashion_mnist(split: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """A class-balanced subset of Fashion-MNIST: uint8 images (N, 28, 28) and labels (N,).

    ``split="train"`` gives 20 000 images (2 000 per class), ``split="test"``
    4 000 (400 per class), taken in file order from the official splits by
    ``scripts/make_fashion_mnist.py``. Class names: ``FASHION_CLASSES``.
    """
    split = check_choice(split, "split", ("train", "test"))
    with _datafile("fashion_mnist_subset.npz").open("rb") as f, np.load(f) as arrays:
        return arrays[f"X_{split}"], arrays[f"y_{split}"].astype(np.int64)


def load_novel() -> str:
    """Jane Austen's *Pride and Prejudice* as one string (lines joined by newlines)."""
    return _datafile("pride_and_prejudice.txt").read_text(encoding="utf-8")


class Arrests(NamedTuple):
    """The Toronto arrests: features X (n, 6) named by ``ARRESTS_FEATURES``, the protected attribute
    a (n,) (1 = Black, 0 = White) and the label y (n,) (1 = released with a summons, 0 = held for bail)."""

    X: np.ndarray
    a: np.ndarray
    y: np.ndarray


ARRESTS_FEATURES = ("year", "age", "female", "employed", "citizen", "checks")


def load_arrests() -> Arrests:
    """Arrests for possession of small amounts of marijuana in Toronto, 1997–2002: carData's ``Arrests``
    (made by ``scripts/make_arrests.py``). Columns of X: year, age, female, employed, citizen and checks (the
    number of police databases, 0–6, that held the arrestee's name); a = 1 for Black arrestees; y = 1 when
    the arrestee was released with a summons rather than held for a bail hearing."""
    with _datafile("arrests.csv").open("r", encoding="ascii") as f:
        table = np.loadtxt(f, delimiter=",", skiprows=1, dtype=np.int64)
    return Arrests(table[:, 2:].astype(np.float64), table[:, 1], table[:, 0])


def sample_moons(n: int, noise: float = 0.1, rng=None) -> tuple[np.ndarray, np.ndarray]:
    """n i.i.d. draws of scikit-learn's two moons: a label y ~ Bernoulli(1/2), a position t ~ U[0, pi] on the
    label's half-circle, (cos t, sin t) for y = 0 and (1 - cos t, 1/2 - sin t) for y = 1, plus Gaussian noise of
    standard deviation `noise` on both coordinates, all drawn from `rng`. Returns X (n, 2), y (n,) in {0, 1}.
    ``sklearn.datasets.make_moons`` places exactly n/2 points per class at evenly spaced t (only the noise is
    random): not an i.i.d. sample, which the bounds of chapter 09 assume.
    """
    n = check_int(n, "n", 1)
    noise = check_number(noise, "noise", 0)
    rng = check_rng(rng)
    y = rng.integers(0, 2, n)
    t = rng.uniform(0, np.pi, n)
    X = np.where(y[:, None] == 0, np.c_[np.cos(t), np.sin(t)], np.c_[1 - np.cos(t), 0.5 - np.sin(t)])
    return X + noise * rng.standard_normal((n, 2)), y


def load_karate_club() -> tuple[nx.Graph, np.ndarray]:
    """Zachary's karate club graph and its split: label 0 = 'Mr. Hi', 1 = 'Officer'."""
    G = nx.karate_club_graph()
    y = np.array([G.nodes[v]["club"] != "Mr. Hi" for v in G.nodes], dtype=np.int64)
    return G, y
