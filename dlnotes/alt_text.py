"""Alt text for the book's figures: what a screen reader says in place of a picture.

Every figure a notebook shows is a PNG; on the website it is an ``<img>`` whose ``alt`` must say what the figure
shows. The author says it in one or two sentences with `describe` (what is plotted and what the reader should
see); `alt_text` adds what can be read off the figure itself: panel titles, the axes with their labels, scales
and ranges, the named lines of the legends, images and colour bars. `show_alt_texts` (run by every notebook's
setup) makes IPython store that text with each figure it displays, as the output's metadata
``{"image/png": {"alt": ...}}``; the book's Sphinx extension turns it into the image's ``alt``.

Example::

    fig, ax = plt.subplots()
    ...
    describe(fig, "Training loss of SGD, momentum and Adam; Adam falls fastest.")
    plt.show()
"""

from __future__ import annotations

import math
import re
import unicodedata

import matplotlib as mpl
import matplotlib.pyplot as plt
from matplotlib.collections import LineCollection, PathCollection, PolyCollection, QuadMesh
from matplotlib.container import BarContainer
from matplotlib.contour import ContourSet

ATTRIBUTE = "dlnotes_alt"  # where `describe` keeps the author's words on the figure
MAX_NAMES = 8  # panels, legend entries or image titles described one by one; the rest are counted
MAX_GRID = 4  # more panels than this, each an image: summed up as a grid


def describe(fig: mpl.figure.Figure, text: str) -> mpl.figure.Figure:
    """Keep `text`, the author's description of `fig` (what it shows, what to see in it), for its alt text.
    Returns the figure."""
    if not isinstance(fig, mpl.figure.Figure):
        raise TypeError(f"fig must be a matplotlib Figure, got {type(fig).__name__}")
    if not isinstance(text, str) or len(text.split()) < 4:
        raise ValueError(f"text must describe the figure in a sentence of at least 4 words, got {text!r}")
    setattr(fig, ATTRIBUTE, text.strip())
    return fig


def alt_text(fig: mpl.figure.Figure) -> str:
    """The alt text of `fig`: the author's description (`describe`), then what the figure's artists say."""
    if not isinstance(fig, mpl.figure.Figure):
        raise TypeError(f"fig must be a matplotlib Figure, got {type(fig).__name__}")
    parts = [getattr(fig, ATTRIBUTE, "")]
    if fig._suptitle is not None and fig._suptitle.get_text():
        parts.append(f"Title: {spoken(fig._suptitle.get_text())}.")
    panels = [ax for ax in fig.axes if ax.get_visible() and not _is_colorbar(ax) and not _is_blank(ax)]
    bars = [ax for ax in fig.axes if ax.get_visible() and _is_colorbar(ax)]
    if len(panels) > MAX_GRID and all(ax.images for ax in panels):
        parts.append(_image_grid(panels))
    else:
        many = len(panels) > 1
        if many:
            parts.append(f"{len(panels)} panels.")
        for k, ax in enumerate(panels[:MAX_NAMES], start=1):
            parts.append(_panel(ax, f"Panel {k}" if many else ""))
        if len(panels) > MAX_NAMES:
            parts.append(f"{len(panels) - MAX_NAMES} more panels.")
    parts += [_colorbar(ax) for ax in bars]
    return " ".join(p for p in parts if p)


def show_alt_texts() -> None:
    """Make IPython store `alt_text` with every matplotlib figure it displays (in a notebook; elsewhere nothing).

    The PNG itself still comes from the inline backend's formatter; ours wraps it and returns the metadata beside
    it. The inline backend re-registers its formatter when it is first loaded, so it is loaded first."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None or not hasattr(shell, "display_formatter"):
        return
    plt.close(plt.figure())  # loads the backend (the inline one in a kernel), which registers its formatter
    png = shell.display_formatter.formatters["image/png"]
    inner = png.lookup_by_type(mpl.figure.Figure) if mpl.figure.Figure in png else None
    if inner is None:
        return
    inner = getattr(inner, "wrapped_png", inner)  # a second call wraps the backend's formatter, not ours

    def png_with_alt(fig):
        data = inner(fig)
        return (data, {"alt": alt_text(fig)}) if data is not None else None

    png_with_alt.wrapped_png = inner
    png.for_type(mpl.figure.Figure, png_with_alt)


# ----------------------------------------------------------------------------- reading the figure


def _is_colorbar(ax) -> bool:
    return hasattr(ax, "_colorbar")


def _is_blank(ax) -> bool:
    """A filler cell of a grid of panels: no axes, nothing drawn, no title."""
    return not ax.axison and not _marks(ax) and not ax.get_title()


def spoken(text: str) -> str:
    """Text as a screen reader can say it: TeX maths (``$\\gamma$``, ``\\frac``, ``\\sqrt``, ...) in Unicode, line breaks
    as spaces."""
    text = text.replace("$", "").replace("\\|", "‖")
    text = re.sub(r"\\frac\{([^{}]*)\}\{([^{}]*)\}", r"(\1)/(\2)", text)
    text = re.sub(r"\\sqrt\{([^{}]*)\}", r"√(\1)", text)
    text = re.sub(r"\\(?:math[a-z]+|boldsymbol|text|operatorname)\{([^{}]*)\}", r"\1", text)
    text = re.sub(r"\\([A-Za-z]+)", lambda m: _symbol(m.group(1)), text)
    text = re.sub(r"\\[,;:! ]|\\quad", " ", text)
    return " ".join(text.replace("{", "").replace("}", "").split())


SYMBOLS = {
    "pm": "±",
    "times": "×",
    "cdot": "·",
    "le": "≤",
    "leq": "≤",
    "ge": "≥",
    "geq": "≥",
    "neq": "≠",
    "approx": "≈",
    "to": "→",
    "infty": "∞",
    "ell": "ℓ",
    "partial": "∂",
    "nabla": "∇",
    "sum": "Σ",
    "prod": "∏",
    "angle": "∠",
    "in": "∈",
    "top": "ᵀ",
    "langle": "⟨",
    "rangle": "⟩",
    "lVert": "‖",
    "rVert": "‖",
    "Vert": "‖",
    "|": "‖",
    "left": "",
    "right": "",
    "hat": "",
    "tilde": "",
    "bar": "",
    "varepsilon": "ε",
    "varphi": "φ",
}


def _symbol(name: str) -> str:
    """A TeX command by the character it stands for: Greek letters and `SYMBOLS`; others by their name."""
    if name in SYMBOLS:
        return SYMBOLS[name]
    case = "CAPITAL" if name[0].isupper() else "SMALL"
    try:
        return unicodedata.lookup(f"GREEK {case} LETTER {name.upper()}")
    except KeyError:
        return name


def _number(x: float) -> str:
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    return f"{x:.3g}"


def _axis(ax, which: str) -> str:
    label = spoken(getattr(ax, f"get_{which}label")())
    low, high = sorted(getattr(ax, f"get_{which}lim")())
    scale = getattr(ax, f"get_{which}scale")()
    text = f"{label or which} from {_number(low)} to {_number(high)}"
    return text + (f", {scale} scale" if scale != "linear" else "")


def _marks(ax) -> list[str]:
    """What is drawn in `ax`, in words: lines, points, bars, images, meshes, contours, 3-D surfaces."""
    marks = []
    lines = [line for line in ax.lines if line.get_visible()]
    if lines:
        marks.append(f"{len(lines)} line{'s' * (len(lines) > 1)}")
    points = sum(len(c.get_offsets()) for c in ax.collections if isinstance(c, PathCollection))
    if points:
        marks.append(f"{points} points")
    bars = sum(len(c) for c in ax.containers if isinstance(c, BarContainer))
    if bars:
        marks.append(f"{bars} bars")
    for image in ax.images:
        shape = image.get_array().shape
        marks.append(f"an image of {shape[0]} by {shape[1]} pixels")
    kinds = {
        "a colour mesh": QuadMesh,
        "contours": ContourSet,
        "segments": LineCollection,
        "filled regions": PolyCollection,
    }
    marks += [name for name, kind in kinds.items() if any(isinstance(c, kind) for c in ax.collections)]
    if ax.name == "3d":
        marks.append("a 3-D view")
    texts = [spoken(t.get_text()) for t in ax.texts if t.get_visible() and t.get_text().strip()]
    if texts:
        marks.append(f"{len(texts)} text label{'s' * (len(texts) > 1)}")
    return marks


def _names(labels: list[str]) -> str:
    shown = ", ".join(labels[:MAX_NAMES])
    return shown + (f" and {len(labels) - MAX_NAMES} more" if len(labels) > MAX_NAMES else "")


def _panel(ax, name: str) -> str:
    title = " ".join(
        spoken(t.get_text()) for t in (ax.title, ax._left_title, ax._right_title) if t.get_text()
    )
    head = ", ".join(p for p in (name, f"“{title}”" if title else "") if p)
    marks = _marks(ax)
    body = ("shows " + ", ".join(marks)) if marks else "is empty"
    text = f"{head}: {body}" if head else body[0].upper() + body[1:]
    if ax.axison and ax.name != "polar":
        text += f"; x axis: {_axis(ax, 'x')}; y axis: {_axis(ax, 'y')}"
        if ax.name == "3d":
            text += f"; z axis: {_axis(ax, 'z')}"
    legend = ax.get_legend()
    if legend is not None and legend.get_visible():
        labels = [spoken(t.get_text()) for t in legend.get_texts() if t.get_text()]
        if labels:
            text += f"; legend: {_names(labels)}"
    return text + "."


def _colorbar(ax) -> str:
    label = spoken(ax.get_ylabel() or ax.get_xlabel())
    low, high = sorted(ax.get_ylim() if ax.get_ylabel() or not ax.get_xlabel() else ax.get_xlim())
    return f"Colour bar{f' “{label}”' if label else ''} from {_number(low)} to {_number(high)}."


def _image_grid(panels) -> str:
    titles = [spoken(ax.get_title()) for ax in panels if ax.get_title()]
    text = f"A grid of {len(panels)} images"
    return text + (f" titled {_names(titles)}." if titles else ".")
