"""The machinery of the book's interactive figures: controls that redraw a matplotlib figure, and the registry
of every widget of the book (so that the tests can try them all).

The figure is stored in an ``Output`` widget as a PNG, so the executed notebook keeps it in its widget state:
the static website shows the figure for the default values, a live kernel redraws it on every change.
"""

from __future__ import annotations

import base64
from collections.abc import Callable

import ipywidgets as widgets
import matplotlib.pyplot as plt

from ..plotting import figure_png
from ..validation import check_callable

WIDGETS: dict[str, Callable[[], widgets.VBox]] = {}  # "chapter_module.builder" -> builder, filled by @widget
TRACK_WIDTH = 200  # px: the least width of a control beyond its label, so that a slider track stays usable


def widget(builder: Callable[[], widgets.VBox]) -> Callable[[], widgets.VBox]:
    """Register a widget builder (a function without arguments that returns the widget)."""
    WIDGETS[f"{builder.__module__.rsplit('.', 1)[-1]}.{builder.__name__}"] = builder
    return builder


def interactive_figure(draw: Callable[..., plt.Figure], **controls: widgets.ValueWidget) -> widgets.VBox:
    """Controls above a figure that ``draw(**values)`` redraws when a control changes.

    `draw` receives one keyword argument per control (its current value) and returns a matplotlib figure.
    Give each control a `description` a reader understands (words or maths, not a Python name). Example::

        interactive_figure(plot_recall, noise=widgets.FloatSlider(0.1, min=0, max=0.5, description="noise"))

    The controls wrap onto several lines rather than shrink. Returns ``VBox([controls, figure])``.
    """
    check_callable(draw, "draw")
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
        control.layout.min_width = control_width(control.description)
        if hasattr(control.style, "description_width"):
            control.style.description_width = "initial"  # the whole label, not a fixed cut-off
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
    box = widgets.Box(list(controls.values()), layout=widgets.Layout(flex_flow="row wrap"))
    return widgets.VBox([box, output])


def control_width(description: str) -> str:
    """The least width of a control labelled `description`: the label (about 8 px a character) and the track."""
    return f"{8 * len(description) + TRACK_WIDTH}px"


def message_figure(message: str) -> plt.Figure:
    """A figure that only says `message`: what a widget shows for settings that make no sense."""
    fig, ax = plt.subplots(figsize=(6, 1.5))
    ax.text(0.5, 0.5, message, ha="center", va="center", wrap=True)
    ax.axis("off")
    return fig
