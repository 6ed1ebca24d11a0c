"""What the Python package reads from the extension instead of keeping a
copy: the engine's constants and dtype lists, and plans as data."""

import numpy as np

import memfit
import memfit.array as ma
from memfit import _dask, _memfit, _validation


def test_constants_come_from_the_extension():
    assert _dask.CHUNK_ROWS == _memfit.CHUNK_ROWS == 1 << 16
    assert ma.DTYPES == tuple(_memfit.ARRAY_DTYPES)
    assert set(ma.DTYPES) == {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                              "float16", "float32", "float64"}
    assert _validation.NATIVE_DTYPES == {np.dtype(t) for t in _memfit.ROW_DTYPES}
    assert set(_memfit.ROW_DTYPES) <= set(_memfit.ARRAY_DTYPES)


def test_every_row_dtype_is_read_in_place():
    """Each dtype the extension names is borrowed by the engine as is (an
    array of any other dtype would raise TypeError naming the list)."""
    for name in _memfit.ROW_DTYPES:
        x = (np.arange(12).reshape(6, 2) % 5).astype(name)
        labels = np.empty(6, np.int32)
        _memfit.assign(x, centers=np.zeros((1, 2)), memory_limit=1 << 26, labels=labels)
    try:
        _memfit.assign(np.ones((3, 2), np.complex64), centers=np.zeros((1, 2)), memory_limit=1 << 26,
                       labels=np.empty(3, np.int32))
    except TypeError as e:
        assert ", ".join(_memfit.ROW_DTYPES) in str(e)
    else:
        raise AssertionError("complex64 was accepted")


def test_fits_hand_the_plan_as_data():
    X = np.random.default_rng(0).standard_normal((500, 3))
    r = _memfit.kmeans_fit(X, n_clusters=2, memory_limit=1 << 26, dry_run=True)
    assert isinstance(r["plan"], dict) and isinstance(r["plan_text"], str)
    assert r["plan"]["limit_bytes"] == 1 << 26 and r["plan"]["total_bytes"] <= 1 << 26
    assert r["plan"].get("component_groups") is None  # left out when the components fit together
    g = _memfit.gmm_fit(X, n_components=2, memory_limit=1 << 26, max_iter=2)
    assert isinstance(g["plan"], dict) and g["plan"]["n_blocks"] >= 1
    km = memfit.KMeans(2, n_init=1, random_state=0, memory_limit="64MiB").fit(X)
    assert isinstance(km.memory_plan_, str) and "64" in km.memory_plan_  # the text, for display


def test_tasks_hand_the_plan_as_data():
    X = np.random.default_rng(0).standard_normal((300, 3))
    seen = []

    def remote(task, ranges, cancelled=None):
        plan, _, _ = _memfit.run_task(task, X, first_row=0, memory_limit=1 << 26, execute=False)
        seen.append(plan)
        return [_memfit.run_task(task, X[a:b], first_row=a, memory_limit=1 << 26)[1] for a, b in ranges]

    _memfit.weighted_scatter(X, memory_limit=1 << 26, remote=remote, row_bounds=[])
    assert seen and all(isinstance(p, dict) and p["limit_bytes"] == 1 << 26 for p in seen)
