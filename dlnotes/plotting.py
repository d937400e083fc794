"""One figure style for the whole book, and small figure helpers."""

from __future__ import annotations

import io

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
from PIL import Image

from .validation import check_array, check_int, check_positive

STYLE = {
    "figure.figsize": (6.4, 4.0),
    "figure.dpi": 100,
    "savefig.dpi": 100,
    "savefig.bbox": "tight",
    "font.size": 11,
    "axes.titlesize": 12,
    "axes.labelsize": 11,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "legend.frameon": False,
    "image.cmap": "viridis",
    "axes.prop_cycle": mpl.cycler(
        color=["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000"]
    ),  # Okabe–Ito: distinguishable with colour-blindness
}


def use_style() -> None:
    """Apply the book's matplotlib style (called by every notebook's setup cell)."""
    mpl.rcParams.update(STYLE)


def figure_png(fig: mpl.figure.Figure) -> bytes:
    """Render a figure to PNG bytes."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()


def compact_png(fig: mpl.figure.Figure) -> bytes:
    """Render a figure to a PNG with a palette of 256 colours: a third of the bytes of `figure_png`, and
    indistinguishable for line plots and heat maps (the frames of the website's widgets)."""
    return palette_png(figure_png(fig))


def palette_png(png: bytes) -> bytes:
    """The PNG image `png` with its colours reduced to a palette of 256 (fast octree quantisation)."""
    image = Image.open(io.BytesIO(png)).convert("RGB").quantize(256, method=Image.Quantize.FASTOCTREE)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", optimize=True)
    return buffer.getvalue()


def show_images(images, titles=None, ncols: int = 8, size: float = 1.2, cmap: str = "gray_r"):
    """Show a grid of grey-scale images ``images`` of shape (N, H, W); returns the figure."""
    images = check_array(images, "images", ndim=3)  # (N, H, W), N >= 1
    if titles is not None and len(titles) != len(images):
        raise ValueError(f"titles must have one entry per image ({len(images)}), got {len(titles)}")
    n = len(images)
    ncols, size = min(check_int(ncols, "ncols", 1), n), check_positive(size, "size")
    nrows = -(-n // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(size * ncols, size * nrows + 0.3 * (titles is not None)))
    for k, ax in enumerate(np.atleast_1d(axes).ravel()):
        ax.axis("off")
        if k < n:
            ax.imshow(images[k], cmap=cmap)
            if titles is not None:
                ax.set_title(str(titles[k]), fontsize=9)
    return fig
