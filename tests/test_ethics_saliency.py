"""dlnotes.ethics.saliency, local explanations (11.6): saliency against torch's Jacobian and the closed form of
a linear model, integrated gradients against completeness and the exercise's numpy reference, SmoothGrad against
its closed form for one ReLU unit, ceteris-paribus profiles against a loop, and the cosine similarity against
scikit-learn."""

import itertools

import numpy as np
import pytest
import torch
from scipy.stats import norm
from sklearn.metrics.pairwise import cosine_similarity

from dlnotes.ethics.common import mlp, predict
from dlnotes.ethics.saliency import (
    ceteris_paribus,
    integrated_gradients,
    mean_pairwise_cosine,
    model_outputs,
    saliency,
    smoothgrad,
)
from dlnotes.exercises.ethics import integrated_gradients_reference

from conftest import bad_input_test

rng = np.random.default_rng(116)


def small_net(seed=0, activation=torch.nn.ReLU):
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(6, 8), activation(), torch.nn.Linear(8, 8), activation(), torch.nn.Linear(8, 3)
    ).double()


def test_saliency_is_the_jacobian_row_of_the_chosen_logit():
    model, X = small_net(), rng.normal(size=(5, 6))
    jacobian = torch.autograd.functional.jacobian(lambda x: model(x[None])[0], torch.tensor(X[0]))  # (K, d)
    for k in range(3):
        assert np.allclose(saliency(model, X[:1], k)[0], jacobian[k].numpy(), atol=1e-13)
    predicted = predict(model, X)
    labels = np.array([2, 0, 1, 1, 0])
    for k, classes in ((None, predicted), (labels, labels)):
        rows = [torch.autograd.functional.jacobian(lambda x: model(x[None])[0], torch.tensor(x)) for x in X]
        expected = np.array([row[c].numpy() for row, c in zip(rows, classes, strict=True)])
        assert np.allclose(saliency(model, X, k), expected, atol=1e-13)


def test_saliency_of_a_linear_model_is_its_weight_row_everywhere():
    model = mlp((), d=6, K=3, dtype=torch.float64)
    W = model[0].weight.detach().numpy()
    X = rng.uniform(size=(20, 6))
    assert np.abs(saliency(model, X, 1) - W[1]).max() < 1e-15
    assert np.abs(saliency(model, X) - W[predict(model, X)]).max() < 1e-15


def test_integrated_gradients_are_complete_and_match_the_reference():
    model, X = small_net(1, torch.nn.Tanh), rng.normal(size=(4, 6))
    baseline = rng.normal(size=6)
    logits = model_outputs(model, X)
    k = predict(model, X)
    gap = logits[np.arange(4), k] - model_outputs(model, baseline[None])[0, k]
    errors = [
        np.abs(integrated_gradients(model, X, baseline=baseline, steps=m).sum(1) - gap).max() for m in (8, 64)
    ]
    assert errors[1] < 1e-3 * np.abs(gap).max() and errors[1] < errors[0] / 30  # midpoint rule: error ~ 1/m^2
    for i in range(4):
        grad_f = lambda P, i=i: saliency(model, P, int(k[i]))  # noqa: E731
        expected = integrated_gradients_reference(grad_f, X[i], baseline, 16)
        assert np.allclose(
            integrated_gradients(model, X[i : i + 1], baseline=baseline, steps=16)[0],
            expected,
            atol=1e-13,
        )
    rows = np.tile(baseline, (4, 1))
    assert np.allclose(
        integrated_gradients(model, X, baseline=rows),
        integrated_gradients(model, X, baseline=baseline),
    )
    linear = mlp((), d=6, K=3, dtype=torch.float64)
    W = linear[0].weight.detach().numpy()
    assert np.allclose(integrated_gradients(linear, X, k=2, steps=1), W[2] * X, atol=1e-14)  # baseline 0


def test_smoothgrad_of_one_relu_unit_is_the_gaussian_cdf_times_w():
    model = torch.nn.Sequential(torch.nn.Linear(5, 1), torch.nn.ReLU(), torch.nn.Linear(1, 2)).double()
    with torch.no_grad():
        model[2].weight.copy_(torch.tensor([[0.0], [1.0]]))
    w, b = model[0].weight.detach().numpy()[0], model[0].bias.item()
    sigma, samples = 0.3, 20000
    x = rng.normal(size=5)
    x += (-0.4 * sigma * np.linalg.norm(w) - w @ x - b) * w / (w @ w)  # w.x + b = -0.4 sigma |w|
    result = smoothgrad(model, x[None], k=1, sigma=sigma, samples=samples, rng=0)[0]
    p = norm.cdf(-0.4)
    assert np.allclose(result, (result @ w / (w @ w)) * w, atol=1e-14)
    assert abs(result @ w / (w @ w) - p) < 4 * np.sqrt(p * (1 - p) / samples)
    net, X = small_net(), rng.normal(size=(3, 6))
    assert np.allclose(smoothgrad(net, X, sigma=0.0, samples=3, rng=1), saliency(net, X), atol=1e-14)
    assert np.array_equal(smoothgrad(net, X, rng=5), smoothgrad(net, X, rng=5))


def test_ceteris_paribus_matches_a_loop_and_keeps_the_other_features():
    net, X, grid = small_net(), rng.normal(size=(4, 6)), np.linspace(-1, 1, 7)

    def f(Z):
        return model_outputs(net, Z, "probability")

    ice = ceteris_paribus(f, X, 2, grid)
    assert ice.shape == (4, 7, 3)
    for i, (g, t) in itertools.product(range(4), enumerate(grid)):
        z = X[i].copy()
        z[2] = t
        assert np.allclose(ice[i, g], f(z[None])[0], atol=1e-15)
    assert np.array_equal(ceteris_paribus(f, X[1], 2, grid), ice[1])
    profile = ceteris_paribus(lambda Z: Z[:, 0] * Z[:, 1] + Z[:, 3], X[0], 0, grid)
    assert np.allclose(profile, grid * X[0, 1] + X[0, 3], atol=1e-15)


def test_model_outputs_and_mean_pairwise_cosine_match_references():
    net, X = small_net(), rng.normal(size=(5, 6))
    logits = net(torch.tensor(X)).detach()
    assert np.allclose(model_outputs(net, X), logits.numpy())
    assert np.allclose(model_outputs(net, X, "probability"), torch.softmax(logits, 1).numpy())
    S, labels = rng.normal(size=(9, 4)), np.array([0, 0, 1, 1, 1, 2, 0, 1, 1])
    C = cosine_similarity(S)
    off_diagonal = C[~np.eye(9, dtype=bool)].mean()
    assert mean_pairwise_cosine(S) == pytest.approx(off_diagonal, rel=1e-12)
    per_class = [
        C[np.ix_(labels == g, labels == g)][~np.eye((labels == g).sum(), dtype=bool)].mean() for g in (0, 1)
    ]  # class 2 has one row: no pair
    assert mean_pairwise_cosine(S, labels) == pytest.approx(np.mean(per_class), rel=1e-12)


BAD_INPUT = [  # (call, error, message)
    (lambda: saliency(mlp(), np.ones(64)), ValueError, "X must be a batch of rows (n, d)"),
    (lambda: saliency(mlp(), np.ones((2, 64)), k=10), ValueError, "k must hold classes in 0..9"),
    (lambda: saliency(mlp(), np.ones((2, 64)), k=[1]), ValueError, "k must be a non-empty 1-D array of 2 labels"),
    (lambda: saliency("net", np.ones((2, 64))), TypeError, "model must be a torch.nn.Module"),
    (lambda: integrated_gradients(mlp(), np.ones((2, 64)), baseline=np.ones(3)), ValueError, "baseline must have shape (64,) or (2, 64)"),
    (lambda: integrated_gradients(mlp(), np.ones((2, 64)), steps=0), ValueError, "steps must be an int in [1, inf)"),
    (lambda: smoothgrad(mlp(), np.ones((2, 64)), sigma=-0.1), ValueError, "sigma must be a finite number in [0, inf)"),
    (lambda: smoothgrad(mlp(), np.ones((2, 64)), samples=2.5), TypeError, "samples must be an int"),
    (lambda: model_outputs(mlp(), np.ones((2, 64)), output="loss"), ValueError, "output must be one of ['logit', 'probability']"),
    (lambda: ceteris_paribus("f", np.ones(3), 0, [0.0]), TypeError, "f must be callable"),
    (lambda: ceteris_paribus(lambda Z: Z[:, 0], np.ones(3), 3, [0.0]), ValueError, "j must be an int in [0, 2]"),
    (lambda: ceteris_paribus(lambda Z: Z[:, 0], np.ones(3), 0, np.ones((2, 2))), ValueError, "grid must have shape (any,)"),
    (lambda: ceteris_paribus(lambda Z: Z[:1, 0], np.ones((2, 3)), 0, [0.0, 1.0]), ValueError, "f must map a batch (4, 3) to (4,) or (4, K)"),
    (lambda: mean_pairwise_cosine(np.zeros((3, 2))), ValueError, "S must not have a row of zeros"),
    (lambda: mean_pairwise_cosine(np.ones((3, 2)), [0, 1, 2]), ValueError, "S must have two rows (with the same label)"),
]  # fmt: skip


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
