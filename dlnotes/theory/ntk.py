"""Section 9.1, notebook ``01_ntk``: the linearised network and the neural tangent kernel.

Tangent features and the empirical NTK of any network seen as a function of its flat parameter vector
(`common.flat_function`), the linearised network, gradient flow with a constant kernel in closed form, and
kernel regression in its dual form. The 2-layer network of the section, its hand-derived NTK and its gradient
descent are in `common` (notebook ``02_infinite_width`` uses them too).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import torch

from ..training import (
    to_numpy,
)
from ..validation import (
    check_array,
    check_callable,
    check_matrix,
    check_number,
    check_vector,
)
from .common import (
    _check_flat,
    _ntk_check_kernel,
)


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
