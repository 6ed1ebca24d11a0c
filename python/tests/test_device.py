"""``device`` and ``device_memory_limit`` of the estimators on a machine
without CUDA (CI's): the CPU is the default and unchanged, a CUDA device is
refused before any work with a RuntimeError that says why, and bad values
raise as scikit-learn's parameters do.

With ``MEMFIT_HAS_CUDA_DRIVER=1`` (``bench/device_run.sh``, on a machine
with an NVIDIA GPU and memfit built with its ``cuda`` feature) the tests
named ``on_a_cuda_device`` run the estimators there and compare them with
the CPU's fits; the others, which expect no driver, are skipped."""

import os

import numpy as np
import pytest

from memfit import GaussianMixture, KMeans
from sklearn.base import clone


HAS_GPU = os.environ.get("MEMFIT_HAS_CUDA_DRIVER", "") not in ("", "0")
no_driver = pytest.mark.skipif(HAS_GPU, reason="expects a machine without a CUDA driver")
on_gpu = pytest.mark.skipif(not HAS_GPU, reason="needs an NVIDIA GPU (MEMFIT_HAS_CUDA_DRIVER=1)")


@pytest.fixture(scope="module")
def X():
    return np.random.default_rng(0).normal(size=(2000, 3))


def test_the_cpu_is_the_default_and_gives_the_same_fit(X):
    a = KMeans(4, random_state=0, n_init=1).fit(X)
    b = KMeans(4, random_state=0, n_init=1, device="cpu").fit(X)
    assert np.array_equal(a.cluster_centers_, b.cluster_centers_) and a.inertia_ == b.inertia_
    assert KMeans().get_params()["device"] == "cpu" and KMeans().get_params()["device_memory_limit"] is None
    assert clone(KMeans(device="cuda:1", device_memory_limit="1GiB")).get_params()["device"] == "cuda:1"
    g = GaussianMixture(2, random_state=0, device="cpu").fit(X)
    assert np.isfinite(g.lower_bound_)


@no_driver
@pytest.mark.parametrize("device", ["cuda", "cuda:0", "CUDA:1"])
def test_a_cuda_device_without_a_driver_is_refused_before_any_work(X, device):
    for est in (KMeans(3, device=device), GaussianMixture(2, device=device)):
        with pytest.raises(RuntimeError, match=r"^cuda:\d: cannot be used: .*; hint: use device='cpu'$") as e:
            est.fit(X)
        assert "built without CUDA support" in str(e.value) or "no CUDA driver library" in str(e.value)
        assert not hasattr(est, "labels_") and not hasattr(est, "means_")
    # A fitted estimator moved to a device refuses predict and transform alike.
    km = KMeans(3, n_init=1, random_state=0).fit(X).set_params(device=device)
    for method in (km.predict, km.transform, km.score):
        with pytest.raises(RuntimeError, match="cannot be used"):
            method(X)


def test_bad_device_values_raise_before_any_work(X):
    with pytest.raises(ValueError, match=r"invalid device: must be 'cpu', 'cuda' or 'cuda:N'"):
        KMeans(3, device="gpu").fit(X)
    with pytest.raises(TypeError, match="device must be a str"):
        KMeans(3, device=0).fit(X)
    with pytest.raises(ValueError, match=r"device_memory_limit needs device='cuda'"):
        KMeans(3, device_memory_limit="1GiB").fit(X)
    with pytest.raises(ValueError, match="device_memory_limit must be a positive number of bytes"):
        GaussianMixture(2, device="cuda", device_memory_limit=0).fit(X)
    # A malformed size is named as the parameter it was given to.
    for est in (KMeans(3, device="cuda", device_memory_limit="abc"), GaussianMixture(2, device="cuda", device_memory_limit="1e")):
        with pytest.raises(ValueError, match=r"^invalid device_memory_limit: "):
            est.fit(X)
    # Ordinals are digits, and a long name is quoted cut.
    with pytest.raises(ValueError, match=r"invalid device: .* got 'cuda:\+1'|invalid device: .* got \"cuda:\+1\""):
        KMeans(3, device="cuda:+1").fit(X)
    with pytest.raises(ValueError) as e:
        KMeans(3, device="cuda:" + "9" * 5000).fit(X)
    assert len(str(e.value)) < 300 and str(e.value).endswith("…")


@no_driver
def test_a_dask_input_is_refused_on_a_device_as_numpy_is(X):
    da = pytest.importorskip("dask.array")
    dX = da.from_array(X, chunks=500)
    km = KMeans(3, n_init=1, random_state=0).fit(X).set_params(device="cuda")
    g = GaussianMixture(2, random_state=0).fit(X).set_params(device="cuda")
    for method in (km.predict, km.transform, km.score, g.predict, g.predict_proba, g.score_samples, g.score):
        with pytest.raises(RuntimeError, match="cannot be used"):
            method(dX)
    for est in (KMeans(3, device="cuda"), GaussianMixture(2, device="cuda")):
        with pytest.raises(RuntimeError, match="cannot be used"):
            est.fit(dX)


def test_sizes_are_quoted_cut_and_bounded_as_the_engine_bounds_them(X):
    with pytest.raises(ValueError, match=r"^invalid device_memory_limit: no number in \"x{40}\"…") as e:
        KMeans(3, device="cuda", device_memory_limit="x" * 10_000).fit(X)
    assert len(str(e.value)) < 300
    for est, name in ((KMeans(3, memory_limit=2**63), "memory_limit"),
                      (KMeans(3, device="cuda", device_memory_limit=2**63), "device_memory_limit")):
        with pytest.raises(ValueError, match=rf"{name} must be a positive number of bytes below 2\*\*63"):
            est.fit(X)


def _blobs(n, d, k, seed):
    rng = np.random.default_rng(seed)
    centers = rng.uniform(-10, 10, size=(k, d))
    return centers[rng.integers(k, size=n)] + rng.normal(size=(n, d))


@on_gpu
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_kmeans_on_a_cuda_device_has_the_cpus_bits(dtype):
    X = _blobs(300_000, 6, 40, 1).astype(dtype)
    init = X[::7500][:40].astype(np.float64)
    for algorithm in ("lloyd", "auto"):
        common = dict(n_clusters=40, init=init, n_init=1, max_iter=25, tol=0, algorithm=algorithm)
        cpu = KMeans(**common).fit(X)
        gpu = KMeans(**common, device="cuda", device_memory_limit="64MiB").fit(X)
        assert "cuda" in gpu.memory_plan_ and "= 67108864 bytes" in gpu.memory_plan_, gpu.memory_plan_
        assert np.array_equal(cpu.labels_, gpu.labels_)
        assert np.array_equal(cpu.cluster_centers_, gpu.cluster_centers_) and cpu.cluster_centers_.dtype == dtype
        assert cpu.inertia_ == gpu.inertia_ and cpu.n_iter_ == gpu.n_iter_
        Y = X[:50_000] + dtype(0.25)
        assert np.array_equal(cpu.predict(Y), gpu.predict(Y)) and cpu.score(Y) == gpu.score(Y)
    # A weighted fit, and the default device limit (90 % of the device).
    w = np.random.default_rng(2).uniform(0.5, 2.0, size=len(X))
    cpu = KMeans(40, init=init, n_init=1, max_iter=10).fit(X, sample_weight=w)
    gpu = KMeans(40, init=init, n_init=1, max_iter=10, device="cuda").fit(X, sample_weight=w)
    assert np.array_equal(cpu.labels_, gpu.labels_) and cpu.inertia_ == gpu.inertia_


@on_gpu
@pytest.mark.parametrize("covariance_type", ["full", "tied", "diag", "spherical"])
def test_a_gaussian_mixture_on_a_cuda_device_is_the_cpus_to_rounding(covariance_type):
    X = _blobs(100_000, 8, 6, 3)
    common = dict(n_components=6, covariance_type=covariance_type, max_iter=15, tol=0, random_state=0)
    cpu = GaussianMixture(**common).fit(X)
    gpu = GaussianMixture(**common, device="cuda", device_memory_limit="64MiB").fit(X)
    assert "cuda" in gpu.memory_plan_
    assert gpu.n_iter_ == cpu.n_iter_
    assert abs(gpu.lower_bound_ - cpu.lower_bound_) <= 1e-9 * abs(cpu.lower_bound_)
    np.testing.assert_allclose(gpu.means_, cpu.means_, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(gpu.weights_, cpu.weights_, rtol=1e-9)
    np.testing.assert_allclose(gpu.precisions_cholesky_, cpu.precisions_cholesky_, rtol=1e-7, atol=1e-9)
    assert np.array_equal(gpu.predict(X), cpu.predict(X))
    np.testing.assert_allclose(gpu.score_samples(X[:1000]), cpu.score_samples(X[:1000]), rtol=1e-10, atol=1e-10)
    # float32 rows: the same fit in float32 arithmetic on the host's side.
    X32 = X.astype(np.float32)
    a = GaussianMixture(**common).fit(X32)
    b = GaussianMixture(**common, device="cuda").fit(X32)
    assert abs(a.lower_bound_ - b.lower_bound_) <= 1e-5 * abs(a.lower_bound_)


@on_gpu
def test_a_fit_on_a_dask_cluster_is_refused_on_a_cuda_device(X):
    distributed = pytest.importorskip("distributed")
    da = pytest.importorskip("dask.array")
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=1) as client:
        with pytest.raises(RuntimeError, match="on a Dask cluster"):
            KMeans(3, device="cuda").fit(da.from_array(X, chunks=500), client=client)
