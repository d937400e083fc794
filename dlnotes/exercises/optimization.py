"""Graded exercises of chapter 03 — optimization."""

from __future__ import annotations

import numpy as np

from ..checks import numerical_gradient
from .core import Hint, close, grader


def cubic_sum(x):
    return np.sum(x**3)


def sin_product(x):
    return np.sin(x[0]) * np.cos(x[-1]) + x @ x


def _gradient_cases(rng):
    return [
        (cubic_sum, rng.normal(size=3), 1e-4),
        (sin_product, rng.normal(size=4), 1e-3),
        (np.exp, np.array(0.5), 1e-4),
    ]


def _forward_difference(f, x, h):
    x = np.asarray(x, dtype=float)
    g = np.empty_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = h
        g[i] = (f(x + e) - f(x)) / h
    return g


grade_numerical_gradient = grader(
    "numerical_gradient",
    "f, x, h",
    lambda f, x, h: numerical_gradient(f, x, eps=h),
    _gradient_cases,
    hints=(
        Hint(
            lambda a, e, g: close(_forward_difference(*a), g),
            "(f(x + h e_i) - f(x)) / h has an error of order h: use the central difference "
            "(f(x + h e_i) - f(x - h e_i)) / (2h).",
        ),
        Hint(
            lambda a, e, g: close(2 * e, g),
            "the central difference divides by 2h, the distance between its points.",
        ),
    ),
    mistakes=(
        (_forward_difference, "central difference"),
        (lambda f, x, h: 2 * numerical_gradient(f, x, eps=h), "divides by 2h"),
    ),
)


def _linear_cases(rng):
    return [
        (rng.normal(size=(m, n)), rng.normal(size=n), rng.normal(size=m)) for m, n in [(4, 4), (3, 5), (4, 2)]
    ]


grade_linear_backward = grader(
    "linear_backward",
    "W, x, grad_z",
    lambda W, x, grad_z: (np.outer(grad_z, x), W.T @ grad_z),
    _linear_cases,
    hints=(
        Hint(
            lambda a, e, g: close(np.outer(a[1], a[2]), g[0]),
            "the gradient with respect to W is grad_z x^T: it has the shape of W, one row per output.",
        ),
        Hint(
            lambda a, e, g: close(a[0] @ a[2], g[1]),
            "the error flows back through the transpose: W^T grad_z.",
        ),
    ),
    mistakes=(
        (lambda W, x, grad_z: (np.outer(x, grad_z), W.T @ grad_z), "one row per output"),
        (lambda W, x, grad_z: (np.outer(grad_z, x), W @ grad_z), "through the transpose"),
    ),
)


def _newton_cases(rng):
    cases = []
    for n in (2, 3, 5):
        A = rng.normal(size=(n, n))
        cases.append((rng.normal(size=n), rng.normal(size=n), A @ A.T + n * np.eye(n)))
    return cases


grade_newton_step = grader(
    "newton_step",
    "theta, g, H",
    lambda theta, g, H: theta - np.linalg.solve(H, g),
    _newton_cases,
    hints=(
        Hint(
            lambda a, e, g: close(a[0] + np.linalg.solve(a[2], a[1]), g),
            "Newton steps against the gradient: minus.",
        ),
        Hint(
            lambda a, e, g: close(a[0] - a[2] @ a[1], g),
            "the step is H^-1 g, the solution d of H d = g (np.linalg.solve), not H g.",
        ),
    ),
    mistakes=(
        (lambda theta, g, H: theta + np.linalg.solve(H, g), "against the gradient"),
        (lambda theta, g, H: theta - H @ g, "H d = g"),
    ),
)


def adam_update_reference(theta, g, m, v, t, eta, beta1, beta2, eps):
    """Step t of Adam: the averages m and v, their bias corrections, and the new parameters."""
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g**2
    m_hat, v_hat = m / (1 - beta1**t), v / (1 - beta2**t)
    return theta - eta * m_hat / (np.sqrt(v_hat) + eps), m, v


def _adam_cases(rng):
    cases = []
    for t in (1, 2, 10, 1000):  # m and v start at zero; later they hold earlier gradients
        m, v = (np.zeros(4), np.zeros(4)) if t == 1 else (rng.normal(size=4), rng.random(4))
        cases.append((rng.normal(size=4), rng.normal(size=4), m, v, t, 1e-3, 0.9, 0.999, 1e-8))
    return cases


def _no_bias_correction(theta, g, m, v, t, eta, beta1, beta2, eps):
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g**2
    return theta - eta * m / (np.sqrt(v) + eps), m, v


def _uphill(theta, g, m, v, t, eta, beta1, beta2, eps):
    new_theta, m, v = adam_update_reference(theta, g, m, v, t, eta, beta1, beta2, eps)
    return 2 * theta - new_theta, m, v


grade_adam_update = grader(
    "adam_update",
    "theta, g, m, v, t, eta, beta1, beta2, eps",
    adam_update_reference,
    _adam_cases,
    hints=(
        Hint(
            lambda a, e, g: close(_no_bias_correction(*a), g),
            "correct the averages for starting at zero: m / (1 - beta1^t) and v / (1 - beta2^t).",
        ),
        Hint(
            lambda a, e, g: close(2 * a[0] - e[0], g[0]),
            "Adam steps against the gradient: theta minus the step.",
        ),
        Hint(
            lambda a, e, g: not close(e[1], g[1]) or not close(e[2], g[2]), "update m and v first, then step."
        ),
    ),
    mistakes=((_no_bias_correction, "correct the averages"), (_uphill, "against the gradient")),
)


def warmup_cosine_reference(t, T, T_w, eta_max):
    """Linear warm-up eta_max (t + 1) / T_w for the steps t < T_w, then eta_max / 2 (1 + cos(pi (t - T_w) / (T - T_w)))."""
    t = np.asarray(t, dtype=float)
    return np.where(
        t < T_w, eta_max * (t + 1) / T_w, eta_max / 2 * (1 + np.cos(np.pi * (t - T_w) / (T - T_w)))
    )


def _schedule_cases(rng):
    return [
        (np.arange(500), 500, 50, 0.1),
        (np.arange(100), 100, 10, 3e-4),
        (np.array([0, 9, 10, 99]), 100, 10, 1.0),
    ]


grade_warmup_cosine = grader(
    "warmup_cosine",
    "t, T, T_w, eta_max",
    warmup_cosine_reference,
    _schedule_cases,
    hints=(
        Hint(
            lambda a, e, g: close(e[a[0] >= a[2]], np.asarray(g)[a[0] >= a[2]]),
            "the decay is right; the warm-up rises linearly, eta_max (t + 1) / T_w for t < T_w.",
        ),
        Hint(
            lambda a, e, g: close(e[a[0] < a[2]], np.asarray(g)[a[0] < a[2]]),
            "the warm-up is right; the cosine goes from eta_max to 0: eta_max / 2 (1 + cos(pi (t - T_w) / (T - T_w))).",
        ),
    ),
    mistakes=(
        (
            lambda t, T, T_w, eta_max: eta_max / 2 * (1 + np.cos(np.pi * (t - T_w) / (T - T_w))),
            "the warm-up rises linearly",
        ),
        (
            lambda t, T, T_w, eta_max: np.where(
                t < T_w, eta_max * (t + 1) / T_w, eta_max * np.cos(np.pi * (t - T_w) / (T - T_w))
            ),
            "the cosine goes from eta_max to 0",
        ),
    ),
)
