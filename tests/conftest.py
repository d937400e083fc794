"""Shared test settings: a non-interactive matplotlib backend, the repository root, the built book."""

import errno
import fcntl
import hashlib
import importlib.util
import json
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import matplotlib
import pytest

from dlnotes import use_style, use_threads

matplotlib.use("Agg")  # this process only: kernels started by the tests keep the inline backend

ROOT = Path(__file__).resolve().parent.parent
HTML = ROOT / "_build" / "html"


sys.path.insert(0, str(ROOT / "scripts"))  # where the scripts find each other, as when they run


def load_script(name):
    """A module of scripts/ (they are not a package)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build_book = load_script("build_book")


def pytest_configure(config):
    """The book's thread policy (`dlnotes.use_threads`) and figure style (`dlnotes.use_style`), as in the
    notebooks: the stages run tests two at a time (`-n 2`), where two threads per process would wait for each
    other, and a figure is drawn as a reader sees it whichever test ran before.

    Kernels and the site's test server talk over 127.0.0.1. In a network namespace made with `unshare -rn` (no
    network at all) the loopback interface starts down: bring it up."""
    use_threads()
    use_style()
    with socket.socket() as probe:
        try:
            probe.connect(("127.0.0.1", 9))
        except OSError as error:
            if error.errno == errno.ENETUNREACH:
                subprocess.run(["ip", "link", "set", "lo", "up"], check=True)


def pytest_collection_modifyitems(items):
    """A test that uses the built book is a book test (deselected by the quick loop)."""
    for item in items:
        if "book" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.book)


@pytest.fixture(scope="session")
def book():
    """The book built from scratch by scripts/build_book.py, as CI and a new reader build it: reused when it
    was built from the current sources (as in CI, where the build is a stage of its own), else built now, by
    one test process while the others (`-n 2`) wait for it."""
    lock = Path(tempfile.gettempdir()) / f"dlnotes-book-{hashlib.sha1(bytes(ROOT)).hexdigest()[:12]}.lock"
    with lock.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        if not (
            build_book.INFO.exists()
            and json.loads(build_book.INFO.read_text())["fingerprint"] == build_book.fingerprint()
        ):
            result = subprocess.run(
                [sys.executable, str(ROOT / "scripts" / "build_book.py")],
                capture_output=True,
                text=True,
                timeout=1800,
            )
            assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-5000:]
    return HTML


def bad_input_test(table: list[tuple]):
    """The test of a module's table of bad inputs, ``(call, error, message)``: each call raises `error` and its
    message contains `message` (a phrase that names the argument and what was expected). A test module ends
    with ``test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)``."""

    @pytest.mark.parametrize(("call", "error", "message"), table)
    def test_bad_input_gets_a_clear_error(call, error, message):
        with pytest.raises(error) as info:
            call()
        assert message in str(info.value), f"{message!r} is not in the message {str(info.value)!r}"

    return test_bad_input_gets_a_clear_error


def same_picture(png_a: bytes, png_b: bytes, tolerance: float = 3.0, slack: int = 2) -> bool:
    """Two PNG images show the same picture: sizes within `slack` pixels of each other (savefig's tight box is
    placed at a fraction of a pixel, a crop at a whole one, and matplotlib 3.7 rounds its margin otherwise) and a
    mean difference per channel below `tolerance` (out of 255) at the best of those alignments, once both are
    blurred over 3 x 3 pixels (a heat map's cell edges land on neighbouring pixels when the figure's origin moves
    by a fraction of one)."""
    import io
    import itertools

    import numpy as np
    from PIL import Image, ImageFilter

    a, b = (
        np.asarray(Image.open(io.BytesIO(png)).convert("RGB").filter(ImageFilter.BoxBlur(1)), float)
        for png in (png_a, png_b)
    )
    if abs(a.shape[0] - b.shape[0]) > slack or abs(a.shape[1] - b.shape[1]) > slack:
        return False
    h, w = min(a.shape[0], b.shape[0]) - slack, min(a.shape[1], b.shape[1]) - slack
    shifts = range(slack + 1)
    return (
        min(
            np.abs(a[i : i + h, j : j + w] - b[k : k + h, m : m + w]).mean()
            for i, j, k, m in itertools.product(shifts, repeat=4)
        )
        < tolerance
    )
