"""bincount, histogram and unique of lazy arrays (issue 23, item 7): one
streamed pass in row blocks within the memory limit, NumPy's results and
messages, the same bits for any limit and thread count."""

import re

import numpy as np
import pytest

import memfit.array as ma

LIMITS = ["2MiB", "64MiB"]
JOBS = [1, 2]


def everywhere(f):
    """f(memory_limit, n_jobs) at two limits and two thread counts, bitwise equal."""
    first = f(LIMITS[0], JOBS[0])
    for limit in LIMITS:
        for jobs in JOBS:
            again = f(limit, jobs)
            for a, b in zip(first if isinstance(first, tuple) else (first,), again if isinstance(again, tuple) else (again,)):
                np.testing.assert_array_equal(a, b)
    return first


@pytest.fixture(scope="module")
def ints():
    return np.random.default_rng(0).integers(0, 300, 500_000)


def test_bincount_matches_numpy(ints):
    a = ma.asarray(ints)
    got = everywhere(lambda m, j: ma.bincount(a, memory_limit=m, n_jobs=j))
    np.testing.assert_array_equal(got, np.bincount(ints))
    assert got.dtype == np.intp
    np.testing.assert_array_equal(np.bincount(a, minlength=400), np.bincount(ints, minlength=400))
    # Of an expression: its values computed block by block.
    np.testing.assert_array_equal(np.bincount(a // 3 + 1), np.bincount(ints // 3 + 1))
    np.testing.assert_array_equal(np.bincount(ma.asarray(ints > 100)), np.bincount(ints > 100))


def test_weighted_bincount_is_the_same_for_any_limit(ints):
    w = np.random.default_rng(1).random(ints.size)
    got = everywhere(lambda m, j: ma.bincount(ma.asarray(ints), weights=ma.asarray(w) * 2, memory_limit=m, n_jobs=j))
    assert got.dtype == np.float64
    # Summed in order into the result: NumPy's bits (each piece's sums were
    # added, 1e-12 apart; helper 116).
    np.testing.assert_array_equal(got, np.bincount(ints, weights=w * 2))


def test_bincount_of_a_large_maximum_holds_one_result():
    """Each piece added into one result in place: a piece with a large
    value allocated a result-sized array per piece (20 s and 1.2 GB for 2M
    values up to 5e7; NumPy 0.2 s, 436 MB)."""
    x = np.random.default_rng(0).integers(0, 2_000, 300_000)
    x[[5, 200_000]] = [4_000_000, 3_000_000]
    got = everywhere(lambda m, j: ma.bincount(ma.asarray(x), minlength=10, memory_limit=m, n_jobs=j))
    np.testing.assert_array_equal(got, np.bincount(x))
    assert ma.bincount(ma.asarray(x[:10]), minlength=5_000_000).shape == (5_000_000,)


def test_bincount_errors_are_numpys():
    for bad, kind, message in [
        (np.array(5), ValueError, "object of too small depth for desired array"),
        (np.ones((2, 2), int), ValueError, "object too deep for desired array"),
        (np.ones(3), TypeError, "Cannot cast array data from dtype('float64') to dtype('int64')"),
        (np.array([1, -1, 2]), ValueError, "'list' argument must have no negative elements"),
    ]:
        with pytest.raises(kind, match=message.replace("(", r"\(").replace(")", r"\)")):
            ma.bincount(ma.asarray(bad))
    with pytest.raises(ValueError, match="'minlength' must not be negative"):
        ma.bincount(ma.asarray(np.arange(3)), minlength=-1)
    with pytest.raises(ValueError, match="The weights and list don't have the same length."):
        ma.bincount(ma.asarray(np.arange(3)), weights=np.ones(2))
    empty = ma.bincount(ma.asarray(np.zeros(0, int)), minlength=3)
    np.testing.assert_array_equal(empty, np.bincount(np.zeros(0, int), minlength=3))


def test_histogram_matches_numpy():
    x = np.random.default_rng(2).standard_normal((800, 250))
    a = ma.asarray(x) * 3
    for bins, range_ in [(10, None), (37, (-2.0, 5.0)), ([-9.0, -1, 0, 0.5, 9], None), (1, None)]:
        got = everywhere(lambda m, j: ma.histogram(a, bins=bins, range=range_, memory_limit=m, n_jobs=j))
        want = np.histogram(x * 3, bins=bins, range=range_)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
    w = np.abs(x)
    got = everywhere(lambda m, j: ma.histogram(a, bins=12, weights=ma.asarray(w), density=True, memory_limit=m, n_jobs=j))
    want = np.histogram(x * 3, bins=12, weights=w, density=True)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
    np.testing.assert_array_equal(np.histogram_bin_edges(a, bins=7), np.histogram_bin_edges(x * 3, bins=7))
    # Integers, a constant array (NumPy widens the range), empty.
    k = np.arange(1000) % 17
    for data in [k, np.full(50, 4.0), np.zeros(0)]:
        got, edges = np.histogram(ma.asarray(data), bins=5)
        want, want_edges = np.histogram(data, bins=5)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(edges, want_edges)


def test_histogram_of_bools_is_numpys():
    """NumPy bins bools as uint8 (with its RuntimeWarning); memfit passed the
    bool minimum and maximum as the range, and NumPy's subtraction of them
    failed."""
    b = np.random.default_rng(4).random((300, 500)) > 0.3
    msg = "Converting input from bool to <class 'numpy.uint8'> for compatibility."
    for data in [b, np.array([True, False, True, True]), np.ones(5, bool), np.zeros(0, bool)]:
        for kw in [dict(bins=4), dict(bins=3, range=(0, 2)), dict(bins=[0, 0.5, 1]), dict(bins=5, density=True),
                   dict(bins=4, weights=np.ones(data.shape, np.float32))]:
            with pytest.warns(RuntimeWarning, match=re.escape(msg)):
                want = np.histogram(data, **kw)
            with pytest.warns(RuntimeWarning, match=re.escape(msg)):
                got = ma.histogram(ma.asarray(data), **kw)
            for g, w in zip(got, want):
                assert g.dtype == w.dtype
                np.testing.assert_array_equal(g, w)
        with pytest.warns(RuntimeWarning, match=re.escape(msg)):
            edges = ma.histogram_bin_edges(ma.asarray(data), bins=4)
        with pytest.warns(RuntimeWarning, match=re.escape(msg)):
            np.testing.assert_array_equal(edges, np.histogram_bin_edges(data, bins=4))
    with pytest.warns(RuntimeWarning, match=re.escape(msg)):
        got = np.histogram(ma.asarray(b), bins=4)
    np.testing.assert_array_equal(got[0], np.histogram(b.astype(np.uint8), bins=4)[0])


def test_histogram_errors_are_numpys():
    with pytest.raises(ValueError, match=r"autodetected range of \[nan, nan\] is not finite"):
        np.histogram(ma.asarray(np.array([1.0, np.nan])))
    with pytest.raises(ValueError, match="weights should have the same shape as a."):
        np.histogram(ma.asarray(np.ones(3)), weights=np.ones(2))
    with pytest.raises(ValueError, match="`bins` must increase monotonically"):
        np.histogram(ma.asarray(np.ones(3)), bins=[3, 1])
    with pytest.raises(TypeError, match="named bin estimators"):
        np.histogram(ma.asarray(np.ones(3)), bins="auto")


@pytest.mark.parametrize("first", [-0.0, 0.0])
def test_unique_keeps_the_first_zeros_sign_for_any_limit(first):
    """-0.0 and 0.0 are one value: the one kept was each block's, so the
    sign changed with n_jobs and the limit (helper 116). Now the first
    occurrence's, as NumPy's with return_index."""
    x = np.round(np.random.default_rng(3).standard_normal(150_000), 2)
    zeros = np.flatnonzero(x == 0)
    x[zeros] = np.where(np.arange(zeros.size) % 2, -first, first)
    assert np.signbit(np.unique(x, return_index=True)[0][np.unique(x) == 0]) == np.signbit(first)
    for limit in ("512KiB", *LIMITS):
        for jobs in JOBS:
            for returns in ({}, {"return_inverse": True}, {"return_counts": True}):
                got = ma.unique(ma.asarray(x), memory_limit=limit, n_jobs=jobs, **returns)
                got = got[0] if isinstance(got, tuple) else got
                assert np.signbit(got[got == 0]).tolist() == [bool(np.signbit(first))], (limit, jobs, returns)


def test_unique_matches_numpy():
    g = np.round(np.random.default_rng(3).standard_normal((600, 400)) * 50)
    g[5, 7] = g[9, 1] = np.nan
    a = ma.asarray(g)
    got = everywhere(lambda m, j: ma.unique(a, return_index=True, return_counts=True, memory_limit=m, n_jobs=j))
    want = np.unique(g, return_index=True, return_counts=True)
    for p, q in zip(got, want):
        np.testing.assert_array_equal(p, q)
    np.testing.assert_array_equal(np.unique(a * 2), np.unique(g * 2))
    np.testing.assert_array_equal(np.unique(a, equal_nan=False), np.unique(g, equal_nan=False))
    many = np.random.default_rng(4).random(300_000)
    np.testing.assert_array_equal(ma.unique(ma.asarray(many), memory_limit="1MiB"), np.unique(many))
    assert ma.unique(ma.asarray(np.array(3))).tolist() == [3]
    assert ma.unique(ma.asarray(np.zeros((0, 4), np.int32))).dtype == np.int32
    with pytest.raises(TypeError, match="axis"):
        np.unique(a, axis=0)


def test_unique_inverse_matches_numpy():
    g = np.round(np.random.default_rng(5).standard_normal((300, 70)) * 20)
    g[5, 7] = g[9, 1] = g[299, 69] = np.nan
    for data in [g, g.astype(np.float32)[:, ::-2], np.arange(7)[::-1] % 3, np.array(5.0), np.zeros((0, 3))]:
        a = ma.asarray(data) if data.ndim == 0 or data.flags.c_contiguous else ma.asarray(np.ascontiguousarray(data))
        for equal_nan in (True, False):
            got = everywhere(
                lambda m, j: ma.unique(a, return_index=True, return_inverse=True, return_counts=True,
                                       equal_nan=equal_nan, memory_limit=m, n_jobs=j))
            want = np.unique(data, return_index=True, return_inverse=True, return_counts=True, equal_nan=equal_nan)
            assert len(got) == len(want) == 4
            for p, q in zip(got, want):
                assert p.shape == q.shape and p.dtype == q.dtype
                np.testing.assert_array_equal(p, q)
    u, inv = np.unique(ma.asarray(g) * 2, return_inverse=True)
    np.testing.assert_array_equal(u[inv], g * 2)


def test_streamed_results_of_expressions_with_reductions(tmp_path):
    """The array's own reductions (a standardisation) are computed once,
    before the first block."""
    x = np.random.default_rng(5).random((20_000, 8))
    np.save(tmp_path / "x.npy", x)
    a = ma.from_npy(tmp_path / "x.npy")
    z = np.floor((a - a.mean(0)) / a.std(0) * 4)
    zn = np.floor((x - x.mean(0)) / x.std(0) * 4)
    got = ma.unique(z, return_counts=True, memory_limit="8MiB")
    want = np.unique(zn, return_counts=True)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


def test_histogram_bins_each_piece_as_numpy_bins_the_whole():
    """An explicit range is used as NumPy uses it (in the data's precision,
    integer ranges exactly), lazy bins are computed, weighted counts keep
    the weights' dtype and NumPy's block sums (bit for bit)."""
    x = np.array([0.9], np.float32)
    np.testing.assert_array_equal(ma.histogram(ma.asarray(x), 10, range=(0, 1))[0], np.histogram(x, 10, range=(0, 1))[0])
    h = (np.random.default_rng(0).standard_normal(100_000) * 20).astype(np.float16)
    np.testing.assert_array_equal(ma.histogram(ma.asarray(h), 13, range=(-5, 50))[0], np.histogram(h, 13, range=(-5, 50))[0])
    big = np.array([2**62 + 5])
    np.testing.assert_array_equal(ma.histogram(ma.asarray(big), 4, range=(0, 2**62 + 1))[0], [0, 0, 0, 0])
    f = np.random.default_rng(1).standard_normal(1000)
    np.testing.assert_array_equal(ma.histogram(ma.asarray(f), bins=ma.asarray(np.array([-1.0, 0, 5])))[0],
                                  np.histogram(f, bins=[-1.0, 0, 5])[0])
    g = np.random.default_rng(3).standard_normal(200_000)
    for dtype in [np.int64, np.float32, np.float64]:
        w = (np.random.default_rng(2).random(200_000) * 4).astype(dtype)
        got = ma.histogram(ma.asarray(g), 9, weights=ma.asarray(w), memory_limit="2MiB")[0]
        want = np.histogram(g, 9, weights=w)[0]
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
        # Edges given: NumPy's cumulative weights per block, differenced
        # once (helper 98: each piece differenced, 5e-14 off in every bin).
        edges = [-3, -1, -0.5, 0, 0.3, 1, 3]
        got = ma.histogram(ma.asarray(g), bins=edges, weights=ma.asarray(w - 1), memory_limit="1MiB")[0]
        want = np.histogram(g, bins=edges, weights=w - 1)[0]
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
    empty = ma.histogram(ma.asarray(f), bins=[])
    assert empty[0].size == 0 and empty[1].size == 0


def test_unique_first_indices_are_numpys():
    x = np.full(20, np.nan)
    np.testing.assert_array_equal(ma.unique(ma.asarray(x), equal_nan=False, return_index=True)[1],
                                  np.unique(x, equal_nan=False, return_index=True)[1])
    y = np.round(np.random.default_rng(5).standard_normal(300_000) * 50)
    y[::7] *= -1  # zeros of both signs
    want = np.unique(y, return_index=True, return_counts=True)
    for limit in LIMITS:
        got = ma.unique(ma.asarray(y), return_index=True, return_counts=True, memory_limit=limit)
        for p, q in zip(got, want):
            np.testing.assert_array_equal(p, q)
        np.testing.assert_array_equal(np.signbit(got[0]), np.signbit(want[0]))
    assert ma.bincount(ma.asarray(np.zeros(0, np.int64)), weights=np.zeros(0)).dtype == np.intp
