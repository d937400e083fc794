"""Every test of the book, in stages, with the time each took: what CI runs (.ci/run).

    python scripts/test_all.py                  # the stages of CI, lint to seeds, two of them in pairs
    python scripts/test_all.py unit build site  # some of them, one after another in this order
    python scripts/test_all.py allseeds         # every notebook under both seeds 1 and 2 (before closing a chapter)

Stages (the tests run two at a time, `-n 2`, on the book's one thread per process; in CI, floors runs alongside
unit and seeds alongside site, see CI_GROUPS):
  lint      ruff check and ruff format --check
  unit      the unit tests of dlnotes and the hygiene tests (`pytest`, the quick loop)
  floors    the unit tests of dlnotes in a second environment (.venv-floors) with the oldest versions the package
            declares (pyproject.toml), ipywidgets 7 as on Colab among them; torch as pinned (its floor, 2.9, comes
            only as a CUDA build of several GB)
  build     the book from scratch, two notebooks at a time (scripts/build_book.py), seed 0
  site      the tests of the built book, of the website in headless Chromium, of the PDF printed from it and of
            every widget's frames
            (`pytest -m "book or browser or frames"`)
  seeds     every notebook under nbval once more with another seed: 1 for the first, third, ... notebook
            (in path order), 2 for the others (the build ran seed 0)
  allseeds  every notebook under nbval with the seed 1 and again with the seed 2: not part of CI's 30 minutes

All stages run even when one fails. The table at the end (scripts/benchmark.py, also written to
_build/benchmark.json) gives each stage's seconds, the build's, each notebook's and each widget's, beside their
budgets: a budget is a benchmark, not a test, so a slow machine fails nothing. Exit status 1 if a stage failed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import benchmark  # scripts/benchmark.py: this folder is on the path of a script

ROOT = Path(__file__).resolve().parent.parent
FLOORS_VENV = ROOT / ".venv-floors"
PACKAGE_TESTS = [  # the tests that need only dlnotes and its declared dependencies
    "test_activations",
    "test_alt_text",
    "test_checks",
    "test_cnn",
    "test_connectionism",
    "test_data",
    "test_embeddings",
    "test_exercises",
    "test_feedforward",
    "test_optimization",
    "test_plotting",
    "test_text",
    "test_rnn_ctc",
    "test_rnn_gated",
    "test_rnn_language",
    "test_rnn_linear",
    "test_rnn_seq2seq",
    "test_rnn_simple",
    "test_training",
    "test_validation",
    "test_widgets",
]


def pin(name: str) -> str:
    """The version of `name` pinned in constraints.txt."""
    return re.search(rf"^{re.escape(name)}==(\S+)", (ROOT / "constraints.txt").read_text(), re.M)[1]


def floor_requirements() -> list[str]:
    """`name==X.*` for every `name>=X` of the package's dependencies; torch as pinned in constraints.txt."""
    requirements = []
    for dependency in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]:
        name, floor = re.fullmatch(r"([\w-]+)>=([\d.]+)", dependency).groups()
        requirements.append(f"torch=={pin('torch')}" if name == "torch" else f"{name}=={floor}.*")
    return requirements


def floors() -> list[list[str]]:
    python = FLOORS_VENV / "bin" / "python"
    commands = [] if python.exists() else [[sys.executable, "-m", "venv", str(FLOORS_VENV)]]
    pins = [f"{name}=={pin(name)}" for name in ("pytest", "pytest-xdist", "execnet")]
    commands.append([str(python), "-m", "pip", "install", "-q", *floor_requirements(), *pins])
    tests = [f"tests/{name}.py" for name in PACKAGE_TESTS]
    commands.append(
        [str(python), "-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider", "-W", "ignore", *tests]
    )
    return commands


def nbval(seed: int, paths: list[str]) -> list[str]:
    return ["env", f"DLNOTES_SEED={seed}", sys.executable, "-m", "pytest", "-q", "--nbval-lax", "-n", "2",
            "--dist", "loadfile", "-o", "addopts=", *paths]  # fmt: skip


def notebooks() -> list[str]:
    return sorted(str(p.relative_to(ROOT)) for p in (ROOT / "chapters").glob("*/*.ipynb"))


# The built book's tests; with `--dist loadgroup` a page's tests share one visit of it (tests/test_site.py).
SITE_TESTS = ["-m", "book or browser or frames"]
STAGES = {
    "lint": lambda: [["ruff", "check", "."], ["ruff", "format", "--check", "."]],
    "unit": lambda: [[sys.executable, "-m", "pytest", "-q", "-n", "2"]],
    "floors": floors,
    "build": lambda: [[sys.executable, "scripts/build_book.py"]],
    "site": lambda: [[sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadgroup", *SITE_TESTS]],
    "seeds": lambda: [nbval(1, notebooks()[0::2]), nbval(2, notebooks()[1::2])],
    "allseeds": lambda: [nbval(1, ["chapters"]), nbval(2, ["chapters"])],
}
# CI's stages in order; the stages of a group run at the same time: floors installs its environment (network and
# disk) while the unit tests run, and the notebooks run under their second seed while the browser, which waits
# for pages more than it computes, tests the site (the site stage alone keeps one of the two cores busy).
CI_GROUPS = [["lint"], ["unit", "floors"], ["build"], ["site", "seeds"]]


def run(stage: str, env: dict, log=None) -> tuple[float, bool]:
    """Run the commands of `stage`, writing their output to the file `log` (default: the terminal); return the
    seconds they took and whether all passed."""
    tic, ok = time.perf_counter(), True
    for command in STAGES[stage]():
        print("$", " ".join(command), file=log or sys.stdout, flush=True)
        finished = subprocess.run(command, cwd=ROOT, env=env, stdout=log, stderr=log and subprocess.STDOUT)
        ok = finished.returncode == 0 and ok
    return time.perf_counter() - tic, ok


def run_together(group: list[str], env: dict) -> dict[str, tuple[float, bool]]:
    """Run the stages of `group` at the same time; print the output of each, in turn, once all have finished."""
    logs = {stage: tempfile.TemporaryFile("w+") for stage in group}
    with ThreadPoolExecutor(len(group)) as pool:
        futures = {stage: pool.submit(run, stage, env, logs[stage]) for stage in group}
    for stage in group:
        print(f"\n===== {stage} (alongside {', '.join(s for s in group if s != stage)})", flush=True)
        logs[stage].seek(0)
        print(logs[stage].read(), end="", flush=True)
    return {stage: futures[stage].result() for stage in group}


def main() -> None:
    groups = [[stage] for stage in sys.argv[1:]] or CI_GROUPS
    unknown = {stage for group in groups for stage in group} - set(STAGES)
    if unknown:
        sys.exit(f"unknown stages {sorted(unknown)}; the stages are {list(STAGES)}")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # the floors environment tests the source tree
    results, start = {}, time.perf_counter()
    for group in groups:
        if len(group) > 1:
            results.update(run_together(group, env))
        else:
            print(f"\n===== {group[0]}", flush=True)
            results[group[0]] = run(group[0], env)
    total = time.perf_counter() - start
    stages = {stage: {"seconds": seconds, "passed": ok} for stage, (seconds, ok) in results.items()}
    benchmark.record(stages=stages, total=total)
    print(
        "\n===== benchmark (scripts/benchmark.py): times against their budgets", benchmark.report(), sep="\n"
    )
    sys.exit(0 if all(ok for _, ok in results.values()) else 1)


if __name__ == "__main__":
    main()
