"""Widgets of chapter 11 — ethics: robustness, interpretability, fairness."""

from __future__ import annotations

import functools

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from scipy import stats
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_curve

from ..alt_text import describe
from ..data import load_digits_split
from ..ethics import (
    REDUNDANT_FEATURES,
    add_noise,
    certified_accuracy,
    certify,
    ceteris_paribus,
    class_probabilities,
    credit_population,
    dual_norm,
    dual_norm_maximiser,
    fairness_gaps,
    fgsm,
    fit_robust_logistic,
    group_aware_features,
    group_rates,
    mlp,
    model_outputs,
    pgd,
    predict,
    redundant_logistic_data,
    saliency,
    shap_values,
    threshold_by_group,
    train_classifier,
)
from ..validation import check_rng
from .core import interactive_figure, widget


def _digits_classifier(split, hidden=(64, 64), epochs: int = 30, augment=None, rng=0) -> torch.nn.Module:
    """A classifier of the digits `split` for a widget: `mlp(hidden)` initialised from torch seed 0 without
    touching the notebook's torch generator, trained by `train_classifier` without a progress bar."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = mlp(hidden)
    train_classifier(
        model, split.X_train, split.y_train, epochs=epochs, augment=augment, rng=rng, progress=False
    )
    return model


# ----------------------------------------------------------------------------- 11.1 threat model and norms


BALL_P = {"0.5 (not a norm)": 0.5, "1": 1.0, "1.5": 1.5, "2": 2.0, "3": 3.0, "∞": np.inf}


def _unit_sphere(p: float, n: int = 721) -> np.ndarray:
    """Points (n, 2) of the 2-D unit sphere {||v||_p = 1}, for any p > 0 (below 1 the ball is not convex)."""
    t = np.linspace(0, 2 * np.pi, n)
    v = np.stack([np.cos(t), np.sin(t)], axis=1)
    size = np.abs(v).max(axis=1) if p == np.inf else (np.abs(v) ** p).sum(axis=1) ** (1 / p)
    return v / size[:, None]


@widget
def unit_ball_explorer() -> widgets.VBox:
    """The unit ball {||delta||_p <= 1} in 2-D for the chosen p (11.02), a weight vector w at the chosen angle,
    the perturbation delta* of the ball that maximises w^T delta, and the supporting line w^T delta = ||w||_q
    (the dual norm, 1/p + 1/q = 1). Below p = 1 the ball is not convex and the maximum is that of p = 1. One
    figure, updated for each setting."""
    fig = Figure(figsize=(5.6, 5.2))
    ax = fig.subplots()
    for ref_p in (1.0, 2.0, np.inf):
        points = _unit_sphere(ref_p)
        ax.plot(*points.T, color="lightgrey", lw=1, ls="--")
        name = "∞" if ref_p == np.inf else f"{ref_p:g}"
        ax.text(*(points[270] * 1.04), f"p = {name}", color="grey", fontsize=8, ha="right")
    (ball,) = ax.fill([0, 1], [0, 1], color="C0", alpha=0.25)
    (outline,) = ax.plot([], [], color="C0", lw=2)
    arrow = ax.annotate("", xy=(1, 0), xytext=(0, 0), arrowprops={"arrowstyle": "->", "color": "C1", "lw": 2})
    w_label = ax.text(0, 0, "$w$", color="C1", fontsize=12)
    (support,) = ax.plot([], [], color="C3", lw=1.2)
    (maximiser,) = ax.plot([], [], "o", color="C3", ms=9, label=r"maximiser $\delta^*$")
    ax.set(xlim=(-1.6, 1.6), ylim=(-1.6, 1.6), aspect="equal", xlabel=r"$\delta_1$", ylabel=r"$\delta_2$")
    ax.set_title("p")
    fig.tight_layout()

    def draw(p_label: str, angle: int) -> Figure:
        p = BALL_P[p_label]
        w = np.array([np.cos(np.radians(angle)), np.sin(np.radians(angle))])
        p_max = max(p, 1.0)  # below 1 the maximiser is the vertex of the l1 ball
        value = dual_norm(w, p_max)
        delta = dual_norm_maximiser(w, 1.0, p_max)
        q = 1.0 if p_max == np.inf else np.inf if p_max == 1 else p_max / (p_max - 1)
        sphere = _unit_sphere(p)
        ball.set_xy(sphere)
        ball.set_label(rf"$\|\delta\|_p\leq 1$, p = {p_label}")
        outline.set_data(*sphere.T)
        arrow.xy = 0.6 * w
        w_label.set_position(0.6 * w + [0.03, -0.12])
        normal = np.array([-w[1], w[0]])
        line = value * w + np.outer(np.linspace(-3, 3, 2), normal)  # {delta: w^T delta = ||w||_q}
        support.set_data(*line.T)
        support.set_label(rf"$w^\top\delta = \|w\|_q = {value:.3f}$")
        maximiser.set_data([delta[0]], [delta[1]])
        q_text = "∞" if q == np.inf else f"{q:g}"
        ax.set_title(f"p = {p_label}: dual exponent q = {q_text}{', as for p = 1' if p < 1 else ''}")
        ax.legend(handles=[ball, support, maximiser], loc="lower left", fontsize=8)
        describe(
            fig,
            f"The 2-D unit ball of the ℓp norm for p = {p_label} (shaded, with the balls of p = 1, 2 and ∞ "
            f"dashed for reference), an arrow for w at {angle} degrees, and the point δ* of the ball that "
            "maximises w transpose δ, where the supporting line w transpose δ = the dual norm of w touches "
            "the ball.",
        )
        return fig

    return interactive_figure(
        draw,
        frames={"angle": [0, 20, 40, 60, 80, 90]},
        p_label=widgets.Dropdown(options=list(BALL_P), value="2", description="norm p"),
        angle=widgets.IntSlider(20, min=0, max=90, step=5, description="direction of w (degrees)"),
    )


# ----------------------------------------------------------------------------- 11.2 linear classifiers


# ----------------------------------------------------------------------------- 11.3 attacks on networks


EXPLORER_ATTACKS = ("FGSM", "PGD ℓ∞, 20 steps")


@functools.lru_cache(maxsize=1)
def _explorer_model() -> tuple[torch.nn.Module, list[str], np.ndarray, np.ndarray]:
    """The chapter's MLP trained for 30 epochs (about 1 s, once per session) and three test digits it
    classifies correctly, with their labels as the dropdown shows them."""
    split = load_digits_split(rng=0, scaling="unit")
    model = _digits_classifier(split, epochs=30)
    correct = predict(model, split.X_test) == split.y_test
    chosen = [int(np.flatnonzero(correct & (split.y_test == k))[0]) for k in (3, 5, 8)]
    labels = [f"a {split.y_test[i]} (test digit {i})" for i in chosen]
    return model, labels, split.X_test[chosen], split.y_test[chosen]


@widget
def adversarial_explorer() -> widgets.VBox:
    """An adversarial digit (11.07, 11.08): the clean test digit x, the perturbation δ of FGSM or of PGD with
    ``‖δ‖∞ ≤ ε``, the adversarial image x + δ and the class probabilities before and after, for a budget ε."""
    model, labels, X, y = _explorer_model()
    clean_probs = class_probabilities(model, X)
    attacked = {}  # (attack, eps) -> (adversarial images, their class probabilities), computed once each

    def attack_all(attack: str, eps: float) -> tuple[np.ndarray, np.ndarray]:
        if (attack, eps) not in attacked:
            if eps == 0:
                X_adv = X
            elif attack == "FGSM":
                X_adv = fgsm(model, X, y, eps)
            else:
                X_adv = pgd(model, X, y, eps, eps / 4, 20, rng=0)
            attacked[attack, eps] = (X_adv, class_probabilities(model, X_adv))
        return attacked[attack, eps]

    def draw(attack: str, digit: str, eps: float) -> plt.Figure:
        i = labels.index(digit)
        X_adv, probs_all = attack_all(attack, round(float(eps), 4))
        x_adv, probs, clean = X_adv[i], probs_all[i], clean_probs[i]
        delta = x_adv - X[i]
        fig, axes = plt.subplots(1, 4, figsize=(12, 3.2), gridspec_kw={"width_ratios": [1, 1, 1, 1.6]})
        fig.subplots_adjust(left=0.02, right=0.98, bottom=0.17, top=0.86, wspace=0.25)
        y_true, y_adv = int(clean.argmax()), int(probs.argmax())
        panels = (
            (X[i], "gray_r", 0, 1, f"clean $x$: {y_true} ({clean[y_true]:.2f})"),
            (delta, "RdBu_r", -0.3, 0.3, rf"$\delta$, $\|\delta\|_\infty = {np.abs(delta).max():.2f}$"),
            (x_adv, "gray_r", 0, 1, rf"$x+\delta$: {y_adv} ({probs[y_adv]:.2f})"),
        )
        for j, (image, cmap, low, high, title) in enumerate(panels):
            ax = axes[j]
            ax.imshow(image.reshape(8, 8), cmap=cmap, vmin=low, vmax=high)
            fooled = j == 2 and y_adv != y_true
            ax.set_title(
                title + (" fooled" if fooled else ""), fontsize=10, color="C3" if fooled else "black"
            )
            ax.set(xticks=[], yticks=[])
        classes = np.arange(len(probs))
        ax = axes[3]
        ax.bar(classes - 0.2, clean, width=0.4, color="lightgrey", label="clean $x$")
        colours = ["C3" if k == y_adv and k != y_true else "C0" for k in classes]
        ax.bar(classes + 0.2, probs, width=0.4, color=colours, label=r"$x+\delta$")
        ax.set(xticks=classes, xlabel="class $k$", ylabel=r"$P(k\mid\cdot)$", ylim=(0, 1.05))
        ax.set_title(f"{attack}, ε = {eps:.2f}", fontsize=10)
        ax.legend(fontsize=9, loc="upper right")
        outcome = f"now classified as a {y_adv}" if y_adv != y_true else f"still classified as a {y_true}"
        describe(
            fig,
            f"The clean test digit, the {attack} perturbation δ of budget ε = {eps:.2f} (red positive, blue "
            f"negative), and the perturbed digit, {outcome}; bars compare the class probabilities before (grey) "
            "and after the attack.",
        )
        return fig

    return interactive_figure(
        draw,
        frames={"eps": [0.0, 0.05, 0.1, 0.2]},
        attack=widgets.Dropdown(options=list(EXPLORER_ATTACKS), value="FGSM", description="attack"),
        digit=widgets.Dropdown(options=labels, value=labels[0], description="test digit"),
        eps=widgets.FloatSlider(0.1, min=0.0, max=0.3, step=0.01, description="budget ε"),
    )


# ----------------------------------------------------------------------------- 11.4 robust training and distributional robustness


def _robust_linear_data():
    """200 points in 2-D: x_1 separates the classes widely but noisily (means ±1, σ = 0.6), x_2 narrowly but
    cleanly (means ±0.25, σ = 0.08): x_2 is the better feature until a budget of about 0.25 erases it."""
    rng = check_rng(0)
    y = np.where(rng.uniform(size=200) < 0.5, -1, 1)
    X = y[:, None] * np.array([1.0, 0.25]) + rng.normal(size=(200, 2)) * np.array([0.6, 0.08])
    return X, y


@widget
def robust_linear_explorer() -> widgets.VBox:
    """Adversarial training of a linear model in 2-D (11.11): logistic regression fitted on the robust logistic
    loss log(1 + exp(-y (w^T x + b) + eps ||w||_1)) for the chosen eps, against the standard fit (eps = 0); the
    band |w^T x + b| <= eps ||w||_1 holds the points an l_inf attack of budget eps can flip."""
    X, y = _robust_linear_data()
    eps_values = np.round(np.arange(0.0, 0.61, 0.05), 2)
    fits = {float(e): fit_robust_logistic(X, y, float(e)) for e in eps_values}
    standard = fits[0.0]

    def worst_case_accuracy(model, eps):  # exact for a linear model: correct iff margin > eps ||w||_1
        return float((y * (X @ model.w + model.b) > eps * np.abs(model.w).sum()).mean())

    curve_std = [worst_case_accuracy(standard, e) for e in eps_values]
    curve_rob = [worst_case_accuracy(fits[float(e)], e) for e in eps_values]
    clean_rob = [worst_case_accuracy(fits[float(e)], 0.0) for e in eps_values]
    grid = np.linspace(-3.5, 3.5, 2)

    def boundary(ax, model, **style):  # the line w^T x + b = 0; vertical once the l1 term zeroes w_2
        if abs(model.w[1]) <= 1e-9 * abs(model.w[0]):
            ax.axvline(-model.b / model.w[0], **style)
        else:
            ax.plot(grid, -(model.w[0] * grid + model.b) / model.w[1], **style)

    def draw(eps: float) -> plt.Figure:
        eps = round(float(eps), 2)
        robust = fits.get(eps) or fit_robust_logistic(X, y, eps)
        fig, (ax, ax_acc) = plt.subplots(1, 2, figsize=(10, 4.2))
        shift = eps * np.abs(robust.w).sum()
        xx, yy = np.meshgrid(np.linspace(-3.5, 3.5, 200), np.linspace(-0.6, 0.6, 200))
        score = robust.w[0] * xx + robust.w[1] * yy + robust.b
        ax.contourf(xx, yy, np.abs(score) <= shift, levels=[0.5, 1.5], colors=["C1"], alpha=0.2)
        flipped = y * (X @ robust.w + robust.b) <= shift
        for label, colour in ((-1, "C0"), (1, "C3")):
            keep = y == label
            ax.scatter(*X[keep & ~flipped].T, s=12, color=colour, label=f"y = {label:+d}")
            ax.scatter(*X[keep & flipped].T, s=30, facecolors="none", edgecolors=colour)
        boundary(ax, standard, color="k", ls="--", lw=1, label="standard fit ($\\epsilon = 0$)")
        boundary(ax, robust, color="C1", lw=2, label=f"robust fit, $\\epsilon = {eps:g}$")
        ax.set(xlim=(-3.5, 3.5), ylim=(-0.6, 0.6), xlabel="$x_1$", ylabel="$x_2$")
        ax.set_title(
            f"w = ({robust.w[0]:.2f}, {robust.w[1]:.2f}); shaded: flippable band (open circles)", fontsize=10
        )
        ax.legend(fontsize=8, loc="upper left")
        ax_acc.plot(eps_values, curve_std, "k--o", ms=3, label="standard fit")
        ax_acc.plot(eps_values, curve_rob, "-s", color="C1", ms=3, label="robust fit at the same $\\epsilon$")
        ax_acc.plot(eps_values, clean_rob, ":", color="C1", label="robust fit, clean accuracy")
        ax_acc.axvline(eps, color="grey", lw=0.8)
        ax_acc.set(
            xlabel="budget $\\epsilon$ ($\\ell_\\infty$)",
            ylabel="training accuracy under the worst attack",
            ylim=(0, 1.02),
            title=f"at $\\epsilon = {eps:g}$: standard {worst_case_accuracy(standard, eps):.2f}, "
            f"robust {worst_case_accuracy(robust, eps):.2f}",
        )
        ax_acc.legend(fontsize=9)
        fig.tight_layout()
        describe(
            fig,
            f"Left: two classes of points in the plane with the standard decision line (dashed) and the line "
            f"fitted on the robust loss for ε = {eps:g}, and the shaded band of points an attack of that budget "
            "can flip (circled). Right: the worst-case training accuracy against the budget ε for the standard "
            "fit, for the robust fit at the same ε, and the robust fit's clean accuracy.",
        )
        return fig

    return interactive_figure(
        draw,
        frames={"eps": [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6]},
        eps=widgets.FloatSlider(0.3, min=0.0, max=0.6, step=0.05, description="budget ε"),
    )


# ----------------------------------------------------------------------------- 11.5 certified robustness


SMOOTHING_SIGMAS = (0.12, 0.25, 0.5, 1.0)  # the noise levels smoothing_explorer precomputes
SMOOTHING_SAMPLES = (100, 1000)  # and the numbers n of noisy copies


@functools.lru_cache(maxsize=1)
def _smoothing_sweep() -> tuple[np.ndarray, dict]:
    """The certificates behind `smoothing_explorer`: a softmax regression trained on noisy digits (noise level
    drawn per batch from U[0, 1]), certified on 100 test digits for every σ and n (about 1.3 s, once per
    session)."""
    split = load_digits_split(rng=0, scaling="unit")
    rng = check_rng(0)
    model = _digits_classifier(
        split, (), epochs=20, augment=lambda net, X, y: add_noise(X, rng.uniform(0.0, 1.0), rng), rng=rng
    )
    X, y = split.X_test[:100], split.y_test[:100]
    radii = np.linspace(0.0, 2.5, 101)
    curves = {}
    for sigma in SMOOTHING_SIGMAS:
        for n in SMOOTHING_SAMPLES:
            cert = certify(model, X, sigma, n0=100, n=n, alpha=1e-3, rng=rng)
            curves[sigma, n] = certified_accuracy(cert.label, cert.radius, y, radii)
    return radii, curves


@widget
def smoothing_explorer() -> widgets.VBox:
    """Randomised smoothing's noise level (11.14): the certified accuracy against the ℓ2 radius of a smoothed
    softmax regression on 100 test digits, for the chosen σ (bold) and the others (grey). A larger σ certifies
    larger radii but lowers the accuracy at small ones; with n noisy copies no radius beyond
    σΦ⁻¹(α^(1/n)) can be certified (dotted line)."""
    radii, curves = _smoothing_sweep()

    def draw(sigma: float, n: int) -> plt.Figure:
        sigma = min(SMOOTHING_SIGMAS, key=lambda s: abs(s - sigma))
        fig, ax = plt.subplots(figsize=(7.5, 4))
        for other in SMOOTHING_SIGMAS:
            if other != sigma:
                ax.plot(radii, curves[other, n], color="lightgrey", lw=1.2)
        ax.plot(radii, curves[sigma, n], color="C0", lw=2.2, label=f"σ = {sigma:g}, n = {n}")
        cap = sigma * stats.norm.ppf(1e-3 ** (1 / n))
        ax.axvline(
            cap,
            color="C3",
            ls=":",
            label=rf"largest certifiable radius $\sigma\Phi^{{-1}}(\alpha^{{1/n}})$ = {cap:.2f}",
        )
        ax.set(
            xlabel=r"$\ell_2$ radius $r$",
            ylabel="certified accuracy",
            ylim=(-0.02, 1.02),
            title=f"σ = {sigma:g}: certified accuracy {curves[sigma, n][0]:.2f} at r = 0, "
            f"{np.interp(0.5, radii, curves[sigma, n]):.2f} at r = 0.5 (grey: the other σ)",
        )
        ax.legend(fontsize=9)
        fig.tight_layout()
        describe(
            fig,
            f"Certified accuracy of the smoothed classifier against the ℓ2 radius for noise σ = {sigma:g} (bold) "
            f"and the other noise levels (grey), with n = {n} noisy copies; every curve falls with the radius, "
            f"and no radius beyond the dotted line at {cap:.2f} can be certified.",
        )
        return fig

    return interactive_figure(
        draw,
        frames={"sigma": list(SMOOTHING_SIGMAS)},
        sigma=widgets.FloatSlider(
            0.25, min=0.12, max=1.0, step=0.01, readout_format=".2f", description="noise σ"
        ),
        n=widgets.Dropdown(options=list(SMOOTHING_SAMPLES), value=1000, description="noisy copies n"),
    )


# ----------------------------------------------------------------------------- 11.6 local explanations: profiles and saliency


@widget
def profile_explorer() -> widgets.VBox:
    """Ceteris-paribus profiles on digits (11.17): for a test digit, its most sensitive pixel j (the largest
    |saliency| of the predicted class, 11.18) is set to t while every other pixel stays fixed; the profile
    t -> p_k(x with x_j = t) of the class probabilities and the prediction at t."""
    split = load_digits_split(rng=0, scaling="unit")
    model = _digits_classifier(split, epochs=20)  # test accuracy 0.95
    first = [int(np.flatnonzero(split.y_test == c)[0]) for c in (0, 3, 4, 7, 9)]
    digits = {f"test digit {i} (a {split.y_test[i]})": split.X_test[i] for i in first}
    grid = np.linspace(0, 1, 101)
    profiles = {}
    for name, x in digits.items():
        k = int(predict(model, x[None])[0])
        j = int(np.abs(saliency(model, x[None], k)[0]).argmax())
        curves = ceteris_paribus(lambda Z: model_outputs(model, Z, "probability"), x, j, grid)  # (G, K)
        maxima = curves.max(axis=0)
        maxima[k] = -1.0
        profiles[name] = (
            k,
            j,
            int(maxima.argmax()),
            curves,
        )  # the runner-up: highest elsewhere on the profile

    fig = Figure(figsize=(11, 3.6))
    ax_img, ax_prof, ax_bar = fig.subplots(1, 3, width_ratios=(1, 1.6, 1.3))
    image = ax_img.imshow(np.zeros((8, 8)), cmap="gray_r", vmin=0, vmax=1)
    pixel = ax_img.add_patch(Rectangle((0, 0), 1, 1, fill=False, ec="C3", lw=2))
    ax_img.set(xticks=[], yticks=[], title="pixel")
    (predicted,) = ax_prof.plot(grid, grid, color="C0")
    (runner_up,) = ax_prof.plot(grid, grid, color="C1")
    cursor = ax_prof.axvline(0, color="C3", lw=1)
    (at_x,) = ax_prof.plot([0], [0], "ko", ms=5, label="$t = x_j$ (the digit)")
    ax_prof.set(
        xlabel="pixel value $t$", ylabel="probability", ylim=(-0.03, 1.03), title="ceteris-paribus profile"
    )
    bars = ax_bar.bar(range(10), np.zeros(10))
    ax_bar.set(xlabel="class", ylabel="probability", ylim=(0, 1.03), xticks=range(10), title="prediction")
    fig.tight_layout()

    def draw(digit: str, t: float) -> Figure:
        x = digits[digit]
        k, j, other, curves = profiles[digit]
        x_t = x.copy()
        x_t[j] = t
        p_t = model_outputs(model, x_t[None], "probability")[0]
        image.set_data(x_t.reshape(8, 8))
        row, col = divmod(j, 8)
        pixel.set_xy((col - 0.5, row - 0.5))
        ax_img.set_title(f"pixel {j} (red) set to {t:.2f}")
        predicted.set(ydata=curves[:, k], label=f"$p_{{{k}}}$ (predicted at x)")
        runner_up.set(ydata=curves[:, other], label=f"$p_{{{other}}}$ (runner-up)")
        cursor.set_xdata([t])
        at_x.set_data([x[j]], [curves[np.abs(grid - x[j]).argmin(), k]])
        ax_prof.legend(fontsize=8, loc="center right")
        for c, bar in enumerate(bars):
            bar.set(height=p_t[c], color="C0" if c == k else "C1" if c == other else "lightgrey")
        ax_bar.set_title(f"prediction at $t$: {int(p_t.argmax())} ({p_t.max():.2f})")
        describe(
            fig,
            f"The {digit} with its most sensitive pixel, {j}, boxed in red and set to {t:.2f}; its "
            f"ceteris-paribus profile, the probabilities of class {k} (predicted for the digit) and class "
            f"{other} (the runner-up) as that pixel alone goes from 0 to 1; and the class probabilities at "
            f"this value, with the prediction {int(p_t.argmax())}.",
        )
        return fig

    return interactive_figure(
        draw,
        frames={"t": [0.0, 0.25, 0.5, 0.75, 1.0]},
        digit=widgets.Dropdown(options=list(digits), description="input"),
        t=widgets.FloatSlider(0.5, min=0.0, max=1.0, step=0.05, description="pixel value t"),
    )


# ----------------------------------------------------------------------------- 11.6 attribution by removal: Shapley values, SHAP and SAGE


@widget
def shap_waterfall_explorer() -> widgets.VBox:
    """The SHAP values of one prediction as a waterfall (11.21): a logistic regression trained on the data of
    `redundant_logistic_data` (features x_a, irrelevant x_c, x_b twice); the bars walk from the average output
    over a background sample, E f(X), to the prediction f(x), one feature at a time."""
    train = redundant_logistic_data(2000, rng=0)
    model = LogisticRegression().fit(train.X, train.y)
    samples = redundant_logistic_data(8, rng=1)
    background = train.X[:200]
    outputs = {
        "log-odds f(x)": lambda Z: model.decision_function(Z),
        "probability p̂(x)": lambda Z: model.predict_proba(Z)[:, 1],
    }
    phis = {name: shap_values(f, samples.X, background) for name, f in outputs.items()}
    bases = {name: float(f(background).mean()) for name, f in outputs.items()}
    p_hat = outputs["probability p̂(x)"](samples.X)
    labels = {f"example {i + 1}: y = {samples.y[i]}, p̂ = {p_hat[i]:.2f}": i for i in range(len(samples.y))}

    def draw(example: str, output: str) -> plt.Figure:
        i = labels[example]
        phi, base = phis[output][i], bases[output]
        ends = base + np.cumsum(phi)
        starts = ends - phi
        low, high = min(ends.min(), starts.min(), base), max(ends.max(), starts.max(), base)
        span = high - low
        fig, ax = plt.subplots(figsize=(9, 3.8))
        rows = np.arange(len(phi))[::-1]
        colours = ["C2" if p >= 0 else "C3" for p in phi]
        ax.barh(rows, phi, left=starts, color=colours, height=0.6)
        for row, start, end, p in zip(rows, starts, ends, phi, strict=True):
            ax.text(max(start, end) + 0.02 * span, row, f"{p:+.3f}", va="center", fontsize=9)
        ax.axvline(base, color="grey", lw=1, ls="--", label=rf"$\mathbb{{E}}f(X)$ = {base:.3f}")
        ax.axvline(ends[-1], color="k", lw=1, label=f"f(x) = {ends[-1]:.3f}")
        ax.set_yticks(
            rows, [f"{name} = {v:.2f}" for name, v in zip(REDUNDANT_FEATURES, samples.X[i], strict=True)]
        )
        ax.set_xlim(low - 0.08 * span, high + 0.22 * span)
        ax.set(xlabel=output, title=f"SHAP waterfall, {example}")
        ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=9)
        fig.tight_layout()
        describe(
            fig,
            f"A SHAP waterfall of the {output} for {example}: one horizontal bar per feature (green pushes up, "
            f"red pushes down) walking from the average output {base:.3f} (dashed) to the prediction "
            f"{ends[-1]:.3f} (solid).",
        )
        return fig

    return interactive_figure(
        draw,
        example=widgets.Dropdown(options=list(labels), value=next(iter(labels)), description="example"),
        output=widgets.Dropdown(options=list(outputs), value="log-odds f(x)", description="explain"),
    )


# ----------------------------------------------------------------------------- 11.7 fairness


@functools.lru_cache(maxsize=1)
def _credit_scores():
    """The scores behind `fairness_threshold_explorer`: a group-aware logistic regression trained on 2·10⁴
    applicants, scored on 4·10⁴ others, with each group's ROC curve (about 0.2 s, once per session)."""
    train, test = credit_population(20_000, rng=0), credit_population(40_000, rng=1)
    model = LogisticRegression().fit(group_aware_features(train.X, train.a), train.y)
    score = model.predict_proba(group_aware_features(test.X, test.a))[:, 1]
    rocs = [roc_curve(test.y[test.a == g], score[test.a == g])[:2] for g in (0, 1)]
    return test, score, rocs


FAIRNESS_THRESHOLDS = [0.2, 0.3, 0.4, 0.5, 0.6, 0.7]  # the website's frames for each group's threshold


@widget
def fairness_threshold_explorer() -> widgets.VBox:
    """Per-group thresholds on a credit score (11.22-11.25): each group's ROC curve with its operating point, the
    positive rate, TPR, FPR and PPV of both groups, and the gaps Δ_DP, Δ_EO and the TPR gap. One figure, its
    points, bars and title updated for each pair of thresholds."""
    test, score, rocs = _credit_scores()
    names = ("P(Ŷ=1)", "TPR", "FPR", "PPV")
    base_rate = group_rates(
        test.y, test.y, test.a
    ).base_rate  # the groups' shares of y = 1, whatever the rule
    fig = Figure(figsize=(10, 4.2))
    ax_roc, ax_bar = fig.subplots(1, 2)
    ax_roc.plot([0, 1], [0, 1], color="lightgrey", lw=1)
    positions = np.arange(len(names))
    points, bars = [], []
    for g, (fpr, tpr) in enumerate(rocs):
        ax_roc.plot(fpr, tpr, color=f"C{g}", label=rf"group $A={g}$ ($\pi_{g}$ = {base_rate[g]:.2f})")
        points.append(ax_roc.plot([], [], "o", color=f"C{g}", ms=9)[0])
        offset = positions + (g - 0.5) * 0.38
        bars.append(
            ax_bar.bar(offset, np.zeros(len(names)), width=0.38, color=f"C{g}", label=f"group A = {g}")
        )
    ax_roc.set(xlabel="false-positive rate", ylabel="true-positive rate", title="ROC curve of each group")
    ax_roc.legend(loc="lower right", fontsize=9)
    ax_bar.set_xticks(positions, names)
    ax_bar.set(ylim=(0, 1.05), ylabel="rate", title=r"$\Delta_{DP}$")
    ax_bar.legend(fontsize=9)
    fig.tight_layout()

    def draw(t0: float, t1: float) -> Figure:
        y_hat = threshold_by_group(score, test.a, [t0, t1])
        rates = group_rates(test.y, y_hat, test.a)
        gaps = fairness_gaps(test.y, y_hat, test.a)
        for g in (0, 1):
            points[g].set_data([rates.FPR[g]], [rates.TPR[g]])
            values = (rates.positive_rate[g], rates.TPR[g], rates.FPR[g], rates.PPV[g])
            for bar, value in zip(bars[g], values, strict=True):
                bar.set_height(value)
        ax_bar.set_title(
            rf"$\Delta_{{DP}}$ = {gaps.dp:.2f}, $\Delta_{{EO}}$ = {gaps.eo:.2f}, TPR gap = {gaps.tpr:.2f}"
        )
        describe(
            fig,
            f"Left: the ROC curve of each group with its operating point at thresholds {t0:g} (group 0) and "
            f"{t1:g} (group 1). Right: bars of each group's positive rate, true- and false-positive rates and "
            f"precision; demographic-parity gap {gaps.dp:.2f}, equalised-odds gap {gaps.eo:.2f}, TPR gap "
            f"{gaps.tpr:.2f}.",
        )
        return fig

    return interactive_figure(
        draw,
        frames={"t0": FAIRNESS_THRESHOLDS, "t1": FAIRNESS_THRESHOLDS},
        t0=widgets.FloatSlider(0.5, min=0.05, max=0.95, step=0.05, description="threshold t₀ (A = 0)"),
        t1=widgets.FloatSlider(0.5, min=0.05, max=0.95, step=0.05, description="threshold t₁ (A = 1)"),
    )
