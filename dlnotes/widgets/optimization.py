"""Widgets of chapter 03 — optimization."""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from ..alt_text import describe
from ..optimization import (
    adam_step,
    gd,
    heavy_ball,
    nesterov,
    quadratic,
    rosenbrock,
    rosenbrock_grad,
    run_optimizer,
    sgd,
)
from ..validation import check_rng
from .core import interactive_figure, widget

LOSS_SHOWN = 1e4  # the optimizer race plots losses up to this; a run that exceeds it is marked as diverged


def _grid(f, xlim, ylim) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The values of f (a function of one point) over a 150 x 150 grid: x, y, f(x, y). Computed once per widget
    (or per setting): 22,500 calls of f cost more than drawing the figure."""
    x, y = np.meshgrid(np.linspace(*xlim, 150), np.linspace(*ylim, 150))
    z = np.array([f(np.array(p)) for p in np.stack([x.ravel(), y.ravel()], axis=1)]).reshape(x.shape)
    return x, y, z


def _contours(ax, grid, levels):
    """Contour lines of a `_grid`, with the grid's limits and the parameter axes labelled; returns them."""
    x, y, z = grid
    ax.set(xlim=(x.min(), x.max()), ylim=(y.min(), y.max()), xlabel=r"$\theta_1$", ylabel=r"$\theta_2$")
    return ax.contour(x, y, z, levels=levels, colors="lightgrey", linewidths=0.8)


@widget
def quadratic_gd() -> widgets.VBox:
    """Gradient descent on ``x^T Q x / 2`` with condition number kappa: the zig-zag path over the contours (03.23).
    One figure: its path, loss curve and title are updated, its contour lines redrawn when kappa changes."""
    fig = Figure(figsize=(10, 4))
    ax, ax_loss = fig.subplots(1, 2)
    (path,) = ax.plot([], [], "o-", ms=3, color="C0", zorder=3)
    leaving = ax.text(0.03, 0.03, "the path leaves the window: diverging", transform=ax.transAxes, color="C1")
    (loss,) = ax_loss.semilogy([], [], color="C0")
    ax_loss.set(xlabel="step $t$", ylabel=r"$f(\theta_t)$", title="stable iff $\\eta < 2/L$")
    shown = {}  # kappa -> the contour lines on show

    def draw(kappa: float, eta_times_L: float) -> Figure:
        problem = quadratic(kappa)
        xs = gd(problem.grad, np.array([1.0, 1.0 / np.sqrt(kappa)]) * 4, eta_times_L / problem.L, 60)
        if kappa not in shown:
            for contours in shown.values():
                contours.remove()
            shown.clear()
            grid = _grid(problem.f, (-5, 5), (-5, 5))
            shown[kappa] = _contours(ax, grid, np.logspace(-2, 2, 15) * kappa / 10)
        path.set_data(*xs.T)
        leaving.set_visible(bool(np.abs(xs).max() > 5))
        ax.set_title(rf"$\kappa = {kappa:.0f}$, $\eta = {eta_times_L:.2f}/L$")
        values = [problem.f(x) for x in xs]
        loss.set_data(np.arange(len(values)), values)
        ax_loss.relim()
        ax_loss.autoscale_view()
        if eta_times_L < 2:
            fate = "η < 2/L, so the loss goes to zero" + (
                ", the path zig-zagging across the valley since η > 1/L" if eta_times_L > 1 else ""
            )
        else:
            fate = "η ≥ 2/L, so gradient descent does not converge" + (
                " and diverges" if eta_times_L > 2 else ""
            )
        describe(
            fig,
            f"Left: 60 gradient-descent steps from the same start over the level sets of a quadratic with "
            f"condition number κ = {kappa:.0f}; right: the loss against the step on a log scale. Here {fate}.",
        )
        return fig

    return interactive_figure(
        draw,
        frames={"kappa": [1.0, 10.0, 30.0, 100.0], "eta_times_L": [0.5, 1.0, 1.5, 1.8, 1.95, 2.05]},
        kappa=widgets.FloatSlider(10.0, min=1.0, max=100.0, step=1.0, description="condition number κ"),
        eta_times_L=widgets.FloatSlider(1.8, min=0.1, max=2.1, step=0.05, description="step η · L"),
    )


def diverged_at(losses, limit: float = LOSS_SHOWN) -> int | None:
    """The first step whose loss is nan or above `limit` (off the plot), or None if the run stays below it."""
    gone = np.flatnonzero(~(np.asarray(losses) <= limit))
    return int(gone[0]) if gone.size else None


@widget
def optimizer_race() -> widgets.VBox:
    """GD, heavy ball, Nesterov and Adam on the Rosenbrock valley, with step-size and momentum sliders (03.29)."""
    x0, steps = np.array([-1.5, 2.0]), 400
    valley = _grid(rosenbrock, (-2, 2), (-1, 3))

    def draw(log10_eta: float, momentum: float) -> plt.Figure:
        eta = 10.0**log10_eta
        with np.errstate(over="ignore", invalid="ignore"):  # a diverging run is marked in the figure
            paths = {
                "GD": gd(rosenbrock_grad, x0, eta, steps),
                "heavy ball": heavy_ball(rosenbrock_grad, x0, eta, momentum, steps),
                "Nesterov": nesterov(rosenbrock_grad, x0, eta, momentum, steps),
                "Adam (η × 100)": run_optimizer(
                    adam_step, rosenbrock_grad, x0, steps, eta=100 * eta, beta1=momentum
                ),
            }
        fig, (ax, ax_loss) = plt.subplots(1, 2, figsize=(10, 4))
        _contours(ax, valley, np.logspace(-1, 3, 12))
        ax.plot(1, 1, "k*", ms=12)
        for name, xs in paths.items():
            with np.errstate(over="ignore", invalid="ignore"):
                losses = np.array([rosenbrock(x) for x in xs])
            stop = diverged_at(losses)
            label = name if stop is None else f"{name}: diverged at step {stop}"
            (line,) = ax.plot(*xs[:stop].T, lw=1.2, label=label)
            ax_loss.semilogy(losses[:stop], label=label, color=line.get_color())
            if stop is not None:
                ax_loss.plot(stop - 1, losses[stop - 1], "x", ms=9, mew=2, color=line.get_color())
        ax.set_title(rf"$\eta = 10^{{{log10_eta:.1f}}}$, momentum $\beta = {momentum:.2f}$")
        ax_loss.set(
            xlabel="step", ylabel="loss", ylim=(1e-6, LOSS_SHOWN), title=f"{steps} steps from (-1.5, 2)"
        )
        ax_loss.legend(fontsize=9)
        describe(
            fig,
            "Left: the paths of gradient descent, heavy ball, Nesterov and Adam (with a 100 times larger "
            "step) over the level sets of the Rosenbrock valley from (−1.5, 2), its minimum at (1, 1) marked by "
            "a star; right: their losses against the step on a log scale, a cross where a run diverged.",
        )
        return fig

    return interactive_figure(
        draw,
        frames={"log10_eta": [-4.0, -3.5, -3.0, -2.5], "momentum": [0.0, 0.5, 0.9, 0.99]},
        log10_eta=widgets.FloatSlider(-3.0, min=-4.0, max=-2.5, step=0.1, description="log₁₀ η"),
        momentum=widgets.FloatSlider(0.9, min=0.0, max=0.99, step=0.01, description="momentum β (Adam: β₁)"),
    )


@widget
def robbins_monro() -> widgets.VBox:
    """SGD on a noisy quadratic with steps ``eta_t = t^-p`` against a constant step (03.34)."""
    d, T = 200, 5000

    def draw(p: float) -> plt.Figure:
        fig, ax = plt.subplots(figsize=(6.5, 4))
        for name, schedule in (
            (f"$\\eta_t = t^{{-{p:.2f}}}$", lambda t: t**-p),
            ("constant 0.1", lambda t: 0.1),
        ):
            noise = check_rng(0)

            def grad_i(theta, _idx, noise=noise):
                return theta + noise.normal(
                    size=theta.shape
                )  # gradient of ||theta||^2 / 2 plus N(0, I) noise

            xs = sgd(grad_i, 1, np.ones(d), schedule, T, rng=0)
            ax.loglog(np.arange(1, T + 1), np.mean(xs[1:] ** 2, axis=1), label=name)
        ax.set(xlabel="step $t$", ylabel=r"$\|\theta_t\|^2 / d$", title="Robbins–Monro needs 1/2 < p <= 1")
        ax.legend()
        holds = "satisfies" if 0.5 < p <= 1 else "violates"
        describe(
            fig,
            f"Squared error per coordinate of SGD on a noisy quadratic in {d} dimensions against the step "
            f"on log–log axes, for the decaying step t to the minus {p:.2f} and a constant step 0.1, which "
            f"stalls at its noise floor; this exponent {holds} the Robbins–Monro conditions 1/2 < p ≤ 1.",
        )
        return fig

    return interactive_figure(
        draw, p=widgets.FloatSlider(1.0, min=0.3, max=1.5, step=0.05, description="decay exponent p")
    )
