"""Graded exercises of chapter 08 — tricks of the trade."""

from __future__ import annotations

import math

import numpy as np

from ..activations import log_softmax, softmax
from ..tricks import (
    batch_norm,
    distill_loss,
    dropout_all_masks,
    init_std,
    l1_minimiser,
    paired_difference,
    tempered_nll,
)
from .core import Hint, close, grader

# ----------------------------------------------------------------------------- 8.1 initialisation


def _std_cases(rng):
    cases = [(256, 256, "he"), (300, 100, "lecun"), (50, 200, "he"), (100, 400, "glorot"), (20, 30, "glorot")]
    return cases + [
        (int(rng.integers(10, 1000)), int(rng.integers(10, 1000)), s) for s in ("lecun", "glorot", "he")
    ]


grade_init_std = grader(
    "init_std",
    "n, m, scheme",
    init_std,
    _std_cases,
    hints=(
        Hint(lambda a, e, g: close(e**2, g), "that is the variance sigma^2: return its square root sigma."),
        Hint(
            lambda a, e, g: close(init_std(a[1], a[0], a[2]), g),
            "n is the fan-in (the number of inputs, W.shape[1]) and m the fan-out: LeCun and He divide by n.",
        ),
        Hint(
            lambda a, e, g: close(math.sqrt(3) * e, g),
            "that is the bound b of the uniform U[-b, b]; its standard deviation is b / sqrt(3).",
        ),
        Hint(
            lambda a, e, g: a[2] == "glorot" and close(math.sqrt(1 / (a[0] + a[1])), g),
            "that is sigma^2 = 1/(n + m), half of Glorot's variance: sigma^2 = 2/(n + m), the harmonic mean of "
            "the forward and backward variances 1/n and 1/m.",
        ),
        Hint(
            lambda a, e, g: a[2] == "glorot" and close(math.sqrt((1 / a[0] + 1 / a[1]) / 2), g),
            "that is the arithmetic mean (1/n + 1/m)/2 of the forward and backward variances; Glorot takes their "
            "harmonic mean, sigma^2 = 2/(n + m) = 1 / ((n + m)/2), one over the mean fan.",
        ),
        Hint(
            lambda a, e, g: close(2 / math.sqrt(a[0]), g),
            "that is 2/sqrt(n): He's factor 2 multiplies the variance, sigma^2 = 2/n, so sigma = sqrt(2/n) = "
            "sqrt(2)/sqrt(n).",
        ),
    ),
    mistakes=(
        (lambda n, m, scheme: init_std(n, m, scheme) ** 2, "square root"),
        (lambda n, m, scheme: init_std(m, n, scheme), "fan-in"),
        (lambda n, m, scheme: math.sqrt(3) * init_std(n, m, scheme), "uniform"),
        (
            lambda n, m, scheme: math.sqrt(1 / (n + m)) if scheme == "glorot" else init_std(n, m, scheme),
            "half of Glorot",
        ),
        (
            lambda n, m, scheme: (
                math.sqrt((1 / n + 1 / m) / 2) if scheme == "glorot" else init_std(n, m, scheme)
            ),
            "harmonic mean",
        ),
        (lambda n, m, scheme: 2 / math.sqrt(n) if scheme == "he" else init_std(n, m, scheme), "2/sqrt(n)"),
    ),
)


# ----------------------------------------------------------------------------- 8.2-8.3 weight decay and early stopping
def _l1_cases(rng):
    fixed = (np.array([3.0, -3.0, 0.5, -0.2, 1.5]), np.array([1.0, 2.0, 4.0, 0.5, 0.25]), 1.0)
    return [fixed] + [
        (rng.normal(size=d) * 2, rng.uniform(0.2, 3.0, size=d), float(rng.uniform(0.3, 1.5)))
        for d in (6, 10, 20)
    ]


def _soft(b, t):
    return np.sign(b) * np.maximum(0.0, np.abs(b) - t)


grade_l1_minimiser = grader(
    "l1_minimiser",
    "theta_star, h, lam",
    l1_minimiser,
    _l1_cases,
    hints=(
        Hint(
            lambda a, e, g: close(a[1] / (a[1] + a[2]) * a[0], g),
            "that is the L2 (weight decay) solution h_i / (h_i + lam) theta*_i; the L1 penalty subtracts a "
            "constant from |theta*_i| and sets the small coordinates exactly to 0.",
        ),
        Hint(
            lambda a, e, g: close(_soft(a[0], a[2]), g),
            "the threshold is lam / h_i, not lam: setting the derivative "
            "h_i (theta_i - theta*_i) + lam sgn(theta_i) to 0 divides lam by the curvature h_i.",
        ),
        Hint(
            lambda a, e, g: close(np.where(np.abs(a[0]) > a[2] / a[1], a[0], 0.0), g),
            "that is hard thresholding: the coordinates that survive are shrunk too, by lam / h_i towards 0.",
        ),
        Hint(
            lambda a, e, g: close(np.maximum(0.0, a[0] - a[2] / a[1]), g),
            "keep the sign: theta_i = sgn(theta*_i) max(0, |theta*_i| - lam / h_i); a negative theta*_i "
            "stays negative.",
        ),
    ),
    mistakes=(
        (lambda theta_star, h, lam: h / (h + lam) * theta_star, "L2 (weight decay) solution"),
        (lambda theta_star, h, lam: _soft(theta_star, lam), "the threshold is lam / h_i"),
        (
            lambda theta_star, h, lam: np.where(np.abs(theta_star) > lam / h, theta_star, 0.0),
            "hard thresholding",
        ),
        (lambda theta_star, h, lam: np.maximum(0.0, theta_star - lam / h), "keep the sign"),
    ),
)


# ----------------------------------------------------------------------------- 8.4 dropout and ensembles


def _softmax_layer(W, c):
    """The sub-networks of a softmax layer with dropout on its inputs: f(x, masks) = softmax(W (b * x) + c)."""
    return lambda x, masks: softmax((masks * x) @ W.T + c, axis=1)


def dropout_ensemble_reference(x, W, c, pi):
    """sum over all 2^R masks b of p(b) softmax(W (b * x) + c), p(b) = prod_i pi_i^b_i (1 - pi_i)^(1 - b_i)."""
    return dropout_all_masks(_softmax_layer(W, c), x, pi).mixture


def _uniform_mixture(x, W, c, pi):
    return dropout_all_masks(_softmax_layer(W, c), x, pi).outputs.mean(axis=0)


def _inverted_mixture(x, W, c, pi):
    return dropout_all_masks(_softmax_layer(W, c), x / pi, pi).mixture


def _dropout_ensemble_cases(rng):
    cases = []
    for R, K in [(4, 3), (6, 2), (8, 4)]:
        x, W, c = rng.normal(size=R), rng.normal(size=(K, R)), rng.normal(size=K)
        cases.append((x, W, c, rng.uniform(0.2, 0.9, R)))
    cases.append((rng.normal(size=5), rng.normal(size=(3, 5)), rng.normal(size=3), np.full(5, 0.5)))
    return cases


grade_dropout_ensemble = grader(
    "dropout_ensemble",
    "x, W, c, pi",
    dropout_ensemble_reference,
    _dropout_ensemble_cases,
    hints=(
        Hint(
            lambda a, e, g: close(softmax(a[1] @ (a[3] * a[0]) + a[2]), g),
            "that is the weight-scaling rule, softmax(W (pi * x) + c): a normalised *geometric* mean of the "
            "sub-networks. The ensemble is the *arithmetic* mixture sum_b p(b) softmax(W (b * x) + c).",
        ),
        Hint(
            lambda a, e, g: close(_uniform_mixture(*a), g),
            "weight sub-network b by p(b) = prod_i pi_i^b_i (1 - pi_i)^(1 - b_i), not by 1/2^R: the masks are "
            "equally likely only when every pi_i = 1/2.",
        ),
        Hint(
            lambda a, e, g: close(dropout_ensemble_reference(a[0], a[1], a[2], 1 - a[3]), g),
            "pi_i is the probability to *keep* unit i (b_i = 1); 1 - pi_i is the drop probability (torch's p).",
        ),
        Hint(
            lambda a, e, g: close(_inverted_mixture(*a), g),
            "sub-network b computes softmax(W (b * x) + c), without the 1/pi of inverted dropout.",
        ),
    ),
    mistakes=(
        (lambda x, W, c, pi: softmax(W @ (pi * x) + c), "weight-scaling rule"),
        (_uniform_mixture, "not by 1/2^R"),
        (lambda x, W, c, pi: dropout_ensemble_reference(x, W, c, 1 - pi), "keep"),
        (_inverted_mixture, "without the 1/pi"),
    ),
)


# ----------------------------------------------------------------------------- 8.5 normalisation


def batch_norm_train_reference(F, gamma, beta, running_mean, running_var):
    """One train-mode step of batch norm: the outputs and the running statistics updated with momentum 0.1."""
    return tuple(
        batch_norm(F, gamma, beta, running_mean=running_mean, running_var=running_var, momentum=0.1, eps=1e-5)
    )


def _batch_norm_variant(F, gamma, beta, running_mean, running_var, *, ddof_out=0, axis=0, ddof_run=1, m=0.1):
    """Batch norm written with one typical mistake: the variance with `ddof_out` in the normalisation, the
    statistics over `axis`, the running variance with `ddof_run`, the momentum `m` on the batch statistics."""
    mu = F.mean(axis=axis, keepdims=True)
    var = F.var(axis=axis, ddof=ddof_out, keepdims=True)
    out = gamma * (F - mu) / np.sqrt(var + 1e-5) + beta
    mu_B, var_B = F.mean(axis=0), F.var(axis=0, ddof=ddof_run)
    return out, (1 - m) * running_mean + m * mu_B, (1 - m) * running_var + m * var_B


def _batch_norm_cases(rng):
    cases = []
    for B, d in [(4, 3), (8, 5), (2, 2), (16, 4)]:
        F = rng.normal(rng.normal(size=d), rng.uniform(0.5, 3, size=d), size=(B, d))
        cases.append(
            (F, rng.normal(size=d), rng.normal(size=d), rng.normal(size=d), rng.uniform(0.5, 2, size=d))
        )
    return cases


grade_batch_norm_train = grader(
    "batch_norm_train",
    "F, gamma, beta, running_mean, running_var",
    batch_norm_train_reference,
    _batch_norm_cases,
    hints=(
        Hint(
            lambda a, e, g: close(_batch_norm_variant(*a, ddof_out=1)[0], g[0]),
            "normalise with the biased batch variance (divide by B, np.var's default ddof=0); only the running "
            "variance is updated with the unbiased one (divide by B - 1).",
        ),
        Hint(
            lambda a, e, g: close(_batch_norm_variant(*a, axis=1)[0], g[0]),
            "batch norm averages each feature over the examples of the batch (axis 0, down the columns); "
            "averaging over the features of one example (axis 1) is layer norm.",
        ),
        Hint(
            lambda a, e, g: close(e[0], g[0]) and close(_batch_norm_variant(*a, ddof_run=0)[2], g[2]),
            "the running variance is updated with the unbiased batch variance, sigma_B^2 B/(B - 1) (ddof=1), as "
            "torch's BatchNorm1d does.",
        ),
        Hint(
            lambda a, e, g: close(e[0], g[0]) and close(_batch_norm_variant(*a, m=0.9)[1], g[1]),
            "momentum 0.1 is the weight of the *new* batch statistic: 0.9 running + 0.1 batch.",
        ),
        Hint(
            lambda a, e, g: close(
                a[1] * (a[0] - a[0].mean(0)) / (a[0].std(0) + 1e-5) + a[2], g[0], rtol=1e-9, atol=1e-12
            ),
            "eps = 1e-5 goes under the square root: sqrt(sigma_B^2 + eps), not sqrt(sigma_B^2) + eps.",
        ),
    ),
    mistakes=(
        (lambda *a: _batch_norm_variant(*a, ddof_out=1), "biased batch variance"),
        (lambda *a: _batch_norm_variant(*a, axis=1), "layer norm"),
        (lambda *a: _batch_norm_variant(*a, ddof_run=0), "unbiased batch variance"),
        (lambda *a: _batch_norm_variant(*a, m=0.9), "0.9 running + 0.1 batch"),
        (
            lambda F, gamma, beta, rm, rv: (
                gamma * (F - F.mean(0)) / (F.std(0) + 1e-5) + beta,
                *batch_norm_train_reference(F, gamma, beta, rm, rv)[1:],
            ),
            "under the square root",
        ),
    ),
)


# ----------------------------------------------------------------------------- 8.6, 8.8 augmentation, label smoothing, distillation


def _distill_cases(rng):
    cases = [(rng.normal(size=(5, 6)) * 3, rng.normal(size=(5, 6)), 4.0)]
    return cases + [
        (rng.normal(size=(N, K)) * 2, rng.normal(size=(N, K)), T) for N, K, T in [(3, 10, 2.0), (6, 3, 0.5)]
    ]


def _distill_variant(F, G, T, *, T_teacher=None, sign=1.0, grad_scale=1.0, batch=True):
    """The tempered cross-entropy written with one typical mistake."""
    p = softmax(F / (T if T_teacher is None else T_teacher), axis=1)
    log_q = log_softmax(G / T, axis=1)
    N = len(F) if batch else 1
    loss = -sign * (p * log_q).sum(axis=1).sum() / N
    return loss, sign * grad_scale * (np.exp(log_q) - p) / (T * N)


grade_distill_loss = grader(
    "distill_loss",
    "F, G, T",
    lambda F, G, T: tuple(distill_loss(F, G, T)),
    _distill_cases,
    hints=(
        Hint(
            lambda a, e, g: close(-e[0], g[0]) or close(-e[1], g[1]),
            "the sign: the cross-entropy is l = -sum_y p_y log q_y (positive, as log q_y < 0), and its "
            "gradient (q_y - p_y) / T pushes the student's probabilities towards the teacher's.",
        ),
        Hint(
            lambda a, e, g: close(e[0], g[0]) and close(a[2] * e[1], g[1]),
            "the chain rule through G / T: dl/dG_y = (q_y - p_y) / T, not q_y - p_y.",
        ),
        Hint(
            lambda a, e, g: close(_distill_variant(*a, T_teacher=1.0)[0], g[0]),
            "soften the teacher with the same temperature: p = softmax(F / T), not softmax(F).",
        ),
        Hint(
            lambda a, e, g: close(len(a[0]) * e[0], g[0]) or close(len(a[0]) * e[1], g[1]),
            "average over the N rows (the examples): the loss is the mean of -sum_y p_y log q_y over the rows, "
            "so every row of the gradient is divided by N too.",
        ),
        Hint(
            lambda a, e, g: close(e[0], g[0]) and close(a[2] * len(a[0]) * e[1], g[1]),
            "the loss is right, but the gradient misses both factors: the chain rule through G / T gives 1/T "
            "and the mean over the N rows gives 1/N, dl/dG_iy = (q_iy - p_iy) / (T N).",
        ),
        Hint(
            lambda a, e, g: close(a[2] ** 2 * e[0], g[0]),
            "return the tempered cross-entropy l itself; the factor T^2 of Hinton et al. belongs to the training "
            "loss, not to l.",
        ),
    ),
    mistakes=(
        (lambda F, G, T: _distill_variant(F, G, T, sign=-1.0), "the sign"),
        (lambda F, G, T: _distill_variant(F, G, T, grad_scale=T), "chain rule"),
        (lambda F, G, T: _distill_variant(F, G, T, T_teacher=1.0), "same temperature"),
        (lambda F, G, T: _distill_variant(F, G, T, batch=False), "average over the N rows"),
        (
            lambda F, G, T: (distill_loss(F, G, T).loss, T * len(F) * distill_loss(F, G, T).grad),
            "both factors",
        ),
        (lambda F, G, T: (T**2 * distill_loss(F, G, T).loss, T**2 * distill_loss(F, G, T).grad), "T^2"),
    ),
)


# ----------------------------------------------------------------------------- 8.7, 8.9 residual scaling, reparameterisation


def pathwise_grads_reference(df, mu, sigma, xi):
    """The pathwise estimates (mean f'(z), mean f'(z) xi / (2 sigma)) with z = mu + sigma xi, for given noise xi."""
    slope = df(mu + sigma * xi)
    return float(np.mean(slope)), float(np.mean(slope * xi) / (2 * sigma))


def quartic_slope(z):
    """f'(z) for f(z) = z^4."""
    return 4 * z**3


def sine_slope(z):
    """f'(z) for f(z) = sin(z)."""
    return np.cos(z)


def softplus_slope(z):
    """f'(z) for f(z) = log(1 + e^z)."""
    return 1 / (1 + np.exp(-z))


def _pathwise_cases(rng):
    return [
        (quartic_slope, 1.0, 0.7, rng.standard_normal(20)),
        (sine_slope, 0.3, 2.0, rng.standard_normal(50)),
        (softplus_slope, -1.0, 1.5, rng.standard_normal(30)),
    ]


grade_pathwise_grads = grader(
    "pathwise_grads",
    "df, mu, sigma, xi",
    pathwise_grads_reference,
    _pathwise_cases,
    hints=(
        Hint(
            lambda a, e, g: close(e[0], g[0]) and close(2 * a[2] * e[1], g[1]),
            "that is the gradient with respect to sigma; by the chain rule d/dsigma^2 = d/dsigma / (2 sigma).",
        ),
        Hint(
            lambda a, e, g: close(pathwise_grads_reference(a[0], a[1], a[2] ** 2, a[3])[0], g[0]),
            "sigma is the standard deviation: z = mu + sigma xi, not mu + sigma^2 xi.",
        ),
        Hint(
            lambda a, e, g: close(e[0], g[0]) and close(2 * e[1], g[1]),
            "d/dsigma^2 = d/dsigma * dsigma/dsigma^2, and dsigma/dsigma^2 = 1/(2 sigma).",
        ),
    ),
    mistakes=(
        (
            lambda df, mu, sigma, xi: (np.mean(df(mu + sigma * xi)), np.mean(df(mu + sigma * xi) * xi)),
            "sigma",
        ),
        (lambda df, mu, sigma, xi: pathwise_grads_reference(df, mu, sigma**2, xi), "standard deviation"),
        (
            lambda df, mu, sigma, xi: (
                np.mean(df(mu + sigma * xi)),
                np.mean(df(mu + sigma * xi) * xi) / sigma,
            ),
            "1/(2 sigma)",
        ),
    ),
)


# ----------------------------------------------------------------------------- 8.10 the tricks compared


def _paired_cases(rng):
    """Accuracies of a baseline and a trick on the same seeds: a shared seed effect plus a small gain."""
    cases = [(np.array([0.96, 0.95, 0.97]), np.array([0.95, 0.93, 0.96]))]
    for r in (3, 5, 8):
        base = 0.94 + 0.01 * rng.normal(size=r)
        cases.append((base + 0.005 + 0.003 * rng.normal(size=r), base))
    return cases


def _unpaired(a, b):
    return float(np.mean(a) - np.mean(b)), float(np.sqrt(np.var(a, ddof=1) + np.var(b, ddof=1)))


grade_paired_difference = grader(
    "paired_difference",
    "a, b",
    lambda a, b: tuple(paired_difference(a, b)),
    _paired_cases,
    hints=(
        Hint(
            lambda a, e, g: close(-e[0], g[0]),
            "the sign: the gain of the trick is d_j = a_j - b_j (trick minus baseline), positive when it helps.",
        ),
        Hint(
            lambda a, e, g: close(e[0], g[0]) and close(_unpaired(*a)[1], g[1]),
            "that is the unpaired spread sqrt(s_a^2 + s_b^2): the arms share the seed, so take the differences "
            "d_j = a_j - b_j first and then their standard deviation.",
        ),
        Hint(
            lambda a, e, g: close(e[0], g[0]) and close(np.std(a[0] - a[1]), g[1]),
            "the sample standard deviation divides by r - 1, not by r (np.std(d, ddof=1)): with 3 runs the "
            "difference is a factor sqrt(3/2).",
        ),
        Hint(
            lambda a, e, g: close(e[0], g[0]) and close(e[1] / math.sqrt(len(a[0])), g[1]),
            "that is the standard error of the mean, s_d / sqrt(r); the spread asked for is s_d itself, the "
            "run-to-run standard deviation of the differences.",
        ),
    ),
    mistakes=(
        (lambda a, b: tuple(paired_difference(b, a)), "the sign"),
        (_unpaired, "unpaired spread"),
        (lambda a, b: (float(np.mean(a - b)), float(np.std(a - b))), "r - 1"),
        (
            lambda a, b: (float(np.mean(a - b)), float(np.std(a - b, ddof=1) / math.sqrt(len(a)))),
            "standard error",
        ),
    ),
)


# ----------------------------------------------------------------------------- 8.11 the practitioner's toolkit


def _nll_cases(rng):
    cases = [(rng.normal(size=(6, 4)) * 3, rng.integers(0, 4, size=6), 2.5)]
    large = np.array([[4000.0, 0.0, -4000.0], [0.0, 3600.0, 4.0]])  # G / T up to 1000: exp overflows
    cases.append((large, np.array([0, 2]), 4.0))
    return cases + [
        (rng.normal(size=(N, K)) * 2, rng.integers(0, K, size=N), T) for N, K, T in [(10, 5, 0.5)]
    ]


def _nll_variant(G, y, T, *, divide=True, mean=True, temper_after=False):
    """The tempered negative log-likelihood written with one typical mistake."""
    scaled = G if temper_after else (G / T if divide else G * T)
    log_q = log_softmax(scaled, axis=1)[np.arange(len(y)), y]
    if temper_after:
        log_q = log_q / T
    return float(-(log_q.mean() if mean else log_q.sum()))


def _naive_nll(G, y, T):
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        E = np.exp(G / T)
        return float(-np.log(E[np.arange(len(y)), y] / E.sum(axis=1)).mean())


grade_tempered_nll = grader(
    "tempered_nll",
    "G, y, T",
    lambda G, y, T: tempered_nll(G, y, T),
    _nll_cases,
    hints=(
        Hint(
            lambda a, e, g: close(_nll_variant(*a, divide=False), g),
            "divide the logits by the temperature, softmax(G / T): T > 1 softens the probabilities, T * G would "
            "sharpen them.",
        ),
        Hint(
            lambda a, e, g: close(len(a[1]) * e, g),
            "average over the N rows: temperature scaling minimises the mean, not the sum, of -log q_{i, y_i}.",
        ),
        Hint(
            lambda a, e, g: close(_nll_variant(*a, temper_after=True), g),
            "the temperature divides the logits before the softmax; dividing the log-probabilities afterwards "
            "is a different function of T.",
        ),
        Hint(
            lambda a, e, g: not np.isfinite(g),
            "the result is not finite: exp of a large logit overflows. Subtract each row's maximum of G / T before "
            "exponentiating (it cancels in the softmax).",
        ),
    ),
    mistakes=(
        (lambda G, y, T: _nll_variant(G, y, T, divide=False), "divide the logits"),
        (lambda G, y, T: _nll_variant(G, y, T, mean=False), "average over the N rows"),
        (lambda G, y, T: _nll_variant(G, y, T, temper_after=True), "before the softmax"),
        (_naive_nll, "overflows"),
    ),
)
