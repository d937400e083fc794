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
    loss_gradient,
    lp_norm,
    margin_loss,
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


def test_margin_loss_against_a_loop_and_its_sign_is_the_mistake():
    logits = torch.tensor(rng.normal(size=(9, 4)))
    labels = torch.tensor(rng.integers(0, 4, size=9))
    expected = [
        max(row[j] for j in range(4) if j != c) - row[c]
        for row, c in zip(logits.tolist(), labels.tolist(), strict=True)
    ]
    assert np.allclose(margin_loss(logits, labels).numpy(), expected, atol=1e-12)
    assert torch.equal(margin_loss(logits, labels) > 0, logits.argmax(1) != labels)


def test_loss_gradient_matches_central_differences_for_both_losses():
    torch.manual_seed(3)
    model = mlp((5,), d=4, K=3, dtype=torch.float64)
    X, y = rng.uniform(size=(3, 4)), rng.integers(0, 3, size=3)
    values = {
        "cross_entropy": lambda Z: cross_entropy(model, Z, y),
        "margin": lambda Z: margin_loss(model(torch.tensor(Z)), torch.tensor(y)).detach().numpy(),
    }
    for loss, value in values.items():
        h, numeric = 1e-6, np.zeros_like(X)
        for j in range(4):
            e = np.zeros(4)
            e[j] = h
            numeric[:, j] = (value(X + e) - value(X - e)) / (2 * h)
        assert np.allclose(loss_gradient(model, X, y, loss=loss), numeric, atol=1e-7)


def test_pgd_restarts_keep_each_examples_worst_case():
    # restarts can only help the attacker: every example keeps the best of its runs, which a single run with
    # the same first start cannot beat; the margin loss also reaches the linear worst case
    torch.manual_seed(2)
    model = mlp((16,), d=6, K=3, dtype=torch.float64)
    X, y = rng.uniform(size=(30, 6)), rng.integers(0, 3, size=30)

    def margin(Z):
        return margin_loss(model(torch.tensor(Z)), torch.tensor(y)).detach().numpy()

    one = pgd(model, X, y, 0.2, 0.05, 5, restarts=1, rng=5)
    many = pgd(model, X, y, 0.2, 0.05, 5, restarts=8, rng=5)  # the first run is `one`'s run
    fooled_one, fooled_many = margin(one) > 0, margin(many) > 0
    assert np.all(fooled_many >= fooled_one)
    same = fooled_one == fooled_many
    assert np.all(margin(many)[same] >= margin(one)[same] - 1e-12)
    assert np.abs(many - X).max() <= 0.2 + 1e-12 and many.min() >= 0 and many.max() <= 1
    w, b = rng.normal(size=6), 0.1
    binary, y2 = linear_two_class(w, b), rng.integers(0, 2, size=8)
    X2 = rng.uniform(size=(8, 6))
    worst = X2 - 0.2 * (2 * y2 - 1)[:, None] * np.sign(w)
    assert np.allclose(
        pgd(binary, X2, y2, 0.2, 0.05, 10, loss="margin", clip=False, rng=0), worst, atol=1e-12
    )


def test_a_budget_per_example_equals_running_the_examples_one_by_one():
    torch.manual_seed(4)
    model = mlp((8,), d=5, K=3, dtype=torch.float64)
    X, y = rng.uniform(size=(4, 5)), rng.integers(0, 3, size=4)
    eps = np.array([0.05, 0.2, 0.5, 1.0])
    together = pgd(model, X, y, eps, eps / 4, 6, p=2, random_start=False)
    alone = [
        pgd(model, X[i : i + 1], y[i : i + 1], eps[i], eps[i] / 4, 6, p=2, random_start=False)[0]
        for i in range(4)
    ]
    assert np.allclose(together, alone, atol=1e-12)
    assert np.all(np.linalg.norm(together - X, axis=1) <= eps + 1e-12)
    assert np.allclose(project_lp(np.ones((2, 4)), [0.5, 4.0], "inf"), [[0.5] * 4, [1.0] * 4])


def test_labels_outside_the_models_classes_are_refused():
    model, X = mlp((4,), d=3, K=5), np.ones((2, 3))
    for call in (
        lambda: fgsm(model, X, [0, 5], 0.1),
        lambda: pgd(model, X, [0, 5], 0.1, 0.1, 2),
        lambda: pgd(model, X, [0, 1], 0.1, 0.1, 2, target=[0, 7]),
        lambda: robust_accuracy(model, X, [0, 5], None),
        lambda: train_classifier(model, X, [0, 5], epochs=1, progress=False),
        lambda: loss_gradient(model, X, [-1, 0]),
    ):
        with pytest.raises(ValueError, match=r"must hold labels in 0\.\.4"):
            call()


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
    (lambda: robust_accuracy(mlp(), np.ones((2, 64)), [0, 1], [fgsm, "pgd"]), TypeError, "attack[1] must be callable"),
    (lambda: robust_accuracy(mlp(), np.ones((2, 64)), [0, 10], None), ValueError, "y must hold labels in 0..9"),
    (lambda: fgsm(mlp(), np.ones((2, 64)), [0, 10], 0.1), ValueError, "y must hold labels in 0..9"),
    (lambda: pgd(mlp(), np.ones((1, 64)), [10], 0.1, 0.1, 5), ValueError, "y must hold labels in 0..9"),
    (lambda: pgd(mlp(), np.ones((1, 64)), [0], 0.1, 0.1, 5, target=[10]), ValueError, "target must hold labels in 0..9"),
    (lambda: pgd(mlp(), np.ones((1, 64)), [0], 0.1, 0.1, 5, loss="hinge"), ValueError, "loss must be one of ['cross_entropy', 'margin']"),
    (lambda: pgd(mlp(), np.ones((1, 64)), [0], 0.1, 0.1, 5, restarts=0), ValueError, "restarts must be an int in [1, inf)"),
    (lambda: pgd(mlp(), np.ones((1, 64)), [0], 0.1, 0.1, 5, restarts=2, random_start=False), ValueError, "restarts > 1 needs random_start=True"),
    (lambda: train_classifier(mlp(), np.ones((2, 64)), [0, 10], progress=False), ValueError, "y must hold labels in 0..9"),
    (lambda: train_classifier(mlp(), np.ones((2, 64)), [0, 1], augment="noise"), TypeError, "augment must be callable"),
    (lambda: loss_gradient(mlp(), np.ones((2, 64)), [0, 10]), ValueError, "y must hold labels in 0..9"),
    (lambda: project_lp(np.ones((2, 3)), [0.1, 0.2, 0.3]), ValueError, "eps must have shape (2,)"),
    (lambda: project_lp(np.ones((2, 3)), [0.1, -0.2]), ValueError, "eps must hold one finite number >= 0 per row"),
    (lambda: pgd(mlp(), np.ones((2, 64)), [0, 1], 0.1, [0.1, 0.0], 5), ValueError, "alpha must hold one finite number > 0 per row"),
]  # fmt: skip


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
