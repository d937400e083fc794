"""Draw the chapter map of the landing page from chapters/chapters.yml: chapters as boxes (filled when written),
arrows from what each builds on.

python scripts/make_chapter_map.py   # writes images/chapter_map.svg (text as paths: no fonts needed)
"""

import textwrap
from pathlib import Path

import matplotlib.pyplot as plt
import yaml

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "images" / "chapter_map.svg"


def chapters() -> list[dict]:
    """The chapters of chapters/chapters.yml, each with `written`: whether its index page exists."""
    listed = yaml.safe_load((ROOT / "chapters" / "chapters.yml").read_text())
    return [{**c, "written": (ROOT / "chapters" / c["folder"] / "index.md").exists()} for c in listed]


def draw(path: Path = OUT) -> None:
    """The map in matplotlib's own style, whatever style is in use: the same file for the same chapters."""
    with plt.style.context("default"), plt.rc_context({"svg.fonttype": "path", "svg.hashsalt": "dlnotes"}):
        _draw(path)


def _draw(path: Path) -> None:
    fig, ax = plt.subplots(figsize=(12, 4))
    boxes = {}
    for chapter in chapters():
        written = chapter["written"]
        boxes[chapter["number"]] = ax.text(
            *chapter["map"],
            f"{chapter['number']}\n{textwrap.fill(chapter['title'], 13)}",
            ha="center",
            va="center",
            fontsize=10,
            color="white" if written else "black",
            bbox={"boxstyle": "round,pad=0.4", "fc": "#0072B2" if written else "#E8EEF4", "ec": "#0072B2"},
        )
    fig.canvas.draw()  # lay out the boxes, so that the arrows can be clipped at their edges
    for chapter in chapters():
        for before in chapter["builds_on"]:
            a, b = boxes[before], boxes[chapter["number"]]
            ax.annotate(
                "",
                xy=b.get_position(),
                xytext=a.get_position(),
                arrowprops={
                    "arrowstyle": "-|>",
                    "color": "#888888",
                    "lw": 1.2,
                    "patchA": a.get_bbox_patch(),
                    "patchB": b.get_bbox_patch(),
                },
            )
    ax.set(xlim=(-0.6, 6.6), ylim=(-0.6, 3.6))
    ax.axis("off")
    fig.savefig(path, bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)


def main() -> None:
    draw()
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
