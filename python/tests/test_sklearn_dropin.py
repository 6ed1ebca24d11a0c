"""memfit's estimators side by side with scikit-learn's (issue 9, part 5):
what scikit-learn's source and documentation say each case does, checked on
both estimators with the same assertion: ``max_iter=0``, ``verbose`` lines,
errors and warnings (class and sentence), the dtype of labels,
``reg_covar=0`` and the tolerances of the checks."""

import re
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.cluster import KMeans as SkKMeans
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.mixture import GaussianMixture as SkGaussianMixture
from sklearn.mixture._gaussian_mixture import _compute_precision_cholesky_from_precisions
from sklearn.utils._param_validation import InvalidParameterError

from memfit import GaussianMixture, KMeans, MiniBatchKMeans

COV_TYPES = ("full", "tied", "diag", "spherical")
GMMS = (GaussianMixture, SkGaussianMixture)
KMEANS = (KMeans, SkKMeans)
BOTH = pytest.mark.parametrize("which", ("memfit", "sklearn"))


def _blobs(seed=0, n=60, d=2, k=3, spread=0.5):
    """k well-separated clusters of n rows each in d dimensions."""
    rng = np.random.RandomState(seed)
    centers = np.arange(k)[:, None] * 10.0 + np.zeros((k, d))
    return np.vstack([c + spread * rng.randn(n, d) for c in centers])


def _estimator(which, kind, **params):
    cls = {("memfit", "kmeans"): KMeans, ("sklearn", "kmeans"): SkKMeans}.get((which, kind))
    cls = cls or (GaussianMixture if which == "memfit" else SkGaussianMixture)
    return cls(**params)


def _by_mean(gm):
    """The fitted parameters with components in the order of their first mean."""
    order = np.argsort(gm.means_[:, 0])
    out = {"weights_": gm.weights_[order], "means_": gm.means_[order]}
    for name in ("covariances_", "precisions_", "precisions_cholesky_"):
        value = getattr(gm, name)
        out[name] = value if gm.covariance_type == "tied" else value[order]
    return out


# --------------------------------------------------------------------------
# (a) max_iter=0
# --------------------------------------------------------------------------


@pytest.mark.parametrize("covariance_type", COV_TYPES)
def test_gmm_max_iter_zero_returns_the_initialisation_as_sklearn(covariance_type):
    """scikit-learn 1.9 (`BaseMixture.fit_predict`): with max_iter=0 no EM
    step runs; the parameters are the initialisation's, n_iter_ is 0,
    lower_bound_ -inf, lower_bounds_ empty, converged_ False, and no
    ConvergenceWarning is issued. On well-separated clusters both k-means
    initialisations find the same partition, so every parameter agrees."""
    X = _blobs()
    fitted = []
    for cls in GMMS:
        gm = cls(3, covariance_type=covariance_type, max_iter=0, random_state=0)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            labels = gm.fit_predict(X)
        assert gm.n_iter_ == 0 and gm.lower_bound_ == -np.inf and list(gm.lower_bounds_) == []
        assert type(gm.lower_bound_) is float  # scikit-learn's -np.inf
        assert gm.converged_ is False
        assert labels.dtype == np.int64
        assert_array_equal(labels, gm.predict(X))
        fitted.append(_by_mean(gm))
    for name, value in fitted[1].items():
        assert_allclose(fitted[0][name], value, rtol=1e-9, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("covariance_type", COV_TYPES)
def test_gmm_max_iter_zero_with_given_means_and_weights(covariance_type):
    """Given weights and means are returned unchanged; the covariances come
    from the k-means responsibilities, as scikit-learn's (which pairs them
    with the given means in the k-means clusters' order, so they are
    compared as a set)."""
    X = _blobs()
    means = np.array([[0.5, 0.5], [9.5, 10.5], [20.0, 19.0]])
    weights = np.array([0.2, 0.3, 0.5])
    covariances = []
    for cls in GMMS:
        gm = cls(3, covariance_type=covariance_type, max_iter=0, means_init=means, weights_init=weights,
                 random_state=0).fit(X)
        assert_array_equal(gm.means_, means)
        assert_array_equal(gm.weights_, weights)
        c = gm.covariances_
        covariances.append(c if covariance_type == "tied" else c[np.argsort(c.reshape(3, -1)[:, 0])])
    assert_allclose(covariances[0], covariances[1], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("covariance_type", COV_TYPES)
def test_gmm_max_iter_zero_with_every_initial_parameter(covariance_type):
    """With weights, means and precisions all given, max_iter=0 returns them
    (scikit-learn 1.9 computes the same precisions_cholesky_ but then fails
    with AttributeError, since it never sets covariances_ there; memfit
    returns the precisions' inverses as covariances_)."""
    X = _blobs()
    rng = np.random.RandomState(1)
    a = rng.uniform(-0.3, 0.3, size=(3, 2, 2)) + np.eye(2)
    full = np.einsum("kij,klj->kil", a, a)
    precisions = {"full": full, "tied": full[0], "diag": np.array([[1.0, 2.0], [0.5, 4.0], [3.0, 1.5]]),
                  "spherical": np.array([0.5, 1.0, 2.0])}[covariance_type]
    means = np.array([[0.5, 0.5], [9.5, 10.5], [20.0, 19.0]])
    weights = np.array([0.2, 0.3, 0.5])
    gm = GaussianMixture(3, covariance_type=covariance_type, max_iter=0, weights_init=weights, means_init=means,
                         precisions_init=precisions).fit(X)
    assert_array_equal(gm.means_, means)
    assert_array_equal(gm.weights_, weights)
    assert gm.n_iter_ == 0 and gm.lower_bound_ == -np.inf
    expected = _compute_precision_cholesky_from_precisions(precisions, covariance_type, xp=np)
    assert_allclose(gm.precisions_cholesky_, expected, rtol=1e-12, atol=1e-14)
    assert_allclose(gm.precisions_, precisions, rtol=1e-12)
    inverse = np.linalg.inv(precisions) if covariance_type in ("full", "tied") else 1.0 / precisions
    assert_allclose(gm.covariances_, inverse, rtol=1e-12)
    # The same model in scikit-learn predicts the same.
    sk = SkGaussianMixture(3, covariance_type=covariance_type)
    for name in ("weights_", "means_", "covariances_", "precisions_", "precisions_cholesky_"):
        setattr(sk, name, getattr(gm, name))
    sk.n_features_in_ = 2
    assert_allclose(gm.predict_proba(X), sk.predict_proba(X), rtol=1e-10, atol=1e-14)


def test_gmm_max_iter_zero_verbose_prints_each_initialisation(capsys):
    """scikit-learn prints "Initialization i" per initialisation and nothing
    else when max_iter=0."""
    X = _blobs()
    out = []
    for cls in GMMS:
        cls(1, max_iter=0, n_init=2, verbose=2, random_state=0).fit(X)
        out.append(capsys.readouterr().out)
    assert out[0] == out[1] == "Initialization 0\nInitialization 1\n"


def test_kmeans_max_iter_zero_is_refused_as_sklearn():
    """scikit-learn's KMeans constrains max_iter to [1, inf)
    (`_BaseKMeans._parameter_constraints`): InvalidParameterError, same message."""
    X = _blobs()
    message = "The 'max_iter' parameter of KMeans must be an int in the range [1, inf). Got 0 instead."
    for cls in KMEANS:
        with pytest.raises(InvalidParameterError, match=re.escape(message)):
            cls(3, max_iter=0).fit(X)


# --------------------------------------------------------------------------
# (b) verbose
# --------------------------------------------------------------------------


def _gmm_init(covariance_type="full"):
    means = np.array([[1.0, 1.0], [9.0, 11.0], [21.0, 19.0]])
    precisions = {"full": np.stack([np.eye(2)] * 3), "tied": np.eye(2), "diag": np.ones((3, 2)),
                  "spherical": np.ones(3)}[covariance_type]
    return dict(means_init=means, weights_init=np.full(3, 1 / 3), precisions_init=precisions)


@pytest.mark.parametrize("verbose_interval", [1, 2, 10])
@pytest.mark.parametrize("covariance_type", COV_TYPES)
def test_gmm_verbose_1_prints_sklearn_lines(capsys, covariance_type, verbose_interval):
    """From the same initial parameters EM takes the same iterations, so
    verbose=1 prints exactly scikit-learn's lines ("Initialization 0", "  Iteration n"
    every verbose_interval iterations, "Initialization converged.")."""
    X = _blobs(spread=2.0)
    out = []
    for cls in GMMS:
        cls(3, covariance_type=covariance_type, tol=1e-8, verbose=1, verbose_interval=verbose_interval,
            **_gmm_init(covariance_type)).fit(X)
        out.append(capsys.readouterr().out)
    assert out[0] == out[1]
    assert out[0].startswith("Initialization 0\n") and out[0].endswith("Initialization converged.\n")


def test_gmm_verbose_not_converged_and_several_inits(capsys):
    """An initialisation that stops at max_iter says "did not converge";
    every initialisation gets its header."""
    X = _blobs(spread=2.0)
    out = []
    for cls in GMMS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            cls(3, max_iter=2, n_init=2, tol=0.0, verbose=1, verbose_interval=1, random_state=0).fit(X)
        out.append(capsys.readouterr().out)
    expected = "Initialization 0\n  Iteration 1\n  Iteration 2\nInitialization did not converge.\n"
    assert out[0] == out[1] == expected + expected.replace("Initialization 0", "Initialization 1")


def test_gmm_verbose_2_prints_sklearn_lines_with_times(capsys):
    """verbose=2 adds the time lapses, the change of the lower bound and the
    final lower bound, in scikit-learn's format; the numbers agree."""
    X = _blobs(spread=2.0)
    out = []
    for cls in GMMS:
        cls(3, tol=1e-8, verbose=2, verbose_interval=1, **_gmm_init()).fit(X)
        out.append(capsys.readouterr().out)
    number = r"-?\d+\.\d{5}"
    shape = [re.sub(number, "N", line) for line in out[0].splitlines()]
    assert shape == [re.sub(number, "N", line) for line in out[1].splitlines()]
    assert shape[0] == "Initialization 0"
    assert shape[1] == "  Iteration 1\t time lapse Ns\t ll change inf"
    assert all(line == "  Iteration %d\t time lapse Ns\t ll change N" % i for i, line in enumerate(shape[2:-1], 2))
    assert shape[-1] == "Initialization converged. time lapse Ns\t lower bound N."
    changes = [[float(v) for v in re.findall(r"ll change (\S+)", text)] for text in out]
    assert_allclose(changes[0], changes[1], atol=2e-5)
    bounds = [float(re.search(r"lower bound (\S+)\.$", text.strip()).group(1)) for text in out]
    assert_allclose(bounds[0], bounds[1], atol=2e-5)


@pytest.mark.parametrize("algorithm", ["lloyd", "elkan"])
@pytest.mark.parametrize("tol", [0.0, 1e-4, 10.0])
def test_kmeans_verbose_prints_sklearn_lines(capsys, tol, algorithm):
    """From the same initial centres Lloyd takes the same iterations:
    "Initialization complete", "Iteration i, inertia x." (no period for
    elkan) and the line saying why it stopped, as scikit-learn's
    `_kmeans_single_lloyd` and `_kmeans_single_elkan` print them."""
    X = _blobs(spread=4.0)
    init = np.array([[0.0, 5.0], [10.0, 0.0], [20.0, 30.0]])
    out = []
    for cls in KMEANS:
        cls(3, init=init, n_init=1, tol=tol, verbose=1, algorithm=algorithm).fit(X)
        out.append(capsys.readouterr().out.splitlines())
    number = r"\d+(\.\d+)?(e-?\d+)?"
    assert [re.sub(number, "N", line) for line in out[0]] == [re.sub(number, "N", line) for line in out[1]]
    assert out[0][0] == "Initialization complete" and out[0][-1].startswith("Converged at iteration")
    end = r"\." if algorithm == "lloyd" else ""
    inertia = [[float(m) for m in re.findall(rf"inertia ([^\s]+?){end}$", "\n".join(lines), re.M)] for lines in out]
    assert len(inertia[0]) > 0
    assert_allclose(inertia[0], inertia[1], rtol=1e-10)


def test_kmeans_verbose_prints_each_initialisation(capsys):
    """With n_init runs, each starts with "Initialization complete"."""
    X = _blobs()
    for cls in KMEANS:
        cls(3, init="random", n_init=3, verbose=1, random_state=0).fit(X)
        assert capsys.readouterr().out.count("Initialization complete\n") == 3


# --------------------------------------------------------------------------
# (c) errors and warnings: scikit-learn's classes and sentences
# --------------------------------------------------------------------------

X30 = np.random.RandomState(0).randn(30, 3)


def _with(i, j, value):
    a = X30.copy()
    a[i, j] = value
    return a


CASES = [
    # (kind, constructor parameters, fit arguments, exception, pattern both messages match)
    ("kmeans", dict(n_clusters=0), (X30,), InvalidParameterError,
     re.escape("The 'n_clusters' parameter of KMeans must be an int in the range [1, inf). Got 0 instead.")),
    ("kmeans", dict(tol=-1.0), (X30,), InvalidParameterError, re.escape("The 'tol' parameter of KMeans must be")),
    ("kmeans", dict(tol=np.inf), (X30,), InvalidParameterError, re.escape("The 'tol' parameter of KMeans must be")),
    ("kmeans", dict(algorithm="fast"), (X30,), InvalidParameterError, "The 'algorithm' parameter of KMeans"),
    ("kmeans", dict(init="kmeans"), (X30,), InvalidParameterError, "The 'init' parameter of KMeans"),
    ("kmeans", dict(n_init=0), (X30,), InvalidParameterError, "The 'n_init' parameter of KMeans"),
    ("kmeans", dict(random_state=-1), (X30,), InvalidParameterError, "The 'random_state' parameter of KMeans"),
    ("kmeans", dict(verbose=-1), (X30,), InvalidParameterError, "The 'verbose' parameter of KMeans"),
    ("kmeans", dict(n_clusters=31), (X30,), ValueError, re.escape("n_samples=30 should be >= n_clusters=31.")),
    ("kmeans", dict(n_clusters=3, init=np.zeros((2, 3))), (X30,), ValueError,
     re.escape("The shape of the initial centers (2, 3) does not match the number of clusters 3.")),
    ("kmeans", dict(n_clusters=3, init=np.zeros((3, 2))), (X30,), ValueError,
     re.escape("The shape of the initial centers (3, 2) does not match the number of features of the data 3.")),
    ("kmeans", dict(n_clusters=3, init=np.r_[X30[:2], [[np.nan, 0, 0]]]), (X30,), ValueError,
     re.escape("Input contains NaN.")),
    ("kmeans", dict(n_clusters=3, init=X30[:3] + 1j), (X30,), ValueError, "Complex data not supported"),
    ("kmeans", dict(n_clusters=2), (_with(5, 1, np.nan),), ValueError, re.escape("Input X contains NaN.")),
    ("kmeans", dict(n_clusters=2), (_with(5, 1, np.inf),), ValueError,
     re.escape("Input X contains infinity or a value too large for dtype('float64').")),
    ("kmeans", dict(n_clusters=2), (_with(5, 1, np.inf).astype(np.float32),), ValueError,
     re.escape("Input X contains infinity or a value too large for dtype('float32').")),
    ("kmeans", dict(n_clusters=2), (X30[:0],), ValueError,
     re.escape("Found array with 0 sample(s) (shape=(0, 3)) while a minimum of 1 is required by KMeans.")),
    ("kmeans", dict(n_clusters=2), (X30[:, 0],), ValueError, re.escape("Expected 2D array, got 1D array instead")),
    ("kmeans", dict(n_clusters=2), (X30[None],), ValueError,
     re.escape("Found array with dim 3, while dim <= 2 is required by KMeans.")),
    ("gmm", dict(n_components=2), (X30[None],), ValueError,
     re.escape("Found array with dim 3, while dim <= 2 is required by GaussianMixture.")),
    ("kmeans", dict(n_clusters=2), (X30, None, np.ones(29)), ValueError,
     re.escape("sample_weight.shape == (29,), expected (30,)!")),
    ("kmeans", dict(n_clusters=2), (X30, None, np.ones((30, 1))), ValueError,
     re.escape("Sample weights must be 1D array or scalar, got 2D array. Expected either a scalar value or a 1D "
               "array of length 30.")),
    ("kmeans", dict(n_clusters=2), (X30, None, np.r_[np.nan, np.ones(29)]), ValueError,
     re.escape("Input sample_weight contains NaN.")),
    ("kmeans", dict(n_clusters=2), (X30, None, np.zeros(30)), ValueError,
     re.escape("Sample weights must contain at least one non-zero number.")),
    ("gmm", dict(n_components=0), (X30,), InvalidParameterError,
     re.escape("The 'n_components' parameter of GaussianMixture must be an int in the range [1, inf). Got 0 instead.")),
    ("gmm", dict(covariance_type="ful"), (X30,), InvalidParameterError, "The 'covariance_type' parameter of GaussianMixture"),
    ("gmm", dict(init_params="kmeans++"), (X30,), InvalidParameterError, "The 'init_params' parameter of GaussianMixture"),
    ("gmm", dict(n_init=0), (X30,), InvalidParameterError, "The 'n_init' parameter of GaussianMixture"),
    ("gmm", dict(max_iter=-1), (X30,), InvalidParameterError, "The 'max_iter' parameter of GaussianMixture"),
    ("gmm", dict(reg_covar=-1e-6), (X30,), InvalidParameterError, "The 'reg_covar' parameter of GaussianMixture"),
    ("gmm", dict(tol=np.nan), (X30,), InvalidParameterError, "The 'tol' parameter of GaussianMixture"),
    ("gmm", dict(verbose_interval=0), (X30,), InvalidParameterError, "The 'verbose_interval' parameter"),
    ("gmm", dict(warm_start=1), (X30,), InvalidParameterError, "The 'warm_start' parameter of GaussianMixture"),
    ("gmm", dict(n_components=31), (X30,), ValueError,
     re.escape("Expected n_samples >= n_components but got n_components = 31, n_samples = 30")),
    ("gmm", dict(n_components=1), (X30[:1],), ValueError,
     re.escape("Found array with 1 sample(s) (shape=(1, 3)) while a minimum of 2 is required by GaussianMixture.")),
    ("gmm", dict(n_components=2), (_with(3, 0, np.nan),), ValueError, re.escape("Input X contains NaN.")),
    ("gmm", dict(n_components=2), (sp.csr_matrix(X30),), TypeError,
     re.escape("Sparse data was passed for X, but dense data is required. Use '.toarray()' to convert to a dense "
               "numpy array.")),
    ("gmm", dict(n_components=3, weights_init=[0.5, 0.5]), (X30,), ValueError,
     re.escape("The parameter 'weights' should have the shape of (3,), but got (2,)")),
    ("gmm", dict(n_components=3, weights_init=[1.4, -0.2, -0.2]), (X30,), ValueError,
     re.escape("The parameter 'weights' should be in the range [0, 1], but got max value -0.20000, min value 1.40000")),
    ("gmm", dict(n_components=3, weights_init=[0.2, 0.2, 0.2]), (X30,), ValueError,
     re.escape("The parameter 'weights' should be normalized, but got sum(weights) = 0.60000")),
    ("gmm", dict(n_components=3, weights_init=[1 / 3, 1 / 3, 1 / 3 + 1e-7]), (X30,), ValueError,
     re.escape("The parameter 'weights' should be normalized")),
    ("gmm", dict(n_components=3, means_init=np.zeros((3, 2))), (X30,), ValueError,
     re.escape("The parameter 'means' should have the shape of (3, 3), but got (3, 2)")),
    ("gmm", dict(n_components=2, precisions_init=np.ones((3, 3, 3))), (X30,), ValueError,
     re.escape("The parameter 'full precision' should have the shape of (2, 3, 3), but got (3, 3, 3)")),
    ("gmm", dict(n_components=2, precisions_init=np.stack([np.eye(3), -np.eye(3)])), (X30,), ValueError,
     re.escape("'full precision' should be symmetric, positive-definite")),
    ("gmm", dict(n_components=2, covariance_type="tied", precisions_init=np.eye(3) + np.triu(np.ones((3, 3)), 1)),
     (X30,), ValueError, re.escape("'tied precision' should be symmetric, positive-definite")),
    ("gmm", dict(n_components=2, covariance_type="diag", precisions_init=np.r_[np.ones((1, 3)), -np.ones((1, 3))]),
     (X30,), ValueError, re.escape("'diag precision' should be positive")),
    ("gmm", dict(n_components=2, covariance_type="spherical", precisions_init=np.array([1.0, 0.0])), (X30,),
     ValueError, re.escape("'spherical precision' should be positive")),
    # Empty initial parameters: check_array's sentence before the shape's (helper 136).
    ("gmm", dict(n_components=2, covariance_type="spherical", precisions_init=np.ones(0)), (X30,), ValueError,
     re.escape("Found array with 0 sample(s) (shape=(0,)) while a minimum of 1 is required.")),
    ("gmm", dict(n_components=2, precisions_init=np.ones((0, 3, 3))), (X30,), ValueError,
     re.escape("Found array with 0 sample(s) (shape=(0, 3, 3)) while a minimum of 1 is required.")),
    ("gmm", dict(n_components=2, means_init=np.zeros((2, 0))), (X30,), ValueError,
     re.escape("Found array with 0 feature(s) (shape=(2, 0)) while a minimum of 1 is required.")),
    ("gmm", dict(n_components=2, weights_init=[]), (X30,), ValueError,
     re.escape("Found array with 0 sample(s) (shape=(0,)) while a minimum of 1 is required.")),
    ("kmeans", dict(n_clusters=2, init=np.zeros((0, 3)), n_init=1), (X30,), ValueError,
     re.escape("Found array with 0 sample(s) (shape=(0, 3)) while a minimum of 1 is required.")),
]


@pytest.mark.parametrize("kind, params, args, error, pattern", CASES)
def test_errors_have_sklearn_class_and_sentence(kind, params, args, error, pattern):
    """The same exception class, and a message that a pattern written for
    scikit-learn's matches (memfit's starts with scikit-learn's sentence)."""
    messages = []
    for which in ("sklearn", "memfit"):
        est = _estimator(which, kind, **params)
        with pytest.raises(error, match=pattern) as info:
            est.fit(*args) if len(args) < 3 else est.fit(args[0], sample_weight=args[2])
        assert type(info.value) is error or (error is ValueError and type(info.value) is ValueError)
        messages.append(str(info.value))
    assert "--" not in messages[1], "memfit's message names Python parameters"


@pytest.mark.parametrize("input_kind", ["numpy", "path", "sparse", "dask"])
def test_nan_message_is_sklearns_whole_then_where(input_kind, tmp_path):
    """A NaN in X: scikit-learn's whole message (its sentences naming the
    estimator), then memfit's detail (row and column) on the next line, from
    fit and from the methods that take new X."""
    import dask.array as da
    import sklearn.cluster
    import sklearn.mixture

    import memfit

    bad = _with(9, 1, np.nan)  # in the second chunk of a Dask X
    wrap = {
        "numpy": lambda a: a,
        "path": lambda a: (np.save(tmp_path / "bad.npy", a), str(tmp_path / "bad.npy"))[1],
        "sparse": sp.csr_matrix,
        "dask": lambda a: da.from_array(a, chunks=(7, 3)),
    }[input_kind]
    calls = [
        ("KMeans", dict(n_clusters=2, n_init=1), "fit"),
        ("MiniBatchKMeans", dict(n_clusters=2, n_init=1), "fit"),
        ("MiniBatchKMeans", dict(n_clusters=2, n_init=1), "partial_fit"),
        ("KMeans", dict(n_clusters=2, n_init=1), "predict"),
        ("KMeans", dict(n_clusters=2, n_init=1), "transform"),
    ]
    if input_kind != "sparse":
        calls += [
            ("GaussianMixture", dict(n_components=2), "fit"),
            ("GaussianMixture", dict(n_components=2), "score_samples"),
        ]
    for name, params, method in calls:
        want = None
        for which in (sklearn.cluster if name != "GaussianMixture" else sklearn.mixture, memfit):
            est = getattr(which, name)(random_state=0, **params)
            if method not in ("fit", "partial_fit"):
                est.fit(X30)
            x = bad if which is not memfit else wrap(bad)
            with pytest.raises(ValueError) as info:
                out = getattr(est, method)(x)
                if hasattr(out, "compute"):  # lazy for a Dask X
                    out.compute()
            if want is None:
                want = str(info.value)
                continue
            got = str(info.value)
            assert got.startswith(want + "\n"), (name, method, got)
            assert "row 9, column 1" in got[len(want):], (name, method, got)


@pytest.mark.parametrize("covariance_type", COV_TYPES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_ill_defined_covariance_error_is_sklearns(covariance_type, dtype):
    """A component on identical rows with reg_covar=0: scikit-learn's
    ValueError and sentence (with its float32 advice for float32 data),
    then memfit's hint naming the component."""
    X = np.vstack([np.ones((6, 3)), np.zeros((6, 3)), np.full((6, 3), -3.0)]).astype(dtype)
    sentence = (
        "Fitting the mixture model failed because some components have ill-defined empirical covariance (for "
        "instance caused by singleton or collapsed samples). Try to decrease the number of components, increase "
        "reg_covar, or scale the input data."
    )
    if dtype == np.float32:
        sentence += " The numerical accuracy can also be improved by passing float64 data instead of float32."
    messages = []
    for cls in GMMS:
        with pytest.raises(ValueError, match="^" + re.escape(sentence)) as info:
            cls(3, covariance_type=covariance_type, reg_covar=0, random_state=0).fit(X)
        messages.append(str(info.value))
    assert re.search(r"memfit: (component \d+'s|the shared) covariance is not positive definite with reg_covar=0\.0",
                     messages[0]), messages[0]


def test_warnings_have_sklearn_class_and_sentence():
    """ConvergenceWarning for a mixture that did not converge and for fewer
    distinct points than clusters; RuntimeWarning for an explicit init with
    n_init > 1: scikit-learn's classes and sentences."""
    X = _blobs(spread=3.0)
    duplicates = np.repeat(np.array([[0.0, 0.0], [1.0, 1.0], [5.0, 5.0]]), 10, axis=0)
    for gmm, km in zip(GMMS, KMEANS):
        with pytest.warns(ConvergenceWarning, match=re.escape(
                "Best performing initialization did not converge. Try different init parameters, or increase "
                "max_iter, tol, or check for degenerate data.")):
            gmm(3, max_iter=1, random_state=0).fit(X)
        with pytest.warns(ConvergenceWarning, match=re.escape(
                "Number of distinct clusters (3) found smaller than n_clusters (4). Possibly due to duplicate "
                "points in X.")):
            km(4, random_state=0).fit(duplicates)
        # A mixture issues its k-means initialisation's warning as it is.
        with pytest.warns(ConvergenceWarning, match="^" + re.escape(
                "Number of distinct clusters (3) found smaller than n_clusters (4). Possibly due to duplicate "
                "points in X.") + "$"):
            gmm(4, random_state=0, reg_covar=1e-3).fit(duplicates)
        with pytest.warns(RuntimeWarning, match=re.escape(
                "Explicit initial center position passed: performing only one init in KMeans instead of n_init=3.")):
            km(3, init=X[:3], n_init=3).fit(X)


def test_prediction_errors_are_sklearns():
    """Unfitted estimators raise NotFittedError; another number of features,
    scikit-learn's ValueError; sample(0), its message."""
    X = _blobs()
    for gmm, km in zip(GMMS, KMEANS):
        for est in (gmm(2), km(2)):
            with pytest.raises(NotFittedError):
                est.predict(X)
            est.fit(X)
            name = type(est).__name__
            with pytest.raises(ValueError, match=re.escape(f"X has 3 features, but {name} is expecting 2 features")):
                est.predict(np.zeros((4, 3)))
        with pytest.raises(ValueError, match=re.escape("Invalid value for 'n_samples': 2 . The sampling requires")):
            gmm(2).fit(X).sample(0)


# --------------------------------------------------------------------------
# (d) dtype of labels
# --------------------------------------------------------------------------


def test_label_dtypes_are_sklearns():
    """GaussianMixture's predict and fit_predict return int64 (numpy's
    argmax), KMeans' labels int32, as scikit-learn's."""
    X = _blobs()
    for gmm, km in zip(GMMS, KMEANS):
        gm = gmm(3, random_state=0)
        assert gm.fit_predict(X).dtype == np.int64 and gm.predict(X).dtype == np.int64
        assert gm.sample(5)[1].dtype == np.int64
        k = km(3, random_state=0).fit(X)
        assert k.labels_.dtype == np.int32 and k.predict(X).dtype == np.int32
        assert km(3, random_state=0).fit_predict(X).dtype == np.int32
    # Scalars too: a mixture's bounds are NumPy scalars of X's dtype.
    for x, dtype in ((X, np.float64), (X.astype(np.float32), np.float32)):
        types = [(type(g.lower_bound_), {type(b) for b in g.lower_bounds_}, type(g.n_iter_), type(g.converged_))
                 for g in (gmm(3, random_state=0).fit(x) for gmm in GMMS)]
        assert types[0] == types[1] == (dtype, {dtype}, int, bool)


# --------------------------------------------------------------------------
# (e) reg_covar=0
# --------------------------------------------------------------------------


@pytest.mark.parametrize("spread", [1e-14, 1e-12, 1e-9])
def test_tiny_positive_variance_is_fitted_as_sklearn(spread):
    """With reg_covar=0 scikit-learn refuses a covariance only when its
    Cholesky factorisation fails (`_compute_precision_cholesky`); clusters
    whose spread is a few ulps of their magnitude have a tiny positive
    covariance, which both fit (full covariances, which scikit-learn
    computes around the mean), to the same values."""
    rng = np.random.RandomState(0)
    X = np.vstack([1.0 + spread * rng.randn(30, 2), 3.0 + spread * rng.randn(30, 2)])
    fitted = [_by_mean(cls(2, reg_covar=0, random_state=0).fit(X)) for cls in GMMS]
    assert np.all(np.linalg.eigvalsh(fitted[0]["covariances_"]) > 0)
    assert_allclose(fitted[0]["means_"], fitted[1]["means_"], rtol=1e-14)
    assert_allclose(fitted[0]["covariances_"], fitted[1]["covariances_"], rtol=0.05, atol=0.05 * spread**2)


@pytest.mark.parametrize("covariance_type", ["diag", "spherical"])
def test_tiny_positive_variance_is_fitted_for_diag_and_spherical(covariance_type):
    """Diagonal and spherical variances of 1e-28 around a mean of 1 are
    positive and fitted (scikit-learn fits them where its E[x²] − μ² does
    not cancel, as for data around 0; memfit computes them around the mean
    everywhere)."""
    rng = np.random.RandomState(0)
    for offset in (0.0, 1.0):
        X = offset + np.vstack([1e-14 * rng.randn(30, 2), 5.0 + 1e-14 * rng.randn(30, 2)])
        gm = GaussianMixture(2, covariance_type=covariance_type, reg_covar=0, random_state=0).fit(X)
        assert np.all(gm.covariances_ > 0) and np.all(np.isfinite(gm.score_samples(X)))
        if offset == 0.0:
            # The component at 0, where scikit-learn's formula does not cancel.
            sk = SkGaussianMixture(2, covariance_type=covariance_type, reg_covar=0, random_state=0).fit(X)
            assert_allclose(_by_mean(gm)["covariances_"][0], _by_mean(sk)["covariances_"][0], rtol=0.05)


# --------------------------------------------------------------------------
# (f) nothing stricter than scikit-learn
# --------------------------------------------------------------------------


def test_inverted_covariance_is_accepted_as_precisions_init():
    """`np.linalg.inv` of a 64 × 64 covariance is symmetric only to rounding
    (here made 1e-9 relative): scikit-learn accepts it (its `isclose`
    defaults), so does memfit, and both fit the same model from it."""
    rng = np.random.RandomState(0)
    d = 64
    a = rng.randn(d, d)
    cov = a @ a.T / d + np.eye(d)
    precision = np.linalg.inv(cov)
    precision[0, 1] *= 1 + 1e-9
    X = rng.multivariate_normal(np.zeros(d), cov, size=400)
    init = dict(weights_init=[1.0], means_init=np.zeros((1, d)), precisions_init=precision[None], max_iter=3,
                tol=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        gm, sk = (cls(1, **init).fit(X) for cls in GMMS)
    assert_allclose(gm.means_, sk.means_, atol=1e-10)
    assert_allclose(gm.covariances_, sk.covariances_, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize(
    "kind, params",
    [
        ("kmeans", dict(n_clusters=3, n_init=True)),
        ("kmeans", dict(n_clusters=3, max_iter=True, tol=0)),
        ("kmeans", dict(n_clusters=3, random_state=2**32 - 1, verbose=False, copy_x=False, algorithm="elkan")),
        ("kmeans", dict(n_clusters=3, random_state=np.random.RandomState(0), init=[[0, 0], [10, 10], [20, 20]])),
        ("gmm", dict(n_components=3, n_init=True, max_iter=True, tol=0, reg_covar=0.0, warm_start=np.bool_(False))),
        ("gmm", dict(n_components=3, weights_init=np.array([1 / 3, 1 / 3, 1 / 3 + 5e-9]), random_state=0)),
        ("gmm", dict(n_components=3, weights_init=np.array([0.3, 0.3, 0.4 + 5e-7], dtype=np.float32),
                     random_state=0)),
        ("gmm", dict(n_components=3, means_init=[[0, 0], [10, 10], [20, 20]], random_state=0)),
        ("gmm", dict(n_components=3, covariance_type="spherical", precisions_init=[1, 2, 3], random_state=0)),
        ("gmm", dict(n_components=60, covariance_type="spherical", reg_covar=1e-3, max_iter=1, random_state=0)),
    ],
)
def test_what_sklearn_accepts_memfit_accepts(kind, params):
    """Parameters scikit-learn accepts (bools as ints, the largest seed, a
    RandomState, weights normalised to its tolerance, list inits, as many
    components as samples) fit with memfit too."""
    X = _blobs(n=20)
    for which in ("sklearn", "memfit"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            _estimator(which, kind, **params).fit(X)


def test_shape_complex_and_string_messages_are_sklearns_whole():
    """1-D, 0-d and complex X, complex sample_weight: scikit-learn's whole
    message (the array printed as check_array prints it); the duplicate
    points warning without an added sentence; GaussianMixture's methods
    on new X refuse strings as scikit-learn's do (helper 81)."""
    import memfit

    X = _blobs(n=20)
    bad_calls = [
        lambda M: M.KMeans(2).fit(X[:, 0]),
        lambda M: M.KMeans(2).fit(np.float64(3.0)),
        lambda M: M.KMeans(2).fit(np.arange(6)),
        lambda M: M.KMeans(2).fit(X.astype(complex)),
        lambda M: M.KMeans(2).fit(X, sample_weight=np.ones(len(X)) + 1j),
        lambda M: M.GaussianMixture(2).fit(X[:, 0]),
    ]
    for call in bad_calls:
        said = []
        for M in (memfit, _SklearnModules):
            with pytest.raises(ValueError) as e:
                call(M)
            said.append(str(e.value))
        assert said[0] == said[1]
    said = []
    for M in (memfit, _SklearnModules):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            M.KMeans(3, n_init=1, random_state=0).fit(np.ones((5, 2)))
        said.append([str(x.message) for x in w if issubclass(x.category, ConvergenceWarning)])
    assert said[0] == said[1] and len(said[0]) == 1
    for M in (memfit, _SklearnModules):
        g = M.GaussianMixture(2, random_state=0).fit(X)
        for method in ("predict", "predict_proba", "score_samples", "score", "bic", "aic"):
            with pytest.raises(ValueError, match=re.escape("dtype='numeric' is not compatible with arrays of bytes")):
                getattr(g, method)(X.astype(str))
        g.predict(X.tolist())


class _SklearnModules:
    """scikit-learn's estimators under memfit's names."""

    KMeans = SkKMeans
    GaussianMixture = SkGaussianMixture


def test_a_warm_refit_checks_the_init_parameters_as_sklearn():
    """scikit-learn checks weights_init, means_init and precisions_init on
    every fit, a warm one too (helper 81: memfit ignored them there)."""
    X = _blobs(n=60)
    P = np.stack([np.eye(2)] * 3)
    for cls in GMMS:
        g = cls(3, means_init=X[:3], weights_init=[1 / 3] * 3, precisions_init=P, warm_start=True, max_iter=2)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            g.fit(X)
            g.set_params(weights_init=[0.5, 0.5])
            with pytest.raises(ValueError, match=re.escape("The parameter 'weights' should have the shape of (3,), "
                                                           "but got (2,)")):
                g.fit(X)
            g.set_params(weights_init=[1 / 3] * 3, means_init=np.zeros((3, 5)))
            with pytest.raises(ValueError, match=re.escape("The parameter 'means' should have the shape of (3, 2)")):
                g.fit(X)


def test_parameter_arrays_of_other_dims_and_float32_scores_as_sklearn():
    """Helper 86: a 3-D means_init (and weights_init, precisions_init of
    tied/diag/spherical, a 3-D or 1-D KMeans init) gets check_array's words;
    a float64 mixture scores float32 X in float64 (NumPy promotes it in
    scikit-learn); a huge max_iter is not refused for its lower bounds."""
    X = _blobs(n=60)
    cases = [(GMMS, dict(means_init=np.zeros((3, 2, 1)))), (GMMS, dict(weights_init=np.full((3, 1, 1), 1 / 3))),
             (GMMS, dict(covariance_type="diag", precisions_init=np.ones((3, 2, 1)))),
             (KMEANS, dict(init=np.zeros((3, 2, 1)), n_init=1)), (KMEANS, dict(init=np.zeros(6), n_init=1)),
             (KMEANS, dict(init=np.zeros((3, 2), complex), n_init=1))]
    for classes, kw in cases:
        said = []
        for cls in classes:
            with pytest.raises(ValueError) as e:
                cls(3, **kw).fit(X)
            said.append(str(e.value))
        assert said[0] == said[1], kw
    kw = dict(means_init=X[:3], weights_init=[1 / 3] * 3, precisions_init=np.stack([np.eye(2)] * 3), max_iter=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ours, theirs = GaussianMixture(3, **kw).fit(X), SkGaussianMixture(3, **kw).fit(X)
    X32 = (X + 0.1).astype(np.float32)
    got = ours.score_samples(X32)
    assert got.dtype == theirs.score_samples(X32).dtype == np.float64
    assert_array_equal(got, ours.score_samples(X32.astype(np.float64)))
    assert GaussianMixture(2, max_iter=10**12, memory_limit="100MB", random_state=0).fit(X).converged_


def test_counts_beyond_int64_and_datetime_columns_as_scikit_learn():
    """max_iter, n_init and max_no_improvement of 2**64 fit as scikit-learn's
    (a bare OverflowError); a DataFrame of datetimes beside numbers raises
    NumPy's DTypePromotionError, as scikit-learn's check_array (memfit
    clustered the timestamps as numbers; helper 114)."""
    pd = pytest.importorskip("pandas")
    X = np.random.default_rng(0).standard_normal((60, 3))
    KMeans(2, max_iter=2**64, n_init=1, random_state=0).fit(X)
    GaussianMixture(2, max_iter=2**64, random_state=0).fit(X)
    MiniBatchKMeans(2, max_no_improvement=2**64, n_init=1, random_state=0).fit(X)
    frame = pd.DataFrame({"t": pd.date_range("2020", periods=60), "v": X[:, 0]})
    for est in (KMeans(2), MiniBatchKMeans(2), GaussianMixture(2), SkKMeans(2)):
        with pytest.raises(np.exceptions.DTypePromotionError):
            est.fit(frame)
