"""flip, fliplr, flipud, roll, diff, take, nanargmin, nanargmax, real, imag
and ``.mT`` of memfit arrays against NumPy, bit for bit, errors included
(helper 134 found them refused with a TypeError)."""

import numpy as np
import pytest

import memfit.array as ma

RNG = np.random.default_rng(0)
ARRAYS = {
    "float64": RNG.standard_normal((4, 5, 3)),
    "bool": RNG.integers(0, 2, (6, 4)).astype(bool),
    "uint8": RNG.integers(0, 255, (7, 3)).astype(np.uint8),
}


def same(got, want):
    got = got.compute() if isinstance(got, ma.Array) else np.asarray(got)
    want = np.asarray(want)
    assert (got.dtype, got.shape) == (want.dtype, want.shape)
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("name", sorted(ARRAYS))
def test_index_maps_are_numpys(name):
    x = ARRAYS[name]
    a = ma.asarray(x)
    for axis in [None, 0, -1, (0, 1), ()]:
        same(np.flip(a, axis), np.flip(x, axis))
    same(np.fliplr(a), np.fliplr(x))
    same(np.flipud(a), np.flipud(x))
    for shift, axis in [(1, None), (-3, None), (2, 0), (7, 1), ((1, 2), (0, 1)), ((1, 1), (0, 0)), (0, 0), (-1, -1)]:
        same(np.roll(a, shift, axis), np.roll(x, shift, axis))
    for n in (0, 1, 2, 3):
        for axis in (0, -1):
            same(np.diff(a, n, axis), np.diff(x, n, axis))
    same(np.diff(a, prepend=0), np.diff(x, prepend=0))
    same(np.diff(a, axis=0, append=x[:1]), np.diff(x, axis=0, append=x[:1]))
    for indices, axis in [([0, 2, -1], 0), (np.array([[1, 0], [2, 2]]), 1), (3, None), ([5, 1], None), (1, 0),
                          ([1.5], None), (np.array([True, False]), 0)]:
        same(np.take(a, indices, axis), np.take(x, indices, axis))
    for mode in ("wrap", "clip"):
        same(np.take(a, [-9, 20, 1], 0, mode=mode), np.take(x, [-9, 20, 1], 0, mode=mode))
    same(a.mT, x.mT)
    same(np.real(a), np.real(x))
    same(np.imag(a), np.imag(x))
    same(a.imag, x.imag)
    assert a.real is a


def test_nanargmin_and_nanargmax_are_numpys():
    x = ARRAYS["float64"].copy()
    x[0, 1, :] = np.nan
    x[2, :, 1] = np.nan
    a = ma.asarray(x)
    for name in ("nanargmin", "nanargmax"):
        f, g = getattr(np, name), getattr(ma, name)
        same(f(a), f(x))
        same(g(a, 0, keepdims=True), f(x, 0, keepdims=True))
        for axis in (1, -1):
            with pytest.raises(ValueError, match="All-NaN slice encountered"):
                f(x, axis)
            with pytest.raises(ValueError, match="All-NaN slice encountered"):
                f(a, axis)
        u = ARRAYS["uint8"]
        same(f(ma.asarray(u), 0), f(u, 0))


@pytest.mark.parametrize("call", [
    lambda m: np.diff(m, -1),
    lambda m: np.diff(m[0, 0, 0]),
    lambda m: np.fliplr(m[0, 0]),
    lambda m: np.flipud(m[0, 0, 0]),
    lambda m: np.take(m, [99], 0),
    lambda m: np.take(m, np.array([1.5])),
    lambda m: np.take(m, [1], 0, mode="nearest"),
    lambda m: np.roll(m, 1, 5),
    lambda m: np.roll(m, (1, 2, 3), (0, 1)),
    lambda m: m[0, 0].mT,
])
def test_misuse_gets_numpys_exception(call):
    x = ARRAYS["float64"]
    with pytest.raises(Exception) as numpy_error:
        call(x)
    with pytest.raises(type(numpy_error.value)) as ours:
        out = call(ma.asarray(x))
        out.compute()
    assert type(ours.value) is type(numpy_error.value)


def test_round_is_numpys_to_the_bit():
    """round/around (NumPy's algorithm: scaled by NumPy's power of ten in
    the array's dtype, rint, scaled back; integers through float64)."""
    rng = np.random.default_rng(1)
    vals = np.concatenate([rng.standard_normal(500) * 10.0 ** rng.integers(-5, 8, 500),
                           [0.5, 1.5, 2.5, -0.5, 0.15, 1.005, 2.675, np.inf, np.nan, 1e300, -0.0, 5e-324]])
    with np.errstate(all="ignore"):
        for dt in (np.float64, np.float32, np.float16):
            v = vals.astype(dt)
            for d in (0, 1, 2, -1, -2, 10, 25, 400, -400):
                same(ma.round(ma.asarray(v), d), np.round(v, d))
        for dt in (np.int8, np.uint8, np.int64, np.uint64):
            info = np.iinfo(dt)
            v = rng.integers(info.min, info.max, 300, dtype=dt, endpoint=True)
            for d in (0, 2, -1, -5, -30):
                same(np.around(ma.asarray(v), d), np.around(v, d))
    a = ma.asarray(vals)
    same(a.round(1), vals.round(1))
    o = np.empty_like(vals)
    with np.errstate(all="ignore"):
        assert np.round(a, 2, out=o) is o
        assert o.tobytes() == np.round(vals, 2).tobytes()
    with pytest.raises(TypeError):
        np.round(ma.asarray(np.array([True, False])))
