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
SHARED = {"activations", "checks", "data", "embeddings", "plotting", "text", "training", "validation"}
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
MODULES = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__")


def tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def imported_siblings(path: Path) -> set[str]:
    """The dlnotes modules a module of the package imports (relative or absolute)."""
    found = set()
    for node in ast.walk(tree(path)):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level == 1:
                found.add(module.split(".")[0] if module else node.names[0].name)
            elif module.startswith("dlnotes."):
                found.add(module.split(".")[1])
    return found


def test_every_module_is_either_shared_or_a_chapter():
    assert set(MODULES) == SHARED | CHAPTERS, "classify the new module in tests/test_architecture.py"


@pytest.mark.parametrize("name", MODULES)
def test_modules_import_only_shared_modules(name):
    """Code used by two chapters lives in a shared module: no module imports a chapter module."""
    assert imported_siblings(PACKAGE / f"{name}.py") <= SHARED


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
        assert public is not None or home == module_name, f"import {name} from {home}, where it is defined"


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
    for name in MODULES:
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
    """rng for randomness, batch_size for batches, eta for the step of from-scratch methods (lr only where a torch
    optimizer is used)."""
    try:
        parameters = set(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return
    assert not parameters & {"random_state", "batch", "generator"}, name
    assert "seed" not in parameters or name == "training.seed_everything", name
    assert "lr" not in parameters or "torch.optim" in inspect.getsource(function), name


def test_every_optimizer_step_has_the_one_signature():
    from dlnotes import optimization

    steps = [f for name, f in vars(optimization).items() if name.endswith("_step") and inspect.isfunction(f)]
    assert len(steps) == 5
    for step in steps:
        parameters = list(inspect.signature(step).parameters)
        assert parameters[2:4] == ["state", "eta"], step.__name__
