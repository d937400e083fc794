"""Graded exercises: the reader writes a function that a section explains, and its grader runs it on random
inputs against the book's reference. The machinery is in `core`; the graders of each chapter are in a module
named like the chapter's module of dlnotes (``dlnotes.exercises.feedforward``, ...). A notebook imports the
grader it needs, ``from dlnotes.exercises.feedforward import grade_softmax``, and calls it on the reader's
function, ``grade_softmax(my_softmax)``."""

from .core import GRADERS, Grader, Hint, Result

__all__ = ["GRADERS", "Grader", "Hint", "Result"]
