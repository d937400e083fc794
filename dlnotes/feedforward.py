"""Chapter 02 — feedforward networks: linear and logistic models, layers, approximation, ReLU regions.

Notation of the lecture: data ``X`` (s, n) with one example per row, targets ``y`` (s,), weights ``w`` (n,);
a layer is ``F[W, b](x) = phi(W x + b)`` with ``W`` (m, n), ``b`` (m,); logits are ``z``.
"""

from __future__ import annotations

import copy
import itertools
from math import comb
from typing import NamedTuple

import numpy as np
import scipy.optimize
import scipy.special
import torch
from torch import nn

from .activations import get_activation, log_softmax, relu, sigmoid, softmax
from .validation import (
    check_array,
    check_callable,
    check_int,
    check_labels,
    check_matrix,
    check_number,
    check_positive,
    check_rng,
    check_vector,
)

# ----------------------------------------------------------------------------- validation


def _data(X, y) -> tuple[np.ndarray, np.ndarray]:
    """Inputs X (s, n) and real targets y (s,)."""
    X = check_matrix(X, "X")
    return X, check_vector(y, "y", len(X))


def _pmf(p, name: str) -> np.ndarray:
    p = check_array(p, name)
    if p.ndim == 0 or (p < 0).any() or not np.allclose(p.sum(axis=-1), 1.0):
        raise ValueError(f"{name} must hold probabilities >= 0 summing to 1 along the last axis")
    return p


# ----------------------------------------------------------------------------- 2.0 background


def gaussian_pdf(X, mu, Sigma) -> np.ndarray:
    """Density ``N(x; mu, Sigma) = exp(-(x-mu)^T Sigma^{-1} (x-mu) / 2) / sqrt((2 pi)^d det Sigma)`` of each row of X."""
    X = check_matrix(X, "X")
    d = X.shape[1]
    mu, Sigma = check_vector(mu, "mu", d), check_matrix(Sigma, "Sigma", d, d)
    diff = X - mu
    quad = np.einsum("ij,ij->i", diff @ np.linalg.inv(Sigma), diff)
    return np.exp(-0.5 * quad) / np.sqrt((2 * np.pi) ** d * np.linalg.det(Sigma))


def gaussian_mle(X) -> tuple[np.ndarray, np.ndarray]:
    """Maximum-likelihood mean and (biased, 1/s) covariance of the rows of X."""
    X = check_matrix(X, "X")
    mu = X.mean(axis=0)
    return mu, (X - mu).T @ (X - mu) / len(X)


def entropy(p) -> np.ndarray:
    """Entropy ``H(p) = -sum p log p`` (natural log, ``0 log 0 = 0``) along the last axis."""
    p = _pmf(p, "p")
    return -np.sum(scipy.special.xlogy(p, p), axis=-1)


def cross_entropy(p, q) -> np.ndarray:
    """Cross-entropy ``H(p, q) = -sum p log q`` along the last axis (``inf`` where q = 0 < p)."""
    p, q = _pmf(p, "p"), _pmf(q, "q")
    with np.errstate(divide="ignore"):
        return -np.sum(scipy.special.xlogy(p, q), axis=-1)


def kl(p, q) -> np.ndarray:
    """Kullback–Leibler divergence ``KL(p || q) = sum p log(p / q) >= 0`` along the last axis."""
    p, q = _pmf(p, "p"), _pmf(q, "q")
    return np.sum(scipy.special.rel_entr(p, q), axis=-1)


# ----------------------------------------------------------------------------- 2.1 linear regression


def least_squares_loss(X, y, w) -> float:
    """``h[w] = ||X w - y||^2 / (2s)``."""
    X, y = _data(X, y)
    r = X @ check_vector(w, "w", X.shape[1]) - y
    return float(r @ r / (2 * len(X)))


def least_squares_grad(X, y, w) -> np.ndarray:
    """Gradient ``X^T (X w - y) / s`` of the mean squared loss."""
    X, y = _data(X, y)
    return X.T @ (X @ check_vector(w, "w", X.shape[1]) - y) / len(X)


def lstsq_closed_form(X, y, ridge: float = 0.0) -> np.ndarray:
    """Solve the normal equations ``(X^T X + ridge I) w = X^T y``.

    ``ridge = 0``: least squares (X must have full column rank); ``ridge = lam > 0``: the minimiser of
    ``||X w - y||^2 / 2 + lam ||w||^2 / 2`` (for the ``1/(2s)`` loss pass ``s * lam``).
    """
    X, y = _data(X, y)
    ridge = check_number(ridge, "ridge", 0)
    A = X.T @ X + ridge * np.eye(X.shape[1])
    if ridge == 0 and np.linalg.matrix_rank(A) < X.shape[1]:
        raise ValueError("X^T X is singular (X lacks full column rank): use ridge > 0 or np.linalg.pinv")
    return np.linalg.solve(A, X.T @ y)


def ridge_dual(X, y, lam: float) -> np.ndarray:
    """Ridge solution in the push-through ("dual") form ``X^T (X X^T + lam I)^{-1} y``."""
    X, y = _data(X, y)
    lam = check_positive(lam, "lam")
    return X.T @ np.linalg.solve(X @ X.T + lam * np.eye(len(X)), y)


def pinv_via_ridge(X, eps: float) -> np.ndarray:
    """``(X^T X + eps I)^{-1} X^T``, which tends to the Moore–Penrose pseudo-inverse ``X^+`` as eps -> 0."""
    X = check_matrix(X, "X")
    eps = check_positive(eps, "eps")
    return np.linalg.solve(X.T @ X + eps * np.eye(X.shape[1]), X.T)


class LinearFit(NamedTuple):
    w: np.ndarray  # the final weights (n,)
    losses: np.ndarray  # the loss before every step and after the last, (steps + 1,)


def gd_linear_regression(X, y, eta: float, steps: int, w0=None) -> LinearFit:
    """Gradient descent ``w <- w - eta X^T (X w - y) / s`` on the mean squared loss."""
    X, y = _data(X, y)
    eta, steps = check_positive(eta, "eta"), check_int(steps, "steps", 1)
    w = np.zeros(X.shape[1]) if w0 is None else check_vector(w0, "w0", X.shape[1])
    losses = np.empty(steps + 1)
    for t in range(steps):
        losses[t] = least_squares_loss(X, y, w)
        w -= eta * least_squares_grad(X, y, w)
    losses[steps] = least_squares_loss(X, y, w)
    return LinearFit(w, losses)


def sgd_lms(X, y, eta: float, steps: int, rng=None, w0=None) -> np.ndarray:
    """Stochastic gradient (LMS) steps ``w <- w + eta (y_i - w^T x_i) x_i`` with ``i`` uniform; returns w."""
    X, y = _data(X, y)
    eta, steps = check_positive(eta, "eta"), check_int(steps, "steps", 1)
    w = np.zeros(X.shape[1]) if w0 is None else check_vector(w0, "w0", X.shape[1])
    for i in check_rng(rng).integers(len(X), size=steps):
        w += eta * (y[i] - w @ X[i]) * X[i]
    return w


def gaussian_nll(X, y, w, sigma: float) -> float:
    """Negative log-likelihood ``||y - X w||^2 / (2 sigma^2) + (s/2) log(2 pi sigma^2)`` of ``y = X w + noise``."""
    X, y = _data(X, y)
    sigma = check_positive(sigma, "sigma")
    r = y - X @ check_vector(w, "w", X.shape[1])
    return float(r @ r / (2 * sigma**2) + len(X) / 2 * np.log(2 * np.pi * sigma**2))


def polynomial_features(x, degree: int) -> np.ndarray:
    """The columns ``1, x, x^2, ..., x^degree`` of a 1-D input x (s,)."""
    x = check_vector(x, "x")
    return x[:, None] ** np.arange(check_int(degree, "degree", 0) + 1)


# ----------------------------------------------------------------------------- 2.2 logistic regression


def bce_with_logits(z, y) -> float:
    """Mean binary cross-entropy ``-y log sigma(z) - (1-y) log(1 - sigma(z)) = log(1 + e^{-(2y-1) z})``, y in {0, 1}."""
    z = check_vector(z, "z")
    y = check_labels(y, "y", len(z), values=(0, 1))
    return float(np.mean(np.logaddexp(0.0, -(2 * y - 1) * z)))


def logistic_regression_grad(X, y, w) -> np.ndarray:
    """Gradient ``X^T (sigma(X w) - y) / s`` of the mean binary cross-entropy of logits ``X w``, y in {0, 1}."""
    X = check_matrix(X, "X")
    y = check_labels(y, "y", len(X), values=(0, 1))
    return X.T @ (sigmoid(X @ check_vector(w, "w", X.shape[1])) - y) / len(X)


def logistic_regression_hessian(X, w) -> np.ndarray:
    """Hessian ``X^T diag(sigma (1 - sigma)) X / s`` of the mean binary cross-entropy of logits ``X w``."""
    X = check_matrix(X, "X")
    q = sigmoid(X @ check_vector(w, "w", X.shape[1]))
    return X.T @ ((q * (1 - q))[:, None] * X) / len(X)


def softmax_jacobian(z) -> np.ndarray:
    """Jacobian ``diag(p) - p p^T`` of ``p = softmax(z)`` for one logit vector z (K,): ``dp_i/dz_j = p_i (delta_ij - p_j)``."""
    p = softmax(check_vector(z, "z"))
    return np.diag(p) - np.outer(p, p)


def softmax_cross_entropy(z, y) -> float:
    """Mean ``-z_y + log sum_j exp(z_j) = -log softmax(z)_y`` over the rows of logits z (N, K), labels y (N,)."""
    z = check_matrix(z, "z")
    y = check_labels(y, "y", len(z), n_classes=z.shape[1])
    return float(-np.mean(log_softmax(z)[np.arange(len(y)), y]))


def softmax_regression(X, y, n_classes: int, eta: float, steps: int, lam: float = 0.0) -> np.ndarray:
    """Multinomial logistic regression by gradient descent on the mean softmax cross-entropy
    (+ ``lam ||W||^2 / 2``), gradient ``X~^T (softmax(X~ W) - Y) / s``; returns W (n+1, K), bias in the last row."""
    X = check_matrix(X, "X")
    n_classes = check_int(n_classes, "n_classes", 2)
    y = check_labels(y, "y", len(X), n_classes=n_classes)
    eta, steps, lam = check_positive(eta, "eta"), check_int(steps, "steps", 1), check_number(lam, "lam", 0)
    Xb = np.hstack([X, np.ones((len(X), 1))])
    Y = np.eye(n_classes)[y]
    W = np.zeros((Xb.shape[1], n_classes))
    for _ in range(steps):
        W -= eta * (Xb.T @ (softmax(Xb @ W) - Y) / len(X) + lam * W)
    return W


def softmax_regression_logits(X, W) -> np.ndarray:
    """Logits ``[X, 1] W`` (N, K) of a model returned by `softmax_regression` (bias in the last row of W)."""
    X = check_matrix(X, "X")
    W = check_matrix(W, "W", X.shape[1] + 1)  # n weights and a bias per class
    return np.hstack([X, np.ones((len(X), 1))]) @ W


# ----------------------------------------------------------------------------- 2.3 layers


class Dense(nn.Module):
    """A layer ``F[W, b](x) = phi(W x + b)`` with W (m, n) and b (m,), applied to the rows of x (N, n)."""

    def __init__(self, n: int, m: int, activation: str = "relu"):
        super().__init__()
        n, m = check_int(n, "n", 1), check_int(m, "m", 1)
        self.phi = get_activation(activation).torch
        bound = 1 / np.sqrt(n)  # the uniform initialisation of torch.nn.Linear
        self.W = nn.Parameter(torch.empty(m, n).uniform_(-bound, bound))
        self.b = nn.Parameter(torch.empty(m).uniform_(-bound, bound))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.phi(x @ self.W.T + self.b)


class Residual(Dense):
    """A residual layer ``F[W, b](x) = x + alpha (phi(W x + b) - phi(0))``, so that ``F[0, 0]`` is the identity;
    ``alpha`` scales the residual branch (``alpha = 1/sqrt(L)`` keeps a stack of L layers near the identity)."""

    def __init__(self, n: int, activation: str = "relu", alpha: float = 1.0):
        super().__init__(n, n, activation)
        self.alpha = check_positive(alpha, "alpha")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.alpha * (self.phi(x @ self.W.T + self.b) - self.phi(torch.zeros(())))


class MLP(nn.Sequential):
    """``G = F^L o ... o F^1`` for layer widths ``sizes = [n, m_1, ..., m_L]``; the last layer has no activation.

    With ``residual=True`` every hidden layer whose input and output widths agree is a `Residual` layer.
    """

    def __init__(self, sizes, activation: str = "relu", residual: bool = False):
        sizes = [check_int(k, "sizes entries", 1) for k in sizes]
        if len(sizes) < 2:
            raise ValueError(f"sizes must list at least two widths [n, ..., m_L], got {sizes!r}")
        get_activation(activation)  # a clear error for an unknown name
        layers = []
        for l, (n, m) in enumerate(itertools.pairwise(sizes)):
            phi = activation if l < len(sizes) - 2 else "identity"
            layers.append(Residual(n, phi) if residual and n == m and phi != "identity" else Dense(n, m, phi))
        super().__init__(*layers)


@torch.no_grad()
def permute_hidden(mlp: MLP, layer: int, perm) -> MLP:
    """A copy of `mlp` whose hidden units after `layer` are reordered by `perm` (rows of W, b of that layer,
    columns of the next W): the network computes the same function."""
    layer = check_int(layer, "layer", 0, len(mlp) - 2)  # a hidden layer
    perm = torch.as_tensor(perm)
    m = mlp[layer].W.shape[0]
    if sorted(perm.tolist()) != list(range(m)):
        raise ValueError(f"perm must be a permutation of 0..{m - 1}")
    if isinstance(mlp[layer], Residual) or isinstance(mlp[layer + 1], Residual):
        raise ValueError(
            "permuting the units next to a residual layer also permutes its skip path: not supported"
        )
    permuted = copy.deepcopy(mlp)
    permuted[layer].W.copy_(mlp[layer].W[perm])
    permuted[layer].b.copy_(mlp[layer].b[perm])
    permuted[layer + 1].W.copy_(mlp[layer + 1].W[:, perm])
    return permuted


# ----------------------------------------------------------------------------- 2.4 approximation


def random_feature_fit(f, a, c, x_fit, x_eval, phi=np.tanh) -> tuple[np.ndarray, np.ndarray]:
    """Fit ``g(x) = v_0 + sum_j v_j phi(a_j (x - c_j))`` to f on the points x_fit by least squares
    (the hidden units a, c are fixed, only v is learned); return (g on x_eval, v)."""
    check_callable(f, "f")
    a = check_vector(a, "a")  # one slope and one centre per unit
    c = check_vector(c, "c", len(a))
    x_fit, x_eval = check_vector(x_fit, "x_fit"), check_vector(x_eval, "x_eval")

    def features(x):
        return np.hstack([np.ones((len(x), 1)), phi(a * (x[:, None] - c))])

    v, *_ = np.linalg.lstsq(features(x_fit), f(x_fit), rcond=None)
    return features(x_eval) @ v, v


def maurey_mse(d: int, m: int, n_points: int = 200, rng=None) -> float:
    """Mean squared error of ``g_m(x) = (1/m) sum_k cos(omega_k^T x)``, ``omega_k ~ N(0, I_d)``, as an
    approximation of ``f(x) = E cos(omega^T x) = exp(-||x||^2 / 2)`` on points ``x ~ N(0, I_d)``."""
    d, m, n_points = check_int(d, "d", 1), check_int(m, "m", 1), check_int(n_points, "n_points", 1)
    rng = check_rng(rng)
    x = rng.normal(size=(n_points, d))
    omega = rng.normal(size=(m, d))
    g = np.cos(x @ omega.T).mean(axis=1)
    return float(np.mean((np.exp(-0.5 * np.sum(x**2, axis=1)) - g) ** 2))


# ----------------------------------------------------------------------------- 2.5 ReLU networks


def activation_patterns(X, W, b) -> np.ndarray:
    """``kappa(x) = 1{W x + b > 0}`` (m units) for each row of X (N, n): a bool array (N, m)."""
    X = check_matrix(X, "X")
    W = check_matrix(W, "W", None, X.shape[1])
    return X @ W.T + check_vector(b, "b", len(W)) > 0


def relu_net_patterns(X, weights, biases) -> np.ndarray:
    """Activation patterns of all hidden layers of the ReLU net ``x -> relu(W_L ... relu(W_1 x + b_1) ...)``,
    concatenated: (N, m_1 + ... + m_L). Points with equal patterns lie in the same linear region."""
    x = check_matrix(X, "X")
    if len(weights) != len(biases) or not weights:
        raise ValueError("weights and biases must be equally long, non-empty lists (one per hidden layer)")
    patterns = []
    for W, b in zip(weights, biases, strict=True):
        kappa = activation_patterns(x, W, b)
        patterns.append(kappa)
        x = np.where(kappa, x @ np.asarray(W).T + b, 0.0)
    return np.hstack(patterns)


def count_regions_lp(W, b, tol: float = 1e-7) -> int:
    """Number of regions cut out of R^n by the m hyperplanes ``w_i^T x + b_i = 0``: a sign pattern sigma counts
    when the LP ``max t`` s.t. ``sigma_i (w_i^T x + b_i) >= t``, ``t <= 1`` has ``t* > tol``. x is free: a region
    may lie arbitrarily far out (two nearly parallel hyperplanes meet far away), and ``t <= 1`` keeps the LP
    bounded."""
    W = check_matrix(W, "W")
    m, n = W.shape
    b = check_vector(b, "b", m)
    count = 0
    for sigma in itertools.product((-1.0, 1.0), repeat=m):
        sigma = np.array(sigma)
        # variables (x, t): minimise -t subject to -sigma_i (w_i^T x + b_i) + t <= 0
        A = np.hstack([-sigma[:, None] * W, np.ones((m, 1))])
        res = scipy.optimize.linprog(
            np.append(np.zeros(n), -1.0),
            A_ub=A,
            b_ub=sigma * b,
            bounds=[(None, None)] * n + [(None, 1.0)],
            method="highs",
        )
        count += res.status == 0 and -res.fun > tol
    return count


def zaslavsky_bound(m: int, n: int) -> int:
    """Maximal number of regions of m hyperplanes in R^n: ``sum_{i=0}^{min(n, m)} binom(m, i)``."""
    m, n = check_int(m, "m", 0), check_int(n, "n", 0)
    return sum(comb(m, i) for i in range(min(n, m) + 1))


def montufar_bound(m: int, n: int, L: int) -> int:
    """Montúfar et al.'s lower bound ``R(m) floor(m/n)^{n (L-1)}`` on the maximal number of linear regions of a
    ReLU net with n inputs and L hidden layers of width m >= n."""
    n = check_int(n, "n", 1)
    m, L = check_int(m, "m", n), check_int(L, "L", 1)
    return zaslavsky_bound(m, n) * (m // n) ** (n * (L - 1))


def sawtooth_net(L: int):
    """The width-2 ReLU net that composes the tent map ``t(x) = 2 (x)_+ - 4 (x - 1/2)_+`` L times on [0, 1]."""
    L = check_int(L, "L", 1)

    def g(x):
        x = np.asarray(x, dtype=np.float64)
        for _ in range(L):
            x = 2 * relu(x) - 4 * relu(x - 0.5)
        return x

    return g


def count_linear_pieces(f, a: float, b: float, n_grid: int = 100_001, tol: float = 1e-6) -> int:
    """Number of linear pieces of a continuous piecewise-linear f on [a, b], from slope changes on a grid.

    A break strictly inside a grid interval gives that interval an intermediate slope, i.e. two slope
    changes in a row: runs of consecutive changes count as one break.
    """
    check_callable(f, "f")
    a = check_number(a, "a")
    b = check_number(b, "b", a, low_open=True)
    n_grid = check_int(n_grid, "n_grid", 3)
    x = np.linspace(a, b, n_grid)
    slopes = np.diff(f(x)) / np.diff(x)
    change = np.abs(np.diff(slopes)) > tol * max(1.0, np.abs(slopes).max())
    breaks = np.count_nonzero(change[1:] & ~change[:-1]) + int(change[0]) if len(change) else 0
    return breaks + 1


class ReLURepresentation(NamedTuple):
    a: float  # slope of the first piece
    b: float  # intercept of the first piece
    c: np.ndarray  # slope jumps at the inner breaks x_1..x_{k-2}


def relu_representation(breaks, values) -> ReLURepresentation:
    """Coefficients of ``g(x) = a x + b + sum_i c_i (x - x_i)_+`` for the piecewise-linear interpolant of the
    points (breaks[k], values[k]) (breaks strictly increasing): a, b from the first piece, c_i = slope jumps."""
    x = check_vector(breaks, "breaks")
    v = check_vector(values, "values", len(x))
    if len(x) < 2 or (np.diff(x) <= 0).any():
        raise ValueError(f"breaks must be at least 2 strictly increasing numbers, got {x}")
    slopes = np.diff(v) / np.diff(x)
    return ReLURepresentation(float(slopes[0]), float(v[0] - slopes[0] * x[0]), np.diff(slopes))
