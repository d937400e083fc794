"""Widgets of chapter 04 — convolutional networks (and the DeepWalk embeddings of section 4.8)."""

from __future__ import annotations

from fractions import Fraction

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.colors import ListedColormap
from matplotlib.patches import Rectangle

from ..alt_text import describe
from ..cnn import KERNELS, conv2d_im2col, conv_output_size, receptive_field, receptive_field_mask
from ..data import FASHION_CLASSES, load_fashion_mnist, load_karate_club
from ..embeddings import (
    principal_components,
    random_walks,
    skipgram_neg_sampling,
    skipgram_pairs,
    within_across_cosine,
)
from .core import interactive_figure, message_figure, widget


def kernel_text(kernel) -> str:
    """A kernel as the text the kernel explorer reads: rows separated by '; ', simple fractions kept."""
    return "; ".join(" ".join(str(Fraction(float(v)).limit_denominator(64)) for v in row) for row in kernel)


def parse_kernel(text: str) -> np.ndarray:
    """A square kernel from text: rows separated by ';' or new lines, entries by spaces or commas, fractions
    allowed ("1/9"). ``parse_kernel("1 0 -1; 2 0 -2; 1 0 -1")`` is the Sobel x kernel."""
    rows = [row.replace(",", " ").split() for row in text.replace("\n", ";").split(";") if row.strip()]
    try:
        kernel = np.array([[float(Fraction(entry)) for entry in row] for row in rows])
    except (ValueError, ZeroDivisionError):
        raise ValueError(f"kernel entries must be numbers like 2, -0.5 or 1/9, got {text!r}") from None
    if kernel.ndim != 2 or kernel.shape[0] != kernel.shape[1] or kernel.shape[0] % 2 == 0:
        raise ValueError(f"kernel must be square with an odd size (e.g. 3 rows of 3 numbers), got {text!r}")
    return kernel


@widget
def kernel_explorer() -> widgets.VBox:
    """A kernel (a preset, or typed in) applied to a Fashion-MNIST image: image, kernel, feature map (04.06)."""
    images, labels = load_fashion_mnist("test")
    choices = {FASHION_CLASSES[c]: images[np.flatnonzero(labels == c)[0]] / 255.0 for c in (7, 1, 8, 0, 9)}

    def draw(image: str, preset: str, kernel: str) -> plt.Figure:
        try:
            w = parse_kernel(kernel) if kernel.strip() else KERNELS[preset]
        except ValueError as error:
            return message_figure(str(error))
        x = choices[image]
        y = conv2d_im2col(x[None], w[None, None], padding=len(w) // 2)[0]  # cross-correlation, 'same' size
        fig, (ax_x, ax_w, ax_y) = plt.subplots(1, 3, figsize=(11, 3.8), width_ratios=(1, 0.8, 1.2))
        ax_x.imshow(x, cmap="gray_r")
        ax_x.set_title(f"input x: {image} (28 x 28)")
        bound = max(np.abs(w).max(), 1e-12)
        ax_w.imshow(w, cmap="RdBu_r", vmin=-bound, vmax=bound)
        for (i, j), value in np.ndenumerate(w):
            colour = "white" if abs(value) > 0.6 * bound else "black"
            ax_w.text(j, i, f"{value:.2g}", ha="center", va="center", fontsize=10, color=colour)
        ax_w.set_title("kernel w: " + ("typed" if kernel.strip() else preset))
        bound = max(np.abs(y).max(), 1e-12)
        shown = ax_y.imshow(y, cmap="RdBu_r", vmin=-bound, vmax=bound)
        fig.colorbar(shown, ax=ax_y, fraction=0.046)
        ax_y.set_title(r"feature map $w \star x$ (zero padding)")
        for ax in (ax_x, ax_w, ax_y):
            ax.set(xticks=[], yticks=[])
        describe(
            fig,
            f"A {image} from Fashion-MNIST, the kernel ({'typed' if kernel.strip() else preset}) with its entries "
            "written in its cells, and the feature map it produces, red where the response is positive and blue "
            "where it is negative; the map is strongest where the image has the pattern the kernel matches.",
        )
        return fig

    return interactive_figure(
        draw,
        image=widgets.Dropdown(options=list(choices), description="image"),
        preset=widgets.Dropdown(
            options=list(KERNELS), value="Sobel x (vertical edges)", description="kernel"
        ),
        kernel=widgets.Text(
            "",
            placeholder=f"e.g. {kernel_text(KERNELS['Laplacian'])}",
            description="or type one",
            continuous_update=False,
        ),
    )


@widget
def conv_arithmetic() -> widgets.VBox:
    """The sliding window of a 2-D convolution: input size n, kernel k, padding p, stride s, dilation d and the
    output size ``floor((n + 2p - d(k - 1) - 1) / s) + 1`` (04.11)."""

    def draw(n: int, k: int, p: int, s: int, d: int) -> plt.Figure:
        try:
            m = conv_output_size(n, k, p, s, d)
        except ValueError as error:
            return message_figure(f"n = {n}, k = {k}, p = {p}, s = {s}, d = {d}: {error}")
        size = n + 2 * p
        fig, (ax_in, ax_out) = plt.subplots(1, 2, figsize=(10, 4.8), width_ratios=(size, max(m, 3)))
        for i in range(size):
            for j in range(size):
                padding = not (p <= i < p + n and p <= j < p + n)
                ax_in.add_patch(Rectangle((j, i), 1, 1, fc="0.85" if padding else "white", ec="0.5"))
        windows = [(0, 0, "tab:blue")] + ([(0, 1, "tab:orange")] if m > 1 else [])
        for a, b, colour in windows:
            for i in range(k):
                for j in range(k):
                    ax_in.add_patch(
                        Rectangle(
                            (b * s + j * d + 0.15, a * s + i * d + 0.15), 0.7, 0.7, fc=colour, alpha=0.7
                        )
                    )
        for i in range(m):
            for j in range(m):
                ax_out.add_patch(Rectangle((j, i), 1, 1, fc="white", ec="0.5"))
        for a, b, colour in windows:
            ax_out.add_patch(Rectangle((b + 0.15, a + 0.15), 0.7, 0.7, fc=colour, alpha=0.7))
        for ax, extent, title in (
            (ax_in, size, f"input {n} x {n} with padding {p} (grey): taps of two outputs"),
            (ax_out, max(m, 3), f"output {m} x {m}"),
        ):
            ax.set(xlim=(0, extent), ylim=(extent, 0), aspect="equal", xticks=[], yticks=[], title=title)
            ax.axis("off")
        fig.suptitle(rf"$\lfloor ({n} + 2\cdot{p} - {d}\cdot({k}-1) - 1) / {s} \rfloor + 1 = {m}$")
        describe(
            fig,
            f"The {n} by {n} input as a grid of cells with zero padding {p} (grey cells), and the taps of "
            f"the first two output cells marked in blue and orange ({k} by {k} taps spaced {d} apart by the "
            f"dilation, the two windows {s} apart by the stride), and the {m} by {m} output grid with those two "
            f"cells marked; the output size is floor of (n + 2p - d(k - 1) - 1) / s, plus 1, = {m}.",
        )
        return fig

    return interactive_figure(
        draw,
        frames={"n": [5, 7], "k": [3, 5], "p": [0, 1], "s": [1, 2], "d": [1, 2]},
        n=widgets.IntSlider(7, min=3, max=12, description="input size n"),
        k=widgets.IntSlider(3, min=1, max=5, description="kernel size k"),
        p=widgets.IntSlider(1, min=0, max=3, description="padding p"),
        s=widgets.IntSlider(2, min=1, max=3, description="stride s"),
        d=widgets.IntSlider(1, min=1, max=3, description="dilation d"),
    )


@widget
def receptive_field_explorer() -> widgets.VBox:
    """The receptive field of the centre output of a stack of identical convolutions on a 28 x 28 image, from
    autograd, against the formula ``r_L = 1 + sum_l d_l (k_l - 1) prod_{j<l} s_j`` (04.15)."""
    images, _ = load_fashion_mnist("test")
    image = images[0] / 255.0

    def draw(layers: int, k: int, s: int, d: int) -> plt.Figure:
        size, padding = 28, d * (k - 1) // 2
        try:
            for _ in range(layers):
                size = conv_output_size(size, k, padding, s, d)
        except ValueError:
            return message_figure(f"{layers} layers of k = {k}, s = {s}, d = {d} shrink 28 x 28 to nothing")
        stack = torch.nn.Sequential(
            *[torch.nn.Conv2d(1, 1, k, stride=s, dilation=d, padding=padding) for _ in range(layers)]
        )
        mask = receptive_field_mask(stack, (1, 28, 28))
        r = receptive_field([(k, s, d)] * layers)
        fig, ax = plt.subplots(figsize=(5.5, 5.5))
        ax.imshow(image, cmap="gray_r")
        ax.imshow(np.ma.masked_where(~mask, mask), cmap=ListedColormap(["tab:red"]), alpha=0.5)
        rows, cols = np.nonzero(mask)
        ax.set_title(
            f"{layers} layers of k = {k}, s = {s}, d = {d}: formula r = {r}\n"
            f"autograd: rows {rows.min()}..{rows.max()}, columns {cols.min()}..{cols.max()} "
            f"({mask.sum()} of 784 pixels)",
            fontsize=10,
        )
        ax.set(xticks=[], yticks=[])
        describe(
            fig,
            f"A 28 by 28 test image with the receptive field of the centre output of {layers} stacked "
            f"convolutions shaded red, as autograd finds it: it spans {r} by {r} pixels around the centre, "
            "as the formula for r says, clipped at the image's border and with gaps where dilations skip pixels.",
        )
        return fig

    return interactive_figure(
        draw,
        frames={"layers": [1, 2, 3, 4, 6], "k": [3, 5], "s": [1, 2], "d": [1, 2]},
        layers=widgets.IntSlider(3, min=1, max=6, description="layers L"),
        k=widgets.IntSlider(3, min=1, max=7, description="kernel size k"),
        s=widgets.IntSlider(1, min=1, max=3, description="stride s"),
        d=widgets.IntSlider(1, min=1, max=4, description="dilation d"),
    )


@widget
def deepwalk_training() -> widgets.VBox:
    """DeepWalk embeddings of the karate club after a number of epochs of skip-gram with negative sampling,
    projected on their first two principal components and coloured by faction (04.26)."""
    G, club = load_karate_club()
    walks = random_walks(G, 10, 20, rng=0)
    pairs = np.concatenate([skipgram_pairs(walk, 3) for walk in walks])
    visits = np.bincount(np.concatenate(walks), minlength=len(club))  # noise distribution ~ visits^(3/4)

    def draw(epochs: int) -> plt.Figure:
        X, _ = skipgram_neg_sampling(
            pairs, len(club), dim=16, epochs=epochs, lr=0.02, batch_size=256, counts=visits, rng=0
        )
        Z = principal_components(X)
        within, across = within_across_cosine(X, club)
        fig, ax = plt.subplots(figsize=(5.5, 4.5))
        for faction, marker in ((0, "o"), (1, "s")):
            ax.scatter(*Z[club == faction].T, marker=marker, label=f"faction {faction}")
        for v, (a, b) in enumerate(Z):
            ax.annotate(str(v), (a, b), fontsize=7, xytext=(3, 3), textcoords="offset points")
        ax.set(
            xlabel="principal component 1",
            ylabel="principal component 2",
            title=f"after {epochs} epochs: mean cosine within {within:.2f}, across {across:.2f}",
        )
        ax.legend()
        fig.subplots_adjust(left=0.16)  # room for the widest tick labels
        describe(
            fig,
            f"The {len(club)} members of the karate club as labelled points on the first two principal components of "
            f"their DeepWalk embeddings after {epochs} epochs, circles and squares for the two factions; mean "
            f"cosine similarity within factions {within:.2f} against {across:.2f} across them.",
        )
        return fig

    return interactive_figure(
        draw,
        frames={"epochs": [0, 1, 2, 5, 10]},  # each frame trains from scratch
        epochs=widgets.IntSlider(5, min=0, max=10, description="epochs of training"),
    )
