"""Bad input a newcomer tried (each once broke or misled memfit): every case
is an exception of the right class with a message naming the cause."""

import numpy as np
import pandas as pd
import pytest

import memfit
from memfit import GaussianMixture, KMeans, MiniBatchKMeans

X = np.random.RandomState(0).randn(200, 3)


@pytest.mark.parametrize(
    "call,error,match",
    [
        (lambda: memfit.assign(np.zeros((4, 2)), np.array([[1e160, 0.0], [-1e160, 0.0]])), ValueError, "overflow"),
        (lambda: KMeans(2, random_state=0).fit(X, sample_weight=np.full(200, 1e308)), ValueError, "sample_weight"),
        (lambda: GaussianMixture(2, random_state=0).fit(X, sample_weight=np.full(200, 1e308)), ValueError,
         "sample_weight"),
        (lambda: KMeans(3, random_state=0).fit(X, sample_weight=np.full(200, 1e306)), ValueError, "sample_weight"),
        # Weights all subnormal: the centres would come out rounded (helper 75).
        (lambda: KMeans(3, random_state=0).fit(X, sample_weight=np.full(200, 5e-324)), ValueError,
         "the largest weight is 5e-324, below float64's smallest normal number"),
        (lambda: GaussianMixture(2, random_state=0).fit(X, sample_weight=np.full(200, 1e-320)), ValueError,
         "scale the sample weights up"),
        (lambda: MiniBatchKMeans(3, random_state=0).fit(X, sample_weight=np.full(200, 1e-310)), ValueError,
         "scale the sample weights up"),
        # Normal weights, but every product with the data subnormal: the
        # centres came out as zeros (helper 133).
        *[
            (lambda e=e: e.fit(X * 1e-150, sample_weight=np.full(200, 1e-300)), ValueError,
             r"the largest weight \(1e-300\) times the largest absolute value of the data")
            for e in (KMeans(3, random_state=0), GaussianMixture(2, random_state=0), MiniBatchKMeans(3, random_state=0))
        ],
        # Values near float64's largest: a cluster's sum overflows (its mean
        # would not), for any k, algorithm and input form.
        *[
            (lambda k=k, a=a, f=f: KMeans(k, algorithm=a, random_state=0, n_init=1).fit(
                f(np.c_[np.full(6, 9e307), np.arange(6.0)])), ValueError,
             r"the weighted sums overflow float64 \(the mean of cluster \d+ in column 0")
            for k in (1, 2, 3) for a in ("lloyd", "bounded")
            for f in (lambda x: x, lambda x: __import__("scipy.sparse").sparse.csr_matrix(x))
        ],
        *[
            (lambda k=k, m=m: getattr(MiniBatchKMeans(k, random_state=0, n_init=1), m)(
                np.c_[np.full(300, 9e307), np.arange(300.0)]), ValueError,
             r"the weighted sums overflow float64 \(the mean of cluster \d+ in column 0")
            for k in (1, 2, 3) for m in ("fit", "partial_fit")
        ],
        # Every squared distance underflows: all rows would tie for every centre.
        (lambda: KMeans(3, random_state=0).fit(X * 1e-170), ValueError, "squared distances underflow float64"),
        (lambda: GaussianMixture(3, random_state=0).fit(X, sample_weight=np.r_[1e308, np.ones(199)]), ValueError,
         "overflow"),
        (lambda: KMeans(2).fit(pd.DataFrame({"a": pd.array([1, 2, None, 10, 11, 12], dtype="Int64"),
                                             "b": [0, 1, 0, 5, 6, 5.0]})), ValueError, "NaN"),
        (lambda: KMeans(3, random_state=0).fit(X).score(X, sample_weight=np.full(200, np.nan)), ValueError,
         "sample_weight"),
        (lambda: KMeans(2).fit("/"), IsADirectoryError, "directory"),
        (lambda: KMeans(3).fit(X, sample_weight=np.ones(200) + 1j), ValueError, "Complex data not supported"),
        (lambda: KMeans(3, init=X[:3] + 1j).fit(X), ValueError, "Complex data not supported"),
        (lambda: KMeans(3, init=np.r_[X[:2], [[np.nan, 0, 0]]]).fit(X), ValueError, r"Input contains NaN.*init\[2, 0\]"),
        (lambda: memfit.row_quadratic_form(X, np.eye(3) + 1j), ValueError, "Complex data not supported: Q"),
        (lambda: memfit.assign(X, X[:2] + 1j), ValueError, "Complex data not supported: centers"),
        (lambda: memfit.weighted_scatter(X, np.r_[np.nan, np.ones(199)]), ValueError,
         r"^Input w contains NaN\. memfit: w\[0\]"),
        (lambda: memfit.row_quadratic_form(X * 1e200, np.ones((3, 3))), ValueError, "overflows"),
        (lambda: KMeans(3, random_state=0, memory_limit=1 << 20).fit(X).set_params(memory_limit=1).transform(X),
         MemoryError, "memory_limit"),
        # Below the smallest grouped configuration (one component at a time).
        (lambda: GaussianMixture(50, memory_limit="300KiB").fit(np.random.RandomState(0).randn(1000, 40)),
         MemoryError, "float32 data"),
        (lambda: KMeans(3).fit((X * 1e37).astype(np.float32)), ValueError, "float64 data"),
        (lambda: KMeans(2, memory_limit=10**30).fit(X), ValueError, "memory_limit"),
        (lambda: memfit.weighted_scatter(np.full((3, 2), 1e200)), ValueError, "overflows"),
        (lambda: GaussianMixture(1).fit(X[:1]), ValueError, "minimum of 2"),
        (lambda: GaussianMixture(2, precisions_init=np.array([[[1, 0.9], [0, 1.0]], np.eye(2)]),
                                 means_init=np.zeros((2, 2))).fit(X[:, :2]), ValueError, "symmetric"),
        (lambda: GaussianMixture(3, warm_start=True, random_state=0).fit(X).set_params(n_components=4).fit(X),
         ValueError, "warm_start"),
        # As scikit-learn's (its parameter validation lets a bool pass): not a fit with one cluster.
        (lambda: KMeans(n_clusters=True).fit(X), TypeError, "an integer is required"),
        (lambda: GaussianMixture(n_components=True).fit(X), TypeError, "an integer is required"),
    ],
)
def test_bad_input_is_refused_clearly(call, error, match):
    """The call raises the expected class with a message that names the cause."""
    with pytest.raises(error, match=match) as info:
        call()
    assert "--" not in str(info.value), "messages name Python parameters, not command-line flags"


def test_bytes_path_and_out_of_core_transform(tmp_path):
    """A bytes path works; transform of a path equals transform of the array."""
    np.save(tmp_path / "x.npy", np.asfortranarray(X))
    km = KMeans(3, random_state=0).fit(X)
    assert KMeans(3, random_state=0).fit(bytes(tmp_path / "x.npy")).n_features_in_ == 3
    np.testing.assert_array_equal(km.transform(str(tmp_path / "x.npy")), km.transform(X))
    np.save(tmp_path / "c.npy", X)
    small = km.set_params(memory_limit=20_000).transform(str(tmp_path / "c.npy"))
    np.testing.assert_array_equal(small, km.transform(X))


def test_predict_fits_the_limit_the_fit_used(tmp_path):
    """Whatever fits under a memory limit can also predict under it (no file-writer buffers)."""
    km = KMeans(3, random_state=0, memory_limit="100KiB").fit(X)
    km.predict(X[:10]), km.score(X[:10]), memfit.assign(X, km.cluster_centers_, memory_limit="100KiB")
    gm = GaussianMixture(3, random_state=0, memory_limit="100KiB").fit(X)
    gm.predict(X[:10]), gm.predict_proba(X[:10]), gm.score_samples(X[:10])


def test_output_dtypes_follow_scikit_learn():
    """float32 outputs only for float32 data on a float32 model; bic and aic are floats."""
    gm = GaussianMixture(2, random_state=0).fit(X)
    assert gm.predict_proba(X.astype(np.float32)).dtype == np.float64
    assert type(gm.bic(X)) is float and type(gm.aic(X)) is float
    km = KMeans(2, random_state=0).fit(X)
    assert km.transform(X.astype(np.float32)).dtype == np.float64
    km32 = KMeans(2, random_state=0).fit(X.astype(np.float32))
    assert km32.transform(X.astype(np.float32)).dtype == np.float32


def test_np_matrix_is_refused_as_scikit_learn_refuses_it():
    X = np.matrix(np.random.default_rng(0).standard_normal((50, 3)))
    fitted = memfit.KMeans(2, n_init=1, random_state=0).fit(np.asarray(X))
    for call in (lambda: memfit.KMeans(2, n_init=1).fit(X), lambda: memfit.MiniBatchKMeans(2).fit(X),
                 lambda: memfit.GaussianMixture(2).fit(X), lambda: fitted.predict(X)):
        with pytest.raises(TypeError, match=r"^np\.matrix is not supported\. Please convert to a numpy array"):
            call()


@pytest.mark.parametrize("make", [lambda: GaussianMixture(2, random_state=0), lambda: KMeans(2, n_init=1, random_state=0),
                                  lambda: MiniBatchKMeans(2, n_init=1, random_state=0)])
def test_a_refused_refit_leaves_the_previous_fit_usable(make):
    """A refit refused for its data (NaN in X of another width, a memory
    limit too small) kept the new ``n_features_in_``, so the previous model
    refused every X afterwards; scikit-learn checks the data before
    recording it, and memfit now restores what it recorded."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 3))
    bad = rng.standard_normal((300, 2))
    bad[7, 1] = np.nan
    est = make().fit(pd.DataFrame(X, columns=list("abc")))
    want = est.predict(pd.DataFrame(X, columns=list("abc")))
    with pytest.raises(ValueError, match="NaN"):
        est.fit(bad)
    with pytest.raises(MemoryError):
        est.set_params(memory_limit="1KiB").fit(rng.standard_normal((300, 4)))
    est.set_params(memory_limit=make().memory_limit)
    assert est.n_features_in_ == 3 and list(est.feature_names_in_) == list("abc")
    np.testing.assert_array_equal(est.predict(pd.DataFrame(X, columns=list("abc"))), want)
    if isinstance(est, MiniBatchKMeans):
        with pytest.raises(ValueError, match="NaN"):
            MiniBatchKMeans(2).partial_fit(bad).n_features_in_
        fresh = MiniBatchKMeans(2, random_state=0)
        with pytest.raises(ValueError, match="NaN"):
            fresh.partial_fit(bad)
        assert not hasattr(fresh, "n_features_in_")


@pytest.mark.parametrize("cls", [GaussianMixture, KMeans])
def test_a_series_and_an_empty_x_get_scikit_learns_messages(cls):
    """A pandas Series got the 1-D array message (scikit-learn names the
    Series); an empty (0, 0) X at predict got the feature-count message
    (scikit-learn counts the samples first)."""
    import sklearn.cluster
    import sklearn.mixture

    X = np.random.default_rng(0).standard_normal((100, 3))
    peer = {GaussianMixture: sklearn.mixture.GaussianMixture, KMeans: sklearn.cluster.KMeans}[cls]
    for est in (cls(2, random_state=0), peer(2, random_state=0)):
        with pytest.raises(ValueError) as e:
            est.fit(pd.Series(X[:, 0]))
        assert str(e.value).startswith("Expected a 2-dimensional container but got <class 'pandas"), e.value
        est.fit(X)
        with pytest.raises(ValueError, match=r"Found array with 0 sample\(s\) \(shape=\(0, 0\)\) while a minimum of 1"):
            est.predict(np.empty((0, 0)))


@pytest.mark.parametrize("cls", [GaussianMixture, KMeans, MiniBatchKMeans])
@pytest.mark.parametrize("step", ["fit", "predict", "predict_float32", "predict_csr", "score", "transform"])
def test_nan_anywhere_is_named_before_an_earlier_infinity(cls, step):
    """scikit-learn's check_array reports NaN whenever X holds one, even
    after an infinity (helper 99: memfit named the first non-finite value
    it met, for KMeans's every entry point and GaussianMixture's)."""
    import scipy.sparse as sp
    import sklearn.cluster
    import sklearn.mixture

    if step == "transform" and cls is GaussianMixture:
        pytest.skip("GaussianMixture has no transform")
    if step == "predict_csr" and cls is GaussianMixture:
        pytest.skip("GaussianMixture refuses sparse X before its values")
    X = np.random.RandomState(0).randn(100, 4)
    X[50, 1], X[60, 0] = np.inf, np.nan
    good = np.random.RandomState(1).randn(100, 4)
    peer = {GaussianMixture: sklearn.mixture.GaussianMixture}.get(cls, sklearn.cluster.KMeans)
    x = {"predict_float32": X.astype(np.float32), "predict_csr": sp.csr_matrix(X)}.get(step, X)
    method = step.split("_")[0]
    messages = []
    for est in (cls(3, random_state=0), peer(3, random_state=0)):
        with pytest.raises(ValueError) as e:
            if method == "fit":
                est.fit(x)
            else:
                getattr(est.fit(good), method)(x)
        messages.append(str(e.value).splitlines()[0])
    assert messages[0] == messages[1] == "Input X contains NaN."
