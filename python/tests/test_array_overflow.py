"""memfit.array speaks where NumPy does (issue 23, item 6): values that
become inf or NaN from finite inputs warn wherever they arise (casts of
scalars, promotions, astype, folded constants, reductions with a NaN
elsewhere); float16 casts round once; prod of a tiled axis keeps its sign;
in-place operators rebind under NumPy's casting rule; 0-d arrays go
everywhere. Each value is checked against NumPy."""

import warnings

import numpy as np
import pytest

import memfit.array as ma

zarr = pytest.importorskip("zarr")

LIMITS = [("64MiB", 1), ("4MiB", 2)]


def computed(x, memory_limit="64MiB", n_jobs=1):
    """``x.compute()`` and the RuntimeWarnings it gave."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        got = x.compute(memory_limit=memory_limit, n_jobs=n_jobs)
    return got, [str(m.message) for m in w if issubclass(m.category, RuntimeWarning)]


def numpy_warns(f):
    """NumPy's result of ``f()`` and whether it gave a RuntimeWarning."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        want = f()
    return want, any(issubclass(m.category, RuntimeWarning) for m in w)


F16 = np.float16([1, 2, 3])
F32 = np.float32([1, 2])
COND = np.array([True, False, True])


# Each case: the lazy expression, the same in NumPy, the count of fresh
# non-finite values we report (None: no warning).
OVERFLOW_CASES = {
    "t3_13_float16_plus_python_float": (lambda: ma.asarray(F16) + 70000.0, lambda: F16 + 70000.0, 3),
    "float32_times_python_float": (lambda: ma.asarray(F32) * 1e300, lambda: F32 * 1e300, 2),
    "python_float_times_float32": (lambda: 1e300 * ma.asarray(F32), lambda: 1e300 * F32, 2),
    "float16_plus_python_int": (lambda: ma.asarray(F16) + 100000, lambda: F16 + 100000, 3),
    "where_scalar_into_float16": (lambda: ma.where(COND, 1e5, ma.asarray(F16)), lambda: np.where(COND, 1e5, F16), 3),
    "astype_float64_to_float32": (
        lambda: ma.asarray(np.array([1e300, 1.0])).astype(np.float32),
        lambda: np.array([1e300, 1.0]).astype(np.float32),
        1,
    ),
    "astype_float64_to_float16": (
        lambda: ma.asarray(np.array([1e5, -70000.0, 1.0])).astype(np.float16),
        lambda: np.array([1e5, -70000.0, 1.0]).astype(np.float16),
        2,
    ),
    "astype_int_to_float16": (
        lambda: ma.asarray(np.array([100000, 7])).astype(np.float16),
        lambda: np.array([100000, 7]).astype(np.float16),
        1,
    ),
    "folded_constants": (lambda: ma.full(4, 1e300) * 1e300, lambda: np.full(4, 1e300) * 1e300, 4),
    "folded_constant_cast": (
        lambda: ma.zeros(3, np.float16) + 1e5,
        lambda: np.zeros(3, np.float16) + 1e5,
        3,
    ),
    "float32_sum": (lambda: ma.asarray(np.float32([3e38, 3e38])).sum(), lambda: np.float32([3e38, 3e38]).sum(), 1),
}


@pytest.mark.parametrize("case", sorted(OVERFLOW_CASES))
@pytest.mark.parametrize("limit,n_jobs", LIMITS)
def test_values_that_overflow_from_finite_inputs_warn_as_numpy_does(case, limit, n_jobs):
    lazy, eager, count = OVERFLOW_CASES[case]
    want, numpy_warned = numpy_warns(eager)
    got, messages = computed(lazy(), limit, n_jobs)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    assert numpy_warned
    assert [m.split(" values")[0] for m in messages] == [f"overflow encountered in {count}"], messages


SILENT_CASES = {
    "inf_plus_one": (lambda: ma.asarray(np.array([np.inf, 1.0])) + 1.0, lambda: np.array([np.inf, 1.0]) + 1.0),
    "inf_astype_float16": (
        lambda: ma.asarray(np.array([np.inf, np.nan, 1.0])).astype(np.float16),
        lambda: np.array([np.inf, np.nan, 1.0]).astype(np.float16),
    ),
    "python_inf_into_float16": (lambda: ma.asarray(F16) + np.inf, lambda: F16 + np.inf),
    "nan_sum": (lambda: ma.asarray(np.array([np.nan, 1.0])).sum(), lambda: np.array([np.nan, 1.0]).sum()),
    "float16_plus_numpy_float64": (lambda: ma.asarray(F16) + np.float64(1e300), lambda: F16 + np.float64(1e300)),
    "float16_mean": (lambda: ma.asarray(np.float16([60000, 60000])).mean(), lambda: np.float16([60000, 60000]).mean()),
}


@pytest.mark.parametrize("case", sorted(SILENT_CASES))
def test_non_finite_inputs_that_propagate_do_not_warn(case):
    lazy, eager = SILENT_CASES[case]
    want, numpy_warned = numpy_warns(eager)
    got, messages = computed(lazy())
    np.testing.assert_array_equal(got, want)
    assert got.dtype == want.dtype
    assert not numpy_warned and messages == []


@pytest.mark.parametrize("limit,n_jobs", LIMITS)
def test_a_nan_elsewhere_in_a_reduction_does_not_hide_an_overflow(limit, n_jobs):
    x = np.float32([[3e38, 3e38, 1], [np.nan, 1, 2], [1, 2, 3], [-3e38, -3e38, 0]])
    want, numpy_warned = numpy_warns(lambda: x.sum(axis=1))
    got, messages = computed(ma.asarray(x).sum(axis=1), limit, n_jobs)
    np.testing.assert_array_equal(got, want)
    assert numpy_warned and messages and messages[0].startswith("overflow encountered in 2 values")
    # Along the other axis, over a tiled operand, and through prod.
    big = np.tile(np.array([[1e200], [np.nan], [2.0]]), (1, 3))
    want = np.prod(np.tile(big, (1, 2)), axis=1)
    got, messages = computed(np.prod(np.tile(ma.asarray(big), (1, 2)), axis=1), limit, n_jobs)
    np.testing.assert_array_equal(got, want)
    assert messages and messages[0].startswith("overflow encountered in 1 values")


# ---------------------------------------------------------------------------
# float16 casts round once


def _halfway_cases():
    """float64 values at and around float16 halfway points (normal and
    subnormal, both signs, near the overflow threshold)."""
    h = np.arange(0, 0x7BFF, 7, dtype=np.uint16).view(np.float16).astype(np.float64)
    nxt = np.arange(1, 0x7C00, 7, dtype=np.uint16).view(np.float16).astype(np.float64)
    mid = (h + nxt) / 2  # exact in float64
    out = [mid, np.nextafter(mid, np.inf), np.nextafter(mid, -np.inf)]
    out += [mid + mid * 2.0**-40, mid - mid * 2.0**-40, np.array([65504.0, 65519.999, 65520.0, 2.0**-25, 2.0**-26])]
    v = np.concatenate(out)
    return np.concatenate([v, -v])


def test_float16_casts_round_once_bit_for_bit():
    rng = np.random.default_rng(23)
    wide = np.concatenate([
        _halfway_cases(),
        rng.standard_normal(200_000) * 10.0 ** rng.integers(-9, 6, 200_000),
        rng.uniform(-70000, 70000, 50_000),
    ])
    with np.errstate(over="ignore"):
        for src in (wide, wide.astype(np.float32)):
            want = src.astype(np.float16)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                got = ma.asarray(src).astype(np.float16).compute()
            np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
    ints = np.concatenate([rng.integers(-70000, 70000, 50_000), np.arange(2040, 2100), np.arange(65500, 65540)])
    for dt in (np.int64, np.int32, np.uint32):
        src = np.abs(ints).astype(dt) if dt == np.uint32 else ints.astype(dt)
        with np.errstate(over="ignore"):
            want = src.astype(np.float16)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            got = ma.asarray(src).astype(np.float16).compute()
        np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


def test_integer_to_float32_casts_round_once():
    rng = np.random.default_rng(5)
    big = np.concatenate([rng.integers(-(2**63), 2**63 - 1, 20_000, dtype=np.int64), [2**60 + 2**36 + 1]])
    np.testing.assert_array_equal(ma.asarray(big).astype(np.float32).compute(), big.astype(np.float32))
    u = rng.integers(0, 2**64 - 1, 20_000, dtype=np.uint64)
    np.testing.assert_array_equal(ma.asarray(u).astype(np.float32).compute(), u.astype(np.float32))
    # A 0-d integer array cast to float32 rounds once too (NumPy: np.int64(x).astype(np.float32)).
    x = np.int64(2**60 + 2**36 + 1)
    assert ma.asarray(x).astype(np.float32).compute() == x.astype(np.float32) == np.float32(2**60 + 2**37)


# ---------------------------------------------------------------------------
# prod over tiled and repeated axes


PROD_INPUTS = {
    "minus_one": np.array([-1.0]),
    "mixed_signs": np.array([-1.0, 2.0, -0.5]),
    "odd_negatives": np.array([-2.0, 3.0, -1.0, -1.0]),
    "negative_zero": np.array([-0.0, 3.0]),
    "zero_and_negative": np.array([0.0, -2.0]),
    "nan": np.array([-1.0, np.nan]),
    "minus_inf": np.array([-np.inf, 2.0]),
    "float32": np.array([-1.5, 2.0], np.float32),
    "int_wraps": np.array([-3, 7], np.int64),
    "int8": np.array([-3, 5], np.int8),
    "uint8": np.array([3, 255], np.uint8),
    "bool": np.array([True, True]),
}


@pytest.mark.parametrize("name", sorted(PROD_INPUTS))
@pytest.mark.parametrize("k", [1, 2, 3, 7, 40, 41])
def test_prod_over_a_tiled_or_repeated_axis_matches_numpy(name, k):
    a = PROD_INPUTS[name]
    with np.errstate(all="ignore"):
        for f in (lambda m: np.prod(np.tile(m, k)), lambda m: np.prod(np.repeat(m, k)),
                  lambda m: np.prod(np.tile(m, (k, 1)), axis=0)):
            want = f(a)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                got = f(ma.asarray(a)).compute()
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)
            np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def test_prod_sign_for_counts_beyond_two_to_the_53():
    k = 2**53 + 1  # odd, but even as a float64
    got = np.prod(np.broadcast_to(ma.asarray(np.array([-1.0])), (k,))).compute()
    assert got == -1.0


# ---------------------------------------------------------------------------
# In-place operators


IN_PLACE = [
    ("__iadd__", np.add, np.arange(6.0).reshape(2, 3), 2.5),
    ("__isub__", np.subtract, np.arange(6, dtype=np.int32), np.int64(4)),
    ("__imul__", np.multiply, np.arange(6.0), np.arange(6.0)),
    ("__itruediv__", np.true_divide, np.arange(6.0, dtype=np.float32), 3.0),
    ("__ifloordiv__", np.floor_divide, np.arange(-6, 6), 4),
    ("__imod__", np.remainder, np.arange(-6, 6), 4),
    ("__ipow__", np.power, np.arange(6), 2),
    ("__iand__", np.bitwise_and, np.arange(6, dtype=np.uint8), 3),
    ("__ior__", np.bitwise_or, np.arange(6), np.arange(6)[::-1]),
    ("__ixor__", np.bitwise_xor, np.array([True, False]), True),
    ("__imul__", np.multiply, np.arange(6, dtype=np.float32), np.arange(6.0)),  # float64 result cast back
    ("__iadd__", np.add, np.arange(6, dtype=np.int16), np.arange(6, dtype=np.int64)),
    ("__iadd__", np.add, np.arange(6.0).reshape(2, 3), np.arange(3.0)),
]


@pytest.mark.parametrize("method,ufunc,x,y", IN_PLACE)
def test_in_place_operators_rebind_to_the_result_in_the_left_dtype(method, ufunc, x, y):
    a = ma.asarray(x)
    before = a
    got = getattr(a, method)(y)
    assert isinstance(got, ma.Array) and got is not before
    want = getattr(x.copy(), method)(y)
    assert got.dtype == want.dtype == x.dtype
    np.testing.assert_array_equal(got.compute(), want)
    np.testing.assert_array_equal(before.compute(), x)  # the old lazy array is unchanged


def test_in_place_statement_rebinds():
    a = ma.asarray(np.arange(4.0))
    a *= 3
    a += ma.asarray(np.ones(4))
    a @= np.eye(4)
    np.testing.assert_array_equal(a.compute(), np.arange(4.0) * 3 + 1)
    b = ma.asarray(np.ones((2, 3), np.float32))
    b @= np.full((3, 3), 2.0)
    assert b.dtype == np.float32
    np.testing.assert_array_equal(b.compute(), np.ones((2, 3), np.float32) @ np.full((3, 3), 2.0))


@pytest.mark.parametrize(
    "x,method,y",
    [
        (np.arange(3), "__imul__", 1.5),
        (np.arange(3), "__itruediv__", 2),
        (np.arange(3, dtype=np.int8), "__iadd__", np.ones(3)),
        (np.ones(3, bool), "__iadd__", 1),
        (np.ones(3, np.uint8), "__isub__", np.ones(3, np.int8)),
        (np.arange(3), "__ipow__", 0.5),
        (np.arange(3), "__imatmul__", np.ones((3, 3))),
    ],
)
def test_in_place_results_that_do_not_cast_same_kind_raise_numpys_error(x, method, y):
    with pytest.raises(TypeError) as want:
        getattr(x.copy(), method)(y)
    with pytest.raises(type(want.value)) as got:
        getattr(ma.asarray(x), method)(y)
    assert str(got.value) == str(want.value)


def test_in_place_int_times_float_message():
    a = ma.asarray(np.arange(3))
    with pytest.raises(TypeError, match=r"Cannot cast ufunc 'multiply' output from dtype\('float64'\) to dtype\('int64'\) with casting rule 'same_kind'"):
        a *= 1.5


@pytest.mark.parametrize(
    "x,method,y",
    [
        (np.arange(3.0), "__iadd__", np.ones((2, 3))),
        (np.ones((2, 3)), "__imatmul__", np.ones((3, 4))),
        (np.arange(3, dtype=np.int8), "__iadd__", 1000),
    ],
)
def test_in_place_shape_and_range_errors_follow_numpy(x, method, y):
    with pytest.raises((ValueError, OverflowError)) as want:
        getattr(x.copy(), method)(y)
    with pytest.raises(type(want.value)) as got:
        getattr(ma.asarray(x), method)(y)
    assert str(got.value) == str(want.value)


def test_ufunc_out_a_lazy_array_raises_type_error():
    a = ma.asarray(np.arange(3.0))
    with pytest.raises(TypeError, match="out="):
        np.multiply(a, 2, out=a)
    with pytest.raises(TypeError, match="out="):
        np.multiply(np.arange(3.0), 2, out=a)


# ---------------------------------------------------------------------------
# 0-d arrays


ZERO_D = {
    "numpy_float64": lambda: ma.asarray(np.float64(3.0)),
    "python_int": lambda: ma.asarray(7),
    "float16": lambda: ma.asarray(np.float16(1.5)),
    "bool": lambda: ma.asarray(np.bool_(True)),
    "reduction": lambda: ma.asarray(np.arange(12.0).reshape(3, 4)).sum(),
    "reduction_of_tile": lambda: np.prod(np.tile(ma.asarray(np.array([-1.0, 2.0])), 3)),
    "expression": lambda: ma.asarray(np.float32(2.0)) * 3 + 1,
}


@pytest.mark.parametrize("name", sorted(ZERO_D))
def test_zero_d_arrays_compute_and_round_trip_through_npy_and_zarr(name, tmp_path):
    x = ZERO_D[name]()
    want = np.asarray(x.compute())
    assert x.shape == () and want.shape == ()
    x.to_npy(tmp_path / "x.npy")
    back = np.load(tmp_path / "x.npy")
    assert back.shape == () and back.dtype == want.dtype and back == want
    x.to_zarr(tmp_path / "x.zarr")
    z = zarr.open_array(str(tmp_path / "x.zarr"), mode="r")
    assert z.shape == () and z.dtype == want.dtype and z[()] == want
    again = ma.from_zarr(tmp_path / "x.zarr")
    assert again.shape == () and again.compute() == want


KIND_CASES = {
    # (lazy, eager, NumPy's message start for each kind it warns)
    "divide": (lambda a: a / 0.0, ["divide by zero", "invalid value"]),
    "log0": (lambda a: np.log(a), ["divide by zero", "invalid value"]),
    "sqrt_negative": (lambda a: np.sqrt(a), ["invalid value"]),
    "overflow": (lambda a: a * 1e300, ["overflow"]),
    "int_floor_divide": (lambda a: a.astype(np.int64) // np.array([0, 1, 0, 2]), ["divide by zero"]),
    "int_remainder": (lambda a: a.astype(np.int64) % np.array([0, 1, 0, 2]), ["divide by zero"]),
    # 1 / 0 in integers: NumPy's value (the int64 minimum) and both warnings.
    "int_reciprocal": (lambda a: np.reciprocal(a.astype(np.int64)), ["divide by zero", "invalid value"]),
    "int32_reciprocal": (lambda a: np.reciprocal(a.astype(np.int32) + np.int32(0)), ["divide by zero", "invalid value"]),
    "int8_reciprocal": (lambda a: np.reciprocal(np.where(a > 5, np.int8(9), np.int8(0))), ["divide by zero", "invalid value"]),
    # NaN, infinities and values beyond the conversion into integers: NumPy's
    # x86-64 values and its invalid-value warning (were silent 0 and -1).
    "nan_to_int32": (lambda a: (a / 0.0 * 0.0).astype(np.int32), ["divide by zero", "invalid value"]),
    "large_to_int64": (lambda a: (a * 1e10).astype(np.int64), ["invalid value"]),
    "large_to_uint32": (lambda a: (a * 1e10).astype(np.uint32), ["invalid value"]),
    # The signed minimum // -1 wraps to itself, with NumPy's overflow warning.
    "int8_min_floor_divide": (lambda a: np.where(a > 5, np.int8(-128), np.int8(3)) // np.int8(-1), ["overflow"]),
    "int64_min_floor_divide": (lambda a: np.where(a > 5, np.int64(-2**63), np.int64(3)) // np.int64(-1), ["overflow"]),
    # NaN from operands that are not NaN (infinities): invalid, as NumPy.
    "inf_minus_inf": (lambda a: (a * 1e300) - (a * 1e300), ["overflow", "invalid value"]),
    "sin_inf": (lambda a: np.sin(a / 0.0), ["divide by zero", "invalid value"]),
}


@pytest.mark.parametrize("case", sorted(KIND_CASES))
def test_each_exception_warns_under_numpys_name(case):
    f, kinds = KIND_CASES[case]
    x = np.array([1e10, 0.0, -1.0, 3.0])
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        want = f(x)
    numpy_kinds = sorted(k for k in kinds if any(str(m.message).startswith(k) for m in w))
    assert numpy_kinds == sorted(kinds)
    got, messages = computed(f(ma.asarray(x)))
    np.testing.assert_array_equal(got, want)
    assert sorted(m.split(" encountered")[0] for m in messages) == sorted(kinds), messages


def test_errstate_ignores_raises_calls_and_prints_as_numpy(capsys):
    x = ma.asarray(np.array([1e300, 0.0, 1.0]))
    with np.errstate(over="ignore"):
        got, messages = computed(x * 1e300)
    assert messages == [] and np.isinf(got[0])
    with np.errstate(over="ignore"):
        # Only overflow is ignored: the division by zero still warns.
        assert [m.split(" encountered")[0] for m in computed(1.0 / x)[1]] == ["divide by zero"]
    with np.errstate(all="ignore"):
        assert computed((x * 1e300) / x - np.sqrt(-x))[1] == []
    with np.errstate(divide="raise"), pytest.raises(FloatingPointError, match="divide by zero"):
        (1.0 / x).compute()
    with np.errstate(over="raise"):
        assert computed(1.0 / x)[1] != []  # not an overflow: warns
    seen = []
    with np.errstate(invalid="call", call=lambda err, flag: seen.append((err, flag))):
        (x - x) / (x - x)
        ((x - x) / (x - x)).compute()
    assert seen == [("invalid value", 8)]
    with np.errstate(over="print"):
        (x * 1e300).compute()
    # On standard error, as NumPy prints it (helper 120: standard output).
    printed = capsys.readouterr()
    assert printed.err.startswith("Warning: overflow encountered in 1 values") and printed.out == ""
    # "call" and "log" without a function or object: NumPy's NameError.
    with np.errstate(over="call"), pytest.raises(NameError, match="Python callback specified for overflow"):
        (x * 1e300).compute()
    with np.errstate(over="log"), pytest.raises(NameError, match="log specified for overflow but no object"):
        (x * 1e300).compute()


def _reduction_input():
    """Rows enough to cut into chunks at the small limit; column 0 meets
    +inf and -inf far apart (NaN by ``inf - inf``), column 1 two 1e308
    (overflow), column 2 a NaN (propagates, silent), column 3 0 and inf
    (``0 · inf`` in a product)."""
    x = np.ones((200_000, 4))
    x[10, 0], x[150_000, 0] = np.inf, -np.inf
    x[20, 1], x[160_000, 1] = 1e308, 1e308
    x[30, 2] = np.nan
    x[40, 3], x[170_000, 3] = 0.0, np.inf
    return x


REDUCTION_KINDS = {
    # NumPy's message for each: "... encountered in reduce" / "accumulate" / "subtract".
    "sum": lambda m, a: m.sum(a, axis=0),
    "mean": lambda m, a: m.mean(a, axis=0),
    "prod": lambda m, a: m.prod(a[:, [0, 3]], axis=0),
    "var": lambda m, a: m.var(a, axis=0),
    "std_ddof1": lambda m, a: m.std(a, axis=0, ddof=1),
    "cumsum": lambda m, a: m.cumsum(a, axis=0)[-1],
}


@pytest.mark.parametrize("case", sorted(REDUCTION_KINDS))
@pytest.mark.parametrize("limit,n_jobs", LIMITS)
def test_reductions_and_scans_report_nan_from_infinities_as_invalid(case, limit, n_jobs):
    # NumPy: "invalid value encountered in reduce" (accumulate, subtract);
    # before, only overflow was counted in reductions and scans.
    f, x = REDUCTION_KINDS[case], _reduction_input()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        want = f(np, x)
    numpy_kinds = sorted({str(m.message).split(" encountered")[0] for m in w})
    got, messages = computed(f(ma, ma.asarray(x)), memory_limit=limit, n_jobs=n_jobs)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert sorted({m.split(" encountered")[0] for m in messages}) == numpy_kinds, (messages, numpy_kinds)
    if "invalid value" in numpy_kinds:
        with np.errstate(invalid="raise"), pytest.raises(FloatingPointError, match="invalid value"):
            f(ma, ma.asarray(x)).compute(memory_limit=limit, n_jobs=n_jobs)


@pytest.mark.parametrize("shape", [(2000, 64), (1000, 100), (500, 100), (2000, 16)])
@pytest.mark.parametrize("fill", ["overflow", "opposite_infinities", "one_infinity"])
@pytest.mark.parametrize("limit,n_jobs", [("64MiB", 1), ("2MiB", 2)])
def test_var_of_a_column_whose_mean_overflows_is_numpys(shape, fill, limit, n_jobs):
    # A mean that overflowed met another chunk's finite mean: the merged
    # moments were NaN (inf - inf) where NumPy's two passes give inf.
    x = np.zeros(shape)
    if fill == "overflow":
        x[100, 0] = x[101, 0] = 1e308
    elif fill == "opposite_infinities":
        x[100, 0], x[-5, 0] = np.inf, -np.inf
    else:
        x[100, 0] = np.inf
    for f in (np.var, np.std):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            want = f(x, axis=0)
        numpy_kinds = {str(m.message).split(" encountered")[0] for m in w}
        got, messages = computed(f(ma.asarray(x), axis=0), memory_limit=limit, n_jobs=n_jobs)
        np.testing.assert_array_equal(got, want)
        assert {m.split(" encountered")[0] for m in messages} == numpy_kinds, (messages, numpy_kinds)


@pytest.mark.parametrize("limit,n_jobs", LIMITS)
def test_contractions_report_nan_from_infinities_as_invalid(limit, n_jobs):
    # inf · 0 in a matmul or dot: NaN from operands without NaN, NumPy's
    # "invalid value encountered in matmul" (memfit was silent).
    inf = np.inf
    for a, b, f in [
        (np.array([[inf, 1], [2, 3]]), np.array([[0, 1], [1, -inf]]), lambda a, b: a @ b),
        (np.array([inf, 1.0]), np.array([0, 1.0]), lambda a, b: np.dot(a, b)),
        (np.array([[np.nan, 1.0]]), np.array([[1.0], [1.0]]), lambda a, b: a @ b),
    ]:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            want = f(a, b)
        numpy_kinds = {str(m.message).split(" encountered")[0] for m in w}
        got, messages = computed(f(ma.asarray(a), ma.asarray(b)), memory_limit=limit, n_jobs=n_jobs)
        np.testing.assert_array_equal(got, want)
        assert {m.split(" encountered")[0] for m in messages} == numpy_kinds, (messages, numpy_kinds)


def test_mean_of_an_empty_array_reports_the_invalid_division():
    # NumPy: "Mean of empty slice" and "invalid value encountered in divide";
    # memfit's mean of nothing was a silent NaN.
    x = np.zeros((0, 3))
    for f in (lambda m, a: m.mean(a, axis=0), lambda m, a: m.mean(a)):
        got, messages = computed(f(ma, ma.asarray(x)))
        assert np.isnan(got).all() and [m.split(" encountered")[0] for m in messages] == ["invalid value"]
        with np.errstate(invalid="raise"), pytest.raises(FloatingPointError):
            f(ma, ma.asarray(x)).compute()
    assert computed(ma.sum(ma.asarray(x), axis=0))[1] == []
