"""Dask inputs and fits on a Dask cluster (a LocalCluster of 2 worker
processes × 1 thread): the same bits as the single-process fit on the same
data and seed, kernels equal, each worker within its memory limit, a worker
killed mid-fit costing only its tasks, errors naming the global row."""

import os
import signal
import threading

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import memfit  # noqa: E402
from memfit import GaussianMixture, KMeans, assign, row_quadratic_form, weighted_scatter  # noqa: E402
from memfit import _dask  # noqa: E402

CHUNK = _dask.CHUNK_ROWS
N = 3 * CHUNK + 4321  # four chunks, the last partial
WORKER_LIMIT = 768 << 20


def blobs(n=N, d=5, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=6.0, size=(6, d))
    return (centres[rng.integers(0, 6, n)] + rng.normal(size=(n, d))).astype(dtype)


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, memory_limit=WORKER_LIMIT, dashboard_address=":0"
    ) as cluster, distributed.Client(cluster) as c:
        yield c


@pytest.fixture(scope="module")
def X():
    return blobs()


def chunked(X, rows=CHUNK):
    return da.from_array(X, chunks=(rows, X.shape[1]))


def tasks_run(c, fit):
    """Runs ``fit()`` and returns how many pass tasks the workers ran."""
    with distributed.get_task_stream(client=c) as ts:
        out = fit()
    return out, sum(1 for t in ts.data if "_run_chunk" in t["key"][0 if isinstance(t["key"], tuple) else slice(None)])


def same_kmeans(a, b):
    assert np.array_equal(a.cluster_centers_, b.cluster_centers_)
    assert a.inertia_ == b.inertia_ and a.n_iter_ == b.n_iter_
    assert np.array_equal(a.labels_, np.asarray(b.labels_))


def test_without_a_client_chunks_are_read_in_process(X):
    # First in the file: no client exists yet (the cluster fixture starts later).
    assert _dask.resolve_client(None) is None
    local = GaussianMixture(3, random_state=0, max_iter=5).fit(X)
    lazy = GaussianMixture(3, random_state=0, max_iter=5).fit(chunked(X))
    assert np.array_equal(local.means_, lazy.means_) and local.lower_bound_ == lazy.lower_bound_
    km = KMeans(4, random_state=0, n_init=1).fit(X)
    assert np.array_equal(km.transform(X), km.transform(chunked(X)).compute())
    assert km.score(X) == km.score(chunked(X))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_kmeans_on_the_cluster_is_bitwise_the_single_process_fit(client, dtype):
    X = blobs(dtype=dtype)
    local = KMeans(6, random_state=3, n_init=2, max_iter=30).fit(X)
    fit = lambda: KMeans(6, random_state=3, n_init=2, max_iter=30).fit(chunked(X, 2 * CHUNK), client=client)
    dist, n_tasks = tasks_run(client, fit)
    assert n_tasks >= 2 * dist.n_iter_  # the iterations ran as tasks, one per chunk
    assert isinstance(dist.labels_, da.Array)
    same_kmeans(local, dist)
    assert dist.cluster_centers_.dtype == dtype


def test_unaligned_chunks_are_rechunked_and_weights_follow(client, X):
    w = np.random.default_rng(1).uniform(0.5, 2.0, len(X))
    local = KMeans(6, random_state=0, n_init=1).fit(X, sample_weight=w)
    dist = KMeans(6, random_state=0, n_init=1).fit(chunked(X, 50_000), sample_weight=w, client=client)
    same_kmeans(local, dist)
    dist = KMeans(6, random_state=0, n_init=1).fit(chunked(X, 50_000), sample_weight=da.from_array(w, chunks=70_000))
    same_kmeans(local, dist)


@pytest.mark.parametrize("covariance_type", ["full", "tied", "diag", "spherical"])
def test_gaussian_mixtures_on_the_cluster_are_bitwise_the_single_process_fit(client, X, covariance_type):
    kw = dict(n_components=4, covariance_type=covariance_type, random_state=0, max_iter=8)
    local = GaussianMixture(**kw).fit(X)
    dist, n_tasks = tasks_run(client, lambda: GaussianMixture(**kw).fit(chunked(X), client=client))
    assert n_tasks >= 4 * dist.n_iter_
    for name in ("weights_", "means_", "covariances_", "precisions_cholesky_"):
        assert np.array_equal(getattr(local, name), getattr(dist, name)), name
    assert local.lower_bounds_ == dist.lower_bounds_ and local.lower_bound_ == dist.lower_bound_
    dx = chunked(X)
    assert np.array_equal(local.predict(X), dist.predict(dx).compute())
    assert np.array_equal(local.predict_proba(X), dist.predict_proba(dx).compute())
    assert np.array_equal(local.score_samples(X), dist.score_samples(dx).compute())
    score, n_tasks = tasks_run(client, lambda: dist.score(dx))
    assert n_tasks == 4 and local.score(X) == score  # one E-step task per chunk
    assert local.bic(X) == dist.bic(dx) and local.aic(X) == dist.aic(dx)


def test_kernels_equal(client, X):
    dx = chunked(X, 100_000)
    w = np.linspace(0.1, 2.0, len(X))
    assert np.array_equal(weighted_scatter(X, w), weighted_scatter(dx, w, client=client))
    assert np.array_equal(weighted_scatter(X), weighted_scatter(dx))
    Q = np.random.default_rng(2).normal(size=(X.shape[1], X.shape[1]))
    q = row_quadratic_form(dx, Q)
    assert isinstance(q, da.Array) and np.array_equal(row_quadratic_form(X, Q), q.compute())
    centers = X[:7]
    labels, dist = assign(dx, centers)
    want = assign(X, centers)
    assert np.array_equal(want[0], labels.compute()) and np.array_equal(want[1], dist.compute())


def _reset_peak():
    """Resets this process's peak resident memory (VmHWM)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def _peak_rss():
    """This process's peak resident memory in bytes since the last reset
    (VmHWM; ``ru_maxrss`` would include a parent's peak)."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))


def test_workers_stay_within_their_limit(client):
    X = blobs(n=4 * CHUNK, d=48, seed=4)
    dx = client.persist(chunked(X))
    distributed.wait(dx)
    client.run(_reset_peak)
    gm = GaussianMixture(8, covariance_type="full", random_state=0, max_iter=3, memory_limit="4GiB")
    gm.fit(dx, client=client)
    peaks = client.run(_peak_rss)
    assert all(p <= WORKER_LIMIT for p in peaks.values()), peaks
    # Each task planned within memory_limit / nthreads × SAFETY of its worker.
    budget, limit, threads, _ = _dask.tightest_worker(client)
    assert (limit, threads) == (WORKER_LIMIT, 1) and budget == int(WORKER_LIMIT * _dask.SAFETY)


def test_a_plan_that_cannot_fit_a_worker_is_refused_before_any_task(client):
    # 40 full 800 × 800 factors and their sums: over 400 MiB, more than a
    # task's 384 MiB on these workers (but within the 8 GiB asked).
    X = blobs(n=3000, d=800, seed=5)
    gm = GaussianMixture(40, covariance_type="full", random_state=0, max_iter=2, memory_limit="8GiB",
                         init_params="random")
    with distributed.get_task_stream(client=client) as ts:
        with pytest.raises(MemoryError, match=r"Dask worker's memory_limit 805306368 B / nthreads 1"):
            gm.fit(chunked(X), client=client)
    assert not [t for t in ts.data if "_run_chunk" in str(t["key"])]


def test_a_killed_worker_costs_only_its_tasks():
    X = blobs(n=4 * CHUNK, d=6, seed=6)
    kw = dict(n_components=5, covariance_type="full", random_state=0, max_iter=12, tol=0.0)
    local = GaussianMixture(**kw).fit(X)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit=WORKER_LIMIT,
                                  dashboard_address=":0") as cluster, distributed.Client(cluster) as c:
        pids = list(c.run(os.getpid).values())
        calls = []
        original = _dask.Cluster.__call__

        def call(self, task, ranges):
            calls.append(1)
            if len(calls) == 4:  # mid-fit: while the 4th pass's tasks run
                threading.Timer(0.02, os.kill, (pids[0], signal.SIGKILL)).start()
            return original(self, task, ranges)

        _dask.Cluster.__call__ = call
        try:
            dist = GaussianMixture(**kw).fit(chunked(X), client=c)
        finally:
            _dask.Cluster.__call__ = original
        assert len(calls) > 4
        assert pids[0] not in c.run(os.getpid).values()  # the worker was killed
    assert np.array_equal(local.means_, dist.means_) and local.lower_bounds_ == dist.lower_bounds_


def test_a_nan_row_is_named_by_its_global_index(client, X):
    bad = X.copy()
    bad[2 * CHUNK + 17, 3] = np.nan
    with pytest.raises(ValueError) as local:
        KMeans(3, n_init=1).fit(bad)
    with pytest.raises(ValueError) as dist:
        KMeans(3, n_init=1).fit(chunked(bad), client=client)
    assert str(local.value) == str(dist.value) and str(2 * CHUNK + 17) in str(dist.value)
    km = KMeans(3, n_init=1).fit(X)
    with pytest.raises(ValueError) as local:
        km.predict(bad)
    with pytest.raises(ValueError) as dist:
        km.predict(chunked(bad)).compute()
    assert str(local.value) == str(dist.value) and str(2 * CHUNK + 17) in str(dist.value)


def test_bad_dask_inputs():
    with pytest.raises(ValueError, match="2D"):
        KMeans(2).fit(da.zeros(10, chunks=5))
    with pytest.raises(TypeError, match="distributed.Client"):
        KMeans(2, n_init=1).fit(da.from_array(blobs(n=100)), client="localhost:8786")
    X = da.from_array(blobs(n=100))
    unknown = X[X[:, 0] > 0]
    with pytest.raises(ValueError, match="compute_chunk_sizes"):
        KMeans(2).fit(unknown)
    # Other dtypes are converted lazily, as NumPy arrays are converted.
    ints = da.from_array((blobs(n=500) * 10).astype(np.int8))
    assert KMeans(2, n_init=1, random_state=0).fit(ints).cluster_centers_.dtype == np.float64
    assert memfit.KMeans  # the package imports without distributed, too (lazy imports)


def test_an_expression_over_a_npy_file_fits_on_the_cluster(client, X, tmp_path):
    import memfit.array as ma

    np.save(tmp_path / "x.npy", X)
    e = ma.from_npy(tmp_path / "x.npy")
    e = (e - e.mean(axis=0)) / e.std(axis=0)
    local = KMeans(5, random_state=0, n_init=1).fit(e)
    dist, n_tasks = tasks_run(client, lambda: KMeans(5, random_state=0, n_init=1).fit(e, client=client))
    assert n_tasks >= dist.n_iter_
    same_kmeans(local, dist)


def test_an_estimator_with_lazy_results_pickles(X):
    import pickle

    km = KMeans(3, n_init=1, random_state=0).fit(chunked(X[:1000], rows=300))
    again = pickle.loads(pickle.dumps(km))
    assert np.array_equal(again.labels_.compute(), km.labels_.compute())
    assert np.array_equal(pickle.loads(pickle.dumps(km.predict(chunked(X[:1000])))).compute(), km.labels_.compute())


def test_a_cluster_without_workers_or_a_closed_client_is_refused_before_reading():
    X = chunked(blobs(n=1000))
    with distributed.LocalCluster(n_workers=0, dashboard_address=":0") as cluster, distributed.Client(cluster) as c:
        with pytest.raises(RuntimeError, match="no workers"):
            KMeans(2, n_init=1).fit(X, client=c)  # used to wait forever for a chunk
        with pytest.raises(RuntimeError, match="no workers"):
            weighted_scatter(X, np.ones(1000), client=c)
    with pytest.raises(RuntimeError, match="client is closed"):
        KMeans(2, n_init=1).fit(X, client=c)


def _error(f):
    with pytest.raises(Exception) as e:
        f()
    return type(e.value), str(e.value)


def test_dask_inputs_are_checked_as_numpy_inputs():
    X = blobs(n=1000)
    for bad in (X[:, 0], X.reshape(10, 100, 5), X.astype(np.complex128)):
        assert _error(lambda: KMeans(2).fit(da.from_array(bad))) == _error(lambda: KMeans(2).fit(bad))
    # Object arrays of numbers are converted, as NumPy ones are.
    a = KMeans(2, n_init=1, random_state=0).fit(X.astype(object))
    b = KMeans(2, n_init=1, random_state=0).fit(chunked(X.astype(object), rows=300))
    assert np.array_equal(a.cluster_centers_, b.cluster_centers_)


def test_sample_weight_of_a_dask_x_is_checked_as_for_a_numpy_x():
    X = blobs(n=1000)
    dx = chunked(X, rows=300)
    ones = np.ones(1000)
    nan = ones.copy()
    nan[999] = np.nan
    for w in (ones.astype(np.complex128), ones.reshape(-1, 1), nan, np.zeros(1000), ones[:999]):
        assert _error(lambda: KMeans(2, n_init=1).fit(dx, sample_weight=w)) == \
            _error(lambda: KMeans(2, n_init=1).fit(X, sample_weight=w))
    for w in (ones.astype(np.complex128), ones.reshape(-1, 1)):
        assert _error(lambda: KMeans(2, n_init=1).fit(dx, sample_weight=da.from_array(w, chunks=77))) == \
            _error(lambda: KMeans(2, n_init=1).fit(X, sample_weight=w))
    # A list, as for a NumPy X (it used to raise AttributeError).
    a = KMeans(2, n_init=1, random_state=0).fit(X, sample_weight=list(range(1, 1001)))
    b = KMeans(2, n_init=1, random_state=0).fit(dx, sample_weight=list(range(1, 1001)))
    assert np.array_equal(a.cluster_centers_, b.cluster_centers_) and a.inertia_ == b.inertia_
