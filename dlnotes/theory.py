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
from torch import nn
from torch.func import functional_call

from .validation import check_callable, check_int, check_matrix, check_positive, check_rng

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


def _check_flat(theta, name: str = "theta") -> torch.Tensor:
    if not isinstance(theta, torch.Tensor) or theta.ndim != 1 or theta.numel() == 0:
        kind = f"shape {tuple(theta.shape)}" if isinstance(theta, torch.Tensor) else type(theta).__name__
        raise TypeError(f"{name} must be a non-empty 1-D torch tensor (a flat parameter vector), got {kind}")
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


# ----------------------------------------------------------------------------- 9.1 infinite width, lazy and rich training


# ----------------------------------------------------------------------------- 9.2 Bayesian inference


# ----------------------------------------------------------------------------- 9.2 sampling the posterior: Metropolis-Hastings, HMC, Langevin


# ----------------------------------------------------------------------------- 9.3 Gaussian processes and infinitely wide networks


# ----------------------------------------------------------------------------- 9.4 statistical learning theory: PAC, VC, Rademacher


# ----------------------------------------------------------------------------- 9.4 bias, variance, double descent, implicit bias


# ----------------------------------------------------------------------------- 9.4 PAC-Bayes and flat minima


# ----------------------------------------------------------------------------- 9.5 the loss landscape
