"""Section 9.4 (continued), notebook ``07_bias_variance``: bias, variance, double descent and implicit bias.

Estimation and approximation error on Legendre features, bias and variance of least squares (exactly and by
simulation), double descent with random ReLU features, the max-margin direction that gradient descent on the
logistic loss converges to, and the randomisation test (fitting shuffled labels).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import torch
from numpy.polynomial import legendre
from scipy.optimize import minimize
from torch import nn

from ..training import (
    accuracy,
    evaluate,
    model_device,
    progress_bar,
    train_steps,
)
from ..validation import (
    check_callable,
    check_int,
    check_labels,
    check_matrix,
    check_number,
    check_positive,
    check_rng,
    check_vector,
)
from .common import (
    _relu_mlp,
)


def legendre_features(x, degree: int) -> np.ndarray:
    """The Legendre polynomials :math:`P_0(x), \\dots, P_{\\mathrm{degree}}(x)` of inputs x (n,) in [-1, 1], as the
    columns of a feature matrix (n, degree + 1), section 9.4. They span the polynomials of that degree and are
    orthogonal on [-1, 1], so least squares on them is well conditioned where powers of x are not."""
    x = check_vector(x, "x")
    degree = check_int(degree, "degree", 0)
    return legendre.legvander(x, degree)


class RiskDecomposition(NamedTuple):
    degrees: np.ndarray  # the polynomial degrees (k,)
    approximation: np.ndarray  # R(f*_F) - R(f*) = ||f*_F - f*||^2, per degree (k,)
    estimation: np.ndarray  # E_S ||f_S - f*_F||^2 = E_S R(f_S) - R(f*_F), per degree (k,)
    excess: np.ndarray  # E_S ||f_S - f*||^2 = E_S R(f_S) - R(f*), computed directly, per degree (k,)


def risk_decomposition(
    f_star: Callable[[np.ndarray], np.ndarray],
    degrees,
    n: int = 30,
    noise_var: float = 0.25,
    sets: int = 200,
    grid_size: int = 2001,
    rng=None,
) -> RiskDecomposition:
    """Estimation and approximation error of least squares on Legendre features of each degree, section 9.4:

    .. math:: R(f_S) - R(f^*) = \\underbrace{R(f_S) - R(f^*_{\\mathcal H})}_{\\text{estimation}}
              + \\underbrace{R(f^*_{\\mathcal H}) - R(f^*)}_{\\text{approximation}} ,

    for :math:`y = f^*(x) + \\eta`, :math:`x\\sim U[-1, 1]`, :math:`\\eta\\sim\\mathcal N(0, \\sigma^2)` and the
    squared loss, where :math:`R(f) - R(f^*) = \\mathbb E_x(f(x) - f^*(x))^2`. :math:`f^*_{\\mathcal H}`, the best
    polynomial of the degree, is the noise-free least-squares fit on `grid_size` equally spaced points (the
    expectation over x is the mean over that grid); :math:`f_S` is the least-squares fit to n noisy examples,
    averaged over `sets` training sets drawn from `rng` (the same sets for every degree). Returns a
    `RiskDecomposition`.
    """
    check_callable(f_star, "f_star")
    degrees = np.array([check_int(k, "degrees entries", 0) for k in np.atleast_1d(degrees)])
    n, sets = check_int(n, "n", 1), check_int(sets, "sets", 1)
    grid_size = check_int(grid_size, "grid_size", 2)
    noise_var = check_number(noise_var, "noise_var", 0)
    rng = check_rng(rng)
    grid = np.linspace(-1, 1, grid_size)
    target = np.asarray(f_star(grid), dtype=float)
    if target.shape != grid.shape:
        raise ValueError(f"f_star must map an array of shape (m,) to shape (m,), got shape {target.shape}")
    X = rng.uniform(-1, 1, size=(sets, n))
    Y = np.asarray(f_star(X), dtype=float) + math.sqrt(noise_var) * rng.standard_normal((sets, n))
    approximation, estimation, excess = (np.empty(len(degrees)) for _ in range(3))
    for j, degree in enumerate(degrees):
        G = legendre_features(grid, degree)
        best = G @ np.linalg.lstsq(G, target, rcond=None)[0]
        coefs = [
            np.linalg.lstsq(legendre_features(x, degree), y, rcond=None)[0] for x, y in zip(X, Y, strict=True)
        ]
        fits = np.array(coefs) @ G.T
        approximation[j] = np.mean((best - target) ** 2)
        estimation[j] = np.mean((fits - best) ** 2)
        excess[j] = np.mean((fits - target) ** 2)
    return RiskDecomposition(degrees, approximation, estimation, excess)


def _check_design(Phi, f_star, Phi_test, f_star_test, noise_var):
    """The arguments of the fixed-design least-squares problem of `bias_variance_terms`, validated."""
    Phi = check_matrix(Phi, "Phi")
    n, p = Phi.shape
    f_star = check_vector(f_star, "f_star", n)
    Phi_test = check_matrix(Phi_test, "Phi_test", cols=p)
    f_star_test = check_vector(f_star_test, "f_star_test", len(Phi_test))
    noise_var = check_number(noise_var, "noise_var", 0)
    return Phi, f_star, Phi_test, f_star_test, noise_var


class BiasVariance(NamedTuple):
    bias: np.ndarray  # E_S f_S(x) - f*(x) at each test input (m,)
    variance: np.ndarray  # Var_S f_S(x) at each test input (m,)


def bias_variance_terms(Phi, f_star, Phi_test, f_star_test, noise_var: float) -> BiasVariance:
    """Bias and variance of least squares with a fixed design, exactly, section 9.4. The fit to targets
    :math:`y = f^* + \\eta`, :math:`\\eta\\sim\\mathcal N(0, \\sigma^2I)`, predicts
    :math:`f_S(x) = h(x)^\\top y` with :math:`h(x)^\\top = \\phi(x)^\\top\\Phi^+` (the rows of
    :math:`\\Phi_{\\rm test}\\Phi^+`), so

    .. math:: \\mathrm{bias}(x) = h(x)^\\top f^* - f^*(x), \\qquad \\mathrm{variance}(x) = \\sigma^2\\lVert h(x)\\rVert^2 .

    Phi (n, p): features of the training inputs; f_star (n,): the noise-free targets there; Phi_test (m, p) and
    f_star_test (m,): the same at the test inputs; `noise_var` = σ². Returns a `BiasVariance` of two (m,) arrays.
    """
    Phi, f_star, Phi_test, f_star_test, noise_var = _check_design(
        Phi, f_star, Phi_test, f_star_test, noise_var
    )
    H = Phi_test @ np.linalg.pinv(Phi)
    return BiasVariance(H @ f_star - f_star_test, noise_var * np.sum(H**2, axis=1))


class BiasVarianceMC(NamedTuple):
    bias2: np.ndarray  # (mean over the sets of f_S(x) - f*(x))^2, (m,)
    variance: np.ndarray  # sample variance over the sets of f_S(x), (m,)
    mse: np.ndarray  # mean over the sets of (f_S(x) - y)^2 for a fresh noisy target y at x, (m,)
    fits: np.ndarray  # the predictions f_S(x) of every training set, (sets, m)


def bias_variance_mc(
    Phi, f_star, Phi_test, f_star_test, noise_var: float, sets: int = 500, rng=None
) -> BiasVarianceMC:
    """Bias, variance and test error of least squares with a fixed design, by simulation, section 9.4:
    `sets` training sets :math:`y = f^* + \\eta` that differ only in their noise (drawn from `rng`), one
    least-squares fit each (``np.linalg.lstsq``), and for the MSE one fresh target
    :math:`f^*(x) + \\eta'` per set and test input. The squared mean error over-estimates bias² by variance/sets.
    Arguments as in `bias_variance_terms`. Returns a `BiasVarianceMC`.
    """
    Phi, f_star, Phi_test, f_star_test, noise_var = _check_design(
        Phi, f_star, Phi_test, f_star_test, noise_var
    )
    sets = check_int(sets, "sets", 2)
    rng = check_rng(rng)
    noise_sd = math.sqrt(noise_var)
    Y = f_star[:, None] + noise_sd * rng.standard_normal((len(f_star), sets))
    fits = (Phi_test @ np.linalg.lstsq(Phi, Y, rcond=None)[0]).T
    targets = f_star_test + noise_sd * rng.standard_normal(fits.shape)
    return BiasVarianceMC(
        (fits.mean(axis=0) - f_star_test) ** 2,
        fits.var(axis=0, ddof=1),
        np.mean((fits - targets) ** 2, axis=0),
        fits,
    )


def relu_features(X, W) -> np.ndarray:
    """Random ReLU features, section 9.4 (Rahimi and Recht's random features with :math:`\\varphi = \\max(0,\\cdot)`):

    .. math:: \\phi(x) = \\frac1{\\sqrt p}\\big(\\max(0, w_j^\\top x)\\big)_{j=1}^p ,

    for inputs X (n, d) and fixed random weights W (p, d) (a column of ones in X gives each feature a bias).
    Returns the feature matrix (n, p)."""
    X = check_matrix(X, "X")
    W = check_matrix(W, "W", cols=X.shape[1])
    return np.maximum(X @ W.T, 0.0) / math.sqrt(len(W))


class FeatureCurve(NamedTuple):
    ps: np.ndarray  # numbers of random features (k,)
    test_mse: np.ndarray  # test mean squared error, averaged over the feature draws (k,)
    train_mse: np.ndarray  # training mean squared error, averaged over the feature draws (k,)


def random_features_curve(
    X, y, X_test, y_test, ps, draws: int = 10, ridge: float = 0.0, rng=None, progress: bool = False
) -> FeatureCurve:
    """Test error of least squares on p random ReLU features for every p in `ps`, section 9.4 (double descent).

    For each of `draws` draws of W (max(ps), d) with rows :math:`w_j\\sim\\mathcal N(0, I/d)` (from `rng`), the
    model with the first p features (`relu_features`) is fitted to X (n, d), y (n,): with ``ridge=0`` the
    minimum-norm least-squares solution :math:`a = \\Phi^+y` (``np.linalg.pinv``; it interpolates once p >= n),
    with ``ridge=λ > 0`` :math:`a = (\\Phi^\\top\\Phi + \\lambda I)^{-1}\\Phi^\\top y`. Returns a `FeatureCurve` of
    the test and training MSE, averaged over the draws.
    """
    X = check_matrix(X, "X")
    y = check_vector(y, "y", len(X))
    X_test = check_matrix(X_test, "X_test", cols=X.shape[1])
    y_test = check_vector(y_test, "y_test", len(X_test))
    ps = np.array([check_int(p, "ps entries", 1) for p in np.atleast_1d(ps)])
    draws = check_int(draws, "draws", 1)
    ridge = check_number(ridge, "ridge", 0)
    rng = check_rng(rng)
    test_mse, train_mse = np.zeros(len(ps)), np.zeros(len(ps))
    for _ in progress_bar(range(draws), desc="feature draws", enabled=progress):
        W = rng.standard_normal((ps.max(), X.shape[1])) / math.sqrt(X.shape[1])
        for j, p in enumerate(ps):
            Phi, Phi_test = relu_features(X, W[:p]), relu_features(X_test, W[:p])
            if ridge == 0:
                a = np.linalg.pinv(Phi) @ y
            else:
                a = np.linalg.solve(Phi.T @ Phi + ridge * np.eye(p), Phi.T @ y)
            test_mse[j] += np.mean((Phi_test @ a - y_test) ** 2) / draws
            train_mse[j] += np.mean((Phi @ a - y) ** 2) / draws
    return FeatureCurve(ps, test_mse, train_mse)


def max_margin_direction(X, y) -> np.ndarray:
    """The unit vector w that maximises the smallest margin :math:`\\min_i y_iw^\\top x_i` of linearly separable data
    (a hyperplane through the origin), section 9.4: the hard-margin SVM without bias,
    :math:`\\min\\frac12\\lVert w\\rVert^2` subject to :math:`y_iw^\\top x_i\\ge1` (SLSQP), normalised. X (n, d),
    labels y (n,) in {-1, +1}. Gradient descent on the logistic loss converges to this direction
    (Soudry et al., 2018). Returns w (d,)."""
    X = check_matrix(X, "X")
    y = check_labels(y, "y", len(X), values=(-1, 1)).astype(float)
    Z = y[:, None] * X
    start = np.linalg.lstsq(Z, np.ones(len(X)), rcond=None)[0]
    if (Z @ start).min() <= 0:
        start = np.linalg.pinv(Z) @ np.ones(len(X))
    result = minimize(
        lambda w: 0.5 * w @ w,
        start,
        jac=lambda w: w,
        constraints={"type": "ineq", "fun": lambda w: Z @ w - 1, "jac": lambda w: Z},
        method="SLSQP",
        options={"ftol": 1e-12, "maxiter": 1000},
    )
    if not result.success or (Z @ result.x).min() < 1 - 1e-6:
        raise ValueError("X, y must be linearly separable by a hyperplane through the origin")
    return result.x / np.linalg.norm(result.x)


class MemorisationRun(NamedTuple):
    epochs: int  # epochs until the training accuracy reached the target (max_epochs if it never did)
    train_accuracy: float  # training accuracy at the end
    test_accuracy: float  # accuracy on the test set at the end
    history: np.ndarray  # training accuracy after every epoch (epochs,)


def fit_until_memorised(
    X,
    y,
    X_test,
    y_test,
    hidden: int = 512,
    lr: float = 1e-2,
    target: float = 0.99,
    max_epochs: int = 500,
    rng=None,
    progress: bool = True,
) -> MemorisationRun:
    """Train a network with one hidden layer of `hidden` ReLU units on the cross-entropy, by Adam with step size
    `lr` in mini-batches of min(200, n), one epoch at a time (`training.train_steps` over a fresh order of the
    examples), until its accuracy on the training set X (n, d), y (n,) reaches `target`, at most `max_epochs`
    epochs: the randomisation test of Zhang et al. (2017) when y holds shuffled labels, section 9.4. The initial
    weights (PyTorch's default initialisation) and the order of every epoch come from `rng`; the network has one
    output per class of y and y_test and trains on `training.device()`. Returns a `MemorisationRun` (epochs
    used, final accuracies, training-accuracy history).
    """
    X = check_matrix(X, "X")
    y = check_labels(y, "y", len(X))
    X_test = check_matrix(X_test, "X_test", cols=X.shape[1])
    y_test = check_labels(y_test, "y_test", len(X_test))
    hidden, max_epochs = check_int(hidden, "hidden", 1), check_int(max_epochs, "max_epochs", 1)
    lr = check_positive(lr, "lr")
    target = check_number(target, "target", 0, 1)
    rng = check_rng(rng)
    classes = np.union1d(y, y_test)
    model = _relu_mlp(X.shape[1], hidden, len(classes), int(rng.integers(2**31)))
    dev = model_device(model)

    def tensors(X: np.ndarray, y: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        return (
            torch.as_tensor(X, dtype=torch.float32, device=dev),
            torch.as_tensor(np.searchsorted(classes, y), device=dev),
        )

    train, test = tensors(X, y), tensors(X_test, y_test)

    def loss(model: nn.Module, idx: torch.Tensor) -> torch.Tensor:
        return nn.functional.cross_entropy(model(train[0][idx]), train[1][idx])

    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    batch_size = min(200, len(X))
    history = []
    with progress_bar(range(max_epochs), desc="epochs", enabled=progress) as epochs:
        for _ in epochs:
            order = torch.as_tensor(rng.permutation(len(X)), device=dev)
            train_steps(model, loss, optimizer, order.split(batch_size), progress=False)
            history.append(evaluate(model, [train], {"accuracy": accuracy})["accuracy"])
            if history[-1] >= target:
                break
    test_accuracy = evaluate(model, [test], {"accuracy": accuracy})["accuracy"]
    return MemorisationRun(len(history), history[-1], test_accuracy, np.array(history))
