"""memfit.array edge cases found by review: Python integers beyond an
integer dtype, integer overflow corners, sizes beyond 2**64 bytes, and
overflow inside reductions (each with NumPy 2's answer)."""

import warnings

import numpy as np
import pytest

import memfit.array as ma


def test_python_integers_beyond_the_dtype():
    i8 = ma.asarray(np.array([0, 1, 100], np.int8))
    u8 = ma.asarray(np.array([0, 1, 200], np.uint8))
    with pytest.raises(OverflowError, match="Python integer 300 out of bounds for int8"):
        i8 + 300
    with pytest.raises(OverflowError, match="Python integer -1 out of bounds for uint8"):
        u8 + (-1)
    # Comparisons compare the true values (NumPy 2).
    np.testing.assert_array_equal((i8 == 256).compute(), [False, False, False])
    np.testing.assert_array_equal((i8 < 300).compute(), [True, True, True])
    np.testing.assert_array_equal((u8 > -1).compute(), [True, True, True])
    x = np.array([254, 255, 0, 1, 2, 3], np.uint8)
    np.testing.assert_array_equal(np.clip(ma.asarray(x), -1, 300).compute(), np.clip(x, -1, 300))


def test_integer_corners():
    x = np.array([-(2**63)], np.int64)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal((ma.asarray(x) // -1).compute(), x // -1)
    b = np.array([3], np.uint64)
    np.testing.assert_array_equal((ma.asarray(b) ** (2**40)).compute(), b ** (2**40))
    # A tile rewrite by 2**80: the sum is 3 * 2**80, not 3.
    got = np.tile(ma.asarray(np.array([1.0, 2.0])), (2**40, 2**40)).sum().compute()
    assert got == 3.0 * 2.0**80


def test_results_beyond_two_to_the_64_bytes_are_refused():
    with pytest.raises(MemoryError):
        ma.zeros(2**61).compute(memory_limit="64MiB")
    with pytest.raises(MemoryError):
        ma.zeros((2**31, 2**30)).compute(memory_limit="64MiB")


def test_overflow_inside_reductions_warns_with_the_count():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        got = ma.asarray(np.array([60000, 60000], np.float16)).sum().compute()
    assert np.isinf(got)
    assert any(issubclass(x.category, RuntimeWarning) and "overflow encountered in 1 values" in str(x.message) for x in w)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        np.einsum("i,i", ma.asarray(np.array([1e300, 1e300])), np.array([1e300, 1e300])).compute()
    assert any(issubclass(x.category, RuntimeWarning) for x in w)
