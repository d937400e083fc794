"""The built website in a real browser: Debian's Chromium, driven by Playwright, with no network.

Every page is opened over localhost and the main pages also straight from disk (file://). A page
passes when it loads, all its maths is typeset by the site's own MathJax, every image has a size,
every widget shows its saved view with slider tracks a reader can use (>= 100 px), nothing logs a JavaScript
error, and no request leaves the machine.

Every page is also accessible (WCAG 2.1 A and AA): axe-core (pinned in package.json) finds no violation of its
WCAG rules, in the light theme and, for contrast, in the dark one; every image in the text has an alt text that
describes it (`test_every_figure_has_an_alt_text`); every formula carries MathJax's assistive MathML.
"""

import contextlib
import functools
import http.server
import re
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
# One xdist group per page (`--dist loadgroup` in scripts/test_all.py): a page's three tests share one visit.
PAGE_PARAMS = [pytest.param(page, marks=pytest.mark.xdist_group(page), id=page) for page in PAGES]
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
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
WCAG = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]  # axe's tags for the rules of WCAG 2.0 and 2.1, A and AA
AXE_EXCLUDED: dict[str, str] = {}  # rule id -> why the book does not follow it (none so far)
# axe-core's verdict on the page as it is (light theme), then the contrast again in the dark theme.
AUDIT = """async ([tags, excluded]) => {
  const rules = Object.fromEntries(excluded.map((rule) => [rule, {enabled: false}]));
  const found = (result, theme) => result.violations.map((v) =>
    `${theme}: ${v.id} (${v.impact}) on ${v.nodes.length} elements, e.g. ${v.nodes[0].target.join(" ")}: ${v.help}`);
  const light = await axe.run(document, {runOnly: {type: "tag", values: tags}, rules});
  const root = document.documentElement, theme = root.dataset.theme;
  root.dataset.theme = "dark";
  const dark = await axe.run(document, {runOnly: {type: "rule", values: ["color-contrast"]}});
  root.dataset.theme = theme;
  return [...found(light, "light"), ...found(dark, "dark")];
}"""
# The images of the text (not the theme's logo) with their alt text, and formulas that a screen reader cannot read.
ALT_TEXTS = """() => [...document.querySelectorAll(".bd-article img")].map((i) => [i.src.split("/").pop().slice(0, 40),
  i.getAttribute("alt")])"""
UNSPOKEN_MATHS = """() => [...document.querySelectorAll("mjx-container")].filter(
  (m) => !m.querySelector("mjx-assistive-mml math")).length"""
MIN_ALT_WORDS = 6
PATH_LIKE = re.compile(r"(^|/)[\w.-]+\.(png|jpe?g|gif|svg|webp)$|^\.\.?/|_images/", re.IGNORECASE)
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
    browser,
    url: str,
    screenshot: str | None = None,
    redirect_to: str | None = None,
    operate: bool = False,
    audit: bool = False,
) -> dict:
    """Open `url` in a fresh context (and wait for its redirect to `redirect_to`, if given); with `audit`, run axe-core
    and collect the alt texts (AUDIT, ALT_TEXTS); with `operate`, move every control of its widgets
    (`operate_every_control`); return what INSPECT found plus errors (the controls' among them), outside requests and
    the final URL. The screenshot shows the top of the page."""
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
    if audit:
        page.add_script_tag(path=AXE)
        report["axe"] = page.evaluate(AUDIT, [WCAG, list(AXE_EXCLUDED)])
        report["alt_texts"] = page.evaluate(ALT_TEXTS)
        report["unspoken_maths"] = page.evaluate(UNSPOKEN_MATHS)
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


@pytest.fixture(scope="module")
def reports(server, browser):
    """What `visit` finds on a page, audited and its widgets operated: each page visited once for the three tests."""

    @functools.cache
    def report(page: str) -> dict:
        return visit(
            browser,
            f"{server}/{page}.html",
            screenshot=page.replace("/", "__") + ".png",
            operate=page in WIDGET_PAGES,
            audit=True,
        )

    return report


@pytest.mark.parametrize("page", PAGE_PARAMS)
def test_page_over_localhost(reports, page):
    """Every page; on a page with widgets, every control as a reader uses it (`operate_every_control`)."""
    assert_page_is_sound(reports(page))


@pytest.mark.parametrize("page", PAGE_PARAMS)
def test_page_is_accessible(reports, page):
    """WCAG 2.1 A and AA as axe-core checks them, in the light and the dark theme; maths a screen reader can read."""
    report = reports(page)
    assert report["axe"] == [], "\n".join(report["axe"])
    assert report["unspoken_maths"] == 0, "formulas without assistive MathML"


@pytest.mark.parametrize("page", PAGE_PARAMS)
def test_every_figure_has_an_alt_text(reports, page):
    """An image of the text must say what it shows: an alt text that is no file name and has a few words."""
    bad = [(src, alt) for src, alt in reports(page)["alt_texts"] if not alt_text_is_meaningful(alt)]
    assert bad == [], f"images without a meaningful alt text: {bad[:5]}"


def alt_text_is_meaningful(alt: str | None) -> bool:
    return alt is not None and not PATH_LIKE.search(alt.strip()) and len(alt.split()) >= MIN_ALT_WORDS


def test_the_alt_text_test_tells_a_file_name_or_a_word_from_a_description():
    assert not alt_text_is_meaningful(None)
    assert not alt_text_is_meaningful("../../_images/e51743ab.png")
    assert not alt_text_is_meaningful("figure")
    assert alt_text_is_meaningful("Training loss against step for SGD and Adam; Adam falls fastest.")


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
    """The checks above can fail: a page with raw maths, a missing image, an outside request, an image whose alt text
    is its path, a slider without a name and grey text on white."""
    bad = book / "_broken_test_page.html"
    bad.write_text(
        '<html lang="en"><head><title>broken</title></head><body><main><div class="bd-article">'
        '<p>raw $x^2$ here</p><img src="missing.png" alt="../_images/missing.png">'
        '<div role="slider" tabindex="0" aria-valuenow="1"></div><p style="color: #bbb">faint</p>'
        '<script src="https://cdn.example.org/x.js"></script></div></main></body></html>'
    )
    try:
        report = visit(browser, f"{server}/{bad.name}", audit=True)
    finally:
        bad.unlink()
    assert report["raw_math"] and report["broken_images"] and report["outside"]
    assert not alt_text_is_meaningful(report["alt_texts"][0][1])
    found = " ".join(report["axe"])
    assert "light: aria-input-field-name" in found and "light: color-contrast" in found
    assert "dark: color-contrast" in found
