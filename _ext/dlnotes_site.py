"""Sphinx extension of the book: offline scripts, the concept map, and what the build tells the notebooks.

* MathJax and the ipywidgets renderer come from npm (``npm ci``, pinned in package-lock.json)
  and are copied into ``_build/html/_vendor/`` after the build, outside ``_static/``, so the
  website needs no CDN. ``_config.yml`` points ``mathjax_path`` and ``nb_ipywidgets_js`` there.
* The ``{chapter-table}`` directive renders the landing page's table of chapters from ``chapters/chapters.yml``.
* The ``{concept-map}`` directive renders, from ``concepts.yml`` and the notebooks, every concept
  with the sections whose ``check("CC.NN", ...)`` tests it and the dlnotes functions involved.
* Before a notebook executes, ``DLNOTES_NOTEBOOK`` names it, so that ``dlnotes.check`` can log which checks
  ran where (when ``DLNOTES_CHECK_LOG`` is set, as ``scripts/build_book.py`` does).
* ``DLNOTES_WIDGET_FRAMES=1`` tells every notebook the build executes that its page will have no kernel: each
  widget precomputes its figures and switches between them in the browser (``dlnotes.widgets.core``).
* ``static/dlnotes.css`` styles the solutions of the exercises, which are HTML ``<details>`` in the notebooks, and
  the "Common mistakes" boxes, which are block quotes everywhere else (the ``mistakes`` class is added here).
* The entries of ``references.md`` start with an HTML anchor named by the BibTeX key, which every Markdown reader
  honours; MyST resolves a link ``references.md#key`` only to ids it knows, so the anchors are registered.
* Accessibility: a figure's alt text comes from its output's metadata (``dlnotes.alt_text``) instead of its file
  name; ``static/dlnotes-a11y.js`` names the widgets' sliders by their labels and makes the theme's buttons'
  names contain their visible words.
* Two extensions of Jupyter Book leave open whether they are safe to read in parallel; they are, and saying
  so lets ``scripts/build_book.py`` execute notebooks on several cores.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
from collections import defaultdict
from pathlib import Path

import yaml
from docutils import nodes
from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.util.docutils import SphinxDirective

VENDOR = {  # destination under _build/html/_vendor  <-  source under node_modules
    "mathjax/tex-svg-full.js": "mathjax/es5/tex-svg-full.js",
    "html-manager": "@jupyter-widgets/html-manager/dist",
}
COMPAT = Path(__file__).with_name("mathjax2-compat.js")  # ours: the widget renderer speaks MathJax 2
CHECK = re.compile(r"""\bcheck\(\s*["'](\d\d\.\d\d)["']""")
SETUP_NAMES = {"check", "seed_everything", "use_style"}


# ----------------------------------------------------------------------------- offline assets


def _node_modules(app: Sphinx) -> Path:
    return Path(app.srcdir) / "node_modules"


def check_vendor(app: Sphinx) -> None:
    missing = [src for src in VENDOR.values() if not (_node_modules(app) / src).exists()]
    if missing:
        raise ExtensionError(
            f"missing {', '.join(missing)} under node_modules/: run `npm ci` before building"
        )


def copy_vendor(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    for dest, src in VENDOR.items():
        source, target = _node_modules(app) / src, Path(app.outdir) / "_vendor" / dest
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.map"))
        else:
            shutil.copy2(source, target)
    shutil.copy2(COMPAT, Path(app.outdir) / "_vendor" / COMPAT.name)


def drop_thebe(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """Remove sphinx-thebe's scripts: the book has no live-code button, and Jupyter Book adds
    thebe's configuration twice, which raises 'THEBE_JS_URL has already been declared'. Only thebe's own files
    and its configuration go: a widget state's base64 images may spell "thebe" by chance."""
    if "script_files" in context:
        context["script_files"] = [
            js
            for js in context["script_files"]
            if "thebe" not in (js.filename or "").lower()
            and "THEBE_JS_URL" not in js.attributes.get("body", "")
        ]


def name_the_notebook(app: Sphinx, docname: str, source: list[str]) -> None:
    """Read before the page's notebook executes: its kernel inherits the name."""
    os.environ["DLNOTES_NOTEBOOK"] = docname


# ----------------------------------------------------------------------------- concept map


def _dlnotes_names(tree: ast.AST, imported: dict[str, str]) -> set[str]:
    """Qualified dlnotes names used in a cell: imported names, and dotted ``dlnotes.x.y`` chains."""
    used = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dlnotes"):
            for alias in node.names:
                imported[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Name) and node.id in imported and node.id not in SETUP_NAMES:
            used.add(imported[node.id])
        elif isinstance(node, ast.Attribute):
            chain = ast.unparse(node)
            if re.fullmatch(r"dlnotes(\.\w+){2}", chain):
                used.add(chain)
    return used


def concept_checks(root: Path) -> dict[str, dict[str, set[str]]]:
    """For every concept id checked in a notebook under ``chapters/``: docname -> the dlnotes names used
    in the cells of the same section (since the last heading or check) up to the cell with the check."""
    found: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for path in sorted((root / "chapters").rglob("*.ipynb")):
        if ".ipynb_checkpoints" in path.parts:
            continue
        docname = path.relative_to(root).with_suffix("").as_posix()
        imported: dict[str, str] = {}
        used: set[str] = set()
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            source = "".join(cell["source"])
            if cell["cell_type"] == "markdown":
                if re.search(r"^#+ ", source, re.M):
                    used = set()
                continue
            code = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
            try:
                used |= _dlnotes_names(ast.parse(code), imported)
            except SyntaxError:
                pass
            ids = CHECK.findall(source)
            for cid in ids:
                found[cid][docname] |= used
            if ids:
                used = set()
    return found


def _title(root: Path, docname: str) -> str:
    """A notebook's title up to its first colon, e.g. '1.4 Cover's theorem'."""
    cells = json.loads((root / f"{docname}.ipynb").read_text(encoding="utf-8"))["cells"]
    return "".join(cells[0]["source"]).splitlines()[0].lstrip("# ").split(":")[0]


def _chapter_captions(root: Path) -> dict[str, str]:
    """Chapter index docname -> its part's caption in _toc.yml, e.g. '1 · Connectionism'."""
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    return {part["chapters"][0]["file"]: part["caption"] for part in toc["parts"]}


def chapter_list(root: Path) -> list[dict]:
    return yaml.safe_load((root / "chapters" / "chapters.yml").read_text(encoding="utf-8"))


class ChapterTable(SphinxDirective):
    """``{chapter-table}``: number, title (a link once the chapter is written) and contents of every chapter."""

    def run(self):
        root = Path(self.env.srcdir)
        self.env.note_dependency(str(root / "chapters" / "chapters.yml"))
        lines = ["| | chapter | what it is about |", "|---|---|---|"]
        for chapter in chapter_list(root):
            index = f"chapters/{chapter['folder']}/index"
            if (root / f"{index}.md").exists():
                lines.append(
                    f"| {chapter['number']} | {{doc}}`{chapter['title']} </{index}>` | {chapter['about']} |"
                )
            else:
                lines.append(
                    f"| {chapter['number']} | {chapter['title']} | {chapter['about']} *(in preparation)* |"
                )
        return self.parse_text_to_nodes("\n".join(lines))


def concept_names(root: Path) -> dict[str, str]:
    return {str(k): v for k, v in yaml.safe_load((root / "concepts.yml").read_text(encoding="utf-8")).items()}


class ConceptMap(SphinxDirective):
    """``{concept-map}``: one table per chapter of concept id, name, sections and dlnotes functions."""

    def run(self):
        root = Path(self.env.srcdir)
        self.env.note_dependency(str(root / "concepts.yml"))
        for path in (root / "chapters").rglob("*.ipynb"):
            self.env.note_dependency(str(path))
        names, checks, captions = concept_names(root), concept_checks(root), _chapter_captions(root)
        lines = []
        for chapter in sorted({cid[:2] for cid in names}):
            (index,) = (root / "chapters").glob(f"{chapter}_*/index.md")
            docname = index.relative_to(root).with_suffix("").as_posix()
            lines += ["", f"**{{doc}}`{captions.get(docname, docname)} </{docname}>`**", ""]
            lines += ["| id | concept | checked in | functions of `dlnotes` |", "|---|---|---|---|"]
            for cid in sorted(c for c in names if c.startswith(chapter)):
                docs = checks.get(cid, {})
                sections = ", ".join(f"{{doc}}`{_title(root, doc)} </{doc}>`" for doc in sorted(docs))
                functions = ", ".join(
                    f"`{f.removeprefix('dlnotes.')}`" for f in sorted(set().union(*docs.values()))
                )
                lines.append(f"| {cid} | {names[cid]} | {sections} | {functions} |")
        return self.parse_text_to_nodes("\n".join(lines))


# Extensions of Jupyter Book that do not declare whether Sphinx may read documents in parallel. Both are
# safe to read in parallel: sphinx_multitoc_numbering only renumbers the toctree after reading, in the main
# process, and sphinx_jupyterbook_latex only acts for the LaTeX builder.
PARALLEL_READ_SAFE = ("sphinx_multitoc_numbering", "sphinx_jupyterbook_latex")


def add_static(app: Sphinx, config) -> None:
    """The book's own style sheet (the look of the folded solutions)."""
    config.html_static_path.append(str(Path(__file__).with_name("static")))


def declare_parallel_read_safe(app: Sphinx, config) -> None:
    """Let the book's notebooks execute on several cores (`jobs` > 1) by declaring what the authors left open."""
    for name in PARALLEL_READ_SAFE:
        if name in app.extensions and app.extensions[name].parallel_read_safe is None:
            app.extensions[name].parallel_read_safe = True


# ----------------------------------------------------------------------------- pages read anywhere

ANCHOR = re.compile(r'<a id="([\w-]+)">')  # MyST keeps each inline tag apart
MISTAKES = "⚠ Common mistakes"


def register_reference_anchors(app: Sphinx, doctree: nodes.document) -> None:
    if app.env.docname != "references":
        return
    slugs = app.env.metadata["references"].setdefault("myst_slugs", {})
    for raw in doctree.findall(nodes.raw):
        for key in ANCHOR.findall(raw.astext()):
            slugs[key] = (raw.line, key, key)


def mark_common_mistakes(app: Sphinx, doctree: nodes.document) -> None:
    """A block quote whose first words are "⚠ Common mistakes" (in bold) becomes a styled box on the website."""
    for quote in doctree.findall(nodes.block_quote):
        if quote.children and quote[0].astext().startswith(MISTAKES):
            quote["classes"].append("mistakes")


# ----------------------------------------------------------------------------- accessible pages


def alt_from_output_metadata() -> None:
    """myst-nb names a notebook image by its file path; the book's notebooks store a description of every figure in
    the output's metadata (``{"image/png": {"alt": ...}}``, written by ``dlnotes.alt_text``): use it as the alt."""
    from myst_nb.core.render import NbElementRenderer

    render_image = NbElementRenderer.render_image
    if getattr(render_image, "reads_alt", False):
        return

    def render_image_with_alt(self, data):
        images = render_image(self, data)
        alt = data.output_metadata.get(data.mime_type, {}).get("alt")
        for image in images:
            if alt and isinstance(image, nodes.image):
                image["alt"] = alt
        return images

    render_image_with_alt.reads_alt = True
    NbElementRenderer.render_image = render_image_with_alt


def setup(app: Sphinx) -> dict:
    os.environ["DLNOTES_WIDGET_FRAMES"] = "1"  # the kernels that execute the notebooks inherit it
    app.connect("config-inited", declare_parallel_read_safe)
    app.connect("config-inited", add_static)
    app.add_css_file("dlnotes.css")
    app.add_js_file("dlnotes-a11y.js")
    alt_from_output_metadata()
    app.connect("builder-inited", check_vendor)
    app.connect("source-read", name_the_notebook)
    app.connect("build-finished", copy_vendor)
    app.connect("html-page-context", drop_thebe)
    app.connect("doctree-read", register_reference_anchors)
    app.connect("doctree-read", mark_common_mistakes)
    app.add_js_file(f"../_vendor/{COMPAT.name}", priority=200)  # before MathJax (500)
    app.add_directive("concept-map", ConceptMap)
    app.add_directive("chapter-table", ChapterTable)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
