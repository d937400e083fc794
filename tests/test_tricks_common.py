"""Chapter 08's shared tools (dlnotes.tricks.common): the dropout layer against torch's nn.Dropout, the book's MLP
and its paired initial weights, digit transforms against numpy (np.rot90, slices of padded images), augmentation,
the tempered softmax and the soft cross-entropy against torch, and the chapter's one trainer against a loop
written out with torch.optim.Adam, with each trick it switches on (label smoothing, soft targets, decoupled
weight decay, early stopping, batch norm, dropout on the inputs, augmentation, mini-batches)."""

import numpy as np
import pytest
import torch
from torch import nn

from dlnotes.data import load_digits
from dlnotes.tricks.common import (
    Dropout,
    augment_digits,
    dropout_mlp,
    predict_logits,
    soft_cross_entropy,
    tempered_softmax,
    train_digits_classifier,
    transform_digits,
)
from dlnotes.tricks.weight_decay import patience_stop

from conftest import bad_input_test

rng = np.random.default_rng(8)
DIGITS = rng.uniform(size=(5, 8, 8))
_images, _labels = load_digits()
X_SMALL = _images.reshape(len(_images), -1)[:120] / 16  # pixels in [0, 1]
Y_SMALL = _labels[:120]
X_VAL, Y_VAL = _images.reshape(len(_images), -1)[120:200] / 16, _labels[120:200]


# ----------------------------------------------------------------------------- the dropout layer and the MLP


def test_dropout_layer_equals_torch_dropout_and_is_the_identity_in_eval_mode():
    x = torch.randn(32, 50, dtype=torch.float64)
    for pi in (0.2, 0.5, 0.9):
        ours, theirs = Dropout(pi), torch.nn.Dropout(p=1 - pi)
        state = torch.get_rng_state()
        a = ours(x)
        torch.set_rng_state(state)
        b = theirs(x)
        assert torch.allclose(a, b, atol=1e-12)
        assert ((a == 0) == (b == 0)).all()
        ours.eval()
        assert torch.equal(ours(x), x)
    assert torch.equal(Dropout(1.0)(x), x)
    own = Dropout(0.5, rng=3)
    assert torch.equal(own(x), Dropout(0.5, rng=3)(x))  # its own generator: reproducible
    assert "pi=0.5" in repr(own)


def test_dropout_mlp_layers_and_paired_initial_weights():
    with_dropout = dropout_mlp([6, 8, 7, 3], 0.5, pi_input=0.8, rng=5)
    plain = dropout_mlp([6, 8, 7, 3], 1.0, rng=5)
    kinds = [type(m).__name__ for m in with_dropout]
    assert kinds == ["Dropout", "Linear", "ReLU", "Dropout", "Linear", "ReLU", "Dropout", "Linear"]
    assert [type(m).__name__ for m in plain] == ["Linear", "ReLU", "Linear", "ReLU", "Linear"]
    linears = [m for m in with_dropout if isinstance(m, torch.nn.Linear)]
    plain_linears = [m for m in plain if isinstance(m, torch.nn.Linear)]
    for a, b in zip(linears, plain_linears, strict=True):
        assert torch.equal(a.weight, b.weight) and torch.equal(a.bias, b.bias)
        bound = 1 / np.sqrt(a.in_features)  # torch's default nn.Linear range
        assert a.weight.abs().max() <= bound and a.weight.abs().max() > 0.5 * bound
    x = torch.randn(4, 6)
    with_dropout.eval()
    expected = x
    for a in plain_linears[:-1]:
        expected = torch.relu(a(expected))
    assert torch.allclose(with_dropout(x), plain_linears[-1](expected))


def test_predict_logits_is_the_forward_pass_in_eval_mode_and_restores_the_mode():
    net = dropout_mlp([64, 12, 10], 0.5, rng=2)
    logits = predict_logits(net, X_SMALL[:7])
    assert net.training and logits.shape == (7, 10)
    net.eval()
    with torch.no_grad():
        expected = net(torch.as_tensor(X_SMALL[:7], dtype=torch.float32)).numpy()
    np.testing.assert_array_equal(logits, expected)
    predict_logits(net, X_SMALL[:7])
    assert not net.training


# ----------------------------------------------------------------------------- digit augmentation


def test_transform_digits_matches_rot90_and_padded_slices():
    quarter = transform_digits(DIGITS, np.zeros((5, 2)), np.full(5, 90.0))
    half = transform_digits(DIGITS, np.zeros((5, 2)), np.full(5, 180.0))
    np.testing.assert_allclose(quarter, np.rot90(DIGITS, axes=(1, 2)), atol=1e-12)
    np.testing.assert_allclose(half, np.rot90(DIGITS, 2, axes=(1, 2)), atol=1e-12)
    shifts = np.array([[1, 0], [0, -1], [-2, 2], [0, 0], [3, -3]])
    moved = transform_digits(DIGITS, shifts, np.zeros(5))
    padded = np.pad(DIGITS, ((0, 0), (3, 3), (3, 3)))
    for i, (down, right) in enumerate(shifts):
        np.testing.assert_array_equal(moved[i], padded[i, 3 - down : 11 - down, 3 - right : 11 - right])


def test_augment_digits_draws_shifts_then_angles_and_keeps_the_shape():
    flat = DIGITS.reshape(5, 64)
    out = augment_digits(flat, shifts=2, max_angle=15.0, rng=3)
    assert out.shape == flat.shape
    replay = np.random.default_rng(3)
    moves = replay.integers(-2, 3, size=(5, 2))
    angles = replay.uniform(-15, 15, size=5)
    assert np.all(np.abs(moves) <= 2) and np.all(np.abs(angles) <= 15)
    np.testing.assert_array_equal(out, transform_digits(DIGITS, moves, angles).reshape(5, 64))
    # no transform at strength 0; pixels stay in [0, 1] (linear interpolation, zero background)
    np.testing.assert_array_equal(augment_digits(DIGITS, shifts=0, max_angle=0.0, rng=1), DIGITS)
    assert out.min() >= 0 and out.max() <= 1


# ----------------------------------------------------------------------------- soft targets


def test_tempered_softmax_is_softmax_of_scaled_logits_and_tends_to_uniform():
    F_logits = rng.normal(size=(3, 5))
    np.testing.assert_allclose(
        tempered_softmax(F_logits, 2.5), torch.softmax(torch.tensor(F_logits) / 2.5, 1).numpy()
    )
    np.testing.assert_allclose(tempered_softmax(F_logits[0], 1e9), np.full(5, 0.2), atol=1e-8)


@pytest.mark.parametrize("T", [1.0, 3.0])
def test_soft_cross_entropy_is_T_squared_times_torchs_cross_entropy_with_probabilities(T):
    G = torch.tensor(rng.normal(size=(6, 4)) * 2)
    targets = torch.tensor(rng.dirichlet(np.ones(4), size=6))
    reference = T**2 * nn.functional.cross_entropy(G / T, targets)  # torch takes probability targets too
    assert abs(float(soft_cross_entropy(G, targets, T) - reference)) < 1e-12


# ----------------------------------------------------------------------------- the one trainer


def initial_model(rng: int, hidden: int, n_classes: int = 10, pi_input: float = 1.0) -> nn.Sequential:
    """The initial weights train_digits_classifier draws from an integer rng: dropout_mlp with the first seed."""
    model_seed = int(np.random.default_rng(rng).integers(2**31, size=2)[0])
    return dropout_mlp([64, hidden, n_classes], 1.0, pi_input=pi_input, rng=model_seed)


def test_mixup_mixes_fresh_pairs_and_weights_at_every_step():
    """With mixup = a the loss of every step is the soft cross-entropy of the batch mixed with a fresh permutation
    of itself and fresh weights lam ~ Beta(a, a) per example (lr ~ 0 keeps the initial weights)."""
    trained = train_digits_classifier(
        X_SMALL, Y_SMALL, hidden=16, epochs=3, lr=1e-12, mixup=0.4, label_smoothing=0.1, rng=3, progress=False
    )
    net = initial_model(3, 16)
    data_seed = int(np.random.default_rng(3).integers(2**31, size=2)[1])
    mixing = np.random.default_rng(data_seed + 1)
    t = 0.9 * np.eye(10)[Y_SMALL] + 0.01
    losses = []
    for _ in range(3):
        lam = mixing.beta(0.4, 0.4, size=(len(X_SMALL), 1))
        partner = mixing.permutation(len(X_SMALL))
        mixed_x = torch.as_tensor(lam * X_SMALL + (1 - lam) * X_SMALL[partner], dtype=torch.float32)
        mixed_t = torch.as_tensor(lam * t + (1 - lam) * t[partner], dtype=torch.float32)
        with torch.no_grad():
            losses.append(soft_cross_entropy(net(mixed_x), mixed_t).item())
    np.testing.assert_allclose(trained.history["train_loss"], losses, rtol=1e-5)
    assert len(set(np.round(losses, 6))) == 3  # a new mixture at every step


def test_the_trainer_equals_a_full_batch_adam_loop_written_out():
    """AdamW without weight decay steps as Adam: the trainer gives the weights of the loop written out (to the bit
    on the CPU)."""
    trained = train_digits_classifier(X_SMALL, Y_SMALL, hidden=16, epochs=30, lr=1e-2, rng=1, progress=False)
    net = initial_model(1, 16)
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
    X, y = torch.as_tensor(X_SMALL, dtype=torch.float32), torch.as_tensor(Y_SMALL)
    losses = []
    for _ in range(30):
        loss = nn.functional.cross_entropy(net(X), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    for ours, reference in zip(trained.model.parameters(), net.parameters(), strict=True):
        torch.testing.assert_close(
            ours.cpu(), reference, rtol=0, atol=0 if ours.device.type == "cpu" else 1e-5
        )
    assert trained.history["train_loss"] == pytest.approx(losses, rel=1e-6) and trained.best_epoch == 30
    assert not trained.model.training


def test_first_loss_is_the_cross_entropy_of_the_initial_net():
    net = initial_model(3, 16)
    with torch.no_grad():
        logits = net(torch.as_tensor(X_SMALL, dtype=torch.float32))
    y = torch.as_tensor(Y_SMALL)
    for eps in (0.0, 0.1):
        trained = train_digits_classifier(
            X_SMALL, Y_SMALL, hidden=16, label_smoothing=eps, epochs=1, rng=3, progress=False
        )
        expected = nn.CrossEntropyLoss(label_smoothing=eps)(logits, y).item()
        assert trained.history["train_loss"][0] == pytest.approx(expected, rel=1e-6)


def test_soft_targets_use_the_tempered_cross_entropy_times_T_squared():
    net = initial_model(4, 16)
    with torch.no_grad():
        logits = net(torch.as_tensor(X_SMALL, dtype=torch.float32)).double()
    targets = tempered_softmax(np.random.default_rng(0).normal(size=(len(X_SMALL), 10)) * 3, 2.0)
    T = 3.0
    trained = train_digits_classifier(
        X_SMALL, targets, hidden=16, temperature=T, epochs=1, rng=4, progress=False
    )
    expected = T**2 * -(torch.as_tensor(targets) * torch.log_softmax(logits / T, dim=1)).sum(1).mean()
    assert trained.history["train_loss"][0] == pytest.approx(expected.item(), rel=1e-5)


def test_labels_and_soft_targets_start_from_the_same_initialisation():
    X = rng.normal(size=(40, 6))
    y = (X[:, 0] > 0).astype(int)
    hard = train_digits_classifier(X, y, hidden=8, epochs=100, rng=5, progress=False).model
    assert (predict_logits(hard, X).argmax(1) == y).mean() > 0.9
    untrained = train_digits_classifier(X, y, hidden=8, epochs=1, lr=1e-12, rng=5, progress=False).model
    also_untrained = train_digits_classifier(
        X, np.eye(2)[y] * 0.8 + 0.1, hidden=8, epochs=1, lr=1e-12, rng=5, progress=False
    ).model
    np.testing.assert_allclose(predict_logits(untrained, X), predict_logits(also_untrained, X), atol=1e-6)


def test_weight_decay_is_decoupled_and_spares_the_biases():
    lr, mu = 1e-2, 0.5
    plain = train_digits_classifier(X_SMALL, Y_SMALL, hidden=16, lr=lr, epochs=1, rng=5, progress=False)
    decayed = train_digits_classifier(
        X_SMALL, Y_SMALL, hidden=16, lr=lr, weight_decay=mu, epochs=1, rng=5, progress=False
    )
    init = initial_model(5, 16)
    for p0, p1, p2 in zip(
        init.parameters(), plain.model.cpu().parameters(), decayed.model.cpu().parameters(), strict=True
    ):
        if p0.ndim >= 2:  # AdamW: theta <- (1 - lr mu) theta - lr m_hat / (sqrt(v_hat) + eps)
            torch.testing.assert_close(p1 - p2, lr * mu * p0, atol=1e-7, rtol=1e-5)
        else:
            torch.testing.assert_close(p1, p2)


def test_early_stopping_follows_the_patience_rule_and_restores_the_best_weights():
    trained = train_digits_classifier(
        X_SMALL, Y_SMALL, X_val=X_VAL, y_val=Y_VAL, hidden=64, patience=5, epochs=200, rng=6, progress=False
    )
    rule = patience_stop(trained.history["val_loss"], 5)  # epochs counted from 0 there
    assert len(trained.history["val_loss"]) == rule.stop + 1 < 200  # it stopped early, where the rule stops
    assert len(trained.history["train_loss"]) == rule.stop + 1
    assert trained.best_epoch == rule.best + 1
    logits = torch.as_tensor(predict_logits(trained.model, X_VAL))
    val_loss = nn.functional.cross_entropy(logits, torch.as_tensor(Y_VAL)).item()
    assert val_loss == pytest.approx(min(trained.history["val_loss"]), rel=1e-6)
    assert not trained.model.training


def test_the_architecture_follows_the_options():
    trained = train_digits_classifier(
        X_SMALL, Y_SMALL, hidden=8, pi=0.5, batch_norm=True, epochs=2, rng=0, progress=False
    )
    kinds = [type(layer) for layer in trained.model]
    assert kinds == [nn.Linear, nn.BatchNorm1d, nn.ReLU, Dropout, nn.Linear]
    assert trained.model[3].pi == 0.5
    assert trained.model[1].num_batches_tracked.item() == 2  # the running statistics were updated
    on_inputs = train_digits_classifier(
        X_SMALL, Y_SMALL, hidden=8, pi_input=0.8, batch_norm=True, epochs=1, rng=0, progress=False
    )
    assert [type(layer) for layer in on_inputs.model] == [
        Dropout,
        nn.Linear,
        nn.BatchNorm1d,
        nn.ReLU,
        nn.Linear,
    ]
    assert on_inputs.model[0].pi == 0.8


def test_augmentation_trains_on_transformed_copies():
    plain = train_digits_classifier(X_SMALL, Y_SMALL, hidden=16, epochs=1, rng=7, progress=False)
    augmented = train_digits_classifier(
        X_SMALL, Y_SMALL, hidden=16, augment=2, epochs=1, rng=7, progress=False
    )
    # same initial net, other inputs: the first loss differs
    assert augmented.history["train_loss"][0] != pytest.approx(plain.history["train_loss"][0], rel=1e-4)


def test_mini_batches_cover_the_data_once_an_epoch_and_the_history_is_their_weighted_mean():
    trained = train_digits_classifier(
        X_SMALL, Y_SMALL, hidden=16, epochs=3, batch_size=50, X_val=X_VAL, y_val=Y_VAL, rng=2, progress=False
    )
    assert len(trained.history["train_loss"]) == len(trained.history["val_loss"]) == 3
    # the order of an epoch is a permutation from the generator seeded by the second seed drawn from rng
    data_seed = int(np.random.default_rng(2).integers(2**31, size=2)[1])
    order = torch.Generator().manual_seed(data_seed)
    net = initial_model(2, 16)
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
    X, y = torch.as_tensor(X_SMALL, dtype=torch.float32), torch.as_tensor(Y_SMALL)
    for _ in range(3):
        losses, sizes, epoch_rows = [], [], torch.randperm(len(X), generator=order).split(50)
        for rows in epoch_rows:
            loss = nn.functional.cross_entropy(net(X[rows]), y[rows])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            sizes.append(len(rows))
    assert sizes == [50, 50, 20] and sorted(torch.cat(epoch_rows).tolist()) == list(range(120))
    assert trained.history["train_loss"][-1] == pytest.approx(np.average(losses, weights=sizes), rel=1e-6)
    for ours, reference in zip(trained.model.parameters(), net.parameters(), strict=True):
        torch.testing.assert_close(
            ours.cpu(), reference, rtol=0, atol=0 if ours.device.type == "cpu" else 1e-5
        )


# ----------------------------------------------------------------------------- bad input

BAD_INPUT = [  # (call, error, message)
    (lambda: Dropout(0.0), ValueError, "pi must be a finite number"),
    (lambda: Dropout(0.5, rng=-1), (TypeError, ValueError), "rng"),
    (lambda: dropout_mlp([4]), ValueError, "at least two widths"),
    (lambda: dropout_mlp([4, 3], pi_input=0), ValueError, "pi_input"),
    (lambda: predict_logits(torch.nn.Linear(2, 3), np.ones(3)), ValueError, "X must have shape"),
    (
        lambda: transform_digits(np.ones((2, 8)), np.zeros((2, 2)), np.zeros(2)),
        ValueError,
        "X must have 3",
    ),
    (
        lambda: transform_digits(DIGITS, np.zeros((5, 3)), np.zeros(5)),
        ValueError,
        r"shifts must have shape",
    ),
    (lambda: transform_digits(DIGITS, np.full((5, 2), 0.5), np.zeros(5)), ValueError, "whole pixels"),
    (
        lambda: transform_digits(DIGITS, np.zeros((5, 2)), np.zeros(4)),
        ValueError,
        r"angles must have shape",
    ),
    (lambda: augment_digits(np.ones((3, 10))), ValueError, "square images"),
    (lambda: augment_digits(np.ones((3, 4, 4, 1))), ValueError, r"(N, h, w) or (N, h*w)"),
    (lambda: augment_digits(DIGITS, shifts=-1), ValueError, "shifts"),
    (lambda: augment_digits(DIGITS, max_angle=200), ValueError, "max_angle"),
    (lambda: augment_digits(DIGITS, rng="seed"), TypeError, "rng"),
    (lambda: tempered_softmax(np.ones((2, 3)), 0.0), ValueError, "T"),
    (lambda: tempered_softmax(np.ones((2, 3, 4))), ValueError, r"F must have shape (K,) or (N, K)"),
    (lambda: soft_cross_entropy(np.ones((2, 3)), torch.ones(2, 3)), TypeError, "torch tensors"),
    (lambda: soft_cross_entropy(torch.ones(2, 3), torch.ones(2, 4)), ValueError, r"shape (N, K)"),
    (lambda: train_digits_classifier(X_SMALL, Y_SMALL[:5]), ValueError, "y must"),
    (lambda: train_digits_classifier(np.ones((4, 2)), [0, 1, 0]), ValueError, "y must be a non-empty"),
    (lambda: train_digits_classifier(np.ones((4, 2)), [0, 1, 0, 1], hidden=0), ValueError, "hidden"),
    (lambda: train_digits_classifier(X_SMALL, Y_SMALL, pi=0.0), ValueError, "pi"),
    (lambda: train_digits_classifier(X_SMALL, Y_SMALL, pi_input=1.5), ValueError, "pi_input"),
    (lambda: train_digits_classifier(X_SMALL, Y_SMALL, weight_decay=-1.0), ValueError, "weight_decay"),
    (lambda: train_digits_classifier(X_SMALL, Y_SMALL, batch_norm=1), TypeError, "batch_norm"),
    (lambda: train_digits_classifier(X_SMALL * 16, Y_SMALL, augment=1), ValueError, r"[0, 1]"),
    (
        lambda: train_digits_classifier(X_SMALL, Y_SMALL, label_smoothing=1.5),
        ValueError,
        "label_smoothing",
    ),
    (
        lambda: train_digits_classifier(X_SMALL, np.full((120, 10), 0.1), label_smoothing=0.1),
        ValueError,
        "label_smoothing needs labels",
    ),
    (lambda: train_digits_classifier(X_SMALL, np.full((120, 10), 0.2)), ValueError, "sum to 1"),
    (lambda: train_digits_classifier(X_SMALL, Y_SMALL, X_val=X_VAL), ValueError, "both X_val and y_val"),
    (lambda: train_digits_classifier(X_SMALL, Y_SMALL, patience=5), ValueError, "patience needs"),
    (
        lambda: train_digits_classifier(X_SMALL, Y_SMALL, X_val=X_VAL[:, :10], y_val=Y_VAL),
        ValueError,
        "X_val",
    ),
    (lambda: train_digits_classifier(X_SMALL, Y_SMALL, epochs=0), ValueError, "epochs"),
    (lambda: train_digits_classifier(X_SMALL, Y_SMALL, batch_size=0), ValueError, "batch_size"),
    (lambda: train_digits_classifier(X_SMALL, Y_SMALL, temperature=0.0), ValueError, "temperature"),
    (lambda: train_digits_classifier(X_SMALL, Y_SMALL, mixup=-0.1), ValueError, "mixup"),
]


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
