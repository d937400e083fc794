"""Chapter 08 — tricks of the trade: initialisation schemes and the forward variance through depth, weight decay
(also with Adam and AdamW) and early stopping, dropout and its ensemble view, bagging, batch, layer and weight
normalisation, data augmentation, label smoothing, semi-supervised learning, scaled residual stacks, knowledge
distillation and the reparameterisation trick.

Conventions: a weight matrix W is (m, n) = (fan-out, fan-in), as in ``torch.nn.Linear``; a batch of
features is an array (B, d), one example per row.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import torch
from scipy import ndimage
from torch import nn
from tqdm.auto import tqdm

from .activations import log_softmax, softmax
from .training import Step, accuracy, device, fit, make_loader, model_device, to_numpy
from .validation import (
    check_array,
    check_callable,
    check_choice,
    check_int,
    check_labels,
    check_matrix,
    check_number,
    check_positive,
    check_rng,
    check_vector,
)

# ----------------------------------------------------------------------------- 8.1 initialisation


INIT_SCHEMES = ("lecun", "glorot", "he", "orthogonal", "torch_default")
INIT_DISTS = ("normal", "uniform")
DEPTH_ACTIVATIONS = ("linear", "tanh", "relu")


def init_std(n: int, m: int, scheme: str = "lecun", gain: float = 1.0) -> float:
    """The standard deviation sigma of the initial weights of a layer W (m, n) with fan-in n, fan-out m.

    LeCun sigma^2 = 1/n (keeps the forward variance of a linear layer), Glorot/Xavier sigma^2 = 2/(n + m)
    (between the forward 1/n and the backward 1/m), He/Kaiming sigma^2 = 2/n (ReLU halves the second moment),
    ``"torch_default"`` sigma^2 = 1/(3n), the variance of U[-1/sqrt(n), 1/sqrt(n)] that ``nn.Linear`` draws
    (``kaiming_uniform_(a=sqrt(5))``; not LeCun), ``"orthogonal"`` sigma^2 = 1/n, the variance of one entry of
    an orthogonal matrix Q (n, n). `gain` multiplies sigma.
    """
    n = check_int(n, "n", 1)
    m = check_int(m, "m", 1)
    scheme = check_choice(scheme, "scheme", INIT_SCHEMES)
    gain = check_positive(gain, "gain")
    variance = {"lecun": 1 / n, "glorot": 2 / (n + m), "he": 2 / n, "orthogonal": 1 / max(n, m)}.get(
        scheme, 1 / (3 * n)
    )
    return gain * math.sqrt(variance)


def fixed_init(shape, sigma: float, dist: str = "normal", rng=None) -> np.ndarray:
    """Weights of the given shape with variance sigma^2: N(0, sigma^2) or U[-sqrt(3) sigma, sqrt(3) sigma]
    (a uniform U[-b, b] has variance b^2/3, so both have the same variance)."""
    if isinstance(shape, numbers.Integral):
        shape = (shape,)
    if not isinstance(shape, tuple | list) or not all(
        isinstance(k, numbers.Integral) and not isinstance(k, bool) and k >= 1 for k in shape
    ):
        raise ValueError(f"shape must be a tuple of ints >= 1, got {shape!r}")
    sigma = check_number(sigma, "sigma", 0)
    dist = check_choice(dist, "dist", INIT_DISTS)
    rng = check_rng(rng)
    if dist == "normal":
        return sigma * rng.standard_normal(tuple(shape))
    bound = math.sqrt(3) * sigma
    return rng.uniform(-bound, bound, size=tuple(shape))


def haar_orthogonal(n: int, m: int | None = None, rng=None) -> np.ndarray:
    """A random matrix Q (m, n) with orthonormal columns (m >= n) or rows (m < n), Haar-distributed: the QR
    decomposition of a Gaussian matrix, with the signs of diag(R) moved into Q (without that fix Q is not
    uniformly distributed: numpy's QR makes diag(R) mostly negative, which biases the signs of Q)."""
    n = check_int(n, "n", 1)
    m = n if m is None else check_int(m, "m", 1)
    rng = check_rng(rng)
    big, small = max(n, m), min(n, m)
    q, r = np.linalg.qr(rng.standard_normal((big, small)))
    q = q * np.where(np.diag(r) < 0, -1.0, 1.0)
    return q if m >= n else q.T


def init_weights(n: int, m: int, scheme: str = "lecun", dist: str = "normal", gain: float = 1.0, rng=None):
    """Initial weights W (m, n) (fan-out m, fan-in n, as ``nn.Linear(n, m).weight``); biases start at 0.

    ``scheme`` picks the variance (see `init_std`: ``"lecun"`` 1/n, ``"glorot"`` 2/(n + m), ``"he"`` 2/n,
    ``"torch_default"`` 1/(3n)), ``dist`` the distribution with that variance (``"normal"`` N(0, sigma^2),
    ``"uniform"`` U[-sqrt(3) sigma, sqrt(3) sigma]), `gain` multiplies sigma. ``"orthogonal"`` returns
    W = gain * Q with Q Haar-random orthogonal (`haar_orthogonal`), so W^T W = gain^2 I when m >= n (``dist``
    is ignored). Equal in distribution to ``torch.nn.init``'s ``kaiming_normal_(w, nonlinearity="linear")``
    (LeCun), ``xavier_normal_``/``xavier_uniform_`` (Glorot), ``kaiming_normal_(w, nonlinearity="relu")``
    (He), ``orthogonal_(w, gain)``.
    """
    sigma = init_std(n, m, scheme, gain)
    dist = check_choice(dist, "dist", INIT_DISTS)
    rng = check_rng(rng)
    if scheme == "orthogonal":
        return gain * haar_orthogonal(n, m, rng)
    return fixed_init((m, n), sigma, dist, rng)


def _activate(a: np.ndarray, activation: str) -> tuple[np.ndarray, np.ndarray]:
    """phi(a) and phi'(a) for the activations of the depth experiment."""
    if activation == "linear":
        return a, np.ones_like(a)
    if activation == "tanh":
        h = np.tanh(a)
        return h, 1 - h**2
    return np.maximum(a, 0), (a > 0).astype(a.dtype)


class DepthStats(NamedTuple):
    forward: np.ndarray  # (depth,) RMS of the pre-activations a_l of layers l = 1..depth
    backward: np.ndarray  # (depth,) RMS of the gradients dE/da_l, back-propagated from a random dE/da_depth


def propagate_stats(
    x, depth: int, *, scheme: str = "lecun", activation: str = "linear", gain: float = 1.0, rng=None
) -> DepthStats:
    """Forward and backward statistics of a deep network of constant width d at initialisation.

    x (B, d) goes through ``depth`` layers a_l = W_l h_{l-1}, h_l = phi(a_l) (h_0 = x, no biases), with
    W_l (d, d) from `init_weights` (``scheme``, ``gain``). Backward, a random unit-variance gradient
    G = dE/da_depth (B, d) is propagated by dE/da_{l-1} = (dE/da_l W_l) * phi'(a_{l-1}). Returns the RMS
    sqrt(mean(a_l^2)) of every layer's pre-activations and of their gradients. The random draws are the
    weights W_1, ..., W_depth in order, then G.
    """
    x = check_matrix(x, "x")
    depth = check_int(depth, "depth", 1)
    activation = check_choice(activation, "activation", DEPTH_ACTIVATIONS)
    rng = check_rng(rng)
    d = x.shape[1]
    weights = [init_weights(d, d, scheme, gain=gain, rng=rng) for _ in range(depth)]
    grad = rng.standard_normal(x.shape)
    pre, derivatives, h = [], [], x
    for W in weights:
        a = h @ W.T
        h, derivative = _activate(a, activation)
        pre.append(a)
        derivatives.append(derivative)
    backward = np.empty(depth)
    for layer in range(depth - 1, -1, -1):
        backward[layer] = np.sqrt(np.mean(grad**2))
        if layer > 0:
            grad = (grad @ weights[layer]) * derivatives[layer - 1]
    forward = np.array([np.sqrt(np.mean(a**2)) for a in pre])
    return DepthStats(forward, backward)


# ----------------------------------------------------------------------------- 8.2-8.3 weight decay and early stopping
def _decay_arguments(theta, g, eta, mu) -> tuple[np.ndarray, np.ndarray, float, float]:
    theta = check_array(theta, "theta")
    g = check_array(g, "g", theta.shape)
    return theta, g, check_positive(eta, "eta"), check_number(mu, "mu", 0)


def weight_decay_step(theta, g, state: dict, eta: float, mu: float) -> Step:
    """One gradient step on ``R(theta) + mu/2 ||theta||^2`` with ``g = grad R(theta)``: the multiplicative
    shrink ``theta <- (1 - eta mu) theta - eta g`` (torch's ``SGD(weight_decay=mu)`` without momentum).
    No state."""
    theta, g, eta, mu = _decay_arguments(theta, g, eta, mu)
    return Step((1 - eta * mu) * theta - eta * g, state)


def adamw_step(
    theta, g, state: dict, eta: float, mu: float, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8
) -> Step:
    """AdamW (decoupled weight decay): Adam's moments of the loss gradient g alone,
    ``m = beta1 m + (1 - beta1) g``, ``v = beta2 v + (1 - beta2) g^2``, ``m_hat = m / (1 - beta1^t)``,
    ``v_hat = v / (1 - beta2^t)``, and ``theta <- (1 - eta mu) theta - eta m_hat / (sqrt(v_hat) + eps)``
    (``torch.optim.AdamW(lr=eta, weight_decay=mu)``). State: ``t``, ``m``, ``v``."""
    theta, g, eta, mu = _decay_arguments(theta, g, eta, mu)
    beta1 = check_number(beta1, "beta1", 0, 1, high_open=True)
    beta2 = check_number(beta2, "beta2", 0, 1, high_open=True)
    eps = check_positive(eps, "eps")
    state = dict(state)
    t = state["t"] = state.get("t", 0) + 1
    state["m"] = beta1 * state.get("m", 0.0) + (1 - beta1) * g
    state["v"] = beta2 * state.get("v", 0.0) + (1 - beta2) * g**2
    m_hat, v_hat = state["m"] / (1 - beta1**t), state["v"] / (1 - beta2**t)
    return Step((1 - eta * mu) * theta - eta * m_hat / (np.sqrt(v_hat) + eps), state)


def _check_psd(H, name: str = "H") -> np.ndarray:
    H = check_matrix(H, name)
    if H.shape[0] != H.shape[1] or not np.allclose(H, H.T, atol=1e-10 * max(1.0, np.abs(H).max())):
        raise ValueError(f"{name} must be a symmetric square matrix (a Hessian), got shape {H.shape}")
    return (H + H.T) / 2


class Shrinkage(NamedTuple):
    theta_mu: np.ndarray  # the minimiser with weight decay, Q diag(lambda / (lambda + mu)) Q^T theta*
    lams: np.ndarray  # eigenvalues lambda_i of H, ascending
    Q: np.ndarray  # eigenvectors, one per column
    factors: np.ndarray  # lambda_i / (lambda_i + mu): how much of theta* survives along eigenvector i


def weight_decay_minimiser(H, theta_star, mu: float) -> Shrinkage:
    """The minimiser of the local quadratic with weight decay,
    ``R(theta*) + (theta - theta*)^T H (theta - theta*) / 2 + mu/2 ||theta||^2``:
    ``theta*_mu = (H + mu I)^{-1} H theta* = Q diag(lambda_i / (lambda_i + mu)) Q^T theta*`` with
    ``H = Q Lambda Q^T`` symmetric positive semi-definite and ``mu > 0``."""
    H = _check_psd(H)
    theta_star = check_vector(theta_star, "theta_star", len(H))
    mu = check_positive(mu, "mu")
    lams, Q = np.linalg.eigh(H)
    if lams.min() < -1e-10 * max(1.0, np.abs(lams).max()):
        raise ValueError(f"H must be positive semi-definite, got the eigenvalue {lams.min():.3g}")
    lams = np.clip(lams, 0, None)
    factors = lams / (lams + mu)
    return Shrinkage(Q @ (factors * (Q.T @ theta_star)), lams, Q, factors)


def early_stopping_factors(lams, eta: float, k: int) -> np.ndarray:
    """How much of ``theta*`` gradient descent from ``theta_0 = 0`` has reached after k steps along each
    eigenvector of a quadratic with Hessian eigenvalues ``lams``:
    ``Q^T theta_k = [I - (I - eta Lambda)^k] Q^T theta*``, so the factors are ``1 - (1 - eta lambda_i)^k``
    (compare ``lambda_i / (lambda_i + mu)`` for ``k ~ 1/(eta mu)``)."""
    lams = check_array(lams, "lams", ndim=1)
    if (lams < 0).any():
        raise ValueError(f"lams must be eigenvalues of a PSD Hessian (>= 0), got {lams.min():.3g}")
    eta = check_positive(eta, "eta")
    k = check_int(k, "k", 0)
    return 1 - (1 - eta * lams) ** k


def _check_diagonal_problem(theta_star, h, lam) -> tuple[np.ndarray, np.ndarray, float]:
    theta_star = check_array(theta_star, "theta_star", ndim=1)
    h = check_array(h, "h", theta_star.shape)
    if (h <= 0).any():
        raise ValueError(f"h must hold positive curvatures h_i > 0, got {h.min():.3g}")
    return theta_star, h, check_number(lam, "lam", 0)


def soft_threshold(b, t) -> np.ndarray:
    """``sgn(b) max(0, |b| - t)`` elementwise, for thresholds ``t >= 0`` (a number or an array like b)."""
    b = check_array(b, "b")
    t = check_array(t, "t")
    if (t < 0).any():
        raise ValueError(f"t must be >= 0, got {t.min():.3g}")
    return np.sign(b) * np.maximum(0.0, np.abs(b) - t)


def l1_minimiser(theta_star, h, lam: float) -> np.ndarray:
    """The minimiser of ``sum_i h_i (theta_i - theta*_i)^2 / 2 + lam ||theta||_1`` (a diagonal Hessian
    ``diag(h)``, h_i > 0): soft thresholding ``theta_i = sgn(theta*_i) max(0, |theta*_i| - lam / h_i)``."""
    theta_star, h, lam = _check_diagonal_problem(theta_star, h, lam)
    return soft_threshold(theta_star, lam / h)


def l2_minimiser(theta_star, h, lam: float) -> np.ndarray:
    """The minimiser of ``sum_i h_i (theta_i - theta*_i)^2 / 2 + lam/2 ||theta||_2^2``:
    ``theta_i = h_i / (h_i + lam) theta*_i`` (shrunk, never exactly zero)."""
    theta_star, h, lam = _check_diagonal_problem(theta_star, h, lam)
    return h / (h + lam) * theta_star


def ridge_risk(
    mus, n_samples: int = 50, dim: int = 20, u: float = 1.0, sigma: float = 1.0, problems: int = 200, rng=None
) -> np.ndarray:
    """The mean squared estimation error ``||w_hat_mu - w||^2`` of ridge regression for each ``mu`` in `mus`,
    averaged over `problems` simulated problems ``y = X w + noise``: X (n_samples, dim) with N(0, 1) entries,
    ``w ~ N(0, u^2 I)``, noise ``N(0, sigma^2 I)``, ``w_hat_mu = (X^T X + mu I)^{-1} X^T y`` (the minimiser of
    the summed loss ``||y - X w||^2 / 2 + mu/2 ||w||^2``). Theory: the error is smallest at
    ``mu* = sigma^2 / u^2``."""
    mus = check_array(mus, "mus", ndim=1)
    if (mus < 0).any():
        raise ValueError(f"mus must hold strengths mu >= 0, got {mus.min():.3g}")
    n_samples, dim = check_int(n_samples, "n_samples", 1), check_int(dim, "dim", 1)
    u, sigma = check_positive(u, "u"), check_positive(sigma, "sigma")
    problems, rng = check_int(problems, "problems", 1), check_rng(rng)
    if n_samples < dim and (mus == 0).any():
        raise ValueError(
            f"mus must be > 0 when n_samples < dim (X^T X is singular), got n_samples = {n_samples}"
        )
    errors = np.zeros(len(mus))
    for _ in range(problems):
        X = rng.normal(size=(n_samples, dim))
        w = u * rng.normal(size=dim)
        y = X @ w + sigma * rng.normal(size=n_samples)
        s, V = np.linalg.eigh(X.T @ X)  # w_hat_mu = V diag(1 / (s + mu)) V^T X^T y
        b = V.T @ (X.T @ y)
        w_hats = (b[None, :] / (s[None, :] + mus[:, None])) @ V.T  # (len(mus), dim)
        errors += ((w_hats - w) ** 2).sum(axis=1)
    return errors / problems


class EarlyStop(NamedTuple):
    stop: int  # the epoch at which training stops (the last epoch if patience never runs out)
    best: int  # the epoch of the checkpoint kept: the lowest validation loss up to `stop`


def patience_stop(val_losses, patience: int) -> EarlyStop:
    """Early stopping with patience p on a recorded validation curve (epochs 0, 1, ...): the best epoch is the
    one with the lowest validation loss so far (a strict improvement moves it); training stops at the first
    epoch that is p epochs after the best one, and the best checkpoint is kept."""
    val_losses = check_array(val_losses, "val_losses", ndim=1)
    patience = check_int(patience, "patience", 1)
    best = 0
    for epoch in range(1, len(val_losses)):
        if val_losses[epoch] < val_losses[best]:
            best = epoch
        elif epoch - best >= patience:
            return EarlyStop(epoch, best)
    return EarlyStop(len(val_losses) - 1, best)


# ----------------------------------------------------------------------------- 8.4 dropout and ensembles


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


class Dropout(nn.Module):
    r"""Inverted dropout as a torch layer with keep probability $\pi$: in ``train()`` mode
    $x\odot b/\pi$ with $b_i\sim\mathrm{Bern}(\pi)$, in ``eval()`` mode the identity. The same computation as
    ``torch.nn.Dropout(p=1 - pi)``. With ``rng=None`` the masks come from torch's global generator, the
    same masks as ``nn.Dropout`` draws from the same state; an int or a NumPy generator seeds a torch generator
    of the layer's own, so that its masks do not depend on torch's global state."""

    def __init__(self, pi: float, rng=None):
        super().__init__()
        self.pi = check_number(pi, "pi", 0, 1, low_open=True)
        self.generator = None
        if rng is not None:
            self.generator = torch.Generator().manual_seed(int(check_rng(rng).integers(2**31)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.pi == 1:
            return x
        if self.generator is None:
            mask = torch.empty_like(x).bernoulli_(self.pi)
        else:  # the layer's own generator lives on the CPU: draw there, whatever the device of x
            mask = torch.empty(x.shape, dtype=x.dtype).bernoulli_(self.pi, generator=self.generator)
            mask = mask.to(x.device)
        return x * mask / self.pi

    def extra_repr(self) -> str:
        return f"pi={self.pi:g} (keep probability; torch's p = {1 - self.pi:g})"


def dropout_mlp(sizes, pi: float = 0.5, *, pi_input: float = 1.0, rng=None) -> nn.Sequential:
    r"""An MLP for layer widths ``sizes = [n, m_1, ..., m_L]``: ``nn.Linear`` layers with ReLU between them and
    `Dropout` with keep probability ``pi`` after every hidden ReLU (``pi_input`` on the inputs; 1 = no dropout).
    The weights are drawn as torch's default ``nn.Linear`` initialisation, U[-1/sqrt(n), 1/sqrt(n)], but from
    `rng`: two calls with the same integer `rng` give the same initial weights whatever `pi` is (paired arms)."""
    sizes = [check_int(k, "sizes entries", 1) for k in sizes]
    if len(sizes) < 2:
        raise ValueError(f"sizes must list at least two widths [n, ..., m_L], got {sizes!r}")
    pi = check_number(pi, "pi", 0, 1, low_open=True)
    pi_input = check_number(pi_input, "pi_input", 0, 1, low_open=True)
    init_seed, mask_seed = (int(s) for s in check_rng(rng).integers(2**31, size=2))
    init, masks = torch.Generator().manual_seed(init_seed), check_rng(mask_seed)
    layers: list[nn.Module] = [Dropout(pi_input, masks)] if pi_input < 1 else []
    for l in range(len(sizes) - 1):
        # allocated without drawing (torch's global generator is left alone), then drawn from `init`
        linear = nn.Linear(sizes[l], sizes[l + 1], device="meta").to_empty(device="cpu")
        bound = 1 / math.sqrt(sizes[l])
        with torch.no_grad():
            linear.weight.uniform_(-bound, bound, generator=init)
            linear.bias.uniform_(-bound, bound, generator=init)
        layers.append(linear)
        if l < len(sizes) - 2:
            layers += [nn.ReLU(), Dropout(pi, masks)] if pi < 1 else [nn.ReLU()]
    return nn.Sequential(*layers)


class Scores(NamedTuple):
    cross_entropy: float  # mean cross-entropy in nats
    accuracy: float  # fraction of correct arg-max predictions


@torch.no_grad()
def classifier_scores(model: nn.Module, X, y) -> Scores:
    """Mean cross-entropy and accuracy of `model` (in eval mode, so without dropout) on inputs X (N, d) and
    labels y (N,)."""
    X = check_matrix(X, "X")
    y = check_labels(y, "y", len(X))
    model.eval()
    dev = model_device(model)
    logits = model(torch.as_tensor(X, dtype=torch.float32, device=dev))
    target = torch.as_tensor(y, device=dev)
    return Scores(float(nn.functional.cross_entropy(logits, target)), accuracy(logits, target))


class TrainedMLP(NamedTuple):
    model: nn.Sequential  # the trained network, in eval mode
    history: dict  # "train_loss": mean training loss (masks on) per epoch; "val_loss" with validation data


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
) -> TrainedMLP:
    """A one-hidden-layer `dropout_mlp` (``hidden`` ReLU units, keep probability ``pi``, ``pi_input`` on the
    inputs) trained with Adam on the cross-entropy of inputs X (N, d) and labels y (N,) for `epochs` passes,
    full batch by default (mini-batches of `batch_size` in a new random order every epoch otherwise); with
    ``X_val, y_val`` the history also holds the validation cross-entropy (eval mode) after every epoch.
    Initial weights, masks and batches all come from `rng`: the same integer `rng` gives arms with the same
    initial weights whatever ``pi`` is (a paired comparison). Small data sets stay on the device as whole
    tensors: no DataLoader, whose per-example collation would cost more than the training itself."""
    X = check_matrix(X, "X")
    y = check_labels(y, "y", len(X))
    if (X_val is None) != (y_val is None):
        raise ValueError("give both X_val and y_val, or neither")
    hidden, epochs = check_int(hidden, "hidden", 1), check_int(epochs, "epochs", 1)
    lr = check_positive(lr, "lr")
    batch_size = len(X) if batch_size is None else check_int(batch_size, "batch_size", 1)
    rng = check_rng(rng)
    model_seed, order_seed = (int(s) for s in rng.integers(2**31, size=2))
    dev = device()
    model = dropout_mlp([X.shape[1], hidden, int(y.max()) + 1], pi, pi_input=pi_input, rng=model_seed).to(dev)
    X_t = torch.as_tensor(X, dtype=torch.float32, device=dev)
    y_t = torch.as_tensor(y, device=dev)
    if X_val is not None:
        X_val = check_matrix(X_val, "X_val", cols=X.shape[1])
        y_val_t = torch.as_tensor(check_labels(y_val, "y_val", len(X_val)), device=dev)
        X_val_t = torch.as_tensor(X_val, dtype=torch.float32, device=dev)
    order = torch.Generator().manual_seed(order_seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    history: dict[str, list[float]] = {"train_loss": []}
    for _ in tqdm(range(epochs), desc="epochs", disable=not progress, leave=False):
        model.train()
        batches = torch.randperm(len(X), generator=order).split(batch_size) if batch_size < len(X) else [None]
        loss_sum = 0.0
        for rows in batches:
            X_b, y_b = (X_t, y_t) if rows is None else (X_t[rows.to(dev)], y_t[rows.to(dev)])
            loss = nn.functional.cross_entropy(model(X_b), y_b)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            loss_sum += loss.item() * len(X_b)
        history["train_loss"].append(loss_sum / len(X))
        if X_val is not None:
            model.eval()
            with torch.no_grad():
                val_loss = nn.functional.cross_entropy(model(X_val_t), y_val_t).item()
            history.setdefault("val_loss", []).append(val_loss)
    return TrainedMLP(model.eval(), history)


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


# ----------------------------------------------------------------------------- 8.5 normalisation


class BatchNormResult(NamedTuple):
    out: np.ndarray | torch.Tensor  # (B, d) normalised, scaled and shifted features
    running_mean: np.ndarray | torch.Tensor | None  # (d,) updated in train mode, as given in eval mode
    running_var: np.ndarray | torch.Tensor | None


def _norm_arrays(F, per_feature: dict) -> tuple:
    """F (B, d) and the per-feature vectors (d,) (None allowed) in one array library: torch when any of them is
    a tensor (a tensor keeps its autograd graph; the rest follow the dtype and device of the first tensor),
    else float64 NumPy arrays through dlnotes.validation."""
    like = next((a for a in (F, *per_feature.values()) if isinstance(a, torch.Tensor)), None)
    if like is None:
        F = check_matrix(F, "F")
        vectors = {k: None if v is None else check_vector(v, k, F.shape[1]) for k, v in per_feature.items()}
        return F, vectors
    dtype = like.dtype if like.is_floating_point() else torch.float64
    if not isinstance(F, torch.Tensor):
        F = check_matrix(F, "F")
    F = torch.as_tensor(F, dtype=dtype, device=like.device)
    if F.ndim != 2 or F.numel() == 0:
        raise ValueError(
            f"F must have shape (any, any) (a batch of feature vectors), got shape {tuple(F.shape)}"
        )
    vectors = {}
    for k, v in per_feature.items():
        if v is not None:
            v = v if isinstance(v, torch.Tensor) else check_vector(v, k)
            v = torch.as_tensor(v, dtype=dtype, device=like.device)
            if tuple(v.shape) != (F.shape[1],):
                raise ValueError(f"{k} must have shape ({F.shape[1]},), got shape {tuple(v.shape)}")
        vectors[k] = v
    return F, vectors


def batch_norm(
    F,
    gamma,
    beta,
    *,
    running_mean=None,
    running_var=None,
    training: bool = True,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> BatchNormResult:
    r"""Batch normalisation of a batch F (B, d), each feature over the B examples (section 8.5).

    Train mode: $\mu_B=\frac1B\sum_bF_b$, $\sigma_B^2=\frac1B\sum_b(F_b-\mu_B)^2$ (the *biased* variance) and
    $\gamma\odot(F_b-\mu_B)/\sqrt{\sigma_B^2+\epsilon}+\beta$; when running statistics are given they are
    returned updated, $(1-m)\,\mathrm{running} + m\,\mathrm{batch}$ with momentum $m$, the variance entering
    *unbiased*, $\sigma_B^2\,B/(B-1)$. Eval mode: the running statistics replace $\mu_B,\sigma_B^2$, so each
    example's output no longer depends on the rest of the batch. The same computation as
    ``torch.nn.BatchNorm1d(d, eps, momentum)`` on a (B, d) input in ``train()`` and ``eval()`` mode.

    NumPy arrays in, NumPy arrays out; if any argument is a torch tensor the result is a tensor with its autograd
    graph (the running statistics are computed from detached batch statistics), which `BatchNorm` uses.
    """
    if not isinstance(training, (bool, np.bool_)):
        raise TypeError(f"training must be True or False, got {training!r}")
    momentum = check_number(momentum, "momentum", 0, 1)
    eps = check_number(eps, "eps", 0)
    F, v = _norm_arrays(
        F, {"gamma": gamma, "beta": beta, "running_mean": running_mean, "running_var": running_var}
    )
    if (v["running_mean"] is None) != (v["running_var"] is None):
        raise ValueError("give both running_mean and running_var, or neither")
    B = F.shape[0]
    if not training:
        if v["running_mean"] is None:
            raise ValueError(
                "eval mode (training=False) normalises with the running statistics: give running_mean and running_var"
            )
        if (v["running_var"] < 0).any():
            raise ValueError("running_var must be >= 0")
        out = v["gamma"] * (F - v["running_mean"]) / (v["running_var"] + eps) ** 0.5 + v["beta"]
        return BatchNormResult(out, v["running_mean"], v["running_var"])
    if B < 2:
        raise ValueError(
            f"batch norm in train mode needs at least 2 examples per batch (the variance of one is 0), got F of shape {tuple(F.shape)}"
        )
    mu_B = F.mean(0)
    var_B = ((F - mu_B) ** 2).mean(0)  # biased: divided by B
    if eps == 0 and (var_B == 0).any():
        raise ValueError("a feature is constant over the batch: with eps = 0 it cannot be normalised")
    out = v["gamma"] * (F - mu_B) / (var_B + eps) ** 0.5 + v["beta"]
    running_mean, running_var = v["running_mean"], v["running_var"]
    if running_mean is not None:
        if isinstance(mu_B, torch.Tensor):
            mu_B, var_B = mu_B.detach(), var_B.detach()
        running_mean = (1 - momentum) * running_mean + momentum * mu_B
        running_var = (1 - momentum) * running_var + momentum * var_B * B / (B - 1)  # unbiased
    return BatchNormResult(out, running_mean, running_var)


class BatchNorm(nn.Module):
    r"""Batch normalisation as a torch module for inputs (B, d), written from the formulas of `batch_norm`:
    learned scale $\gamma$ (ones) and shift $\beta$ (zeros), running mean (zeros) and variance (ones) updated
    in ``train()`` mode with momentum 0.1 and used in ``eval()`` mode. Equal to ``nn.BatchNorm1d(d)`` (whose
    weight is $\gamma$ and bias $\beta$) in both modes."""

    def __init__(self, d: int, *, eps: float = 1e-5, momentum: float = 0.1):
        super().__init__()
        self.d = check_int(d, "d", 1)
        self.eps = check_number(eps, "eps", 0)
        self.momentum = check_number(momentum, "momentum", 0, 1)
        self.gamma = nn.Parameter(torch.ones(self.d))
        self.beta = nn.Parameter(torch.zeros(self.d))
        self.register_buffer("running_mean", torch.zeros(self.d))
        self.register_buffer("running_var", torch.ones(self.d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"x must be a torch tensor (B, d), got {type(x).__name__}")
        if x.ndim != 2 or x.shape[1] != self.d:
            raise ValueError(f"x must have shape (any, {self.d}), got shape {tuple(x.shape)}")
        result = batch_norm(
            x,
            self.gamma,
            self.beta,
            running_mean=self.running_mean,
            running_var=self.running_var,
            training=self.training,
            momentum=self.momentum,
            eps=self.eps,
        )
        if self.training:
            with torch.no_grad():
                self.running_mean.copy_(result.running_mean)
                self.running_var.copy_(result.running_var)
        return result.out

    def extra_repr(self) -> str:
        return f"{self.d}, eps={self.eps}, momentum={self.momentum}"


def group_norm(F, gamma, beta, *, groups: int, eps: float = 1e-5) -> np.ndarray:
    r"""Group normalisation of F (B, d): the d features of each example are split into `groups` consecutive
    groups of d/groups, each normalised by its own mean and biased variance, then scaled and shifted per
    feature, $\gamma_i(f_i-\mu_{G(i)})/\sqrt{\sigma^2_{G(i)}+\epsilon}+\beta_i$. ``groups=1`` is layer
    normalisation (statistics over all d features of one example, ``nn.LayerNorm(d)``); ``groups=d`` normalises
    every feature alone. No statistic crosses examples, so the output of an example does not depend on the
    batch. Same as ``nn.GroupNorm(groups, d)`` on a (B, d) input (section 8.5)."""
    F = check_matrix(F, "F")
    B, d = F.shape
    groups = check_int(groups, "groups", 1, d)
    if d % groups:
        raise ValueError(f"groups must divide the number of features d = {d}, got groups={groups}")
    gamma = check_vector(gamma, "gamma", d)
    beta = check_vector(beta, "beta", d)
    eps = check_number(eps, "eps", 0)
    G = F.reshape(B, groups, d // groups)
    mu = G.mean(axis=2, keepdims=True)
    var = ((G - mu) ** 2).mean(axis=2, keepdims=True)
    return gamma * ((G - mu) / np.sqrt(var + eps)).reshape(B, d) + beta


def rms_norm(F, gamma, *, eps: float = 1e-6) -> np.ndarray:
    r"""RMS normalisation of every example (row) of F (B, d): $\gamma\odot f/\sqrt{\frac1d\sum_if_i^2+\epsilon}$,
    layer normalisation without centring and without a shift. Same as ``nn.RMSNorm(d, eps=eps)`` (section 8.5)."""
    F = check_matrix(F, "F")
    gamma = check_vector(gamma, "gamma", F.shape[1])
    eps = check_number(eps, "eps", 0)
    return gamma * F / np.sqrt((F**2).mean(axis=1, keepdims=True) + eps)


def _check_weight_norm(v, g) -> tuple[np.ndarray, np.ndarray]:
    v = check_matrix(v, "v")
    g = check_vector(g, "g", v.shape[0])
    if not (np.linalg.norm(v, axis=1) > 0).all():
        raise ValueError("every row of v must be non-zero (its direction v/||v|| is used)")
    return v, g


def weight_norm(v, g) -> np.ndarray:
    r"""Weight normalisation of a weight matrix (m, n), one output unit per row: $w_i=g_i\,v_i/\lVert v_i\rVert$,
    direction $v_i$ and length $g_i$ (v (m, n), g (m,)). The parametrisation of
    ``torch.nn.utils.parametrizations.weight_norm(layer)`` (``dim=0``, ``original0`` = g, ``original1`` = v)
    (section 8.5)."""
    v, g = _check_weight_norm(v, g)
    return g[:, None] * v / np.linalg.norm(v, axis=1, keepdims=True)


class WeightNormGrads(NamedTuple):
    grad_v: np.ndarray  # (m, n)
    grad_g: np.ndarray  # (m,)


def weight_norm_grads(v, g, grad_w) -> WeightNormGrads:
    r"""The gradients of a loss E with respect to direction and length of weight-normalised rows
    $w_i=g_i v_i/\lVert v_i\rVert$, given $\nabla_wE$ (m, n): $\partial_{g_i}E=\nabla_{w_i}E\cdot v_i/\lVert v_i\rVert$ and
    $\nabla_{v_i}E=\frac{g_i}{\lVert v_i\rVert}\big(I-\frac{w_iw_i^\top}{\lVert w_i\rVert^2}\big)\nabla_{w_i}E$: the
    component of the gradient along $w_i$ is projected out, so $v_i^\top\nabla_{v_i}E=0$ (section 8.5)."""
    v, g = _check_weight_norm(v, g)
    grad_w = check_matrix(grad_w, "grad_w", *v.shape)
    norm_v = np.linalg.norm(v, axis=1, keepdims=True)
    u = v / norm_v  # unit direction, = w / ||w|| up to the sign of g
    along = (grad_w * u).sum(axis=1)
    grad_v = g[:, None] / norm_v * (grad_w - along[:, None] * u)
    return WeightNormGrads(grad_v, along)


# ----------------------------------------------------------------------------- 8.6, 8.8 augmentation, label smoothing, distillation


def transform_digits(X, shifts, angles) -> np.ndarray:
    """Digit images X (N, h, w) rotated by ``angles`` (N,) degrees counter-clockwise about their centre (linear
    interpolation) and then shifted by whole pixels ``shifts`` (N, 2) = (down, right); pixels that come in
    from outside are 0 (the background, for pixels scaled to [0, 1]). ``angles = 90`` is ``np.rot90``."""
    X = check_array(X, "X", ndim=3)
    shifts = check_array(shifts, "shifts", (len(X), 2))
    if not np.array_equal(shifts, np.round(shifts)):
        raise ValueError(f"shifts must hold whole pixels, got {shifts[shifts != np.round(shifts)][:3]}")
    angles = check_vector(angles, "angles", len(X))
    out = np.empty_like(X)
    for i, (image, (down, right), angle) in enumerate(zip(X, shifts, angles, strict=True)):
        if angle != 0:
            image = ndimage.rotate(image, angle, reshape=False, order=1, mode="constant", cval=0.0)
        out[i] = ndimage.shift(image, (down, right), order=0, mode="constant", cval=0.0)
    return out


def augment_digits(X, *, shifts: int = 1, max_angle: float = 10.0, rng=None) -> np.ndarray:
    """One randomly transformed copy T(x) of every digit: a rotation by an angle drawn uniformly from
    [-max_angle, max_angle] degrees, then a shift by whole pixels drawn uniformly from {-shifts, ..., shifts} in
    each direction (see `transform_digits`; label-preserving for small transforms). X is (N, h, w) or flat
    (N, h*w) with square images; the result has X's shape. Scale pixels to [0, 1] first: the pixels shifted in
    are 0. The draws are the shifts (N, 2), then the angles (N,)."""
    X = check_array(X, "X")
    shifts = check_int(shifts, "shifts", 0)
    max_angle = check_number(max_angle, "max_angle", 0, 180)
    rng = check_rng(rng)
    if X.ndim == 2:
        side = math.isqrt(X.shape[1])
        if side * side != X.shape[1]:
            raise ValueError(f"X must hold square images, (N, h, w) or (N, h*w), got shape {X.shape}")
        images = X.reshape(len(X), side, side)
    elif X.ndim == 3:
        images = X
    else:
        raise ValueError(f"X must have shape (N, h, w) or (N, h*w), got shape {X.shape}")
    moves = rng.integers(-shifts, shifts + 1, size=(len(X), 2))
    angles = rng.uniform(-max_angle, max_angle, size=len(X))
    return transform_digits(images, moves, angles).reshape(X.shape)


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


def tempered_softmax(F, T: float = 1.0) -> np.ndarray:
    """Softened class probabilities ``softmax(F / T)`` of logits F (N, K) (or one vector (K,)) at temperature
    T > 0: T = 1 is the ordinary softmax, T -> infinity the uniform distribution."""
    F = check_array(F, "F")
    if F.ndim not in (1, 2):
        raise ValueError(f"F must have shape (K,) or (N, K), got shape {F.shape}")
    T = check_positive(T, "T")
    return softmax(F / T, axis=-1)


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


def soft_cross_entropy(logits: torch.Tensor, targets: torch.Tensor, T: float = 1.0) -> torch.Tensor:
    """``T^2 * mean_i -sum_y t_iy log softmax(G_i / T)_y`` in torch for student logits G (N, K) and target
    distributions t (N, K) (teacher probabilities softmax(F / T), smoothed or mixed labels). The T^2 keeps the
    gradient's scale independent of T (Hinton et al.); for T = 1 it is the cross-entropy with soft targets."""
    if not isinstance(logits, torch.Tensor) or not isinstance(targets, torch.Tensor):
        raise TypeError(
            f"logits and targets must be torch tensors, got {type(logits).__name__} and {type(targets).__name__}"
        )
    if logits.ndim != 2 or targets.shape != logits.shape:
        raise ValueError(
            f"logits and targets must both have shape (N, K), got {tuple(logits.shape)} and {tuple(targets.shape)}"
        )
    T = check_positive(T, "T")
    log_q = torch.log_softmax(logits / T, dim=1)
    return T**2 * -(targets * log_q).sum(dim=1).mean()


def train_digits_mlp(
    X,
    targets,
    *,
    hidden: int = 32,
    temperature: float = 1.0,
    epochs: int = 200,
    lr: float = 1e-2,
    rng=None,
    progress: bool = True,
) -> nn.Sequential:
    """An MLP with one hidden layer of ``hidden`` ReLU units (`dropout_mlp` without dropout) trained full batch
    with Adam for `epochs` steps on inputs X (N, d) and either labels (N,) (cross-entropy with hard labels) or
    target distributions (N, K) (`soft_cross_entropy` at `temperature`: distillation from teacher
    probabilities softmax(F / T), smoothed labels, mixup targets). The initial weights come from `rng`, so the
    same integer `rng` gives two arms with the same initialisation. Returns the model in eval mode."""
    X = check_matrix(X, "X")
    targets = np.asarray(targets)
    if targets.ndim == 1:
        targets = check_labels(targets, "targets", len(X))
        n_classes = int(targets.max()) + 1
        loss_fn = nn.functional.cross_entropy
    else:
        targets = check_matrix(targets, "targets", len(X))
        if (targets < 0).any() or not np.allclose(targets.sum(axis=1), 1.0, atol=1e-6):
            raise ValueError("targets must be labels (N,) or probability rows (N, K) that sum to 1")
        n_classes = targets.shape[1]
        T = check_positive(temperature, "temperature")

        def loss_fn(logits, t):
            return soft_cross_entropy(logits, t, T)

    hidden, epochs = check_int(hidden, "hidden", 1), check_int(epochs, "epochs", 1)
    lr = check_positive(lr, "lr")
    model_seed, loader_seed = (int(s) for s in check_rng(rng).integers(2**31, size=2))
    model = dropout_mlp([X.shape[1], hidden, n_classes], 1.0, rng=model_seed).to(device())
    loader = make_loader(X, targets, batch_size=len(X), rng=loader_seed)
    fit(model, loss_fn, torch.optim.Adam(model.parameters(), lr=lr), loader, epochs, progress=progress)
    return model.eval()


@torch.no_grad()
def predict_logits(model: nn.Module, X) -> np.ndarray:
    """The logits (N, K) of `model` in eval mode for inputs X (N, d), as a numpy array."""
    X = check_matrix(X, "X")
    model.eval()
    return to_numpy(model(torch.as_tensor(X, dtype=torch.float32, device=model_device(model))))


# ----------------------------------------------------------------------------- 8.7, 8.9 residual scaling, reparameterisation


def residual_stack_norms(
    d: int, L: int, alpha: float, *, n_nets: int = 1, dense: bool = False, rng=None
) -> np.ndarray:
    """Squared norm ratios ||y_k||^2 / ||y_0||^2, k = 0..L, of random linear residual stacks (n_nets, L + 1).

    y_k = y_{k-1} + alpha Theta_k y_{k-1} with Theta_k (d, d) i.i.d. N(0, 1/d), fresh per layer, and y_0 a
    Gaussian vector; in expectation ||y_L||^2 = (1 + alpha^2)^L ||y_0||^2. For one input Theta_k y is exactly
    N(0, ||y||^2 I / d), so by default that vector is drawn instead of the matrix (O(L d) per net);
    ``dense=True`` draws the matrices (O(L d^2), for comparison).
    """
    d = check_int(d, "d", 1)
    L = check_int(L, "L", 1)
    alpha = check_number(alpha, "alpha")
    n_nets = check_int(n_nets, "n_nets", 1)
    if not isinstance(dense, bool):
        raise TypeError(f"dense must be True or False, got {dense!r}")
    rng = check_rng(rng)
    ratios = np.empty((n_nets, L + 1))
    for net in range(n_nets):
        y = rng.standard_normal(d)
        start = y @ y
        ratios[net, 0] = 1.0
        for k in range(1, L + 1):
            if dense:
                branch = (rng.standard_normal((d, d)) / math.sqrt(d)) @ y
            else:
                branch = rng.standard_normal(d) * math.sqrt(y @ y / d)
            y = y + alpha * branch
            ratios[net, k] = (y @ y) / start
    return ratios


class GradEstimate(NamedTuple):
    g_mu: float  # Monte-Carlo estimate of d/dmu E[f(z)]
    g_var: float  # Monte-Carlo estimate of d/dsigma^2 E[f(z)]
    se_mu: float  # standard error of g_mu (sample standard deviation / sqrt(n))
    se_var: float  # standard error of g_var


def _estimate(samples_mu: np.ndarray, samples_var: np.ndarray) -> GradEstimate:
    n = len(samples_mu)
    return GradEstimate(
        float(samples_mu.mean()),
        float(samples_var.mean()),
        float(samples_mu.std(ddof=1) / math.sqrt(n)),
        float(samples_var.std(ddof=1) / math.sqrt(n)),
    )


def _gaussian_args(mu, sigma, n, rng):
    mu = check_number(mu, "mu")
    sigma = check_positive(sigma, "sigma")
    n = check_int(n, "n", 2)
    return mu, sigma, n, check_rng(rng)


def pathwise_grad(df: Callable, mu: float, sigma: float, *, n: int = 100_000, rng=None) -> GradEstimate:
    """The reparameterisation (pathwise) estimates of the gradients of E[f(z)], z ~ N(mu, sigma^2), 1-D.

    z = mu + sigma xi, xi ~ N(0, 1), so d/dmu E[f(z)] = E[f'(z)] and d/dsigma E[f(z)] = E[f'(z) xi], hence
    d/dsigma^2 E[f(z)] = E[f'(z) xi] / (2 sigma) (= E[f''(z)] / 2 by Stein's lemma). `df` is f' (vectorised);
    n samples.
    """
    df = check_callable(df, "df")
    mu, sigma, n, rng = _gaussian_args(mu, sigma, n, rng)
    xi = rng.standard_normal(n)
    slope = np.asarray(df(mu + sigma * xi), dtype=float)
    return _estimate(slope, slope * xi / (2 * sigma))


def score_function_grad(f: Callable, mu: float, sigma: float, *, n: int = 100_000, rng=None) -> GradEstimate:
    """The score-function (log-derivative, REINFORCE) estimates of the gradients of E[f(z)], z ~ N(mu, sigma^2).

    d/dtheta E[f(z)] = E[f(z) d/dtheta log p(z)] with d/dmu log p = (z - mu)/sigma^2 and
    d/dsigma^2 log p = ((z - mu)^2/sigma^2 - 1) / (2 sigma^2). Needs only f, not f'; `f` is vectorised.
    """
    f = check_callable(f, "f")
    mu, sigma, n, rng = _gaussian_args(mu, sigma, n, rng)
    xi = rng.standard_normal(n)
    value = np.asarray(f(mu + sigma * xi), dtype=float)
    return _estimate(value * xi / sigma, value * (xi**2 - 1) / (2 * sigma**2))


# ----------------------------------------------------------------------------- 8.10 the tricks compared


class TrainedClassifier(NamedTuple):
    model: nn.Sequential  # the trained network in eval mode (with `patience`: the best-validation checkpoint)
    history: dict  # "train_loss" per epoch; with validation data also "val_loss" (cross-entropy) per epoch
    best_epoch: int  # how many training epochs the kept weights have seen (the last epoch without patience)


def train_digits_classifier(
    X,
    y,
    *,
    hidden: int = 256,
    pi: float = 1.0,
    weight_decay: float = 0.0,
    batch_norm: bool = False,
    augment: int = 0,
    label_smoothing: float = 0.0,
    temperature: float = 1.0,
    X_val=None,
    y_val=None,
    patience: int | None = None,
    epochs: int = 300,
    lr: float = 1e-2,
    rng=None,
    progress: bool = True,
) -> TrainedClassifier:
    r"""One MLP ``Linear(d, hidden) [-> BatchNorm1d] -> ReLU [-> Dropout] -> Linear(hidden, K)`` trained full batch
    with AdamW for `epochs` steps, with the tricks of chapter 08 switched on by the keywords:

    - ``pi < 1``: dropout after the hidden layer with keep probability $\pi$ (`Dropout`, torch's p = 1 - pi);
    - ``weight_decay = mu > 0``: decoupled weight decay on the weight matrices (not on biases or BN's
      $\gamma,\beta$), $\theta\leftarrow(1-\eta\mu)\theta-\eta\,\hat m/(\sqrt{\hat v}+\epsilon)$ (AdamW);
    - ``batch_norm``: ``nn.BatchNorm1d`` on the hidden pre-activations (batch statistics in training, running
      statistics at evaluation);
    - ``augment = c > 0``: the training set plus c copies transformed by `augment_digits` (pixels in [0, 1]);
    - ``label_smoothing = eps``: targets $(1-\varepsilon)e_y+\varepsilon/K$ (torch's ``label_smoothing``);
    - ``patience = p`` with ``X_val, y_val``: early stopping on the validation cross-entropy, stopping p epochs
      after the best one and restoring its weights (the rule of `patience_stop`).

    y holds labels (N,), or target distributions (N, K) (teacher probabilities $\mathrm{softmax}(F/T)$ for
    distillation), then the loss is `soft_cross_entropy` at `temperature` ($T^2$ times the tempered
    cross-entropy). The initial weights are those of `dropout_mlp` drawn from `rng`: the same integer `rng`
    gives every arm the same initial weights (a paired comparison).
    """
    X = check_matrix(X, "X")
    y = np.asarray(y)
    if y.ndim == 1:
        y = check_labels(y, "y", len(X))
        n_classes = int(y.max()) + 1
    else:
        y = check_matrix(y, "y", len(X))
        if (y < 0).any() or not np.allclose(y.sum(axis=1), 1.0, atol=1e-6):
            raise ValueError("y must hold labels (N,) or probability rows (N, K) that sum to 1")
        n_classes = y.shape[1]
    hidden, epochs = check_int(hidden, "hidden", 1), check_int(epochs, "epochs", 1)
    pi = check_number(pi, "pi", 0, 1, low_open=True)
    weight_decay = check_number(weight_decay, "weight_decay", 0)
    if not isinstance(batch_norm, (bool, np.bool_)):
        raise TypeError(f"batch_norm must be True or False, got {batch_norm!r}")
    augment = check_int(augment, "augment", 0)
    if augment and (X.min() < 0 or X.max() > 1):
        raise ValueError(
            f"X must hold pixels in [0, 1] to be augmented (the background must be 0), got values from "
            f"{X.min():.3g} to {X.max():.3g}"
        )
    label_smoothing = check_number(label_smoothing, "label_smoothing", 0, 1)
    if label_smoothing and y.ndim == 2:
        raise ValueError("label_smoothing needs labels y (N,), got target distributions (N, K)")
    temperature = check_positive(temperature, "temperature")
    if (X_val is None) != (y_val is None):
        raise ValueError("give both X_val and y_val, or neither")
    if X_val is not None:
        X_val = check_matrix(X_val, "X_val", cols=X.shape[1])
        y_val = check_labels(y_val, "y_val", len(X_val), n_classes=n_classes)
    if patience is not None:
        patience = check_int(patience, "patience", 1)
        if X_val is None:
            raise ValueError("patience needs validation data X_val, y_val")
    lr = check_positive(lr, "lr")
    model_seed, augment_seed = (int(s) for s in check_rng(rng).integers(2**31, size=2))

    model = dropout_mlp([X.shape[1], hidden, n_classes], pi, rng=model_seed)
    if batch_norm:
        model = nn.Sequential(model[0], nn.BatchNorm1d(hidden), *model[1:])
    model = model.to(device())
    if augment:
        images = check_rng(augment_seed)
        X = np.concatenate([X] + [augment_digits(X, rng=images) for _ in range(augment)])
        y = np.concatenate([y] * (augment + 1))
    dev = model_device(model)
    inputs = torch.as_tensor(X, dtype=torch.float32, device=dev)
    if y.ndim == 1:
        targets = torch.as_tensor(y, device=dev)

        def loss_fn(logits):
            return nn.functional.cross_entropy(logits, targets, label_smoothing=label_smoothing)
    else:
        soft = torch.as_tensor(y, dtype=torch.float32, device=dev)

        def loss_fn(logits):
            return soft_cross_entropy(logits, soft, temperature)

    weights = [p for p in model.parameters() if p.ndim >= 2]
    others = [p for p in model.parameters() if p.ndim < 2]
    optimizer = torch.optim.AdamW(
        [{"params": weights, "weight_decay": weight_decay}, {"params": others, "weight_decay": 0.0}], lr=lr
    )
    history: dict[str, list[float]] = {"train_loss": []}
    if X_val is not None:
        history["val_loss"] = []
        val_inputs = torch.as_tensor(X_val, dtype=torch.float32, device=dev)
        val_targets = torch.as_tensor(y_val, device=dev)
    best_epoch, best_loss, best_state = epochs, math.inf, None
    for epoch in tqdm(range(1, epochs + 1), desc="epochs", disable=not progress):
        model.train()
        loss = loss_fn(model(inputs))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        history["train_loss"].append(loss.item())
        if X_val is None:
            continue
        model.eval()
        with torch.no_grad():
            val_loss = nn.functional.cross_entropy(model(val_inputs), val_targets).item()
        history["val_loss"].append(val_loss)
        if patience is None:
            continue
        if val_loss < best_loss:  # a strict improvement moves the checkpoint
            best_epoch, best_loss = epoch, val_loss
            best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        elif epoch - best_epoch >= patience:
            break
    if best_state is not None:
        model.load_state_dict(best_state)
    return TrainedClassifier(model.eval(), history, best_epoch)


def ensemble_probabilities(models, X, *, temperature: float = 1.0) -> np.ndarray:
    r"""The ensemble's class probabilities $\frac1K\sum_k\mathrm{softmax}(G_k/T)$ (N, C): the mean of the K members'
    tempered softmax outputs (`tempered_softmax`) on inputs X (N, d); ``temperature = 1`` is the plain average
    of bagging, T > 1 the softened targets a distilled student learns from."""
    models = list(models) if isinstance(models, list | tuple) else None
    if not models or not all(isinstance(m, nn.Module) for m in models):
        raise TypeError("models must be a non-empty list of torch modules (the ensemble's members)")
    X = check_matrix(X, "X")
    temperature = check_positive(temperature, "temperature")
    return np.mean([tempered_softmax(predict_logits(m, X), temperature) for m in models], axis=0)


class Spread(NamedTuple):
    mean: float  # the mean over the runs (seeds)
    sd: float  # their sample standard deviation (divided by r - 1), the spread from run to run


def mean_spread(values) -> Spread:
    r"""Mean and sample standard deviation $s=\sqrt{\frac1{r-1}\sum_j(v_j-\bar v)^2}$ of r >= 2 runs."""
    values = check_vector(values, "values")
    if len(values) < 2:
        raise ValueError(f"values must hold at least 2 runs to have a spread, got {len(values)}")
    return Spread(float(values.mean()), float(values.std(ddof=1)))


def paired_difference(a, b) -> Spread:
    r"""The paired difference of two arms run on the same r seeds (same split, same initial weights): the mean
    and sample standard deviation of $d_j=a_j-b_j$. Pairing removes what both arms share (a hard split, a lucky
    initialisation), so $s_d$ is usually far below the unpaired $\sqrt{s_a^2+s_b^2}$."""
    a = check_vector(a, "a")
    b = check_vector(b, "b", len(a))
    return mean_spread(a - b)
