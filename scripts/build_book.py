"""Build the book from scratch into _build/html, executing every notebook, on several cores.

    python scripts/build_book.py            # as CI does: clean, build with -W, 2 notebooks at a time
    python scripts/build_book.py --jobs 1   # one at a time
    python scripts/build_book.py --pdf      # and print the whole book as one PDF (scripts/book_pdf.py)

Jupyter Book's own `jupyter-book build .` also works (it caches executed notebooks and uses one core), but its
cache does not notice edits to dlnotes; this script always starts clean. It records what the tests need:

* ``_build/checks_ran.tsv``: every check that held, with its notebook (``dlnotes.check`` writes it),
* ``_build/build_info.json``: a fingerprint of the sources, the number of jobs and the notebooks executed,
* ``_build/widget_frames.tsv``: each widget's precomputed frames (page, widget, frames, bytes, seconds),
* ``_build/benchmark.json``: the build's seconds, each notebook's and each widget's (scripts/benchmark.py),

and prints the benchmark's table. Exit status 1 when the build fails or warns (a notebook that runs past the
execution timeout of `_config.yml` fails it; one that is only slow does not).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pickle
import shutil
import sys
import time
from pathlib import Path

import benchmark  # scripts/benchmark.py: this folder is on the path of a script

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "_build"
CHECK_LOG = BUILD / "checks_ran.tsv"
INFO = BUILD / "build_info.json"
FRAMES_LOG = BUILD / "widget_frames.tsv"
SOURCES = [
    "_config.yml",
    "_toc.yml",
    "concepts.yml",
    "references.bib",
    "_ext",
    "chapters",
    "dlnotes",
    "images",
]


def fingerprint() -> str:
    """A hash of everything the built site depends on (the book's sources and the dlnotes package)."""
    digest = hashlib.sha256()
    paths = [ROOT / name for name in SOURCES] + sorted(ROOT.glob("*.md"))
    for path in paths:
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for file in files:
            if "__pycache__" in file.parts or ".ipynb_checkpoints" in file.parts:
                continue
            digest.update(str(file.relative_to(ROOT)).encode())
            digest.update(file.read_bytes())
    return digest.hexdigest()


def notebook_times() -> dict[str, float]:
    """Execution time of every notebook, from the build's environment."""
    from myst_nb.sphinx_ import NbMetadataCollector

    with (BUILD / ".doctrees" / "environment.pickle").open("rb") as f:
        env = pickle.load(f)
    data = NbMetadataCollector.get_doc_data(env)
    return {doc: d["exec_data"]["runtime"] for doc, d in sorted(data.items()) if d.get("exec_data")}


def encrypted_kernels() -> None:
    """Kernels get CurveZMQ keys from their manager where the kernelspec declares support (ipykernel's does):
    nothing travels in plain text, and the log loses ipykernel's warning about unencrypted TCP, one per
    notebook. (Neither myst-nb nor nbclient passes a kernel manager's settings through, so the setting's default
    is changed; a kernel without support runs as before.)"""
    from jupyter_client.manager import KernelManager

    KernelManager.class_traits()["transport_encryption"].default_value = "auto"


def build(jobs: int) -> int:
    from jupyter_book.sphinx import build_sphinx

    encrypted_kernels()
    shutil.rmtree(BUILD, ignore_errors=True)
    BUILD.mkdir()
    os.environ["DLNOTES_CHECK_LOG"] = str(CHECK_LOG)  # the kernels inherit it
    os.environ["DLNOTES_FRAMES_LOG"] = str(FRAMES_LOG)
    os.environ.pop("MPLBACKEND", None)  # a non-interactive backend would hide every figure
    start = time.perf_counter()
    result = build_sphinx(
        ROOT,
        BUILD / "html",
        noconfig=True,
        path_config=str(ROOT / "_config.yml"),
        confoverrides={
            "external_toc_path": (ROOT / "_toc.yml").as_posix(),
            "latex_individualpages": False,
            "nb_execution_mode": "force",
        },
        jobs=jobs,
        warningiserror=True,
        keep_going=True,
        freshenv=True,
    )
    seconds = time.perf_counter() - start
    if result != 0:
        print(f"the book build failed after {seconds:.0f} s", file=sys.stderr)
        return 1
    times = notebook_times()
    INFO.write_text(
        json.dumps({"fingerprint": fingerprint(), "jobs": jobs, "notebooks": sorted(times)}, indent=1)
    )
    benchmark.record(build={"seconds": seconds, "jobs": jobs}, notebooks=times, widgets=widget_frames())
    print(benchmark.report())
    return 0


def widget_frames() -> list[dict]:
    """What the kernels logged of each widget's precomputed frames."""
    rows = [line.split("\t") for line in FRAMES_LOG.read_text().splitlines()] if FRAMES_LOG.exists() else []
    return [
        {"page": page, "widget": widget, "frames": int(n), "bytes": int(size), "seconds": float(seconds)}
        for page, widget, n, size, seconds in rows
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2, help="notebooks executed at once (default 2)")
    parser.add_argument("--pdf", action="store_true", help="then print the book as _build/dlnotes.pdf")
    args = parser.parse_args()
    status = build(args.jobs)
    if status == 0 and args.pdf:
        import book_pdf  # needs Chromium and the test extra (Playwright, pypdf)

        book_pdf.build_pdf()
    sys.exit(status)


if __name__ == "__main__":
    main()
