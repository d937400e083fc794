"""dlnotes.ethics.attacks (11.3, attacks on networks): class probabilities and per-example losses against
scipy, one PGD step against the whole `pgd` loop, and the accuracy curve and the transfer matrix against the
closed-form worst case of binary linear models (where FGSM is the exact l_inf attack)."""

import numpy as np
import pytest
import torch
from scipy.special import log_softmax, softmax

from dlnotes.ethics.attacks import accuracy_curve, class_probabilities, example_losses, transfer_matrix
from dlnotes.ethics.common import fgsm, linear_two_class, lp_norm, mlp, pgd, pgd_step

from conftest import bad_input_test

rng = np.random.default_rng(113)


def small_mlp(seed, d=6, K=3):
    torch.manual_seed(seed)
    return mlp((8,), d=d, K=K, dtype=torch.float64)


def logits_of(model, X):
    return model(torch.tensor(X)).detach().numpy()


def test_class_probabilities_and_example_losses_match_scipy():
    model, X, y = small_mlp(0), rng.uniform(size=(7, 6)), rng.integers(0, 3, size=7)
    logits = logits_of(model, X)
    assert np.allclose(class_probabilities(model, X), softmax(logits, axis=1), atol=1e-12)
    assert np.allclose(example_losses(model, X, y), -log_softmax(logits, axis=1)[np.arange(7), y], atol=1e-12)


def input_gradient(model, X, y):
    x = torch.tensor(X, requires_grad=True)
    torch.nn.functional.cross_entropy(model(x), torch.tensor(y), reduction="sum").backward()
    return x.grad.numpy()


@pytest.mark.parametrize("p", ["inf", 2])
def test_pgd_steps_by_hand_reproduce_pgd(p):
    model, X, y = small_mlp(1), rng.uniform(size=(9, 6)), rng.integers(0, 3, size=9)
    eps, alpha, steps = (0.2, 0.05, 8) if p == "inf" else (0.5, 0.125, 8)
    delta = np.zeros_like(X)
    for _ in range(steps):
        delta = pgd_step(X, delta, input_gradient(model, X + delta, y), eps, alpha, p)
    expected = pgd(model, X, y, eps, alpha, steps, p=p, random_start=False)
    assert np.allclose(X + delta, expected, atol=1e-12)
    assert np.all(lp_norm(delta, 2 if p == 2 else np.inf) <= eps + 1e-12)


def test_pgd_step_projects_and_keeps_the_box():
    x, grad = np.array([0.5, 0.5, 0.5]), np.array([3.0, 4.0, 0.0])  # unit gradient (0.6, 0.8, 0)
    inside = pgd_step(x, np.zeros(3), grad, eps=1.0, alpha=0.1, p=2)
    assert np.allclose(inside, [0.06, 0.08, 0.0])  # inside the ball: no rescaling onto the sphere
    outside = pgd_step(x, np.zeros(3), grad, eps=0.1, alpha=0.5, p=2, clip=False)
    assert np.allclose(outside, [0.06, 0.08, 0.0])  # outside: shrunk to the sphere along the same direction
    edge = pgd_step(np.array([0.0, 1.0, 0.98]), np.zeros(3), np.array([-1.0, 1.0, 1.0]), 0.1, 0.05)
    assert np.allclose(edge, [0.0, 0.0, 0.02])  # the box [0, 1] stops the pixels
    unboxed = pgd_step(
        np.array([0.0, 1.0, 0.98]), np.zeros(3), np.array([-1.0, 1.0, 1.0]), 0.1, 0.05, clip=False
    )
    assert np.allclose(unboxed, [-0.05, 0.05, 0.05])


def linear_pair(d=5):
    w, b = rng.normal(size=d), 0.2
    X = rng.normal(size=(200, d))
    y = (X @ w + b + 0.5 * rng.normal(size=200) > 0).astype(int)
    return w, b, X, y


def fgsm_unclipped(model, X, y, eps):
    return fgsm(model, X, y, eps, clip=False)


def test_accuracy_curve_matches_the_linear_closed_form():
    # for a binary linear model FGSM (no box) is the exact l_inf worst case: a point stays correct under budget eps
    # iff its margin y(w.x + b) exceeds eps ||w||_1 (section 11.2)
    w, b, X, y = linear_pair()
    model = linear_two_class(w, b)
    eps_grid = np.array([0.0, 0.05, 0.1, 0.3])
    margins = (2 * y - 1) * (X @ w + b)
    expected = [(margins > eps * np.abs(w).sum()).mean() for eps in eps_grid]
    assert np.allclose(accuracy_curve(model, X, y, fgsm_unclipped, eps_grid), expected)

    def refuses_zero(model, X, y, eps):
        assert eps > 0, "the attack must not be called at eps = 0"
        return fgsm_unclipped(model, X, y, eps)

    assert accuracy_curve(model, X, y, refuses_zero, [0.0])[0] == (margins > 0).mean()


def test_transfer_matrix_matches_the_linear_closed_form():
    w, b, X, y = linear_pair()
    weights = [w, w + 0.5 * rng.normal(size=5), rng.normal(size=5)]
    models = [linear_two_class(v, b) for v in weights]
    eps, y_pm = 0.2, 2 * y - 1
    matrix = transfer_matrix(models, X, y, lambda m, X, y: fgsm_unclipped(m, X, y, eps))
    for s, w_s in enumerate(weights):
        X_adv = X - eps * y_pm[:, None] * np.sign(w_s)  # FGSM on source s, in closed form
        for t, w_t in enumerate(weights):
            assert matrix[s, t] == pytest.approx(((X_adv @ w_t + b > 0) == y).mean())
    assert np.all(
        np.diag(matrix) <= matrix.min(axis=0) + 1e-12
    )  # for linear models white-box is the worst case


BAD_INPUT = [  # (call, error, message)
    (lambda: class_probabilities("model", np.ones((2, 6))), TypeError, "model must be a torch.nn.Module"),
    (lambda: example_losses(small_mlp(0), np.ones((2, 6)), [0]), ValueError, "y must be a non-empty 1-D array of 2 labels"),
    (lambda: pgd_step(np.ones(3), np.zeros(4), np.ones(3), 0.1, 0.01), ValueError, "delta must have shape (3,)"),
    (lambda: pgd_step(np.ones(3), np.zeros(3), np.ones(3), 0.1, 0.0), ValueError, "alpha must be a finite number in (0, inf)"),
    (lambda: pgd_step(np.ones(3), np.zeros(3), np.ones(3), 0.1, 0.01, p=1), ValueError, "p must be one of [2, 'inf']"),
    (lambda: pgd_step(np.ones((1, 2, 3)), np.zeros((1, 2, 3)), np.ones((1, 2, 3)), 0.1, 0.01), ValueError, "x must be a vector (d,) or a batch of rows (n, d)"),
    (lambda: accuracy_curve(small_mlp(0), np.ones((2, 6)), [0, 1], fgsm, [0.1, -0.1]), ValueError, "eps_grid must be a non-empty vector of budgets >= 0"),
    (lambda: accuracy_curve(small_mlp(0), np.ones((2, 6)), [0, 1], "fgsm", [0.1]), TypeError, "attack must be callable"),
    (lambda: transfer_matrix(small_mlp(0), np.ones((2, 6)), [0, 1], fgsm), TypeError, "models must be a non-empty list or tuple"),
    (lambda: transfer_matrix([small_mlp(0), "b"], np.ones((2, 6)), [0, 1], fgsm), TypeError, "models[1] must be a torch.nn.Module"),
    (lambda: transfer_matrix([small_mlp(0)], np.ones((2, 6)), [0, 3], fgsm), ValueError, "y must hold labels in 0..2"),
    (lambda: example_losses(small_mlp(0), np.ones((2, 6)), [0, 3]), ValueError, "y must hold labels in 0..2"),
    (lambda: accuracy_curve(small_mlp(0), np.ones((2, 6)), [0, 3], fgsm, [0.1]), ValueError, "y must hold labels in 0..2"),
]  # fmt: skip


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
