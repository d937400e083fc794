"""The built website in a real browser: Debian's Chromium, driven by Playwright, with no network.

Every page is opened over localhost and the main pages also straight from disk (file://). A page
passes when it loads, all its maths is typeset by the site's own MathJax, every image has a size,
every widget shows its saved view with slider tracks a reader can use (>= 100 px), nothing logs a JavaScript
error, and no request leaves the machine.
"""

import contextlib
import functools
import http.server
import shutil
import threading
from urllib.parse import urlparse

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError
from playwright.sync_api import sync_playwright

from conftest import ROOT
from test_hygiene import toc_files

pytestmark = pytest.mark.browser
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = ROOT / "_build" / "screenshots"
PAGES = [*toc_files(), "search", "genindex"]
WIDGET_PAGES = {  # the notebooks that show a widget of the book
    page
    for page in toc_files()
    if (ROOT / f"{page}.ipynb").exists()
    and "dlnotes.widgets" in (ROOT / f"{page}.ipynb").read_text(encoding="utf-8")
}
FROM_DISK = [
    "intro",
    "chapters/01_connectionism/02_perceptron",
    "chapters/01_connectionism/04_hopfield",
    "concept_map",
]
LOCAL_HOSTS = {"127.0.0.1", "localhost"}
MIN_SLIDER_TRACK = 100  # px, at a 1280 px wide window
TIMEOUT_MS = 60_000  # for a page to load and render: in CI the notebooks run alongside (scripts/test_all.py)

# Runs in the page once MathJax and the widgets are done: what a reader would see as broken.
INSPECT = """() => {
  const skip = "pre, code, script, style, textarea, mjx-container, .highlight";
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const raw = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (node.parentElement.closest(skip)) continue;
    const text = node.textContent;
    if (/\\\\\\(|\\\\\\[|\\$\\$|\\$[^$\\s][^$]*\\$/.test(text)) raw.push(text.trim().slice(0, 80));
  }
  const math = [...document.querySelectorAll(".math")];
  const views = [...document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]')];
  return {
    raw_math: raw,
    untypeset: math.filter((m) => !m.querySelector("mjx-container")).map((m) => m.textContent.slice(0, 80)),
    typeset: document.querySelectorAll("mjx-container").length,
    broken_images: [...document.images].filter((i) => !i.complete || i.naturalWidth === 0).map((i) => i.src),
    images: document.images.length,
    widgets: views.length,
    empty_widgets: views.filter((v) => {
      const area = v.parentElement.querySelector(".jupyter-widgets");
      return !area || area.getBoundingClientRect().height === 0;
    }).length,
    slider_tracks: [...document.querySelectorAll(".widget-slider .slider-container")].map(
      (track) => Math.round(track.getBoundingClientRect().width)),
  };
}"""
WIDGETS_RENDERED = """() => [...document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]')]
  .every((v) => v.parentElement.querySelector(".jupyter-widgets"))"""
# Each precomputed widget (dlnotes.widgets.core.frame_player): its pickers in page order (a slider's position is its
# index, a dropdown's selected index) and the frame it shows, whose class "frame-i-j-..." names the pickers' indices.
# An output area holds the views of one cell (a widget and the progress bars of the training it ran): each area once.
FRAME_WIDGETS = """() => [...new Set([...document.querySelectorAll(
    'script[type="application/vnd.jupyter.widget-view+json"]')].map((v) => v.parentElement))]
  .filter((area) => area.querySelector('[class*="frame-"]'))
  .map((area) => {
    const pickers = [...area.querySelectorAll(".noUi-handle, select")].map((c) => c.tagName === "SELECT"
      ? {kind: "select", index: c.selectedIndex, count: c.options.length}
      : {kind: "slider", index: Math.round(+c.getAttribute("aria-valuenow")),
         count: Math.round(+c.getAttribute("aria-valuemax")) + 1});
    const shown = [...area.querySelectorAll("img")].filter((i) => i.offsetParent !== null);
    return {pickers, shown: shown.map((i) => [...i.classList].find((c) => c.startsWith("frame-"))),
            src: shown.map((i) => i.src)};
  })"""
SHOWS_FRAME = f"""([w, expected]) => {{
  const shown = ({FRAME_WIDGETS})()[w].shown;
  return shown.length === 1 && shown[0] === expected;
}}"""
MATHJAX_DONE = """() => !window.MathJax || !window.MathJax.startup ? true
  : window.MathJax.startup.promise.then(() => true)"""


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server(book):
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=book))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.fixture(scope="module")
def browser():
    if not shutil.which(CHROMIUM):
        pytest.fail("Chromium is missing: apt-get install chromium (or deselect with -m 'not browser')")
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def visit(
    browser, url: str, screenshot: str | None = None, redirect_to: str | None = None, operate: bool = False
) -> dict:
    """Open `url` in a fresh context (and wait for its redirect to `redirect_to`, if given); with `operate`, move
    every control of its widgets (`operate_every_control`); return what INSPECT found plus errors (the controls'
    among them), outside requests and the final URL. The screenshot shows the top of the page."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    outside, errors = [], []

    def route(request_route):
        parsed = urlparse(request_route.request.url)
        if parsed.scheme in ("http", "https", "ws", "wss") and parsed.hostname not in LOCAL_HOSTS:
            outside.append(request_route.request.url)
            request_route.abort()
        else:
            request_route.continue_()

    context.route("**/*", route)
    page = context.new_page()
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(url, wait_until="load")
    if redirect_to:
        page.wait_for_url(f"**/{redirect_to}", wait_until="load")
    page.evaluate(MATHJAX_DONE)
    page.wait_for_function(WIDGETS_RENDERED)
    page.wait_for_timeout(300)  # let the last widget views lay out
    report = page.evaluate(INSPECT)
    if screenshot:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=SCREENSHOTS / screenshot)
    if operate:
        operate_every_control(page)
    final_url = page.url
    context.close()
    return {**report, "errors": errors, "outside": outside, "url": final_url}


def assert_page_is_sound(report: dict):
    assert report["errors"] == [], "JavaScript errors"
    assert report["outside"] == [], "requests that leave the machine"
    assert report["raw_math"] == [] and report["untypeset"] == [], "maths left untypeset"
    assert report["broken_images"] == [], "images without a size"
    assert report["empty_widgets"] == 0, "widgets that show nothing"
    assert all(width >= MIN_SLIDER_TRACK for width in report["slider_tracks"]), "collapsed sliders"


@pytest.mark.parametrize("page", PAGES)
def test_page_over_localhost(server, browser, page):
    """Every page; on a page with widgets, every control as a reader uses it (`operate_every_control`)."""
    report = visit(
        browser,
        f"{server}/{page}.html",
        screenshot=page.replace("/", "__") + ".png",
        operate=page in WIDGET_PAGES,
    )
    assert_page_is_sound(report)


@pytest.mark.parametrize("page", FROM_DISK)
def test_page_from_disk(book, browser, page):
    assert_page_is_sound(visit(browser, (book / f"{page}.html").as_uri()))


def test_the_entry_point_opened_from_disk_leads_to_the_landing_page(book, browser):
    report = visit(browser, (book / "index.html").as_uri(), redirect_to="intro.html")
    assert report["url"].endswith("/intro.html")
    assert_page_is_sound(report)
    assert report["images"] >= 1  # the chapter map


def test_a_chapter_page_really_has_maths_figures_and_widgets(server, browser):
    report = visit(browser, f"{server}/chapters/01_connectionism/02_perceptron.html")
    assert report["typeset"] > 50 and report["images"] >= 5 and report["widgets"] >= 2
    assert len(visit(browser, f"{server}/chapters/04_cnn/03_conv_layers.html")["slider_tracks"]) == 5


@pytest.mark.parametrize(
    "page", ["chapters/04_cnn/03_conv_layers", "chapters/04_cnn/02_discrete_convolution"]
)
def test_the_widgets_respond_on_a_page_opened_from_disk(book, browser, page):
    assert_page_is_sound(visit(browser, (book / f"{page}.html").as_uri(), operate=True))


def operate_every_control(tab) -> None:
    """As a reader would: a key on each slider handle, a choice in each dropdown; the frame shown must be the one
    precomputed for the controls' new positions."""
    widgets = tab.evaluate(FRAME_WIDGETS)
    assert widgets, "the page imports a widget, so it must show at least one precomputed widget"
    handles, selects = tab.locator(".noUi-handle"), tab.locator("select")
    n_slider = n_select = 0
    for w, widget in enumerate(widgets):
        for p, picker in enumerate(widget["pickers"]):
            target = 0 if picker["index"] == picker["count"] - 1 else picker["count"] - 1
            if picker["kind"] == "slider":
                handles.nth(n_slider).focus()
                tab.keyboard.press("Home" if target == 0 else "End")
                n_slider += 1
            else:
                selects.nth(n_select).select_option(index=target)
                n_select += 1
            indices = [q["index"] for q in widget["pickers"]]
            indices[p] = target
            expected = "frame-" + "-".join(map(str, indices))
            with contextlib.suppress(
                PlaywrightTimeoutError
            ):  # a busy machine may take a moment: wait, then tell
                tab.wait_for_function(SHOWS_FRAME, arg=[w, expected], timeout=10_000)
            now = tab.evaluate(FRAME_WIDGETS)[w]
            assert now["pickers"][p]["index"] == target
            assert now["shown"] == [expected], (
                f"widget {w}, control {p}: shows {now['shown']}, not {expected}"
            )
            assert now["src"] != widget["src"], f"widget {w}, control {p}: the image did not change"
            widget = now


def test_the_inspection_catches_a_broken_page(server, browser, book, tmp_path):
    """The checks above can fail: a page with raw maths, a missing image and an outside request."""
    bad = book / "_broken_test_page.html"
    bad.write_text(
        '<html><body><p>raw $x^2$ here</p><img src="missing.png">'
        '<script src="https://cdn.example.org/x.js"></script></body></html>'
    )
    try:
        report = visit(browser, f"{server}/{bad.name}")
    finally:
        bad.unlink()
    assert report["raw_math"] and report["broken_images"] and report["outside"]
