"""Graded exercises of chapter 11 — ethics: robustness, interpretability, fairness."""

from __future__ import annotations

import itertools
import math

import numpy as np

from ..ethics import (
    clip_and_noise,
    dual_norm,
    fairness_gaps,
    ibp_affine,
    multiclass_min_l2,
    pgd_step,
    robust_logistic_loss,
    shapley_exact,
)
from .core import Hint, close, grader

# ----------------------------------------------------------------------------- 11.1 threat model and norms


def _dual_norm_cases(rng):
    chosen = (np.array([3.0, -4.0, 0.0, 1.0]), math.inf)  # ||w||_1 = 8, ||w||_inf = 4, ||w||_2 = 5.10
    cases = [chosen, (np.array([3.0, -4.0, 0.0, 1.0]), 1)]
    for p in (3, 1.5, 2, math.inf, 1, 4):
        cases.append((rng.normal(size=int(rng.integers(3, 12))), p))
    return cases


def _power_sum(w, p):
    q = 1.0 if p == math.inf else math.inf if p == 1 else p / (p - 1)
    return float(np.abs(w).max()) if q == math.inf else float(np.sum(np.abs(w) ** q))


grade_dual_norm = grader(
    "dual_norm",
    "w, p",
    dual_norm,
    _dual_norm_cases,
    hints=(
        Hint(
            lambda a, e, g: close(np.linalg.norm(a[0], ord=a[1]), g),
            "that is ||w||_p, the norm of the ball itself. The maximum of w^T delta over ||delta||_p <= 1 is the "
            "*dual* norm ||w||_q with 1/p + 1/q = 1: an l_inf budget pairs with ||w||_1, an l_1 budget with "
            "||w||_inf.",
        ),
        Hint(
            lambda a, e, g: a[1] == math.inf and close(np.sum(a[0]), g),
            "take absolute values: delta = sign(w) collects sum_i |w_i| = ||w||_1; sum_i w_i lets negative "
            "weights cancel positive ones.",
        ),
        Hint(
            lambda a, e, g: close(_power_sum(a[0], a[1]), g),
            "take the root: ||w||_q = (sum_i |w_i|^q)^(1/q) is homogeneous of degree 1 (||2w||_q = 2||w||_q).",
        ),
    ),
    mistakes=(
        (lambda w, p: float(np.linalg.norm(w, ord=p)), "norm of the ball itself"),
        (lambda w, p: float(np.sum(w)) if p == math.inf else dual_norm(w, p), "take absolute values"),
        (lambda w, p: _power_sum(w, p), "take the root"),
    ),
)


# ----------------------------------------------------------------------------- 11.2 linear classifiers


def _multiclass_min_l2_one(x, W, b):
    """The book's answer for one input: `multiclass_min_l2` of the row x."""
    return multiclass_min_l2(np.asarray(x, float)[None], W, b)[0]


def _multiclass_step(x, W, b, pick="distance", power=2, sign=-1.0):
    """Variants of the step to the nearest boundary: the class j picked by the smallest distance or margin,
    the direction divided by ||w_y - w_j|| to the given power, and its sign."""
    scores = W @ x + b
    y = int(scores.argmax())
    gaps = np.linalg.norm(W[y] - W, axis=1)
    margins = scores[y] - scores
    key = margins / np.where(gaps > 0, gaps, 1.0) if pick == "distance" else margins.copy()
    key[y] = np.inf
    j = int(key.argmin())
    return sign * margins[j] / gaps[j] ** power * (W[y] - W[j])


def _multiclass_cases(rng):
    # smallest margin (class 2, m = 0.5) is not the nearest boundary (class 1, distance 1/4 < 0.5/0.5 = 1)
    chosen = (np.zeros(2), np.array([[0.0, 0.0], [-4.0, 0.0], [0.0, -0.5]]), np.array([1.0, 0.0, 0.5]))
    cases = [chosen]
    for K, d in ((3, 4), (5, 6), (10, 8)):
        W = rng.normal(size=(K, d)) * rng.uniform(0.2, 3.0, size=(K, 1))  # rows of different lengths
        cases.append((rng.normal(size=d), W, rng.normal(size=K)))
    return cases


grade_multiclass_min_l2 = grader(
    "multiclass_min_l2",
    "x, W, b",
    _multiclass_min_l2_one,
    _multiclass_cases,
    hints=(
        Hint(
            lambda a, e, g: close(_multiclass_step(*a, pick="margin"), g),
            "the nearest boundary is the one with the smallest *distance* m_j / ||w_y - w_j||_2, not the "
            "smallest margin m_j: a small margin to a class whose weights differ a lot from w_y is still far.",
        ),
        Hint(
            lambda a, e, g: close(_multiclass_step(*a, power=1), g),
            "divide by the squared norm ||w_y - w_j||_2^2: the step's length must be the distance "
            "m_j / ||w_y - w_j||_2, and (w_y - w_j) itself has length ||w_y - w_j||_2.",
        ),
        Hint(
            lambda a, e, g: close(-np.asarray(e), g),
            "the sign: the step must lower the margin m_j(x) = (w_y - w_j)^T x + (b_y - b_j) to 0, so it goes "
            "along -(w_y - w_j), towards class j.",
        ),
    ),
    mistakes=(
        (lambda x, W, b: _multiclass_step(x, W, b, pick="margin"), "smallest *distance*"),
        (lambda x, W, b: _multiclass_step(x, W, b, power=1), "squared norm"),
        (lambda x, W, b: _multiclass_step(x, W, b, sign=1.0), "the sign"),
    ),
)


# ----------------------------------------------------------------------------- 11.3 attacks on networks


def _pgd_step_variant(
    x,
    delta,
    grad,
    eps,
    alpha,
    p,
    *,
    sphere=False,
    box=True,
    step=None,
    sign=True,
    l2_sign=False,
    box_first=False,
):
    """One PGD step written with a typical mistake: projected onto the sphere (`sphere`), without the pixel box
    (`box`), with the step `step` instead of alpha, with the raw gradient instead of its sign / unit vector, with
    sign(grad) in the ℓ2 step too (`l2_sign`), or clipped to the pixel box before the projection onto the ball
    (`box_first`)."""
    x, delta, grad = (np.asarray(v, dtype=float) for v in (x, delta, grad))
    if not sign:
        g = grad
    elif p == 2 and not l2_sign:
        g = grad / max(np.linalg.norm(grad), 1e-12)
    else:
        g = np.sign(grad)
    z = delta + (alpha if step is None else step) * g
    if box_first:
        z, box = np.clip(x + z, 0.0, 1.0) - x, False
    size = np.linalg.norm(z) if p == 2 else np.abs(z).max()
    if sphere:
        z = eps * z / max(size, 1e-300)
    elif p == 2:
        z = z * min(1.0, eps / max(size, 1e-300))
    else:
        z = np.clip(z, -eps, eps)
    return np.clip(x + z, 0.0, 1.0) - x if box else z


def _pgd_step_cases(rng):
    cases = [
        (  # l_inf, pixels at the edges of the box
            np.array([0.0, 0.02, 0.5, 0.97, 1.0, 0.3]),
            np.array([0.0, 0.05, -0.1, 0.02, -0.05, 0.08]),
            np.array([-1.0, 2.0, 0.5, 3.0, 1.0, -0.1]),
            0.1,
            0.025,
            "inf",
        ),
        (  # l2, the step stays inside the ball
            np.array([0.4, 0.5, 0.6, 0.5, 0.45]),
            np.array([0.05, -0.02, 0.0, 0.03, 0.01]),
            np.array([3.0, -1.0, 2.0, 0.5, -2.0]),
            1.0,
            0.1,
            2,
        ),
        (  # l2, the step leaves the ball and the box
            np.array([0.0, 1.0, 0.5, 0.9, 0.1]),
            np.array([0.3, -0.4, 0.2, 0.0, 0.1]),
            np.array([-2.0, 1.0, 0.3, 4.0, -1.0]),
            0.5,
            0.25,
            2,
        ),
    ]
    for d, p in [(8, "inf"), (10, 2), (64, "inf"), (64, 2)]:
        x = np.clip(rng.uniform(-0.3, 1.3, size=d), 0.0, 1.0)  # some pixels exactly 0 or 1
        eps = 0.1 if p == "inf" else 1.0
        delta = np.clip(x + rng.uniform(-eps, eps, size=d) / (1 if p == "inf" else np.sqrt(d)), 0, 1) - x
        cases.append((x, delta, rng.normal(size=d), eps, eps / 4, p))
    return cases


grade_pgd_step = grader(
    "pgd_step",
    "x, delta, grad, eps, alpha, p",
    lambda x, delta, grad, eps, alpha, p: pgd_step(x, delta, grad, eps, alpha, p),
    _pgd_step_cases,
    hints=(
        Hint(
            lambda a, e, g: close(_pgd_step_variant(*a, sphere=True), g),
            "your step always lands on the sphere ||delta||_p = eps: that is z * eps / ||z||, a rescaling, not a "
            "projection. Project onto the ball: z * min(1, eps / ||z||_2) for p = 2, clip(z, -eps, eps) for "
            "p = inf; a point inside the ball stays where it is.",
        ),
        Hint(
            lambda a, e, g: close(_pgd_step_variant(*a, box=False), g),
            "keep the pixels in the box [0, 1]: after the projection onto the ball, "
            "delta = clip(x + delta, 0, 1) - x.",
        ),
        Hint(
            lambda a, e, g: close(_pgd_step_variant(*a, step=a[3]), g),
            "the step size is alpha; eps is the radius of the ball (a step of eps jumps straight to its edge).",
        ),
        Hint(
            lambda a, e, g: close(_pgd_step_variant(*a, sign=False), g),
            "step along the steepest direction of the norm, not the raw gradient: alpha * sign(grad) for "
            "p = inf, alpha * grad / ||grad||_2 for p = 2.",
        ),
        Hint(
            lambda a, e, g: close(_pgd_step_variant(a[0], a[1], -a[2], a[3], a[4], a[5]), g),
            "untargeted PGD ascends the loss: delta + alpha g, with g the sign or unit vector of +grad.",
        ),
        Hint(
            lambda a, e, g: close(_pgd_step_variant(*a, l2_sign=True), g),
            "sign(grad) is the steepest direction of the l_inf norm only; the l2 step is alpha * grad / ||grad||_2 "
            "(sign(grad) has l2 norm sqrt(d) and points the wrong way for p = 2).",
        ),
        Hint(
            lambda a, e, g: close(_pgd_step_variant(*a, box_first=True), g),
            "project onto the eps-ball first, then clip to the pixel box: for p = 2 the rescaling after the clip "
            "shrinks pixels that the box had already stopped. Order: z = delta + alpha g; z * min(1, eps/||z||); "
            "then clip(x + z, 0, 1) - x.",
        ),
    ),
    mistakes=(
        (
            lambda x, delta, grad, eps, alpha, p: _pgd_step_variant(
                x, delta, grad, eps, alpha, p, sphere=True
            ),
            "sphere",
        ),
        (
            lambda x, delta, grad, eps, alpha, p: _pgd_step_variant(x, delta, grad, eps, alpha, p, box=False),
            "[0, 1]",
        ),
        (
            lambda x, delta, grad, eps, alpha, p: _pgd_step_variant(x, delta, grad, eps, alpha, p, step=eps),
            "radius",
        ),
        (
            lambda x, delta, grad, eps, alpha, p: _pgd_step_variant(
                x, delta, grad, eps, alpha, p, sign=False
            ),
            "raw gradient",
        ),
        (lambda x, delta, grad, eps, alpha, p: _pgd_step_variant(x, delta, -grad, eps, alpha, p), "ascends"),
        (
            lambda x, delta, grad, eps, alpha, p: _pgd_step_variant(
                x, delta, grad, eps, alpha, p, l2_sign=True
            ),
            "steepest direction of the l_inf norm only",
        ),
        (
            lambda x, delta, grad, eps, alpha, p: _pgd_step_variant(
                x, delta, grad, eps, alpha, p, box_first=True
            ),
            "project onto the eps-ball first",
        ),
    ),
)


# ----------------------------------------------------------------------------- 11.4 robust training and distributional robustness


def _margin_loss(w, b, X, y, shift):
    """log(1 + exp(-y (w^T x + b) + shift)) with y given, the skeleton of the robust loss and its wrong forms."""
    return np.logaddexp(0.0, -np.asarray(y) * (np.asarray(X) @ w + b) + shift)


def _robust_loss_cases(rng):
    chosen = (
        np.array([1.0, -2.0, 0.5]),
        0.3,
        np.array([[0.2, 0.1, 0.9], [0.5, 0.5, 0.5]]),
        np.array([1, -1]),
        0.1,
    )
    cases = [chosen]
    for n, d, eps in ((5, 4, 0.05), (8, 10, 0.2), (3, 64, 0.1)):
        y = np.where(rng.uniform(size=n) < 0.5, -1, 1)
        cases.append((rng.normal(size=d), float(rng.normal()), rng.uniform(size=(n, d)), y, eps))
    return cases


grade_robust_logistic_loss = grader(
    "robust_logistic_loss",
    "w, b, X, y, eps",
    robust_logistic_loss,
    _robust_loss_cases,
    hints=(
        Hint(
            lambda a, e, g: close(_margin_loss(*a[:4], a[4] * np.linalg.norm(a[0])), g),
            "that uses the l2 norm of w. For an l_inf budget the attacker gains eps ||w||_1 (the dual norm of "
            "l_inf is l1): max over |delta_i| <= eps of -y w^T delta = eps sum_i |w_i|.",
        ),
        Hint(
            lambda a, e, g: close(_margin_loss(*a[:4], a[4] * np.abs(a[0]).max()), g),
            "that uses max_i |w_i|, the bound for an l1 budget; an l_inf budget moves every pixel by eps, so the "
            "attacker gains eps ||w||_1 = eps sum_i |w_i|.",
        ),
        Hint(
            lambda a, e, g: close(_margin_loss(*a[:4], -a[4] * np.abs(a[0]).sum()), g),
            "the sign of the eps term: the attacker *lowers* the margin y (w^T x + b) by eps ||w||_1, so the "
            "worst-case loss is log(1 + exp(-y (w^T x + b) + eps ||w||_1)), larger than the clean loss.",
        ),
        Hint(
            lambda a, e, g: close(_margin_loss(a[0], a[1], a[2], 1.0, a[4] * np.abs(a[0]).sum()), g),
            "the label is missing: the margin is y (w^T x + b), so for y = -1 the sign of w^T x + b flips.",
        ),
        Hint(
            lambda a, e, g: close(np.mean(e), g),
            "return one loss per example (an array of shape (n,)), not their mean.",
        ),
    ),
    mistakes=(
        (lambda w, b, X, y, eps: _margin_loss(w, b, X, y, eps * np.linalg.norm(w)), "l2 norm of w"),
        (
            lambda w, b, X, y, eps: _margin_loss(w, b, X, y, -eps * np.abs(w).sum()),
            "the sign of the eps term",
        ),
        (lambda w, b, X, y, eps: _margin_loss(w, b, X, 1.0, eps * np.abs(w).sum()), "the label is missing"),
        (lambda w, b, X, y, eps: _margin_loss(w, b, X, y, eps * np.abs(w).max()), "max_i |w_i|"),
    ),
)


# ----------------------------------------------------------------------------- 11.5 certified robustness


def _ibp_cases(rng):
    fixed = (
        np.array([0.0, 0.5]),
        np.array([1.0, 0.5]),
        np.array([[1.0, -2.0], [-3.0, 0.5]]),
        np.array([0.5, -1.0]),
    )
    cases = [fixed]
    for n, d, k in ((None, 3, 2), (None, 6, 4), (5, 4, 3), (8, 10, 5)):
        shape = (d,) if n is None else (n, d)
        centre, radius = rng.uniform(0, 1, size=shape), rng.uniform(0, 0.2, size=shape)
        cases.append((centre - radius, centre + radius, rng.normal(size=(k, d)), rng.normal(size=k)))
    return cases


def _ibp_variant(lo, hi, W, b, *, absolute=True, bias=True, half=True):
    """One affine layer's interval written with a typical mistake."""
    c, r = (lo + hi) / 2, (hi - lo) / (2 if half else 1)
    centre = c @ W.T + (b if bias else 0.0)
    radius = r @ (np.abs(W) if absolute else W).T
    return centre - radius, centre + radius


def ibp_linear(lo, hi, W, b):
    """The interval (lower, upper) of W x + b over the box lo <= x <= hi (the book's `ibp_affine`)."""
    return tuple(ibp_affine(lo, hi, W, b))


grade_ibp_linear = grader(
    "ibp_linear",
    "lo, hi, W, b",
    ibp_linear,
    _ibp_cases,
    hints=(
        Hint(
            lambda a, e, g: close(_ibp_variant(*a, absolute=False), g),
            "the radius goes through |W| r, not W r: a negative weight turns the upper end of x_j into the lower "
            "end of the output (W r gives W lo + b and W hi + b, which need not even be ordered).",
        ),
        Hint(
            lambda a, e, g: close(_ibp_variant(*a, bias=False), g),
            "the bias is missing: the centre moves to W c + b.",
        ),
        Hint(
            lambda a, e, g: close(_ibp_variant(*a, half=False), g),
            "the radius of the box is r = (hi - lo) / 2, half its width.",
        ),
        Hint(
            lambda a, e, g: isinstance(g, tuple | list) and len(g) == 2 and close((e[1], e[0]), g),
            "return (lower, upper), in this order.",
        ),
    ),
    mistakes=(
        (lambda lo, hi, W, b: _ibp_variant(lo, hi, W, b, absolute=False), "|W| r, not W r"),
        (lambda lo, hi, W, b: _ibp_variant(lo, hi, W, b, bias=False), "bias is missing"),
        (lambda lo, hi, W, b: _ibp_variant(lo, hi, W, b, half=False), "half its width"),
    ),
)


# ----------------------------------------------------------------------------- 11.6 local explanations: profiles and saliency


def integrated_gradients_reference(grad_f, x, baseline, steps):
    """IG_j = (x_j - x'_j) (1/m) sum_i d_j f(x' + (i - 1/2)/m (x - x')): the midpoint rule with m = steps points;
    grad_f maps points (m, d) to their gradients (m, d) (the book's ``integrated_gradients`` for a torch model)."""
    alphas = (np.arange(steps) + 0.5) / steps
    return (x - baseline) * np.mean(grad_f(baseline + alphas[:, None] * (x - baseline)), axis=0)


def _ig_variant(grad_f, x, baseline, steps, alphas):
    return (x - baseline) * np.mean(grad_f(baseline + alphas[:, None] * (x - baseline)), axis=0)


def _smooth_gradient(c, a):
    """The gradient of f(x) = sum_j c_j sin(x_j) + (a^T x)^2 / 2, for points (d,) or (m, d)."""

    def grad_f(points):
        points = np.asarray(points, dtype=float)
        return c * np.cos(points) + (points @ a)[..., None] * a

    return grad_f


def _ig_cases(rng):
    cases = []
    for d, steps in ((3, 4), (5, 10), (8, 32)):
        grad_f = _smooth_gradient(rng.normal(size=d), rng.normal(size=d))
        cases.append((grad_f, rng.normal(size=d), rng.normal(size=d) * 0.5, steps))
    d = 4  # a baseline of zeros, as for the black image
    cases.append(
        (_smooth_gradient(rng.normal(size=d), rng.normal(size=d)), rng.normal(size=d), np.zeros(d), 8)
    )
    return cases


grade_integrated_gradients = grader(
    "integrated_gradients",
    "grad_f, x, baseline, steps",
    integrated_gradients_reference,
    _ig_cases,
    hints=(
        Hint(
            lambda a, e, g: close((a[1] - a[2]) * a[0](a[1]), g),
            "that is the gradient at x times (x - x') (gradient x input): average the gradient over the points "
            "x' + alpha (x - x') of the path, alpha = (i - 1/2)/m for i = 1..m.",
        ),
        Hint(
            lambda a, e, g: close(
                np.mean(a[0](a[2] + ((np.arange(a[3]) + 0.5) / a[3])[:, None] * (a[1] - a[2])), axis=0), g
            ),
            "that is the averaged gradient alone: multiply it by (x - x') to get an attribution.",
        ),
        Hint(
            lambda a, e, g: (
                close(_ig_variant(*a, np.arange(1, a[3] + 1) / a[3]), g)
                or close(_ig_variant(*a, np.arange(a[3]) / a[3]), g)
            ),
            "that is a right (or left) Riemann sum, alpha = i/m; use the midpoints alpha = (i - 1/2)/m of the m "
            "cells of [0, 1] (more accurate for the same m).",
        ),
        Hint(
            lambda a, e, g: close(integrated_gradients_reference(a[0], a[1], np.zeros_like(a[1]), a[3]), g),
            "the path starts at the baseline x', not at 0: the points are x' + alpha (x - x') and the factor is "
            "(x - x').",
        ),
    ),
    mistakes=(
        (lambda grad_f, x, baseline, steps: (x - baseline) * grad_f(x), "gradient x input"),
        (
            lambda grad_f, x, baseline, steps: np.mean(
                grad_f(baseline + ((np.arange(steps) + 0.5) / steps)[:, None] * (x - baseline)), axis=0
            ),
            "multiply it by (x - x')",
        ),
        (
            lambda grad_f, x, baseline, steps: _ig_variant(
                grad_f, x, baseline, steps, np.arange(1, steps + 1) / steps
            ),
            "Riemann sum",
        ),
        (
            lambda grad_f, x, baseline, steps: integrated_gradients_reference(
                grad_f, x, np.zeros_like(x), steps
            ),
            "starts at the baseline",
        ),
    ),
)


# ----------------------------------------------------------------------------- 11.6 attribution by removal: Shapley values, SHAP and SAGE


class _Game:
    """A cooperative game on the players 0..d−1 given by the table of its values, v(S) = table[Σ_{k∈S} 2^k];
    it prints as its description in the grader's messages."""

    def __init__(self, table, description: str):
        self.table = np.asarray(table, dtype=np.float64)
        self.__name__ = description

    def __call__(self, S) -> float:
        return float(self.table[sum(1 << int(k) for k in set(S))])


def _unanimity(T, d):
    table = [float(all(m >> k & 1 for k in T)) for m in range(2**d)]
    return _Game(table, f"unanimity game v(S) = 1{{{set(T)} ⊆ S}}")


def _shapley_cases(rng):
    cases = []
    for d in (3, 4, 2, 5):
        table = np.round(rng.normal(size=2**d), 3)
        table[0] = 0.0
        cases.append((_Game(table, f"a random game on {d} players"), d))
    return [*cases, (_unanimity((0, 2), 4), 4), (_unanimity((1, 2, 3), 5), 5)]


def _weighted_contributions(value_fn, d, weight, sign=1.0):
    """sum over S ⊆ N \\ {j} of weight(|S|, d) * sign * [v(S ∪ {j}) − v(S)], by brute force over subsets."""
    phi = np.zeros(d)
    for j in range(d):
        others = [k for k in range(d) if k != j]
        for size in range(d):
            for S in itertools.combinations(others, size):
                phi[j] += weight(size, d) * sign * (value_fn(tuple(sorted((*S, j)))) - value_fn(S))
    return phi


def _off_by_one(s, d):
    return math.factorial(s) * math.factorial(d - s) / math.factorial(d)


def _banzhaf(s, d):
    return 0.5 ** (d - 1)


def _one_over_d(s, d):
    return 1 / d


grade_shapley_exact = grader(
    "shapley_exact",
    "value_fn, d",
    shapley_exact,
    _shapley_cases,
    hints=(
        Hint(
            lambda a, e, g: close(_weighted_contributions(*a, _banzhaf), g),
            "every coalition weighted alike, 1/2^(d-1), is the Banzhaf value, not the Shapley value: the weight "
            "of S is |S|! (d - |S| - 1)! / d!, the probability that exactly S precedes j in a random order.",
        ),
        Hint(
            lambda a, e, g: close(_weighted_contributions(*a, _off_by_one), g),
            "off by one: the weight is |S|! (d - |S| - 1)! / d! (S and j are placed, d - |S| - 1 players "
            "follow); with (d - |S|)! the values no longer add up to v(N) - v(empty set).",
        ),
        Hint(
            lambda a, e, g: close(_weighted_contributions(*a, _one_over_d), g),
            "weighting every coalition by 1/d leaves out the factorials: the 2^(d-1) coalitions without j "
            "must get weights |S|! (d - |S| - 1)! / d!, which sum to 1 (1/d for each size |S|, shared among "
            "the coalitions of that size).",
        ),
        Hint(
            lambda a, e, g: close(-e, g),
            "the sign is reversed: the marginal contribution of j to S is v(S ∪ {j}) - v(S).",
        ),
    ),
    mistakes=(
        (lambda value_fn, d: _weighted_contributions(value_fn, d, _banzhaf), "Banzhaf"),
        (lambda value_fn, d: _weighted_contributions(value_fn, d, _off_by_one), "off by one"),
        (lambda value_fn, d: _weighted_contributions(value_fn, d, _one_over_d), "leaves out the factorials"),
        (lambda value_fn, d: -shapley_exact(value_fn, d), "the sign is reversed"),
    ),
)


# ----------------------------------------------------------------------------- 11.7 fairness


def fairness_gaps_reference(y, y_hat, a):
    """The three gaps of the exercise: (Δ_DP, Δ_EO, TPR gap) between groups 0 and 1."""
    gaps = fairness_gaps(y, y_hat, a)
    return gaps.dp, gaps.eo, gaps.tpr


def _gaps_variant(y, y_hat, a, *, tpr="tpr", fpr="fpr", dp="predictions", eo=max, signed=False):
    """The three gaps written with one typical mistake: TPR as P(Y=1|Ŷ=1) (`tpr="ppv"`), FPR over all examples of
    the group (`fpr="all"`), Δ_DP from the base rates (`dp="outcomes"`) or against the overall acceptance rate
    (`dp="overall"`), Δ_EO combined with `eo` instead of max, or signed differences (`signed`)."""
    y, y_hat, a = (np.asarray(v) for v in (y, y_hat, a))

    def rates(g):
        m = a == g
        TP, FP = np.sum(m & (y == 1) & (y_hat == 1)), np.sum(m & (y == 0) & (y_hat == 1))
        P, N = np.sum(m & (y == 1)), np.sum(m & (y == 0))
        r_tpr = TP / (TP + FP) if tpr == "ppv" else TP / P
        r_fpr = FP / m.sum() if fpr == "all" else FP / N
        r_pos = y[m].mean() if dp == "outcomes" else y_hat[m].mean()
        return r_pos, r_tpr, r_fpr

    (pos0, tpr0, fpr0), (pos1, tpr1, fpr1) = rates(0), rates(1)
    diff = (lambda u, v: u - v) if signed else (lambda u, v: abs(u - v))
    d_tpr, d_fpr = diff(tpr0, tpr1), diff(fpr0, fpr1)
    if dp == "overall":  # each group against everyone: max_a |P(Ŷ=1 | A=a) - P(Ŷ=1)|
        return max(diff(pos0, y_hat.mean()), diff(pos1, y_hat.mean())), eo(d_tpr, d_fpr), d_tpr
    return diff(pos0, pos1), eo(d_tpr, d_fpr), d_tpr


def _gaps_cases(rng):
    cases = []
    # a small case to follow by hand: group 0 is accepted more often, group 1 has the higher TPR
    y = np.array([1, 1, 0, 0, 0, 1, 1, 1, 0, 0])
    y_hat = np.array([1, 0, 1, 1, 0, 1, 1, 1, 0, 1])
    a = np.array([0, 0, 0, 0, 0, 1, 1, 1, 1, 1])
    cases.append((y, y_hat, a))
    for n, base in ((200, (0.6, 0.3)), (1000, (0.5, 0.2)), (5000, (0.3, 0.5))):
        a = rng.integers(0, 2, size=n)
        y = (rng.random(n) < np.where(a == 0, *base)).astype(np.int64)
        score = 0.4 * y + 0.15 * a + 0.6 * rng.random(n)
        cases.append((y, (score > 0.45).astype(np.int64), a))
    return cases


grade_fairness_gaps = grader(
    "fairness_gaps",
    "y, y_hat, a",
    fairness_gaps_reference,
    _gaps_cases,
    hints=(
        Hint(
            lambda a, e, g: close(_gaps_variant(*a, signed=True), g),
            "a gap is the absolute difference |rate of group 0 - rate of group 1|: it must not depend on which "
            "group you call 0.",
        ),
        Hint(
            lambda a, e, g: close(_gaps_variant(*a, tpr="ppv"), g),
            "TPR_a = P(Ŷ=1 | Y=1, A=a) = TP / (TP + FN), conditioned on the true positives; TP / (TP + FP) = "
            "P(Y=1 | Ŷ=1, A=a) is the PPV.",
        ),
        Hint(
            lambda a, e, g: close(_gaps_variant(*a, fpr="all"), g),
            "FPR_a = P(Ŷ=1 | Y=0, A=a) = FP / (FP + TN): divide by the negatives of the group, not by all its "
            "examples.",
        ),
        Hint(
            lambda a, e, g: close(_gaps_variant(*a, dp="outcomes"), g),
            "demographic parity compares the decisions, P(Ŷ=1 | A=a); the base rates P(Y=1 | A=a) are fixed by "
            "the data and no classifier changes them.",
        ),
        Hint(
            lambda a, e, g: any(
                close(_gaps_variant(*a, eo=combine), g)
                for combine in (lambda u, v: u + v, lambda u, v: (u + v) / 2)
            ),
            "the equalized-odds gap is the larger of the TPR gap and the FPR gap, max(|ΔTPR|, |ΔFPR|), not their "
            "sum or mean.",
        ),
        Hint(
            lambda a, e, g: close(_gaps_variant(*a, eo=lambda u, v: u), g),
            "your equalized-odds gap is the TPR gap alone, which is equality of opportunity; equalized odds also "
            "conditions on Y = 0: Δ_EO = max(|ΔTPR|, |ΔFPR|).",
        ),
        Hint(
            lambda a, e, g: close(_gaps_variant(*a, dp="overall"), g),
            "demographic parity compares the groups with each other, |P(Ŷ=1 | A=0) - P(Ŷ=1 | A=1)|, not each "
            "group with the overall acceptance rate P(Ŷ=1) (that gap is smaller and depends on the group sizes).",
        ),
    ),
    mistakes=(
        (lambda y, y_hat, a: _gaps_variant(y, y_hat, a, signed=True), "absolute difference"),
        (lambda y, y_hat, a: _gaps_variant(y, y_hat, a, tpr="ppv"), "conditioned on the true positives"),
        (lambda y, y_hat, a: _gaps_variant(y, y_hat, a, fpr="all"), "divide by the negatives"),
        (lambda y, y_hat, a: _gaps_variant(y, y_hat, a, dp="outcomes"), "compares the decisions"),
        (lambda y, y_hat, a: _gaps_variant(y, y_hat, a, eo=lambda u, v: u + v), "larger of the TPR gap"),
        (lambda y, y_hat, a: _gaps_variant(y, y_hat, a, eo=lambda u, v: u), "TPR gap alone"),
        (lambda y, y_hat, a: _gaps_variant(y, y_hat, a, dp="overall"), "with each other"),
    ),
)


# ----------------------------------------------------------------------------- 11.8 ethics about people


def _clip_variant(grads, C, how):
    """The clipped mean written with a typical mistake: the batch mean clipped (`"mean"`), every row rescaled to
    norm C even when shorter (`"rescale"`), or the clipped rows summed instead of averaged (`"sum"`)."""
    grads = np.asarray(grads, dtype=float)
    norms = np.maximum(np.linalg.norm(grads, axis=1, keepdims=True), 1e-300)
    if how == "mean":
        mean = grads.mean(axis=0)
        return mean * min(1.0, C / max(np.linalg.norm(mean), 1e-300))
    if how == "rescale":
        return (grads * C / norms).mean(axis=0)
    return (grads * np.minimum(1.0, C / norms)).sum(axis=0)


def _clip_cases(rng):
    cases = [(np.array([[3.0, 4.0], [0.3, 0.4], [-6.0, 8.0]]), 1.0)]  # norms 5, 0.5 and 10
    for n, P, C in ((4, 3, 0.5), (16, 10, 1.0), (64, 30, 2.0)):
        cases.append((rng.normal(size=(n, P)) * rng.uniform(0.1, 3.0, size=(n, 1)), C))
    return cases


grade_clipped_mean = grader(
    "clipped_mean",
    "grads, C",
    lambda grads, C: clip_and_noise(grads, C, 0.0),
    _clip_cases,
    hints=(
        Hint(
            lambda a, e, g: close(_clip_variant(*a, "mean"), g),
            "you clipped the mean of the batch; DP-SGD clips every example's gradient g_i to norm C first, so that "
            "no single example can move the sum by more than C, then averages.",
        ),
        Hint(
            lambda a, e, g: close(_clip_variant(*a, "rescale"), g),
            "clipping only shortens: g_i * min(1, C / ||g_i||); a gradient shorter than C stays as it is.",
        ),
        Hint(
            lambda a, e, g: close(_clip_variant(*a, "sum"), g),
            "average the clipped gradients (divide the sum by the batch size n).",
        ),
    ),
    mistakes=(
        (lambda grads, C: _clip_variant(grads, C, "mean"), "clipped the mean of the batch"),
        (lambda grads, C: _clip_variant(grads, C, "rescale"), "clipping only shortens"),
        (lambda grads, C: _clip_variant(grads, C, "sum"), "average the clipped gradients"),
    ),
)
