"""Section 8.4: dropout against its expectation, the training of the dropout MLP, the enumerated dropout ensemble against a brute-force sum and the Monte-Carlo estimate, the weighted geometric
mean against weight scaling, bootstrap resamples, bagging and the Brier decomposition against direct sums."""

import itertools

import numpy as np
import torch

from dlnotes.activations import softmax
from dlnotes.tricks.common import predict_logits
from dlnotes.tricks.dropout import (
    all_masks,
    bagging,
    bootstrap_indices,
    brier_decomposition,
    classifier_scores,
    dropout,
    dropout_all_masks,
    dropout_monte_carlo,
    mask_probabilities,
    train_dropout_mlp,
    weighted_geometric_mean,
)

from conftest import bad_input_test

rng = np.random.default_rng(84)


def test_dropout_is_unbiased_in_both_forms_and_masks_have_the_keep_probability():
    x = rng.normal(size=5)
    pi = np.array([0.1, 0.3, 0.5, 0.9, 1.0])
    X = np.tile(x, (200_000, 1))
    inverted = dropout(X, pi, rng=1)
    original = dropout(X, pi, inverted=False, rng=1)
    assert np.array_equal(inverted.mask, original.mask)  # the same draws, two scalings
    assert set(np.unique(inverted.mask)) <= {0.0, 1.0}
    se = inverted.out.std(axis=0) / np.sqrt(len(X)) + 1e-9  # 0 for pi = 1: rounding only
    assert np.all(np.abs(inverted.out.mean(axis=0) - x) < 5 * se)
    assert np.all(np.abs(original.out.mean(axis=0) - pi * x) < 5 * se)
    assert np.allclose(inverted.mask.mean(axis=0), pi, atol=5 * np.sqrt(0.25 / len(X)))
    assert np.array_equal(inverted.out[inverted.mask == 0], np.zeros((inverted.mask == 0).sum()))
    # evaluation: identity (inverted), pi x (original)
    assert np.array_equal(dropout(x, pi, training=False).out, x)
    assert np.allclose(dropout(x, pi, training=False, inverted=False).out, pi * x)
    assert np.array_equal(dropout(x, 0.7, training=False).mask, np.ones(5))


def test_train_dropout_mlp_fits_and_records_history():
    X = rng.normal(size=(60, 4))
    y = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0).astype(int)
    result = train_dropout_mlp(
        X, y, 0.5, X_val=X[:20], y_val=y[:20], hidden=32, epochs=150, lr=1e-2, rng=0, progress=False
    )
    assert not result.model.training
    assert len(result.history["train_loss"]) == len(result.history["val_loss"]) == 150
    scores = classifier_scores(result.model.train(), X, y)
    assert result.model.training  # evaluated in eval mode, left in the mode it came in
    logits = torch.as_tensor(predict_logits(result.model, X)).double()
    reference_ce = torch.nn.functional.cross_entropy(logits, torch.as_tensor(y)).item()
    assert np.isclose(scores.cross_entropy, reference_ce, rtol=1e-5)
    assert np.isclose(scores.accuracy, np.mean(logits.argmax(1).numpy() == y)) and scores.accuracy > 0.9
    assert np.isclose(result.history["val_loss"][-1], classifier_scores(result.model, X[:20], y[:20])[0])
    again = train_dropout_mlp(X, y, 0.5, hidden=32, epochs=150, lr=1e-2, rng=0, progress=False)
    assert again.history["train_loss"] == result.history["train_loss"]  # reproducible from rng
    minibatch = train_dropout_mlp(X, y, 1.0, hidden=32, epochs=5, batch_size=16, rng=0, progress=False)
    assert len(minibatch.history["train_loss"]) == 5


def _brute_force_mixture(f, x, pi):
    total = 0.0
    for bits in itertools.product([0, 1], repeat=len(pi)):
        b = np.array(bits, dtype=float)
        total = total + np.prod(pi**b * (1 - pi) ** (1 - b)) * f(x, b[None])[0]
    return total


def test_dropout_all_masks_equals_a_brute_force_sum():
    R, K = 6, 4
    W, c, x = rng.normal(size=(K, R)), rng.normal(size=K), rng.normal(size=R)
    pi = rng.uniform(0.1, 0.9, R)

    def f(x, masks):
        return softmax((masks * x) @ W.T + c, axis=1)

    result = dropout_all_masks(f, x, pi)
    assert result.masks.shape == (2**R, R) and len({tuple(m) for m in result.masks}) == 2**R
    assert np.isclose(result.probs.sum(), 1.0)
    assert np.allclose(result.mixture, _brute_force_mixture(f, x, pi), atol=1e-14)
    assert np.allclose(mask_probabilities(np.ones((1, R)), pi), np.prod(pi))
    assert np.array_equal(all_masks(2), [[0, 0], [1, 0], [0, 1], [1, 1]])


def test_dropout_monte_carlo_agrees_with_the_exact_mixture_and_its_standard_error():
    R = 8
    W, x = rng.normal(size=(3, R)), rng.normal(size=R)
    pi = rng.uniform(0.2, 0.9, R)

    def f(x, masks):
        return softmax((masks * x) @ W.T, axis=1)

    exact = dropout_all_masks(f, x, pi).mixture
    mc = dropout_monte_carlo(f, x, pi, 50_000, chunk=7_000, rng=2)
    assert np.all(np.abs(mc.mean - exact) < 4.5 * mc.stderr)
    # the standard error is the sd of f(x, b) under p(b) over sqrt(n)
    outputs = dropout_all_masks(f, x, pi)
    sd = np.sqrt(outputs.probs @ (outputs.outputs - exact) ** 2)
    assert np.allclose(mc.stderr, sd / np.sqrt(50_000), rtol=0.05)


def test_weighted_geometric_mean_equals_weight_scaling_for_a_softmax_layer():
    R, K = 7, 3
    W, c, x = rng.normal(size=(K, R)), rng.normal(size=K), rng.normal(size=R)
    pi = rng.uniform(0.2, 0.9, R)
    result = dropout_all_masks(lambda x, m: softmax((m * x) @ W.T + c, axis=1), x, pi)
    q = weighted_geometric_mean(result.outputs, result.probs)
    assert np.allclose(q, softmax(W @ (pi * x) + c), atol=1e-12)
    direct = np.exp(np.log(result.outputs).mean(axis=0))
    assert np.allclose(weighted_geometric_mean(result.outputs), direct / direct.sum(), atol=1e-14)


def test_bootstrap_bagging_and_the_brier_decomposition():
    idx = bootstrap_indices(500, 400, rng=3)
    assert idx.shape == (400, 500) and idx.min() >= 0 and idx.max() < 500
    distinct = np.array([len(np.unique(r)) for r in idx]) / 500
    assert abs(distinct.mean() - (1 - (1 - 1 / 500) ** 500)) < 0.003
    X, y = rng.normal(size=(40, 2)), rng.integers(0, 2, 40)
    seen = []

    def fit_model(X_k, y_k, member_rng):
        seen.append((X_k, y_k))
        return X_k.mean(axis=0)

    bag = bagging(fit_model, X, y, 5, rng=4)
    assert len(bag.models) == 5 and bag.indices.shape == (5, 40)
    for (X_k, y_k), model, rows in zip(seen, bag.models, bag.indices, strict=True):
        assert np.array_equal(X_k, X[rows]) and np.array_equal(y_k, y[rows])
        assert np.allclose(model, X[rows].mean(axis=0))
    P = rng.dirichlet(np.ones(3), size=(6, 25))  # (K, N, C)
    labels = rng.integers(0, 3, 25)
    brier = brier_decomposition(P, labels)
    p_bar = P.mean(axis=0)
    ens = np.mean([np.sum((p_bar[n] - np.eye(3)[labels[n]]) ** 2) for n in range(25)])
    members = np.mean([[np.sum((P[k, n] - np.eye(3)[labels[n]]) ** 2) for n in range(25)] for k in range(6)])
    spread = np.mean([[np.sum((P[k, n] - p_bar[n]) ** 2) for n in range(25)] for k in range(6)])
    assert np.allclose([brier.ensemble, brier.members, brier.ambiguity], [ens, members, spread], atol=1e-14)
    assert np.isclose(brier.ensemble, brier.members - brier.ambiguity, atol=1e-14)


# ----------------------------------------------------------------------------- bad input

BAD_INPUT = [  # (call, error, message)
    (lambda: dropout(np.ones(3), 0.0), ValueError, "pi must be a finite number in"),
    (lambda: dropout(np.ones(3), 1.5), ValueError, "pi must be a finite number in"),
    (lambda: dropout(np.ones(3), [0.5, 0.5]), ValueError, r"pi must have shape (3,)"),
    (lambda: dropout(np.ones(2), [0.5, 0.0]), ValueError, r"keep probabilities in (0, 1]"),
    (lambda: dropout(np.ones(2), 0.5, training="yes"), TypeError, "training and inverted"),
    (lambda: dropout("ab", 0.5), TypeError, "x must be an array"),
    (lambda: train_dropout_mlp(np.ones((4, 2)), [0, 1, 1]), ValueError, "y must be a non-empty 1-D"),
    (
        lambda: train_dropout_mlp(np.ones((4, 2)), [0, 1, 1, 0], X_val=np.ones((2, 2))),
        ValueError,
        "both",
    ),
    (lambda: train_dropout_mlp(np.ones((4, 2)), [0, 1, 1, 0], epochs=0), ValueError, "epochs"),
    (
        lambda: classifier_scores(torch.nn.Linear(2, 2), np.ones(3), [0]),
        ValueError,
        "X must have shape",
    ),
    (lambda: all_masks(21), ValueError, "R must be an int in"),
    (lambda: mask_probabilities(np.full((2, 2), 0.5), [0.5, 0.5]), ValueError, "only 0 and 1"),
    (lambda: dropout_all_masks(lambda x, m: m, np.ones(2), 0.5), TypeError, "vector of R keep"),
    (
        lambda: dropout_all_masks(lambda x, m: m, np.ones(21), np.full(21, 0.5)),
        ValueError,
        "at most 20",
    ),
    (
        lambda: dropout_all_masks(lambda x, m: m[:1], np.ones(2), [0.5, 0.5]),
        ValueError,
        "one output per mask",
    ),
    (lambda: dropout_all_masks("f", np.ones(2), [0.5, 0.5]), TypeError, "f must be callable"),
    (lambda: dropout_monte_carlo(lambda x, m: m, np.ones(2), [0.5, 0.5], 1), ValueError, "n must be"),
    (lambda: weighted_geometric_mean([[0.5, 0.5], [1.0, 0.0]]), ValueError, "positive probabilities"),
    (lambda: weighted_geometric_mean([[0.5, 0.5]], [0.5]), ValueError, "sum to 1"),
    (lambda: bootstrap_indices(0, 3), ValueError, "n must be an int"),
    (lambda: bagging(lambda X, y, r: 0, np.ones((3, 2)), [0, 1], 2), ValueError, "one target per row"),
    (lambda: brier_decomposition(np.full((2, 3), 0.5), [0, 1, 1]), ValueError, "3 axes"),
    (lambda: brier_decomposition(np.full((2, 3, 2), 0.5), [0, 1, 2]), ValueError, "labels in 0..1"),
]


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
