"""Section 8.4 (notebook 03_dropout_ensembles): dropout in both scalings, training the dropout MLP, the dropout
ensemble by enumeration and by Monte Carlo, the weighted geometric mean, bootstrap resamples, bagging and the
Brier decomposition. The dropout layer and the MLP themselves are in `common` (sections 8.8 and 8.10 use
them too).
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from ..training import accuracy, evaluate
from ..validation import (
    check_array,
    check_callable,
    check_int,
    check_labels,
    check_matrix,
    check_number,
    check_rng,
    check_vector,
)
from .common import TrainedClassifier, train_digits_classifier


def _keep_probabilities(pi, width: int | None = None) -> np.ndarray | float:
    """Keep probabilities pi in (0, 1]: one number, or one per unit (a vector of length `width`)."""
    if isinstance(pi, numbers.Real) and not isinstance(pi, (bool, np.bool_)):
        return check_number(pi, "pi", 0, 1, low_open=True)
    pi = check_vector(pi, "pi", width)
    if ((pi <= 0) | (pi > 1)).any():
        raise ValueError(
            f"pi must hold keep probabilities in (0, 1], got values from {pi.min():.3g} to {pi.max():.3g}"
        )
    return pi


def _unit_keep_probabilities(pi) -> np.ndarray:
    """One keep probability per droppable unit: a vector (R,) with 1 <= R <= 20."""
    if isinstance(pi, numbers.Real):
        raise TypeError("pi must be a vector of R keep probabilities (one per droppable unit), got a number")
    pi = _keep_probabilities(pi)
    if len(pi) > 20:
        raise ValueError(f"pi must have at most 20 entries (2^R sub-networks), got R = {len(pi)}")
    return pi


class Dropped(NamedTuple):
    out: np.ndarray  # the layer's output, same shape as x
    mask: np.ndarray  # the dropout mask b, 1.0 = unit kept, 0.0 = dropped (all ones at evaluation)


def dropout(x, pi, *, training: bool = True, inverted: bool = True, rng=None) -> Dropped:
    r"""Dropout of the units of x (..., R) with keep probability $\pi_i$ (a number, or one per unit, the last
    axis of x), mask $b_i\sim\mathrm{Bern}(\pi_i)$ drawn independently for every entry.

    Inverted dropout (``inverted=True``, what frameworks do): training $b\odot x/\pi$, evaluation $x$, so that
    $\mathbb E_b[b_ix_i/\pi_i]=x_i$ and nothing changes at test time. The original form (``inverted=False``,
    [Srivastava et al. 2014]): training $b\odot x$, evaluation $\pi\odot x$ (the weights of the next layer
    scaled by $\pi$). ``torch.nn.Dropout(p)`` is the inverted form with the *drop* probability $p=1-\pi$.
    """
    x = check_array(x, "x")
    if not isinstance(training, (bool, np.bool_)) or not isinstance(inverted, (bool, np.bool_)):
        raise TypeError(f"training and inverted must be True or False, got {training!r} and {inverted!r}")
    pi = _keep_probabilities(pi, x.shape[-1] if x.ndim else None)
    rng = check_rng(rng)
    if not training:
        return Dropped(x if inverted else pi * x, np.ones_like(x))
    mask = (rng.random(x.shape) < pi).astype(np.float64)
    return Dropped(mask * x / pi if inverted else mask * x, mask)


class Scores(NamedTuple):
    cross_entropy: float  # mean cross-entropy in nats
    accuracy: float  # fraction of correct arg-max predictions


def classifier_scores(model: nn.Module, X, y) -> Scores:
    """Mean cross-entropy and accuracy of `model` (by `evaluate`, in eval mode, so without dropout) on inputs
    X (N, d) and labels y (N,); the model is left in the mode it came in."""
    X = check_matrix(X, "X")
    y = check_labels(y, "y", len(X))
    batch = (torch.as_tensor(X, dtype=torch.float32), torch.as_tensor(y))
    scores = evaluate(model, [batch], {"cross_entropy": nn.functional.cross_entropy, "accuracy": accuracy})
    return Scores(scores["cross_entropy"], scores["accuracy"])


def train_dropout_mlp(
    X,
    y,
    pi: float = 0.5,
    *,
    X_val=None,
    y_val=None,
    hidden: int = 512,
    pi_input: float = 1.0,
    epochs: int = 300,
    lr: float = 1e-3,
    batch_size: int | None = None,
    rng=None,
    progress: bool = True,
) -> TrainedClassifier:
    """A one-hidden-layer `dropout_mlp` (``hidden`` ReLU units, keep probability ``pi``, ``pi_input`` on the
    inputs) trained on the cross-entropy of inputs X (N, d) and labels y (N,) for `epochs` passes: the chapter's
    trainer `train_digits_classifier` with the defaults of section 8.4 (``torch.optim.AdamW`` without weight
    decay, which steps as Adam, lr 1e-3, 512 units, full batch; mini-batches of `batch_size` sliced on the
    device in a new random order every epoch otherwise). With ``X_val, y_val`` the history also holds the
    validation cross-entropy (eval mode) after every epoch. Initial weights, masks and batches all come from
    `rng`: the same integer `rng` gives arms with the same initial weights whatever ``pi`` is (a paired
    comparison). Returns the model in eval mode."""
    return train_digits_classifier(
        X, y, hidden=hidden, pi=pi, pi_input=pi_input, X_val=X_val, y_val=y_val, epochs=epochs, lr=lr,
        batch_size=batch_size, rng=rng, progress=progress,
    )  # fmt: skip


def all_masks(R: int) -> np.ndarray:
    """All 2^R dropout masks b in {0, 1}^R as rows of a (2^R, R) array of 0.0/1.0 (row k holds the bits of k)."""
    R = check_int(R, "R", 1, 20)
    return ((np.arange(2**R)[:, None] >> np.arange(R)) & 1).astype(np.float64)


def mask_probabilities(masks, pi) -> np.ndarray:
    r"""$p(b)=\prod_i\pi_i^{b_i}(1-\pi_i)^{1-b_i}$ for every row b of `masks` (M, R)."""
    masks = check_matrix(masks, "masks")
    if not np.isin(masks, (0.0, 1.0)).all():
        raise ValueError("masks must hold only 0 and 1")
    pi = _keep_probabilities(pi, masks.shape[1])
    return np.prod(np.where(masks == 1, pi, 1 - pi), axis=1)


def _mask_outputs(f, x, masks) -> np.ndarray:
    outputs = np.asarray(f(x, masks), dtype=np.float64)
    if outputs.ndim < 1 or len(outputs) != len(masks):
        raise ValueError(
            f"f(x, masks) must return one output per mask, an array ({len(masks)}, ...), got shape {outputs.shape}"
        )
    return outputs


class MaskMixture(NamedTuple):
    masks: np.ndarray  # (2^R, R) every mask b
    probs: np.ndarray  # (2^R,) p(b)
    outputs: np.ndarray  # (2^R, ...) the output of every sub-network, f(x, b)
    mixture: np.ndarray  # (...) sum_b p(b) f(x, b), the dropout ensemble


def dropout_all_masks(f: Callable, x, pi) -> MaskMixture:
    r"""The dropout ensemble by enumeration: $\sum_{b\in\{0,1\}^R}p(b)\,f(x;b)$ over all $2^R$ sub-networks.

    ``f(x, masks)`` evaluates the network on input x for a batch of masks (M, R) and returns (M, ...) outputs
    (e.g. class probabilities); ``pi`` is one keep probability or one per droppable unit (R,), with R the
    length of ``pi`` (R <= 20)."""
    check_callable(f, "f")
    pi_vector = _unit_keep_probabilities(pi)
    masks = all_masks(len(pi_vector))
    probs = mask_probabilities(masks, pi_vector)
    outputs = _mask_outputs(f, x, masks)
    return MaskMixture(masks, probs, outputs, np.tensordot(probs, outputs, axes=1))


class MonteCarlo(NamedTuple):
    mean: np.ndarray  # (...) the average of f(x, b) over the sampled masks
    stderr: np.ndarray  # (...) its standard error, sample std / sqrt(n)


def dropout_monte_carlo(f: Callable, x, pi, n: int, *, chunk: int = 10_000, rng=None) -> MonteCarlo:
    r"""Monte-Carlo estimate of the dropout ensemble $\sum_bp(b)f(x;b)$: the mean of f(x, b) over n masks
    $b_i\sim\mathrm{Bern}(\pi_i)$, drawn from `rng` and evaluated `chunk` at a time (``f`` as in
    `dropout_all_masks`). Its error shrinks like $1/\sqrt n$."""
    check_callable(f, "f")
    pi = _unit_keep_probabilities(pi)
    n, chunk, rng = check_int(n, "n", 2), check_int(chunk, "chunk", 1), check_rng(rng)
    total = total_sq = 0.0
    for start in range(0, n, chunk):
        masks = (rng.random((min(chunk, n - start), len(pi))) < pi).astype(np.float64)
        outputs = _mask_outputs(f, x, masks)
        total = total + outputs.sum(axis=0)
        total_sq = total_sq + (outputs**2).sum(axis=0)
    mean = total / n
    variance = np.maximum(total_sq / n - mean**2, 0) * n / (n - 1)
    return MonteCarlo(mean, np.sqrt(variance / n))


def weighted_geometric_mean(probs, weights=None) -> np.ndarray:
    r"""The renormalised weighted geometric mean of distributions, one per row of probs (M, K):
    $q_y\propto\exp\sum_bw_b\log p_y^{(b)}$ (weights w (M,) summing to 1; uniform 1/M when None).
    For a softmax layer with dropout on its inputs and $w_b=p(b)$ this equals the softmax of the weight-scaled
    layer exactly."""
    probs = check_matrix(probs, "probs")
    if (probs <= 0).any():
        raise ValueError("probs must hold positive probabilities (the log of 0 is -inf)")
    if weights is None:
        weights = np.full(len(probs), 1 / len(probs))
    weights = check_vector(weights, "weights", len(probs))
    if (weights < 0).any() or not np.isclose(weights.sum(), 1.0):
        raise ValueError(f"weights must be >= 0 and sum to 1, got sum {weights.sum():.6g}")
    log_q = weights @ np.log(probs)
    log_q -= log_q.max()
    q = np.exp(log_q)
    return q / q.sum()


def bootstrap_indices(n: int, K: int, rng=None) -> np.ndarray:
    """K bootstrap resamples of n examples: a (K, n) array of indices drawn uniformly *with* replacement.
    Each resample holds on average 1 - (1 - 1/n)^n ~ 1 - 1/e ~ 63.2 % of the distinct examples."""
    n, K, rng = check_int(n, "n", 1), check_int(K, "K", 1), check_rng(rng)
    return rng.integers(0, n, size=(K, n))


class Bagged(NamedTuple):
    models: list  # the K fitted models, one per resample
    indices: np.ndarray  # (K, n) the bootstrap resample of each model


def bagging(fit_model: Callable, X, y, K: int, rng=None) -> Bagged:
    r"""Bagging ([Breiman 1996]): draw K bootstrap resamples of (X, y) with `bootstrap_indices` and fit one model
    on each, ``fit_model(X_k, y_k, rng)`` (``rng`` the generator, for the model's own randomness). Average the
    members' predicted probabilities, $p(y|x)=\frac1K\sum_kp(y|x;\theta_k)$, to predict."""
    check_callable(fit_model, "fit_model")
    X = check_array(X, "X")
    y = np.asarray(y)
    if y.ndim == 0 or len(y) != len(X):
        raise ValueError(f"y must have one target per row of X ({len(X)}), got shape {y.shape}")
    K, rng = check_int(K, "K", 1), check_rng(rng)
    indices = bootstrap_indices(len(X), K, rng)
    return Bagged([fit_model(X[idx], y[idx], rng) for idx in indices], indices)


class Brier(NamedTuple):
    ensemble: float  # mean over examples of ||p_bar - e_y||^2, the ensemble's Brier score
    members: float  # mean over examples and members of ||p_k - e_y||^2
    ambiguity: float  # mean over examples and members of ||p_k - p_bar||^2, the spread of the members


def brier_decomposition(member_probs, y) -> Brier:
    r"""The ambiguity decomposition of the Brier score of an ensemble $\bar p=\frac1K\sum_kp_k$:
    $\|\bar p-e_y\|^2=\frac1K\sum_k\|p_k-e_y\|^2-\frac1K\sum_k\|p_k-\bar p\|^2$ (exact, for every example),
    so the ensemble is better than its average member by exactly the members' disagreement. member_probs is
    (K, N, C), y (N,) labels in 0..C-1; the three terms are averaged over the N examples."""
    member_probs = check_array(member_probs, "member_probs", ndim=3)
    K, N, C = member_probs.shape
    y = check_labels(y, "y", N, n_classes=C)
    onehot = np.eye(C)[y]
    p_bar = member_probs.mean(axis=0)
    return Brier(
        float(((p_bar - onehot) ** 2).sum(axis=1).mean()),
        float(((member_probs - onehot) ** 2).sum(axis=2).mean()),
        float(((member_probs - p_bar) ** 2).sum(axis=2).mean()),
    )
