"""memfit.array against NumPy: leaves, elementwise operations and NumPy 2
promotion, indexing, index maps, reductions, contractions, evaluation under
a memory limit, .npy and Zarr output, and errors."""

import os
import re
import time
import warnings

import numpy as np
import pytest

import memfit
import memfit.array as ma

AxisError = np.exceptions.AxisError

INTS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
FLOATS = ["float16", "float32", "float64"]
DTYPES = ["bool", *INTS, *FLOATS]


def sample(shape, dtype, seed=0, low=None, high=None):
    """Random values of dtype (small integers, so products stay in range)."""
    rng = np.random.RandomState(seed)
    dt = np.dtype(dtype)
    if dt == bool:
        return np.asarray(rng.rand(*shape) < 0.5)
    if dt.kind in "iu":
        lo = (0 if dt.kind == "u" else -9) if low is None else low
        return np.asarray(rng.randint(lo, 10 if high is None else high, size=shape)).astype(dt)
    return np.asarray(rng.randn(*shape) * 3).astype(dt)


def evaluate(x, memory_limit, n_jobs, tmp_path):
    """x evaluated through to_npy (the result need not fit memory_limit)."""
    path = tmp_path / f"eval-{memory_limit}-{n_jobs}.npy"
    x.to_npy(path, memory_limit=memory_limit, n_jobs=n_jobs, overwrite=True)
    return np.load(path)


def same(got, want):
    """Computed memfit result equals NumPy's bitwise (dtype, shape, values; NaN == NaN)."""
    if isinstance(got, ma.Array):
        assert got.shape == np.shape(want), (got.shape, np.shape(want))
        got = got.compute()
    want = np.asarray(want)
    assert isinstance(got, np.ndarray)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_array_equal(got, want)


def close(got, want, rtol=1e-12, atol=0.0):
    """Computed memfit result equals NumPy's to rtol, with NumPy's dtype and shape."""
    if isinstance(got, ma.Array):
        got = got.compute()
    want = np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


# ---------------------------------------------------------------------------
# Attributes and leaves


def test_attributes_and_repr_are_lazy():
    """shape, dtype, ndim, size, nbytes, itemsize, len and repr without computing."""
    a = ma.zeros((10**6, 10**6), dtype=np.float32)  # 4 TB if it were computed
    assert a.shape == (10**6, 10**6)
    assert a.dtype == np.dtype(np.float32) and isinstance(a.dtype, np.dtype)
    assert (a.ndim, a.size, a.itemsize, a.nbytes) == (2, 10**12, 4, 4 * 10**12)
    assert len(a) == 10**6
    assert repr(a) == "memfit.array<shape=(1000000, 1000000), dtype=float32>"
    assert a.T.shape == (10**6, 10**6)
    with pytest.raises(TypeError, match="unsized"):
        len(ma.asarray(np.float64(1.0)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_asarray_round_trip(dtype):
    """asarray(ndarray).compute() equals the array, every dtype, any strides."""
    x = sample((6, 5), dtype)
    same(ma.asarray(x), x)
    same(ma.asarray(np.asfortranarray(x)), x)
    same(ma.asarray(x[::-2, 1::2]), x[::-2, 1::2])


def test_asarray_inputs():
    """Arrays pass through, lists and scalars go through np.asarray, byte-swapped data are converted."""
    a = ma.asarray(np.arange(3))
    assert ma.asarray(a) is a
    same(ma.asarray([[1, 2], [3, 4]]), np.array([[1, 2], [3, 4]]))
    same(ma.asarray(2.5), np.array(2.5))
    swapped = np.arange(5, dtype=">f8")
    same(ma.asarray(swapped), np.arange(5.0))
    same(ma.asarray(np.arange(4), dtype=np.float32), np.arange(4, dtype=np.float32))


@pytest.mark.parametrize("x", [np.ones(3, complex), np.array(["a"]), np.array([1, "a"], dtype=object),
                               np.ones(2, np.longdouble) if np.dtype(np.longdouble).itemsize > 8 else np.ones(2, "M8[s]")])
def test_asarray_unsupported_dtypes(x):
    """Complex, strings, objects, longdouble/datetimes: TypeError naming the dtype."""
    with pytest.raises(TypeError, match=str(x.dtype).replace("[", r"\[").replace("]", r"\]")):
        ma.asarray(x)


def test_asarray_does_not_copy():
    """The engine reads the ndarray in place: a change before compute is seen."""
    x = np.zeros(4)
    a = ma.asarray(x) + 1
    x[2] = 5.0
    same(a, np.array([1.0, 1.0, 6.0, 1.0]))


@pytest.mark.parametrize(
    "args, kwargs",
    [((5,), {}), ((2, 9), {}), ((9, 2, -2), {}), ((0, 1, 0.1), {}), ((0.5, 3.7, 0.3), {}), ((-1.5, 2),
     {}), ((5, 1), {}), ((10,), {"dtype": np.uint8}), ((0, 5, 0.5), {"dtype": np.float32}), ((3.0,), {}),
     ((1, 10, 3), {"dtype": np.float16}), ((-7, 7, 3), {"dtype": np.int16}),
     # By keyword (arange(stop=5) raised a TypeError; helper 116).
     ((), {"stop": 5}), ((2,), {"stop": 5}), ((), {"start": 1, "stop": 8, "step": 3})],
)
def test_arange(args, kwargs):
    """NumPy's length rule and dtype; integer values exact, floats to 1 ulp."""
    want = np.arange(*args, **kwargs)
    got = ma.arange(*args, **kwargs).compute()
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype.kind == "f":
        np.testing.assert_array_max_ulp(got, want, maxulp=1)
    else:
        np.testing.assert_array_equal(got, want)


def test_arange_zero_step():
    with pytest.raises(ZeroDivisionError):
        ma.arange(0, 10, 0)
    with pytest.raises(TypeError, match=r"arange\(\) requires stop to be specified."):
        ma.arange()


def test_full_zeros_ones_empty_like():
    """Constant leaves with NumPy's dtypes."""
    same(ma.zeros((2, 3)), np.zeros((2, 3)))
    same(ma.ones(4, dtype=np.int8), np.ones(4, dtype=np.int8))
    same(ma.empty((2,), dtype=bool), np.zeros(2, dtype=bool))
    same(ma.full((2, 2), 7), np.full((2, 2), 7))
    same(ma.full(3, 1.7, dtype=np.int32), np.full(3, 1.7, dtype=np.int32))
    same(ma.full(3, True), np.full(3, True))
    same(ma.full((), np.float32(2.5)), np.full((), np.float32(2.5)))
    # An array fill is broadcast, as NumPy's (it raised "can only convert an
    # array of size 1"; helper 116).
    same(ma.full((2, 3), [1, 2, 3]), np.full((2, 3), [1, 2, 3]))
    same(ma.full((2, 3), [[1.5], [2]], dtype=np.int32), np.full((2, 3), [[1.5], [2]], dtype=np.int32))
    same(ma.full(3, [[4, 5, 6]]), np.full(3, [[4, 5, 6]]))
    with pytest.raises(ValueError, match=r"could not broadcast input array from shape \(2,\) into shape \(2,3\)"):
        ma.full((2, 3), [1, 2])
    x = sample((3, 2), "uint16")
    same(ma.zeros_like(x), np.zeros_like(x))
    same(ma.ones_like(ma.asarray(x), dtype=np.float32), np.ones_like(x, dtype=np.float32))
    same(ma.full_like(x, 9, shape=(4,)), np.full_like(x, 9, shape=(4,)))
    with pytest.raises(ValueError, match="negative dimensions"):
        ma.zeros((2, -1))
    with pytest.raises(TypeError, match="complex"):
        ma.zeros(3, dtype=complex)


def test_random_does_not_depend_on_blocking(tmp_path):
    """Same seed, same values at any limit and thread count; slices equal the whole's slice; new seed, new values."""
    x = ma.random.normal(2.0, 3.0, size=(300, 70), seed=42)
    full = x.compute(memory_limit="1GiB", n_jobs=2)
    assert full.dtype == np.float64 and full.shape == (300, 70)
    np.testing.assert_array_equal(evaluate(x, "64KiB", 1, tmp_path), full)
    np.testing.assert_array_equal(x[17:250:3, 5].compute(memory_limit="16KiB"), full[17:250:3, 5])
    np.testing.assert_array_equal(ma.random.normal(2.0, 3.0, size=(300, 70), seed=42).compute(), full)
    assert not np.array_equal(ma.random.normal(2.0, 3.0, size=(300, 70), seed=43).compute(), full)
    assert abs(full.mean() - 2.0) < 0.1 and abs(full.std() - 3.0) < 0.1
    u = ma.random.uniform(-1.0, 4.0, size=50000, seed=1, dtype=np.float32).compute()
    assert u.dtype == np.float32 and u.min() >= -1.0 and u.max() < 4.0 and abs(u.mean() - 1.5) < 0.05
    assert ma.random.normal(size=None, seed=0).shape == ()


# ---------------------------------------------------------------------------
# Elementwise operations

BINARY = ["add", "subtract", "multiply", "true_divide", "floor_divide", "remainder", "power", "minimum", "maximum",
          "equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "logical_and", "logical_or",
          "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor"]


def _binary_inputs(name, dt1, dt2):
    x = sample((4, 5), dt1, seed=1)
    y = sample((5,), dt2, seed=2)
    if name in ("true_divide", "floor_divide", "remainder") and np.dtype(dt2).kind in "iub":
        y = np.where(y == 0, np.ones_like(y), y)
    if name == "power":
        x = sample((4, 5), dt1, seed=1, low=-3, high=4) if np.dtype(dt1).kind == "i" else x
        y = np.abs(y) % 4 if np.dtype(dt2).kind in "iu" else y
        if np.dtype(dt2).kind == "f":
            x = np.abs(x)
    return x, y


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("dt1, dt2", [("float64", "float64"), ("float32", "float32"), ("int64", "int64"),
                                      ("int32", "int8"), ("uint8", "int16"), ("uint16", "float32"),
                                      ("int64", "float64"), ("bool", "bool"), ("float16", "float16"),
                                      ("uint64", "uint32"), ("float32", "int64")])
def test_binary_ops_match_numpy(name, dt1, dt2):
    """Each binary ufunc, with broadcasting, equals NumPy bitwise (values and NumPy 2's result dtype)."""
    x, y = _binary_inputs(name, dt1, dt2)
    f = getattr(np, name)
    try:
        with np.errstate(all="ignore"):
            want = f(x, y)
    except TypeError:
        with pytest.raises(TypeError):
            getattr(ma, name)(x, y).compute()
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        got = getattr(ma, name)(ma.asarray(x), ma.asarray(y)).compute()
        np.testing.assert_array_equal(f(ma.asarray(x), y).compute(), got)
    if name == "power" and want.dtype.kind == "f":  # pow is transcendental: libm's, to 1 ulp
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_max_ulp(got, want, maxulp=1)
    else:
        same(got, want)


@pytest.mark.parametrize("op", ["+", "-", "*", "/", "//", "%", "**", "<", "<=", ">", ">=", "==", "!=", "&", "|", "^"])
def test_operators_and_reflected(op):
    """Python operators, an ndarray on either side and Python scalars (weak) on either side."""
    x = sample((3, 4), "int32", seed=3, low=1, high=5)
    y = sample((4,), "int32", seed=4, low=1, high=5)
    a = ma.asarray(x)
    ev = lambda l, r: eval(f"l {op} r")  # noqa: E731
    same(ev(a, ma.asarray(y)), ev(x, y))
    same(ev(a, y), ev(x, y))
    same(ev(y, a), ev(y, x))
    same(ev(a, 2), ev(x, 2))
    same(ev(3, a), ev(3, x))


@pytest.mark.parametrize("dtype", ["float64", "float32", "int16", "bool", "uint8"])
def test_unary_operators(dtype):
    x = sample((3, 4), dtype, seed=5)
    a = ma.asarray(x)
    if dtype != "bool":
        same(-a, -x)
        same(+a, +x)
        same(abs(a), abs(x))
    if np.dtype(dtype).kind in "biu":
        same(~a, ~x)


UNARY_EXACT = ["negative", "positive", "absolute", "sqrt", "square", "reciprocal", "logical_not", "isnan",
               "isfinite", "isinf", "sign", "floor", "ceil", "trunc", "rint"]
UNARY_TRANSCENDENTAL = ["exp", "log", "log2", "log10", "sin", "cos", "tan"]


@pytest.mark.parametrize("name", UNARY_EXACT + UNARY_TRANSCENDENTAL)
@pytest.mark.parametrize("dtype", ["float64", "float32", "int32", "uint8"])
def test_unary_functions(name, dtype):
    """Correctly rounded functions bitwise, transcendental ones to a few ulp; NumPy's dtype (ints → float64)."""
    x = sample((50,), dtype, seed=6)
    if dtype.startswith("float"):
        x = np.concatenate([x, np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30], dtype=dtype)])
    if name in ("log", "log2", "log10", "sqrt", "reciprocal"):
        x = np.abs(x) + (1 if np.dtype(dtype).kind in "iu" else 0)
    f = getattr(np, name)
    with np.errstate(all="ignore"):
        want = f(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        got = getattr(ma, name)(ma.asarray(x)).compute()
        got_np = f(ma.asarray(x)).compute()
    np.testing.assert_array_equal(got, got_np)
    assert got.dtype == want.dtype and got.shape == want.shape
    if name in UNARY_TRANSCENDENTAL:
        np.testing.assert_array_max_ulp(got, want, maxulp=4)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    "array_dtype, scalar, want_dtype",
    [("float32", 1.5, "float32"), ("float32", np.float64(1.5), "float64"), ("uint8", 3, "uint8"),
     ("int16", 2.5, "float64"), ("float16", 2, "float16"), ("int8", np.int64(1), "int64"),
     ("bool", 1, "int64"), ("bool", True, "bool"), ("int32", np.float32(1), "float64"),
     ("float32", np.array(1.0), "float64")],
)
def test_nep50_promotion(array_dtype, scalar, want_dtype):
    """Python scalars are weak and NumPy scalars / 0-d arrays strong, as in NumPy 2."""
    x = sample((5,), array_dtype, seed=7)
    want = x + scalar
    assert want.dtype == np.dtype(want_dtype)
    same(ma.asarray(x) + scalar, want)
    same(scalar + ma.asarray(x), scalar + x)


def test_where_clip_minimum_maximum():
    x = sample((4, 6), "float64", seed=8)
    y = sample((6,), "float32", seed=9)
    a = ma.asarray(x)
    same(ma.where(a > 0, a, y), np.where(x > 0, x, y))
    same(ma.where(x > 0, 1, 0), np.where(x > 0, 1, 0))
    same(ma.where(x > 0, 1.5, y), np.where(x > 0, 1.5, y))
    same(ma.clip(a, -1, 2), np.clip(x, -1, 2))
    same(a.clip(None, 0.5), np.clip(x, None, 0.5))
    same(a.clip(min=y), np.maximum(x, y))
    i = sample((10,), "int32", seed=2)
    same(ma.clip(i, 0, 5), np.clip(i, 0, 5))
    same(ma.minimum(a, y), np.minimum(x, y))
    same(ma.maximum(a, 0), np.maximum(x, 0))
    for got, want in zip(ma.where(a > 0), np.where(x > 0)):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("src", FLOATS + INTS + ["bool"])
@pytest.mark.parametrize("dst", ["float64", "float32", "float16", "int64", "int32", "uint8", "bool"])
def test_astype(src, dst):
    """astype with NumPy's unsafe casting (in-range values: NaN, inf and negative floats to
    unsigned integers are undefined behaviour in NumPy)."""
    x = sample((20,), src, seed=10)
    if np.dtype(src).kind == "f" and np.dtype(dst).kind == "u":
        x = np.abs(x)
    same(ma.asarray(x).astype(dst), x.astype(dst))


def test_astype_casting_rule():
    a = ma.asarray(np.ones(3))
    assert a.astype(np.float64) is a
    with pytest.raises(TypeError, match="'safe'"):
        a.astype(np.int32, casting="safe")
    same(a.astype(np.float32, casting="same_kind"), np.ones(3, np.float32))


def test_broadcast_mismatch_names_both_shapes():
    """A broadcasting error names both shapes."""
    with pytest.raises(ValueError) as e:
        ma.asarray(np.zeros((3, 4))) + ma.asarray(np.zeros((5,)))
    assert "(3,4)" in str(e.value).replace(" ", "") and "(5,)" in str(e.value).replace(" ", "")
    with pytest.raises(ValueError, match="shape mismatch"):
        ma.broadcast_arrays(np.zeros(3), np.zeros(4))


def test_float16_overflow_is_reported():
    """Values that overflow to inf from finite inputs are counted in a RuntimeWarning."""
    x = np.full(10, 60000, dtype=np.float16)
    with pytest.warns(RuntimeWarning, match="10"):
        got = (ma.asarray(x) * 2).compute()
    assert np.isinf(got).all()


# ---------------------------------------------------------------------------
# Indexing

X4 = np.arange(2 * 3 * 4 * 5, dtype=np.int32).reshape(2, 3, 4, 5)

KEYS = [
    0, -1, 1, (1, 2), (0, -1, 2, -5), slice(None), slice(1, None), slice(None, None, -1), (slice(None), 2),
    (Ellipsis, 1), (0, Ellipsis, slice(None, None, 2)), (None,), (None, 0, None, Ellipsis, None),
    (slice(None, None, -2), slice(3, 0, -1), slice(-3, None), slice(None, -1, 3)), (Ellipsis,), (),
    (slice(5, 1), ), (slice(10, -10, -1), 1), (1, None, slice(1, 3), Ellipsis), np.int64(1),
    (np.int32(-1), slice(np.int64(0), np.int64(2))), (Ellipsis, None), (slice(0, 0), Ellipsis),
]


@pytest.mark.parametrize("key", KEYS, ids=[repr(k) for k in KEYS])
def test_basic_indexing(key):
    """Integers, slices with steps (negative too), None and Ellipsis as NumPy."""
    same(ma.asarray(X4)[key], X4[key])


def test_indexing_errors():
    a = ma.asarray(X4)
    with pytest.raises(IndexError, match="index 2 is out of bounds for axis 0 with size 2"):
        a[2]
    with pytest.raises(IndexError, match="index -6 is out of bounds for axis 3 with size 5"):
        a[0, 0, 0, -6]
    with pytest.raises(IndexError, match="too many indices for array: array is 4-dimensional, but 5 were indexed"):
        a[0, 0, 0, 0, 0]
    with pytest.raises(IndexError, match="single ellipsis"):
        a[..., 0, ...]
    with pytest.raises(IndexError, match="only integers"):
        a["x"]
    with pytest.raises(IndexError, match="only integers"):
        a[1.5]
    with pytest.raises(ValueError, match="slice step cannot be zero"):
        a[::0]
    assert a[True].shape == (1, *a.shape) and a[False].shape == (0, *a.shape)  # NumPy's new axis
    with pytest.raises(TypeError, match="one integer or boolean array"):
        a[[0, 1], [1, 2]]


def test_iteration_and_scalars():
    """Iteration yields lazy rows; bool/int/float compute size-1 arrays."""
    x = sample((3, 2), "float64", seed=11)
    rows = list(ma.asarray(x))
    assert len(rows) == 3 and all(isinstance(r, ma.Array) for r in rows)
    same(rows[1], x[1])
    a = ma.asarray(x)
    assert float(a[1, 1]) == x[1, 1]
    assert int(ma.asarray(np.array(7))) == 7
    with pytest.raises(TypeError, match="only 0-dimensional"):
        int(ma.asarray(np.array([[7]])))  # NumPy 2 raises too
    assert bool(a[0, 0] == x[0, 0])
    assert [10, 20, 30][ma.asarray(np.int64(2))] == 30
    with pytest.raises(ValueError, match="ambiguous"):
        bool(a)
    with pytest.raises(TypeError):
        float(a)
    with pytest.raises(TypeError, match="iteration over a 0-d array"):
        iter(ma.asarray(np.float64(1))).__next__()


# ---------------------------------------------------------------------------
# Index maps


def test_reshape():
    x = sample((4, 6), "float32", seed=12)
    a = ma.asarray(x)
    same(a.reshape(3, 8), x.reshape(3, 8))
    same(a.reshape((2, -1, 3)), x.reshape(2, -1, 3))
    same(a.reshape(-1), x.reshape(-1))
    same(ma.reshape(a, (24, 1)), x.reshape(24, 1))
    same(a.T.reshape(-1), x.T.reshape(-1))
    same(a[:, ::2].reshape(12), x[:, ::2].reshape(12))
    same(a.ravel(), x.ravel())
    assert a.reshape(4, 6) is a
    with pytest.raises(ValueError, match=r"cannot reshape array of size 24 into shape \(5,\)"):
        a.reshape(5)
    with pytest.raises(ValueError, match=r"cannot reshape array of size 24 into shape \(5,newaxis\)"):
        a.reshape(5, -1)
    with pytest.raises(ValueError, match="only specify one unknown dimension"):
        a.reshape(-1, -1)
    with pytest.raises(TypeError, match="C order"):
        a.reshape(6, 4, order="F")


def test_transpose_swapaxes_moveaxis():
    x = sample((2, 3, 4, 5), "int16", seed=13)
    a = ma.asarray(x)
    same(a.T, x.T)
    same(a.transpose(), x.transpose())
    same(a.transpose(1, 0, 3, 2), x.transpose(1, 0, 3, 2))
    same(a.transpose((-1, 0, 2, 1)), x.transpose((-1, 0, 2, 1)))
    same(ma.transpose(a, (3, 1, 2, 0)), np.transpose(x, (3, 1, 2, 0)))
    same(a.swapaxes(0, -1), x.swapaxes(0, -1))
    same(ma.moveaxis(a, 0, -1), np.moveaxis(x, 0, -1))
    same(ma.moveaxis(a, [0, 3], [2, 0]), np.moveaxis(x, [0, 3], [2, 0]))
    with pytest.raises(ValueError, match="axes don't match array"):
        a.transpose(0, 1)
    with pytest.raises(ValueError, match="repeated axis in transpose"):
        a.transpose(0, 0, 1, 2)
    with pytest.raises(AxisError, match="axis 4 is out of bounds for array of dimension 4"):
        a.transpose(0, 1, 2, 4)
    with pytest.raises(AxisError):
        a.swapaxes(0, 4)
    with pytest.raises(ValueError, match="same number of elements"):
        ma.moveaxis(a, [0, 1], [0])


def test_expand_dims_squeeze_broadcast_to():
    x = sample((3, 1, 4), "float64", seed=14)
    a = ma.asarray(x)
    same(ma.expand_dims(a, 0), np.expand_dims(x, 0))
    same(ma.expand_dims(a, (-1, 1)), np.expand_dims(x, (-1, 1)))
    same(ma.squeeze(a), np.squeeze(x))
    same(a.squeeze(1), x.squeeze(1))
    same(ma.squeeze(ma.expand_dims(a, 0), (0, -2)), np.squeeze(np.expand_dims(x, 0), (0, -2)))
    same(ma.broadcast_to(a, (2, 3, 5, 4)), np.broadcast_to(x, (2, 3, 5, 4)))
    same(ma.broadcast_to(ma.asarray(np.float32(2)), 3), np.broadcast_to(np.float32(2), 3))
    b1, b2 = ma.broadcast_arrays(a, np.arange(4))
    w1, w2 = np.broadcast_arrays(x, np.arange(4))
    same(b1, w1)
    same(b2, w2)
    with pytest.raises(ValueError, match="squeeze out"):
        a.squeeze(0)
    with pytest.raises(ValueError, match="repeated axis"):
        ma.expand_dims(a, (0, 0))
    with pytest.raises(AxisError):
        ma.expand_dims(a, 5)
    with pytest.raises(ValueError) as e:
        ma.broadcast_to(a, (3, 2, 5))
    assert "3, 1, 4" in str(e.value).replace("(3,1,4)", "3, 1, 4") or "(3,1,4)" in str(e.value)


@pytest.mark.parametrize("reps", [2, (2, 1), (1, 3), (2, 1, 1, 1), (3, 2, 2), (1,), (0, 2)])
def test_tile(reps):
    x = sample((2, 3), "float32", seed=15)
    same(ma.tile(x, reps), np.tile(x, reps))
    same(np.tile(ma.asarray(x), reps), np.tile(x, reps))


@pytest.mark.parametrize("repeats, axis", [(2, None), (3, 0), (2, 1), (1, -1), (0, 0), (4, -2)])
def test_repeat(repeats, axis):
    x = sample((2, 3), "int64", seed=16)
    same(ma.repeat(x, repeats, axis), np.repeat(x, repeats, axis))
    same(ma.asarray(x).repeat(repeats, axis=axis), x.repeat(repeats, axis=axis))
    same(ma.repeat(x, [repeats], axis), np.repeat(x, [repeats], axis))


def test_repeat_and_tile_errors():
    x = ma.asarray(np.arange(4))
    with pytest.raises(TypeError, match="array of counts"):
        ma.repeat(x, [1, 2, 1, 2])
    with pytest.raises(ValueError, match="negative"):
        ma.repeat(x, -1)
    with pytest.raises(ValueError, match="negative"):
        ma.tile(x, (-1,))


def test_stack_and_concatenate():
    x = sample((2, 3), "float64", seed=17)
    y = sample((2, 3), "float32", seed=18)
    z = sample((4, 3), "int32", seed=19)
    for axis in (0, 1, 2, -1, -3):
        same(ma.stack([x, y, x], axis=axis), np.stack([x, y, x], axis=axis))
    for axis in (0, -2):
        same(ma.concatenate([x, z, y], axis=axis), np.concatenate([x, z, y], axis=axis))
    same(ma.concatenate([x, y], axis=1), np.concatenate([x, y], axis=1))
    same(ma.concatenate([x, z], axis=None), np.concatenate([x, z], axis=None))
    same(ma.concatenate([x, z], dtype=np.float32), np.concatenate([x, z], dtype=np.float32))
    same(ma.concatenate([ma.asarray(x)]), x)
    with pytest.raises(ValueError, match="along dimension 1, the array at index 0 has size 3 and the array at index 1 has size 2"):
        ma.concatenate([x, np.zeros((3, 2))])
    with pytest.raises(ValueError, match="same number of dimensions"):
        ma.concatenate([x, np.zeros(3)])
    with pytest.raises(ValueError, match="zero-dimensional"):
        ma.concatenate([np.float64(1), np.float64(2)])
    with pytest.raises(ValueError, match="same shape"):
        ma.stack([x, z])
    with pytest.raises(ValueError, match="at least one"):
        ma.stack([])
    with pytest.raises(AxisError):
        ma.concatenate([x, y], axis=2)


# ---------------------------------------------------------------------------
# Reductions

AXES = [None, 0, 1, -1, (0, 2), (2, 0), (0, 1, 2), ()]


@pytest.mark.parametrize("name", ["sum", "mean", "var", "std", "prod"])
@pytest.mark.parametrize("axis", AXES)
@pytest.mark.parametrize("keepdims", [False, True])
def test_float_reductions(name, axis, keepdims):
    """float64 reductions to 1e-12 relative (accumulated in float64)."""
    x = sample((4, 5, 6), "float64", seed=20) / 3 + 1.5
    f = getattr(np, name)
    close(getattr(ma, name)(x, axis=axis, keepdims=keepdims), f(x, axis=axis, keepdims=keepdims), atol=1e-14)
    close(getattr(ma.asarray(x), name)(axis=axis, keepdims=keepdims), f(x, axis=axis, keepdims=keepdims), atol=1e-14)


@pytest.mark.parametrize("name", ["min", "max", "any", "all", "argmin", "argmax"])
@pytest.mark.parametrize("dtype", ["float64", "float32", "int8", "uint32", "bool", "float16"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("keepdims", [False, True])
def test_exact_reductions(name, dtype, axis, keepdims):
    """min/max/any/all/argmin/argmax bitwise, with NumPy's dtypes."""
    x = sample((5, 7), dtype, seed=21)
    f = getattr(np, name)
    same(getattr(ma, name)(x, axis=axis, keepdims=keepdims), f(x, axis=axis, keepdims=keepdims))
    same(f(ma.asarray(x), axis=axis, keepdims=keepdims), f(x, axis=axis, keepdims=keepdims))


@pytest.mark.parametrize("dtype", INTS + ["bool"])
@pytest.mark.parametrize("axis", [None, 0, (0, 1)])
def test_integer_sums_and_means(dtype, axis):
    """Integer sums give int64/uint64 exactly; means give float64."""
    x = sample((6, 7, 3), dtype, seed=22)
    same(ma.sum(x, axis=axis), np.sum(x, axis=axis))
    same(ma.prod(x[:1, :4, :2], axis=axis), np.prod(x[:1, :4, :2], axis=axis))  # no overflow
    close(ma.mean(x, axis=axis), np.mean(x, axis=axis))
    close(ma.var(x, axis=axis), np.var(x, axis=axis))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_mean_var_std_with_an_integer_dtype_or_out_are_numpys():
    """With an integer or bool dtype= (or an integer out=) NumPy sums in that
    dtype (wrapping) and truncates each division, var subtracting the
    truncated mean; std into an integer array raises its UFuncTypeError (a
    0-d std without out is its square root cast back). memfit computed in
    float64 and cast at the end."""
    rng = np.random.default_rng(5)
    arrays = [
        np.array([[100, 100, 100], [100, 100, 100], [90, 80, 70]]),
        rng.integers(-300, 300, (4, 5)),
        rng.integers(0, 200, (3, 7)).astype(np.uint8),
        rng.random((3, 4)) * 500 - 100,
        rng.random((3, 4)) > 0.5,
    ]
    for x in arrays:
        for name in ("mean", "var", "std"):
            for axis in (None, 0, 1, (0, 1)):
                for keepdims in (False, True):
                    for dtype, out in [(np.int8, None), (np.int64, None), (np.uint8, None), (bool, None), (None, np.int64),
                                       (None, np.int8), (None, bool), (np.float64, np.int64), (np.int16, np.float64)]:
                        kw = dict(axis=axis, keepdims=keepdims, dtype=dtype)
                        if name != "mean":
                            kw["ddof"] = 1

                        def call(m, a):
                            k = dict(kw)
                            if out is not None:
                                k["out"] = np.zeros(np.mean(x, axis=axis, keepdims=keepdims).shape, out)
                            return np.asarray(getattr(m, name)(a, **k))

                        try:
                            want = call(np, x)
                        except TypeError as e:
                            with pytest.raises(TypeError, match=re.escape(str(e))):
                                call(ma, ma.asarray(x))
                            continue
                        got = call(ma, ma.asarray(x))
                        assert got.dtype == want.dtype, (name, x.dtype, kw, out)
                        np.testing.assert_array_equal(got, want, err_msg=f"{name} {x.dtype} {kw} out={out}")


def test_reduction_dtype_and_ddof():
    x = sample((30, 4), "float32", seed=23)
    s = ma.sum(x, axis=0)
    assert s.dtype == np.float32
    close(s, np.sum(x.astype(np.float64), axis=0).astype(np.float32), rtol=1e-6)
    close(ma.sum(x, axis=0, dtype=np.float64), np.sum(x.astype(np.float64), axis=0))
    close(ma.mean(x, dtype=np.float64), np.mean(x.astype(np.float64)))
    y = sample((30, 4), "float64", seed=23)
    close(ma.var(y, axis=0, ddof=1), np.var(y, axis=0, ddof=1))
    close(ma.std(y, ddof=2.5), np.std(y, ddof=2.5))
    close(ma.asarray(y).std(axis=1, ddof=1, keepdims=True), y.std(axis=1, ddof=1, keepdims=True))
    i = sample((10,), "int32", seed=1)
    same(ma.sum(i, dtype=np.int32), np.sum(i, dtype=np.int32))


def test_reduction_axis_errors():
    a = ma.asarray(np.zeros((2, 3)))
    with pytest.raises(AxisError, match="axis 2 is out of bounds for array of dimension 2"):
        a.sum(axis=2)
    with pytest.raises(AxisError, match="axis -3 is out of bounds"):
        ma.mean(a, axis=(0, -3))
    with pytest.raises(ValueError, match="duplicate value in 'axis'"):
        a.max(axis=(1, -1))
    with pytest.raises(TypeError):
        a.argmax(axis=(0, 1))
    with pytest.raises(ValueError, match="wrong shape"):
        a.sum(out=np.zeros(3))
    with pytest.raises(TypeError, match="out="):
        a.sum(out=a)
    with pytest.raises(TypeError, match="where="):
        a.sum(where=np.ones((2, 3), bool))


# ---------------------------------------------------------------------------
# Contractions

EINSUMS = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("ij,jk", [(3, 4), (4, 5)]),
    ("ij,jk,ik->i", [(6, 4), (4, 5), (6, 5)]),
    ("ji,j,jk->ik", [(4, 3), (4,), (4, 5)]),
    ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]),
    ("ij->ji", [(3, 4)]),
    ("i,i->", [(7,), (7,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)]),
    ("...ij,jk", [(2, 3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ijk->", [(2, 3, 4)]),
    ("i...->...", [(3, 2, 2)]),
    ("ab,ab->a", [(5, 3), (5, 3)]),
]


@pytest.mark.parametrize("subscripts, shapes", EINSUMS, ids=[e[0] for e in EINSUMS])
def test_einsum(subscripts, shapes):
    ops = [sample(s, "float64", seed=30 + i) for i, s in enumerate(shapes)]
    close(ma.einsum(subscripts, *ops), np.einsum(subscripts, *ops), atol=1e-12)
    close(np.einsum(subscripts, *[ma.asarray(o) for o in ops]), np.einsum(subscripts, *ops), atol=1e-12)


def test_einsum_integer_and_float32():
    a, b = sample((3, 4), "int32", seed=1), sample((4, 2), "int32", seed=2)
    same(ma.einsum("ij,jk->ik", a, b), np.einsum("ij,jk->ik", a, b))
    c, d = sample((3, 4), "float32", seed=1), sample((4, 2), "float32", seed=2)
    close(ma.einsum("ij,jk->ik", c, d), np.einsum("ij,jk->ik", c, d), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("subscripts, shapes", [
    ("ij,jk->ik", [(3, 4), (5, 6)]),     # j has two lengths
    ("ij,jk->il", [(3, 4), (4, 5)]),     # output index not in inputs
    ("ij,jk->ik", [(3, 4)]),             # too few operands
    ("ijk,jk->ik", [(3, 4), (4, 5)]),    # too many indices for operand 0
    ("ij->iij", [(3, 4)]),               # repeated output index
    ("i$,j->ij", [(3, 4), (4,)]),        # bad character
])
def test_einsum_bad_subscripts(subscripts, shapes):
    """Bad subscripts: ValueError."""
    ops = [np.ones(s) for s in shapes]
    with pytest.raises(ValueError):
        np.einsum(subscripts, *ops)
    with pytest.raises(ValueError):
        ma.einsum(subscripts, *ops)
    with pytest.raises(TypeError, match="subscripts-string"):
        ma.einsum(np.ones(3), [0], np.ones(3), [0])


BAD_EINSUMS = [
    ("ij,jk->ik", [(3, 4)]),                         # fewer operands than terms
    ("i,j", [(3,), (4,), (5,)]),                     # more operands than terms
    ("ijk,jk->ik", [(3, 4), (4, 5)]),                # too many subscripts for an operand
    ("ij", [(3, 4, 5)]),                             # too few subscripts, no ellipsis
    ("ij,jk->ik", [(3, 4), (5, 6)]),                 # a label of two sizes
    ("ab,Ab->", [(2, 3), (2, 4)]),                   # sizes, with upper- and lower-case labels
    ("ii->i", [(3, 4)]),                             # a diagonal of two sizes
    ("ij->iij", [(3, 4)]),                           # repeated output label
    ("ij,jk->il", [(3, 4), (4, 5)]),                 # output label not in the inputs
    ("i$,j->ij", [(3, 4), (4,)]),                    # bad character
    ("i-j", [(3,)]),                                 # a '-' that is not '->'
    ("i.j", [(3, 4)]),                               # a stray '.'
    ("ij->i.", [(3, 4)]),                            # a stray '.' in the output
    ("...i,...i->...i", [(2, 3), (4, 3)]),           # ellipsis dimensions that do not broadcast
    ("...ij,...jk->...ik", [(2, 3, 4), (3, 4, 5)]),  # the same, with labels
    ("...i,...i->i", [(2, 3), (2, 3)]),              # ellipsis dimensions missing from the output
]


@pytest.mark.parametrize("subscripts, shapes", BAD_EINSUMS, ids=[f"{e[0]}-{len(e[1])}" for e in BAD_EINSUMS])
def test_einsum_messages_are_numpys(subscripts, shapes):
    """The engine checks the subscripts (Python keeps no parser of its
    own), with numpy.einsum's message word for word."""
    ops = [np.ones(s) for s in shapes]
    with pytest.raises(ValueError) as want:
        np.einsum(subscripts, *ops)
    with pytest.raises(ValueError) as got:
        ma.einsum(subscripts, *ops)
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize("s1, s2", [((3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)),
                                    ((2, 3, 4), (4, 5)), ((2, 1, 3, 4), (5, 4, 2)), ((4,), (2, 4, 3)),
                                    ((2, 3, 4), (4,)), ((1, 3, 4), (6, 4, 2))])
def test_matmul(s1, s2):
    """matmul and @: NumPy's 1-d promotion and batch broadcasting."""
    x, y = sample(s1, "float64", seed=40), sample(s2, "float64", seed=41)
    close(ma.matmul(x, y), np.matmul(x, y), atol=1e-12)
    close(ma.asarray(x) @ y, x @ y, atol=1e-12)
    close(x @ ma.asarray(y), x @ y, atol=1e-12)
    close(np.matmul(ma.asarray(x), y), x @ y, atol=1e-12)


def test_matmul_errors():
    with pytest.raises(ValueError, match="mismatch in its core dimension 0"):
        ma.matmul(np.ones((2, 3)), np.ones((4, 2)))
    with pytest.raises(ValueError, match="does not have enough dimensions"):
        ma.matmul(np.float64(1), np.ones(3))
    with pytest.raises(ValueError):
        ma.matmul(np.ones((2, 2, 3)), np.ones((3, 3, 2)))


@pytest.mark.parametrize("s1, s2, axes", [((3, 4, 5), (4, 5, 2), 2), ((3, 4), (4, 5), 1), ((3, 4), (5, 6), 0),
                                          ((3, 4, 5), (5, 3, 2), ([0, 2], [1, 0])), ((3, 4), (4, 3), (1, 0)),
                                          ((2, 3), (3, 2), ([-1], [0]))])
def test_tensordot(s1, s2, axes):
    x, y = sample(s1, "float64", seed=42), sample(s2, "float64", seed=43)
    close(ma.tensordot(x, y, axes), np.tensordot(x, y, axes), atol=1e-12)
    close(np.tensordot(ma.asarray(x), y, axes=axes), np.tensordot(x, y, axes), atol=1e-12)


def test_tensordot_and_dot_errors():
    with pytest.raises(ValueError, match="shape-mismatch for sum"):
        ma.tensordot(np.ones((2, 3)), np.ones((4, 2)))
    with pytest.raises(ValueError, match=r"shapes \(2,3\) and \(4,\) not aligned: 3 \(dim 1\) != 4 \(dim 0\)"):
        ma.dot(np.ones((2, 3)), np.ones(4))
    with pytest.raises(TypeError, match="at most 2 dimensions"):
        ma.dot(np.ones((2, 2, 2)), np.ones(2))


@pytest.mark.parametrize("s1, s2", [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 2)), ((2, 3), (3, 4)), ((), (3,)), ((2, 2), ())])
def test_dot(s1, s2):
    x, y = sample(s1, "float64", seed=44), sample(s2, "float64", seed=45)
    close(ma.dot(x, y), np.dot(x, y), atol=1e-12)
    close(np.dot(ma.asarray(x), y), np.dot(x, y), atol=1e-12)


# ---------------------------------------------------------------------------
# Evaluation, limits, output files


def test_results_do_not_depend_on_threads_or_limit(tmp_path):
    """Bitwise identical for n_jobs 1 and 2 and limits 1 MiB and 1 GiB (to_npy and compute)."""
    x = sample((400, 300), "float64", seed=50)
    w = sample((300,), "float32", seed=51)
    a = ma.asarray(x)
    exprs = [
        ma.sqrt(abs(a * w - 1)).sum(axis=0),
        (a - a.mean(axis=0)) / a.std(axis=0),
        ma.einsum("ij,j->i", a, w),
        a.T @ a,
        ma.tile(a[:50], (3, 1, 1)).var(axis=(0, 1)),
        np.cos(a[::-3, 7:]).mean(),
    ]
    for e in exprs:
        r1 = evaluate(e, "1MiB", 1, tmp_path)
        r2 = e.compute(memory_limit="1GiB", n_jobs=2)
        r3 = evaluate(e, "1GiB", 2, tmp_path)
        np.testing.assert_array_equal(r1, r2)
        np.testing.assert_array_equal(r1, r3)


def test_compute_too_big_raises_memory_error():
    """A result larger than the limit: MemoryError pointing to to_npy/to_zarr."""
    a = ma.ones((1000, 1000))
    with pytest.raises(MemoryError, match="to_npy"):
        a.compute(memory_limit="1MiB")
    with pytest.raises((ValueError, TypeError)):
        a.compute(memory_limit=-1)
    with pytest.raises(ValueError):
        a.compute(n_jobs=0)


def test_array_protocol():
    x = sample((3, 4), "int16", seed=52)
    a = ma.asarray(x) * 2
    got = np.asarray(a)
    np.testing.assert_array_equal(got, x * 2)
    assert got.dtype == np.int16
    assert np.asarray(a, dtype=np.float32).dtype == np.float32
    np.testing.assert_array_equal(np.array(a), x * 2)


def test_explain():
    a = ma.asarray(np.ones((100, 100))) * 2 + 1
    plan = a.explain(memory_limit="1MiB", n_jobs=2)
    assert isinstance(plan, ma.Plan)
    assert isinstance(str(plan), str) and str(plan)
    assert repr(plan) == str(plan)
    assert isinstance(plan.data, dict) and plan.data
    big = ma.ones((4000, 4000)) * 2
    assert str(big.explain(memory_limit="1MiB", output="out.npy"))
    assert str(big.explain(memory_limit="1MiB", output="out.zarr"))


@pytest.mark.parametrize("dtype", ["float64", "int32", "bool", "float16", "uint64"])
def test_to_npy_round_trip(tmp_path, dtype):
    x = sample((400, 300), dtype, seed=53)
    path = tmp_path / "out.npy"
    (ma.asarray(x).T[::2] * 1).to_npy(path, memory_limit="64KiB", n_jobs=2)
    got = np.load(path)
    want = x.T[::2] * 1
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    assert [p.name for p in tmp_path.iterdir()] == ["out.npy"]  # no temporary left
    same(ma.from_npy(str(path)) + 0, want + 0)


def test_to_npy_existing_file(tmp_path):
    """An existing output without overwrite: FileExistsError, the old file untouched."""
    path = tmp_path / "out.npy"
    np.save(path, np.arange(3))
    before = path.read_bytes()
    with pytest.raises(FileExistsError):
        ma.ones(5).to_npy(path)
    assert path.read_bytes() == before
    ma.ones(5).to_npy(str(path), overwrite=True)
    np.testing.assert_array_equal(np.load(path), np.ones(5))


def test_to_npy_larger_than_limit(tmp_path):
    """A result 8× the memory limit streams to disk; random slices equal NumPy's."""
    x = sample((64, 32, 32), "float64", seed=54)
    s = np.arange(8.0)
    expr = np.tile(ma.asarray(x), (8, 1, 1, 1)) * ma.asarray(s)[:, None, None, None]
    path = tmp_path / "big.npy"
    expr.to_npy(path, memory_limit="1MiB")
    got = np.load(path, mmap_mode="r")
    assert got.shape == (8, 64, 32, 32)
    want = np.tile(x, (8, 1, 1, 1)) * s[:, None, None, None]
    np.testing.assert_array_equal(got[3, 10:20], want[3, 10:20])
    np.testing.assert_array_equal(got[:, 5, ::7, 3], want[:, 5, ::7, 3])


def test_from_npy_lazy(tmp_path):
    """from_npy of C and Fortran order and big-endian files."""
    x = sample((20, 7), "float32", seed=55)
    np.save(tmp_path / "c.npy", x)
    np.save(tmp_path / "f.npy", np.asfortranarray(x))
    np.save(tmp_path / "be.npy", x.astype(">f4"))
    for name in ("c.npy", "f.npy", "be.npy"):
        a = ma.from_npy(tmp_path / name)
        assert a.shape == (20, 7) and a.dtype == np.float32
        same(a, x)
    with pytest.raises(OSError):
        ma.from_npy(tmp_path / "missing.npy")


def test_zarr_round_trip(tmp_path):
    """to_zarr writes a Zarr array zarr-python reads; from_zarr reads paths and zarr arrays."""
    zarr = pytest.importorskip("zarr")
    x = sample((50, 40), "float32", seed=56)
    expr = ma.asarray(x) * 2 - 1
    path = tmp_path / "out.zarr"
    expr.to_zarr(path, chunks=(16, 16), memory_limit="16KiB", n_jobs=2)
    z = zarr.open_array(str(path), mode="r")
    assert z.shape == (50, 40) and z.dtype == np.float32
    np.testing.assert_array_equal(z[...], x * 2 - 1)
    same(ma.from_zarr(str(path)), x * 2 - 1)
    same(ma.from_zarr(z)[::3], (x * 2 - 1)[::3])
    same(ma.asarray(z), x * 2 - 1)
    with pytest.raises(FileExistsError):
        expr.to_zarr(path)
    np.testing.assert_array_equal(zarr.open_array(str(path), mode="r")[...], x * 2 - 1)
    (expr + 1).to_zarr(path, overwrite=True)
    np.testing.assert_array_equal(zarr.open_array(str(path), mode="r")[...], x * 2 - 1 + 1)
    with pytest.raises(ValueError, match="chunks"):
        expr.to_zarr(tmp_path / "bad.zarr", chunks=(4,))
    memory = zarr.create_array(zarr.storage.MemoryStore(), shape=(3,), dtype="f8")
    with pytest.raises(TypeError, match="local directory"):
        ma.from_zarr(memory)


def test_to_zarr_default_chunks_are_sized_for_zarr(tmp_path):
    """T3-08: to_zarr without chunks at 64 MiB of tile(data * scales, (5, 1, 1, 1)),
    data (200, 76, 76) float64 (46 MB): a few dozen chunks of whole 76 x 76 planes
    (not 2.9 million chunks of two elements), NumPy's values, in seconds; to_npy alike."""
    zarr = pytest.importorskip("zarr")
    rng = np.random.default_rng(8)
    data = rng.standard_normal((200, 76, 76))
    scales = rng.uniform(0.5, 2.0, 200)
    x = ma.tile(ma.asarray(data) * scales[:, None, None], (5, 1, 1, 1))
    want = np.tile(data * scales[:, None, None], (5, 1, 1, 1))
    path = tmp_path / "t.zarr"
    start = time.perf_counter()
    x.to_zarr(path, memory_limit="64MiB")
    assert time.perf_counter() - start < 20
    z = zarr.open_array(str(path), mode="r")
    files = sum(len(names) for _, _, names in os.walk(path))
    assert z.chunks[2:] == (76, 76) and 64 << 10 <= np.prod(z.chunks) * 8 <= 8 << 20, z.chunks
    assert files <= 60, files
    np.testing.assert_array_equal(z[...], want)
    x.to_npy(tmp_path / "t.npy", memory_limit="64MiB")
    np.testing.assert_array_equal(np.load(tmp_path / "t.npy"), want)
    # The rule at other limits: at least 64 KiB, at most 8 MiB, never more than 1/16 of the limit.
    for limit in (8 << 20, 256 << 20, 8 << 30):
        chunks = x._expr.default_chunks(limit)
        assert 64 << 10 <= np.prod(chunks) * 8 <= min(8 << 20, limit // 16), (limit, chunks)
    assert ma.ones((3, 4))._expr.default_chunks(8 << 20) == [3, 4]  # a small array is one chunk


def test_reported_case_small():
    """The issue's case (smaller): sum over N of tile(a) * s equals the closed form N * s * a."""
    rng = np.random.RandomState(0)
    data = rng.randn(200, 76, 76)
    scales = np.arange(200.0)
    a, s = ma.asarray(data), ma.asarray(scales)
    N = 500
    got = np.sum(np.tile(a, (N, 1, 1, 1)) * s[:, None, None], axis=0).compute(memory_limit="64MiB")
    np.testing.assert_allclose(got, N * scales[:, None, None] * data, rtol=1e-12)


def test_memfit_array_is_exposed():
    import memfit.array as m2

    assert memfit.array is m2 is ma
    assert ma.newaxis is None
    for name in ma.__all__:
        assert hasattr(ma, name), name


# ---------------------------------------------------------------------------
# Expressions feed the estimators and kernels


@pytest.mark.parametrize("spill", [False, True])
def test_estimators_accept_memfit_arrays(blobs, tmp_path, monkeypatch, spill):
    """KMeans, GaussianMixture and the kernels fit a standardised memfit
    expression as they fit the same ndarray; a result too big for memory is
    streamed to a temporary .npy that is deleted afterwards."""
    import tempfile

    import memfit._options as options

    X, _ = blobs
    mu, sd = X.mean(axis=0), X.std(axis=0)
    want = (X - mu) / sd
    if spill:
        monkeypatch.setattr(options, "check_memory_limit", lambda limit: 1024)
        monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    expr = (ma.asarray(X) - mu) / sd
    km = memfit.KMeans(n_clusters=4, random_state=0, n_init=1).fit(expr)
    ref = memfit.KMeans(n_clusters=4, random_state=0, n_init=1).fit(want)
    np.testing.assert_allclose(km.cluster_centers_, ref.cluster_centers_, rtol=1e-12)
    np.testing.assert_array_equal(km.predict(expr), ref.predict(want))
    gm = memfit.GaussianMixture(n_components=4, random_state=0).fit(expr)
    gref = memfit.GaussianMixture(n_components=4, random_state=0).fit(want)
    np.testing.assert_allclose(gm.means_, gref.means_, rtol=1e-10)
    np.testing.assert_allclose(memfit.weighted_scatter(expr), memfit.weighted_scatter(want), rtol=1e-12)
    if spill:
        assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match="2D"):
        memfit.KMeans(n_clusters=2).fit(ma.asarray(X[:, 0]))
