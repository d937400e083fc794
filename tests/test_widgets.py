"""Every widget of the book (the registry `dlnotes.widgets.WIDGETS`, filled by importing every chapter module of
the package): a default figure, a redraw for every control, labels a reader understands, controls that keep
their width."""

import base64
import importlib
import pkgutil
import re

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import pytest

import dlnotes.widgets
from dlnotes.cnn import KERNELS
from dlnotes.widgets import WIDGETS, interactive_figure
from dlnotes.widgets.cnn import kernel_text, parse_kernel

for module in pkgutil.iter_modules(dlnotes.widgets.__path__):
    importlib.import_module(f"dlnotes.widgets.{module.name}")

PNG_MAGIC = b"\x89PNG"
CHAPTER_MODULES = {"connectionism", "feedforward", "optimization", "cnn"}


def shown_png(box: widgets.VBox) -> bytes:
    (output,) = box.children[-1].outputs
    return base64.b64decode(output["data"]["image/png"])


def controls_of(box: widgets.VBox) -> list:
    return list(box.children[0].children)


def another_value(control):
    if isinstance(control, widgets.Dropdown):
        return next(option for option in control.options if option != control.value)
    if isinstance(control, widgets.Text):
        return "0 1 0; 1 -4 1; 0 1 0" if control.value != "0 1 0; 1 -4 1; 0 1 0" else "1"
    return control.max if control.value != control.max else control.min


def test_every_chapter_module_of_dlnotes_widgets_is_registered():
    assert {name.split(".")[0] for name in WIDGETS} == CHAPTER_MODULES and len(WIDGETS) >= 15


@pytest.mark.parametrize("name", sorted(WIDGETS))
def test_widget_shows_a_default_figure_and_every_control_redraws_it(name):
    box = WIDGETS[name]()
    assert shown_png(box).startswith(PNG_MAGIC)
    for control in controls_of(box):
        before = shown_png(box)
        control.value = another_value(control)
        assert shown_png(box) != before, f"{control.description!r} did not change the figure"


@pytest.mark.parametrize("name", sorted(WIDGETS))
def test_controls_are_labelled_in_words_and_keep_their_width(name):
    for control in controls_of(WIDGETS[name]()):
        assert control.description and not re.fullmatch(r"\w+_\w+", control.description), control.description
        assert control.layout.min_width == dlnotes.widgets.core.control_width(control.description)


def test_interactive_figure_shows_the_default_and_redraws_on_change():
    calls = []

    def draw(a, b):
        calls.append((a, b))
        fig, ax = plt.subplots()
        ax.plot([a, b])
        return fig

    box = interactive_figure(draw, a=widgets.IntSlider(1), b=widgets.Dropdown(options=["x", "y"]))
    assert calls == [(1, "x")] and shown_png(box).startswith(PNG_MAGIC)
    first = shown_png(box)
    controls_of(box)[0].value = 5
    assert calls[-1] == (5, "x") and shown_png(box) != first
    assert controls_of(box)[0].description == "a"


BAD_INPUT = [  # (call, error, message)
    (lambda: interactive_figure("not a function", a=widgets.IntSlider()), TypeError, "draw must be callable"),
    (lambda: interactive_figure(lambda: None), ValueError, "at least one control"),
    (lambda: interactive_figure(lambda a: None, a=3), TypeError, "control 'a' must be an ipywidgets"),
]


@pytest.mark.parametrize(("call", "error", "message"), BAD_INPUT)
def test_bad_input_gets_a_clear_error(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_parse_kernel_reads_rows_and_fractions():
    assert np.array_equal(parse_kernel("1 0 -1; 2 0 -2\n1, 0, -1"), [[1, 0, -1], [2, 0, -2], [1, 0, -1]])
    for name, kernel in KERNELS.items():
        assert np.allclose(parse_kernel(kernel_text(kernel)), kernel), name
    assert kernel_text(KERNELS["box blur"]).startswith("1/9 1/9")
    for bad in ("1 2; 3 4", "1 2 3; 4 5", "a b c; 1 2 3; 1 2 3", "1/0"):
        with pytest.raises(ValueError, match="kernel"):
            parse_kernel(bad)


def test_kernel_explorer_presets_and_typed_kernels_redraw():
    box = WIDGETS["cnn.kernel_explorer"]()
    _, preset, kernel = controls_of(box)
    before = shown_png(box)
    preset.value = "Laplacian"
    assert kernel.value == kernel_text(KERNELS["Laplacian"]) and shown_png(box) != before
    kernel.value = "1 2; 3"  # a typo shows a message instead of raising in the widget
    assert shown_png(box).startswith(PNG_MAGIC)


@pytest.mark.parametrize("name", ["cnn.conv_arithmetic", "cnn.receptive_field_explorer"])
def test_impossible_layer_settings_show_a_message(name):
    box = WIDGETS[name]()
    controls = {c.description.split()[-1]: c for c in controls_of(box)}
    if "n" in controls:
        controls["p"].value, controls["n"].value, controls["k"].value, controls["d"].value = 0, 3, 5, 3
    else:
        controls["k"].value, controls["s"].value, controls["L"].value = 2, 3, 6
    assert shown_png(box).startswith(PNG_MAGIC)
