"""Section 9.2, notebook ``03_bayesian_inference``: Bayesian inference for neural networks.

The Gaussian likelihood and the energy (the negative log posterior), self-normalised importance weights and
Bayesian ensembling (quadrature and importance sampling of the predictive distribution), and the expected
calibration error. The posterior of Bayesian linear regression is `common.bayes_linreg`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..validation import (
    check_array,
    check_int,
    check_labels,
    check_matrix,
    check_positive,
    check_vector,
)
from .common import (
    _check_prior_var,
)


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
