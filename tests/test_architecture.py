"""The conventions of the package, checked on its source: where code lives, what notebooks may import, one
way to validate, one way to draw random numbers, one way out of torch, one signature per kind of function."""

import ast
import importlib
import inspect
import json
import pkgutil
import re
from pathlib import Path

import pytest

import dlnotes
import dlnotes.exercises
import dlnotes.widgets

from conftest import ROOT
from test_hygiene import NOTEBOOKS

PACKAGE = ROOT / "dlnotes"
SHARED = {
    "activations",
    "alt_text",
    "checks",
    "data",
    "embeddings",
    "plotting",
    "text",
    "training",
    "validation",
}
CHAPTERS = {
    "connectionism",
    "feedforward",
    "optimization",
    "cnn",
    "rnn",
    "transformers",
    "gdl",
    "tricks",
    "theory",
    "generative",
    "ethics",
}
MAX_LINES = 1300  # a chapter larger than this is a package with one module per section (DESIGN.md)
CHAPTER_PACKAGES = sorted(
    p.parent.name for p in PACKAGE.glob("*/__init__.py") if p.parent.name not in {"widgets", "exercises"}
)
MODULES = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__")
SECTION_MODULES = sorted(  # "theory.ntk", ...: the modules of the chapter packages
    f"{chapter}.{p.stem}" for chapter in CHAPTER_PACKAGES for p in (PACKAGE / chapter).glob("*.py")
    if p.stem != "__init__"
)  # fmt: skip


def tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def imported_modules(path: Path) -> set[str]:
    """The dlnotes modules a module of the package imports, as paths below dlnotes ("training", "theory.common")."""
    here = path.parent.relative_to(PACKAGE).parts
    found = set()
    for node in ast.walk(tree(path)):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:  # relative: from the module's own package, or from a package above it
            base, module = here[: len(here) - node.level + 1], node.module
        elif (node.module or "").startswith("dlnotes."):
            base, module = (), node.module.removeprefix("dlnotes.")
        else:
            continue
        names = [module] if module else [alias.name for alias in node.names]  # from . import a, b
        found.update(".".join((*base, name)) for name in names)
    return found


def test_every_module_is_either_shared_or_a_chapter():
    assert set(MODULES) | set(CHAPTER_PACKAGES) == SHARED | CHAPTERS, (
        "classify the new module in tests/test_architecture.py"
    )
    assert not set(MODULES) & set(CHAPTER_PACKAGES)


@pytest.mark.parametrize("name", MODULES)
def test_modules_import_only_shared_modules(name):
    """Code used by two chapters lives in a shared module: no module imports a chapter module."""
    assert imported_modules(PACKAGE / f"{name}.py") <= SHARED


@pytest.mark.parametrize("name", SECTION_MODULES)
def test_a_section_module_imports_its_chapters_shared_tools_and_the_shared_modules_only(name):
    """dlnotes/<chapter>/<section>.py may import <chapter>/common.py and the shared modules; common.py only the
    shared modules. Never another chapter, never another section (what two sections use goes into common)."""
    chapter, section = name.split(".")
    allowed = SHARED | ({f"{chapter}.common"} if section != "common" else set())
    assert imported_modules(PACKAGE / chapter / f"{section}.py") <= allowed


@pytest.mark.parametrize("chapter", CHAPTER_PACKAGES)
def test_a_chapter_package_has_a_module_per_section_named_like_its_tests_and_reexports_them(chapter):
    sections = {p.stem for p in (PACKAGE / chapter).glob("*.py")} - {"__init__"}
    tests = {p.stem.removeprefix(f"test_{chapter}_") for p in (ROOT / "tests").glob(f"test_{chapter}_*.py")}
    assert sections == tests, f"dlnotes/{chapter}/*.py and tests/test_{chapter}_*.py name the same sections"
    package = importlib.import_module(f"dlnotes.{chapter}")
    for section in sections:
        module = importlib.import_module(f"dlnotes.{chapter}.{section}")
        public = {
            name
            for name, obj in vars(module).items()
            if _defined_in(obj, module) and not name.startswith("_")
        }
        assert public <= set(package.__all__), f"dlnotes.{chapter} re-exports every public name of {section}"
        assert all(getattr(package, name) is getattr(module, name) for name in public)


def _defined_in(obj, module) -> bool:
    return (inspect.isfunction(obj) or inspect.isclass(obj)) and obj.__module__ == module.__name__


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_is_longer_than_a_reader_can_walk(path):
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{lines} lines: split it by section"


@pytest.mark.parametrize("package", [dlnotes.widgets, dlnotes.exercises], ids=["widgets", "exercises"])
def test_widget_and_exercise_modules_are_named_like_chapter_modules(package):
    names = {m.name for m in pkgutil.iter_modules(package.__path__)} - {"core"}
    assert names <= CHAPTERS


def _notebook_imports(path: Path):
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] != "code":
            continue
        code = "\n".join(
            line for line in "".join(cell["source"]).splitlines() if not line.lstrip().startswith("%")
        )
        for node in ast.walk(ast.parse(code)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dlnotes"):
                for alias in node.names:
                    yield node.module, alias.name


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebooks_import_only_public_names_from_where_they_are_defined(path):
    for module_name, name in _notebook_imports(path):
        module = importlib.import_module(module_name)
        public = getattr(module, "__all__", None)
        assert not name.startswith("_") and (public is None or name in public), (
            f"{module_name}.{name} is private"
        )
        obj = getattr(module, name)
        home = (
            getattr(obj, "__module__", module_name)
            if inspect.isfunction(obj) or inspect.isclass(obj)
            else module_name
        )
        assert module_name == "dlnotes" or home == module_name or not home.startswith("dlnotes."), (
            f"import {name} from {home}, where it is defined"
        )


def _calls(path: Path):
    for node in ast.walk(tree(path)):
        if isinstance(node, ast.Call):
            yield node


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_one_way_to_validate_draw_random_numbers_and_leave_torch(path):
    for call in _calls(path):
        text = ast.unparse(call.func)
        if path.name != "validation.py":
            assert not (text == "isinstance" and re.search(r"\bint\b", ast.unparse(call.args[1]))), (
                f"{ast.unparse(call)}: use validation.check_int"
            )
            assert text != "np.random.default_rng", (
                f"{ast.unparse(call)}: take rng and use validation.check_rng"
            )
        if path.name != "training.py":
            assert not text.endswith(".numpy"), (
                f"{ast.unparse(call)}: use training.to_numpy (it moves to the CPU)"
            )


def public_functions():
    for name in MODULES + SECTION_MODULES:
        module = importlib.import_module(f"dlnotes.{name}")
        for attribute, obj in vars(module).items():
            if (
                not attribute.startswith("_")
                and callable(obj)
                and getattr(obj, "__module__", "") == module.__name__
            ):
                yield f"{name}.{attribute}", obj


@pytest.mark.parametrize(
    ("name", "function"), list(public_functions()), ids=lambda x: x if isinstance(x, str) else ""
)
def test_one_name_per_idea(name, function):
    """rng for randomness (seed only where the global generators are seeded), batch_size for batches, eta for the step of from-scratch methods (lr only where a torch
    optimizer is used)."""
    try:
        parameters = set(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return
    assert not parameters & {"random_state", "batch", "generator"}, name
    assert "seed" not in parameters or name in ("training.seed_everything", "training.seed_each_cell"), name
    assert "lr" not in parameters or "torch.optim" in inspect.getsource(function), name


def test_every_optimizer_step_has_the_one_signature():
    from dlnotes import optimization

    steps = [f for name, f in vars(optimization).items() if name.endswith("_step") and inspect.isfunction(f)]
    assert len(steps) == 5
    for step in steps:
        parameters = list(inspect.signature(step).parameters)
        assert parameters[2:4] == ["state", "eta"], step.__name__
