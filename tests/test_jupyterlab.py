"""A notebook as a student opens it in JupyterLab (no extension for MyST): the setup cell and the solutions are
folded, the maths inside them is typeset, "Common mistakes" is a visible box, and the citations and prerequisite
links open readable pages."""

import shutil
import socket
import subprocess
import sys
import time

import nbformat
import pytest
from playwright.sync_api import sync_playwright

from conftest import ROOT
from test_hygiene import RAW_MYST
from test_site import CHROMIUM, CHROMIUM_ARGS

pytestmark = pytest.mark.browser
NOTEBOOK = "chapters/02_feedforward/02_logistic_softmax.ipynb"
# a notebook that cites, links to a chapter overview and has common mistakes
LINKING = "chapters/03_optimization/01_background.ipynb"
PAGES = ["references.md", "notation.md"]  # the pages outside chapters/ that notebooks link to


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab serving a copy of the chapters (so that no autosave can touch the repository)."""
    root = tmp_path_factory.mktemp("lab")
    shutil.copytree(ROOT / "chapters", root / "chapters")
    for page in PAGES:
        shutil.copy(ROOT / page, root / page)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command = [sys.executable, "-m", "jupyter", "lab", "--no-browser", f"--port={port}", "--ServerApp.ip=127.0.0.1",
               "--IdentityProvider.token=", f"--ServerApp.root_dir={root}", "--allow-root",
               f"--LabApp.workspaces_dir={root / 'workspaces'}", f"--LabApp.user_settings_dir={root / 'settings'}"]  # fmt: skip
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert time.monotonic() < deadline and server.poll() is None, "JupyterLab did not start"
            time.sleep(0.5)
    yield f"http://127.0.0.1:{port}"
    server.terminate()
    server.wait(timeout=30)


def open_notebook(browser, lab: str, notebook: str):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{lab}/lab/tree/{notebook}?reset")  # no tabs left open by an earlier test
    page.wait_for_selector(".jp-Notebook .jp-MarkdownCell", timeout=60_000)
    return page


def scroll_until(page, selector: str, count: int = 1) -> None:
    """JupyterLab renders cells as they scroll into view: scroll until `count` elements match `selector`."""
    for _ in range(80):
        if page.locator(selector).count() >= count:
            return
        page.evaluate("() => document.querySelector('.jp-WindowedPanel-outer').scrollBy(0, 2000)")
        page.wait_for_timeout(250)


def solutions_in_source():
    """For each solution of the notebook, in order: whether its source has maths."""
    notebook = nbformat.read(ROOT / NOTEBOOK, as_version=4)
    blocks = [b for c in notebook.cells if c.cell_type == "markdown"
              for b in c.source.split('<details class="solution">')[1:]]  # fmt: skip
    return [("$" in b.split("</details>")[0]) for b in blocks]


def test_a_notebook_in_jupyterlab_shows_folded_solutions_with_typeset_maths(lab):
    expected = solutions_in_source()
    assert sum(expected) >= 2, "the test notebook should have solutions with maths"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = open_notebook(browser, lab, NOTEBOOK)
        scroll_until(page, "details.solution", len(expected))
        solutions = page.evaluate(
            """() => [...document.querySelectorAll("details.solution")].map((d) => ({
                 open: d.open, summary: d.querySelector("summary").textContent,
                 maths: d.querySelectorAll("mjx-container").length, dollars: (d.textContent.match(/\\$/g) || []).length}))"""
        )
        raw = page.evaluate(
            """() => [...document.querySelectorAll(".jp-RenderedMarkdown")].map((m) => m.textContent)
                 .filter((t) => /\\{admonition\\}|\\{cite:|:class:/.test(t))"""
        )
        browser.close()
    assert len(solutions) == len(expected) and not any(s["open"] for s in solutions)
    assert all(s["summary"] == "Solution" and s["dollars"] == 0 for s in solutions)
    assert [s["maths"] > 0 for s in solutions] == expected
    assert raw == []


def test_links_of_a_notebook_in_jupyterlab_open_readable_pages_and_its_boxes_show(lab):
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = open_notebook(browser, lab, LINKING)
        setup = page.locator(".jp-CodeCell").first
        setup.locator(".jp-InputArea, .jp-InputPlaceholder").first.wait_for()  # the cell is rendered
        assert setup.locator(".jp-InputPlaceholder").count() == 1, "the setup cell's source is not folded"

        citation = page.locator(".jp-RenderedMarkdown a[href*='references.md'][href*='#']").first
        key = citation.get_attribute("href").split("#")[1]
        citation.click()
        viewer = page.locator(".jp-MarkdownViewer:visible")
        # JupyterLab's sanitiser renames the id of the entry's <a id=key> to data-jupyter-id
        anchor = f"[data-jupyter-id='{key}']"
        viewer.locator(anchor).wait_for(state="attached", timeout=30_000)
        page.wait_for_timeout(1000)  # the viewer scrolls to the fragment once the page is rendered
        box = page.evaluate(
            """(anchor) => { const v = document.querySelector('.jp-MarkdownViewer:not(.lm-mod-hidden)');
                 const a = v.getBoundingClientRect(), e = v.querySelector(anchor).getBoundingClientRect();
                 return {inside: e.top >= a.top - 2 && e.top < a.bottom, text: v.textContent}; }""",
            anchor,
        )
        assert box["inside"], f"the references page did not scroll to the entry {key}"
        assert "{bibliography}" not in box["text"]

        page.locator(".lm-TabBar-tab", has_text=LINKING.split("/")[-1]).click()
        page.locator(".jp-RenderedMarkdown a[href*='index.md']").first.click()
        overview = page.locator(".jp-MarkdownViewer:visible .jp-RenderedMarkdown")
        overview.locator("blockquote table").wait_for(timeout=30_000)
        text = overview.text_content()
        assert "Notation in this chapter" in text and not RAW_MYST.search(text)

        page.locator(".lm-TabBar-tab", has_text=LINKING.split("/")[-1]).click()
        scroll_until(page, ".jp-RenderedMarkdown blockquote:has-text('Common mistakes')")
        style = page.evaluate(
            """() => { const q = [...document.querySelectorAll('.jp-RenderedMarkdown blockquote')]
                 .find((b) => b.textContent.trim().startsWith('⚠ Common mistakes'));
                 const s = getComputedStyle(q);
                 return {border: parseFloat(s.borderLeftWidth), bold: getComputedStyle(q.querySelector('strong')).fontWeight}; }"""
        )
        browser.close()
    assert style["border"] >= 2 and int(style["bold"]) >= 600, style
