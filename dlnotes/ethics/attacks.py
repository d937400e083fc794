"""Section 11.3 of chapter 11 (notebook 03_attacks), attacks on networks: class probabilities and
per-example losses, accuracy as a function of the budget and the transfer of adversarial examples between
models. FGSM and PGD themselves are in `common`, since every later section uses them.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..training import to_numpy
from ..validation import (
    check_array,
    check_callable,
    check_matrix,
)
from .common import _inputs, _labels, predict, robust_accuracy


def _models(models) -> list[nn.Module]:
    if isinstance(models, nn.Module) or not isinstance(models, list | tuple) or not models:
        raise TypeError(
            f"models must be a non-empty list or tuple of torch.nn.Module classifiers, got {type(models).__name__}"
        )
    for i, model in enumerate(models):
        if not isinstance(model, nn.Module):
            raise TypeError(f"models[{i}] must be a torch.nn.Module, got {type(model).__name__}")
    return list(models)


@torch.no_grad()
def class_probabilities(model: nn.Module, X) -> np.ndarray:
    """The softmax of the logits, :math:`P(k\\mid x) = e^{f_k(x)}/\\sum_j e^{f_j(x)}`, of a batch X (n, d), as
    (n, K) (11.3)."""
    return to_numpy(torch.softmax(model(_inputs(model, X)), dim=1))


@torch.no_grad()
def example_losses(model: nn.Module, X, y) -> np.ndarray:
    """The cross-entropy of every example, :math:`L(f(x_i), y_i) = -\\log P(y_i\\mid x_i)`, of X (n, d) with
    labels y (n,), as (n,) (11.3)."""
    x = _inputs(model, X)
    y = _labels(model, x, y)
    return to_numpy(F.cross_entropy(model(x), y, reduction="none"))


def accuracy_curve(model: nn.Module, X, y, attack, eps_grid) -> np.ndarray:
    """Accuracy under attack as a function of the budget:
    :math:`\\mathrm{acc}(\\epsilon) = \\frac1n\\sum_i \\mathbb 1[\\arg\\max_k f_k(x_i^{\\mathrm{adv}}(\\epsilon)) = y_i]`
    with ``attack(model, X, y, eps) -> X_adv``; at ε = 0 it is the clean accuracy (the attack is not called).
    X (n, d), y (n,), eps_grid (m,) of budgets ≥ 0 -> (m,) (11.3)."""
    X = check_matrix(X, "X")
    y = to_numpy(_labels(model, _inputs(model, X), y))
    attack = check_callable(attack, "attack")
    eps_grid = check_array(eps_grid, "eps_grid", (None,))
    if len(eps_grid) == 0 or np.any(eps_grid < 0):
        raise ValueError(f"eps_grid must be a non-empty vector of budgets >= 0, got {eps_grid}")
    return np.array(
        [
            robust_accuracy(
                model, X, y, None if eps == 0 else (lambda m, X, y, eps=eps: attack(m, X, y, eps))
            )
            for eps in eps_grid
        ]
    )


def transfer_matrix(models, X, y, attack) -> np.ndarray:
    """How adversarial examples transfer: entry [s, t] is the accuracy of ``models[t]`` on
    ``attack(models[s], X, y)``, the examples crafted on the source model s. The diagonal is each model's
    white-box accuracy, an off-diagonal entry a black-box (transfer) attack. X (n, d), y (n,) -> (S, S) (11.3)."""
    models = _models(models)
    X = check_matrix(X, "X")
    for model in models:
        y = to_numpy(_labels(model, _inputs(model, X), y))
    attack = check_callable(attack, "attack")
    matrix = np.empty((len(models), len(models)))
    for s, source in enumerate(models):
        X_adv = attack(source, X, y)
        for t, target in enumerate(models):
            matrix[s, t] = float((predict(target, X_adv) == y).mean())
    return matrix
