"""Chapter 10's tools that two or more of its sections use: Gaussians and Gaussian mixtures (10.2 the ELBO,
10.5 GANs, 10.6 diffusion), the masked autoencoder MADE and maximum-likelihood training (10.3 flows, 10.4
autoregressive models), the kernel MMD between two samples (10.5, 10.6), and PyTorch's default initialisation and
standard-normal draws taken from `rng` (10.3, 10.5, 10.6), and the time-conditioned MLP of diffusion and flow
matching (10.6, 10.7).

Conventions: a data set is X (n, d), one example per row; Gaussians are given by a mean and a covariance matrix
(variances, not standard deviations).
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from scipy.special import logsumexp
from torch import nn

from ..training import make_loader, progress_bar, train_steps
from ..validation import (
    check_array,
    check_choice,
    check_int,
    check_number,
    check_positive,
    check_rng,
    check_vector,
)

# ----------------------------------------------------------------------------- Gaussians and Gaussian mixtures (10.2, 10.5, 10.6)


def _check_cov(cov, name: str, d: int) -> np.ndarray:
    cov = check_array(cov, name, (d, d))
    if not np.allclose(cov, cov.T):
        raise ValueError(f"{name} must be a symmetric covariance matrix ({d}, {d})")
    if np.linalg.eigvalsh(cov).min() <= 0:
        raise ValueError(
            f"{name} must be positive definite, its smallest eigenvalue is {np.linalg.eigvalsh(cov).min():.3g}"
        )
    return cov


def gauss_kl(mu0, cov0, mu1, cov1) -> float:
    """:math:`\\mathrm{KL}(\\mathcal N(\\mu_0,\\Sigma_0)\\,\\Vert\\,\\mathcal N(\\mu_1,\\Sigma_1))
    = \\frac12[\\ln\\frac{|\\Sigma_1|}{|\\Sigma_0|} - d + \\mathrm{tr}\\,\\Sigma_1^{-1}\\Sigma_0
    + (\\mu_1-\\mu_0)^\\top\\Sigma_1^{-1}(\\mu_1-\\mu_0)]` in nats, for means (d,) and covariances (d, d)
    (10.2, 10.6)."""
    mu0 = check_vector(mu0, "mu0")
    d = mu0.size
    mu1 = check_vector(mu1, "mu1", d)
    cov0, cov1 = _check_cov(cov0, "cov0", d), _check_cov(cov1, "cov1", d)
    delta = mu1 - mu0
    logdet0, logdet1 = np.linalg.slogdet(cov0)[1], np.linalg.slogdet(cov1)[1]
    trace = np.trace(np.linalg.solve(cov1, cov0))
    return float(0.5 * (logdet1 - logdet0 - d + trace + delta @ np.linalg.solve(cov1, delta)))


class GaussianMixture(NamedTuple):
    weights: np.ndarray  # (K,) mixing weights, summing to 1
    means: np.ndarray  # (K, d)
    covs: np.ndarray  # (K, d, d)


def gaussian_mixture(weights, means, covs) -> GaussianMixture:
    """A Gaussian mixture :math:`\\sum_k \\pi_k\\,\\mathcal N(m_k, S_k)`, validated: weights (K,) positive and
    summing to 1, means (K, d), covariances (K, d, d) symmetric positive definite."""
    weights = check_vector(weights, "weights")
    if np.any(weights <= 0) or abs(weights.sum() - 1) > 1e-9:
        raise ValueError(f"weights must be positive and sum to 1, got {weights}")
    K = weights.size
    means = check_array(means, "means", (K, None))
    d = means.shape[1]
    covs = check_array(covs, "covs", (K, d, d))
    for k in range(K):
        _check_cov(covs[k], f"covs[{k}]", d)
    return GaussianMixture(weights, means, covs)


def mixture_sample(gmm: GaussianMixture, n: int, rng=None) -> tuple[np.ndarray, np.ndarray]:
    """n draws from a `GaussianMixture`: the points (n, d) and the component of each (n,)."""
    n = check_int(n, "n", 1)
    rng = check_rng(rng)
    component = rng.choice(gmm.weights.size, size=n, p=gmm.weights)
    L = np.linalg.cholesky(gmm.covs)  # (K, d, d)
    noise = rng.standard_normal((n, gmm.means.shape[1]))
    return gmm.means[component] + np.einsum("nij,nj->ni", L[component], noise), component


def _mixture_responsibilities(gmm: GaussianMixture, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """log p(x) (n,) and the responsibilities r[i, k] = p(k | x_i) (n, K)."""
    diff = X[:, None, :] - gmm.means[None]  # (n, K, d)
    prec = np.linalg.inv(gmm.covs)
    maha = np.einsum("nki,kij,nkj->nk", diff, prec, diff)
    logdet = np.linalg.slogdet(gmm.covs)[1]
    d = X.shape[1]
    log_joint = np.log(gmm.weights) - 0.5 * (maha + logdet + d * np.log(2 * np.pi))  # (n, K)
    log_px = logsumexp(log_joint, axis=1)
    return log_px, np.exp(log_joint - log_px[:, None])


def mixture_log_prob(gmm: GaussianMixture, X) -> np.ndarray:
    """:math:`\\log\\sum_k\\pi_k\\mathcal N(x; m_k, S_k)` for each row of X (n, d), computed with log-sum-exp."""
    X = check_array(X, "X", (None, gmm.means.shape[1]))
    return _mixture_responsibilities(gmm, X)[0]


# ----------------------------------------------------------------------------- masked networks and maximum likelihood (10.3, 10.4)


class MaskedLinear(nn.Linear):
    """A dense layer whose weight is multiplied by a fixed 0/1 mask, :math:`y = (W\\odot M)x + b`; mask (n_out,
    n_in) (10.3, 10.4)."""

    def __init__(self, n_in: int, n_out: int, mask):
        n_in, n_out = check_int(n_in, "n_in", 1), check_int(n_out, "n_out", 1)
        super().__init__(n_in, n_out)
        mask = check_array(mask, "mask", (n_out, n_in))
        self.register_buffer("mask", torch.as_tensor(mask, dtype=self.weight.dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight * self.mask, self.bias)


def made_degrees(d: int, hidden: tuple[int, ...]) -> list[np.ndarray]:
    """The MADE degrees of the input (1..d), of every hidden layer (cycling through 1..d-1) and of the output
    (1..d): a hidden unit of degree m may see the inputs 1..m, an output of degree i only hidden units of degree
    < i, so output i depends on :math:`x_{<i}` only (10.3, 10.4)."""
    d = check_int(d, "d", 1)
    hidden = tuple(check_int(h, "hidden[...]", 1) for h in hidden)
    inner = max(d - 1, 1)
    return [np.arange(1, d + 1)] + [np.arange(h) % inner + 1 for h in hidden] + [np.arange(1, d + 1)]


class MADE(nn.Module):
    """A masked autoencoder for distribution estimation (Germain et al., 2015): a dense network x (n, d) ->
    (n, n_params, d) whose output ``[:, :, i]`` depends only on :math:`x_{<i}` (natural order), through masks
    :math:`M^{(l)}_{kj} = [m_l(k)\\ge m_{l-1}(j)]` and, for the output, :math:`[i > m_L(j)]` (10.3, 10.4)."""

    def __init__(self, d: int, hidden: tuple[int, ...] = (64,), n_params: int = 1, activation: str = "relu"):
        super().__init__()
        self.d = check_int(d, "d", 1)
        self.n_params = check_int(n_params, "n_params", 1)
        check_choice(activation, "activation", ("relu", "tanh"))
        degrees = made_degrees(self.d, tuple(hidden))
        layers: list[nn.Module] = []
        for m_in, m_out in zip(degrees[:-2], degrees[1:-1], strict=True):
            mask = (m_out[:, None] >= m_in[None, :]).astype(float)
            layers += [
                MaskedLinear(len(m_in), len(m_out), mask),
                nn.ReLU() if activation == "relu" else nn.Tanh(),
            ]
        m_last, m_out = degrees[-2], degrees[-1]
        out_mask = np.tile((m_out[:, None] > m_last[None, :]).astype(float), (self.n_params, 1))
        layers.append(MaskedLinear(len(m_last), self.n_params * self.d, out_mask))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim != 2 or x.shape[1] != self.d:
            raise ValueError(f"x must have shape (n, {self.d}), got {tuple(x.shape)}")
        return self.net(x).reshape(len(x), self.n_params, self.d)


class DensityFit(NamedTuple):
    train_nll: np.ndarray  # (epochs,) mean negative log-likelihood per example on the training set, in nats
    val_nll: np.ndarray  # (epochs,) the same on X_val (empty without X_val)


def fit_density(
    model: nn.Module,
    X,
    X_val=None,
    *,
    epochs: int = 100,
    batch_size: int = 256,
    lr: float = 1e-3,
    weight_decay: float = 0.0,
    rng=None,
    progress: bool = True,
) -> DensityFit:
    """Maximum likelihood: minimise :math:`-\\frac1n\\sum_i\\log p_\\theta(x_i)` with Adam over mini-batches of
    X (n, d) drawn from `rng`, by `training.train_steps` once per epoch on the model's device; `model` has a
    ``log_prob(x) -> (n,)``. Returns the mean NLL per epoch (10.3, 10.4); the model is left in the mode it came in."""
    if not isinstance(model, nn.Module) or not callable(getattr(model, "log_prob", None)):
        raise TypeError(f"model must be a torch.nn.Module with a log_prob method, got {type(model).__name__}")
    epochs = check_int(epochs, "epochs", 1)
    X = check_array(X, "X", ndim=2)
    lr = check_positive(lr, "lr")
    param = next(model.parameters())
    loader = make_loader(X, batch_size=batch_size, dtype=param.dtype, rng=rng)
    X_val_t = None
    if X_val is not None:
        X_val_t = torch.as_tensor(
            check_array(X_val, "X_val", (None, X.shape[1])), dtype=param.dtype, device=param.device
        )
    optimizer = torch.optim.Adam(
        model.parameters(), lr=lr, weight_decay=check_number(weight_decay, "weight_decay", 0)
    )
    sizes: list[int] = []

    def nll(model, batch):
        (x,) = batch
        sizes.append(len(x))
        return -model.log_prob(x).mean()

    train, val = [], []
    bar = progress_bar(range(epochs), desc="epochs", enabled=progress)
    for _ in bar:
        sizes.clear()
        every_batch = (
            batch for batch in loader
        )  # to the loader's end, as a for loop: the next shuffle draws alike
        losses = train_steps(model, nll, optimizer, every_batch, progress=False)
        train.append(sum(loss * size for loss, size in zip(losses, sizes, strict=True)) / len(X))
        if X_val_t is not None:
            with torch.no_grad(), _eval_mode(model):
                val.append(-model.log_prob(X_val_t).mean().item())
        bar.set_postfix(nll=f"{train[-1]:.3f}")
    bar.close()
    return DensityFit(np.array(train), np.array(val))


@contextmanager
def _eval_mode(model: nn.Module):
    """``with _eval_mode(model):`` runs the block with `model` in eval mode and leaves it in the mode it came in, as
    every function that evaluates a model does (dropout and batch norm behave as at test time)."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)


# ----------------------------------------------------------------------------- a time-conditioned MLP (10.6, 10.7)


class EpsMLP(nn.Module):
    """A noise predictor :math:`\\varepsilon_\\theta(x_t, t, c)` for vectors (10.36), also the velocity network of flow
    matching (10.45, with t = 1000 s for the time s in [0, 1]): an MLP on the concatenation of
    x_t (n, d), a sinusoidal embedding of the step t (n,), :math:`(\\sin t\\omega_j, \\cos t\\omega_j)_{j<h}` with
    :math:`\\omega_j = 10000^{-j/h}`, h = time_dim // 2 (the Transformer's positional encoding), and,
    if ``n_classes > 0``, a learned embedding of the class c (n,) in 0..n_classes, where c = n_classes is the
    empty condition "no class" of classifier-free guidance. `depth` hidden layers of width `hidden`, SiLU.
    With ``fourier = L > 0`` the input also gets Fourier features of x,
    :math:`(\\sin 2^{l-1}\\pi x_j, \\cos 2^{l-1}\\pi x_j)_{l<L}`, which let a small MLP bend sharply in x (thin
    structures such as the arms of a spiral); an MLP on x alone is biased towards smooth functions."""

    def __init__(
        self,
        d: int,
        hidden: int = 128,
        depth: int = 3,
        n_classes: int = 0,
        time_dim: int = 32,
        fourier: int = 0,
    ):
        super().__init__()
        self.d = check_int(d, "d", 1)
        hidden, depth = check_int(hidden, "hidden", 1), check_int(depth, "depth", 1)
        self.n_classes = check_int(n_classes, "n_classes", 0)
        time_dim = check_int(time_dim, "time_dim", 2)
        self.fourier = check_int(fourier, "fourier", 0)
        half = time_dim // 2
        self.register_buffer("freqs", torch.exp(-math.log(10_000.0) * torch.arange(half) / half))
        self.register_buffer("octaves", math.pi / 2 * 2.0 ** torch.arange(self.fourier))
        self.class_embedding = nn.Embedding(self.n_classes + 1, hidden) if self.n_classes else None
        widths = [d * (1 + 2 * self.fourier) + 2 * half + (hidden if self.n_classes else 0)] + [
            hidden
        ] * depth
        layers: list[nn.Module] = []
        for a, b in zip(widths[:-1], widths[1:], strict=True):
            layers += [nn.Linear(a, b), nn.SiLU()]
        self.net = nn.Sequential(*layers, nn.Linear(hidden, d))

    def forward(self, x: torch.Tensor, t: torch.Tensor, c: torch.Tensor | None = None) -> torch.Tensor:
        angles = t.to(x.dtype)[:, None] * self.freqs.to(x.dtype)[None]
        parts = [x, torch.sin(angles), torch.cos(angles)]
        if self.fourier:
            waves = (x[:, :, None] * self.octaves.to(x.dtype)).flatten(1)  # (n, d * L)
            parts += [torch.sin(waves), torch.cos(waves)]
        if self.class_embedding is not None:
            if c is None:
                c = torch.full_like(t, self.n_classes)
            parts.append(self.class_embedding(c))
        return self.net(torch.cat(parts, dim=1))


# ----------------------------------------------------------------------------- comparing samples, drawing from rng (10.3, 10.5, 10.6)


def mmd2(X, Y, bandwidth: float) -> float:
    """The unbiased squared maximum mean discrepancy (10.5, 10.6; Gretton et al. 2012) with the Gaussian kernel
    :math:`k(x, y) = \\exp(-\\|x-y\\|^2/2h^2)`, h = bandwidth, between samples X (n, d) and Y (m, d):
    :math:`\\frac1{n(n-1)}\\sum_{i\\ne j}k(x_i,x_j) + \\frac1{m(m-1)}\\sum_{i\\ne j}k(y_i,y_j)
    - \\frac2{nm}\\sum_{i,j}k(x_i,y_j)` (can be slightly negative when the distributions agree)."""
    X = check_array(X, "X", (None, None))
    Y = check_array(Y, "Y", (None, X.shape[1]))
    if len(X) < 2 or len(Y) < 2:
        raise ValueError(f"X and Y need at least 2 rows each, got {len(X)} and {len(Y)}")
    h = check_positive(bandwidth, "bandwidth")

    def kernel(A, B):
        sq = (A**2).sum(1)[:, None] + (B**2).sum(1)[None] - 2 * A @ B.T
        return np.exp(-np.maximum(sq, 0) / (2 * h**2))

    n, m = len(X), len(Y)
    K_xx, K_yy = kernel(X, X), kernel(Y, Y)
    within = (K_xx.sum() - np.trace(K_xx)) / (n * (n - 1)) + (K_yy.sum() - np.trace(K_yy)) / (m * (m - 1))
    return float(within - 2 * kernel(X, Y).mean())


def frechet_distance(F, G) -> float:
    """The Fréchet distance between the Gaussians fitted to two samples of features F (n, k) and G (m, k)
    (10.08; the FID of Heusel et al. when the features come from a trained image network):
    :math:`\\|\\mu_F-\\mu_G\\|^2 + \\mathrm{tr}\\big(\\Sigma_F + \\Sigma_G - 2(\\Sigma_F\\Sigma_G)^{1/2}\\big)`, the squared
    Wasserstein-2 distance between the two Gaussians. The root's trace is the sum of the square roots of the
    eigenvalues of :math:`\\Sigma_F^{1/2}\\Sigma_G\\Sigma_F^{1/2}` (symmetric, so no complex rounding)."""
    F = check_array(F, "F", (None, None))
    G = check_array(G, "G", (None, F.shape[1]))
    if len(F) < 2 or len(G) < 2:
        raise ValueError(f"F and G need at least 2 rows each, got {len(F)} and {len(G)}")
    cov_F, cov_G = np.atleast_2d(np.cov(F.T)), np.atleast_2d(np.cov(G.T))
    lam, U = np.linalg.eigh(cov_F)
    root_F = (U * np.sqrt(np.clip(lam, 0, None))) @ U.T
    cross = np.sqrt(np.clip(np.linalg.eigvalsh(root_F @ cov_G @ root_F), 0, None)).sum()
    mean_gap = np.sum((F.mean(axis=0) - G.mean(axis=0)) ** 2)
    return float(mean_gap + np.trace(cov_F) + np.trace(cov_G) - 2 * cross)


def _normal_draws(n: int, d: int, rng, like: torch.Tensor) -> torch.Tensor:
    """n draws (n, d) of N(0, I) from `rng`, as a tensor of the dtype and device of `like`."""
    n = check_int(n, "n", 1)
    z = check_rng(rng).standard_normal((n, d))
    return torch.as_tensor(z, dtype=like.dtype, device=like.device)


def _init_like_torch(model: nn.Module, generator: torch.Generator) -> nn.Module:
    """Re-draw the weights of `model` as PyTorch's default initialisation does, from `generator` instead of torch's
    global one: every ``nn.Linear`` (in the order of ``model.modules()``) gets weight and bias
    :math:`\\sim U[-1/\\sqrt{n_{in}}, 1/\\sqrt{n_{in}}]`, every ``nn.Embedding`` N(0, 1) entries."""
    with torch.no_grad():
        for layer in model.modules():
            if isinstance(layer, nn.Linear):
                bound = 1 / math.sqrt(layer.in_features)
                layer.weight.uniform_(-bound, bound, generator=generator)
                layer.bias.uniform_(-bound, bound, generator=generator)
            elif isinstance(layer, nn.Embedding):
                layer.weight.normal_(generator=generator)
    return model
