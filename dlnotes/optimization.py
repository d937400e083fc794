"""Chapter 03 — optimization: backpropagation, gradient descent, momentum, adaptive methods, SGD.

Parameters are NumPy arrays ``theta`` (float64); a method takes a gradient function ``grad(theta)``
(and, for the adaptive steps, a ``state`` dict it updates). Iterates are returned stacked, ``xs[t]``.
Conventions follow ``torch.optim`` where torch has the method (epsilon added outside the square root).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .validation import as_array, positive, positive_int

# ----------------------------------------------------------------------------- validation


def _rate(value, name: str) -> float:
    if not np.isscalar(value) or not 0 <= value < 1:
        raise ValueError(f"{name} must lie in [0, 1), got {value!r}")
    return float(value)


def _pair(theta, g, lr) -> tuple[np.ndarray, np.ndarray]:
    theta, g = as_array(theta, "theta"), as_array(g, "g")
    if theta.shape != g.shape:
        raise ValueError(f"g must have the shape of theta {theta.shape}, got {g.shape}")
    positive(lr, "lr")
    return theta, g


# ----------------------------------------------------------------------------- gradients


def numerical_gradient(f: Callable, x, eps: float = 1e-6) -> np.ndarray:
    """Central differences ``(f(x + eps e_i) - f(x - eps e_i)) / (2 eps)`` for every entry of x (any shape)."""
    x = as_array(x, "x")
    eps = positive(eps, "eps")
    g = np.empty_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        g[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return g


def check_grad(f: Callable, grad, x, eps: float = 1e-6) -> float:
    """Largest deviation of the gradient `grad` (an array, or a function of x) from central differences of f
    at x, relative to the largest gradient entry: ``max|g - g_num| / max|g_num|``."""
    x = as_array(x, "x")
    g = np.asarray(grad(x) if callable(grad) else grad, dtype=np.float64)
    if g.shape != x.shape:
        raise ValueError(f"the gradient must have the shape of x {x.shape}, got {g.shape}")
    g_num = numerical_gradient(f, x, eps)
    return float(np.max(np.abs(g - g_num)) / max(np.max(np.abs(g_num)), np.finfo(float).tiny))


def mlp_forward_backward(params, X, y) -> tuple[float, list[tuple[np.ndarray, np.ndarray]]]:
    """Loss and gradients of a tanh MLP with softmax cross-entropy, by hand-written backpropagation.

    ``params = [(W1, b1), ..., (WL, bL)]``, ``W_l`` (m_l, m_{l-1}); rows of X (N, n) are inputs, y (N,)
    integer labels. Forward: ``x^l = tanh(W^l x^{l-1} + b^l)``, last layer linear; loss = mean cross-entropy.
    Backward: ``delta^l = dL/dx^l * phi'(z^l)``, ``dL/dW^l = delta^l (x^{l-1})^T``, ``dL/dx^{l-1} = (W^l)^T delta^l``.
    """
    X = as_array(X, "X")
    y = np.asarray(y)
    if X.ndim != 2 or y.shape != (len(X),) or not np.issubdtype(y.dtype, np.integer):
        raise ValueError(f"X must be (N, n) and y (N,) integer labels, got {X.shape} and {y.shape} {y.dtype}")
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
    return float(loss), grads[::-1]


# ----------------------------------------------------------------------------- 3.2 gradient descent


def gd(grad: Callable, x0, eta: float, steps: int) -> np.ndarray:
    """Gradient descent ``x_{t+1} = x_t - eta grad(x_t)``; returns the iterates (steps+1, ...)."""
    x = as_array(x0, "x0")
    eta, steps = positive(eta, "eta"), positive_int(steps, "steps")
    xs = [x]
    for _ in range(steps):
        x = x - eta * grad(x)
        xs.append(x)
    return np.array(xs)


def newton(grad: Callable, hess: Callable, x0, steps: int) -> np.ndarray:
    """Newton's method ``x_{t+1} = x_t - [hess(x_t)]^{-1} grad(x_t)``; returns the iterates."""
    x = as_array(x0, "x0")
    xs = [x]
    for _ in range(positive_int(steps, "steps")):
        x = x - np.linalg.solve(hess(x), grad(x))
        xs.append(x)
    return np.array(xs)


def quadratic(kappa: float, dim: int = 2):
    """``f(x) = x^T Q x / 2`` with Q = diag of `dim` log-spaced eigenvalues from 1 to kappa.

    Returns ``(f, grad, hess, L, mu)`` with ``L = kappa``, ``mu = 1``.
    """
    if not np.isscalar(kappa) or kappa < 1:
        raise ValueError(f"kappa must be a number >= 1, got {kappa!r}")
    if not isinstance(dim, (int, np.integer)) or dim < 2:
        raise ValueError(f"dim must be an int >= 2, got {dim!r}")
    q = np.logspace(0, np.log10(kappa), dim)
    return (lambda x: 0.5 * x @ (q * x)), (lambda x: q * x), (lambda x: np.diag(q)), float(kappa), 1.0


def pl_example():
    """``f(x) = x^2 + 3 sin^2 x``: not convex, but Polyak–Łojasiewicz with mu = 1/32 and L = 8 (f* = 0).

    Returns ``(f, grad, L, mu)``; f and grad act elementwise (f sums).
    """
    return (lambda x: np.sum(x**2 + 3 * np.sin(x) ** 2)), (lambda x: 2 * x + 3 * np.sin(2 * x)), 8.0, 1 / 32


# ----------------------------------------------------------------------------- 3.3 momentum


def heavy_ball(grad: Callable, x0, eta: float, beta: float, steps: int) -> np.ndarray:
    """Polyak's heavy ball ``x_{t+1} = x_t - eta grad(x_t) + beta (x_t - x_{t-1})`` with ``x_{-1} = x_0``."""
    x = as_array(x0, "x0")
    eta, beta = positive(eta, "eta"), _rate(beta, "beta")
    xs, previous = [x], x
    for _ in range(positive_int(steps, "steps")):
        x, previous = x - eta * grad(x) + beta * (x - previous), x
        xs.append(x)
    return np.array(xs)


def nesterov(grad: Callable, x0, eta: float, beta: float, steps: int) -> np.ndarray:
    """Nesterov's method: look ahead ``y = x_t + beta (x_t - x_{t-1})``, then ``x_{t+1} = y - eta grad(y)``."""
    x = as_array(x0, "x0")
    eta, beta = positive(eta, "eta"), _rate(beta, "beta")
    xs, previous = [x], x
    for _ in range(positive_int(steps, "steps")):
        look_ahead = x + beta * (x - previous)
        x, previous = look_ahead - eta * grad(look_ahead), x
        xs.append(x)
    return np.array(xs)


# ----------------------------------------------------------------------------- 3.4 adaptive methods


def adagrad_step(theta, g, state: dict, lr: float, eps: float = 1e-10):
    """AdaGrad: ``gamma += g^2``, ``theta -= lr g / (sqrt(gamma) + eps)`` (torch.optim.Adagrad's placement of eps)."""
    theta, g = _pair(theta, g, lr)
    state["gamma"] = state.get("gamma", 0.0) + g**2
    return theta - lr * g / (np.sqrt(state["gamma"]) + eps), state


def rmsprop_step(theta, g, state: dict, lr: float, alpha: float = 0.99, eps: float = 1e-8):
    """RMSProp: ``v = alpha v + (1 - alpha) g^2``, ``theta -= lr g / (sqrt(v) + eps)`` (torch calls the decay alpha)."""
    theta, g = _pair(theta, g, lr)
    state["v"] = alpha * state.get("v", 0.0) + (1 - alpha) * g**2
    return theta - lr * g / (np.sqrt(state["v"]) + eps), state


def adam_step(theta, g, state: dict, lr: float, betas=(0.9, 0.999), eps: float = 1e-8):
    """Adam with bias correction: ``m_hat = m / (1 - beta1^t)``, ``v_hat = v / (1 - beta2^t)``,
    ``theta -= lr m_hat / (sqrt(v_hat) + eps)``."""
    theta, g = _pair(theta, g, lr)
    beta1, beta2 = betas
    t = state["t"] = state.get("t", 0) + 1
    state["m"] = beta1 * state.get("m", 0.0) + (1 - beta1) * g
    state["v"] = beta2 * state.get("v", 0.0) + (1 - beta2) * g**2
    m_hat, v_hat = state["m"] / (1 - beta1**t), state["v"] / (1 - beta2**t)
    return theta - lr * m_hat / (np.sqrt(v_hat) + eps), state


def sign_sgd_step(theta, g, lr: float):
    """signSGD ``theta -= lr sign(g)``: steepest descent for the max-norm."""
    theta, g = _pair(theta, g, lr)
    return theta - lr * np.sign(g)


def run_optimizer(step: Callable, grad: Callable, x0, steps: int, **hyper) -> np.ndarray:
    """Iterate an adaptive ``step(theta, g, state, **hyper)`` from x0; returns the iterates (steps+1, ...)."""
    x, state = as_array(x0, "x0"), {}
    xs = [x]
    for _ in range(positive_int(steps, "steps")):
        x, state = step(x, grad(x), state, **hyper)
        xs.append(x)
    return np.array(xs)


def orthogonalize(G, method: str = "svd", steps: int = 30) -> np.ndarray:
    """The polar factor ``U V^T`` of ``G = U S V^T`` (all singular values set to 1).

    ``method="newton_schulz"`` iterates ``X <- 3/2 X - 1/2 X X^T X`` from ``G / ||G||_F`` instead of an SVD.
    """
    G = as_array(G, "G")
    if G.ndim != 2:
        raise ValueError(f"G must be a matrix, got shape {G.shape}")
    if method == "svd":
        U, _, Vt = np.linalg.svd(G, full_matrices=False)
        return U @ Vt
    if method != "newton_schulz":
        raise ValueError(f"method must be 'svd' or 'newton_schulz', got {method!r}")
    X = G / np.linalg.norm(G)
    for _ in range(positive_int(steps, "steps")):
        X = 1.5 * X - 0.5 * X @ X.T @ X
    return X


def muon_step(W, G, M, lr: float, mu: float = 0.95, orthogonalizer: Callable = orthogonalize):
    """Muon: ``M = mu M + G``, ``W -= lr sqrt(d_out / d_in) orth(M)`` for a weight matrix W (d_out, d_in).

    Returns ``(W, M)``. `orthogonalizer` maps M to (an approximation of) its polar factor.
    ``torch.optim.Muon`` differs in conventions, not in the direction of the step: it averages
    ``M = mu M + (1 - mu) G`` (the same polar factor), scales by ``sqrt(max(1, d_out / d_in))``, and
    orthogonalises with five quintic Newton–Schulz steps in bfloat16 (singular values only near 1).
    """
    W, G, M = as_array(W, "W"), as_array(G, "G"), as_array(M, "M")
    if W.ndim != 2 or G.shape != W.shape or M.shape != W.shape:
        raise ValueError(f"W, G and M must be matrices of one shape, got {W.shape}, {G.shape}, {M.shape}")
    M = mu * M + G
    d_out, d_in = W.shape
    return W - lr * np.sqrt(d_out / d_in) * orthogonalizer(M), M


def torch_path(make_optimizer: Callable, grad: Callable, x0, steps: int) -> np.ndarray:
    """Iterates of a ``torch.optim`` optimizer, ``make_optimizer([x])``, driven by the NumPy gradient
    function `grad` in float64: for comparing the from-scratch methods above with torch step for step."""
    import torch

    x = torch.tensor(as_array(x0, "x0"), requires_grad=True)
    optimizer = make_optimizer([x])
    xs = [x.detach().numpy().copy()]
    for _ in range(positive_int(steps, "steps")):
        x.grad = torch.from_numpy(np.asarray(grad(x.detach().numpy().copy()), dtype=np.float64))
        optimizer.step()
        xs.append(x.detach().numpy().copy())
    return np.array(xs)


def iterations_to(xs, tol: float = 1e-8) -> float:
    """First t with ``||x_t|| <= tol ||x_0||`` for iterates (T, d) converging to 0; ``inf`` if none does."""
    xs = as_array(xs, "xs")
    if xs.ndim != 2:
        raise ValueError(f"xs must be iterates of shape (T, d), got {xs.shape}")
    reached = np.linalg.norm(xs, axis=1) <= tol * np.linalg.norm(xs[0])
    return int(np.argmax(reached)) if reached.any() else np.inf


# ----------------------------------------------------------------------------- 3.5 SGD


def sgd(grad_i: Callable, n: int, x0, schedule: Callable, steps: int, batch: int = 1, rng=None) -> np.ndarray:
    """Stochastic gradient descent ``x_{t+1} = x_t - eta_t mean_{i in B_t} grad_i(x_t, i)`` with ``eta_t =
    schedule(t)`` (t = 1, 2, ...) and batches of `batch` indices drawn uniformly with replacement from 0..n-1."""
    x = as_array(x0, "x0")
    if not isinstance(batch, (int, np.integer)) or batch < 1:
        raise ValueError(f"batch must be a positive int, got {batch!r}")
    rng = np.random.default_rng(rng)
    xs = [x]
    for t in range(1, positive_int(steps, "steps") + 1):
        idx = rng.integers(n, size=batch)
        x = x - schedule(t) * grad_i(x, idx)
        xs.append(x)
    return np.array(xs)


def polyak_average(xs, beta: float | None = None) -> np.ndarray:
    """Running averages of the iterates: ``mean(x_1..x_t)`` or, with beta, ``xbar_t = (1-beta) xbar_{t-1} + beta x_t``."""
    xs = as_array(xs, "xs")
    if beta is None:
        return np.cumsum(xs, axis=0) / np.arange(1, len(xs) + 1).reshape(-1, *[1] * (xs.ndim - 1))
    if not 0 < beta <= 1:
        raise ValueError(f"beta must lie in (0, 1], got {beta!r}")
    out = np.empty_like(xs)
    out[0] = xs[0]
    for t in range(1, len(xs)):
        out[t] = (1 - beta) * out[t - 1] + beta * xs[t]
    return out


def rosenbrock(x) -> float:
    """``(1 - x_1)^2 + 100 (x_2 - x_1^2)^2``, minimum 0 at (1, 1): a curved valley."""
    return float((1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2)


def rosenbrock_grad(x) -> np.ndarray:
    return np.array([-2 * (1 - x[0]) - 400 * x[0] * (x[1] - x[0] ** 2), 200 * (x[1] - x[0] ** 2)])
