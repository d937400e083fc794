"""Widgets of chapter 06 — attention and transformers."""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from ..alt_text import describe
from ..transformers import attention, row_entropy, sinusoidal_pe
from ..validation import check_matrix, check_rng
from .core import interactive_figure, widget

# ----------------------------------------------------------------------------- 6.1 attention


def plot_attention(A, keys, queries, ax=None, colorbar: bool = True) -> plt.Axes:
    """Heatmap of attention weights ``A[i, j] = a_ij`` (queries × keys, rows sum to 1), the rows labelled with
    the query tokens, the columns with the key tokens."""
    keys, queries = [str(s) for s in keys], [str(s) for s in queries]
    A = check_matrix(A, "A", len(queries), len(keys))
    if ax is None:
        _, ax = plt.subplots(figsize=(4.8, 4.2))
    image = ax.imshow(A, cmap="Blues", vmin=0, vmax=1, aspect="auto", interpolation="nearest")
    ax.grid(False)
    ax.set_xticks(range(len(keys)), keys, rotation=45, ha="right")
    ax.set_yticks(range(len(queries)), queries)
    ax.set(xlabel="key token $j$", ylabel="query token $i$")
    if colorbar:
        ax.figure.colorbar(image, ax=ax, label="attention weight $a_{ij}$", fraction=0.046)
    return ax


EXPLORER_SENTENCES = (
    "the cat sat on the mat",
    "the dog chased the cat",
    "time flies like an arrow",
)


def _explorer_layer(d: int = 16, h: int = 4):
    """Fixed word vectors (one random vector per word, no training) and one fixed random multi-head layer."""
    rng = check_rng(6)
    words = sorted({w for s in EXPLORER_SENTENCES for w in s.split()})
    embedding = dict(zip(words, rng.normal(size=(len(words), d)), strict=True))
    W_Q, W_K = rng.normal(size=(2, d, d)) / np.sqrt(d) * 2
    return embedding, W_Q, W_K, h


@widget
def attention_explorer() -> widgets.VBox:
    """The attention map of one head of a fixed random multi-head layer on a short sentence, at an inverse
    temperature beta (log scale); the title gives the mean row entropy (06.04)."""
    embedding, W_Q, W_K, h = _explorer_layer()
    d_k = W_Q.shape[1] // h

    def draw(sentence: str, head: int, log10_beta: float) -> plt.Figure:
        words = sentence.split()
        X = np.array([embedding[w] for w in words]) + sinusoidal_pe(len(words), W_Q.shape[0])
        cols = slice((head - 1) * d_k, head * d_k)
        beta = 10.0**log10_beta / np.sqrt(d_k)
        A = attention(X @ W_Q[:, cols], X @ W_K[:, cols], X, beta=beta).A
        fig, ax = plt.subplots(figsize=(5.6, 4.4))
        plot_attention(A, words, words, ax=ax)
        H = row_entropy(A).mean()
        ax.set_title(
            f"head {head}, $\\beta = 10^{{{log10_beta:.1f}}}/\\sqrt{{d_k}}$: mean row entropy "
            f"{H:.2f} nats (uniform: $\\log T$ = {np.log(len(words)):.2f})",
            fontsize=10,
        )
        fig.tight_layout()
        describe(
            fig,
            f"Attention weights of head {head} of a fixed random multi-head layer on the sentence "
            f"“{sentence}”, queries in rows and keys in columns; a small inverse temperature β spreads every "
            "row towards uniform weights, a large one concentrates it on a single key.",
        )
        return fig

    return interactive_figure(
        draw,
        frames={"log10_beta": [-1.0, 0.0, 1.0]},
        sentence=widgets.Dropdown(options=list(EXPLORER_SENTENCES), description="sentence"),
        head=widgets.Dropdown(options=list(range(1, h + 1)), value=1, description="head"),
        log10_beta=widgets.FloatSlider(
            0.0,
            min=-1.0,
            max=1.5,
            step=0.1,
            description="log₁₀(β √d_k)",
            style={"description_width": "initial"},
        ),
    )


# ----------------------------------------------------------------------------- 6.2 positions, blocks, cost


@widget
def positional_encoding_explorer() -> widgets.VBox:
    """Sinusoidal positional encodings P (T, d) and their similarity ``<p_t, p_{t+Delta}>`` (06.09). One figure,
    its images, lines and titles updated for each setting."""
    T = 100
    lags = np.arange(T)  # a distance Delta, or a position t
    fig = Figure(figsize=(13, 3.9))
    ax_p, ax_s, ax_c = fig.subplots(1, 3, width_ratios=(1, 1, 1.2))
    encodings = ax_p.imshow(
        np.zeros((T, 2)), aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest"
    )
    ax_p.axhline(20, color="k", lw=1)  # the row t = 20
    row_shifted = ax_p.axhline(20, color="k", lw=1, ls="--")
    ax_p.set(xlabel="feature $k$ (pairs: sin, cos of $\\omega_i$)", ylabel="position $t$")
    gram = ax_s.imshow(np.zeros((T, T)), cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
    (diagonal,) = ax_s.plot([], [], "k--", lw=1)
    ax_s.set(
        xlabel="position $t'$", ylabel="position $t$", title="$PP^\\top / (d/2)$; dashed: $t' = t + \\Delta$"
    )
    (curve,) = ax_c.plot(lags, np.zeros(T), lw=1.5)
    (point,) = ax_c.plot([], [], "o", color="C1", ms=8)
    ax_c.axhline(0, color="0.6", lw=0.8)
    ax_c.set(
        xlabel="distance $\\Delta$", ylabel="$\\langle p_t, p_{t+\\Delta}\\rangle / (d/2)$", ylim=(-0.3, 1.05)
    )
    fig.subplots_adjust(left=0.05, right=0.98, bottom=0.14, top=0.9, wspace=0.3)

    def draw(delta: int, d: int) -> Figure:
        P = sinusoidal_pe(T, d)
        encodings.set_data(P)
        encodings.set_extent((-0.5, d - 0.5, T - 0.5, -0.5))
        row_shifted.set(ydata=[20 + delta], visible=20 + delta < T)
        ax_p.set_title(f"$P$ ($d = {d}$); rows $t = 20$ and $t + \\Delta$")
        gram.set_data(P @ P.T / (d / 2))
        diagonal.set_data(lags[: T - delta] + delta, lags[: T - delta])
        omega = 1e4 ** (-np.arange(0, d, 2) / d)
        similarity = np.cos(lags[:, None] * omega).sum(axis=1) / (d / 2)  # <p_t, p_(t+lag)> / (d/2)
        curve.set_ydata(similarity)
        point.set_data([delta], [similarity[delta]])
        ax_c.set_title(f"similarity at $\\Delta = {delta}$: {similarity[delta]:.3f} (same for every $t$)")
        describe(
            fig,
            f"Left: the sinusoidal encodings of {T} positions with d = {d} features, the rows t = 20 and "
            f"t + Δ marked; middle: all their dot products, P P transpose over d/2, with the diagonal t′ = t + Δ "
            "dashed; right: the similarity of two positions against their distance, largest at Δ = 0, with "
            f"the point at Δ = {delta} marked, where it is {similarity[delta]:.3f} for every t.",
        )
        return fig

    return interactive_figure(
        draw,
        frames={"delta": [0, 1, 2, 4, 6, 10, 20, 40], "d": [16, 64, 128]},
        delta=widgets.IntSlider(6, min=0, max=60, step=1, description="distance Δ"),
        d=widgets.Dropdown(options=[16, 32, 64, 128], value=64, description="width d"),
    )
