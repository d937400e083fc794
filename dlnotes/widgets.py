"""Interactive figures: ipywidgets controls that redraw a matplotlib figure.

The figure is stored in an ``Output`` widget as a PNG, so the executed
notebook keeps it in its widget state: the static website shows the figure
for the default values, a live kernel redraws it on every change.
"""

from __future__ import annotations

import base64
from collections.abc import Callable

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np

from .plotting import figure_png


def interactive_figure(draw: Callable[..., plt.Figure], **controls: widgets.ValueWidget) -> widgets.VBox:
    """Controls above a figure that ``draw(**values)`` redraws when a control changes.

    `draw` receives one keyword argument per control (its current value) and
    returns a matplotlib figure. Example::

        interactive_figure(plot_recall, noise=widgets.FloatSlider(0.1, min=0, max=0.5))
    """
    if not callable(draw):
        raise TypeError(f"draw must be callable, got {type(draw).__name__}")
    if not controls:
        raise ValueError("give at least one control, e.g. noise=widgets.FloatSlider(...)")
    for name, control in controls.items():
        if not isinstance(control, widgets.ValueWidget):
            raise TypeError(
                f"control {name!r} must be an ipywidgets value widget, got {type(control).__name__}"
            )
        if not control.description:
            control.description = name
        if control.has_trait("continuous_update"):
            control.continuous_update = False  # redraw on release, not on every pixel
    output = widgets.Output()

    def redraw(_change=None) -> None:
        fig = draw(**{name: control.value for name, control in controls.items()})
        png = base64.b64encode(figure_png(fig)).decode("ascii")
        plt.close(fig)
        output.outputs = (
            {
                "output_type": "display_data",
                "data": {"image/png": png, "text/plain": "<Figure>"},
                "metadata": {},
            },
        )

    for control in controls.values():
        control.observe(redraw, names="value")
    redraw()
    return widgets.VBox([widgets.HBox(list(controls.values())), output])


# ----------------------------------------------------------------------------- chapter 01


def perceptron_vs_max_margin() -> widgets.VBox:
    """Two Gaussian clusters with a separation slider: perceptron vs. maximum-margin boundary (01.10)."""
    from sklearn.datasets import make_blobs

    from .connectionism import geometric_margin, max_margin_classifier, perceptron_train

    def draw(separation: float) -> plt.Figure:
        c = separation / 2
        X, labels = make_blobs(n_samples=60, centers=[(-c, -c), (c, c)], cluster_std=0.8, random_state=0)
        y = 2 * labels - 1
        fig, ax = plt.subplots(figsize=(7.5, 4.5))
        ax.scatter(*X[y < 0].T, marker="o", label="y = -1")
        ax.scatter(*X[y > 0].T, marker="s", label="y = +1")
        grid = np.linspace(X.min() - 1, X.max() + 1, 2)
        ax.set(xlim=grid, ylim=grid, xlabel="$x_1$", ylabel="$x_2$", aspect="equal")
        try:
            w_mm, b_mm = max_margin_classifier(X, y)
        except ValueError:
            ax.set_title("not linearly separable: no maximum-margin classifier")
            return fig
        w_p, b_p, *_ = perceptron_train(X, y, max_epochs=1000)
        for (w, b), style, name in (((w_p, b_p), "--", "perceptron"), ((w_mm, b_mm), "-", "max margin")):
            gamma = geometric_margin(w, b, X, y)
            ax.plot(grid, -(w[0] * grid + b) / w[1], "k" + style, label=f"{name}: γ = {gamma:.2f}")
        ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1), fontsize=9)
        ax.set_title(f"separation {separation:.1f}")
        return fig

    return interactive_figure(draw, separation=widgets.FloatSlider(4.0, min=0.5, max=6.0, step=0.25))


def novikoff_bound() -> widgets.VBox:
    """Perceptron updates against Novikoff's bound ``(R/gamma)^2`` as the margin shrinks (01.14)."""
    from .connectionism import make_separable, perceptron_train

    margins = np.linspace(0.05, 0.6, 12)

    def updates(margin: float) -> tuple[int, float]:
        X, y, w_star = make_separable(200, 2, margin, seed=0)
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
        return fig

    return interactive_figure(draw, margin=widgets.FloatSlider(0.2, min=0.05, max=0.6, step=0.05))


def cover_phase_transition() -> widgets.VBox:
    """Cover's fraction ``C(s, n) / 2^s`` of separable labelings against ``s/n`` for a chosen n (01.17)."""
    from .connectionism import cover_count

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
        return fig

    return interactive_figure(draw, n=widgets.IntSlider(10, min=1, max=200))


def hopfield_recall() -> widgets.VBox:
    """Hopfield recall of binarised digit prototypes: number of stored patterns and noise level (01.20)."""
    from .connectionism import digit_prototypes, flip_bits, hopfield_hebbian, hopfield_run

    prototypes = digit_prototypes((0, 1, 7, 4, 3, 2))

    def draw(patterns: int, noise: float) -> plt.Figure:
        rng = np.random.default_rng(0)
        P = prototypes[:patterns]
        W = hopfield_hebbian(P)
        fig, axes = plt.subplots(3, len(prototypes), figsize=(1.2 * len(prototypes), 4))
        for t, column in enumerate(axes.T):
            for ax in column:
                ax.set(xticks=[], yticks=[])
            if t >= patterns:
                column[0].set_title("not stored", fontsize=8)
                for ax in column:
                    ax.axis("off")
                continue
            x0 = flip_bits(P[t], round(noise * P.shape[1]), rng)
            x, _ = hopfield_run(x0, W, rng=rng)
            for ax, state in zip(column, (P[t], x0, x), strict=True):
                ax.imshow(state.reshape(8, 8), cmap="gray_r")
            column[2].set_xlabel("✔" if np.array_equal(x, P[t]) else "✘")
        for ax, label in zip(axes[:, 0], ("stored", "corrupted", "recalled"), strict=True):
            ax.set_ylabel(label)
        return fig

    return interactive_figure(
        draw,
        patterns=widgets.IntSlider(3, min=1, max=len(prototypes)),
        noise=widgets.FloatSlider(0.1, min=0.0, max=0.5, step=0.05),
    )


# ----------------------------------------------------------------------------- chapter 02


def ridge_polynomial() -> widgets.VBox:
    """Ridge regression of a degree-12 polynomial on 20 noisy samples of sin(2 pi x), with a slider for lambda (02.10)."""
    from .feedforward import lstsq_closed_form, polynomial_features

    rng = np.random.default_rng(0)
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
        return fig

    return interactive_figure(draw, log10_lambda=widgets.FloatSlider(-4.0, min=-10.0, max=2.0, step=0.5))


def universal_approximation() -> widgets.VBox:
    """One hidden layer of m random tanh units, output layer by least squares, fitting sin(3x) + |x| (02.23)."""
    from .feedforward import random_feature_fit

    rng = np.random.default_rng(0)
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
        return fig

    return interactive_figure(draw, width=widgets.IntSlider(5, min=1, max=400))


def relu_regions() -> widgets.VBox:
    """Linear regions of a random ReLU net on [-2, 2]^2 (colours = activation patterns), width and depth sliders (02.27)."""
    from .feedforward import relu_net_patterns, zaslavsky_bound

    grid = np.linspace(-2, 2, 300)
    X = np.stack(np.meshgrid(grid, grid), axis=-1).reshape(-1, 2)

    def draw(width: int, depth: int) -> plt.Figure:
        rng = np.random.default_rng(0)
        sizes = [2] + [width] * depth
        weights = [rng.normal(size=(m, n)) / np.sqrt(n) for n, m in zip(sizes, sizes[1:], strict=False)]
        biases = [rng.normal(size=m) * 0.5 for m in sizes[1:]]
        patterns = relu_net_patterns(weights, biases, X)
        _, region = np.unique(patterns, axis=0, return_inverse=True)
        n_regions = region.max() + 1
        fig, ax = plt.subplots(figsize=(5.5, 5))
        colours = np.random.default_rng(1).permutation(
            n_regions
        )  # shuffled, so neighbours rarely share a colour
        ax.imshow(colours[region].reshape(300, 300), extent=(-2, 2, -2, 2), origin="lower", cmap="tab20")
        bound = f", at most {zaslavsky_bound(width, 2)} for one layer" if depth == 1 else ""
        ax.set(xlabel="$x_1$", ylabel="$x_2$", title=f"{n_regions} regions visible in the square{bound}")
        ax.grid(False)
        return fig

    return interactive_figure(
        draw, width=widgets.IntSlider(6, min=1, max=16), depth=widgets.IntSlider(1, min=1, max=4)
    )


def activation_functions() -> widgets.VBox:
    """An activation function and its derivative, chosen from a dropdown (02.31)."""
    from .feedforward import ACTIVATION_DERIVATIVES

    z = np.linspace(-4, 4, 801)

    def draw(activation: str) -> plt.Figure:
        phi, dphi = ACTIVATION_DERIVATIVES[activation]
        fig, ax = plt.subplots(figsize=(6.5, 4))
        ax.plot(z, phi(z), label=f"{activation}$(z)$")
        ax.plot(z, dphi(z), "--", label=f"{activation}$'(z)$")
        ax.axhline(0, color="k", lw=0.5)
        ax.set(xlabel="$z$", ylabel="value", ylim=(-1.5, 4), title=activation)
        ax.legend()
        return fig

    return interactive_figure(
        draw, activation=widgets.Dropdown(options=list(ACTIVATION_DERIVATIVES), value="gelu")
    )


# ----------------------------------------------------------------------------- chapter 03


def _contours(ax, f, xlim, ylim, levels) -> None:
    x, y = np.meshgrid(np.linspace(*xlim, 300), np.linspace(*ylim, 300))
    z = np.array([f(np.array(p)) for p in np.stack([x.ravel(), y.ravel()], axis=1)]).reshape(x.shape)
    ax.contour(x, y, z, levels=levels, colors="lightgrey", linewidths=0.8)
    ax.set(xlim=xlim, ylim=ylim, xlabel=r"$\theta_1$", ylabel=r"$\theta_2$")


def quadratic_gd() -> widgets.VBox:
    """Gradient descent on ``x^T Q x / 2`` with condition number kappa: the zig-zag path over the contours (03.23)."""
    from .optimization import gd, quadratic

    def draw(kappa: float, eta_times_L: float) -> plt.Figure:
        f, grad, _, L, _ = quadratic(kappa)
        xs = gd(grad, np.array([1.0, 1.0 / np.sqrt(kappa)]) * 4, eta_times_L / L, 60)
        fig, (ax, ax_loss) = plt.subplots(1, 2, figsize=(10, 4))
        _contours(ax, f, (-5, 5), (-5, 5), np.logspace(-2, 2, 15) * kappa / 10)
        ax.plot(*xs.T, "o-", ms=3)
        ax.set_title(rf"$\kappa = {kappa:.0f}$, $\eta = {eta_times_L:.2f}/L$")
        ax_loss.semilogy([f(x) for x in xs])
        ax_loss.set(xlabel="step $t$", ylabel=r"$f(\theta_t)$", title="stable iff $\\eta < 2/L$")
        return fig

    return interactive_figure(
        draw,
        kappa=widgets.FloatSlider(10.0, min=1.0, max=100.0, step=1.0),
        eta_times_L=widgets.FloatSlider(1.8, min=0.1, max=2.1, step=0.05),
    )


def optimizer_race() -> widgets.VBox:
    """GD, heavy ball, Nesterov and Adam on the Rosenbrock valley, with learning-rate and momentum sliders (03.29)."""
    from .optimization import adam_step, gd, heavy_ball, nesterov, rosenbrock, rosenbrock_grad, run_optimizer

    x0, steps = np.array([-1.5, 2.0]), 400

    def draw(log10_lr: float, momentum: float) -> plt.Figure:
        lr = 10.0**log10_lr
        paths = {
            "GD": gd(rosenbrock_grad, x0, lr, steps),
            "heavy ball": heavy_ball(rosenbrock_grad, x0, lr, momentum, steps),
            "Nesterov": nesterov(rosenbrock_grad, x0, lr, momentum, steps),
            "Adam (lr x 100)": run_optimizer(
                adam_step, rosenbrock_grad, x0, steps, lr=100 * lr, betas=(momentum, 0.999)
            ),
        }
        fig, (ax, ax_loss) = plt.subplots(1, 2, figsize=(10, 4))
        _contours(ax, rosenbrock, (-2, 2), (-1, 3), np.logspace(-1, 3, 12))
        ax.plot(1, 1, "k*", ms=12)
        with np.errstate(over="ignore", invalid="ignore"):
            for name, xs in paths.items():
                ax.plot(*xs.T, lw=1.2, label=name)
                ax_loss.semilogy([rosenbrock(x) for x in xs], label=name)
        ax.set_title(rf"lr $= 10^{{{log10_lr:.1f}}}$, momentum $= {momentum:.2f}$")
        ax_loss.set(xlabel="step", ylabel="loss", ylim=(1e-6, 1e4), title=f"{steps} steps from (-1.5, 2)")
        ax_loss.legend(fontsize=9)
        return fig

    return interactive_figure(
        draw,
        log10_lr=widgets.FloatSlider(-3.0, min=-4.0, max=-2.5, step=0.1),
        momentum=widgets.FloatSlider(0.9, min=0.0, max=0.99, step=0.01),
    )


def robbins_monro() -> widgets.VBox:
    """SGD on a noisy quadratic with steps ``alpha_t = t^-p`` against a constant step (03.34)."""
    from .optimization import sgd

    d, T = 200, 5000

    def draw(p: float) -> plt.Figure:
        fig, ax = plt.subplots(figsize=(6.5, 4))
        for name, schedule in (
            (f"$\\alpha_t = t^{{-{p:.2f}}}$", lambda t: t**-p),
            ("constant 0.1", lambda t: 0.1),
        ):
            noise = np.random.default_rng(0)

            def grad_i(theta, _idx, noise=noise):
                return theta + noise.normal(
                    size=theta.shape
                )  # gradient of ||theta||^2 / 2 plus N(0, I) noise

            xs = sgd(grad_i, 1, np.ones(d), schedule, T, rng=0)
            ax.loglog(np.arange(1, T + 1), np.mean(xs[1:] ** 2, axis=1), label=name)
        ax.set(xlabel="step $t$", ylabel=r"$\|\theta_t\|^2 / d$", title="Robbins–Monro needs 1/2 < p <= 1")
        ax.legend()
        return fig

    return interactive_figure(draw, p=widgets.FloatSlider(1.0, min=0.3, max=1.5, step=0.05))


# ----------------------------------------------------------------------------- chapter 04

KERNELS = {
    "identity": "0 0 0; 0 1 0; 0 0 0",
    "box blur": "1/9 1/9 1/9; 1/9 1/9 1/9; 1/9 1/9 1/9",
    "Gaussian blur": "1/16 2/16 1/16; 2/16 4/16 2/16; 1/16 2/16 1/16",
    "sharpen": "0 -1 0; -1 5 -1; 0 -1 0",
    "Sobel x (vertical edges)": "1 0 -1; 2 0 -2; 1 0 -1",
    "Sobel y (horizontal edges)": "1 2 1; 0 0 0; -1 -2 -1",
    "Laplacian": "0 1 0; 1 -4 1; 0 1 0",
    "emboss": "-2 -1 0; -1 1 1; 0 1 2",
}


def parse_kernel(text: str) -> np.ndarray:
    """A square kernel from text: rows separated by ';' or new lines, entries by spaces or commas, fractions
    allowed ("1/9"). ``parse_kernel("1 0 -1; 2 0 -2; 1 0 -1")`` is the Sobel x kernel."""
    from fractions import Fraction

    rows = [row.replace(",", " ").split() for row in text.replace("\n", ";").split(";") if row.strip()]
    try:
        kernel = np.array([[float(Fraction(entry)) for entry in row] for row in rows])
    except (ValueError, ZeroDivisionError):
        raise ValueError(f"kernel entries must be numbers like 2, -0.5 or 1/9, got {text!r}") from None
    if kernel.ndim != 2 or kernel.shape[0] != kernel.shape[1] or kernel.shape[0] % 2 == 0:
        raise ValueError(f"kernel must be square with an odd size (e.g. 3 rows of 3 numbers), got {text!r}")
    return kernel


def _message_figure(message: str) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(6, 1.5))
    ax.text(0.5, 0.5, message, ha="center", va="center", wrap=True)
    ax.axis("off")
    return fig


def kernel_explorer() -> widgets.VBox:
    """A kernel (a preset or typed in) applied to a Fashion-MNIST image: image, kernel, feature map (04.06)."""
    from .cnn import conv2d_im2col
    from .data import FASHION_CLASSES, load_fashion_mnist

    images, labels = load_fashion_mnist("test")
    choices = {FASHION_CLASSES[c]: images[np.flatnonzero(labels == c)[0]] / 255.0 for c in (7, 1, 8, 0, 9, 5)}

    def draw(image: str, kernel: str) -> plt.Figure:
        try:
            w = parse_kernel(kernel)
        except ValueError as error:
            return _message_figure(str(error))
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
        ax_w.set_title("kernel w")
        bound = max(np.abs(y).max(), 1e-12)
        shown = ax_y.imshow(y, cmap="RdBu_r", vmin=-bound, vmax=bound)
        fig.colorbar(shown, ax=ax_y, fraction=0.046)
        ax_y.set_title(r"feature map $w \star x$ (zero padding)")
        for ax in (ax_x, ax_w, ax_y):
            ax.set(xticks=[], yticks=[])
        return fig

    preset = widgets.Dropdown(options=list(KERNELS), value="Sobel x (vertical edges)", description="preset")
    kernel = widgets.Text(KERNELS[preset.value], description="kernel", continuous_update=False)
    preset.observe(lambda change: setattr(kernel, "value", KERNELS[change["new"]]), names="value")
    box = interactive_figure(draw, image=widgets.Dropdown(options=list(choices)), kernel=kernel)
    box.children = (widgets.HBox([box.children[0].children[0], preset]), kernel, box.children[1])
    return box


def conv_arithmetic() -> widgets.VBox:
    """The sliding window of a 2-D convolution: input size n, kernel k, padding p, stride s, dilation d and the
    output size ``floor((n + 2p - d(k - 1) - 1) / s) + 1`` (04.11)."""
    from matplotlib.patches import Rectangle

    from .cnn import conv_output_size

    def draw(n: int, k: int, p: int, s: int, d: int) -> plt.Figure:
        try:
            m = conv_output_size(n, k, p, s, d)
        except ValueError as error:
            return _message_figure(f"n = {n}, k = {k}, p = {p}, s = {s}, d = {d}: {error}")
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
        return fig

    return interactive_figure(
        draw,
        n=widgets.IntSlider(7, min=3, max=12),
        k=widgets.IntSlider(3, min=1, max=5),
        p=widgets.IntSlider(1, min=0, max=3),
        s=widgets.IntSlider(2, min=1, max=3),
        d=widgets.IntSlider(1, min=1, max=3),
    )


def receptive_field_explorer() -> widgets.VBox:
    """The receptive field of the centre output of a stack of identical convolutions on a 28 x 28 image, from
    autograd, against the formula ``r_L = 1 + sum_l d_l (k_l - 1) prod_{j<l} s_j`` (04.15)."""
    import torch
    from matplotlib.colors import ListedColormap

    from .cnn import conv_output_size, receptive_field, receptive_field_mask
    from .data import load_fashion_mnist

    images, _ = load_fashion_mnist("test")
    image = images[0] / 255.0

    def draw(layers: int, k: int, s: int, d: int) -> plt.Figure:
        size, padding = 28, d * (k - 1) // 2
        try:
            for _ in range(layers):
                size = conv_output_size(size, k, padding, s, d)
        except ValueError:
            return _message_figure(f"{layers} layers of k = {k}, s = {s}, d = {d} shrink 28 x 28 to nothing")
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
        return fig

    return interactive_figure(
        draw,
        layers=widgets.IntSlider(3, min=1, max=6),
        k=widgets.IntSlider(3, min=1, max=7),
        s=widgets.IntSlider(1, min=1, max=3),
        d=widgets.IntSlider(1, min=1, max=4),
    )


def deepwalk_training() -> widgets.VBox:
    """DeepWalk embeddings of the karate club after a number of epochs of skip-gram with negative sampling,
    projected on their first two principal components and coloured by faction (04.26)."""
    from .cnn import (
        principal_components,
        random_walks,
        skipgram_neg_sampling,
        skipgram_pairs,
        within_across_cosine,
    )
    from .data import load_karate_club

    G, club = load_karate_club()
    walks = random_walks(G, 10, 20, rng=0)
    pairs = np.concatenate([skipgram_pairs(walk, 3) for walk in walks])
    visits = np.bincount(np.concatenate(walks), minlength=len(club))  # noise distribution ~ visits^(3/4)

    def draw(epochs: int) -> plt.Figure:
        X, _ = skipgram_neg_sampling(
            pairs, len(club), dim=16, epochs=epochs, lr=0.02, batch=256, counts=visits, rng=0
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
        return fig

    return interactive_figure(draw, epochs=widgets.IntSlider(5, min=0, max=10))
