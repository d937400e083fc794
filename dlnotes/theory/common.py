"""Chapter 09's shared tools: what two or more of its sections use.

The network as a function of one flat parameter vector (`flat_function`), Hessian-vector products and the
chapter's one power iteration, and L-BFGS for full-batch minimisation (9.1, 9.2, 9.4, 9.5); the 2-layer network
of 9.1 in NTK parametrisation with its hand-derived NTK and gradient descent (notebooks ``01_ntk`` and
``02_infinite_width``); the ReLU Gaussian moments and the infinite-width kernel recursion (9.1 and 9.3, notebooks
``02_infinite_width`` and ``05_gaussian_processes``); the posterior of Bayesian linear regression and the prior
variances of 9.2 (notebooks ``03_bayesian_inference`` to ``05_gaussian_processes``); the one-hidden-layer tanh
network for k parameter vectors at once, its squared loss and its energy gradient (9.2, 9.4, 9.5, notebooks
``04_sampling``, ``08_pac_bayes``, ``09_loss_landscape``); and the small classifiers of 9.4 and 9.5 with the
training of a two-class one (notebooks ``06_learning_theory`` to ``09_loss_landscape``).

Conventions: a data set is X (n, d), one example per row, with targets y (n,); a network seen as a function of
its parameters takes one flat parameter vector theta (P,) (`flat_function`); kernels are Gram matrices
K[i, j] = k(x_i, x_j); noise and prior variances are variances, not standard deviations.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import torch
from torch import nn
from torch.func import functional_call

from ..training import device, model_device, progress_bar, train_steps
from ..validation import (
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

# ----------------------------------------------------------------------------- the network as a function of its parameters


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


def power_iteration(
    matvec: Callable[[np.ndarray], np.ndarray], dim: int, iters: int = 100, rng=None, v0=None
) -> PowerIteration:
    """The largest |eigenvalue| of a symmetric linear map given only through ``matvec(v) = A v`` (e.g. `hvp`):
    :math:`v_{k+1} = A v_k / \\lVert A v_k\\rVert` from v_0 = `v0` (a warm start, e.g. the vector of an earlier
    call; normalised) or a random unit vector drawn from `rng`, tracking :math:`\\lVert A v_k\\rVert`.

    ``norm`` converges to :math:`\\max_i|\\lambda_i|` at the rate :math:`|\\lambda_2/\\lambda_1|` per step even
    when A is indefinite with a pair :math:`\\pm\\lambda_{\\max}` (then v itself does not converge and the
    Rayleigh quotient means nothing); ``rayleigh`` is the signed eigenvalue when the largest one is unique.
    The one power iteration of the chapter: `sharpness` runs it on the Hessian of a loss. Returns a
    `PowerIteration`. Sections 9.1 (continued) and 9.5.
    """
    check_callable(matvec, "matvec")
    dim = check_int(dim, "dim", 1)
    iters = check_int(iters, "iters", 1)
    rng = check_rng(rng)
    if v0 is None:
        v = rng.standard_normal(dim)
    else:
        v = check_vector(v0, "v0", dim)
        if not v.any():
            raise ValueError("v0 must be a non-zero vector (the start of the iteration)")
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


def lbfgs_minimise(
    loss: Callable[[torch.Tensor], torch.Tensor],
    theta0: torch.Tensor,
    max_iter: int = 2000,
    tol: float = 1e-10,
) -> torch.Tensor:
    """A minimiser of the scalar function ``loss(theta)`` of a flat vector (P,) by full-batch L-BFGS (strong
    Wolfe line search), from theta0, until the gradient norm is <= tol or after max_iter iterations (use float64:
    float32 stalls at a gradient of about 1e-4). Returns the last iterate (P,), detached. A from-scratch optimiser's loop (a closure per step), not `train_steps`.
    Sections 9.4 and 9.5.
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

    with progress_bar(range(-(-max_iter // 50)), desc="L-BFGS (50 iterations each)") as rounds:
        for _ in rounds:
            optimizer.step(closure)
            if theta.grad is not None and theta.grad.norm() <= tol:
                break
    return theta.detach()


# ----------------------------------------------------------------------------- 9.1 the 2-layer network in NTK parametrisation


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


def _ntk_check_kernel(K, name: str = "K") -> np.ndarray:
    K = check_matrix(K, name)
    if K.shape[0] != K.shape[1] or not np.allclose(K, K.T, rtol=1e-10, atol=1e-12 * np.abs(K).max()):
        raise ValueError(f"{name} must be a symmetric square Gram matrix, got shape {K.shape}")
    return (K + K.T) / 2


class TwoLayerRun(NamedTuple):
    W: np.ndarray  # hidden weights after training (m, d)
    v: np.ndarray  # output weights after training (m,)
    losses: np.ndarray  # L = 1/2 sum_i (y_i - f_i)^2 before each step and after the last (steps + 1,)
    eta: float  # the step size used


def train_two_layer(
    X, y, W, v, steps: int, eta: float | None = None, activation: str = "relu", progress: bool = True
) -> TwoLayerRun:
    """Full-batch gradient descent on :math:`L = \\frac12\\sum_i(y_i - f(\\theta)(x_i))^2` for the 2-layer net
    `TwoLayerNet` from W (m, d), v (m,), with the gradient written out (NumPy: a from-scratch gradient descent,
    2-10 times faster than autograd with `train_steps` at the widths of 9.1):

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

    def forward(W: np.ndarray, v: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """phi(Z), phi'(Z) and the residual r = f - y; records the loss before step k (after the last: k = steps)."""
        A, D = _ntk_phi(X @ W.T, activation)
        r = scale * (A @ v) - y
        losses[k] = 0.5 * (r @ r)
        if not np.isfinite(losses[k]) or losses[k] > 1e12 * (1.0 + losses[0]):
            raise FloatingPointError(f"gradient descent diverged at step {k} (eta = {eta:.3g} is too large)")
        return A, D, r

    with progress_bar(range(steps), desc=f"GD, m = {len(v)}", enabled=progress) as bar:
        for k in bar:
            A, D, r = forward(W, v, k)
            grad_W = (D.T @ (r[:, None] * X)) * (scale * v)[:, None]
            v = v - eta * scale * (A.T @ r)
            W = W - eta * grad_W
    forward(W, v, steps)
    return TwoLayerRun(W, v, losses, eta)


# ----------------------------------------------------------------------------- 9.1 and 9.3 infinite-width kernels


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
    NNGP kernel of 9.3 (`gp.relu_nngp` is this recursion's Sigma^L). X1 (n1, d), X2 (n2, d). Returns an `NTKLimit` of two (n1, n2) arrays.
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


# ----------------------------------------------------------------------------- 9.2 Bayesian linear regression, prior variances


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


def _check_prior_var(prior_var, P: int):
    if np.ndim(prior_var) == 0:
        return check_positive(prior_var, "prior_var")
    prior_var = check_vector(prior_var, "prior_var", P)
    if (prior_var <= 0).any():
        raise ValueError(f"prior_var must hold variances > 0, got minimum {prior_var.min()!r}")
    return prior_var


# ----------------------------------------------------------------------------- 9.2, 9.4, 9.5 the one-hidden-layer tanh network


def _split_tanh_mlp(theta, d: int, width: int):
    """W (k, m, d), b (k, m), v (k, m), c (k,) from k flat parameter vectors theta (k, P), arrays or tensors."""
    m = width
    W = theta[:, : m * d].reshape(len(theta), m, d)
    return W, theta[:, m * d : m * d + m], theta[:, m * d + m : m * d + 2 * m], theta[:, -1]


def _tanh_hidden(X, W, b):
    """Hidden activations tanh(W x + b) of k networks: X (k, n, d) or (n, d), W (k, m, d), b (k, m) -> (k, n, m);
    NumPy arrays or torch tensors."""
    xp = torch if isinstance(W, torch.Tensor) else np
    subscripts = "knd,kmd->knm" if X.ndim == 3 else "nd,kmd->knm"
    return xp.tanh(xp.einsum(subscripts, X, W) + b[:, None, :])


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
    if isinstance(theta, torch.Tensor):
        shape = tuple(theta.shape)
    else:
        theta = check_array(theta, "theta")
        shape = theta.shape
    if len(shape) != 2 or shape[1] != P:
        raise ValueError(
            f"theta must have shape (k, {P}): k flat parameter vectors of a width-{width} network on {d} inputs, "
            f"got shape {shape}"
        )
    return theta, width


def tanh_mlp(X, theta, width: int):
    """A network with one hidden layer of `width` tanh units and one output, for k parameter vectors at once:

    .. math:: f(\\theta)(x) = \\sum_{j=1}^m v_j\\tanh(w_j^\\top x + b_j) + c,

    theta (k, P), :math:`P = m(d + 2) + 1`, laid out as W (m, d) row by row, b (m,), v (m,), c: the order of
    ``flat_function(nn.Sequential(nn.Linear(d, m), nn.Tanh(), nn.Linear(m, 1)))``. X (n, d). Returns the
    outputs (k, n). NumPy arrays in, a NumPy array out (vectorised over the k networks: fast enough for
    thousands of Langevin steps, 9.2); a torch tensor theta gives a tensor, differentiable in theta (the
    stochastic network of PAC-Bayes, 9.4), with X converted to its dtype and device. The chapter's one
    definition of this network: `tanh_mlp_mse` and `tanh_mlp_grad_energy` differentiate it by hand.
    Sections 9.2, 9.4 and 9.5.
    """
    if isinstance(theta, torch.Tensor):
        if not isinstance(X, torch.Tensor):
            X = torch.from_numpy(check_matrix(X, "X"))
        if X.ndim != 2 or X.numel() == 0:
            raise ValueError(f"X must have shape (n, d), got shape {tuple(X.shape)}")
        X = X.to(theta)
    else:
        X = check_matrix(X, "X")
    theta, width = _check_tanh_mlp(theta, X.shape[1], width)
    W, b, v, c = _split_tanh_mlp(theta, X.shape[1], width)
    xp = torch if isinstance(theta, torch.Tensor) else np
    return xp.einsum("knm,km->kn", _tanh_hidden(X, W, b), v) + c[:, None]


class LossGrad(NamedTuple):
    loss: float
    grad: np.ndarray  # (P,)


def tanh_mlp_mse(theta, X, y) -> LossGrad:
    """The loss L = (1/2n) sum_i (f(x_i) - y_i)^2 of the one-hidden-layer tanh network `tanh_mlp` and its
    gradient by hand-written backpropagation, in numpy (fast enough for thousands of full-batch steps).
    theta (m(d + 2) + 1,) in the layout of `tanh_mlp`; X (n, d), y (n,). Sections 9.4 (SAM) and 9.5 (edge of
    stability).
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


def tanh_mlp_grad_energy(X, y, width: int, noise_var: float, prior_var):
    """The minibatch energy gradient of `tanh_mlp` for `sampling.sgld`: a function ``grad_energy_batch(theta,
    idx)`` that returns, for parameters theta (chains, P) and minibatches idx (chains, B) of the n examples,

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


# ----------------------------------------------------------------------------- 9.4, 9.5 small classifiers and their training


def _relu_mlp(d: int, hidden: int, outputs: int, seed: int) -> nn.Sequential:
    """The network d-`hidden`-`outputs` with one hidden layer of ReLU units and PyTorch's default initialisation
    (weights and biases uniform on :math:`\\pm1/\\sqrt{\\text{fan-in}}`), drawn from a torch generator seeded with
    `seed` (torch's global generator is left alone), on `device()`. Sections 9.4 and 9.5."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = nn.Sequential(nn.Linear(d, hidden), nn.ReLU(), nn.Linear(hidden, outputs))
    return model.to(device())


def _binary_cross_entropy(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """The loss of a batch (X, y) for `train_steps`: the binary cross-entropy of the one logit model(X) against
    labels y in {0, 1} (floats)."""
    X, y = batch
    return nn.functional.binary_cross_entropy_with_logits(model(X).squeeze(-1), y)


def train_binary_classifier(
    model: nn.Module, X, y, *, steps: int = 400, lr: float = 1e-2, progress: bool = True
) -> np.ndarray:
    """Train a network with one output logit on a small two-class data set by full-batch Adam (step size lr) on
    the binary cross-entropy, :math:`-\\frac1n\\sum_i[y_i\\log\\sigma(f(x_i)) + (1 - y_i)\\log(1 - \\sigma(f(x_i)))]`,
    for `steps` steps of `train_steps` on the whole set (no DataLoader: for 200 points much faster). X (n, d),
    labels y (n,) in {0, 1}, moved once to the model's device. The model is changed in place and left in the
    mode it came in; returns the loss per step (steps,). Sections 9.4 (the PAC-Bayes network) and 9.5 (mode
    connectivity).
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    X = check_matrix(X, "X")
    y = check_labels(y, "y", len(X), values=(0, 1))
    steps = check_int(steps, "steps", 1)
    dev = model_device(model)
    dtype = next(model.parameters()).dtype
    batch = (torch.as_tensor(X, dtype=dtype, device=dev), torch.as_tensor(y, dtype=dtype, device=dev))
    optimizer = torch.optim.Adam(model.parameters(), lr=check_positive(lr, "lr"))
    return train_steps(
        model, _binary_cross_entropy, optimizer, itertools.repeat(batch), steps, progress=progress,
        desc="full-batch Adam",
    )  # fmt: skip


class _Parameters(nn.Module):
    """Tensors trained by `train_steps` that are not a network (a posterior's mean and log-variances, the control
    point of a curve): each keyword becomes an ``nn.Parameter`` of that name, in the order given."""

    def __init__(self, **tensors: torch.Tensor):
        super().__init__()
        for name, tensor in tensors.items():
            setattr(self, name, nn.Parameter(tensor))
