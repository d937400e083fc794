"""Build the whole book from scratch, as CI and a reader do, and check what comes out."""

import pickle

import pytest
from myst_nb.sphinx_ import NbMetadataCollector

from conftest import HTML, ROOT, TIMES
from test_hygiene import NOTEBOOKS, toc_files

BUDGET_SECONDS = 60


def test_every_page_of_the_toc_is_built(book):
    for entry in toc_files():
        assert (HTML / f"{entry}.html").exists(), f"{entry}.html is missing"


def test_every_notebook_ran_within_its_budget(book):
    with (ROOT / "_build" / ".doctrees" / "environment.pickle").open("rb") as f:
        env = pickle.load(f)
    runtimes = {}
    for path in NOTEBOOKS:
        docname = str(path.relative_to(ROOT).with_suffix(""))
        exec_data = NbMetadataCollector.get_doc_data(env)[docname].get("exec_data")
        assert exec_data and exec_data["succeeded"], f"{docname} was not executed"
        runtimes[docname] = exec_data["runtime"]
    TIMES.write_text("".join(f"{seconds:6.1f} s  {name}\n" for name, seconds in runtimes.items()))
    slow = {name: s for name, s in runtimes.items() if s > BUDGET_SECONDS}
    assert not slow, f"notebooks over the {BUDGET_SECONDS} s budget: {slow}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_executed_pages_show_their_checks_and_widget_figures(book, path):
    page = (HTML / path.relative_to(ROOT).with_suffix(".html")).read_text()
    assert "✔ [" in page, "no check output on the built page"
    shown = path.read_text().count("plt.show()")
    assert page.count('src="../../_images/') >= shown, (
        f"{shown} figures shown in the notebook, fewer on the page"
    )
    assert "AssertionError" not in page and "Traceback" not in page
    assert "output stderr" not in page, "a warning or other stderr output on the page"
    if "dlnotes.widgets." in path.read_text():
        assert "application/vnd.jupyter.widget-state+json" in page, "widget state was not saved"
        assert "image/png" in page.split("application/vnd.jupyter.widget-state+json", 1)[1]
