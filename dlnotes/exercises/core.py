"""The machinery of the graded exercises: a `Grader` runs the reader's function on inputs drawn at random (and a
few chosen ones), compares every result with the book's reference, and says ✔ or what went wrong.

A wrong answer never raises out of the grader: a wrong value gets the input, the expected and the returned value
and, where a typical mistake explains the difference, a hint; a wrong shape, an exception or a missing result is
reported as such. An exercise that still raises ``NotImplementedError`` (the stub) is "not attempted yet", so an
untouched notebook runs cleanly. Only a misuse of the grader itself (not a function, or a function with the wrong
number of arguments) is an error.
"""

from __future__ import annotations

import copy
import inspect
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from ..validation import check_rng

GRADERS: dict[
    str, Grader
] = {}  # name of the reader's function -> its grader, filled as the graders are defined
SEED = 2024  # the inputs are the same every time a reader runs the cell


class Result(NamedTuple):
    status: str  # "correct", "wrong" or "not attempted"
    message: str


@dataclass(frozen=True)
class Hint:
    """A typical mistake: `applies(args, expected, got)` is True when it explains a wrong result."""

    applies: Callable[[tuple, Any, Any], bool]
    message: str


def close(expected, got, rtol: float = 1e-6, atol: float = 1e-9) -> bool:
    """Equal shapes and values up to rounding; tuples and lists element by element."""
    if isinstance(expected, tuple | list):
        return (
            isinstance(got, tuple | list)
            and len(got) == len(expected)
            and all(close(e, g, rtol, atol) for e, g in zip(expected, got, strict=True))
        )
    try:
        got = np.asarray(got, dtype=float)
    except (TypeError, ValueError):
        return False
    expected = np.asarray(expected, dtype=float)
    return got.shape == expected.shape and bool(np.allclose(got, expected, rtol=rtol, atol=atol))


def shape_of(value) -> str:
    """What kind of result a value is: a number, an array of some shape, a tuple of those, or another type."""
    if isinstance(value, tuple | list):
        return "(" + ", ".join(shape_of(v) for v in value) + ")"
    try:
        array = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        return f"a {type(value).__name__}"
    return "a number" if array.ndim == 0 else f"an array of shape {array.shape}"


def show(value) -> str:
    """A value as the messages print it: numbers and short arrays in full, larger arrays by their shape."""
    if isinstance(value, tuple | list):
        inside = ", ".join(show(v) for v in value)
        return f"[{inside}]" if isinstance(value, list) else f"({inside})"
    if callable(value):
        return getattr(value, "__name__", "a function")
    try:
        array = np.asarray(value)
    except ValueError:  # a ragged sequence
        return repr(value)
    if array.dtype.kind not in "biuf":
        return repr(value)
    if array.size > 12:
        return f"<array of shape {array.shape}>"
    return " ".join(np.array2string(array, precision=4, separator=", ").split())


def first_difference(expected, got) -> str | None:
    """Where two equally shaped arrays first differ, for arrays too large to print."""
    try:
        expected, got = np.asarray(expected, dtype=float), np.asarray(got, dtype=float)
    except (TypeError, ValueError):
        return None
    if expected.size <= 12 or expected.shape != got.shape:
        return None
    wrong = ~np.isclose(got, expected, rtol=1e-6, atol=1e-9)
    index = tuple(int(i) for i in np.argwhere(wrong)[0])
    return (
        f"  first difference at index {index}: returned {got[index]:.6g}, expected {expected[index]:.6g} "
        f"({wrong.sum()} of {wrong.size} entries differ)"
    )


@dataclass(frozen=True)
class Grader:
    """The grader of one exercise: call it with the reader's function, ``grade_softmax(my_softmax)``.

    `parameters` names the arguments the reader's function takes, `reference` is the book's answer, `cases(rng)`
    returns the argument tuples to try, `hints` explain typical mistakes, and `mistakes` are typical wrong answers
    with (a phrase of) the message each must get: the tests run them, so every hint is known to fire.
    """

    name: str
    parameters: tuple[str, ...]
    reference: Callable
    cases: Callable[[np.random.Generator], Sequence[tuple]]
    hints: tuple[Hint, ...] = ()
    mistakes: tuple[tuple[Callable, str], ...] = ()
    compare: Callable[[Any, Any], bool] = close

    def __post_init__(self):
        if self.name in GRADERS:
            raise ValueError(f"there is already a grader for {self.name!r}")
        GRADERS[self.name] = self

    def __call__(self, answer: Callable) -> None:
        print(self.run(answer).message)

    def run(self, answer: Callable) -> Result:
        """Grade `answer`; the message says ✔, what is wrong, or that the exercise is not attempted yet."""
        self._check_signature(answer)
        name = getattr(answer, "__name__", "<lambda>")
        return self._run(answer, self.name if name == "<lambda>" else name)

    def _run(self, answer: Callable, name: str) -> Result:
        cases = list(self.cases(check_rng(SEED)))
        for args in cases:
            expected = self.reference(*copy.deepcopy(args))
            try:
                with warnings.catch_warnings(), np.errstate(all="ignore"):
                    warnings.simplefilter("ignore")
                    got = answer(*copy.deepcopy(args))
            except NotImplementedError:
                return Result(
                    "not attempted",
                    f"· {name}: not attempted yet. Replace `raise NotImplementedError` by your code and run "
                    "the cell again.",
                )
            except Exception as error:  # the reader's code failed: explain, do not raise
                return Result(
                    "wrong", f"✘ {name}({self._show_args(args)}) raised {type(error).__name__}: {error}"
                )
            if got is None:
                return Result("wrong", f"✘ {name} returned None: did you forget `return`?")
            if not self.compare(expected, got):
                return Result("wrong", self._explain(name, args, expected, got))
        return Result("correct", f"✔ {name} agrees with the book's reference on {len(cases)} inputs.")

    def _check_signature(self, answer) -> None:
        if not callable(answer):
            raise TypeError(
                f"give the grader your function itself, not its result: grade_{self.name}(my_{self.name}), "
                f"not grade_{self.name}(my_{self.name}(...)); got {type(answer).__name__}"
            )
        try:
            inspect.signature(answer).bind(*self.parameters)
        except TypeError:
            raise TypeError(
                f"{self.name} must take the arguments ({', '.join(self.parameters)}), "
                f"but {getattr(answer, '__name__', 'your function')} takes {inspect.signature(answer)}"
            ) from None
        except ValueError:  # a builtin without a signature: let the calls decide
            pass

    def _show_args(self, args: tuple) -> str:
        return ", ".join(f"{name}={show(value)}" for name, value in zip(self.parameters, args, strict=True))

    def _explain(self, name: str, args: tuple, expected, got) -> str:
        lines = [f"✘ {name}({self._show_args(args)})"]
        if shape_of(expected) != shape_of(got):
            lines.append(f"  returned {shape_of(got)}, expected {shape_of(expected)}")
        elif difference := first_difference(expected, got):
            lines.append(difference)
        else:
            lines.append(f"  returned {show(got)}")
            lines.append(f"  expected {show(expected)}")
        for hint in self.hints:
            try:
                with np.errstate(all="ignore"):
                    applies = bool(hint.applies(args, expected, got))
            except Exception:
                applies = False
            if applies:
                lines.append(f"  Hint: {hint.message}")
                break
        return "\n".join(lines)


def grader(name: str, parameters: str, reference: Callable, cases: Callable, **kwargs) -> Grader:
    """A `Grader` with its parameters written as in the stub: ``grader("softmax", "z", ...)``."""
    return Grader(name, tuple(p.strip() for p in parameters.split(",")), reference, cases, **kwargs)
