"""Several statistics in one pass (issue 23, item 2) against NumPy: shared
reduction stages, one-pass var/std, and the kinds of faults found trying
them (overflow in var, exact arg-reductions of large integers, joined
passes under a small limit)."""

import numpy as np
import pytest

import memfit.array as ma


def test_mean_var_min_max_of_one_array_are_one_pass(tmp_path):
    x = np.random.default_rng(0).standard_normal((30_000, 6)) * 5 + 1e9
    np.save(tmp_path / "x.npy", x)
    a = ma.from_npy(tmp_path / "x.npy")
    plan = ma.explain(a.mean(0), a.var(0), a.min(0), a.max(0), memory_limit="64MiB")
    reads = [s for s in plan["stages"] if "read(x.npy)" in s["what"]]
    assert len(reads) == 1, plan
    m, v, lo, hi = ma.compute(a.mean(0), a.var(0, ddof=1), a.min(0), a.max(0), memory_limit="4MiB", n_jobs=2)
    np.testing.assert_allclose(m, x.mean(0), rtol=1e-13)
    # Far from the origin: as accurate as NumPy's two passes.
    exact = np.array([float(np.var(x[:, j].astype(np.longdouble) - np.longdouble(1e9), ddof=1)) for j in range(6)])
    np.testing.assert_allclose(v, exact, rtol=1e-11)
    np.testing.assert_array_equal(lo, x.min(0))
    np.testing.assert_array_equal(hi, x.max(0))


def test_standardise_then_reduce_reads_twice(tmp_path):
    x = np.random.default_rng(1).random((20_000, 4))
    np.save(tmp_path / "x.npy", x)
    a = ma.from_npy(tmp_path / "x.npy")
    z = (a - a.mean(0)) / a.std(0)
    plan = ma.explain(z.mean(0), z.std(0), memory_limit="64MiB")
    assert sum("read(x.npy)" in s["what"] for s in plan["stages"]) == 2, plan
    zm, zs = ma.compute(z.mean(0), z.std(0), memory_limit="64MiB")
    zn = (x - x.mean(0)) / x.std(0)
    np.testing.assert_allclose(zm, zn.mean(0), atol=1e-14)
    np.testing.assert_allclose(zs, zn.std(0), rtol=1e-13)


@pytest.mark.parametrize("values", [[-1e170, 1e170, 3e170], [5e307] * 4])
def test_var_of_values_whose_squares_overflow_is_inf_as_numpys(values):
    x = np.array(values)
    with pytest.warns(RuntimeWarning):
        got = ma.asarray(x).var().compute()
    with np.errstate(over="ignore", invalid="ignore"):
        assert got == np.var(x) == np.inf


@pytest.mark.parametrize("dtype", [np.int64, np.uint64])
def test_arg_reductions_compare_large_integers_exactly(dtype):
    x = np.array([[2**62, 2**62 + 1, 2**62 - 1], [2**62 + 3, 2**62 + 3, 2**62 + 2]], dtype=dtype)
    a = ma.asarray(x)
    for axis in [None, 0, 1]:
        assert np.array_equal(a.argmax(axis=axis).compute(), x.argmax(axis=axis))
        assert np.array_equal(a.argmin(axis=axis).compute(), x.argmin(axis=axis))
    big = np.full(70_000, 2**60, dtype=dtype)
    big[50_001] += 1
    assert ma.asarray(big).argmax().compute() == 50_001


def test_many_reductions_together_fit_where_each_does():
    """40 column sums: joined into shared passes when the limit holds them,
    separate passes when it holds only one at a time."""
    x = np.random.default_rng(2).random((20_000, 40))
    a = ma.asarray(x)
    sums = [a[:, i].sum() for i in range(40)]
    for limit in ["2MiB", "64MiB"]:
        got = ma.compute(*sums, memory_limit=limit, n_jobs=2)
        np.testing.assert_allclose(got, x.sum(0), rtol=1e-13)
        for g, s in zip(got, sums):
            assert g == s.compute(memory_limit=limit)


def test_numpy_quirks_of_reductions():
    """0-d arrays take axis=0/-1 in ufunc reductions and argmin/argmax (not
    in mean/var); ddof=True is 1; a NaN ddof gives NaN."""
    z = ma.asarray(np.array(5.0))
    for name in ["sum", "prod", "min", "max", "any", "all", "argmin", "argmax"]:
        for axis in [0, -1]:
            assert getattr(ma, name)(z, axis=axis).compute() == getattr(np, name)(np.array(5.0), axis=axis)
    for name in ["mean", "var", "std"]:
        with pytest.raises(np.exceptions.AxisError):
            getattr(ma, name)(z, axis=0)
    with pytest.raises(np.exceptions.AxisError):
        ma.sum(z, axis=(0,))
    x = np.arange(5.0)
    assert ma.var(ma.asarray(x), ddof=True).compute() == np.var(x, ddof=True)
    assert np.isnan(ma.var(ma.asarray(x), ddof=np.nan).compute())


@pytest.mark.parametrize("columns", [2, 7, 13])
@pytest.mark.parametrize("form", ["sum", "mean", "square", "nanvar", "keepdims3d"])
def test_outer_axis_sums_have_the_same_bits_for_any_limit_and_threads(columns, form):
    # A tile of one output column made its reduced elements adjacent, and
    # its sum pairwise where wider tiles summed in order: the last column's
    # bits changed with the limit and the threads. The order now follows
    # the operand (NumPy's: in order over an outer axis).
    x = np.random.default_rng(columns).normal(size=(60_000, columns))
    x[::97, 0] = np.nan
    a = ma.asarray(x)
    e = {
        "sum": lambda: a.sum(0),
        "mean": lambda: a.mean(0),
        "square": lambda: ((a - 0.5) ** 2).sum(0),
        "nanvar": lambda: np.nanvar(a, axis=0),
        "keepdims3d": lambda: ma.sum(a.reshape(600, 100, columns) * 2.0, axis=(0, 1), keepdims=True),
    }[form]()
    runs = [e.compute(memory_limit=limit, n_jobs=n_jobs) for limit, n_jobs in
            [("64MiB", 1), ("4MiB", 2), ("4MiB", 1), ("64MiB", 2), ("2MiB", 1), ("2MiB", 2)]]
    for r in runs[1:]:
        np.testing.assert_array_equal(r, runs[0])
