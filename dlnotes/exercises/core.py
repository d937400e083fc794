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
SHOWN_ENTRIES = 36  # a wrong array up to this size is printed in full beside the expected one


class Result(NamedTuple):
    status: str  # "correct", "wrong" or "not attempted"
    message: str


@dataclass(frozen=True)
class Hint:
    """A typical mistake: `applies(args, expected, got)` is True when it explains a wrong result."""

    applies: Callable[[tuple, Any, Any], bool]
    message: str


def close(expected, got, rtol: float = 1e-6, atol: float = 1e-9) -> bool:
    """Equal shapes and values up to rounding; tuples and lists element by element, dicts key by key."""
    if isinstance(expected, dict):
        return (
            isinstance(got, dict)
            and got.keys() == expected.keys()
            and all(close(expected[k], got[k], rtol, atol) for k in expected)
        )
    if isinstance(expected, tuple | list):
        return (
            isinstance(got, tuple | list)
            and len(got) == len(expected)
            and all(close(e, g, rtol, atol) for e, g in zip(expected, got, strict=True))
        )
    got, expected = _as_float(got), _as_float(expected)
    if got is None or expected is None:
        return False
    return got.shape == expected.shape and bool(np.allclose(got, expected, rtol=rtol, atol=atol))


def _as_float(value) -> np.ndarray | None:
    """`value` as a float array (a tensor too), or None when it holds no numbers."""
    if isinstance(value, dict | str) or value is None:
        return None
    if hasattr(value, "detach"):  # a torch tensor, perhaps one that requires grad
        value = value.detach().cpu()
    try:
        return np.asarray(value, dtype=float)
    except (TypeError, ValueError, RuntimeError):
        return None


def shape_of(value) -> str:
    """What kind of result a value is: a number, an array of some shape, a tuple of those, or another type."""
    if isinstance(value, dict):
        return "a dict with keys " + ", ".join(map(repr, value))
    if isinstance(value, tuple | list):
        return "(" + ", ".join(shape_of(v) for v in value) + ")"
    array = _as_float(value)
    if array is None:
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


def _digits(a: float, b: float) -> int:
    """The fewest significant digits (at least 4) at which the numbers `a` and `b` print differently."""
    return next((d for d in range(4, 18) if f"{a:.{d}g}" != f"{b:.{d}g}"), 17)


def _precision(a: np.ndarray, b: np.ndarray) -> int:
    """The fewest decimals (at least 4) at which the arrays `a` and `b` print differently."""
    return next(
        (d for d in range(4, 18) if np.array2string(a, precision=d) != np.array2string(b, precision=d)), 17
    )


def _relative_error(expected: np.ndarray, got: np.ndarray) -> np.ndarray:
    """|got - expected| / |expected|: infinite where 0 was expected, or where either is NaN."""
    with np.errstate(all="ignore"):
        return np.nan_to_num(np.abs(got - expected) / np.abs(expected), nan=np.inf, posinf=np.inf)


def describe_difference(expected, got, rtol: float = 1e-6, atol: float = 1e-9) -> list[str]:
    """What differs between a wrong result `got` and the `expected` one, as lines a reader can act on.

    Containers are compared element by element and only the elements that differ are named (a NamedTuple's
    field, a dict's key, a tuple's position); a number is shown with its relative error; an array with the
    number of entries that differ, the first of them and the largest relative error. Two printed values are
    always shown with enough digits to differ."""
    if isinstance(expected, dict | tuple | list) and type(got) is not type(expected):
        if not (isinstance(expected, tuple | list) and isinstance(got, tuple | list)):
            return [f"returned {shape_of(got)}, expected {shape_of(expected)}"]
    if isinstance(expected, dict):
        if got.keys() != expected.keys():
            return [f"returned the keys {list(got)}, expected {list(expected)}"]
        labels = [(f"[{key!r}]", expected[key], got[key]) for key in expected]
    elif isinstance(expected, tuple | list):
        if len(got) != len(expected):
            return [
                f"returned {len(got)} values {shape_of(got)}, expected {len(expected)}: {shape_of(expected)}"
            ]
        fields = getattr(expected, "_fields", None)
        labels = [
            (f".{fields[i]}" if fields else f"[{i}]", e, g)
            for i, (e, g) in enumerate(zip(expected, got, strict=True))
        ]
    else:
        return _describe_leaf(expected, got, rtol, atol)
    wrong = [(label, e, g) for label, e, g in labels if not close(e, g, rtol, atol)]
    if not wrong:  # a grader with its own comparison: equal values, another kind of difference
        return [f"returned {show(got)}", f"expected {show(expected)}"]
    lines = [
        f"{len(wrong)} of the {len(labels)} parts of the result differ"
        f"{'' if len(wrong) == len(labels) else ' (the others are right)'}:"
    ]
    for label, e, g in wrong:
        first, *rest = describe_difference(e, g, rtol, atol)
        lines.append(f"  result{label}: {first}")
        lines.extend(f"  {line}" for line in rest)
    return lines


def _describe_leaf(expected, got, rtol: float, atol: float) -> list[str]:
    e, g = _as_float(expected), _as_float(got)
    if e is None or g is None or e.shape != g.shape:
        if shape_of(got) == shape_of(expected):  # two strings, say: show them
            return [f"returned {got!r}", f"expected {expected!r}"]
        return [f"returned {shape_of(got)}, expected {shape_of(expected)}"]
    if e.ndim == 0:
        digits = _digits(float(e), float(g))
        return [
            f"returned {float(g):.{digits}g}, expected {float(e):.{digits}g} "
            f"(relative error {float(_relative_error(e, g)):.1e})"
        ]
    wrong = ~np.isclose(g, e, rtol=rtol, atol=atol)
    if not wrong.any():  # a grader with its own comparison: equal values, another kind of difference
        return [f"returned {show(got)}", f"expected {show(expected)}"]
    error = np.where(wrong, _relative_error(e, g), 0.0)
    first = tuple(int(i) for i in np.argwhere(wrong)[0])
    worst = tuple(int(i) for i in np.unravel_index(np.argmax(error), error.shape))
    digits = _digits(e[first], g[first])
    lines = [
        f"{wrong.sum()} of {wrong.size} entries differ; first difference at index {first}: "
        f"returned {g[first]:.{digits}g}, expected {e[first]:.{digits}g}; largest relative error "
        f"{error[worst]:.1e} at index {worst}"
    ]
    if e.size <= SHOWN_ENTRIES:
        digits = _precision(e, g)
        for word, array in (("returned", g), ("expected", e)):
            text = np.array2string(array, precision=digits, separator=", ", floatmode="maxprec")
            first_row, *rows = text.splitlines()
            lines += [f"{word} {first_row}", *(f"{'':9s}{row}" for row in rows)]
    return lines


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
        lines.extend(f"  {line}" for line in describe_difference(expected, got))
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
