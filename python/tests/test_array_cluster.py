"""memfit.array on a Dask cluster (issue 12, item 5): lazy arrays survive
pickle and cloudpickle by replaying how their engine nodes were made, and
``Array.to_zarr(client=...)`` evaluates one task per output chunk on a
``distributed.LocalCluster`` of worker processes, writing the same values as
the single-process ``to_zarr``, atomically, and refusing chunks that cannot
fit a worker before submitting anything."""

import copy
import os
import pickle

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")
zarr = pytest.importorskip("zarr")
cloudpickle = pytest.importorskip("cloudpickle")

import memfit.array as ma  # noqa: E402
from memfit import _dask, _memfit, _options  # noqa: E402
from memfit.array import _cluster  # noqa: E402


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


# ---------------------------------------------------------------------------
# to_zarr on a cluster


def test_auto_without_an_active_client_is_local(tmp_path):
    with pytest.raises(ValueError):
        distributed.get_client()  # (this runs before the module's cluster starts)
    assert _options.resolve_client("auto") is None and _options.resolve_client(None) is None
    ma.arange(5).to_zarr(tmp_path / "a.zarr", client="auto")
    ma.arange(5).to_zarr(tmp_path / "b.zarr")
    assert bits(read(tmp_path / "a.zarr")) == bits(read(tmp_path / "b.zarr")) == bits(np.arange(5))


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(
        processes=True, n_workers=2, threads_per_worker=1, memory_limit="512MiB", dashboard_address=None
    ) as cluster, distributed.Client(cluster) as c:
        yield c


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("cluster")
    rng = np.random.default_rng(5)
    np.save(d / "x.npy", rng.standard_normal((3000, 250)) * 3 + 1)  # 6 MB
    return d


def standardized(d):
    x = ma.from_npy(d / "x.npy")
    return (x - x.mean(0)) / x.std(0)


def read(path):
    return zarr.open_array(str(path), mode="r")[...]


def test_to_zarr_on_cluster_equals_local(client, data, tmp_path):
    y = standardized(data)
    y.to_zarr(tmp_path / "cluster.zarr", chunks=(700, 96), client=client)
    got = zarr.open_array(str(tmp_path / "cluster.zarr"), mode="r")
    assert got.chunks == (700, 96) and got.shape == (3000, 250) and got.dtype == np.float64
    assert bits(got[...]) == bits(y.compute())  # compute() runs here
    assert sorted(os.listdir(tmp_path)) == ["cluster.zarr"]  # no temporary left


def test_client_none_is_the_active_client_for_fit_and_to_zarr(client, data, tmp_path, monkeypatch):
    """One meaning of ``client=None`` (memfit._options.resolve_client): the
    active client, in ``fit`` as in ``Array.to_zarr``."""
    import memfit
    from memfit import _validation

    assert _options.resolve_client(None) is client and _options.resolve_client("auto") is client
    seen = []
    to_zarr, from_expression = _cluster.to_zarr, _dask.from_expression
    monkeypatch.setattr(_cluster, "to_zarr", lambda x, p, *a, **k: seen.append(("to_zarr", a[-1])) or to_zarr(x, p, *a, **k))
    monkeypatch.setattr(_dask, "from_expression", lambda x: seen.append(("fit", None)) or from_expression(x))
    y = ma.from_npy(data / "x.npy")[:200, :4]
    y.to_zarr(tmp_path / "y.zarr", chunks=(100, 4))
    memfit.KMeans(2, n_init=1, max_iter=2, random_state=0).fit(y)
    assert seen[0] == ("to_zarr", client) and ("fit", None) in seen[1:]
    assert _validation.on_cluster(y, None) is not y  # a Dask array the workers compute
    assert bits(read(tmp_path / "y.zarr")) == bits(y.compute())


def test_to_zarr_on_cluster_default_chunks_and_auto(client, data, tmp_path):
    y = standardized(data)[::2, 10:] * np.float32(2)
    y.to_zarr(tmp_path / "auto.zarr", client="auto", memory_limit="4MiB")  # the active client
    got = zarr.open_array(str(tmp_path / "auto.zarr"), mode="r")
    assert got.nchunks > 1  # chunks chosen within the 4 MiB task limit
    assert bits(got[...]) == bits(y.compute())
    # the engine's one rule: the same chunks as the local to_zarr at that limit
    y.to_zarr(tmp_path / "local.zarr", memory_limit="4MiB")
    assert got.chunks == zarr.open_array(str(tmp_path / "local.zarr"), mode="r").chunks
    assert np.prod(got.chunks) * got.dtype.itemsize >= 64 << 10
    z = ma.arange(10, dtype=np.uint8) > 4
    z.to_zarr(tmp_path / "b.zarr", chunks=3, client=client)
    assert bits(read(tmp_path / "b.zarr")) == bits(np.arange(10) > 4)
    with pytest.raises(TypeError, match="distributed.Client"):
        z.to_zarr(tmp_path / "c.zarr", client="yes")


def test_to_zarr_on_cluster_existing_path(client, data, tmp_path):
    y = standardized(data)[:500]
    out = tmp_path / "out.zarr"
    ma.zeros(3).to_zarr(out)
    with pytest.raises(FileExistsError, match="exists"):
        y.to_zarr(out, client=client)
    assert read(out).shape == (3,)
    y.to_zarr(out, chunks=(200, 250), client=client, overwrite=True)
    assert bits(read(out)) == bits(y.compute())
    assert sorted(os.listdir(tmp_path)) == ["out.zarr"]


def test_failing_task_leaves_nothing(client, tmp_path):
    src = tmp_path / "in.zarr"
    z = zarr.create_array(store=str(src), shape=(400, 100), chunks=(100, 50), dtype="float64")
    z[...] = np.arange(40_000.0).reshape(400, 100)
    with open(src / "c" / "3" / "1", "wb") as f:  # one corrupt input chunk: one task fails
        f.write(b"not zstd")
    y = ma.from_zarr(str(src)) * 2
    with pytest.raises(OSError, match="read failed"):
        y.to_zarr(tmp_path / "out.zarr", chunks=(100, 50), client=client)
    assert sorted(os.listdir(tmp_path)) == ["in.zarr"]
    # an existing output is left as it was
    ma.ones(2).to_zarr(tmp_path / "out.zarr")
    with pytest.raises(OSError):
        y.to_zarr(tmp_path / "out.zarr", chunks=(100, 50), client=client, overwrite=True)
    assert sorted(os.listdir(tmp_path)) == ["in.zarr", "out.zarr"]
    assert bits(read(tmp_path / "out.zarr")) == bits(np.ones(2))


def test_chunk_too_large_for_a_worker_is_refused(client, tmp_path, monkeypatch):
    submitted = []
    monkeypatch.setattr(type(client), "submit", lambda self, *a, **k: submitted.append(a))
    y = ma.random.normal(size=(6000, 6000), seed=1)  # 288 MB, above 512 MiB / 1 thread * 0.5
    with pytest.raises(MemoryError) as info:
        y.to_zarr(tmp_path / "big.zarr", chunks=(6000, 6000), client=client)
    message = str(info.value)
    assert "memory_limit 536870912 B" in message and "nthreads 1" in message
    assert f"SAFETY {_dask.SAFETY}" in message and "already holding" in message
    # a smaller user limit binds and is named too
    with pytest.raises(MemoryError, match=r"memory_limit=1048576 bytes is smaller"):
        y.to_zarr(tmp_path / "big.zarr", chunks=(1000, 1000), memory_limit="1MiB", client=client)
    assert submitted == [] and os.listdir(tmp_path) == []


def test_task_limit_rule():
    assert _dask.SAFETY == 0.5
    assert _dask.worker_budget(1000, 2) == 250
    assert _dask.worker_budget(None, 4) is None and _dask.worker_budget(0, 4) is None
    assert _dask.combined_limit(100, 250) == 100 and _dask.combined_limit(None, 250) == 250
    assert _dask.combined_limit(300, None) == 300


def test_to_zarr_on_cluster_follows_the_callers_errstate(client, tmp_path):
    """to_zarr on a cluster under ``np.errstate(divide="raise")`` raises
    FloatingPointError and writes nothing, as the local to_zarr and the
    cluster's compute/to_npy do. Before, each task computed its chunk on a
    worker thread with the default error state: it only warned there, and
    the file was written with inf in it."""
    np.save(tmp_path / "z.npy", np.array([1.0, 0.0, 2.0]))
    y = 1 / ma.from_npy(tmp_path / "z.npy")
    with np.errstate(divide="raise"):
        with pytest.raises(FloatingPointError, match="divide by zero"):
            y.to_zarr(tmp_path / "e.zarr", client=client)
        assert sorted(os.listdir(tmp_path)) == ["z.npy"]
        ma.ones(2).to_zarr(tmp_path / "old.zarr", client=client)  # finite: written
        with pytest.raises(FloatingPointError):
            y.to_zarr(tmp_path / "old.zarr", client=client, overwrite=True)
    assert bits(read(tmp_path / "old.zarr")) == bits(np.ones(2))  # left as it was
    assert sorted(os.listdir(tmp_path)) == ["old.zarr", "z.npy"]
    with np.errstate(divide="ignore"):
        y.to_zarr(tmp_path / "e.zarr", chunks=2, client=client)
    assert bits(read(tmp_path / "e.zarr")) == bits(np.array([1.0, np.inf, 0.5]))
    # What the tasks get: the caller's modes; "call" and "log" report to an
    # object of the caller's, so the tasks warn instead.
    with np.errstate(divide="raise", over="ignore", invalid="call", under="print", call=print):
        assert _dask.error_state() == {"divide": "raise", "over": "ignore", "invalid": "warn", "under": "print"}
