"""Every test of the book, in stages, with the time each took: what CI runs (.ci/run).

    python scripts/test_all.py                  # all stages
    python scripts/test_all.py unit build site  # some of them, in this order

Stages:
  lint    ruff check and ruff format --check
  unit    the unit tests of dlnotes and the hygiene tests (`pytest`, the quick loop)
  floors  the unit tests of dlnotes in a second environment (.venv-floors) with the oldest versions the package
          declares (pyproject.toml), ipywidgets 7 as on Colab among them; torch as pinned (its floor, 2.9, comes
          only as a CUDA build of several GB)
  build   the book from scratch, two notebooks at a time (scripts/build_book.py), seed 0
  site    the tests of the built book, of the website in headless Chromium and of every widget's frames
          (`pytest -m "book or browser or frames"`)
  seeds   every notebook under nbval with DLNOTES_SEED=1 and 2 (the build ran seed 0)

All stages run even when one fails; the table at the end says which failed. Exit status 1 if any did.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FLOORS_VENV = ROOT / ".venv-floors"
CI_BUDGET_SECONDS = 30 * 60
PACKAGE_TESTS = [  # the tests that need only dlnotes and its declared dependencies
    "test_activations",
    "test_checks",
    "test_cnn",
    "test_connectionism",
    "test_data",
    "test_embeddings",
    "test_exercises",
    "test_feedforward",
    "test_optimization",
    "test_plotting",
    "test_rnn",
    "test_training",
    "test_validation",
    "test_widgets",
]


def floor_requirements() -> list[str]:
    """`name==X.*` for every `name>=X` of the package's dependencies; torch as pinned in constraints.txt."""
    pins = dict(re.findall(r"^([\w-]+)==(\S+)", (ROOT / "constraints.txt").read_text(), re.M))
    requirements = []
    for dependency in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]:
        name, floor = re.fullmatch(r"([\w-]+)>=([\d.]+)", dependency).groups()
        requirements.append(f"torch=={pins['torch']}" if name == "torch" else f"{name}=={floor}.*")
    return requirements


def floors() -> list[list[str]]:
    python = FLOORS_VENV / "bin" / "python"
    commands = [] if python.exists() else [[sys.executable, "-m", "venv", str(FLOORS_VENV)]]
    pytest_pin = re.search(r"^pytest==(\S+)", (ROOT / "constraints.txt").read_text(), re.M)[1]
    commands.append(
        [str(python), "-m", "pip", "install", "-q", *floor_requirements(), f"pytest=={pytest_pin}"]
    )
    tests = [f"tests/{name}.py" for name in PACKAGE_TESTS]
    commands.append([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore", *tests])
    return commands


def nbval(seed: int) -> list[str]:
    return ["env", f"DLNOTES_SEED={seed}", sys.executable, "-m", "pytest", "-q", "--nbval-lax", "-n", "2",
            "--dist", "loadfile", "-o", "addopts=", "chapters"]  # fmt: skip


STAGES = {
    "lint": lambda: [["ruff", "check", "."], ["ruff", "format", "--check", "."]],
    "unit": lambda: [[sys.executable, "-m", "pytest", "-q"]],
    "floors": floors,
    "build": lambda: [[sys.executable, "scripts/build_book.py"]],
    "site": lambda: [[sys.executable, "-m", "pytest", "-q", "-m", "book or browser or frames"]],
    "seeds": lambda: [nbval(1), nbval(2)],
}


def main() -> None:
    chosen = sys.argv[1:] or list(STAGES)
    unknown = set(chosen) - set(STAGES)
    if unknown:
        sys.exit(f"unknown stages {sorted(unknown)}; the stages are {list(STAGES)}")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # the floors environment tests the source tree
    results, start = [], time.perf_counter()
    for stage in chosen:
        print(f"\n===== {stage}", flush=True)
        tic, ok = time.perf_counter(), True
        for command in STAGES[stage]():
            print("$", " ".join(command), flush=True)
            ok = subprocess.run(command, cwd=ROOT, env=env).returncode == 0 and ok
        results.append((stage, time.perf_counter() - tic, ok))
    total = time.perf_counter() - start
    print("\n===== stage times")
    for stage, seconds, ok in results:
        print(f"{stage:8s} {seconds:7.0f} s  {'passed' if ok else 'FAILED'}")
    print(f"{'total':8s} {total:7.0f} s  (budget {CI_BUDGET_SECONDS} s with the install)")
    sys.exit(0 if all(ok for *_, ok in results) and total <= CI_BUDGET_SECONDS else 1)


if __name__ == "__main__":
    main()
