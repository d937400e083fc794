"""Create a new section notebook with the book's anatomy, and hold the one setup cell.

    python scripts/new_section.py chapters/02_feedforward/01_linear_models.ipynb "Linear models"

`SETUP_CELL` is the single source of truth for the first code cell of every
notebook; ``tests/test_hygiene.py`` checks that every notebook starts with it,
and that its install line names the repository of ``_config.yml``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import nbformat

REPOSITORY = "https://github.com/dlnotes/dlnotes"

SETUP_CELL = f"""\
# Setup, the same in every notebook: install dlnotes if missing (e.g. on Colab),
# seed all random generators (DLNOTES_SEED, default 0), set the figure style.
try:
    import dlnotes
except ImportError:
    %pip install --quiet "dlnotes @ git+{REPOSITORY}"
    import dlnotes

SEED = dlnotes.seed_everything()
dlnotes.use_style()"""
SETUP_METADATA = {"tags": ["hide-input"]}  # folded away on the website

SKELETON = [
    ("markdown", "# {title}\n\n**You will learn** ...\n\n**Prerequisites** ..."),
    ("code", SETUP_CELL),
    ("markdown", "## A concept\n\nThe idea in a few sentences, then the formula:\n\n$$ ... $$"),
    ("code", 'from dlnotes import check\n\ncheck("CC.NN", False, "replace with a claim that can fail")'),
    ("markdown", "## Exercises\n\n1. ...\n\n```{{admonition}} Solution\n:class: dropdown\n\n...\n```"),
    ("markdown", "## Summary\n\n- ..."),
]


def new_section(path: Path, title: str) -> None:
    if path.exists():
        raise FileExistsError(f"{path} exists; choose a new file name")
    cells = [
        nbformat.v4.new_markdown_cell(text.format(title=title))
        if kind == "markdown"
        else nbformat.v4.new_code_cell(text, metadata=SETUP_METADATA if text == SETUP_CELL else {})
        for kind, text in SKELETON
    ]
    nb = nbformat.v4.new_notebook(cells=cells, metadata=KERNEL_METADATA)
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)


KERNEL_METADATA = {
    "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
    "language_info": {"name": "python"},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, help="chapters/NN_name/MM_section.ipynb")
    parser.add_argument("title")
    args = parser.parse_args()
    new_section(args.path, args.title)
    print(f"created {args.path}: add it to _toc.yml")


if __name__ == "__main__":
    main()
