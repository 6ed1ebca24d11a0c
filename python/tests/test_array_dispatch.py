"""NumPy code on memfit arrays: __array_ufunc__ and __array_function__ return
lazy memfit arrays equal to NumPy's results; what is not supported raises
TypeError naming it."""

import numpy as np
import pytest

import memfit.array as ma

AxisError = np.exceptions.AxisError


def same(got, want):
    assert isinstance(got, ma.Array), type(got)
    want = np.asarray(want)
    assert got.shape == want.shape
    out = got.compute()
    assert out.dtype == want.dtype, (out.dtype, want.dtype)
    np.testing.assert_array_equal(out, want)


def close(got, want, rtol=1e-12):
    """Computed memfit result equals NumPy's to rtol (NaN == NaN), same dtype and shape."""
    assert isinstance(got, ma.Array), type(got)
    want = np.asarray(want)
    out = got.compute()
    assert out.dtype == want.dtype and out.shape == want.shape
    np.testing.assert_allclose(out, want, rtol=rtol, atol=1e-13)


@pytest.fixture
def x():
    return np.random.RandomState(0).randn(3, 4, 5)


@pytest.fixture
def a(x):
    return ma.asarray(x)


UFUNCS = [np.add, np.subtract, np.multiply, np.divide, np.true_divide, np.floor_divide, np.remainder, np.mod,
          np.power, np.minimum, np.maximum, np.equal, np.not_equal, np.less, np.less_equal, np.greater,
          np.greater_equal, np.logical_and, np.logical_or, np.logical_xor]


@pytest.mark.parametrize("ufunc", UFUNCS, ids=lambda u: u.__name__)
def test_binary_ufuncs(ufunc, x, a):
    """np.<ufunc>(memfit, ndarray | scalar) is lazy and equals NumPy."""
    y = np.abs(x[0]) + 0.5
    check = close if ufunc is np.power else same  # pow is libm's, to 1 ulp
    with np.errstate(all="ignore"):
        check(ufunc(a, y), ufunc(x, y))
        check(ufunc(y, a), ufunc(y, x))
        check(ufunc(a, 2.0), ufunc(x, 2.0))
        check(ufunc(np.float32(3), a), ufunc(np.float32(3), x))


@pytest.mark.parametrize("ufunc", [np.negative, np.positive, np.absolute, np.abs, np.sqrt, np.exp, np.log, np.sin,
                                   np.cos, np.square, np.isnan, np.isfinite, np.sign, np.floor, np.ceil, np.trunc,
                                   np.rint, np.logical_not, np.reciprocal, np.log2, np.log10, np.tan, np.isinf],
                         ids=lambda u: u.__name__)
def test_unary_ufuncs(ufunc, x, a):
    with np.errstate(all="ignore"):
        want = ufunc(np.abs(x))
    got = ufunc(abs(a))
    assert isinstance(got, ma.Array)
    np.testing.assert_array_max_ulp(got.compute(), want, maxulp=4) if want.dtype.kind == "f" else same(got, want)


def test_integer_ufuncs():
    i = np.arange(-6, 6, dtype=np.int32).reshape(3, 4)
    m = ma.asarray(i)
    same(np.bitwise_and(m, 3), i & 3)
    same(np.bitwise_or(m, i), i | i)
    same(np.bitwise_xor(3, m), 3 ^ i)
    same(np.invert(m), ~i)
    same(np.bitwise_not(m), ~i)


def test_ndarray_operators_dispatch(x, a):
    """ndarray OP memfit goes through __array_ufunc__ and stays lazy."""
    y = x[0] + 1
    for got, want in [(y + a, y + x), (y * a, y * x), (y - a, y - x), (y / a, y / x), (y ** a, y ** x),
                      (y < a, y < x), (y == a, y == x), (y.T @ a, y.T @ x)]:
        assert isinstance(got, ma.Array)
        close(got, want)


@pytest.mark.parametrize("ufunc, name", [(np.add, "sum"), (np.multiply, "prod"), (np.minimum, "min"),
                                         (np.maximum, "max"), (np.logical_and, "all"), (np.logical_or, "any")])
@pytest.mark.parametrize("kwargs", [{}, {"axis": 1}, {"axis": None}, {"axis": (0, 2), "keepdims": True}, {"axis": -1}])
def test_ufunc_reduce(ufunc, name, kwargs, x, a):
    """ufunc.reduce maps to the reductions (default axis 0, as NumPy)."""
    close(ufunc.reduce(a, **kwargs), ufunc.reduce(x, **kwargs))


def test_ufunc_reduce_dtype(x, a):
    i = (x * 10).astype(np.int16)
    same(np.add.reduce(ma.asarray(i), axis=0, dtype=np.int64), np.add.reduce(i, axis=0, dtype=np.int64))
    with pytest.raises(AxisError):
        np.add.reduce(a, axis=3)


@pytest.mark.parametrize("method", ["accumulate", "outer", "reduceat", "at"])
def test_unsupported_ufunc_methods(method, a):
    with pytest.raises(TypeError, match=f"numpy.add.{method}"):
        if method == "outer":
            np.add.outer(a, a)
        elif method == "reduceat":
            np.add.reduceat(a, [0, 1])
        elif method == "at":
            np.add.at(a, [0], 1)
        else:
            np.add.accumulate(a)


def test_unsupported_ufuncs_and_out(x, a):
    with pytest.raises(TypeError, match="numpy.arctan2"):
        np.arctan2(a, a)
    with pytest.raises(TypeError, match="numpy.gradient"):
        np.gradient(a)
    with pytest.raises(TypeError, match="out="):
        np.add(a, 1, out=a)
    with pytest.raises(TypeError, match="out="):
        np.sum(a, out=a)
    total = np.empty(())
    assert np.sum(a, out=total) is total and np.isclose(total, np.sum(x), rtol=1e-12)
    with pytest.raises(TypeError, match="numpy.linalg.norm"):
        np.linalg.norm(a)
    with pytest.raises(TypeError, match="numpy.sort"):
        np.sort(a)
    with pytest.raises(TypeError, match="numpy.cross"):
        np.cross(a, a)


REDUCTIONS = [np.sum, np.mean, np.var, np.std, np.min, np.max, np.amin, np.amax, np.prod, np.any, np.all]


@pytest.mark.parametrize("func", REDUCTIONS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("kwargs", [{}, {"axis": 0}, {"axis": (1, 2)}, {"axis": -1, "keepdims": True}])
def test_reduction_functions(func, kwargs, x, a):
    close(func(a, **kwargs), func(x, **kwargs))


@pytest.mark.parametrize("func", [np.argmin, np.argmax], ids=lambda f: f.__name__)
@pytest.mark.parametrize("kwargs", [{}, {"axis": 0}, {"axis": -1}, {"axis": 1, "keepdims": True}, {"keepdims": True}])
def test_arg_reductions(func, kwargs, x, a):
    same(func(a, **kwargs), func(x, **kwargs))


def test_var_ddof_dispatch(x, a):
    close(np.var(a, axis=1, ddof=1), np.var(x, axis=1, ddof=1))
    close(np.std(a, ddof=1), np.std(x, ddof=1))
    close(np.mean(a, axis=0, dtype=np.float32), np.mean(x, axis=0, dtype=np.float32), rtol=1e-6)


def test_shape_functions(x, a):
    same(np.tile(a, (2, 1, 1, 1)), np.tile(x, (2, 1, 1, 1)))
    same(np.repeat(a, 2, axis=1), np.repeat(x, 2, axis=1))
    same(np.reshape(a, (4, -1)), np.reshape(x, (4, -1)))
    same(np.reshape(a, shape=(60,)), np.reshape(x, (60,)))
    same(np.transpose(a), np.transpose(x))
    same(np.transpose(a, (1, 0, 2)), np.transpose(x, (1, 0, 2)))
    same(np.swapaxes(a, 0, 2), np.swapaxes(x, 0, 2))
    same(np.moveaxis(a, 0, -1), np.moveaxis(x, 0, -1))
    same(np.expand_dims(a, 1), np.expand_dims(x, 1))
    same(np.squeeze(a[:, :1]), np.squeeze(x[:, :1]))
    same(np.broadcast_to(a[0, 0], (2, 5)), np.broadcast_to(x[0, 0], (2, 5)))
    got = np.broadcast_arrays(a, x[0, :, :1])
    want = np.broadcast_arrays(x, x[0, :, :1])
    for g, w in zip(got, want):
        same(g, w)
    same(np.stack([a, x]), np.stack([x, x]))
    same(np.stack([x, a], axis=-1), np.stack([x, x], axis=-1))
    same(np.concatenate([a, x], axis=1), np.concatenate([x, x], axis=1))
    same(np.concatenate((x, a), axis=None), np.concatenate((x, x), axis=None))
    same(np.where(a > 0, a, 0.0), np.where(x > 0, x, 0.0))
    same(np.where(x > 0, a, x), np.where(x > 0, x, x))
    same(np.clip(a, -0.5, 0.5), np.clip(x, -0.5, 0.5))
    same(np.ravel(a), np.ravel(x))
    same(np.zeros_like(a), np.zeros_like(x))
    same(np.ones_like(a, dtype=np.int8), np.ones_like(x, dtype=np.int8))
    same(np.full_like(a, 3), np.full_like(x, 3))
    assert np.shape(a) == x.shape and np.ndim(a) == 3 and np.size(a) == 60 and np.size(a, 1) == 4


def test_contractions(x, a):
    y = np.random.RandomState(1).randn(5, 2)
    close(np.einsum("ijk,kl->ijl", a, y), np.einsum("ijk,kl->ijl", x, y))
    close(np.einsum("ijk->k", a), np.einsum("ijk->k", x))
    close(np.einsum("...k,kl", a, y, optimize=True), np.einsum("...k,kl", x, y))
    close(np.matmul(a, y), np.matmul(x, y))
    close(np.tensordot(a, y, axes=1), np.tensordot(x, y, axes=1))
    close(np.tensordot(a, x, axes=([0, 2], [0, 2])), np.tensordot(x, x, axes=([0, 2], [0, 2])))
    close(np.dot(a[0], y), np.dot(x[0], y))
    close(np.dot(a[0, 0], x[0, 0]), np.dot(x[0, 0], x[0, 0]))
    close(np.outer(a[0, 0], y[:, 0]), np.outer(x[0, 0], y[:, 0]))
    close(np.inner(a, x[0, 0]), np.inner(x, x[0, 0]))


def test_dtype_functions(a):
    assert np.result_type(a, np.float32) == np.float64
    assert np.result_type(ma.asarray(np.ones(2, np.float32)), 1.0) == np.float32
    assert np.result_type(ma.asarray(np.ones(2, np.uint8)), ma.asarray(np.ones(2, np.int8))) == np.int16
    assert ma.result_type(a, np.int8) == np.float64
    assert np.can_cast(ma.asarray(np.ones(2, np.float32)), np.float64)
    assert not ma.can_cast(a, np.float32)
    assert ma.can_cast(ma.asarray(np.ones(2, np.int8)), np.int16, "safe")


def test_asarray_computes(x, a):
    got = np.asarray(np.sqrt(abs(a)) + 1)
    assert type(got) is np.ndarray
    np.testing.assert_array_equal(got, np.sqrt(abs(x)) + 1)
    with pytest.raises(ValueError, match="copy"):
        np.asarray(a, copy=False)


def test_asarray_too_big_raises_memory_error():
    """np.asarray of a result larger than the default limit: MemoryError naming to_npy."""
    huge = ma.zeros((1 << 25, 1 << 25), dtype=np.uint8)  # 1 PiB
    with pytest.raises(MemoryError, match="to_npy"):
        np.asarray(huge)


def test_reported_case_through_numpy():
    """The issue's expression, written with NumPy's functions, stays lazy and equals the closed form."""
    rng = np.random.RandomState(1)
    data = rng.randn(50, 8, 8)
    scales = np.arange(50.0)
    a, s = ma.asarray(data), ma.asarray(scales)
    y = np.sum(np.tile(a, (20, 1, 1, 1)) * s[:, None, None], axis=0)
    assert isinstance(y, ma.Array) and y.shape == (50, 8, 8)
    np.testing.assert_allclose(np.asarray(y), 20 * scales[:, None, None] * data, rtol=1e-12)
