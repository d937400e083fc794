"""The whole book as one PDF (scripts/book_pdf.py), printed from the built website by Debian's Chromium.

The PDF is made once per build (or reused when it is newer than the build) and read with pypdf: every page of
_toc.yml is in it under its title, in order, in the outline and the table of contents; the prose has no raw
MyST or LaTeX; the solutions are unfolded, the widgets captioned, the navigation gone; its length is sensible.
"""

import fcntl
import json
import re
import sys
import unicodedata

import pytest
from pypdf import PdfReader

from conftest import ROOT, build_book
from test_hygiene import toc_files
from test_site import WIDGET_PAGES

sys.path.insert(0, str(ROOT / "scripts"))
import book_pdf  # noqa: E402

pytestmark = pytest.mark.browser
MONO = re.compile(r"mono|courier", re.IGNORECASE)  # the font of code and outputs, where $ and \ are code
RAW = re.compile(
    r"\$[^$\s][^$]*\$|\\[a-zA-Z]+\{|\\\(|\\\[|```|\{(?:math|cite|ref|eq|numref|doc)\}|^:::", re.M
)
CHROME = ["Skip to main content", "Back to top", "Ctrl+K", "Open in Colab", "Download this page"]


@pytest.fixture(scope="module")
def pdf(book):
    """The PDF of the current build: printed by one test process while the others (`-n 2`) wait for it."""
    with (book_pdf.PDF.parent / "dlnotes.pdf.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not book_pdf.PDF.exists() or book_pdf.PDF.stat().st_mtime < build_book.INFO.stat().st_mtime:
            book_pdf.build_pdf()
    return PdfReader(book_pdf.PDF)


def outline(pdf) -> list[tuple[int, str, int]]:
    """The bookmarks in order: (depth, title, page index)."""
    flat = []

    def walk(items, depth):
        for item in items:
            if isinstance(item, list):
                walk(item, depth + 1)
            else:
                flat.append((depth, item.title, pdf.get_destination_page_number(item)))

    walk(pdf.outline, 0)
    return flat


def sections(pdf) -> list[tuple[str, int]]:
    """The bookmarks of the pages of _toc.yml: the landing page's on top, the others under their part."""
    captions = {part for part, _ in book_pdf.toc() if part}
    found, top = [], pdf.outline
    for k, item in enumerate(top):
        if isinstance(item, list):
            continue
        children = top[k + 1] if k + 1 < len(top) and isinstance(top[k + 1], list) else []
        entries = [c for c in children if not isinstance(c, list)] if item.title in captions else [item]
        found += [(entry.title, pdf.get_destination_page_number(entry)) for entry in entries]
    return found


@pytest.fixture(scope="module")
def prose(pdf) -> dict[int, str]:
    """The text outside the monospaced font of code and outputs, on a sample of pages: the first pages of the
    contents and of every section, the first page of its solutions, and every 25th page (pypdf reads the
    book's 1,800 pages of vector maths slowly)."""
    starts = {page for _, page in sections(pdf)} | {
        page for _, title, page in outline(pdf) if title == "Solutions"
    }
    sample = {1, 2, 3} | starts | set(range(0, len(pdf.pages), 25))
    return {k: page_prose(pdf, k) for k in sorted(sample)}


def page_prose(pdf, k: int) -> str:
    """The text of page k outside the monospaced font of code and outputs, white space collapsed."""
    parts = []

    def visit(text, cm, tm, font, size):
        if text.strip() and not (font and MONO.search(str(font.get("/BaseFont", "")))):
            parts.append(text)

    pdf.pages[k].extract_text(visitor_text=visit)
    return re.sub(r"\s+", " ", unicodedata.normalize("NFKC", "".join(parts)))  # "ﬁ" is "fi"


def source_title(page: str) -> str:
    """The title a page is written with: the first level-1 heading of its notebook or Markdown file."""
    notebook = ROOT / f"{page}.ipynb"
    if notebook.exists():
        source = "".join("".join(cell["source"]) + "\n" for cell in json.loads(notebook.read_text())["cells"])
    else:
        source = (ROOT / f"{page}.md").read_text()
    return re.search(r"^# (.+)$", source, re.M).group(1).strip().replace("'", "\u2019")  # as Sphinx prints it


def test_every_page_of_the_toc_is_in_the_outline_and_the_contents_in_order(pdf, prose):
    titles = [source_title(page) for page in toc_files()]
    assert [title for title, _ in sections(pdf)] == titles
    pages = [page for _, page in sections(pdf)]
    assert pages == sorted(set(pages)), "each page of the book starts on a page of its own"
    contents = prose[1] + prose[2] + prose[3]
    assert all(title in contents for title in titles), "the table of contents"
    for title, page in sections(pdf):
        assert title.split()[-1] in prose[page], f"{title!r} does not open page {page + 1}"


def test_the_prose_has_no_raw_markup_and_no_navigation(prose):
    raw = [(k + 1, m.group(0)) for k, text in prose.items() for m in RAW.finditer(text)]
    assert raw == [], "raw MyST or LaTeX in the prose (page, text)"
    chrome = [(k + 1, phrase) for k, text in prose.items() for phrase in CHROME if phrase in text]
    assert chrome == [], "the website's navigation"


def test_solutions_are_unfolded_at_the_end_and_widgets_captioned(pdf, prose):
    n_solutions = sum(
        "".join(cell["source"]).count('<details class="solution">')
        for notebook in ROOT.glob("chapters/*/*.ipynb")
        for cell in json.loads(notebook.read_text())["cells"]
    )
    marks = outline(pdf)
    solutions = [page for _, title, page in marks if title.startswith("Solution to ")]
    assert len(solutions) == n_solutions
    assert all(prose[page] for page in solutions[:1])
    starts = {page for _, title, page in marks if title == "Solutions"}
    assert all(any(start <= page for start in starts) for page in solutions)
    # the captions on the pages of the first section with a widget (not on a sample, which a new page can shift)
    pages = toc_files()
    first = next(k for k, page in enumerate(pages) if page in WIDGET_PAGES)
    section_starts = [page for _, page in sections(pdf)] + [len(pdf.pages)]
    captions = sum(
        page_prose(pdf, k).count("Interactive figure, shown for ")
        for k in range(section_starts[first], section_starts[first + 1])
    )
    assert captions >= 1, f"the widgets' captions on the pages of {pages[first]}"


def test_the_length_is_sensible(pdf):
    n = len(toc_files())
    assert 5 * n <= len(pdf.pages) <= 60 * n
    assert pdf.metadata.title == book_pdf.yaml.safe_load((ROOT / "_config.yml").read_text())["title"]
