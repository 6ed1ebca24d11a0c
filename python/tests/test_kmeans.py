"""Behaviour tests of :class:`memfit.KMeans`, modelled on the public-API
behaviours that scikit-learn checks for its own ``KMeans``
(``sklearn/cluster/tests/test_k_means.py``), written afresh with their own
data: known toy results, empty-cluster relocation, a one-iteration oracle,
sample weights, dtypes, method consistency, ``n_init``, parity with
scikit-learn from the same initial centres, determinism across ``n_jobs``
and ``memory_limit``, errors and input layouts."""

import errno
import pathlib
import re
import warnings

import numpy as np
import scipy.sparse as sp
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy.spatial.distance import cdist
from sklearn.cluster import KMeans as SkKMeans
from sklearn.datasets import make_blobs
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.metrics import adjusted_rand_score

from memfit import KMeans, MiniBatchKMeans


# ---------------------------------------------------------------------------
# helpers and data


def _sq_dist(X, centers):
    """Squared Euclidean distances (n_samples, n_clusters), plain NumPy."""
    X = np.asarray(X, dtype=np.float64)
    C = np.asarray(centers, dtype=np.float64)
    return ((X[:, None, :] - C[None, :, :]) ** 2).sum(axis=2)


def _assert_same_fit(a, b):
    """Two fitted models are bitwise identical."""
    assert_array_equal(a.cluster_centers_, b.cluster_centers_)
    assert_array_equal(a.labels_, b.labels_)
    assert a.inertia_ == b.inertia_
    assert a.n_iter_ == b.n_iter_


def _distinct_rows(X, k, seed):
    """k distinct rows of X, chosen with a seeded generator (a copy)."""
    rng = np.random.RandomState(seed)
    return X[rng.choice(X.shape[0], k, replace=False)].copy()


#: Six 2-D points in two obvious groups, and their weights for the weighted toy.
TOY_X = np.array([[1.0, 1.0], [3.0, 1.0], [2.0, 4.0], [10.0, 0.0], [12.0, 0.0], [11.0, 3.0]])
TOY_W = np.array([1.0, 1.0, 2.0, 1.0, 1.0, 1.0])
TOY_INIT = np.array([[0.0, 0.0], [15.0, 0.0]])


@pytest.fixture(scope="module")
def big():
    """200,000 × 4 float64 rows in five shifted groups (big enough that a 2 MiB
    limit forces several read blocks)."""
    rng = np.random.RandomState(11)
    X = rng.randn(200_000, 4)
    X += 3.0 * rng.randint(0, 5, size=(200_000, 1))
    return X


@pytest.fixture(scope="module")
def small():
    """400 × 3 float64 blobs around 4 centres with init centres (4 distinct rows)."""
    X, _ = make_blobs(400, n_features=3, centers=4, cluster_std=1.5, random_state=21)
    return X, _distinct_rows(X, 4, 21)


# ---------------------------------------------------------------------------
# known results


@pytest.mark.parametrize(
    "weights, centers, inertia",
    [
        # Unweighted: group means (2, 2) and (11, 1); squared distances
        # 2 + 2 + 4 and 2 + 2 + 4.
        (None, [[2.0, 2.0], [11.0, 1.0]], 16.0),
        # Row 2 counted twice: x = (1 + 3 + 2·2) / 4, y = (1 + 1 + 2·4) / 4;
        # 3.25 + 3.25 + 2 · 2.25 + 8.
        (TOY_W, [[2.0, 2.5], [11.0, 1.0]], 19.0),
    ],
    ids=["unweighted", "weighted"],
)
def test_toy_known_centres_and_inertia(weights, centers, inertia):
    """A hand-computed toy fit from explicit init centres gives the exact centres, labels, inertia and n_iter_."""
    km = KMeans(n_clusters=2, init=TOY_INIT, n_init=1).fit(TOY_X, sample_weight=weights)
    assert_allclose(km.cluster_centers_, centers, rtol=0, atol=1e-12)
    assert_array_equal(km.labels_, [0, 0, 0, 1, 1, 1])
    assert km.inertia_ == pytest.approx(inertia, rel=1e-12)
    # Iteration 1 finds the final groups, iteration 2 sees no change.
    assert km.n_iter_ == 2
    assert km.cluster_centers_.dtype == np.float64


def test_empty_cluster_relocated_known_result():
    """A centre far from all data is refilled with the farthest point, giving the hand-computed 3-cluster optimum."""
    X = np.array([0.0, 1.0, 2.0, 3.0, 10.0, 11.0, 12.0, 13.0, 30.0, 31.0])[:, None]
    init = np.array([[1.0], [11.0], [1000.0]])
    km = KMeans(n_clusters=3, init=init, n_init=1).fit(X)
    # Groups {0..3}, {10..13}, {30, 31}: 5 + 5 + 0.5.
    assert_allclose(km.cluster_centers_.ravel(), [1.5, 11.5, 30.5], rtol=0, atol=1e-12)
    assert_array_equal(km.labels_, [0, 0, 0, 0, 1, 1, 1, 1, 2, 2])
    assert km.inertia_ == pytest.approx(10.5, rel=1e-12)
    sk = SkKMeans(n_clusters=3, init=init, n_init=1).fit(X)
    assert km.inertia_ <= sk.inertia_ * (1 + 1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_empty_clusters_relocated_blobs(seed):
    """With two init centres far from all data, every cluster ends non-empty and inertia is no worse than sklearn's."""
    X, _ = make_blobs(400, n_features=2, centers=5, random_state=seed)
    init = np.vstack([_distinct_rows(X, 3, seed), [[1e3, 1e3], [-1e3, 5e2]]])
    km = KMeans(n_clusters=5, init=init, n_init=1).fit(X)
    assert np.unique(km.labels_).size == 5
    assert np.bincount(km.labels_, minlength=5).min() > 0
    # The reported inertia is that of the reported centres and labels.
    d2 = _sq_dist(X, km.cluster_centers_)
    assert km.inertia_ == pytest.approx(d2[np.arange(len(X)), km.labels_].sum(), rel=1e-10)
    sk = SkKMeans(n_clusters=5, init=init, n_init=1).fit(X)
    assert km.inertia_ <= sk.inertia_ * (1 + 1e-12)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_one_iteration_is_weighted_mean_of_assigned_points(weighted):
    """With max_iter=1, centres are the (weighted) NumPy means of the points nearest each init centre."""
    rng = np.random.RandomState(5)
    X = rng.randn(300, 3) * 4.0
    w = rng.uniform(0.5, 3.0, size=300) if weighted else np.ones(300)
    init = _distinct_rows(X, 6, 5)  # each init row is nearest to itself: no empty cluster
    km = KMeans(n_clusters=6, init=init, n_init=1, max_iter=1).fit(X, sample_weight=w if weighted else None)

    first = _sq_dist(X, init).argmin(axis=1)
    expected = np.array([np.average(X[first == j], axis=0, weights=w[first == j]) for j in range(6)])
    assert_allclose(km.cluster_centers_, expected, rtol=1e-12, atol=1e-12)
    assert km.n_iter_ == 1
    # labels_ and inertia_ refer to the returned (updated) centres.
    d2 = _sq_dist(X, km.cluster_centers_)
    assert_array_equal(km.labels_, d2.argmin(axis=1))
    assert km.inertia_ == pytest.approx((w * d2.min(axis=1)).sum(), rel=1e-10)


# ---------------------------------------------------------------------------
# sample weights


def test_integer_weights_equal_repeated_rows(small):
    """Integer sample weights give the same fit as repeating each row that many times."""
    X, init = small
    w = np.random.RandomState(3).randint(1, 5, size=X.shape[0])
    weighted = KMeans(n_clusters=4, init=init, n_init=1, tol=0).fit(X, sample_weight=w)
    repeated = KMeans(n_clusters=4, init=init, n_init=1, tol=0).fit(np.repeat(X, w, axis=0))
    assert_allclose(weighted.cluster_centers_, repeated.cluster_centers_, rtol=1e-12, atol=1e-12)
    assert weighted.inertia_ == pytest.approx(repeated.inertia_, rel=1e-12)
    assert_array_equal(np.repeat(weighted.labels_, w), repeated.labels_)
    assert weighted.n_iter_ == repeated.n_iter_


def test_unit_weights_equal_no_weights(small):
    """All-one sample weights give the same fit as no weights."""
    X, init = small
    a = KMeans(n_clusters=4, init=init, n_init=1).fit(X)
    b = KMeans(n_clusters=4, init=init, n_init=1).fit(X, sample_weight=np.ones(X.shape[0]))
    assert_allclose(a.cluster_centers_, b.cluster_centers_, rtol=1e-14, atol=1e-14)
    assert_array_equal(a.labels_, b.labels_)
    assert a.inertia_ == pytest.approx(b.inertia_, rel=1e-14)
    assert a.n_iter_ == b.n_iter_


@pytest.mark.parametrize("estimator", [KMeans, MiniBatchKMeans])
def test_scalar_weights_are_any_number_a_bool_included(small, estimator):
    """A scalar sample_weight is any number, as scikit-learn takes it: True
    weighs every row 1, False 0 (refused with scikit-learn's message)."""
    X, init = small
    a = estimator(n_clusters=4, init=init, n_init=1, random_state=0).fit(X)
    for weight in (True, 1, 1.0, np.float32(1)):
        b = estimator(n_clusters=4, init=init, n_init=1, random_state=0).fit(X, sample_weight=weight)
        assert_array_equal(a.cluster_centers_, b.cluster_centers_)
        assert_array_equal(a.labels_, b.labels_)
    with pytest.raises(ValueError, match="Sample weights must contain at least one non-zero number"):
        estimator(n_clusters=4, init=init, n_init=1).fit(X, sample_weight=False)


def test_zero_weights_equal_dropped_rows(small):
    """Rows with weight zero do not influence the centres or inertia (same as removing them)."""
    X, init = small
    rng = np.random.RandomState(4)
    w = rng.uniform(0.5, 2.0, size=X.shape[0])
    w[rng.rand(X.shape[0]) < 0.3] = 0.0
    keep = w > 0
    # tol=0: both runs stop on an unchanged assignment, not on a data-dependent tolerance.
    a = KMeans(n_clusters=4, init=init, n_init=1, tol=0).fit(X, sample_weight=w)
    b = KMeans(n_clusters=4, init=init, n_init=1, tol=0).fit(X[keep], sample_weight=w[keep])
    assert_allclose(a.cluster_centers_, b.cluster_centers_, rtol=1e-12, atol=1e-12)
    assert a.inertia_ == pytest.approx(b.inertia_, rel=1e-12)
    assert_array_equal(a.labels_[keep], b.labels_)


@pytest.mark.parametrize("weighted_row", [0, 3])
@pytest.mark.parametrize("estimator", [KMeans, MiniBatchKMeans])
def test_fewer_weighted_rows_than_clusters_put_no_centre_on_a_row_of_weight_zero(weighted_row, estimator):
    """k-means++ draws further centres from the weighted rows once every one
    of them is a centre: all centres on the one weighted point, as
    scikit-learn's, never on a row that carries no weight."""
    X = np.array([[0.0, 0], [10, 0], [0, 10], [5, 5], [7, 1]])
    w = np.zeros(len(X))
    w[weighted_row] = 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        km = estimator(n_clusters=3, random_state=0, n_init=1).fit(X, sample_weight=w)
    assert_array_equal(km.cluster_centers_, np.repeat(X[[weighted_row]], 3, axis=0))
    assert km.inertia_ == 0.0


@pytest.mark.parametrize("scale", [0.01, 7.5])
def test_scaled_weights(small, scale):
    """Multiplying all sample weights by a constant scales inertia_ by it and keeps centres and labels."""
    X, init = small
    w = np.random.RandomState(6).uniform(0.2, 2.0, size=X.shape[0])
    a = KMeans(n_clusters=4, init=init, n_init=1).fit(X, sample_weight=w)
    b = KMeans(n_clusters=4, init=init, n_init=1).fit(X, sample_weight=scale * w)
    assert_allclose(b.cluster_centers_, a.cluster_centers_, rtol=1e-12, atol=1e-12)
    assert_array_equal(a.labels_, b.labels_)
    assert b.inertia_ == pytest.approx(scale * a.inertia_, rel=1e-12)
    assert a.n_iter_ == b.n_iter_


def test_sample_weight_not_modified(small):
    """fit leaves the sample_weight array, X and the init array unchanged."""
    X, init = small
    w = np.random.RandomState(8).uniform(0.5, 2.0, size=X.shape[0])
    X0, w0, init0 = X.copy(), w.copy(), init.copy()
    KMeans(n_clusters=4, init=init, n_init=1).fit(X, sample_weight=w)
    assert_array_equal(X, X0)
    assert_array_equal(w, w0)
    assert_array_equal(init, init0)


# ---------------------------------------------------------------------------
# dtypes


@pytest.mark.parametrize(
    "dtype, out",
    [
        (np.float32, np.float32),
        (np.float64, np.float64),
        (np.int32, np.float64),
        (np.int64, np.float64),
        (np.uint8, np.float64),
    ],
)
def test_output_dtypes(dtype, out):
    """cluster_centers_ and transform are float32 for float32 input and float64 for float64 and integer input."""
    rng = np.random.RandomState(9)
    X = rng.randint(0, 50, size=(120, 3)).astype(dtype)
    km = KMeans(n_clusters=3, random_state=0).fit(X)
    assert km.cluster_centers_.dtype == out
    assert km.transform(X).dtype == out
    assert km.fit_transform(X).dtype == out
    assert km.labels_.dtype == np.int32
    assert km.predict(X).dtype == np.int32
    assert isinstance(km.inertia_, float)


def test_float32_close_to_float64(small):
    """A float32 fit gives nearly the float64 result from the same init."""
    X, init = small
    a = KMeans(n_clusters=4, init=init, n_init=1).fit(X)
    b = KMeans(n_clusters=4, init=init, n_init=1).fit(X.astype(np.float32))
    assert b.cluster_centers_.dtype == np.float32
    assert_allclose(b.cluster_centers_, a.cluster_centers_, rtol=1e-5, atol=1e-5)
    assert b.inertia_ == pytest.approx(a.inertia_, rel=1e-5)
    assert_array_equal(a.labels_, b.labels_)
    assert_allclose(b.transform(X.astype(np.float32)), a.transform(X), rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------------------
# methods


def test_predict_transform_labels_consistent(blobs):
    """argmin of transform == predict == labels_ and transform equals scipy's distance to cluster_centers_."""
    X, _ = blobs
    km = KMeans(n_clusters=4, random_state=1).fit(X)
    D = km.transform(X)
    assert D.shape == (X.shape[0], 4)
    assert_allclose(D, cdist(X, km.cluster_centers_), rtol=1e-10, atol=1e-10)
    assert_array_equal(D.argmin(axis=1), km.labels_)
    assert_array_equal(km.predict(X), km.labels_)
    # New points too.
    Y = np.random.RandomState(2).uniform(-3, 12, size=(200, 3))
    assert_array_equal(km.predict(Y), km.transform(Y).argmin(axis=1))
    assert_allclose(km.transform(Y), cdist(Y, km.cluster_centers_), rtol=1e-10, atol=1e-10)


def test_score_is_minus_inertia(blobs):
    """score on the training data is -inertia_, and score on new data is minus their summed squared distance."""
    X, _ = blobs
    w = np.random.RandomState(4).uniform(0.5, 2.0, size=X.shape[0])
    km = KMeans(n_clusters=4, random_state=0).fit(X, sample_weight=w)
    assert km.score(X, sample_weight=w) == pytest.approx(-km.inertia_, rel=1e-12)
    km = KMeans(n_clusters=4, random_state=0).fit(X)
    assert km.score(X) == pytest.approx(-km.inertia_, rel=1e-12)
    Y = X[:100] + 0.5
    assert km.score(Y) == pytest.approx(-_sq_dist(Y, km.cluster_centers_).min(axis=1).sum(), rel=1e-10)


def test_fit_transform_and_fit_predict(blobs):
    """fit_transform == fit().transform and fit_predict == fit().labels_ for the same random_state."""
    X, _ = blobs
    assert_allclose(
        KMeans(n_clusters=4, random_state=3).fit_transform(X),
        KMeans(n_clusters=4, random_state=3).fit(X).transform(X),
        rtol=1e-12,
        atol=1e-12,
    )
    assert_array_equal(
        KMeans(n_clusters=4, random_state=3).fit_predict(X), KMeans(n_clusters=4, random_state=3).fit(X).labels_
    )


def test_predict_keeps_centres(blobs):
    """predict, transform and score do not change cluster_centers_."""
    X, _ = blobs
    km = KMeans(n_clusters=4, random_state=0).fit(X)
    before = km.cluster_centers_.copy()
    km.predict(X[:50] * 3.0)
    km.transform(X[:50] - 10.0)
    km.score(X[:50])
    assert_array_equal(km.cluster_centers_, before)


def test_init_beyond_float32_for_float32_data_is_refused_as_scikit_learn():
    """scikit-learn converts init to float32 X's dtype and refuses what
    becomes infinite; memfit fitted silently from an infinite centre
    (helper 129)."""
    X = np.random.default_rng(13).standard_normal((200, 3)).astype(np.float32)
    init = np.r_[X[:2].astype(float), [[1e39, 0, 0]]]
    want = "Input contains infinity or a value too large for dtype('float32')."
    with pytest.raises(ValueError, match=re.escape(want)), np.errstate(over="ignore"):
        SkKMeans(3, init=init, n_init=1).fit(X)
    for estimator in (KMeans, MiniBatchKMeans):
        with pytest.raises(ValueError, match=re.escape(want + " memfit: init[2, 0] = 1e+39")):
            estimator(3, init=init, n_init=1).fit(X)
    init[2, 0] = float(np.finfo(np.float32).max)
    KMeans(3, init=init, n_init=1, max_iter=1).fit(X)


def test_init_with_fitted_centres_is_fixed_point(blobs):
    """Refitting from converged centres gives the same centres and labels bit for bit, in one iteration."""
    X, _ = blobs
    first = KMeans(n_clusters=4, random_state=0, tol=0).fit(X)
    again = KMeans(n_clusters=4, init=first.cluster_centers_, n_init=1, tol=0).fit(X)
    assert_array_equal(again.cluster_centers_, first.cluster_centers_)
    assert_array_equal(again.labels_, first.labels_)
    # Each centre is the float64 mean of its rows, so the first step reproduces
    # it exactly. scikit-learn centres X on its mean and back, which moves the
    # centres by an ulp, so it needs a second iteration to see no change.
    assert again.n_iter_ == 1
    assert SkKMeans(n_clusters=4, init=first.cluster_centers_, n_init=1, tol=0).fit(X).n_iter_ <= 2


def test_more_iterations_never_worse(small):
    """From the same init centres, more Lloyd iterations never increase inertia (score never decreases)."""
    X, init = small
    scores = []
    for max_iter in (1, 2, 5, 50):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            km = KMeans(n_clusters=4, init=init, n_init=1, max_iter=max_iter, tol=0).fit(X)
        assert km.n_iter_ <= max_iter
        scores.append(km.score(X))
    for before, after in zip(scores, scores[1:]):
        assert before <= after + 1e-12 * abs(after)


def test_array_like_and_callable_init(small):
    """A list of lists init and a callable returning the same centres give the same fit as the array."""
    X, init = small
    ref = KMeans(n_clusters=4, init=init, n_init=1).fit(X)
    _assert_same_fit(KMeans(n_clusters=4, init=init.tolist(), n_init=1).fit(X), ref)

    def init_fn(data, n_clusters, random_state):
        assert n_clusters == 4
        return init.copy()

    _assert_same_fit(KMeans(n_clusters=4, init=init_fn, n_init=1).fit(X), ref)


def test_a_callable_init_cannot_change_the_callers_data(small):
    # It gets a read-only view (scikit-learn passes a centred copy); a
    # callable that wrote into it changed the caller's X.
    X, init = small
    before = X.copy()

    def zeroes(data, n_clusters, random_state):
        data[:] = 0
        return init

    with pytest.raises(ValueError, match="read-only"):
        KMeans(n_clusters=4, init=zeroes, n_init=1).fit(X)
    assert_array_equal(X, before)
    # Sparse X: the callable's sparse rows are taken as centres.
    sparse = KMeans(n_clusters=4, init=lambda d, k, random_state: d[:k], n_init=1).fit(sp.csr_matrix(X))
    _assert_same_fit(sparse, KMeans(n_clusters=4, init=X[:4], n_init=1).fit(X))


@pytest.mark.parametrize("random_state", ["int", "RandomState"])
@pytest.mark.parametrize("n_init", [1, 4, "auto"])
def test_a_callable_init_is_called_once_per_init_as_scikit_learn_calls_it(small, n_init, random_state):
    """A callable init runs n_init times (10 for "auto"), all with one
    random state (a RandomState given is passed itself) and without the
    explicit-init warning; the best init is scikit-learn's, from the same
    random_state, which is left where scikit-learn leaves it."""
    X, _ = small
    calls = []

    def init_fn(data, n_clusters, random_state):
        calls.append(random_state)
        return np.asarray(data)[random_state.choice(len(data), n_clusters, replace=False)]

    def state():
        return 3 if random_state == "int" else np.random.RandomState(3)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mine, theirs = state(), state()
        km = KMeans(n_clusters=4, init=init_fn, n_init=n_init, random_state=mine).fit(X)
        ours = list(calls)
        calls.clear()
        ref = SkKMeans(n_clusters=4, init=init_fn, n_init=n_init, random_state=theirs).fit(X)
    assert len(ours) == len(calls) == (10 if n_init == "auto" else n_init)
    assert len({id(r) for r in ours}) == 1
    if random_state == "RandomState":
        assert ours[0] is mine and mine.randint(1 << 30) == theirs.randint(1 << 30)
    assert_array_equal(km.labels_, ref.labels_)
    assert_allclose(km.cluster_centers_, ref.cluster_centers_, rtol=1e-12, atol=1e-12)
    assert km.inertia_ == pytest.approx(ref.inertia_, rel=1e-12)


def test_explicit_init_with_several_n_init_warns(small):
    """An explicit init with n_init > 1 warns (RuntimeWarning) and runs once."""
    X, init = small
    with pytest.warns(RuntimeWarning, match="Explicit initial center"):
        km = KMeans(n_clusters=4, init=init, n_init=5).fit(X)
    _assert_same_fit(km, KMeans(n_clusters=4, init=init, n_init=1).fit(X))


@pytest.mark.parametrize("init", ["k-means++", "random", "array", "callable"])
def test_all_inits_recover_separated_blobs(init):
    """Every kind of init finds well-separated blobs exactly (perfect adjusted Rand index)."""
    X, y = make_blobs(600, n_features=3, centers=5, cluster_std=0.3, center_box=(-20, 20), random_state=17)
    # One row from each true blob, for the explicit inits.
    seeds = np.vstack([X[np.flatnonzero(y == j)[0]] for j in range(5)])
    km_init = {"array": seeds, "callable": lambda data, k, random_state: seeds.copy()}.get(init, init)
    km = KMeans(n_clusters=5, init=km_init, random_state=0).fit(X)
    assert km.cluster_centers_.shape == (5, 3)
    assert adjusted_rand_score(y, km.labels_) == 1.0


def test_elkan_same_as_lloyd(small):
    """algorithm='elkan' gives the same fit as 'lloyd' (both run Lloyd)."""
    X, init = small
    _assert_same_fit(
        KMeans(n_clusters=4, init=init, n_init=1, algorithm="elkan").fit(X),
        KMeans(n_clusters=4, init=init, n_init=1, algorithm="lloyd").fit(X),
    )


def test_copy_x_false_leaves_x_unchanged(small):
    """copy_x=False does not modify X and gives the same fit as copy_x=True."""
    X, init = small
    Z = X.copy()
    a = KMeans(n_clusters=4, init=init, n_init=1, copy_x=False).fit(Z)
    assert_array_equal(Z, X)
    _assert_same_fit(a, KMeans(n_clusters=4, init=init, n_init=1).fit(X))


def test_feature_names_out(small):
    """get_feature_names_out names one output per cluster, kmeans0 ... kmeans{k-1}."""
    X, _ = small
    km = KMeans(n_clusters=4, random_state=0).fit(X)
    assert list(km.get_feature_names_out()) == [f"kmeans{i}" for i in range(4)]
    assert km.n_features_in_ == 3


@pytest.mark.parametrize("kind", ["dask", "memfit.array", "path"])
def test_data_without_feature_names_warns_as_scikit_learn(kind, tmp_path):
    """An estimator fitted on a DataFrame warns once per call given data
    without feature names: a Dask array, a memfit array or a .npy path too
    (helper 129: only NumPy arrays warned)."""
    import dask.array as da
    import pandas as pd

    import memfit.array as ma

    X = np.random.default_rng(7).standard_normal((300, 4))
    np.save(tmp_path / "x.npy", X)
    data = {"dask": lambda: da.from_array(X, chunks=(100, 4)), "memfit.array": lambda: ma.asarray(X),
            "path": lambda: str(tmp_path / "x.npy")}[kind]
    km = KMeans(3, random_state=0, n_init=1).fit(pd.DataFrame(X, columns=list("abcd")))
    for method in ("predict", "transform", "score"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            getattr(km, method)(data())
        assert [str(w.message) for w in caught] == [
            "X does not have valid feature names, but KMeans was fitted with feature names"], (method, caught)


# ---------------------------------------------------------------------------
# n_init and parity


@pytest.mark.parametrize("init", ["random", "k-means++"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_more_inits_never_worse(init, seed):
    """n_init=10 never ends above n_init=1's inertia for the same random_state (its first init is the same)."""
    X, _ = make_blobs(1500, n_features=2, centers=12, cluster_std=1.5, random_state=seed)
    one = KMeans(n_clusters=12, init=init, n_init=1, random_state=seed).fit(X)
    ten = KMeans(n_clusters=12, init=init, n_init=10, random_state=seed).fit(X)
    assert ten.inertia_ <= one.inertia_
    # The kept run's reported inertia is that of its centres and labels.
    d2 = _sq_dist(X, ten.cluster_centers_)
    assert ten.inertia_ == pytest.approx(d2[np.arange(len(X)), ten.labels_].sum(), rel=1e-10)


@pytest.mark.parametrize(
    "n_samples, n_features, n_clusters, shift, tol, weighted",
    [
        (500, 3, 3, 0.0, 1e-4, False),
        (1000, 3, 5, 0.0, 0.0, False),
        (2000, 4, 10, 0.0, 1e-4, True),
        (800, 3, 8, 1e6, 1e-4, False),
        (600, 2, 4, -3e3, 0.0, True),
    ],
    ids=["k3", "k5-tol0", "k10-weighted", "far-1e6", "far-neg-weighted"],
)
def test_parity_with_sklearn(n_samples, n_features, n_clusters, shift, tol, weighted):
    """From the same init centres, inertia_, cluster_centers_, labels_ and n_iter_ match sklearn.cluster.KMeans."""
    X, _ = make_blobs(n_samples, n_features=n_features, centers=n_clusters, cluster_std=2.0, random_state=n_clusters)
    X = X + shift
    w = np.random.RandomState(n_clusters).uniform(0.1, 3.0, size=n_samples) if weighted else None
    init = _distinct_rows(X, n_clusters, n_clusters)
    ours = KMeans(n_clusters=n_clusters, init=init, n_init=1, tol=tol).fit(X, sample_weight=w)
    ref = SkKMeans(n_clusters=n_clusters, init=init, n_init=1, tol=tol).fit(X, sample_weight=w)
    assert_array_equal(ours.labels_, ref.labels_)
    assert ours.n_iter_ == ref.n_iter_
    assert_allclose(ours.cluster_centers_ - shift, ref.cluster_centers_ - shift, rtol=1e-10, atol=1e-8)
    assert ours.inertia_ == pytest.approx(ref.inertia_, rel=1e-10)


# ---------------------------------------------------------------------------
# determinism


@pytest.mark.parametrize("init", ["k-means++", "random"])
def test_same_random_state_same_result(blobs, init):
    """The same int random_state gives bitwise identical fits."""
    X, _ = blobs
    a = KMeans(n_clusters=4, init=init, n_init=3, random_state=42).fit(X)
    b = KMeans(n_clusters=4, init=init, n_init=3, random_state=42).fit(X)
    _assert_same_fit(a, b)


def test_n_jobs_bitwise_identical(big):
    """n_jobs=1 and n_jobs=2 give bitwise identical fits."""
    a = KMeans(n_clusters=5, random_state=0, n_jobs=1, max_iter=50).fit(big)
    b = KMeans(n_clusters=5, random_state=0, n_jobs=2, max_iter=50).fit(big)
    _assert_same_fit(a, b)
    assert_array_equal(a.predict(big[:5000]), b.predict(big[:5000]))


def _blocks_per_pass(plan):
    """The number of read blocks per pass that a memory_plan_ reports."""
    m = re.search(r"\((\d+) blocks? per pass\)", plan)
    assert m, plan
    return int(m.group(1))


@pytest.mark.parametrize("init", ["random", "array"])
def test_memory_limit_bitwise_identical(big, init):
    """memory_limit='2MiB' (several read blocks) and '1GiB' (one block) give bitwise identical fits."""
    km_init = _distinct_rows(big, 5, 1) if init == "array" else "random"
    n_init = 1 if init == "array" else 2
    params = dict(n_clusters=5, init=km_init, n_init=n_init, random_state=0, n_jobs=2, max_iter=50)
    fits = [KMeans(memory_limit=limit, **params).fit(big) for limit in ("2MiB", "1GiB")]
    assert _blocks_per_pass(fits[0].memory_plan_) > 1
    assert _blocks_per_pass(fits[1].memory_plan_) == 1
    _assert_same_fit(*fits)
    assert_array_equal(fits[0].predict(big[:5000]), fits[1].predict(big[:5000]))


def test_kmeans_plusplus_sample_spilled_by_a_small_limit_gives_the_same_fit(big):
    """A limit too small for the k-means++ sample's values spills them to a scratch file: the same rows,
    the same fit as a large limit, no warning."""
    params = dict(n_clusters=5, random_state=0, max_iter=5, n_init=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        small = KMeans(memory_limit="6MiB", **params).fit(big)
    large = KMeans(memory_limit="1GiB", **params).fit(big)
    assert "rows in unnamed scratch files" in str(small.memory_plan_)
    assert "rows in unnamed scratch files" not in str(large.memory_plan_)
    _assert_same_fit(small, large)


def test_scratch_dir_holds_the_spilled_sample(big, tmp_path):
    """scratch_dir names the folder of the spilled k-means++ sample (the plan shows it, nothing is left
    there) and gives the same fit; a folder that cannot hold it raises OSError before any work."""
    params = dict(n_clusters=5, random_state=0, max_iter=5, memory_limit="6MiB")
    km = KMeans(scratch_dir=tmp_path, **params).fit(big)
    assert f"init sample (scratch files) in {tmp_path}" in km.memory_plan_
    assert list(tmp_path.iterdir()) == []
    _assert_same_fit(km, KMeans(**params).fit(big))
    with pytest.raises(FileNotFoundError, match="scratch folder.*does not exist") as e:
        KMeans(scratch_dir=tmp_path / "missing", **params).fit(big)
    assert e.value.errno == errno.ENOENT
    (tmp_path / "file").write_text("")
    with pytest.raises(NotADirectoryError, match="not a folder"):
        KMeans(scratch_dir=tmp_path / "file", **params).fit(big)
    (tmp_path / "file").unlink()
    assert not hasattr(KMeans(), "labels_")


# ---------------------------------------------------------------------------
# errors and warnings


def test_more_clusters_than_samples():
    """n_clusters > n_samples raises ValueError."""
    X = np.random.RandomState(0).randn(5, 2)
    with pytest.raises(ValueError, match="n_clusters"):
        KMeans(n_clusters=6).fit(X)


@pytest.mark.parametrize("shape", [(2, 3), (3, 2), (4, 3)])
def test_bad_init_shape(shape):
    """An init array of the wrong shape raises ValueError."""
    X = np.random.RandomState(0).randn(30, 3)
    with pytest.raises(ValueError, match="shape"):
        KMeans(n_clusters=3, init=np.zeros(shape), n_init=1).fit(X)


@pytest.mark.parametrize("value, word", [(np.nan, "NaN"), (np.inf, "inf")])
def test_non_finite_x(value, word):
    """NaN or infinity in X raises ValueError naming the value, in fit and in predict."""
    X = np.random.RandomState(0).randn(30, 3)
    bad = X.copy()
    bad[7, 2] = value
    with pytest.raises(ValueError, match=word):
        KMeans(n_clusters=3).fit(bad)
    km = KMeans(n_clusters=3, random_state=0).fit(X)
    with pytest.raises(ValueError, match=word):
        km.predict(bad)
    with pytest.raises(ValueError, match=word):
        km.transform(bad)


def test_negative_sample_weight():
    """A negative sample weight raises ValueError."""
    X = np.random.RandomState(0).randn(30, 3)
    w = np.ones(30)
    w[4] = -0.5
    with pytest.raises(ValueError, match="sample_weight"):
        KMeans(n_clusters=3).fit(X, sample_weight=w)


@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_non_finite_sample_weight(value):
    """A NaN or infinite sample weight raises ValueError."""
    X = np.random.RandomState(0).randn(30, 3)
    w = np.ones(30)
    w[9] = value
    with pytest.raises(ValueError, match="sample_weight"):
        KMeans(n_clusters=3).fit(X, sample_weight=w)


@pytest.mark.parametrize(
    "params, match",
    [
        ({"n_clusters": 0}, "n_clusters"),
        ({"n_init": 0}, "n_init"),
        ({"max_iter": 0}, "max_iter"),
        ({"tol": -1.0}, "tol"),
        ({"algorithm": "fast"}, "algorithm"),
        ({"init": "kmeans"}, "init"),
        ({"memory_limit": "lots"}, "memory_limit"),
        ({"n_jobs": 0}, "n_jobs"),
    ],
)
def test_bad_parameters(params, match):
    """Invalid constructor parameters raise ValueError naming the parameter at fit."""
    X = np.random.RandomState(0).randn(30, 3)
    with pytest.raises(ValueError, match=match):
        KMeans(**params).fit(X)


def test_sample_weight_wrong_length():
    """sample_weight of the wrong length raises ValueError."""
    X = np.random.RandomState(0).randn(30, 3)
    with pytest.raises(ValueError, match="sample_weight"):
        KMeans(n_clusters=3).fit(X, sample_weight=np.ones(29))


def test_wrong_number_of_features():
    """predict, transform and score with another number of features raise ValueError."""
    X = np.random.RandomState(0).randn(30, 3)
    km = KMeans(n_clusters=3, random_state=0).fit(X)
    for method in (km.predict, km.transform, km.score):
        with pytest.raises(ValueError, match="features"):
            method(X[:, :2])


def test_unfitted_raises_not_fitted():
    """predict, transform and score before fit raise NotFittedError."""
    X = np.random.RandomState(0).randn(30, 3)
    km = KMeans(n_clusters=3)
    for method in (km.predict, km.transform, km.score):
        with pytest.raises(NotFittedError):
            method(X)


def test_tiny_memory_limit():
    """A memory_limit too small for the job raises MemoryError."""
    X = np.random.RandomState(0).randn(100, 3)
    with pytest.raises(MemoryError, match="memory limit"):
        KMeans(n_clusters=3, memory_limit=1000).fit(X)


@pytest.mark.parametrize("init", ["k-means++", "random", "array"])
def test_fewer_distinct_points_than_clusters(init):
    """Fewer distinct points than clusters warns ConvergenceWarning; every point sits on a centre."""
    X = np.repeat(np.array([[0.0, 0.0], [1.0, 1.0], [5.0, 5.0]]), 10, axis=0)
    km_init = np.array([[0.0, 0.0], [1.0, 1.0], [5.0, 5.0], [9.0, 9.0]]) if init == "array" else init
    with pytest.warns(ConvergenceWarning, match="distinct clusters"):
        km = KMeans(n_clusters=4, init=km_init, random_state=0).fit(X)
    assert np.unique(km.labels_).size == 3
    assert km.inertia_ == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("algorithm", ["lloyd", "bounded", "auto"])
def test_the_distinct_clusters_warning_counts_clusters_with_rows_of_weight_zero(algorithm):
    """A cluster that holds only rows of weight zero is a distinct cluster, as scikit-learn counts
    them (its distinct labels), on every path: a strictly converged bounded fit, which takes its
    labels from its bounds, counted the clusters with weight (3 here, not 4)."""
    X = np.array([[1.0, 1], [0, 0], [1, 0], [0, 1], [1, 2], [1, 0]])
    w = np.array([0.0, 0, 0, 1, 1, 0])
    init = np.array([[0.0, 1], [1, 0], [1, 2], [0, 0], [1, 0], [1, 1]])
    with pytest.warns(ConvergenceWarning, match=r"Number of distinct clusters \(4\) found smaller than n_clusters \(6\)"):
        km = KMeans(6, init=init, n_init=1, algorithm=algorithm).fit(X, sample_weight=w)
    assert np.unique(km.labels_).size == 4
    assert_array_equal(km.labels_, km.predict(X))


def test_max_iter_reached_is_silent_as_sklearn(small):
    """Stopping at max_iter before convergence warns nothing, as scikit-learn's KMeans."""
    X, init = small
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mine = KMeans(n_clusters=4, init=init, n_init=1, max_iter=1, tol=0).fit(X)
        theirs = SkKMeans(n_clusters=4, init=init, n_init=1, max_iter=1, tol=0).fit(X)
    assert mine.n_iter_ == theirs.n_iter_ == 1


# ---------------------------------------------------------------------------
# input layouts and sources


def _variants(X, tmp_path):
    """The same data in many forms: layout, flags, views, lists, files, memory maps."""
    path = tmp_path / "x.npy"
    np.save(path, X)
    readonly = X.copy()
    readonly.setflags(write=False)
    wide = np.zeros((2 * X.shape[0], 2 * X.shape[1]))
    wide[::2, ::2] = X
    return {
        "fortran": np.asfortranarray(X),
        "readonly": readonly,
        "strided-view": wide[::2, ::2],
        "list": X.tolist(),
        "npy-str": str(path),
        "npy-pathlib": pathlib.Path(path),
        "mmap": np.load(path, mmap_mode="r"),
    }


VARIANTS = ["fortran", "readonly", "strided-view", "list", "npy-str", "npy-pathlib", "mmap"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_input_variants_same_fit(small, tmp_path, variant):
    """Fortran, read-only, strided, list, .npy path (str/Path) and memory-mapped X fit exactly like the C array."""
    X, init = small
    Z = _variants(X, tmp_path)[variant]
    ref = KMeans(n_clusters=4, init=init, n_init=1).fit(X)
    _assert_same_fit(KMeans(n_clusters=4, init=init, n_init=1).fit(Z), ref)
    # Random seeding reads the same rows too.
    _assert_same_fit(
        KMeans(n_clusters=4, n_init=2, random_state=5).fit(Z), KMeans(n_clusters=4, n_init=2, random_state=5).fit(X)
    )
    # And a model fitted on the array predicts, transforms and scores them alike.
    assert_array_equal(ref.predict(Z), ref.labels_)
    assert_allclose(ref.transform(Z), ref.transform(X), rtol=1e-12, atol=1e-12)
    assert ref.score(Z) == pytest.approx(ref.score(X), rel=1e-12)


def test_row_step_view_same_fit(small):
    """A non-contiguous row view X[::2] fits exactly like its contiguous copy."""
    X, init = small
    view = X[::2]
    assert not view.flags.c_contiguous
    _assert_same_fit(
        KMeans(n_clusters=4, init=init, n_init=1).fit(view),
        KMeans(n_clusters=4, init=init, n_init=1).fit(np.ascontiguousarray(view)),
    )


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.int16, np.int64])
def test_integer_input_same_as_float64(dtype):
    """Integer X (int32, uint8, int16, int64) fits exactly like the same values as float64."""
    X = np.random.RandomState(12).randint(0, 200, size=(300, 3))
    init = _distinct_rows(X, 3, 12).astype(np.float64)
    a = KMeans(n_clusters=3, init=init, n_init=1).fit(X.astype(dtype))
    b = KMeans(n_clusters=3, init=init, n_init=1).fit(X.astype(np.float64))
    _assert_same_fit(a, b)
    assert_array_equal(b.predict(X.astype(dtype)), b.labels_)
    # k-means++ seeding sees the same values too.
    _assert_same_fit(
        KMeans(n_clusters=3, random_state=2).fit(X.astype(dtype)),
        KMeans(n_clusters=3, random_state=2).fit(X.astype(np.float64)),
    )


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.uint16, np.float16])
@pytest.mark.parametrize("algorithm", ["lloyd", "elkan"])
def test_input_exact_in_float32_fits_as_its_float64_copy(dtype, algorithm, tmp_path):
    """Data float32 holds exactly run float32 passes with float64 centres:
    every result is the float64 copy's, on narrow and wide (GEMM) rows,
    arrays and files, weighted or not."""
    rng = np.random.default_rng(4)
    info = np.finfo(dtype) if np.dtype(dtype).kind == "f" else np.iinfo(dtype)
    for d in (5, 40):
        Xd = np.clip(rng.normal(0, 1, (2000, d)) * min(float(info.max) / 4, 1000), info.min, info.max).astype(dtype)
        np.save(tmp_path / "x.npy", Xd)
        w = rng.random(Xd.shape[0])
        for weights in (None, w):
            ref = KMeans(n_clusters=9, random_state=0, algorithm=algorithm).fit(Xd.astype(np.float64), sample_weight=weights)
            for data in (Xd, str(tmp_path / "x.npy")):
                km = KMeans(n_clusters=9, random_state=0, algorithm=algorithm).fit(data, sample_weight=weights)
                assert km.cluster_centers_.dtype == np.float64
                _assert_same_fit(km, ref)


def test_readonly_input_not_copied_or_modified(small):
    """A read-only X is accepted by fit, predict and transform and stays unchanged."""
    X, init = small
    Z = X.copy()
    Z.setflags(write=False)
    km = KMeans(n_clusters=4, init=init, n_init=1).fit(Z)
    km.predict(Z)
    km.transform(Z)
    assert_array_equal(Z, X)
    assert not Z.flags.writeable


@pytest.mark.parametrize("seed", range(8))
def test_too_few_distinct_points_find_every_distinct_point(seed):
    """More clusters than distinct points: every distinct point gets a cluster, labels_ are the nearest
    of the final centres, and the inertia is rounding-level, as scikit-learn's."""
    rng = np.random.RandomState(seed)
    m = rng.randint(2, 6)
    k = m + rng.randint(1, 4)
    X = (rng.randn(m, 2) * rng.choice([1, 100]))[rng.randint(0, m, 300)]
    init = X[rng.choice(300, k, replace=False)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = KMeans(k, n_init=1, init=init, max_iter=300).fit(X)
        ref = SkKMeans(k, n_init=1, init=init, max_iter=300).fit(X)
    assert_array_equal(ours.labels_, ours.predict(X))
    assert len(np.unique(ours.labels_)) == len(np.unique(ref.labels_)) == m
    assert ours.inertia_ <= 1e-20 * max(1.0, float(np.abs(X).max()) ** 2)


@pytest.mark.parametrize("offset", [1e14, -3e15, 1e9])
def test_far_from_the_origin_centres_are_as_exact_as_centred_data_give(offset):
    """Values far from the origin (offset + integers): the centres are the exact means rounded once
    (scikit-learn centres its data; memfit's sums carry their rounding errors), so k distinct points give
    inertia 0 and every centre is its rows' mean to the last bit."""
    rng = np.random.RandomState(0)
    ints = rng.randint(0, 5, size=(3000, 2)) * np.array([1, 7])
    X = offset + ints.astype(np.float64)
    km = KMeans(25, random_state=0, n_init=1).fit(X)
    ref = SkKMeans(25, random_state=0, n_init=1).fit(X)
    assert km.inertia_ == 0.0 and ref.inertia_ < 1e-20
    assert_array_equal(np.sort(km.cluster_centers_, axis=0), np.sort(np.unique(X, axis=0), axis=0))
    # Clusters of many different values: each centre is offset + the exact mean of its integers.
    X1 = offset + rng.randint(0, 1000, size=(5000, 1)).astype(np.float64)
    km = KMeans(3, init=offset + np.array([[100.0], [500.0], [900.0]]), n_init=1, tol=0).fit(X1)
    assert km.n_iter_ < km.max_iter
    for j in range(3):
        exact = np.mean(X1[km.labels_ == j] - offset, dtype=np.longdouble) + np.longdouble(offset)
        assert km.cluster_centers_[j, 0] == np.float64(exact), (j, km.cluster_centers_[j, 0] - offset)


def test_duplicated_rows_with_inexact_means_converge():
    """More clusters than distinct points whose values (0.1, 0.3, ...) have inexact float64 sums: each
    distinct point is its cluster's mean exactly, so the refills stop and the fit converges in a few
    iterations, as scikit-learn's does."""
    X = np.repeat(np.array([[0.1, 0.7], [0.3, 1.1], [1e-3, 5.3], [2.2, 0.9]]), [97, 100, 333, 7], axis=0)
    for init in ("k-means++", "random"):
        with pytest.warns(ConvergenceWarning, match="distinct clusters"):
            km = KMeans(6, init=init, random_state=0, n_init=1, tol=0).fit(X)
        assert km.n_iter_ < 10 and km.inertia_ == 0.0
        assert_array_equal(np.unique(km.cluster_centers_, axis=0), np.unique(X, axis=0))


def test_refilled_clusters_end_as_means_of_their_rows():
    """float32 points far from the origin, all initial centres equal: the refills end in a fit whose
    centres are the means of their rows (inertia 0, as scikit-learn's)."""
    X = (1e5 + np.repeat(np.arange(5.0), 200)[:, None] * np.ones((1, 3))).astype(np.float32)
    km = KMeans(5, init=np.full((5, 3), 1e5), n_init=1, tol=0).fit(X)
    assert km.inertia_ == 0.0
    assert sorted(km.cluster_centers_[:, 0] - 1e5) == [0, 1, 2, 3, 4]


def test_a_shared_random_state_is_not_advanced_by_given_centres():
    """As scikit-learn's: a fit from given centres draws nothing from a
    shared RandomState; a named init does (helper 122's kind, found in
    GaussianMixture)."""
    X = np.random.default_rng(0).normal(size=(500, 3))
    after = []
    for cls in (SkKMeans, KMeans):
        for init in (X[:4].copy(), "k-means++"):
            rs = np.random.RandomState(4)
            cls(4, init=init, n_init=1, random_state=rs).fit(X)
            after.append(rs.randint(1000))
    untouched = np.random.RandomState(4).randint(1000)
    assert after[0] == after[2] == untouched and after[3] != untouched
