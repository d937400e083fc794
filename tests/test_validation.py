import numpy as np
import pytest

from dlnotes.validation import as_array, as_matrix, positive, positive_int


def test_valid_input_passes_through():
    assert as_matrix([[1, 2]]).dtype == np.float64 and as_matrix([[1, 2]]).shape == (1, 2)
    x = np.ones(3)
    copy = as_array(x, "x")
    copy[0] = 5
    assert x[0] == 1  # a copy, safe to update in place
    assert positive(2, "eta") == 2.0 and positive_int(np.int64(3), "steps") == 3


@pytest.mark.parametrize("bad", [np.ones(3), np.ones((0, 2)), np.ones((2, 2, 2))])
def test_as_matrix_names_the_argument_and_the_shape(bad):
    with pytest.raises(ValueError, match=r"W must be a non-empty 2-D array \(s, n\), got shape"):
        as_matrix(bad, "W")


def test_scalars_are_checked():
    with pytest.raises(ValueError, match="x must be a non-empty array"):
        as_array([], "x")
    for bad in (0, -1.0, np.nan, [1.0]):
        with pytest.raises(ValueError, match="eta must be a positive number"):
            positive(bad, "eta")
    for bad in (0, 2.5, True, "3"):
        with pytest.raises(ValueError, match="steps must be a positive int"):
            positive_int(bad, "steps")
