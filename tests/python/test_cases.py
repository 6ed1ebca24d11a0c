"""Failure cases from ../shared/cases.md, one test (or family) per case id, scaled to run fast."""

import re

import numpy as np
import pytest

from conftest import (MiB, RSS_SLACK, assert_centres_are_means, fit, inertia, only_files,
                      rel_err, save)

# ---------------------------------------------------------------- C01


@pytest.fixture(scope="module")
def c01_data(tmp_path_factory):
    X = np.random.default_rng(9943).uniform(0, 5, (50_000, 2))
    return X, save(tmp_path_factory.mktemp("c01"), "X.npy", X)


C01 = dict(max_iter=10, memory_limit="64MiB", threads=2, seed=0)


def check_c01_fit(X, m, limit=64 * MiB):
    assert m.summary["peak_rss_bytes"] <= limit + RSS_SLACK
    assert m.summary["plan"]["total_bytes"] <= limit
    assert rel_err(m.summary["inertia"], inertia(X, m.centers, m.labels)) <= 1e-9


def test_c01_large_k_one_init(tmp_path, c01_data):
    X, path = c01_data
    m = fit(tmp_path, path, 1000, **C01)
    check_c01_fit(X, m)
    # Lloyd as in scikit-learn: the centres after iteration 10 are the means of
    # the assignment to the centres of iteration 9, which is exactly the final
    # labelling of the same fit stopped at max_iter = 9 (this fit did not
    # converge, so its own final relabelling may differ from that assignment).
    assert not m.summary["converged"]
    prev = fit(tmp_path, path, 1000, tag="prev", **{**C01, "max_iter": 9})
    assert_centres_are_means(X, m.centers, prev.labels, rtol=1e-9)


def test_c01_large_k_four_inits(tmp_path, c01_data):
    X, path = c01_data
    m = fit(tmp_path, path, 1000, n_init=4, **C01)
    check_c01_fit(X, m)
    per_init = m.summary["inertia_per_init"]
    assert len(per_init) == 4 and m.summary["inertia"] == min(per_init)


# ---------------------------------------------------------------- C09

C09_POINTS = np.array([(0, 0), (1, 0), (0, 1), (100, 100), (101, 100), (100, 101),
                       (500, 0), (501, 0), (500, 1)], dtype=np.float64)
C09_X = np.repeat(C09_POINTS, [3, 2, 2, 2, 2, 2, 2, 1, 1], axis=0)  # 17 rows


@pytest.mark.parametrize("init", ["k-means++", "random"])
def test_c09a_more_clusters_than_distinct_points(tmp_path, init):
    m = fit(tmp_path, C09_X, 10, init=init, n_init=5)
    assert re.search(r"warning: .*distinct clusters", m.proc.stderr), m.proc.stderr
    assert any("distinct" in w for w in m.summary["warnings"])
    assert m.summary["inertia"] <= 1e-20
    assert m.summary["n_nonempty_clusters"] <= 9
    used = np.unique(m.labels)
    assert m.summary["n_nonempty_clusters"] == len(used)
    assert len(np.unique(m.centers[used].round(9), axis=0)) == len(used)


def sort_rows(a):
    return a[np.lexsort(a.round().T[::-1])]


@pytest.mark.parametrize("seed", range(20))
def test_c09b_kmeanspp_finds_the_nine_distinct_points(tmp_path, seed):
    m = fit(tmp_path, C09_X, 9, init="k-means++", seed=seed)
    np.testing.assert_allclose(sort_rows(m.centers), sort_rows(C09_POINTS), rtol=0, atol=1e-12)
    assert m.summary["inertia"] <= 1e-20


def test_c09c_more_clusters_than_samples(tmp_path, memfit):
    path = save(tmp_path, "X.npy", np.arange(6, dtype=np.float32).reshape(2, 3))
    proc = memfit("kmeans", path, "--n-clusters", 8, "--labels", tmp_path / "l.npy",
                  "--centers", tmp_path / "c.npy", "--summary", tmp_path / "s.json",
                  "--plot", tmp_path / "p.png", expect=2)
    assert "n_clusters" in proc.stderr
    only_files(tmp_path, ["X.npy"])


# ---------------------------------------------------------------- C14


@pytest.fixture(scope="module")
def c14_data(tmp_path_factory):
    # the report's data: RandomState(51220), z^7; scikit-learn 1.9.1 reaches a
    # mean squared distance of 1381.4268 from init = first 100 rows
    X = np.random.RandomState(51220).normal(size=(1200, 2)) ** 7
    return X, save(tmp_path_factory.mktemp("c14"), "X.npy", X)


C14_RUNS = {"default": {}, "limit_1MiB": {"memory_limit": "1MiB"},
            "threads_1": {"threads": 1}, "threads_2": {"threads": 2}}


def test_c14_empty_clusters_same_result_for_every_strategy(tmp_path, c14_data):
    X, path = c14_data
    fits = {name: fit(tmp_path, path, 100, tag=name, init=X[:100], tol=0.0, max_iter=1000, **o)
            for name, o in C14_RUNS.items()}
    ref = fits["default"]
    assert abs(ref.summary["inertia"] / len(X) - 1381.4268) < 1e-4
    for name, m in fits.items():
        assert m.summary["converged"], name
        assert np.isfinite(m.centers).all(), name
        np.testing.assert_array_equal(m.labels, ref.labels, err_msg=name)
        assert_centres_are_means(X, m.centers, m.labels, rtol=1e-12)
        assert rel_err(m.summary["inertia"], inertia(X, m.centers, m.labels)) <= 1e-12
        assert m.summary["n_nonempty_clusters"] == len(np.unique(m.labels))


# ---------------------------------------------------------------- C15


def test_c15_float16_large_values_terminate(tmp_path):
    X = np.random.default_rng(8607).uniform(0, 1000, (1024, 16)).astype(np.float16)
    # tol = 0: stop only on strict convergence, so centres are means of the final labels
    m = fit(tmp_path, X, 4, max_iter=50, tol=0.0, timeout=60)
    assert m.summary["n_iter"] <= 50 and m.summary["converged"]
    # float32 passes (exact for float16 values), float64 centres (Python's).
    assert m.summary["compute_dtype"] == "float32" and m.centers.dtype == np.float64
    assert np.isfinite(m.centers).all()
    assert (m.centers >= 0).all() and (m.centers <= 1000).all()
    assert_centres_are_means(X, m.centers, m.labels, rtol=0, atol=0.5)
    assert m.summary["n_nonempty_clusters"] == 4


def test_c15_float16_pixels(tmp_path):
    X = np.random.default_rng(4545).integers(0, 256, (200_000, 3)).astype(np.float16)
    m = fit(tmp_path, X, 4)
    assert np.isfinite(m.centers).all()
    assert (m.centers >= 0).all() and (m.centers <= 255).all()


# ---------------------------------------------------------------- R1


def test_r1_nan_and_inf_rejected(tmp_path, memfit):
    path = tmp_path / "X.npy"
    memfit("generate", "blobs", "--n-samples", 200_000, "--n-features", 8, "--centers", 8,
           "--seed", 2050, "--dtype", "float32", "--out", path)
    X = np.load(path)
    X[123_456, 5] = np.nan
    X[154_321, 2] = np.inf
    np.save(path, X)
    proc = memfit("kmeans", path, "--n-clusters", 8, "--quiet", "--labels", tmp_path / "l.npy",
                  "--centers", tmp_path / "c.npy", "--summary", tmp_path / "s.json", expect=2)
    err = proc.stderr
    assert "123456" in err and re.search(r"column\D{0,3}5\b", err), err
    assert re.search(r"\b2\b", err.replace("123456", "")), err
    only_files(tmp_path, ["X.npy"])
