"""dlnotes.ethics.people (11.8): the membership AUC against scikit-learn, per-example gradients against one
backward pass per example and against the batch gradient, the DP-SGD clip-and-noise step, the backdoor trigger."""

import numpy as np
import pytest
import torch
from sklearn.metrics import roc_auc_score

from dlnotes.ethics.common import mlp
from dlnotes.ethics.people import add_trigger, clip_and_noise, membership_auc, per_example_gradients

from conftest import bad_input_test

rng = np.random.default_rng(118)


def test_membership_auc_is_the_roc_auc_of_minus_the_loss():
    members, others = rng.exponential(0.5, size=40), rng.exponential(1.0, size=60)
    others[:5] = members[:5]  # ties
    truth = np.r_[np.ones(40), np.zeros(60)]
    assert membership_auc(members, others) == pytest.approx(
        roc_auc_score(truth, -np.r_[members, others]), abs=1e-12
    )
    assert membership_auc(np.ones(3), np.ones(4)) == 0.5


def test_per_example_gradients_sum_to_the_batch_gradient():
    torch.manual_seed(0)
    model = mlp((5,), d=4, K=3, dtype=torch.float64)
    X, y = rng.uniform(size=(6, 4)), rng.integers(0, 3, size=6)
    G = per_example_gradients(model, X, y)
    assert G.shape == (6, sum(p.numel() for p in model.parameters()))
    model.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(torch.tensor(X)), torch.tensor(y), reduction="sum")
    loss.backward()
    batch = np.concatenate([p.grad.reshape(-1).numpy() for p in model.parameters()])
    assert np.allclose(G.sum(axis=0), batch, atol=1e-12)


def test_clip_and_noise_clips_each_example_and_adds_noise_of_the_right_size():
    grads = rng.normal(size=(8, 5)) * np.array([[0.1], [5], [0.3], [2], [9], [0.05], [1], [3]])
    C = 1.0
    norms = np.linalg.norm(grads, axis=1)
    expected = (grads * np.minimum(1, C / norms)[:, None]).mean(axis=0)
    assert np.allclose(clip_and_noise(grads, C, 0.0), expected, atol=1e-15)
    draws = np.array([clip_and_noise(grads, C, 2.0, rng=i) - expected for i in range(2000)])
    assert np.std(draws) == pytest.approx(2.0 * C / 8, rel=0.05)  # noise sigma C / n per coordinate
    single = clip_and_noise(grads[1:2], C, 0.0)
    assert np.linalg.norm(single) == pytest.approx(C)  # a large gradient is cut to norm C


def test_add_trigger_sets_the_corner_only():
    X = rng.uniform(size=(3, 64)) * 0.5
    T = add_trigger(X, size=2)
    images, before = T.reshape(3, 8, 8), X.reshape(3, 8, 8)
    assert np.all(images[:, 6:, 6:] == 1.0)
    mask = np.ones((8, 8), bool)
    mask[6:, 6:] = False
    assert np.array_equal(images[:, mask], before[:, mask]) and np.all(X < 1)  # X itself is unchanged


BAD_INPUT = [  # (call, error, message)
    (lambda: membership_auc([], [1.0]), ValueError, "loss_members"),
    (lambda: per_example_gradients(mlp((3,), d=2, K=2), np.ones((2, 2)), [0, 2]), ValueError, "y must hold labels in 0..1"),
    (lambda: clip_and_noise(np.ones(3), 1.0, 0.0), ValueError, "grads must hold one gradient per row"),
    (lambda: clip_and_noise(np.ones((2, 3)), 0.0, 0.0), ValueError, "C must be a finite number in (0, inf)"),
    (lambda: clip_and_noise(np.ones((2, 3)), 1.0, -1.0), ValueError, "sigma must be a finite number in [0, inf)"),
    (lambda: add_trigger(np.ones((2, 60))), ValueError, "X must be a batch of rows (n, 64)"),
    (lambda: add_trigger(np.ones((2, 64)), size=9), ValueError, "size must be an int in [1, 8]"),
]  # fmt: skip


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
