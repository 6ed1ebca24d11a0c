"""k-means and mini-batch k-means on scipy.sparse input: parity with
scikit-learn's sparse Lloyd and sparse mini-batch steps from the same
initial centres and random state, the same labels and centres as the dense
fit bit for bit, every sparse format and index dtype, borrowed without
changing the caller's matrix, and clear refusals where sparse input is not
taken."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.cluster import KMeans as SKKMeans

from memfit import GaussianMixture, KMeans, MiniBatchKMeans


def tfidf_like(n=6_000, d=3_000, density=0.01, seed=0, dtype=np.float64):
    """Rows of a few topics: each row's stored columns mostly from its
    topic's band, values of small integers then scaled to unit norm (so
    many exact ties in the raw counts, none after scaling); some rows empty."""
    rng = np.random.default_rng(seed)
    per_row = rng.poisson(density * d, n) * (np.arange(n) % 53 != 0)
    topic = rng.integers(8, size=n)
    rows = np.repeat(np.arange(n), per_row)
    band = d // 8
    cols = np.where(rng.random(rows.size) < 0.7, topic[rows] * band + rng.integers(band, size=rows.size),
                    rng.integers(d, size=rows.size))
    X = sp.csr_matrix((rng.integers(1, 4, size=rows.size).astype(dtype), (rows, cols)), shape=(n, d))
    X.sum_duplicates()
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    X = sp.diags(1.0 / np.where(norms > 0, norms, 1.0)) @ X
    return X.astype(dtype).tocsr()


def first_rows(X, k, seed=1):
    """k initial centres: means of 40 random rows each. (Rows themselves
    would be unit centres, to which every row sharing no column is at
    exactly the same distance ‖x‖² + 1 up to rounding: a tie each
    implementation breaks by its own rounding.)"""
    rng = np.random.default_rng(seed)
    return np.stack([np.asarray(X[rng.choice(X.shape[0], 40, replace=False)].mean(axis=0)).ravel() for _ in range(k)])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("weighted", [False, True])
def test_parity_with_scikit_learn_sparse_lloyd(dtype, weighted):
    X = tfidf_like(dtype=dtype)
    init = first_rows(X, 12)
    w = np.random.default_rng(3).uniform(0.2, 2.0, X.shape[0]) if weighted else None
    ours = KMeans(12, init=init, n_init=1, max_iter=100, tol=0).fit(X, sample_weight=w)
    ref = SKKMeans(12, init=init, n_init=1, max_iter=100, tol=0, algorithm="lloyd").fit(X, sample_weight=w)
    np.testing.assert_array_equal(ours.labels_, ref.labels_)
    assert ours.n_iter_ == ref.n_iter_
    assert ours.cluster_centers_.dtype == ref.cluster_centers_.dtype == dtype
    tol = 1e-12 if dtype == np.float64 else 1e-6
    np.testing.assert_allclose(ours.cluster_centers_, ref.cluster_centers_, rtol=0, atol=tol)
    assert ours.inertia_ == pytest.approx(ref.inertia_, rel=1e-10 if dtype == np.float64 else 1e-5)
    np.testing.assert_array_equal(ours.predict(X), ref.predict(X))


@pytest.mark.parametrize("metric", ["euclidean", "cosine"])
def test_the_dense_fits_labels_and_centres_bit_for_bit(metric):
    X = tfidf_like(seed=5) * 3.0
    dense = X.toarray()
    for init in ["k-means++", "random", first_rows(X, 9)]:
        a = KMeans(9, init=init, n_init=1, random_state=0, tol=0, metric=metric).fit(X)
        b = KMeans(9, init=init, n_init=1, random_state=0, tol=0, metric=metric).fit(dense)
        np.testing.assert_array_equal(a.labels_, b.labels_)
        np.testing.assert_array_equal(a.cluster_centers_, b.cluster_centers_)
        assert a.n_iter_ == b.n_iter_
        assert a.inertia_ == pytest.approx(b.inertia_, rel=1e-12)
        np.testing.assert_allclose(a.transform(X), b.transform(dense), rtol=1e-12, atol=1e-12)
        assert a.score(X) == pytest.approx(b.score(dense), rel=1e-12)
    # The same bits for any n_jobs and memory_limit.
    fits = [KMeans(9, random_state=0, n_jobs=j, memory_limit=m, metric=metric).fit(X)
            for j, m in [(1, "1GiB"), (2, "24MiB"), (3, "24MiB")]]
    for f in fits[1:]:
        np.testing.assert_array_equal(f.labels_, fits[0].labels_)
        np.testing.assert_array_equal(f.cluster_centers_, fits[0].cluster_centers_)
        assert f.inertia_ == fits[0].inertia_


def test_random_initial_centres_of_sparse_rows_have_the_dense_zeros():
    # Rows drawn as initial centres were read with -0.0 where a value is
    # not stored; a centre that kept it differed from the dense fit's +0.0.
    X = np.zeros((20, 2))
    X[12, 0] = 1.0
    for dtype in (np.float64, np.float32):
        kw = dict(n_clusters=15, init="random", n_init=1, random_state=1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            a = KMeans(**kw).fit(sp.csr_matrix(X.astype(dtype)))
            b = KMeans(**kw).fit(X.astype(dtype))
        assert a.cluster_centers_.tobytes() == b.cluster_centers_.tobytes()
        assert not np.signbit(a.cluster_centers_).any()
        np.testing.assert_array_equal(a.labels_, b.labels_)


def test_an_empty_cluster_is_refilled_with_the_dense_fits_row():
    """The row farthest from its centre, which refills an empty cluster, is
    the dense fit's even where the stored values' distances tie or nearly
    tie: rows 3 and 4 are equally far here, and so are two rows from a
    centre of zeros under the cosine metric. Then small integer-like data
    with many ties and empty clusters: every fit is the dense fit."""
    X = np.array([[0.2, 0.3, 0.3], [0.0, 0.7, 0.0], [0.1, 0.0, 0.2],
                  [0.3, 0.0, 1.1], [1.1, 0.0, 0.3], [0.0, 0.1, 0.0]])
    Xc = np.zeros((2, 14))
    Xc[0, [4, 9]] = [0.9105415570873983, 0.1648365509173506]
    Xc[1, [1, 2, 3, 10]] = [0.3982135243075784, 0.28033533725582027, 0.8219938028570116, 0.5230088147122643]
    Cc = np.zeros((2, 14))
    Cc[1, [8, 10]] = [0.7330073023611682, 0.10798649779029013]
    cases = [(X, np.array([[0.0, 0.7, 0.0], [50.0, 50.0, 50.0]]), "euclidean"), (Xc, Cc, "cosine")]
    for seed in range(300):
        rng = np.random.default_rng(seed)
        n, d = rng.integers(4, 30), rng.integers(1, 12)
        Xr = rng.integers(0, 3, size=(n, d)) * rng.random((n, d)).round(1) * (rng.random((n, d)) < 0.4)
        init = Xr[rng.choice(n, int(rng.integers(2, min(n, 6) + 1)), replace=False)].copy()
        if seed % 3 == 0:
            init[0] = 0.0
        cases.append((Xr, init, ["euclidean", "cosine"][seed % 2]))
    for i, (dense, init, metric) in enumerate(cases):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            a = KMeans(len(init), init=init, n_init=1, tol=0, metric=metric).fit(sp.csr_matrix(dense))
            b = KMeans(len(init), init=init, n_init=1, tol=0, metric=metric).fit(dense)
        np.testing.assert_array_equal(a.labels_, b.labels_, err_msg=f"case {i}")
        np.testing.assert_array_equal(a.cluster_centers_, b.cluster_centers_, err_msg=f"case {i}")
        assert a.n_iter_ == b.n_iter_


@pytest.mark.parametrize("offset", [1.0, 1e4, 1e8])
def test_distances_near_a_centre_far_from_the_origin_do_not_cancel(offset):
    """Rows at 1e8 in one column: |c|^2 + sum((x - c)^2 - c^2) over stored values would
    cancel 16 digits (inertia 206 for 608). Inertia, score and transform equal
    the dense fit's to rounding, and mini-batch steps stop where the dense
    ones do; a wide matrix whose rows lie near their centre also."""
    rng = np.random.default_rng(1)
    X = np.column_stack([offset + rng.standard_normal(1000), np.zeros(1000)])
    X[::2, 1] = 1.0
    dense = KMeans(2, init=X[:2].copy(), n_init=1).fit(X)
    sparse = KMeans(2, init=X[:2].copy(), n_init=1).fit(sp.csr_matrix(X))
    assert sparse.inertia_ == pytest.approx(dense.inertia_, rel=1e-13)
    assert dense.score(sp.csr_matrix(X)) == pytest.approx(dense.score(X), rel=1e-13)
    np.testing.assert_allclose(dense.transform(sp.csr_matrix(X[:50])), dense.transform(X[:50]), rtol=1e-13)
    a = MiniBatchKMeans(2, random_state=0, init=X[:2].copy(), n_init=1).fit(X)
    b = MiniBatchKMeans(2, random_state=0, init=X[:2].copy(), n_init=1).fit(sp.csr_matrix(X))
    assert a.n_steps_ == b.n_steps_
    np.testing.assert_array_equal(a.cluster_centers_, b.cluster_centers_)
    # 200 columns, 3 stored per row, all near a centre of norm about 1e8.
    W = sp.random(500, 200, density=0.015, random_state=0, format="csr") * 0.01
    W = W + sp.csr_matrix((np.full(500, offset), (np.arange(500), np.zeros(500, int))), shape=(500, 200))
    km = KMeans(3, random_state=0, n_init=1).fit(W)
    np.testing.assert_allclose(km.transform(W), km.transform(W.toarray()), rtol=1e-12, atol=0)


def test_every_sparse_kind_and_the_callers_matrix_untouched():
    X = tfidf_like(n=2_000, d=500, density=0.03, seed=2)
    init = first_rows(X, 5)
    want = KMeans(5, init=init, n_init=1).fit(X)
    # Duplicates and unsorted columns: summed on a copy, as scipy would.
    coo = X.tocoo()
    half = coo.data / 2
    dup = sp.csr_matrix((np.r_[half, half][::-1], (np.r_[coo.row, coo.row][::-1], np.r_[coo.col, coo.col][::-1])),
                        shape=X.shape)
    dup.has_canonical_format = False
    # A matrix whose cached flags say canonical after its indices were changed in place.
    stale = X.copy()
    stale.sum_duplicates()
    assert stale.has_canonical_format
    for i in range(0, X.shape[0], 7):
        a, b = stale.indptr[i], stale.indptr[i + 1]
        stale.indices[a:b], stale.data[a:b] = stale.indices[a:b][::-1].copy(), stale.data[a:b][::-1].copy()
    assert stale.has_canonical_format and stale.has_sorted_indices
    before = (dup.data.copy(), dup.indices.copy(), dup.indptr.copy())
    int64 = X.copy()
    int64.indices, int64.indptr = int64.indices.astype(np.int64), int64.indptr.astype(np.int64)
    mixed = X.copy()
    mixed.indptr = mixed.indptr.astype(np.int64)
    for kind in [sp.csr_array(X), X.tocsc(), X.tocoo(), sp.lil_matrix(X), int64, mixed, dup, stale]:
        got = KMeans(5, init=init, n_init=1).fit(kind)
        np.testing.assert_array_equal(got.labels_, want.labels_, err_msg=type(kind).__name__)
        np.testing.assert_allclose(got.cluster_centers_, want.cluster_centers_, rtol=0, atol=1e-15)
    for a, b in zip(before, (dup.data, dup.indices, dup.indptr)):
        np.testing.assert_array_equal(a, b)
    # Integer counts become float64, as scikit-learn converts them.
    counts = sp.csr_matrix(np.round(X.toarray() * 4).astype(np.int32))
    assert KMeans(3, random_state=0).fit(counts).cluster_centers_.dtype == np.float64


def test_empty_rows_and_an_all_zero_matrix():
    Z = sp.csr_matrix((50, 20))
    with pytest.warns(UserWarning, match="Number of distinct clusters"):
        km = KMeans(3, n_init=1, random_state=0).fit(Z)
    assert km.inertia_ == 0.0 and not km.cluster_centers_.any()
    X = sp.vstack([sp.csr_matrix((5, 20)), sp.random(40, 20, density=0.3, random_state=0, format="csr")]).tocsr()
    np.testing.assert_array_equal(KMeans(4, random_state=0).fit(X).labels_, KMeans(4, random_state=0).fit(X.toarray()).labels_)


def test_a_stored_negative_zero_is_the_dense_arrays_positive_zero():
    """scipy's toarray() reads a stored -0.0 as +0.0; a centre drawn from
    that row kept -0.0, and a cluster left with it kept it (helper 130)."""
    import warnings

    X = sp.csr_matrix((np.array([-1.0, -0.0, -1.0, 1.0, 1.0, -1.0, 1.0, -1.0, 1.0, 1.0, 1.0, 1.0, 1.0]),
                       np.array([2, 5, 6, 8, 4, 5, 8, 5, 2, 7, 4, 4, 4]),
                       np.array([0, 3, 4, 5, 5, 7, 8, 8, 10, 10, 11, 12, 13])), shape=(12, 9))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for init in ("k-means++", "random"):
            for seed in range(5):
                a = KMeans(8, n_init=1, random_state=seed, init=init).fit(X.toarray())
                b = KMeans(8, n_init=1, random_state=seed, init=init).fit(X)
                assert np.array_equal(a.cluster_centers_.view(np.uint64), b.cluster_centers_.view(np.uint64)), seed
                assert np.array_equal(a.labels_, b.labels_)


def test_bad_sparse_input_is_refused_clearly():
    X = tfidf_like(n=300, d=40, density=0.2)
    bad = X.copy()
    bad.data[7] = np.nan
    row = int(np.searchsorted(bad.indptr, 7, side="right") - 1)
    with pytest.raises(ValueError, match=rf"(?s)Input X contains NaN\..*\nX: row {row}, column {bad.indices[7]} is NaN"):
        KMeans(3).fit(bad)
    bad.data[7] = np.inf
    with pytest.raises(ValueError, match="Input X contains infinity"):
        KMeans(3).fit(bad)
    with pytest.raises(ValueError, match="Complex data not supported"):
        KMeans(3).fit(X.astype(np.complex128))
    with pytest.raises(ValueError, match="X has 41 features, but KMeans is expecting 40 features"):
        KMeans(3, random_state=0).fit(X).predict(sp.random(5, 41, format="csr"))
    with pytest.raises(TypeError, match="Sparse data was passed for X, but dense data is required"):
        GaussianMixture(3).fit(X)
    for fit in (MiniBatchKMeans(3, batch_size=50).fit, MiniBatchKMeans(3, compute_labels=False).fit,
                MiniBatchKMeans(3).partial_fit):
        with pytest.raises(ValueError, match=r"Input X contains (NaN|infinity)|row \d+, column \d+"):
            fit(bad)
    with pytest.raises(ValueError, match="X has 41 features, but MiniBatchKMeans is expecting 40 features"):
        MiniBatchKMeans(3, random_state=0).fit(X).partial_fit(sp.random(5, 41, format="csr"))
    # A 1-D sparse array: scikit-learn's words (helper 129).
    with pytest.raises(ValueError) as want:
        SKKMeans(2).fit(sp.csr_array(np.ones(5)))
    for fit in (KMeans(2).fit, MiniBatchKMeans(2).fit):
        with pytest.raises(ValueError) as got:
            fit(sp.csr_array(np.ones(5)))
        assert str(got.value) == str(want.value)
    # Sparse weights: scikit-learn's TypeError (memfit said "got 0D array").
    for w in (sp.csr_matrix(np.ones((1, 300))), sp.coo_array(np.ones(300))):
        for fit in (KMeans(3).fit, MiniBatchKMeans(3).fit, MiniBatchKMeans(3).partial_fit):
            with pytest.raises(TypeError, match="Sparse data was passed for sample_weight, but dense data is required"):
                fit(X, sample_weight=w)


def test_sparse_integers_beyond_2_pow_53_warn_as_dense_ones():
    """int64 values that float64 rounds warn naming the column and the first
    value (row-major), as the dense X does (sparse input was converted
    silently; helper 90); exact ones do not warn."""
    Xd = np.zeros((6, 3), np.int64)
    Xd[:, 0] = np.arange(6)
    Xd[4, 2], Xd[5, 2], Xd[5, 1] = 2**53 + 1, 2**53 + 3, -(2**53) - 2
    init = np.array([[0.0, 0, 0], [0, 0, 1e16]])
    for X in (Xd, sp.csr_matrix(Xd), sp.coo_array(Xd), sp.csc_matrix(Xd.clip(0).astype(np.uint64))):
        with pytest.warns(UserWarning, match=r"X: column 2 holds u?int64 values beyond 2\^53 in magnitude \(first: 9007199254740993 at row 4\)"):
            KMeans(2, init=init, n_init=1).fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        KMeans(2, init=init, n_init=1).fit(sp.csr_matrix(np.clip(Xd, -(2**53), 2**53)))


@pytest.mark.parametrize("metric", ["euclidean", "cosine"])
def test_mini_batches_of_sparse_rows_step_as_the_dense_rows(metric):
    """A sparse mini-batch fit draws the batches, initial centres and
    reassignments of the dense fit and moves the centres bit for bit as it
    does: weighted or not, float32 or float64, every init, partial_fit, any
    n_jobs and memory_limit; its plan counts the sparse batches."""
    X = tfidf_like(n=4_000, d=600, density=0.02, seed=2) * 2.0
    dense = X.toarray()
    w = np.random.default_rng(4).uniform(0.1, 3.0, X.shape[0])
    for init, weights, dtype in [("k-means++", None, np.float64), ("random", w, np.float64),
                                 (first_rows(X, 7), None, np.float32), ("k-means++", w, np.float32)]:
        kw = dict(init=init, n_init=1, random_state=0, batch_size=300, metric=metric, reassignment_ratio=0.05)
        a = MiniBatchKMeans(7, **kw).fit(X.astype(dtype), sample_weight=weights)
        b = MiniBatchKMeans(7, **kw).fit(dense.astype(dtype), sample_weight=weights)
        np.testing.assert_array_equal(a.cluster_centers_, b.cluster_centers_)
        np.testing.assert_array_equal(a.labels_, b.labels_)
        assert a.cluster_centers_.dtype == dtype and a.n_steps_ == b.n_steps_
        assert a.inertia_ == pytest.approx(b.inertia_, rel=1e-10 if dtype == np.float64 else 1e-5)
    fits = [MiniBatchKMeans(7, random_state=1, batch_size=256, metric=metric, n_jobs=j, memory_limit=m).fit(X)
            for j, m in [(1, "1GiB"), (2, "8MiB"), (3, "8MiB")]]
    for f in fits[1:]:
        np.testing.assert_array_equal(f.cluster_centers_, fits[0].cluster_centers_)
        np.testing.assert_array_equal(f.labels_, fits[0].labels_)
    assert "sparse products (per thread)" in fits[0].memory_plan_
    assert "drawn batch (CSR, returned to Python)" in fits[0].memory_plan_
    a, b = MiniBatchKMeans(7, random_state=0, metric=metric), MiniBatchKMeans(7, random_state=0, metric=metric)
    for i in range(0, 4_000, 700):
        a.partial_fit(X[i : i + 700])
        b.partial_fit(dense[i : i + 700])
    np.testing.assert_array_equal(a.cluster_centers_, b.cluster_centers_)
    np.testing.assert_array_equal(a.predict(X), b.predict(dense))


@pytest.mark.parametrize("weighted", [False, True])
def test_sparse_mini_batches_match_scikit_learn(weighted):
    """The same random_state gives scikit-learn's sparse MiniBatchKMeans fit
    (its batches, k-means++ centres, sparse updates and early stop), to
    rounding; partial_fit too. (Rows of random norms: unit rows tie
    exactly at ‖x‖² + 1 from every unit centre they share no column with,
    a tie each implementation breaks by its own rounding.)"""
    from sklearn.cluster import MiniBatchKMeans as SKMiniBatchKMeans

    X = sp.random(5_000, 800, density=0.02, format="csr", random_state=7)
    w = np.random.default_rng(5).uniform(0.2, 2.0, X.shape[0]) if weighted else None
    kw = dict(n_init=1, random_state=3, batch_size=256)
    ours = MiniBatchKMeans(10, **kw).fit(X, sample_weight=w)
    ref = SKMiniBatchKMeans(10, **kw).fit(X, sample_weight=w)
    assert ours.n_steps_ == ref.n_steps_
    np.testing.assert_allclose(ours.cluster_centers_, ref.cluster_centers_, rtol=0, atol=1e-12)
    assert ours.inertia_ == pytest.approx(ref.inertia_, rel=1e-10)
    np.testing.assert_array_equal(ours.labels_, ref.labels_)
    ours, ref = MiniBatchKMeans(10, random_state=0), SKMiniBatchKMeans(10, random_state=0)
    for i in range(0, 5_000, 1_000):
        ours.partial_fit(X[i : i + 1_000], sample_weight=None if w is None else w[i : i + 1_000])
        ref.partial_fit(X[i : i + 1_000], sample_weight=None if w is None else w[i : i + 1_000])
    np.testing.assert_allclose(ours.cluster_centers_, ref.cluster_centers_, rtol=0, atol=1e-12)


def test_malformed_csr_is_refused_before_any_routine_reads_it():
    """A CSR matrix built by hand with an index out of range or bad offsets
    is refused with a ValueError naming the fault, before scipy's or
    scikit-learn's routines (which do not check) can read it: no crash, no
    silent repair (found by trying sparse MiniBatchKMeans with tol > 0)."""

    def by_hand(indptr, indices):
        X = sp.csr_matrix((4, 3))
        X.data, X.indptr, X.indices = np.array([1.0, 2, 3, 4]), np.array(indptr, np.int32), np.array(indices, np.int32)
        return X

    cases = [([0, 2, 3, 4, 4], [0, 1_000_000, 1, 2], r"row 0 has index 1000000, outside 0\.\.3"),
             ([0, 2, 3, 4, 4], [0, -1, 1, 2], r"row 0 has index -1, outside 0\.\.3"),
             ([0, 3, 2, 4, 4], [0, 1, 1, 2], r"indptr decreases at row 1 \(3 then 2\)"),
             ([0, -2, 3, 4, 4], [0, 1, 1, 2], r"indptr decreases at row 0"),
             ([1, 2, 3, 4, 4], [0, 1, 1, 2], r"indptr runs from 1 to 4")]
    for indptr, indices, why in cases:
        for fit in (MiniBatchKMeans(2, tol=1e-3, n_init=1, random_state=0).fit,
                    MiniBatchKMeans(2, tol=1e-3, metric="cosine", compute_labels=False).fit, KMeans(2).fit):
            with pytest.raises(ValueError, match="the sparse matrix X is not valid CSR: " + why):
                fit(by_hand(indptr, indices))
    # A NaN is named by its row in X, not in a drawn sample.
    X = sp.random(500, 50, density=0.1, format="csr", random_state=0)
    X.data[5] = np.nan
    row = int(np.searchsorted(X.indptr, 5, side="right") - 1)
    with pytest.raises(ValueError, match=rf"X: row {row}, column {X.indices[5]} is NaN"):
        MiniBatchKMeans(3, random_state=0, batch_size=64, n_init=1).fit(X)


def test_the_cli_steps_sparse_mini_batches_as_dense_ones(tmp_path):
    """`memfit kmeans X.npz --mini-batch SIZE` gives the labels, centres
    and inertia of the same run on X saved dense, and its plan counts the
    CSR batch."""
    import json
    import subprocess
    import sys

    X = tfidf_like(n=3_000, d=400, density=0.03, seed=9)
    X.sum_duplicates()  # sorted columns, as the reader requires
    sp.save_npz(tmp_path / "X.npz", X)
    np.save(tmp_path / "X.npy", X.toarray())
    out = {}
    for name in ["X.npz", "X.npy"]:
        for metric in ["euclidean", "cosine"]:
            stem = tmp_path / f"{name}.{metric}"
            subprocess.run(
                [sys.executable, "-m", "memfit", "kmeans", str(tmp_path / name), "-k", "6", "--mini-batch", "200",
                 "--seed", "2", "--metric", metric, "--scratch-dir", str(tmp_path), "--labels", f"{stem}.l.npy",
                 "--centers", f"{stem}.c.npy", "--summary", f"{stem}.json", "--quiet"],
                check=True, capture_output=True, text=True,
            )
            out[name, metric] = (np.load(f"{stem}.l.npy"), np.load(f"{stem}.c.npy"),
                                 json.loads(pathlib_read(f"{stem}.json"))["inertia"])
    for metric in ["euclidean", "cosine"]:
        a, b = out["X.npz", metric], out["X.npy", metric]
        np.testing.assert_array_equal(a[0], b[0])
        np.testing.assert_array_equal(a[1], b[1])
        assert a[2] == pytest.approx(b[2], rel=1e-12)
    plan = subprocess.run(
        [sys.executable, "-m", "memfit", "kmeans", str(tmp_path / "X.npz"), "-k", "6", "--mini-batch", "200",
         "--scratch-dir", str(tmp_path), "--dry-run"],
        check=True, capture_output=True, text=True,
    ).stdout
    assert "mini-batch steps: batch (CSR)" in plan and "mini-batch steps: sparse products (per thread)" in plan


def pathlib_read(path):
    with open(path) as f:
        return f.read()


def test_a_refusal_names_the_blocks_a_dense_row_makes_large():
    """Blocks hold their rows at the densest row's size: where one dense row
    makes them the largest need, the refusal names them and that row."""
    X = sp.random(1000, 100_000, density=1e-4, format="csr", random_state=0).tolil()
    X[0] = np.ones(100_000)
    with pytest.raises(MemoryError) as e:
        KMeans(n_clusters=2, n_init=1, memory_limit="64MiB").fit(X.tocsr())
    message = str(e.value)
    assert "(sparse rows of up to 100000 stored values)" in message
    assert "largest buffer: the smallest read blocks and tiles = " in message


def test_a_limit_far_below_the_dense_matrix():
    # 20,000 × 200,000: 32 GB dense; fitted within 256 MiB (the centres'
    # sums, 10 × 200,000 compensated float64 per chunk, dominate).
    rng = np.random.default_rng(0)
    n, d, per = 20_000, 200_000, 30
    cols = (rng.zipf(1.3, n * per) - 1) % d
    X = sp.csr_matrix((rng.random(n * per), (np.repeat(np.arange(n), per), cols)), shape=(n, d))
    X.sum_duplicates()
    km = KMeans(10, n_init=1, random_state=0, max_iter=5, memory_limit="256MiB").fit(X)
    assert km.cluster_centers_.shape == (10, d)
    assert "centers for sparse rows" in km.memory_plan_
    with pytest.raises(MemoryError, match="the job needs at least"):
        KMeans(10, memory_limit="64MiB").fit(X)
    mb = MiniBatchKMeans(10, n_init=1, random_state=0, max_iter=2, memory_limit="256MiB").fit(X)
    assert mb.cluster_centers_.shape == (10, d) and mb.labels_.shape == (n,)
    assert "sparse products (per thread)" in mb.memory_plan_


def test_peak_memory_stays_within_the_limit_in_memory_and_from_a_folder(tmp_path):
    """A sparse fit in a child process adds at most memory_limit + 64 MiB
    to its resident memory: on a borrowed CSR matrix, and from a CSR
    folder (over 4× the limit) read by the CLI."""
    import json
    import os
    import subprocess
    import sys
    import zipfile

    from test_memory import SLACK, MiB, run_child

    limit = 64 * MiB
    got = run_child(
        """
        import scipy.sparse as sp
        from memfit import KMeans, MiniBatchKMeans
        rng = np.random.default_rng(0)
        n, d, per = 400_000, 50_000, 30
        rows = np.repeat(np.arange(n), per)
        X = sp.csr_matrix((rng.random(rows.size), (rows, (rows % 8) * 6_000 + rng.integers(0, 600, rows.size))),
                          shape=(n, d))
        X.sum_duplicates()
        labels_bytes = 4 * n
        base = status("VmRSS")
        reset_peak()
        km = KMeans(8, n_init=1, max_iter=3, random_state=0, memory_limit=int(sys.argv[1])).fit(X)
        peak = status("VmHWM") - base
        reset_peak()
        base = status("VmRSS")
        MiniBatchKMeans(8, batch_size=4096, max_iter=2, random_state=0, memory_limit=int(sys.argv[1])).fit(X)
        print({"peak": peak, "mini-batch peak": status("VmHWM") - base, "labels": labels_bytes})
        """,
        limit,
    )
    assert got["peak"] <= limit + SLACK, got
    assert got["mini-batch peak"] <= limit + SLACK, got
    # The CLI reads a folder whose arrays are several times the limit.
    rng = np.random.default_rng(1)
    n, d, per = 1_500_000, 20_000, 16
    rows = np.repeat(np.arange(n), per)
    X = sp.csr_matrix((rng.random(rows.size), (rows, (rows % 8) * 2_000 + rng.integers(0, 400, rows.size))), shape=(n, d))
    X.sum_duplicates()
    sp.save_npz(tmp_path / "X.npz", X, compressed=False)
    zipfile.ZipFile(tmp_path / "X.npz").extractall(tmp_path / "X")
    on_disk = sum(os.path.getsize(tmp_path / "X" / f) for f in os.listdir(tmp_path / "X"))
    assert on_disk > 4 * limit
    del X
    out = subprocess.run(
        [sys.executable, "-m", "memfit", "kmeans", str(tmp_path / "X"), "-k", "8", "--max-iter", "3", "--seed", "0",
         "--memory-limit", str(limit), "--summary", str(tmp_path / "s.json"), "--quiet"],
        capture_output=True, text=True, check=True,
    )
    peak = json.loads((tmp_path / "s.json").read_text())["peak_rss_bytes"]
    assert peak <= limit + SLACK, (peak, out.stdout)


def test_the_cli_reads_a_npz_as_it_reads_the_unzipped_folder(tmp_path):
    """`memfit kmeans X.npz` (scipy.sparse.save_npz, deflated: unpacked;
    or stored: read in place) gives the unzipped folder's labels and
    inertia bit for bit, and
    `memfit predict` reads it too; a CSC .npz, a file that is not a zip
    archive and a mixture on a .npz are refused clearly."""
    import json
    import subprocess
    import sys
    import zipfile

    def memfit(*args, ok=True):
        out = subprocess.run([sys.executable, "-m", "memfit", *map(str, args)], capture_output=True, text=True)
        assert (out.returncode == 0) == ok, out.stderr
        return out

    X = tfidf_like(n=3_000, d=800, density=0.02)
    X.sum_duplicates()  # sorted columns, as the reader requires
    sp.save_npz(tmp_path / "X.npz", X)
    sp.save_npz(tmp_path / "stored.npz", X, compressed=False)
    zipfile.ZipFile(tmp_path / "X.npz").extractall(tmp_path / "X")
    fits = {}
    for name in ["X.npz", "stored.npz", "X"]:
        s, labels = tmp_path / f"{name}.json", tmp_path / f"{name}.labels.npy"
        memfit("kmeans", tmp_path / name, "-k", "8", "--seed", "0", "--memory-limit", "64MiB", "--scratch-dir",
               tmp_path, "--labels", labels, "--summary", s, "--quiet")
        fits[name] = (np.load(labels), json.loads(s.read_text())["inertia"])
    for name in ["X.npz", "stored.npz"]:
        assert np.array_equal(fits[name][0], fits["X"][0]) and fits[name][1] == fits["X"][1], name
    # The plan shows the deflated arrays' unpacked bytes on disk (checked
    # against the free space before any work); a stored archive has none.
    with zipfile.ZipFile(tmp_path / "X.npz") as z:
        sizes = {i.filename: i.file_size for i in z.infolist()}
    for cmd in (["kmeans", tmp_path / "X.npz", "-k", "8"], ["predict", tmp_path / "X.npz", "--centers", tmp_path / "c0.npy", "--labels", tmp_path / "l0.npy"]):
        np.save(tmp_path / "c0.npy", np.zeros((8, 800)))
        plan = memfit(*cmd, "--scratch-dir", tmp_path, "--dry-run").stdout
        for member in ("indices.npy", "data.npy"):
            assert f"disk: {member} of {tmp_path / 'X.npz'}, unpacked in {tmp_path}: {sizes[member]} B" in plan, plan
    plan = memfit("kmeans", tmp_path / "stored.npz", "-k", "8", "--dry-run").stdout
    assert "unpacked" not in plan
    np.save(tmp_path / "c.npy", np.asarray(X[:8].todense()))
    memfit("predict", tmp_path / "X.npz", "--centers", tmp_path / "c.npy", "--labels", tmp_path / "p.npy",
           "--scratch-dir", tmp_path, "--quiet")
    err = memfit("predict", tmp_path / "X.npz", "--centers", tmp_path / "c.npy", "--labels", tmp_path / "p2.npy",
                 "--scratch-dir", tmp_path / "missing", ok=False).stderr
    assert "missing" in err and "scratch folder" in err and not (tmp_path / "p2.npy").exists()
    memfit("predict", tmp_path / "X", "--centers", tmp_path / "c.npy", "--labels", tmp_path / "q.npy", "--quiet")
    assert np.array_equal(np.load(tmp_path / "p.npy"), np.load(tmp_path / "q.npy"))
    # No scratch file is left behind (the arrays were unpacked unnamed).
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("tmp")) == []
    sp.save_npz(tmp_path / "csc.npz", X.tocsc())
    err = memfit("kmeans", tmp_path / "csc.npz", "-k", "2", ok=False).stderr
    assert 'csc.npz/format.npy: the matrix is stored as "csc"; only CSR is read; hint: save X.tocsr() instead' in err
    (tmp_path / "junk.npz").write_bytes(b"not a zip archive")
    err = memfit("kmeans", tmp_path / "junk.npz", "-k", "2", ok=False).stderr
    assert "junk.npz: not a .npz (zip) archive" in err and "hint: save it with scipy.sparse.save_npz" in err
    err = memfit("gmm", tmp_path / "X.npz", "-k", "2", "--model", tmp_path / "m", ok=False).stderr
    assert "is a .npz; only kmeans and predict read a sparse (CSR) matrix" in err
    # A value changed inside a stored archive: refused by its checksum, not clustered.
    raw = bytearray((tmp_path / "stored.npz").read_bytes())
    at = bytes(raw).rindex(X.data[-1].tobytes())
    raw[at] ^= 1
    (tmp_path / "bad.npz").write_bytes(bytes(raw))
    err = memfit("kmeans", tmp_path / "bad.npz", "-k", "2", ok=False).stderr
    assert "bad.npz/data.npy: cannot be read from the archive" in err and "hint: " in err
    # A zip archive is read as one whatever its name.
    (tmp_path / "X.zip").write_bytes((tmp_path / "X.npz").read_bytes())
    memfit("kmeans", tmp_path / "X.zip", "-k", "8", "--seed", "0", "--memory-limit", "64MiB",
           "--labels", tmp_path / "zip.labels.npy", "--quiet")
    assert np.array_equal(np.load(tmp_path / "zip.labels.npy"), fits["X"][0])
    # An output is never written among an input folder's arrays.
    before = (tmp_path / "X" / "data.npy").read_bytes()
    err = memfit("kmeans", tmp_path / "X", "-k", "2", "--labels", tmp_path / "X" / "data.npy", ok=False).stderr
    assert "--labels lies inside the folder of INPUT" in err
    assert (tmp_path / "X" / "data.npy").read_bytes() == before


def _same_fit(a, b):
    assert np.array_equal(a.cluster_centers_, b.cluster_centers_)
    assert a.inertia_ == b.inertia_ and a.n_iter_ == b.n_iter_
    assert np.array_equal(a.labels_, np.asarray(b.labels_))


@pytest.mark.parametrize("metric", ["euclidean", "cosine"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_dask_array_of_sparse_chunks_fits_as_the_matrix_itself(metric, dtype):
    """KMeans reads a Dask array of scipy.sparse chunks chunk by chunk (no
    client: in this process) and gives the bits of the fit on the matrix:
    centres, labels, inertia, predict, transform and score, with and without
    weights, whatever the chunks (unaligned ones, CSC and COO chunks)."""
    da = pytest.importorskip("dask.array")
    from memfit import _dask

    X = tfidf_like(n=2 * _dask.CHUNK_ROWS + 3_000, d=400, density=0.02, dtype=dtype)
    w = np.random.default_rng(3).uniform(0.5, 2.0, X.shape[0])
    kw = dict(n_clusters=6, random_state=2, n_init=2, max_iter=15, metric=metric, memory_limit="64MiB")
    local = KMeans(**kw).fit(X)
    for chunks, fmt in [(_dask.CHUNK_ROWS, "csr"), (50_000, "csr"), (_dask.CHUNK_ROWS, "csc"), (70_000, "coo")]:
        dX = da.from_array(X, chunks=(chunks, X.shape[1]), asarray=False).map_blocks(lambda b, f=fmt: b.asformat(f), meta=X[:0])
        fitted = KMeans(**kw).fit(dX)
        _same_fit(local, fitted)
        assert fitted.cluster_centers_.dtype == dtype and dX.chunks[:1] == fitted.labels_.chunks
    assert np.array_equal(fitted.predict(dX).compute(), local.predict(X))
    assert np.array_equal(fitted.transform(dX).compute(), local.transform(X))
    assert fitted.score(dX) == local.score(X)
    assert np.array_equal(KMeans(**kw).fit_predict(dX).compute(), local.labels_)
    _same_fit(KMeans(**kw).fit(X, sample_weight=w), KMeans(**kw).fit(dX, sample_weight=w))
    # The plan holds a computed chunk, never the matrix.
    assert "held by the input" in fitted.memory_plan_


def test_a_dask_array_of_sparse_chunks_is_checked_and_refused_clearly():
    """A bad chunk is named as a bad matrix is; estimators that do not read
    sparse chunks say so and what to pass instead, before any work."""
    da = pytest.importorskip("dask.array")
    X = sp.random(400, 30, density=0.1, format="csr", random_state=0)
    dX = da.from_array(X, chunks=(100, 30), asarray=False)
    # An estimator that needs dense rows says so.
    with pytest.raises(TypeError, match=r"chunks where dense rows are needed .*pass X.map_blocks\(lambda b: b.toarray\(\)\)"):
        GaussianMixture(2).fit(dX)
    # Sparse chunks behind a dense meta are found when read, and named (the
    # reader's own TypeError, as a chunk's exception is raised unchanged).
    hidden = da.from_array(X, chunks=(100, 30), asarray=False).map_blocks(lambda b: b, meta=np.empty((0, 0)))
    with pytest.raises(TypeError, match=r"meta says its chunks are dense, but a chunk is a csr_matrix.*meta=scipy.sparse.csr_matrix"):
        KMeans(3).fit(hidden)


@pytest.mark.parametrize("metric", ["euclidean", "cosine"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_minibatch_on_a_dask_array_of_sparse_chunks_fits_as_the_matrix_itself(metric, dtype):
    """MiniBatchKMeans draws its batches from a Dask array of scipy.sparse
    chunks (no client: one chunk at a time in this process) and gives the
    bits of the fit on the matrix from the same random_state: centres,
    labels, inertia and steps, with weights, partial_fit and early stopping
    on tol (the column variances merged chunk by chunk); a NaN or an
    infinity anywhere is refused before any step, as for the matrix."""
    da = pytest.importorskip("dask.array")
    X = tfidf_like(n=30_000, d=300, density=0.02, dtype=dtype)
    w = np.random.default_rng(3).uniform(0.5, 2.0, X.shape[0])
    kw = dict(n_clusters=6, random_state=2, batch_size=1_024, max_iter=3, metric=metric)
    local = MiniBatchKMeans(**kw).fit(X)
    for chunks, fmt in [(10_000, "csr"), (7_000, "csc"), (12_345, "coo")]:
        dX = da.from_array(X, chunks=(chunks, X.shape[1]), asarray=False).map_blocks(lambda b, f=fmt: b.asformat(f), meta=X[:0])
        fitted = MiniBatchKMeans(**kw).fit(dX)
        _same_fit(local, fitted)
        assert fitted.n_steps_ == local.n_steps_ and fitted.cluster_centers_.dtype == dtype
    assert np.array_equal(fitted.predict(dX).compute(), local.predict(X))
    _same_fit(MiniBatchKMeans(**kw).fit(X, sample_weight=w), MiniBatchKMeans(**kw).fit(dX, sample_weight=w))
    # Early stopping on tol: the same steps (the variances agree to rounding).
    stop = dict(kw, tol=1e-2, max_no_improvement=None, max_iter=50)
    a, b = MiniBatchKMeans(**stop).fit(X), MiniBatchKMeans(**stop).fit(dX)
    assert np.isclose(a._tol, b._tol, rtol=1e-6) and a.n_steps_ == b.n_steps_ < 50 * X.shape[0] // 1_024
    _same_fit(a, b)
    # Chunks of no rows add nothing to the variances (they made tol NaN: no early stop).
    for chunks in [(0, 30_000), (10_000, 0, 20_000), (30_000, 0)]:
        empty = MiniBatchKMeans(**stop).fit(da.from_array(X, chunks=(chunks, X.shape[1]), asarray=False))
        assert np.isclose(empty._tol, a._tol, rtol=1e-6)
        _same_fit(a, empty)
    a, b = MiniBatchKMeans(**kw), MiniBatchKMeans(**kw)
    dX = da.from_array(X, chunks=(10_000, X.shape[1]), asarray=False)
    for lo, hi in [(0, 4_000), (4_000, 30_000)]:
        a.partial_fit(X[lo:hi], sample_weight=w[lo:hi])
        b.partial_fit(dX[lo:hi], sample_weight=w[lo:hi])
        assert np.array_equal(a.cluster_centers_, b.cluster_centers_)
    assert "a computed chunk of X" in fitted.memory_plan_
    for value, message in [(np.nan, "Input X contains NaN"), (np.inf, "Input X contains infinity")]:
        bad = X.copy()
        bad.data[bad.indptr[20_000]] = value
        dbad = da.from_array(bad, chunks=(10_000, X.shape[1]), asarray=False)
        for call in (MiniBatchKMeans(**kw).fit, MiniBatchKMeans(**kw, compute_labels=False).fit, MiniBatchKMeans(**kw).partial_fit):
            with pytest.raises(ValueError, match=message):
                call(dbad)


def test_a_chunk_other_than_declared_is_refused_naming_it():
    """A chunk that a graph computes to another shape than the Dask array
    declares (or dense among sparse ones) is refused, naming it and its rows
    in X, by fit and by the lazy per-row results: it was read as other rows
    of X (a silently wrong fit), or a short one made the read loop forever.
    A bad CSR chunk's rows are named as in X."""
    da = pytest.importorskip("dask.array")
    from memfit import _dask

    R = _dask.CHUNK_ROWS
    X = sp.random(2 * R + 1_000, 20, density=0.1, format="csr", random_state=5)
    fitted = KMeans(3, n_init=1, max_iter=2, random_state=0).fit(X)

    def in_chunk_1(change):
        return lambda b, block_info=None: change(b) if block_info[0]["chunk-location"][0] == 1 else b

    def bad_column(b):
        b = b.copy()
        b.indices[b.indptr[5]] = 99
        return b

    cases = [
        (lambda b: b[:-1], ValueError, r"chunk 1 of X \(rows 65536\.\.131072\) computed to shape \(65535, 20\), but the Dask array declares \(65536, 20\)"),
        (lambda b: sp.vstack([b, b[:1]]).tocsr(), ValueError, r"computed to shape \(65537, 20\)"),
        (lambda b: b[:, :-3], ValueError, r"computed to shape \(65536, 17\)"),
        (bad_column, ValueError, r"not valid CSR: row 65541 has index 99, outside 0\.\.20"),
    ]
    for change, error, message in cases:
        dX = da.from_array(X, chunks=(R, 20), asarray=False).map_blocks(in_chunk_1(change), dtype=float, meta=X[:0])
        with pytest.raises(error, match=message):
            KMeans(3, n_init=1, max_iter=2).fit(dX)
        with pytest.raises(error, match=message):
            fitted.predict(dX).compute()
    dense_among = da.from_array(X, chunks=(R, 20), asarray=False).map_blocks(
        in_chunk_1(lambda b: b.toarray()), dtype=float, meta=X[:0])
    with pytest.raises(TypeError, match=r"chunk 1 of X \(rows 65536\.\.131072\) is a ndarray, but X's Dask meta says"):
        KMeans(3).fit(dense_among)
    # Dense chunks are checked the same way (a short one made the reader loop forever).
    short = da.from_array(X.toarray(), chunks=(R, 20)).map_blocks(in_chunk_1(lambda b: b[:-1]), dtype=float)
    with pytest.raises(ValueError, match=r"chunk 1 of X .* computed to shape \(65535, 20\)"):
        KMeans(3).fit(short)
    # A matrix of NaN is refused naming its row as in the whole matrix.
    bad = X.copy()
    bad.data[bad.indptr[250]] = np.nan
    with pytest.raises(ValueError, match=r"contains NaN\.\n.*\nX: row 250, column "):
        KMeans(3).fit(da.from_array(bad, chunks=(100, 30), asarray=False))


@pytest.mark.parametrize("bad", [np.nan, np.inf])
@pytest.mark.parametrize("method", ["predict", "transform"])
def test_a_non_finite_sparse_dask_chunk_is_named_as_in_the_matrix(bad, method):
    """predict and transform of a Dask array of sparse chunks holding NaN or
    infinity raise scikit-learn's ValueError, as on the matrix (the check of
    the chunk read it as a dense array: "memfit.array does not support
    object arrays", a TypeError; helper 113)."""
    da = pytest.importorskip("dask.array")
    X = sp.random(200, 10, density=0.3, format="csr", random_state=0)
    km = KMeans(3, n_init=1, random_state=0).fit(X)
    bad_x = X.copy()
    bad_x.data[-1] = bad
    word = "NaN" if np.isnan(bad) else "infinity"
    with pytest.raises(ValueError, match=f"Input X contains {word}"):
        getattr(km, method)(bad_x)
    with pytest.raises(ValueError, match=f"Input X contains {word}"):
        getattr(km, method)(da.from_array(bad_x, chunks=(50, 10), asarray=False)).compute()
