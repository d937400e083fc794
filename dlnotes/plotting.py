"""One figure style for the whole book, and small figure helpers."""

from __future__ import annotations

import io
import math

import matplotlib as mpl
import matplotlib.colors as mcolors
import matplotlib.pyplot as plt
import networkx as nx
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import LineCollection
from PIL import Image, ImageOps

from .validation import check_array, check_int, check_positive, check_vector

STYLE = {
    "figure.figsize": (6.4, 4.0),
    "figure.dpi": 100,
    "savefig.dpi": 100,
    "savefig.bbox": "tight",
    "figure.subplot.bottom": 0.13,  # room for the x label's descenders at 11 pt (0.11 cut them off a 4-inch figure)
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
    """Render a figure to PNG bytes, cropped as ``savefig(bbox_inches="tight")`` crops it (`tight_pixels`)."""
    buffer = io.BytesIO()
    tight_pixels(fig).save(buffer, format="PNG")
    return buffer.getvalue()


def compact_png(fig: mpl.figure.Figure) -> bytes:
    """Render a figure to a PNG with a palette of 256 colours: a third of the bytes of `figure_png`, and
    indistinguishable for line plots and heat maps (the frames of the website's widgets)."""
    return _palette(tight_pixels(fig))


def palette_png(png: bytes) -> bytes:
    """The PNG image `png` with its colours reduced to a palette of 256 (fast octree quantisation)."""
    return _palette(Image.open(io.BytesIO(png)).convert("RGB"))


def tight_pixels(fig: mpl.figure.Figure) -> Image.Image:
    """The figure's pixels within its tight bounding box and savefig's margin (``savefig.pad_inches``).

    The figure is drawn once (``savefig(bbox_inches="tight")`` draws it twice) and the pixels are cropped;
    drawing the same figure again after changing its artists reuses its cached text layout. Only when
    something lies beyond the figure's edge is it left to savefig, which enlarges the canvas."""
    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    canvas.draw()
    tight = fig.get_tightbbox(canvas.get_renderer())
    width, height = fig.get_size_inches()
    if tight.x0 < 0 or tight.y0 < 0 or tight.x1 > width or tight.y1 > height:
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", bbox_inches="tight")
        return Image.open(buffer).convert("RGB")
    pad = math.ceil(mpl.rcParams["savefig.pad_inches"] * fig.dpi)  # white beyond the figure's edge
    figure = Image.fromarray(np.asarray(canvas.buffer_rgba())).convert("RGB")
    pixels = ImageOps.expand(figure, pad, mcolors.to_hex(fig.get_facecolor()))
    left, bottom, right, top = np.array(tight.extents) * fig.dpi  # from the figure's lower left corner
    rows = figure.size[1]  # the box with its margin, in the rows and columns of the expanded image:
    return pixels.crop(
        (int(left), int(rows - top), math.ceil(right) + 2 * pad, math.ceil(rows - bottom) + 2 * pad)
    )


def _palette(image: Image.Image) -> bytes:
    buffer = io.BytesIO()  # zlib's default level: 7 times faster than the optimised PNG, 12 % larger
    image.quantize(256, method=Image.Quantize.FASTOCTREE).save(buffer, format="PNG")
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


_LAYOUTS: dict = {}  # graph (nodes, edges) -> positions, so that a graph is laid out once per session


def graph_layout(G: nx.Graph) -> dict:
    """Node positions node -> (x, y) for drawing `G`, the same in every figure: the Kamada-Kawai layout
    (placement by graph distances, no randomness), computed once per graph and cached."""
    if not isinstance(G, nx.Graph):
        raise TypeError(f"G must be a networkx graph, got {type(G).__name__}")
    if G.number_of_nodes() == 0:
        raise ValueError("G must have at least one node, got an empty graph")
    key = (tuple(G.nodes), frozenset(frozenset(e) for e in G.edges))
    if key not in _LAYOUTS:
        pos = nx.kamada_kawai_layout(G) if G.number_of_nodes() > 1 else {v: np.zeros(2) for v in G.nodes}
        _LAYOUTS[key] = {v: (float(p[0]), float(p[1])) for v, p in pos.items()}
    return dict(_LAYOUTS[key])


def draw_graph_signal(
    G: nx.Graph,
    x,
    ax=None,
    pos: dict | None = None,
    cmap: str = "coolwarm",
    label: str | None = None,
    *,
    vmin: float | None = None,
    vmax: float | None = None,
    node_size: float = 120,
    title: str | None = None,
    colorbar: bool = True,
):
    """Draw the graph `G` with node m coloured by the signal x[m] (x: (M,), nodes in `G`'s order), edges in
    light grey, and a colour bar labelled `label`. Positions `pos` default to `graph_layout(G)`.

    Without `vmin`/`vmax` a signal with both signs gets limits symmetric about 0 (zero is the neutral colour
    of the default diverging map), otherwise its own range. Returns the axes.
    """
    if not isinstance(G, nx.Graph):
        raise TypeError(f"G must be a networkx graph, got {type(G).__name__}")
    x = check_vector(x, "x", G.number_of_nodes())
    node_size = check_positive(node_size, "node_size")
    pos = graph_layout(G) if pos is None else pos
    if not isinstance(pos, dict) or any(v not in pos for v in G.nodes):
        raise ValueError("pos must be a dict with a position (x, y) for every node of G")
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 4))
    if vmin is None and vmax is None and x.min() < 0 < x.max():
        vmax = float(np.abs(x).max())
        vmin = -vmax
    xy = np.array([pos[v] for v in G.nodes], dtype=float)
    index = {v: i for i, v in enumerate(G.nodes)}
    segments = [(xy[index[u]], xy[index[v]]) for u, v in G.edges]
    ax.add_collection(LineCollection(segments, colors="lightgrey", linewidths=1.0, zorder=1))
    dots = ax.scatter(
        *xy.T, c=x, cmap=cmap, vmin=vmin, vmax=vmax, s=node_size, edgecolors="black", linewidths=0.5, zorder=2
    )
    if colorbar:
        bar = ax.figure.colorbar(dots, ax=ax, shrink=0.8)
        if label is not None:
            bar.set_label(label)
    ax.set_aspect("equal")
    ax.autoscale_view()
    ax.set_axis_off()
    if title is not None:
        ax.set_title(title)
    return ax
