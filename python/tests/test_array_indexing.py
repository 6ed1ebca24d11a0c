"""Integer-array and boolean indexing and ``out=`` on memfit arrays, against
NumPy (issue 23, item 7)."""

import re

import numpy as np
import pytest

import memfit.array as ma

X = np.arange(60.0).reshape(3, 4, 5)

KEYS = [
    [2, 0, -1],
    (slice(None), [1, 3]),
    (Ellipsis, [4, 0, 0]),
    (1, slice(None), [0, 2]),
    (slice(None), 1, [0, 2]),
    (0, Ellipsis, [1]),
    ([0, 1], slice(None), 2),
    (None, slice(None), [3]),
    np.array([[0, 1], [2, 2]]),
    (slice(None), np.array([[0, 1], [2, 3]]), slice(1, 4)),
    (slice(1, None), [0], slice(None, None, 2)),
    (1, None, slice(None), np.array([[0], [4]])),
    np.array([True, False, True]),
    (slice(None), np.array([True, False, True, True])),
    np.ones((3, 4), bool),
    (Ellipsis, np.array([True, False, True, False, True])),
    np.array([], dtype=np.intp),
]


@pytest.mark.parametrize("key", KEYS, ids=[str(i) for i in range(len(KEYS))])
@pytest.mark.parametrize("limit,jobs", [("1MiB", 1), ("64MiB", 2)])
def test_advanced_indexing_matches_numpy(key, limit, jobs):
    want = X[key]
    got = ma.asarray(X)[key]
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.compute(memory_limit=limit, n_jobs=jobs), want)
    # Reductions over the selected axes, as NumPy.
    np.testing.assert_allclose(got.sum(axis=0).compute(), want.sum(axis=0), rtol=1e-12)


def test_a_lazy_mask_is_computed_first(tmp_path):
    np.save(tmp_path / "x.npy", X)
    x = ma.from_npy(tmp_path / "x.npy")
    rows = x[x[:, 0, 0] > 10]
    np.testing.assert_array_equal(rows.compute(), X[X[:, 0, 0] > 10])
    np.testing.assert_array_equal(x[:, :, 2][x[:, :, 2] > 30].compute(), X[:, :, 2][X[:, :, 2] > 30])


@pytest.mark.parametrize(
    "key",
    [[3], (slice(None), [-5]), np.array([True, False]), [1.5], np.array([0.5])],
)
def test_bad_indices_raise_numpys_errors(key):
    with pytest.raises(IndexError) as numpy_error:
        X[key]
    with pytest.raises(IndexError) as ours:
        ma.asarray(X)[key]
    assert str(ours.value) == str(numpy_error.value)


@pytest.mark.parametrize("key", [2**63, np.uint64(2**63), (1, 2**63), -(2**63) - 1, 2**64])
def test_integers_beyond_int64_raise_numpys_errors(key):
    """NumPy's OverflowError (converting to a C long) or IndexError (not an
    integer index), where memfit said out of bounds (helper 103)."""
    with pytest.raises((IndexError, OverflowError)) as numpy_error:
        X[key]
    with pytest.raises(numpy_error.type) as ours:
        ma.asarray(X)[key]
    assert str(ours.value) == str(numpy_error.value)


def test_lazy_float_indices_raise_as_numpys():
    with pytest.raises(IndexError, match="integer \\(or boolean\\) type"):
        ma.asarray(X)[ma.asarray(np.array([1.7, 0.5]))]
    with pytest.raises(ValueError, match="nonzero on 0d"):
        np.nonzero(ma.asarray(np.float64(1.0)))


def test_two_index_arrays_are_refused():
    with pytest.raises(TypeError, match="one integer or boolean array"):
        ma.asarray(X)[[0, 1], [1, 2]]
    # A boolean scalar beside an index array is a second one for NumPy
    # (broadcast with it), not a new axis (helper 103: wrong values).
    a = np.arange(24.0).reshape(2, 3, 4)
    for key in [(True, slice(None), [1]), ([1], True), (slice(None), [0, 2], np.array(True)), (False, [0])]:
        with pytest.raises(TypeError, match="one integer or boolean array"):
            ma.asarray(a)[key]
    for key in [(True,), (True, 1), (np.array(False), slice(None)), (slice(None), True, None)]:
        assert ma.asarray(a)[key].compute().tobytes() == a[key].tobytes()


def test_out_for_ufuncs_and_reductions_writes_numpy_arrays():
    a = ma.asarray(X)
    o = np.empty_like(X)
    assert np.add(a, 1, out=o) is o
    np.testing.assert_array_equal(o, X + 1)
    o2 = np.empty_like(X)
    assert ma.multiply(a, 2, out=(o2,)) is o2
    np.testing.assert_array_equal(o2, X * 2)
    s = np.empty((4, 5))
    assert np.sum(a, axis=0, out=s) is s and a.mean(axis=0, out=s) is s
    np.testing.assert_array_equal(s, X.mean(axis=0))
    i = np.empty((3, 5), dtype=np.int64)
    ma.argmax(a, axis=1, out=i)
    np.testing.assert_array_equal(i, X.argmax(axis=1))
    b = np.empty((4,))
    np.add.reduce(a[:, :, 0], axis=0, out=b)
    np.testing.assert_array_equal(b, X[:, :, 0].sum(axis=0))
    full = np.empty((2, 3, 4, 5))
    np.add(a, 1, out=full)  # the result broadcasts to out, as NumPy's
    np.testing.assert_array_equal(full, np.broadcast_to(X + 1, full.shape))
    with pytest.raises(TypeError) as numpy_error:
        np.add(X, 1.5, out=np.empty(X.shape, dtype=np.int64))
    with pytest.raises(TypeError) as ours:
        np.add(a, 1.5, out=np.empty(X.shape, dtype=np.int64))
    assert type(ours.value) is type(numpy_error.value) and str(ours.value) == str(numpy_error.value)
    with pytest.raises(TypeError, match="Cannot cast array data from dtype\\('float64'\\) to dtype\\('int64'\\)"):
        a.argmax(axis=0, out=np.empty((4, 5)))
    with pytest.raises(ValueError, match="wrong shape"):
        np.sum(a, axis=0, out=np.empty(5))
    with pytest.raises(TypeError):
        np.add(a, 1, out=a)


def test_dot_into_out_takes_numpys_arrays_only():
    """np.dot's ``out`` must have the result's dtype and shape and be
    C-contiguous (NumPy's ValueError otherwise, also for the float32 ``out``
    memfit cast into before)."""
    a, b = np.arange(12.0).reshape(3, 4), np.arange(20.0).reshape(4, 5)
    o = np.empty((3, 5))
    assert np.dot(ma.asarray(a), b, out=o) is o
    np.testing.assert_array_equal(o, a @ b)
    v = np.empty(())
    ma.dot(ma.asarray(a[0]), a[1], out=v)
    assert v == a[0] @ a[1]
    for bad in [np.empty((3, 5), np.float32), np.empty((5, 3)).T, np.empty((1, 3, 5)), np.empty((3, 5), np.int64)]:
        for x in (a, ma.asarray(a)):
            with pytest.raises(ValueError, match=re.escape("output array is not acceptable")):
                np.dot(x, b, out=bad)
    with pytest.raises(TypeError, match="'out' must be an array"):
        np.dot(ma.asarray(a), b, out=(o,))


def test_where_with_one_argument_and_nonzero_are_numpys():
    x = np.array([[0, 3, 0], [4, 0, 5]])
    a = ma.asarray(x)
    for got, want in [(np.where(a), np.where(x)), (np.nonzero(a), np.nonzero(x)), (ma.where(a > 2), np.where(x > 2))]:
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(np.flatnonzero(a), np.flatnonzero(x))
    np.testing.assert_array_equal(np.argwhere(a), np.argwhere(x))
    assert int(np.count_nonzero(a)) == np.count_nonzero(x)
    np.testing.assert_array_equal(np.count_nonzero(a, axis=0).compute(), np.count_nonzero(x, axis=0))
    np.testing.assert_array_equal(a[:, np.nonzero(a[0])[0]].compute(), x[:, np.nonzero(x[0])[0]])
    with pytest.raises(ValueError, match="either both or neither"):
        ma.where(a, 1)


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_an_indexed_axis_sliced_to_nothing_is_empty_as_numpys(n_jobs):
    """An empty integer index or an all-False mask, then a slice or a
    reversal, and an indexed axis sliced to nothing: NumPy's empty results
    (the engine panicked looking up an index of an empty axis; helper 123)."""
    x = np.arange(24.0).reshape(2, 3, 4)
    a = ma.asarray(x)
    empty = np.array([], dtype=np.intp)
    cases = [
        (lambda v: v[:, [2, 0]][:, 2:]),
        (lambda v: v[:, empty][::-1]),
        (lambda v: v[:, empty][:, ::-1]),
        (lambda v: v[:, np.zeros(3, bool)][::-1, ::-1]),
        (lambda v: v[:, [2, 0]][:, 2:].sum(axis=1)),
        (lambda v: v.reshape(-1)[empty][::-1]),
        (lambda v: v[[1, 0]][2:, ::-1].T),
    ]
    for case in cases:
        want = case(x)
        got = case(a).compute(n_jobs=n_jobs)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_index_and_shape_refusals_are_numpys():
    """An empty float array is no index (an empty list is); a negative
    broadcast shape is named as NumPy names it."""
    x = np.arange(6.0)
    a = ma.asarray(x)
    for index in [np.array([]), np.array([], dtype=np.float32).reshape(0, 1)]:
        with pytest.raises(IndexError) as want:
            x[index]
        with pytest.raises(IndexError) as got:
            a[index]
        assert str(got.value) == str(want.value)
    np.testing.assert_array_equal(a[[]].compute(), x[[]])
    with pytest.raises(ValueError) as want:
        np.broadcast_to(x, (-1, 6))
    with pytest.raises(ValueError) as got:
        ma.broadcast_to(a, (-1, 6))
    assert str(got.value) == str(want.value)


def test_out_of_another_float_dtype_reduces_as_numpy(tmp_path):
    """A reduction into a float ``out`` the input does not cast to safely
    runs in the input's dtype and is cast at the end (helper 140: it ran in
    out's dtype); an ``out`` mapping the file read through np.frombuffer is
    seen as overlapping; an ``out`` of more axes is written broadcast; a
    read-only ``out`` is NumPy's ValueError."""
    import mmap

    rng = np.random.default_rng(0)
    for a in (rng.standard_normal((50, 300)), np.array([[2**24 + 1, 2**24 + 1, 1, 1]] * 3, dtype=np.int64)):
        for name in ("sum", "prod", "mean"):
            want, got = np.empty(len(a), np.float32), np.empty(len(a), np.float32)
            getattr(np, name)(a, axis=1, out=want)
            getattr(np, name)(ma.asarray(a), axis=1, out=got)
            assert got.tobytes() == want.tobytes(), name
    x = rng.standard_normal((2000, 50))
    np.save(tmp_path / "s.npy", x)
    with open(tmp_path / "s.npy", "r+b") as f:
        m = mmap.mmap(f.fileno(), 0)
        out = np.frombuffer(m, dtype=np.float64, offset=128).reshape(2000, 50)
        lazy = ma.from_npy(tmp_path / "s.npy")
        np.add(lazy, lazy[::-1], out=out)
        del out
        m.flush()
        m.close()
    np.testing.assert_array_equal(np.load(tmp_path / "s.npy"), x + x[::-1])
    wide = np.empty((2, 2000, 50))
    np.multiply(ma.asarray(x), 2.0, out=wide)
    np.testing.assert_array_equal(wide, np.broadcast_to(x * 2.0, wide.shape))
    with pytest.raises(ValueError, match="output array is read-only"):
        np.add(ma.asarray(x), 1, out=np.broadcast_to(np.empty(50), x.shape))


def test_ufunc_casting_with_out_is_numpys():
    """``casting=`` beside ``out=`` (helper 140: refused): NumPy's rule and
    its errors."""
    x = np.array([1.2, 2.7, -3.5])
    for casting in ("unsafe", "same_kind", "no", "bogus"):
        got = []
        for arr in (x, ma.asarray(x)):
            o = np.zeros(3, np.int64)
            try:
                np.add(arr, 1.5, out=o, casting=casting)
                got.append(o.tolist())
            except (TypeError, ValueError) as e:
                got.append((type(e).__name__, str(e)))
        assert got[0] == got[1], got
