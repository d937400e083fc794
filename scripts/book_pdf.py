"""Print the built website as one PDF, _build/dlnotes.pdf, for paper and for reading offline.

    python scripts/book_pdf.py              # from the website in _build/html (build it first)
    python scripts/build_book.py --pdf      # build the website, then this

Every page of _toc.yml is opened in Debian's Chromium (Playwright; the site served over localhost, nothing
from the network), made ready for paper and printed: the maths typeset by the site's MathJax, the light theme,
no navigation chrome, every widget as the frame it shows first with a caption that names its controls' values,
and the solutions of the exercises unfolded at the end of their section. A title page and a table of contents
with page numbers come first; the outline (bookmarks) follows the parts and sections; every page but the title
carries its number.
"""

from __future__ import annotations

import functools
import html
import http.server
import io
import shutil
import sys
import threading
import time
from pathlib import Path

import yaml
from playwright.sync_api import sync_playwright
from pypdf import PdfReader, PdfWriter

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "_build" / "html"
PDF = ROOT / "_build" / "dlnotes.pdf"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
]
PAPER = {"format": "A4", "margin": {"top": "16mm", "bottom": "18mm", "left": "15mm", "right": "15mm"}}
TIMEOUT_MS = 120_000

# Paper has no navigation, no dark mode and no folded cells: what the theme leaves on screen only goes.
PRINT_CSS = """
@media print {
  .bd-header, .bd-sidebar-primary, .bd-sidebar-secondary, .bd-header-article, .bd-footer,
  .bd-footer-article, .prev-next-area, .footer-article-items, #pst-back-to-top, .headerlink,
  .header-article-items, .skip-link, details.above-input, .bd-search, #jb-print-toc { display: none !important; }
  .bd-main .bd-content .bd-article-container { max-width: 100% !important; padding: 0 !important; }
  .bd-page-width { max-width: 100% !important; }
  pre { white-space: pre-wrap !important; word-break: break-word; }
  h1, h2, h3, h4 { break-after: avoid; }
  img, figure, mjx-container[display="true"] { break-inside: avoid; }
  img { max-width: 100% !important; height: auto; }
  .dlnotes-print-caption { font-size: 0.85em; font-style: italic; color: #333; }
  details.solution { border-left: 3px solid #888; padding-left: 0.8em; }
  details.solution > summary { display: none; }
}
"""

# Runs in the page once MathJax and the widgets are done. A widget keeps the frame it shows first; its controls
# become a caption. Each solution moves, unfolded, under "Solutions" at the end of the page, headed by the
# title of the section it answers.
PREPARE = r"""() => {
  document.documentElement.dataset.theme = "light";
  document.documentElement.dataset.mode = "light";
  const title = (el) => el ? el.textContent.replace(/[#¶]\s*$/, "").trim() : "";
  const areas = new Set([...document.querySelectorAll(
    'script[type="application/vnd.jupyter.widget-view+json"]')].map((v) => v.parentElement));
  for (const area of areas) {
    const controls = [...area.querySelectorAll(".widget-slider, .widget-dropdown")];
    if (!controls.length) continue;
    const values = controls.map((c) => {
      const select = c.querySelector("select");
      const value = select ? select.selectedOptions[0].textContent : title(c.querySelector(".widget-readout"));
      return `${title(c.querySelector(".widget-label"))} ${value}`.trim();
    });
    controls.forEach((c) => { c.style.display = "none"; });
    const caption = document.createElement("p");
    caption.className = "dlnotes-print-caption";
    caption.textContent = `Interactive figure, shown for ${values.join(", ")}. ` +
      "On the website or in the notebook, the controls change it.";
    area.appendChild(caption);
  }
  const exercise = (solution) => {  // what a solution answers: the numbered exercise or the "your turn" above it
    for (let el = solution.previousElementSibling; el && !/^(H\d|DETAILS)$/.test(el.tagName);
         el = el.previousElementSibling) {
      if (el.tagName === "OL") return `exercise ${(+el.getAttribute("start") || 1) + el.children.length - 1}`;
      if (/^your turn/i.test(el.textContent.trim())) return "“Your turn”";
    }
    return "the exercise";
  };
  const solutions = [...document.querySelectorAll("details.solution")];
  if (solutions.length) {
    const article = document.querySelector("article") || document.body;
    const box = document.createElement("section");
    box.innerHTML = "<h2>Solutions</h2>";
    const heads = solutions.map((solution) => {
      const section = solution.closest("section");
      const heading = section && section.querySelector(":scope > h1, :scope > h2, :scope > h3, :scope > h4");
      const head = document.createElement("h3");
      head.textContent = `Solution to ${exercise(solution)} of “${title(heading)}”`;
      return head;
    });
    solutions.forEach((solution, k) => { solution.open = true; box.append(heads[k], solution); });
    article.appendChild(box);
  }
  const visible = (h) => h.offsetParent !== null;
  return [...document.querySelectorAll("h1, h2, h3, h4, h5, h6")].filter(visible).map(title);
}"""
MATHJAX_DONE = """() => !window.MathJax || !window.MathJax.startup ? true
  : window.MathJax.startup.promise.then(() => true)"""
WIDGETS_RENDERED = """() => [...document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]')]
  .every((v) => v.parentElement.querySelector(".jupyter-widgets"))"""


def toc() -> list[tuple[str, list[str]]]:
    """The parts of _toc.yml in order, each (caption, the pages it holds); the landing page opens a part of its own."""
    book = yaml.safe_load((ROOT / "_toc.yml").read_text())
    parts = [("", [book["root"]])]

    def files(entries) -> list[str]:
        found = []
        for entry in entries:
            found += [entry["file"]] if "file" in entry else []
            found += files(entry.get("sections", []) + entry.get("chapters", []))
        return found

    return parts + [(part["caption"], files(part["chapters"])) for part in book["parts"]]


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def serve(directory: Path) -> http.server.ThreadingHTTPServer:
    httpd = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(QuietHandler, directory=directory)
    )
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


def print_page(browser, url: str) -> tuple[list[str], bytes]:
    """The page at `url`, made ready for paper: its headings as printed, in order (the title first), and its PDF."""
    context = browser.new_context(viewport={"width": 1100, "height": 1400})
    context.set_default_timeout(TIMEOUT_MS)
    context.route("**/*", lambda r: r.continue_() if "127.0.0.1" in r.request.url else r.abort())
    page = context.new_page()
    response = page.goto(url, wait_until="load")
    if not response.ok:
        raise RuntimeError(f"{url}: HTTP {response.status}; is the website built from the current _toc.yml?")
    page.evaluate(MATHJAX_DONE)
    page.wait_for_function(WIDGETS_RENDERED)
    page.add_style_tag(content=PRINT_CSS)
    page.emulate_media(media="print", color_scheme="light")
    headings = page.evaluate(PREPARE)
    page.wait_for_timeout(200)  # let the moved solutions lay out
    pdf = page.pdf(print_background=True, tagged=True, outline=True, **PAPER)
    context.close()
    return headings, pdf


def front_matter(browser, book_title: str, contents: list[tuple[str, list[tuple[str, int]]]]) -> bytes:
    """Title page and table of contents; `contents` holds (part, [(section title, first page)])."""
    rows = []
    for part, sections in contents:
        rows.append(f"<h2>{html.escape(part)}</h2>" if part else "")
        rows += [f'<p class="row"><span>{html.escape(t)}</span><span>{n}</span></p>' for t, n in sections]
    doc = f"""<html><head><meta charset="utf-8"><style>
      body {{ font-family: sans-serif; }}
      .title {{ height: 240mm; display: flex; flex-direction: column; justify-content: center; text-align: center; }}
      .title h1 {{ font-size: 28pt; }}
      .contents {{ break-before: page; }}
      h2 {{ font-size: 12pt; margin: 1.2em 0 0.3em; break-after: avoid; }}
      .row {{ display: flex; justify-content: space-between; margin: 0.15em 0 0.15em 1em; font-size: 10pt; }}
      </style></head><body>
      <div class="title"><h1>{html.escape(book_title)}</h1>
      <p>The whole book, printed from its website on {time.strftime("%Y-%m-%d")}.</p>
      <p>Widgets show one frame; code, outputs and checks are as the website shows them.</p></div>
      <div class="contents"><h1>Contents</h1>{"".join(rows)}</div></body></html>"""
    page = browser.new_page()
    page.set_content(doc)
    pdf = page.pdf(print_background=True, **PAPER)
    page.close()
    return pdf


def page_numbers(browser, count: int) -> PdfReader:
    """`count` otherwise empty pages, page k showing the number k + 1 at its foot, to stamp onto the book."""
    pages = "".join(f'<div class="p"><span>{k + 1}</span></div>' for k in range(count))
    page = browser.new_page()
    page.set_content(
        "<html><head><style>@page { size: A4; margin: 0; } body { margin: 0; font: 9pt sans-serif; color: #555; }"
        ".p { height: 297mm; position: relative; break-after: page; }"
        ".p span { position: absolute; bottom: 8mm; width: 100%; text-align: center; }</style></head>"
        f"<body>{pages}</body></html>"
    )
    pdf = page.pdf(prefer_css_page_size=True)
    page.close()
    return PdfReader(io.BytesIO(pdf))


def copy_outline(reader: PdfReader, writer: PdfWriter, parent, offset: int, headings: list[str]) -> None:
    """Chromium's bookmarks of one printed page (the page's title, then its sections, as pypdf's nested lists)
    under `parent`, named by the page's `headings` (Chromium's own names run words together at line ends)."""
    names = iter(headings)
    next(names)  # the title: `parent` already stands for it

    def copy(items: list, parent) -> None:
        last = parent
        for item in items:
            if isinstance(item, list):
                copy(item, last)
            else:
                page = offset + reader.get_destination_page_number(item)
                last = writer.add_outline_item(title=next(names, item.title), page_number=page, parent=parent)

    copy(reader.outline[1] if len(reader.outline) > 1 else [], parent)


def build_pdf(site: Path = SITE, out: Path = PDF) -> Path:
    if not (site / "intro.html").exists():
        sys.exit(f"no website in {site}: build it first (python scripts/build_book.py)")
    book_title = yaml.safe_load((ROOT / "_config.yml").read_text())["title"]
    httpd = serve(site)
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    start = time.perf_counter()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        printed = []  # (part caption, [(the page's headings, its PDF)])
        for part, pages in toc():
            printed.append((part, []))
            for name in pages:
                headings, pdf = print_page(browser, f"{base}/{name}.html")
                printed[-1][1].append((headings, PdfReader(io.BytesIO(pdf))))
                print(f"{time.perf_counter() - start:6.0f} s  {name}", flush=True)

        def contents(offset: int) -> list:
            rows, first = [], offset + 1
            for part, sections in printed:
                rows.append((part, []))
                for headings, reader in sections:
                    rows[-1][1].append((headings[0], first))
                    first += len(reader.pages)
            return rows

        n_front = len(PdfReader(io.BytesIO(front_matter(browser, book_title, contents(0)))).pages)
        front = PdfReader(io.BytesIO(front_matter(browser, book_title, contents(n_front))))
        writer = PdfWriter()
        writer.append(front)
        for part, sections in printed:
            parent = None
            for headings, reader in sections:
                offset = len(writer.pages)
                writer.append(reader, import_outline=False)  # first the pages, then the bookmarks to them
                if part and parent is None:
                    parent = writer.add_outline_item(title=part, page_number=offset)
                item = writer.add_outline_item(title=headings[0], page_number=offset, parent=parent)
                copy_outline(reader, writer, item, offset, headings)
        numbers = page_numbers(browser, len(writer.pages))
        browser.close()
    httpd.shutdown()
    for k, page in enumerate(writer.pages):
        if k:
            page.merge_page(numbers.pages[k])
        page.compress_content_streams(level=9)  # merging leaves a page's content uncompressed
    writer.add_metadata({"/Title": book_title})
    writer.compress_identical_objects()
    partial = out.with_suffix(".part")  # a PDF appears whole or not at all
    with partial.open("wb") as f:
        writer.write(f)
    partial.replace(out)
    size = out.stat().st_size / 2**20
    print(f"{out}: {len(writer.pages)} pages, {size:.1f} MB, {time.perf_counter() - start:.0f} s")
    return out


if __name__ == "__main__":
    build_pdf()
