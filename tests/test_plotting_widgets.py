import base64

import ipywidgets as widgets
import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pytest

from dlnotes import plotting, use_style
from dlnotes import widgets as book_widgets

PNG_MAGIC = b"\x89PNG"


def shown_png(box: widgets.VBox) -> bytes:
    (output,) = box.children[-1].outputs
    return base64.b64decode(output["data"]["image/png"])


def test_use_style_sets_the_book_style():
    mpl.rcdefaults()
    use_style()
    assert mpl.rcParams["axes.spines.top"] is False
    assert tuple(mpl.rcParams["figure.figsize"]) == plotting.STYLE["figure.figsize"]


def test_figure_png_renders_a_png():
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    assert plotting.figure_png(fig).startswith(PNG_MAGIC)
    plt.close(fig)


def test_show_images_lays_out_a_grid():
    fig = plotting.show_images(np.zeros((5, 8, 8)), titles=list("abcde"), ncols=3)
    assert len(fig.axes) == 6 and [ax.get_title() for ax in fig.axes[:5]] == list("abcde")
    plt.close(fig)


def test_show_images_rejects_bad_input():
    with pytest.raises(ValueError, match="images"):
        plotting.show_images(np.zeros((8, 8)))
    with pytest.raises(ValueError, match="titles"):
        plotting.show_images(np.zeros((2, 8, 8)), titles=["a"])
    with pytest.raises(ValueError, match="ncols"):
        plotting.show_images(np.zeros((2, 8, 8)), ncols=0)


def test_interactive_figure_shows_the_default_and_redraws_on_change():
    calls = []

    def draw(a, b):
        calls.append((a, b))
        fig, ax = plt.subplots()
        ax.plot([a, b])
        return fig

    box = book_widgets.interactive_figure(
        draw, a=widgets.IntSlider(1), b=widgets.Dropdown(options=["x", "y"])
    )
    assert calls == [(1, "x")] and shown_png(box).startswith(PNG_MAGIC)
    first = shown_png(box)
    box.children[0].children[0].value = 5
    assert calls[-1] == (5, "x") and shown_png(box) != first
    assert box.children[0].children[0].description == "a"


def test_interactive_figure_rejects_bad_arguments():
    with pytest.raises(TypeError, match="draw"):
        book_widgets.interactive_figure("not a function", a=widgets.IntSlider())
    with pytest.raises(ValueError, match="control"):
        book_widgets.interactive_figure(lambda: None)
    with pytest.raises(TypeError, match="'a'"):
        book_widgets.interactive_figure(lambda a: None, a=3)


@pytest.mark.parametrize(
    "builder",
    [
        book_widgets.perceptron_vs_max_margin,
        book_widgets.novikoff_bound,
        book_widgets.cover_phase_transition,
        book_widgets.hopfield_recall,
        book_widgets.ridge_polynomial,
        book_widgets.universal_approximation,
        book_widgets.relu_regions,
        book_widgets.activation_functions,
        book_widgets.quadratic_gd,
        book_widgets.optimizer_race,
        book_widgets.robbins_monro,
        book_widgets.kernel_explorer,
        book_widgets.conv_arithmetic,
        book_widgets.receptive_field_explorer,
        book_widgets.deepwalk_training,
    ],
)
def test_chapter_widgets_show_a_default_figure_and_redraw(builder):
    box = builder()
    before = shown_png(box)
    assert before.startswith(PNG_MAGIC)
    control = box.children[0].children[0]
    if isinstance(control, widgets.Dropdown):
        control.value = control.options[-1] if control.value == control.options[0] else control.options[0]
    else:
        control.value = control.min
    assert shown_png(box) != before


def test_parse_kernel_reads_rows_and_fractions():
    assert np.array_equal(
        book_widgets.parse_kernel("1 0 -1; 2 0 -2\n1, 0, -1"), [[1, 0, -1], [2, 0, -2], [1, 0, -1]]
    )
    assert np.allclose(book_widgets.parse_kernel(book_widgets.KERNELS["box blur"]), np.full((3, 3), 1 / 9))
    for bad in ("1 2; 3 4", "1 2 3; 4 5", "a b c; 1 2 3; 1 2 3", "1/0"):
        with pytest.raises(ValueError, match="kernel"):
            book_widgets.parse_kernel(bad)


def test_kernel_explorer_presets_and_typed_kernels_redraw():
    box = book_widgets.kernel_explorer()
    preset, kernel = box.children[0].children[1], box.children[1]
    before = shown_png(box)
    preset.value = "Laplacian"
    assert kernel.value == book_widgets.KERNELS["Laplacian"] and shown_png(box) != before
    kernel.value = "1 2; 3"  # a typo shows a message instead of raising in the widget
    assert shown_png(box).startswith(PNG_MAGIC)


@pytest.mark.parametrize("builder", [book_widgets.conv_arithmetic, book_widgets.receptive_field_explorer])
def test_impossible_layer_settings_show_a_message(builder):
    box = builder()
    controls = {c.description: c for c in box.children[0].children}
    if "n" in controls:
        controls["p"].value, controls["n"].value, controls["k"].value, controls["d"].value = 0, 3, 5, 3
    else:
        controls["k"].value, controls["s"].value, controls["layers"].value = 2, 3, 6
    assert shown_png(box).startswith(PNG_MAGIC)
