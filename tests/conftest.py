"""Shared test settings: a non-interactive matplotlib backend, the repository root, the built book."""

import errno
import os
import socket
import subprocess
import time
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")  # this process only: kernels started by the tests keep the inline backend

ROOT = Path(__file__).resolve().parent.parent
TIMES = ROOT / "_build" / "notebook_times.txt"
HTML = ROOT / "_build" / "html"


SESSION_START = time.time()


def pytest_configure(config):
    """Kernels and the site's test server talk over 127.0.0.1. In a network namespace made with
    `unshare -rn` (no network at all) the loopback interface starts down: bring it up."""
    with socket.socket() as probe:
        try:
            probe.connect(("127.0.0.1", 9))
        except OSError as error:
            if error.errno == errno.ENETUNREACH:
                subprocess.run(["ip", "link", "set", "lo", "up"], check=True)


@pytest.fixture(scope="session")
def book():
    """Build the book from scratch, as CI and a new reader do: the execution cache does not
    notice edits to dlnotes. Shared by the build tests and the browser tests."""
    env = {name: value for name, value in os.environ.items() if name != "MPLBACKEND"}  # figures must show
    subprocess.run(["jupyter-book", "clean", "--all", str(ROOT)], check=True, capture_output=True)
    result = subprocess.run(
        ["jupyter-book", "build", "-W", "--keep-going", str(ROOT)],
        capture_output=True,
        text=True,
        timeout=1800,
        env=env,
    )
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-5000:]
    return HTML


def pytest_terminal_summary(terminalreporter):
    """Print each notebook's execution time when the book test measured them in this run."""
    if TIMES.exists() and TIMES.stat().st_mtime >= SESSION_START:
        terminalreporter.write_sep("=", "notebook execution times (book build)")
        terminalreporter.write(TIMES.read_text())
