"""Widgets of chapter 02 — feedforward networks."""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np

from ..activations import ACTIVATIONS
from ..alt_text import describe
from ..feedforward import (
    lstsq_closed_form,
    polynomial_features,
    random_feature_fit,
    relu_net_patterns,
    zaslavsky_bound,
)
from ..validation import check_rng
from .core import interactive_figure, widget


@widget
def ridge_polynomial() -> widgets.VBox:
    """Ridge regression of a degree-12 polynomial on 20 noisy samples of sin(2 pi x), with a slider for lambda (02.10)."""
    rng = check_rng(0)
    x = np.sort(rng.uniform(0, 1, 20))
    y = np.sin(2 * np.pi * x) + 0.25 * rng.normal(size=x.size)
    grid = np.linspace(0, 1, 400)

    def draw(log10_lambda: float) -> plt.Figure:
        lam = 10.0**log10_lambda
        w = lstsq_closed_form(polynomial_features(x, 12), y, ridge=lam)
        fig, ax = plt.subplots(figsize=(6.5, 4))
        ax.plot(grid, np.sin(2 * np.pi * grid), "k:", label=r"truth $\sin(2\pi x)$")
        ax.scatter(x, y, label="20 noisy samples", zorder=3)
        ax.plot(
            grid,
            polynomial_features(grid, 12) @ w,
            label=f"degree-12 ridge fit, $\\|w\\| = {np.linalg.norm(w):.1f}$",
        )
        ax.set(xlabel="$x$", ylabel="$y$", ylim=(-2, 2), title=f"$\\lambda = 10^{{{log10_lambda:.1f}}}$")
        ax.legend(loc="lower left", fontsize=9)
        describe(
            fig,
            "A degree-12 polynomial fitted by ridge regression to 20 noisy samples of sin(2πx), with the "
            "true sine dotted; a small λ lets the fit wiggle through the samples with large weights, a large λ "
            "flattens it.",
        )
        return fig

    return interactive_figure(
        draw, log10_lambda=widgets.FloatSlider(-4.0, min=-10.0, max=2.0, step=0.5, description="log₁₀ λ")
    )


@widget
def universal_approximation() -> widgets.VBox:
    """One hidden layer of m random tanh units, output layer by least squares, fitting sin(3x) + |x| (02.23)."""
    rng = check_rng(0)
    a, c = (
        rng.uniform(-10, 10, 400),
        rng.uniform(-np.pi, np.pi, 400),
    )  # one pool: width m uses the first m units

    def f(x):
        return np.sin(3 * x) + np.abs(x)

    x_fit, x_eval = np.linspace(-np.pi, np.pi, 1001), np.linspace(-np.pi, np.pi, 2001)

    def draw(width: int) -> plt.Figure:
        g, _ = random_feature_fit(f, a[:width], c[:width], x_fit, x_eval)
        fig, ax = plt.subplots(figsize=(6.5, 4))
        ax.plot(x_eval, f(x_eval), "k", lw=3, alpha=0.3, label="$f(x) = \\sin 3x + |x|$")
        ax.plot(x_eval, g, label=f"network with {width} tanh units")
        sup = np.abs(g - f(x_eval)).max()
        ax.set(xlabel="$x$", ylabel="$y$", title=f"width m = {width}: sup error {sup:.3f}")
        ax.legend(loc="upper center", fontsize=9)
        describe(
            fig,
            f"The target sin 3x + |x| as a thick grey curve and the least-squares fit of a network with "
            f"{width} random tanh units over −π to π; the title gives the largest error of the fit.",
        )
        return fig

    return interactive_figure(
        draw,
        frames={"width": [1, 2, 5, 10, 20, 50, 400]},
        width=widgets.IntSlider(5, min=1, max=400, description="hidden units m"),
    )


@widget
def relu_regions() -> widgets.VBox:
    """Linear regions of a random ReLU net on [-2, 2]^2 (colours = activation patterns), width and depth sliders (02.27)."""
    grid = np.linspace(-2, 2, 300)
    X = np.stack(np.meshgrid(grid, grid), axis=-1).reshape(-1, 2)

    def draw(width: int, depth: int) -> plt.Figure:
        rng = check_rng(0)
        sizes = [2] + [width] * depth
        weights = [rng.normal(size=(m, n)) / np.sqrt(n) for n, m in zip(sizes, sizes[1:], strict=False)]
        biases = [rng.normal(size=m) * 0.5 for m in sizes[1:]]
        patterns = np.packbits(relu_net_patterns(X, weights, biases), axis=1)  # one byte string per point
        _, region = np.unique(
            patterns.view(np.dtype((np.void, patterns.shape[1]))).ravel(), return_inverse=True
        )
        n_regions = region.max() + 1
        fig, ax = plt.subplots(figsize=(5.5, 5))
        colours = check_rng(1).permutation(n_regions)  # shuffled, so neighbours rarely share a colour
        ax.imshow(colours[region].reshape(300, 300), extent=(-2, 2, -2, 2), origin="lower", cmap="tab20")
        bound = f", at most {zaslavsky_bound(width, 2)} for one layer" if depth == 1 else ""
        ax.set(xlabel="$x_1$", ylabel="$x_2$", title=f"{n_regions} regions visible in the square{bound}")
        ax.grid(False)
        shape = (
            "cut by straight lines"
            if depth == 1
            else "bounded by lines that bend at the walls of earlier layers"
        )
        describe(
            fig,
            f"The {n_regions} linear regions that a random ReLU network with {depth} hidden layer{'s' * (depth > 1)} of "
            f"{width} units shows on the square from −2 to 2, each in its own colour, {shape}.",
        )
        return fig

    return interactive_figure(
        draw,
        width=widgets.IntSlider(6, min=1, max=16, description="width (units per layer)"),
        depth=widgets.IntSlider(1, min=1, max=4, description="hidden layers"),
    )


@widget
def activation_functions() -> widgets.VBox:
    """An activation function and its derivative, chosen from a dropdown (02.31)."""
    z = np.linspace(-4, 4, 801)

    def draw(activation: str) -> plt.Figure:
        phi, dphi, _ = ACTIVATIONS[activation]
        fig, ax = plt.subplots(figsize=(6.5, 4))
        ax.plot(z, phi(z), label=f"{activation}$(z)$")
        ax.plot(z, dphi(z), "--", label=f"{activation}$'(z)$")
        ax.axhline(0, color="k", lw=0.5)
        ax.set(xlabel="$z$", ylabel="value", ylim=(-1.5, 4), title=activation)
        ax.legend()
        describe(
            fig, f"The activation function {activation} and its derivative, dashed, against z from −4 to 4."
        )
        return fig

    return interactive_figure(
        draw, activation=widgets.Dropdown(options=list(ACTIVATIONS), value="gelu", description="activation")
    )
