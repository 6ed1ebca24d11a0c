"""memfit.array edge cases found by review: Python integers beyond an
integer dtype, integer overflow corners, sizes beyond 2**64 bytes, and
overflow inside reductions (each with NumPy 2's answer)."""

import os
import re
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
    # A tile by 2**80 (whose sum once wrapped to 3) is beyond NumPy's size
    # limit: refused as NumPy refuses it; 2**59 elements sum exactly.
    with pytest.raises(ValueError, match="array is too big"):
        np.tile(ma.asarray(np.array([1.0, 2.0])), (2**40, 2**40))
    got = np.tile(ma.asarray(np.array([1.0, 2.0])), (2**30, 2**28)).sum().compute()
    assert got == 3.0 * 2.0**58


def test_results_beyond_two_to_the_64_bytes_are_refused():
    with pytest.raises(MemoryError):
        ma.zeros(2**59).compute(memory_limit="64MiB")
    with pytest.raises(ValueError, match="array is too big"):
        ma.zeros(2**61)
    with pytest.raises(ValueError, match="array is too big"):
        ma.zeros((2**31, 2**30))


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


def test_integers_compare_by_their_true_values_near_two_to_the_63():
    """Found by trying memfit: an int64 array against 2**63, or int64 against
    uint64 arrays, compared in float64, where 2**63 - 1 rounds to 2**63."""
    i = np.array([2**63 - 1, -(2**63), 0, -1], np.int64)
    u = np.array([2**63, 2**63 - 1, 0, 2**64 - 1], np.uint64)
    for name in ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal"):
        f = getattr(np, name)
        for a, b in ((i, 2**63), (2**63, i), (i, -(2**63) - 1), (u, 2**64), (2**70, u), (i, u), (u, i), (i[:1], u[:, None])):
            expect = f(a, b)
            got = f(*(ma.asarray(v) if isinstance(v, np.ndarray) else v for v in (a, b))).compute()
            assert got.dtype == expect.dtype and got.shape == expect.shape, (name, a, b)
            np.testing.assert_array_equal(got, expect, err_msg=f"{name}({a!r}, {b!r})")


def test_python_ints_beyond_64_bits_as_numpy_2():
    """Beside a float array such an int is its float value; any other
    operation with an integer array raises NumPy's OverflowError."""
    f = np.array([1.5, -2.0], np.float32)
    np.testing.assert_array_equal((ma.asarray(f) + 2**64).compute(), f + 2**64)
    assert (ma.asarray(f) + 2**64).dtype == np.float32
    for call in (lambda m: m.asarray(np.array([1], np.int64)) + 2**64, lambda m: m.asarray(np.array([True])) == 2**64):
        with pytest.raises(OverflowError) as expected:
            call(np)
        with pytest.raises(OverflowError, match=str(expected.value)):
            call(ma)


def test_true_division_by_a_python_int_beyond_the_dtype():
    x = np.array([1, 2], np.int8)
    np.testing.assert_array_equal((ma.asarray(x) / 300).compute(), x / 300)
    np.testing.assert_array_equal((-1 / ma.asarray(x.astype(np.uint8))).compute(), -1 / x.astype(np.uint8))
    with pytest.raises(OverflowError, match="Python integer 300 out of bounds for int8"):
        ma.asarray(x) + 300


def _numpy_or_error(call):
    try:
        return np.asarray(call())
    except Exception as e:  # noqa: BLE001 - the error is the result to compare
        return type(e)


@pytest.mark.parametrize("value", [2**63, 2**64 - 1, 2**64, -(2**63) - 1])
def test_bool_with_a_python_int_beyond_int64_raises_as_numpy(value):
    """NEP 50 makes a Python int beside bools (or beside Python ints only) an
    int64: from 2**63 on NumPy 2 raises OverflowError (comparisons and
    logical ufuncs too), true division takes the float, where wraps into
    int64. memfit gave uint64 and wrapped silently."""
    b = np.array([True, False])
    c = np.array([True, False])
    calls = [getattr(np, name) for name in (
        "add", "subtract", "multiply", "true_divide", "floor_divide", "remainder", "power", "bitwise_and", "bitwise_or",
        "bitwise_xor", "minimum", "maximum", "equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
        "logical_and",
    )]
    cases = [(f, (b, value)) for f in calls] + [(f, (value, b)) for f in calls]
    cases += [(f, (value, True)) for f in calls] + [(f, (value, 1)) for f in calls] + [(f, (np.True_, value)) for f in calls]
    cases += [(np.where, (c, b, value)), (np.where, (c, value, b)), (np.where, (c, value, 1)), (np.where, (c, value, value))]
    cases += [(np.clip, (b, 0, value)), (np.clip, (b, None, value)), (np.less, (value, value + 1)), (np.equal, (value, value))]
    for f, args in cases:
        expect = _numpy_or_error(lambda: f(*args))
        got = _numpy_or_error(lambda: getattr(ma, f.__name__)(*(ma.asarray(a) if isinstance(a, np.ndarray) else a for a in args)).compute())
        if isinstance(expect, type):
            assert got is expect, (f.__name__, args, got)
        else:
            assert not isinstance(got, type), (f.__name__, args, got)
            assert got.dtype == expect.dtype, (f.__name__, args)
            np.testing.assert_array_equal(got, expect, err_msg=f"{f.__name__}{args}")
    for op in (lambda x: x + value, lambda x: value * x, lambda x: x // value, lambda x: x % value, lambda x: x & value,
               lambda x: x | value, lambda x: x < value, lambda x: value >= x, lambda x: x == value, lambda x: x / value):
        expect = _numpy_or_error(lambda: op(b))
        got = _numpy_or_error(lambda: op(ma.asarray(b)).compute())
        if isinstance(expect, type):
            assert got is expect
        else:
            assert got.dtype == expect.dtype
            np.testing.assert_array_equal(got, expect)


def test_power_takes_numpys_fast_paths():
    """NumPy's ``x ** 2`` (a Python int) is numpy.square (int8 for bools), its
    ``x ** 0.5`` (a Python float) numpy.sqrt for float arrays, and its float32
    and float64 power loops take the square root for one exponent of 0.5:
    sqrt(-inf) is NaN and sqrt(-0.0) -0.0, where pow gives inf and 0.0."""
    f = np.array([-np.inf, -0.0, 4.0, -4.0, np.nan, np.inf, 0.0])
    arrays = [f, f.astype(np.float32), f.astype(np.float16), f.reshape(7, 1), np.array([-3, 0, 5], np.int8),
              np.array([0, 3, 200], np.uint8), np.array([True, False]), np.array([-3, 0, 5])]
    exponents = [0.5, np.float64(0.5), np.float32(0.5), np.float16(0.5), np.array(0.5), np.array([0.5]), np.array([[0.5]]),
                 2, 2.0, -1, -1.0, 0, 0.0, 1, 1.0, 3, 0.25, -0.5, np.int8(2), True, np.True_]
    for a in arrays:
        for e in exponents:
            for ours, theirs in [(lambda x, y: x ** y, lambda x, y: x ** y), (ma.power, np.power),
                                 (lambda x, y: y ** x, lambda x, y: y ** x)]:
                want = _numpy_or_error(lambda: theirs(a, e))
                got = _numpy_or_error(lambda: ours(ma.asarray(a), e).compute())
                if isinstance(want, type):
                    assert got is want
                    continue
                assert got.dtype == want.dtype and got.shape == want.shape, (a.dtype, e)
                np.testing.assert_array_equal(got, want, err_msg=f"{a.dtype} {e!r}")
                np.testing.assert_array_equal(np.signbit(got), np.signbit(want), err_msg=f"{a.dtype} {e!r}")


def test_positive_and_reciprocal_of_bools_are_numpys():
    """NumPy has no bool loop for positive (UFuncTypeError) and takes its
    int8 loop for reciprocal."""
    b = np.array([False, True, True])
    with pytest.raises(TypeError) as expected:
        np.positive(b)
    for call in (lambda: ma.positive(ma.asarray(b)), lambda: +ma.asarray(b), lambda: np.positive(ma.asarray(b))):
        with pytest.raises(type(expected.value), match=re.escape(str(expected.value))):
            call()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = np.reciprocal(b)
        got = ma.reciprocal(ma.asarray(b)).compute()
    assert got.dtype == want.dtype == np.int8
    np.testing.assert_array_equal(got, want)


def test_creation_functions_follow_numpy_for_dtypes_and_ranges():
    for f in (ma.zeros, ma.ones, ma.empty):
        assert f(3, dtype=None).dtype == np.float64
    for args in ((0, 2), (1, 3), (2, 0, -1), (0.0, 2), (0, 1)):
        np.testing.assert_array_equal(ma.arange(*args, dtype=bool).compute(), np.arange(*args, dtype=bool))
    with pytest.raises(TypeError, match="at most length 2"):
        ma.arange(3, dtype=bool)
    for call in (lambda m: m.full((2,), 300, dtype=np.int8), lambda m: m.full((2,), -1, dtype=np.uint64),
                 lambda m: m.arange(-5, 0, dtype=np.uint8), lambda m: m.arange(0, 1000, 300, dtype=np.int8)):
        with pytest.raises(OverflowError) as expected:
            call(np)
        with pytest.raises(OverflowError, match=str(expected.value)):
            call(ma)
    # NumPy's unsafe casts of NumPy and float scalars, and ranges it wraps.
    for call in (lambda m: m.full((2,), np.int64(300), dtype=np.int8), lambda m: m.full((2,), 3.7, dtype=np.int8),
                 lambda m: m.arange(250, 260, dtype=np.uint8), lambda m: m.arange(0, 10, -1, dtype=np.uint8)):
        expected = call(np)
        got = np.asarray(call(ma))
        assert got.dtype == expected.dtype
        np.testing.assert_array_equal(got, expected)


def test_lengths_beyond_a_machine_word_are_refused_not_wrapped():
    """Found by trying memfit: tile, repeat and concatenate multiplied or
    added axis lengths modulo 2**64, giving a 0-length result that summed
    to 0."""
    for build in (lambda: np.tile(ma.ones(2**32), 2**32), lambda: ma.repeat(ma.ones(2**40), 2**40),
                  lambda: ma.concatenate([ma.ones(2**63 - 1), ma.ones(2**63 - 1), ma.ones(2)])):
        with pytest.raises(ValueError, match="array is too big"):
            build()


def test_dask_arrays_are_refused_not_computed_into_memory():
    """Found by trying memfit: ma.asarray(dask_array) computed the whole Dask
    array into memory, and dask_array + memfit_array said "unsupported
    operand type(s) for +: 'Array' and 'Array'"."""
    da = pytest.importorskip("dask.array")
    d, m = da.ones((4, 3), chunks=2), ma.ones((4, 3))
    for call in (lambda: ma.asarray(d), lambda: d + m, lambda: m + d, lambda: np.add(m, d),
                 lambda: ma.concatenate([m, d])):
        with pytest.raises(TypeError, match="does not take a Dask Array.*to_zarr"):
            call()


def test_minimum_and_maximum_of_equal_values_give_numpys_operand():
    """np.minimum(0.0, -0.0) is -0.0 and np.minimum(-0.0, 0.0) is 0.0 (the
    second operand on ties; NumPy's float16 loops give the first); NaN wins
    either way."""
    a = np.array([0.0, -0.0, np.nan, 1.0, -0.0])
    b = np.array([-0.0, 0.0, 1.0, np.nan, -0.0])
    for dtype in (np.float16, np.float32, np.float64):
        x, y = a.astype(dtype), b.astype(dtype)
        for ours, theirs in ((ma.minimum, np.minimum), (ma.maximum, np.maximum)):
            got, want = ours(ma.asarray(x), ma.asarray(y)).compute(), theirs(x, y)
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
            np.testing.assert_array_equal(got, want)


def test_minimum_and_maximum_keep_the_nan_they_are_given():
    """NumPy's minimum and maximum return the NaN operand itself (the first
    when both are NaN): its sign and payload, where memfit gave a new NaN
    (helper 128)."""
    neg, payload = -np.float64(np.nan), np.array([0x7FF8000000000001], np.uint64).view(np.float64)[0]
    a = np.array([neg, 1.0, neg, payload, np.nan, 2.0])
    b = np.array([1.0, neg, payload, neg, neg, payload])
    for dtype in (np.float32, np.float64):
        x, y = a.astype(dtype), b.astype(dtype)
        for ours, theirs in ((ma.minimum, np.minimum), (ma.maximum, np.maximum)):
            got, want = ours(ma.asarray(x), ma.asarray(y)).compute(), theirs(x, y)
            np.testing.assert_array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}"))
        got, want = ma.clip(ma.asarray(x), ma.asarray(y), None).compute(), np.clip(x, y, None)
        np.testing.assert_array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}"))


def test_clip_takes_python_int_bounds_beyond_int64():
    """np.clip of floats between Python ints beyond int64 (helper 128:
    memfit raised OverflowError testing them for NaN)."""
    a = np.array([1.5, -2.0, 3e20])
    for lo, hi in [(0, 2**64), (-(2**63) - 1, 0), (-1e30, 2**70), (True, 2**63)]:
        _same(ma.clip(ma.asarray(a), lo, hi), np.clip(a, lo, hi))


def test_clip_takes_both_bounds_or_neither_as_numpy():
    """np.clip(x, 1) and np.clip(x, a_max=2) are TypeErrors naming the
    missing bound, min=/max= beside both bounds a ValueError; memfit clipped
    on one side (helper 128)."""
    a = np.array([-1.0, 0.5, 3.0])
    for kw in (dict(a_min=1), dict(a_max=2), dict(a_min=0, a_max=2, min=1), dict(a_min=None, a_max=1, max=0)):
        with pytest.raises(Exception) as want:
            np.clip(a, **kw)
        for f in (np.clip, ma.clip):
            with pytest.raises(type(want.value), match=re.escape(str(want.value))):
                f(ma.asarray(a), **kw)
    for kw in (dict(), dict(min=0), dict(max=1), dict(min=0, max=1), dict(a_min=None, a_max=None)):
        _same(ma.clip(ma.asarray(a), **kw), np.clip(a, **kw))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_floor_division_and_remainder_are_numpys_in_each_float_dtype(dtype):
    # NumPy's float32 and float16 loops divide in float32: computing in
    # float64 then rounding gave 13391493 for float32 133.91493 // 1e-5
    # (NumPy: 13391494).
    rng = np.random.default_rng(0)
    for scale in (1e-5, 1.0, 1e5):
        a = (rng.standard_normal(20_000) * 1e3).astype(dtype)
        b = (rng.standard_normal(20_000) * scale).astype(dtype)
        b[:5] = 0
        with np.errstate(all="ignore"):
            for op in (np.floor_divide, np.remainder):
                want = op(a, b)
                got = np.asarray(op(ma.asarray(a), ma.asarray(b)).compute())
                assert got.dtype == want.dtype
                np.testing.assert_array_equal(got, want)
                finite = ~np.isnan(want)
                np.testing.assert_array_equal(np.signbit(got[finite]), np.signbit(want[finite]))
    x = ma.asarray(np.array([133.91493], np.float32)) // np.float32(1e-5)
    if dtype == np.float32:
        assert x.compute()[0] == np.float32(133.91493) // np.float32(1e-5) == 13391494


ARANGE_CASES = [(-5.3, 10, 0.7), (1.9, 10, 1.5), (0.1, 3.3, 0.3), (-5.3, 100.1, 0.7), (1, 10, np.float32(0.7)),
                (10, -3, -0.37), (0.5, 1000.5, 1.25), (3, 50, 7), (np.float32(0.1), 5, 0.2), (1e3, 1e3 + 70_000, 1.1)]


@pytest.mark.parametrize("dtype", [None, "int64", "int32", "int8", "uint16", "float16", "float32", "float64"])
def test_arange_fills_as_numpy_in_every_dtype(dtype):
    # NumPy: a[0] = start, a[1] = start + step cast to the dtype, then
    # a[0] + i * (a[1] - a[0]) in the dtype's arithmetic (float32 for
    # float16). Float arguments into an integer dtype once gave
    # [-5, -5, ...] for arange(-5.3, 10, 0.7, dtype=int) (NumPy: -5, -4, ...),
    # and float16/float32 values were rounded from float64.
    for start, stop, step in ARANGE_CASES:
        try:
            with np.errstate(all="ignore"):
                want = np.arange(start, stop, step, dtype=dtype)
        except OverflowError:  # 1000 in int8, -5 in uint16
            with pytest.raises(OverflowError):
                ma.arange(start, stop, step, dtype=dtype).compute()
            continue
        got = np.asarray(ma.arange(start, stop, step, dtype=dtype).compute())
        assert got.dtype == want.dtype and got.shape == want.shape, (start, stop, step)
        np.testing.assert_array_equal(got, want, err_msg=f"{(start, stop, step)}")


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"])
@pytest.mark.parametrize("src", ["float64", "float32"])
def test_floats_beyond_an_integer_dtype_cast_as_numpys(dtype, src):
    # NumPy's x86-64 loops: truncation into int32 or int64 whose minimum
    # stands for NaN, infinities and values beyond; unsigned 32/64-bit from
    # [2^(b-1), 2^b) through x - 2^(b-1). memfit gave 0 or -1, silently.
    a = np.array([np.nan, np.inf, -np.inf, 1e20, -1e20, 300.7, -129.5, 70000.2, 3e9, -3e9, 2.0**63, 1.5e19,
                  -0.7, 2.0**31, -2.0**31, 2.0**32 - 1, 4294967296.5, 2.0**64]).astype(src)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        want = a.astype(dtype)
    assert any("invalid value encountered in cast" in str(w.message) for w in seen)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        got = np.asarray(ma.asarray(a).astype(dtype).compute())
    assert [str(w.message).split(" encountered")[0] for w in seen] == ["invalid value"]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("make", [
    lambda: ma.broadcast_to(ma.arange(4.0), (2**31, 2**31, 4)),
    lambda: ma.tile(ma.arange(3.0), (2**62, 2**62)),
    lambda: ma.zeros((2**40, 2**20)),
    lambda: ma.arange(4.0)[:, None] * ma.ones((2**61,)),
])
def test_arrays_beyond_numpys_size_limit_are_refused_as_numpy(make):
    # Element counts of 2^64 and more wrapped: var() gave inf, argmax an
    # "empty sequence" error.
    with pytest.raises(ValueError, match=r"^array is too big; `arr\.size \* arr\.dtype\.itemsize` is larger"):
        make()
    with pytest.raises(ValueError, match=r"^array is too big"):
        np.empty((2**40, 2**20))


@pytest.mark.parametrize("a,dtype", [
    (np.array([0.5, -1.2, 0.3]), np.uint64),
    (np.array([2**63, 2**63, 7], np.uint64), np.int64),
    (np.array([-3, 5, 100, -128], np.int8), np.uint64),
    (np.array([0.5, -1.2, 0.3]), np.int32),
])
def test_var_and_std_in_an_integer_dtype_are_numpys(a, dtype):
    # NumPy's _var casts the floats it sums into the integer dtype: values
    # out of its range convert as its x86-64 loops do (memfit gave
    # 6148914691236516864 for NumPy's 0).
    with np.errstate(all="ignore"):
        for f in ("var", "std"):
            want = getattr(np, f)(a, dtype=dtype)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got = getattr(ma, f)(ma.asarray(a), dtype=dtype).compute()
            assert got == want and np.asarray(got).dtype == np.asarray(want).dtype, (f, got, want)


def test_divmod_is_numpys_in_each_spelling():
    a = np.array([-7, -3, 0, 2, 5, 9])
    f = np.array([-3.5, -0.0, 0.0, 2.5, 7.0, np.inf])
    with np.errstate(all="ignore"):
        for x, y in ((a, 4), (a, np.int8(-3)), (f, 2), (5, f), (a, f), (f, a[:, None])):
            want = np.divmod(x, y)
            mx = ma.asarray(x) if isinstance(x, np.ndarray) else x
            my = ma.asarray(y) if isinstance(y, np.ndarray) else y
            for got in (divmod(mx, my), divmod(mx, y), divmod(x, my), np.divmod(mx, my), ma.divmod(x, y)):
                assert len(got) == 2
                for g, w in zip(got, want):
                    if not isinstance(g, ma.Array):  # divmod of two NumPy operands
                        continue
                    g = np.asarray(g.compute())
                    assert g.dtype == w.dtype and g.shape == w.shape
                    np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("other", [None, "a", b"a"])
def test_comparison_with_an_object_no_element_equals_is_elementwise(other):
    # NumPy: x == None is all False, x != None all True, in x's shape.
    a = np.arange(6.0).reshape(2, 3)
    x = ma.asarray(a)
    for got, want in ((x == other, a == other), (x != other, a != other), (other == x, other == a)):
        got = np.asarray(got.compute())
        assert got.dtype == want.dtype == np.bool_ and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1)])
@pytest.mark.parametrize("name", ["sum", "mean", "prod", "nansum", "nanmean"])
def test_reductions_of_negative_zeros_have_numpys_sign(name, axis):
    # Sums start from NumPy's identity 0.0 over an outer axis too: a column
    # of -0.0 summed to -0.0 (NumPy: 0.0).
    z = np.full((3, 2), -0.0)
    want = getattr(np, name)(z, axis=axis)
    got = np.asarray(getattr(ma, name)(ma.asarray(z), axis=axis).compute())
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def test_python_scalars_lists_and_formats_as_numpy():
    # NumPy 2: float()/int() of an array of ndim > 0 raise even for one
    # element; item, tolist and a 0-d array's format spec were missing.
    for a in (np.ones((1, 1)), np.ones(2)):
        for convert in (float, int):
            with pytest.raises(TypeError, match="only 0-dimensional arrays can be converted to Python scalars"):
                convert(ma.asarray(a))
    assert bool(ma.asarray(np.ones((1, 1)))) is True
    x = ma.asarray(np.arange(6.0).reshape(2, 3)) * 2
    assert x.item(4) == np.float64(8.0) and type(x.item(4)) is float
    assert x.tolist() == (np.arange(6.0).reshape(2, 3) * 2).tolist()
    assert ma.asarray(np.array(7, np.int16)).item() == 7
    assert f"{ma.asarray(np.array(1.234)):.2f}" == "1.23"
    with pytest.raises(TypeError):
        f"{x:.2f}"


@pytest.mark.parametrize(
    "call",
    [
        lambda m, a: m.add(a(np.ones((4, 5, 6))), np.ones((4, 6))),
        lambda m, a: m.where(a(np.ones((4, 5, 6))) > 0, np.ones((4, 6)), 0),
        lambda m, a: m.reshape(a(np.ones(24)), (5, 5)),
        lambda m, a: m.reshape(a(np.ones(24)), (5,)),
        lambda m, a: m.nanmin(a(np.ones((0, 3))), axis=0),
        lambda m, a: m.nanmax(a(np.ones((0, 3))), axis=0),
        lambda m, a: m.argmin(a(np.array(5.0)), axis=1),
        lambda m, a: m.cumsum(a(np.array(5.0)), axis=1),
        lambda m, a: m.broadcast_to(a(np.ones((2, 3, 4))), (5, 6)),
        lambda m, a: m.broadcast_to(a(np.ones((2, 3))), (5, 6)),
    ],
)
def test_shape_and_axis_errors_are_numpys_word_for_word(call):
    """NumPy's exception class and message (its trailing space after
    broadcast shapes, (5,5) without a space, fmin/fmax for the nan-functions,
    a 0-d array's axis checked as its 1-d ravel's)."""
    with pytest.raises(Exception) as want:
        call(np, np.asarray)
    with pytest.raises(Exception) as got:
        out = call(np, ma.asarray)
        out.compute()
    assert type(got.value).__name__ == type(want.value).__name__
    assert str(got.value) == str(want.value)


def _same(got, want):
    got = np.asarray(got)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert np.array_equal(got, want, equal_nan=True) and np.array_equal(np.signbit(got), np.signbit(want)), (got, want)


def test_functions_that_take_operands_through_asarray_make_python_scalars_strong():
    """dot, inner, tensordot and einsum are not ufuncs: NumPy takes a Python
    scalar there as np.asarray does (int64, float64), so uint8 · 300 is
    int64 [300, 600] (memfit gave uint8 [44, 88], wrapped) and float32 · 2.5
    is float64 (helper 76)."""
    u8, i8, f32 = np.array([1, 2], np.uint8), np.array([1, 2], np.int8), np.array([1.5], np.float32)
    for f in (lambda m: m.dot(i8, 2), lambda m: m.dot(2, i8), lambda m: m.inner(u8, 300),
              lambda m: m.tensordot(u8, 300, axes=0), lambda m: m.einsum("i,->i", u8, 300),
              lambda m: m.dot(f32, 2.5), lambda m: m.einsum("i,->i", f32, True)):
        _same(f(ma), f(np))
    # Ufuncs keep Python scalars weak (NEP 50).
    _same(ma.multiply(u8, 3), np.multiply(u8, 3))


def test_clip_with_both_bounds_keeps_the_value_equal_to_a_bound():
    """np.clip keeps x where it equals a bound (-0.0 clipped to [0, 1] stays
    -0.0); maximum/minimum alone take the bound's zero (helper 76)."""
    for dt in (np.float64, np.float32, np.float16):
        x = np.array([-0.0, 0.0, np.nan, -3, 5, 0.5], dt)
        for lo, hi in [(0.0, 1.0), (-0.0, -0.0), (-0.0, 1.0), (np.nan, 1.0), (0.0, None), (None, -0.0)]:
            _same(ma.clip(x, lo, hi), np.clip(x, lo, hi))


def test_clip_is_numpys_for_nan_bounds_crossed_bounds_and_three_dtypes():
    """np.clip with both bounds: NaN wherever a bound is NaN (memfit kept a
    value equal to the other bound), a_max where a_min > a_max (memfit kept
    a value equal to a_min), the bound's signed zero for array bounds, and
    the dtype of the three operands at once (helper 92)."""
    vals = [-0.0, 0.0, 1.0, 2.0, 3.0, np.nan, -1.0, 0.5]
    bounds = [-0.0, 0.0, 1.0, 2.0, 3.0, np.nan, -1.0]
    for dt in ("f8", "f4", "f2", "i1", "u1"):
        x = np.array(vals).astype(dt) if dt[0] == "f" else np.array([0, 1, 2, 3, 5, 100, 7, 9], dt)
        for lo in bounds:
            for hi in bounds:
                for a, b in ((lo, hi), (np.full(8, lo), np.full(8, hi)), (np.float32(lo), np.float32(hi))):
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        want = np.clip(x, a, b)
                        got = ma.clip(ma.asarray(x), a, b).compute()
                    assert got.dtype == want.dtype, (dt, a, b)
                    np.testing.assert_array_equal(got, want, err_msg=f"{dt} {a!r} {b!r}")
                    np.testing.assert_array_equal(np.signbit(got), np.signbit(want), err_msg=f"{dt} {a!r} {b!r}")
    x = np.array([1, -5, 100], "i1")
    _same(ma.clip(ma.asarray(x), np.zeros(3, "u1"), np.full(3, 50, "f2")), np.clip(x, np.zeros(3, "u1"), np.full(3, 50, "f2")))


def test_concatenate_and_stack_take_numpys_dtype_of_all_inputs_at_once():
    """(int8, uint8, float16) is float16 at once but float32 pair by pair
    (memfit's result depended on the inputs' order; helper 92)."""
    i1, u1, f2 = (np.ones(2, t) for t in ("i1", "u1", "f2"))
    for arrays in ([i1, u1, f2], [f2, i1, u1], [u1, f2, i1]):
        _same(ma.concatenate([ma.asarray(a) for a in arrays]), np.concatenate(arrays))
    arrays = [np.ones(2, "i2"), np.ones(2, "u2"), np.ones(2, "f2")]
    _same(ma.stack([ma.asarray(a) for a in arrays]), np.stack(arrays))


def test_an_empty_boolean_index_selects_nothing_whatever_its_shape():
    """NumPy turns an empty boolean index into empty integer indices
    (memfit refused its shape; helper 92)."""
    x = np.arange(24.0).reshape(2, 3, 4)
    for key in (np.array([], bool), (slice(None), np.array([], bool)), np.zeros((0, 3), bool),
                (0, np.array([], bool)), (Ellipsis, np.array([], bool))):
        _same(ma.asarray(x)[key], x[key])


def test_reduction_axes_are_an_int_or_a_tuple_as_numpys():
    x = np.zeros((1, 3))
    for f in (lambda m: m.sum(x, axis=[0]), lambda m: m.max(x, axis=[0]), lambda m: m.mean(x, axis=[0]),
              lambda m: m.squeeze(x, axis=[0]), lambda m: m.sum(x, axis=1.0)):
        with pytest.raises(TypeError) as want:
            f(np)
        with pytest.raises(TypeError, match=re.escape(str(want.value))):
            f(ma)


def test_float16_to_uint32_of_nan_and_infinities_is_numpys():
    """NumPy's float16 loops convert through a 64-bit conversion: NaN and
    infinities become 0 in uint32 (memfit gave 2147483648)."""
    x = np.array([np.nan, np.inf, -np.inf, 65504, -1.5, 3.7], np.float16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for t in (np.uint32, np.int32, np.uint64, np.int64, np.uint16, np.uint8):
            _same(ma.asarray(x).astype(t), x.astype(t))


def test_mean_of_nothing_and_var_without_degrees_of_freedom_warn_as_numpy():
    """NumPy's own RuntimeWarnings ("Mean of empty slice", "Degrees of freedom
    <= 0 for slice") come with the division's, as NumPy's (helper 76)."""
    for f in (lambda m: m.mean(np.zeros(0)), lambda m: m.var(np.array([5.0]), ddof=1),
              lambda m: m.std(np.zeros((0, 3)), axis=0), lambda m: m.mean(np.zeros((0, 3)), axis=1),
              lambda m: m.var(np.arange(4), ddof=4)):
        said = {}
        for m in (np, ma):
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                said[m] = np.asarray(f(m))
            said[m] = (said[m], [str(x.message) for x in w if "encountered" not in str(x.message)])
        _same(said[ma][0], said[np][0])
        assert said[ma][1] == said[np][1], (said[ma][1], said[np][1])


def test_sums_over_axes_apart_have_numpys_bits():
    """NumPy's reduction loop sums the trailing reduced axes' runs pairwise
    and adds the runs in order: a sum over (0, 2) of a 3-D array is
    x.sum(2).sum(0) in NumPy's bits (memfit added every element in turn,
    helper 82); a kept last axis accumulates in order."""
    r = np.random.default_rng(1).standard_normal((3, 5, 7, 40))
    cases = [(r, axes) for axes in [(0, 2), (1, 3), (0, 3), (0, 1, 3), (0, 2, 3), (1,), (0, 1, 2, 3)]]
    cases.append((r[:, :, :, :1], (0, 2)))  # a kept last axis of extent 1 is no loop
    for x, axes in cases:
        for f in ("sum", "mean", "nansum", "nanmean"):
            _same(getattr(ma, f)(ma.asarray(x), axis=axes).compute(), getattr(np, f)(x, axis=axes))
    _same(ma.asarray(r[:, :1]).sum(axis=(0, 2, 3)).compute(), r[:, :1].sum(axis=(0, 2, 3)))


def test_index_errors_name_numpys_axis_and_count():
    """An index array out of range names the array's own axis; a mask and
    another index count the mask's axes; a tuple is an index array; nanmax
    raises AxisError (helper 82)."""
    a = np.arange(24).reshape(2, 3, 4)
    A = np.arange(20.0).reshape(4, 5)
    cases = [(a, (0, [5])), (a, (0, slice(None), [9])), (a, (None, slice(None), [3])), (a, (Ellipsis, [7])),
             (a, ([1, 2, -3], 0)), (A, (A > 3, 0))]
    for arr, key in cases:
        with pytest.raises(IndexError) as want:
            arr[key]
        with pytest.raises(IndexError, match=re.escape(str(want.value))):
            ma.asarray(arr)[key]
    _same(ma.asarray(A)[(0, 1), ].compute(), A[(0, 1), ])
    for f in (np.nanmax, np.nanmin):
        with pytest.raises(np.exceptions.AxisError, match="axis 2 is out of bounds for array of dimension 2"):
            f(ma.asarray(np.ones((2, 2))), axis=2)


def test_shifts_are_numpys():
    """<< and >> (left_shift, right_shift): NumPy's loops, shifts by the
    width or more and negative shifts included, its dtypes and refusals."""
    for t in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64):
        info = np.iinfo(t)
        x = np.array([info.min, -1 if info.min else 0, 0, 1, 5, info.max], dtype=t)
        s = np.arange(-2, info.bits + 3, dtype=t) if info.min else np.arange(0, info.bits + 3, dtype=t)
        xx, ss = np.broadcast_arrays(x[:, None], s[None, :])
        for name in ("left_shift", "right_shift", "bitwise_left_shift", "bitwise_right_shift"):
            _same(getattr(ma, name)(ma.asarray(xx), ma.asarray(ss)).compute(), getattr(np, name)(xx, ss))
        _same((ma.asarray(x) << 3).compute(), x << 3)
        _same((ma.asarray(x) >> 1).compute(), x >> 1)
        _same((2 << ma.asarray(s[s >= 0][:4])).compute(), 2 << s[s >= 0][:4])
        _same(np.left_shift(ma.asarray(x), 2).compute(), np.left_shift(x, 2))
    b = np.array([True, False])
    _same((ma.asarray(b) << ma.asarray(b)).compute(), b << b)
    y = ma.asarray(np.arange(4, dtype=np.int16))
    y <<= 2
    _same(y.compute(), np.arange(4, dtype=np.int16) << 2)
    for bad in (lambda m: m.asarray(np.ones(2)) << 1, lambda m: m.asarray(np.ones(2, np.uint64)) >> m.asarray(np.ones(2, np.int64))):
        with pytest.raises(TypeError):
            bad(np)
        with pytest.raises(TypeError):
            bad(ma).compute()


def test_ufuncs_without_a_loop_say_numpys_words():
    """Bitwise operations and shifts of floats, sign of booleans: NumPy's
    TypeError text word for word (helper 82)."""
    f, b = np.ones(2), np.array([True, False])
    for call in (lambda m, a: m.bitwise_and(a, a), lambda m, a: m.invert(a), lambda m, a: m.left_shift(a, 1),
                 lambda m, a: m.right_shift(a, a)):
        with pytest.raises(TypeError) as want:
            call(np, f)
        with pytest.raises(TypeError, match=re.escape(str(want.value))):
            call(ma, ma.asarray(f)).compute()
    with pytest.raises(TypeError) as want:
        np.sign(b)
    with pytest.raises(TypeError, match=re.escape(str(want.value))):
        ma.sign(ma.asarray(b)).compute()


def test_boolean_scalars_slices_in_lists_and_item_assignment_as_numpy():
    """A boolean scalar index adds an axis of length 1 or 0; a list holding
    a slice and a 0-d float array are NumPy's IndexErrors; item assignment
    is Python's TypeError (helper 82)."""
    A = np.arange(20.0).reshape(4, 5)
    x = ma.asarray(A)
    for key in (True, False, np.array(True), np.array(False), (slice(None), True), (0, False), (Ellipsis, np.True_)):
        _same(x[key].compute(), A[key])
    _same(x[x.sum() > 0].compute(), A[A.sum() > 0])
    for key in ([slice(None), 0], np.array(1.0)):
        with pytest.raises(IndexError) as want:
            A[key]
        with pytest.raises(IndexError, match=re.escape(str(want.value))):
            x[key]
    with pytest.raises(TypeError, match="'Array' object does not support item assignment"):
        x[0] = 1.0


def test_an_output_path_that_names_no_file_is_refused_before_the_work(tmp_path, monkeypatch):
    """'' and 'folder/' name no file: refused up front, nothing written
    (helper 82: they failed at the rename, after the evaluation)."""
    monkeypatch.chdir(tmp_path)
    for path in ("", "dirx/"):
        with pytest.raises(OSError, match="names no file"):
            ma.asarray(np.ones(3)).to_npy(path)
    assert list(tmp_path.iterdir()) == []


def test_index_arrays_are_held_as_int64_and_memmaps_read_from_their_file(tmp_path):
    """An integer-array index goes to the engine as one int64 array (not a
    list of Python ints through JSON: 150 B per index, helper 84) and
    survives pickling; a memmap of a whole .npy file is read as from_npy
    reads it (positioned reads into planned blocks, not mapped pages)."""
    import pickle

    v = np.random.default_rng(0).standard_normal(100_000)
    x = ma.asarray(v)
    idx = np.arange(0, 100_000, 7)[::-1]
    y = x[idx]
    # Held by the engine alone (helper 134: the recipe kept a second copy,
    # 16 bytes per index); read back from it when pickled.
    assert y._recipe[1][2]["indices"] is None
    assert y._expr.take_indices().dtype == np.int64
    np.testing.assert_array_equal(y._expr.take_indices(), idx)
    _same(y.compute(), v[idx])
    _same(pickle.loads(pickle.dumps(y)).compute(), v[idx])
    _same(x[v > 1.5].compute(), v[v > 1.5])
    np.save(tmp_path / "v.npy", v.reshape(1000, 100))
    m = ma.asarray(np.load(tmp_path / "v.npy", mmap_mode="r"))
    assert m._recipe[0] == "expr_from_npy"
    _same(m.sum(axis=0).compute(), ma.from_npy(tmp_path / "v.npy").sum(axis=0).compute())
    part = ma.asarray(np.load(tmp_path / "v.npy", mmap_mode="r")[10:])
    assert part._recipe[0] == "expr_from_ndarray"


def test_faults_found_by_helper_95_are_numpys_behaviour():
    """axis=True was taken as axis 1 (NumPy: TypeError); a slice step beyond
    2**63 was refused as a float; the mean of int64 over several axes was
    not NumPy's bits (it summed in order where NumPy sums float64 runs
    pairwise); einsum and matmul of -0.0 products gave -0.0 (NumPy sums
    from 0.0)."""
    x = np.arange(6.0).reshape(2, 3)
    for f in (ma.sum, ma.mean, ma.max):
        with pytest.raises(TypeError, match="an integer is required"):
            f(ma.asarray(x), axis=True)
    a = np.arange(6.0)
    for s in (slice(None, None, 2**70), slice(None, None, -(2**70)), slice(4, 1, -(2**80)), slice(2, None, 7)):
        np.testing.assert_array_equal(ma.asarray(a)[s].compute(), a[s])
    i = np.random.default_rng(1).integers(-(2**62), 2**62, (5, 6, 7))
    for axis in (None, 0, (0, 2), (1, 2), 2):
        got = np.asarray(ma.asarray(i).mean(axis=axis).compute())
        assert got.tobytes() == np.asarray(np.mean(i, axis=axis)).tobytes(), axis
    z = np.full((2, 3), -0.0)
    for got, want in [(ma.einsum("ij->i", ma.asarray(z)), np.einsum("ij->i", z)),
                      (ma.einsum("ij->", ma.asarray(z)), np.einsum("ij->", z)),
                      (ma.asarray(z) @ ma.ones(3), z @ np.ones(3)),
                      (ma.einsum("ij->ij", ma.asarray(z)), np.einsum("ij->ij", z))]:
        got = np.asarray(got.compute())
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def test_a_contraction_is_never_cut_into_units_of_one_output():
    """A limit that left room for tiles of one output element ran
    ``x.T @ x`` (1003 × 1003) as 1,006,009 units: 20 s where whole tiles
    take 0.2 s. Units hold at least 256 KiB of work, and a limit that
    holds none beside the result is refused, pointing to to_npy."""
    x = ma.asarray(np.random.default_rng(0).standard_normal((1000, 1003)))
    # The result (7.68 MiB) and 128 KiB, less than a unit's work: refused.
    # (8 MiB fits a unit of one thread on some machines: tiles differ by CPU.)
    with pytest.raises(MemoryError, match="to_npy"):
        (x.T @ x).compute(memory_limit=1003 * 1003 * 8 + 128 * 1024)
    plan = str((x.T @ x).explain(memory_limit="9MiB"))
    items = int(re.search(r"(\d+) work items", plan).group(1))
    assert items < 20_000, plan
    w = ma.asarray(np.random.default_rng(1).standard_normal((400, 300)))
    # A row-wise contraction's small units are as efficient: 1 MiB still runs.
    np.testing.assert_array_equal(ma.einsum("ij,j->i", w, w[0]).compute(memory_limit="1MiB"),
                                  ma.einsum("ij,j->i", w, w[0]).compute(memory_limit="1GiB"))


def _outcome(call):
    """A call's result as (dtype, shape, bytes), or its exception as (type, message)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            r = call()
            r = np.asarray(r.compute() if isinstance(r, ma.Array) else r)
    except Exception as e:  # noqa: BLE001 - compared with NumPy's
        return type(e).__name__, str(e)
    return r.dtype, r.shape, r.tobytes()


def test_uniform_refuses_numpys_bad_ranges():
    """Found by a tester: uniform(-1e308, 1e308) gave all inf; NumPy's
    Generator raises on a range that is not finite, and on high < low."""
    rng = np.random.default_rng(0)
    for low, high in ((-1e308, 1e308), (0.0, np.inf), (-np.inf, 0.0), (np.nan, 1.0), (0.0, np.nan), (1e308, -1e308), (1.0, 0.0)):
        with pytest.raises(Exception) as expected:
            rng.uniform(low, high, size=4)
        with pytest.raises(type(expected.value), match=re.escape(str(expected.value))):
            ma.random.uniform(low, high, size=4, seed=1)
    assert rng.uniform(2.0, 2.0) == ma.random.uniform(2.0, 2.0, seed=1).compute() == 2.0


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_uniform_never_returns_high(dtype):
    """Found by a tester: uniform(0, 1, size=3000, seed=1, dtype=float16)
    had x[2524] == 1.0 (the float64 draw rounded up to high), and float32
    over (1, 1 + 2**-22) returned high too. A draw that rounds to high is
    the dtype's next value below it."""
    for low, high, size, seed in ((0.0, 1.0, 3000, 1), (1.0, 1 + 2**-22, 2000, 1), (-3.0, 5.0, 20_000, 7),
                                  (1.0, 1 + 2**-50, 2000, 2)):
        x = np.asarray(ma.random.uniform(low, high, size=size, seed=seed, dtype=dtype).compute())
        lo, hi = np.array([low, high]).astype(dtype)
        assert x.dtype == dtype and x.shape == (size,)
        if lo == hi:  # no value of the dtype in between: all are low, as NumPy's uniform(a, a)
            assert (x == lo).all()
            continue
        assert (x >= lo).all() and (x < hi).all(), (low, high, x.max())
        below = np.nextafter(hi, lo)
        if dtype == np.float16 and (low, high) == (0.0, 1.0):
            assert x[2524] == below  # the tester's value, once 1.0
        if (low, high) == (1.0, 1 + 2**-22) and dtype == np.float32:
            assert set(np.unique(x).tolist()) <= {1.0, float(below)} and (x == below).any()
    # Other values are the draws themselves: float64 over [0, 1) is unchanged.
    x = ma.random.uniform(0.0, 1.0, size=4, seed=1).compute()
    assert np.asarray(x).tobytes().hex() == "590e1dc26a90d73f6e43c88c4df2c43ff5845638007dd73f744fa3eb317eee3f"


def test_arange_fills_numpys_first_two_values_and_nans():
    """Found by a tester: arange(70000, 70003, dtype=float16) gave
    [nan nan nan] (NumPy: [inf inf nan]: a[0] and a[1] stored, then a[0] +
    i * (inf - inf)); a[0] + 0 * d is no longer used for a[0] and a[1]."""
    cases = [((70000, 70003), np.float16), ((2**62, 2**62 + 3), np.float16), ((70000, 70001), np.float16),
             ((70000, 0, -3), np.float16), ((65504, 65600, 16), np.float16), ((-70000, -69990, 2.5), np.float16),
             ((2**64, 2**64 + 2), np.float16), ((1e39, 1e39 + 5e32, 1e32), np.float32), ((1e-10, 1e10, 5e9), np.float32),
             ((3.4e38, 3.41e38, 1e35), np.float32)]
    for args, dtype in cases:
        want = _outcome(lambda: np.arange(*args, dtype=dtype))
        assert want[0] == np.dtype(dtype)
        assert _outcome(lambda: ma.arange(*args, dtype=dtype)) == want, (args, dtype)
    with np.errstate(over="ignore"):
        x, want = ma.arange(70000, 70003, dtype=np.float16).compute(), np.arange(70000, 70003, dtype=np.float16)
    assert np.isinf(x[:2]).all() and np.isnan(x[2]) and np.signbit(x[2]) == np.signbit(want[2])


def test_arange_length_and_dtype_are_numpys_for_numpy_scalars():
    """Found by a tester: arange(np.float16(0.1), 1, 0.1) had 10 values
    (NumPy 9: (1 - float16(0.1)) / 0.1 is float16 arithmetic, NEP 50); the
    dtype is int64 promoted with each argument (float64 for float16
    arguments, as NumPy)."""
    assert ma.arange(np.float16(0.1), 1, 0.1).shape == np.arange(np.float16(0.1), 1, 0.1).shape == (9,)
    rng = np.random.default_rng(3)
    for t in (np.float16, np.float32):
        for _ in range(300):
            a, b = t(rng.uniform(-5, 5)), t(rng.uniform(-5, 5))
            c = t(rng.choice([-1, 1]) * 10 ** rng.uniform(-2, 0.5))
            for args in ((a, b, c), (a, b), (b,), (a, 5, c), (0.1, b, c), (a, b, 0.1), (1, b, c)):
                for dtype in (None, np.float16, np.float32, np.int16):
                    want = _outcome(lambda: np.arange(*args, dtype=dtype))
                    assert _outcome(lambda: ma.arange(*args, dtype=dtype)) == want, (args, dtype)
    for args in ((np.float16(1), np.float16(5), np.float16(1)), (np.uint64(3),), (2**63, 2**63 + 2), (np.int8(1), 4),
                 (0, 0, np.nan), (0, 10, 0), (0, 10, 0.0), (0, 10, np.float64(0)), (np.int8(100), 130, 20),
                 (5, 6, np.inf), (5, 6, -np.inf), (5, 3, 1e-320), (0, 2**63, 1)):
        assert _outcome(lambda: ma.arange(*args)) == _outcome(lambda: np.arange(*args)), args


def test_arange_checks_start_and_start_plus_step_as_numpy():
    """Found by a tester: arange(10, 2, -3, dtype=uint8) was refused
    (memfit checked the step, -3, against uint8; NumPy stores 10 and 7),
    and arange(1, 300, 200, dtype=int8) named 200 where NumPy names 201."""
    for args, dtype in (((10, 2, -3), np.uint8), ((1, 300, 200), np.int8), ((-5, 0), np.uint8), ((0, 1000, 300), np.int8),
                        ((300.5, 302), np.int8), ((-1.5, 2), np.uint64), ((np.int64(-1), 2), np.uint8),
                        ((1e30, 1e30 + 1e16, 1e15), np.int64), ((np.nan, 1), np.int8), ((250, 260), np.uint8),
                        ((0, 10, -1), np.uint8), ((200, 0, -50), np.uint8), ((2**64 - 3, 2**64), np.uint64),
                        ((5, 6, 2**70), np.int8), ((127, 120, -2), np.int8)):
        want = _outcome(lambda: np.arange(*args, dtype=dtype))
        assert _outcome(lambda: ma.arange(*args, dtype=dtype)) == want, (args, dtype, want)
    np.testing.assert_array_equal(ma.arange(10, 2, -3, dtype=np.uint8).compute(), np.array([10, 7, 4], np.uint8))
    with pytest.raises(OverflowError, match="Python integer 201 out of bounds for int8"):
        ma.arange(1, 300, 200, dtype=np.int8)


def test_concatenate_and_stack_check_casting_without_a_dtype():
    """Found by a tester: casting was ignored when dtype was None (int8 with
    uint8 under casting="no" joined as int16), and an unknown casting was
    accepted."""
    a, b = np.int8([1]), np.uint8([3])
    calls = []
    for casting in ("no", "equiv", "safe", "same_kind", "unsafe", "bad", None, 3):
        calls += [lambda m, c=casting: m.concatenate([m.asarray(a), b], casting=c),
                  lambda m, c=casting: m.stack([m.asarray(a), b], casting=c),
                  lambda m, c=casting: m.concatenate([m.asarray(np.float64([1.0])), np.int64([2])], casting=c),
                  lambda m, c=casting: m.concatenate([m.asarray(np.float64([1.0])), np.int64([2])], casting=c, dtype=np.float32),
                  lambda m, c=casting: m.concatenate([m.asarray(a), a], casting=c),
                  lambda m, c=casting: m.concatenate([], casting=c),
                  lambda m, c=casting: m.stack([], casting=c)]
    for call in calls:
        assert _outcome(lambda: call(ma)) == _outcome(lambda: call(np))
    with pytest.raises(TypeError, match=re.escape("Cannot cast array data from dtype('int8') to dtype('int16') according to the rule 'no'")):
        ma.concatenate([ma.asarray(a), b], casting="no")
    with pytest.raises(ValueError, match="casting must be one of 'no', 'equiv', 'safe', 'same_kind', 'unsafe'"):
        ma.stack([ma.asarray(a), b], casting="bad")


def test_repeat_and_squeeze_of_a_0d_array_are_numpys():
    """Found by a tester: repeat(0-d, 2, axis=0) and squeeze(0-d, axis=0)
    raised AxisError; NumPy ravels a 0-d array for repeat (so axis 1 is out
    of bounds "for array of dimension 1") and squeeze takes 0 or -1."""
    z = np.array(5.0)
    for axis in (0, -1, 1, -2, None, np.int64(0)):
        for r in (0, 1, 2):
            assert _outcome(lambda: ma.repeat(ma.asarray(z), r, axis=axis)) == _outcome(lambda: np.repeat(z, r, axis=axis))
            assert _outcome(lambda: ma.asarray(z).repeat(r, axis=axis)) == _outcome(lambda: z.repeat(r, axis=axis))
    for axis in (0, -1, 1, (0,), (0, 0), (), None, (0, -1), np.int64(-1)):
        assert _outcome(lambda: ma.squeeze(ma.asarray(z), axis=axis)) == _outcome(lambda: np.squeeze(z, axis=axis))
    with pytest.raises(np.exceptions.AxisError, match="axis 1 is out of bounds for array of dimension 1"):
        ma.repeat(ma.asarray(z), 2, axis=1)


def test_full_bool_of_a_python_int_beyond_int64_raises_as_numpy():
    """Found by a tester: full(3, 2**63, dtype=bool) gave True; NumPy
    converts the int to a C long first."""
    for v in (2**63, -(2**63) - 1, 2**64 - 1, 2**64, 2**1100, 2**63 - 1, -(2**63), 0, 5):
        for dtype in (bool, np.int64, np.uint64, np.int8, np.float16):
            want = _outcome(lambda: np.full(3, v, dtype=dtype))
            assert _outcome(lambda: ma.full(3, v, dtype=dtype)) == want, (v, dtype)
    with pytest.raises(OverflowError, match="Python int too large to convert to C long"):
        ma.full(3, 2**63, dtype=bool)


def test_nonzero_method_and_0d_messages_are_numpys():
    """Found by a tester: Array had no .nonzero() method, and the 0-d
    message was np.where's (with the arr[cond] hint) for every dtype; NumPy
    2 adds the hint only for a bool array."""
    x = np.array([[0, 1], [2, 0]])
    for got, want in ((ma.asarray(x).nonzero(), x.nonzero()), (ma.where(ma.asarray(x)), np.where(x))):
        assert len(got) == len(want) and all(np.array_equal(g, w) and g.dtype == w.dtype for g, w in zip(got, want))
    for z in (np.array(1.0), np.array(True), np.array(0, np.uint8), np.array(False)):
        for call in (lambda m: m.asarray(z).nonzero(), lambda m: m.nonzero(m.asarray(z)), lambda m: m.where(m.asarray(z))):
            want = _outcome(lambda: call(np))
            assert want[0] == "ValueError"
            assert _outcome(lambda: call(ma)) == want


def test_remainders_by_zero_are_numpys_nan_bits():
    """A float remainder by zero is fmod's NaN, sign bit included, as
    NumPy's divmod gives it (helpers 98, 103: memfit made a positive NaN)."""
    for dtype in (np.float64, np.float32, np.float16):
        y = np.array([1.0, -1.0, 0.0, np.inf, -np.inf, 2.5], dtype=dtype)
        for d in (0.0, -0.0, 2.0):
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                got = [(ma.asarray(y) % d).compute(), (ma.asarray(y) // d).compute(), ma.divmod(ma.asarray(y), d)[1].compute()]
                want = [y % dtype(d), y // dtype(d), np.divmod(y, dtype(d))[1]]
            for g, w in zip(got, want):
                assert g.dtype == w.dtype and g.tobytes() == w.tobytes(), (dtype, d, g, w)


def test_zarr_chunks_and_shards_of_the_wrong_kind_name_the_whole_value(tmp_path):
    """to_zarr's ``shards`` (and store's/to_zarr's ``chunks``) of a kind
    they cannot be raise TypeError (zarr-python's type for them), naming
    the whole value and what it may be. Before, a string other than "auto"
    was iterated:
    ``shards="yes"`` said ``shards must be an integer, got str 'y'``."""
    a = ma.ones((4, 4))
    shards_msg = 'shards must be "auto", None, an int or a tuple of ints, got '
    chunks_msg = "chunks must be an int, a tuple of ints or None, got "
    for shards, got in [("yes", "str 'yes'"), ("auto ", "str 'auto '"), (b"ab", "bytes b'ab'"), ({4: 4}, "dict {4: 4}"),
                        ([2, "a"], "list [2, 'a']"), (2.5, "float 2.5"), (True, "bool True"), ((4, True), "tuple (4, True)")]:
        with pytest.raises(TypeError, match=re.escape(shards_msg + got) + "$"):
            a.to_zarr(tmp_path / "q.zarr", shards=shards)
    for chunks, got in [("yes", "str 'yes'"), ("auto", "str 'auto'"), ((2, 2.0), "tuple (2, 2.0)"), (True, "bool True")]:
        with pytest.raises(TypeError, match=re.escape(chunks_msg + got) + "$"):
            a.to_zarr(tmp_path / "q.zarr", chunks=chunks)
        with pytest.raises(TypeError, match=re.escape(chunks_msg + got) + "$"):
            ma.store(a, tmp_path / "q.zarr", chunks=chunks)
    assert list(tmp_path.iterdir()) == []
    # What they may be still works: "auto", None, an int, a sequence of ints.
    for i, (chunks, shards) in enumerate([(None, "auto"), (2, None), ((2, 2), 4), ([1, 2], np.array([2, 4]))]):
        a.to_zarr(tmp_path / f"{i}.zarr", chunks=chunks, shards=shards)
        np.testing.assert_array_equal(ma.from_zarr(str(tmp_path / f"{i}.zarr")).compute(), np.ones((4, 4)))


def test_store_takes_the_paths_to_npy_and_to_zarr_take(tmp_path):
    """store writes to bytes and os.PathLike paths as to_npy and to_zarr
    do, and its TypeError lists only what it accepts. Before, a bytes path
    raised ``store targets are .npy paths, Zarr directory paths or zarr
    arrays, got bytes``, naming zarr arrays, which store refuses."""
    npy, zdir = os.fsencode(tmp_path / "sb.npy"), os.fsencode(tmp_path / "sb.zarr")
    ma.store(ma.arange(3.0), npy)
    ma.store([ma.ones(2), ma.zeros(3)], [zdir, tmp_path / "p.npy"])
    np.testing.assert_array_equal(np.load(tmp_path / "sb.npy"), np.arange(3.0))
    np.testing.assert_array_equal(ma.from_zarr(str(tmp_path / "sb.zarr")).compute(), np.ones(2))
    np.testing.assert_array_equal(np.load(tmp_path / "p.npy"), np.zeros(3))
    with pytest.raises(FileExistsError):
        ma.store(ma.arange(3.0), npy)
    ma.store(ma.ones(3), npy, overwrite=True)
    np.testing.assert_array_equal(np.load(tmp_path / "sb.npy"), np.ones(3))
    for target in (3, None, [b"x.npy"]):
        with pytest.raises(TypeError) as info:
            ma.store(ma.ones(3), target)
        assert str(info.value) == (
            "store targets are .npy paths or Zarr directory paths (str, bytes or os.PathLike), "
            f"got {type(target).__name__}"
        )


def test_in_is_numpys_any_of_equal():
    """``value in x`` is NumPy's ``(x == value).any()`` (helper 112: 2-D
    and 0-d arrays raised, as Python fell back to iterating their rows)."""
    cases = [(np.array([[1, 2], [3, 4]]), 3), (np.array(3), 3), (np.ones((1, 1)), np.array([1, 2])),
             (np.arange(3), 5), (np.array([[1.0, np.nan]]), np.nan)]
    for a, v in cases:
        assert (v in ma.asarray(a)) == (v in a), (a, v)


def test_matmul_with_six_batch_axes_or_more():
    """Batch axes beyond five took the letters of the core axes (i, j, k):
    'einstein sum subscripts string includes output subscript 'i' multiple
    times' (helper 112)."""
    for nb in (6, 7, 9):
        b = np.arange(6.0 * 2**nb).reshape((2,) * nb + (2, 3))
        c = np.ones((1,) * nb + (3, 2))
        np.testing.assert_array_equal(np.asarray(ma.asarray(b) @ ma.asarray(c)), b @ c)
        np.testing.assert_array_equal(np.asarray(ma.asarray(b) @ np.ones(3)), b @ np.ones(3))


@pytest.mark.parametrize("name", ["nanmean", "nanvar", "nanstd"])
def test_nan_statistics_refuse_an_integer_out_for_float_input(name):
    """NumPy refuses an integer ``out`` for an inexact input; memfit cast the
    means into it ([1.5, 3.5] written as [1, 3], helper 112)."""
    f = np.array([[1.0, 2.0], [2.0, np.nan]])
    fn = getattr(np, name)
    with pytest.raises(TypeError, match="If a is inexact, then out must be inexact"):
        fn(f, axis=0, out=np.zeros(2, int))
    with pytest.raises(TypeError, match="If a is inexact, then out must be inexact"):
        fn(ma.asarray(f), axis=0, out=np.zeros(2, int))
    out = np.zeros(2)
    assert fn(ma.asarray(f), 0, None, out) is out
    np.testing.assert_array_equal(out, fn(f, axis=0))
    ints = np.arange(4).reshape(2, 2)
    if name == "nanstd":
        return  # NumPy's sqrt cannot cast into an integer out either
    np.testing.assert_array_equal(fn(ma.asarray(ints), axis=0, out=np.zeros(2, int)), fn(ints, axis=0, out=np.zeros(2, int)))


def test_a_copy_does_not_see_later_writes_to_the_arrays_it_borrowed():
    """np.copy(x) and x.copy() take the borrowed NumPy arrays' values now,
    as NumPy's copy does (they returned x, whose values followed later writes
    to the array it borrows; helper 112); files stay files."""
    a = np.arange(3.0)
    x = ma.asarray(a)
    copies = [np.copy(x), x.copy(), (x * 2 + ma.asarray(np.ones(3))).copy(order="C")]
    a[0] = 100.0
    np.testing.assert_array_equal(np.asarray(copies[0]), [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(np.asarray(copies[1]), [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(np.asarray(copies[2]), [1.0, 3.0, 5.0])
    np.testing.assert_array_equal(np.asarray(x), [100.0, 1.0, 2.0])
    with pytest.raises(ValueError, match="order must be one of"):
        x.copy(order="X")
