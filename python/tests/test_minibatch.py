"""memfit.MiniBatchKMeans against scikit-learn's MiniBatchKMeans: the same
random stream gives the same batches, initial centres, reassignments and
stopping step, so fits agree to rounding (memfit's batch sums are
compensated float64); the same result for every kind of input, thread
count and memory limit; partial_fit; errors."""

import pickle
import re

import dask.array as da
import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.cluster import MiniBatchKMeans as SkMiniBatchKMeans
from sklearn.datasets import make_blobs
from sklearn.utils._param_validation import InvalidParameterError

import memfit
from memfit import MiniBatchKMeans

X, _ = make_blobs(6000, 4, centers=8, random_state=0)


def _same_fit(a, b, rtol=1e-12):
    assert a.n_steps_ == b.n_steps_ and a.n_iter_ == b.n_iter_
    assert_allclose(a.cluster_centers_, b.cluster_centers_, rtol=rtol, atol=rtol * 10)
    assert a.inertia_ == pytest.approx(b.inertia_, rel=rtol)
    if hasattr(b, "labels_"):
        assert_array_equal(a.labels_, b.labels_)


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"init": "random"},  # three initialisations and many reassignments
        {"tol": 1e-3},
        {"compute_labels": False},
        {"max_no_improvement": None, "max_iter": 2, "batch_size": 500},
        {"reassignment_ratio": 0.3, "batch_size": 100, "n_clusters": 20},
        {"init_size": 50, "n_init": 2},
    ],
)
def test_fit_matches_sklearn_from_the_same_random_state(params):
    params = {"n_clusters": 8, "random_state": 3, **params}
    a = MiniBatchKMeans(**params).fit(X)
    b = SkMiniBatchKMeans(**params).fit(X)
    _same_fit(a, b)


@pytest.mark.parametrize("n, d, k, batch", [(60, 3, 20, 4), (3000, 2, 50, 32), (200, 3, 60, 4), (10, 3, 10, 4)])
def test_more_light_centres_than_half_a_batch_are_chosen_as_scikit_learn_does(n, d, k, batch):
    # More light centres than half the batch, many with tied counts: the
    # ones replaced are the first half-batch of np.argsort(counts), whose
    # order among ties is NumPy's (not the index order).
    x = np.random.default_rng(0).standard_normal((n, d))
    params = {"n_clusters": k, "random_state": 0, "batch_size": batch, "n_init": 1}
    _same_fit(MiniBatchKMeans(**params).fit(x), SkMiniBatchKMeans(**params).fit(x))


def test_weighted_and_float32_fits_match_sklearn():
    w = np.random.RandomState(0).uniform(0.1, 3, size=len(X))
    _same_fit(MiniBatchKMeans(8, random_state=1).fit(X, sample_weight=w),
              SkMiniBatchKMeans(8, random_state=1).fit(X, sample_weight=w))
    a = MiniBatchKMeans(8, random_state=1).fit(X.astype(np.float32))
    b = SkMiniBatchKMeans(8, random_state=1).fit(X.astype(np.float32))
    assert a.cluster_centers_.dtype == np.float32 and a.n_steps_ == b.n_steps_
    # scikit-learn sums float32 batches in float32.
    assert_allclose(a.cluster_centers_, b.cluster_centers_, rtol=1e-4, atol=1e-4)
    assert (a.labels_ == b.labels_).mean() > 0.999


def test_partial_fit_matches_sklearn_on_the_same_batches():
    w = np.random.RandomState(1).uniform(0.5, 2, size=len(X))
    a, b = MiniBatchKMeans(8, random_state=0), SkMiniBatchKMeans(8, random_state=0)
    for start in range(0, len(X), 700):
        rows = slice(start, start + 700)
        a.partial_fit(X[rows], sample_weight=w[rows])
        b.partial_fit(X[rows], sample_weight=w[rows])
        assert_allclose(a.cluster_centers_, b.cluster_centers_, rtol=1e-12, atol=1e-11)
        assert_array_equal(a.labels_, b.labels_)
        assert a.inertia_ == pytest.approx(b.inertia_, rel=1e-12)
    assert a.n_steps_ == b.n_steps_ == 9
    assert_allclose(a._counts, b._counts, rtol=1e-14)


def test_every_input_kind_gives_the_same_bits(tmp_path):
    # tol > 0: the variances come from a pass over each kind of input too.
    ref = MiniBatchKMeans(5, random_state=0, batch_size=256, tol=1e-4).fit(X)
    path = tmp_path / "x.npy"
    np.save(path, X)
    inputs = [
        str(path),
        np.load(path, mmap_mode="r"),
        memfit.array.asarray(X) * 1.0,
        da.from_array(X, chunks=1000),
        np.asfortranarray(X),
    ]
    for x in inputs:
        km = MiniBatchKMeans(5, random_state=0, batch_size=256, tol=1e-4).fit(x)
        assert_array_equal(km.cluster_centers_, ref.cluster_centers_)
        assert km.inertia_ == ref.inertia_
        assert_array_equal(np.asarray(km.labels_), ref.labels_)
    # Weights, given as an array, for an in-memory and a Dask X.
    w = np.random.default_rng(2).uniform(0.5, 2.0, X.shape[0])
    ref = MiniBatchKMeans(5, random_state=0, batch_size=256).fit(X, sample_weight=w)
    km = MiniBatchKMeans(5, random_state=0, batch_size=256).fit(da.from_array(X, chunks=1000), sample_weight=w)
    assert_array_equal(km.cluster_centers_, ref.cluster_centers_)


def test_threads_and_memory_limits_give_the_same_bits():
    ref = MiniBatchKMeans(30, random_state=0, n_jobs=1).fit(X)
    for params in ({"n_jobs": 2}, {"memory_limit": "4MiB"}, {"n_jobs": 2, "memory_limit": "2MiB"}):
        km = MiniBatchKMeans(30, random_state=0, **params).fit(X)
        assert_array_equal(km.cluster_centers_, ref.cluster_centers_)
        assert km.inertia_ == ref.inertia_


def test_integer_input_is_float64():
    Xi = np.rint(X * 10).astype(np.int32)
    km = MiniBatchKMeans(4, random_state=0).fit(Xi)
    ref = MiniBatchKMeans(4, random_state=0).fit(Xi.astype(np.float64))
    assert km.cluster_centers_.dtype == np.float64
    assert_array_equal(km.cluster_centers_, ref.cluster_centers_)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.uint16, np.float16])
@pytest.mark.parametrize("params", [{}, {"tol": 1e-3, "max_no_improvement": 2}, {"reassignment_ratio": 0.5}])
def test_input_exact_in_float32_steps_as_its_float64_copy(dtype, params, tmp_path):
    # The steps read such rows as float32 (half the bytes, float32 tiles)
    # and keep float64 centres: every result is the float64 copy's.
    rng = np.random.default_rng(3)
    info = np.finfo(dtype) if np.dtype(dtype).kind == "f" else np.iinfo(dtype)
    Xd = np.clip(rng.normal(0, 1, (3000, 20)) * min(float(info.max) / 4, 1000), info.min, info.max).astype(dtype)
    np.save(tmp_path / "x.npy", Xd)
    w = rng.random(Xd.shape[0])
    ref = MiniBatchKMeans(8, batch_size=256, random_state=0, max_iter=4, **params).fit(Xd.astype(np.float64), sample_weight=w)
    for data in (Xd, str(tmp_path / "x.npy")):
        km = MiniBatchKMeans(8, batch_size=256, random_state=0, max_iter=4, **params).fit(data, sample_weight=w)
        assert km.cluster_centers_.dtype == np.float64
        assert_array_equal(km.cluster_centers_, ref.cluster_centers_)
        assert_array_equal(km.labels_, ref.labels_)
        assert (km.inertia_, km.n_steps_) == (ref.inertia_, ref.n_steps_)


@pytest.mark.parametrize("kind", ["numpy", "dask"])
def test_non_finite_x_gets_scikit_learns_message_whatever_rows_are_drawn(kind):
    rng = np.random.default_rng(0)
    Xb = rng.normal(size=(2000, 20))
    Xb[1199, 19] = np.nan
    Xb[700, 0] = np.inf  # drawn before the NaN: still "contains NaN", as scikit-learn says
    Xi = np.where(np.isnan(Xb), 0.0, Xb)
    wrap = (lambda a: da.from_array(a, chunks=(300, 20))) if kind == "dask" else (lambda a: a)
    for method in ("fit", "partial_fit"):
        with pytest.raises(ValueError, match=r"^Input X contains NaN\."):
            getattr(MiniBatchKMeans(4, random_state=0, batch_size=100), method)(wrap(Xb))
        with pytest.raises(ValueError, match=r"^Input X contains infinity or a value too large for dtype\('float64'\)\."):
            getattr(MiniBatchKMeans(4, random_state=0, batch_size=100), method)(wrap(Xi))


def test_fitted_model_predicts_transforms_scores_and_pickles():
    km = MiniBatchKMeans(8, random_state=0).fit(X)
    assert_array_equal(km.predict(X), km.labels_)
    assert km.score(X) == pytest.approx(-km.inertia_, rel=1e-12)
    d = km.transform(X[:10])
    assert d.shape == (10, 8)
    assert_array_equal(d.argmin(axis=1), km.labels_[:10])
    again = pickle.loads(pickle.dumps(km))
    assert_array_equal(again.predict(X[:50]), km.labels_[:50])
    assert len(pickle.dumps(km)) < 200_000


def test_errors():
    with pytest.raises(InvalidParameterError, match="reassignment_ratio"):
        MiniBatchKMeans(reassignment_ratio=-1).fit(X)
    with pytest.raises(ValueError, match="n_samples=5 should be >= n_clusters=8"):
        MiniBatchKMeans(8).fit(X[:5])
    with pytest.raises(ValueError, match=r"^sample_weight\[0\] = -1; hint: sample weights must be >= 0"):
        MiniBatchKMeans(3).fit(X, sample_weight=np.r_[-1.0, np.ones(len(X) - 1)])
    bad = X.copy()
    bad[7, 2] = np.nan
    for seed in range(4):  # found in a drawn row or by the final pass
        with pytest.raises(ValueError, match="^Input X contains NaN"):
            MiniBatchKMeans(3, random_state=seed).fit(bad)
    with pytest.raises(ValueError, match="(?s)^Input X contains NaN\\.\n.*\nX: row 7, column 2 is NaN \\(not finite\\)"):
        MiniBatchKMeans(3, batch_size=len(X)).fit(bad)
    with pytest.raises(ValueError, match="(?s)^Input X contains NaN\\.\n.*\nX: row 0, column 2 is NaN"):
        MiniBatchKMeans(3, compute_labels=False, random_state=0).fit(np.r_[bad[7:8], X[:100]])
    bad[7, 2] = np.inf
    with pytest.raises(ValueError, match=r"^Input X contains infinity or a value too large for dtype\('float64'\)"):
        MiniBatchKMeans(3, compute_labels=False, random_state=0, max_iter=1).fit(bad)
    # Found in a drawn batch of float32 rows: the message names float32.
    bad32 = bad.astype(np.float32)
    for fit in (MiniBatchKMeans(3, random_state=0).fit, MiniBatchKMeans(3, random_state=0).partial_fit):
        with pytest.raises(ValueError, match=r"^Input X contains infinity or a value too large for dtype\('float32'\)"):
            fit(bad32)
    with pytest.raises(MemoryError, match="memory_limit"):
        MiniBatchKMeans(3, memory_limit=1000).fit(X)


@pytest.mark.parametrize(
    "data, weights",
    [
        (X * 1e-310, None),  # every squared distance underflows
        (X * 1e200, None),  # squared distances overflow
        (np.r_[X[:-1], [[1e300, 0, 0, 0]]], None),  # one column's span overflows
        (X, np.zeros(len(X))),
        (X, np.r_[np.ones(len(X) - 1), -2.0]),
        (X, np.full(len(X), 1e307)),  # the weights' sum overflows
    ],
    ids=["tiny", "huge", "span", "zero weights", "negative weight", "weight sum"],
)
def test_refuses_what_kmeans_refuses_in_its_words(data, weights):
    """fit and partial_fit read X once before any step, as KMeans does,
    and refuse the same data with the same message (before, 1e-310 data
    gave an inertia of 0 and 1e200 an error about the centres)."""
    with pytest.raises(ValueError) as kmeans:
        memfit.KMeans(3, n_init=1, random_state=0).fit(data, sample_weight=weights)
    for fit in (MiniBatchKMeans(3, random_state=0).fit, MiniBatchKMeans(3, random_state=0).partial_fit):
        with pytest.raises(ValueError) as minibatch:
            fit(data, sample_weight=weights)
        assert str(minibatch.value) == str(kmeans.value)


def test_per_row_buffers_count_against_the_limit(tmp_path):
    """The draws' cumulative weights (8 B per row) and labels_ (4 B) are
    checked against memory_limit before any work, naming the largest."""
    path = tmp_path / "tall.npy"
    np.save(path, np.random.RandomState(0).rand(1_000_000, 2))
    with pytest.raises(MemoryError, match=r"largest buffer: cumulative weights of the rows \(float64\) = 7.63 MiB"):
        MiniBatchKMeans(8, batch_size=256, memory_limit="8MiB").fit(str(path))
    with pytest.raises(MemoryError, match=r"raise memory_limit to at least 11.56 MiB"):
        MiniBatchKMeans(8, batch_size=256, memory_limit="11MiB").fit(str(path))
    # The init_size rows drawn (here every row), and k-means++ on them.
    with pytest.raises(MemoryError, match=r"largest buffer: k-means\+\+ on the sample \(float64\) = 76.29 MiB"):
        MiniBatchKMeans(8, batch_size=256, init_size=1_000_000, memory_limit="40MiB").fit(str(path))
    # partial_fit reads its batch whole, with the rows' indices (16 B each).
    with pytest.raises(MemoryError, match=r"1000000 rows of 2 features drawn from the data, with their indices"):
        MiniBatchKMeans(8, memory_limit="24MiB").partial_fit(str(path))
    fitted = MiniBatchKMeans(8, batch_size=256, memory_limit="12MiB", max_iter=1, random_state=0).fit(str(path))
    assert fitted.labels_.shape == (1_000_000,)
    assert "cumulative weights of the rows (float64)" in fitted.memory_plan_
    assert fitted.memory_plan_.startswith("memory plan for mini-batch k-means steps (limit 12.00 MiB")
    with pytest.warns(RuntimeWarning, match="init_size=10 should be larger than n_clusters=20"):
        MiniBatchKMeans(20, init_size=10).fit(X)


@pytest.mark.parametrize("method", ["predict", "partial_fit"])
def test_feature_name_warnings_come_once_per_call_as_scikit_learns(method):
    """X is checked once per call: a call without the feature names it was
    fitted with warns once (not again for the labels it computes)."""
    import warnings

    import pandas as pd

    X = np.random.default_rng(0).standard_normal((60, 3))
    df = pd.DataFrame(X, columns=list("abc"))
    counts = []
    for estimator in (SkMiniBatchKMeans, MiniBatchKMeans):
        m = estimator(n_clusters=3, random_state=0, n_init=1).partial_fit(df)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            getattr(m, method)(X)
        counts.append([str(w.message) for w in caught])
    assert counts[1] == counts[0] and len(counts[0]) == 1


@pytest.mark.parametrize("far", [1e8, -3e15, 3.0])
def test_a_centre_without_weight_lands_on_its_rows_mean(far):
    # scikit-learn's (0 * c + S) / s puts a fresh centre exactly on its rows'
    # mean; c + (S - s c) / s lost their low digits far from them.
    X = np.array([[1.234e-3, 5e-4]] * 2)
    init = np.full((1, 2), far)
    ours = MiniBatchKMeans(1, init=init, n_init=1, random_state=0).partial_fit(X)
    theirs = SkMiniBatchKMeans(1, init=init, n_init=1, random_state=0).partial_fit(X)
    assert_array_equal(ours.cluster_centers_, X[:1])
    assert_array_equal(ours.cluster_centers_, theirs.cluster_centers_)


def test_centres_that_meet_stay_equal_as_scikit_learns():
    # Two centres scikit-learn moves onto the same rows stay bit-identical,
    # so the ties that follow break alike (they came an ulp apart: 106
    # labels differed).
    rng = np.random.RandomState(0)
    X = rng.randn(600, 4) + np.repeat(rng.randn(6, 4) * 3, 100, axis=0)
    kw = dict(n_clusters=30, random_state=0, batch_size=20, reassignment_ratio=0.5)
    ours = MiniBatchKMeans(**kw).fit(X)
    theirs = SkMiniBatchKMeans(**kw).fit(X)
    assert_array_equal(ours.labels_, theirs.labels_)
    assert_allclose(ours.cluster_centers_, theirs.cluster_centers_, rtol=0, atol=1e-12)


def test_partial_fit_keeps_the_first_batchs_dtype():
    """Batches of another float dtype are read into the centres' dtype (the
    first batch's): float64 centres stay float64 through a float32 batch,
    bit for bit the step on that batch in float64 (scikit-learn raises a
    Buffer dtype mismatch; memfit rounded the centres to float32)."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(60, 4))
    mixed = MiniBatchKMeans(3, random_state=0).partial_fit(X[:20])
    plain = MiniBatchKMeans(3, random_state=0).partial_fit(X[:20])
    b32 = X[20:40].astype(np.float32)
    mixed.partial_fit(b32)
    plain.partial_fit(b32.astype(np.float64))
    assert mixed.cluster_centers_.dtype == np.float64
    assert_array_equal(mixed.cluster_centers_, plain.cluster_centers_)
    assert_array_equal(mixed.labels_, plain.labels_)
    single = MiniBatchKMeans(3, random_state=0).partial_fit(X[:20].astype(np.float32)).partial_fit(X[20:40])
    assert single.cluster_centers_.dtype == np.float32


@pytest.mark.parametrize("method", ["fit", "partial_fit"])
def test_inexact_integers_are_warned_once_per_fit(method):
    """int64 values beyond 2^53 are warned about once: the validation pass
    warns, the labels pass over the same X does not again."""
    import warnings

    X = np.array([[2**60 + 1, 1], [3, 4], [5, 6], [7, 8]], dtype=np.int64)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        getattr(MiniBatchKMeans(2, random_state=0), method)(X)
    assert [str(w.message)[:40] for w in caught] == ["X: column 0 holds int64 values beyond 2^"]


def test_an_initial_sample_of_zero_weights_says_so():
    """The init_size rows drawn for the initialisation may all have zero
    weight though X's weights do not: the error says that and how to avoid
    it (it said all the weights were zero; scikit-learn's says the
    probabilities contain NaN)."""
    X = np.random.default_rng(0).standard_normal((2000, 4))
    w = np.zeros(2000)
    w[:5] = 1
    with pytest.raises(ValueError, match=r"the 150 rows drawn for the initialisation \(init_size=150\) all have zero weight"):
        MiniBatchKMeans(3, batch_size=50, random_state=0).fit(X, sample_weight=w)
    assert MiniBatchKMeans(3, batch_size=50, random_state=0, init_size=2000).fit(X, sample_weight=w).n_steps_ > 0


def test_a_fit_that_cannot_fit_is_refused_before_x_is_read():
    """The steps' plan comes before the validation pass over X: the refusal
    names the limit that works (it named the validation pass's own, and a fit
    at that limit read all of X before the steps' plan refused it; helpers
    111, 113). X's NaN is never reached."""
    X = np.random.default_rng(0).standard_normal((2000, 500))
    X[-1, -1] = np.nan
    with pytest.raises(MemoryError, match="mini-batch step") as refused:
        MiniBatchKMeans(50, random_state=0, batch_size=1024, memory_limit="1MiB").fit(X)
    enough = int(re.search(r"at least (\d+) bytes", str(refused.value)).group(1))
    with pytest.raises(ValueError, match="Input X contains NaN"):
        MiniBatchKMeans(50, random_state=0, batch_size=1024, memory_limit=enough).fit(X)


def test_a_partial_fit_batch_that_cannot_fit_is_refused_before_it_is_read(tmp_path):
    """partial_fit's step and gathered rows are planned before its validation
    pass reads the batch (it read all of it first: a NaN in the last row was
    named instead of the limit). A batch the step reads in place counts no
    gathered rows."""
    X = np.random.default_rng(0).standard_normal((200_000, 4))
    X[-1, -1] = np.nan
    path = tmp_path / "X.npy"
    np.save(path, X)
    with pytest.raises(MemoryError, match=r"200000 rows of 4 features drawn from the data, with their indices"):
        MiniBatchKMeans(8, random_state=0, memory_limit="4MiB").partial_fit(str(path))
    with pytest.raises(ValueError, match="Input X contains NaN"):
        MiniBatchKMeans(8, random_state=0, memory_limit="8MiB").partial_fit(X)
    X[-1, -1] = 0.0
    np.save(path, X)
    fitted = MiniBatchKMeans(8, random_state=0, memory_limit="16MiB").partial_fit(str(path))
    assert fitted.cluster_centers_.shape == (8, 4)


def test_shape_refusals_come_before_the_plan_and_a_failed_fit_keeps_the_plan():
    """scikit-learn's refusals of n_clusters > n_samples and of an init of
    the wrong shape come before memfit's memory plan (they were refused for
    memory, naming a limit at which these refused them; 2**64 clusters raised
    a TypeError from np.log); a fit that fails keeps the previous fit's
    memory_plan_ with its centres (helper 114)."""
    X = np.random.default_rng(0).standard_normal((60, 3))
    with pytest.raises(ValueError, match="n_samples=60 should be >= n_clusters=61"):
        MiniBatchKMeans(n_clusters=61, memory_limit="4KiB").fit(X)
    with pytest.raises(ValueError, match=r"n_samples=60 should be >= n_clusters=18446744073709551616"):
        MiniBatchKMeans(n_clusters=2**64).fit(X)
    with pytest.raises(ValueError, match=r"initial centers \(3, 3\) does not match the number of clusters 2"):
        MiniBatchKMeans(n_clusters=2, init=np.zeros((3, 3)), memory_limit="1KiB").fit(X)
    fitted = MiniBatchKMeans(3, random_state=0, n_init=1, memory_limit="64MiB").fit(X)
    plan, centres = fitted.memory_plan_, fitted.cluster_centers_.copy()
    for bad in (dict(init=np.zeros((2, 3)), memory_limit="32MiB"), dict(init="k-means++", memory_limit="1KiB")):
        fitted.set_params(**bad)
        with pytest.raises((ValueError, MemoryError)):
            fitted.fit(X)
        assert fitted.memory_plan_ == plan
        assert_array_equal(fitted.cluster_centers_, centres)
