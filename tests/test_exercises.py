"""Every grader of the graded exercises (the registry dlnotes.exercises.GRADERS, filled by importing every chapter
module of the package): it accepts the book's reference, rejects each typical mistake with the hint it is meant
to give, calls an untouched stub "not attempted", explains instead of raising, and refuses a misuse."""

import importlib
import pkgutil
from typing import NamedTuple

import numpy as np
import pytest

import dlnotes.exercises
from dlnotes.exercises import GRADERS, Grader

for module in pkgutil.iter_modules(dlnotes.exercises.__path__):
    importlib.import_module(f"dlnotes.exercises.{module.name}")

NAMES = sorted(GRADERS)


def test_every_section_can_have_its_graded_exercise():
    assert len(GRADERS) >= 22


@pytest.mark.parametrize("name", NAMES)
def test_the_reference_is_correct(name):
    grader = GRADERS[name]
    result = grader.run(grader.reference)
    assert result.status == "correct" and result.message.startswith("✔"), result.message


@pytest.mark.parametrize("name", NAMES)
def test_typical_mistakes_get_their_hint(name):
    grader = GRADERS[name]
    assert len(grader.mistakes) >= 2, "give at least two typical mistakes"
    for mistake, phrase in grader.mistakes:
        result = grader.run(mistake)
        assert result.status == "wrong" and "Hint:" in result.message and phrase in result.message, (
            result.message
        )


@pytest.mark.parametrize("name", NAMES)
def test_a_stub_is_not_attempted_and_failures_are_explained_not_raised(name):
    grader = GRADERS[name]

    def stub(*args):
        raise NotImplementedError

    def crashes(*args):
        raise ValueError("operands could not be broadcast")

    def forgets_return(*args):
        pass

    assert grader.run(stub).status == "not attempted"
    assert "raised ValueError: operands could not be broadcast" in grader.run(crashes).message
    assert "forget `return`" in grader.run(forgets_return).message
    assert grader.run(lambda *args: "a string").status == "wrong"


@pytest.mark.parametrize("name", NAMES)
def test_a_misuse_is_an_error_that_says_what_to_pass(name):
    grader = GRADERS[name]
    with pytest.raises(TypeError, match="your function itself"):
        grader.run(np.zeros(3))
    with pytest.raises(TypeError, match=f"{name} must take the arguments"):
        grader.run(lambda *, only_keywords=None: None)


def test_the_message_names_the_readers_function_and_shows_where_a_large_array_differs(capsys):
    from dlnotes.cnn import conv2d_direct

    def my_conv2d(x, w, b):
        return conv2d_direct(x, w[..., ::-1, ::-1], b)  # a true convolution

    GRADERS["conv2d"](my_conv2d)
    printed = capsys.readouterr().out
    assert printed.startswith("✘ my_conv2d(x=<array of shape") and "first difference at index" in printed
    assert "without flipping" in printed


class LossAndGradient(NamedTuple):
    loss: float
    grad: np.ndarray


def _explained(expected, got) -> str:
    """The message of a one-case grader whose reference returns `expected` and the reader's function `got`."""
    name = f"explain_{len(GRADERS)}"
    grader = Grader(name, ("x",), lambda x: expected, lambda rng: [(0.0,)])
    try:
        return grader.run(lambda x: got).message
    finally:
        del GRADERS[name]


def _no_two_lines_alike(message: str) -> bool:
    values = [
        line.split(" ", 1)[1]
        for line in message.splitlines()
        if line.lstrip().startswith(("returned", "expected"))
    ]
    return len(values) == len(set(values))


def test_a_tuple_wrong_in_one_element_names_that_element_and_where_it_differs():
    rng = np.random.default_rng(0)
    grad = rng.normal(size=(5, 6))
    wrong = grad.copy()
    wrong[2, 3] += 1e-3
    message = _explained((1.7743, grad), (1.7743, wrong))
    assert "1 of the 2 parts of the result differ (the others are right)" in message
    assert "result[1]: 1 of 30 entries differ; first difference at index (2, 3)" in message
    assert f"expected {grad[2, 3]:.4f}" in message and "largest relative error 1.4e-03" in message
    assert "result[0]" not in message and _no_two_lines_alike(message)
    named = _explained(LossAndGradient(1.7743, grad), LossAndGradient(1.7743, wrong))
    assert "result.grad: 1 of 30 entries differ" in named and "result.loss" not in named
    keyed = _explained({"loss": 1.7743, "grad": grad}, {"loss": 1.7744, "grad": grad})
    assert "result['loss']: returned 1.7744, expected 1.7743" in keyed and "result['grad']" not in keyed


def test_nearly_equal_numbers_and_arrays_print_with_enough_digits_to_differ():
    number = _explained(0.00659, 0.00658)
    assert "returned 0.00658, expected 0.00659 (relative error 1.5e-03)" in number
    close_numbers = _explained(1.0, 1.00001)
    assert "returned 1.00001, expected 1 (relative error 1.0e-05)" in close_numbers
    M = np.random.default_rng(1).normal(size=(4, 4))
    message = _explained(M, M + 1e-4)
    assert "16 of 16 entries differ" in message and "largest relative error" in message
    assert message.count("\n") >= 9, "both 4 x 4 matrices are printed in full"
    assert _no_two_lines_alike(message) and _no_two_lines_alike(close_numbers)


def test_a_result_of_another_shape_or_kind_says_what_was_expected():
    assert "returned an array of shape (3,), expected an array of shape (2,)" in _explained(
        np.ones(2), np.ones(3)
    )
    assert "returned 3 values" in _explained((1.0, 2.0), (1.0, 2.0, 3.0))
    assert "returned the keys ['b'], expected ['a']" in _explained({"a": 1.0}, {"b": 1.0})
