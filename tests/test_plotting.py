import io

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pytest

from dlnotes import plotting, use_style

from conftest import bad_input_test, same_picture

PNG_MAGIC = b"\x89PNG"


def test_use_style_sets_the_book_style():
    mpl.rcdefaults()
    use_style()
    assert mpl.rcParams["axes.spines.top"] is False
    assert tuple(mpl.rcParams["figure.figsize"]) == plotting.STYLE["figure.figsize"]


def heat_map_figure(layout: str):
    fig, ax = plt.subplots(figsize=(5, 3.5))
    t = np.linspace(0, 6, 50)
    ax.imshow(np.sin(t)[:, None] * np.cos(t)[None, :])  # a heat map, as the widgets draw
    ax.plot(np.linspace(0, 49, 100), 25 + 20 * np.sin(np.linspace(0, 6, 100)), "w", label="a curve")
    ax.set(xlabel="$x$", ylabel="$y$", title="a heat map")
    if layout == "tight":  # savefig's white margin lies beyond the figure's edge
        fig.tight_layout()
    if layout == "outside":  # savefig enlarges the canvas
        ax.legend(loc="upper left", bbox_to_anchor=(1.5, 1))
    return fig


@pytest.mark.parametrize("layout", ["margins", "tight", "outside"])
def test_figure_png_shows_what_savefig_shows_with_a_tight_box(layout):
    fig = heat_map_figure(layout)
    reference = io.BytesIO()
    fig.savefig(reference, format="png", bbox_inches="tight", pad_inches=0.1)
    png = plotting.figure_png(fig)
    plt.close(fig)
    assert png.startswith(PNG_MAGIC) and same_picture(png, reference.getvalue())


def test_compact_png_is_the_figure_in_a_palette_of_256_colours_and_a_third_of_the_bytes():
    from PIL import Image

    fig = heat_map_figure("margins")
    full, compact = plotting.figure_png(fig), plotting.compact_png(fig)
    plt.close(fig)
    assert Image.open(io.BytesIO(compact)).mode == "P" and compact == plotting.palette_png(full)
    assert same_picture(full, compact) and len(compact) < 0.6 * len(full)


def test_show_images_lays_out_a_grid():
    fig = plotting.show_images(np.zeros((5, 8, 8)), titles=list("abcde"), ncols=3)
    assert len(fig.axes) == 6 and [ax.get_title() for ax in fig.axes[:5]] == list("abcde")
    plt.close(fig)


BAD_INPUT = [  # (call, error, message)
    (lambda: plotting.show_images(np.zeros((8, 8))), ValueError, "images must have 3 axes"),
    (lambda: plotting.show_images(np.zeros((0, 8, 8))), ValueError, "images must not be empty"),
    (lambda: plotting.show_images(np.zeros((2, 8, 8)), titles=["a"]), ValueError, "titles"),
    (lambda: plotting.show_images(np.zeros((2, 8, 8)), ncols=0), ValueError, "ncols"),
    (lambda: plotting.show_images(np.zeros((2, 8, 8)), size=-1), ValueError, "size"),
]


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
