"""A notebook as a student opens it in JupyterLab (no extension for MyST): the solutions are folded, the maths
inside them is typeset, and the citations are readable links."""

import shutil
import socket
import subprocess
import sys
import time

import nbformat
import pytest
from playwright.sync_api import sync_playwright

from conftest import ROOT
from test_site import CHROMIUM, CHROMIUM_ARGS

pytestmark = pytest.mark.browser
NOTEBOOK = "chapters/02_feedforward/02_logistic_softmax.ipynb"


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab serving a copy of the chapters (so that no autosave can touch the repository)."""
    root = tmp_path_factory.mktemp("lab")
    shutil.copytree(ROOT / "chapters", root / "chapters")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command = [sys.executable, "-m", "jupyter", "lab", "--no-browser", f"--port={port}", "--ServerApp.ip=127.0.0.1",
               "--IdentityProvider.token=", f"--ServerApp.root_dir={root}", "--allow-root"]  # fmt: skip
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
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(f"{lab}/lab/tree/{NOTEBOOK}")
        page.wait_for_selector(".jp-Notebook .jp-MarkdownCell", timeout=60_000)
        for _ in range(80):  # JupyterLab renders cells as they scroll into view
            page.evaluate("() => document.querySelector('.jp-WindowedPanel-outer').scrollBy(0, 2000)")
            page.wait_for_timeout(250)
            if page.locator("details.solution").count() >= len(expected):
                break
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
