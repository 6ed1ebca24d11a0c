"""The package on the shared real data sets (<repo>/../shared/datasets), and
the policy for a missing one: skip, or fail where MEMFIT_REQUIRE_DATASETS
says CI expects them."""

import re

import numpy as np
import pytest

from conftest import dataset_path
from memfit import GaussianMixture, KMeans


def test_a_missing_data_set_skips_or_fails_as_the_environment_says(monkeypatch):
    monkeypatch.delenv("MEMFIT_REQUIRE_DATASETS", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no_such_data_set.npy not found"):
        dataset_path("no_such_data_set.npy")
    monkeypatch.setenv("MEMFIT_REQUIRE_DATASETS", "0")
    with pytest.raises(pytest.skip.Exception):
        dataset_path("no_such_data_set.npy")
    monkeypatch.setenv("MEMFIT_REQUIRE_DATASETS", "1")
    with pytest.raises(pytest.fail.Exception, match="MEMFIT_REQUIRE_DATASETS is set"):
        dataset_path("no_such_data_set.npy")


def test_missing_values_of_nycflights_are_named_not_fitted(dataset):
    """Real missing values (cancelled flights, NaN): fits on the path refuse them,
    naming the first one's row and column."""
    path = dataset("nycflights13_numeric_with_nan_f64.npy")
    X = np.load(path, mmap_mode="r")
    row = int(np.flatnonzero(np.isnan(X).any(axis=1))[0])
    column = int(np.flatnonzero(np.isnan(X[row]))[0])
    for est in (KMeans(4, n_init=1, random_state=0), GaussianMixture(2, covariance_type="diag", random_state=0)):
        with pytest.raises(ValueError, match="NaN|not finite") as e:
            est.fit(str(path))
        assert re.search(rf"\b{row}\b.*\b{column}\b", str(e.value)), str(e.value)


def test_mnist_uint8_is_read_as_its_exact_float_values(dataset):
    """uint8 pixels, converted per block from a memory map 4x the limit, give the
    fit on their copy in the compute dtype."""
    X8 = dataset("mnist_X_uint8.npy", rows=5000)
    assert X8.dtype == np.uint8 and X8.shape == (5000, 784)
    init = np.asarray(X8[:10], dtype=np.float64)

    def fit(X):
        return KMeans(10, init=init, n_init=1, max_iter=10, memory_limit="4MiB").fit(X)

    on_uint8 = fit(X8)
    on_copy = fit(np.asarray(X8, dtype=on_uint8.cluster_centers_.dtype))
    np.testing.assert_array_equal(on_uint8.labels_, on_copy.labels_)
    np.testing.assert_array_equal(on_uint8.cluster_centers_, on_copy.cluster_centers_)
    assert on_uint8.n_iter_ == on_copy.n_iter_
