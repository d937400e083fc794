import numpy as np
import pytest
import torch

from dlnotes import check


def test_check_prints_the_claim_when_it_holds(capsys):
    check("01.14", 23 <= 61.4, "23 perceptron updates <= R^2/gamma^2 = 61.4")
    assert capsys.readouterr().out == "✔ [01.14] 23 perceptron updates <= R^2/gamma^2 = 61.4\n"


@pytest.mark.parametrize("condition", [np.bool_(True), np.array([True]), torch.tensor(True), 1])
def test_check_accepts_single_truth_values(condition, capsys):
    check("02.01", condition, "ok")
    assert capsys.readouterr().out.startswith("✔ [02.01]")


def test_check_raises_with_the_claim_when_false(capsys):
    with pytest.raises(AssertionError, match=r"^\[03\.07\] loss went down$"):
        check("03.07", np.float64(2.0) < 1.0, "loss went down")
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("bad_id", ["1.14", "01.1", "01-14", "x01.14", 114, "01.14 "])
def test_check_rejects_ids_not_of_the_form_CC_NN(bad_id):
    with pytest.raises(ValueError, match="concept_id"):
        check(bad_id, True, "message")


@pytest.mark.parametrize("condition", [np.array([True, False]), None, np.array([])])
def test_check_rejects_conditions_that_are_not_one_truth_value(condition):
    with pytest.raises(TypeError, match="condition"):
        check("01.01", condition, "message")


def test_check_rejects_non_string_message():
    with pytest.raises(TypeError, match="message"):
        check("01.01", True, 3.0)
