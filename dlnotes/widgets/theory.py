"""Widgets of chapter 09 — theory of deep learning."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import NamedTuple

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.ticker import MaxNLocator
from sklearn.datasets import make_moons
from torch import nn

from ..alt_text import describe
from ..theory import (
    LazyRun,
    PathLosses,
    bezier_point,
    bias_variance_mc,
    bias_variance_terms,
    fit_bezier,
    flat_function,
    gp_log_marginal_likelihood,
    gp_posterior,
    gp_prior_samples,
    lazy_training,
    legendre_features,
    linear_kernel,
    metropolis_hastings,
    path_losses,
    random_features_curve,
    rbf_kernel,
    relu_features,
    relu_nngp,
    train_binary_classifier,
)
from ..training import to_numpy
from ..validation import check_rng
from .core import interactive_figure, widget

# ----------------------------------------------------------------------------- 9.1 the linearised network and the NTK


# ----------------------------------------------------------------------------- 9.1 infinite width, lazy and rich training


DRIFT_WIDTHS = (64, 256, 1024, 4096)  # the widths of kernel_drift_explorer without runs of its own


@functools.lru_cache(maxsize=1)
def _drift_runs() -> tuple[LazyRun, ...]:
    """The trainings behind `kernel_drift_explorer`: tanh nets of each width fitted to 20 points of sin 2x by
    2000 gradient-descent steps (about 2 s, once per session)."""
    x = np.linspace(-2, 2, 20)
    X, y = np.c_[x, np.ones_like(x)], np.sin(2 * x)
    rng = check_rng(0)
    return tuple(lazy_training(X, y, m, 2000, "tanh", rng=rng, progress=False) for m in DRIFT_WIDTHS)


@widget
def kernel_drift_explorer(runs=None) -> widgets.VBox:
    """The NTK on the training inputs before (K_0) and after (K_T) gradient-descent training, and K_T - K_0,
    for a width chosen on a slider (09.06): the wider the net, the less its kernel moves. `runs` is a sequence
    of `LazyRun` (from `lazy_training`) whose widths are powers of 2 evenly spaced in log2 m; without it, tanh
    nets of widths 64, 256, 1024 and 4096 are trained on 20 points of sin 2x (a few seconds, once)."""
    runs = _drift_runs() if runs is None else tuple(runs)
    if not runs or not all(isinstance(run, LazyRun) for run in runs):
        raise TypeError(
            "runs must be a non-empty sequence of LazyRun (from dlnotes.theory.infinite_width.lazy_training)"
        )
    exponents = [math.log2(run.m) for run in runs]
    steps = np.diff(exponents)
    if not all(e == round(e) for e in exponents) or (
        len(runs) > 1 and (steps <= 0).any() | (steps != steps[0]).any()
    ):
        raise ValueError(
            f"runs must have widths 2^k with k evenly spaced and increasing, got {[r.m for r in runs]}"
        )
    by_exponent = {round(e): run for e, run in zip(exponents, runs, strict=True)}
    widths = np.array([run.m for run in runs])
    drifts = np.array([run.drift for run in runs])

    def draw(log2_m: int) -> plt.Figure:
        run = by_exponent[log2_m]
        fig, axes = plt.subplots(1, 4, figsize=(15, 3.6), gridspec_kw={"width_ratios": [1, 1, 1, 1.15]})
        top = max(np.abs(run.K0).max(), np.abs(run.KT).max())
        for ax, K, name in (
            (axes[0], run.K0, "$K_0$ (initialisation)"),
            (axes[1], run.KT, "$K_T$ (after training)"),
        ):
            image = ax.imshow(K, cmap="viridis", vmin=0 if K.min() >= 0 else -top, vmax=top)
            ax.set(title=name, xlabel="training input $j$", ylabel="training input $i$")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
            fig.colorbar(image, ax=ax, fraction=0.046)
        change = run.KT - run.K0
        scale = np.abs(change).max()
        image = axes[2].imshow(change, cmap="RdBu_r", vmin=-scale, vmax=scale)
        axes[2].set(title=rf"$K_T - K_0$ (max $|\cdot|$ = {scale:.2g})", xlabel="training input $j$")
        axes[2].xaxis.set_major_locator(MaxNLocator(integer=True))
        axes[2].yaxis.set_major_locator(MaxNLocator(integer=True))
        fig.colorbar(image, ax=axes[2], fraction=0.046)
        ax = axes[3]
        ax.loglog(widths, drifts, "o-", color="C0", label="measured")
        for power, style in ((0.5, ":"), (1.0, "--")):
            ax.loglog(
                widths,
                drifts[0] * (widths / widths[0]) ** -power,
                style,
                color="grey",
                label=rf"$\propto m^{{-{power:g}}}$",
            )
        ax.plot(run.m, run.drift, "o", ms=12, mfc="none", mec="C3", mew=2)
        ax.set(
            xlabel="width $m$", ylabel=r"$\|K_T - K_0\|_F / \|K_0\|_F$", title="relative change of the NTK"
        )
        ax.legend(fontsize=8)
        fig.suptitle(
            rf"width $m = {run.m}$: $\|K_T - K_0\|_F / \|K_0\|_F = {run.drift:.3g}$ after {len(run.losses) - 1} "
            "gradient-descent steps",
            fontsize=11,
        )
        fig.tight_layout()
        describe(
            fig,
            f"The tangent kernel on the training inputs of a tanh network of width {run.m} as heat maps, at "
            f"initialisation and after {len(run.losses) - 1} steps of gradient descent, and their difference; right: "
            "the relative change of the kernel against the width on log-log axes, with reference lines proportional "
            f"to m to the minus one half and to 1 over m and the chosen width circled, where it is {run.drift:.3g}.",
        )
        return fig

    low, high = round(exponents[0]), round(exponents[-1])
    step = round(steps[0]) if len(runs) > 1 else 1
    return interactive_figure(
        draw,
        log2_m=widgets.IntSlider(
            high if len(runs) == 1 else low, min=low, max=high, step=step, description="log₂ width m"
        ),
    )


# ----------------------------------------------------------------------------- 9.2 Bayesian inference


# ----------------------------------------------------------------------------- 9.2 sampling the posterior: Metropolis-Hastings, HMC, Langevin
@widget
def mh_explorer() -> widgets.VBox:
    """Random-walk Metropolis-Hastings on a correlated 2-D Gaussian (09.13): the proposal scale s sets the
    acceptance rate and how fast one chain explores. Tiny steps are nearly all accepted but crawl; huge steps
    are nearly all rejected, so the chain stands still; in between it mixes."""
    rho = 0.9
    cov = np.array([[1.0, rho], [rho, 1.0]])
    precision = np.linalg.inv(cov)

    def log_p(theta):
        return -0.5 * np.einsum("ci,ij,cj->c", theta, precision, theta)

    axis = np.linspace(-3.5, 3.5, 121)
    t1, t2 = np.meshgrid(axis, axis)
    density = np.exp(
        -0.5 * (precision[0, 0] * t1**2 + 2 * precision[0, 1] * t1 * t2 + precision[1, 1] * t2**2)
    )
    scales = np.logspace(-2, 1.5, 22)
    starts = check_rng(0).multivariate_normal(np.zeros(2), cov, size=50)
    rates = np.array(
        [metropolis_hastings(log_p, starts, 300, s, rng=1, progress=False).accept_rate.mean() for s in scales]
    )
    start, steps = np.array([[-2.5, 2.5]]), 1000

    def draw(log10_s: float) -> plt.Figure:
        s = 10.0**log10_s
        chain = metropolis_hastings(log_p, start, steps, s, rng=2, progress=False)
        path = np.concatenate([start, chain.samples[:, 0]])
        fig, (ax, ax_t, ax_r) = plt.subplots(1, 3, figsize=(13, 4), gridspec_kw={"width_ratios": [1, 1.4, 1]})
        ax.contour(
            t1, t2, density, levels=np.exp(-0.5 * np.array([9.0, 4.0, 1.0])), colors="grey", linewidths=0.8
        )
        ax.plot(*path[:201].T, "-", color="C0", lw=0.8, alpha=0.8, label="first 200 steps")
        ax.plot(*path.T, ".", color="C1", ms=2, alpha=0.5, label=f"all {steps} states")
        ax.plot(*start[0], "k*", ms=10, label="start")
        ax.set(xlim=(-3.5, 3.5), ylim=(-3.5, 3.5), xlabel=r"$\theta_1$", ylabel=r"$\theta_2$", aspect="equal")
        ax.set_title(rf"Gaussian target, unit variances, $\rho = {rho}$", fontsize=10)
        ax.legend(fontsize=8, loc="lower right")
        ax_t.plot(np.arange(steps + 1), path[:, 0], lw=0.8)
        ax_t.axhspan(-2, 2, color="grey", alpha=0.15, label=r"$\pm 2$ target std")
        ax_t.set(xlabel="step", ylabel=r"$\theta_1$", ylim=(-4, 4))
        ax_t.set_title(f"trace: sample mean of θ₁ = {path[1:, 0].mean():+.2f} (target 0)", fontsize=10)
        ax_t.legend(fontsize=8, loc="upper right")
        ax_r.semilogx(scales, rates, "o-", ms=3, color="grey", label="50 chains, 300 steps")
        ax_r.plot(s, chain.accept_rate[0], "o", color="C3", ms=9, label="this chain")
        ax_r.set(xlabel="proposal scale $s$", ylabel="acceptance rate", ylim=(0, 1.02))
        ax_r.set_title(f"s = {s:.3g}: acceptance {chain.accept_rate[0]:.2f}", fontsize=10)
        ax_r.legend(fontsize=8, loc="lower left")
        fig.tight_layout()
        describe(
            fig,
            f"Random-walk Metropolis-Hastings with proposal scale {s:.3g} on a correlated Gaussian: left, the first "
            f"200 steps and all {steps} states of one chain over the target's contours; middle, the trace of the "
            "first coordinate with the band of two target standard deviations; right, the acceptance rate against "
            f"the proposal scale, falling as the scale grows, with this chain's rate {chain.accept_rate[0]:.2f} marked.",
        )
        return fig

    return interactive_figure(
        draw,
        frames={"log10_s": [-2.0, -1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5]},
        log10_s=widgets.FloatSlider(0.0, min=-2.0, max=1.5, step=0.25, description="log₁₀ proposal scale s"),
    )


# ----------------------------------------------------------------------------- 9.3 Gaussian processes and infinitely wide networks


GP_KERNELS = (
    "RBF (squared exponential)",
    "Matérn ν = 1/2 (exponential)",
    "linear",
    "ReLU NNGP, 1 hidden layer",
    "ReLU NNGP, 3 hidden layers",
)


def _explorer_kernel(name: str, a: np.ndarray, b: np.ndarray, ell: float) -> np.ndarray:
    """The kernel matrix k(a_i, b_j) of 1-D inputs a (n,), b (m,). The stationary kernels have length-scale ell;
    the linear and NNGP kernels see the input (x / ell, 1), so that k(x, x) = 1 + x^2 / ell^2 for all three."""
    if name == GP_KERNELS[0]:
        return rbf_kernel(a[:, None], b[:, None], ell)
    if name == GP_KERNELS[1]:
        return np.exp(-np.abs(a[:, None] - b[None, :]) / ell)
    A, B = np.c_[a / ell, np.ones_like(a)], np.c_[b / ell, np.ones_like(b)]
    if name == GP_KERNELS[2]:
        return linear_kernel(A, B)
    return relu_nngp(A, B, depth=2 if name == GP_KERNELS[3] else 4, sigma_w2=2.0, sigma_b2=0.0)


@widget
def gp_explorer() -> widgets.VBox:
    """Gaussian processes on a small 1-D data set (09.16, 09.18, 09.22): three prior draws of the chosen kernel
    (left) and the posterior mean with bands of 2 standard deviations for the latent f and for a new noisy
    target y (right); the title gives the log marginal likelihood log p(y)."""
    rng = check_rng(3)
    x_data = np.array([-3.0, -2.3, -1.6, -0.5, 0.2, 0.9, 1.4, 2.6])
    y_data = np.sin(1.3 * x_data) + 0.3 * x_data + 0.1 * rng.standard_normal(len(x_data))
    grid = np.linspace(-4.0, 4.0, 161)

    def draw(kernel: str, ell: float, log10_noise: float) -> plt.Figure:
        noise_var = 10.0**log10_noise
        K_grid = _explorer_kernel(kernel, grid, grid, ell)
        prior = gp_prior_samples(K_grid, 3, rng=0)
        K = _explorer_kernel(kernel, x_data, x_data, ell)
        post = gp_posterior(
            K, _explorer_kernel(kernel, grid, x_data, ell), np.diag(K_grid), y_data, noise_var
        )
        evidence = gp_log_marginal_likelihood(K, y_data, noise_var)
        fig, (ax_prior, ax_post) = plt.subplots(
            1, 2, figsize=(10.5, 3.8), sharey=True, gridspec_kw={"wspace": 0.06}
        )
        prior_std = np.sqrt(np.diag(K_grid))
        ax_prior.fill_between(grid, -2 * prior_std, 2 * prior_std, color="C0", alpha=0.12, label="±2 std")
        ax_prior.plot(grid, prior.T, lw=1.2)
        ax_prior.set(xlabel="$x$", ylabel="$f(x)$", ylim=(-4, 4))
        ax_prior.set_title(f"prior draws: {kernel}", fontsize=11)
        ax_prior.legend(loc="upper left", fontsize=9)
        std_f, std_y = np.sqrt(post.var), np.sqrt(post.var + noise_var)
        ax_post.fill_between(
            grid,
            post.mean - 2 * std_f,
            post.mean + 2 * std_f,
            color="C0",
            alpha=0.25,
            label=r"±2 std of $f(x_*)$",
        )
        ax_post.plot(
            grid, post.mean - 2 * std_y, "C1--", lw=1, label=r"±2 std of a new $y_*$ (adds $\sigma^2$)"
        )
        ax_post.plot(grid, post.mean + 2 * std_y, "C1--", lw=1)
        ax_post.plot(grid, post.mean, "C0", lw=2, label="posterior mean")
        ax_post.plot(x_data, y_data, "ko", ms=5, label="data")
        ax_post.set(xlabel="$x$", ylim=(-4, 4))
        ax_post.set_title(
            rf"posterior, $\ell = {ell:g}$, $\sigma^2 = {noise_var:.2g}$: $\log p(y) = {evidence:.1f}$",
            fontsize=11,
        )
        ax_post.legend(loc="lower right", fontsize=8)
        describe(
            fig,
            f"Left: three functions drawn from the Gaussian-process prior with the {kernel} kernel, length scale "
            f"{ell:g}, with its band of two standard deviations; right: the posterior given {len(x_data)} noisy "
            "points, its mean, a band of two standard deviations of the function and dashed bounds for a new "
            f"noisy target, with noise variance {noise_var:.2g} and log marginal likelihood {evidence:.1f}.",
        )
        return fig

    return interactive_figure(
        draw,
        frames={"ell": [0.3, 1.0, 3.0], "log10_noise": [-2.0, -0.5]},
        kernel=widgets.Dropdown(options=list(GP_KERNELS), value=GP_KERNELS[0], description="kernel"),
        ell=widgets.FloatSlider(1.0, min=0.2, max=3.0, step=0.1, description="length-scale ℓ"),
        log10_noise=widgets.FloatSlider(-2.0, min=-4.0, max=0.0, step=0.5, description="log₁₀ σ² (noise)"),
    )


# ----------------------------------------------------------------------------- 9.4 statistical learning theory: PAC, VC, Rademacher


# ----------------------------------------------------------------------------- 9.4 bias, variance, double descent, implicit bias


@widget
def bias_variance_explorer() -> widgets.VBox:
    """Bias and variance of polynomial least squares with a fixed design (09.30): 20 fits to training sets that
    differ only in their noise, their mean h(x)^T f* and a band of 2 standard deviations sigma ||h(x)|| (left), and
    the integrated bias², variance and test error against the degree, the chosen degree marked (right)."""
    x_train, grid = np.linspace(-1, 1, 30), np.linspace(-1, 1, 201)
    noise_var, degrees = 0.25, np.arange(1, 10)
    f_train, f_grid = np.sin(np.pi * x_train), np.sin(np.pi * grid)
    terms, fits = {}, {}
    for degree in degrees:
        Phi, Phi_grid = legendre_features(x_train, degree), legendre_features(grid, degree)
        terms[degree] = bias_variance_terms(Phi, f_train, Phi_grid, f_grid, noise_var)
        fits[degree] = bias_variance_mc(Phi, f_train, Phi_grid, f_grid, noise_var, sets=20, rng=1).fits
    bias2 = np.array([np.mean(terms[k].bias ** 2) for k in degrees])
    variance = np.array([np.mean(terms[k].variance) for k in degrees])

    def draw(degree: int) -> plt.Figure:
        mean_fit, std = f_grid + terms[degree].bias, np.sqrt(terms[degree].variance)
        fig, (ax, ax_curve) = plt.subplots(1, 2, figsize=(11, 4.2))
        ax.plot(grid, fits[degree].T, color="C0", lw=0.6, alpha=0.5)
        ax.fill_between(
            grid, mean_fit - 2 * std, mean_fit + 2 * std, color="C1", alpha=0.2, label="±2 std of $f_S(x)$"
        )
        ax.plot(grid, mean_fit, "C1", lw=2, label=r"mean fit $\mathbb{E}_S f_S(x) = h(x)^\top f^*$")
        ax.plot(grid, f_grid, "k--", lw=1.5, label=r"$f^*(x) = \sin(\pi x)$")
        ax.plot(x_train, np.zeros_like(x_train) - 2.4, "k|", ms=8, label="the fixed inputs $x_i$")
        ax.set(xlabel="$x$", ylabel="$f_S(x)$", ylim=(-2.6, 2.6), title=f"degree {degree}: 20 fits (blue)")
        ax.legend(loc="upper left", fontsize=8)
        ax_curve.semilogy(degrees, bias2, "o-", ms=4, label=r"bias$^2$")
        ax_curve.semilogy(degrees, variance, "s-", ms=4, label="variance")
        ax_curve.semilogy(
            degrees,
            bias2 + variance + noise_var,
            "^-",
            ms=4,
            label=r"test MSE = bias$^2$ + variance + $\sigma^2$",
        )
        ax_curve.axhline(noise_var, color="grey", ls=":", label=r"noise $\sigma^2$")
        ax_curve.axvline(degree, color="C3", lw=1)
        ax_curve.set(
            xlabel="polynomial degree",
            ylabel="mean over $x\\in[-1, 1]$",
            ylim=(1e-10, 3),
            title=f"bias² {bias2[degree - 1]:.2g}, variance {variance[degree - 1]:.2g}",
        )
        ax_curve.legend(loc="lower left", fontsize=8)
        fig.tight_layout()
        describe(
            fig,
            f"Left: 20 least-squares polynomial fits of degree {degree} to noisy samples of sin(pi x) at the same 30 "
            "inputs, their mean and a band of two standard deviations, with the true function dashed; right: the "
            "squared bias, the variance and the test error against the degree on a logarithmic scale, with the "
            f"noise variance dotted; at degree {degree} the squared bias is "
            f"{bias2[degree - 1]:.2g} and the variance {variance[degree - 1]:.2g}.",
        )
        return fig

    return interactive_figure(
        draw, degree=widgets.IntSlider(3, min=1, max=9, step=1, description="polynomial degree")
    )


@widget
def double_descent_explorer() -> widgets.VBox:
    """Double descent with random ReLU features (09.31): the minimum-norm least-squares fit with p features along
    a line through the input space (left) and the test error against p, averaged over 10 feature draws, with the
    chosen p and the interpolation threshold p = n marked (right)."""
    rng = check_rng(4)
    n, d, noise_sd = 40, 5, 0.3
    beta = rng.standard_normal(d) / np.sqrt(d)
    X, X_test = rng.standard_normal((n, d)), rng.standard_normal((1000, d))
    y, y_test = (
        X @ beta + noise_sd * rng.standard_normal(n),
        X_test @ beta + noise_sd * rng.standard_normal(1000),
    )
    ps = np.unique(np.round(np.logspace(0, np.log10(400), 60)).astype(int))
    curve = random_features_curve(X, y, X_test, y_test, ps, rng=5)
    ridge = random_features_curve(X, y, X_test, y_test, ps, ridge=0.1, rng=5)
    u = beta / np.linalg.norm(beta)
    x0 = rng.standard_normal(d)
    x0 -= (x0 @ u) * u  # a line x0 + t u that misses the origin (where every ReLU feature has its kink)
    t = np.linspace(-3, 3, 241)
    W = check_rng(6).standard_normal((400, d)) / np.sqrt(d)

    def draw(p: int) -> plt.Figure:
        a = np.linalg.pinv(relu_features(X, W[:p])) @ y
        f_line = relu_features(x0 + t[:, None] * u, W[:p]) @ a
        fig, (ax, ax_curve) = plt.subplots(1, 2, figsize=(11, 4.2))
        ax.plot(X @ u, y, "o", color="grey", ms=4, alpha=0.6, label=r"training points, at $x_i^\top u$")
        ax.plot(t, (x0 + t[:, None] * u) @ beta, "k--", lw=1.5, label=r"target $f^*(x_0 + tu)$")
        ax.plot(t, np.clip(f_line, -8, 8), "C0", lw=2, label=f"fit with p = {p} features")
        ax.set(
            xlabel=r"$t$ (input $x = x_0 + tu$, $u = \beta/\|\beta\|$)",
            ylabel="output",
            ylim=(-6, 6),
            title=rf"$\|a\| = {np.linalg.norm(a):.3g}$, training MSE {np.mean((relu_features(X, W[:p]) @ a - y) ** 2):.2g}",
        )
        ax.legend(loc="upper left", fontsize=8)
        ax_curve.loglog(ps, curve.test_mse, "C0-", label="test MSE, minimum norm (pinv)")
        ax_curve.loglog(ps, ridge.test_mse, "C2-", label=r"test MSE, ridge $\lambda = 0.1$")
        ax_curve.axvline(n, color="grey", ls="--", lw=1, label="p = n")
        ax_curve.axvline(p, color="C3", lw=1.5, label="chosen p")
        ax_curve.set(xlabel="number of random features p", ylabel="mean squared error", ylim=(3e-2, 3e3))
        ax_curve.legend(loc="upper right", fontsize=8)
        fig.tight_layout()
        describe(
            fig,
            f"Left: the minimum-norm fit with {p} random ReLU features along a line through the input space, with "
            f"the linear target dashed and the {n} training points; right: the test error against the number of "
            "features p on log-log axes, for the minimum-norm fit, peaking near the interpolation threshold p = n, "
            f"and for ridge, with p = n and the chosen p = {p} marked.",
        )
        return fig

    return interactive_figure(
        draw,
        frames={"p": [5, 10, 20, 30, 36, 40, 44, 60, 100, 200, 400]},
        p=widgets.IntSlider(40, min=1, max=400, step=1, description="random features p"),
    )


# ----------------------------------------------------------------------------- 9.4 PAC-Bayes and flat minima


# ----------------------------------------------------------------------------- 9.5 the loss landscape


class _ModePaths(NamedTuple):
    X: np.ndarray  # the 200 training points (200, 2)
    y: np.ndarray  # their labels (200,)
    f: Callable  # f(theta, X): the logits of the 2-32-32-1 network at parameters theta
    loss: Callable  # the training cross-entropy of theta
    theta_a: torch.Tensor
    theta_m: torch.Tensor  # the fitted control point of the Bezier curve
    theta_b: torch.Tensor
    line: PathLosses  # the loss along the straight line
    curve: PathLosses  # the loss along the Bezier curve


@functools.lru_cache(maxsize=1)
def _mode_paths() -> _ModePaths:
    """Two 2-32-32-1 ReLU networks trained (Adam, full batch, 400 steps) on 200 make_moons points from two
    initialisations, and the control point of a low-loss Bezier curve between them (about 3 s, once per session)."""
    X, y = make_moons(200, noise=0.2, random_state=0)
    Xt, yt = torch.tensor(X, dtype=torch.float32), torch.tensor(y, dtype=torch.float32)

    def cross_entropy(logits, target):
        return nn.functional.binary_cross_entropy_with_logits(logits.squeeze(-1), target)

    thetas = []
    for seed in (0, 1):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = nn.Sequential(nn.Linear(2, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 1))
        train_binary_classifier(model, X, y, steps=400, lr=1e-2, progress=False)
        f, theta = flat_function(model.cpu())
        thetas.append(theta)

    def loss(theta):
        return cross_entropy(f(theta, Xt), yt)

    theta_m = fit_bezier(loss, thetas[0], thetas[1], steps=400, lr=1e-2, rng=0, progress=False)
    line = path_losses(loss, thetas[0], thetas[1], points=101)
    curve = path_losses(loss, thetas[0], thetas[1], theta_m, points=101)
    return _ModePaths(X, y, f, loss, thetas[0], theta_m, thetas[1], line, curve)


@widget
def mode_connectivity_explorer() -> widgets.VBox:
    """Mode connectivity (09.39): two networks trained on make_moons from different initialisations, joined by the
    straight line (1 - t) theta_a + t theta_b and by a quadratic Bezier curve with a fitted control point. For the
    position t: the decision boundary of the network at that point of each path, and the loss along both paths."""
    paths = _mode_paths()
    g1, g2 = np.meshgrid(np.linspace(-1.7, 2.7, 90), np.linspace(-1.2, 1.7, 70))
    grid = torch.tensor(np.c_[g1.ravel(), g2.ravel()], dtype=torch.float32)

    def draw(t: float) -> plt.Figure:
        fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
        points = (
            (
                "straight line",
                bezier_point(paths.theta_a, (paths.theta_a + paths.theta_b) / 2, paths.theta_b, t),
                "C3",
            ),
            ("Bézier curve", bezier_point(paths.theta_a, paths.theta_m, paths.theta_b, t), "C0"),
        )
        for ax, (name, theta, color) in zip(axes[:2], points, strict=True):
            with torch.no_grad():
                prob = to_numpy(torch.sigmoid(paths.f(theta, grid))).reshape(g1.shape)
                value = paths.loss(theta).item()
            ax.contourf(g1, g2, prob, levels=np.linspace(0, 1, 11), cmap="RdBu_r", alpha=0.6)
            ax.contour(g1, g2, prob, levels=[0.5], colors="k", linewidths=1.5)
            ax.scatter(*paths.X.T, c=paths.y, cmap="RdBu_r", s=10, edgecolors="k", linewidths=0.3)
            ax.set(xlabel="$x_1$", ylabel="$x_2$", xticks=[], yticks=[])
            ax.set_title(f"{name}, t = {t:.2f}: loss {value:.3f}", color=color)
        ax = axes[2]
        ax.plot(
            paths.line.t, paths.line.loss, "C3", label=f"straight line (barrier {paths.line.barrier:.2f})"
        )
        ax.plot(
            paths.curve.t, paths.curve.loss, "C0", label=f"Bézier curve (barrier {paths.curve.barrier:.3f})"
        )
        for path, color in ((paths.line, "C3"), (paths.curve, "C0")):
            ax.plot(t, np.interp(t, path.t, path.loss), "o", color=color, ms=8)
        ax.axvline(t, color="grey", lw=1, ls="--")
        ax.set(
            xlabel="position $t$ on the path",
            ylabel="training cross-entropy",
            title="the loss along both paths",
        )
        ax.legend(fontsize=9)
        fig.tight_layout()
        describe(
            fig,
            f"The decision boundaries on two moons of the network at position t = {t:.2f} on the straight line "
            "between two trained networks and on the fitted Bézier curve between them; right: the training loss "
            f"along both paths, the line with a barrier of {paths.line.barrier:.2f} in the middle, the curve nearly "
            f"flat with a barrier of {paths.curve.barrier:.3f}, the current position marked.",
        )
        return fig

    return interactive_figure(
        draw,
        frames={"t": [round(0.1 * k, 1) for k in range(11)]},
        t=widgets.FloatSlider(0.5, min=0.0, max=1.0, step=0.05, description="position t on the path"),
    )
