"""The alt text of the book's figures (dlnotes.alt_text) and how it reaches the notebook's output."""

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.core.pylabtools import select_figure_formats

from dlnotes.alt_text import alt_text, describe, show_alt_texts
from dlnotes.plotting import show_images
from dlnotes.widgets.core import frame_alt_text

from conftest import bad_input_test


@pytest.fixture
def fig():
    fig, (left, right) = plt.subplots(1, 2)
    left.plot([1, 10, 100], label="SGD")
    left.plot([100, 10, 1], label=r"$\eta = 0.1$")
    left.set(yscale="log", xlabel="step $t$", ylabel=r"loss $\mathcal{L}$", title="training")
    left.legend()
    image = right.imshow(np.arange(12.0).reshape(3, 4))
    fig.colorbar(image, ax=right, label="weight")
    yield fig
    plt.close(fig)


def test_the_authors_words_come_first_then_what_the_figure_says(fig):
    describe(fig, "Two loss curves that cross; the weights of the layer beside them.")
    text = alt_text(fig)
    assert text.startswith("Two loss curves that cross; the weights of the layer beside them. 2 panels.")
    assert "Panel 1, “training”: shows 2 lines" in text
    assert "x axis: step t from" in text and "y axis: loss L from" in text and "log scale" in text
    assert "legend: SGD, η = 0.1" in text  # TeX as a screen reader can say it
    assert "Panel 2: shows an image of 3 by 4 pixels" in text
    assert "Colour bar “weight” from 0 to 11." in text


def test_without_a_description_the_figure_still_says_what_it_shows(fig):
    assert alt_text(fig).startswith("2 panels. Panel 1, “training”")


def test_a_grid_of_images_is_summed_up_and_its_empty_cells_left_out():
    grid = show_images(np.zeros((10, 4, 4)), titles=[f"digit {k}" for k in range(10)], ncols=4)  # 12 cells
    assert (
        alt_text(grid)
        == "A grid of 10 images titled digit 0, digit 1, digit 2, digit 3, digit 4, digit 5, digit 6, digit 7 and 2 more."
    )
    plt.close(grid)


def test_the_notebook_stores_the_alt_text_with_the_figure(fig):
    """In IPython the PNG formatter returns the alt text as the output's metadata, once however often it is set up."""
    shell = InteractiveShell.instance()
    try:
        select_figure_formats(shell, {"png"})  # what the inline backend registers
        show_alt_texts()
        show_alt_texts()
        describe(fig, "Two loss curves and the weights of a layer.")
        data, metadata = shell.display_formatter.format(fig)
    finally:
        InteractiveShell.clear_instance()
    assert data["image/png"]  # the picture itself is unchanged
    assert metadata["image/png"]["alt"] == alt_text(fig)


def test_a_widget_frame_says_which_control_values_it_shows(fig):
    controls = {"eta": widgets.FloatSlider(0.1, description=r"learning rate $\eta$")}
    text = frame_alt_text(fig, controls, {"eta": 0.1})
    assert text.startswith(alt_text(fig)) and text.endswith("Drawn for learning rate η = 0.1.")


test_bad_input = bad_input_test(
    [
        (
            lambda: describe("figure", "a sentence of some words"),
            TypeError,
            "fig must be a matplotlib Figure",
        ),
        (lambda: describe(plt.figure(), "a plot"), ValueError, "at least 4 words"),
        (lambda: alt_text(None), TypeError, "fig must be a matplotlib Figure"),
    ]
)
