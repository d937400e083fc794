"""`pip install git+<repository>` must give a working package: the wheel carries the shipped data."""

import shutil
import subprocess
import sys
import tomllib
import zipfile

from conftest import ROOT


def test_wheel_contains_the_package_and_its_data(tmp_path):
    source = tmp_path / "source"  # setuptools builds in the working directory: keep the checkout clean
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "dlnotes", source / "dlnotes", ignore=shutil.ignore_patterns("__pycache__"))
    command = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "-q",
        "-w",
        str(tmp_path),
        ".",
    ]
    subprocess.run(command, check=True, capture_output=True, cwd=source)
    (wheel,) = tmp_path.glob("dlnotes-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"dlnotes/__init__.py", "dlnotes/connectionism.py"} <= names
    assert {
        "dlnotes/datafiles/fashion_mnist_subset.npz",
        "dlnotes/datafiles/pride_and_prejudice.txt",
    } <= names
    assert not any(name.startswith(("tests/", "chapters/", "scripts/")) for name in names)


def test_dependencies_are_ranges_and_the_constraints_pin_them():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not any("==" in requirement for requirement in project["dependencies"])
    pins = dict(
        line.split("==") for line in (ROOT / "constraints.txt").read_text().splitlines() if "==" in line
    )
    assert pins["torch"] == "2.13.0" and pins["jupyter-book"].startswith("1.")
    for requirement in project["dependencies"]:
        name = requirement.split(">=")[0]
        assert name in pins, f"{name} is not pinned in constraints.txt"
