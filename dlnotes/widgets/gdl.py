"""Widgets of chapter 07 — geometric deep learning."""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt
import networkx as nx
import numpy as np
import torch
from matplotlib.figure import Figure
from torch import nn

from ..alt_text import describe
from ..data import load_digits, load_karate_club
from ..gdl import (
    FILTERS,
    DeepSets,
    filter_response,
    gcn_norm_adj,
    graph_fourier,
    graph_matrices,
    laplacian,
    make_digit_sets,
    oversmoothing_curve,
    predict_sets,
    train_set_model,
)
from ..plotting import draw_graph_signal, graph_layout
from ..validation import check_rng
from .core import interactive_figure, widget

# ----------------------------------------------------------------------------- 7.1 symmetry


# ----------------------------------------------------------------------------- 7.2 Deep Sets


@widget
def deep_sets_explorer() -> widgets.VBox:
    """A Deep Sets model trained on sums of 2-5 digit labels: a test set in its order and shuffled, with the
    prediction for both (07.04)."""
    images, labels = load_digits()
    flat = images.reshape(len(images), -1) / 16  # grey levels in [0, 1]
    train = make_digit_sets(flat[:1200], labels[:1200], 2000, sizes=(2, 5), rng=1)
    test = make_digit_sets(flat[1200:], labels[1200:], 8, sizes=(2, 5), rng=2)
    order = check_rng(3)
    shuffles = [order.permutation(int(m.sum())) for m in test.mask]
    with torch.random.fork_rng():
        torch.manual_seed(0)
        phi = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU())
        model = DeepSets(phi, nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 1)))
    train_set_model(model, train.X, train.mask, train.y, epochs=15, lr=3e-3, rng=4, progress=False)

    def draw(test_set: int) -> plt.Figure:
        s = test_set - 1
        size = int(test.mask[s].sum())
        X, set_labels = test.X[s, :size], test.labels[s, :size]
        fig, axes = plt.subplots(2, 5, figsize=(9, 4.2))
        for row, pi in enumerate((np.arange(size), shuffles[s])):
            prediction = predict_sets(model, X[pi][None], np.ones((1, size), dtype=bool))[0]
            for m, ax in enumerate(axes[row]):
                ax.axis("off")
                if m < size:
                    ax.imshow(X[pi[m]].reshape(8, 8), cmap="gray_r", vmin=0, vmax=1)
                    ax.set_title(f"label {set_labels[pi[m]]}", fontsize=9)
            name = "as drawn" if row == 0 else "shuffled"
            axes[row, 0].text(
                -0.6,
                0.5,
                f"{name}\nprediction {prediction:.2f}",
                transform=axes[row, 0].transAxes,
                ha="right",
                va="center",
                fontsize=10,
            )
        fig.suptitle(f"test set {test_set}: true sum of labels {test.y[s]:.0f}")
        fig.subplots_adjust(left=0.21)
        describe(
            fig,
            f"The {size} digit images of test set {test_set} with their labels, in the order drawn (top row) "
            f"and shuffled (bottom row); the Deep Sets model predicts the same sum for both orders, "
            f"{prediction:.2f}, against a true sum of {test.y[s]:.0f}.",
        )
        return fig

    return interactive_figure(
        draw, test_set=widgets.Dropdown(options=list(range(1, 9)), value=1, description="test set")
    )


# ----------------------------------------------------------------------------- 7.2 PointNet


# ----------------------------------------------------------------------------- 7.3 message passing and GCN


# ----------------------------------------------------------------------------- 7.3 depth, attention; 7.4 Weisfeiler-Lehman


@widget
def oversmoothing_explorer() -> widgets.VBox:
    """Rows of A_bar^k X on the karate club collapse onto u u^T X as k grows (07.13)."""
    G, y = load_karate_club()
    A_bar = gcn_norm_adj(graph_matrices(G).A)
    X = check_rng(0).normal(size=(len(y), 2))
    ks = np.arange(51)
    curve = oversmoothing_curve(X, A_bar, ks)
    limit = np.outer(curve.u, curve.u @ X)
    powers = [X]
    for _ in ks[1:]:
        powers.append(A_bar @ powers[-1])
    lim = 1.1 * np.abs(X).max()

    def draw(k: int) -> plt.Figure:
        fig, (ax, ax_curve) = plt.subplots(1, 2, figsize=(10, 4.2))
        for club, name in ((0, "Mr. Hi"), (1, "Officer")):
            ax.scatter(*powers[k][y == club].T, s=30, color=f"C{club}", label=f"node of {name}'s club")
        ax.scatter(*limit.T, marker="x", s=25, color="black", label=r"limit $uu^\top X$")
        ax.set(xlim=(-lim, lim), ylim=(-lim, lim), xlabel="feature 1", ylabel="feature 2")
        ax.set_title(rf"rows of $\bar A^{{{k}}} X$")
        ax.legend(loc="upper left", fontsize=8)
        ax_curve.semilogy(ks, curve.distances, label=r"$\|\bar A^k X - uu^\top X\|_F$")
        ax_curve.semilogy(ks, curve.bound, "--", label=r"bound $|\lambda_2|^k \|X - uu^\top X\|_F$")
        ax_curve.axvline(k, color="grey", lw=0.8)
        ax_curve.set(
            xlabel="number of propagations $k$", ylabel="distance from the limit", title="oversmoothing"
        )
        ax_curve.legend(fontsize=8)
        fig.tight_layout()
        describe(
            fig,
            f"Left: two random features of every karate club node after k = {k} propagations with the GCN "
            "matrix A bar, coloured by club, with the limit u u transpose X as crosses on one line through the "
            "origin, onto which the points slide as k grows; right: the distance from that limit against k on "
            f"a log scale, below its dashed bound, with k = {k} marked.",
        )
        return fig

    return interactive_figure(
        draw,
        frames={"k": [0, 1, 2, 3, 5, 8, 12, 20, 30, 50]},
        k=widgets.IntSlider(0, min=0, max=50, step=1, description="layers k"),
    )


# ----------------------------------------------------------------------------- 7.5 spectral graph theory


def _karate_spectrum():
    """The karate club, its club labels, its normalised Laplacian and that Laplacian's spectrum."""
    G, y = load_karate_club()
    L = laplacian(nx.to_numpy_array(G, weight=None), normalized=True)
    return G, y, L, graph_fourier(L)


@widget
def spectral_filter_explorer() -> widgets.VBox:
    """Denoising a noisy club signal on the karate club with a low-pass, high-pass or heat-kernel filter g(L~)
    of strength s (07.20): the filter's response over the frequencies, the noisy and the filtered signal. One
    figure, its response curve, node colours and titles updated for each filter."""
    G, y, L, (lam, U) = _karate_spectrum()
    clean = np.where(y == 0, 1.0, -1.0)
    noisy = clean + 0.8 * check_rng(0).normal(size=len(clean))
    pos = graph_layout(G)
    grid = np.linspace(0, 2, 200)
    fig = Figure(figsize=(10.5, 3.6))
    ax_g, ax_noisy, ax_out = fig.subplots(1, 3, width_ratios=(1.2, 1, 1.25))
    spectrum = np.abs(U.T @ noisy)
    ax_g.vlines(
        lam, 0, spectrum / spectrum.max(), color="C1", alpha=0.6, label=r"$|\hat x_k|$, noisy (scaled)"
    )
    (response,) = ax_g.plot(grid, np.ones_like(grid), color="C0", label=r"filter $g(\lambda)$")
    ax_g.set(xlabel=r"frequency $\lambda$ (eigenvalue of $\tilde L$)", ylabel="response", ylim=(0, 1.45))
    ax_g.legend(fontsize=9, loc="upper center", ncol=2, handlelength=1.2, columnspacing=0.8)
    limit = float(np.abs(noisy).max())
    draw_graph_signal(G, noisy, ax=ax_noisy, pos=pos, vmin=-limit, vmax=limit, title="noisy signal $x$",
                      colorbar=False)  # fmt: skip
    draw_graph_signal(G, noisy, ax=ax_out, pos=pos, vmin=-limit, vmax=limit, label="signal value")
    nodes = ax_out.collections[-1]  # the filtered signal's dots (the edges come first)
    fig.tight_layout()

    def draw(kind: str, s: float) -> Figure:
        filtered = U @ (filter_response(lam, kind, s) * (U.T @ noisy))
        error = np.linalg.norm(filtered - clean) / np.linalg.norm(noisy - clean)
        response.set_ydata(filter_response(grid, kind, s))
        nodes.set_array(filtered)
        ax_g.set_title(f"{kind}, s = {s:g}")
        ax_out.set_title(f"$g(\\tilde L)x$: error {error:.2f} × the noise")
        describe(
            fig,
            f"The {kind} filter of strength s = {s:g} on the karate club: left, its response g(λ) over the "
            "frequencies of the normalised Laplacian, with the noisy signal's spectrum as bars; middle, the "
            f"noisy club signal on the graph; right, the filtered signal, whose error is {error:.2f} times "
            "the noise.",
        )
        return fig

    return interactive_figure(
        draw,
        kind=widgets.Dropdown(options=list(FILTERS), value="low-pass", description="filter"),
        s=widgets.FloatSlider(2.0, min=0.0, max=8.0, step=0.5, description="strength s"),
    )


@widget
def eigenvector_explorer() -> widgets.VBox:
    """The karate club coloured by the k-th eigenvector u_k of its normalised Laplacian (07.19): smooth for
    small frequencies lambda_k, oscillating for large ones."""
    G, _, _, (lam, U) = _karate_spectrum()
    pos = graph_layout(G)
    edges = np.array(list(G.edges))

    def draw(k: int) -> plt.Figure:
        u = U[:, k]
        crossings = int(np.sum(u[edges[:, 0]] * u[edges[:, 1]] < 0))
        fig, (ax_lam, ax_graph) = plt.subplots(1, 2, figsize=(10, 3.8), width_ratios=(1, 1.3))
        ax_lam.plot(lam, "o", ms=3, color="grey")
        ax_lam.plot(k, lam[k], "o", ms=8, color="C3")
        ax_lam.set(xlabel="index $k$", ylabel=r"eigenvalue $\lambda_k$", title=r"spectrum of $\tilde L$")
        draw_graph_signal(
            G,
            u,
            ax=ax_graph,
            pos=pos,
            label=f"$u_{{{k}}}$",
            title=f"$u_{{{k}}}$, $\\lambda_{{{k}}}$ = {lam[k]:.2f}: {crossings} of {len(edges)} edges change sign",
        )
        fig.tight_layout()
        describe(
            fig,
            "Left: the eigenvalues of the karate club's normalised Laplacian in ascending order, number "
            f"{k} marked ({lam[k]:.2f}); right: the club coloured by the eigenvector u_{k}, whose sign changes "
            f"along {crossings} of the {len(edges)} edges: low frequencies vary little along the edges, high "
            "ones alternate from node to node.",
        )
        return fig

    return interactive_figure(
        draw,
        frames={"k": [0, 1, 2, 3, 5, 10, 20, 33]},
        k=widgets.IntSlider(1, min=0, max=33, description="eigenvector index k"),
    )
