"""The book built from scratch (scripts/build_book.py), as CI and a reader build it: what comes out."""

import json
import re
import sys
from collections import defaultdict
from types import SimpleNamespace

import pytest

from conftest import HTML, ROOT, build_book
from test_hygiene import NOTEBOOKS, toc_files

sys.path.insert(0, str(ROOT / "_ext"))
from dlnotes_site import concept_checks, concept_names, drop_thebe  # noqa: E402

FRAMES_PER_WIDGET = 40
FRAMES_BYTES_PER_PAGE = 3_000_000  # as the page carries them: base64 in the widget state


def test_the_site_drops_thebe_but_keeps_a_widget_state_that_spells_it():
    """9.5's widgets once vanished from the page: their base64 frames contained "theBe"."""

    def script(filename, **attributes):
        return SimpleNamespace(filename=filename, attributes=attributes)

    state = script(None, type="application/vnd.jupyter.widget-state+json", body='{"png": "iVBxTheBe0"}')
    context = {
        "script_files": [script("sphinx-thebe.js"), script(None, body='const THEBE_JS_URL = "x"'), state]
    }
    drop_thebe(None, "page", "page.html", context, None)
    assert context["script_files"] == [state]


def test_every_page_of_the_toc_is_built(book):
    for entry in toc_files():
        assert (HTML / f"{entry}.html").exists(), f"{entry}.html is missing"


def test_every_notebook_was_executed(book):
    """How long each took is the benchmark's business (scripts/benchmark.py), not a test's: a busy machine must
    not fail the build. A notebook that runs away is stopped by the execution timeout and fails the build."""
    docnames = {str(path.relative_to(ROOT).with_suffix("")) for path in NOTEBOOKS}
    assert set(json.loads(build_book.INFO.read_text())["notebooks"]) == docnames, (
        "a notebook was not executed"
    )


def test_the_precomputed_widgets_keep_within_their_frames_and_page_weight(book):
    """The frames' count and bytes are properties of the book; their seconds are in the benchmark."""
    rows = [line.split("\t") for line in build_book.FRAMES_LOG.read_text().splitlines()]
    weight = defaultdict(float)
    for page, _, _, size, _ in rows:
        weight[page] += 4 / 3 * int(size)
    executed = json.loads(build_book.INFO.read_text())["notebooks"]
    assert {page for page, *_ in rows} == {
        p for p in executed if "dlnotes.widgets" in (ROOT / f"{p}.ipynb").read_text()
    }
    assert max(int(row[2]) for row in rows) <= FRAMES_PER_WIDGET
    assert max(weight.values()) <= FRAMES_BYTES_PER_PAGE, f"heaviest page {max(weight.values()) / 1e6:.2f} MB"


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


def test_citations_lead_to_their_entry_and_common_mistakes_are_boxes(book):
    """The website resolves `references.md#key` to the entry's anchor (_ext/dlnotes_site.py) and styles the
    block quotes that open with "⚠ Common mistakes"."""
    anchors = set(re.findall(r'<a id="([\w-]+)">', (HTML / "references.html").read_text()))
    cited, boxes = set(), 0
    for path in NOTEBOOKS:
        page = (HTML / path.relative_to(ROOT).with_suffix(".html")).read_text()
        cited |= set(re.findall(r'href="(?:\.\./)*references\.html#([\w-]+)"', page))
        boxes += len(
            re.findall(r'<blockquote class="mistakes">\s*<div><p><strong>⚠ Common mistakes</strong>', page)
        )
    assert len(cited) >= 40 and cited <= anchors, sorted(cited - anchors)
    assert boxes == sum(path.read_text().count("> **⚠ Common mistakes**") for path in NOTEBOOKS)
