"""Widgets of chapter 01 — connectionism."""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from sklearn.datasets import make_blobs

from ..alt_text import describe
from ..connectionism import (
    cover_count,
    digit_prototypes,
    flip_bits,
    geometric_margin,
    hopfield_hebbian,
    hopfield_run,
    make_separable,
    max_margin_classifier,
    perceptron_train,
)
from ..validation import check_rng
from .core import interactive_figure, widget


@widget
def perceptron_vs_max_margin() -> widgets.VBox:
    """Two Gaussian clusters with a separation slider: perceptron vs. maximum-margin boundary (01.10)."""

    def draw(separation: float) -> plt.Figure:
        c = separation / 2
        X, labels = make_blobs(n_samples=60, centers=[(-c, -c), (c, c)], cluster_std=0.8, random_state=0)
        y = 2 * labels - 1
        fig, ax = plt.subplots(figsize=(8, 4.5))  # the legend beside the square axes
        ax.scatter(*X[y < 0].T, marker="o", label="y = -1")
        ax.scatter(*X[y > 0].T, marker="s", label="y = +1")
        grid = np.linspace(X.min() - 1, X.max() + 1, 2)
        ax.set(xlim=grid, ylim=grid, xlabel="$x_1$", ylabel="$x_2$", aspect="equal")
        try:
            max_margin = max_margin_classifier(X, y)
        except ValueError:
            ax.set_title("not linearly separable: no maximum-margin classifier")
            describe(
                fig,
                "Two Gaussian clusters of labelled points (circles y = −1, squares y = +1) that overlap at "
                "this distance of their centres: no line separates them, so no boundary is drawn.",
            )
            return fig
        perceptron = perceptron_train(X, y, max_epochs=1000)
        for (w, b), style, name in (
            ((perceptron.w, perceptron.b), "--", "perceptron"),
            (max_margin, "-", "max margin"),
        ):
            gamma = geometric_margin(X, y, w, b)
            ax.plot(grid, -(w[0] * grid + b) / w[1], "k" + style, label=f"{name}: γ = {gamma:.2f}")
        ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1), fontsize=9)
        ax.set_title(f"separation {separation:.1f}")
        describe(
            fig,
            "Two Gaussian clusters of labelled points (circles y = −1, squares y = +1) with the perceptron's "
            "separating line dashed and the maximum-margin line solid, each with its margin γ in the legend; no "
            "line has a larger margin than the maximum-margin line.",
        )
        return fig

    return interactive_figure(
        draw,
        separation=widgets.FloatSlider(
            4.0, min=0.5, max=6.0, step=0.25, description="distance of the centres"
        ),
    )


@widget
def novikoff_bound() -> widgets.VBox:
    """Perceptron updates against Novikoff's bound ``(R/gamma)^2`` as the margin shrinks (01.14)."""
    margins = np.linspace(0.05, 0.6, 12)

    def updates(margin: float) -> tuple[int, float]:
        X, y, w_star = make_separable(200, 2, margin, rng=0)
        gamma = np.min(y * (X @ w_star))
        R = np.linalg.norm(X, axis=1).max()
        return perceptron_train(X, y, max_epochs=10_000, bias=False).n_updates, (R / gamma) ** 2

    observed, bounds = zip(*(updates(m) for m in margins), strict=True)

    def draw(margin: float) -> plt.Figure:
        fig, ax = plt.subplots(figsize=(6, 4))
        ax.semilogy(margins, bounds, "o-", label=r"bound $(R/\gamma)^2$")
        ax.semilogy(margins, observed, "s-", label="observed updates")
        n, bound = updates(margin)
        ax.axvline(margin, color="grey", lw=1)
        ax.set_title(f"margin {margin:.2f}: {n} updates ≤ bound {bound:.0f}")
        ax.set(xlabel=r"margin $\gamma$ of the data", ylabel="number of updates")
        ax.legend()
        describe(
            fig,
            "Number of perceptron updates and Novikoff's bound, R over γ squared, against the margin γ of "
            "the data on a log scale, with the chosen margin marked by a grey line; the observed updates stay "
            "below the bound at every margin.",
        )
        return fig

    return interactive_figure(
        draw, margin=widgets.FloatSlider(0.2, min=0.05, max=0.6, step=0.05, description="margin γ")
    )


@widget
def cover_phase_transition() -> widgets.VBox:
    """Cover's fraction ``C(s, n) / 2^s`` of separable labelings against ``s/n`` for a chosen n (01.17)."""

    def curve(n: int) -> tuple[np.ndarray, np.ndarray]:
        s = np.arange(1, 4 * n + 1)
        return s / n, np.array([cover_count(int(k), n) / 2 ** int(k) for k in s])

    def draw(n: int) -> plt.Figure:
        fig, ax = plt.subplots(figsize=(6, 4))
        for m in (5, 50):
            ax.plot(*curve(m), color="lightgrey", lw=1)
        ax.plot(*curve(n), lw=2, label=f"n = {n}")
        ax.axvline(2, color="k", ls=":", label="s = 2n")
        ax.set(xlabel="points per dimension s/n", ylabel="separable fraction $C(s,n)/2^s$", xlim=(0, 4))
        ax.set_title("grey: n = 5 and n = 50")
        ax.legend()
        describe(
            fig,
            f"Cover's separable fraction C(s, n) over 2 to the s against s/n for n = {n}, with the curves "
            "for n = 5 and n = 50 in grey and s = 2n dotted; the curve passes through one half at s = 2n and "
            "its step from 1 to 0 is the sharper the larger n.",
        )
        return fig

    return interactive_figure(
        draw,
        frames={"n": [1, 2, 5, 10, 20, 50, 200]},
        n=widgets.IntSlider(10, min=1, max=200, description="dimension n"),
    )


@widget
def hopfield_recall() -> widgets.VBox:
    """Hopfield recall of binarised digit prototypes: number of stored patterns and noise level (01.20). One
    figure, its images updated for each setting."""
    prototypes = digit_prototypes((0, 1, 7, 4, 3, 2))
    fig = Figure(figsize=(1.2 * len(prototypes), 4))
    axes = fig.subplots(3, len(prototypes))
    images = np.array(
        [[ax.imshow(np.ones((8, 8)), cmap="gray_r", vmin=-1, vmax=1) for ax in row] for row in axes]
    )
    for ax in axes.flat:
        ax.set(xticks=[], yticks=[])
    for ax, label in zip(axes[:, 0], ("stored", "corrupted", "recalled"), strict=True):
        ax.set_ylabel(label)

    def draw(patterns: int, noise: float) -> Figure:
        rng = check_rng(0)
        P = prototypes[:patterns]
        W = hopfield_hebbian(P)
        for t, column in enumerate(axes.T):
            stored = t < patterns
            states = (np.ones(64),) * 3
            if stored:
                x0 = flip_bits(P[t], round(noise * P.shape[1]), rng)
                states = (P[t], x0, hopfield_run(x0, W, rng=rng).x)
            for ax, image, state in zip(column, images[:, t], states, strict=True):
                ax.set_frame_on(stored)
                image.set_data(state.reshape(8, 8))
                image.set_visible(stored)
            column[0].set_title("" if stored else "not stored", fontsize=8)
            column[2].set_xlabel(("✔" if np.array_equal(states[2], P[t]) else "✘") if stored else "")
        describe(
            fig,
            f"Three rows of 8 by 8 images, one column per digit prototype: the {patterns} stored digits, "
            f"copies with a share {noise:.2f} of their pixels flipped, and the states the network settles in, "
            "each marked with a tick when it equals the stored digit and a cross when not; the columns of "
            "digits that are not stored stay empty.",
        )
        return fig

    return interactive_figure(
        draw,
        patterns=widgets.IntSlider(3, min=1, max=len(prototypes), description="stored digits"),
        noise=widgets.FloatSlider(0.1, min=0.0, max=0.5, step=0.05, description="share of flipped pixels"),
    )
