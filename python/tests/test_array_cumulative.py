"""cumsum / cumprod of lazy arrays (issue 23, item 7): one stage, the
other axes' tiles in parallel, each along the axis in order, in the
result's dtype as NumPy's accumulate loops: NumPy's values bit for bit, for
any limit and thread count."""

import warnings

import numpy as np
import pytest

import memfit.array as ma


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16, np.int8, np.uint16, np.int64, np.bool_])
@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
def test_cumulative_is_numpys_bit_for_bit(dtype, name):
    x = (np.random.default_rng(0).standard_normal((310, 67, 5)) * 3).astype(dtype)
    a = ma.asarray(x)
    for axis in [None, 0, 1, -1]:
        with np.errstate(over="ignore", invalid="ignore"):
            want = getattr(np, name)(x, axis=axis)
        for limit in ["1MiB", "64MiB"]:
            for jobs in [1, 2]:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)  # products that overflow, as NumPy's
                    got = getattr(np, name)(a, axis=axis).compute(memory_limit=limit, n_jobs=jobs)
                assert got.dtype == want.dtype
                np.testing.assert_array_equal(got, want)


def test_cumsum_of_expressions_files_and_views(tmp_path):
    x = np.random.default_rng(1).random((20_000, 6))
    np.save(tmp_path / "x.npy", x)
    a = ma.from_npy(tmp_path / "x.npy")
    z = (a - a.mean(0)).cumsum(axis=0)
    np.testing.assert_allclose(z.compute(memory_limit="4MiB"), np.cumsum(x - x.mean(0), axis=0), rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(a.T[::-1].cumsum(1).compute(), np.cumsum(x.T[::-1], 1))
    np.testing.assert_array_equal(ma.cumsum(a, dtype=np.float32).compute(), np.cumsum(x, dtype=np.float32))
    a.cumsum(0).to_npy(tmp_path / "c.npy", memory_limit="4MiB")
    np.testing.assert_array_equal(np.load(tmp_path / "c.npy"), np.cumsum(x, 0))
    out = np.empty(x.size)
    assert np.cumsum(a, out=out) is out
    np.testing.assert_array_equal(out, np.cumsum(x))


def test_cumulative_edge_cases():
    assert ma.cumsum(ma.asarray(np.array(5.0))).compute().tolist() == [5.0]
    assert ma.cumsum(ma.asarray(np.zeros((3, 0)))).compute().shape == (0,)
    # Reshapes of empty arrays (these panicked in lowering).
    assert ma.asarray(np.zeros((3, 0))).reshape(0, 5).compute().shape == (0, 5)
    assert ma.asarray(np.zeros((3, 0, 4))).reshape(12, 0).sum(0).compute().shape == (0,)
    assert ma.cumsum(ma.asarray(np.zeros((3, 0))), axis=0).compute().shape == (3, 0)
    with pytest.raises(np.exceptions.AxisError):
        ma.cumsum(ma.asarray(np.zeros((3, 2))), axis=2)
    with pytest.warns(RuntimeWarning, match="overflow encountered"):
        got = ma.cumprod(ma.asarray(np.full(10, 1e100))).compute()
    assert np.isinf(got[-1])


def test_cumulative_into_out_accumulates_in_its_dtype():
    """As NumPy: an out= array of a dtype the input casts to safely is the
    accumulation's dtype; 0-d arrays take axis=0."""
    x = np.ones(3000, np.uint8)
    out = np.zeros(3000, np.float16)
    ma.cumsum(ma.asarray(x), out=out)
    np.testing.assert_array_equal(out, np.cumsum(x, out=np.zeros(3000, np.float16)))
    f = np.array([0.1, 0.2, 0.3], np.float32)
    out = np.zeros(3)
    np.cumsum(ma.asarray(f), out=out)
    np.testing.assert_array_equal(out, np.cumsum(f, out=np.zeros(3)))
    assert ma.cumsum(ma.asarray(np.array(5)), axis=0).compute().tolist() == [5]


@pytest.mark.parametrize("name", ["sum", "prod", "mean", "nansum", "nanprod", "nanmean"])
def test_reductions_into_a_wider_out_run_in_its_dtype(name):
    """As NumPy (``dtype`` defaults to out's): a float32 sum into a float64
    out= is the float64 sum, not the float32 one cast."""
    a = (np.random.RandomState(0).randn(6, 5) * 10).astype(np.float32)
    a[2, 3] = np.nan if name.startswith("nan") else a[2, 3]
    want, got, method = np.empty(5), np.empty(5), np.empty(5)
    getattr(np, name)(a, axis=0, out=want)
    getattr(np, name)(ma.asarray(a), axis=0, out=got)
    np.testing.assert_array_equal(got, want)
    if not name.startswith("nan"):
        getattr(ma.asarray(a), name)(axis=0, out=method)
        np.testing.assert_array_equal(method, want)
    # A given dtype still wins (memfit's float32 result, cast).
    np.testing.assert_array_equal(
        getattr(np, name)(ma.asarray(a), axis=0, dtype=np.float32, out=np.empty(5)),
        getattr(np, name)(ma.asarray(a), axis=0, dtype=np.float32).compute().astype(np.float64),
    )
