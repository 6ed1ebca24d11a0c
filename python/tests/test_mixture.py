"""memfit.GaussianMixture against the behaviours scikit-learn's own
GaussianMixture tests check (sklearn/mixture/tests/test_gaussian_mixture.py),
written afresh: parity with scikit-learn from the same initial parameters,
EM's monotone lower bound, warm starts, regularisation, criteria, sampling,
initialisations, parameter checks, warnings and input kinds."""

import copy
import re
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.metrics import adjusted_rand_score
from sklearn.mixture import GaussianMixture as SkGaussianMixture

from memfit import GaussianMixture

COV_TYPES = ("full", "tied", "diag", "spherical")
INITS = ("kmeans", "k-means++", "random", "random_from_data")
FITTED = ("weights_", "means_", "covariances_", "precisions_", "precisions_cholesky_")


# --------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------


class Truth:
    """A known 3-component mixture in 3-D and draws from it, one data set per
    covariance type (component shapes of that type)."""

    n_components, n_features = 3, 3
    weights = np.array([0.25, 0.35, 0.40])
    means = np.array([[-6.0, 0.0, 2.0], [5.0, -4.0, 0.0], [1.0, 7.0, -5.0]])

    def __init__(self, seed=0, n_samples=600, scale=1.0):
        rng = np.random.RandomState(seed)
        k, d = self.n_components, self.n_features
        self.means = self.means * scale
        full = []
        for _ in range(k):
            a = rng.uniform(-0.6, 0.6, size=(d, d)) + np.eye(d)
            full.append(a @ a.T + 0.2 * np.eye(d))
        full = np.array(full)
        self.covariances = {
            "full": full,
            "tied": full[0],
            "diag": np.array([np.diag(c) for c in full]),
            "spherical": np.array([np.trace(c) / d for c in full]),
        }
        self.precisions = {
            "full": np.linalg.inv(full),
            "tied": np.linalg.inv(full[0]),
            "diag": 1.0 / self.covariances["diag"],
            "spherical": 1.0 / self.covariances["spherical"],
        }
        counts = np.round(self.weights * n_samples).astype(int)
        self.y = np.repeat(np.arange(k), counts)
        self.X = {}
        for t in COV_TYPES:
            rows = []
            for c, m in enumerate(counts):
                cov = self._dense_cov(t, c)
                rows.append(rng.multivariate_normal(self.means[c], cov, size=m))
            self.X[t] = np.vstack(rows)

    def _dense_cov(self, t, c):
        cov = self.covariances[t]
        d = self.n_features
        if t == "full":
            return cov[c]
        if t == "tied":
            return cov
        if t == "diag":
            return np.diag(cov[c])
        return cov[c] * np.eye(d)


@pytest.fixture(scope="module")
def truth():
    """One seeded Truth with well-separated components (read only)."""
    return Truth(seed=0)


@pytest.fixture(scope="module")
def overlap():
    """One seeded Truth whose components overlap, so that EM takes many
    iterations (read only)."""
    return Truth(seed=0, scale=0.4)


def _init_kwargs(truth, t, rng=None):
    """Perturbed but reasonable initial parameters for covariance type t."""
    rng = np.random.RandomState(42) if rng is None else rng
    k = truth.n_components
    weights = np.full(k, 1.0 / k)
    means = truth.means + rng.uniform(-1.0, 1.0, size=truth.means.shape)
    precisions = {
        "full": np.array([np.eye(truth.n_features) * s for s in (0.7, 1.0, 1.3)]),
        "tied": np.eye(truth.n_features) * 0.8,
        "diag": np.array([[0.6, 0.9, 1.1], [1.2, 0.8, 0.7], [1.0, 1.0, 0.5]]),
        "spherical": np.array([0.7, 1.0, 1.3]),
    }[t]
    return dict(weights_init=weights, means_init=means, precisions_init=precisions)


def _sorted_by_first_coordinate(means):
    return means[np.argsort(means[:, 0])]


def _with_parameters_of(gm):
    """A scikit-learn GaussianMixture holding gm's fitted parameters."""
    sk = SkGaussianMixture(n_components=gm.n_components, covariance_type=gm.covariance_type)
    for name in FITTED:
        setattr(sk, name, getattr(gm, name))
    sk.n_features_in_ = gm.n_features_in_
    sk.converged_, sk.n_iter_, sk.lower_bound_ = gm.converged_, gm.n_iter_, gm.lower_bound_
    return sk


def _n_parameters_by_hand(t, k, d):
    cov = {"full": k * d * (d + 1) // 2, "tied": d * (d + 1) // 2, "diag": k * d, "spherical": k}[t]
    return cov + k * d + (k - 1)


# --------------------------------------------------------------------------
# Parity with scikit-learn
# --------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("max_iter, tol", [(300, 1e-9), (3, 1e-9), (100, 1e-2)])
@pytest.mark.parametrize("covariance_type", COV_TYPES)
def test_fit_matches_sklearn_from_same_init(overlap, covariance_type, max_iter, tol):
    """From the same weights/means/precisions init, every fitted attribute and
    the iteration count match scikit-learn's (converged and not)."""
    X = overlap.X[covariance_type]
    kw = dict(
        n_components=overlap.n_components,
        covariance_type=covariance_type,
        max_iter=max_iter,
        tol=tol,
        random_state=0,
        **_init_kwargs(overlap, covariance_type),
    )
    ours = GaussianMixture(**kw).fit(X)
    ref = SkGaussianMixture(**kw).fit(X)

    assert ours.n_iter_ == ref.n_iter_
    assert ours.converged_ == ref.converged_
    assert ours.converged_ == (max_iter != 3)
    assert_allclose(ours.lower_bound_, ref.lower_bound_, rtol=1e-10)
    assert_allclose(ours.lower_bounds_, ref.lower_bounds_, rtol=1e-10)
    for name in FITTED:
        got, want = getattr(ours, name), getattr(ref, name)
        assert got.shape == want.shape, name
        assert_allclose(got, want, rtol=1e-8, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("covariance_type", COV_TYPES)
def test_predictions_match_sklearn_on_fitted_parameters(truth, covariance_type):
    """predict, predict_proba, score_samples, score, bic and aic equal
    scikit-learn's computed from memfit's fitted parameters."""
    X = truth.X[covariance_type]
    gm = GaussianMixture(n_components=3, covariance_type=covariance_type, random_state=0).fit(X)
    sk = _with_parameters_of(gm)
    rng = np.random.RandomState(1)
    Xnew = np.vstack([X, rng.uniform(-10, 10, size=(50, 3))])  # include points between components

    assert_array_equal(gm.predict(Xnew), sk.predict(Xnew))
    assert_allclose(gm.predict_proba(Xnew), sk.predict_proba(Xnew), rtol=1e-9, atol=1e-12)
    assert_allclose(gm.score_samples(Xnew), sk.score_samples(Xnew), rtol=1e-10)
    assert_allclose(gm.score(Xnew), sk.score(Xnew), rtol=1e-12)
    assert_allclose(gm.bic(Xnew), sk.bic(Xnew), rtol=1e-12)
    assert_allclose(gm.aic(Xnew), sk.aic(Xnew), rtol=1e-12)
    assert gm._n_parameters() == sk._n_parameters()


@pytest.mark.parametrize("covariance_type", COV_TYPES)
def test_recovers_true_parameters(truth, covariance_type):
    """With reg_covar=0 and a few inits the fit recovers the generating
    weights, means and precisions (the truth of scikit-learn's fit test)."""
    X = truth.X[covariance_type]
    gm = GaussianMixture(
        n_components=3, covariance_type=covariance_type, reg_covar=0, n_init=3, random_state=0
    ).fit(X)
    order = np.argsort(gm.means_[:, 0])
    true_order = np.argsort(truth.means[:, 0])
    assert_allclose(gm.weights_[order], truth.weights[true_order], atol=0.02)
    assert_allclose(gm.means_[order], truth.means[true_order], atol=0.35)
    got, want = gm.covariances_, truth.covariances[covariance_type]
    if covariance_type != "tied":
        got, want = got[order], want[true_order]
    assert_allclose(got, want, atol=0.35)
    assert adjusted_rand_score(truth.y, gm.predict(X)) > 0.95


# --------------------------------------------------------------------------
# EM's lower bound
# --------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("covariance_type", COV_TYPES)
def test_lower_bound_never_decreases(covariance_type):
    """Without regularisation the lower bound never decreases over EM
    iterations, and lower_bound_ is the last of lower_bounds_."""
    data = Truth(seed=3, n_samples=400, scale=0.4)
    X = data.X[covariance_type]
    starts = [{"init_params": "random"}, {"init_params": "kmeans"}, _init_kwargs(data, covariance_type)]
    for start in starts:
        gm = GaussianMixture(
            n_components=3,
            covariance_type=covariance_type,
            reg_covar=0,
            tol=1e-10,
            max_iter=150,
            random_state=5,
            **start,
        ).fit(X)
        lbs = np.asarray(gm.lower_bounds_)
        assert len(lbs) == gm.n_iter_ >= 5
        steps = np.diff(lbs)
        assert np.all(steps >= -1e-12 * np.abs(lbs[1:])), steps.min()
        assert gm.lower_bound_ == lbs[-1]


@pytest.mark.parametrize("covariance_type", COV_TYPES)
def test_lower_bound_increases_one_iteration_at_a_time(overlap, covariance_type):
    """Refitting with warm_start and max_iter=1 never lowers score(X), and
    the score settles (scikit-learn's monotonic likelihood check)."""
    X = overlap.X[covariance_type]
    gm = GaussianMixture(
        n_components=3,
        covariance_type=covariance_type,
        reg_covar=0,
        warm_start=True,
        max_iter=1,
        tol=1e-7,
        random_state=2,
        **_init_kwargs(overlap, covariance_type),
    )
    scores = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for _ in range(120):
            scores.append(gm.fit(X).score(X))
            assert gm.n_iter_ == 1
    steps = np.diff(scores)
    assert np.all(steps >= -1e-12 * np.abs(scores[1:])), steps.min()
    assert scores[-1] > scores[0]
    assert abs(steps[-1]) < 1e-6


# --------------------------------------------------------------------------
# Warm start
# --------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("covariance_type", COV_TYPES)
def test_warm_start_continues_the_fit(overlap, covariance_type):
    """Two warm-started max_iter=5 fits equal one max_iter=10 fit (lower
    bounds, parameters) and scikit-learn's warm start from the same init."""
    X = overlap.X[covariance_type]
    kw = dict(
        n_components=3,
        covariance_type=covariance_type,
        tol=0.0,
        reg_covar=0.0,
        random_state=0,
        **_init_kwargs(overlap, covariance_type, np.random.RandomState(8)),
    )

    warm = GaussianMixture(max_iter=5, warm_start=True, **kw)
    first = list(warm.fit(X).lower_bounds_)
    assert warm.n_iter_ == 5 and not warm.converged_
    second = list(warm.fit(X).lower_bounds_)
    assert warm.n_iter_ == 5 and not warm.converged_

    long = GaussianMixture(max_iter=10, **kw).fit(X)
    assert long.n_iter_ == 10 == len(first) + len(second)
    assert_allclose(first + second, long.lower_bounds_, rtol=1e-10)
    assert_allclose(warm.lower_bound_, long.lower_bound_, rtol=1e-10)
    assert second[-1] > first[-1]
    for name in FITTED:
        assert_allclose(getattr(warm, name), getattr(long, name), rtol=1e-8, atol=1e-12, err_msg=name)

    sk = SkGaussianMixture(max_iter=5, warm_start=True, **kw)
    sk.fit(X)
    sk.fit(X)
    assert sk.n_iter_ == warm.n_iter_
    assert_allclose(sk.lower_bounds_, second, rtol=1e-10)
    for name in FITTED:
        assert_allclose(getattr(warm, name), getattr(sk, name), rtol=1e-8, atol=1e-12, err_msg=name)




@pytest.mark.parametrize(
    "max_iter", [1, 2, 20]
)
def test_warm_start_reaches_convergence(truth, max_iter):
    """Repeated short warm-started fits eventually report convergence, with
    n_iter_ never above max_iter (as scikit-learn's do)."""
    X = truth.X["full"]
    gm = GaussianMixture(n_components=3, warm_start=True, max_iter=max_iter, init_params="random", random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for _ in range(200):
            gm.fit(X)
            if gm.converged_:
                break
    assert gm.converged_
    assert gm.n_iter_ <= max_iter


def test_warm_refit_of_converged_model_is_converged(overlap):
    """A one-iteration warm refit of a converged model moves the lower bound
    by less than tol, so it is converged without a warning (as in
    scikit-learn)."""
    X = overlap.X["full"]
    kw = dict(n_components=3, warm_start=True, random_state=0, **_init_kwargs(overlap, "full"))
    ref = SkGaussianMixture(**kw).fit(X)
    gm = GaussianMixture(**kw).fit(X)
    assert gm.converged_ and ref.converged_
    ref.set_params(max_iter=1).fit(X)
    assert ref.converged_  # scikit-learn's behaviour
    gm.set_params(max_iter=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        gm.fit(X)
    assert gm.converged_


def test_warm_start_false_restarts():
    """Without warm_start, a second fit repeats the first exactly."""
    X = Truth(seed=4, n_samples=300).X["diag"]
    gm = GaussianMixture(n_components=3, covariance_type="diag", random_state=1)
    a = {name: getattr(gm.fit(X), name).copy() for name in FITTED}
    b = {name: getattr(gm.fit(X), name).copy() for name in FITTED}
    for name in FITTED:
        assert_array_equal(a[name], b[name])


# --------------------------------------------------------------------------
# Regularisation
# --------------------------------------------------------------------------




@pytest.mark.parametrize(
    "covariance_type, n_features",
    [
        ("full", 4),
        ("tied", 4),
        ("diag", 4),
        ("spherical", 4),
        ("full", 1),
    ],
)
def test_collapsed_components_need_reg_covar(covariance_type, n_features):
    """Components on duplicated points fail with reg_covar=0 (scikit-learn's
    ValueError and sentence) and fit with the default reg_covar."""
    d = n_features
    X = np.vstack([np.ones((6, d)), np.zeros((6, d)), np.full((6, d), -3.0)])
    ref = SkGaussianMixture(n_components=3, covariance_type=covariance_type, reg_covar=0, random_state=0)
    sentence = re.escape("Fitting the mixture model failed because some components have ill-defined empirical covariance")
    with pytest.raises(ValueError, match=sentence):
        ref.fit(X)
    gm = GaussianMixture(n_components=3, covariance_type=covariance_type, reg_covar=0, random_state=0)
    with pytest.raises(ValueError, match=sentence):
        gm.fit(X)
    gm.set_params(reg_covar=1e-6).fit(X)
    assert_allclose(_sorted_by_first_coordinate(gm.means_)[:, 0], [-3.0, 0.0, 1.0], atol=1e-9)
    assert np.all(np.isfinite(gm.score_samples(X)))


@pytest.mark.parametrize("covariance_type", COV_TYPES)
def test_a_tight_component_beside_a_far_one_keeps_every_digit(covariance_type):
    """A component of spread 1e-3 at 0 beside one of spread 1e6 at 1e13 (a
    column spanning 16 orders of magnitude): its mean and variances are its
    rows', as scikit-learn's. Rows read relative to the column mean (5e12)
    would be rounded to multiples of 2^-10 first."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((500, 2)) * 1e-3
    X = np.r_[a, rng.standard_normal((500, 2)) * 1e6 + 1e13]
    params = dict(n_components=2, covariance_type=covariance_type, random_state=0,
                  means_init=[[0.0, 0.0], [1e13, 1e13]], weights_init=[0.5, 0.5])
    gm = GaussianMixture(**params).fit(X)
    near = int(np.argmin(np.abs(gm.means_[:, 0])))
    assert_allclose(gm.means_[near], a.mean(axis=0), rtol=1e-9)
    variances = {"full": lambda c: np.diag(c[near]), "diag": lambda c: c[near],
                 "spherical": lambda c: c[near], "tied": None}[covariance_type]
    if variances is not None:
        expected = a.var(axis=0) + gm.reg_covar
        assert_allclose(variances(gm.covariances_), expected.mean() if covariance_type == "spherical" else expected,
                        rtol=1e-6)
    # scikit-learn's diagonal log-densities expand (x - m)^2: about 1e-2 lost at 1e13.
    ref = SkGaussianMixture(**params).fit(X)
    assert gm.lower_bound_ == pytest.approx(ref.lower_bound_, abs=1e-2)


@pytest.mark.parametrize("scale", [1e-300, 1e-16, 3.7, 1e200])
@pytest.mark.parametrize("covariance_type", COV_TYPES)
def test_weights_scaled_alike_give_the_unweighted_mixture(covariance_type, scale):
    """Only the weights' ratios matter: the N_k floor scales with the mean
    weight, the responsibility cut-off ignores the weight, and no product
    overflows (a fixed 10 eps floor pulled every mean to 0 at 1e-16)."""
    rng = np.random.default_rng(7)
    X = np.concatenate([rng.standard_normal((200, 2)) * 0.5 + c for c in [(0, 0), (5, 5), (-5, 5)]])
    params = dict(n_components=3, covariance_type=covariance_type, means_init=X[[0, 200, 400]])
    ref = GaussianMixture(**params).fit(X)
    gm = GaussianMixture(**params).fit(X, sample_weight=np.full(len(X), scale))
    assert_allclose(gm.means_, ref.means_, rtol=1e-12, atol=1e-12)
    assert_allclose(gm.covariances_, ref.covariances_, rtol=1e-12, atol=1e-12)
    assert gm.lower_bound_ == pytest.approx(ref.lower_bound_, rel=1e-12)


def test_random_from_data_never_starts_from_a_row_of_weight_zero():
    """init_params="random_from_data" draws rows as KMeans's random init
    does, in proportion to sample_weight: a row of weight 0 is as missing
    (helper 127: rows were drawn uniformly, and a start on two rows of
    weight 0 collapsed both components onto the weighted mean)."""
    rng = np.random.default_rng(14)
    good = np.vstack([rng.normal(0, 1, (50, 2)), rng.normal(6, 1, (50, 2))])
    X = np.vstack([good, rng.normal(1000, 1, (100, 2))])
    w = np.r_[np.ones(100), np.zeros(100)]
    for seed in range(10):
        gm = GaussianMixture(2, init_params="random_from_data", random_state=seed, max_iter=0).fit(X, sample_weight=w)
        assert np.all(np.abs(gm.means_) < 100), (seed, gm.means_)
        gm = GaussianMixture(2, init_params="random_from_data", random_state=seed).fit(X, sample_weight=w)
        assert gm.lower_bound_ > -3.6, (seed, gm.lower_bound_, gm.means_)
    one = np.r_[1.0, np.zeros(len(X) - 1)]
    with pytest.raises(ValueError, match="only 1 row has a positive sample_weight, fewer than n_components = 2"):
        GaussianMixture(2, init_params="random_from_data").fit(X, sample_weight=one)


@pytest.mark.parametrize("offset", [1e8, 1e12])
@pytest.mark.parametrize("covariance_type", COV_TYPES)
def test_scores_far_from_the_origin_keep_their_digits(covariance_type, offset):
    """Components of spread 0.01 at 1e12: score_samples and predict_proba
    equal scikit-learn's on the rows and means shifted exactly to the origin
    (its own formula loses 0.3 at 1e12 for full and tied covariances)."""
    X = np.random.default_rng(0).standard_normal((2000, 2)) * 0.01 + offset
    X[::3] += 0.05
    gm = GaussianMixture(3, covariance_type=covariance_type, random_state=0).fit(X)
    ref = SkGaussianMixture(3, covariance_type=covariance_type)
    ref.weights_, ref.covariances_, ref.precisions_cholesky_ = gm.weights_, gm.covariances_, gm.precisions_cholesky_
    ref.means_ = gm.means_ - offset
    assert_allclose(gm.score_samples(X), ref.score_samples(X - offset), rtol=0, atol=1e-12)
    assert_allclose(gm.predict_proba(X), ref.predict_proba(X - offset), rtol=0, atol=1e-12)


@pytest.mark.parametrize("covariance_type", COV_TYPES)
def test_a_component_of_one_row_far_from_the_origin_is_centred_on_it(covariance_type):
    """Values near 2^62: a component of one row has scikit-learn's mean, which
    its 10 eps floor puts about 1e4 off the row, and a variance that covers
    that offset (as scikit-learn's `X - means` does), not reg_covar alone, which
    would put the row 1e7 standard deviations from its own component."""
    X = np.array([[2**60 + 1, 1], [2**60 + 5, 3], [7, 2**62], [1, 1]], dtype=np.uint64).astype(np.float64)
    gm = GaussianMixture(2, covariance_type=covariance_type, random_state=0).fit(X)
    ref = SkGaussianMixture(2, covariance_type=covariance_type, random_state=0).fit(X)
    assert_allclose(_sorted_by_first_coordinate(gm.means_), _sorted_by_first_coordinate(ref.means_), rtol=1e-12)
    if covariance_type in ("full", "tied"):
        assert gm.lower_bound_ == pytest.approx(ref.lower_bound_, rel=1e-9)
    else:
        # scikit-learn's diagonal variances expand E[x^2] - m^2 and keep its
        # rounding (4.7e22 for the single row); memfit's are exact.
        assert ref.lower_bound_ - 1e-9 < gm.lower_bound_ < -30


@pytest.mark.parametrize("covariance_type", COV_TYPES)
def test_constant_column_needs_reg_covar(covariance_type):
    """A constant feature makes full/tied/diag covariances singular with
    reg_covar=0 (ValueError naming reg_covar); spherical variances average
    over features and fit; every type fits with the default reg_covar."""
    rng = np.random.RandomState(0)
    X = np.vstack([rng.randn(40, 3), rng.randn(40, 3) + 6.0])
    X[:, 1] = 2.5
    gm = GaussianMixture(n_components=2, covariance_type=covariance_type, reg_covar=0, random_state=0)
    if covariance_type == "spherical":
        gm.fit(X)
    else:
        with pytest.raises(ValueError, match="reg_covar"):
            gm.fit(X)
    gm.set_params(reg_covar=1e-6).fit(X)
    assert np.all(np.isfinite(gm.precisions_))


def test_reg_covar_error_names_python_parameters():
    """The reg_covar error's hint names Python parameters, not command-line
    flags."""
    X = np.vstack([np.ones((5, 3)), np.zeros((5, 3))])
    with pytest.raises(ValueError) as info:
        GaussianMixture(n_components=2, reg_covar=0, random_state=0).fit(X)
    assert "--" not in str(info.value), str(info.value)


# --------------------------------------------------------------------------
# Fitted precisions and covariances
# --------------------------------------------------------------------------


@pytest.mark.parametrize("covariance_type", COV_TYPES)
def test_precisions_invert_covariances(truth, covariance_type):
    """precisions_ inverts covariances_, and precisions_cholesky_ (upper
    triangular for full/tied) squares to precisions_."""
    X = truth.X[covariance_type]
    gm = GaussianMixture(n_components=3, covariance_type=covariance_type, n_init=2, random_state=0).fit(X)
    P, C, U = gm.precisions_, gm.covariances_, gm.precisions_cholesky_
    d = X.shape[1]
    if covariance_type == "full":
        assert P.shape == C.shape == U.shape == (3, d, d)
        for p, c, u in zip(P, C, U):
            assert_allclose(p @ c, np.eye(d), atol=1e-10)
            assert_allclose(u @ u.T, p, rtol=1e-12, atol=1e-14)
            assert_array_equal(np.tril(u, -1), 0)
            assert_allclose(c, c.T)
            assert np.all(np.linalg.eigvalsh(c) > 0)
    elif covariance_type == "tied":
        assert P.shape == C.shape == U.shape == (d, d)
        assert_allclose(P @ C, np.eye(d), atol=1e-10)
        assert_allclose(U @ U.T, P, rtol=1e-12, atol=1e-14)
        assert_array_equal(np.tril(U, -1), 0)
    else:
        shape = (3, d) if covariance_type == "diag" else (3,)
        assert P.shape == C.shape == U.shape == shape
        assert_allclose(P * C, 1.0, rtol=1e-12)
        assert_allclose(U**2, P, rtol=1e-12)
        assert np.all(C > 0)
    for a in (P, C, U, gm.means_, gm.weights_):
        assert a.dtype == np.float64


# --------------------------------------------------------------------------
# Information criteria
# --------------------------------------------------------------------------


@pytest.mark.parametrize("covariance_type", COV_TYPES)
def test_bic_aic_formulas(covariance_type):
    """bic/aic are -2 n score + p log n / 2p with p counted by hand (13, 21,
    26, 41 free parameters for 2 components in 5-D)."""
    rng = np.random.RandomState(0)
    n, d, k = 60, 5, 2
    X = rng.randn(n, d)
    gm = GaussianMixture(n_components=k, covariance_type=covariance_type, random_state=0).fit(X)
    p = _n_parameters_by_hand(covariance_type, k, d)
    assert p == {"spherical": 13, "diag": 21, "tied": 26, "full": 41}[covariance_type]
    assert gm._n_parameters() == p
    assert_allclose(gm.bic(X), -2 * gm.score(X) * n + p * np.log(n), rtol=1e-13)
    assert_allclose(gm.aic(X), -2 * gm.score(X) * n + 2 * p, rtol=1e-13)
    assert_allclose(gm.score(X), gm.score_samples(X).mean(), rtol=1e-12)


def test_bic_one_component_one_feature_same_for_all_types():
    """For 1-D data and one component every covariance type is the same
    model, so the BIC agrees across types."""
    X = np.random.RandomState(0).randn(120, 1) * 2.0 + 1.0
    bics = [GaussianMixture(1, covariance_type=t, random_state=0).fit(X).bic(X) for t in COV_TYPES]
    assert_allclose(bics, bics[0], rtol=1e-10)


@pytest.mark.parametrize("covariance_type", COV_TYPES)
def test_aic_bic_close_to_gaussian_entropy(covariance_type):
    """On standard normal data, aic/bic are near 2n times the Gaussian
    entropy plus their penalties."""
    rng = np.random.RandomState(0)
    n, d = 60, 3
    X = rng.randn(n, d)
    entropy = 0.5 * (np.linalg.slogdet(np.cov(X.T, bias=True))[1] + d * (1 + np.log(2 * np.pi)))
    gm = GaussianMixture(n_components=2, covariance_type=covariance_type, max_iter=200, random_state=0).fit(X)
    p = gm._n_parameters()
    bound = d / np.sqrt(n)
    assert (gm.aic(X) - (2 * n * entropy + 2 * p)) / n < bound
    assert (gm.bic(X) - (2 * n * entropy + np.log(n) * p)) / n < bound


@pytest.mark.parametrize("covariance_type", COV_TYPES)
def test_bic_selects_number_of_blobs(covariance_type):
    """On three well-separated isotropic blobs the BIC is lowest at three
    components, as for scikit-learn."""
    rng = np.random.RandomState(1)
    centres = np.array([[0.0, 0.0, 0.0], [8.0, 0.0, 2.0], [0.0, 9.0, -3.0]])
    X = np.vstack([rng.randn(150, 3) + c for c in centres])
    ks = range(1, 6)
    ours = [GaussianMixture(k, covariance_type=covariance_type, random_state=0).fit(X).bic(X) for k in ks]
    ref = [SkGaussianMixture(k, covariance_type=covariance_type, random_state=0).fit(X).bic(X) for k in ks]
    assert ks[int(np.argmin(ours))] == 3
    assert ks[int(np.argmin(ref))] == 3


# --------------------------------------------------------------------------
# Sampling
# --------------------------------------------------------------------------


@pytest.mark.parametrize("covariance_type", COV_TYPES)
def test_sample_matches_fitted_mixture(truth, covariance_type):
    """sample(n) has shape (n, d), labels in ascending order with counts near
    n*weights_, and per-component moments near means_/covariances_."""
    X = truth.X[covariance_type]
    gm = GaussianMixture(n_components=3, covariance_type=covariance_type, random_state=0)
    with pytest.raises(NotFittedError):
        gm.sample(5)
    gm.fit(X)
    n = 30000
    Xs, ys = gm.sample(n)
    assert Xs.shape == (n, 3) and ys.shape == (n,)
    assert np.all(np.diff(ys) >= 0)
    counts = np.bincount(ys, minlength=3)
    assert counts.sum() == n
    assert np.all(np.abs(counts - n * gm.weights_) <= 5 * np.sqrt(n * gm.weights_ * (1 - gm.weights_)))
    for c in range(3):
        rows = Xs[ys == c]
        assert_allclose(rows.mean(axis=0), gm.means_[c], atol=0.08)
        emp = np.cov(rows.T)
        if covariance_type == "full":
            assert_allclose(emp, gm.covariances_[c], atol=0.12)
        elif covariance_type == "tied":
            assert_allclose(emp, gm.covariances_, atol=0.12)
        elif covariance_type == "diag":
            assert_allclose(np.diag(emp), gm.covariances_[c], atol=0.12)
            assert_allclose(emp - np.diag(np.diag(emp)), 0.0, atol=0.1)
        else:
            assert_allclose(np.var(rows - gm.means_[c]), gm.covariances_[c], atol=0.12)
    for size in (1, 2, 3, 7, 31):
        assert gm.sample(size)[0].shape == (size, 3)


@pytest.mark.parametrize("fitted", COV_TYPES)
def test_fitted_attributes_of_another_covariance_type_are_refused(fitted):
    """predict after set_params(covariance_type=...) or with a precisions_cholesky_ of another shape
    raises ValueError (scikit-learn's fails in NumPy), never reads the factors as the other type."""
    X = np.random.RandomState(0).randn(200, 4)
    gm = GaussianMixture(3, covariance_type=fitted, random_state=0).fit(X)
    for other in {"full", "tied", "diag", "spherical"} - {fitted}:
        gm.set_params(covariance_type=other)
        for method in (gm.predict, gm.predict_proba, gm.score_samples, gm.score):
            with pytest.raises(ValueError, match=f"do not fit covariance_type='{other}'"):
                method(X)
    gm.set_params(covariance_type=fitted)
    labels = gm.predict(X)
    factors = gm.precisions_cholesky_
    gm.precisions_cholesky_ = factors[..., :2] if factors.ndim > 1 else factors[:2]
    with pytest.raises(ValueError, match="precisions_cholesky_ of shape"):
        gm.predict(X)
    gm.precisions_cholesky_ = factors
    assert_array_equal(gm.predict(X), labels)


@pytest.mark.parametrize("fitted, other", [("tied", "diag"), ("diag", "tied")])
def test_fitted_attributes_of_another_covariance_type_of_the_same_shape_are_refused(fitted, other):
    # With n_components == n_features, tied and diag factors have the same
    # shape: predict said "the model folder is damaged" and sample drew NaN.
    X = np.random.RandomState(0).randn(100, 2)
    gm = GaussianMixture(2, covariance_type=fitted, random_state=0).fit(X)
    gm.set_params(covariance_type=other)
    for method in (gm.predict, gm.score, lambda _: gm.sample(6)):
        with pytest.raises(ValueError, match=f"fitted attributes are of covariance_type='{fitted}'"):
            method(X)
    gm.set_params(covariance_type=fitted)
    assert np.isfinite(gm.sample(6)[0]).all()


@pytest.mark.parametrize("covariance_type", COV_TYPES)
def test_sample_draws_what_scikit_learn_draws_from_the_same_mixture(truth, covariance_type):
    """The same fitted parameters and ``random_state`` give scikit-learn's
    rows and labels: its multivariate normal draws for full and tied."""
    gm = GaussianMixture(n_components=3, covariance_type=covariance_type, random_state=7).fit(
        truth.X[covariance_type]
    )
    ref = SkGaussianMixture(n_components=3, covariance_type=covariance_type, random_state=7)
    for name in ("weights_", "means_", "covariances_", "precisions_cholesky_"):
        setattr(ref, name, getattr(gm, name))
    for n in (1, 6, 500):
        X, y = gm.sample(n)
        X_ref, y_ref = ref.sample(n)
        assert_array_equal(y, y_ref)
        assert_array_equal(X, X_ref)


def test_a_random_state_is_drawn_from_only_when_the_start_needs_it():
    """As scikit-learn: a shared RandomState is not advanced by a fit
    given all three initial parameters, or by a warm start; a later
    sample() then draws scikit-learn's rows (helper 122)."""
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(0, 1, (60, 3)), rng.normal(5, 0.5, (60, 3))])
    init = dict(means_init=X[[0, 70]], weights_init=[0.5, 0.5], precisions_init=np.stack([np.eye(3)] * 2))
    states = []
    for cls in (SkGaussianMixture, GaussianMixture):
        rs = np.random.RandomState(4)
        gm = cls(2, random_state=rs, **init).fit(X)
        states.append((rs.randint(1000), gm.sample(3)[0]))
        gm.set_params(warm_start=True, random_state=rs).fit(X)
        states.append((rs.randint(1000),))
    assert states[0][0] == states[2][0] and states[1] == states[3]
    assert_allclose(states[2][1], states[0][1], rtol=1e-10)  # the same draws
    # A start that needs it draws from it (k-means labels).
    rs = np.random.RandomState(4)
    GaussianMixture(2, random_state=rs).fit(X)
    assert rs.randint(1000) != np.random.RandomState(4).randint(1000)


@pytest.mark.parametrize("n_samples", [0, -1])
def test_sample_needs_at_least_one_row(truth, n_samples):
    """sample with n_samples < 1 raises ValueError."""
    gm = GaussianMixture(n_components=3, random_state=0).fit(truth.X["full"])
    with pytest.raises(ValueError, match="n_samples"):
        gm.sample(n_samples)


def test_single_component_on_three_points_fits_and_samples():
    """One component on three points fits and samples (scikit-learn issue
    23032)."""
    X = np.random.RandomState(0).multivariate_normal(np.zeros(2), np.eye(2), size=3)
    gm = GaussianMixture(n_components=1).fit(X)
    Xs, ys = gm.sample()
    assert Xs.shape == (1, 2)
    assert_array_equal(ys, [0])


# --------------------------------------------------------------------------
# Prediction
# --------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize(
    "max_iter, tol, n_init",
    [(2, 1e-7, 1), (2, 1e-1, 1), (300, 1e-7, 1), (300, 1e-1, 1), (50, 1e-3, 4)],
)
@pytest.mark.parametrize("covariance_type", COV_TYPES)
def test_fit_predict_equals_fit_then_predict(truth, covariance_type, max_iter, tol, n_init):
    """fit_predict(X) equals fit(X).predict(X) for the same random_state,
    converged or not, with one or several inits."""
    X = truth.X[covariance_type]
    gm = GaussianMixture(
        n_components=3,
        covariance_type=covariance_type,
        max_iter=max_iter,
        tol=tol,
        n_init=n_init,
        random_state=11,
        **(_init_kwargs(truth, covariance_type) if n_init == 1 else {}),
    )
    other = copy.deepcopy(gm)
    labels = gm.fit_predict(X)
    assert labels.shape == (X.shape[0],)
    assert_array_equal(labels, other.fit(X).predict(X))
    assert_array_equal(labels, gm.predict(X))
    assert adjusted_rand_score(truth.y, labels) > 0.95


@pytest.mark.parametrize("covariance_type", COV_TYPES)
def test_predict_proba_consistent_with_predict(truth, covariance_type):
    """predict_proba rows are probabilities summing to 1 whose argmax is
    predict; score is the mean of score_samples."""
    X = truth.X[covariance_type]
    gm = GaussianMixture(n_components=3, covariance_type=covariance_type, random_state=0)
    for method in ("predict", "predict_proba", "score", "score_samples"):
        with pytest.raises(NotFittedError, match="not fitted yet"):
            getattr(gm, method)(X)
    gm.fit(X)
    proba = gm.predict_proba(X)
    assert proba.shape == (X.shape[0], 3)
    assert np.all((proba >= 0) & (proba <= 1))
    assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-12)
    assert_array_equal(proba.argmax(axis=1), gm.predict(X))
    assert gm.score_samples(X).shape == (X.shape[0],)
    assert_allclose(gm.score(X), gm.score_samples(X).mean(), rtol=1e-12)


def test_more_iterations_score_higher(truth):
    """A one-iteration fit scores lower than a converged fit from the same
    start."""
    X = truth.X["full"]
    kw = dict(n_components=3, reg_covar=0, init_params="random", random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        short = GaussianMixture(max_iter=1, **kw).fit(X)
    full = GaussianMixture(max_iter=300, tol=1e-6, **kw).fit(X)
    assert full.score(X) > short.score(X)


# --------------------------------------------------------------------------
# Several initialisations
# --------------------------------------------------------------------------


@pytest.mark.parametrize("init_params", INITS)
@pytest.mark.parametrize("covariance_type", COV_TYPES)
def test_more_inits_never_worse_than_the_first(covariance_type, init_params):
    """With the same seed, the best of n_init=5 includes the n_init=1 run (its
    first init), so its lower bound is never lower."""
    rng = np.random.RandomState(0)
    X = rng.randn(120, 4)  # no clear structure: inits end in different optima
    bounds_one, bounds_five = [], []
    for seed in range(3):
        kw = dict(n_components=3, covariance_type=covariance_type, init_params=init_params, random_state=seed)
        one = GaussianMixture(n_init=1, **kw).fit(X)
        five = GaussianMixture(n_init=5, **kw).fit(X)
        assert five.lower_bound_ >= one.lower_bound_
        assert five.lower_bound_ == five.lower_bounds_[-1]
        bounds_one.append(one.lower_bound_)
        bounds_five.append(five.lower_bound_)
    assert np.all(np.asarray(bounds_five) >= np.asarray(bounds_one))


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_more_inits_after_one_iteration():
    """Also when every init stops after one iteration, n_init=10 reaches at
    least the n_init=1 lower bound (scikit-learn's init test)."""
    for seed in range(10):
        X = Truth(seed=seed, n_samples=60, scale=0.3).X["full"]
        one = GaussianMixture(n_components=3, n_init=1, max_iter=1, random_state=seed).fit(X)
        ten = GaussianMixture(n_components=3, n_init=10, max_iter=1, random_state=seed).fit(X)
        assert ten.lower_bound_ >= one.lower_bound_


def test_fit_predict_with_several_inits():
    """fit_predict with n_init=5 equals predict on the kept fit."""
    X = np.random.RandomState(0).randn(500, 5)
    gm = GaussianMixture(n_components=5, n_init=5, random_state=0)
    assert_array_equal(gm.fit_predict(X), gm.predict(X))


# --------------------------------------------------------------------------
# Initialisation methods
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def blobs3():
    """Three well-separated unit blobs in 3-D (150 rows each) and the centres."""
    rng = np.random.RandomState(1)
    centres = np.array([[0.0, 0.0, 0.0], [8.0, 0.0, 2.0], [0.0, 9.0, -3.0]])
    X = np.vstack([rng.randn(150, 3) + c for c in centres])
    return X, centres


@pytest.mark.parametrize("init_params", INITS)
def test_every_init_recovers_blobs(blobs3, init_params):
    """kmeans, k-means++, random and random_from_data inits each recover the
    blob centres (best of 5 inits, tight tol), within the data's range."""
    X, centres = blobs3
    for seed in range(3):
        gm = GaussianMixture(
            n_components=3, init_params=init_params, n_init=5, tol=1e-6, max_iter=300, random_state=seed
        ).fit(X)
        assert gm.converged_
        assert gm.means_.shape == (3, 3)
        assert np.all((X.min(axis=0) <= gm.means_) & (gm.means_ <= X.max(axis=0)))
        got = gm.means_[np.argsort(gm.means_ @ [1.0, 10.0, 0.0])]
        want = centres[np.argsort(centres @ [1.0, 10.0, 0.0])]
        assert_allclose(got, want, atol=0.3)
        assert_allclose(np.sort(gm.weights_), 1 / 3, atol=1e-3)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("init_params", INITS)
def test_init_means_are_distinct(blobs3, init_params):
    """After one iteration from any init, no two means coincide."""
    X, _ = blobs3
    for seed in range(3):
        gm = GaussianMixture(n_components=3, init_params=init_params, max_iter=1, random_state=seed).fit(X)
        for i in range(3):
            for j in range(i + 1, 3):
                assert not np.allclose(gm.means_[i], gm.means_[j])


def test_same_seed_same_fit(blobs3):
    """The same int random_state gives bitwise the same fit."""
    X, _ = blobs3
    a = GaussianMixture(n_components=3, init_params="k-means++", n_init=2, random_state=9).fit(X)
    b = GaussianMixture(n_components=3, init_params="k-means++", n_init=2, random_state=9).fit(X)
    for name in FITTED:
        assert_array_equal(getattr(a, name), getattr(b, name))


def test_full_precisions_init_keeps_iteration_count():
    """Giving the precisions a kmeans init would estimate gives the same fit
    and n_iter_ (scikit-learn issue 16944), for diag covariances."""
    rng = np.random.RandomState(0)
    X = np.vstack([rng.randn(300, 2) + 20.0, rng.randn(300, 2) @ np.array([[0.0, -0.7], [3.5, 0.7]])])
    plain = GaussianMixture(n_components=2, covariance_type="diag", random_state=0).fit(X)
    # Precisions of the hard partition given by plain's labels (well-separated: kmeans' partition).
    labels = plain.predict(X)
    var = np.array([X[labels == c].var(axis=0) + 1e-6 for c in range(2)])
    means = np.array([X[labels == c].mean(axis=0) for c in range(2)])
    weights = np.bincount(labels) / len(labels)
    given = GaussianMixture(
        n_components=2,
        covariance_type="diag",
        weights_init=weights,
        means_init=means,
        precisions_init=1.0 / var,
        random_state=0,
    ).fit(X)
    assert abs(given.n_iter_ - plain.n_iter_) <= 1
    assert_allclose(given.precisions_cholesky_, plain.precisions_cholesky_, rtol=1e-3)


# --------------------------------------------------------------------------
# Parameter checks
# --------------------------------------------------------------------------


def test_init_parameters_are_kept_and_untouched(truth):
    """Constructor parameters (init arrays included) are stored unchanged by
    fit."""
    X = truth.X["full"]
    init = _init_kwargs(truth, "full")
    saved = {k: v.copy() for k, v in init.items()}
    gm = GaussianMixture(
        n_components=3, tol=1e-4, n_init=1, max_iter=30, reg_covar=0.1, init_params="random", **init
    ).fit(X)
    assert (gm.n_components, gm.tol, gm.max_iter, gm.reg_covar, gm.init_params) == (3, 1e-4, 30, 0.1, "random")
    for k, v in saved.items():
        assert_array_equal(getattr(gm, k), v)
    assert gm.n_features_in_ == 3


def test_bad_weights_init(truth):
    """weights_init of the wrong shape, outside [0, 1] or not summing to 1
    raises ValueError."""
    X = truth.X["full"]
    with pytest.raises(ValueError, match=re.escape("The parameter 'weights' should have the shape of (3,)")):
        GaussianMixture(n_components=3, weights_init=np.full((3, 1), 1 / 3)).fit(X)
    with pytest.raises(ValueError, match=re.escape("(3,)")):
        GaussianMixture(n_components=3, weights_init=[0.5, 0.5]).fit(X)
    with pytest.raises(ValueError, match="weights"):
        GaussianMixture(n_components=3, weights_init=[1.4, -0.2, -0.2]).fit(X)
    with pytest.raises(ValueError, match="sum"):
        GaussianMixture(n_components=3, weights_init=[0.2, 0.2, 0.2]).fit(X)
    GaussianMixture(n_components=3, weights_init=truth.weights, random_state=0).fit(X)


def test_bad_means_init(truth):
    """means_init of the wrong shape raises ValueError."""
    X = truth.X["full"]
    for bad in (np.zeros((4, 3)), np.zeros((3, 2)), np.zeros(3)):
        with pytest.raises(ValueError, match="The parameter 'means' should have the shape of"):
            GaussianMixture(n_components=3, means_init=bad).fit(X)


@pytest.mark.parametrize("covariance_type", COV_TYPES)
def test_bad_precisions_init(truth, covariance_type):
    """precisions_init of the wrong shape, or not positive (definite), raises
    ValueError; a valid one fits."""
    X = truth.X[covariance_type]
    k, d = 3, 3
    wrong_shape = {
        "full": np.ones((k + 1, d, d)),
        "tied": np.ones((d + 1, d + 1)),
        "diag": np.ones((k + 1, d)),
        "spherical": np.ones(k + 1),
    }[covariance_type]
    gm = GaussianMixture(n_components=k, covariance_type=covariance_type, random_state=0)
    gm.set_params(precisions_init=wrong_shape)
    with pytest.raises(ValueError, match=f"The parameter '{covariance_type} precision' should have the shape of"):
        gm.fit(X)

    indefinite = np.stack([np.eye(d)] * k)
    indefinite[0, 0, 0] = -1.0
    not_positive = {
        "full": indefinite,
        "tied": indefinite[0],
        "diag": np.full((k, d), -1.0),
        "spherical": np.full(k, -1.0),
    }[covariance_type]
    gm.set_params(precisions_init=not_positive)
    with pytest.raises(ValueError, match="positive"):
        gm.fit(X)

    gm.set_params(precisions_init=truth.precisions[covariance_type]).fit(X)
    assert_array_equal(gm.precisions_init, truth.precisions[covariance_type])


@pytest.mark.parametrize(
    "params, match",
    [
        ({"covariance_type": "ful"}, "covariance_type"),
        ({"covariance_type": None}, "covariance_type"),
        ({"init_params": "kmeans++"}, "init_params"),
        ({"n_components": 0}, "n_components"),
        ({"n_init": 0}, "n_init"),
        ({"tol": -1.0}, "tol"),
        ({"reg_covar": -1e-6}, "reg_covar"),
    ],
)
def test_bad_constructor_parameters(params, match):
    """Invalid covariance_type, init_params, counts or tolerances raise
    ValueError naming the parameter."""
    X = np.random.RandomState(0).randn(20, 2)
    with pytest.raises(ValueError, match=match):
        GaussianMixture(**params).fit(X)


def test_more_components_than_samples():
    """n_components > n_samples raises ValueError; == n_samples is allowed."""
    X = np.random.RandomState(0).randn(5, 2)
    with pytest.raises(ValueError, match="n_samples >= n_components"):
        GaussianMixture(n_components=6).fit(X)
    GaussianMixture(n_components=5, random_state=0).fit(X)


def test_wrong_number_of_features_at_predict(truth):
    """Predicting on another number of features raises ValueError."""
    gm = GaussianMixture(n_components=3, random_state=0).fit(truth.X["full"])
    with pytest.raises(ValueError, match="features"):
        gm.predict(np.zeros((4, 2)))


# --------------------------------------------------------------------------
# Convergence warning
# --------------------------------------------------------------------------


@pytest.mark.parametrize("covariance_type", COV_TYPES)
def test_convergence_warning_when_max_iter_too_small(truth, covariance_type):
    """max_iter=1 with a tight tol warns ConvergenceWarning and leaves
    converged_ False, with every fitted attribute set."""
    X = truth.X[covariance_type]
    gm = GaussianMixture(
        n_components=3, covariance_type=covariance_type, max_iter=1, tol=1e-8, reg_covar=0, random_state=0
    )
    with pytest.warns(ConvergenceWarning, match="did not converge") as record:
        gm.fit(X)
    # scikit-learn's text exactly.
    assert [str(w.message) for w in record if w.category is ConvergenceWarning] == [
        "Best performing initialization did not converge. Try different init parameters, or increase max_iter, "
        "tol, or check for degenerate data."
    ]
    assert gm.converged_ is False
    assert gm.n_iter_ == 1 and len(gm.lower_bounds_) == 1
    for name in FITTED + ("lower_bound_",):
        assert hasattr(gm, name)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        gm.set_params(max_iter=300, tol=1e-3).fit(X)
    assert gm.converged_ is True


def test_poor_spherical_start_keeps_parameters():
    """A spherical start with very sharp components that does not converge in
    one iteration still sets every attribute (scikit-learn issue 18216)."""
    rng = np.random.RandomState(0)
    X = rng.uniform(size=(30, 3))
    means_init = rng.uniform(size=(6, 3))
    precisions_init = np.array([1e4, 1e4, 550.0, 200.0, 16.0, 85.0])
    weights_init = np.array([1, 1, 2, 2, 21, 3]) / 30.0
    gm = GaussianMixture(
        n_components=6,
        covariance_type="spherical",
        weights_init=weights_init,
        means_init=means_init,
        precisions_init=precisions_init,
        max_iter=1,
        random_state=0,
    )
    with pytest.warns(ConvergenceWarning):
        gm.fit(X)
    assert not gm.converged_
    for name in FITTED + ("n_iter_", "lower_bound_", "lower_bounds_"):
        assert hasattr(gm, name)


# --------------------------------------------------------------------------
# Input kinds and execution settings
# --------------------------------------------------------------------------


@pytest.mark.parametrize("covariance_type", COV_TYPES)
def test_float32_close_to_float64(truth, covariance_type):
    """float32 input fits and lands close to the float64 fit."""
    X = truth.X[covariance_type]
    kw = dict(n_components=3, covariance_type=covariance_type, random_state=0)
    g64 = GaussianMixture(**kw).fit(X)
    g32 = GaussianMixture(**kw).fit(X.astype(np.float32))
    assert g32.n_iter_ == g64.n_iter_
    assert_allclose(g32.lower_bound_, g64.lower_bound_, rtol=1e-5)
    for name in FITTED:
        assert_allclose(getattr(g32, name), getattr(g64, name), rtol=1e-4, atol=1e-5, err_msg=name)
    X32 = X.astype(np.float32)
    assert_array_equal(g32.predict(X32), g64.predict(X))
    assert_allclose(g32.score_samples(X32), g64.score_samples(X), rtol=1e-4, atol=1e-4)
    # float32 is preserved, as in scikit-learn
    for name in FITTED:
        assert getattr(g32, name).dtype == np.float32, name
    assert g32.predict_proba(X32).dtype == np.float32 and g32.score_samples(X32).dtype == np.float32


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.int16, np.uint8])
def test_integer_input_equals_float64(dtype):
    """Integer input gives bitwise the fit of the same values as float64."""
    rng = np.random.RandomState(0)
    X = np.vstack([rng.randn(100, 2) * 4 + 40, rng.randn(100, 2) * 4 + 90]).round().astype(dtype)
    a = GaussianMixture(n_components=2, random_state=0).fit(X)
    b = GaussianMixture(n_components=2, random_state=0).fit(X.astype(np.float64))
    for name in FITTED:
        assert_array_equal(getattr(a, name), getattr(b, name))
    assert a.lower_bound_ == b.lower_bound_
    assert_array_equal(a.predict(X), b.predict(X.astype(np.float64)))


@pytest.mark.parametrize("covariance_type", ["full", "spherical"])
def test_npy_path_and_memmap_equal_in_memory(tmp_path, truth, covariance_type):
    """A .npy path and a read-only memmap give bitwise the in-memory fit and
    predictions."""
    X = truth.X[covariance_type]
    path = tmp_path / "X.npy"
    np.save(path, X)
    kw = dict(n_components=3, covariance_type=covariance_type, random_state=0)
    ref = GaussianMixture(**kw).fit(X)
    for source in (str(path), path, np.load(path, mmap_mode="r")):
        gm = GaussianMixture(**kw).fit(source)
        for name in FITTED:
            assert_array_equal(getattr(gm, name), getattr(ref, name), err_msg=name)
        assert gm.lower_bounds_ == ref.lower_bounds_
        assert_array_equal(gm.predict(source), ref.predict(X))
        assert_array_equal(gm.score_samples(source), ref.score_samples(X))
    assert_array_equal(GaussianMixture(**kw).fit_predict(str(path)), ref.predict(X))


@pytest.fixture(scope="module")
def big3():
    """90,000 × 6 rows in three overlapping blobs: several blocks under 4MiB."""
    rng = np.random.RandomState(2)
    return np.vstack([rng.randn(30000, 6) + c for c in (0.0, 3.0, 6.0)])


@pytest.mark.parametrize("start", ["random_from_data", "given"])
@pytest.mark.parametrize("covariance_type", COV_TYPES)
def test_threads_and_memory_limit_do_not_change_results(big3, covariance_type, start):
    """n_jobs=1 vs 2 and memory_limit 4MiB (several blocks) vs 1GiB give
    bitwise identical parameters and predictions."""
    X = big3
    if start == "given":
        precisions = {
            "full": np.stack([np.eye(6)] * 3),
            "tied": np.eye(6),
            "diag": np.ones((3, 6)),
            "spherical": np.ones(3),
        }[covariance_type]
        kw = dict(
            weights_init=np.full(3, 1 / 3),
            means_init=np.array([[0.5] * 6, [2.5] * 6, [5.0] * 6]),
            precisions_init=precisions,
        )
    else:
        kw = dict(init_params=start)
    results = {}
    for limit in ("4MiB", "1GiB"):
        for n_jobs in (1, 2):
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                gm = GaussianMixture(
                    n_components=3,
                    covariance_type=covariance_type,
                    tol=1e-4,
                    random_state=0,
                    memory_limit=limit,
                    n_jobs=n_jobs,
                    **kw,
                ).fit(X)
            blocks = int(re.search(r"\((\d+) blocks per pass\)", gm.memory_plan_).group(1))
            results[limit, n_jobs] = (gm, blocks, gm.predict_proba(X[:5000]))
    assert results["4MiB", 1][1] > 1 == results["1GiB", 1][1]
    ref, _, ref_proba = results["1GiB", 1]
    for key, (gm, _, proba) in results.items():
        for name in FITTED:
            assert_array_equal(getattr(gm, name), getattr(ref, name), err_msg=f"{name} {key}")
        assert gm.lower_bounds_ == ref.lower_bounds_, key
        assert gm.n_iter_ == ref.n_iter_
        assert_array_equal(proba, ref_proba)


@pytest.mark.parametrize(
    "init_params",
    [
        "kmeans",
        "k-means++",
        "random",
        "random_from_data",
    ],
)
def test_memory_limit_never_changes_results(big3, init_params):
    """A fit under 6MiB (k-means++: its sample's values spilled to a scratch
    file) equals the 1GiB fit bitwise, without a warning, for every init."""
    kw = dict(n_components=3, init_params=init_params, tol=1e-4, random_state=0, n_jobs=1)
    ref = GaussianMixture(memory_limit="1GiB", **kw).fit(big3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        small = GaussianMixture(memory_limit="6MiB", **kw).fit(big3)
    if init_params == "k-means++":
        assert "rows in unnamed scratch files" in small.memory_plan_
    for name in FITTED:
        assert_array_equal(getattr(small, name), getattr(ref, name), err_msg=name)
    assert small.lower_bounds_ == ref.lower_bounds_


def test_clone_and_refit_same_result(truth):
    """A cloned estimator refits to the same parameters (fit keeps no hidden
    state beyond warm_start)."""
    X = truth.X["tied"]
    gm = GaussianMixture(n_components=3, covariance_type="tied", random_state=4).fit(X)
    again = clone(gm).fit(X)
    for name in FITTED:
        assert_array_equal(getattr(gm, name), getattr(again, name))


@pytest.mark.parametrize("covariance_type", ["full", "tied", "diag", "spherical"])
@pytest.mark.parametrize("limit", [None, "1MiB"])
def test_rows_of_zero_density_are_scored_as_scikit_learn_scores_them(covariance_type, limit):
    """Found by trying memfit: a finite row far from every component (an
    anomaly to score) made score_samples, predict_proba and predict raise.
    scikit-learn gives -inf, NaN probabilities and label 0; fit still
    refuses such rows (a component cannot be fitted to them)."""
    X = np.random.default_rng(0).standard_normal((3000, 40))
    kw = dict(n_components=30, covariance_type=covariance_type, random_state=0, max_iter=3)
    m = GaussianMixture(**kw, memory_limit=limit).fit(X)
    s = SkGaussianMixture(**kw).fit(X)
    rows = np.zeros((3, 40))
    rows[0, 0] = 1e160
    rows[2, 5] = -1e200
    scores = m.score_samples(rows)
    np.testing.assert_array_equal(scores[[0, 2]], s.score_samples(rows)[[0, 2]])
    assert np.isneginf(scores[[0, 2]]).all() and np.isfinite(scores[1])
    with pytest.warns(RuntimeWarning, match="2 rows of X have zero density"):
        proba = m.predict_proba(rows)
    assert np.isnan(proba[[0, 2]]).all() and np.isfinite(proba[1]).all()
    assert list(m.predict(rows)[[0, 2]]) == [0, 0] == list(s.predict(rows)[[0, 2]])
    assert m.score(rows) == -np.inf


def test_an_ill_conditioned_tied_covariance_is_named_as_such():
    """Found by trying memfit: the warning named "component 2" of a tied
    model, whose one covariance every component shares."""
    X = np.random.default_rng(0).standard_normal((2000, 3)).astype(np.float32)
    X[:, 2] = X[:, 0] * 1e-5 + 1
    with pytest.warns(UserWarning, match="^the tied covariance has a condition number"):
        GaussianMixture(3, covariance_type="tied", reg_covar=0, random_state=0).fit(X)


@pytest.mark.parametrize("covariance_type", ["full", "tied", "diag", "spherical"])
def test_a_float32_model_whose_variances_float32_cannot_hold_is_refused(covariance_type):
    # The engine's float64 variances of 1e-46 round to 0 in float32 (their
    # precisions to inf): scikit-learn, in float32, finds them not positive
    # definite. A model of zero covariances and infinite precisions came back.
    for scale in (1e-23, 1e-21):
        X = (np.random.RandomState(0).randn(100, 2) * scale).astype(np.float32)
        gm = GaussianMixture(2, covariance_type=covariance_type, reg_covar=0.0, random_state=0)
        with pytest.raises(ValueError, match="ill-defined empirical covariance.*float64 data instead of float32"):
            gm.fit(X)
    X = (np.random.RandomState(0).randn(100, 2) * 1e-16).astype(np.float32)
    gm = GaussianMixture(2, covariance_type=covariance_type, reg_covar=0.0, random_state=0).fit(X)
    assert np.isfinite(gm.precisions_).all() and gm.precisions_.dtype == np.float32


@pytest.mark.parametrize("covariance_type", ["full", "tied", "diag", "spherical"])
@pytest.mark.parametrize("memory_limit", [None, "40KiB"])
@pytest.mark.parametrize("offset", [0.0, 1000.0])
def test_a_component_without_responsibility_has_scikit_learns_mean_on_data_off_the_origin(covariance_type,
                                                                                          memory_limit, offset):
    """Data read relative to their column means (every value within a factor
    of 2 of its column's mean): a component left without responsibility got
    its mean at that shift, where scikit-learn's ``resp.T @ X / (N_k + 10 eps)``
    puts it at 0, and the fits parted (lower bounds 9e-5 apart after five
    iterations, predict swapped labels). The mean is now taken of the rows
    as given."""
    g = np.array([1.25, 1.375, 1.5, 1.625, 1.75])
    X = np.array([[a, b] for a in g for b in g] * 4) + offset  # column means exactly 1.5 + offset
    precisions = {"full": np.array([np.eye(2), np.eye(2) * 100]), "tied": np.eye(2),
                  "diag": np.array([[1.0, 1.0], [100.0, 100.0]]), "spherical": np.array([1.0, 100.0])}
    kw = dict(weights_init=[0.5, 0.5], means_init=[[1.5 + offset] * 2, [50.0 + 2 * offset] * 2],
              precisions_init=precisions[covariance_type], covariance_type=covariance_type, tol=0)
    for max_iter in (1, 5):
        ours = GaussianMixture(2, max_iter=max_iter, memory_limit=memory_limit, **kw).fit(X)
        ref = SkGaussianMixture(2, max_iter=max_iter, **kw).fit(X)
        assert_allclose(ours.means_, ref.means_, rtol=1e-12, atol=1e-12)
        assert_allclose(ours.covariances_, ref.covariances_, rtol=1e-6, atol=1e-12)
        assert_allclose(ours.weights_, ref.weights_, rtol=1e-9, atol=1e-20)
        # Off the origin scikit-learn's own sums round (memfit's are those at 0).
        assert ours.lower_bound_ == pytest.approx(ref.lower_bound_, rel=1e-12 if offset == 0 else 1e-8)
        Xt = np.array([[1.5 + offset] * 2, [0.0, 0.0]])
        assert_array_equal(ours.predict(Xt), ref.predict(Xt))


def test_a_non_finite_init_names_the_value_its_message_describes():
    """An init holding NaN and inf says "contains NaN" and now names the
    first NaN, as memfit names them in X; before, it named the first
    non-finite value, an inf (``means_init[0, 0] = inf``). The same for
    weights_init, precisions_init (np.eye(3) * np.inf is NaN off the
    diagonal), KMeans's init and sample_weight."""
    import memfit

    X = np.random.default_rng(0).normal(size=(40, 3))
    with np.errstate(invalid="ignore"):
        infinite_eye = np.stack([np.eye(3) * np.inf] * 2)
    cases = [
        (GaussianMixture(2, means_init=[[np.inf, np.nan, 0], [0, 0, 0]]), {},
         "Input contains NaN. memfit: means_init[0, 1] = nan"),
        (GaussianMixture(2, means_init=[[0, -np.inf, 0], [np.inf, 0, 0]]), {},
         "Input contains infinity or a value too large for dtype('float64'). memfit: means_init[0, 1] = -inf"),
        (GaussianMixture(2, precisions_init=infinite_eye), {},
         "Input contains NaN. memfit: precisions_init[0, 0, 1] = nan"),
        (GaussianMixture(2, weights_init=[np.inf, np.nan]), {}, "Input contains NaN. memfit: weights_init[1] = nan"),
        (memfit.KMeans(2, init=np.array([[np.inf, np.nan, 0], [0, 0, 0]]), n_init=1), {},
         "Input contains NaN. memfit: init[0, 1] = nan"),
        (memfit.KMeans(2, n_init=1), {"sample_weight": np.r_[np.inf, np.nan, np.ones(38)]},
         "Input sample_weight contains NaN. memfit: sample_weight[1] = nan; hint: weights must be finite"),
    ]
    for estimator, fit_params, message in cases:
        with pytest.raises(ValueError) as info:
            estimator.fit(X, **fit_params)
        assert str(info.value) == message
