"""Widgets of chapter 10 — generative models."""

from __future__ import annotations

import math

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np

from ..alt_text import describe
from ..data import load_digits
from ..generative import (
    ddpm_sample,
    fit_gaussian_kl,
    gaussian_mixture,
    mixture_eps_fn,
    mixture_log_prob,
    mixture_sample,
    noise_schedule,
    noised_mixture,
    pca,
    play_game,
)
from ..validation import check_rng
from .core import interactive_figure, widget

# ----------------------------------------------------------------------------- 10.1 linear latent-variable models: PCA, factor analysis, PPCA


@widget
def pca_reconstruction_explorer() -> widgets.VBox:
    """Rank-k PCA reconstructions of digits (10.01): eight digits (pixels in [0, 1]) next to
    :math:`\\bar x + U_kU_k^\\top(x-\\bar x)`, with the explained variance :math:`\\sum_{i\\le k}\\lambda_i/\\sum_i\\lambda_i`
    and the mean squared error :math:`\\sum_{i>k}\\lambda_i` in the title."""
    images, _ = load_digits()
    X = images.reshape(len(images), -1) / 16.0
    fit = pca(X, 64)  # all eigenvectors at once; rank k keeps the first k columns
    shown = X[[0, 1, 2, 3, 4, 5, 6, 7]]
    centred = shown - fit.mu
    explained = np.cumsum(fit.lam) / fit.lam.sum()

    def draw(k: int) -> plt.Figure:
        U = fit.U_k[:, :k]
        recon = fit.mu + centred @ U @ U.T
        fig = plt.figure(figsize=(10, 3.0))
        grid = fig.add_gridspec(2, 10, width_ratios=[1] * 8 + [0.7, 3.2], wspace=0.08, hspace=0.08)
        for j in range(8):
            for row, image in enumerate((shown[j], recon[j])):
                ax = fig.add_subplot(grid[row, j])
                ax.imshow(image.reshape(8, 8), cmap="gray_r", vmin=0, vmax=1)
                ax.set_xticks([])
                ax.set_yticks([])
                if j == 0:
                    ax.set_ylabel("digit" if row == 0 else f"rank {k}")
        ax_ev = fig.add_subplot(grid[:, 9])
        ax_ev.plot(np.arange(1, 65), explained, color="C0")
        ax_ev.plot(k, explained[k - 1], "o", color="C1")
        ax_ev.set(xlabel="k", ylabel="explained variance", ylim=(0, 1.02))
        fig.suptitle(
            f"k = {k}: explained variance {explained[k - 1]:.1%}, "
            f"mean squared error per digit {fit.lam[k:].sum():.2f} (of {fit.lam.sum():.2f})",
            fontsize=10,
        )
        fig.subplots_adjust(left=0.04, right=0.98, top=0.86, bottom=0.17)
        describe(
            fig,
            f"Eight 8 by 8 digits (top row) above their rank-{k} PCA reconstructions (bottom row), and the "
            f"explained variance against the rank k, a rising curve with rank {k} marked at "
            f"{explained[k - 1]:.1%}; the reconstructions sharpen as k grows and are exact at k = 64.",
        )
        return fig

    return interactive_figure(
        draw,
        frames={"k": [1, 2, 3, 5, 8, 12, 16, 24, 32, 48, 64]},
        k=widgets.IntSlider(5, min=1, max=64, step=1, description="rank k"),
    )


# ----------------------------------------------------------------------------- 10.2 the ELBO, the reparameterisation trick, the Gaussian KL


KL_SEPARATIONS = [0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0]


@widget
def kl_direction_explorer() -> widgets.VBox:
    """Forward against reverse KL (10.13): the best Gaussian for the mixture ½N(−s, 0.5²) + ½N(s, 0.5²) under
    KL(p‖q) (moment matching, mass-covering) and under KL(q‖p) (best of several starts, mode-seeking), for each
    separation s; the fits are computed once, in the builder."""
    grid = np.linspace(-20, 20, 4001)
    fits = {}
    for s in KL_SEPARATIONS:
        gmm = gaussian_mixture([0.5, 0.5], [[-s], [s]], [[[0.25]], [[0.25]]])
        log_p = mixture_log_prob(gmm, grid[:, None])
        forward = fit_gaussian_kl(log_p, grid, "forward", (0.5, 1.0))
        starts = [(s, 0.5), (-s, 0.5), (0.0, s + 1.0), (0.5 * s, 1.0)]
        reverse = min((fit_gaussian_kl(log_p, grid, "reverse", st) for st in starts), key=lambda f: f.kl)
        fits[s] = (np.exp(log_p), forward, reverse)
    x_max = max(KL_SEPARATIONS) + 4

    def draw(separation: float) -> plt.Figure:
        density, forward, reverse = fits[min(fits, key=lambda s: abs(s - separation))]
        fig, ax = plt.subplots(figsize=(8, 3.8))
        ax.fill_between(grid, density, color="lightgrey", label="target p (mixture)")
        for fit, style, name in ((forward, "C0-", r"forward: $\min_q \mathrm{KL}(p\Vert q)$"),
                                 (reverse, "C3--", r"reverse: $\min_q \mathrm{KL}(q\Vert p)$")):  # fmt: skip
            q = np.exp(-0.5 * ((grid - fit.mean) / fit.std) ** 2) / (fit.std * math.sqrt(2 * math.pi))
            ax.plot(grid, q, style, label=f"{name}: m = {fit.mean:.2f}, s = {fit.std:.2f}, KL = {fit.kl:.3f}")
        ax.set(
            xlim=(-x_max, x_max),
            ylim=(0, 0.9),
            xlabel="$x$",
            ylabel="density",
            title=f"separation {separation:g}: ln 2 = {math.log(2):.3f}",
        )
        ax.legend(fontsize=8, loc="upper left")
        fig.tight_layout()
        describe(
            fig,
            f"The two-mode target density with modes at plus and minus {separation:g} (grey) and the best "
            "Gaussian under each direction of the KL: the forward fit (solid) spreads over both modes, the "
            "reverse fit (dashed) sits on one mode once the modes are apart.",
        )
        return fig

    return interactive_figure(
        draw,
        frames={"separation": KL_SEPARATIONS},
        separation=widgets.FloatSlider(3.0, min=0.5, max=4.0, step=0.5, description="mode position ±s"),
    )


# ----------------------------------------------------------------------------- 10.2 a VAE on digits, beta-VAE


# ----------------------------------------------------------------------------- 10.3 normalising flows


# ----------------------------------------------------------------------------- 10.4 autoregressive models


# ----------------------------------------------------------------------------- 10.5 GANs: the game and its optimum


@widget
def game_explorer() -> widgets.VBox:
    """Gradient play on the bilinear game l = theta phi (10.24): the trajectories of simultaneous, alternating and
    extragradient play in the (theta, phi) plane from (1, 1), and the distance to the equilibrium per step."""
    steps = 150
    methods = {"simultaneous": "simultaneous", "alternating": "alternating", "extragradient": "extragradient"}

    def grad(theta, phi):
        return phi, theta

    def draw(method: str, eta: float) -> plt.Figure:
        path = play_game(grad, [1.0, 1.0], eta, steps, methods[method])
        norms = np.linalg.norm(path, axis=1)
        fig, (ax, ax_n) = plt.subplots(1, 2, figsize=(10, 4.2))
        ax.plot(*path.T, "-", color="C0", lw=1)
        ax.scatter(*path.T, c=np.arange(steps + 1), cmap="viridis", s=8, zorder=3)
        ax.plot(0, 0, "k*", ms=12, label="equilibrium (0, 0)")
        ax.plot(1, 1, "ko", ms=5, label="start (1, 1)")
        big = norms.max() > 4
        lim = 4.0
        ax.set(
            xlim=(-lim, lim),
            ylim=(-lim, lim),
            aspect="equal",
            xlabel=r"generator $\theta$",
            ylabel=r"discriminator $\phi$",
        )
        note = " (leaves the frame)" if big else ""
        ax.set_title(rf"{method}, $\eta = {eta:g}$: {steps} steps{note}", fontsize=10)
        ax.legend(fontsize=8, loc="lower left")
        ax_n.semilogy(np.arange(steps + 1), norms, color="C1")
        ax_n.axhline(norms[0], color="grey", lw=0.8, ls="--")
        ax_n.set(
            xlabel="step $t$",
            ylabel=r"$\|(\theta_t, \phi_t)\|$",
            title=f"after {steps} steps: {norms[-1]:.3g}",
        )
        fig.tight_layout()
        trend = "grows" if norms[-1] > norms[0] else "shrinks" if norms[-1] < norms[0] else "stays"
        describe(
            fig,
            f"Left: the path of {method} gradient play with step size η = {eta:g} in the plane of the "
            "generator's θ and the discriminator's φ, from (1, 1) around the equilibrium at the origin. Right: "
            f"its distance to the equilibrium against the step on a log scale, which {trend} over {steps} "
            "steps.",
        )
        return fig

    return interactive_figure(
        draw,
        method=widgets.Dropdown(options=list(methods), value="simultaneous", description="method"),
        eta=widgets.Dropdown(options=[0.05, 0.1, 0.2, 0.5], value=0.1, description="step size η"),
    )


# ----------------------------------------------------------------------------- 10.5 training GANs: mode collapse, Wasserstein, gradient penalty


# ----------------------------------------------------------------------------- 10.6 diffusion: forward process, bound, reverse posterior


@widget
def diffusion_explorer() -> widgets.VBox:
    """Forward noising and reverse denoising side by side at the same step t (10.30, 10.37): 1000 points of the
    three-component mixture of 10.37 pushed through :math:`q(x_t\\mid x_0)` (left), and 1000 chains of ancestral
    sampling with the exact noise predictor ε* of that mixture, from :math:`x_T\\sim\\mathcal N(0, I)` down to
    :math:`x_0` (right). Both trajectories are computed once, every 50 steps."""
    schedule = noise_schedule(1000)
    gmm = gaussian_mixture(
        [0.2, 0.3, 0.5], [[-2.0, 0.0], [2.0, 0.0], [0.0, 2.0]], np.array([0.1 * np.eye(2)] * 3)
    )
    rng = check_rng(0)  # the same picture every time
    x0, component = mixture_sample(gmm, 1000, rng)
    eps = rng.standard_normal(x0.shape)
    shown = list(range(0, schedule.T + 1, 50))
    forward = {
        t: math.sqrt(schedule.alpha_bar[t]) * x0 + math.sqrt(1 - schedule.alpha_bar[t]) * eps for t in shown
    }
    eps_star = mixture_eps_fn(gmm, schedule)
    reverse: dict[int, np.ndarray] = {}

    def recording_eps(x, t):  # the sampler hands every x_t to the noise predictor: keep the shown ones
        if t in shown:
            reverse[t] = x.copy()
        return eps_star(x, t)

    reverse[0] = ddpm_sample(recording_eps, rng.standard_normal(x0.shape), schedule, rng=rng)
    grid = np.linspace(-4.5, 4.5, 121)
    g1, g2 = np.meshgrid(grid, grid)

    def draw(t: int) -> plt.Figure:
        fig, (ax_f, ax_r) = plt.subplots(1, 2, figsize=(10, 4.6), sharex=True, sharey=True)
        log_q = mixture_log_prob(noised_mixture(gmm, t, schedule), np.column_stack([g1.ravel(), g2.ravel()]))
        for ax in (ax_f, ax_r):
            ax.contour(g1, g2, np.exp(log_q).reshape(g1.shape), levels=6, colors="lightgrey", linewidths=0.8)
        ax_f.scatter(*forward[t].T, s=4, c=component, cmap="viridis", alpha=0.6)
        ax_r.scatter(*reverse[t].T, s=4, color="C3", alpha=0.6)
        ax_f.set(
            title=rf"forward: $x_t\sim q(x_t\mid x_0)$, $\bar\alpha_t = {schedule.alpha_bar[t]:.3f}$",
            xlabel="$x_1$",
            ylabel="$x_2$",
            xlim=(-4.5, 4.5),
            ylim=(-4.5, 4.5),
            aspect="equal",
        )
        ax_r.set(title=rf"reverse: ancestral sampling with $\varepsilon^*$, at $t = {t}$", xlabel="$x_1$")
        fig.suptitle(r"grey: the density $q_t$ of $x_t$; both clouds should match it", fontsize=10)
        fig.tight_layout()
        describe(
            fig,
            f"Two scatter plots at step t = {t} over grey contours of the noised three-component mixture: "
            "left, data points noised by the forward process, coloured by component; right, points of "
            "ancestral sampling with the exact noise predictor. The two clouds match the same contours, "
            f"three separate blobs near t = 0 and one standard Gaussian blob near t = {schedule.T}.",
        )
        return fig

    return interactive_figure(
        draw,
        frames={"t": [0, 50, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000]},
        t=widgets.IntSlider(300, min=0, max=schedule.T, step=50, description="step t"),
    )


# ----------------------------------------------------------------------------- 10.6 sampling: scores, SDEs, guidance, DDIM


# ----------------------------------------------------------------------------- 10.6 training a diffusion model
