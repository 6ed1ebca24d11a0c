"""Issue 9 part 2 (cases.md N2): integer data compute in float64 (as
scikit-learn converts them), read in place for int32, int64, uint32 and
uint64 arrays and from .npy paths; integers beyond 2^53, which float64
cannot hold exactly, warn naming the column."""

import warnings

import numpy as np
import pytest
import sklearn.cluster

import memfit
from memfit import GaussianMixture, KMeans
from memfit._validation import check_data

N2_INT64 = (10**9 + np.array([0, 1, 2, 10, 11, 12], dtype=np.int64)).reshape(-1, 1)
N2_INT32 = np.column_stack([np.full(6, 7), 2**24 + np.array([1, 3, 5, 101, 103, 105])]).astype(np.int32)


def sorted_rows(a):
    return a[np.argsort(a[:, -1])]


def split(labels):
    return len(set(labels[:3])) == 1 and len(set(labels[3:])) == 1 and labels[0] != labels[3]


@pytest.fixture(params=["array", "path"])
def as_input(request, tmp_path):
    def make(X):
        if request.param == "array":
            return X
        path = tmp_path / f"X_{X.dtype}.npy"
        np.save(path, X)
        return str(path)
    return make


@pytest.mark.parametrize("X, right, inertia", [
    (N2_INT64, [[10**9 + 1], [10**9 + 11]], 4.0),
    (N2_INT32, [[7, 2**24 + 3], [7, 2**24 + 103]], 16.0),
    (N2_INT32.astype(np.uint32), [[7, 2**24 + 3], [7, 2**24 + 103]], 16.0),
    (N2_INT64.astype(np.uint64), [[10**9 + 1], [10**9 + 11]], 4.0),
], ids=["int64", "int32", "uint32", "uint64"])
def test_integer_kmeans_and_gmm_are_exact(as_input, X, right, inertia):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning: every value is exact in float64
        km = KMeans(2, n_init=1, random_state=0).fit(as_input(X))
        gm = GaussianMixture(2, covariance_type="diag", random_state=0).fit(as_input(X))
    assert km.cluster_centers_.dtype == np.float64 and split(km.labels_)
    np.testing.assert_array_equal(sorted_rows(km.cluster_centers_), right)
    assert km.inertia_ == inertia
    np.testing.assert_array_equal(km.predict(as_input(X)), km.labels_)
    assert split(gm.predict(as_input(X)))
    np.testing.assert_array_equal(sorted_rows(gm.means_), right)
    sk = sklearn.cluster.KMeans(2, n_init=1, random_state=0).fit(X)
    np.testing.assert_array_equal(sorted_rows(km.cluster_centers_), sorted_rows(sk.cluster_centers_))
    # (scikit-learn's diag GaussianMixture loses the int64 pair to E[x²] − μ²
    # cancellation: its means are 1e9 + 3.6 and 1e9 + 6; memfit's are exact.)


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
def test_unsigned_arrays_are_read_in_place(dtype):
    X = np.arange(40, dtype=dtype).reshape(20, 2)[::2]
    data = check_data(X)
    assert np.shares_memory(data.engine, X) and not data.float32


@pytest.mark.parametrize("dtype", [np.int64, np.uint64])
def test_integers_beyond_2_pow_53_warn_naming_the_column(as_input, dtype):
    X = np.zeros((6, 2), dtype=dtype)
    X[:, 0] = np.arange(6)
    X[:, 1] = [2**53 - 3, 2**53 - 2, 2**53 - 1, 2**53, 2**53 + 1, 2**53 + 3]  # exact up to row 3
    source = as_input(X)
    name = "X" if isinstance(source, np.ndarray) else source
    expected = (f"{name}: column 1 holds {np.dtype(dtype).name} values beyond 2^53 in magnitude "
                f"(first: {2**53 + 1} at row 4)")
    estimators = (KMeans(2, n_init=1, random_state=0),
                  GaussianMixture(2, covariance_type="diag", reg_covar=1.0, random_state=0))
    for estimator in estimators:
        with pytest.warns(UserWarning, match=r"beyond 2\^53") as record:
            estimator.fit(source)
        messages = [str(w.message) for w in record if "2^53" in str(w.message)]
        assert len(messages) == 1 and messages[0].startswith(expected), messages
    # Predictions and kernels on such data warn too.
    km, gm = estimators
    calls = [km.predict, km.transform, km.score, gm.predict, lambda x: memfit.assign(x, km.cluster_centers_),
             lambda x: memfit.row_quadratic_form(x, np.eye(2)), memfit.weighted_scatter]
    for call in calls:
        with pytest.warns(UserWarning, match=r"beyond 2\^53") as record:
            call(source)
        assert sum("2^53" in str(w.message) for w in record) == 1, call
    # Below 2^53 int64 is exact: no such warning.
    X[4:, 1] = 2**53
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        KMeans(2, n_init=1, random_state=0).fit(as_input(X))
