"""dlnotes — the helper package of an executable deep-learning textbook.

Each chapter has a module (``dlnotes.connectionism``, ...); the shared ones are ``activations``, ``alt_text``, ``checks``,
``data``, ``embeddings``, ``plotting``, ``text``, ``training``, ``validation`` and the ``widgets`` package.
The few names every notebook needs are re-exported here.
"""

import os

from .alt_text import describe, show_alt_texts
from .checks import check
from .plotting import use_style
from .training import device, seed_each_cell, seed_everything, use_threads

__version__ = "0.2.0"  # the one place of the version: pyproject.toml and the notebooks' setup cells read it
WIDGETS_NEED_A_KERNEL = (
    "Widgets and progress bars live in the running kernel: in a notebook reopened from disk they read "
    '"Error displaying widget: model not found" until their cells run again.'
)
__all__ = [
    "check",
    "describe",
    "device",
    "seed_each_cell",
    "seed_everything",
    "setup_notebook",
    "use_style",
    "use_threads",
]


def setup_notebook(version: str) -> int:
    """What the first cell of every notebook does: make sure the installed dlnotes is the `version` the notebook
    was written for, seed every random generator from ``DLNOTES_SEED`` now and before each cell from it and the
    cell's text (`seed_each_cell`: a cell re-run prints what it printed), set the thread count (``DLNOTES_THREADS``)
    and the figure style, and say how to revive widgets in a reopened notebook (not on the website, where they
    need no kernel). Returns the seed."""
    if version != __version__:
        raise RuntimeError(
            f"this notebook was written for dlnotes {version}, but dlnotes {__version__} is installed: run the "
            "%pip line of the notebook's first cell with --force-reinstall added, then restart the kernel"
        )
    seed = seed_everything()
    seed_each_cell(seed)
    use_threads()
    use_style()
    show_alt_texts()
    if not os.environ.get("DLNOTES_WIDGET_FRAMES"):  # set by the website's build, see dlnotes.widgets.core
        print(WIDGETS_NEED_A_KERNEL)
    return seed
