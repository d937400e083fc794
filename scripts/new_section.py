"""Create a new section notebook with the book's anatomy, and hold the one setup cell.

    python scripts/new_section.py chapters/02_feedforward/01_linear_models.ipynb "Linear models"
    python scripts/new_section.py --sync     # rewrite the setup cell of every notebook (after a version bump)

`SETUP_CELL` is the single source of truth for the first code cell of every notebook. It is made from the
repository of ``_config.yml`` and the version of ``dlnotes/__init__.py``: on Colab it installs the release of
dlnotes the notebook was written for, and ``dlnotes.setup_notebook`` refuses any other. ``tests/test_hygiene.py``
checks that every notebook starts with it.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parent.parent
REPOSITORY = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
VERSION = re.search(r'^__version__ = "([^"]+)"', (ROOT / "dlnotes" / "__init__.py").read_text(), re.M)[1]

SETUP_CELL = f"""\
# Setup, the same in every notebook: install the dlnotes release this notebook was written for where
# dlnotes is missing (e.g. on Colab); then seed the random generators before every cell from DLNOTES_SEED
# (default 0) and the cell's text, so that a cell run again draws the same numbers; use one thread
# (DLNOTES_THREADS) and the book's figure style.
try:
    import dlnotes
except ImportError:
    %pip install --quiet "dlnotes @ git+{REPOSITORY}@v{VERSION}"
    import dlnotes

SEED = dlnotes.setup_notebook("{VERSION}")"""
# folded away: on the website by the tag, in JupyterLab by `source_hidden` (its output stays in view)
SETUP_METADATA = {"tags": ["hide-input"], "jupyter": {"source_hidden": True}}

SKELETON = [
    ("markdown", "# {title}\n\n**You will learn** ...\n\n**Prerequisites** ..."),
    ("code", SETUP_CELL),
    ("markdown", "## A concept\n\nThe idea in a few sentences, then the formula:\n\n$$ ... $$"),
    ("code", 'from dlnotes import check\n\ncheck("CC.NN", False, "replace with a claim that can fail")'),
    ("markdown", "## Exercises\n\n**Your turn** (checked by the book). Write `my_name(...)`: ..."),
    (
        "code",
        "from dlnotes.exercises.CHAPTER import grade_name  # a Grader in dlnotes/exercises/<chapter>.py\n\n\n"
        'def my_name(x):\n    """..."""\n    raise NotImplementedError  # your code here\n\n\ngrade_name(my_name)',
    ),
    ("markdown", '<details class="solution">\n<summary>Solution</summary>\n\n...\n\n</details>'),
    ("markdown", '1. ...\n\n<details class="solution">\n<summary>Solution</summary>\n\n...\n\n</details>'),
    ("markdown", "## Summary\n\n- ..."),
]
KERNEL_METADATA = {
    "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
    "language_info": {"name": "python"},
}


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


def sync_setup_cells() -> list[Path]:
    """Give every notebook under chapters/ the current setup cell; return the notebooks that changed."""
    changed = []
    for path in sorted((ROOT / "chapters").rglob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        cell = next(cell for cell in nb.cells if cell.cell_type == "code")
        if cell.source != SETUP_CELL or any(cell.metadata.get(k) != v for k, v in SETUP_METADATA.items()):
            cell.source = SETUP_CELL
            cell.metadata.update(SETUP_METADATA)
            nbformat.write(nb, path)
            changed.append(path)
    return changed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, nargs="?", help="chapters/NN_name/MM_section.ipynb")
    parser.add_argument("title", nargs="?")
    parser.add_argument("--sync", action="store_true", help="rewrite the setup cell of every notebook")
    args = parser.parse_args()
    if args.sync:
        for path in sync_setup_cells():
            print(f"updated {path.relative_to(ROOT)}")
    elif args.path and args.title:
        new_section(args.path, args.title)
        print(f"created {args.path}: add it to _toc.yml and the chapter's index.md")
    else:
        parser.error("give a path and a title, or --sync")


if __name__ == "__main__":
    main()
