"""Section 9.4 continued (dlnotes.theory.bias_variance): Legendre features against scipy, the risk
decomposition against its closed form, bias and variance against simulation, random ReLU features against torch
and scikit-learn's Ridge, the max-margin direction against a fine grid, and the randomisation test against a
hand-written training loop."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy.special import eval_legendre
from sklearn.linear_model import Ridge
from torch import nn

from dlnotes.theory import bias_variance
from dlnotes.training import device

from conftest import bad_input_test

rng = np.random.default_rng(98)


def test_legendre_features_equal_scipys_legendre_polynomials():
    x = rng.uniform(-1, 1, 50)
    Phi = bias_variance.legendre_features(x, 6)
    assert Phi.shape == (50, 7)
    assert np.allclose(Phi, np.stack([eval_legendre(k, x) for k in range(7)], axis=1), atol=1e-13)


def test_risk_decomposition_adds_up_and_has_the_closed_form_approximation_error():
    result = bias_variance.risk_decomposition(lambda x: np.sin(np.pi * x), [1, 2, 3, 5], sets=50, rng=0)
    assert np.allclose(result.excess, result.estimation + result.approximation, rtol=1e-9)  # Pythagoras
    assert np.all(np.diff(result.approximation) <= 1e-12)  # nested classes
    # the best line through sin(pi x) on U[-1, 1] has slope 3/pi: error 1/2 - 3/pi^2
    assert result.approximation[0] == pytest.approx(0.5 - 3 / np.pi**2, rel=2e-3)
    assert result.approximation[1] == pytest.approx(result.approximation[0], rel=1e-9)  # x^2 does not help


def test_bias_variance_terms_in_closed_form_for_the_mean_and_by_simulation():
    x = np.linspace(-1, 1, 8)
    f_star, f_test = x**2, np.array([0.3, 0.9])
    constant = bias_variance.bias_variance_terms(np.ones((8, 1)), f_star, np.ones((2, 1)), f_test, 0.5)
    assert np.allclose(constant.bias, f_star.mean() - f_test) and np.allclose(constant.variance, 0.5 / 8)
    Phi, Phi_test = rng.normal(size=(15, 4)), rng.normal(size=(6, 4))
    f_star, f_test = rng.normal(size=15), rng.normal(size=6)
    terms = bias_variance.bias_variance_terms(Phi, f_star, Phi_test, f_test, 0.3)
    fits = np.array(
        [
            Phi_test @ np.linalg.solve(Phi.T @ Phi, Phi.T @ (f_star + np.sqrt(0.3) * rng.normal(size=15)))
            for _ in range(20_000)
        ]
    )
    se = np.sqrt(terms.variance / 20_000)
    assert np.all(np.abs(fits.mean(axis=0) - f_test - terms.bias) < 5 * se)
    assert np.allclose(fits.var(axis=0), terms.variance, rtol=0.05)


def test_bias_variance_mc_matches_the_terms_and_the_mse_is_their_sum_plus_noise():
    Phi, Phi_test = bias_variance.legendre_features(np.linspace(-1, 1, 20), 3), rng.normal(size=(5, 4))
    f_star, f_test = np.sin(np.pi * np.linspace(-1, 1, 20)), rng.normal(size=5)
    terms = bias_variance.bias_variance_terms(Phi, f_star, Phi_test, f_test, 0.25)
    mc = bias_variance.bias_variance_mc(Phi, f_star, Phi_test, f_test, 0.25, sets=40_000, rng=2)
    assert mc.fits.shape == (40_000, 5)
    assert np.allclose(mc.variance, terms.variance, rtol=0.03)
    assert np.all(np.abs(np.sqrt(mc.bias2) - np.abs(terms.bias)) < 5 * np.sqrt(terms.variance / 40_000))
    assert np.allclose(mc.mse, terms.bias**2 + terms.variance + 0.25, rtol=0.03)


def test_relu_features_equal_a_torch_relu_layer():
    X, W = rng.normal(size=(7, 3)), rng.normal(size=(11, 3))
    layer = torch.nn.Linear(3, 11, bias=False, dtype=torch.float64)
    layer.weight.data = torch.tensor(W)
    expected = torch.relu(layer(torch.tensor(X))).detach().numpy() / np.sqrt(11)
    assert np.allclose(bias_variance.relu_features(X, W), expected, atol=1e-14)


def test_random_features_curve_against_direct_fits_with_the_same_weights():
    X, y = rng.normal(size=(12, 3)), rng.normal(size=12)
    X_test, y_test = rng.normal(size=(30, 3)), rng.normal(size=30)
    ps = np.array([3, 12, 40])
    curve = bias_variance.random_features_curve(X, y, X_test, y_test, ps, draws=1, rng=7)
    ridge = bias_variance.random_features_curve(X, y, X_test, y_test, ps, draws=1, ridge=0.5, rng=7)
    W = np.random.default_rng(7).standard_normal((40, 3)) / np.sqrt(3)
    for j, p in enumerate(ps):
        Phi, Phi_test = bias_variance.relu_features(X, W[:p]), bias_variance.relu_features(X_test, W[:p])
        a = np.linalg.lstsq(Phi, y, rcond=None)[0]  # the minimum-norm least-squares solution
        assert curve.test_mse[j] == pytest.approx(np.mean((Phi_test @ a - y_test) ** 2), rel=1e-8)
        fit = Ridge(alpha=0.5, fit_intercept=False).fit(Phi, y)
        assert ridge.test_mse[j] == pytest.approx(np.mean((fit.predict(Phi_test) - y_test) ** 2), rel=1e-8)
    assert curve.train_mse[1] < 1e-20 and curve.train_mse[2] < 1e-20  # p >= n interpolates


def test_max_margin_direction_beats_every_direction_on_a_fine_grid():
    X = rng.normal(size=(40, 2))
    X = X[np.abs(X @ np.array([1.0, 0.6])) > 0.2]  # separable through the origin with a margin
    y = np.sign(X @ np.array([1.0, 0.6])).astype(int)
    w = bias_variance.max_margin_direction(X, y)
    angles = np.linspace(0, 2 * np.pi, 200_000, endpoint=False)
    U = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    best = (y[:, None] * (X @ U.T)).min(axis=0).max()
    assert np.linalg.norm(w) == pytest.approx(1.0) and (y * (X @ w)).min() >= best - 1e-6


def test_fit_until_memorised_stops_at_the_target_and_repeats_a_hand_written_loop():
    X, y = rng.normal(size=(250, 5)), rng.integers(0, 3, size=250)
    run = bias_variance.fit_until_memorised(
        X, y, X, y, hidden=64, target=0.9, max_epochs=300, rng=5, progress=False
    )
    assert run.epochs == len(run.history) and run.train_accuracy >= 0.9 > run.history[:-1].max(initial=0)
    assert run.test_accuracy == pytest.approx(run.train_accuracy, abs=1e-12)
    # the same training written out: PyTorch's default initialisation from the first seed drawn, Adam, and per
    # epoch a fresh order cut into batches of min(200, n) = 200 and 50
    draws = np.random.default_rng(5)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(draws.integers(2**31)))
        model = nn.Sequential(nn.Linear(5, 64), nn.ReLU(), nn.Linear(64, 3))
    dev = device()
    model = model.to(dev)
    Xt, yt = torch.tensor(X, dtype=torch.float32, device=dev), torch.tensor(y, device=dev)
    optimizer, history = torch.optim.Adam(model.parameters(), lr=1e-2), []
    for _ in range(run.epochs):
        order = torch.as_tensor(draws.permutation(250), device=dev)
        for idx in (order[:200], order[200:]):
            loss = F.cross_entropy(model(Xt[idx]), yt[idx])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            history.append((model(Xt).argmax(dim=1) == yt).float().mean().item())
    assert np.allclose(run.history, history, rtol=0, atol=1e-12)


# ----------------------------------------------------------------------------- bad input

BAD_INPUT = [  # (call, error, message)
    (lambda: bias_variance.legendre_features(np.ones(3), 2.0), TypeError, "degree must be an int"),
    (lambda: bias_variance.risk_decomposition(3.0, [1]), TypeError, "f_star must be callable"),
    (lambda: bias_variance.risk_decomposition(lambda x: x[:1], [1]), ValueError, "f_star must map an array of shape (m,)"),
    (lambda: bias_variance.bias_variance_terms(np.ones((4, 2)), np.ones(3), np.ones((2, 2)), np.ones(2), 1.0), ValueError, "f_star must have shape (4,)"),
    (lambda: bias_variance.bias_variance_terms(np.ones((4, 2)), np.ones(4), np.ones((2, 3)), np.ones(2), 1.0), ValueError, "Phi_test must have shape (any, 2)"),
    (lambda: bias_variance.bias_variance_mc(np.ones((4, 2)), np.ones(4), np.ones((2, 2)), np.ones(2), -1.0), ValueError, "noise_var must be a finite number in [0, inf)"),
    (lambda: bias_variance.relu_features(np.ones((3, 2)), np.ones((4, 3))), ValueError, "W must have shape (any, 2)"),
    (lambda: bias_variance.random_features_curve(np.ones((3, 2)), np.ones(3), np.ones((2, 2)), np.ones(2), [0]), ValueError, "ps entries must be an int in [1, inf)"),
    (lambda: bias_variance.random_features_curve(np.ones((3, 2)), np.ones(3), np.ones((2, 2)), np.ones(2), [2], ridge=-1.0), ValueError, "ridge must be a finite number in [0, inf)"),
    (lambda: bias_variance.max_margin_direction(np.array([[1.0], [2.0]]), np.array([1, -1])), ValueError, "linearly separable"),
    (lambda: bias_variance.max_margin_direction(np.ones((2, 2)), np.array([0, 1])), ValueError, "y must hold labels in [-1, 1]"),
    (lambda: bias_variance.fit_until_memorised(np.ones((4, 2)), np.zeros(4), np.ones((2, 3)), np.zeros(2)), ValueError, "X_test must have shape (any, 2)"),
    (lambda: bias_variance.fit_until_memorised(np.ones((4, 2)), np.zeros(4), np.ones((2, 2)), np.zeros(2), target=1.5), ValueError, "target must be a finite number in [0, 1]"),
]  # fmt: skip


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
