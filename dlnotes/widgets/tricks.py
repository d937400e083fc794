"""Widgets of chapter 08 — tricks of the trade."""

from __future__ import annotations

import functools

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from ..alt_text import describe
from ..data import load_digits, load_digits_split
from ..tricks import (
    augment_digits,
    classifier_scores,
    propagate_stats,
    tempered_softmax,
    train_dropout_mlp,
    weight_decay_minimiser,
)
from ..validation import check_rng
from .core import interactive_figure, widget

# ----------------------------------------------------------------------------- 8.1 initialisation


DEPTH_SCHEMES = {  # label in the dropdown -> (scheme of init_weights, its distribution)
    "LeCun σ² = 1/n (= Glorot here)": ("lecun", "normal"),
    "He σ² = 2/n": ("he", "normal"),
    "orthogonal, g = 1": ("orthogonal", "normal"),
    "PyTorch default U[±1/√n]": ("torch_default", "uniform"),
}
DEPTH_NONLINEARITIES = {"linear": "linear", "tanh": "tanh", "ReLU": "relu"}


@widget
def activation_depth_explorer() -> widgets.VBox:
    """Activation statistics through depth (08.01-08.05): the RMS of the pre-activations (forward) and of their
    gradients (backward) in every layer of a width-128 network at initialisation, per scheme and activation.
    One figure, its two curves, limits and title updated for each setting."""
    width, batch = 128, 64
    fig = Figure(figsize=(8, 4.4))
    ax = fig.subplots()
    (forward,) = ax.semilogy([], [], "o-", ms=3, label="forward: RMS of $a_l$")
    (backward,) = ax.semilogy([], [], "s-", ms=3, label=r"backward: RMS of $\partial E/\partial a_l$")
    ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    ax.set(
        xlabel="layer $l$",
        ylabel="RMS (log scale)",
        title="scheme, activation\nlayer L forward, layer 1 backward",
    )
    fig.legend(loc="lower center", ncol=2, fontsize=9)
    fig.tight_layout(rect=(0, 0.05, 1, 1))  # once (the title keeps its two lines), the legend below

    def draw(scheme: str, activation: str, depth: int) -> Figure:
        rng = check_rng(0)  # the same network for every frame
        x = rng.standard_normal((batch, width))
        name, dist = DEPTH_SCHEMES[scheme]
        stats = propagate_stats(
            x, depth, scheme=name, dist=dist, activation=DEPTH_NONLINEARITIES[activation], rng=rng
        )
        layers = np.arange(1, depth + 1)
        forward.set_data(layers, stats.forward)
        backward.set_data(layers, stats.backward)
        low = min(stats.forward.min(), stats.backward.min(), 0.1)
        high = max(stats.forward.max(), stats.backward.max(), 10.0)
        ax.set(xlim=(0, depth + 1), ylim=(low / 3, high * 3))
        ax.set_title(
            f"{scheme}, {activation}\nlayer {depth} forward {stats.forward[-1]:.2g}, "
            f"layer 1 backward {stats.backward[0]:.2g}"
        )
        describe(
            fig,
            f"RMS of the pre-activations (forward) and of their gradients (backward) in each of the {depth} "
            f"layers of a width-{width} network at initialisation, on a log scale, for {scheme} initialisation "
            f"and the {activation} activation; a dashed line marks 1, where the signal keeps its scale.",
        )
        return fig

    return interactive_figure(
        draw,
        frames={"depth": [10, 50, 100]},
        scheme=widgets.Dropdown(
            options=list(DEPTH_SCHEMES), value="LeCun σ² = 1/n (= Glorot here)", description="initialisation"
        ),
        activation=widgets.Dropdown(
            options=list(DEPTH_NONLINEARITIES), value="tanh", description="activation φ"
        ),
        depth=widgets.IntSlider(50, min=2, max=100, step=1, description="depth L"),
    )


# ----------------------------------------------------------------------------- 8.2-8.3 weight decay and early stopping
@widget
def weight_decay_explorer() -> widgets.VBox:
    """Weight decay on an elongated 2-D quadratic (08.08): the minimiser
    ``theta*_mu = (H + mu I)^{-1} H theta*`` moves to 0 mainly along the flat eigen-direction; the part
    ``lambda_i / (lambda_i + mu)`` of theta* survives along eigenvector i."""
    angle = np.pi / 6
    Q = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    lams = np.array([10.0, 0.2])  # stiff, flat
    H = Q @ np.diag(lams) @ Q.T
    theta_star = np.array([1.6, 1.6])
    path_mus = np.logspace(-3, 3, 200)
    path = np.array([weight_decay_minimiser(H, theta_star, mu).theta_mu for mu in path_mus])
    grid = np.linspace(-0.5, 2.5, 120)
    t1, t2 = np.meshgrid(grid, grid)
    diff = np.stack([t1 - theta_star[0], t2 - theta_star[1]], axis=-1)
    loss = 0.5 * np.einsum("...i,ij,...j->...", diff, H, diff)

    def draw(log10_mu: float) -> plt.Figure:
        mu = 10.0**log10_mu
        result = weight_decay_minimiser(H, theta_star, mu)
        fig, (ax, ax_f) = plt.subplots(1, 2, figsize=(10, 4.2))
        ax.contour(t1, t2, loss, levels=np.logspace(-2, 1.3, 10), colors="lightgrey", linewidths=0.8)
        regularised = loss + 0.5 * mu * (t1**2 + t2**2)
        levels = regularised.min() + np.logspace(-2, 1, 8) * (1 + mu / lams[1])
        ax.contour(t1, t2, regularised, levels=levels, colors="C0", linewidths=0.8, alpha=0.7)
        ax.plot(*path.T, "k--", lw=1, label=r"$\theta^*_\mu$ for all $\mu$")
        for i, name in enumerate(("stiff", "flat")):
            tip = theta_star + 0.8 * Q[:, i]
            ax.annotate("", xy=tip, xytext=theta_star, arrowprops={"arrowstyle": "->", "color": f"C{i + 2}"})
            label = rf"{name}, $\lambda = {lams[i]:g}$"
            ax.text(*(tip + 0.1 * Q[:, i]), label, color=f"C{i + 2}", fontsize=9)
        ax.plot(*theta_star, "k*", ms=12, label=r"$\theta^*$ (no decay)")
        ax.plot(*result.theta_mu, "o", color="C1", ms=9, label=rf"$\theta^*_\mu$, $\mu = {mu:.3g}$")
        ax.plot(0, 0, "k+", ms=10)
        ax.set(xlim=(-0.5, 2.5), ylim=(-0.5, 2.5), xlabel=r"$\theta_1$", ylabel=r"$\theta_2$", aspect="equal")
        ax.set_title(r"grey: $\mathcal{R}$, blue: $\mathcal{R} + \frac{\mu}{2}\|\theta\|^2$", fontsize=10)
        ax.legend(fontsize=8, loc="lower right")
        for i, name in enumerate(("stiff", "flat")):
            label = rf"{name}, $\lambda = {lams[i]:g}$"
            ax_f.semilogx(path_mus, lams[i] / (lams[i] + path_mus), color=f"C{i + 2}", label=label)
            ax_f.plot(mu, lams[i] / (lams[i] + mu), "o", color=f"C{i + 2}")
        ax_f.axvline(mu, color="C1", lw=1)
        ax_f.set(
            xlabel=r"weight decay $\mu$",
            ylabel=r"$\lambda_i/(\lambda_i+\mu)$",
            ylim=(-0.05, 1.05),
            title=r"the part of $\theta^*$ kept along each eigenvector",
        )
        ax_f.legend(fontsize=9)
        describe(
            fig,
            f"Left: contours of an elongated quadratic loss (grey) and of the loss plus weight decay μ = {mu:.3g} "
            "(blue), the path of the regularised minimiser from the optimum θ* towards 0 as μ grows, and its "
            "position at this μ; right: the part λ over λ + μ of θ* kept along the stiff and the flat eigenvector "
            "against μ, smaller along the flat one, so decay pulls the minimiser in mainly along the flat direction.",
        )
        return fig

    return interactive_figure(
        draw,
        frames={"log10_mu": [-2.0, -1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0]},
        log10_mu=widgets.FloatSlider(-0.5, min=-2.0, max=2.0, step=0.1, description="log₁₀ μ"),
    )


# ----------------------------------------------------------------------------- 8.4 dropout and ensembles


DROPOUT_KEEP = (0.25, 0.5, 0.75, 1.0)  # the keep probabilities of dropout_explorer


@functools.lru_cache(maxsize=1)
def _dropout_sweep() -> tuple[dict, dict]:
    """The trainings behind `dropout_explorer`, one per keep probability (about 1.5 s with one thread, once per
    session)."""
    split = load_digits_split(test_size=1 - 300 / 1797, rng=0)
    runs, final = {}, {}
    for pi in DROPOUT_KEEP:
        trained = train_dropout_mlp(
            split.X_train,
            split.y_train,
            pi,
            X_val=split.X_test,
            y_val=split.y_test,
            hidden=128,
            epochs=200,
            lr=1e-3,
            rng=0,
            progress=False,
        )
        runs[pi] = trained.history
        final[pi] = (
            classifier_scores(trained.model, split.X_train, split.y_train),
            classifier_scores(trained.model, split.X_test, split.y_test),
        )
    return runs, final


@widget
def dropout_explorer() -> widgets.VBox:
    """Dropout's keep probability on 300 digits (08.13): an MLP with 128 ReLU units trained (Adam, full batch,
    200 epochs, the same initial weights) for each keep probability pi of the hidden units, all in advance;
    the slider picks one: its training and test cross-entropy per epoch, and the final accuracies against pi."""
    pis = DROPOUT_KEEP
    runs, final = _dropout_sweep()

    def draw(pi: float) -> plt.Figure:
        pi = min(pis, key=lambda p: abs(p - pi))
        fig, (ax_curve, ax_acc) = plt.subplots(1, 2, figsize=(10, 4))
        epochs = np.arange(1, len(runs[pi]["train_loss"]) + 1)
        ax_curve.semilogy(epochs, runs[1.0]["val_loss"], color="grey", lw=1, label="test, no dropout (π = 1)")
        ax_curve.semilogy(epochs, runs[pi]["val_loss"], color="C3", label=f"test, π = {pi:g}")
        ax_curve.semilogy(epochs, runs[pi]["train_loss"], color="C0", ls="--", label="training (masks on)")
        train, test = final[pi]
        ax_curve.set(
            xlabel="epoch",
            ylabel="cross-entropy (nats, log scale)",
            title=f"π = {pi:g}: training CE {train.cross_entropy:.3f}, test CE {test.cross_entropy:.3f}",
        )
        ax_curve.legend(fontsize=9)
        ax_acc.plot(pis, [final[p][0].accuracy for p in pis], "o-", color="C0", label="training accuracy")
        ax_acc.plot(pis, [final[p][1].accuracy for p in pis], "s-", color="C3", label="test accuracy")
        ax_acc.axvline(pi, color="k", lw=0.8)
        ax_acc.set(
            xlabel="keep probability π of the hidden units",
            ylabel="accuracy (eval mode)",
            title=f"π = {pi:g}: test accuracy {test.accuracy:.3f}",
        )
        ax_acc.legend(fontsize=9, loc="center right")
        fig.tight_layout()
        describe(
            fig,
            f"Left: test cross-entropy per epoch, on a log scale, of a 128-unit MLP on 300 digits trained with "
            f"keep probability π = {pi:g} beside the run without dropout, and its training cross-entropy with the "
            "masks on; right: final training and test accuracy against the keep probability, this π marked.",
        )
        return fig

    return interactive_figure(
        draw,
        frames={"pi": list(pis)},
        pi=widgets.FloatSlider(0.5, min=0.25, max=1.0, step=0.25, description="keep probability π"),
    )


# ----------------------------------------------------------------------------- 8.5 normalisation


# ----------------------------------------------------------------------------- 8.6, 8.8 augmentation, label smoothing, distillation


AUGMENTATIONS = {  # label in the dropdown -> (shift in pixels, largest angle in degrees) per unit of strength
    "shift by up to s pixels": (1, 0.0),
    "rotate by up to 10·s degrees": (0, 10.0),
    "both": (1, 10.0),
}


@widget
def augmentation_explorer() -> widgets.VBox:
    """Data augmentation (08.21): three digits (left column) and six random label-preserving transforms T(x) of
    each, shifts by whole pixels and/or small rotations (`augment_digits`), at a chosen strength s."""
    images, labels = load_digits()
    originals = images[[0, 7, 4]] / 16  # a 0, a 7 and a 4; pixels in [0, 1]
    copies = 6

    def draw(transform: str, strength: int) -> plt.Figure:
        shift, angle = AUGMENTATIONS[transform]
        rng = check_rng(0)  # the same draws for every frame
        fig, axes = plt.subplots(len(originals), copies + 1, figsize=(8, 3.6))
        for row, image in enumerate(originals):
            moved = augment_digits(
                np.repeat(image[None], copies, axis=0),
                shifts=shift * strength,
                max_angle=angle * strength,
                rng=rng,
            )
            for col, picture in enumerate([image, *moved]):
                axes[row, col].imshow(picture, cmap="gray_r", vmin=0, vmax=1)
                axes[row, col].set_xticks([])
                axes[row, col].set_yticks([])
        axes[0, 0].set_title("original", fontsize=10)
        for col in range(1, copies + 1):
            axes[0, col].set_title(f"$T_{col}(x)$", fontsize=10)
        fig.suptitle(f"{transform}, strength s = {strength}", fontsize=11)
        fig.tight_layout()
        describe(
            fig,
            f"Three digits, a 0, a 7 and a 4, in the left column, each followed in its row by {copies} random "
            f"label-preserving transforms ({transform}, strength {strength}).",
        )
        return fig

    return interactive_figure(
        draw,
        transform=widgets.Dropdown(options=list(AUGMENTATIONS), value="both", description="transform"),
        strength=widgets.IntSlider(1, min=0, max=3, step=1, description="strength s"),
    )


# illustrative teacher logits F for an image of a 7 that looks a bit like a 1 (and a 9)
TEACHER_LOGITS = np.array([-2.0, 3.0, -1.0, 0.5, -3.0, -1.5, -2.5, 6.0, -0.5, 1.5])


@widget
def temperature_explorer() -> widgets.VBox:
    """Distillation temperature (08.25): the teacher's softened distribution softmax(F / T) for illustrative
    logits F of an image of a 7, and its entropy as T grows (`tempered_softmax`)."""
    temperatures = np.logspace(-1, 2, 200)
    entropies = [
        -(p * np.log(p)).sum() for p in tempered_softmax(TEACHER_LOGITS[None] / temperatures[:, None])
    ]

    def draw(log2_T: float) -> plt.Figure:
        T = 2.0**log2_T
        p = tempered_softmax(TEACHER_LOGITS, T)
        H = float(-(p * np.log(p)).sum())
        fig, (ax, ax_h) = plt.subplots(1, 2, figsize=(10, 3.8))
        ax.bar(np.arange(10), p, color=["C1" if k == 7 else "C0" for k in range(10)])
        ax.set(
            xticks=range(10),
            ylim=(0, 1.02),
            xlabel="class $y$",
            ylabel="$p_y = $softmax$(F/T)_y$",
            title=f"teacher at T = {T:.3g}",
        )
        ax_h.semilogx(temperatures, entropies, "k-")
        ax_h.axhline(np.log(10), color="grey", ls="--", lw=0.8, label="uniform: log 10")
        ax_h.plot(T, H, "o", color="C1", ms=8, label=f"entropy {H:.2f} nats")
        ax_h.set(xlabel="temperature $T$", ylabel="entropy (nats)", title="softer as $T$ grows")
        ax_h.legend(fontsize=9, loc="upper left")
        fig.tight_layout()
        describe(
            fig,
            f"Left: the teacher's softened class probabilities softmax(F / T) at T = {T:.3g} for an image of a 7, "
            "class 7 highlighted; right: their entropy against the temperature T on a log axis, rising towards "
            "the uniform distribution's log 10 (dashed) as T grows, with a dot at this T.",
        )
        return fig

    return interactive_figure(
        draw,
        frames={"log2_T": [-1.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0]},
        log2_T=widgets.FloatSlider(2.0, min=-1.0, max=5.0, step=0.5, description="log₂ T"),
    )


# ----------------------------------------------------------------------------- 8.7, 8.9 residual scaling, reparameterisation


# ----------------------------------------------------------------------------- 8.10 the tricks compared
