"""Section 11.8 of chapter 11 (notebook 09_people), harms to people that a model can do besides unfair
decisions: membership inference (what a model reveals about its training data), the clip-and-noise step of
DP-SGD that bounds it, and a backdoor planted by poisoning a few training examples.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from scipy.stats import rankdata
from torch import nn

from ..training import to_numpy
from ..validation import check_array, check_int, check_number, check_positive, check_rng, check_vector
from .common import _inputs, _labels


def membership_auc(loss_members, loss_nonmembers) -> float:
    """The AUC of the loss-threshold membership attack (Yeom et al., 2018): guess "member" when the loss is
    below a threshold; over all thresholds, the probability that a random non-member has a higher loss than a
    random member (ties count one half). 0.5 = the attack learns nothing. Losses (m,) and (k,) -> float (11.8)."""
    members = check_vector(loss_members, "loss_members")
    others = check_vector(loss_nonmembers, "loss_nonmembers")
    ranks = rankdata(np.concatenate([members, others]))  # ties get their mean rank
    above = ranks[len(members) :].sum() - len(others) * (len(others) + 1) / 2  # Mann–Whitney U of non-members
    return float(above / (len(members) * len(others)))


def per_example_gradients(model: nn.Module, X, y) -> np.ndarray:
    """The gradient of every example's cross-entropy with respect to all parameters of `model`, flattened:
    X (n, d), labels y (n,) in 0..K-1 -> (n, P), P the number of parameters (11.8)."""
    x = _inputs(model, X)
    labels = _labels(model, x, y)
    params = [p for p in model.parameters() if p.requires_grad]
    rows = []
    for i in range(len(x)):
        loss = F.cross_entropy(model(x[i : i + 1]), labels[i : i + 1])
        rows.append(torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, params)]))
    return to_numpy(torch.stack(rows)).astype(np.float64)


def clip_and_noise(grads, C: float, sigma: float, rng=None) -> np.ndarray:
    """The private gradient of one DP-SGD step (Abadi et al., 2016): clip every example's gradient to ℓ2 norm
    at most C, :math:`g_i \\min(1, C/\\lVert g_i\\rVert_2)`, sum, add Gaussian noise :math:`\\mathcal N(0,
    \\sigma^2C^2I)` drawn from `rng`, and divide by the batch size n. grads (n, P) -> (P,) (11.8)."""
    grads = check_array(grads, "grads")
    if grads.ndim != 2:
        raise ValueError(f"grads must hold one gradient per row (n, P), got shape {grads.shape}")
    C, sigma = check_positive(C, "C"), check_number(sigma, "sigma", 0)
    norms = np.linalg.norm(grads, axis=1, keepdims=True)
    clipped = grads * np.minimum(1.0, C / np.maximum(norms, 1e-300))
    noise = sigma * C * check_rng(rng).normal(size=grads.shape[1])
    return (clipped.sum(axis=0) + noise) / len(grads)


def add_trigger(X, size: int = 2, side: int = 8) -> np.ndarray:
    """Plant a backdoor trigger: set the bottom-right ``size`` × ``size`` pixels of every image (rows of
    ``side`` × ``side`` pixels in [0, 1]) to 1. X (n, side²) -> a copy (n, side²) (11.8)."""
    X = check_array(X, "X")
    side = check_int(side, "side", 1)
    if X.ndim != 2 or X.shape[1] != side * side:
        raise ValueError(
            f"X must be a batch of rows (n, {side * side}) of {side}x{side} images, got shape {X.shape}"
        )
    size = check_int(size, "size", 1, side)
    images = X.reshape(len(X), side, side).copy()
    images[:, side - size :, side - size :] = 1.0
    return images.reshape(len(X), side * side)
