"""dlnotes.ethics.common, the tools that several sections of chapter 11 use: p-norms against numpy, the projection
onto the ℓ2 and ℓ∞ balls against a numerical minimiser, the chapter's MLP and its training, and FGSM and PGD
against the closed-form worst case of a linear model (where the optimal attack is known exactly)."""

import math

import numpy as np
import pytest
import torch
from scipy.optimize import minimize

from dlnotes.ethics.common import (
    fgsm,
    linear_two_class,
    lp_norm,
    mlp,
    pgd,
    predict,
    project_lp,
    robust_accuracy,
    train_classifier,
)

from conftest import bad_input_test

rng = np.random.default_rng(11)


def test_lp_norm_matches_numpy_for_vectors_and_rows():
    X = rng.normal(size=(5, 7))
    X[0, :3] = 0
    for p in (1, 2, 3.5, math.inf):
        assert np.allclose(lp_norm(X, p), np.linalg.norm(X, ord=p, axis=1), rtol=1e-12)
        assert lp_norm(X[1], p) == pytest.approx(np.linalg.norm(X[1], ord=p), rel=1e-12)
    assert np.array_equal(lp_norm(X, 0), np.count_nonzero(X, axis=1))
    assert lp_norm(np.array([1e200, 1e200]), 4) == pytest.approx(2**0.25 * 1e200)  # no overflow


def test_project_lp_is_the_nearest_point_of_the_ball():
    for p in (2, "inf"):
        for delta in (rng.normal(size=4) * 2, rng.normal(size=4) * 0.01):
            projected = project_lp(delta, 0.5, p)

            def distance(z, delta=delta):
                return np.sum((z - delta) ** 2)

            if p == 2:
                ball = {"type": "ineq", "fun": lambda z: 0.25 - z @ z}
                best = minimize(distance, np.zeros(4), constraints=[ball])
            else:  # the l_inf ball is a box
                best = minimize(distance, np.zeros(4), bounds=[(-0.5, 0.5)] * 4)
            assert np.allclose(projected, best.x, atol=1e-5)
    rows = rng.normal(size=(6, 3))
    assert np.allclose(project_lp(rows, 0.3, 2), [project_lp(r, 0.3, 2) for r in rows])


def test_mlp_shapes_and_training_learns_digits():
    from dlnotes.data import load_digits_split

    assert [type(m).__name__ for m in mlp((8,), d=3, K=2)] == ["Linear", "ReLU", "Linear"]
    assert [type(m).__name__ for m in mlp((), d=3, K=2)] == ["Linear"]
    torch.manual_seed(0)
    X_train, X_test, y_train, y_test = load_digits_split(rng=0, scaling="unit")
    model = mlp()
    losses = train_classifier(model, X_train, y_train, epochs=15, rng=0, progress=False)
    assert losses[-1] < 0.2 * losses[0]
    assert robust_accuracy(model, X_test, y_test, None) > 0.9
    assert np.array_equal(predict(model, X_test), model(torch.tensor(X_test).float()).argmax(1).numpy())


def cross_entropy(model, X, y):
    logits = model(torch.tensor(X, dtype=next(model.parameters()).dtype))
    return torch.nn.functional.cross_entropy(logits, torch.tensor(y), reduction="none").detach().numpy()


def test_fgsm_and_pgd_reach_the_linear_worst_case():
    # for f_1 - f_0 = w·x + b the loss decreases in the margin, so the l_inf worst case is x - eps y± sign(w)
    # and the l2 worst case is x - eps y± w / |w| (y± = +1 for class 1, -1 for class 0)
    d, eps = 6, 0.2
    w, b = rng.normal(size=d), 0.3
    model = linear_two_class(w, b)  # logits (0, w·x + b), float64
    X, y = rng.uniform(size=(8, d)), rng.integers(0, 2, size=8)
    y_pm = 2 * y - 1
    worst_inf = X - eps * y_pm[:, None] * np.sign(w)
    worst_2 = X - eps * y_pm[:, None] * w / np.linalg.norm(w)
    assert np.allclose(fgsm(model, X, y, eps, clip=False), worst_inf, atol=1e-12)
    pgd_inf = pgd(model, X, y, eps, eps / 4, 10, clip=False, rng=0)
    assert np.allclose(pgd_inf, worst_inf, atol=1e-12)
    pgd_2 = pgd(model, X, y, eps, eps / 4, 20, p=2, random_start=False, clip=False)
    assert np.allclose(pgd_2, worst_2, atol=1e-12)
    started = pgd(model, X, y, eps, eps / 4, 40, p=2, clip=False, rng=0)  # the random start decays
    assert np.allclose(started, worst_2, atol=1e-3) and not np.allclose(started, worst_2, atol=1e-8)
    assert np.all(cross_entropy(model, pgd_2, y) > cross_entropy(model, X, y))
    # with the box the iterates stay in [0, 1] and in the ball
    boxed = pgd(model, X, y, 0.5, 0.1, 10, rng=0)
    assert boxed.min() >= 0 and boxed.max() <= 1 and np.abs(boxed - X).max() <= 0.5 + 1e-12


def test_targeted_pgd_moves_towards_the_target_on_digits():
    from dlnotes.data import load_digits_split

    torch.manual_seed(1)
    X_train, X_test, y_train, y_test = load_digits_split(rng=1, scaling="unit")
    model = mlp((32,))
    train_classifier(model, X_train, y_train, epochs=15, rng=1, progress=False)
    X, y = X_test[:40], y_test[:40]
    target = (y + 1) % 10
    X_adv = pgd(model, X, y, 0.3, 0.03, 40, target=target, rng=1)
    assert np.abs(X_adv - X).max() <= 0.3 + 1e-6
    assert (predict(model, X_adv) == target).mean() > 0.9
    untargeted = pgd(model, X, y, 0.1, 0.025, 20, rng=1)
    assert (
        cross_entropy(model, untargeted, y).mean() >= cross_entropy(model, fgsm(model, X, y, 0.1), y).mean()
    )


BAD_INPUT = [  # (call, error, message)
    (lambda: lp_norm(np.ones((2, 2, 2)), 2), ValueError, "x must be a vector (d,) or a batch of rows (n, d)"),
    (lambda: lp_norm(np.ones(3), 0.5), ValueError, "p must be 0, a number >= 1 or inf"),
    (lambda: project_lp(np.ones(3), -1.0), ValueError, "eps must be a finite number in [0, inf)"),
    (lambda: project_lp(np.ones(3), 1.0, p=1), ValueError, "p must be one of [2, 'inf']"),
    (lambda: mlp((0,)), ValueError, "hidden must be an int in [1, inf)"),
    (lambda: train_classifier(mlp(), np.ones((3, 64)), [0, 1]), ValueError, "y must be a non-empty 1-D array of 3 labels"),
    (lambda: predict("model", np.ones((3, 64))), TypeError, "model must be a torch.nn.Module"),
    (lambda: fgsm(mlp(), np.ones(64), [0], 0.1), ValueError, "X must be a batch of rows (n, d)"),
    (lambda: pgd(mlp(), np.ones((1, 64)), [0], 0.1, 0.0, 5), ValueError, "alpha must be a finite number in (0, inf)"),
    (lambda: pgd(mlp(), np.ones((1, 64)), [0], 0.1, 0.1, 5, target=[1, 2]), ValueError, "target must be a non-empty 1-D array of 1 labels"),
    (lambda: robust_accuracy(mlp(), np.ones((2, 64)), [0, 1], attack="pgd"), TypeError, "attack must be callable"),
]  # fmt: skip


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
