"""Tests of chapter 07, section 7.2 Deep Sets: digit sets, DeepSets, the equivariant set layer, training and the
per-size baseline."""

import numpy as np
import pytest
import torch
from torch import nn

from dlnotes.gdl.sets import (
    DeepSets,
    EquivariantSetLayer,
    make_digit_sets,
    predict_sets,
    size_mean_baseline,
    train_set_model,
)
from dlnotes.gdl.symmetry import check_equivariant, check_invariant

from conftest import bad_input_test

# ----------------------------------------------------------------------------- digit sets


def test_make_digit_sets():
    rng = np.random.default_rng(0)
    images, labels = rng.normal(size=(50, 6)), rng.integers(0, 10, size=50)
    s = make_digit_sets(images, labels, 200, sizes=(2, 4), rng=1)
    sizes = s.mask.sum(1)
    assert s.X.shape == (200, 4, 6) and set(sizes.tolist()) == {2, 3, 4}
    assert np.array_equal(s.mask, s.labels >= 0) and np.all(s.X[~s.mask] == 0)
    for X, m, lab, y in zip(s.X, s.mask, s.labels, s.y, strict=True):
        rows = [int(np.flatnonzero((images == x).all(1))[0]) for x in X[m]]
        assert len(set(rows)) == len(rows)  # distinct images
        assert np.array_equal(labels[rows], lab[m]) and y == labels[rows].sum()
    again = make_digit_sets(images, labels, 200, sizes=(2, 4), rng=1)
    assert np.array_equal(again.X, s.X)


# ----------------------------------------------------------------------------- models


def _deep_sets(pool):
    torch.manual_seed(0)
    phi = nn.Sequential(nn.Linear(3, 8), nn.Tanh())
    return DeepSets(phi, nn.Linear(8, 2), pool=pool).double()


@pytest.mark.parametrize("pool", ["sum", "mean", "max"])
def test_deep_sets_against_a_loop_and_invariance(pool):
    model = _deep_sets(pool)
    X = torch.randn(6, 3, dtype=torch.float64)
    H = torch.stack([model.phi(x) for x in X])
    pooled = {"sum": H.sum(0), "mean": H.mean(0), "max": H.max(0).values}[pool]
    with torch.no_grad():
        assert torch.allclose(model(X), model.rho(pooled))
        assert check_invariant(lambda Z: model(Z), X, rng=0)
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
    layer = EquivariantSetLayer(3, 4).double()
    X = torch.randn(5, 3, dtype=torch.float64)
    Lam, b, Gam = (layer.Lam.weight.T, layer.Lam.bias, layer.Gam.weight.T)
    with torch.no_grad():
        Y = layer(X)
        assert torch.allclose(Y, X @ Lam + X.sum(0) @ Gam + b)
        assert check_equivariant(lambda Z: layer(Z), X, rng=0)
        mean_layer = EquivariantSetLayer(3, 4, pool="mean").double()
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
    sets = make_digit_sets(images, values, 600, sizes=(2, 4), rng=rng)
    torch.manual_seed(0)
    model = DeepSets(nn.Sequential(nn.Linear(10, 16), nn.ReLU()), nn.Linear(16, 1))
    losses = train_set_model(model, sets.X, sets.mask, sets.y, epochs=40, lr=1e-2, rng=rng)
    assert losses[-1] < 0.05 * losses[0]
    pred = predict_sets(model, sets.X, sets.mask)
    base = size_mean_baseline(sets.y, sets.mask.sum(1), sets.mask.sum(1))
    assert np.abs(pred - sets.y).mean() < 0.2 * np.abs(base - sets.y).mean()


def test_training_and_prediction_leave_the_model_in_its_mode():
    model = DeepSets(nn.Linear(3, 4), nn.Linear(4, 1))
    X, mask, y = np.ones((6, 2, 3)), np.ones((6, 2), dtype=bool), np.ones(6)
    for training in (True, False):
        model.train(training)
        losses = train_set_model(model, X, mask, y, epochs=2, batch_size=4, rng=0, progress=False)
        assert model.training == training and len(losses) == 2
        predict_sets(model, X, mask)
        assert model.training == training


def test_size_mean_baseline_by_hand():
    y, sizes = np.array([1.0, 3.0, 10.0, 20.0, 30.0]), np.array([2, 2, 3, 3, 3])
    assert np.allclose(size_mean_baseline(y, sizes, [3, 2, 2]), [20.0, 2.0, 2.0])


# ----------------------------------------------------------------------------- bad input

IMG, LAB = np.ones((10, 4)), np.arange(10) % 3
BAD_INPUT = [  # (call, error, message)
    (lambda: make_digit_sets(IMG, LAB[:5], 3), ValueError, "labels must be"),
    (lambda: make_digit_sets(IMG, LAB, 3, sizes=3), TypeError, "sizes must be a pair"),
    (lambda: make_digit_sets(IMG, LAB, 3, sizes=(2, 11)), ValueError, r"sizes[1]"),
    (lambda: make_digit_sets(IMG, LAB, 0), ValueError, "n must be an int"),
    (lambda: DeepSets(lambda x: x, nn.Identity()), TypeError, "phi must be a torch.nn.Module"),
    (lambda: DeepSets(nn.Identity(), nn.Identity(), pool="min"), ValueError, "pool must be one of"),
    (lambda: DeepSets(nn.Identity(), nn.Identity())(np.ones((3, 2))), ValueError, "X must be a tensor"),
    (
        lambda: DeepSets(nn.Identity(), nn.Identity())(
            torch.ones(2, 3, 2), torch.ones(2, 4, dtype=torch.bool)
        ),
        ValueError,
        r"mask must be a bool tensor of shape (2, 3)",
    ),
    (lambda: EquivariantSetLayer(0, 2), ValueError, "d_in must be an int"),
    (
        lambda: train_set_model(nn.Linear(2, 1), np.ones((4, 3, 2)), np.ones((4, 2), bool), np.ones(4)),
        ValueError,
        "mask must be a bool array",
    ),
    (
        lambda: train_set_model(nn.Linear(2, 1), np.ones((4, 3, 2)), np.ones((4, 3), bool), np.ones(5)),
        ValueError,
        r"y must have shape (4,)",
    ),
    (lambda: train_set_model("model", np.ones((4, 3, 2)), None, None), TypeError, "model must be"),
    (lambda: size_mean_baseline([1.0, 2.0], [2, 2], [3]), ValueError, r"set sizes [3]"),
]


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
