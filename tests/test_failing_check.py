"""A false claim in a notebook must fail both the book build and the notebook tests."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

pytestmark = pytest.mark.book  # builds books: not part of the quick loop

SOURCE = ROOT / "chapters" / "01_connectionism" / "01_threshold_units.ipynb"
FALSE_CLAIM = 'check("01.01", 1 + 1 == 3, "an injected false claim")'


@pytest.fixture
def book_copy(tmp_path):
    """A one-page book with the real configuration and a copy of a real notebook."""
    for name in ("_config.yml", "references.bib"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "_ext", tmp_path / "_ext")
    (tmp_path / "node_modules").symlink_to(ROOT / "node_modules")
    shutil.copy(SOURCE, tmp_path / "page.ipynb")
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: page\n")
    return tmp_path


def inject_false_claim(notebook):
    nb = json.loads(notebook.read_text())
    nb["cells"].append(
        {
            "cell_type": "code",
            "id": "injected",
            "metadata": {},
            "execution_count": None,
            "outputs": [],
            "source": [FALSE_CLAIM],
        }
    )
    notebook.write_text(json.dumps(nb))


def build(book):
    env = {name: value for name, value in os.environ.items() if name != "MPLBACKEND"}
    return subprocess.run(
        ["jupyter-book", "build", str(book)], capture_output=True, text=True, env=env, timeout=600
    )


def test_the_copy_builds_and_fails_once_a_false_check_is_injected(book_copy):
    assert build(book_copy).returncode == 0
    inject_false_claim(book_copy / "page.ipynb")
    shutil.rmtree(book_copy / "_build")
    result = build(book_copy)
    assert result.returncode != 0
    assert "an injected false claim" in result.stdout + result.stderr


def test_nbval_fails_on_a_false_check(book_copy):
    inject_false_claim(book_copy / "page.ipynb")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--nbval-lax",
            "-p",
            "no:cacheprovider",
            "-o",
            "addopts=",
            str(book_copy / "page.ipynb"),
        ],
        capture_output=True,
        text=True,
        cwd=book_copy,
        timeout=600,
    )
    assert result.returncode == 1
    assert "an injected false claim" in result.stdout and "1 failed" in result.stdout
