"""The book built from scratch (scripts/build_book.py), as CI and a reader build it: what comes out."""

import json
import sys
from collections import defaultdict

import pytest

from conftest import HTML, ROOT, build_book
from test_hygiene import NOTEBOOKS, toc_files

sys.path.insert(0, str(ROOT / "_ext"))
from dlnotes_site import concept_checks, concept_names  # noqa: E402

NOTEBOOK_BUDGET_SECONDS = 60
FRAMES_PER_WIDGET = 40
FRAMES_BYTES_PER_PAGE = 3_000_000  # as the page carries them: base64 in the widget state
FRAMES_BUILD_GROWTH = 0.25


def test_every_page_of_the_toc_is_built(book):
    for entry in toc_files():
        assert (HTML / f"{entry}.html").exists(), f"{entry}.html is missing"


def test_every_notebook_ran_within_its_budget(book):
    """Each notebook's time, as the build measured it (two at a time). The whole build's time depends on the
    machine as much as on the book: the build prints it against its target (build_book.TARGET_SECONDS), and CI's
    30 minutes bound it (scripts/test_all.py)."""
    info = json.loads(build_book.INFO.read_text())
    docnames = {str(path.relative_to(ROOT).with_suffix("")) for path in NOTEBOOKS}
    assert set(info["notebooks"]) == docnames, "a notebook was not executed"
    slow = {name: s for name, s in info["notebooks"].items() if s > NOTEBOOK_BUDGET_SECONDS}
    assert not slow, f"notebooks over the {NOTEBOOK_BUDGET_SECONDS} s budget: {slow}"


def test_the_precomputed_widgets_keep_within_their_budgets(book, capsys):
    info = json.loads(build_book.INFO.read_text())
    rows = [line.split("\t") for line in build_book.FRAMES_LOG.read_text().splitlines()]
    weight, seconds = defaultdict(float), sum(float(row[4]) for row in rows)
    for page, _, _, size, _ in rows:
        weight[page] += 4 / 3 * int(size)
    extra = seconds / info["jobs"]  # the frames' work, shared by the build's parallel jobs
    growth = extra / (info["seconds"] - extra)
    with capsys.disabled():
        print("\n\nprecomputed widgets: page, widget, frames, MB on the page, seconds")
        for page, widget, frames, size, time in rows:
            print(f"  {page:50s} {widget:26s} {frames:>3s} {4 / 3 * int(size) / 1e6:5.2f} {float(time):5.1f}")
        print(
            f"  heaviest page {max(weight.values()) / 1e6:.2f} MB; the build grew by {growth:.0%} ({extra:.0f} s)"
        )
    assert {page for page, *_ in rows} == {
        p for p in info["notebooks"] if "dlnotes.widgets" in (ROOT / f"{p}.ipynb").read_text()
    }
    assert max(int(row[2]) for row in rows) <= FRAMES_PER_WIDGET
    assert max(weight.values()) <= FRAMES_BYTES_PER_PAGE
    assert growth <= FRAMES_BUILD_GROWTH


def test_every_check_in_the_notebooks_ran_and_every_concept_was_checked(book):
    """A check counts only if it ran: one in a branch that never executes, or after a cell that was skipped,
    shows up here, not in a search of the notebooks' text."""
    ran = {tuple(line.split("\t")) for line in build_book.CHECK_LOG.read_text().splitlines()}
    written = {(doc, cid) for cid, docs in concept_checks(ROOT).items() for doc in docs}
    assert sorted(written - ran) == [], "checks written in a notebook that did not run"
    assert sorted(set(concept_names(ROOT)) - {cid for _, cid in ran}) == [], "concepts no check tested"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_executed_pages_show_their_checks_and_widget_figures(book, path):
    page = (HTML / path.relative_to(ROOT).with_suffix(".html")).read_text()
    source = path.read_text()
    assert "✔ [" in page, "no check output on the built page"
    code = "\n".join(c["source"] if isinstance(c["source"], str) else "".join(c["source"])
                     for c in json.loads(source)["cells"] if c["cell_type"] == "code")  # fmt: skip
    shown = code.count("plt.show()")  # not those in the solutions' Markdown, which do not run
    assert page.count('src="../../_images/') >= shown, (
        f"{shown} figures shown in the notebook, fewer on the page"
    )
    assert "AssertionError" not in page and "Traceback" not in page
    assert "output stderr" not in page, "a warning or other stderr output on the page"
    if "from dlnotes.widgets." in source:
        assert "application/vnd.jupyter.widget-state+json" in page, "widget state was not saved"
        state = page.split("application/vnd.jupyter.widget-state+json", 1)[1]
        assert '"_model_name": "ImageModel"' in state and '"_model_name": "StackModel"' in state, (
            "the page's widgets are not the precomputed frames"
        )
