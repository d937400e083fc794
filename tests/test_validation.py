import numpy as np
import pytest

from dlnotes import seed_everything
from dlnotes.validation import (
    PACKAGE_RNG,
    check_array,
    check_choice,
    check_int,
    check_labels,
    check_matrix,
    check_number,
    check_positive,
    check_rng,
    check_vector,
)


def test_valid_input_passes_through_converted():
    assert check_int(np.int64(3), "steps", 1) == 3 and type(check_int(np.int64(3), "steps")) is int
    assert check_number(np.float32(0.5), "eta", 0, 1) == 0.5 and check_number(2, "eta") == 2.0
    assert check_positive(1e-9, "eps") == 1e-9
    X = check_matrix([[1, 2]], "X")
    assert X.dtype == np.float64 and X.shape == (1, 2)
    assert check_vector([1, 2, 3], "w", 3).shape == (3,)
    assert check_array(np.ones((4, 3)), "X", (None, 3)).shape == (4, 3)
    assert check_labels([1, -1, 1.0], "y", 3, values=(-1, 1)).dtype == np.int64
    assert check_choice("sync", "mode", ("async", "sync")) == "sync"


def test_arrays_are_copies_safe_to_update_in_place():
    x = np.ones(3)
    check_vector(x, "x")[0] = 5
    assert x[0] == 1


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: check_int(2.5, "n"), TypeError, r"n must be an int, got 2.5 \(float\)"),
        (lambda: check_int(True, "n"), TypeError, "n must be an int, got True"),
        (lambda: check_int(np.bool_(True), "n"), TypeError, "n must be an int"),
        (lambda: check_int("3", "n"), TypeError, "n must be an int"),
        (lambda: check_int(0, "n", 1), ValueError, r"n must be an int in \[1, inf\), got 0"),
        (lambda: check_int(11, "k", 0, 10), ValueError, r"k must be an int in \[0, 10\], got 11"),
        (lambda: check_number(True, "eta"), TypeError, "eta must be a real number"),
        (lambda: check_number("0.1", "eta"), TypeError, "eta must be a real number"),
        (lambda: check_number(np.nan, "eta"), ValueError, "eta must be a finite number"),
        (
            lambda: check_number(1.0, "beta", 0, 1, high_open=True),
            ValueError,
            r"beta .* in \[0, 1\), got 1.0",
        ),
        (lambda: check_positive(0, "eta"), ValueError, r"eta must be a finite number in \(0, inf\), got 0.0"),
        (lambda: check_array([], "x"), ValueError, "x must not be empty"),
        (lambda: check_array(["a"], "x"), TypeError, "x must be an array of float64 numbers"),
        (lambda: check_array([1.0, np.inf], "x"), ValueError, "x must hold finite numbers"),
        (
            lambda: check_matrix(np.ones(3), "W"),
            ValueError,
            r"W must have shape \(any, any\), got shape \(3,\)",
        ),
        (lambda: check_matrix(np.ones((2, 3)), "W", 3, 3), ValueError, r"W must have shape \(3, 3\), got"),
        (lambda: check_vector(np.ones(4), "w", 3), ValueError, r"w must have shape \(3,\), got shape \(4,\)"),
        (lambda: check_array(np.ones(3), "x", ndim=2), ValueError, r"x must have 2 axes, got shape \(3,\)"),
        (lambda: check_labels([0.5, 1], "y"), ValueError, "y must hold whole numbers"),
        (lambda: check_labels([True, False], "y"), TypeError, "y must hold integer labels"),
        (lambda: check_labels([[1]], "y"), ValueError, r"y must be a non-empty 1-D array"),
        (lambda: check_labels([1, 2], "y", 3), ValueError, "y must be a non-empty 1-D array of 3 labels"),
        (lambda: check_labels([0, 2], "y", values=(-1, 1)), ValueError, r"y must hold labels in \[-1, 1\]"),
        (lambda: check_labels([0, 10], "y", n_classes=10), ValueError, r"y must hold labels in 0..9"),
        (lambda: check_choice("fast", "mode", ("async", "sync")), ValueError, "mode must be one of"),
        (lambda: check_rng(1.5), TypeError, "rng must be None, a seed"),
        (lambda: check_rng(-1), TypeError, "rng must be None, a seed"),
        (lambda: check_rng(np.random.RandomState(0)), TypeError, "rng must be None, a seed"),
    ],
)
def test_bad_input_is_named_with_what_was_expected(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_the_allowed_non_finite_values():
    assert np.isinf(check_array([1.0, np.inf], "xs", finite=False)).any()


def test_rng_none_is_the_package_generator_that_seed_everything_reseeds():
    assert check_rng(None) is PACKAGE_RNG
    seed_everything(5)
    first = check_rng(None).normal(size=3)
    seed_everything(5)
    assert np.array_equal(check_rng(None).normal(size=3), first)
    seed_everything(6)
    assert not np.array_equal(check_rng(None).normal(size=3), first)


def test_rng_int_and_generator():
    assert np.array_equal(check_rng(3).normal(size=2), np.random.default_rng(3).normal(size=2))
    generator = np.random.default_rng(0)
    assert check_rng(generator) is generator and check_rng(np.int64(2)).integers(10) >= 0
