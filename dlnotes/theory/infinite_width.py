"""Section 9.1 (continued), notebook ``02_infinite_width``: infinite width, lazy and rich training.

The infinite-width NTK of the 2-layer ReLU network in closed form, the deep ReLU network in NTK parametrisation
(its limit kernel, `common.relu_ntk_deep`, is shared with 9.3), lazy training measured as the change of the NTK
during gradient descent, the kernel-target alignment, and ensembles of trained wide networks against the
infinite-width prediction.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from ..training import (
    to_numpy,
)
from ..validation import (
    check_int,
    check_matrix,
    check_number,
    check_positive,
    check_rng,
    check_vector,
)
from .common import (
    _ntk_check_kernel,
    ntk_two_layer,
    relu_gaussian_moments,
    train_two_layer,
    two_layer_net,
    two_layer_output,
)


def relu_ntk_limit(X1, X2) -> np.ndarray:
    """The infinite-width NTK :math:`k_\\infty` of the 2-layer ReLU net `TwoLayerNet` with
    :math:`w_j\\sim\\mathcal N(0, I)`, :math:`v_j\\sim\\mathcal N(0, 1)` (the limit :math:`m\\to\\infty` of
    `ntk_two_layer`, by the law of large numbers), with :math:`\\psi = \\angle(x, x')`:

    .. math:: k_\\infty(x, x') = \\frac{\\|x\\|\\|x'\\|}{2\\pi}\\big(\\sin\\psi + (\\pi - \\psi)\\cos\\psi\\big)
              + x^\\top x'\\,\\frac{\\pi - \\psi}{2\\pi}
              = \\mathbb E[\\varphi(w^\\top x)\\varphi(w^\\top x')] + \\mathbb E[v^2]\\,
              \\mathbb E[\\varphi'(w^\\top x)\\varphi'(w^\\top x')]\\,x^\\top x'.

    X1 (n1, d), X2 (n2, d), no zero rows; returns (n1, n2). Section 9.1 (continued).
    """
    X1 = check_matrix(X1, "X1")
    X2 = check_matrix(X2, "X2", None, X1.shape[1])
    for name, X in (("X1", X1), ("X2", X2)):
        if (np.linalg.norm(X, axis=1) == 0).any():
            raise ValueError(
                f"{name} must not contain the zero vector (its angle to other inputs is undefined)"
            )
    G = X1 @ X2.T
    value, derivative = relu_gaussian_moments((X1**2).sum(1)[:, None], G, (X2**2).sum(1)[None, :])
    return value + derivative * G


class DeepReLUNet(nn.Module):
    """A ReLU network in NTK parametrisation with L = `depth` layers of weights (L - 1 hidden layers of width m)
    and one output, :math:`h^1 = \\frac{\\sigma_w}{\\sqrt d}W^1x + \\sigma_b b^1`,
    :math:`h^l = \\frac{\\sigma_w}{\\sqrt m}W^l\\varphi(h^{l-1}) + \\sigma_b b^l`, :math:`f = h^L`, every trained
    parameter (W^l, b^l) drawn from :math:`\\mathcal N(0, 1)` (float64, in the order W^1, b^1, W^2, ...). Its
    NTK tends to `relu_ntk_deep` as m grows. X (n, d) -> (n,). Section 9.1 (continued)."""

    def __init__(self, d: int, m: int, depth: int, sigma_w2: float = 2.0, sigma_b2: float = 0.0, rng=None):
        super().__init__()
        d, m, depth = check_int(d, "d", 1), check_int(m, "m", 1), check_int(depth, "depth", 1)
        self.sigma_w = math.sqrt(check_positive(sigma_w2, "sigma_w2"))
        self.sigma_b = math.sqrt(check_number(sigma_b2, "sigma_b2", 0.0))
        rng = check_rng(rng)
        sizes = [d] + [m] * (depth - 1) + [1]
        weights, biases = [], []
        for fan_in, fan_out in zip(sizes, sizes[1:], strict=False):
            weights.append(nn.Parameter(torch.tensor(rng.standard_normal((fan_out, fan_in)))))
            biases.append(nn.Parameter(torch.tensor(rng.standard_normal(fan_out))))
        self.weights, self.biases = nn.ParameterList(weights), nn.ParameterList(biases)

    def forward(self, X) -> torch.Tensor:
        h = torch.as_tensor(X, dtype=self.weights[0].dtype)
        for layer, (W, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            if layer > 0:
                h = torch.relu(h)
            h = self.sigma_w / math.sqrt(W.shape[1]) * h @ W.T + self.sigma_b * b
        return h[:, 0]


class LazyRun(NamedTuple):
    m: int  # the width
    K0: np.ndarray  # the NTK on the training inputs at initialisation (n, n)
    KT: np.ndarray  # ... after training
    drift: float  # ||K_T - K_0||_F / ||K_0||_F
    losses: np.ndarray  # 1/2 ||y - f||^2 along training (steps + 1,)


def lazy_training(
    X, y, m: int, steps: int, activation: str = "relu", rng=None, progress: bool = True
) -> LazyRun:
    """Draw a `TwoLayerNet` of width m (`two_layer_net`), train it by full-batch gradient descent with step
    :math:`1/\\lambda_{\\max}(K_0)` for `steps` steps (`train_two_layer`) and return its NTK on X before and after,
    with their relative change `kernel_drift`: the measurement of lazy training. X (n, d), y (n,). Returns a
    `LazyRun`. Section 9.1 (continued)."""
    X = check_matrix(X, "X")
    y = check_vector(y, "y", len(X))
    net = two_layer_net(X.shape[1], m, activation, rng)
    W0, v0 = to_numpy(net.W), to_numpy(net.v)
    run = train_two_layer(X, y, W0, v0, steps, activation=activation, progress=progress)
    K0 = ntk_two_layer(X, X, W0, v0, activation)
    KT = ntk_two_layer(X, X, run.W, run.v, activation)
    return LazyRun(net.v.shape[0], K0, KT, kernel_drift(K0, KT), run.losses)


def kernel_drift(K0, KT) -> float:
    """The relative change of a kernel during training, :math:`\\|K_T - K_0\\|_F/\\|K_0\\|_F` (Frobenius norms);
    K0 and KT (n, n). Section 9.1 (continued)."""
    K0 = check_matrix(K0, "K0")
    KT = check_matrix(KT, "KT", *K0.shape)
    return float(np.linalg.norm(KT - K0) / np.linalg.norm(K0))


def kernel_alignment(K, y) -> float:
    """The kernel-target alignment :math:`A(K, y) = \\frac{y^\\top K y}{\\|K\\|_F\\,\\|y\\|^2}` (Cristianini et al., 2002),
    the cosine between the matrices K and :math:`yy^\\top`: 1 when K is a multiple of :math:`yy^\\top`.
    K (n, n), y (n,). Section 9.1 (continued)."""
    K = _ntk_check_kernel(K)
    y = check_vector(y, "y", len(K))
    return float(y @ K @ y / (np.linalg.norm(K) * (y @ y)))


class EnsembleRun(NamedTuple):
    mean: np.ndarray  # the ensemble's mean output at X_star (n*,)
    outputs: np.ndarray  # every member's output at X_star (2 pairs, n*); pair k at rows 2k, 2k + 1


def ntk_ensemble(X, y, X_star, m: int, pairs: int, steps: int, eta: float, rng=None) -> EnsembleRun:
    """An ensemble of 2-layer ReLU nets of width m (`two_layer_net`) trained by `steps` steps of full-batch
    gradient descent with step `eta` (`train_two_layer`) on X (n, d), y (n,), evaluated at X_star (n*, d).
    The members come in antithetic pairs (W, v) and (W, -v), drawn from `rng`: the two initial functions are
    f_0 and -f_0 with the same NTK, so each pair's mean starts at exactly 0 and, while training is lazy, ends at
    :math:`K_0(x, X)K_0^{-1}(I - e^{-K_0t})y` with t = steps * eta; as m grows, K_0 -> k_infinity and the mean
    tends to the NTK-GP posterior mean `ntk.ntk_flow` with `relu_ntk_limit`. Returns an `EnsembleRun`.
    Section 9.1 (continued).
    """
    X = check_matrix(X, "X")
    y = check_vector(y, "y", len(X))
    X_star = check_matrix(X_star, "X_star", None, X.shape[1])
    pairs = check_int(pairs, "pairs", 1)
    eta = check_positive(eta, "eta")
    rng = check_rng(rng)
    outputs = []
    for _ in range(pairs):
        net = two_layer_net(X.shape[1], m, "relu", rng)
        W0, v0 = to_numpy(net.W), to_numpy(net.v)
        for sign in (1.0, -1.0):
            run = train_two_layer(X, y, W0, sign * v0, steps, eta, progress=False)
            outputs.append(two_layer_output(X_star, run.W, run.v))
    outputs = np.array(outputs)
    return EnsembleRun(outputs.mean(axis=0), outputs)
