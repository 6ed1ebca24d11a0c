"""Parity with scikit-learn's KMeans (Lloyd, one init) from the same initial centres."""

import numpy as np
import pytest
from sklearn.cluster import KMeans, kmeans_plusplus
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score

from conftest import dataset, fit, inertia, rel_err


def blobs():
    X, _ = make_blobs(200_000, n_features=3, centers=50, random_state=0)
    return X


# name -> (loader, k, options, labels must match exactly)
PARITY = {
    "blobs_200k": (blobs, 50, {}, True),
    "sipu_s1": (lambda: dataset("bench_sipu_s1_X.npy"), 15, {}, True),
    "sipu_a1": (lambda: dataset("bench_sipu_a1_X.npy"), 20, {}, True),
    "uci_wine": (lambda: dataset("bench_uci_wine_X.npy"), 3, {}, True),
    # real data with ties: labels may differ only where two centres are equally near
    "flights_200k": (lambda: dataset("flights3m_f64.npy", 200_000), 200,
                     {"max_iter": 20, "tol": 0.0}, False),
    "mnist_10k": (lambda: dataset("mnist_X_uint8.npy", 10_000), 10,
                  {"max_iter": 10, "dtype": "float64"}, False),
}


def sklearn_fit(X, init, max_iter=300, tol=1e-4, sample_weight=None):
    km = KMeans(len(init), init=init, n_init=1, max_iter=max_iter, tol=tol, algorithm="lloyd")
    return km.fit(X, sample_weight=sample_weight)


def initial_centres(X, k, seed=0):
    return kmeans_plusplus(X, k, random_state=seed)[0]


def assert_same_labels_up_to_ties(X, centers, got, want, rtol=1e-9):
    """Labels differ only where both centres are equally near (within rtol)."""
    diff = np.flatnonzero(got != want)
    if diff.size:
        d = lambda lab: ((X[diff] - centers[lab[diff]]) ** 2).sum(axis=1)
        not_tie = np.abs(d(got) - d(want)) > rtol * np.maximum(d(want), 1.0)
        assert not not_tie.any(), f"{diff.size} labels differ, {not_tie.sum()} not ties"


@pytest.mark.parametrize("name", PARITY)
def test_parity_float64(tmp_path, name):
    load, k, opts, exact_labels = PARITY[name]
    X = load().astype(np.float64)
    init = initial_centres(X, k)
    m = fit(tmp_path, X, k, init=init, **opts)
    sk = sklearn_fit(X, init, max_iter=opts.get("max_iter", 300), tol=opts.get("tol", 1e-4))

    assert m.centers.dtype == np.float64
    assert m.summary["n_iter"] == sk.n_iter_
    assert rel_err(m.summary["inertia"], sk.inertia_) <= 1e-9
    assert np.abs(m.centers - sk.cluster_centers_).max() <= 1e-9 * np.abs(X).max()
    if exact_labels:
        np.testing.assert_array_equal(m.labels, sk.labels_)
    else:
        assert_same_labels_up_to_ties(X, m.centers, m.labels, sk.labels_)


def test_parity_float32_inertia(tmp_path):
    X = blobs().astype(np.float32)
    init = initial_centres(X.astype(np.float64), 50)
    m = fit(tmp_path, X, 50, init=init.astype(np.float32))
    sk = sklearn_fit(X.astype(np.float64), init)
    assert m.centers.dtype == np.float32
    assert rel_err(m.summary["inertia"], sk.inertia_) <= 1e-5


@pytest.fixture(scope="module")
def weighted():
    X, _ = make_blobs(4000, n_features=2, centers=8, random_state=1)
    w = np.random.default_rng(1).integers(1, 4, len(X))
    return X, w, initial_centres(X, 8)


def test_parity_sample_weight_equals_repeated_rows(tmp_path, weighted):
    X, w, init = weighted
    # tol = 0: both run to strict convergence, so the tolerance's (unweighted)
    # variance, which differs between X and repeated X, plays no part
    m = fit(tmp_path, X, 8, init=init, sample_weight=w.astype(np.float64), tol=0.0)
    sk = sklearn_fit(np.repeat(X, w, axis=0), init, tol=0.0)
    assert m.summary["n_iter"] == sk.n_iter_
    assert rel_err(m.summary["inertia"], sk.inertia_) <= 1e-9
    assert rel_err(m.summary["inertia"], inertia(X, m.centers, m.labels, w)) <= 1e-9
    assert np.abs(m.centers - sk.cluster_centers_).max() <= 1e-9 * np.abs(X).max()
    np.testing.assert_array_equal(np.repeat(m.labels, w), sk.labels_)


def test_parity_sample_weight_default_tol(tmp_path, weighted):
    X, w, init = weighted
    m = fit(tmp_path, X, 8, init=init, sample_weight=w.astype(np.float64))
    sk = sklearn_fit(X, init, sample_weight=w)
    assert m.summary["n_iter"] == sk.n_iter_
    assert rel_err(m.summary["inertia"], sk.inertia_) <= 1e-9
    np.testing.assert_array_equal(m.labels, sk.labels_)


@pytest.mark.parametrize("name,k", [("s1", 15), ("a1", 20)])
def test_ari_kmeanspp_recovers_ground_truth(tmp_path, name, k, record_property):
    X = dataset(f"bench_sipu_{name}_X.npy")
    y = dataset(f"bench_sipu_{name}_y.npy")
    m = fit(tmp_path, X, k, init="k-means++", n_init=5, seed=0)
    ari = adjusted_rand_score(y, m.labels)
    record_property("ari", ari)
    print(f"{name}: ARI {ari:.4f}, inertia {m.summary['inertia']:.6g}")
    assert len(m.summary["inertia_per_init"]) == 5
    assert m.summary["inertia"] == min(m.summary["inertia_per_init"])
    assert ari > 0.9


def test_mini_batch_defaults_are_minibatchkmeans(tmp_path):
    """With --mini-batch, --max-iter defaults to MiniBatchKMeans's 100 (it
    was k-means' 300: helper 138) and --tol to 0: at most 100 × n / SIZE
    steps, then the labels pass."""
    X = np.random.default_rng(0).standard_normal((2000, 3))
    out = fit(tmp_path, X, 5, mini_batch=256, max_no_improvement=0)
    assert out.summary["n_iter"] == 100 and out.summary["n_steps"] == 100 * 2000 // 256
    assert out.summary["tol_abs"] == 0.0
