"""Section 11.5 of chapter 11 (notebook 05_certified), certified robustness: randomised smoothing (noise
counts, the smoothed prediction, the Clopper–Pearson bound, the certified radius, CERTIFY and the certified
accuracy, a differentiable smoothed model to attack), interval bound propagation, and the Lipschitz-margin
certificate.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from scipy import stats
from torch import nn

from ..training import to_numpy
from ..validation import (
    check_array,
    check_int,
    check_labels,
    check_matrix,
    check_number,
    check_positive,
    check_rng,
)
from .common import _check_model, _dtype, _inputs

ABSTAIN = -1  # the label of a smoothed classifier that declines to predict


def add_noise(X, sigma: float, rng=None) -> np.ndarray:
    """The Gaussian-noise copy :math:`x + \\xi`, :math:`\\xi \\sim \\mathcal N(0, \\sigma^2 I)`, of every row of X
    (n, d) -> (n, d), without clipping to [0, 1]: the noise of randomised smoothing and of training for it
    (11.5)."""
    X = check_matrix(X, "X")
    sigma = check_number(sigma, "sigma", 0)
    return X + sigma * check_rng(rng).normal(size=X.shape)


@torch.no_grad()
def noise_counts(model: nn.Module, X, sigma: float, n: int, rng=None, batch_size: int = 20_000) -> np.ndarray:
    """How often the base classifier f predicts each class under noise: counts[i, c] =
    :math:`\\#\\{s \\le n : f(x_i + \\xi_s) = c\\}`, :math:`\\xi_s \\sim \\mathcal N(0, \\sigma^2 I)` i.i.d.
    X (m, d) -> int64 (m, K), every row summing to n (11.5)."""
    x = _inputs(model, X)
    sigma, n = check_positive(sigma, "sigma"), check_int(n, "n", 1)
    batch_size = check_int(batch_size, "batch_size", 1)
    generator = torch.Generator().manual_seed(int(check_rng(rng).integers(2**62)))  # torch draws faster
    m, d = x.shape
    K = None
    flat = []
    for start in range(0, m * n, batch_size):
        rows = torch.arange(start, min(start + batch_size, m * n), device=x.device) // n  # each copy's point
        noise = torch.randn((len(rows), d), generator=generator, dtype=x.dtype).to(x.device)
        logits = model(x[rows] + sigma * noise)
        K = logits.shape[1]
        flat.append(to_numpy(rows * K + logits.argmax(dim=1)))
    return np.bincount(np.concatenate(flat), minlength=m * K).reshape(m, K).astype(np.int64)


def smoothed_predict(model: nn.Module, X, sigma: float, n: int = 1000, rng=None) -> np.ndarray:
    """The smoothed classifier :math:`g(x) = \\arg\\max_c \\mathbb P_\\xi(f(x + \\xi) = c)`,
    :math:`\\xi \\sim \\mathcal N(0, \\sigma^2 I)`, estimated by the majority vote of n noisy copies of each row
    of X (m, d) -> int64 (m,) (11.5). (Cohen et al.'s PREDICT also abstains when a binomial test cannot tell the
    two leading classes apart; this estimate always answers.)"""
    return noise_counts(model, X, sigma, n, rng).argmax(axis=1)


def clopper_pearson_lower(k, n: int, alpha: float) -> np.ndarray:
    """The one-sided Clopper–Pearson lower confidence bound of a binomial proportion: with probability at least
    1 − α, :math:`p \\ge \\underline p = B^{-1}(\\alpha;\\,k,\\,n-k+1)` (the α-quantile of a Beta distribution;
    0 for k = 0), for k successes in n trials. k (m,) -> (m,) (11.5)."""
    n = check_int(n, "n", 1)
    k = check_array(np.atleast_1d(k), "k", ndim=1)
    if np.any(k < 0) or np.any(k > n) or np.any(k != np.round(k)):
        raise ValueError(f"k must hold whole numbers of successes in [0, n = {n}], got {k}")
    alpha = check_number(alpha, "alpha", 0, 1, low_open=True, high_open=True)
    with np.errstate(invalid="ignore"):
        lower = stats.beta.ppf(alpha, np.maximum(k, 1), n - k + 1)
    return np.where(k == 0, 0.0, lower)


def smoothing_radius(p_lower, sigma: float) -> np.ndarray:
    """The certified ℓ2 radius of randomised smoothing,
    :math:`R = \\frac\\sigma2\\big(\\Phi^{-1}(\\underline{p_A}) - \\Phi^{-1}(\\overline{p_B})\\big)
    = \\sigma\\,\\Phi^{-1}(\\underline{p_A})` with :math:`\\overline{p_B} = 1 - \\underline{p_A}`; 0 (abstain) where
    :math:`\\underline{p_A} \\le \\frac12`. p_lower (m,) -> (m,) (11.5)."""
    p_lower = check_array(np.atleast_1d(p_lower), "p_lower", ndim=1)
    if np.any(p_lower < 0) or np.any(p_lower > 1):
        raise ValueError(f"p_lower must hold probabilities in [0, 1], got {p_lower}")
    sigma = check_positive(sigma, "sigma")
    return np.where(p_lower > 0.5, sigma * stats.norm.ppf(np.maximum(p_lower, 0.5)), 0.0)


class Certificate(NamedTuple):
    label: np.ndarray  # (m,) the class of g, ABSTAIN (-1) where the bound p_lower <= 1/2
    radius: np.ndarray  # (m,) the certified l2 radius sigma Phi^-1(p_lower), 0 where g abstains
    p_lower: np.ndarray  # (m,) the Clopper-Pearson lower bound of p_A


def certify(
    model: nn.Module, X, sigma: float, n0: int = 100, n: int = 10_000, alpha: float = 1e-3, rng=None
) -> Certificate:
    """CERTIFY of Cohen et al. (2019) for every row of X (m, d): guess the top class
    :math:`\\hat c_A` from n0 noisy copies, count it among n *fresh* copies, bound
    :math:`p_A \\ge \\underline{p_A}` by Clopper–Pearson at level 1 − α, and return
    :math:`\\hat c_A` with :math:`R = \\sigma\\Phi^{-1}(\\underline{p_A})`, or abstain if
    :math:`\\underline{p_A} \\le \\frac12`. With probability ≥ 1 − α per point, g is constant on the ℓ2 ball of
    radius R. Returns a `Certificate` of three (m,) arrays (11.5)."""
    rng = check_rng(rng)
    alpha = check_number(alpha, "alpha", 0, 1, low_open=True, high_open=True)
    guess = noise_counts(model, X, sigma, check_int(n0, "n0", 1), rng).argmax(axis=1)
    counts = noise_counts(model, X, sigma, n, rng)  # fresh samples: the guess must not see them
    p_lower = clopper_pearson_lower(counts[np.arange(len(guess)), guess], n, alpha)
    radius = smoothing_radius(p_lower, sigma)
    return Certificate(np.where(p_lower > 0.5, guess, ABSTAIN), radius, p_lower)


def certified_accuracy(label, radius, y, radii) -> np.ndarray:
    """The certified accuracy at each radius r: the fraction of points whose certified label is the true one
    with a certified radius of at least r, :math:`\\frac1m\\#\\{i : \\hat c_i = y_i,\\ R_i \\ge r\\}`.
    label, radius, y (m,), radii (k,) -> (k,) (11.5)."""
    label = check_array(label, "label", ndim=1)
    radius = check_array(radius, "radius", (len(label),))
    y = check_labels(y, "y", len(label))
    radii = check_array(np.atleast_1d(radii), "radii", ndim=1)
    correct = label == y
    return np.array([np.mean(correct & (radius >= r)) for r in radii])


class _SoftSmoothed(nn.Module):
    def __init__(self, model: nn.Module, sigma: float, m: int, generator: torch.Generator):
        super().__init__()
        self.model, self.sigma, self.m, self.generator = model, sigma, m, generator

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        noise = torch.randn((self.m, *x.shape), generator=self.generator, dtype=x.dtype).to(x.device)
        probs = F.softmax(self.model(x.unsqueeze(0) + self.sigma * noise), dim=-1)
        return probs.mean(dim=0).clamp_min(1e-30).log()


def soft_smoothed(model: nn.Module, sigma: float, m: int = 32, rng=None) -> nn.Module:
    """A torch module for attacking the smoothed classifier: the log of the noise-averaged softmax,
    :math:`\\log \\frac1m\\sum_{s\\le m}\\mathrm{softmax}(f(x + \\xi_s))`, fresh
    :math:`\\xi_s \\sim \\mathcal N(0, \\sigma^2 I)` at every call; its cross-entropy is
    :math:`-\\log G_y(x)`, so ``pgd(soft_smoothed(f, sigma), X, y, ...)`` attacks g rather than f (Salman et
    al.'s SmoothAdv). (n, d) -> (n, K) (11.5)."""
    model = _check_model(model)
    generator = torch.Generator().manual_seed(int(check_rng(rng).integers(2**62)))
    return _SoftSmoothed(model, check_positive(sigma, "sigma"), check_int(m, "m", 1), generator).to(
        _dtype(model)
    )


_NON_DECREASING = (nn.ReLU, nn.LeakyReLU, nn.Sigmoid, nn.Tanh, nn.Identity)


def _sequential(model) -> nn.Sequential:
    if not isinstance(model, nn.Sequential):
        raise TypeError(
            f"model must be an nn.Sequential of Linear layers and activations, got {type(model).__name__}"
        )
    return model


def _best_other(scores: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The largest score of a class other than the label, :math:`\\max_{j\\ne y_i} s_{ij}`: (n, K), (n,) -> (n,)."""
    others = scores.copy()
    others[np.arange(len(y)), y] = -np.inf
    return others.max(axis=1)


class Bounds(NamedTuple):
    lo: np.ndarray  # (n, K) lower bounds (of the logits, or of one layer's outputs)
    hi: np.ndarray  # (n, K) upper bounds


def ibp_affine(lo, hi, W, b) -> Bounds:
    """The exact interval of an affine map over a box: for :math:`l \\le x \\le u` (rows (n, d) or one (d,)),
    centre :math:`c = (l + u)/2` and radius :math:`r = (u - l)/2`, :math:`Wx + b` lies in
    :math:`[Wc + b - |W|r,\\ Wc + b + |W|r]`, and both ends are attained at corners of the box. W (k, d),
    b (k,) -> Bounds (n, k) or (k,) (11.5)."""
    lo, hi = check_array(lo, "lo"), check_array(hi, "hi")
    if lo.ndim not in (1, 2) or hi.shape != lo.shape:
        raise ValueError(
            f"lo and hi must be equal-shaped vectors (d,) or rows (n, d), got {lo.shape} and {hi.shape}"
        )
    if np.any(lo > hi):
        raise ValueError("lo must be <= hi entrywise (an empty box)")
    W = check_matrix(W, "W", cols=lo.shape[-1])
    b = check_array(b, "b", (W.shape[0],))
    c, r = (lo + hi) / 2, (hi - lo) / 2
    centre, radius = c @ W.T + b, r @ np.abs(W).T
    return Bounds(centre - radius, centre + radius)


def ibp_bounds(model: nn.Module, X, eps: float) -> Bounds:
    """Interval bound propagation: bounds [lo, hi] (n, K) on every logit of `model` over the ℓ∞ box
    :math:`[x - \\epsilon, x + \\epsilon] \\cap [0, 1]^d` around each row of X (n, d).

    A box with centre c and radius r goes through an affine layer as :math:`c' = Wc + b`, :math:`r' = |W|\\,r`
    and through a non-decreasing activation as :math:`[l, u] \\mapsto [\\varphi(l), \\varphi(u)]`. `model` is an
    ``nn.Sequential`` of ``Linear`` layers and non-decreasing activations (ReLU, LeakyReLU with a slope ≥ 0,
    Sigmoid, Tanh); the bounds are computed in float64 and hold for the network evaluated in float64 (11.5).
    """
    x = _inputs(_sequential(model), X).to(torch.float64)
    eps = check_number(eps, "eps", 0)
    lo, hi = (x - eps).clamp(0, 1), (x + eps).clamp(0, 1)
    with torch.no_grad():
        for layer in model:
            if isinstance(layer, nn.Linear):
                b = layer.bias if layer.bias is not None else torch.zeros(layer.out_features)
                box = ibp_affine(to_numpy(lo), to_numpy(hi), to_numpy(layer.weight), to_numpy(b))
                lo, hi = torch.as_tensor(box.lo), torch.as_tensor(box.hi)
            elif isinstance(layer, _NON_DECREASING) and getattr(layer, "negative_slope", 0.0) >= 0:
                lo, hi = layer(lo), layer(hi)
            else:
                raise TypeError(
                    "model must consist of Linear layers and non-decreasing activations (ReLU, LeakyReLU with a "
                    f"slope >= 0, Sigmoid, Tanh), got {layer!r}"
                )
    return Bounds(to_numpy(lo), to_numpy(hi))


def ibp_certify(model: nn.Module, X, y, eps: float) -> np.ndarray:
    """Certified by IBP: :math:`\\underline{f_y}(x) - \\max_{j\\ne y}\\overline{f_j}(x) > 0`, so that no point of
    the ε-box (clipped to [0, 1]) changes the prediction away from the true class y. X (n, d), y (n,) ->
    bool (n,) (11.5)."""
    lo, hi = ibp_bounds(model, X, eps)
    y = check_labels(y, "y", len(lo), n_classes=lo.shape[1])
    return lo[np.arange(len(y)), y] - _best_other(hi, y) > 0


def lipschitz_radius(model: nn.Module, X, y) -> np.ndarray:
    """The Lipschitz-margin certificate of Tsuzuku et al. (2018): with
    :math:`L = \\prod_l \\lVert W_l\\rVert_2` (an upper bound of the ℓ2 Lipschitz constant of x ↦ f(x) for
    1-Lipschitz activations), the prediction cannot change within
    :math:`R = (f_y(x) - \\max_{j\\ne y} f_j(x))/(\\sqrt2\\,L)`; 0 where x is misclassified.
    X (n, d), y (n,) -> (n,) (11.5)."""
    x = _inputs(_sequential(model), X)
    lipschitz = 1.0
    for layer in model:
        if isinstance(layer, nn.Linear):
            lipschitz *= float(torch.linalg.matrix_norm(layer.weight.detach().to(torch.float64), ord=2))
        elif not isinstance(layer, (nn.ReLU, nn.Tanh, nn.Sigmoid, nn.Identity)):
            raise TypeError(
                f"model must consist of Linear layers and 1-Lipschitz activations (ReLU, Tanh, Sigmoid), got {layer!r}"
            )
    with torch.no_grad():
        logits = to_numpy(model(x)).astype(np.float64)
    y = check_labels(y, "y", len(logits), n_classes=logits.shape[1])
    margin = logits[np.arange(len(y)), y] - _best_other(logits, y)
    return np.maximum(margin, 0.0) / (math.sqrt(2) * lipschitz)
