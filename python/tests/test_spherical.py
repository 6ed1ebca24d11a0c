"""Spherical (cosine) k-means: KMeans(metric="cosine") against faiss's
spherical mode from the same initial centres, and its own contract (unit
rows read on the fly, unit centres, the same bits for any n_jobs and
memory_limit, every input kind)."""

import warnings

import faiss
import numpy as np
import pytest
from sklearn.utils._param_validation import InvalidParameterError

from memfit import KMeans, MiniBatchKMeans


def directions(n=20_000, d=64, k=20, seed=0, dtype=np.float32):
    """Rows around k directions, each scaled by its own positive factor (not
    unit rows), and the index of one row per direction."""
    rng = np.random.RandomState(seed)
    dirs = rng.randn(k, d)
    which = np.arange(n) % k
    X = (dirs[which] + 0.4 * rng.randn(n, d)) * rng.uniform(0.5, 3.0, size=(n, 1))
    return X.astype(dtype), np.arange(k)


def faiss_spherical(X_unit, init, n_iter):
    """faiss's spherical k-means (Clustering with spherical=True on an inner
    product index), every row used, from `init`: (labels, centroids)."""
    k, d = init.shape
    cp = faiss.ClusteringParameters()
    cp.niter, cp.spherical, cp.verbose = n_iter, True, False
    cp.max_points_per_centroid, cp.min_points_per_centroid = 1 << 30, 1
    clus = faiss.Clustering(d, k, cp)
    clus.centroids.resize(init.size)
    faiss.copy_array_to_vector(np.ascontiguousarray(init, dtype=np.float32).ravel(), clus.centroids)
    index = faiss.IndexFlatIP(d)
    clus.train(X_unit, index)
    _, labels = index.search(X_unit, 1)
    return labels.ravel(), faiss.vector_to_array(clus.centroids).reshape(k, d)


@pytest.mark.parametrize("n_iter", [1, 8])
def test_matches_faiss_spherical_from_the_same_centres(n_iter):
    X, seeds = directions()
    X_unit = X.copy()
    faiss.normalize_L2(X_unit)
    init = X_unit[seeds]
    labels, centroids = faiss_spherical(X_unit, init, n_iter)
    km = KMeans(len(seeds), init=init, n_init=1, max_iter=n_iter, tol=0, metric="cosine", n_jobs=2).fit(X)
    assert km.cluster_centers_.dtype == np.float32
    np.testing.assert_array_equal(km.labels_, labels)
    np.testing.assert_allclose(km.cluster_centers_, centroids, rtol=0, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(km.cluster_centers_.astype(np.float64), axis=1), 1, atol=1e-6)
    # inertia = sum ||x/|x| - c||^2 = 2 sum (1 - cos).
    Xu = X.astype(np.float64) / np.linalg.norm(X.astype(np.float64), axis=1, keepdims=True)
    C = km.cluster_centers_.astype(np.float64)
    expected = ((Xu - C[km.labels_]) ** 2).sum()
    assert km.inertia_ == pytest.approx(expected, rel=1e-6)


def test_rows_are_read_as_unit_rows_with_the_same_bits_everywhere(tmp_path):
    X, seeds = directions(n=6_000, d=16, k=6, dtype=np.float64)
    ref = KMeans(6, init="k-means++", n_init=2, random_state=3, metric="cosine").fit(X)
    # Power-of-two scales change no unit row: the same bits.
    scaled = KMeans(6, init="k-means++", n_init=2, random_state=3, metric="cosine").fit(X * 2.0**-40)
    np.testing.assert_array_equal(scaled.cluster_centers_, ref.cluster_centers_)
    assert scaled.inertia_ == ref.inertia_
    path = tmp_path / "x.npy"
    np.save(path, np.asfortranarray(X))
    for other in (
        KMeans(6, init="k-means++", n_init=2, random_state=3, metric="cosine", n_jobs=1, memory_limit="2MiB").fit(X),
        KMeans(6, init="k-means++", n_init=2, random_state=3, metric="cosine", algorithm="bounded").fit(str(path)),
        KMeans(6, init="k-means++", n_init=2, random_state=3, metric="cosine").fit(np.load(path, mmap_mode="r")),
    ):
        np.testing.assert_array_equal(other.cluster_centers_, ref.cluster_centers_)
        np.testing.assert_array_equal(other.labels_, ref.labels_)
        assert other.inertia_ == ref.inertia_
    # predict, transform and score read unit rows too.
    np.testing.assert_array_equal(ref.predict(X), ref.labels_)
    assert -ref.score(X) == pytest.approx(ref.inertia_, rel=1e-12)
    Xu = X / np.linalg.norm(X, axis=1, keepdims=True)
    dist = np.sqrt(((Xu[:, None, :] - ref.cluster_centers_[None]) ** 2).sum(-1))
    np.testing.assert_allclose(ref.transform(X), dist, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(np.argmax(Xu @ ref.cluster_centers_.T, axis=1), ref.labels_)


def test_zero_rows_stay_zero_and_given_centres_are_scaled():
    X, _ = directions(n=300, d=4, k=3, dtype=np.float64)
    X[::7] = 0.0
    init = X[[1, 2, 3]] * 5.0
    km = KMeans(3, init=init, n_init=1, metric="cosine").fit(X)
    assert np.isfinite(km.cluster_centers_).all() and np.isfinite(km.inertia_)
    np.testing.assert_allclose(np.linalg.norm(km.cluster_centers_, axis=1), 1, atol=1e-15)
    one = KMeans(3, init=init, n_init=1, max_iter=1, metric="cosine").fit(X)
    unit = KMeans(3, init=init / np.linalg.norm(init, axis=1, keepdims=True), n_init=1, max_iter=1,
                  metric="cosine").fit(X)
    np.testing.assert_array_equal(one.labels_, unit.labels_)


@pytest.mark.parametrize("sparse", [False, True])
def test_rows_of_zeros_change_no_centre_and_tol_zero_converges(sparse):
    """A row of zeros has no direction: its weight changed the rounding of
    its cluster's mean, so with ``tol=0`` the row's label and a centre flipped
    by an ulp every iteration until ``max_iter`` (a field case: 7 of 10 TF-IDF
    fits with 2 % empty documents). Now the centres and ``n_iter_`` are
    those of the same fit without the rows of zeros, to the bit."""
    import scipy.sparse as sp

    rng = np.random.default_rng(0)
    X = rng.standard_normal((500, 6))
    X[:250] += 3
    w = rng.random(500)
    init = X[[0, 300, 10]]
    zero = np.zeros(500, dtype=bool)
    zero[[5, 77, 401]] = True
    X0 = X.copy()
    X0[zero] = 0
    as_input = sp.csr_matrix if sparse else np.asarray
    fit = KMeans(3, init=init, n_init=1, metric="cosine", tol=0).fit(as_input(X0), sample_weight=w)
    ref = KMeans(3, init=init, n_init=1, metric="cosine", tol=0).fit(as_input(X0[~zero]), sample_weight=w[~zero])
    assert fit.n_iter_ == ref.n_iter_ < 300
    np.testing.assert_array_equal(fit.cluster_centers_, ref.cluster_centers_)
    np.testing.assert_array_equal(fit.labels_[~zero], ref.labels_)
    np.testing.assert_array_equal(fit.predict(as_input(X0[zero])), fit.labels_[zero])


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_rows_of_fewer_directions_than_clusters_converge(sparse, dtype):
    """Rows of fewer directions than clusters (copies, scaled copies, rows of
    zeros, weights): a cluster refilled with one row and a cluster of many
    rows of its direction got centres an ulp apart (each the weighted sum
    scaled to unit norm, which rounds differently for each weight), so every
    row moved between them each iteration and the fit ran to max_iter. Now
    every cluster of one direction gets the same centre and the fit stops as
    Lloyd's does on duplicate points."""
    import warnings

    import scipy.sparse as sp

    as_input = (lambda a: sp.csr_matrix(a.astype(dtype))) if sparse else (lambda a: a.astype(dtype))
    rng = np.random.default_rng(1)
    cases = [
        np.ones((1000, 3)),
        np.repeat([[0.0, 0.0], [1.0, 1.0]], 500, axis=0),
        np.repeat([[1.0, 2.0], [2.0, 4.0], [3.0, 6.0], [-1.0, 0.0]], 250, axis=0),
        np.repeat([[0.1, 0.7, 0.3]], 400, axis=0) * rng.choice([1.0, 3.0, 7.0, 0.0], size=(400, 1)),
    ]
    for X in cases:
        for k in range(2, 6):
            for w in (None, rng.uniform(0.1, 5.0, X.shape[0])):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", UserWarning)  # fewer distinct clusters than k
                    warnings.simplefilter("error", RuntimeWarning)
                    km = KMeans(k, n_init=1, random_state=0, metric="cosine", max_iter=50).fit(
                        as_input(X), sample_weight=w)
                assert km.n_iter_ < 10, (X[:2], k, km.n_iter_)
                nonzero = np.linalg.norm(km.cluster_centers_.astype(np.float64), axis=1) > 0
                np.testing.assert_allclose(
                    np.linalg.norm(km.cluster_centers_[nonzero].astype(np.float64), axis=1), 1, atol=1e-6)


def test_bad_metric_is_refused_and_dask_input_is_read_as_unit_rows():
    X, _ = directions(n=100, d=3, k=2, dtype=np.float64)
    with pytest.raises(InvalidParameterError, match="'metric' parameter of KMeans must be"):
        KMeans(2, metric="manhattan").fit(X)
    da = pytest.importorskip("dask.array")
    local = KMeans(2, metric="cosine", random_state=0).fit(X)
    chunks = KMeans(2, metric="cosine", random_state=0).fit(da.from_array(X, chunks=(50, 3)))
    np.testing.assert_array_equal(local.cluster_centers_, chunks.cluster_centers_)
    X[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        KMeans(2, metric="cosine").fit(X)


def test_mini_batch_spherical_keeps_unit_centres_with_the_same_bits_everywhere(tmp_path):
    """MiniBatchKMeans(metric="cosine"): unit centres (initial, moved and
    given), labels_ are predict's and the largest cosine similarity, the same
    bits for any thread count, for a path or a Dask array, and for rows
    scaled by powers of two."""
    import dask.array as da

    from memfit import MiniBatchKMeans

    X, _ = directions(n=6_000, d=40, k=6)
    kw = dict(n_clusters=6, metric="cosine", random_state=0, batch_size=256)
    km = MiniBatchKMeans(**kw).fit(X)
    C = km.cluster_centers_
    assert C.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(C.astype(np.float64), axis=1), 1.0, rtol=1e-6)
    np.testing.assert_array_equal(km.labels_, km.predict(X))
    U = X / np.linalg.norm(X, axis=1, keepdims=True)
    assert (np.argmax(U @ C.T, axis=1) == km.labels_).mean() > 0.999
    np.save(tmp_path / "x.npy", X)
    scales = np.exp2(np.random.default_rng(1).integers(-20, 20, (X.shape[0], 1))).astype(np.float32)
    for other in (
        MiniBatchKMeans(**kw, n_jobs=1).fit(X),
        MiniBatchKMeans(**kw).fit(str(tmp_path / "x.npy")),
        MiniBatchKMeans(**kw).fit(da.from_array(X, chunks=1_000)),
        MiniBatchKMeans(**kw).fit(X * scales),
    ):
        assert np.array_equal(other.cluster_centers_, C)
    given = MiniBatchKMeans(n_clusters=6, metric="cosine", init=X[:6] * 5, max_iter=1).fit(X)
    np.testing.assert_allclose(np.linalg.norm(given.cluster_centers_.astype(np.float64), axis=1), 1.0, rtol=1e-6)
    partial = MiniBatchKMeans(n_clusters=6, metric="cosine", random_state=0)
    for i in range(0, 6_000, 1_500):
        partial.partial_fit(X[i : i + 1_500])
    np.testing.assert_allclose(np.linalg.norm(partial.cluster_centers_.astype(np.float64), axis=1), 1.0, rtol=1e-6)
    np.testing.assert_array_equal(partial.labels_, partial.predict(X[4_500:]))
    with pytest.raises(InvalidParameterError, match="'metric' parameter of MiniBatchKMeans"):
        MiniBatchKMeans(n_clusters=2, metric="cos").fit(X)


def test_mini_batch_spherical_zero_rows_tol_and_partial_labels():
    """Reassigned centres never become rows of zeros; tol is relative to the
    unit rows (the same steps for rows scaled by 1024); partial_fit's labels_
    are predict's, zero rows included."""
    from memfit import MiniBatchKMeans

    rng = np.random.default_rng(3)
    X = rng.normal(size=(600, 4))
    X[rng.random(600) < 0.8] = 0
    km = MiniBatchKMeans(n_clusters=6, metric="cosine", reassignment_ratio=5.0, batch_size=64, random_state=0).fit(X)
    np.testing.assert_allclose(np.linalg.norm(km.cluster_centers_, axis=1), 1.0, rtol=1e-12)
    rng = np.random.default_rng(4)
    X = rng.normal(size=(2_000, 5))
    X[:, 0] += 3 * rng.integers(0, 2, 2_000)
    kw = dict(n_clusters=4, metric="cosine", batch_size=64, random_state=1, tol=1e-4)
    a, b = MiniBatchKMeans(**kw).fit(X), MiniBatchKMeans(**kw).fit(X * 1024)
    assert a.n_steps_ == b.n_steps_ and np.array_equal(a.cluster_centers_, b.cluster_centers_)
    X = np.random.default_rng(1).normal(size=(300, 4))
    X[::4] = 0
    pk = MiniBatchKMeans(n_clusters=5, metric="cosine", random_state=0, reassignment_ratio=2.0)
    for i in range(0, 90, 30):
        pk.partial_fit(X[i : i + 30])
        np.testing.assert_array_equal(pk.labels_, pk.predict(X[i : i + 30]))
    np.testing.assert_allclose(np.linalg.norm(pk.cluster_centers_, axis=1), 1.0, rtol=1e-12)


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
def test_mini_batch_spherical_rows_of_zeros_move_no_centre_and_add_no_count(sparse, weighted):
    """A row of zeros has no direction: as in KMeans(metric="cosine"), it
    adds nothing to its centre (labelled 0) -- neither to the sum nor to
    the count that weighs every later step (helper 99: centre 0's count
    492 instead of 95, centres 0.154 apart)."""
    import scipy.sparse as sp

    rng = np.random.RandomState(0)
    X = rng.randn(400, 6)
    w = rng.uniform(0.5, 2.0, 400)
    kw = dict(n_clusters=4, init=X[:4].copy(), metric="cosine", reassignment_ratio=0, compute_labels=False)
    a, b = MiniBatchKMeans(**kw), MiniBatchKMeans(**kw)
    for i in range(4):
        rows = slice(i * 100, (i + 1) * 100)
        batch, zeros = X[rows], np.zeros((100, 6))
        padded = np.vstack([batch, zeros])
        if sparse:
            batch, padded = sp.csr_array(batch), sp.csr_array(padded)
        a.partial_fit(batch, sample_weight=w[rows] if weighted else None)
        b.partial_fit(padded, sample_weight=np.r_[w[rows], np.full(100, 3.0)] if weighted else None)
    np.testing.assert_array_equal(a._counts, b._counts)
    np.testing.assert_array_equal(a.cluster_centers_, b.cluster_centers_)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_predict_gives_a_cosine_fits_labels_to_rows_of_zeros(dtype):
    """A row of zeros is equally far (1) from every unit centre: predict
    gives the fit's labels to it, as scikit-learn promises (a field case:
    386 zero rows of a TF-IDF matrix labelled 4 by the fit and 0 by
    predict), and every row of zeros has label 0, as in faiss."""
    rng = np.random.default_rng(5)
    X = np.abs(rng.normal(size=(3_000, 40))).astype(dtype) * (rng.random((3_000, 40)) < 0.1)
    X[::7] = 0
    for est in (KMeans(6, random_state=2, n_init=2, metric="cosine"),
                MiniBatchKMeans(6, random_state=2, n_init=1, metric="cosine", batch_size=256)):
        est.fit(X)
        np.testing.assert_array_equal(est.predict(X), est.labels_)
        np.testing.assert_array_equal(est.predict(X[::7]), est.labels_[::7])
        assert not est.labels_[::7].any()


@pytest.mark.parametrize("seed", [2, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rows_at_equal_cosine_take_the_lowest_index_as_in_faiss(seed, dtype):
    """Rows orthogonal to every centre (and rows of zeros) are at equal
    cosine, 0, to all of them: the label is the lowest index, as faiss's
    largest inner product gives, whatever the rounding of the centres'
    norms (a field case: 63 such rows of a sparse matrix, and 29 % of the
    final labels, differed from faiss). Dense and sparse input, Lloyd and
    bounded passes: the same labels and the same inertia bits."""
    import scipy.sparse as sp

    X = sp.random(300, 40, density=0.1, random_state=seed, format="csr", dtype=np.float64)
    dense = X.toarray().astype(dtype)
    X_unit = dense.astype(np.float32)
    faiss.normalize_L2(X_unit)
    init = X_unit[np.linalg.norm(X_unit, axis=1) > 0][:3]
    for n_iter in (1, 5):
        labels, centroids = faiss_spherical(X_unit, init, n_iter)
        fits = [
            KMeans(3, init=init.astype(dtype), n_init=1, max_iter=n_iter, tol=0, metric="cosine", algorithm=a).fit(x)
            for x in (dense, sp.csr_matrix(dense))
            for a in ("lloyd", "bounded")
        ]
        for km in fits:
            np.testing.assert_array_equal(km.labels_, labels)
            np.testing.assert_allclose(km.cluster_centers_, centroids, rtol=0, atol=1e-6)
            assert km.inertia_ == fits[0].inertia_
        # Rows sharing no feature with any fitted centre.
        orthogonal = ((dense != 0).astype(int) @ (fits[0].cluster_centers_ != 0).T.astype(int) == 0).all(axis=1)
        assert orthogonal.any()
        np.testing.assert_array_equal(fits[0].predict(dense[orthogonal]), 0)


def test_rows_of_zeros_seed_no_centre_and_refill_no_cluster():
    """Rows of zeros have no direction: an emptied cluster is refilled with
    a row that has one (a row of zeros, at distance 1 from every centre,
    was the farthest and left the centre at zero for good), a cluster of
    only such rows counts as empty, and k-means++ never seeds from them
    (17 % rows of zeros gave a centre of zeros for some seeds, for KMeans
    and MiniBatchKMeans). The fit is then the fit without those rows."""
    rng = np.random.default_rng(0)
    X = np.abs(rng.standard_normal((1000, 4)))
    X[::10] = 0
    zero = ~X.any(axis=1)
    init = np.vstack([X[1], np.zeros(4), X[2]])
    with_zeros = KMeans(3, init=init, n_init=1, metric="cosine", tol=0).fit(X)
    without = KMeans(3, init=init, n_init=1, metric="cosine", tol=0).fit(X[~zero])
    np.testing.assert_array_equal(with_zeros.cluster_centers_, without.cluster_centers_)
    assert with_zeros.n_iter_ == without.n_iter_
    np.testing.assert_array_equal(with_zeros.labels_[~zero], without.labels_)
    assert not with_zeros.labels_[zero].any()
    small = np.array([[1, 0], [2, 0], [0, 1], [0, 3], [1, 1], [0, 0], [0, 0]], float)
    km = KMeans(3, init=np.array([[0, 0], [1, 0.1], [0.1, 1]]), n_init=1, metric="cosine").fit(small)
    np.testing.assert_allclose(np.linalg.norm(km.cluster_centers_, axis=1), 1)
    rng = np.random.default_rng(1)
    X = ((rng.random((20_000, 17)) < 0.1) * rng.integers(1, 4, (20_000, 17))).astype(np.float32)
    assert (~X.any(axis=1)).mean() > 0.15
    for seed in (3, 4, 5, 9):
        for est in (KMeans(20, metric="cosine", random_state=seed, max_iter=3),
                    MiniBatchKMeans(20, metric="cosine", random_state=seed, n_init=1, max_iter=3)):
            est.fit(X)
            assert np.abs(est.cluster_centers_).sum(axis=1).min() > 0, (type(est).__name__, seed)


def test_a_light_centre_that_cannot_move_keeps_its_count():
    """Reassignment moves light centres to rows with a direction: with one
    such row, one centre moves (its count rises to the smallest count kept,
    as scikit-learn's) and the other keeps its count, not raised as if it had
    moved (it then looked populated and later steps barely moved it). The
    rows of zeros count for no centre: centre 0's count is its one row's."""
    batch = np.r_[np.zeros((9, 3)), [[1.0, 0, 0]]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = MiniBatchKMeans(3, random_state=0, metric="cosine", init=np.eye(3)).partial_fit(batch)
    np.testing.assert_array_equal(m._counts, [1, 1, 0])
    np.testing.assert_array_equal(m.cluster_centers_, [[1, 0, 0], [1, 0, 0], [0, 0, 1]])
