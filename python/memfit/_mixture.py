"""Gaussian mixtures fitted by EM within a memory limit (scikit-learn's
``GaussianMixture`` API)."""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, DensityMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from . import _memfit
from ._validation import (
    check_data,
    check_float,
    check_int,
    check_memory_limit,
    check_n_jobs,
    check_sample_weight,
    emit_warnings,
    seed_from,
    small_array,
)

_COVARIANCE_TYPES = ("full", "tied", "diag", "spherical")
_INIT_PARAMS = ("kmeans", "k-means++", "random", "random_from_data")


def _param_shape(covariance_type, n_components, n_features):
    """scikit-learn's shape of ``covariances_`` / ``precisions_`` arrays."""
    return {
        "full": (n_components, n_features, n_features),
        "tied": (n_features, n_features),
        "diag": (n_components, n_features),
        "spherical": (n_components,),
    }[covariance_type]


def _as_matrix(a):
    """A stack of parameters as the engine reads it: all axes but the last
    are rows (a vector is a column)."""
    a = np.ascontiguousarray(a, dtype=np.float64)
    return a.reshape(-1, 1) if a.ndim == 1 else a.reshape(-1, a.shape[-1])


class GaussianMixture(DensityMixin, BaseEstimator):
    """Gaussian mixture fitted by expectation-maximisation on data larger
    than memory.

    A drop-in for :class:`sklearn.mixture.GaussianMixture` that streams X in
    row blocks within ``memory_limit``: each EM iteration is one fused pass
    (E-step log-densities by blocked GEMMs on precision Cholesky factors,
    log-sum-exp, responsibilities and the M-step's weighted sums in float64),
    so no ``(n_samples, n_components)`` or ``(n_samples, n_features)``
    temporary beyond one block is held, and X is never copied. Results are
    identical for any ``n_jobs`` and limit and agree with scikit-learn from
    the same initial parameters (Dempster, Laird & Rubin 1977; scikit-learn's
    parametrisation by precision Cholesky factors).

    Parameters
    ----------
    n_components : int, default=1
        Number of mixture components.
    covariance_type : {"full", "tied", "diag", "spherical"}, default="full"
        Covariance form.
    tol : float, default=1e-3
        EM stops when the lower bound (mean log-likelihood per sample)
        changes by less than ``tol``.
    reg_covar : float, default=1e-6
        Non-negative value added to the covariances' diagonal.
    max_iter : int, default=100
        EM iterations per initialisation.
    n_init : int, default=1
        Initialisations; the best lower bound is kept.
    init_params : {"kmeans", "k-means++", "random", "random_from_data"}, default="kmeans"
        How initial responsibilities are drawn.
    weights_init : array-like of shape (n_components,), default=None
        Initial weights (summing to 1).
    means_init : array-like of shape (n_components, n_features), default=None
        Initial means.
    precisions_init : array-like, default=None
        Initial precisions (inverse covariances), shaped as
        ``precisions_`` for the covariance type.
    random_state : int, RandomState instance or None, default=None
        Seed of every random choice (and of :meth:`sample`).
    warm_start : bool, default=False
        Start each fit from the last fit's parameters (one initialisation).
    verbose : int, default=0
        Print the phases and each EM iteration's lower bound.
    verbose_interval : int, default=10
        Accepted for compatibility (every iteration is printed).
    memory_limit : int, str or None, default=None
        Bytes every buffer of a fit or prediction must fit in (int, or a
        string such as ``"2GiB"``; ``None`` is half of the available memory).
        Labels returned by :meth:`fit_predict` count toward it; an in-memory
        X does not. A job that cannot fit raises ``MemoryError``.
    n_jobs : int or None, default=None
        Worker threads: ``None`` or -1 all cores, -2 all but one.

    Attributes
    ----------
    weights_ : ndarray of shape (n_components,)
    means_ : ndarray of shape (n_components, n_features)
    covariances_ : ndarray
        (n_components, n_features, n_features) for full, (n_features,
        n_features) tied, (n_components, n_features) diag, (n_components,)
        spherical. Parameters are float32 for float32 X (as scikit-learn's),
        else float64.
    precisions_ : ndarray
        Inverses of the covariances, same shapes.
    precisions_cholesky_ : ndarray
        Upper-triangular ``U`` with ``precision = U Uᵀ``, same shapes.
    converged_ : bool
    n_iter_ : int
    lower_bound_ : float
        Mean log-likelihood per sample of the best fit's last iteration.
    lower_bounds_ : list of float
        Lower bound of every iteration of the best fit.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
    memory_plan_ : str
        The plan of the last fit.

    Notes
    -----
    X may be an array-like, a ``numpy.memmap`` or a path to a ``.npy`` file
    (float64, float32, float16, uint8, int16, int32 or int64). float32 data
    are computed in float32 with float64 sums, and the fitted parameters,
    ``predict_proba`` and ``score_samples`` are float32; other dtypes give
    float64.
    Ctrl-C stops a fit within about a second (``KeyboardInterrupt``).

    Examples
    --------
    >>> import numpy as np
    >>> from memfit import GaussianMixture
    >>> X = np.array([[1, 2], [1, 4], [1, 0], [10, 2], [10, 4], [10, 0]], dtype=float)
    >>> gm = GaussianMixture(n_components=2, random_state=0).fit(X)
    >>> sorted(gm.means_[:, 0].round(3).tolist())
    [1.0, 10.0]
    """

    def __init__(
        self,
        n_components=1,
        *,
        covariance_type="full",
        tol=1e-3,
        reg_covar=1e-6,
        max_iter=100,
        n_init=1,
        init_params="kmeans",
        weights_init=None,
        means_init=None,
        precisions_init=None,
        random_state=None,
        warm_start=False,
        verbose=0,
        verbose_interval=10,
        memory_limit=None,
        n_jobs=None,
    ):
        self.n_components = n_components
        self.covariance_type = covariance_type
        self.tol = tol
        self.reg_covar = reg_covar
        self.max_iter = max_iter
        self.n_init = n_init
        self.init_params = init_params
        self.weights_init = weights_init
        self.means_init = means_init
        self.precisions_init = precisions_init
        self.random_state = random_state
        self.warm_start = warm_start
        self.verbose = verbose
        self.verbose_interval = verbose_interval
        self.memory_limit = memory_limit
        self.n_jobs = n_jobs

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = False
        return tags

    def _check_params(self, data):
        k = check_int(self.n_components, "n_components", 1)
        check_int(self.max_iter, "max_iter", 1)
        check_int(self.n_init, "n_init", 1)
        check_float(self.tol, "tol")
        check_float(self.reg_covar, "reg_covar")
        if self.covariance_type not in _COVARIANCE_TYPES:
            raise ValueError(
                f"The 'covariance_type' parameter must be one of {_COVARIANCE_TYPES}. Got {self.covariance_type!r} instead."
            )
        if self.init_params not in _INIT_PARAMS:
            raise ValueError(f"The 'init_params' parameter must be one of {_INIT_PARAMS}. Got {self.init_params!r} instead.")
        if data.n_samples < 2:
            raise ValueError(
                f"Found array with {data.n_samples} sample(s) while a minimum of 2 is required by GaussianMixture."
            )
        if data.n_samples < k:
            raise ValueError(
                f"Expected n_samples >= n_components but got n_components = {k}, n_samples = {data.n_samples}"
            )

    def _initial_parameters(self, d):
        """(weights, means, precisions matrix, are-Cholesky, n_init, previous
        lower bound) for the engine; a warm start continues the last fit."""
        k, t = int(self.n_components), self.covariance_type
        if self.warm_start and hasattr(self, "precisions_cholesky_"):
            fitted = (self.weights_.shape[0], self._fitted_covariance_type)
            if fitted != (k, t):
                raise ValueError(
                    f"warm_start=True continues the previous fit, which has n_components={fitted[0]} and "
                    f"covariance_type={fitted[1]!r}, but n_components={k}, covariance_type={t!r} are set; "
                    "hint: restore them, or set warm_start=False to fit from scratch"
                )
            return (
                np.ascontiguousarray(self.weights_, dtype=np.float64),
                np.ascontiguousarray(self.means_, dtype=np.float64),
                _as_matrix(self.precisions_cholesky_),
                True,
                1,
                self.lower_bound_,
            )
        weights = means = precisions = None
        if self.weights_init is not None:
            weights = small_array(self.weights_init, "weights_init")
            if weights.shape != (k,):
                raise ValueError(f"The parameter 'weights' should have the shape of ({k},), but got {weights.shape}")
        if self.means_init is not None:
            means = small_array(self.means_init, "means_init")
            if means.shape != (k, d):
                raise ValueError(f"The parameter 'means' should have the shape of ({k}, {d}), but got {means.shape}")
        if self.precisions_init is not None:
            want = _param_shape(t, k, d)
            p = small_array(self.precisions_init, "precisions_init")
            if p.shape != want:
                raise ValueError(
                    f"The parameter '{t} precision' should have the shape of {want}, but got {p.shape}"
                )
            if t in ("full", "tied"):
                stack = p.reshape(-1, d, d)
                if not np.allclose(stack, np.swapaxes(stack, 1, 2), rtol=1e-10, atol=0):
                    raise ValueError(f"'{t} precision' should be symmetric, positive-definite")
            precisions = _as_matrix(p)
        return weights, means, precisions, False, int(self.n_init), None

    def _fit(self, X, sample_weight, want_labels):
        data = check_data(X, self, reset=not (self.warm_start and hasattr(self, "precisions_cholesky_")))
        self._check_params(data)
        w = check_sample_weight(sample_weight, data)
        weights, means, precisions, cholesky, n_init, lower_bound = self._initial_parameters(data.n_features)
        labels = np.empty(data.n_samples, dtype=np.int32) if want_labels else None
        r = _memfit.gmm_fit(
            data.engine,
            w,
            int(self.n_components),
            self.covariance_type,
            float(self.tol),
            float(self.reg_covar),
            int(self.max_iter),
            n_init,
            self.init_params,
            weights,
            means,
            precisions,
            cholesky,
            lower_bound,
            seed_from(self.random_state),
            check_memory_limit(self.memory_limit),
            check_n_jobs(self.n_jobs),
            data.float32,
            labels,
            bool(self.verbose),
        )
        emit_warnings(r["warnings"], stacklevel=4)
        # float32 data keep float32 parameters, as scikit-learn's; the
        # engine's float64 values are rounded once.
        dt = data.out_dtype
        self.weights_ = r["weights"].astype(dt, copy=False)
        self.means_ = r["means"].astype(dt, copy=False)
        self.covariances_ = r["covariances"].astype(dt, copy=False)
        self.precisions_cholesky_ = r["precisions_cholesky"].astype(dt, copy=False)
        self.precisions_ = self._precisions_from_cholesky(self.precisions_cholesky_)
        self.converged_ = bool(r["converged"])
        self.n_iter_ = int(r["n_iter"])
        self.lower_bound_ = float(r["lower_bound"])
        self.lower_bounds_ = list(r["lower_bounds"])
        self.memory_plan_ = r["plan"]
        self._fitted_covariance_type = self.covariance_type
        return labels

    def _precisions_from_cholesky(self, u):
        if self.covariance_type == "full":
            return np.einsum("kij,klj->kil", u, u)
        if self.covariance_type == "tied":
            return u @ u.T
        return u**2

    def fit(self, X, y=None, sample_weight=None):
        """Estimate the parameters by EM (``n_init`` times, keeping the best).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), numpy.memmap or path to a .npy file
            Training data.
        y : Ignored
        sample_weight : array-like of shape (n_samples,), scalar, path or None, default=None
            Non-negative weight of each row (an extension over
            scikit-learn: integer weights equal repeated rows).

        Returns
        -------
        self : GaussianMixture

        Raises
        ------
        ValueError
            Bad parameters or data, or a covariance that is not positive
            definite (raise ``reg_covar``).
        MemoryError
            The job cannot fit ``memory_limit``.
        OSError
            A path that cannot be read.
        """
        self._fit(X, sample_weight, want_labels=False)
        return self

    def fit_predict(self, X, y=None, sample_weight=None):
        """Fit, then return the most probable component of each row (from
        the final E-step, so equal to ``predict(X)``).

        Returns
        -------
        labels : ndarray of shape (n_samples,), dtype int32
        """
        return self._fit(X, sample_weight, want_labels=True)

    def _e_pass(self, X, labels=False, proba=False, log_likelihood=False):
        check_is_fitted(self)
        data = check_data(X, self, reset=False)
        n, k = data.n_samples, self.weights_.shape[0]
        out_l = np.empty(n, dtype=np.int32) if labels else None
        out_p = np.empty((n, k), dtype=np.float64) if proba else None
        out_q = np.empty(n, dtype=np.float64) if log_likelihood else None
        score = _memfit.gmm_predict(
            data.engine,
            self.covariance_type,
            np.ascontiguousarray(self.weights_, dtype=np.float64),
            np.ascontiguousarray(self.means_, dtype=np.float64),
            _as_matrix(self.precisions_cholesky_),
            check_memory_limit(self.memory_limit),
            check_n_jobs(self.n_jobs),
            data.float32,
            out_l,
            out_p,
            out_q,
        )
        if data.float32 and self.means_.dtype == np.float32:
            # float32 results for float32 data on a float32 model, as scikit-learn's.
            out_p = None if out_p is None else out_p.astype(np.float32)
            out_q = None if out_q is None else out_q.astype(np.float32)
        return data, score, out_l, out_p, out_q

    def predict(self, X):
        """Most probable component of each row.

        Returns
        -------
        labels : ndarray of shape (n_samples,), dtype int32
        """
        return self._e_pass(X, labels=True)[2]

    def predict_proba(self, X):
        """Posterior probability of each component for each row.

        Returns
        -------
        resp : ndarray of shape (n_samples, n_components), float32 for float32 X, else float64
        """
        return self._e_pass(X, proba=True)[3]

    def score_samples(self, X):
        """Log-likelihood ``log p(x_i)`` of each row under the model.

        Returns
        -------
        log_prob : ndarray of shape (n_samples,), float32 for float32 X, else float64
        """
        return self._e_pass(X, log_likelihood=True)[4]

    def score(self, X, y=None):
        """Mean log-likelihood per sample of X (higher is better).

        Returns
        -------
        log_likelihood : float
        """
        return float(self._e_pass(X)[1])

    def _n_parameters(self):
        """Free parameters: means, covariances and ``n_components - 1`` weights."""
        k, d = self.means_.shape
        cov = {"full": k * d * (d + 1) / 2.0, "tied": d * (d + 1) / 2.0, "diag": k * d, "spherical": k}
        return int(cov[self.covariance_type] + k * d + k - 1)

    def bic(self, X):
        """Bayesian information criterion ``-2 log L + p ln n`` on X (lower is better).

        Returns
        -------
        bic : float
        """
        data, score, *_ = self._e_pass(X)
        return float(-2.0 * score * data.n_samples + self._n_parameters() * np.log(data.n_samples))

    def aic(self, X):
        """Akaike information criterion ``-2 log L + 2 p`` on X (lower is better).

        Returns
        -------
        aic : float
        """
        data, score, *_ = self._e_pass(X)
        return float(-2.0 * score * data.n_samples + 2.0 * self._n_parameters())

    def sample(self, n_samples=1):
        """Draw rows from the fitted mixture.

        Component counts are multinomial in ``weights_``; rows of a
        component are ``mean + z Lᵀ`` with ``L`` the covariance's Cholesky
        factor (full, tied) or ``mean + z * sqrt(var)`` (diag, spherical).

        Parameters
        ----------
        n_samples : int, default=1

        Returns
        -------
        X : ndarray of shape (n_samples, n_features)
        y : ndarray of shape (n_samples,)
            Component of each row, in ascending order.
        """
        check_is_fitted(self)
        n_samples = check_int(n_samples, "n_samples", 1)
        rng = check_random_state(self.random_state)
        k, d = self.means_.shape
        counts = rng.multinomial(n_samples, self.weights_)
        parts = []
        for c, m in enumerate(counts):
            z = rng.standard_normal(size=(m, d))
            if self.covariance_type in ("full", "tied"):
                cov = self.covariances_[c] if self.covariance_type == "full" else self.covariances_
                parts.append(self.means_[c] + z @ np.linalg.cholesky(cov).T)
            elif self.covariance_type == "diag":
                parts.append(self.means_[c] + z * np.sqrt(self.covariances_[c]))
            else:
                parts.append(self.means_[c] + z * np.sqrt(self.covariances_[c]))
        return np.vstack(parts), np.repeat(np.arange(k), counts)
