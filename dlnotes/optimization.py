"""Chapter 03 — optimization: backpropagation, gradient descent, momentum, adaptive methods, SGD.

Parameters are NumPy arrays ``theta`` (float64); a method takes a gradient function ``grad(theta)``.
Every optimizer step has one signature, ``step(theta, g, state, **hyper) -> Step(theta, state)``, with a dict
``state`` (empty at the start) that carries what the method remembers, so `run_optimizer` drives them all.
Step sizes are ``eta``; conventions follow ``torch.optim`` where torch has the method (epsilon added outside
the square root), so that each step matches torch's step for step. Iterates are returned stacked, ``xs[t]``.
The finite-difference gradient check is shared: ``dlnotes.checks.check_grad``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import torch

from .training import Step, to_numpy
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

# ----------------------------------------------------------------------------- validation


def _rate(value, name: str) -> float:
    """A momentum or decay rate in [0, 1)."""
    return check_number(value, name, 0, 1, high_open=True)


def _step_arguments(theta, g, eta) -> tuple[np.ndarray, np.ndarray, float]:
    theta = check_array(theta, "theta")
    return theta, check_array(g, "g", theta.shape), check_positive(eta, "eta")


# ----------------------------------------------------------------------------- gradients


class LossAndGradients(NamedTuple):
    loss: float
    grads: list[tuple[np.ndarray, np.ndarray]]  # (dL/dW_l, dL/db_l) for every layer


def mlp_forward_backward(X, y, params) -> LossAndGradients:
    """Loss and gradients of a tanh MLP with softmax cross-entropy, by hand-written backpropagation.

    Rows of X (N, n) are inputs, y (N,) integer labels, ``params = [(W1, b1), ..., (WL, bL)]`` with ``W_l``
    (m_l, m_{l-1}) and the last layer's m_L = the number of classes. Forward: ``x^l = tanh(W^l x^{l-1} + b^l)``, last layer linear; loss = mean cross-entropy.
    Backward: ``delta^l = dL/dx^l * phi'(z^l)``, ``dL/dW^l = delta^l (x^{l-1})^T``, ``dL/dx^{l-1} = (W^l)^T delta^l``.
    """
    X = check_matrix(X, "X")
    width, checked = X.shape[1], []
    for l, (W, b) in enumerate(params):
        W = check_matrix(W, f"W of layer {l + 1}", None, width)
        checked.append((W, check_vector(b, f"b of layer {l + 1}", len(W))))
        width = len(W)
    if not checked:
        raise ValueError("params must hold at least one layer (W, b)")
    params = checked
    y = check_labels(y, "y", len(X), n_classes=width)
    xs, zs = [X], []
    for l, (W, b) in enumerate(params):
        zs.append(xs[-1] @ W.T + b)
        xs.append(zs[-1] if l == len(params) - 1 else np.tanh(zs[-1]))
    z = xs[-1]
    log_p = z - z.max(axis=1, keepdims=True)
    log_p -= np.log(np.exp(log_p).sum(axis=1, keepdims=True))
    N = len(X)
    loss = -log_p[np.arange(N), y].mean()
    delta = np.exp(log_p)
    delta[np.arange(N), y] -= 1
    delta /= N  # dL/dz at the output: (softmax - onehot) / N
    grads = []
    for l in range(len(params) - 1, -1, -1):
        W, _ = params[l]
        grads.append((delta.T @ xs[l], delta.sum(axis=0)))
        if l > 0:
            delta = (delta @ W) * (1 - xs[l] ** 2)  # tanh' = 1 - tanh^2, in terms of the layer's output
    return LossAndGradients(float(loss), grads[::-1])


# ----------------------------------------------------------------------------- 3.2 gradient descent


def gd(grad: Callable, x0, eta: float, steps: int) -> np.ndarray:
    """Gradient descent ``x_{t+1} = x_t - eta grad(x_t)``; returns the iterates (steps+1, ...)."""
    x = check_array(x0, "x0")
    eta, steps = check_positive(eta, "eta"), check_int(steps, "steps", 1)
    xs = [x]
    for _ in range(steps):
        x = x - eta * grad(x)
        xs.append(x)
    return np.array(xs)


def newton(grad: Callable, hess: Callable, x0, steps: int) -> np.ndarray:
    """Newton's method ``x_{t+1} = x_t - [hess(x_t)]^{-1} grad(x_t)``; returns the iterates."""
    x = check_array(x0, "x0")
    xs = [x]
    for _ in range(check_int(steps, "steps", 1)):
        x = x - np.linalg.solve(hess(x), grad(x))
        xs.append(x)
    return np.array(xs)


class Problem(NamedTuple):
    """A test function with its derivatives and constants: L-smooth, and mu-strongly convex or mu-PL."""

    f: Callable
    grad: Callable
    hess: Callable
    L: float
    mu: float


def quadratic(kappa: float, dim: int = 2) -> Problem:
    """``f(x) = x^T Q x / 2`` with Q = diag of `dim` log-spaced eigenvalues from 1 to kappa: L = kappa, mu = 1."""
    kappa, dim = check_number(kappa, "kappa", 1), check_int(dim, "dim", 2)
    q = np.logspace(0, np.log10(kappa), dim)
    return Problem(lambda x: 0.5 * x @ (q * x), lambda x: q * x, lambda x: np.diag(q), kappa, 1.0)


def pl_example() -> Problem:
    """``f(x) = sum_i x_i^2 + 3 sin^2 x_i``: not convex, but Polyak–Łojasiewicz with mu = 1/32 and L = 8
    (f* = 0); the Hessian is diagonal, ``2 + 6 cos 2x_i``."""
    return Problem(
        lambda x: np.sum(x**2 + 3 * np.sin(x) ** 2),
        lambda x: 2 * x + 3 * np.sin(2 * x),
        lambda x: np.diag(np.atleast_1d(2 + 6 * np.cos(2 * x))),
        8.0,
        1 / 32,
    )


# ----------------------------------------------------------------------------- 3.3 momentum


def heavy_ball(grad: Callable, x0, eta: float, beta: float, steps: int) -> np.ndarray:
    """Polyak's heavy ball ``x_{t+1} = x_t - eta grad(x_t) + beta (x_t - x_{t-1})`` with ``x_{-1} = x_0``."""
    x = check_array(x0, "x0")
    eta, beta = check_positive(eta, "eta"), _rate(beta, "beta")
    xs, previous = [x], x
    for _ in range(check_int(steps, "steps", 1)):
        x, previous = x - eta * grad(x) + beta * (x - previous), x
        xs.append(x)
    return np.array(xs)


def nesterov(grad: Callable, x0, eta: float, beta, steps: int) -> np.ndarray:
    """Nesterov's method: look ahead ``y = x_t + beta_t (x_t - x_{t-1})``, then ``x_{t+1} = y - eta grad(y)``.

    `beta` is a constant in [0, 1) (strongly convex functions: ``(sqrt(kappa) - 1) / (sqrt(kappa) + 1)``) or a
    function of the step t = 1, 2, ... (convex functions: ``lambda t: (t - 1) / (t + 2)``).
    """
    x = check_array(x0, "x0")
    eta = check_positive(eta, "eta")
    if not callable(beta):
        constant = _rate(beta, "beta")
        beta = lambda t: constant  # noqa: E731
    xs, previous = [x], x
    for t in range(1, check_int(steps, "steps", 1) + 1):
        look_ahead = x + _rate(beta(t), "beta(t)") * (x - previous)
        x, previous = look_ahead - eta * grad(look_ahead), x
        xs.append(x)
    return np.array(xs)


# ----------------------------------------------------------------------------- 3.4 adaptive methods


def adagrad_step(theta, g, state: dict, eta: float, eps: float = 1e-10):
    """AdaGrad: ``gamma += g^2``, ``theta -= eta g / (sqrt(gamma) + eps)`` (torch.optim.Adagrad's placement of eps)."""
    theta, g, eta = _step_arguments(theta, g, eta)
    state["gamma"] = state.get("gamma", 0.0) + g**2
    return Step(theta - eta * g / (np.sqrt(state["gamma"]) + eps), state)


def rmsprop_step(theta, g, state: dict, eta: float, beta: float = 0.99, eps: float = 1e-8):
    """RMSProp: ``v = beta v + (1 - beta) g^2``, ``theta -= eta g / (sqrt(v) + eps)`` (torch calls beta alpha)."""
    theta, g, eta = _step_arguments(theta, g, eta)
    beta = _rate(beta, "beta")
    state["v"] = beta * state.get("v", 0.0) + (1 - beta) * g**2
    return Step(theta - eta * g / (np.sqrt(state["v"]) + eps), state)


def adam_step(theta, g, state: dict, eta: float, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8):
    """Adam with bias correction: ``m = beta1 m + (1 - beta1) g``, ``v = beta2 v + (1 - beta2) g^2``,
    ``m_hat = m / (1 - beta1^t)``, ``v_hat = v / (1 - beta2^t)``, ``theta -= eta m_hat / (sqrt(v_hat) + eps)``."""
    theta, g, eta = _step_arguments(theta, g, eta)
    beta1, beta2 = _rate(beta1, "beta1"), _rate(beta2, "beta2")
    t = state["t"] = state.get("t", 0) + 1
    state["m"] = beta1 * state.get("m", 0.0) + (1 - beta1) * g
    state["v"] = beta2 * state.get("v", 0.0) + (1 - beta2) * g**2
    m_hat, v_hat = state["m"] / (1 - beta1**t), state["v"] / (1 - beta2**t)
    return Step(theta - eta * m_hat / (np.sqrt(v_hat) + eps), state)


def sign_sgd_step(theta, g, state: dict, eta: float):
    """signSGD ``theta -= eta sign(g)``: steepest descent for the max-norm (no state)."""
    theta, g, eta = _step_arguments(theta, g, eta)
    return Step(theta - eta * np.sign(g), state)


def run_optimizer(step: Callable, grad: Callable, x0, steps: int, **hyper) -> np.ndarray:
    """Iterate ``step(theta, g, state, **hyper) -> (theta, state)`` from x0, with ``g = grad(theta)`` and an empty
    state at the start; returns the iterates (steps+1, ...)."""
    check_callable(step, "step")
    check_callable(grad, "grad")
    x, state = check_array(x0, "x0"), {}
    xs = [x]
    for _ in range(check_int(steps, "steps", 1)):
        x, state = step(x, grad(x), state, **hyper)
        xs.append(x)
    return np.array(xs)


def orthogonalize(G, method: str = "svd", steps: int = 30) -> np.ndarray:
    """The polar factor ``U V^T`` of ``G = U S V^T`` (all singular values set to 1).

    ``method="newton_schulz"`` iterates ``X <- 3/2 X - 1/2 X X^T X`` from ``G / ||G||_F`` instead of an SVD.
    """
    G = check_matrix(G, "G")
    if check_choice(method, "method", ("svd", "newton_schulz")) == "svd":
        U, _, Vt = np.linalg.svd(G, full_matrices=False)
        return U @ Vt
    X = G / np.linalg.norm(G)
    for _ in range(check_int(steps, "steps", 1)):
        X = 1.5 * X - 0.5 * X @ X.T @ X
    return X


def muon_step(W, G, state: dict, eta: float, beta: float = 0.95, orthogonalizer: Callable = orthogonalize):
    """Muon: ``M = beta M + G``, ``W -= eta sqrt(d_out / d_in) orth(M)`` for a weight matrix W (d_out, d_in),
    with the momentum matrix M in ``state["M"]``.

    `orthogonalizer` maps M to (an approximation of) its polar factor. ``torch.optim.Muon`` differs in
    conventions, not in the direction of the step: it averages ``M = beta M + (1 - beta) G`` (the same polar
    factor), scales by ``sqrt(max(1, d_out / d_in))``, and orthogonalises with five quintic Newton–Schulz steps
    in bfloat16 (singular values only near 1).
    """
    W, G, eta = _step_arguments(W, G, eta)
    if W.ndim != 2:
        raise ValueError(f"W must be a matrix (d_out, d_in), got shape {W.shape}")
    state["M"] = M = _rate(beta, "beta") * state.get("M", 0.0) + G
    d_out, d_in = W.shape
    return Step(W - eta * np.sqrt(d_out / d_in) * orthogonalizer(M), state)


def _torch_muon_module():
    """torch's Muon module, whose orthogonaliser is private API: the one place that reaches for it."""
    try:
        import torch.optim._muon as muon
    except ImportError:
        muon = None
    if muon is None or not hasattr(muon, "_zeropower_via_newtonschulz"):
        raise RuntimeError(
            f"comparing with torch.optim.Muon needs torch >= 2.9 as this book was tested with, got torch {torch.__version__}"
        )
    return muon


def torch_newton_schulz(G, steps: int = 5) -> np.ndarray:
    """The orthogonaliser of ``torch.optim.Muon``: `steps` quintic Newton–Schulz steps in bfloat16, with torch's
    default coefficients, applied to a matrix G."""
    muon = _torch_muon_module()
    G = torch.from_numpy(check_matrix(G, "G"))
    coefficients = (muon.DEFAULT_A, muon.DEFAULT_B, muon.DEFAULT_C)
    X = muon._zeropower_via_newtonschulz(G, coefficients, check_int(steps, "steps", 1), 1e-7)
    return to_numpy(X.double())  # computed in bfloat16


@contextlib.contextmanager
def torch_muon_with_exact_polar_factor():
    """Within this block, ``torch.optim.Muon`` orthogonalises with the exact polar factor ``U V^T`` (an SVD) instead
    of its bfloat16 Newton–Schulz steps, so that it can be compared with `muon_step` step for step."""
    muon = _torch_muon_module()

    def exact_polar(M, *_):
        U, _, Vt = torch.linalg.svd(M, full_matrices=False)
        return U @ Vt

    original = muon._zeropower_via_newtonschulz
    muon._zeropower_via_newtonschulz = exact_polar
    try:
        yield
    finally:
        muon._zeropower_via_newtonschulz = original


def torch_path(make_optimizer: Callable, grad: Callable, x0, steps: int) -> np.ndarray:
    """Iterates of a ``torch.optim`` optimizer, ``make_optimizer([x])``, driven by the NumPy gradient
    function `grad` in float64: for comparing the from-scratch methods above with torch step for step."""
    x = torch.tensor(check_array(x0, "x0"), requires_grad=True)
    optimizer = make_optimizer([x])
    xs = [to_numpy(x).copy()]
    for _ in range(check_int(steps, "steps", 1)):
        x.grad = torch.from_numpy(np.asarray(grad(to_numpy(x).copy()), dtype=np.float64))
        optimizer.step()
        xs.append(to_numpy(x).copy())
    return np.array(xs)


def iterations_to(xs, tol: float = 1e-8) -> float:
    """First t with ``||x_t|| <= tol ||x_0||`` for iterates (T, d) converging to 0; ``inf`` if none does."""
    xs = check_array(xs, "xs", (None, None), finite=False)  # iterates (T, d), perhaps diverging
    reached = np.linalg.norm(xs, axis=1) <= tol * np.linalg.norm(xs[0])
    return int(np.argmax(reached)) if reached.any() else np.inf


# ----------------------------------------------------------------------------- 3.5 SGD


def sgd(
    grad_i: Callable, n: int, x0, schedule: Callable, steps: int, batch_size: int = 1, rng=None
) -> np.ndarray:
    """Stochastic gradient descent ``x_{t+1} = x_t - eta_t grad_i(x_t, B_t)`` with ``eta_t = schedule(t)``
    (t = 1, 2, ...) and batches B_t of `batch_size` indices drawn uniformly with replacement from 0..n-1;
    ``grad_i(x, idx)`` returns the mean gradient of the examples idx."""
    check_callable(grad_i, "grad_i")
    check_callable(schedule, "schedule")
    x = check_array(x0, "x0")
    n, batch_size = check_int(n, "n", 1), check_int(batch_size, "batch_size", 1)
    rng = check_rng(rng)
    xs = [x]
    for t in range(1, check_int(steps, "steps", 1) + 1):
        idx = rng.integers(n, size=batch_size)
        x = x - schedule(t) * grad_i(x, idx)
        xs.append(x)
    return np.array(xs)


def polyak_average(xs, beta: float | None = None) -> np.ndarray:
    """Running averages of the iterates: ``mean(x_1..x_t)`` or, with beta, ``xbar_t = (1-beta) xbar_{t-1} + beta x_t``."""
    xs = check_array(xs, "xs")
    if beta is None:
        return np.cumsum(xs, axis=0) / np.arange(1, len(xs) + 1).reshape(-1, *[1] * (xs.ndim - 1))
    beta = check_number(beta, "beta", 0, 1, low_open=True)
    out = np.empty_like(xs)
    out[0] = xs[0]
    for t in range(1, len(xs)):
        out[t] = (1 - beta) * out[t - 1] + beta * xs[t]
    return out


def rosenbrock(x) -> float:
    """``(1 - x_1)^2 + 100 (x_2 - x_1^2)^2``, minimum 0 at (1, 1): a curved valley."""
    x = check_array(x, "x", (2,), finite=False)
    return float((1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2)


def rosenbrock_grad(x) -> np.ndarray:
    """The gradient of `rosenbrock`."""
    x = check_array(x, "x", (2,), finite=False)
    return np.array([-2 * (1 - x[0]) - 400 * x[0] * (x[1] - x[0] ** 2), 200 * (x[1] - x[0] ** 2)])
