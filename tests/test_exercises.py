"""Every grader of the graded exercises (the registry dlnotes.exercises.GRADERS, filled by importing every chapter
module of the package): it accepts the book's reference, rejects each typical mistake with the hint it is meant
to give, calls an untouched stub "not attempted", explains instead of raising, and refuses a misuse."""

import importlib
import pkgutil

import numpy as np
import pytest

import dlnotes.exercises
from dlnotes.exercises import GRADERS

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
