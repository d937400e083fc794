import io
import itertools

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np

from dlnotes import plotting, use_style

from conftest import bad_input_test

PNG_MAGIC = b"\x89PNG"


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


def test_compact_png_keeps_the_picture_in_a_third_of_the_bytes():
    from PIL import Image

    fig, ax = plt.subplots()
    t = np.linspace(0, 6, 50)
    ax.imshow(np.sin(t)[:, None] * np.cos(t)[None, :])  # a heat map, as the widgets draw
    ax.plot(np.linspace(0, 49, 100), 25 + 20 * np.sin(np.linspace(0, 6, 100)), "w")
    full, compact = plotting.figure_png(fig), plotting.compact_png(fig)
    plt.close(fig)
    images = [Image.open(io.BytesIO(png)) for png in (full, compact)]
    assert compact.startswith(b"\x89PNG") and images[1].mode == "P"
    (w0, h0), (w1, h1) = images[0].size, images[1].size
    assert abs(w0 - w1) <= 1 and abs(h0 - h1) <= 1, "cropped as savefig's tight bounding box, up to rounding"
    full_rgb, compact_rgb = (np.asarray(image.convert("RGB"), float) for image in images)
    h, w = min(h0, h1) - 1, min(w0, w1) - 1
    error = min(  # savefig places the box at a fraction of a pixel, the crop at a whole one
        np.abs(full_rgb[i : i + h, j : j + w] - compact_rgb[k : k + h, m : m + w]).mean()
        for i, j, k, m in itertools.product((0, 1), repeat=4)
    )
    assert len(compact) < 0.6 * len(full) and error < 3


def test_compact_png_shows_what_lies_outside_the_axes_as_savefig_does():
    from PIL import Image

    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([0, 1], [0, 1], label="a line")
    ax.legend(loc="upper left", bbox_to_anchor=(1.5, 1))  # beyond the figure's right edge
    full, compact = plotting.figure_png(fig), plotting.compact_png(fig)
    plt.close(fig)
    assert Image.open(io.BytesIO(compact)).size == Image.open(io.BytesIO(full)).size


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
