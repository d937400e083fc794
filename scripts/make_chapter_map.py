"""Draw the chapter map of the landing page: chapters as boxes, arrows from prerequisites.

python scripts/make_chapter_map.py   # writes images/chapter_map.svg (text as paths: no fonts needed)
"""

from pathlib import Path

import matplotlib.pyplot as plt

CHAPTERS = {  # number: (title, column, row)
    1: ("Connectionism", 0, 1.5),
    2: ("Feedforward\nnetworks", 1, 1.5),
    3: ("Optimization", 2, 1.5),
    4: ("Convolutional\nnetworks", 3, 3),
    5: ("Recurrent\nnetworks", 3, 2),
    8: ("Tricks of\nthe trade", 3, 1),
    9: ("Theory", 3, 0),
    7: ("Geometric\ndeep learning", 4, 3),
    6: ("Transformers", 4, 2),
    10: ("Generative\nmodels", 5, 1.5),
    11: ("Ethics", 6, 1.5),
}
WRITTEN = {1, 2, 3, 4}  # drawn filled
PREREQUISITES = [
    (1, 2),
    (2, 3),
    (3, 4),
    (3, 5),
    (3, 8),
    (3, 9),
    (4, 7),
    (5, 6),
    (6, 7),
    (6, 10),
    (8, 10),
    (10, 11),
]


def main() -> None:
    plt.rcParams["svg.fonttype"] = "path"
    fig, ax = plt.subplots(figsize=(12, 4))
    boxes = {}
    for number, (title, x, y) in CHAPTERS.items():
        boxes[number] = ax.text(
            x,
            y,
            f"{number}\n{title}",
            ha="center",
            va="center",
            fontsize=10,
            color="white" if number in WRITTEN else "black",
            bbox={
                "boxstyle": "round,pad=0.4",
                "fc": "#0072B2" if number in WRITTEN else "#E8EEF4",
                "ec": "#0072B2",
            },
        )
    fig.canvas.draw()  # lay out the boxes, so that the arrows can be clipped at their edges
    for a, b in PREREQUISITES:
        ax.annotate(
            "",
            xy=boxes[b].get_position(),
            xytext=boxes[a].get_position(),
            arrowprops={
                "arrowstyle": "-|>",
                "color": "#888888",
                "lw": 1.2,
                "patchA": boxes[a].get_bbox_patch(),
                "patchB": boxes[b].get_bbox_patch(),
            },
        )
    ax.set(xlim=(-0.6, 6.6), ylim=(-0.6, 3.6))
    ax.axis("off")
    out = Path(__file__).resolve().parent.parent / "images" / "chapter_map.svg"
    fig.savefig(out, bbox_inches="tight", metadata={"Date": None})
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
