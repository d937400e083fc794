"""Sections 8.6 and 8.8: digit transforms against numpy (np.rot90, slices of padded images), augmentation,
mixup, label smoothing against nn.CrossEntropyLoss(label_smoothing), the finite optimal logit gap against a
numerical minimiser, the tempered cross-entropy of distillation against autograd, and the training helpers."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy.optimize import minimize

from dlnotes import tricks

from conftest import bad_input_test

rng = np.random.default_rng(8)
DIGITS = rng.uniform(size=(5, 8, 8))


def test_transform_digits_matches_rot90_and_padded_slices():
    quarter = tricks.transform_digits(DIGITS, np.zeros((5, 2)), np.full(5, 90.0))
    half = tricks.transform_digits(DIGITS, np.zeros((5, 2)), np.full(5, 180.0))
    np.testing.assert_allclose(quarter, np.rot90(DIGITS, axes=(1, 2)), atol=1e-12)
    np.testing.assert_allclose(half, np.rot90(DIGITS, 2, axes=(1, 2)), atol=1e-12)
    shifts = np.array([[1, 0], [0, -1], [-2, 2], [0, 0], [3, -3]])
    moved = tricks.transform_digits(DIGITS, shifts, np.zeros(5))
    padded = np.pad(DIGITS, ((0, 0), (3, 3), (3, 3)))
    for i, (down, right) in enumerate(shifts):
        np.testing.assert_array_equal(moved[i], padded[i, 3 - down : 11 - down, 3 - right : 11 - right])


def test_augment_digits_draws_shifts_then_angles_and_keeps_the_shape():
    flat = DIGITS.reshape(5, 64)
    out = tricks.augment_digits(flat, shifts=2, max_angle=15.0, rng=3)
    assert out.shape == flat.shape
    replay = np.random.default_rng(3)
    moves = replay.integers(-2, 3, size=(5, 2))
    angles = replay.uniform(-15, 15, size=5)
    assert np.all(np.abs(moves) <= 2) and np.all(np.abs(angles) <= 15)
    np.testing.assert_array_equal(out, tricks.transform_digits(DIGITS, moves, angles).reshape(5, 64))
    # no transform at strength 0; pixels stay in [0, 1] (linear interpolation, zero background)
    np.testing.assert_array_equal(tricks.augment_digits(DIGITS, shifts=0, max_angle=0.0, rng=1), DIGITS)
    assert out.min() >= 0 and out.max() <= 1


def test_mixup_mixes_inputs_and_targets_with_the_same_weight():
    X, y = rng.normal(size=(6, 4)), rng.integers(0, 3, size=6)
    T = tricks.smooth_labels(y, 3, 0.0)
    mixed = tricks.mixup(X, T, alpha=0.5, rng=4)
    replay = np.random.default_rng(4)
    partner, lam = replay.permutation(6), replay.beta(0.5, 0.5, size=6)
    np.testing.assert_allclose(mixed.lam, lam)
    np.testing.assert_allclose(mixed.X, lam[:, None] * X + (1 - lam[:, None]) * X[partner])
    np.testing.assert_allclose(mixed.targets.sum(1), 1.0)
    np.testing.assert_allclose(mixed.targets @ np.arange(3), lam * y + (1 - lam) * y[partner])


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.25, 1.0])
def test_smoothed_cross_entropy_equals_torch_label_smoothing(eps):
    G = torch.tensor(rng.normal(size=(7, 5)) * 2)
    y = rng.integers(0, 5, size=7)
    targets = torch.tensor(tricks.smooth_labels(y, 5, eps))
    manual = -(targets * F.log_softmax(G, dim=1)).sum(1).mean()
    reference = torch.nn.CrossEntropyLoss(label_smoothing=eps)(G, torch.tensor(y))
    assert abs(float(manual - reference)) < 1e-12
    # and the soft cross-entropy helper at T = 1 is the same loss
    assert abs(float(tricks.soft_cross_entropy(G, targets) - reference)) < 1e-12


@pytest.mark.parametrize(("K", "eps"), [(10, 0.1), (3, 0.3), (5, 0.02)])
def test_smoothed_logit_gap_is_the_gap_of_the_numerical_minimiser(K, eps):
    target = tricks.smooth_labels([0], K, eps)[0]

    def loss(G):
        return -(target * (G - np.log(np.exp(G).sum()))).sum()

    G = minimize(loss, np.zeros(K), method="BFGS", options={"gtol": 1e-10}).x
    assert abs((G[0] - G[1:]).mean() - tricks.smoothed_logit_gap(K, eps)) < 1e-4


@pytest.mark.parametrize("T", [0.5, 1.0, 4.0])
def test_distill_loss_equals_autograd(T):
    F_logits, G_logits = rng.normal(size=(4, 6)) * 3, rng.normal(size=(4, 6))
    G = torch.tensor(G_logits, requires_grad=True)
    p = torch.softmax(torch.tensor(F_logits) / T, dim=1)
    loss = -(p * torch.log_softmax(G / T, dim=1)).sum(1).mean()
    loss.backward()
    ours = tricks.distill_loss(F_logits, G_logits, T)
    assert abs(ours.loss - loss.item()) < 1e-12
    np.testing.assert_allclose(ours.grad, G.grad.numpy(), atol=1e-14)
    # torch's KL divergence differs from the cross-entropy by the teacher's entropy only
    kl = F.kl_div(torch.log_softmax(G / T, dim=1), p, reduction="batchmean")
    entropy = -(p * torch.log(p)).sum(1).mean()
    assert abs(ours.loss - float((kl + entropy).detach())) < 1e-12
    # soft_cross_entropy is T^2 times the same loss
    assert abs(float(tricks.soft_cross_entropy(G.detach(), p, T)) - T**2 * ours.loss) < 1e-10


def test_tempered_softmax_is_softmax_of_scaled_logits_and_tends_to_uniform():
    F_logits = rng.normal(size=(3, 5))
    np.testing.assert_allclose(
        tricks.tempered_softmax(F_logits, 2.5), torch.softmax(torch.tensor(F_logits) / 2.5, 1).numpy()
    )
    np.testing.assert_allclose(tricks.tempered_softmax(F_logits[0], 1e9), np.full(5, 0.2), atol=1e-8)


def test_train_digits_mlp_fits_labels_and_soft_targets_from_the_same_initialisation():
    X = rng.normal(size=(40, 6))
    y = (X[:, 0] > 0).astype(int)
    hard = tricks.train_digits_mlp(X, y, hidden=8, epochs=100, rng=5, progress=False)
    assert (tricks.predict_logits(hard, X).argmax(1) == y).mean() > 0.9
    untrained = tricks.train_digits_mlp(X, y, hidden=8, epochs=1, lr=1e-12, rng=5, progress=False)
    also_untrained = tricks.train_digits_mlp(
        X, tricks.smooth_labels(y, 2, 0.2), hidden=8, epochs=1, lr=1e-12, rng=5, progress=False
    )
    np.testing.assert_allclose(
        tricks.predict_logits(untrained, X), tricks.predict_logits(also_untrained, X), atol=1e-6
    )


BAD_INPUT = [  # (call, error, message)
    (
        lambda: tricks.transform_digits(np.ones((2, 8)), np.zeros((2, 2)), np.zeros(2)),
        ValueError,
        "X must have 3",
    ),
    (
        lambda: tricks.transform_digits(DIGITS, np.zeros((5, 3)), np.zeros(5)),
        ValueError,
        r"shifts must have shape",
    ),
    (lambda: tricks.transform_digits(DIGITS, np.full((5, 2), 0.5), np.zeros(5)), ValueError, "whole pixels"),
    (
        lambda: tricks.transform_digits(DIGITS, np.zeros((5, 2)), np.zeros(4)),
        ValueError,
        r"angles must have shape",
    ),
    (lambda: tricks.augment_digits(np.ones((3, 10))), ValueError, "square images"),
    (lambda: tricks.augment_digits(np.ones((3, 4, 4, 1))), ValueError, r"(N, h, w) or (N, h*w)"),
    (lambda: tricks.augment_digits(DIGITS, shifts=-1), ValueError, "shifts"),
    (lambda: tricks.augment_digits(DIGITS, max_angle=200), ValueError, "max_angle"),
    (lambda: tricks.augment_digits(DIGITS, rng="seed"), TypeError, "rng"),
    (lambda: tricks.mixup(np.ones((3, 2)), np.ones((4, 2))), ValueError, r"targets must have shape"),
    (lambda: tricks.mixup(np.ones((3, 2)), np.ones((3, 2)), alpha=0.0), ValueError, "alpha"),
    (lambda: tricks.smooth_labels([0, 3], 3, 0.1), ValueError, "0..2"),
    (lambda: tricks.smooth_labels([0, 1], 3, 1.5), ValueError, "eps"),
    (lambda: tricks.smooth_labels([0, 1], 1, 0.1), ValueError, "K"),
    (lambda: tricks.smoothed_logit_gap(10, 0.0), ValueError, "eps"),
    (lambda: tricks.tempered_softmax(np.ones((2, 3)), 0.0), ValueError, "T"),
    (
        lambda: tricks.tempered_softmax(np.ones((2, 3, 4))),
        ValueError,
        r"F must have shape (K,) or (N, K)",
    ),
    (
        lambda: tricks.distill_loss(np.ones((2, 3)), np.ones((2, 4)), 2.0),
        ValueError,
        r"G must have shape (2, 3)",
    ),
    (lambda: tricks.distill_loss(np.ones((2, 3)), np.ones((2, 3)), -1.0), ValueError, "T"),
    (lambda: tricks.soft_cross_entropy(np.ones((2, 3)), torch.ones(2, 3)), TypeError, "torch tensors"),
    (lambda: tricks.soft_cross_entropy(torch.ones(2, 3), torch.ones(2, 4)), ValueError, r"shape (N, K)"),
    (lambda: tricks.train_digits_mlp(np.ones((4, 2)), np.ones((4, 3))), ValueError, "sum to 1"),
    (lambda: tricks.train_digits_mlp(np.ones((4, 2)), [0, 1, 0]), ValueError, "targets must be a non-empty"),
    (lambda: tricks.train_digits_mlp(np.ones((4, 2)), [0, 1, 0, 1], hidden=0), ValueError, "hidden"),
    (lambda: tricks.predict_logits(torch.nn.Linear(2, 3), np.ones(3)), ValueError, "X must have shape"),
]


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
