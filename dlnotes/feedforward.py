"""Chapter 02 — feedforward networks: linear and logistic models, layers, approximation, ReLU regions.

Notation of the lecture: data ``X`` (s, n) with one example per row, targets ``y`` (s,), weights ``w`` (n,);
a layer is ``F[W, b](x) = phi(W x + b)`` with ``W`` (m, n), ``b`` (m,); logits are ``z``.
"""

from __future__ import annotations

import copy
import itertools
from math import comb

import numpy as np
import scipy.optimize
import scipy.special
import torch
from torch import nn

from .validation import as_matrix, positive, positive_int

# ----------------------------------------------------------------------------- validation


def _targets(y, s: int, name: str = "y") -> np.ndarray:
    y = np.asarray(y, dtype=np.float64)
    if y.shape != (s,):
        raise ValueError(f"{name} must have shape ({s},) to match X, got {y.shape}")
    return y


def _pmf(p, name: str) -> np.ndarray:
    p = np.asarray(p, dtype=np.float64)
    if p.ndim == 0 or (p < 0).any() or not np.allclose(p.sum(axis=-1), 1.0):
        raise ValueError(f"{name} must hold probabilities >= 0 summing to 1 along the last axis")
    return p


# ----------------------------------------------------------------------------- 2.0 background


def gaussian_pdf(X, mu, Sigma) -> np.ndarray:
    """Density ``N(x; mu, Sigma) = exp(-(x-mu)^T Sigma^{-1} (x-mu) / 2) / sqrt((2 pi)^d det Sigma)`` of each row of X."""
    X = as_matrix(X)
    d = X.shape[1]
    mu, Sigma = np.asarray(mu, dtype=np.float64), np.asarray(Sigma, dtype=np.float64)
    if mu.shape != (d,) or Sigma.shape != (d, d):
        raise ValueError(f"mu must be ({d},) and Sigma ({d}, {d}), got {mu.shape} and {Sigma.shape}")
    diff = X - mu
    quad = np.einsum("ij,ij->i", diff @ np.linalg.inv(Sigma), diff)
    return np.exp(-0.5 * quad) / np.sqrt((2 * np.pi) ** d * np.linalg.det(Sigma))


def gaussian_mle(X) -> tuple[np.ndarray, np.ndarray]:
    """Maximum-likelihood mean and (biased, 1/s) covariance of the rows of X."""
    X = as_matrix(X)
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


def least_squares_loss(w, X, y) -> float:
    """``h[w] = ||X w - y||^2 / (2s)``."""
    X = as_matrix(X)
    y = _targets(y, len(X))
    r = X @ np.asarray(w, dtype=np.float64) - y
    return float(r @ r / (2 * len(X)))


def least_squares_grad(w, X, y) -> np.ndarray:
    """Gradient ``X^T (X w - y) / s`` of the mean squared loss."""
    X = as_matrix(X)
    y = _targets(y, len(X))
    return X.T @ (X @ np.asarray(w, dtype=np.float64) - y) / len(X)


def lstsq_closed_form(X, y, ridge: float = 0.0) -> np.ndarray:
    """Solve the normal equations ``(X^T X + ridge I) w = X^T y``.

    ``ridge = 0``: least squares (X must have full column rank); ``ridge = lam > 0``: the minimiser of
    ``||X w - y||^2 / 2 + lam ||w||^2 / 2`` (for the ``1/(2s)`` loss pass ``s * lam``).
    """
    X = as_matrix(X)
    y = _targets(y, len(X))
    if not np.isscalar(ridge) or ridge < 0:
        raise ValueError(f"ridge must be a number >= 0, got {ridge!r}")
    A = X.T @ X + ridge * np.eye(X.shape[1])
    if ridge == 0 and np.linalg.matrix_rank(A) < X.shape[1]:
        raise ValueError("X^T X is singular (X lacks full column rank): use ridge > 0 or np.linalg.pinv")
    return np.linalg.solve(A, X.T @ y)


def ridge_dual(X, y, lam: float) -> np.ndarray:
    """Ridge solution in the push-through ("dual") form ``X^T (X X^T + lam I)^{-1} y``."""
    X = as_matrix(X)
    y = _targets(y, len(X))
    lam = positive(lam, "lam")
    return X.T @ np.linalg.solve(X @ X.T + lam * np.eye(len(X)), y)


def pinv_via_ridge(X, eps: float) -> np.ndarray:
    """``(X^T X + eps I)^{-1} X^T``, which tends to the Moore–Penrose pseudo-inverse ``X^+`` as eps -> 0."""
    X = as_matrix(X)
    eps = positive(eps, "eps")
    return np.linalg.solve(X.T @ X + eps * np.eye(X.shape[1]), X.T)


def gd_linear_regression(X, y, eta: float, steps: int, w0=None) -> tuple[np.ndarray, np.ndarray]:
    """Gradient descent ``w <- w - eta X^T (X w - y) / s`` on the mean squared loss; returns (w, losses)."""
    X = as_matrix(X)
    y = _targets(y, len(X))
    eta, steps = positive(eta, "eta"), positive_int(steps, "steps")
    w = np.zeros(X.shape[1]) if w0 is None else np.array(w0, dtype=np.float64)
    if w.shape != (X.shape[1],):
        raise ValueError(f"w0 must have shape ({X.shape[1]},), got {w.shape}")
    losses = np.empty(steps + 1)
    for t in range(steps):
        losses[t] = least_squares_loss(w, X, y)
        w -= eta * least_squares_grad(w, X, y)
    losses[steps] = least_squares_loss(w, X, y)
    return w, losses


def sgd_lms(X, y, eta: float, steps: int, rng=None, w0=None) -> np.ndarray:
    """Stochastic gradient (LMS) steps ``w <- w + eta (y_i - w^T x_i) x_i`` with ``i`` uniform; returns w."""
    X = as_matrix(X)
    y = _targets(y, len(X))
    eta, steps = positive(eta, "eta"), positive_int(steps, "steps")
    rng = np.random.default_rng(rng)
    w = np.zeros(X.shape[1]) if w0 is None else np.array(w0, dtype=np.float64)
    for i in rng.integers(len(X), size=steps):
        w += eta * (y[i] - w @ X[i]) * X[i]
    return w


def gaussian_nll(w, X, y, sigma: float) -> float:
    """Negative log-likelihood ``||y - X w||^2 / (2 sigma^2) + (s/2) log(2 pi sigma^2)`` of ``y = X w + noise``."""
    X = as_matrix(X)
    y = _targets(y, len(X))
    sigma = positive(sigma, "sigma")
    r = y - X @ np.asarray(w, dtype=np.float64)
    return float(r @ r / (2 * sigma**2) + len(X) / 2 * np.log(2 * np.pi * sigma**2))


def polynomial_features(x, degree: int) -> np.ndarray:
    """The columns ``1, x, x^2, ..., x^degree`` of a 1-D input x (s,)."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError(f"x must be 1-D (s,), got shape {x.shape}")
    if not isinstance(degree, (int, np.integer)) or degree < 0:
        raise ValueError(f"degree must be an int >= 0, got {degree!r}")
    return x[:, None] ** np.arange(degree + 1)


# ----------------------------------------------------------------------------- 2.2 logistic regression


def sigmoid(z) -> np.ndarray:
    """Logistic function ``1 / (1 + e^{-z})``, computed without overflow."""
    return scipy.special.expit(np.asarray(z, dtype=np.float64))


def bce_with_logits(z, y) -> float:
    """Mean binary cross-entropy ``-y log sigma(z) - (1-y) log(1 - sigma(z)) = log(1 + e^{-(2y-1) z})``, y in {0, 1}."""
    z = np.asarray(z, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if z.shape != y.shape or not np.isin(y, (0, 1)).all():
        raise ValueError(f"y must be labels in {{0, 1}} with the shape of z {z.shape}, got {y.shape}")
    return float(np.mean(np.logaddexp(0.0, -(2 * y - 1) * z)))


def logistic_regression_grad(w, X, y) -> np.ndarray:
    """Gradient ``X^T (sigma(X w) - y) / s`` of the mean binary cross-entropy of logits ``X w``."""
    X = as_matrix(X)
    y = _targets(y, len(X))
    return X.T @ (sigmoid(X @ np.asarray(w, dtype=np.float64)) - y) / len(X)


def logistic_regression_hessian(w, X) -> np.ndarray:
    """Hessian ``X^T diag(sigma (1 - sigma)) X / s`` of the mean binary cross-entropy of logits ``X w``."""
    X = as_matrix(X)
    q = sigmoid(X @ np.asarray(w, dtype=np.float64))
    return X.T @ ((q * (1 - q))[:, None] * X) / len(X)


def softmax(z, axis: int = -1) -> np.ndarray:
    """``exp(z_i) / sum_j exp(z_j)`` along `axis`; the maximum is subtracted first, so no overflow."""
    z = np.asarray(z, dtype=np.float64)
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def log_softmax(z, axis: int = -1) -> np.ndarray:
    """``z_i - log sum_j exp(z_j)`` along `axis`, computed stably."""
    z = np.asarray(z, dtype=np.float64)
    return z - scipy.special.logsumexp(z, axis=axis, keepdims=True)


def softmax_jacobian(z) -> np.ndarray:
    """Jacobian ``diag(s) - s s^T`` of the softmax of one logit vector z (K,): ``ds_i/dz_j = s_i (delta_ij - s_j)``."""
    z = np.asarray(z, dtype=np.float64)
    if z.ndim != 1:
        raise ValueError(f"z must be one logit vector (K,), got shape {z.shape}")
    s = softmax(z)
    return np.diag(s) - np.outer(s, s)


def softmax_cross_entropy(z, y) -> float:
    """Mean ``-z_y + log sum_j exp(z_j) = -log softmax(z)_y`` over the rows of logits z (N, K), labels y (N,)."""
    z = np.asarray(z, dtype=np.float64)
    y = np.asarray(y)
    if z.ndim != 2 or y.shape != z.shape[:1] or not np.issubdtype(y.dtype, np.integer):
        raise ValueError(
            f"z must be (N, K) logits and y (N,) integer labels, got {z.shape} and {y.shape} {y.dtype}"
        )
    if ((y < 0) | (y >= z.shape[1])).any():
        raise ValueError(f"labels y must lie in 0..{z.shape[1] - 1}")
    return float(-np.mean(log_softmax(z)[np.arange(len(y)), y]))


def softmax_regression(X, y, n_classes: int, eta: float, steps: int, lam: float = 0.0) -> np.ndarray:
    """Multinomial logistic regression by gradient descent on the mean softmax cross-entropy
    (+ ``lam ||W||^2 / 2``), gradient ``X~^T (softmax(X~ W) - Y) / s``; returns W (n+1, K), bias in the last row."""
    X = as_matrix(X)
    y = np.asarray(y)
    if y.shape != (len(X),) or not np.issubdtype(y.dtype, np.integer):
        raise ValueError(f"y must be (s,) integer labels matching X, got {y.shape} {y.dtype}")
    eta, steps = positive(eta, "eta"), positive_int(steps, "steps")
    Xb = np.hstack([X, np.ones((len(X), 1))])
    Y = np.eye(n_classes)[y]
    W = np.zeros((Xb.shape[1], n_classes))
    for _ in range(steps):
        W -= eta * (Xb.T @ (softmax(Xb @ W) - Y) / len(X) + lam * W)
    return W


def softmax_regression_logits(W, X) -> np.ndarray:
    """Logits ``[X, 1] W`` (N, K) of a model returned by `softmax_regression` (bias in the last row of W)."""
    X = as_matrix(X)
    W = as_matrix(W, "W")
    if W.shape[0] != X.shape[1] + 1:
        raise ValueError(
            f"W must have {X.shape[1] + 1} rows (n weights and a bias) for X {X.shape}, got {W.shape}"
        )
    return np.hstack([X, np.ones((len(X), 1))]) @ W


# ----------------------------------------------------------------------------- 2.3 layers


ACTIVATIONS = {
    "relu": torch.relu,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "gelu": nn.functional.gelu,
    "identity": lambda z: z,
}


def _activation(name: str):
    if name not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {name!r}")
    return ACTIVATIONS[name]


class Dense(nn.Module):
    """A layer ``F[W, b](x) = phi(W x + b)`` with W (m, n) and b (m,), applied to the rows of x (N, n)."""

    def __init__(self, n: int, m: int, activation: str = "relu"):
        super().__init__()
        self.phi = _activation(activation)
        bound = 1 / np.sqrt(n)  # the uniform initialisation of torch.nn.Linear
        self.W = nn.Parameter(torch.empty(m, n).uniform_(-bound, bound))
        self.b = nn.Parameter(torch.empty(m).uniform_(-bound, bound))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.phi(x @ self.W.T + self.b)


class Residual(Dense):
    """A residual layer ``F[W, b](x) = x + phi(W x + b) - phi(0)``, so that ``F[0, 0]`` is the identity."""

    def __init__(self, n: int, activation: str = "relu"):
        super().__init__(n, n, activation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.phi(x @ self.W.T + self.b) - self.phi(torch.zeros(()))


class MLP(nn.Sequential):
    """``G = F^L o ... o F^1`` for layer widths ``sizes = [n, m_1, ..., m_L]``; the last layer has no activation.

    With ``residual=True`` every hidden layer whose input and output widths agree is a `Residual` layer.
    """

    def __init__(self, sizes, activation: str = "relu", residual: bool = False):
        sizes = list(sizes)
        if len(sizes) < 2 or not all(isinstance(k, int) and k > 0 for k in sizes):
            raise ValueError(f"sizes must list at least two positive ints [n, ..., m_L], got {sizes!r}")
        _activation(activation)
        layers = []
        for l, (n, m) in enumerate(itertools.pairwise(sizes)):
            phi = activation if l < len(sizes) - 2 else "identity"
            layers.append(Residual(n, phi) if residual and n == m and phi != "identity" else Dense(n, m, phi))
        super().__init__(*layers)


def count_parameters(model: nn.Module) -> int:
    """Number of trainable numbers; a dense layer from n to m has ``m (n + 1)``."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


@torch.no_grad()
def permute_hidden(mlp: MLP, layer: int, perm) -> MLP:
    """A copy of `mlp` whose hidden units after `layer` are reordered by `perm` (rows of W, b of that layer,
    columns of the next W): the network computes the same function."""
    if not 0 <= layer < len(mlp) - 1:
        raise ValueError(f"layer must index a hidden layer, 0..{len(mlp) - 2}, got {layer!r}")
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
    a, c = np.asarray(a, dtype=np.float64), np.asarray(c, dtype=np.float64)
    if a.ndim != 1 or a.shape != c.shape:
        raise ValueError(
            f"a and c must be 1-D arrays of equal length (one per unit), got {a.shape} and {c.shape}"
        )

    def features(x):
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 1:
            raise ValueError(f"x_fit and x_eval must be 1-D grids, got shape {x.shape}")
        return np.hstack([np.ones((len(x), 1)), phi(a * (x[:, None] - c))])

    v, *_ = np.linalg.lstsq(features(x_fit), f(np.asarray(x_fit, dtype=np.float64)), rcond=None)
    return features(x_eval) @ v, v


def maurey_mse(d: int, m: int, n_points: int = 200, rng=None) -> float:
    """Mean squared error of ``g_m(x) = (1/m) sum_k cos(omega_k^T x)``, ``omega_k ~ N(0, I_d)``, as an
    approximation of ``f(x) = E cos(omega^T x) = exp(-||x||^2 / 2)`` on points ``x ~ N(0, I_d)``."""
    for name, v in (("d", d), ("m", m), ("n_points", n_points)):
        if not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    rng = np.random.default_rng(rng)
    x = rng.normal(size=(n_points, d))
    omega = rng.normal(size=(m, d))
    g = np.cos(x @ omega.T).mean(axis=1)
    return float(np.mean((np.exp(-0.5 * np.sum(x**2, axis=1)) - g) ** 2))


# ----------------------------------------------------------------------------- 2.5 ReLU networks


def relu(z) -> np.ndarray:
    """``(z)_+ = max(0, z)``."""
    return np.maximum(np.asarray(z, dtype=np.float64), 0.0)


def activation_patterns(W, b, X) -> np.ndarray:
    """``kappa(x) = 1{W x + b > 0}`` (m units) for each row of X (N, n): a bool array (N, m)."""
    W, X = as_matrix(W, "W"), as_matrix(X)
    b = np.asarray(b, dtype=np.float64)
    if W.shape[1] != X.shape[1] or b.shape != (W.shape[0],):
        raise ValueError(f"W must be (m, {X.shape[1]}) and b ({W.shape[0]},), got {W.shape} and {b.shape}")
    return X @ W.T + b > 0


def relu_net_patterns(weights, biases, X) -> np.ndarray:
    """Activation patterns of all hidden layers of the ReLU net ``x -> relu(W_L ... relu(W_1 x + b_1) ...)``,
    concatenated: (N, m_1 + ... + m_L). Points with equal patterns lie in the same linear region."""
    x = as_matrix(X)
    if len(weights) != len(biases) or not weights:
        raise ValueError("weights and biases must be equally long, non-empty lists (one per hidden layer)")
    patterns = []
    for W, b in zip(weights, biases, strict=True):
        kappa = activation_patterns(W, b, x)
        patterns.append(kappa)
        x = np.where(kappa, x @ np.asarray(W).T + b, 0.0)
    return np.hstack(patterns)


def count_regions_lp(W, b, box: float = 1e4, tol: float = 1e-7) -> int:
    """Number of regions cut out of R^n by the m hyperplanes ``w_i^T x + b_i = 0``: a sign pattern sigma counts
    when the LP ``max t`` s.t. ``sigma_i (w_i^T x + b_i) >= t``, ``t <= 1``, ``|x|_inf <= box`` has ``t* > tol``."""
    W = as_matrix(W, "W")
    m, n = W.shape
    b = np.asarray(b, dtype=np.float64)
    if b.shape != (m,):
        raise ValueError(f"b must have shape ({m},), got {b.shape}")
    count = 0
    for sigma in itertools.product((-1.0, 1.0), repeat=m):
        sigma = np.array(sigma)
        # variables (x, t): minimise -t subject to -sigma_i (w_i^T x + b_i) + t <= 0
        A = np.hstack([-sigma[:, None] * W, np.ones((m, 1))])
        res = scipy.optimize.linprog(
            np.append(np.zeros(n), -1.0),
            A_ub=A,
            b_ub=sigma * b,
            bounds=[(-box, box)] * n + [(None, 1.0)],
            method="highs",
        )
        count += res.status == 0 and -res.fun > tol
    return count


def zaslavsky_bound(m: int, n: int) -> int:
    """Maximal number of regions of m hyperplanes in R^n: ``sum_{i=0}^{min(n, m)} binom(m, i)``."""
    for name, v in (("m", m), ("n", n)):
        if not isinstance(v, (int, np.integer)) or v < 0:
            raise ValueError(f"{name} must be an int >= 0, got {v!r}")
    return sum(comb(m, i) for i in range(min(n, m) + 1))


def montufar_bound(m: int, n: int, L: int) -> int:
    """Montúfar et al.'s lower bound ``R(m) floor(m/n)^{n (L-1)}`` on the maximal number of linear regions of a
    ReLU net with n inputs and L hidden layers of width m >= n."""
    if not isinstance(L, (int, np.integer)) or L < 1 or not isinstance(m, (int, np.integer)) or m < n:
        raise ValueError(f"need L >= 1 and m >= n, got m={m!r}, n={n!r}, L={L!r}")
    return zaslavsky_bound(m, n) * (m // n) ** (n * (L - 1))


def sawtooth_net(L: int):
    """The width-2 ReLU net that composes the tent map ``t(x) = 2 (x)_+ - 4 (x - 1/2)_+`` L times on [0, 1]."""
    if not isinstance(L, (int, np.integer)) or L < 1:
        raise ValueError(f"L must be a positive int, got {L!r}")

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
    if not b > a or not isinstance(n_grid, (int, np.integer)) or n_grid < 3:
        raise ValueError(f"need a < b and n_grid >= 3, got a={a!r}, b={b!r}, n_grid={n_grid!r}")
    x = np.linspace(a, b, n_grid)
    slopes = np.diff(f(x)) / np.diff(x)
    change = np.abs(np.diff(slopes)) > tol * max(1.0, np.abs(slopes).max())
    breaks = np.count_nonzero(change[1:] & ~change[:-1]) + int(change[0]) if len(change) else 0
    return breaks + 1


def relu_representation(breaks, values) -> tuple[float, float, np.ndarray]:
    """Coefficients of ``g(x) = a x + b + sum_i c_i (x - x_i)_+`` for the piecewise-linear interpolant of the
    points (breaks[k], values[k]) (breaks strictly increasing): a, b from the first piece, c_i = slope jumps."""
    x, v = np.asarray(breaks, dtype=np.float64), np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or x.shape != v.shape or len(x) < 2 or (np.diff(x) <= 0).any():
        raise ValueError("breaks must be strictly increasing, values of the same length, at least 2 points")
    slopes = np.diff(v) / np.diff(x)
    return float(slopes[0]), float(v[0] - slopes[0] * x[0]), np.diff(slopes)


# ----------------------------------------------------------------------------- 2.6 activations


def gelu(z) -> np.ndarray:
    """``z Phi(z) = z P(Z <= z)`` with Z standard normal (the exact GELU)."""
    z = np.asarray(z, dtype=np.float64)
    return z * scipy.special.ndtr(z)


ACTIVATION_DERIVATIVES = {  # name: (phi, phi') in numpy, the lecture's conventions (ReLU'(0) = 1)
    "sigmoid": (sigmoid, lambda z: sigmoid(z) * (1 - sigmoid(z))),
    "tanh": (np.tanh, lambda z: 1 - np.tanh(z) ** 2),
    "relu": (relu, lambda z: (np.asarray(z) >= 0).astype(np.float64)),
    "gelu": (gelu, lambda z: scipy.special.ndtr(z) + z * np.exp(-np.square(z) / 2) / np.sqrt(2 * np.pi)),
    "abs": (np.abs, np.sign),
}
