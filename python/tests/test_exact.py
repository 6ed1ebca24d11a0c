"""Exact answers from the Python package (issue 9): nearest centres far from the origin (case
N1), transform consistent with predict, centres that are their rows' float64 means rounded once
(case N3). Expected values come from float64 brute force in NumPy."""

import numpy as np
import pytest
from numpy.testing import assert_array_equal

import memfit
from memfit import KMeans

N1_X = np.array([[1e4, .002], [1e4, .008], [-1e4, .002], [-1e4, .008], [10000.5, .002],
                 [-9999.25, .008]], dtype=np.float32)
N1_CENTERS = np.array([[1e4, 0], [1e4, .01], [-1e4, 0], [-1e4, .01]])


def sq_distances(X, centers):
    X = np.asarray(X, dtype=np.float64)
    return ((X[:, None, :] - np.asarray(centers, dtype=np.float64)[None]) ** 2).sum(axis=2)


def fitted(centers, n_features):
    """A KMeans whose centres are `centers` (fitted on them, then set)."""
    km = KMeans(n_clusters=len(centers), init=centers, n_init=1, max_iter=1).fit(centers)
    km.cluster_centers_ = centers
    return km


def test_n1_assign_and_predict_float32():
    labels, dist = memfit.assign(N1_X, N1_CENTERS)
    assert labels.tolist() == [0, 1, 2, 3, 0, 3]
    assert_array_equal(dist, sq_distances(N1_X, N1_CENTERS).min(axis=1))
    km = fitted(N1_CENTERS.astype(np.float32), 2)
    assert km.predict(N1_X).tolist() == [0, 1, 2, 3, 0, 3]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_predict_and_transform_far_from_origin(dtype):
    rng = np.random.default_rng(0)
    grid = np.stack(np.meshgrid(np.arange(8), np.arange(8)), -1).reshape(-1, 2) * 0.01
    centres = (np.array([-74.0, 40.70]) + grid).astype(dtype)
    X = (centres[rng.integers(0, 64, 5000)] + rng.normal(0, 0.004, (5000, 2))).astype(dtype)
    km = fitted(centres, 2)
    sq = sq_distances(X, centres)
    labels = km.predict(X)
    assert_array_equal(labels, sq.argmin(axis=1))
    T = km.transform(X)
    assert T.dtype == dtype
    assert_array_equal(T.argmin(axis=1), labels)
    np.testing.assert_allclose(T, np.sqrt(sq), rtol=1e-6 if dtype == np.float32 else 1e-13)
    assert -km.score(X) == pytest.approx(sq.min(axis=1).sum(), rel=1e-12)


def test_exact_nearest_when_a_far_centre_overflows_the_identity():
    labels, dist = memfit.assign(np.zeros((4, 2)), np.array([[1e160, 0.0], [0.0, 0.0]]))
    assert labels.tolist() == [1, 1, 1, 1] and dist.tolist() == [0.0] * 4


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_n3_identical_points_give_themselves(dtype):
    pts = np.array([[1.0, 0.0], [0.1, -3.3], [1e4 + 0.5, 7.0]], dtype=np.float32).astype(dtype)
    X = np.repeat(pts, [50, 60, 70], axis=0)
    km = KMeans(n_clusters=3, random_state=0).fit(X)
    order = np.argsort(km.cluster_centers_[:, 0])
    assert km.cluster_centers_.dtype == dtype
    assert_array_equal(km.cluster_centers_[order], pts[np.argsort(pts[:, 0])])
    assert km.inertia_ == 0.0


def test_centres_are_float64_means_rounded_once_and_inertia_agrees():
    rng = np.random.default_rng(5)
    X = (rng.normal(size=(4000, 3)) + 1e3).astype(np.float32)
    km = KMeans(n_clusters=6, random_state=0, tol=0).fit(X)
    assert km.n_iter_ < km.max_iter  # converged: the centres are the means of the final labels
    sums = np.zeros((6, 3))
    np.add.at(sums, km.labels_, X.astype(np.float64))
    means = sums / np.bincount(km.labels_, minlength=6)[:, None]
    assert_array_equal(km.cluster_centers_, means.astype(np.float32))
    sq = sq_distances(X, km.cluster_centers_)
    assert_array_equal(km.labels_, sq.argmin(axis=1))
    assert km.inertia_ == pytest.approx(sq.min(axis=1).sum(), rel=1e-12)


def test_float32_centres_round_the_exact_mean_once():
    # The weighted mean of 1 and 1 + 2^-23 with weights 1 and 1 + 2^-40 lies
    # just above the float32 midpoint 1 + 2^-24; float64 rounds it onto the
    # midpoint, so rounding the float64 mean to float32 (ties to even) gives
    # 1.0 while the mean rounded once gives 1 + 2^-23.
    X = np.array([[1.0], [1.0 + 2.0**-23]], dtype=np.float32)
    w = np.array([1.0, 1.0 + 2.0**-40])
    exact = (1.0 + w[1] * (1.0 + 2.0**-23)) / w.sum()
    assert np.float32(exact) == 1.0  # rounded twice (else the test proves nothing)
    km = KMeans(n_clusters=1, init=X[:1], n_init=1).fit(X, sample_weight=w)
    assert km.cluster_centers_.tolist() == [[np.float32(1.0 + 2.0**-23)]]
    km = KMeans(n_clusters=1, init=X[:1], n_init=1).fit(X, sample_weight=w[::-1].copy())
    assert km.cluster_centers_.tolist() == [[1.0]]
