"""Notebook hygiene: stored without outputs, listed in the table of contents, same setup cell, anatomy."""

import ast
import importlib
import pkgutil
import re
import symtable
from collections import defaultdict

import nbformat
import pytest
import yaml

import dlnotes

from conftest import ROOT, load_script

SOLUTION = '<details class="solution">\n<summary>Solution</summary>'  # how every solution starts, folded
NOTEBOOKS = sorted(p for p in (ROOT / "chapters").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
IDS = [str(p.relative_to(ROOT)) for p in NOTEBOOKS]

new_section = load_script("new_section")
make_references = load_script("make_references")


def toc_files():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]]

    def walk(entries):
        for entry in entries:
            if "file" in entry:
                files.append(entry["file"])
            walk(entry.get("sections", []) + entry.get("chapters", []))

    for part in toc["parts"]:
        walk(part["chapters"])
    return files


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 4


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_is_stored_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, "strip outputs: nbstripout " + str(
                path
            )
    assert "widgets" not in nb.metadata, "strip the saved widget state: nbstripout"


SHOWN = re.compile(r"\bplt\.show\(\)")
DESCRIBED = re.compile(r"\bdescribe\(")


def undescribed_figures(path) -> list[int]:
    """The code cells of a notebook that show more figures (``plt.show()``) than they describe (``describe(fig,
    ...)``, the author's alt text, dlnotes.alt_text): their indices."""
    cells = nbformat.read(path, as_version=4).cells
    return [
        k
        for k, cell in enumerate(cells)
        if cell.cell_type == "code" and len(SHOWN.findall(cell.source)) > len(DESCRIBED.findall(cell.source))
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_every_figure_a_notebook_shows_is_described_by_its_author(path):
    """The website's alt text says what is plotted and what to see in it only where the author said so; the
    automatic part (titles, axes, legends) cannot."""
    assert undescribed_figures(path) == [], (
        "cells that show a figure without describe(fig, ...) before plt.show()"
    )


def test_the_description_test_can_fail(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("fig, ax = plt.subplots()\nplt.show()")])
    nbformat.write(nb, tmp_path / "bare.ipynb")
    assert undescribed_figures(tmp_path / "bare.ipynb") == [0]


def test_every_notebook_is_in_the_toc_and_every_toc_file_exists():
    listed = set(toc_files())
    for path in NOTEBOOKS:
        assert str(path.relative_to(ROOT).with_suffix("")) in listed, f"{path} is not in _toc.yml"
    for entry in listed:
        assert any((ROOT / f"{entry}{suffix}").exists() for suffix in (".md", ".ipynb")), (
            f"{entry} has no file"
        )


def test_setup_cell_installs_and_requires_this_release_from_the_configured_repository():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    version = dlnotes.__version__
    assert f'"dlnotes @ git+{config["repository"]["url"]}@v{version}"' in new_section.SETUP_CELL
    assert new_section.SETUP_CELL.endswith(f'SEED = dlnotes.setup_notebook("{version}")')


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_starts_with_title_and_the_shared_setup_cell(path):
    nb = nbformat.read(path, as_version=4)
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")
    first_code = next(cell for cell in nb.cells if cell.cell_type == "code")
    assert first_code.source == new_section.SETUP_CELL, "run: python scripts/new_section.py --sync"
    assert {k: first_code.metadata.get(k) for k in new_section.SETUP_METADATA} == new_section.SETUP_METADATA


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_has_checks_exercises_with_solutions_and_a_summary(path):
    nb = nbformat.read(path, as_version=4)
    code = "\n".join(cell.source for cell in nb.cells if cell.cell_type == "code")
    text = "\n".join(cell.source for cell in nb.cells if cell.cell_type == "markdown")
    assert re.search(r"""\bcheck\(\s*["']\d\d\.\d\d["']""", code), "no check(...) in the notebook"
    assert "## Exercises" in text and SOLUTION in text, "exercises need solutions, folded in <details>"
    assert "## Summary" in text


GRADED = re.compile(r"^def my_(\w+)\(.*?raise NotImplementedError.*?^grade_\1\(my_\1\)$", re.M | re.S)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_has_a_graded_exercise_that_starts_as_a_stub(path):
    """A reader writes my_<name> in a cell that starts as a stub, and grade_<name> checks it (dlnotes.exercises)."""
    import dlnotes.exercises
    from dlnotes.exercises import GRADERS

    for module in pkgutil.iter_modules(dlnotes.exercises.__path__):
        importlib.import_module(f"dlnotes.exercises.{module.name}")
    cells = [cell.source for cell in nbformat.read(path, as_version=4).cells if cell.cell_type == "code"]
    graded = [match[1] for source in cells if (match := GRADED.search(source))]
    assert graded, (
        "no graded exercise: def my_<name>(...): raise NotImplementedError, then grade_<name>(my_<name>)"
    )
    assert all(name in GRADERS for name in graded), graded


MYST_ONLY = re.compile(r"^`{3,}\{[\w-]+\}|\{[a-z][\w:-]*\}`|^:class:", re.M)  # directives, roles, options


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_markdown_reads_the_same_without_a_myst_renderer(path):
    """Colab and plain Jupyter show MyST directives and roles as raw text, and HTML classes unstyled: solutions go
    into <details>, "Common mistakes" into a block quote that opens with a bold "⚠ Common mistakes" (styled on the
    website by _ext/dlnotes_site.py), citations are links to an entry of the references page."""
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type == "markdown":
            found = MYST_ONLY.findall(cell.source) + re.findall(r"class=\"admonition[^\"]*\"", cell.source)
            assert not found, f"{cell.get('id')}: MyST-only markup or an unstyled box {found}"
            boxes = re.findall(r"^.*Common mistakes.*$", cell.source, re.M)
            assert all(line == "> **⚠ Common mistakes**" for line in boxes), f"{cell.get('id')}: {boxes}"


def markdown_of(path) -> str:
    if path.suffix == ".md":
        return path.read_text()
    return "\n".join(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown")


def linked_pages() -> list:
    """The Markdown pages a reader reaches from a notebook by following links, and the pages they link to."""
    pages, queue = set(), list(NOTEBOOKS)
    while queue:
        path = queue.pop()
        for target in re.findall(r"\]\(([^)#\s]+\.md)(?:#[^)]*)?\)", markdown_of(path)):
            page = (path.parent / target).resolve()
            if page not in pages:
                pages.add(page)
                queue.append(page)
    return sorted(pages)


LINKED_PAGES = linked_pages()


def author_year(entry) -> tuple[str, str]:
    """How the book cites a bibliography entry: "Cover", "Widrow and Hoff" or "He et al.", and the year."""
    names = [make_references.surname(person) for person in entry.persons["author"]]
    who = names[0] if len(names) == 1 else " and ".join(names) if len(names) == 2 else f"{names[0]} et al."
    return who, entry.fields["year"]


# [Author (year)](../../references.md#key), the key of an entry of references.bib
CITATION = re.compile(r"\[([^\]]+)\]\((?:\.\./)*references\.md(#[^)]*)?\)")


def test_every_citation_links_to_the_entry_whose_authors_and_year_it_names():
    from pybtex.database import parse_file

    entries = parse_file(ROOT / "references.bib").entries
    cited = set()
    for path in [*NOTEBOOKS, *LINKED_PAGES]:
        for link, target in CITATION.findall(markdown_of(path)):
            assert target, f"{path.name}: [{link}] links to the references page, not to an entry (#key)"
            key = target[1:]
            assert key in entries, f"{path.name}: {target} is not a key of references.bib"
            parsed = re.fullmatch(r"(.+?)(?:, | \()(\d{4})\)?", " ".join(link.split()))
            assert parsed, f"{path.name}: cite as [Author, year] or [Author (year)], not [{link}]"
            assert parsed.groups() == author_year(entries[key]), f"{path.name}: [{link}] links to {key}"
            cited.add(key)
    assert len(cited) >= 40


def test_the_references_page_is_generated_from_the_bibliography():
    assert (ROOT / "references.md").read_text() == make_references.page(), (
        "run: python scripts/make_references.py"
    )


RAW_MYST = re.compile(r'class="language-\{[\w-]+\}|\{[a-z][\w:-]*\}<code>|^:[a-z]+:.*|^\([\w-]+\)=', re.M)


@pytest.mark.parametrize("page", LINKED_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_pages_notebooks_link_to_read_well_in_plain_markdown(page):
    """JupyterLab, Colab and GitHub render these pages with a plain Markdown renderer (no MyST): rendered that
    way they show no directive, role or option."""
    from markdown_it import MarkdownIt

    html = MarkdownIt("commonmark").enable("table").render(page.read_text())
    raw = RAW_MYST.findall(html)
    assert not raw, f"{page.relative_to(ROOT)} shows raw MyST: {raw}"


def test_plain_nbconvert_shows_no_raw_markup_and_folds_every_solution():
    """What a reader without the book's tools sees: nbconvert's own Markdown renderer, no MyST."""
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(template_name="lab")
    for path in NOTEBOOKS:
        html, _ = exporter.from_notebook_node(nbformat.read(path, as_version=4))
        body = re.sub(r"<script.*?</script>|<style.*?</style>", "", html, flags=re.S)
        assert not re.search(r"\{admonition\}|\{cite:|:class:|```\{", body), path.name
        summaries = re.findall(r"<details class=\"solution\">\s*<summary>Solution</summary>", body)
        assert summaries and len(summaries) == body.count(">Solution<"), (
            f"{path.name}: a solution is not folded"
        )
        assert "<details open" not in body and '<details class="solution" open' not in body


def test_new_section_creates_a_notebook_that_passes_the_anatomy_tests(tmp_path):
    path = tmp_path / "01_demo.ipynb"
    new_section.new_section(path, "Demo")
    nb = nbformat.read(path, as_version=4)
    assert nb.cells[1].source == new_section.SETUP_CELL and nb.cells[0].source.startswith("# Demo")
    assert nb.cells[1].metadata == {"tags": ["hide-input"], "jupyter": {"source_hidden": True}}
    with pytest.raises(FileExistsError):
        new_section.new_section(path, "Demo")


def test_ci_runs_exactly_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    commands = re.findall(r"```bash\n(.+?)\n```", readme)
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert ci in commands and ci.endswith("&& python scripts/test_all.py")


@pytest.mark.parametrize("index", sorted((ROOT / "chapters").glob("*/index.md")), ids=lambda p: p.parent.name)
def test_every_chapter_overview_has_a_notation_box_taken_from_the_notation_page(index):
    box = re.search(r"^> \*\*Notation in this chapter\*\*\n((?:>.*\n)+)", index.read_text(), re.M)
    assert box, f"{index.relative_to(ROOT)} lacks the block quote 'Notation in this chapter'"
    rows = [line[2:] for line in box.group(1).splitlines() if line.startswith("> | $")]
    page = set((ROOT / "notation.md").read_text().splitlines())
    assert rows and all(row in page for row in rows), [row for row in rows if row not in page]


def test_the_chapter_list_is_the_one_source_of_toc_captions_and_the_chapter_map(tmp_path):
    chapters = yaml.safe_load((ROOT / "chapters" / "chapters.yml").read_text())
    assert [c["number"] for c in chapters] == list(range(1, 12))
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    captions = {part["chapters"][0]["file"]: part["caption"] for part in toc["parts"]}
    for chapter in chapters:
        index = f"chapters/{chapter['folder']}/index"
        if (ROOT / f"{index}.md").exists():
            assert captions.get(index) == f"{chapter['number']} · {chapter['title']}", index
    assert {p.parent.name for p in (ROOT / "chapters").glob("*/index.md")} <= {c["folder"] for c in chapters}
    make_chapter_map = load_script("make_chapter_map")
    make_chapter_map.draw(tmp_path / "map.svg")
    assert (tmp_path / "map.svg").read_bytes() == make_chapter_map.OUT.read_bytes(), (
        "the chapter map is out of date: python scripts/make_chapter_map.py"
    )


def _cell_bindings(code: str) -> tuple[set[str], set[str]]:
    """The names a code cell binds at the top level, and the names it reads that an earlier cell must have bound
    (read before the cell binds them, or read by a function of the cell without the cell binding them)."""
    binds: dict[str, int] = {}  # name -> when the cell first binds it (in evaluation order)
    loads: dict[str, int] = {}  # name -> when the cell first reads it
    order = iter(range(10**9))

    class TopLevel(ast.NodeVisitor):
        def visit_FunctionDef(self, node):
            binds.setdefault(node.name, next(order))

        visit_AsyncFunctionDef = visit_ClassDef = visit_FunctionDef

        def visit_Lambda(self, node):  # own scopes: their names are not the notebook's
            pass

        visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = visit_Lambda

        def visit_Assign(self, node):  # the value is evaluated before the targets are bound
            self.visit(node.value)
            for target in node.targets:
                self.visit(target)

        def visit_AugAssign(self, node):  # x += 1 reads x first
            if isinstance(node.target, ast.Name):
                loads.setdefault(node.target.id, next(order))
            self.visit(node.value)
            self.visit(node.target)

        def visit_For(self, node):
            self.visit(node.iter)
            self.visit(node.target)
            for statement in node.body + node.orelse:
                self.visit(statement)

        def visit_Name(self, node):
            (loads if isinstance(node.ctx, ast.Load) else binds).setdefault(node.id, next(order))

        def visit_alias(self, node):
            binds.setdefault((node.asname or node.name).split(".")[0], next(order))

    TopLevel().visit(ast.parse(code))

    def globals_of_nested_scopes(table) -> set[str]:
        names = {s.get_name() for child in table.get_children() for s in child.get_symbols()
                 if s.is_referenced() and s.is_global() and not s.is_assigned()}  # fmt: skip
        return names.union(*(globals_of_nested_scopes(child) for child in table.get_children()))

    read_from_before = {name for name, when in loads.items() if name not in binds or binds[name] > when}
    read_from_before |= globals_of_nested_scopes(symtable.symtable(code, "cell", "exec")) - set(binds)
    return set(binds), read_from_before


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_no_cell_rebinds_a_name_that_other_cells_read(path):
    """Students re-run cells out of order: a name that one cell reads from another must be bound by one cell
    only, or re-running an earlier cell after Run All silently uses the later value."""
    bound_in, shared = defaultdict(list), set()
    for number, cell in enumerate(nbformat.read(path, as_version=4).cells):
        if cell.cell_type == "code":
            code = "\n".join(
                line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!"))
            )
            bound, read = _cell_bindings(code)
            shared |= read
            for name in bound:
                bound_in[name].append(number)
    rebound = {name: cells for name, cells in bound_in.items() if len(cells) > 1 and name in shared}
    assert rebound == {}, f"names bound in several cells (cell numbers): {rebound}"


def test_the_rebinding_test_can_fail(tmp_path):
    bound, read = _cell_bindings(
        "def f():\n    return X + 1\n\ny = y + f()\nz += 1\nfor k in k_list:\n    w = k"
    )
    assert bound == {"f", "y", "z", "k", "w"} and read == {"X", "y", "z", "k_list"}


def test_a_training_cell_run_again_prints_what_it_printed_first():
    """A student re-runs a training cell: the setup cell seeds every cell from its text (seed_each_cell), so the
    accuracies it prints are the page's, not those of generators that have moved on."""
    from nbclient import NotebookClient

    notebook = nbformat.read(ROOT / "chapters/11_ethics/03_attacks.ipynb", as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    training = next(i for i, cell in enumerate(code) if "train_classifier(" in cell.source)
    notebook.cells = code[: training + 1]
    client = NotebookClient(
        notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": ROOT}}
    )

    def printed(index: int) -> str:
        client.execute_cell(notebook.cells[index], index)
        return "".join(out.get("text", "") for out in notebook.cells[index].outputs)

    with client.setup_kernel():
        for index in range(training):
            client.execute_cell(notebook.cells[index], index)
        first = printed(training)
        again = printed(training)
    assert "accuracy" in first and again == first
