"""memfit.array on a Dask cluster (issue 12, item 5): lazy arrays survive
pickle and cloudpickle by replaying how their engine nodes were made."""

import copy
import os
import pickle

import numpy as np
import pytest

zarr = pytest.importorskip("zarr")
cloudpickle = pytest.importorskip("cloudpickle")

import memfit.array as ma  # noqa: E402
from memfit import _memfit  # noqa: E402


def bits(a):
    """The array's bytes, for bitwise comparisons (NaNs included)."""
    a = np.ascontiguousarray(a)
    return a.dtype, a.shape, a.tobytes()


def roundtrips(x):
    """``x`` through pickle and cloudpickle, checked bitwise against ``x``."""
    want = bits(x.compute())
    for dumps, loads in ((pickle.dumps, pickle.loads), (cloudpickle.dumps, cloudpickle.loads)):
        y = loads(dumps(x))
        assert isinstance(y, ma.Array) and y is not x
        assert (y.shape, y.dtype) == (x.shape, x.dtype)
        assert bits(y.compute()) == want
    return y


# ---------------------------------------------------------------------------
# Pickling


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((60, 7)).astype(np.float32)
    np.save(tmp_path / "a.npy", a)
    z = zarr.create_array(store=str(tmp_path / "a.zarr"), shape=a.shape, chunks=(16, 4), dtype=a.dtype)
    z[...] = a
    return a, tmp_path


def test_pickle_every_leaf_kind(files):
    a, d = files
    leaves = [
        ma.asarray(a),
        ma.asarray(np.asfortranarray(a)[::2, 1:]),
        ma.from_npy(d / "a.npy"),
        ma.from_zarr(str(d / "a.zarr")),
        ma.from_zarr(zarr.open_array(str(d / "a.zarr"), mode="r")),
        ma.asarray(zarr.open_array(str(d / "a.zarr"), mode="r")),
        ma.full((3, 4), 2.5, dtype=np.float16),
        ma.zeros(5, dtype=bool),
        ma.arange(3, 40, 3, dtype=np.int16),
        ma.arange(0.1, 2.0, 0.3),
        ma.random.normal(1.0, 2.0, size=(9, 5), seed=11),
        ma.random.uniform(size=(4, 3), seed=12, dtype=np.float32),
        ma.asarray(np.float32(3.5)) + 1,
    ]
    for x in leaves:
        roundtrips(x)


def test_pickle_chain_of_operations(files):
    a, d = files
    x = ma.from_npy(d / "a.npy").astype(np.float64)
    w = ma.asarray(np.linspace(-1.0, 1.0, 7))
    z = (x - x.mean(0)) / x.std(0)
    e = ma.einsum("ij,j,kj->ik", z[:10], w, z[5:15])
    chain = [
        z,
        e,
        ma.sum(z * w, axis=1, keepdims=True),
        np.tile(x[::3, None, :], (1, 2, 1)).max(axis=(0, 2)),
        ma.where(x > 0, ma.sqrt(ma.abs(x)), -x).argmin(axis=0),
        (x @ x.T)[2:8].var(axis=1),
        ma.concatenate([x, ma.from_zarr(str(d / "a.zarr"))], axis=0).T.reshape(7, 2, 60).prod(axis=1),
        ma.stack([e, e.T]).any(axis=0),
    ]
    for y in chain:
        roundtrips(y)


def test_pickle_keeps_shared_inputs_once(files):
    a, d = files
    big = np.random.default_rng(0).standard_normal(20_000)
    x = ma.asarray(big)
    y = (x - x.mean()) * (x + 1)
    z = ma.sqrt(x * x)
    blob = pickle.dumps((x, y, z))
    assert len(blob) < 1.5 * big.nbytes  # the ndarray once, not once per use
    x2, y2, z2 = pickle.loads(blob)
    assert bits(y2.compute()) == bits(y.compute()) and bits(z2.compute()) == bits(z.compute())
    # copy and deepcopy rebuild the same way
    assert bits(copy.deepcopy(y).compute()) == bits(y.compute())
    assert bits(copy.copy(y).compute()) == bits(y.compute())


def test_pickle_long_chain_does_not_recurse():
    x = ma.asarray(np.ones(3))
    y = x
    for _ in range(1500):
        y = y * 1.0 + 1
    z = pickle.loads(pickle.dumps(y))
    assert z.shape == (3,)  # rebuilt (evaluating a chain this deep is the engine's matter)


def test_pickle_files_by_absolute_path(files, monkeypatch, tmp_path):
    a, d = files
    monkeypatch.chdir(d)
    x = ma.from_npy("a.npy") + ma.from_zarr("a.zarr")
    blob = pickle.dumps(x)
    other = tmp_path / "elsewhere"
    other.mkdir()
    monkeypatch.chdir(other)
    assert bits(pickle.loads(blob).compute()) == bits(a + a)


def test_pickle_refuses_a_bare_engine_expression():
    x = ma.Array(_memfit.expr_from_ndarray(np.ones(3)))
    with pytest.raises(TypeError, match=r"Array\(expr\)"):
        pickle.dumps(x)
    with pytest.raises(TypeError, match=r"Array\(expr\)"):
        pickle.dumps(ma.asarray(np.ones(3)) + x)
    # Array(array) keeps the recipe
    assert bits(pickle.loads(pickle.dumps(ma.Array(ma.arange(4)))).compute()) == bits(np.arange(4))


def test_zarr_in_memory_is_refused():
    z = zarr.create_array(store=zarr.storage.MemoryStore(), shape=(4,), chunks=(2,), dtype="float64")
    with pytest.raises(TypeError, match="local directory"):
        ma.from_zarr(z)
