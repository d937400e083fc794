"""Tests of chapter 07, section 7.2 Deep Sets (and the group helpers of 7.1): digit sets, DeepSets, the
equivariant set layer, training and the per-size baseline."""

import itertools
import math

import numpy as np
import pytest
import torch
from torch import nn

from dlnotes import gdl

from conftest import bad_input_test

# ----------------------------------------------------------------------------- groups (7.1)


def test_permutation_group_against_itertools():
    for M in (1, 2, 3, 4):
        S = gdl.permutation_group(M)
        assert S.shape == (math.factorial(M), M, M) and np.array_equal(S[0], np.eye(M))
        pis = [tuple(int(np.argmax(P[i])) for i in range(M)) for P in S]  # P[i, pi[i]] = 1
        assert pis == list(itertools.permutations(range(M)))


def test_cyclic_shifts_are_the_powers_of_one_shift():
    C = gdl.cyclic_shifts(5)
    for s in range(5):
        assert np.array_equal(C[s], np.linalg.matrix_power(C[1], s))
    X = np.arange(5.0)
    assert np.array_equal(C[2] @ X, np.roll(X, -2))


def test_group_axioms_brute_force():
    assert gdl.group_axioms(gdl.permutation_group(4)) == (True, True, True, True, False)
    assert gdl.group_axioms(gdl.permutation_group(2)) == (True, True, True, True, True)
    assert gdl.group_axioms(gdl.cyclic_shifts(6)) == (True, True, True, True, True)
    assert not gdl.group_axioms(gdl.permutation_group(3)[1:]).identity
    # {I, 2I}: closed? no (4I missing); identity yes; inverses no (1/2 I missing)
    axioms = gdl.group_axioms(np.stack([np.eye(2), 2 * np.eye(2)]))
    assert axioms.identity and not axioms.closure and not axioms.inverses
    # rotations by multiples of 90 degrees: a group, abelian; with a reflection: the dihedral group D4
    R = np.array([[0.0, -1.0], [1.0, 0.0]])
    rotations = np.stack([np.linalg.matrix_power(R, k) for k in range(4)])
    assert all(gdl.group_axioms(rotations))
    F = np.diag([1.0, -1.0])
    dihedral = np.concatenate([rotations, rotations @ F])
    assert gdl.group_axioms(dihedral) == (True, True, True, True, False)
    # a non-associative "operation" cannot arise from matrices: associativity holds for any matrix set
    assert gdl.group_axioms(np.random.default_rng(0).normal(size=(3, 2, 2))).associativity


# ----------------------------------------------------------------------------- digit sets


def test_make_digit_sets():
    rng = np.random.default_rng(0)
    images, labels = rng.normal(size=(50, 6)), rng.integers(0, 10, size=50)
    s = gdl.make_digit_sets(images, labels, 200, sizes=(2, 4), rng=1)
    sizes = s.mask.sum(1)
    assert s.X.shape == (200, 4, 6) and set(sizes.tolist()) == {2, 3, 4}
    assert np.array_equal(s.mask, s.labels >= 0) and np.all(s.X[~s.mask] == 0)
    for X, m, lab, y in zip(s.X, s.mask, s.labels, s.y, strict=True):
        rows = [int(np.flatnonzero((images == x).all(1))[0]) for x in X[m]]
        assert len(set(rows)) == len(rows)  # distinct images
        assert np.array_equal(labels[rows], lab[m]) and y == labels[rows].sum()
    again = gdl.make_digit_sets(images, labels, 200, sizes=(2, 4), rng=1)
    assert np.array_equal(again.X, s.X)


# ----------------------------------------------------------------------------- models


def _deep_sets(pool):
    torch.manual_seed(0)
    phi = nn.Sequential(nn.Linear(3, 8), nn.Tanh())
    return gdl.DeepSets(phi, nn.Linear(8, 2), pool=pool).double()


@pytest.mark.parametrize("pool", ["sum", "mean", "max"])
def test_deep_sets_against_a_loop_and_invariance(pool):
    model = _deep_sets(pool)
    X = torch.randn(6, 3, dtype=torch.float64)
    H = torch.stack([model.phi(x) for x in X])
    pooled = {"sum": H.sum(0), "mean": H.mean(0), "max": H.max(0).values}[pool]
    with torch.no_grad():
        assert torch.allclose(model(X), model.rho(pooled))
        assert gdl.check_invariant(lambda Z: model(Z), X, rng=0)
        # a padded batch with a mask gives the same result as the unpadded sets
        batch = torch.zeros(2, 8, 3, dtype=torch.float64)
        batch[0, :6], batch[1, :4] = X, X[:4]
        mask = torch.zeros(2, 8, dtype=torch.bool)
        mask[0, :6], mask[1, :4] = True, True
        out = model(batch, mask)
        assert torch.allclose(out[0], model(X)) and torch.allclose(out[1], model(X[:4]))
        # without the mask the padding rows count (phi(0) != 0 after the bias)
        if pool != "max":  # a max may ignore phi(0) when it is below every maximum
            assert not torch.allclose(model(batch)[1], model(X[:4]))


def test_equivariant_set_layer_formula_and_equivariance():
    torch.manual_seed(1)
    layer = gdl.EquivariantSetLayer(3, 4).double()
    X = torch.randn(5, 3, dtype=torch.float64)
    Lam, b, Gam = (layer.Lam.weight.T, layer.Lam.bias, layer.Gam.weight.T)
    with torch.no_grad():
        Y = layer(X)
        assert torch.allclose(Y, X @ Lam + X.sum(0) @ Gam + b)
        assert gdl.check_equivariant(lambda Z: layer(Z), X, rng=0)
        mean_layer = gdl.EquivariantSetLayer(3, 4, pool="mean").double()
        mean_layer.load_state_dict(layer.state_dict())
        assert torch.allclose(mean_layer(X), X @ Lam + X.mean(0) @ Gam + b)
        batch = torch.zeros(1, 7, 3, dtype=torch.float64)
        batch[0, :5] = X
        mask = torch.arange(7)[None] < 5
        out = layer(batch, mask)[0]
        assert torch.allclose(out[:5], Y) and torch.all(out[5:] == 0)


def test_training_learns_a_sum_and_beats_the_size_baseline():
    rng = np.random.default_rng(0)
    values = rng.integers(0, 10, size=300)
    images = np.eye(10)[values] + 0.05 * rng.normal(size=(300, 10))  # one-hot "images" of their label
    sets = gdl.make_digit_sets(images, values, 600, sizes=(2, 4), rng=rng)
    torch.manual_seed(0)
    model = gdl.DeepSets(nn.Sequential(nn.Linear(10, 16), nn.ReLU()), nn.Linear(16, 1))
    losses = gdl.train_set_model(model, sets.X, sets.mask, sets.y, epochs=40, lr=1e-2, rng=rng)
    assert losses[-1] < 0.05 * losses[0]
    pred = gdl.predict_sets(model, sets.X, sets.mask)
    base = gdl.size_mean_baseline(sets.y, sets.mask.sum(1), sets.mask.sum(1))
    assert np.abs(pred - sets.y).mean() < 0.2 * np.abs(base - sets.y).mean()


def test_size_mean_baseline_by_hand():
    y, sizes = np.array([1.0, 3.0, 10.0, 20.0, 30.0]), np.array([2, 2, 3, 3, 3])
    assert np.allclose(gdl.size_mean_baseline(y, sizes, [3, 2, 2]), [20.0, 2.0, 2.0])


# ----------------------------------------------------------------------------- bad input

IMG, LAB = np.ones((10, 4)), np.arange(10) % 3
BAD_INPUT = [  # (call, error, message)
    (lambda: gdl.permutation_group(8), ValueError, "M must be an int"),
    (lambda: gdl.cyclic_shifts(0), ValueError, "M must be an int"),
    (lambda: gdl.group_axioms(np.ones((2, 2, 3))), ValueError, "square"),
    (lambda: gdl.group_axioms(np.ones((2, 2))), ValueError, "elements must have 3 axes"),
    (lambda: gdl.make_digit_sets(IMG, LAB[:5], 3), ValueError, "labels must be"),
    (lambda: gdl.make_digit_sets(IMG, LAB, 3, sizes=3), TypeError, "sizes must be a pair"),
    (lambda: gdl.make_digit_sets(IMG, LAB, 3, sizes=(2, 11)), ValueError, r"sizes[1]"),
    (lambda: gdl.make_digit_sets(IMG, LAB, 0), ValueError, "n must be an int"),
    (lambda: gdl.DeepSets(lambda x: x, nn.Identity()), TypeError, "phi must be a torch.nn.Module"),
    (lambda: gdl.DeepSets(nn.Identity(), nn.Identity(), pool="min"), ValueError, "pool must be one of"),
    (lambda: gdl.DeepSets(nn.Identity(), nn.Identity())(np.ones((3, 2))), ValueError, "X must be a tensor"),
    (
        lambda: gdl.DeepSets(nn.Identity(), nn.Identity())(
            torch.ones(2, 3, 2), torch.ones(2, 4, dtype=torch.bool)
        ),
        ValueError,
        r"mask must be a bool tensor of shape (2, 3)",
    ),
    (lambda: gdl.EquivariantSetLayer(0, 2), ValueError, "d_in must be an int"),
    (
        lambda: gdl.train_set_model(nn.Linear(2, 1), np.ones((4, 3, 2)), np.ones((4, 2), bool), np.ones(4)),
        ValueError,
        "mask must be a bool array",
    ),
    (
        lambda: gdl.train_set_model(nn.Linear(2, 1), np.ones((4, 3, 2)), np.ones((4, 3), bool), np.ones(5)),
        ValueError,
        r"y must have shape (4,)",
    ),
    (lambda: gdl.train_set_model("model", np.ones((4, 3, 2)), None, None), TypeError, "model must be"),
    (lambda: gdl.size_mean_baseline([1.0, 2.0], [2, 2], [3]), ValueError, r"set sizes [3]"),
]


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
