"""The book's interactive figures: the machinery in `core`, then one module per chapter, named like the
chapter's module of dlnotes (``dlnotes.widgets.connectionism``, ...). A notebook imports a widget from its
chapter's module and shows it in a one-line cell; every widget registers itself with ``@widget``."""

from .core import WIDGETS, interactive_figure, message_figure, widget

__all__ = ["WIDGETS", "interactive_figure", "message_figure", "widget"]
