"""Exact answers (issue 9): nearest centres far from the origin (case N1), centres that are
the float64 means of their rows rounded once (case N3), and a summary inertia that agrees with
the written centres and labels. Expected values come from float64 brute force in NumPy."""

import json

import numpy as np
import pytest

from conftest import fit, inertia, rel_err, run_memfit, save

N1_X = np.array([[1e4, .002], [1e4, .008], [-1e4, .002], [-1e4, .008], [10000.5, .002],
                 [-9999.25, .008]], dtype=np.float32)
N1_CENTERS = np.array([[1e4, 0], [1e4, .01], [-1e4, 0], [-1e4, .01]])


def nearest(X, centers):
    """Labels and squared distances by float64 differences to every centre (first minimum)."""
    X = np.asarray(X, dtype=np.float64)
    C = np.asarray(centers, dtype=np.float64)
    sq = ((X[:, None, :] - C[None, :, :]) ** 2).sum(axis=2)
    labels = sq.argmin(axis=1)
    return labels, sq[np.arange(len(X)), labels]


def predict(tmp_path, X, centers, *extra):
    x_path, c_path = save(tmp_path, "X.npy", X), save(tmp_path, "C.npy", centers)
    out = tmp_path / "labels.npy"
    run_memfit("predict", x_path, "--centers", c_path, "--labels", out, "--quiet", *extra)
    return np.load(out)


def geographic(n=20_000, seed=0):
    """Longitude/latitude in float32: 100 centres about a kilometre apart in Manhattan."""
    rng = np.random.default_rng(seed)
    grid = np.stack(np.meshgrid(np.arange(10), np.arange(10)), -1).reshape(-1, 2) * 0.01
    centres = np.array([-74.0, 40.70]) + grid
    X = centres[rng.integers(0, 100, n)] + rng.normal(0, 0.004, (n, 2))
    return X.astype(np.float32), centres


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_n1_predict_far_from_origin(tmp_path, dtype):
    assert predict(tmp_path, N1_X, N1_CENTERS, "--dtype", dtype).tolist() == [0, 1, 2, 3, 0, 3]


@pytest.mark.parametrize("width", [2, 20])  # the direct kernel and the GEMM path
def test_n1_float64_offset_1e6(tmp_path, width):
    rng = np.random.default_rng(1)
    n = 4000
    X = np.zeros((n, width))
    X[:, 0] = np.where(np.arange(n) % 2 == 0, 1e6, -1e6) + rng.uniform(-1, 1, n)
    X[:, 1] = rng.choice([.002, .008], n)
    C = np.zeros((4, width))
    C[:, :2] = [[1e6, 0], [1e6, .01], [-1e6, 0], [-1e6, .01]]
    want = (X[:, 0] < 0) * 2 + (X[:, 1] > .005)
    labels = predict(tmp_path, X, C)
    np.testing.assert_array_equal(labels, want)
    np.testing.assert_array_equal(labels, nearest(X, C)[0])


def test_n1_geographic_float32_predict(tmp_path):
    X, centres = geographic()
    labels = predict(tmp_path, X, centres, "--dtype", "float32")
    np.testing.assert_array_equal(labels, nearest(X, centres)[0])


def test_n1_geographic_float32_fit(tmp_path):
    """Fit labels are the exact nearest written centres; inertia and centres agree with them."""
    X, _ = geographic()
    m = fit(tmp_path, X, 100, seed=0, max_iter=30, dtype="float32")
    assert m.centers.dtype == np.float32
    labels, sq = nearest(X, m.centers)
    np.testing.assert_array_equal(m.labels, labels)
    assert rel_err(m.summary["inertia"], sq.sum()) <= 1e-12
    if m.summary["converged"]:
        # Converged: each centre is its rows' float64 mean, rounded once to float32.
        used = np.unique(m.labels)
        sums = np.zeros((100, 2))
        np.add.at(sums, m.labels, X.astype(np.float64))
        means = (sums[used] / np.bincount(m.labels, minlength=100)[used, None]).astype(np.float32)
        np.testing.assert_array_equal(m.centers[used], means)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_n3_identical_points_are_their_own_centres(tmp_path, dtype):
    pts = np.array([[1.0, 0.0], [0.1, -3.3], [1e4 + 0.5, 7.0]], dtype=np.float32)
    X = np.repeat(pts, [50, 60, 70], axis=0).astype(dtype)
    m = fit(tmp_path, X, 3, seed=0, dtype=dtype)
    order = np.argsort(m.centers[:, 0])
    np.testing.assert_array_equal(m.centers[order], pts[np.argsort(pts[:, 0])].astype(dtype))
    assert m.summary["inertia"] == 0.0


def test_n3_summary_inertia_matches_written_centres(tmp_path):
    rng = np.random.default_rng(3)
    X = (rng.normal(size=(5000, 3)) * 10 + 1e3).astype(np.float32)
    for dtype in ["float32", "float64"]:
        m = fit(tmp_path, X, 7, tag=dtype, seed=0, dtype=dtype)
        assert rel_err(m.summary["inertia"], inertia(X, m.centers, m.labels)) <= 1e-12
        np.testing.assert_array_equal(m.labels, nearest(X, m.centers)[0])


def test_cli_algorithms_give_the_same_bits_and_report_skipped_distances(tmp_path, memfit):
    # issue 24: --algorithm auto|lloyd|bounded (elkan an alias of bounded).
    rng = np.random.default_rng(24)
    X = np.concatenate([rng.normal(size=(4000, 8)) + 6 * c for c in range(10)])
    x, init = save(tmp_path, "x.npy", X), save(tmp_path, "init.npy", X[::4000][:10] + 0.5)
    got = {}
    for algorithm in ["lloyd", "bounded", "elkan", "auto"]:
        labels, summary = tmp_path / f"{algorithm}.labels.npy", tmp_path / f"{algorithm}.json"
        memfit("kmeans", x, "-k", 10, "--init", init, "--tol", 0, "--algorithm", algorithm,
               "--labels", labels, "--summary", summary)
        s = json.loads(summary.read_text())
        got[algorithm] = (np.load(labels), s)
        assert len(s["skip_share"]) == s["n_iter"]
    lloyd_labels, lloyd = got.pop("lloyd")
    assert lloyd["mean_skip_share"] == 0 and lloyd["algorithm"] == "lloyd"
    for algorithm, (labels, s) in got.items():
        np.testing.assert_array_equal(labels, lloyd_labels)
        assert (s["inertia"], s["n_iter"]) == (lloyd["inertia"], lloyd["n_iter"]), algorithm
    assert got["bounded"][1]["algorithm"] == "bounded" and got["elkan"][1]["algorithm"] == "bounded"
    assert max(got["bounded"][1]["skip_share"]) > 0.3
    memfit("kmeans", x, "-k", 10, "--algorithm", "hamerly", expect=2)
