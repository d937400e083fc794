"""Section 10.5 of chapter 10, generative adversarial networks: the game, its optimal discriminator, the
Jensen-Shannon divergence and gradient play (notebook 06_gan_theory), then training GANs: mode coverage, the
Wasserstein distance, the critic and its gradient penalty, and the GAN trainer (notebook 07_gan_training).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from scipy.special import expit
from torch import nn

from ..training import device, model_device, progress_bar, to_numpy, train_steps
from ..validation import (
    check_array,
    check_callable,
    check_choice,
    check_int,
    check_matrix,
    check_number,
    check_positive,
    check_rng,
    check_vector,
)
from .common import GaussianMixture, _init_like_torch, _normal_draws, gaussian_mixture

# ----------------------------------------------------------------------------- the game and its optimum (06_gan_theory)


def _check_density(p, name: str, n: int | None = None) -> np.ndarray:
    p = check_vector(p, name, n)
    if np.any(p < 0):
        raise ValueError(f"{name} must be a density or probabilities (>= 0), got a minimum of {p.min():.3g}")
    return p


def optimal_discriminator(p, q) -> np.ndarray:
    """The optimal discriminator :math:`D^*(x) = \\frac{p(x)}{p(x) + p_\\theta(x)}` (10.21) of the data density p
    against the generator's density q = :math:`p_\\theta`, both given on the same grid (n,); 1/2 where both
    vanish (there V does not depend on D)."""
    p = _check_density(p, "p")
    q = _check_density(q, "q", p.size)
    total = p + q
    return np.divide(p, total, out=np.full_like(p, 0.5), where=total > 0)


def gan_value(D, p, q, dx: float = 1.0) -> float:
    """The value of the GAN game (10.20) by quadrature on a grid,
    :math:`V(D, G) = \\int p(x)\\ln D(x) + p_\\theta(x)\\ln(1 - D(x))\\,dx \\approx \\sum_i [p_i\\ln D_i
    + q_i\\ln(1 - D_i)]\\,dx`, for the discriminator's values D (n,) in (0, 1) and densities p, q (n,) on the
    same grid of spacing dx (dx = 1 for probabilities); terms where a density vanishes count 0, and D is kept
    within one rounding step of 0 and 1 (an optimal D rounds to 1 where the generator's density is negligible)."""
    p = _check_density(p, "p")
    q = _check_density(q, "q", p.size)
    D = check_vector(D, "D", p.size)
    if np.any(D < 0) or np.any(D > 1):
        raise ValueError(f"D must hold values in [0, 1], got values from {D.min():.3g} to {D.max():.3g}")
    dx = check_positive(dx, "dx")
    # D rounded to exactly 0 or 1 where the other density is negligible (far tails) would give 0 · (-inf)
    D = np.clip(D, np.finfo(float).tiny, 1 - np.finfo(float).epsneg)
    real = np.where(p > 0, p * np.log(D), 0.0)
    fake = np.where(q > 0, q * np.log1p(-D), 0.0)
    return float(np.sum(real + fake) * dx)


def js_div(p, q, dx: float = 1.0) -> float:
    """The Jensen–Shannon divergence (10.22) in nats, :math:`\\mathrm{JS}(p\\Vert q) = \\frac12\\mathrm{KL}(p\\Vert m)
    + \\frac12\\mathrm{KL}(q\\Vert m)`, :math:`m = \\frac{p+q}2`, by quadrature of densities p, q (n,) on a grid of
    spacing dx (dx = 1: probabilities). :math:`0 \\le \\mathrm{JS} \\le \\ln 2`."""
    p = _check_density(p, "p")
    q = _check_density(q, "q", p.size)
    dx = check_positive(dx, "dx")
    m = 0.5 * (p + q)

    def kl_to_m(a):
        return np.sum(np.where(a > 0, a * np.log(np.where(a > 0, a, 1.0) / np.where(a > 0, m, 1.0)), 0.0))

    return float(0.5 * (kl_to_m(p) + kl_to_m(q)) * dx)


GAME_METHODS = ("simultaneous", "alternating", "extragradient")


def _grad_pair(grad, theta, phi):
    g = grad(theta, phi)
    if not (isinstance(g, tuple | list) and len(g) == 2):
        raise ValueError(f"grad(theta, phi) must return the pair (dl/dtheta, dl/dphi), got {g!r:.80}")
    return np.asarray(g[0], dtype=float), np.asarray(g[1], dtype=float)


def game_step(grad: Callable, theta, phi, eta: float, method: str = "simultaneous"):
    """One step of gradient play on :math:`\\min_\\theta\\max_\\phi\\ell(\\theta, \\phi)` (10.24); `grad(theta, phi)`
    returns :math:`(\\nabla_\\theta\\ell, \\nabla_\\phi\\ell)`. Returns the new (theta, phi).

    ``"simultaneous"``: :math:`\\theta' = \\theta - \\eta\\nabla_\\theta\\ell(\\theta, \\phi)`,
    :math:`\\phi' = \\phi + \\eta\\nabla_\\phi\\ell(\\theta, \\phi)`.
    ``"alternating"``: :math:`\\theta' = \\theta - \\eta\\nabla_\\theta\\ell(\\theta, \\phi)`, then
    :math:`\\phi' = \\phi + \\eta\\nabla_\\phi\\ell(\\theta', \\phi)`.
    ``"extragradient"``: a look-ahead simultaneous step to :math:`(\\theta_{1/2}, \\phi_{1/2})`, then
    :math:`\\theta' = \\theta - \\eta\\nabla_\\theta\\ell(\\theta_{1/2}, \\phi_{1/2})`,
    :math:`\\phi' = \\phi + \\eta\\nabla_\\phi\\ell(\\theta_{1/2}, \\phi_{1/2})` (both at the look-ahead point)."""
    check_callable(grad, "grad")
    theta, phi = np.asarray(theta, dtype=float), np.asarray(phi, dtype=float)
    eta = check_positive(eta, "eta")
    method = check_choice(method, "method", GAME_METHODS)
    g_theta, g_phi = _grad_pair(grad, theta, phi)
    if method == "simultaneous":
        return theta - eta * g_theta, phi + eta * g_phi
    if method == "alternating":
        theta_new = theta - eta * g_theta
        return theta_new, phi + eta * _grad_pair(grad, theta_new, phi)[1]
    theta_half, phi_half = theta - eta * g_theta, phi + eta * g_phi
    g_theta, g_phi = _grad_pair(grad, theta_half, phi_half)
    return theta - eta * g_theta, phi + eta * g_phi


def play_game(grad: Callable, z0, eta: float, steps: int, method: str = "simultaneous") -> np.ndarray:
    """`steps` steps of `game_step` (10.24) from z0 = (theta_0, phi_0) for two scalar players; returns the
    iterates (steps + 1, 2), one row (theta_t, phi_t) per step, the first z0 (may grow without bound)."""
    check_callable(grad, "grad")
    z0 = check_vector(z0, "z0", 2)
    eta = check_positive(eta, "eta")
    steps = check_int(steps, "steps", 0)
    method = check_choice(method, "method", GAME_METHODS)
    path = np.empty((steps + 1, 2))
    path[0] = z0
    theta, phi = z0
    with np.errstate(over="ignore", invalid="ignore"):
        for t in range(1, steps + 1):
            theta, phi = game_step(grad, theta, phi, eta, method)
            path[t] = theta, phi
    return path


class SaturationGrads(NamedTuple):
    saturating: np.ndarray  # d/da ln(1 - sigmoid(a)) = -sigmoid(a): the minimax generator loss
    non_saturating: np.ndarray  # d/da ln sigmoid(a) = 1 - sigmoid(a): the non-saturating loss


def generator_logit_grads(a) -> SaturationGrads:
    """The gradients of the generator's two losses with respect to the discriminator's logit a, D = σ(a)
    (10.25): :math:`\\partial_a\\ln(1-\\sigma(a)) = -\\sigma(a)` (minimax, it vanishes as a → −∞, where a poor
    generator starts) and :math:`\\partial_a\\ln\\sigma(a) = 1-\\sigma(a)` (non-saturating, → 1). a: any shape."""
    a = check_array(a, "a")
    s = expit(a)
    return SaturationGrads(-s, 1 - s)


# ----------------------------------------------------------------------------- training GANs: mode collapse, Wasserstein, gradient penalty (07_gan_training)


def w1_1d(a, b) -> float:
    """The Wasserstein-1 distance (10.28) between two empirical distributions on the line with n points each:
    the optimal coupling matches them in sorted order, :math:`W_1 = \\frac1n\\sum_i|a_{(i)} - b_{(i)}|`.
    a, b (n,)."""
    a = check_vector(a, "a")
    b = check_vector(b, "b", a.size)
    return float(np.mean(np.abs(np.sort(a) - np.sort(b))))


def ring_mixture(k: int = 8, radius: float = 2.0, std: float = 0.05) -> GaussianMixture:
    """The k-Gaussian ring (10.5): equal weights, means :math:`r(\\cos\\frac{2\\pi j}k, \\sin\\frac{2\\pi j}k)`,
    j = 0..k-1, covariance std² I (2-D)."""
    k = check_int(k, "k", 1)
    radius, std = check_positive(radius, "radius"), check_positive(std, "std")
    angles = 2 * np.pi * np.arange(k) / k
    means = radius * np.stack([np.cos(angles), np.sin(angles)], axis=1)
    return gaussian_mixture(np.full(k, 1 / k), means, np.tile(std**2 * np.eye(2), (k, 1, 1)))


class ModeCoverage(NamedTuple):
    covered: int  # modes that received at least min_fraction of the samples
    counts: np.ndarray  # (K,) samples within `radius` of each mode
    high_quality: float  # fraction of all samples within `radius` of some mode


def modes_covered(X, centres, radius: float, min_fraction: float = 0.02) -> ModeCoverage:
    """Mode coverage of samples X (n, d) (10.26): a sample belongs to its nearest centre (K, d) if it lies within
    `radius` of it; a mode counts as covered if at least min_fraction · n samples belong to it."""
    centres = check_array(centres, "centres", (None, None))
    X = check_array(X, "X", (None, centres.shape[1]))
    radius = check_positive(radius, "radius")
    min_fraction = check_number(min_fraction, "min_fraction", 0, 1, low_open=True)
    dist = np.linalg.norm(X[:, None, :] - centres[None], axis=2)  # (n, K)
    nearest, close_enough = dist.argmin(axis=1), dist.min(axis=1) <= radius
    counts = np.bincount(nearest[close_enough], minlength=len(centres))
    return ModeCoverage(int(np.sum(counts >= min_fraction * len(X))), counts, float(close_enough.mean()))


def gan_mlp(sizes, out: str = "identity", rng=None) -> nn.Sequential:
    """An MLP for widths ``sizes = [n, m_1, ..., m_L]`` with LeakyReLU(0.2) between the ``nn.Linear`` layers and
    `out` ("identity" or "sigmoid") after the last: a generator, a discriminator (its logit) or a critic (10.5).
    The weights follow torch's default initialisation, drawn from `rng` (torch's global generator is untouched)."""
    sizes = [check_int(k, "sizes entries", 1) for k in sizes]
    if len(sizes) < 2:
        raise ValueError(f"sizes must list at least two widths [n, ..., m_L], got {sizes!r}")
    out = check_choice(out, "out", ("identity", "sigmoid"))
    init = torch.Generator().manual_seed(int(check_rng(rng).integers(2**31)))
    layers: list[nn.Module] = []
    for l in range(len(sizes) - 1):
        linear = nn.Linear(sizes[l], sizes[l + 1], device="meta").to_empty(
            device="cpu"
        )  # no draws: see below
        layers += [linear, nn.LeakyReLU(0.2)] if l < len(sizes) - 2 else [linear]
    if out == "sigmoid":
        layers.append(nn.Sigmoid())
    return _init_like_torch(nn.Sequential(*layers), init)


def _uniform_like(x: torch.Tensor, rng) -> torch.Tensor:
    u = check_rng(rng).random((x.shape[0], 1))
    return torch.as_tensor(u, dtype=x.dtype, device=x.device)


def gradient_penalty(critic: Callable, real, fake, lam: float = 10.0, alpha=None, rng=None) -> torch.Tensor:
    """The WGAN-GP penalty (10.29) :math:`\\lambda\\,\\mathbb E_{\\hat x}(\\|\\nabla_{\\hat x}f(\\hat x)\\|_2 - 1)^2` at
    :math:`\\hat x = \\alpha x + (1-\\alpha)\\tilde x`, one :math:`\\alpha\\sim U[0,1]` per row (drawn from `rng`
    unless given, (n, 1)), for real x and fake :math:`\\tilde x` tensors (n, d) and a critic f: (n, d) -> (n, 1).
    Returns a scalar tensor that backpropagates into the critic (create_graph=True)."""
    check_callable(critic, "critic")
    lam = check_number(lam, "lam", 0)
    if not (isinstance(real, torch.Tensor) and isinstance(fake, torch.Tensor)):
        raise TypeError(
            f"real and fake must be torch tensors, got {type(real).__name__}, {type(fake).__name__}"
        )
    if real.ndim != 2 or real.shape != fake.shape:
        raise ValueError(
            f"real and fake must be tensors of one shape (n, d), got {tuple(real.shape)}, {tuple(fake.shape)}"
        )
    if alpha is None:
        alpha = _uniform_like(real, rng)
    alpha = torch.as_tensor(alpha, dtype=real.dtype, device=real.device)
    if alpha.shape != (real.shape[0], 1):
        raise ValueError(f"alpha must have shape ({real.shape[0]}, 1), got {tuple(alpha.shape)}")
    x_hat = (alpha * real.detach() + (1 - alpha) * fake.detach()).requires_grad_(True)
    (grad,) = torch.autograd.grad(critic(x_hat).sum(), x_hat, create_graph=True)
    return lam * ((grad.norm(dim=1) - 1) ** 2).mean()


class TrainedGAN(NamedTuple):
    G: nn.Sequential  # the generator: latent z (n, k) -> samples (n, d)
    D: nn.Sequential  # the discriminator: samples (n, d) -> logit (non-saturating) or critic (WGAN-GP) (n, 1)
    history: dict  # "d_loss", "g_loss": one value per generator step


GAN_LOSSES = ("non-saturating", "wgan-gp")


def _rows(X_t: torch.Tensor, batch_size: int, generator: torch.Generator) -> torch.Tensor:
    """`batch_size` rows of X_t drawn uniformly with replacement by `generator`."""
    return X_t[torch.randint(len(X_t), (batch_size,), generator=generator, device=X_t.device)]


def _critic_loss(f: nn.Module, real, fake, lam: float, alpha) -> torch.Tensor:
    """:math:`\\mathbb E f(\\tilde x) - \\mathbb E f(x)`, plus the `gradient_penalty` at weights alpha unless alpha is
    None: the loss the critic minimises (10.28, 10.29)."""
    loss = f(fake).mean() - f(real).mean()
    return loss if alpha is None else loss + gradient_penalty(f, real, fake, lam, alpha)


def train_gan(
    X,
    loss: str = "non-saturating",
    *,
    k: int = 2,
    hidden: int = 64,
    depth: int = 2,
    out: str = "identity",
    steps: int = 1000,
    n_critic: int | None = None,
    batch_size: int = 128,
    lr: float = 1e-3,
    lam: float = 10.0,
    rng=None,
    progress: bool = True,
) -> TrainedGAN:
    """A GAN trained on the rows of X (n, d) (10.5): generator `gan_mlp` [k, hidden × depth, d] with output `out`
    from z ~ N(0, I_k), discriminator [d, hidden × depth, 1], Adam (betas 0.5, 0.9), on `training.device`.
    Each of the `steps` generator steps follows `n_critic` discriminator steps (1 for the non-saturating GAN, 5 for
    WGAN-GP by default); each player's update is a `training.train_steps` call on its own loss and batches, and one
    progress bar counts the generator steps.

    ``"non-saturating"``: D maximises :math:`\\mathbb E\\ln D(x) + \\mathbb E\\ln(1-D(G(z)))`, G maximises
    :math:`\\mathbb E\\ln D(G(z))`, D = σ(logit). ``"wgan-gp"``: the critic f minimises
    :math:`\\mathbb E f(G(z)) - \\mathbb E f(x) + ` `gradient_penalty` (weight lam), G minimises
    :math:`-\\mathbb E f(G(z))`. Weights, batches and noise all come from `rng`. Returns G and D in eval mode, and
    the last discriminator loss and the generator loss of every generator step."""
    X = check_matrix(X, "X")
    loss = check_choice(loss, "loss", GAN_LOSSES)
    k, hidden, depth = check_int(k, "k", 1), check_int(hidden, "hidden", 1), check_int(depth, "depth", 1)
    steps, batch_size = check_int(steps, "steps", 1), check_int(batch_size, "batch_size", 1)
    if n_critic is None:
        n_critic = 1 if loss == "non-saturating" else 5
    n_critic = check_int(n_critic, "n_critic", 1)
    lr, lam = check_positive(lr, "lr"), check_number(lam, "lam", 0)
    rng = check_rng(rng)
    d, dev = X.shape[1], device()
    G = gan_mlp([k] + [hidden] * depth + [d], out, rng).to(dev)
    D = gan_mlp([d] + [hidden] * depth + [1], "identity", rng).to(dev)
    X_t = torch.as_tensor(X, dtype=torch.float32, device=dev)
    torch_rng = torch.Generator(device=dev).manual_seed(int(rng.integers(2**31)))
    opt_G = torch.optim.Adam(G.parameters(), lr=lr, betas=(0.5, 0.9))
    opt_D = torch.optim.Adam(D.parameters(), lr=lr, betas=(0.5, 0.9))
    bce = F.binary_cross_entropy_with_logits

    def noise() -> torch.Tensor:
        return torch.randn(batch_size, k, generator=torch_rng, device=dev)

    def critic_batches():  # per discriminator step: real rows, the generator's noise, the penalty's weights
        while True:
            real, z = _rows(X_t, batch_size, torch_rng), noise()
            alpha = torch.rand(batch_size, 1, generator=torch_rng, device=dev) if loss == "wgan-gp" else None
            yield real, z, alpha

    def d_loss(D, batch):
        real, z, alpha = batch
        with torch.no_grad():
            fake = G(z)
        if loss == "wgan-gp":
            return _critic_loss(D, real, fake, lam, alpha)
        d_real, d_fake = D(real), D(fake)
        return bce(d_real, torch.ones_like(d_real)) + bce(d_fake, torch.zeros_like(d_fake))

    def g_loss(G, z):
        d_fake = D(G(z))
        return bce(d_fake, torch.ones_like(d_fake)) if loss == "non-saturating" else -d_fake.mean()

    history: dict[str, list[float]] = {"d_loss": [], "g_loss": []}
    d_stream = critic_batches()
    bar = progress_bar(range(steps), desc="generator steps", enabled=progress)
    for step in bar:
        d_losses = train_steps(D, d_loss, opt_D, d_stream, n_critic, progress=False)
        g_losses = train_steps(G, g_loss, opt_G, [noise()], progress=False)
        history["d_loss"].append(float(d_losses[-1]))
        history["g_loss"].append(float(g_losses[-1]))
        if (step + 1) % 10 == 0 or step + 1 == steps:
            bar.set_postfix(d_loss=f"{d_losses[-1]:.3f}", g_loss=f"{g_losses[-1]:.3f}", refresh=False)
    bar.close()
    return TrainedGAN(G.eval(), D.eval(), history)


@torch.no_grad()
def gan_sample(G: nn.Module, n: int, rng=None) -> np.ndarray:
    """n samples G(z), z ~ N(0, I_k) drawn from `rng`, of a trained generator G (k read from its first layer), as
    a numpy array (n, d)."""
    if not isinstance(G, nn.Module):
        raise TypeError(f"G must be a torch.nn.Module (a generator), got {type(G).__name__}")
    first = next(m for m in G.modules() if isinstance(m, nn.Linear))
    return to_numpy(G(_normal_draws(n, first.in_features, rng, first.weight))).astype(np.float64)


def train_critic(
    X,
    Y,
    *,
    constraint: str = "penalty",
    lam: float = 10.0,
    clip: float = 0.01,
    hidden: int = 64,
    depth: int = 2,
    steps: int = 1000,
    batch_size: int = 256,
    lr: float = 1e-3,
    rng=None,
    progress: bool = True,
) -> nn.Sequential:
    """A critic f = `gan_mlp` [d, hidden × depth, 1] that maximises :math:`\\mathbb E_X f - \\mathbb E_Y f` over
    mini-batches of the rows of X (n, d) and Y (m, d) with Adam, by `training.train_steps` on `training.device`
    (10.28, 10.29). Its Lipschitz constant is held by ``constraint="penalty"`` (minus `gradient_penalty` with weight
    lam: the gap estimates :math:`W_1`) or ``"clip"`` (every weight clipped to [-clip, clip] after each step, a hook
    of the optimizer: the gap estimates :math:`K\\cdot W_1` for an unknown K set by clip and the architecture).
    Weights and batches come from `rng`. Returns the critic in eval mode."""
    X = check_matrix(X, "X")
    Y = check_matrix(Y, "Y", cols=X.shape[1])
    constraint = check_choice(constraint, "constraint", ("penalty", "clip"))
    lam, clip = check_number(lam, "lam", 0), check_positive(clip, "clip")
    hidden, depth = check_int(hidden, "hidden", 1), check_int(depth, "depth", 1)
    steps, batch_size = check_int(steps, "steps", 1), check_int(batch_size, "batch_size", 1)
    lr = check_positive(lr, "lr")
    rng = check_rng(rng)
    dev = device()
    f = gan_mlp([X.shape[1]] + [hidden] * depth + [1], "identity", rng).to(dev)
    X_t = torch.as_tensor(X, dtype=torch.float32, device=dev)
    Y_t = torch.as_tensor(Y, dtype=torch.float32, device=dev)
    torch_rng = torch.Generator(device=dev).manual_seed(int(rng.integers(2**31)))
    opt = torch.optim.Adam(f.parameters(), lr=lr, betas=(0.5, 0.9))
    if constraint == "clip":

        @torch.no_grad()
        def clip_weights(optimizer, args, kwargs):
            for p in f.parameters():
                p.clamp_(-clip, clip)

        opt.register_step_post_hook(clip_weights)

    def batches():  # real rows, fake rows and, with the penalty, its interpolation weights
        while True:
            real, fake = _rows(X_t, batch_size, torch_rng), _rows(Y_t, batch_size, torch_rng)
            penalty = constraint == "penalty"
            yield real, fake, torch.rand(batch_size, 1, generator=torch_rng, device=dev) if penalty else None

    def loss(f, batch):
        real, fake, alpha = batch
        return _critic_loss(f, real, fake, lam, alpha)

    train_steps(f, loss, opt, batches(), steps, desc="critic steps", progress=progress)
    return f.eval()


class CriticScores(NamedTuple):
    gap: float  # mean f(X) - mean f(Y): the critic's estimate of (K times) W_1
    grad_norms: np.ndarray  # (n,) ||grad f|| at the interpolates alpha x_i + (1 - alpha) y_i


def critic_scores(critic: nn.Module, X, Y, rng=None) -> CriticScores:
    """The gap :math:`\\frac1n\\sum f(x_i) - \\frac1n\\sum f(y_i)` of a critic on samples X, Y (n, d) and the gradient
    norms :math:`\\|\\nabla f(\\hat x_i)\\|` at :math:`\\hat x_i = \\alpha_i x_i + (1-\\alpha_i)y_i`,
    :math:`\\alpha_i\\sim U[0,1]` from `rng` (10.29)."""
    check_callable(critic, "critic")
    X = check_matrix(X, "X")
    Y = check_matrix(Y, "Y", len(X), X.shape[1])
    dev = model_device(critic)
    X_t = torch.as_tensor(X, dtype=torch.float32, device=dev)
    Y_t = torch.as_tensor(Y, dtype=torch.float32, device=dev)
    alpha = _uniform_like(X_t, rng)
    x_hat = (alpha * X_t + (1 - alpha) * Y_t).requires_grad_(True)
    (grad,) = torch.autograd.grad(critic(x_hat).sum(), x_hat)
    with torch.no_grad():
        gap = (critic(X_t).mean() - critic(Y_t).mean()).item()
    return CriticScores(gap, to_numpy(grad.norm(dim=1)).astype(np.float64))
