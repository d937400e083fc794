"""Widgets of chapter 05 — recurrent networks."""

from __future__ import annotations

import functools

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import torch

from ..alt_text import describe
from ..rnn import (
    GAMMA,
    Seq2Seq,
    evaluate_seq2seq,
    jacobian_norms,
    lru_lambda,
    lru_params,
    make_reverse_task,
    train_seq2seq,
)
from ..validation import check_int, check_matrix, check_rng
from .core import interactive_figure, message_figure, widget

# ----------------------------------------------------------------------------- 5.2 vanishing gradients


PHI_NAMES = {"tanh": "tanh", "ReLU": "relu", "linear": "identity", "sigmoid": "sigmoid"}  # label -> phi


@widget
def gradient_decay_explorer() -> widgets.VBox:
    """``log10 ||dz_T/dz_0||`` against T for a random U rescaled to a chosen sigma_1(U), with the bound
    ``T log10(gamma sigma_1(U))`` (05.08)."""
    rng = check_rng(0)
    m, n, T = 32, 4, 60
    U0 = rng.normal(size=(m, m))
    U0 /= np.linalg.norm(U0, 2)  # sigma_1 = 1; the slider rescales it
    rho0 = np.max(np.abs(np.linalg.eigvals(U0)))
    V, X = 0.5 * rng.normal(size=(m, n)), rng.normal(size=(T, n))
    steps = np.arange(1, T + 1)

    def draw(sigma1: float, phi: str) -> plt.Figure:
        norms = jacobian_norms(X, sigma1 * U0, V, PHI_NAMES[phi])
        gamma = GAMMA[PHI_NAMES[phi]]
        fig, ax = plt.subplots(figsize=(7, 4))
        with np.errstate(divide="ignore"):
            ax.plot(steps, np.log10(norms), "o-", ms=3, label=r"$\log_{10}\|\partial z_T/\partial z_0\|_2$")
        ax.plot(
            steps,
            steps * np.log10(gamma * sigma1),
            "k--",
            lw=1,
            label=r"bound $T\,\log_{10}(\gamma\,\sigma_1(U))$",
        )
        ax.axhline(0, color="0.6", lw=0.8)
        ax.set(
            xlabel="time steps $T$",
            ylabel=r"$\log_{10}$ of the norm",
            title=rf"$\sigma_1(U) = {sigma1:.2f}$, $\rho(U) = {sigma1 * rho0:.2f}$, $\gamma = {gamma:g}$",
        )
        ax.legend(loc="lower left", fontsize=9)
        describe(
            fig,
            f"The log10 norm of the Jacobian of the state z_T with respect to z_0 against T for a {phi} RNN "
            f"whose recurrent matrix has σ₁(U) = {sigma1:.2f} and spectral radius {sigma1 * rho0:.2f}, with the "
            "bound T log10(γ σ₁) dashed; the curve never rises above the bound.",
        )
        return fig

    return interactive_figure(
        draw,
        frames={"sigma1": [0.5, 0.9, 1.0, 1.1, 1.5, 2.5, 5.0]},
        sigma1=widgets.FloatSlider(1.0, min=0.25, max=5.0, step=0.05, description="σ₁(U)"),
        phi=widgets.Dropdown(
            options=list(PHI_NAMES),
            value="tanh",
            description="state non-linearity φ",
        ),
    )


# ----------------------------------------------------------------------------- 5.4 linear recurrences


@widget
def lru_eigenvalue_explorer() -> widgets.VBox:
    """Ring initialisation of the LRU: the eigenvalues in the complex plane and the impulse responses
    Re lambda^t of a few channels, for the ring r_min <= |lambda| <= r_max (05.16)."""
    m, steps = 128, 120
    t = np.arange(steps)

    def draw(r_min: float, r_max: float) -> plt.Figure:
        if r_min >= r_max:
            return message_figure("choose r_min < r_max: the ring is empty")
        lam = lru_lambda(*lru_params(m, r_min, r_max, rng=0))
        fig, (ax, ax_t) = plt.subplots(
            1, 2, figsize=(10, 4.2), gridspec_kw={"width_ratios": [1, 1.5], "wspace": 0.3}
        )
        circle = np.exp(2j * np.pi * np.linspace(0, 1, 200))
        ax.plot(circle.real, circle.imag, "k-", lw=1, label="unit circle")
        for r, style in ((r_min, ":"), (r_max, "--")):
            ax.plot(r * circle.real, r * circle.imag, "C1" + style, lw=1)
        ax.plot(lam.real, lam.imag, ".", ms=4, color="C0", label=f"{m} eigenvalues $\\lambda_j$")
        ax.set(
            aspect="equal", xlim=(-1.1, 1.1), ylim=(-1.1, 1.1), xlabel=r"Re $\lambda$", ylabel=r"Im $\lambda$"
        )
        ax.set_title(rf"ring ${r_min:.2f} \leq |\lambda| \leq {r_max:.3f}$", fontsize=11)
        ax.legend(fontsize=8, loc="lower left")
        # from each quarter of the draw sorted by |lambda|, the channel that turns slowest (smallest |arg|)
        quarters = np.array_split(np.argsort(np.abs(lam)), 4)
        for j in (q[np.argmin(np.abs(np.angle(lam[q])))] for q in quarters):
            r = abs(lam[j])
            memory = f"{1 / (1 - r):.0f}" if r < 1 - 1e-9 else r"$\infty$"
            ax_t.plot(
                t, (lam[j] ** t).real, lw=1.2, label=rf"$|\lambda| = {r:.3f}$, $1/(1-|\lambda|) = ${memory}"
            )
        ax_t.set(xlabel="time $t$", ylabel=r"impulse response Re $\lambda^t$", ylim=(-1.05, 1.75))
        ax_t.set_title("one channel from each quarter of the draw, by |λ|", fontsize=11)
        ax_t.legend(fontsize=8, loc="upper right", ncol=2)
        describe(
            fig,
            f"Left: the {m} eigenvalues λ of the LRU's ring initialisation in the complex plane, all between "
            f"the circles of radius {r_min:.2f} and {r_max:.3f} inside the unit circle; right: the impulse "
            "responses, the real part of λ to the power t, of one channel from each quarter of the draw "
            "sorted by |λ|, which decay the more slowly the closer |λ| is to 1.",
        )
        return fig

    return interactive_figure(
        draw,
        frames={"r_min": [0.0, 0.5, 0.9, 0.95], "r_max": [0.5, 0.9, 0.99, 0.999, 1.0]},
        r_min=widgets.FloatSlider(0.9, min=0.0, max=0.99, step=0.01, description="inner radius rₘᵢₙ"),
        r_max=widgets.FloatSlider(
            0.999, min=0.05, max=1.0, step=0.001, readout_format=".3f", description="outer radius rₘₐₓ"
        ),
    )


# ----------------------------------------------------------------------------- 5.5 seq2seq and attention


def plot_alignment(A, source, output, ax=None, target=None) -> plt.Axes:
    """Heatmap of attention weights ``A[i, j] = a_ij`` (n output steps × m source positions), rows labelled
    with the output symbols, columns with the source symbols, and the anti-diagonal j = m + 1 - i of a
    reversal dashed. `target` (optional) marks the output symbols that differ from it in red."""
    source, output = [str(s) for s in source], [str(s) for s in output]
    A = check_matrix(A, "A", len(output), len(source))
    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 5))
    n, m = A.shape
    image = ax.imshow(A, cmap="Blues", vmin=0, vmax=1, aspect="auto")
    ax.grid(False)
    ax.plot(m - 1 - np.arange(n), np.arange(n), "--", color="C1", lw=1)
    ax.set_xticks(range(m), source)
    ax.set_yticks(range(n), output)
    if target is not None:
        for label, y_hat, y in zip(ax.get_yticklabels(), output, [str(s) for s in target], strict=True):
            label.set_color("C3" if y_hat != y else "black")
    ax.set(
        xlabel="source symbol $x_j$, position $j$ (dashed: $j = m+1-i$)",
        ylabel="output symbol $\\hat y_i$, step $i$ downwards",
    )
    ax.figure.colorbar(image, ax=ax, label="attention weight $a_{ij}$", fraction=0.046)
    return ax


@functools.lru_cache(maxsize=1)
def _small_attention_model() -> tuple[Seq2Seq, int]:
    """An attention model trained on reversing strings of length 8 (about 3 s, once per session)."""
    length = 8
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = Seq2Seq(10, 32, attention=True)
        task = make_reverse_task(5000, length, rng=0)
        train_seq2seq(model, task.X, task.Y, steps=300, rng=1, progress=False)
    return model, length


@widget
def alignment_explorer(model: Seq2Seq | None = None, length: int = 15, n_strings: int = 6) -> widgets.VBox:
    """The attention weights a_ij of a trained attention model (05.21) while it reverses a test string,
    chosen from a dropdown; the title compares the greedy output with the true reversal. Without a `model`, a
    small one is trained on strings of length 8 (a few seconds, once)."""
    if model is None:
        model, length = _small_attention_model()
    elif not isinstance(model, Seq2Seq) or not model.attention:
        raise TypeError(f"model must be a Seq2Seq built with attention=True, got {type(model).__name__}")
    length, n_strings = check_int(length, "length", 1), check_int(n_strings, "n_strings", 1, 8)
    task = make_reverse_task(n_strings, length, vocab=model.vocab, rng=12345)
    score = evaluate_seq2seq(model, task.X, task.Y)
    index = {"".join(map(str, x)): k for k, x in enumerate(task.X)}  # the dropdown shows the strings

    def draw(source: str) -> plt.Figure:
        k = index[source]
        fig, ax = plt.subplots(figsize=(5.6, 4.8))
        prediction, truth = score.prediction[k], task.Y[k]
        plot_alignment(score.attention[k], task.X[k], prediction, ax=ax, target=truth)
        right = int((prediction == truth).sum())
        ax.set_title(
            f"output {''.join(map(str, prediction))} ({right} of {length} right)\n"
            f"true reversal {''.join(map(str, truth))}",
            fontsize=10,
        )
        describe(
            fig,
            f"Attention weights of the trained model while it reverses the source string {source}, output "
            "steps in rows and source positions in columns, with the anti-diagonal of an exact reversal "
            f"dashed; it writes {''.join(map(str, prediction))}, {right} of {length} symbols right.",
        )
        return fig

    return interactive_figure(
        draw, source=widgets.Dropdown(options=list(index), description="source string x")
    )
