"""Tests of dlnotes.tricks, section 8.10 (the tricks compared): the training function of the table, ensemble
probabilities, mean ± spread and paired differences, against torch, numpy and the statistics module."""

import statistics

import numpy as np
import pytest
import torch
from torch import nn

from dlnotes import tricks
from dlnotes.data import load_digits

from conftest import bad_input_test

_images, _labels = load_digits()
X_SMALL = _images.reshape(len(_images), -1)[:120] / 16  # pixels in [0, 1]
Y_SMALL = _labels[:120]
X_VAL, Y_VAL = _images.reshape(len(_images), -1)[120:200] / 16, _labels[120:200]


def initial_model(rng: int, hidden: int, n_classes: int = 10) -> nn.Sequential:
    """The initial weights train_digits_classifier draws from an integer rng: dropout_mlp with the first seed."""
    model_seed = int(np.random.default_rng(rng).integers(2**31, size=2)[0])
    return tricks.dropout_mlp([64, hidden, n_classes], 1.0, rng=model_seed)


def test_first_loss_is_the_cross_entropy_of_the_initial_net():
    net = initial_model(3, 16)
    with torch.no_grad():
        logits = net(torch.as_tensor(X_SMALL, dtype=torch.float32))
    y = torch.as_tensor(Y_SMALL)
    for eps in (0.0, 0.1):
        trained = tricks.train_digits_classifier(
            X_SMALL, Y_SMALL, hidden=16, label_smoothing=eps, epochs=1, rng=3, progress=False
        )
        expected = nn.CrossEntropyLoss(label_smoothing=eps)(logits, y).item()
        assert trained.history["train_loss"][0] == pytest.approx(expected, rel=1e-6)


def test_soft_targets_use_the_tempered_cross_entropy_times_T_squared():
    net = initial_model(4, 16)
    with torch.no_grad():
        logits = net(torch.as_tensor(X_SMALL, dtype=torch.float32)).double()
    targets = tricks.tempered_softmax(np.random.default_rng(0).normal(size=(len(X_SMALL), 10)) * 3, 2.0)
    T = 3.0
    trained = tricks.train_digits_classifier(
        X_SMALL, targets, hidden=16, temperature=T, epochs=1, rng=4, progress=False
    )
    expected = T**2 * -(torch.as_tensor(targets) * torch.log_softmax(logits / T, dim=1)).sum(1).mean()
    assert trained.history["train_loss"][0] == pytest.approx(expected.item(), rel=1e-5)


def test_weight_decay_is_decoupled_and_spares_the_biases():
    lr, mu = 1e-2, 0.5
    plain = tricks.train_digits_classifier(
        X_SMALL, Y_SMALL, hidden=16, lr=lr, epochs=1, rng=5, progress=False
    )
    decayed = tricks.train_digits_classifier(
        X_SMALL, Y_SMALL, hidden=16, lr=lr, weight_decay=mu, epochs=1, rng=5, progress=False
    )
    init = initial_model(5, 16)
    for p0, p1, p2 in zip(
        init.parameters(), plain.model.parameters(), decayed.model.parameters(), strict=True
    ):
        if p0.ndim >= 2:  # AdamW: theta <- (1 - lr mu) theta - lr m_hat / (sqrt(v_hat) + eps)
            torch.testing.assert_close(p1 - p2, lr * mu * p0, atol=1e-7, rtol=1e-5)
        else:
            torch.testing.assert_close(p1, p2)


def test_early_stopping_follows_the_patience_rule_and_restores_the_best_weights():
    trained = tricks.train_digits_classifier(
        X_SMALL, Y_SMALL, X_val=X_VAL, y_val=Y_VAL, hidden=64, patience=5, epochs=200, rng=6, progress=False
    )
    rule = tricks.patience_stop(trained.history["val_loss"], 5)  # epochs counted from 0 there
    assert len(trained.history["val_loss"]) == rule.stop + 1 < 200  # it stopped early, where the rule stops
    assert trained.best_epoch == rule.best + 1
    with torch.no_grad():
        logits = trained.model(torch.as_tensor(X_VAL, dtype=torch.float32))
    val_loss = nn.functional.cross_entropy(logits, torch.as_tensor(Y_VAL)).item()
    assert val_loss == pytest.approx(min(trained.history["val_loss"]), rel=1e-6)
    assert not trained.model.training


def test_the_architecture_follows_the_options():
    trained = tricks.train_digits_classifier(
        X_SMALL, Y_SMALL, hidden=8, pi=0.5, batch_norm=True, epochs=2, rng=0, progress=False
    )
    kinds = [type(layer) for layer in trained.model]
    assert kinds == [nn.Linear, nn.BatchNorm1d, nn.ReLU, tricks.Dropout, nn.Linear]
    assert trained.model[3].pi == 0.5
    assert trained.model[1].num_batches_tracked.item() == 2  # the running statistics were updated


def test_augmentation_trains_on_transformed_copies():
    plain = tricks.train_digits_classifier(X_SMALL, Y_SMALL, hidden=16, epochs=1, rng=7, progress=False)
    augmented = tricks.train_digits_classifier(
        X_SMALL, Y_SMALL, hidden=16, augment=2, epochs=1, rng=7, progress=False
    )
    # same initial net, other inputs: the first loss differs
    assert augmented.history["train_loss"][0] != pytest.approx(plain.history["train_loss"][0], rel=1e-4)


def test_ensemble_probabilities_average_the_tempered_softmaxes():
    members = [initial_model(seed, 12) for seed in range(3)]
    X = torch.as_tensor(X_SMALL[:20], dtype=torch.float32)
    for T in (1.0, 4.0):
        with torch.no_grad():
            expected = torch.stack([torch.softmax(m(X).double() / T, dim=1) for m in members]).mean(0).numpy()
        got = tricks.ensemble_probabilities(members, X_SMALL[:20], temperature=T)
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(got.sum(axis=1), 1.0, rtol=1e-10)


def test_mean_spread_and_paired_difference_match_the_statistics_module():
    rng = np.random.default_rng(0)
    base = 0.94 + 0.01 * rng.normal(size=5)
    trick = base + 0.004 + 0.002 * rng.normal(size=5)
    spread = tricks.mean_spread(trick)
    assert spread.mean == pytest.approx(statistics.mean(trick))
    assert spread.sd == pytest.approx(statistics.stdev(trick))
    paired = tricks.paired_difference(trick, base)
    differences = [a - b for a, b in zip(trick, base, strict=True)]
    assert paired.mean == pytest.approx(statistics.mean(differences))
    assert paired.sd == pytest.approx(statistics.stdev(differences))
    # pairing removes the shared run-to-run variation
    assert paired.sd < np.sqrt(statistics.variance(trick) + statistics.variance(base))


BAD_INPUT = [
    (lambda: tricks.train_digits_classifier(X_SMALL, Y_SMALL[:5]), ValueError, "y must"),
    (lambda: tricks.train_digits_classifier(X_SMALL, Y_SMALL, pi=0.0), ValueError, "pi"),
    (lambda: tricks.train_digits_classifier(X_SMALL, Y_SMALL, weight_decay=-1.0), ValueError, "weight_decay"),
    (lambda: tricks.train_digits_classifier(X_SMALL, Y_SMALL, batch_norm=1), TypeError, "batch_norm"),
    (lambda: tricks.train_digits_classifier(X_SMALL * 16, Y_SMALL, augment=1), ValueError, r"[0, 1]"),
    (
        lambda: tricks.train_digits_classifier(X_SMALL, Y_SMALL, label_smoothing=1.5),
        ValueError,
        "label_smoothing",
    ),
    (
        lambda: tricks.train_digits_classifier(X_SMALL, np.full((120, 10), 0.1), label_smoothing=0.1),
        ValueError,
        "label_smoothing needs labels",
    ),
    (lambda: tricks.train_digits_classifier(X_SMALL, np.full((120, 10), 0.2)), ValueError, "sum to 1"),
    (
        lambda: tricks.train_digits_classifier(X_SMALL, Y_SMALL, X_val=X_VAL),
        ValueError,
        "both X_val and y_val",
    ),
    (lambda: tricks.train_digits_classifier(X_SMALL, Y_SMALL, patience=5), ValueError, "patience needs"),
    (
        lambda: tricks.train_digits_classifier(X_SMALL, Y_SMALL, X_val=X_VAL[:, :10], y_val=Y_VAL),
        ValueError,
        "X_val",
    ),
    (lambda: tricks.train_digits_classifier(X_SMALL, Y_SMALL, epochs=0), ValueError, "epochs"),
    (lambda: tricks.train_digits_classifier(X_SMALL, Y_SMALL, temperature=0.0), ValueError, "temperature"),
    (lambda: tricks.ensemble_probabilities([], X_SMALL), TypeError, "models must be a non-empty list"),
    (lambda: tricks.ensemble_probabilities([np.eye(3)], X_SMALL), TypeError, "models"),
    (lambda: tricks.ensemble_probabilities([nn.Linear(64, 10)], X_SMALL[0]), ValueError, "X must"),
    (lambda: tricks.mean_spread([0.9]), ValueError, "at least 2 runs"),
    (lambda: tricks.mean_spread(np.ones((2, 2))), ValueError, "values"),
    (lambda: tricks.paired_difference([0.9, 0.8, 0.7], [0.9, 0.8]), ValueError, "b must"),
]


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
