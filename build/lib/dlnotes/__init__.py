"""dlnotes — the helper package of an executable deep-learning textbook.

Each chapter has a module (``dlnotes.connectionism``, ...); the shared ones are
``data``, ``training``, ``plotting``, ``widgets`` and ``checks``. The few names
every notebook needs are re-exported here.
"""

from .checks import check
from .plotting import use_style
from .training import device, seed_everything

__version__ = "0.1.0"
__all__ = ["check", "device", "seed_everything", "use_style"]
