"""Activation functions and the softmax, shared by every chapter: NumPy versions with their derivatives, and
one registry that also names the PyTorch version of each (used by the torch modules of dlnotes).

Conventions of the lecture: ``relu'(0) = 1``; the GELU is the exact ``z Phi(z)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import scipy.special
import torch
from torch import nn

from .validation import check_choice


def sigmoid(z) -> np.ndarray:
    """Logistic function ``1 / (1 + e^{-z})``, computed without overflow."""
    return scipy.special.expit(np.asarray(z, dtype=np.float64))


def relu(z) -> np.ndarray:
    """``(z)_+ = max(0, z)``."""
    return np.maximum(np.asarray(z, dtype=np.float64), 0.0)


def gelu(z, approximate: bool = False) -> np.ndarray:
    """``z Phi(z) = z P(Z <= z)`` with Z standard normal (the exact GELU), or with approximate=True its tanh
    approximation ``z/2 (1 + tanh(sqrt(2/pi) (z + 0.044715 z^3)))`` (torch's ``approximate="tanh"``)."""
    if not isinstance(approximate, bool | np.bool_):
        raise TypeError(f"approximate must be True or False, got {approximate!r}")
    z = np.asarray(z, dtype=np.float64)
    if approximate:
        return 0.5 * z * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (z + 0.044715 * z**3)))
    return z * scipy.special.ndtr(z)


def softmax(z, axis: int = -1) -> np.ndarray:
    """``exp(z_i) / sum_j exp(z_j)`` along `axis`; the maximum is subtracted first, so no overflow."""
    z = np.asarray(z, dtype=np.float64)
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def log_softmax(z, axis: int = -1) -> np.ndarray:
    """``z_i - log sum_j exp(z_j)`` along `axis`, computed stably."""
    z = np.asarray(z, dtype=np.float64)
    return z - scipy.special.logsumexp(z, axis=axis, keepdims=True)


class Activation(NamedTuple):
    phi: Callable  # NumPy
    derivative: Callable  # NumPy, phi'(z)
    torch: Callable  # the same function on tensors


ACTIVATIONS = {
    "sigmoid": Activation(sigmoid, lambda z: sigmoid(z) * (1 - sigmoid(z)), torch.sigmoid),
    "tanh": Activation(np.tanh, lambda z: 1 - np.tanh(z) ** 2, torch.tanh),
    "relu": Activation(relu, lambda z: (np.asarray(z) >= 0).astype(np.float64), torch.relu),
    "gelu": Activation(
        gelu,
        lambda z: scipy.special.ndtr(z) + z * np.exp(-np.square(z) / 2) / np.sqrt(2 * np.pi),
        nn.functional.gelu,
    ),
    "abs": Activation(np.abs, np.sign, torch.abs),
    "identity": Activation(
        lambda z: np.asarray(z, dtype=np.float64), lambda z: np.ones_like(z, dtype=np.float64), lambda z: z
    ),
}


def get_activation(name: str) -> Activation:
    """The activation called `name` (a key of `ACTIVATIONS`)."""
    return ACTIVATIONS[check_choice(name, "activation", list(ACTIVATIONS))]
