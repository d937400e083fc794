"""Sections 8.6 and 8.8 (notebook 05_augmentation_distillation): mixup, label smoothing and its finite logit
gap, and the tempered cross-entropy of distillation. The digit transforms, the tempered softmax, the soft
cross-entropy and the trainer the notebook uses are in `common` (section 8.10 uses them too).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..activations import log_softmax, softmax
from ..validation import (
    check_int,
    check_labels,
    check_matrix,
    check_number,
    check_positive,
    check_rng,
)


class Mixed(NamedTuple):
    X: np.ndarray  # (N, d) mixed inputs lam x_i + (1 - lam) x_j
    targets: np.ndarray  # (N, K) mixed targets lam y_i + (1 - lam) y_j
    lam: np.ndarray  # (N,) the mixing weights drawn from Beta(alpha, alpha)


def mixup(X, targets, *, alpha: float = 0.2, rng=None) -> Mixed:
    """Mixup: every example is mixed with a random partner j (a permutation), lam ~ Beta(alpha, alpha),
    ``x = lam x_i + (1 - lam) x_j`` and ``t = lam t_i + (1 - lam) t_j`` for inputs X (N, d) and target
    distributions (N, K) (one-hot or smoothed labels). The draws are the permutation, then lam."""
    X = check_matrix(X, "X")
    targets = check_matrix(targets, "targets", len(X))
    alpha = check_positive(alpha, "alpha")
    rng = check_rng(rng)
    partner = rng.permutation(len(X))
    lam = rng.beta(alpha, alpha, size=len(X))
    return Mixed(
        lam[:, None] * X + (1 - lam[:, None]) * X[partner],
        lam[:, None] * targets + (1 - lam[:, None]) * targets[partner],
        lam,
    )


def smooth_labels(y, K: int, eps: float) -> np.ndarray:
    """Label smoothing: targets (N, K) ``(1 - eps) e_y + eps / K`` for labels y (N,) in 0..K-1 and a strength
    0 <= eps <= 1 (eps = 0: one-hot; eps = 1: uniform). The cross-entropy with these targets is what
    ``nn.CrossEntropyLoss(label_smoothing=eps)`` computes."""
    K = check_int(K, "K", 2)
    y = check_labels(y, "y", n_classes=K)
    eps = check_number(eps, "eps", 0, 1)
    targets = np.full((len(y), K), eps / K)
    targets[np.arange(len(y)), y] += 1 - eps
    return targets


def smoothed_logit_gap(K: int, eps: float) -> float:
    """The logit gap z_y - z_k (k != y) at the minimiser of the smoothed cross-entropy: softmax(z) equals the
    target, so the gap is ``log((1 - eps + eps/K) / (eps/K))``, finite for eps > 0 (infinite for eps = 0)."""
    K = check_int(K, "K", 2)
    eps = check_number(eps, "eps", 0, 1, low_open=True)
    return math.log((1 - eps + eps / K) / (eps / K))


class Distill(NamedTuple):
    loss: float  # mean over the batch of -sum_y p_y log q_y
    grad: np.ndarray  # (N, K) gradient of the loss with respect to the student logits G


def distill_loss(F, G, T: float) -> Distill:
    """The tempered cross-entropy of distillation and its gradient: teacher ``p = softmax(F / T)``, student
    ``q = softmax(G / T)``, ``l = -sum_y p_y log q_y`` averaged over the N rows of F, G (N, K), and
    ``dl/dG_y = (q_y - p_y) / T`` (divided by N for the batch mean). Hinton et al. multiply l by T^2 so that
    the gradient does not shrink with T; this function returns l itself."""
    F = check_matrix(F, "F")
    G = check_matrix(G, "G", *F.shape)
    T = check_positive(T, "T")
    p = softmax(F / T, axis=1)
    log_q = log_softmax(G / T, axis=1)
    return Distill(float(-(p * log_q).sum(axis=1).mean()), (np.exp(log_q) - p) / (T * len(F)))
