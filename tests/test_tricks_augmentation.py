"""Sections 8.6 and 8.8: mixup, label smoothing against nn.CrossEntropyLoss(label_smoothing), the finite optimal
logit gap against a numerical minimiser, the tempered cross-entropy of distillation against autograd and torch's
KL divergence. The digit transforms, the soft cross-entropy and the trainer are tested in test_tricks_common."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy.optimize import minimize

from dlnotes.tricks.augmentation import distill_loss, mixup, smooth_labels, smoothed_logit_gap
from dlnotes.tricks.common import soft_cross_entropy

from conftest import bad_input_test

rng = np.random.default_rng(8)
DIGITS = rng.uniform(size=(5, 8, 8))


def test_mixup_mixes_inputs_and_targets_with_the_same_weight():
    X, y = rng.normal(size=(6, 4)), rng.integers(0, 3, size=6)
    T = smooth_labels(y, 3, 0.0)
    mixed = mixup(X, T, alpha=0.5, rng=4)
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
    targets = torch.tensor(smooth_labels(y, 5, eps))
    manual = -(targets * F.log_softmax(G, dim=1)).sum(1).mean()
    reference = torch.nn.CrossEntropyLoss(label_smoothing=eps)(G, torch.tensor(y))
    assert abs(float(manual - reference)) < 1e-12
    # and the soft cross-entropy helper at T = 1 is the same loss
    assert abs(float(soft_cross_entropy(G, targets) - reference)) < 1e-12


@pytest.mark.parametrize(("K", "eps"), [(10, 0.1), (3, 0.3), (5, 0.02)])
def test_smoothed_logit_gap_is_the_gap_of_the_numerical_minimiser(K, eps):
    target = smooth_labels([0], K, eps)[0]

    def loss(G):
        return -(target * (G - np.log(np.exp(G).sum()))).sum()

    G = minimize(loss, np.zeros(K), method="BFGS", options={"gtol": 1e-10}).x
    assert abs((G[0] - G[1:]).mean() - smoothed_logit_gap(K, eps)) < 1e-4


@pytest.mark.parametrize("T", [0.5, 1.0, 4.0])
def test_distill_loss_equals_autograd(T):
    F_logits, G_logits = rng.normal(size=(4, 6)) * 3, rng.normal(size=(4, 6))
    G = torch.tensor(G_logits, requires_grad=True)
    p = torch.softmax(torch.tensor(F_logits) / T, dim=1)
    loss = -(p * torch.log_softmax(G / T, dim=1)).sum(1).mean()
    loss.backward()
    ours = distill_loss(F_logits, G_logits, T)
    assert abs(ours.loss - loss.item()) < 1e-12
    np.testing.assert_allclose(ours.grad, G.grad.numpy(), atol=1e-14)
    # torch's KL divergence differs from the cross-entropy by the teacher's entropy only
    kl = F.kl_div(torch.log_softmax(G / T, dim=1), p, reduction="batchmean")
    entropy = -(p * torch.log(p)).sum(1).mean()
    assert abs(ours.loss - float((kl + entropy).detach())) < 1e-12
    # soft_cross_entropy is T^2 times the same loss
    assert abs(float(soft_cross_entropy(G.detach(), p, T)) - T**2 * ours.loss) < 1e-10


BAD_INPUT = [  # (call, error, message)
    (lambda: mixup(np.ones((3, 2)), np.ones((4, 2))), ValueError, r"targets must have shape"),
    (lambda: mixup(np.ones((3, 2)), np.ones((3, 2)), alpha=0.0), ValueError, "alpha"),
    (lambda: smooth_labels([0, 3], 3, 0.1), ValueError, "0..2"),
    (lambda: smooth_labels([0, 1], 3, 1.5), ValueError, "eps"),
    (lambda: smooth_labels([0, 1], 1, 0.1), ValueError, "K"),
    (lambda: smoothed_logit_gap(10, 0.0), ValueError, "eps"),
    (
        lambda: distill_loss(np.ones((2, 3)), np.ones((2, 4)), 2.0),
        ValueError,
        r"G must have shape (2, 3)",
    ),
    (lambda: distill_loss(np.ones((2, 3)), np.ones((2, 3)), -1.0), ValueError, "T"),
]


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
