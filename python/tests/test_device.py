"""``device`` and ``device_memory_limit`` of the estimators on a machine
without CUDA (CI's): the CPU is the default and unchanged, a CUDA device is
refused before any work with a RuntimeError that says why, and bad values
raise as scikit-learn's parameters do."""

import numpy as np
import pytest

from memfit import GaussianMixture, KMeans
from sklearn.base import clone


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
