"""Shared test settings: a non-interactive matplotlib backend and the repository root."""

import os
from pathlib import Path

os.environ.setdefault("MPLBACKEND", "Agg")

ROOT = Path(__file__).resolve().parent.parent
TIMES = ROOT / "_build" / "notebook_times.txt"


def pytest_terminal_summary(terminalreporter):
    """Print each notebook's execution time when the book test measured them in this run."""
    if TIMES.exists() and TIMES.stat().st_mtime >= terminalreporter._session_start.time:
        terminalreporter.write_sep("=", "notebook execution times (book build)")
        terminalreporter.write(TIMES.read_text())
