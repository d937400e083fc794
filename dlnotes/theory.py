"""Chapter 09 — theory of deep learning: the linearised network and the neural tangent kernel, lazy and rich
training, Bayesian inference and posterior sampling (Metropolis-Hastings, HMC, Langevin), Gaussian processes and
infinitely wide networks, statistical learning theory (PAC, VC, Rademacher, bias-variance, double descent,
PAC-Bayes) and the loss landscape (sharpness, mode connectivity, lottery tickets).

Conventions: a data set is X (n, d), one example per row, with targets y (n,); a network seen as a function of
its parameters takes one flat parameter vector theta (P,) (`flat_function`); kernels are Gram matrices
K[i, j] = k(x_i, x_j); noise and prior variances are variances, not standard deviations.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import torch
from numpy.polynomial import legendre
from scipy.linalg import cho_factor, cho_solve, solve_triangular
from scipy.optimize import minimize
from scipy.special import gammaln, logsumexp
from scipy.stats import binom
from sklearn.datasets import make_moons
from sklearn.neural_network import MLPClassifier
from torch import nn
from torch.func import functional_call
from tqdm.auto import tqdm

from .training import accuracy, device, evaluate, make_loader, model_device, to_numpy
from .validation import (
    check_array,
    check_callable,
    check_choice,
    check_int,
    check_labels,
    check_matrix,
    check_number,
    check_positive,
    check_rng,
    check_vector,
)

# ----------------------------------------------------------------------------- tools used by several sections


class FlatFunction(NamedTuple):
    f: Callable[
        [torch.Tensor, torch.Tensor], torch.Tensor
    ]  # f(theta, X): the model's output at parameters theta
    theta0: torch.Tensor  # the model's current parameters as one flat vector (P,), detached


def flat_function(model: nn.Module) -> FlatFunction:
    """The network as a function of one flat parameter vector: ``f(theta, X) = model(X)`` with the parameters
    taken from theta (P,) in the order of ``model.parameters()``, and theta0, the model's parameters now.

    f is differentiable in theta (and X), so ``torch.func.jacrev(f)(theta0, X)`` is the Jacobian (n, ..., P)
    and autograd gives Hessians of any loss of f; the model itself is not changed.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    names, shapes = zip(*[(name, p.shape) for name, p in model.named_parameters()], strict=True)
    sizes = [math.prod(shape) for shape in shapes]
    theta0 = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).clone()

    def f(theta: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
        if theta.shape != theta0.shape:
            raise ValueError(f"theta must have shape {tuple(theta0.shape)}, got {tuple(theta.shape)}")
        pieces = torch.split(theta, sizes)
        params = {
            name: piece.reshape(shape) for name, piece, shape in zip(names, pieces, shapes, strict=True)
        }
        return functional_call(model, params, (X,))

    return FlatFunction(f, theta0)


def _shape_or_type(value) -> str:
    return f"shape {tuple(value.shape)}" if isinstance(value, torch.Tensor) else type(value).__name__


def _check_flat(theta, name: str = "theta") -> torch.Tensor:
    if not isinstance(theta, torch.Tensor) or theta.ndim != 1 or theta.numel() == 0:
        raise TypeError(
            f"{name} must be a non-empty 1-D torch tensor (a flat parameter vector), got {_shape_or_type(theta)}"
        )
    return theta


def hvp(loss: Callable[[torch.Tensor], torch.Tensor], theta: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """The Hessian-vector product :math:`\\nabla^2 L(\\theta)\\,v` of a scalar function ``loss(theta)`` of a flat
    vector theta (P,), by differentiating :math:`\\nabla L(\\theta)^\\top v` once more (two backward passes, never
    the P x P matrix)."""
    check_callable(loss, "loss")
    theta = _check_flat(theta).detach().requires_grad_(True)
    v = _check_flat(v, "v")
    if v.shape != theta.shape:
        raise ValueError(f"v must have the shape of theta {tuple(theta.shape)}, got {tuple(v.shape)}")
    (grad,) = torch.autograd.grad(loss(theta), theta, create_graph=True)
    if not grad.requires_grad:  # the gradient does not depend on theta: the loss is linear, H = 0
        return torch.zeros_like(theta).detach()
    (Hv,) = torch.autograd.grad(grad @ v.to(grad.dtype), theta, allow_unused=True)
    return torch.zeros_like(theta).detach() if Hv is None else Hv.detach()


def hessian_matrix(loss: Callable[[torch.Tensor], torch.Tensor], theta: torch.Tensor) -> torch.Tensor:
    """The full Hessian :math:`\\nabla^2 L(\\theta)` (P, P) of a scalar function of a flat vector (for small P)."""
    check_callable(loss, "loss")
    theta = _check_flat(theta).detach()
    return torch.autograd.functional.hessian(loss, theta)


class PowerIteration(NamedTuple):
    norm: float  # ||A v|| at the last iterate: the largest |eigenvalue| of the symmetric A
    rayleigh: float  # v^T A v: that eigenvalue with its sign, once v has converged to one eigenvector
    vector: np.ndarray  # the last unit iterate v (dim,)
    history: np.ndarray  # ||A v_k|| for k = 1..iters


def power_iteration(matvec: Callable[[np.ndarray], np.ndarray], dim: int, iters: int = 100, rng=None):
    """The largest |eigenvalue| of a symmetric linear map given only through ``matvec(v) = A v`` (e.g. `hvp`):
    :math:`v_{k+1} = A v_k / \\lVert A v_k\\rVert` from a random unit v_0, tracking :math:`\\lVert A v_k\\rVert`.

    ``norm`` converges to :math:`\\max_i|\\lambda_i|` at the rate :math:`|\\lambda_2/\\lambda_1|` per step even
    when A is indefinite with a pair :math:`\\pm\\lambda_{\\max}` (then v itself does not converge and the
    Rayleigh quotient means nothing); ``rayleigh`` is the signed eigenvalue when the largest one is unique.
    Returns a `PowerIteration`.
    """
    check_callable(matvec, "matvec")
    dim = check_int(dim, "dim", 1)
    iters = check_int(iters, "iters", 1)
    rng = check_rng(rng)
    v = rng.standard_normal(dim)
    v /= np.linalg.norm(v)
    history = np.empty(iters)
    for k in range(iters):
        Av = np.asarray(matvec(v), dtype=float)
        if Av.shape != (dim,):
            raise ValueError(f"matvec must return a vector of shape ({dim},), got shape {Av.shape}")
        history[k] = np.linalg.norm(Av)
        if history[k] == 0.0:  # v is in the null space: A = 0 on everything reached so far
            return PowerIteration(0.0, 0.0, v, history[: k + 1])
        rayleigh, v = float(v @ Av), Av / history[k]
    return PowerIteration(float(history[-1]), rayleigh, v, history)


def relu_gaussian_moments(k11, k12, k22) -> tuple[np.ndarray, np.ndarray]:
    """For a centred Gaussian pair (u, u') with variances k11, k22 and covariance k12 (arrays of one shape,
    or broadcastable), the two ReLU expectations every infinite-width computation of the chapter rests on
    (Cho and Saul's arc-cosine kernels of degree 1 and 0), with :math:`\\cos\\psi = k_{12}/\\sqrt{k_{11}k_{22}}`:

    .. math::
        \\mathbb E[\\varphi(u)\\varphi(u')] = \\frac{\\sqrt{k_{11}k_{22}}}{2\\pi}\\big(\\sin\\psi + (\\pi-\\psi)\\cos\\psi\\big),
        \\qquad \\mathbb E[\\varphi'(u)\\varphi'(u')] = \\frac{\\pi-\\psi}{2\\pi},

    :math:`\\varphi(z) = \\max(0, z)`. For :math:`u = w^\\top x`, :math:`u' = w^\\top x'`, :math:`w\\sim\\mathcal N(0, I)`:
    k11 = ||x||^2, k12 = x^T x', k22 = ||x'||^2. Returns the two arrays.
    """
    k11, k12, k22 = (np.asarray(k, dtype=float) for k in (k11, k12, k22))
    for name, k in (("k11", k11), ("k22", k22)):
        if not np.isfinite(k).all() or (k <= 0).any():
            raise ValueError(f"{name} must hold variances > 0, got minimum {k.min()!r}")
    if not np.isfinite(k12).all():
        raise ValueError("k12 must hold finite covariances")
    scale = np.sqrt(k11 * k22)
    cos = k12 / scale
    if (np.abs(cos) > 1 + 1e-9).any():
        raise ValueError(
            f"k12 must satisfy |k12| <= sqrt(k11 k22) (a covariance), got |correlation| {np.abs(cos).max():.6g}"
        )
    psi = np.arccos(np.clip(cos, -1.0, 1.0))
    value = scale * (np.sin(psi) + (np.pi - psi) * np.cos(psi)) / (2 * np.pi)
    return value, (np.pi - psi) / (2 * np.pi)


class Posterior(NamedTuple):
    mean: np.ndarray  # posterior mean of the weights (d,)
    cov: np.ndarray  # posterior covariance (d, d)


def bayes_linreg(X, y, noise_var: float, prior_cov=None) -> Posterior:
    """The posterior of Bayesian linear regression :math:`y = Xw + \\text{noise}`, noise
    :math:`\\mathcal N(0, \\sigma^2 I)`, prior :math:`w\\sim\\mathcal N(0, \\Sigma_p)` (default :math:`I`):

    .. math:: \\Sigma_{\\rm post} = (\\Sigma_p^{-1} + X^\\top X/\\sigma^2)^{-1}, \\qquad
              \\mu_{\\rm post} = \\Sigma_{\\rm post}X^\\top y/\\sigma^2 .

    X (n, d), y (n,), `noise_var` = sigma^2 > 0, `prior_cov` (d, d) symmetric positive definite. Computed from
    the posterior precision by Cholesky solves. Returns a `Posterior` (mean (d,), cov (d, d)).
    """
    X = check_matrix(X, "X")
    n, d = X.shape
    y = np.asarray(y, dtype=float)
    if y.shape != (n,):
        raise ValueError(f"y must have shape ({n},) (one target per row of X), got shape {y.shape}")
    noise_var = check_positive(noise_var, "noise_var")
    prior_cov = np.eye(d) if prior_cov is None else check_matrix(prior_cov, "prior_cov", d, d)
    if not np.allclose(prior_cov, prior_cov.T) or np.linalg.eigvalsh(prior_cov).min() <= 0:
        raise ValueError("prior_cov must be symmetric positive definite")
    precision = np.linalg.inv(prior_cov) + X.T @ X / noise_var
    chol = np.linalg.cholesky(precision)
    cov = np.linalg.solve(chol.T, np.linalg.solve(chol, np.eye(d)))
    cov = (cov + cov.T) / 2
    return Posterior(cov @ X.T @ y / noise_var, cov)


# ----------------------------------------------------------------------------- 9.1 the linearised network and the NTK


NTK_ACTIVATIONS = ("relu", "tanh")


def _ntk_phi(Z: np.ndarray, activation: str) -> tuple[np.ndarray, np.ndarray]:
    """phi(Z) and phi'(Z) of the 2-layer net, elementwise."""
    if activation == "relu":
        return np.maximum(Z, 0.0), (Z > 0).astype(Z.dtype)
    A = np.tanh(Z)
    return A, 1.0 - A * A


def _check_two_layer(X, W, v, name: str = "X") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    W = check_matrix(W, "W")
    m, d = W.shape
    v = check_vector(v, "v", m)
    X = check_matrix(X, name, None, d)
    return X, W, v


class TwoLayerNet(nn.Module):
    """The 2-layer network of 9.1 in NTK parametrisation, :math:`f(x) = \\frac1{\\sqrt m}\\sum_{j=1}^m
    v_j\\,\\varphi(w_j^\\top x)`, with its parameters W (m, d) (row j is w_j) and v (m,) as float64 tensors.

    ``TwoLayerNet(W, v, activation)`` takes the parameters (arrays); `two_layer_net` draws them. The output of
    X (n, d) is (n,). Inputs with a constant coordinate give the units a bias.
    """

    def __init__(self, W, v, activation: str = "relu"):
        super().__init__()
        W = check_matrix(W, "W")
        v = check_vector(v, "v", W.shape[0])
        self.activation = check_choice(activation, "activation", NTK_ACTIVATIONS)
        self.W = nn.Parameter(torch.tensor(W))
        self.v = nn.Parameter(torch.tensor(v))

    def forward(self, X) -> torch.Tensor:
        Z = torch.as_tensor(X, dtype=self.W.dtype) @ self.W.T
        A = torch.relu(Z) if self.activation == "relu" else torch.tanh(Z)
        return A @ self.v / math.sqrt(self.v.shape[0])


def two_layer_net(d: int, m: int, activation: str = "relu", rng=None) -> TwoLayerNet:
    """A `TwoLayerNet` with d inputs and m hidden units at its NTK initialisation: every :math:`w_{jk}` and
    :math:`v_j` drawn from :math:`\\mathcal N(0, 1)` (the :math:`1/\\sqrt m` sits in the forward pass, not in
    the initial weights). Section 9.1."""
    d, m = check_int(d, "d", 1), check_int(m, "m", 1)
    activation = check_choice(activation, "activation", NTK_ACTIVATIONS)
    rng = check_rng(rng)
    return TwoLayerNet(rng.standard_normal((m, d)), rng.standard_normal(m), activation)


def two_layer_output(X, W, v, activation: str = "relu") -> np.ndarray:
    """The output :math:`f(x_i) = \\frac1{\\sqrt m}\\sum_j v_j\\varphi(w_j^\\top x_i)` of the 2-layer net for
    X (n, d), W (m, d), v (m,), in NumPy (the fast path of `TwoLayerNet`); returns (n,). Section 9.1."""
    X, W, v = _check_two_layer(X, W, v)
    activation = check_choice(activation, "activation", NTK_ACTIVATIONS)
    return _ntk_phi(X @ W.T, activation)[0] @ v / math.sqrt(len(v))


def ntk_two_layer(X1, X2, W, v, activation: str = "relu") -> np.ndarray:
    """The empirical NTK of the 2-layer net `TwoLayerNet`, derived by hand (9.1):

    .. math:: k(x, x') = \\frac1m\\sum_{j=1}^m\\Big[\\varphi(w_j^\\top x)\\varphi(w_j^\\top x')
              + v_j^2\\,\\varphi'(w_j^\\top x)\\varphi'(w_j^\\top x')\\,x^\\top x'\\Big],

    the first term from the output weights v, the second from the hidden weights W. X1 (n1, d), X2 (n2, d),
    W (m, d), v (m,); returns the Gram matrix (n1, n2), in O(n1 n2 m) without the (n, P) Jacobian.
    """
    X1, W, v = _check_two_layer(X1, W, v, "X1")
    X2 = check_matrix(X2, "X2", None, W.shape[1])
    activation = check_choice(activation, "activation", NTK_ACTIVATIONS)
    A1, D1 = _ntk_phi(X1 @ W.T, activation)
    A2, D2 = _ntk_phi(X2 @ W.T, activation)
    return (A1 @ A2.T + ((D1 * v**2) @ D2.T) * (X1 @ X2.T)) / len(v)


def _ntk_check_model(f, theta, X, name: str) -> tuple[torch.Tensor, torch.Tensor]:
    check_callable(f, "f")
    theta = _check_flat(theta)
    if not isinstance(X, torch.Tensor):
        X = torch.tensor(check_array(X, name), dtype=theta.dtype)
    if X.ndim < 1 or X.shape[0] == 0:
        raise ValueError(f"{name} must hold one input per row, got shape {tuple(X.shape)}")
    out = f(theta, X)
    if out.shape not in ((X.shape[0],), (X.shape[0], 1)):
        raise ValueError(
            f"f must return one number per input, shape ({X.shape[0]},) or ({X.shape[0]}, 1), got "
            f"{tuple(out.shape)}"
        )
    return theta, X


def tangent_features(f, theta, X) -> np.ndarray:
    """The tangent features :math:`\\Phi` (n, P), row i :math:`\\phi(x_i)^\\top = \\nabla_\\theta f(\\theta)(x_i)^\\top`:
    the Jacobian of a scalar network ``f(theta, X)`` (from `flat_function`) at theta (P,) for X (n, ...), by
    ``torch.func.jacrev``. Section 9.1."""
    theta, X = _ntk_check_model(f, theta, X, "X")
    return to_numpy(torch.func.jacrev(f)(theta, X).reshape(X.shape[0], -1))


def empirical_ntk(f, theta, X1, X2=None) -> np.ndarray:
    """The empirical neural tangent kernel :math:`k_\\theta(x, x') = \\langle\\nabla_\\theta f(\\theta)(x),
    \\nabla_\\theta f(\\theta)(x')\\rangle`, the Gram matrix :math:`K = \\Phi_1\\Phi_2^\\top` (n1, n2) of the
    tangent features of X1 and X2 (X2 = None: X1 with itself, K = \\Phi\\Phi^\\top \\succeq 0), for a scalar
    network ``f(theta, X)`` from `flat_function` at theta (P,). Section 9.1."""
    theta, X1 = _ntk_check_model(f, theta, X1, "X1")
    Phi1 = tangent_features(f, theta, X1)
    Phi2 = Phi1 if X2 is None else tangent_features(f, theta, _ntk_check_model(f, theta, X2, "X2")[1])
    return Phi1 @ Phi2.T


def linearize(f, theta0) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """The linearised network :math:`h(\\beta)(x) = f(\\theta_0)(x) + \\beta^\\top\\nabla_\\theta f(\\theta_0)(x)`,
    :math:`\\beta = \\theta - \\theta_0`: returns ``h(beta, X)`` for beta (P,), computed with one forward-mode
    Jacobian-vector product (``torch.func.jvp``), never the Jacobian. f(theta, X) from `flat_function`,
    theta0 (P,). Section 9.1."""
    check_callable(f, "f")
    theta0 = _check_flat(theta0, "theta0").detach()

    def h(beta: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
        beta = _check_flat(beta, "beta")
        if beta.shape != theta0.shape:
            raise ValueError(
                f"beta must have the shape of theta0 {tuple(theta0.shape)}, got {tuple(beta.shape)}"
            )
        f0, J_beta = torch.func.jvp(lambda theta: f(theta, X), (theta0,), (beta.to(theta0.dtype),))
        return f0 + J_beta

    return h


def _ntk_check_kernel(K, name: str = "K") -> np.ndarray:
    K = check_matrix(K, name)
    if K.shape[0] != K.shape[1] or not np.allclose(K, K.T, rtol=1e-10, atol=1e-12 * np.abs(K).max()):
        raise ValueError(f"{name} must be a symmetric square Gram matrix, got shape {K.shape}")
    return (K + K.T) / 2


def ntk_flow(K, f0, y, t, K_star=None, f0_star=None) -> np.ndarray:
    """Gradient flow of :math:`L = \\frac12\\sum_i(y_i - f_i)^2` with a constant kernel K (n, n):
    :math:`\\dot f = K(y - f)`, so on the training set

    .. math:: f_t = y + e^{-Kt}(f_0 - y),

    and at new points :math:`f_t(x) = f_0(x) + K(x, X)\\,K^{-1}(I - e^{-Kt})(y - f_0)` (the linearised model
    trained for time t; :math:`K^{-1}(I - e^{-Kt})` through the eigendecomposition of K, with the limit t on
    its null space). f0 and y (n,), t >= 0 a number or an array of times (T,); with K_star (n*, n) and
    f0_star (n*,), the outputs at those points. Returns (n,) or (n*,), or (T, n) for an array t. Section 9.1.
    """
    K = _ntk_check_kernel(K)
    n = len(K)
    f0, y = check_vector(f0, "f0", n), check_vector(y, "y", n)
    times = check_array(t, "t", ndim=np.ndim(t))
    if (times < 0).any():
        raise ValueError(f"t must be >= 0, got minimum {times.min()!r}")
    lams, Q = np.linalg.eigh(K)
    lams = np.clip(lams, 0.0, None)
    residual = Q.T @ (y - f0)
    T = times.reshape(-1, 1)
    if K_star is None:
        if f0_star is not None:
            raise ValueError(
                "f0_star needs K_star, the kernel between the new points and the training points"
            )
        out = y - np.exp(-lams * T) * residual @ Q.T
    else:
        K_star = check_matrix(K_star, "K_star", None, n)
        f0_star = check_vector(f0_star, "f0_star", K_star.shape[0])
        small = lams * T < 1e-12
        gain = np.where(small, T, -np.expm1(-lams * T) / np.where(small, 1.0, lams))
        out = f0_star + (gain * residual) @ (K_star @ Q).T
    return out[0] if np.ndim(t) == 0 else out


class KernelRegression(NamedTuple):
    alpha: np.ndarray  # dual coefficients (n,): pinv(K) y_tilde, or (K + ridge I)^-1 y_tilde
    prediction: np.ndarray  # K_star alpha (n*,): the kernel part of the prediction, without the offset f0(x)


def kernel_regression(K, K_star, y_tilde, ridge: float = 0.0) -> KernelRegression:
    """Kernel regression in its dual form: :math:`\\alpha = K^+\\tilde y` (the minimum-norm interpolant) or,
    with ``ridge`` :math:`\\lambda > 0`, :math:`\\alpha = (K + \\lambda I)^{-1}\\tilde y`, and the prediction
    :math:`K_*\\alpha` at new points. For the linearised network :math:`\\tilde y = y - f_0` and the model's
    output is :math:`h(x) = f_0(x) + K(x, X)\\alpha`: add the offset :math:`f_0(x)` yourself.
    K (n, n) symmetric, K_star (n*, n), y_tilde (n,). Returns a `KernelRegression`. Section 9.1."""
    K = _ntk_check_kernel(K)
    n = len(K)
    K_star = check_matrix(K_star, "K_star", None, n)
    y_tilde = check_vector(y_tilde, "y_tilde", n)
    ridge = check_number(ridge, "ridge", 0.0)
    if ridge == 0.0:
        alpha = np.linalg.pinv(K, hermitian=True) @ y_tilde
    else:
        alpha = np.linalg.solve(K + ridge * np.eye(n), y_tilde)
    return KernelRegression(alpha, K_star @ alpha)


class TwoLayerRun(NamedTuple):
    W: np.ndarray  # hidden weights after training (m, d)
    v: np.ndarray  # output weights after training (m,)
    losses: np.ndarray  # L = 1/2 sum_i (y_i - f_i)^2 before each step and after the last (steps + 1,)
    eta: float  # the step size used


def train_two_layer(
    X, y, W, v, steps: int, eta: float | None = None, activation: str = "relu", progress: bool = True
) -> TwoLayerRun:
    """Full-batch gradient descent on :math:`L = \\frac12\\sum_i(y_i - f(\\theta)(x_i))^2` for the 2-layer net
    `TwoLayerNet` from W (m, d), v (m,), with the gradient written out (NumPy, fast for wide nets):

    .. math:: \\nabla_{v_j}L = \\tfrac1{\\sqrt m}\\sum_i r_i\\varphi(w_j^\\top x_i), \\qquad
              \\nabla_{w_j}L = \\tfrac{v_j}{\\sqrt m}\\sum_i r_i\\varphi'(w_j^\\top x_i)\\,x_i, \\qquad r = f - y.

    `eta` None: :math:`1/\\lambda_{\\max}(K_0)`, the largest stable step of the linearised model is
    :math:`2/\\lambda_{\\max}`. X (n, d), y (n,). Returns a `TwoLayerRun`. Section 9.1.
    """
    X, W, v = _check_two_layer(X, W, v)
    y = check_vector(y, "y", len(X))
    steps = check_int(steps, "steps", 0)
    activation = check_choice(activation, "activation", NTK_ACTIVATIONS)
    if eta is None:
        eta = 1.0 / np.linalg.eigvalsh(ntk_two_layer(X, X, W, v, activation))[-1]
    eta = check_positive(eta, "eta")
    scale = 1.0 / math.sqrt(len(v))
    losses = np.empty(steps + 1)
    for k in tqdm(range(steps + 1), desc=f"GD, m = {len(v)}", leave=False, disable=not progress):
        Z = X @ W.T
        A, D = _ntk_phi(Z, activation)
        r = scale * (A @ v) - y
        losses[k] = 0.5 * (r @ r)
        if not np.isfinite(losses[k]) or losses[k] > 1e12 * (1.0 + losses[0]):
            raise FloatingPointError(f"gradient descent diverged at step {k} (eta = {eta:.3g} is too large)")
        if k == steps:
            break
        grad_W = (D.T @ (r[:, None] * X)) * (scale * v)[:, None]
        v = v - eta * scale * (A.T @ r)
        W = W - eta * grad_W
    return TwoLayerRun(W, v, losses, eta)


# ----------------------------------------------------------------------------- 9.1 infinite width, lazy and rich training


def relu_ntk_limit(X1, X2) -> np.ndarray:
    """The infinite-width NTK :math:`k_\\infty` of the 2-layer ReLU net `TwoLayerNet` with
    :math:`w_j\\sim\\mathcal N(0, I)`, :math:`v_j\\sim\\mathcal N(0, 1)` (the limit :math:`m\\to\\infty` of
    `ntk_two_layer`, by the law of large numbers), with :math:`\\psi = \\angle(x, x')`:

    .. math:: k_\\infty(x, x') = \\frac{\\|x\\|\\|x'\\|}{2\\pi}\\big(\\sin\\psi + (\\pi - \\psi)\\cos\\psi\\big)
              + x^\\top x'\\,\\frac{\\pi - \\psi}{2\\pi}
              = \\mathbb E[\\varphi(w^\\top x)\\varphi(w^\\top x')] + \\mathbb E[v^2]\\,
              \\mathbb E[\\varphi'(w^\\top x)\\varphi'(w^\\top x')]\\,x^\\top x'.

    X1 (n1, d), X2 (n2, d), no zero rows; returns (n1, n2). Section 9.1 (continued).
    """
    X1 = check_matrix(X1, "X1")
    X2 = check_matrix(X2, "X2", None, X1.shape[1])
    for name, X in (("X1", X1), ("X2", X2)):
        if (np.linalg.norm(X, axis=1) == 0).any():
            raise ValueError(
                f"{name} must not contain the zero vector (its angle to other inputs is undefined)"
            )
    G = X1 @ X2.T
    value, derivative = relu_gaussian_moments((X1**2).sum(1)[:, None], G, (X2**2).sum(1)[None, :])
    return value + derivative * G


class NTKLimit(NamedTuple):
    ntk: np.ndarray  # Theta^L: the infinite-width NTK (n1, n2)
    nngp: np.ndarray  # Sigma^L: the NNGP kernel, the covariance of the output f at initialisation (n1, n2)


def relu_ntk_deep(X1, X2, depth: int, sigma_w2: float = 2.0, sigma_b2: float = 0.0) -> NTKLimit:
    """The infinite-width NTK of the ReLU net `DeepReLUNet` with L = `depth` layers of weights (L - 1 hidden
    layers; ``depth=2`` has one), by the recursion of Jacot et al. (2018) and Arora et al. (2019):
    :math:`\\Sigma^1(x, x') = \\sigma_w^2 x^\\top x'/d + \\sigma_b^2`, :math:`\\Theta^1 = \\Sigma^1`, and for
    :math:`l = 2, \\dots, L`, with (u, u') centred Gaussian of covariance :math:`\\Sigma^{l-1}` on {x, x'},

    .. math:: \\Sigma^l = \\sigma_w^2\\,\\mathbb E[\\varphi(u)\\varphi(u')] + \\sigma_b^2, \\qquad
              \\dot\\Sigma^l = \\sigma_w^2\\,\\mathbb E[\\varphi'(u)\\varphi'(u')], \\qquad
              \\Theta^l = \\Theta^{l-1}\\,\\dot\\Sigma^l + \\Sigma^l

    (the expectations from `relu_gaussian_moments`); :math:`k_\\infty = \\Theta^L`, and :math:`\\Sigma^L` is the
    NNGP kernel of 9.3 (`relu_nngp`). X1 (n1, d), X2 (n2, d). Returns an `NTKLimit` of two (n1, n2) arrays.
    Section 9.1 (continued).
    """
    X1 = check_matrix(X1, "X1")
    d = X1.shape[1]
    X2 = check_matrix(X2, "X2", None, d)
    depth = check_int(depth, "depth", 1)
    sigma_w2, sigma_b2 = check_positive(sigma_w2, "sigma_w2"), check_number(sigma_b2, "sigma_b2", 0.0)
    s12 = sigma_w2 * X1 @ X2.T / d + sigma_b2  # Sigma^1 between X1 and X2, and on the two diagonals
    s11 = sigma_w2 * (X1**2).sum(1) / d + sigma_b2
    s22 = sigma_w2 * (X2**2).sum(1) / d + sigma_b2
    if depth > 1 and (s11.min() <= 0 or s22.min() <= 0):
        raise ValueError(
            "an input x = 0 with sigma_b2 = 0 has Sigma^1(x, x) = 0: give sigma_b2 > 0 or nonzero inputs"
        )
    theta = s12
    for _ in range(depth - 1):
        value, derivative = relu_gaussian_moments(s11[:, None], s12, s22[None, :])
        s12 = sigma_w2 * value + sigma_b2
        theta = theta * sigma_w2 * derivative + s12
        s11, s22 = sigma_w2 * s11 / 2 + sigma_b2, sigma_w2 * s22 / 2 + sigma_b2  # E phi(u)^2 = var(u)/2
    return NTKLimit(theta, s12)


class DeepReLUNet(nn.Module):
    """A ReLU network in NTK parametrisation with L = `depth` layers of weights (L - 1 hidden layers of width m)
    and one output, :math:`h^1 = \\frac{\\sigma_w}{\\sqrt d}W^1x + \\sigma_b b^1`,
    :math:`h^l = \\frac{\\sigma_w}{\\sqrt m}W^l\\varphi(h^{l-1}) + \\sigma_b b^l`, :math:`f = h^L`, every trained
    parameter (W^l, b^l) drawn from :math:`\\mathcal N(0, 1)` (float64, in the order W^1, b^1, W^2, ...). Its
    NTK tends to `relu_ntk_deep` as m grows. X (n, d) -> (n,). Section 9.1 (continued)."""

    def __init__(self, d: int, m: int, depth: int, sigma_w2: float = 2.0, sigma_b2: float = 0.0, rng=None):
        super().__init__()
        d, m, depth = check_int(d, "d", 1), check_int(m, "m", 1), check_int(depth, "depth", 1)
        self.sigma_w = math.sqrt(check_positive(sigma_w2, "sigma_w2"))
        self.sigma_b = math.sqrt(check_number(sigma_b2, "sigma_b2", 0.0))
        rng = check_rng(rng)
        sizes = [d] + [m] * (depth - 1) + [1]
        weights, biases = [], []
        for fan_in, fan_out in zip(sizes, sizes[1:], strict=False):
            weights.append(nn.Parameter(torch.tensor(rng.standard_normal((fan_out, fan_in)))))
            biases.append(nn.Parameter(torch.tensor(rng.standard_normal(fan_out))))
        self.weights, self.biases = nn.ParameterList(weights), nn.ParameterList(biases)

    def forward(self, X) -> torch.Tensor:
        h = torch.as_tensor(X, dtype=self.weights[0].dtype)
        for layer, (W, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            if layer > 0:
                h = torch.relu(h)
            h = self.sigma_w / math.sqrt(W.shape[1]) * h @ W.T + self.sigma_b * b
        return h[:, 0]


class LazyRun(NamedTuple):
    m: int  # the width
    K0: np.ndarray  # the NTK on the training inputs at initialisation (n, n)
    KT: np.ndarray  # ... after training
    drift: float  # ||K_T - K_0||_F / ||K_0||_F
    losses: np.ndarray  # 1/2 ||y - f||^2 along training (steps + 1,)


def lazy_training(
    X, y, m: int, steps: int, activation: str = "relu", rng=None, progress: bool = True
) -> LazyRun:
    """Draw a `TwoLayerNet` of width m (`two_layer_net`), train it by full-batch gradient descent with step
    :math:`1/\\lambda_{\\max}(K_0)` for `steps` steps (`train_two_layer`) and return its NTK on X before and after,
    with their relative change `kernel_drift`: the measurement of lazy training. X (n, d), y (n,). Returns a
    `LazyRun`. Section 9.1 (continued)."""
    X = check_matrix(X, "X")
    y = check_vector(y, "y", len(X))
    net = two_layer_net(X.shape[1], m, activation, rng)
    W0, v0 = to_numpy(net.W), to_numpy(net.v)
    run = train_two_layer(X, y, W0, v0, steps, activation=activation, progress=progress)
    K0 = ntk_two_layer(X, X, W0, v0, activation)
    KT = ntk_two_layer(X, X, run.W, run.v, activation)
    return LazyRun(net.v.shape[0], K0, KT, kernel_drift(K0, KT), run.losses)


def kernel_drift(K0, KT) -> float:
    """The relative change of a kernel during training, :math:`\\|K_T - K_0\\|_F/\\|K_0\\|_F` (Frobenius norms);
    K0 and KT (n, n). Section 9.1 (continued)."""
    K0 = check_matrix(K0, "K0")
    KT = check_matrix(KT, "KT", *K0.shape)
    return float(np.linalg.norm(KT - K0) / np.linalg.norm(K0))


def kernel_alignment(K, y) -> float:
    """The kernel-target alignment :math:`A(K, y) = \\frac{y^\\top K y}{\\|K\\|_F\\,\\|y\\|^2}` (Cristianini et al., 2002),
    the cosine between the matrices K and :math:`yy^\\top`: 1 when K is a multiple of :math:`yy^\\top`.
    K (n, n), y (n,). Section 9.1 (continued)."""
    K = _ntk_check_kernel(K)
    y = check_vector(y, "y", len(K))
    return float(y @ K @ y / (np.linalg.norm(K) * (y @ y)))


# ----------------------------------------------------------------------------- 9.2 Bayesian inference


def _check_rows(a, name: str, cols: int | None = None) -> np.ndarray:
    """A vector (cols,) or a stack of them (k, cols), as float64."""
    a = check_array(a, name)
    if a.ndim not in (1, 2) or (cols is not None and a.shape[-1] != cols):
        width = "any" if cols is None else cols
        raise ValueError(f"{name} must have shape ({width},) or (k, {width}), got shape {a.shape}")
    return a


def log_likelihood(y, predictions, noise_var: float):
    """The Gaussian log-likelihood of targets y (n,) under outputs :math:`f(\\theta)(X)`, up to its constant:

    .. math:: \\log p(S\\mid\\theta) = -\\frac{\\lVert y - f(\\theta)(X)\\rVert^2}{2\\sigma^2} - \\frac n2\\log(2\\pi\\sigma^2),

    for the model :math:`y_i = f(\\theta)(x_i) + \\eta_i`, :math:`\\eta_i\\sim\\mathcal N(0,\\sigma^2)` (the constant is
    dropped). `predictions` (n,) for one theta, or (k, n) for k of them; `noise_var` = sigma^2. Returns a float or
    (k,). Section 9.2.
    """
    y = check_vector(y, "y")
    predictions = _check_rows(predictions, "predictions", len(y))
    noise_var = check_positive(noise_var, "noise_var")
    value = -0.5 * np.sum((y - predictions) ** 2, axis=-1) / noise_var
    return float(value) if predictions.ndim == 1 else value


def energy(y, predictions, theta, noise_var: float, prior_var):
    """The energy, the negative log posterior up to a constant, of a model with Gaussian noise and prior
    :math:`\\theta\\sim\\mathcal N(0, \\sigma_p^2 I)`:

    .. math:: E(\\theta) = \\frac{\\lVert y - f(\\theta)(X)\\rVert^2}{2\\sigma^2} + \\frac{\\lVert\\theta\\rVert^2}{2\\sigma_p^2},
              \\qquad -\\log p(\\theta\\mid S) = E(\\theta) + c .

    y (n,); `predictions` (n,) or (k, n), the outputs :math:`f(\\theta_j)(X)`; theta (P,) or (k, P), the matching
    parameters; `noise_var` = sigma^2; `prior_var` = sigma_p^2, a number or one variance per parameter (P,) (a
    diagonal :math:`\\Sigma_p`). Returns a float or (k,). Section 9.2.
    """
    predictions = _check_rows(predictions, "predictions")
    theta = _check_rows(theta, "theta")
    if theta.ndim != predictions.ndim or (theta.ndim == 2 and len(theta) != len(predictions)):
        raise ValueError(
            f"theta must hold one parameter vector per row of predictions {predictions.shape}, got shape {theta.shape}"
        )
    prior_var = _check_prior_var(prior_var, theta.shape[-1])
    return -log_likelihood(y, predictions, noise_var) + 0.5 * np.sum(theta**2 / prior_var, axis=-1)


def _check_prior_var(prior_var, P: int):
    if np.ndim(prior_var) == 0:
        return check_positive(prior_var, "prior_var")
    prior_var = check_vector(prior_var, "prior_var", P)
    if (prior_var <= 0).any():
        raise ValueError(f"prior_var must hold variances > 0, got minimum {prior_var.min()!r}")
    return prior_var


def importance_weights(log_target, log_proposal=None) -> np.ndarray:
    """Self-normalised importance weights of draws :math:`\\theta_j` from a proposal q for an unnormalised
    target :math:`\\tilde p`:

    .. math:: w_j = \\frac{\\tilde p(\\theta_j)/q(\\theta_j)}{\\sum_k \\tilde p(\\theta_k)/q(\\theta_k)},

    computed from the logs (k,) after subtracting their maximum, so that no exponential overflows. Without
    `log_proposal` q is flat: the points of a uniform grid (quadrature) or draws from a flat proposal. For draws
    from the prior and the posterior as target, the ratio is the likelihood. Returns w (k,), summing to 1.
    Section 9.2.
    """
    log_target = check_vector(log_target, "log_target")
    a = (
        log_target
        if log_proposal is None
        else log_target - check_vector(log_proposal, "log_proposal", len(log_target))
    )
    w = np.exp(a - a.max())
    return w / w.sum()


class Ensemble(NamedTuple):
    mean: np.ndarray  # (m,) the weighted mean of f(theta_j)(x) at m inputs: the predictive mean
    var: np.ndarray  # (m,) the weighted variance of f(theta_j)(x) (add sigma^2 for a new target y)
    weights: np.ndarray  # (k,) the normalised weights
    ess: float  # the effective sample size 1 / sum_j w_j^2, between 1 and k


def importance_ensemble(outputs, log_target, log_proposal=None) -> Ensemble:
    """Bayesian ensembling: the predictive mean and variance from k weighted parameter vectors,

    .. math:: \\bar f(x) \\approx \\sum_j w_j f(\\theta_j)(x), \\qquad
              \\mathrm{Var}f(x) \\approx \\sum_j w_j \\big(f(\\theta_j)(x) - \\bar f(x)\\big)^2,

    with the `importance_weights` w of `log_target` and `log_proposal` (k,). outputs (k, m): row j holds
    :math:`f(\\theta_j)` at m inputs. On a uniform grid with ``log_target`` = -E and no proposal this is a
    quadrature of the predictive integral; with prior draws, ``log_target`` = -E and ``log_proposal`` the log
    prior, the weights are the likelihoods (self-normalised importance sampling). Returns an `Ensemble`.
    Section 9.2.
    """
    outputs = check_matrix(outputs, "outputs")
    w = importance_weights(log_target, log_proposal)
    if len(w) != len(outputs):
        raise ValueError(f"outputs must have one row per weight ({len(w)}), got shape {outputs.shape}")
    mean = w @ outputs
    var = w @ (outputs - mean) ** 2
    return Ensemble(mean, var, w, float(1.0 / np.sum(w**2)))


class Calibration(NamedTuple):
    ece: float  # sum_b |B_b|/n |accuracy(B_b) - confidence(B_b)|
    confidence: np.ndarray  # (bins,) mean confidence in each bin (NaN where empty)
    accuracy: np.ndarray  # (bins,) fraction correct in each bin (NaN where empty)
    counts: np.ndarray  # (bins,) number of predictions in each bin


def expected_calibration_error(probs, y, bins: int = 10) -> Calibration:
    """The expected calibration error of a classifier (Guo et al., 2017): sort the predictions by their
    confidence :math:`\\hat p_i = \\max_k p_{ik}` into equal-width bins :math:`B_b = ((b-1)/M, b/M]` and average
    the gap between accuracy and confidence,

    .. math:: \\mathrm{ECE} = \\sum_{b=1}^M \\frac{|B_b|}{n}\\,\\big|\\mathrm{acc}(B_b) - \\mathrm{conf}(B_b)\\big| .

    probs (n, K) class probabilities (rows sum to 1), y (n,) labels in 0..K-1, `bins` = M. Returns a
    `Calibration` (the reliability diagram is accuracy against confidence per bin). Section 9.2.
    """
    probs = check_matrix(probs, "probs")
    n, K = probs.shape
    if (probs < 0).any() or not np.allclose(probs.sum(axis=1), 1.0, atol=1e-6):
        raise ValueError("probs must hold probabilities: rows of non-negative numbers that sum to 1")
    y = check_labels(y, "y", n, n_classes=K)
    bins = check_int(bins, "bins", 1)
    confidence = probs.max(axis=1)
    correct = (probs.argmax(axis=1) == y).astype(float)
    index = np.clip(np.ceil(confidence * bins).astype(int) - 1, 0, bins - 1)
    counts = np.bincount(index, minlength=bins)
    with np.errstate(invalid="ignore"):
        conf_b = np.bincount(index, confidence, bins) / counts
        acc_b = np.bincount(index, correct, bins) / counts
    gaps = np.where(counts > 0, np.abs(acc_b - conf_b), 0.0)
    return Calibration(float(np.sum(counts / n * gaps)), conf_b, acc_b, counts)


# ----------------------------------------------------------------------------- 9.2 sampling the posterior: Metropolis-Hastings, HMC, Langevin


def mh_accept_prob(log_p_new, log_p_old, log_q_forward=0.0, log_q_backward=0.0) -> np.ndarray:
    """The Metropolis-Hastings acceptance probability of a move from theta to theta' drawn from the proposal
    :math:`\\tilde\\Pi(\\theta'\\mid\\theta)`:

    .. math:: \\alpha = \\min\\Big\\{1, \\frac{p(\\theta'\\mid S)\\,\\tilde\\Pi(\\theta\\mid\\theta')}
              {p(\\theta\\mid S)\\,\\tilde\\Pi(\\theta'\\mid\\theta)}\\Big\\},

    from the logs (arrays of one shape, or broadcastable): ``log_p_new`` = log p(theta'|S), ``log_p_old`` =
    log p(theta|S) (either up to the same constant: p(S) cancels), ``log_q_forward`` = log Pi~(theta'|theta),
    ``log_q_backward`` = log Pi~(theta|theta') (both 0 for a symmetric proposal). ``log_p_new`` may be -inf (a
    move to where the target vanishes: alpha = 0). Returns alpha. Section 9.2.
    """
    arrays = []
    for name, a in (
        ("log_p_new", log_p_new),
        ("log_p_old", log_p_old),
        ("log_q_forward", log_q_forward),
        ("log_q_backward", log_q_backward),
    ):
        a = check_array(a, name, finite=False)
        if np.isnan(a).any() or (name != "log_p_new" and np.isinf(a).any()):
            what = "finite numbers" if name != "log_p_new" else "numbers or -inf"
            raise ValueError(f"{name} must hold {what}, got NaN or infinity")
        arrays.append(a)
    new, old, forward, backward = arrays
    if (new == np.inf).any():
        raise ValueError("log_p_new must hold numbers or -inf, got +inf")
    return np.exp(np.minimum(0.0, new - old + backward - forward))


def mh_transition_matrix(target, proposal) -> np.ndarray:
    """The Metropolis-Hastings kernel on k states: propose j from row i of `proposal` (k, k) (row i is
    :math:`\\tilde\\Pi(\\cdot\\mid i)`), accept with `mh_accept_prob`, otherwise stay:

    .. math:: \\Pi(j\\mid i) = \\tilde\\Pi(j\\mid i)\\min\\Big\\{1,\\frac{q_j\\tilde\\Pi(i\\mid j)}{q_i\\tilde\\Pi(j\\mid i)}\\Big\\}
              \\ (j\\ne i),\\qquad \\Pi(i\\mid i) = 1 - \\sum_{j\\ne i}\\Pi(j\\mid i) .

    `target` (k,) the probabilities q (> 0; normalised or not). The proposal must be symmetric in its support
    (Pi~(j|i) > 0 exactly where Pi~(i|j) > 0). Returns Pi (k, k), rows summing to 1; it satisfies detailed
    balance :math:`q_i\\Pi(j\\mid i) = q_j\\Pi(i\\mid j)`. Section 9.2.
    """
    target = check_vector(target, "target")
    k = len(target)
    if (target <= 0).any():
        raise ValueError(f"target must hold probabilities > 0, got minimum {target.min()!r}")
    proposal = check_matrix(proposal, "proposal", k, k)
    if (proposal < 0).any() or not np.allclose(proposal.sum(axis=1), 1.0):
        raise ValueError("proposal must be a transition matrix: non-negative rows that sum to 1")
    if not np.array_equal(proposal > 0, proposal.T > 0):
        raise ValueError("proposal must allow the move back: Pi~(j|i) > 0 exactly where Pi~(i|j) > 0")
    support = proposal > 0
    log_q = np.log(np.where(support, proposal, 1.0))
    log_target = np.log(target)
    alpha = mh_accept_prob(log_target[None, :], log_target[:, None], log_q, log_q.T)
    kernel = np.where(support, proposal * alpha, 0.0)
    np.fill_diagonal(kernel, 0.0)
    np.fill_diagonal(kernel, 1.0 - kernel.sum(axis=1))
    return kernel


def _check_chains(theta0, name: str = "theta0") -> np.ndarray:
    theta = check_array(theta0, name)
    if theta.ndim != 2:
        raise ValueError(
            f"{name} must have shape (chains, d), one starting point per row, got shape {theta.shape}"
        )
    return theta


def _call_log_p(log_p, theta: np.ndarray) -> np.ndarray:
    value = np.asarray(log_p(theta), dtype=float)
    if value.shape != (len(theta),):
        raise ValueError(
            f"log_p must map parameters (chains, d) to one log density per chain ({len(theta)},), "
            f"got shape {value.shape}"
        )
    return value


class Chain(NamedTuple):
    samples: np.ndarray  # (steps, chains, d): the state of every chain after each step
    accept_rate: np.ndarray  # (chains,): the fraction of accepted proposals of each chain


def metropolis_hastings(
    log_p, theta0, steps: int, step_size: float, rng=None, progress: bool = True
) -> Chain:
    """Random-walk Metropolis-Hastings (Metropolis et al., 1953; Hastings, 1970) for many chains at once:
    propose :math:`\\theta' = \\theta + s\\,\\xi`, :math:`\\xi\\sim\\mathcal N(0, I)`, and accept with probability
    :math:`\\min\\{1, p(\\theta'\\mid S)/p(\\theta\\mid S)\\}` (the proposal is symmetric, so the Hastings terms
    cancel; so does p(S)).

    `log_p` maps (chains, d) to (chains,), any unnormalised log target (e.g. -E); theta0 (chains, d) the
    starting points; `steps` proposals per chain; `step_size` = s, the proposal's standard deviation. Returns a
    `Chain` (samples (steps, chains, d), accept_rate (chains,)). Section 9.2.
    """
    check_callable(log_p, "log_p")
    theta = _check_chains(theta0)
    steps = check_int(steps, "steps", 1)
    step_size = check_positive(step_size, "step_size")
    rng = check_rng(rng)
    lp = _call_log_p(log_p, theta)
    samples = np.empty((steps, *theta.shape))
    accepted = np.zeros(len(theta))
    for t in tqdm(range(steps), desc="MH steps", leave=False, disable=not progress):
        proposal = theta + step_size * rng.standard_normal(theta.shape)
        lp_new = _call_log_p(log_p, proposal)
        accept = rng.random(len(theta)) < mh_accept_prob(lp_new, lp)
        theta = np.where(accept[:, None], proposal, theta)
        lp = np.where(accept, lp_new, lp)
        accepted += accept
        samples[t] = theta
    return Chain(samples, accepted / steps)


class PhasePoint(NamedTuple):
    theta: np.ndarray  # position, the shape of the input theta
    v: np.ndarray  # momentum, the same shape


def _phase_arguments(grad_log_p, theta, v, eta, L):
    check_callable(grad_log_p, "grad_log_p")
    theta = check_array(theta, "theta")
    v = check_array(v, "v", theta.shape)
    return theta, v, check_positive(eta, "eta"), check_int(L, "L", 1)


def _grad(grad_log_p, theta: np.ndarray) -> np.ndarray:
    g = np.asarray(grad_log_p(theta), dtype=float)
    if g.shape != theta.shape:
        raise ValueError(f"grad_log_p must return the shape of theta {theta.shape}, got shape {g.shape}")
    return g


def leapfrog(grad_log_p, theta, v, eta: float, L: int) -> PhasePoint:
    """L leapfrog steps of Hamilton's equations :math:`\\dot\\theta = M^{-1}v`, :math:`\\dot v = -\\nabla E`
    for :math:`\\mathcal H(\\theta, v) = E(\\theta) + \\frac12 v^\\top M^{-1}v`, :math:`E = -\\log p`, with M = I:

    .. math:: v \\leftarrow v - \\tfrac\\eta2\\nabla E(\\theta),\\quad \\theta\\leftarrow\\theta + \\eta v,\\quad
              v\\leftarrow v - \\tfrac\\eta2\\nabla E(\\theta) .

    Reversible (flip v, integrate again, flip back: the start) and volume-preserving; the energy error after a
    trajectory of fixed length :math:`L\\eta` is :math:`O(\\eta^2)`. `grad_log_p` maps theta to
    :math:`\\nabla\\log p(\\theta) = -\\nabla E(\\theta)` (same shape); theta and v (d,) or (chains, d). Returns
    the `PhasePoint` after L steps. Section 9.2.
    """
    theta, v, eta, L = _phase_arguments(grad_log_p, theta, v, eta, L)
    v = v + 0.5 * eta * _grad(grad_log_p, theta)
    for step in range(L):
        theta = theta + eta * v
        g = _grad(grad_log_p, theta)
        v = v + (eta if step < L - 1 else 0.5 * eta) * g
    return PhasePoint(theta, v)


def euler_hamiltonian(grad_log_p, theta, v, eta: float, L: int) -> PhasePoint:
    """L explicit Euler steps of Hamilton's equations (M = I), the integrator of one lecture sheet:

    .. math:: \\theta_{t+1} = \\theta_t + \\eta v_t,\\qquad v_{t+1} = v_t - \\eta\\nabla E(\\theta_t) .

    Neither reversible nor volume-preserving: on a quadratic E each step multiplies the phase-space volume by
    :math:`\\det = 1 + \\eta^2\\lambda > 1` per eigenvalue, and the energy error is :math:`O(\\eta)`. Arguments as
    in `leapfrog`; returns the `PhasePoint` after L steps. Section 9.2.
    """
    theta, v, eta, L = _phase_arguments(grad_log_p, theta, v, eta, L)
    for _ in range(L):
        theta, v = theta + eta * v, v + eta * _grad(grad_log_p, theta)
    return PhasePoint(theta, v)


class HMCChain(NamedTuple):
    samples: np.ndarray  # (steps, chains, d): the state of every chain after each step
    accept_rate: np.ndarray  # (chains,): the fraction of accepted trajectories
    delta_H: np.ndarray  # (steps, chains): H(end) - H(start) of every proposed trajectory


def hmc(
    log_p, grad_log_p, theta0, steps: int, eta: float, L: int, rng=None, progress: bool = True
) -> HMCChain:
    """Hamiltonian Monte Carlo (Duane et al., 1987; Neal, 2011) for many chains at once: draw a momentum
    :math:`v\\sim\\mathcal N(0, I)`, run L `leapfrog` steps of size eta from :math:`(\\theta, v)` to
    :math:`(\\theta', v')`, accept with probability :math:`\\min\\{1, e^{-\\Delta\\mathcal H}\\}`,

    .. math:: \\Delta\\mathcal H = \\mathcal H(\\theta', v') - \\mathcal H(\\theta, v),\\qquad
              \\mathcal H(\\theta, v) = -\\log p(\\theta) + \\tfrac12\\lVert v\\rVert^2 .

    `log_p` maps (chains, d) to (chains,); `grad_log_p` maps (chains, d) to its gradient (chains, d); theta0
    (chains, d). A trajectory that diverges (non-finite H) is rejected. Returns an `HMCChain`. Section 9.2.
    """
    check_callable(log_p, "log_p")
    check_callable(grad_log_p, "grad_log_p")
    theta = _check_chains(theta0)
    steps = check_int(steps, "steps", 1)
    eta, L = check_positive(eta, "eta"), check_int(L, "L", 1)
    rng = check_rng(rng)
    lp = _call_log_p(log_p, theta)
    samples = np.empty((steps, *theta.shape))
    delta_H = np.empty((steps, len(theta)))
    accepted = np.zeros(len(theta))
    for t in tqdm(range(steps), desc="HMC steps", leave=False, disable=not progress):
        v = rng.standard_normal(theta.shape)
        with np.errstate(all="ignore"):
            end = leapfrog(grad_log_p, theta, v, eta, L)
            lp_new = _call_log_p(log_p, end.theta)
            dH = (-lp_new + 0.5 * np.sum(end.v**2, axis=1)) - (-lp + 0.5 * np.sum(v**2, axis=1))
        dH = np.where(np.isfinite(dH), dH, np.inf)
        accept = rng.random(len(theta)) < np.exp(np.minimum(0.0, -dH))
        theta = np.where(accept[:, None], end.theta, theta)
        lp = np.where(accept, lp_new, lp)
        accepted += accept
        samples[t], delta_H[t] = theta, dH
    return HMCChain(samples, accepted / steps, delta_H)


class LangevinChain(NamedTuple):
    samples: np.ndarray  # (kept, chains, d): the iterates after burn-in, every thin-th
    steps: np.ndarray  # (kept,): the step number (1-based) of each kept iterate


def sgld(
    grad_energy_batch,
    theta0,
    steps: int,
    eta: float,
    batch_size: int,
    n: int,
    *,
    temperature: float = 1.0,
    friction: float | None = None,
    burn_in: int = 0,
    thin: int = 1,
    rng=None,
    progress: bool = True,
) -> LangevinChain:
    """Stochastic-gradient Langevin dynamics (Welling and Teh, 2011) for many chains at once. Overdamped
    (default):

    .. math:: \\theta_{t+1} = \\theta_t - \\eta\\nabla\\hat E(\\theta_t) + \\sqrt{2\\eta T}\\,\\xi_t,\\qquad
              \\hat E(\\theta) = \\frac n{|B|}\\sum_{i\\in B}\\ell_i(\\theta) + \\frac{\\lVert\\theta\\rVert^2}{2\\sigma_p^2},

    :math:`\\xi_t\\sim\\mathcal N(0, I)`, :math:`\\ell_i = (y_i - f(\\theta)(x_i))^2/2\\sigma^2`, an unbiased
    estimate of E from a minibatch B; with `friction` :math:`\\gamma` the underdamped form (v starts at 0)

    .. math:: v_{t+1} = (1 - \\eta\\gamma)v_t - \\eta\\nabla\\hat E(\\theta_t) + \\sqrt{2\\gamma\\eta T}\\,\\xi_t,\\qquad
              \\theta_{t+1} = \\theta_t + \\eta v_{t+1} .

    ``grad_energy_batch(theta, idx)`` returns :math:`\\nabla\\hat E` (chains, d) at theta (chains, d) for the
    minibatches idx (chains, batch_size) (integer indices into the n examples, one minibatch per chain). Each
    chain draws its minibatches without replacement: a fresh random order of the n examples every epoch, cut
    into n // batch_size batches. T = `temperature` (1: the posterior; 0: plain SGD, no noise). The iterates
    after `burn_in` steps are kept, every `thin`-th. Returns a `LangevinChain`. Section 9.2.
    """
    check_callable(grad_energy_batch, "grad_energy_batch")
    theta = _check_chains(theta0)
    steps = check_int(steps, "steps", 1)
    eta = check_positive(eta, "eta")
    n = check_int(n, "n", 1)
    batch_size = check_int(batch_size, "batch_size", 1, n)
    temperature = check_number(temperature, "temperature", 0)
    if friction is not None:
        friction = check_number(friction, "friction", 0, 1 / eta, low_open=True)
    burn_in = check_int(burn_in, "burn_in", 0, steps - 1)
    thin = check_int(thin, "thin", 1)
    rng = check_rng(rng)
    chains = len(theta)
    kept_steps = np.arange(burn_in + 1, steps + 1)[::thin]
    samples = np.empty((len(kept_steps), *theta.shape))
    per_epoch = n // batch_size
    v = np.zeros_like(theta)
    kept = 0
    for t in tqdm(range(steps), desc="Langevin steps", leave=False, disable=not progress):
        if t % per_epoch == 0:
            order = np.argsort(rng.random((chains, n)), axis=1)
        b = t % per_epoch
        idx = order[:, b * batch_size : (b + 1) * batch_size]
        g = np.asarray(grad_energy_batch(theta, idx), dtype=float)
        if g.shape != theta.shape:
            raise ValueError(
                f"grad_energy_batch must return the shape of theta {theta.shape}, got shape {g.shape}"
            )
        noise = rng.standard_normal(theta.shape)
        if friction is None:
            theta = theta - eta * g + np.sqrt(2 * eta * temperature) * noise
        else:
            v = (1 - eta * friction) * v - eta * g + np.sqrt(2 * friction * eta * temperature) * noise
            theta = theta + eta * v
        if kept < len(kept_steps) and t + 1 == kept_steps[kept]:
            samples[kept] = theta
            kept += 1
    return LangevinChain(samples, kept_steps)


def _split_tanh_mlp(theta: np.ndarray, d: int, width: int):
    m = width
    W = theta[:, : m * d].reshape(len(theta), m, d)
    return W, theta[:, m * d : m * d + m], theta[:, m * d + m : m * d + 2 * m], theta[:, -1]


def _tanh_hidden(X, W, b) -> np.ndarray:
    """Hidden activations tanh(W x + b) of k networks: X (k, n, d) or (n, d), W (k, m, d), b (k, m) -> (k, n, m)."""
    subscripts = "knd,kmd->knm" if X.ndim == 3 else "nd,kmd->knm"
    return np.tanh(np.einsum(subscripts, X, W) + b[:, None, :])


def _tanh_backward(X, A, v, g) -> np.ndarray:
    """The gradient of sum_i g_i f(theta)(x_i) for k tanh networks in the flat layout of `tanh_mlp`:
    X (k, n, d), hidden activations A (k, n, m), output weights v (k, m), g (k, n) -> (k, P)."""
    dZ = g[:, :, None] * v[:, None, :] * (1 - A**2)  # back through the output layer and tanh
    return np.concatenate(
        [
            np.einsum("knm,knd->kmd", dZ, X).reshape(len(A), -1),
            dZ.sum(axis=1),
            np.einsum("kn,knm->km", g, A),
            g.sum(axis=1, keepdims=True),
        ],
        axis=1,
    )


def _check_tanh_mlp(theta, d: int, width: int) -> tuple[np.ndarray, int]:
    width = check_int(width, "width", 1)
    P = width * (d + 2) + 1
    theta = check_array(theta, "theta")
    if theta.ndim != 2 or theta.shape[1] != P:
        raise ValueError(
            f"theta must have shape (k, {P}): k flat parameter vectors of a width-{width} network on {d} inputs, "
            f"got shape {theta.shape}"
        )
    return theta, width


def tanh_mlp(X, theta, width: int) -> np.ndarray:
    """A network with one hidden layer of `width` tanh units and one output, for k parameter vectors at once:

    .. math:: f(\\theta)(x) = \\sum_{j=1}^m v_j\\tanh(w_j^\\top x + b_j) + c,

    theta (k, P), :math:`P = m(d + 2) + 1`, laid out as W (m, d) row by row, b (m,), v (m,), c: the order of
    ``flat_function(nn.Sequential(nn.Linear(d, m), nn.Tanh(), nn.Linear(m, 1)))``. X (n, d). Returns the
    outputs (k, n). Plain numpy, vectorised over the k networks (fast enough for thousands of Langevin steps).
    Section 9.2.
    """
    X = check_matrix(X, "X")
    theta, width = _check_tanh_mlp(theta, X.shape[1], width)
    W, b, v, c = _split_tanh_mlp(theta, X.shape[1], width)
    return np.einsum("knm,km->kn", _tanh_hidden(X, W, b), v) + c[:, None]


def tanh_mlp_grad_energy(X, y, width: int, noise_var: float, prior_var):
    """The minibatch energy gradient of `tanh_mlp` for `sgld`: a function ``grad_energy_batch(theta, idx)``
    that returns, for parameters theta (chains, P) and minibatches idx (chains, B) of the n examples,

    .. math:: \\nabla_\\theta\\Big[\\frac n B\\sum_{i\\in B}\\frac{(y_i - f(\\theta)(x_i))^2}{2\\sigma^2}
              + \\sum_k\\frac{\\theta_k^2}{2\\sigma_{p,k}^2}\\Big]

    (chains, P), by backpropagation written out in numpy. X (n, d), y (n,); `noise_var` = sigma^2;
    `prior_var` a number or one prior variance per parameter (P,). Section 9.2.
    """
    X = check_matrix(X, "X")
    n, d = X.shape
    y = check_vector(y, "y", n)
    width = check_int(width, "width", 1)
    noise_var = check_positive(noise_var, "noise_var")
    prior_var = _check_prior_var(prior_var, width * (d + 2) + 1)

    def grad_energy_batch(theta, idx):
        theta, _ = _check_tanh_mlp(theta, d, width)
        idx = np.asarray(idx)
        W, b, v, c = _split_tanh_mlp(theta, d, width)
        X_b = X[idx]  # (chains, B, d)
        A = _tanh_hidden(X_b, W, b)
        g = (n / idx.shape[1]) * (np.einsum("kbm,km->kb", A, v) + c[:, None] - y[idx]) / noise_var
        return _tanh_backward(X_b, A, v, g) + theta / prior_var

    return grad_energy_batch


# ----------------------------------------------------------------------------- 9.3 Gaussian processes and infinitely wide networks


def rbf_kernel(X1, X2, lengthscale: float = 1.0) -> np.ndarray:
    """The RBF (squared-exponential) kernel, unit variance:
    :math:`k(x, x') = e^{-\\|x - x'\\|^2/(2\\ell^2)} = e^{-\\gamma\\|x - x'\\|^2}`, :math:`\\gamma = 1/(2\\ell^2)`.

    X1 (n1, d), X2 (n2, d), `lengthscale` ell > 0. Returns the Gram matrix K (n1, n2), K[i, j] = k(x1_i, x2_j).
    Section 9.3.
    """
    X1 = check_matrix(X1, "X1")
    X2 = check_matrix(X2, "X2", cols=X1.shape[1])
    lengthscale = check_positive(lengthscale, "lengthscale")
    sq = (X1**2).sum(1)[:, None] + (X2**2).sum(1)[None, :] - 2 * X1 @ X2.T
    return np.exp(-np.maximum(sq, 0.0) / (2 * lengthscale**2))


def linear_kernel(X1, X2, prior_cov=None) -> np.ndarray:
    """The linear kernel :math:`k(x, x') = x^\\top\\Sigma_p x'` of the model :math:`f(x) = w^\\top x`,
    :math:`w\\sim\\mathcal N(0, \\Sigma_p)` (default :math:`\\Sigma_p = I`, the kernel :math:`x^\\top x'`).

    X1 (n1, d), X2 (n2, d), `prior_cov` (d, d) symmetric positive semi-definite. Returns K (n1, n2). Section 9.3.
    """
    X1 = check_matrix(X1, "X1")
    d = X1.shape[1]
    X2 = check_matrix(X2, "X2", cols=d)
    if prior_cov is None:
        return X1 @ X2.T
    prior_cov = check_matrix(prior_cov, "prior_cov", d, d)
    if not np.allclose(prior_cov, prior_cov.T) or np.linalg.eigvalsh(prior_cov).min() < -1e-12:
        raise ValueError("prior_cov must be symmetric positive semi-definite")
    return X1 @ prior_cov @ X2.T


def _check_covariance(K, name: str, n: int | None = None) -> np.ndarray:
    K = check_matrix(K, name, n, n)
    if K.shape[0] != K.shape[1]:
        raise ValueError(f"{name} must be a square matrix, got shape {K.shape}")
    if not np.allclose(K, K.T, rtol=1e-10, atol=1e-12):
        raise ValueError(f"{name} must be symmetric (a covariance matrix)")
    return K


def gp_prior_samples(K, draws: int, rng=None, jitter: float = 1e-8) -> np.ndarray:
    """Draws from the Gaussian-process prior at N inputs, :math:`f\\sim\\mathcal N(0, K)`:
    :math:`f = Lz`, :math:`z\\sim\\mathcal N(0, I)`, with the Cholesky factor :math:`LL^\\top = K + \\text{jitter}\\,I`
    (the jitter makes a singular K, e.g. a linear kernel on more inputs than dimensions, factorisable).

    K (N, N) symmetric positive semi-definite. Returns F (draws, N), one draw per row. Section 9.3.
    """
    K = _check_covariance(K, "K")
    draws = check_int(draws, "draws", 1)
    jitter = check_number(jitter, "jitter", 0)
    rng = check_rng(rng)
    try:
        L = np.linalg.cholesky(K + jitter * np.eye(len(K)))
    except np.linalg.LinAlgError:
        raise ValueError(
            f"K + jitter I is not positive definite (jitter = {jitter:g}): K must be a covariance matrix; "
            "a larger jitter helps a singular one"
        ) from None
    return rng.standard_normal((draws, len(K))) @ L.T


class Conditional(NamedTuple):
    mean: np.ndarray  # mu_{B|A} (n_B,): the conditional mean of the unobserved coordinates
    cov: np.ndarray  # Sigma_{B|A} (n_B, n_B): their conditional covariance
    idx: np.ndarray  # B (n_B,): the unobserved indices, in increasing order


def condition_gaussian(mu, Sigma, idx_observed, x_observed) -> Conditional:
    """Condition :math:`x\\sim\\mathcal N(\\mu, \\Sigma)` on the observed coordinates :math:`x_A`:

    .. math:: \\mu_{B|A} = \\mu_B + \\Sigma_{BA}\\Sigma_{AA}^{-1}(x_A - \\mu_A), \\qquad
              \\Sigma_{B|A} = \\Sigma_{BB} - \\Sigma_{BA}\\Sigma_{AA}^{-1}\\Sigma_{AB}.

    mu (N,), Sigma (N, N) symmetric with :math:`\\Sigma_{AA}` positive definite, `idx_observed` the indices A
    (distinct), `x_observed` (len(A),) their values. B are the other indices, in increasing order. Solves with
    the Cholesky factor of :math:`\\Sigma_{AA}`. Returns a `Conditional` (mean, cov, idx). Section 9.3.
    """
    mu = check_vector(mu, "mu")
    N = len(mu)
    Sigma = _check_covariance(Sigma, "Sigma", N)
    idx_A = np.asarray(idx_observed)
    if idx_A.ndim != 1 or idx_A.size == 0 or not np.issubdtype(idx_A.dtype, np.integer):
        raise TypeError(f"idx_observed must be a non-empty 1-D array of int indices, got {idx_observed!r}")
    if len(np.unique(idx_A)) != len(idx_A) or idx_A.min() < 0 or idx_A.max() >= N or len(idx_A) >= N:
        raise ValueError(
            f"idx_observed must hold distinct indices in 0..{N - 1}, fewer than {N}, got {idx_A.tolist()}"
        )
    x_A = check_vector(x_observed, "x_observed", len(idx_A))
    idx_B = np.setdiff1d(np.arange(N), idx_A)
    S_AA, S_BA = Sigma[np.ix_(idx_A, idx_A)], Sigma[np.ix_(idx_B, idx_A)]
    try:
        chol = cho_factor(S_AA, lower=True)
    except np.linalg.LinAlgError:
        raise ValueError("Sigma_AA (the observed block of Sigma) must be positive definite") from None
    mean = mu[idx_B] + S_BA @ cho_solve(chol, x_A - mu[idx_A])
    cov = Sigma[np.ix_(idx_B, idx_B)] - S_BA @ cho_solve(chol, S_BA.T)
    return Conditional(mean, (cov + cov.T) / 2, idx_B)


class GPPosterior(NamedTuple):
    mean: np.ndarray  # posterior mean of f at the test inputs (n_*,)
    var: np.ndarray  # posterior variance of the latent f (n_*,), without the noise variance


def gp_posterior(K, K_star, k_star_star, y, noise_var: float) -> GPPosterior:
    """Gaussian-process regression: the posterior of the latent :math:`f(x_*)` given noisy targets
    :math:`y = f(X) + \\text{noise}`, noise :math:`\\mathcal N(0, \\sigma^2 I)`:

    .. math:: \\bar f_* = k_*^\\top(K + \\sigma^2 I)^{-1}y, \\qquad
              \\mathrm{var}f_* = k(x_*, x_*) - k_*^\\top(K + \\sigma^2 I)^{-1}k_* .

    K (n, n) the Gram matrix of the training inputs, K_star (n_*, n) with K_star[i, j] = k(x*_i, x_j),
    `k_star_star` (n_*,) the prior variances k(x*_i, x*_i), y (n,), `noise_var` sigma^2 >= 0. Add sigma^2 to
    `var` for the predictive variance of a new noisy target y_*. With sigma^2 > 0 by a Cholesky factorisation;
    sigma^2 = 0 is the noise-free limit, with the pseudo-inverse :math:`K^+` (eigenvalues below
    :math:`10^{-10}\\lambda_{\\max}` count as 0). Variances are clipped at 0 (rounding). Returns a `GPPosterior`.
    Section 9.3.
    """
    K = _check_covariance(K, "K")
    n = len(K)
    K_star = check_matrix(K_star, "K_star", cols=n)
    k_star_star = check_vector(k_star_star, "k_star_star", len(K_star))
    y = check_vector(y, "y", n)
    noise_var = check_number(noise_var, "noise_var", 0)
    if noise_var == 0:
        lams, V = np.linalg.eigh(K)
        keep = lams > 1e-10 * max(lams.max(), 0.0)
        K_plus = (V[:, keep] / lams[keep]) @ V[:, keep].T
        mean = K_star @ K_plus @ y
        var = k_star_star - np.einsum("ij,jk,ik->i", K_star, K_plus, K_star)
        return GPPosterior(mean, np.maximum(var, 0.0))
    try:
        L = np.linalg.cholesky(K + noise_var * np.eye(n))
    except np.linalg.LinAlgError:
        raise ValueError("K + noise_var I must be positive definite: K must be a covariance matrix") from None
    alpha = cho_solve((L, True), y)
    V = solve_triangular(L, K_star.T, lower=True)  # (n, n_*): k_*^T (K + s^2 I)^{-1} k_* = ||V[:, i]||^2
    return GPPosterior(K_star @ alpha, np.maximum(k_star_star - (V**2).sum(axis=0), 0.0))


def gp_log_marginal_likelihood(K, y, noise_var: float) -> float:
    """The log marginal likelihood (evidence) of GP regression, :math:`y\\sim\\mathcal N(0, K + \\sigma^2 I)`:

    .. math:: \\log p(y) = -\\tfrac12 y^\\top(K + \\sigma^2 I)^{-1}y - \\tfrac12\\log\\det(K + \\sigma^2 I)
              - \\tfrac n2\\log 2\\pi ,

    the quantity that kernel hyper-parameters (length-scale, noise) are fitted to. K (n, n), y (n,),
    `noise_var` sigma^2 > 0. By a Cholesky factor L: log det = 2 sum_i log L_ii. Section 9.3.
    """
    K = _check_covariance(K, "K")
    n = len(K)
    y = check_vector(y, "y", n)
    noise_var = check_positive(noise_var, "noise_var")
    try:
        L = np.linalg.cholesky(K + noise_var * np.eye(n))
    except np.linalg.LinAlgError:
        raise ValueError("K + noise_var I must be positive definite: K must be a covariance matrix") from None
    z = solve_triangular(L, y, lower=True)
    return float(-0.5 * z @ z - np.log(np.diag(L)).sum() - 0.5 * n * math.log(2 * math.pi))


def relu_nngp(X1, X2, depth: int, sigma_w2: float = 2.0, sigma_b2: float = 0.0) -> np.ndarray:
    """The NNGP kernel :math:`K^L` of a random ReLU network with L = `depth` layers of weights (L - 1 hidden
    ReLU layers), weights :math:`\\mathcal N(0, \\sigma_w^2/\\text{fan-in})`, biases :math:`\\mathcal N(0, \\sigma_b^2)`,
    in the limit of infinite width (Neal 1996; Lee et al. 2018; Matthews et al. 2018):

    .. math:: K^1(x, x') = \\sigma_b^2 + \\sigma_w^2\\frac{x^\\top x'}{d}, \\qquad
              K^l(x, x') = \\sigma_b^2 + \\sigma_w^2\\,\\mathbb E_{f\\sim\\mathcal{GP}(0, K^{l-1})}[\\varphi(f(x))\\varphi(f(x'))],

    the expectation from `relu_gaussian_moments` (the arc-cosine kernel of Cho and Saul). ``depth=1`` is the
    linear kernel; a network with one hidden layer has ``depth=2``. X1 (n1, d), X2 (n2, d). Returns
    :math:`K^L` (n1, n2), the covariance of any unit of layer L's pre-activations. Section 9.3.
    """
    X1 = check_matrix(X1, "X1")
    d = X1.shape[1]
    X2 = check_matrix(X2, "X2", cols=d)
    depth = check_int(depth, "depth", 1)
    sigma_w2 = check_positive(sigma_w2, "sigma_w2")
    sigma_b2 = check_number(sigma_b2, "sigma_b2", 0)
    k12 = sigma_b2 + sigma_w2 * X1 @ X2.T / d
    k11 = sigma_b2 + sigma_w2 * (X1**2).sum(1) / d
    k22 = sigma_b2 + sigma_w2 * (X2**2).sum(1) / d
    if depth > 1 and (k11.min() <= 0 or k22.min() <= 0):
        raise ValueError(
            "an input x = 0 with sigma_b2 = 0 has K^1(x, x) = 0: give sigma_b2 > 0 or nonzero inputs"
        )
    for _ in range(depth - 1):
        expectation, _slope = relu_gaussian_moments(k11[:, None], k12, k22[None, :])
        k12 = sigma_b2 + sigma_w2 * expectation
        k11, k22 = sigma_b2 + sigma_w2 * k11 / 2, sigma_b2 + sigma_w2 * k22 / 2  # E phi(u)^2 = var(u)/2
    return k12


def random_relu_network(
    X,
    depth: int,
    width: int,
    rng=None,
    *,
    nets: int = 1,
    out_width: int = 1,
    sigma_w2: float = 2.0,
    sigma_b2: float = 0.0,
) -> np.ndarray:
    """The outputs of `nets` independent random ReLU networks with L = `depth` layers of weights:
    :math:`h^1 = W^1x + b^1`, :math:`h^l = W^l\\varphi(h^{l-1}) + b^l`, weights
    :math:`\\mathcal N(0, \\sigma_w^2/\\text{fan-in})`, biases :math:`\\mathcal N(0, \\sigma_b^2)`, hidden layers of
    `width` units, the last of `out_width` units. As width -> infinity every output unit is a
    :math:`\\mathcal{GP}(0, K^L)` (`relu_nngp`).

    X (n, d). Returns H (nets, n, out_width): H[j] = h^L(X) of network j. Each network draws W^1, b^1, W^2, ...
    in order. Section 9.3.
    """
    X = check_matrix(X, "X")
    depth = check_int(depth, "depth", 1)
    width = check_int(width, "width", 1)
    nets = check_int(nets, "nets", 1)
    out_width = check_int(out_width, "out_width", 1)
    sigma_w2 = check_positive(sigma_w2, "sigma_w2")
    sigma_b2 = check_number(sigma_b2, "sigma_b2", 0)
    rng = check_rng(rng)
    sizes = [X.shape[1]] + [width] * (depth - 1) + [out_width]
    out = np.empty((nets, len(X), out_width))
    for j in range(nets):
        h = X
        for l in range(depth):
            fan_in, fan_out = sizes[l], sizes[l + 1]
            W = rng.standard_normal((fan_in, fan_out)) * math.sqrt(sigma_w2 / fan_in)
            b = rng.standard_normal(fan_out) * math.sqrt(sigma_b2)
            h = (h if l == 0 else np.maximum(h, 0.0)) @ W + b
        out[j] = h
    return out


def random_relu_features(
    X, depth: int, width: int, B: int, rng=None, *, sigma_w2: float = 2.0, sigma_b2: float = 0.0
) -> np.ndarray:
    """Random-network features :math:`\\varphi(x) = B^{-1/2}(f_b(x))_{b\\le B}`: the scalar outputs of B
    independent random ReLU networks (`random_relu_network`, one output unit). Their inner product
    :math:`\\varphi(x)^\\top\\varphi(x')` is a Monte-Carlo estimate of the networks' output covariance, the NNGP
    kernel `relu_nngp` at infinite width.

    X (n, d). Returns Phi (n, B), row i = phi(x_i). Section 9.3.
    """
    B = check_int(B, "B", 1)
    outputs = random_relu_network(X, depth, width, rng, nets=B, sigma_w2=sigma_w2, sigma_b2=sigma_b2)
    return outputs[:, :, 0].T / math.sqrt(B)


def nngp_feature_regression(Phi, y, Phi_star, noise_var: float) -> GPPosterior:
    """GP regression with the kernel :math:`k(x, x') = \\varphi(x)^\\top\\varphi(x')` of B features, in the primal
    (B x B) form, Bayesian linear regression on the features with prior :math:`\\mathcal N(0, I_B)`:

    .. math:: \\bar f_* = \\varphi_*^\\top(\\Phi^\\top\\Phi + \\sigma^2 I_B)^{-1}\\Phi^\\top y, \\qquad
              \\mathrm{var}f_* = \\sigma^2\\varphi_*^\\top(\\Phi^\\top\\Phi + \\sigma^2 I_B)^{-1}\\varphi_* ,

    equal to `gp_posterior` with K = Phi Phi^T (the n x n dual form) at the cost O(n B^2 + B^3) instead of
    O(n^3). Phi (n, B), y (n,), Phi_star (n_*, B), `noise_var` sigma^2 > 0. Returns a `GPPosterior`. Section 9.3.
    """
    Phi = check_matrix(Phi, "Phi")
    n, B = Phi.shape
    y = check_vector(y, "y", n)
    Phi_star = check_matrix(Phi_star, "Phi_star", cols=B)
    noise_var = check_positive(noise_var, "noise_var")
    chol = cho_factor(Phi.T @ Phi + noise_var * np.eye(B), lower=True)
    mean = Phi_star @ cho_solve(chol, Phi.T @ y)
    var = noise_var * np.einsum("ij,ji->i", Phi_star, cho_solve(chol, Phi_star.T))
    return GPPosterior(mean, np.maximum(var, 0.0))


# ----------------------------------------------------------------------------- 9.4 statistical learning theory: PAC, VC, Rademacher


class GapCurve(NamedTuple):
    ns: np.ndarray  # training-set sizes (k,)
    train_error: np.ndarray  # 0-1 error on the training set, the empirical risk R_hat, (k, repeats)
    test_error: np.ndarray  # 0-1 error on the fresh test set, the estimate of the risk R, (k, repeats)


def _uniform_init(module: nn.Module, generator: torch.Generator) -> None:
    """PyTorch's default initialisation of every linear layer, U[-1/sqrt(fan_in), 1/sqrt(fan_in)] for the weights
    and the biases, drawn from `generator` (so that it follows the caller's rng, not torch's global state)."""
    with torch.no_grad():
        for layer in module.modules():
            if isinstance(layer, nn.Linear):
                bound = 1 / math.sqrt(layer.in_features)
                layer.weight.uniform_(-bound, bound, generator=generator)
                layer.bias.uniform_(-bound, bound, generator=generator)


def generalisation_gap_curve(
    ns,
    repeats: int = 1,
    *,
    hidden: int = 64,
    steps: int = 400,
    lr: float = 2e-2,
    noise: float = 0.3,
    n_test: int = 20_000,
    rng=None,
    progress: bool = True,
) -> GapCurve:
    """Empirical risk and risk of an MLP trained on ``make_moons(n, noise)`` for every training-set size n in
    `ns`: the generalisation gap :math:`R(f_S) - \\hat R(f_S)` of the 0-1 loss, section 9.4.

    For each n and each of `repeats` training sets S, a one-hidden-layer ReLU network (2-`hidden`-1) is trained by
    full-batch Adam (``torch.optim.Adam``, step `lr`) for `steps` steps on the cross-entropy;
    :math:`\\hat R` is its error on S, :math:`R` is estimated by its error on `n_test` fresh points of the same
    distribution (one test set for all n). Data and initial weights come from `rng`. Returns a `GapCurve`
    (errors of shape (len(ns), repeats)).
    """
    ns = np.array([check_int(n, "ns entries", 2) for n in np.atleast_1d(ns)])
    repeats, hidden, steps = (
        check_int(repeats, "repeats", 1),
        check_int(hidden, "hidden", 1),
        check_int(steps, "steps", 1),
    )
    lr = check_positive(lr, "lr")
    noise = check_number(noise, "noise", 0)
    n_test = check_int(n_test, "n_test", 1)
    rng = check_rng(rng)
    dev = device()

    def moons(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        X, y = make_moons(n, noise=noise, random_state=int(rng.integers(2**31)))
        return (
            torch.as_tensor(X, dtype=torch.float32, device=dev),
            torch.as_tensor(y, dtype=torch.float32, device=dev),
        )

    def error(model: nn.Module, X: torch.Tensor, y: torch.Tensor) -> float:
        with torch.no_grad():
            return float(to_numpy(((model(X).squeeze(-1) > 0).float() != y).float().mean()))

    X_test, y_test = moons(n_test)
    train_error, test_error = np.empty((len(ns), repeats)), np.empty((len(ns), repeats))
    runs = [(i, r) for i in range(len(ns)) for r in range(repeats)]
    for i, r in tqdm(runs, desc="training sets", leave=False, disable=not progress):
        X, y = moons(int(ns[i]))
        model = nn.Sequential(nn.Linear(2, hidden), nn.ReLU(), nn.Linear(hidden, 1))
        _uniform_init(model, torch.Generator().manual_seed(int(rng.integers(2**31))))
        model = model.to(dev)
        optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        for _ in range(steps):
            loss = nn.functional.binary_cross_entropy_with_logits(model(X).squeeze(-1), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        train_error[i, r], test_error[i, r] = error(model, X, y), error(model, X_test, y_test)
    return GapCurve(ns, train_error, test_error)


def hoeffding_epsilon(n: int, delta: float, class_size: int = 1) -> float:
    """The accuracy of a PAC statement from Hoeffding's inequality (and the union bound), section 9.4:

    .. math:: \\varepsilon = \\sqrt{\\frac{\\ln(|\\mathcal F|/\\delta)}{2n}}

    With probability at least 1 - δ over n i.i.d. examples, :math:`R(f) - \\hat R(f) \\le \\varepsilon` for one
    fixed f (``class_size=1``) or for all f of a finite class of `class_size` predictors at once; the loss lies in
    [0, 1]. `n` >= 1, δ in (0, 1), `class_size` an int >= 1 (a Python int may be huge, e.g. 2**n).
    """
    n = check_int(n, "n", 1)
    delta = check_number(delta, "delta", 0, 1, low_open=True, high_open=True)
    class_size = check_int(class_size, "class_size", 1)
    return math.sqrt((math.log(class_size) + math.log(1 / delta)) / (2 * n))


def violation_probability(n: int, eps: float, p: float = 0.5) -> float:
    """The exact probability :math:`\\mathbb P_S[R - \\hat R > \\varepsilon]` for one fixed predictor whose 0-1 loss
    on an example is Bernoulli(p), section 9.4: then R = p and :math:`n\\hat R = K\\sim\\mathrm{Binomial}(n, p)`, so

    .. math:: \\mathbb P[K < n(p - \\varepsilon)] = F_{\\mathrm{Bin}(n,p)}(\\lceil n(p-\\varepsilon)\\rceil - 1)

    (``scipy.stats.binom.cdf``). p = 1/2 has the largest variance, Hoeffding's worst case. Returns a float.
    """
    n = check_int(n, "n", 1)
    eps = check_number(eps, "eps", 0)
    p = check_number(p, "p", 0, 1)
    return float(binom.cdf(math.ceil(n * (p - eps)) - 1, n, p))


def dichotomies_1d(x, kind: str = "threshold") -> np.ndarray:
    """The distinct labelings (+1/-1) that a class of predictors on the real line realises on the points x (n,),
    section 9.4: thresholds :math:`h_t(x) = +1` iff :math:`x > t` (``kind="threshold"``, VC dimension 1) or
    intervals :math:`h_{a,b}(x) = +1` iff :math:`a < x < b` (``kind="interval"``, VC dimension 2).

    Brute force: only the position of t (or of a and b) between the sorted distinct points matters, so the
    candidates are the midpoints and :math:`\\pm\\infty`. Returns the unique labelings as rows, (k, n); the growth
    function on x is k.
    """
    x = check_vector(x, "x")
    kind = check_choice(kind, "kind", ("threshold", "interval"))
    values = np.unique(x)
    cuts = np.concatenate([[-np.inf], (values[:-1] + values[1:]) / 2, [np.inf]])
    if kind == "threshold":
        patterns = np.where(x[None, :] > cuts[:, None], 1, -1)
    else:
        a, b = np.triu_indices(len(cuts))  # a <= b; a == b is the empty interval (everything -1)
        inside = (x[None, :] > cuts[a, None]) & (x[None, :] < cuts[b, None])
        patterns = np.where(inside, 1, -1)
    return np.unique(patterns, axis=0)


def sauer_bound(n: int, vc: int) -> int:
    """Sauer's lemma, section 9.4: a class of VC dimension `vc` realises at most
    :math:`\\mathcal F(n) \\le \\sum_{i=0}^{\\mathrm{VC}}\\binom ni` labelings of n points (= 2^n when VC >= n).
    Returns the exact (Python) integer."""
    n, vc = check_int(n, "n", 0), check_int(vc, "vc", 0)
    if vc >= n:
        return 2**n
    return sum(math.comb(n, i) for i in range(vc + 1))


def log_vc_bound(n: int, vc: int, eps: float) -> float:
    """The natural logarithm of the right-hand side of the VC inequality, section 9.4,

    .. math:: \\mathbb P\\big(\\sup_{f}|\\hat R(f) - R(f)| > \\varepsilon\\big) \\le 8\\,\\mathcal F(n)\\,e^{-n\\varepsilon^2/32},

    with the growth function bounded by Sauer's lemma (`sauer_bound`; 2^n when VC >= n). Computed in log space,
    :math:`\\ln 8 + \\ln\\mathcal F(n) - n\\varepsilon^2/32`, because :math:`\\mathcal F(n)` overflows a float
    long before the bound becomes interesting (for VC > 100 the binomials are summed in log space too). The bound
    is vacuous when the result is >= 0 (a probability bound >= 1). Returns a float.
    """
    n, vc = check_int(n, "n", 1), check_int(vc, "vc", 0)
    eps = check_number(eps, "eps", 0, low_open=True)
    if vc >= n:
        log_growth = n * math.log(2)
    elif vc <= 100:
        log_growth = math.log(sauer_bound(n, vc))
    else:  # exact integers with thousands of digits would be slow
        i = np.arange(vc + 1)
        log_growth = float(logsumexp(gammaln(n + 1) - gammaln(i + 1) - gammaln(n - i + 1)))
    return math.log(8) + log_growth - n * eps**2 / 32


class MonteCarlo(NamedTuple):
    mean: float  # the Monte-Carlo average
    stderr: float  # its standard error, std / sqrt(samples)


def rademacher_linear(X, B: float = 1.0, n_mc: int = 4000, rng=None) -> MonteCarlo:
    """Monte-Carlo estimate of the empirical Rademacher complexity of the norm ball
    :math:`\\{x\\mapsto w^\\top x : \\lVert w\\rVert\\le B\\}` on the rows of X (n, d), section 9.4. The supremum is
    attained at :math:`w = B\\,v/\\lVert v\\rVert`, :math:`v = \\sum_i\\sigma_ix_i` (Cauchy-Schwarz), so

    .. math:: \\hat{\\mathcal R}_S = \\mathbb E_\\sigma\\frac Bn\\Big\\lVert\\sum_{i=1}^n\\sigma_ix_i\\Big\\rVert ,

    averaged over `n_mc` draws of n random signs from `rng`. Returns a `MonteCarlo` (mean, standard error).
    """
    X = check_matrix(X, "X")
    B = check_positive(B, "B")
    n_mc = check_int(n_mc, "n_mc", 2)
    rng = check_rng(rng)
    signs = rng.choice([-1.0, 1.0], size=(n_mc, len(X)))
    values = B * np.linalg.norm(signs @ X, axis=1) / len(X)
    return MonteCarlo(float(values.mean()), float(values.std(ddof=1) / math.sqrt(n_mc)))


def rademacher_exact(A) -> float:
    """The empirical Rademacher complexity of a finite class, exactly, section 9.4: the rows of A (k, n) are the
    vectors :math:`a = (f(x_1), \\dots, f(x_n))` of the k predictors, and

    .. math:: \\hat{\\mathcal R}_S = \\frac1{2^n}\\sum_{\\sigma\\in\\{\\pm1\\}^n}\\max_{a}\\frac1n\\sum_i\\sigma_ia_i ,

    an average over all 2^n sign vectors (so n <= 20). Returns a float.
    """
    A = check_matrix(A, "A")
    n = A.shape[1]
    if n > 20:
        raise ValueError(f"A must have at most 20 columns (2^n sign vectors are enumerated), got {n}")
    total = 0.0
    for start in range(0, 2**n, 2**14):  # the sign vectors in chunks, so that memory stays small
        codes = np.arange(start, min(start + 2**14, 2**n))
        signs = np.where((codes[:, None] >> np.arange(n)) & 1, 1.0, -1.0)
        total += (signs @ A.T).max(axis=1).sum()
    return float(total / (2**n * n))


def massart_bound(A) -> float:
    """Massart's lemma, section 9.4: for a finite set of k vectors, the rows of A (k, n),

    .. math:: \\hat{\\mathcal R}_S \\le \\frac{\\max_a\\lVert a\\rVert\\sqrt{2\\ln k}}{n} .

    For k labelings in {±1}^n this is :math:`\\sqrt{2\\ln k/n}`. Returns a float.
    """
    A = check_matrix(A, "A")
    return float(np.linalg.norm(A, axis=1).max() * math.sqrt(2 * math.log(len(A))) / A.shape[1])


# ----------------------------------------------------------------------------- 9.4 bias, variance, double descent, implicit bias


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
    Phi = check_matrix(Phi, "Phi")
    n, p = Phi.shape
    f_star = check_vector(f_star, "f_star", n)
    Phi_test = check_matrix(Phi_test, "Phi_test", cols=p)
    f_star_test = check_vector(f_star_test, "f_star_test", len(Phi_test))
    noise_var = check_number(noise_var, "noise_var", 0)
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
    Phi = check_matrix(Phi, "Phi")
    n, p = Phi.shape
    f_star = check_vector(f_star, "f_star", n)
    Phi_test = check_matrix(Phi_test, "Phi_test", cols=p)
    f_star_test = check_vector(f_star_test, "f_star_test", len(Phi_test))
    noise_var = check_number(noise_var, "noise_var", 0)
    sets = check_int(sets, "sets", 2)
    rng = check_rng(rng)
    noise_sd = math.sqrt(noise_var)
    Y = f_star[:, None] + noise_sd * rng.standard_normal((n, sets))
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
    for _ in tqdm(range(draws), desc="feature draws", leave=False, disable=not progress):
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
    eta: float = 1e-2,
    target: float = 0.99,
    max_epochs: int = 500,
    rng=None,
    progress: bool = True,
) -> MemorisationRun:
    """Train scikit-learn's ``MLPClassifier`` (one hidden layer of `hidden` ReLU units, Adam with step size `eta`,
    its ``learning_rate_init``) one epoch at a time (``partial_fit``, mini-batches of min(200, n)) until its
    accuracy on the training set X (n, d), y (n,) reaches `target`, at most `max_epochs` epochs: the randomisation
    test of Zhang et al. (2017) when y holds shuffled labels, section 9.4. Initial weights and batch order
    come from `rng`. Returns a `MemorisationRun` (epochs used, final accuracies, training-accuracy history).
    """
    X = check_matrix(X, "X")
    y = check_labels(y, "y", len(X))
    X_test = check_matrix(X_test, "X_test", cols=X.shape[1])
    y_test = check_labels(y_test, "y_test", len(X_test))
    hidden, max_epochs = check_int(hidden, "hidden", 1), check_int(max_epochs, "max_epochs", 1)
    eta = check_positive(eta, "eta")
    target = check_number(target, "target", 0, 1)
    classes = np.union1d(y, y_test)
    model = MLPClassifier(
        hidden_layer_sizes=(hidden,), learning_rate_init=eta, random_state=int(check_rng(rng).integers(2**31))
    )
    history = []
    for _ in tqdm(range(max_epochs), desc="epochs", leave=False, disable=not progress):
        model.partial_fit(X, y, classes=classes)
        history.append(model.score(X, y))
        if history[-1] >= target:
            break
    return MemorisationRun(len(history), history[-1], float(model.score(X_test, y_test)), np.array(history))


# ----------------------------------------------------------------------------- 9.4 PAC-Bayes and flat minima


def _diag_kl(mu_q, var_q, mu_p, var_p, log):
    """The sum of the per-coordinate KL terms, for numpy arrays (log = np.log) or torch tensors (torch.log)."""
    return 0.5 * (log(var_p / var_q) + (var_q + (mu_q - mu_p) ** 2) / var_p - 1).sum()


def _vector_or_number(value, name: str, n: int, variance: bool) -> np.ndarray:
    """A vector (n,) or a number repeated n times; variances must be > 0."""
    if np.ndim(value) == 0:
        value = check_positive(value, name) if variance else check_number(value, name)
        return np.full(n, value)
    value = check_vector(value, name, n)
    if variance and (value <= 0).any():
        raise ValueError(f"{name} must hold variances > 0, got minimum {value.min()!r}")
    return value


def kl_diag_gauss(mu_q, var_q, mu_p, var_p) -> float:
    """The Kullback-Leibler divergence KL(Q||P) of two Gaussians with diagonal covariances,
    Q = N(mu_q, diag var_q) and P = N(mu_p, diag var_p):

    .. math:: \\mathrm{KL}(Q\\|P) = \\sum_i\\Big[\\tfrac12\\ln\\frac{v^P_i}{v^Q_i}
              + \\frac{v^Q_i + (\\mu^Q_i-\\mu^P_i)^2}{2v^P_i} - \\tfrac12\\Big].

    mu_q, var_q (P,); mu_p, var_p (P,) or numbers (an isotropic prior such as P = N(0, lambda I)). Variances,
    not standard deviations. For P = N(0, lambda I), Q = N(theta, diag sigma^2) this is the PAC-Bayes KL of
    section 9.4: sum_i [ln(lambda/sigma_i^2)/2 + (sigma_i^2 + theta_i^2)/(2 lambda) - 1/2].
    """
    mu_q = check_vector(mu_q, "mu_q")
    n = len(mu_q)
    var_q = _vector_or_number(var_q, "var_q", n, variance=True)
    mu_p = _vector_or_number(mu_p, "mu_p", n, variance=False)
    var_p = _vector_or_number(var_p, "var_p", n, variance=True)
    return float(_diag_kl(mu_q, var_q, mu_p, var_p, np.log))


def pac_bayes_bound(emp_risk: float, kl: float, n: int, delta: float) -> float:
    """The McAllester-Maurer PAC-Bayes bound on the risk of the stochastic classifier Q: for a prior P fixed
    before the n >= 8 examples are seen and a loss in [0, 1], with probability >= 1 - delta, for every Q,

    .. math:: \\mathbb E_Q R \\le \\mathbb E_Q\\hat R + \\sqrt{\\frac{\\mathrm{KL}(Q\\|P) + \\ln(2\\sqrt n/\\delta)}{2n}} .

    emp_risk = E_Q R_hat in [0, 1], kl = KL(Q||P) >= 0. Returns the right-hand side (> 1 means vacuous).
    Section 9.4.
    """
    emp_risk = check_number(emp_risk, "emp_risk", 0, 1)
    kl = check_number(kl, "kl", 0)
    n = check_int(n, "n", 8)
    delta = check_number(delta, "delta", 0, 1, low_open=True, high_open=True)
    return emp_risk + math.sqrt((kl + math.log(2 * math.sqrt(n) / delta)) / (2 * n))


class GaussianPosterior(NamedTuple):
    theta: np.ndarray  # the mean of Q (P,)
    var: np.ndarray  # the variances sigma_i^2 of Q (P,)
    objective: np.ndarray  # the Monte-Carlo estimate of the objective at every step (steps,)


def fit_pac_bayes(
    loss: Callable[[torch.Tensor], torch.Tensor],
    theta0,
    lam: float,
    n: int,
    delta: float,
    *,
    prior_mean=0.0,
    var0: float = 1e-2,
    steps: int = 1000,
    lr: float = 0.02,
    samples: int = 32,
    rng=None,
) -> GaussianPosterior:
    """Train a Gaussian posterior Q = N(theta, diag sigma^2) by minimising the PAC-Bayes objective for the prior
    P = N(prior_mean, lam I) (prior_mean (P,) or a number, fixed before the data: 0, or a network's random
    initialisation),

    .. math:: \\mathbb E_{\\xi}\\,\\hat L(\\theta + \\sigma\\odot\\xi)
              + \\sqrt{\\frac{\\mathrm{KL}(Q\\|P) + \\ln(2\\sqrt n/\\delta)}{2n}},\\qquad \\xi\\sim\\mathcal N(0, I),

    with Adam on (theta, ln sigma^2): the expectation is a mean over `samples` draws of xi per step (from `rng`),
    differentiable in (theta, sigma) by the reparameterisation trick. ``loss(thetas)`` maps a float64 tensor
    (samples, P) of parameter vectors to their training losses (samples,) (a surrogate of the 0-1 loss, e.g. the
    cross-entropy). theta starts at theta0 (P,), every sigma_i^2 at var0; the step size is lr, then lr/10 for the
    second half of the steps (so that the Monte-Carlo noise averages out). Section 9.4.
    """
    check_callable(loss, "loss")
    theta0 = check_vector(theta0, "theta0")
    lam = check_positive(lam, "lam")
    n = check_int(n, "n", 8)
    delta = check_number(delta, "delta", 0, 1, low_open=True, high_open=True)
    var0 = check_positive(var0, "var0")
    steps = check_int(steps, "steps", 1)
    lr = check_positive(lr, "lr")
    samples = check_int(samples, "samples", 1)
    rng = check_rng(rng)
    dim = len(theta0)
    prior_mean = torch.from_numpy(_vector_or_number(prior_mean, "prior_mean", dim, variance=False))
    theta = torch.tensor(theta0, dtype=torch.float64, requires_grad=True)
    log_var = torch.full((dim,), math.log(var0), dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.Adam([theta, log_var], lr=lr)
    confidence = math.log(2 * math.sqrt(n) / delta)
    history = np.empty(steps)
    for step in tqdm(range(steps), desc="PAC-Bayes objective", leave=False):
        if step == steps // 2:
            for group in optimizer.param_groups:
                group["lr"] = lr / 10
        var = log_var.exp()
        xi = torch.from_numpy(rng.standard_normal((samples, dim)))
        losses = loss(theta + var.sqrt() * xi)
        if not isinstance(losses, torch.Tensor) or losses.shape != (samples,):
            got = tuple(losses.shape) if isinstance(losses, torch.Tensor) else type(losses).__name__
            raise ValueError(f"loss must map a tensor ({samples}, {dim}) to a tensor ({samples},), got {got}")
        kl = _diag_kl(theta, var, prior_mean, lam, torch.log)
        objective = losses.mean() + torch.sqrt((kl + confidence) / (2 * n))
        optimizer.zero_grad()
        objective.backward()
        optimizer.step()
        history[step] = objective.item()
    return GaussianPosterior(to_numpy(theta), to_numpy(log_var.exp()), history)


def linear_gibbs_error(X, y, thetas, chunk: int = 256) -> float:
    """The 0-1 error of the stochastic (Gibbs) linear classifier: draw theta from Q, predict 1[x^T theta > 0],

    .. math:: \\frac1S\\sum_{j=1}^S\\frac1n\\sum_{i=1}^n \\mathbb 1\\{\\mathbb 1[x_i^\\top\\theta_j > 0] \\ne y_i\\},

    the Monte-Carlo estimate of E_Q R_hat over the draws theta_j, the rows of thetas (S, d). X (n, d) (append a
    column of ones for a bias), labels y (n,) in {0, 1}; computed `chunk` draws at a time. Section 9.4.
    """
    X = check_matrix(X, "X")
    y = check_labels(y, "y", len(X), values=(0, 1))
    thetas = check_matrix(thetas, "thetas", None, X.shape[1])
    return _gibbs_error(lambda draws: draws @ X.T > 0, thetas, y, check_int(chunk, "chunk", 1))


def _gibbs_error(
    predict: Callable[[np.ndarray], np.ndarray], thetas: np.ndarray, y: np.ndarray, chunk: int
) -> float:
    """The mean over the rows of thetas of the 0-1 error of predict(rows) (rows, n) against y (n,), `chunk` rows
    at a time."""
    wrong = sum(np.sum(predict(thetas[start : start + chunk]) != y) for start in range(0, len(thetas), chunk))
    return float(wrong / (len(thetas) * len(y)))


def mlp_logits(thetas: torch.Tensor, X: torch.Tensor, hidden: int) -> torch.Tensor:
    """The logits f_theta(x) = w_2^T tanh(W_1 x + b_1) + b_2 of a network with one hidden layer of `hidden` tanh
    units, for every parameter vector theta, a row of thetas (S, P), at every point, a row of X (n, d): a tensor
    (S, n). A row holds W_1 (hidden, d) row by row, then b_1, w_2 and b_2, P = hidden (d + 2) + 1: the order of
    ``parameters_to_vector`` for ``nn.Sequential(nn.Linear(d, hidden), nn.Tanh(), nn.Linear(hidden, 1))``.
    Section 9.4.
    """
    hidden = check_int(hidden, "hidden", 1)
    if not isinstance(X, torch.Tensor) or X.ndim != 2:
        raise TypeError(f"X must be a 2-D torch tensor (n, d), got {_shape_or_type(X)}")
    d = X.shape[1]
    P = hidden * (d + 2) + 1
    if not isinstance(thetas, torch.Tensor) or thetas.ndim != 2 or thetas.shape[1] != P:
        raise ValueError(
            f"thetas must be a torch tensor (S, {P}) for hidden = {hidden}, d = {d}, got {_shape_or_type(thetas)}"
        )
    S = len(thetas)
    W1 = thetas[:, : hidden * d].reshape(S, hidden, d)
    b1, w2 = thetas[:, hidden * d : hidden * (d + 1)], thetas[:, hidden * (d + 1) : hidden * (d + 2)]
    h = torch.tanh(torch.einsum("shd,nd->snh", W1, X.to(thetas.dtype)) + b1[:, None, :])
    return torch.einsum("snh,sh->sn", h, w2) + thetas[:, -1:]


def mlp_gibbs_error(X, y, thetas, hidden: int, chunk: int = 256) -> float:
    """The 0-1 error of the stochastic (Gibbs) network of `mlp_logits`: the mean over the draws theta_j, the rows
    of thetas (S, P), of the training error of 1[f_theta_j(x) > 0] on X (n, d) with labels y (n,) in {0, 1};
    computed `chunk` draws at a time. Section 9.4.
    """
    X = check_matrix(X, "X")
    y = check_labels(y, "y", len(X), values=(0, 1))
    thetas = check_matrix(thetas, "thetas", None, check_int(hidden, "hidden", 1) * (X.shape[1] + 2) + 1)
    X_t = torch.from_numpy(X)

    def predict(draws: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return to_numpy(mlp_logits(torch.from_numpy(draws), X_t, hidden) > 0)

    return _gibbs_error(predict, thetas, y, check_int(chunk, "chunk", 1))


def lbfgs_minimise(
    loss: Callable[[torch.Tensor], torch.Tensor],
    theta0: torch.Tensor,
    max_iter: int = 2000,
    tol: float = 1e-10,
) -> torch.Tensor:
    """A minimiser of the scalar function ``loss(theta)`` of a flat vector (P,) by full-batch L-BFGS (strong
    Wolfe line search), from theta0, until the gradient norm is <= tol or after max_iter iterations (use float64:
    float32 stalls at a gradient of about 1e-4). Returns the last iterate (P,), detached. Sections 9.4-9.5.
    """
    check_callable(loss, "loss")
    theta = _check_flat(theta0, "theta0").detach().clone().requires_grad_(True)
    max_iter = check_int(max_iter, "max_iter", 1)
    tol = check_positive(tol, "tol")
    optimizer = torch.optim.LBFGS(
        [theta],
        lr=1,
        max_iter=50,
        tolerance_grad=tol,
        tolerance_change=1e-16,
        history_size=50,
        line_search_fn="strong_wolfe",
    )

    def closure():
        optimizer.zero_grad()
        value = loss(theta)
        value.backward()
        return value

    for _ in tqdm(range(-(-max_iter // 50)), desc="L-BFGS (50 iterations each)", leave=False):
        optimizer.step(closure)
        if theta.grad is not None and theta.grad.norm() <= tol:
            break
    return theta.detach()


class LossIncrease(NamedTuple):
    mean: float  # Monte-Carlo mean of (L(theta + s xi) + L(theta - s xi))/2 - L(theta)
    sem: float  # its standard error


def noisy_loss_increase(
    loss: Callable[[torch.Tensor], torch.Tensor], theta: torch.Tensor, s: float, pairs: int = 2000, rng=None
) -> LossIncrease:
    """How much Gaussian noise on the parameters raises the loss, E L(theta + s xi) - L(theta), xi ~ N(0, I),
    estimated with antithetic pairs +-xi:

    .. math:: \\frac1N\\sum_{k=1}^N\\frac{L(\\theta+s\\xi_k)+L(\\theta-s\\xi_k)}2 - L(\\theta)
              \\approx \\frac{s^2}2\\,\\mathrm{tr}\\,H \\quad(\\text{at a minimum, small } s).

    The pair cancels the odd terms of the Taylor expansion (the gradient and third-order terms). ``loss`` maps
    a flat vector (P,) to a scalar and must work under ``torch.func.vmap`` (a `flat_function` does); theta (P,).
    Section 9.4 (flat minima).
    """
    check_callable(loss, "loss")
    theta = _check_flat(theta).detach()
    s = check_positive(s, "s")
    pairs = check_int(pairs, "pairs", 2)
    rng = check_rng(rng)
    xi = torch.from_numpy(rng.standard_normal((pairs, theta.numel()))).to(theta.dtype)
    batched = torch.func.vmap(loss)
    with torch.no_grad():
        increase = (batched(theta + s * xi) + batched(theta - s * xi)) / 2 - loss(theta)
    increase = to_numpy(increase)
    return LossIncrease(float(increase.mean()), float(increase.std(ddof=1) / math.sqrt(pairs)))


def sam_update(grad: Callable[[np.ndarray], np.ndarray], theta, eta: float, rho: float) -> np.ndarray:
    """One step of sharpness-aware minimisation (SAM): climb to the (first-order) worst point of the ball of
    radius rho, then descend with the gradient found there,

    .. math:: \\epsilon = \\rho\\,\\frac{\\nabla L(\\theta)}{\\lVert\\nabla L(\\theta)\\rVert},\\qquad
              \\theta \\leftarrow \\theta - \\eta\\,\\nabla L(\\theta + \\epsilon).

    ``grad(theta)`` returns the gradient (P,) of the loss; theta (P,). (epsilon = 0 where the gradient is 0.)
    Section 9.4 (flat minima).
    """
    check_callable(grad, "grad")
    theta = check_vector(theta, "theta")
    eta = check_positive(eta, "eta")
    rho = check_number(rho, "rho", 0)
    g = np.asarray(grad(theta), dtype=float)
    if g.shape != theta.shape:
        raise ValueError(
            f"grad must return a vector of the shape of theta {theta.shape}, got shape {g.shape}"
        )
    norm = np.linalg.norm(g)
    epsilon = rho * g / norm if norm > 0 else np.zeros_like(theta)
    return theta - eta * np.asarray(grad(theta + epsilon), dtype=float)


# ----------------------------------------------------------------------------- 9.5 the loss landscape


CRITICAL_KINDS = ("strict minimum", "strict maximum", "saddle", "inconclusive")


def classify_critical_point(H, tol: float = 1e-8) -> str:
    """The second-order test at a critical point (grad L = 0) from the eigenvalues lambda_i of the Hessian H (P, P):
    all lambda_i > 0 -> ``"strict minimum"``, all < 0 -> ``"strict maximum"``, both signs -> ``"saddle"``;
    otherwise H is singular and semi-definite and the test says nothing: ``"inconclusive"`` (H >= 0 is
    necessary for a minimum, not sufficient). An eigenvalue counts as 0 when |lambda_i| <= tol max(1, max|lambda|).
    H a symmetric numpy array or torch tensor. Section 9.5.
    """
    if isinstance(H, torch.Tensor):
        H = to_numpy(H)
    H = check_matrix(H, "H")
    if H.shape[0] != H.shape[1] or not np.allclose(H, H.T, atol=1e-10 * max(1.0, np.abs(H).max())):
        raise ValueError(f"H must be a symmetric square matrix, got shape {H.shape}")
    tol = check_positive(tol, "tol")
    lams = np.linalg.eigvalsh(H)
    zero = tol * max(1.0, np.abs(lams).max())
    positive, negative = (lams > zero).any(), (lams < -zero).any()
    if positive and negative:
        return "saddle"
    if (lams > zero).all():
        return "strict minimum"
    if (lams < -zero).all():
        return "strict maximum"
    return "inconclusive"


class Sharpness(NamedTuple):
    value: float  # the Rayleigh quotient v^T H v at the last iterate: lambda_max once v has converged
    vector: torch.Tensor  # the last unit iterate v (P,): pass it as v0 to warm-start the next call


def sharpness(
    loss: Callable[[torch.Tensor], torch.Tensor], theta: torch.Tensor, iters: int = 20, v0=None, rng=None
) -> Sharpness:
    """The sharpness lambda_max(H), H = grad^2 L(theta), by power iteration with Hessian-vector products (`hvp`):
    v <- H v / ||H v||, from v0 (a warm start, e.g. the vector of the previous call) or a random unit vector
    drawn from `rng`; returns v^T H v and v. It converges to the eigenvalue of largest modulus, which is
    lambda_max wherever no negative eigenvalue is larger in size (near a minimum). Section 9.5.
    """
    check_callable(loss, "loss")
    theta = _check_flat(theta).detach()
    iters = check_int(iters, "iters", 1)
    if v0 is None:
        v = torch.from_numpy(check_rng(rng).standard_normal(theta.numel())).to(theta.dtype)
    else:
        v = _check_flat(v0, "v0").detach().to(theta.dtype)
        if v.shape != theta.shape:
            raise ValueError(f"v0 must have the shape of theta {tuple(theta.shape)}, got {tuple(v.shape)}")
    v = v / v.norm()
    rayleigh = 0.0
    for _ in range(iters):
        Hv = hvp(loss, theta, v)
        rayleigh = float(v @ Hv)
        norm = Hv.norm()
        if norm == 0:
            break
        v = Hv / norm
    return Sharpness(rayleigh, v)


class LossGrad(NamedTuple):
    loss: float
    grad: np.ndarray  # (P,)


def tanh_mlp_mse(theta, X, y) -> LossGrad:
    """The loss L = (1/2n) sum_i (f(x_i) - y_i)^2 of a one-hidden-layer tanh network
    f(x) = v^T tanh(W x + b) + c (`tanh_mlp`) and its gradient by hand-written backpropagation, in numpy (fast
    enough for thousands of full-batch steps). theta (m(d + 2) + 1,) is laid out like the `flat_function` of
    ``nn.Sequential(nn.Linear(d, m), nn.Tanh(), nn.Linear(m, 1))``: W (m, d) row by row, b (m,), v (m,), c.
    X (n, d), y (n,). Section 9.5.
    """
    X = check_matrix(X, "X")
    n, d = X.shape
    y = check_vector(y, "y", n)
    theta = check_vector(theta, "theta")
    m = (len(theta) - 1) // (d + 2)
    if m < 1 or m * (d + 2) + 1 != len(theta):
        raise ValueError(
            f"theta must have m (d + 2) + 1 entries for a hidden width m and d = {d} inputs, got {len(theta)}"
        )
    W, b, v, c = _split_tanh_mlp(theta[None], d, m)
    A = _tanh_hidden(X, W, b)
    r = (A[0] @ v[0] + c[0] - y) / n  # dL/df_i
    return LossGrad(float(0.5 * n * (r @ r)), _tanh_backward(X[None], A, v, r[None])[0])


class SharpnessRun(NamedTuple):
    theta: np.ndarray  # the last iterate (P,)
    losses: np.ndarray  # the loss before every step (steps,)
    measured_at: np.ndarray  # the steps after which the sharpness was measured
    sharpness: np.ndarray  # lambda_max there


def gd_sharpness(
    loss_grad: Callable[[np.ndarray], LossGrad],
    loss: Callable[[torch.Tensor], torch.Tensor],
    theta0,
    eta: float,
    steps: int,
    every: int = 50,
    iters: int = 3,
    rng=None,
) -> SharpnessRun:
    """Full-batch gradient descent theta <- theta - eta grad L(theta) that records the sharpness lambda_max(H) every
    `every` steps, by `iters` power iterations warm-started from the previous eigenvector (the first measurement
    uses 10 iters from a random vector drawn from `rng`). ``loss_grad(theta)`` returns ``(L, grad L)`` in numpy (e.g.
    `tanh_mlp_mse`), ``loss(theta)`` the same loss of a float64 tensor, for `hvp`. theta0 (P,). A run whose loss
    stops being finite ends there. Section 9.5 (edge of stability).
    """
    check_callable(loss_grad, "loss_grad")
    check_callable(loss, "loss")
    theta = check_vector(theta0, "theta0")
    eta = check_positive(eta, "eta")
    steps = check_int(steps, "steps", 1)
    every = check_int(every, "every", 1)
    iters = check_int(iters, "iters", 1)
    rng = check_rng(rng)
    losses, measured_at, values, vector = [], [], [], None
    for step in tqdm(range(1, steps + 1), desc=f"GD, eta = {eta:g}", leave=False):
        value, grad = loss_grad(theta)
        losses.append(value)
        if not np.isfinite(value):
            break
        theta = theta - eta * grad
        if step % every == 0:
            result = sharpness(
                loss, torch.from_numpy(theta), iters if vector is not None else 10 * iters, vector, rng
            )
            vector = result.vector
            measured_at.append(step)
            values.append(result.value)
    return SharpnessRun(theta, np.array(losses), np.array(measured_at), np.array(values))


def bezier_point(theta_a, theta_m, theta_b, t):
    """The quadratic Bezier curve from theta_a (t = 0) to theta_b (t = 1) with the control point theta_m,

    .. math:: \\varphi(t) = (1-t)^2\\,\\theta_a + 2t(1-t)\\,\\theta_m + t^2\\,\\theta_b,\\qquad t\\in[0, 1];

    theta_m = (theta_a + theta_b)/2 gives the straight line (1 - t) theta_a + t theta_b. Three vectors (P,), numpy
    arrays or torch tensors (then the result is a tensor, differentiable in theta_m); t a number -> (P,), t (T,)
    -> (T, P). Section 9.5 (mode connectivity).
    """
    points = (theta_a, theta_m, theta_b)
    names = ("theta_a", "theta_m", "theta_b")
    if any(isinstance(p, torch.Tensor) for p in points):
        points = tuple(
            _check_flat(p if isinstance(p, torch.Tensor) else torch.as_tensor(p), name)
            for p, name in zip(points, names, strict=True)
        )
        t = torch.as_tensor(t, dtype=points[0].dtype)
        bad_range = bool(((t < 0) | (t > 1)).any()) or not bool(torch.isfinite(t).all())
    else:
        points = tuple(check_vector(p, name) for p, name in zip(points, names, strict=True))
        t = np.asarray(t, dtype=float)
        bad_range = not np.isfinite(t).all() or bool(((t < 0) | (t > 1)).any())
    if any(p.shape != points[0].shape for p in points):
        raise ValueError(
            f"theta_a, theta_m, theta_b must have one shape, got {[tuple(p.shape) for p in points]}"
        )
    if t.ndim > 1 or bad_range:
        raise ValueError(f"t must be a number or a vector (T,) in [0, 1], got shape {tuple(t.shape)}")
    a, m, b = points
    s = t[..., None] if t.ndim == 1 else t
    return (1 - s) ** 2 * a + 2 * s * (1 - s) * m + s**2 * b


class PathLosses(NamedTuple):
    t: np.ndarray  # the positions on the path (points,)
    loss: np.ndarray  # L there (points,)
    barrier: float  # max_t L - (L(0) + L(1))/2


def path_losses(
    loss: Callable[[torch.Tensor], torch.Tensor], theta_a, theta_b, theta_m=None, points: int = 41
) -> PathLosses:
    """The loss along a path between two parameter vectors theta_a, theta_b (P,) (tensors): the straight line
    (1 - t) theta_a + t theta_b when theta_m is None, else the Bezier curve of `bezier_point`, at `points` evenly
    spaced t in [0, 1], evaluated with ``torch.func.vmap(loss)``. The barrier is max_t L(t) - (L(0) + L(1))/2.
    Section 9.5.
    """
    check_callable(loss, "loss")
    theta_a, theta_b = _check_flat(theta_a, "theta_a").detach(), _check_flat(theta_b, "theta_b").detach()
    theta_m = (theta_a + theta_b) / 2 if theta_m is None else _check_flat(theta_m, "theta_m").detach()
    points = check_int(points, "points", 2)
    ts = torch.linspace(0, 1, points, dtype=theta_a.dtype)
    with torch.no_grad():
        values = to_numpy(torch.func.vmap(loss)(bezier_point(theta_a, theta_m, theta_b, ts)))
    return PathLosses(to_numpy(ts), values, float(values.max() - (values[0] + values[-1]) / 2))


def fit_bezier(
    loss: Callable[[torch.Tensor], torch.Tensor],
    theta_a: torch.Tensor,
    theta_b: torch.Tensor,
    steps: int = 500,
    lr: float = 1e-2,
    samples: int = 16,
    rng=None,
) -> torch.Tensor:
    """The control point theta_m of a low-loss quadratic Bezier curve between two minima (Garipov et al., 2018):
    minimise the mean loss along the curve, E_{t ~ U[0, 1]} L(phi(t)), over theta_m with Adam (step size lr),
    from the midpoint (theta_a + theta_b)/2, drawing `samples` values of t per step from `rng`. ``loss`` must
    work under ``torch.func.vmap``. Returns theta_m (P,), detached. Section 9.5.
    """
    check_callable(loss, "loss")
    theta_a, theta_b = _check_flat(theta_a, "theta_a").detach(), _check_flat(theta_b, "theta_b").detach()
    if theta_a.shape != theta_b.shape:
        raise ValueError(
            f"theta_a and theta_b must have one shape, got {tuple(theta_a.shape)}, {tuple(theta_b.shape)}"
        )
    steps = check_int(steps, "steps", 1)
    lr = check_positive(lr, "lr")
    samples = check_int(samples, "samples", 1)
    rng = check_rng(rng)
    theta_m = ((theta_a + theta_b) / 2).clone().requires_grad_(True)
    optimizer = torch.optim.Adam([theta_m], lr=lr)
    batched = torch.func.vmap(loss)
    for _ in tqdm(range(steps), desc="Bezier control point", leave=False):
        ts = torch.from_numpy(rng.uniform(0, 1, samples)).to(theta_a.dtype)
        mean_loss = batched(bezier_point(theta_a, theta_m, theta_b, ts)).mean()
        optimizer.zero_grad()
        mean_loss.backward()
        optimizer.step()
    return theta_m.detach()


def magnitude_mask(w, frac: float) -> np.ndarray:
    """The pruning mask of one layer: 0 for the round(frac * w.size) entries of w with the smallest magnitude |w|
    (ties broken by position), 1 for the others; the shape of w (numpy array or torch tensor). Section 9.5
    (lottery tickets).
    """
    if isinstance(w, torch.Tensor):
        w = to_numpy(w)
    w = check_array(w, "w")
    frac = check_number(frac, "frac", 0, 1)
    pruned = np.argsort(np.abs(w).ravel(), kind="stable")[: round(frac * w.size)]
    mask = np.ones(w.size)
    mask[pruned] = 0.0
    return mask.reshape(w.shape)


def magnitude_prune(model: nn.Module, frac: float) -> dict[str, torch.Tensor]:
    """Layer-wise magnitude pruning: for every weight matrix of `model` (parameters with two or more dimensions;
    biases are kept), the `magnitude_mask` that removes the fraction frac of its smallest-magnitude entries.
    Returns {parameter name: mask tensor (0 or 1) of the parameter's shape}. Section 9.5 (lottery tickets).
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    frac = check_number(frac, "frac", 0, 1)
    return {
        name: torch.as_tensor(magnitude_mask(p.detach(), frac), dtype=p.dtype, device=p.device)
        for name, p in model.named_parameters()
        if p.ndim >= 2
    }


def train_masked(
    model: nn.Module,
    masks: dict[str, torch.Tensor] | None,
    X,
    y,
    *,
    epochs: int,
    lr: float,
    batch_size: int = 64,
    rng=None,
) -> np.ndarray:
    """Train a classifier with some weights pruned: set the masked weights (mask 0) to 0, keep their gradients at
    0 (a hook on each masked parameter), and train with plain SGD (step size lr) on the cross-entropy, `epochs`
    passes over the data in minibatches of `batch_size` in an order drawn from `rng` (the loop of `fit`, with the
    batches taken by index: faster than a DataLoader for small tensors). masks = None trains the dense network.
    X (n, d), integer labels y (n,). The model is changed in place; returns the mean training loss per epoch.
    Section 9.5 (lottery tickets).
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    X = check_matrix(X, "X")
    y = check_labels(y, "y", len(X))
    epochs = check_int(epochs, "epochs", 1)
    batch_size = check_int(batch_size, "batch_size", 1)
    rng = check_rng(rng)
    params = dict(model.named_parameters())
    masks = masks or {}
    for name, mask in masks.items():
        if name not in params or not isinstance(mask, torch.Tensor) or mask.shape != params[name].shape:
            raise ValueError(f"masks must map parameter names of model to masks of their shape, got {name!r}")
    dev = model_device(model)
    with torch.no_grad():
        for name, mask in masks.items():
            mask = mask.to(dev, params[name].dtype)
            params[name].mul_(mask)
            params[name].register_hook(lambda g, m=mask: g * m)
    Xt = torch.as_tensor(X, dtype=torch.float32, device=dev)
    yt = torch.as_tensor(y, device=dev)
    optimizer = torch.optim.SGD(model.parameters(), lr=check_positive(lr, "lr"))
    history = np.empty(epochs)
    model.train()
    for epoch in range(epochs):
        order = torch.as_tensor(rng.permutation(len(X)), device=dev)
        total = 0.0
        for start in range(0, len(X), batch_size):
            batch = order[start : start + batch_size]
            loss = nn.functional.cross_entropy(model(Xt[batch]), yt[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * len(batch)
        history[epoch] = total / len(X)
    return history


def train_binary_classifier(model: nn.Module, X, y, *, steps: int = 400, lr: float = 1e-2) -> np.ndarray:
    """Train a network with one output logit on a small two-class data set by full-batch Adam (step size lr) on
    the binary cross-entropy, for `steps` steps (a plain loop: for 200 points much faster than `fit` with a
    DataLoader). X (n, d), labels y (n,) in {0, 1}. The model is changed in place; returns the loss per step.
    Sections 9.4 (the PAC-Bayes network) and 9.5 (mode connectivity).
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    X = check_matrix(X, "X")
    y = check_labels(y, "y", len(X), values=(0, 1))
    steps = check_int(steps, "steps", 1)
    dev = model_device(model)
    dtype = next(model.parameters()).dtype
    Xt = torch.as_tensor(X, dtype=dtype, device=dev)
    yt = torch.as_tensor(y, dtype=dtype, device=dev)
    optimizer = torch.optim.Adam(model.parameters(), lr=check_positive(lr, "lr"))
    history = np.empty(steps)
    for step in tqdm(range(steps), desc="full-batch Adam", leave=False):
        loss = nn.functional.binary_cross_entropy_with_logits(model(Xt).squeeze(-1), yt)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        history[step] = loss.item()
    return history


def _digits_mlp(hidden: int, seed: int) -> nn.Module:
    """A 64-hidden-10 ReLU network with PyTorch's default initialisation, drawn from a torch generator seeded
    with seed (the global torch generator is left alone)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, 10)).to(device())


class LotteryTrial(NamedTuple):
    dense: float  # test accuracy of the dense network
    ticket: np.ndarray  # per pruning fraction: the mask applied to the rewound initial weights, retrained
    fresh: np.ndarray  # per pruning fraction: the same mask on a fresh initialisation, retrained


def lottery_ticket_trial(
    split,
    fracs=(0.8, 0.95),
    *,
    hidden: int = 100,
    epochs: int = 15,
    lr: float = 0.15,
    batch_size: int = 64,
    rng=None,
) -> LotteryTrial:
    """One lottery-ticket experiment (Frankle and Carbin, 2019) on a data split (X_train, X_test, y_train, y_test):
    train a 64-hidden-10 ReLU network from its initialisation theta_0; for every fraction in `fracs`, prune it
    one-shot and layer-wise by magnitude (`magnitude_prune`), rewind the surviving weights to theta_0 and retrain
    with the same schedule (`train_masked`: torch.optim.SGD with step size lr, epochs, batch_size, the same batch
    order); the control trains the same mask from a fresh initialisation. Test accuracies; seeds drawn from `rng`.
    Section 9.5.
    """
    fracs = [check_number(f, "fracs", 0, 1) for f in np.atleast_1d(fracs)]
    hidden = check_int(hidden, "hidden", 1)
    rng = check_rng(rng)
    X_train, X_test, y_train, y_test = split
    init_seed, fresh_seed, order_seed = (int(s) for s in rng.integers(2**31, size=3))
    test_loader = make_loader(X_test, y_test, batch_size=len(X_test), shuffle=False)

    def trained(seed: int, masks) -> tuple[nn.Module, float]:
        model = _digits_mlp(hidden, seed)
        train_masked(
            model, masks, X_train, y_train, epochs=epochs, lr=lr, batch_size=batch_size, rng=order_seed
        )
        return model, evaluate(model, test_loader, {"accuracy": accuracy})["accuracy"]

    dense_model, dense = trained(init_seed, None)
    ticket, fresh = [], []
    for frac in fracs:
        masks = magnitude_prune(dense_model, frac)
        ticket.append(trained(init_seed, masks)[1])
        fresh.append(trained(fresh_seed, masks)[1])
    return LotteryTrial(dense, np.array(ticket), np.array(fresh))
