"""NumPy's NaN-ignoring reductions and scans on lazy arrays (np.nansum,
np.nanmean, ...): NumPy's values, dtypes and shapes at two memory limits
and thread counts (bitwise the same across them), through ``np.``
dispatch and ``memfit.array``'s own names."""

import warnings

import numpy as np
import pytest

import memfit.array as ma

LIMITS = [("64MiB", 1), ("4MiB", 2)]
NAMES = ["nansum", "nanprod", "nanmean", "nanvar", "nanstd", "nanmin", "nanmax", "nancumsum", "nancumprod"]


def _data(dtype):
    rng = np.random.default_rng(7)
    x = rng.normal(size=(60_000, 7))
    x[rng.random(x.shape) < 0.2] = np.nan
    x[:, 3] = np.nan  # an all-NaN column
    if np.dtype(dtype).kind != "f":
        return np.nan_to_num(x * 10).astype(dtype)
    return x.astype(dtype)


def _kwargs(name):
    cases = [{}, {"axis": 0}, {"axis": 1}]
    if "cum" not in name:
        cases.append({"axis": 0, "keepdims": True})
    if name in ("nanvar", "nanstd"):
        cases.append({"axis": 0, "ddof": 1})
    return cases


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "bool"])
@pytest.mark.parametrize("limit,n_jobs", LIMITS)
def test_nan_functions_match_numpy(name, dtype, limit, n_jobs):
    x = _data(dtype)
    for kw in _kwargs(name):
        if name == "nanprod" and dtype != "bool":
            arr = x[:40]  # products of 60,000 normals underflow to 0
        else:
            arr = x
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            want = getattr(np, name)(arr, **kw)
            lazy = getattr(np, name)(ma.asarray(arr), **kw)
            assert isinstance(lazy, ma.Array)
            got = lazy.compute(memory_limit=limit, n_jobs=n_jobs)
            own = getattr(ma, name)(ma.asarray(arr), **kw).compute()
        assert got.dtype == want.dtype and got.shape == want.shape, (kw, got.dtype, want.dtype)
        np.testing.assert_array_equal(own, got)  # any limit, any n_jobs: the same bits
        if dtype == "float32":
            # memfit accumulates float32 in float64 (NumPy: pairwise in float32).
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
        else:
            # Sums of many blocks and one-pass moments: NumPy's to rounding.
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=0, err_msg=str(kw))


def test_all_nan_slices_give_nan_and_an_empty_mean_warns():
    x = np.array([[np.nan, 1.0], [np.nan, 3.0]])
    for name in ("nanmean", "nanvar", "nanstd"):
        with pytest.warns(RuntimeWarning, match="invalid value"):
            got = getattr(np, name)(ma.asarray(x), axis=0).compute()
        assert np.isnan(got[0]) and not np.isnan(got[1])
    for name in ("nanmin", "nanmax"):  # NumPy: "All-NaN slice encountered"; never a silent NaN
        with pytest.warns(RuntimeWarning, match="invalid value encountered in 1 values"):
            got = getattr(np, name)(ma.asarray(x), axis=0).compute()
        assert np.isnan(got[0]) and got[1] == getattr(np, name)(x[:, 1])
    for name in ("nanmin", "nanmax", "nansum", "nanprod"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            want = getattr(np, name)(x, axis=0)
        got = getattr(np, name)(ma.asarray(x), axis=0).compute()
        assert got.tobytes() == want.tobytes()  # NumPy's positive NaN
    # ddof beyond the count: NaN, as NumPy.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        np.testing.assert_array_equal(np.nanvar(ma.asarray(x), axis=0, ddof=2).compute(), np.nanvar(x, axis=0, ddof=2))


def test_nan_functions_take_numpy_out_and_refuse_integer_dtypes_for_floats():
    x = np.array([[1.0, np.nan], [3.0, 4.0]])
    out = np.empty(2)
    assert np.nanmean(ma.asarray(x), axis=0, out=out) is out
    np.testing.assert_array_equal(out, np.nanmean(x, axis=0))
    with pytest.raises(TypeError, match="If a is inexact, then dtype must be inexact"):
        np.nanmean(ma.asarray(x), dtype=np.int64)
    with pytest.raises(TypeError, match="If a is inexact, then dtype must be inexact"):
        np.nanmean(x, dtype=np.int64)
