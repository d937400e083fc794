import numpy as np
import pytest
import torch

from dlnotes import check
from dlnotes.checks import check_grad, numerical_gradient


def test_check_prints_the_claim_when_it_holds(capsys):
    check("01.14", 23 <= 61.4, "23 perceptron updates <= R^2/gamma^2 = 61.4")
    assert capsys.readouterr().out == "✔ [01.14] 23 perceptron updates <= R^2/gamma^2 = 61.4\n"


def test_check_wraps_a_long_claim_between_words(capsys):
    words = [f"word{i:02d}" for i in range(40)]  # 40 words of 6 characters: 280 characters in all
    check("05.01", True, " ".join(words))
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4 and all(90 < len(line) <= 100 for line in lines[:-1]), lines
    assert lines[1].startswith(" " * 10 + "word") and " ".join(lines).split()[2:] == words


@pytest.mark.parametrize(
    "condition",
    [True, np.bool_(True), np.array([True]), np.array(True), torch.tensor(True), torch.tensor([True])],
)
def test_check_accepts_single_booleans(condition, capsys):
    check("02.01", condition, "ok")
    assert capsys.readouterr().out.startswith("✔ [02.01]")


def test_check_says_plainly_that_a_false_claim_did_not_hold(capsys):
    with pytest.raises(AssertionError, match=r"^✘ \[03\.07\] the claim did not hold: loss went down$"):
        check("03.07", np.float64(2.0) < 1.0, "loss went down")
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("bad_id", ["1.14", "01.1", "01-14", "x01.14", 114, "01.14 "])
def test_check_rejects_ids_not_of_the_form_CC_NN(bad_id):
    with pytest.raises(ValueError, match="concept_id"):
        check(bad_id, True, "message")


@pytest.mark.parametrize(
    "condition",
    [
        "False",  # a non-empty string is truthy
        np.nan,
        0.3,
        1,
        np.float64(1.0),
        np.array([1]),  # not bool
        np.array([True, False]),
        np.array([], dtype=bool),
        torch.tensor(1.0),
        None,
        [True],
    ],
)
def test_check_accepts_nothing_but_a_single_boolean(condition):
    with pytest.raises(TypeError, match="condition must be a single boolean"):
        check("01.01", condition, "message")


def test_check_rejects_non_string_message():
    with pytest.raises(TypeError, match="message"):
        check("01.01", True, 3.0)


def test_checks_that_hold_are_logged_with_their_notebook(tmp_path, monkeypatch):
    log = tmp_path / "checks.tsv"
    monkeypatch.setenv("DLNOTES_CHECK_LOG", str(log))
    monkeypatch.setenv("DLNOTES_NOTEBOOK", "chapters/01_x/02_y")
    check("01.02", True, "a")
    with pytest.raises(AssertionError):
        check("01.03", False, "b")
    monkeypatch.delenv("DLNOTES_NOTEBOOK")
    check("01.04", True, "c")
    assert log.read_text() == "chapters/01_x/02_y\t01.02\n?\t01.04\n"


def test_check_grad_accepts_right_and_rejects_wrong_gradients():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(6, 6))
    Q = A @ A.T + np.eye(6)
    x = rng.normal(size=6)
    assert check_grad(lambda x: 0.5 * x @ Q @ x, lambda x: Q @ x, x) < 1e-8
    assert check_grad(lambda x: 0.5 * x @ Q @ x, lambda x: 1.01 * Q @ x, x) > 1e-3
    M = rng.normal(size=(3, 4))
    assert check_grad(lambda X: np.sum(np.sin(X)), np.cos(M), M) < 1e-8  # any shape
    assert np.allclose(numerical_gradient(lambda X: np.sum(X**3), M), 3 * M**2, atol=1e-6)
    with pytest.raises(ValueError, match=r"the gradient must have shape \(6,\)"):
        check_grad(lambda x: x @ x, np.ones(5), x)
    with pytest.raises(TypeError, match="f must be callable"):
        numerical_gradient("x^2", x)
