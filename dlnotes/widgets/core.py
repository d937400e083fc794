"""The machinery of the book's interactive figures: controls that redraw a matplotlib figure, and the registry
of every widget of the book (so that the tests can try them all).

In a live kernel (JupyterLab, Colab) every change of a control redraws the figure through Python. The website
has no kernel: when the book is built, the environment variable ``DLNOTES_WIDGET_FRAMES=1`` (set by the book's
Sphinx extension, ``_ext/dlnotes_site.py``) makes `interactive_figure` draw the figure in advance for a grid
of control values, at most `MAX_FRAMES` frames, and return a widget that switches between them in the browser
alone: each control's position is ``jslink``-ed to the ``selected_index`` of a ``Stack`` of frames (one nested
``Stack`` per control). The executed notebook stores all frames in its widget state, so the site's own widget
renderer shows them offline.
"""

from __future__ import annotations

import base64
import math
import os
import time
from collections.abc import Callable, Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import traitlets

from ..alt_text import alt_text, spoken
from ..plotting import compact_png, figure_png
from ..validation import check_callable

WIDGETS: dict[str, Callable[[], widgets.VBox]] = {}  # "chapter_module.builder" -> builder, filled by @widget
TRACK_WIDTH = 200  # px: the least width of a slider beyond its label, so that its track stays usable
MENU_ARROW = 40  # px: a drop-down's room beyond its longest option
FRAMES_SWITCH = (
    "DLNOTES_WIDGET_FRAMES"  # "1": precompute frames for a page without a kernel (the book's build)
)
FRAMES_LOG = (
    "DLNOTES_FRAMES_LOG"  # a file: one line per precomputed widget (page, widget, frames, bytes, seconds)
)
MAX_FRAMES = 40  # per widget
MAX_SLIDER_VALUES = 7  # positions of one slider on the website, its default among them
SLIDERS = (widgets.IntSlider, widgets.FloatSlider)
SELECTIONS = (widgets.Dropdown, widgets.RadioButtons, widgets.ToggleButtons, widgets.Select)


class FrameImage(widgets.Image):
    """A precomputed frame: an Image whose tooltip is its alt text (the page's script makes it the image's alt).
    ipywidgets 8's view of an Image sets the tooltip as the title only when the model's `description` is empty and
    fails on a model without one, which the Image lacks: the frame has an empty one."""

    description = traitlets.Unicode("").tag(sync=True)


def widget(builder: Callable[[], widgets.VBox]) -> Callable[[], widgets.VBox]:
    """Register a widget builder (a function without arguments that returns the widget)."""
    WIDGETS[f"{builder.__module__.rsplit('.', 1)[-1]}.{builder.__name__}"] = builder
    return builder


def interactive_figure(
    draw: Callable[..., plt.Figure],
    frames: dict[str, Sequence] | None = None,
    **controls: widgets.ValueWidget,
) -> widgets.VBox:
    """Controls above a figure that ``draw(**values)`` redraws when a control changes.

    `draw` receives one keyword argument per control (its current value) and returns a matplotlib figure.
    Give each control a `description` a reader understands (words or maths, not a Python name). Example::

        interactive_figure(plot_recall, noise=widgets.FloatSlider(0.1, min=0, max=0.5, description="noise"))

    The controls wrap onto several lines rather than shrink. Returns ``VBox([controls, figure])``.

    For the website (``DLNOTES_WIDGET_FRAMES=1``) the figure is precomputed: every option of a dropdown, each
    slider at a few evenly spaced values that include its default, other controls (free text) at their
    default. `frames` chooses a control's values instead, ``frames={"n": [1, 2, 5, 10]}``; it is needed where
    the automatic grid would exceed `MAX_FRAMES` frames.
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
        _keep_width(control)
    frames = dict(frames or {})
    unknown = set(frames) - set(controls)
    if unknown:
        raise ValueError(f"frames names {sorted(unknown)}, which are not controls ({sorted(controls)})")
    if os.environ.get(FRAMES_SWITCH) == "1":
        return frame_player(draw, controls, frames)
    output = widgets.Output()

    def redraw(_change=None) -> None:
        setting = {name: control.value for name, control in controls.items()}
        fig = draw(**setting)
        png = base64.b64encode(figure_png(fig)).decode("ascii")
        alt = frame_alt_text(fig, controls, setting)
        plt.close(fig)
        output.outputs = (
            {
                "output_type": "display_data",
                "data": {"image/png": png, "text/plain": "<Figure>"},
                "metadata": {"image/png": {"alt": alt}},
            },
        )

    for control in controls.values():
        control.observe(redraw, names="value")
    redraw()
    box = widgets.Box(list(controls.values()), layout=widgets.Layout(flex_flow="row wrap"))
    return widgets.VBox([box, output])


def frame_alt_text(fig: plt.Figure, controls: dict[str, widgets.ValueWidget], setting: dict) -> str:
    """The alt text of a widget's figure: `alt_text` of the figure and the controls' values it was drawn for."""
    values = ", ".join(f"{spoken(controls[name].description)} = {value}" for name, value in setting.items())
    return f"{alt_text(fig)} Drawn for {values}."


def _keep_width(control: widgets.ValueWidget) -> None:
    control.layout.min_width = control_width(control)
    if hasattr(control.style, "description_width"):
        control.style.description_width = "initial"  # the whole label, not a fixed cut-off


def frame_values(controls: dict[str, widgets.ValueWidget], frames: dict[str, Sequence]) -> dict[str, list]:
    """The values for which the website shows the figure: per control, a list that contains its default."""
    sliders = [name for name, c in controls.items() if isinstance(c, SLIDERS) and name not in frames]
    values = {}
    for name, control in controls.items():
        if name in frames:
            values[name] = list(frames[name])
            if control.value not in values[name]:
                raise ValueError(f"frames[{name!r}] must contain the control's default {control.value!r}")
        elif isinstance(control, SELECTIONS):
            values[name] = list(control._options_values)
        elif name not in sliders:
            values[name] = [control.value]  # free text and the like: the default only
    chosen = math.prod(len(v) for v in values.values())
    per_slider = min(MAX_SLIDER_VALUES, int((MAX_FRAMES / chosen) ** (1 / len(sliders)))) if sliders else 0
    for name in sliders:
        values[name] = _slider_values(controls[name], per_slider)
    n_frames = math.prod(len(v) for v in values.values())
    if n_frames > MAX_FRAMES or (sliders and per_slider < 2):
        raise ValueError(
            f"{n_frames} frames for {', '.join(controls)} exceed {MAX_FRAMES}: choose fewer values with frames=..."
        )
    return values


def _slider_values(control, n: int) -> list:
    """`n` evenly spaced values of a slider on its steps, with the default replacing its nearest neighbour."""
    grid = (
        control.min
        + np.round((np.linspace(control.min, control.max, n) - control.min) / control.step) * control.step
    )
    grid[np.argmin(np.abs(grid - control.value))] = control.value
    cast = int if isinstance(control, widgets.IntSlider) else (lambda v: round(float(v), 12))
    return sorted({cast(v) for v in grid})


def frame_player(
    draw: Callable[..., plt.Figure], controls: dict[str, widgets.ValueWidget], frames: dict[str, Sequence]
) -> widgets.VBox:
    """The website's version of `interactive_figure`: the figure drawn for every combination of `frame_values`,
    one picker per varying control, and nested ``Stack`` widgets that the pickers switch through ``jslink``."""
    if not hasattr(widgets, "Stack"):
        raise RuntimeError(
            f"{FRAMES_SWITCH}=1 needs ipywidgets >= 8 (the Stack widget); this is {widgets.__version__}"
        )
    start = time.perf_counter()
    values = frame_values(controls, frames)
    varying = [name for name, options in values.items() if len(options) > 1]
    pickers = {name: _picker(controls[name], values[name]) for name in varying}
    defaults = {name: control.value for name, control in controls.items()}
    sizes = []

    def frame(setting: dict) -> FrameImage:
        fig = draw(**setting)
        png = compact_png(fig)
        alt = frame_alt_text(fig, controls, setting)  # the page's script makes the tooltip the image's alt
        plt.close(fig)
        sizes.append(len(png))
        position = "-".join(str(pickers[name].index) for name in varying)  # the pickers' indices, for tests
        return FrameImage(
            value=png,
            format="png",
            layout=widgets.Layout(max_width="100%"),
            tooltip=alt,
            _dom_classes=[f"frame-{position}"],
        )

    def stack(level: int, setting: dict) -> widgets.Widget:
        if level == len(varying):
            return frame(setting)
        name = varying[level]
        picker = pickers[name]
        children = []
        for index, value in enumerate(values[name]):
            picker.index = index  # so that the frame's class names this position
            children.append(stack(level + 1, {**setting, name: value}))
        picker.index = values[name].index(defaults[name])
        shown = widgets.Stack(children, selected_index=picker.index)
        widgets.jslink((picker, "index"), (shown, "selected_index"))
        return shown

    figure = stack(0, defaults)
    _log_frames(draw, len(sizes), sum(sizes), time.perf_counter() - start)
    fixed = ", ".join(f"“{controls[name].description}”" for name in controls if name not in varying)
    note = "Figures computed when the book was built, for the values on the controls. Open the notebook to try any value"
    caption = widgets.HTML(f"<small>{note}{f' and to use {fixed}' if fixed else ''}.</small>")
    box = widgets.Box(list(pickers.values()), layout=widgets.Layout(flex_flow="row wrap"))
    return widgets.VBox([box, figure, caption])


def _picker(control: widgets.ValueWidget, values: list) -> widgets.ValueWidget:
    """A control for the website that selects an index into `values`, labelled like `control`."""
    if isinstance(control, SELECTIONS):
        labels = dict(zip(control._options_values, control._options_labels, strict=True))
        picker = widgets.Dropdown(options=[(labels[v], i) for i, v in enumerate(values)])
    else:
        readout = getattr(control, "readout_format", "d")
        options = [(format(v, readout), i) for i, v in enumerate(values)]
        picker = widgets.SelectionSlider(options=options, continuous_update=True)
    picker.description = control.description
    picker.index = values.index(control.value)
    _keep_width(picker)
    return picker


def _log_frames(draw: Callable, n_frames: int, n_bytes: int, seconds: float) -> None:
    path = os.environ.get(FRAMES_LOG)
    if path:
        page = os.environ.get("DLNOTES_NOTEBOOK", "?")
        with open(path, "a", encoding="utf-8") as log:
            log.write(f"{page}\t{draw.__qualname__.split('.')[0]}\t{n_frames}\t{n_bytes}\t{seconds:.3f}\n")


def control_width(control: widgets.ValueWidget) -> str:
    """The least width of `control`: its label (about 8 px a character) and, for a drop-down, its longest option
    and the arrow, for any other control a slider's track."""
    label = 8 * len(control.description)
    if isinstance(control, widgets.Dropdown):
        return f"{label + 8 * max(len(option) for option in control._options_labels) + MENU_ARROW}px"
    return f"{label + TRACK_WIDTH}px"


def message_figure(message: str) -> plt.Figure:
    """A figure that only says `message`: what a widget shows for settings that make no sense."""
    fig, ax = plt.subplots(figsize=(6, 1.5))
    ax.text(0.5, 0.5, message, ha="center", va="center", wrap=True)
    ax.axis("off")
    return fig
