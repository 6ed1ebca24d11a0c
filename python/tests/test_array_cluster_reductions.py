"""Reductions of memfit.array expressions on a Dask cluster (issue 22, item
1): ``compute(client=...)`` and ``to_npy(client=...)`` run each reduction as
tasks over ranges of its accumulation chunks and fold their statistics in
chunk order, bitwise the local result; arrays that cannot run there are
refused with ValueError saying why."""

import re
import warnings

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

import memfit.array as ma  # noqa: E402
from memfit.array import _cluster  # noqa: E402


def bits(a):
    a = np.ascontiguousarray(a)
    return a.dtype, a.shape, a.tobytes()


@pytest.fixture(scope="module")
def client():
    # Not the default client: compute() without one runs here.
    with distributed.LocalCluster(
        processes=False, n_workers=2, threads_per_worker=1, dashboard_address=None
    ) as cluster, distributed.Client(cluster, set_as_default=False) as c:
        yield c


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    p = tmp_path_factory.mktemp("reduce") / "x.npy"
    # 4 accumulation chunks of 16384 rows over axis 0; values whose sums
    # depend on the order of additions.
    np.save(p, np.random.default_rng(11).standard_normal((60_000, 3)) * 1e3 + 1e-3)
    return p


@pytest.fixture
def x(path):
    return ma.from_npy(path)


@pytest.fixture
def ranges(monkeypatch):
    """The ranges of chunks handed to the cluster."""
    seen = []
    call = _cluster._Ranges.__call__

    def recording(self, task, rs, **kw):
        seen.extend(tuple(r) for r in rs)
        return call(self, task, rs, **kw)

    monkeypatch.setattr(_cluster._Ranges, "__call__", recording)
    return seen


@pytest.mark.parametrize(
    "reduce",
    [
        lambda x: x.sum(),
        lambda x: x.sum(axis=0),
        lambda x: x.mean(axis=0),
        lambda x: x.var(axis=0),
        lambda x: x.std(),
        lambda x: x.argmax(axis=0),
        lambda x: x.argmax(),
        lambda x: (x * 2 - 1).min(axis=1),
    ],
)
def test_reductions_on_the_cluster_are_bitwise_local(client, x, ranges, reduce):
    r = reduce(x)
    assert bits(r.compute(client=client)) == bits(r.compute())
    assert ranges, "no task ran"


def test_several_ranges_fold_in_chunk_order(client, x, ranges):
    r = x.sum(axis=0)
    assert bits(r.compute(client=client)) == bits(r.compute())
    assert ranges == [(0, 2), (2, 4)]  # 4 chunks, 2 worker threads


def test_to_npy_on_the_cluster(client, x, ranges, tmp_path):
    v = x.var(axis=0, ddof=1)
    v.to_npy(tmp_path / "a.npy", client=client)
    v.to_npy(tmp_path / "b.npy")
    assert bits(np.load(tmp_path / "a.npy")) == bits(np.load(tmp_path / "b.npy"))
    assert ranges


def test_active_client_is_the_default(client, x, path, ranges):
    with client.as_current():
        got = x.mean().compute()
        assert ranges
        ranges.clear()
        # Nothing to run as tasks: computed here.
        assert bits((x + 1).compute()) == bits(np.load(path) + 1)
        assert not ranges
    assert bits(got) == bits(x.mean().compute())


@pytest.mark.parametrize(
    "make, why",
    [
        (lambda x: x + 1, "no reduction"),
        (lambda x: ma.einsum("ij,ik->jk", x, x), "contraction"),
    ],
)
def test_arrays_that_cannot_run_there_are_refused(client, x, ranges, make, why):
    with pytest.raises(ValueError, match=why):
        make(x).compute(client=client)
    assert not ranges


def test_bad_client_is_a_type_error(x):
    with pytest.raises(TypeError, match="client must be"):
        x.sum().compute(client="yes")


def test_overflow_in_tasks_is_reported_as_here(client, x, ranges):
    """Overflow in a task's elementwise work and in the reduction is counted
    as when computed here (issue 23, item 6)."""
    r = (x.astype(np.float32) * 1e36).sum(axis=0)

    def run(**kw):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            got = r.compute(**kw)
        return bits(got), [str(m.message) for m in w if issubclass(m.category, RuntimeWarning)]

    here, there = run(), run(client=client)
    assert ranges and here == there
    counted = re.match(r"overflow encountered in (\d+) values", here[1][0]) if here[1] else None
    assert counted and int(counted.group(1)) > 0, here[1]


def test_zarr_reductions_read_by_groups_of_chunks_on_the_cluster(client, ranges, tmp_path):
    """A task reading a Zarr input's chunks whole, several accumulation
    chunks per box within its range of chunks, has the bits of the local
    run and of the same data in a ``.npy`` file."""
    zarr = pytest.importorskip("zarr")
    d = np.random.default_rng(12).standard_normal((900, 1500)) * 1e3 + 1e-3
    zarr.create_array(str(tmp_path / "x.zarr"), shape=d.shape, chunks=(300, 500), dtype=d.dtype)[...] = d
    np.save(tmp_path / "x.npy", d)
    z, n = ma.from_zarr(str(tmp_path / "x.zarr")), ma.from_npy(tmp_path / "x.npy")
    for f in (lambda a: a.sum(axis=0), lambda a: a.var(axis=0), lambda a: a.argmin(axis=0), lambda a: a[::-1].mean()):
        assert "chunks read together" in str(f(z).explain())
        assert bits(f(z).compute(client=client)) == bits(f(n).compute()) == bits(f(z).compute())
    assert len(set(ranges)) > 1


def test_a_limit_that_works_here_works_on_the_cluster(client, tmp_path):
    """A task plans its tiles beside the statistics it returns (helper 102:
    its tiles filled the limit and the statistics came on top, so every
    limit was refused with a hint that moved with it)."""
    np.save(tmp_path / "c.npy", np.random.default_rng(7).standard_normal((400, 130)))
    e = ma.from_npy(tmp_path / "c.npy").mean(1)
    for limit in ["256KiB", "270KiB", "1MiB", "2MiB"]:
        here = e.compute(memory_limit=limit)
        assert bits(e.compute(memory_limit=limit, client=client)) == bits(here), limit
