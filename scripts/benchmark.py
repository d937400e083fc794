"""The book's budgets as a benchmark: measured, written to one file and printed, never asserted by a test.

    python scripts/benchmark.py      # print the table of the last build and test run

`scripts/build_book.py` records the build (its seconds, each notebook's and each widget's), `scripts/test_all.py`
the stages; both print the table. A slow machine shows up here as OVER, and fails nothing: only a runaway (a
notebook past the execution timeout of `_config.yml`) fails the build.
"""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCHMARK = ROOT / "_build" / "benchmark.json"
BUDGETS = {  # seconds, on 2 cores with nothing else running (DESIGN.md)
    "notebook": 60,  # each notebook, kernel start included, as the build runs it (two at a time)
    "build": 600,  # the whole book from scratch
    "frames": 120,  # every widget's precomputed frames together
    "ci": 1800,  # CI, install included
}
MARGIN = (
    45  # a notebook over this many seconds on a quiet machine is likely to cross its budget on a busy one
)


def load() -> dict:
    return json.loads(BENCHMARK.read_text()) if BENCHMARK.exists() else {}


def record(**sections) -> None:
    """Replace these sections of the benchmark file (build, notebooks, widgets, stages), keep the others."""
    BENCHMARK.parent.mkdir(exist_ok=True)
    BENCHMARK.write_text(json.dumps({**load(), **sections}, indent=1))


def kept(seconds: float, budget: float) -> str:
    return "kept" if seconds <= budget else "OVER"


def report(data: dict | None = None) -> str:
    """The table: each measured time beside its budget and whether it was kept."""
    data = load() if data is None else data
    lines = []
    if "notebooks" in data:
        times = data["notebooks"]
        lines.append(f"\nnotebooks, slowest first (budget {BUDGETS['notebook']} s each; aim for {MARGIN} s):")
        lines += [
            f"  {seconds:6.1f} s  {kept(seconds, BUDGETS['notebook'])}  {doc}"
            for doc, seconds in sorted(times.items(), key=lambda item: -item[1])
        ]
        over = sum(seconds > BUDGETS["notebook"] for seconds in times.values())
        lines.append(
            f"  {len(times)} notebooks, {over} over the budget, the slowest {max(times.values()):.1f} s"
        )
    if "widgets" in data:
        widgets = data["widgets"]
        total = sum(w["seconds"] for w in widgets)
        lines.append(
            "\nwidgets' precomputed frames, slowest first: seconds, frames, MB on the page, page, widget"
        )
        lines += [
            f"  {w['seconds']:6.1f} s  {w['frames']:3d}  {w['bytes'] * 4 / 3 / 1e6:5.2f}  {w['page']}  {w['widget']}"
            for w in sorted(widgets, key=lambda w: -w["seconds"])
        ]
        lines.append(
            f"  {len(widgets)} widgets, {sum(w['frames'] for w in widgets)} frames in {total:.0f} s: "
            f"{kept(total, BUDGETS['frames'])} (budget {BUDGETS['frames']} s)"
        )
    if "build" in data:
        seconds = data["build"]["seconds"]
        lines.append(
            f"\nbook build {seconds:.0f} s with {data['build']['jobs']} jobs: "
            f"{kept(seconds, BUDGETS['build'])} (budget {BUDGETS['build']} s)"
        )
    if "stages" in data:
        lines.append("\nstages of scripts/test_all.py (the stages of a group overlap):")
        lines += [
            f"  {stage:8s} {s['seconds']:6.0f} s  {'passed' if s['passed'] else 'FAILED'}"
            for stage, s in data["stages"].items()
        ]
        if "total" in data:
            total = data["total"]
            lines.append(
                f"  {'total':8s} {total:6.0f} s  {kept(total, BUDGETS['ci'])} (budget {BUDGETS['ci']} s "
                "for CI with the install)"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    print(report() or f"nothing measured yet: {BENCHMARK.relative_to(ROOT)} is missing")
