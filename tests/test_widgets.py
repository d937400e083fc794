"""Every widget of the book (the registry `dlnotes.widgets.WIDGETS`, filled by importing every chapter module of
the package): a default figure, a redraw for every control, labels a reader understands, controls that keep
their width."""

import base64
import importlib
import math
import pkgutil
import re
import warnings

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import pytest

import dlnotes.widgets
from dlnotes.cnn import KERNELS
from dlnotes.plotting import palette_png
from dlnotes.widgets import WIDGETS, interactive_figure
from dlnotes.widgets.cnn import kernel_text, parse_kernel
from dlnotes.widgets.core import FRAMES_SWITCH, MAX_FRAMES, MAX_SLIDER_VALUES, frame_values
from dlnotes.widgets.optimization import diverged_at

from conftest import ROOT, bad_input_test

for module in pkgutil.iter_modules(dlnotes.widgets.__path__):
    importlib.import_module(f"dlnotes.widgets.{module.name}")

PNG_MAGIC = b"\x89PNG"
CHAPTER_MODULES = {
    "connectionism",
    "feedforward",
    "optimization",
    "cnn",
    "rnn",
    "transformers",
    "gdl",
    "tricks",
    "theory",
    "generative",
    "ethics",
}


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
        width, label = int(control.layout.min_width.removesuffix("px")), 8 * len(control.description)
        if isinstance(control, widgets.Dropdown):  # as wide as its label and longest option, not a slider
            longest = 8 * max(len(option) for option in control._options_labels)  # as displayed
            assert label + longest < width <= label + longest + 60, (control.description, width)
        else:
            assert width >= label + 200, (control.description, width)


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


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)


def test_parse_kernel_reads_rows_and_fractions():
    assert np.array_equal(parse_kernel("1 0 -1; 2 0 -2\n1, 0, -1"), [[1, 0, -1], [2, 0, -2], [1, 0, -1]])
    for name, kernel in KERNELS.items():
        assert np.allclose(parse_kernel(kernel_text(kernel)), kernel), name
    assert kernel_text(KERNELS["box blur"]).startswith("1/9 1/9")
    for bad in ("1 2; 3 4", "1 2 3; 4 5", "a b c; 1 2 3; 1 2 3", "1/0"):
        with pytest.raises(ValueError, match="kernel"):
            parse_kernel(bad)


def test_kernel_explorer_uses_the_preset_until_a_kernel_is_typed():
    box = WIDGETS["cnn.kernel_explorer"]()
    _, preset, kernel = controls_of(box)
    sobel = shown_png(box)
    preset.value = "Laplacian"
    laplacian = shown_png(box)
    kernel.value = kernel_text(KERNELS["Sobel x (vertical edges)"])  # typed: it overrides the preset
    assert laplacian != sobel and shown_png(box) not in (laplacian, sobel)
    kernel.value = ""
    assert shown_png(box) == laplacian
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


# ----------------------------------------------------------------------------- the website's precomputed frames

needs_stack = pytest.mark.skipif(
    not hasattr(widgets, "Stack"), reason="the website's frames need ipywidgets >= 8"
)


def frames_in(node) -> list:
    """The Image frames under a (nested) Stack, in order."""
    return (
        [node]
        if isinstance(node, widgets.Image)
        else [f for child in node.children for f in frames_in(child)]
    )


def shown_frame(box, indices=None) -> widgets.Image:
    """The frame the browser shows when the pickers stand at `indices` (default: where they are)."""
    node, pickers = box.children[1], controls_of(box)
    for level, picker in enumerate(pickers):
        node = node.children[picker.index if indices is None else indices[level]]
    assert isinstance(node, widgets.Image), "one nested Stack per picker"
    return node


def default_and_one_other(controls, frames) -> dict[str, list]:
    """`frame_values` cut to each control's default and the value the browser test moves it to (the last, or the
    first where the default is last): the book's build draws every frame, and the browser tests of the built site
    try them; here the frame player is checked on 2 to 8 frames a widget."""
    values = {}
    for name, options in frame_values(controls, frames).items():
        default = controls[name].value
        other = options[0] if default == options[-1] else options[-1]
        values[name] = [v for v in options if v in (default, other)]
    return values


@pytest.mark.frames
@needs_stack
@pytest.mark.parametrize("name", sorted(WIDGETS))
def test_the_website_version_switches_between_precomputed_frames(name, monkeypatch):
    live = shown_png(WIDGETS[name]())
    monkeypatch.setenv(FRAMES_SWITCH, "1")
    monkeypatch.setattr(dlnotes.widgets.core, "frame_values", default_and_one_other)
    box = WIDGETS[name]()
    pickers, frames = controls_of(box), frames_in(box.children[1])
    assert 2 <= len(frames) <= MAX_FRAMES
    assert shown_frame(box).value == palette_png(live), (
        "the default frame is the live widget's default figure"
    )
    from ipywidgets.widgets.widget import _instances  # ipywidgets 8: every widget alive in this process
    from ipywidgets.widgets.widget_link import Link

    links = [w for w in _instances.values() if isinstance(w, Link)]
    for level, picker in enumerate(pickers):
        assert isinstance(picker, widgets.SelectionSlider | widgets.Dropdown) and picker.description
        stacks = [w.target[0] for w in links if w.source == (picker, "index")]
        assert len(stacks) == math.prod(len(p.options) for p in pickers[:level]), (
            "one link per Stack of the level"
        )
        assert all(s.selected_index == picker.index for s in stacks)
        for index in range(len(picker.options)):
            if index != picker.index:
                indices = [p.index for p in pickers]
                indices[level] = index
                other = shown_frame(box, indices)
                assert other.value != shown_frame(box).value, (
                    f"{picker.description} = {picker.options[index][0]}"
                )
                assert other._dom_classes == ("frame-" + "-".join(map(str, indices)),)


@needs_stack
def test_frames_cover_every_option_and_slider_values_that_include_the_default(monkeypatch):
    monkeypatch.setenv(FRAMES_SWITCH, "1")
    calls = []

    def draw(kind, size, note):
        calls.append((kind, size, note))
        fig, ax = plt.subplots()
        ax.set_title(f"{kind} {size}")
        return fig

    box = interactive_figure(
        draw,
        kind=widgets.Dropdown(options=["a", "b", "c"], value="b"),
        size=widgets.FloatSlider(0.35, min=0.0, max=1.0, step=0.05),
        note=widgets.Text("fixed"),
    )
    sizes = sorted({size for _, size, _ in calls})
    assert {kind for kind, _, _ in calls} == {"a", "b", "c"} and {note for *_, note in calls} == {"fixed"}
    assert 0.35 in sizes and len(sizes) == MAX_SLIDER_VALUES and len(calls) == 3 * MAX_SLIDER_VALUES
    assert [p.description for p in controls_of(box)] == ["kind", "size"]
    assert "to use “note”" in box.children[2].value
    with pytest.raises(ValueError, match="frames="):
        interactive_figure(
            draw,
            **{name: widgets.Dropdown(options=list("abcdefg")) for name in ("kind", "size")},
            note=widgets.Text(),
        )
    with pytest.raises(ValueError, match="default"):
        interactive_figure(
            draw,
            frames={"size": [0.1, 0.2]},
            kind=widgets.Dropdown(options=["a"]),
            size=widgets.FloatSlider(0.35),
            note=widgets.Text(),
        )
    with pytest.raises(ValueError, match="not controls"):
        interactive_figure(draw, frames={"colour": [1]}, kind=widgets.Dropdown(options=["a"]))


def test_the_book_build_switches_the_widgets_to_frames():
    assert f'os.environ["{FRAMES_SWITCH}"] = "1"' in (ROOT / "_ext" / "dlnotes_site.py").read_text()


def test_a_diverged_run_is_marked_not_dropped():
    assert diverged_at([12.5, 3.0, np.nan]) == 2 and diverged_at([12.5, 2e4, 1.0]) == 1
    assert diverged_at([12.5, 1e-3]) is None
    box = WIDGETS["optimization.optimizer_race"]()
    step, momentum = controls_of(box)
    with warnings.catch_warnings():
        # overflow in a diverging run must not leak onto the page
        warnings.simplefilter("error", RuntimeWarning)
        step.value, momentum.value = -2.5, 0.99
    assert shown_png(box).startswith(PNG_MAGIC)
