"""Gaussian mixtures fitted by EM within a memory limit (scikit-learn's
``GaussianMixture`` API)."""

from __future__ import annotations

import copy
import errno
import os
import shutil
import tempfile
import uuid
import warnings
import weakref
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, DensityMixin, _fit_context
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from . import _memfit
from ._options import check_device, check_memory_limit, check_n_jobs, check_scratch_dir, engine_count
from ._validation import (
    c_float64,
    on_cluster,
    check_data,
    refuse_strings,
    check_sample_weight,
    emit_warnings,
    seed_from,
    sklearn_messages,
    features_kept_on_failure,
    checked,
    finite_or_checked,
    small_array,
)


class _ParamsRef:
    """The model folder of parameters too large for the memory limit, by
    path: what a copy sent to Dask tasks holds (each task reads the
    parameters from the folder a group at a time, so the task graph never
    carries them). A task copy made in this process keeps the folder's
    owner alive (``owner``): a lazy result outlives the estimator that
    made it, or its next fit; pickled, it is the path alone."""

    _owner = None

    def __init__(self, path, owner=None):
        self.path = path
        self._owner = owner

    def __getstate__(self):
        return {"path": self.path}

    def file(self, name):
        return os.path.join(self.path, name + ".npy")


class _ParamsDir(_ParamsRef):
    """The model folder holding the parameters of a fit too large for its
    memory limit (plus ``precisions.npy``), removed when the estimator that
    owns it drops it. Its name is chosen before the fit; the engine creates
    it only at the end, so a fit killed earlier leaves nothing behind.

    Its name, ``memfit-gmm-HOST-PID-HEX``, says which process owns it: a
    folder left by a process of this host that was killed (SIGKILL skips
    the removal) is removed when the next one is chosen in the same place.
    """

    def __init__(self, scratch_dir):
        base = tempfile.gettempdir() if scratch_dir is None else scratch_dir
        _remove_orphans(base)
        name = f"{_PREFIX}{_host()}-{os.getpid()}-{uuid.uuid4().hex}"
        super().__init__(os.path.join(base, name))
        self._remove = weakref.finalize(self, shutil.rmtree, self.path, True)

    def remove(self):
        self._remove()


_PREFIX = "memfit-gmm-"


def _host() -> str:
    """This host's name as a folder name may hold it (no ``-``, no ``/``)."""
    return "".join(c if c.isalnum() else "_" for c in os.uname().nodename) or "host"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        return True
    return True


def _remove_orphans(base) -> None:
    """Removes model folders in ``base`` owned by processes of this host
    that no longer run (folders of other hosts, and of live processes, are
    left alone)."""
    mine = f"{_PREFIX}{_host()}-"
    try:
        names = os.listdir(base)
    except OSError:
        return
    for name in names:
        if not name.startswith(mine):
            continue
        pid = name[len(mine) :].split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(os.path.join(base, name), ignore_errors=True)


class _Verbose:
    """Prints scikit-learn's ``GaussianMixture`` verbose lines
    (``BaseMixture._print_verbose_msg_*``) from the engine's progress events:
    "Initialization i" per initialisation, "  Iteration n" every
    ``interval`` iterations and "Initialization converged." (or "did not
    converge.") at its end; with ``verbose >= 2`` also time lapses, the
    change of the lower bound and the final lower bound. Call
    :meth:`close` once the fit returned."""

    def __init__(self, verbose, interval, tol, n_init, max_iter):
        self.verbose, self.interval, self.tol = verbose, interval, tol
        self.n_init, self.max_iter = n_init, max_iter
        self.run = None
        self.last = (0.0, 0.0, 0.0)  # time, lower bound, change of the latest iteration

    def _begin(self, run):
        print(f"Initialization {run}")
        self.run = run
        self.init_time = self.iter_time = self.last[0]

    def _end(self):
        t, lower_bound, change = self.last
        status = "converged" if abs(change) < self.tol else "did not converge"
        if self.verbose == 1:
            print(f"Initialization {status}.")
        else:
            print(f"Initialization {status}. time lapse {t - self.init_time:.5f}s\t lower bound {lower_bound:.5f}.")

    def __call__(self, event):
        if event[0] != "em_iteration":
            return
        _, run, iteration, _, lower_bound, change, t = event
        if run != self.run:
            if self.run is not None:
                self._end()
            self._begin(run)
        self.last = (t, lower_bound, change)
        if iteration % self.interval == 0:
            if self.verbose == 1:
                print(f"  Iteration {iteration}")
            else:
                print(f"  Iteration {iteration}\t time lapse {t - self.iter_time:.5f}s\t ll change {change:.5f}")
                self.iter_time = t

    def close(self):
        """Ends the last initialisation (without iterations, prints each
        initialisation's line only, as scikit-learn)."""
        if self.max_iter == 0:
            for run in range(self.n_init):
                print(f"Initialization {run}")
        elif self.run is not None:
            self._end()



def _param_shape(covariance_type, n_components, n_features):
    """scikit-learn's shape of ``covariances_`` / ``precisions_`` arrays."""
    return {
        "full": (n_components, n_features, n_features),
        "tied": (n_features, n_features),
        "diag": (n_components, n_features),
        "spherical": (n_components,),
    }[covariance_type]


#: scikit-learn's sentence when the best initialisation did not converge.
_NOT_CONVERGED = (
    "Best performing initialization did not converge. Try different init parameters, or increase max_iter, tol, "
    "or check for degenerate data."
)


def _as_matrix(a):
    """A stack of parameters as the engine reads it: all axes but the last
    are rows (a vector is a column)."""
    a = c_float64(a)
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
    identical for any ``n_jobs`` and limit, also when a limit below the
    components' parameters fits them in groups (see ``scratch_dir``): each
    row's normaliser, label and responsibilities are then computed group by
    group with the arithmetic of the fit in memory, in its order, at the
    cost of more passes over X (``memory_plan_`` shows them). Results agree
    with scikit-learn from
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
        Non-negative value added to the covariances' diagonal. With 0, a
        fit fails (ValueError) when a covariance is not positive definite:
        a component on identical rows, or one whose every responsibility is
        below 1e-32 (rows the M-step skips), has variance exactly 0, unless
        scikit-learn's ``10 ε`` floor on ``N_k`` moves its mean off the rows
        (a few rows: ``means_`` is ``Σ r x / (N_k + 10 ε)``), when the
        variance is that offset squared (about 1e-31 for values near 1), as
        scikit-learn's ``X - means_`` defines it. There scikit-learn's fit
        may go on with a variance of rounding size (its diag and spherical
        variances are one-pass differences) or one made of those tiny
        responsibilities, or fail. A tiny positive variance is fitted.
    max_iter : int, default=100
        EM iterations per initialisation. With 0, no iteration runs and the
        fit returns the (last) initialisation, as scikit-learn's: the
        initial parameters, ``n_iter_ = 0``, ``lower_bound_ = -inf``,
        ``lower_bounds_ = []``, ``converged_ = False`` and no warning.
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
        Print scikit-learn's lines: "Initialization i" per initialisation,
        "  Iteration n" every ``verbose_interval`` iterations and
        "Initialization converged." (or "did not converge.") at its end;
        ``verbose >= 2`` adds time lapses, the lower bound's change and the
        final lower bound.
    verbose_interval : int, default=10
        Iterations between two iteration lines.
    memory_limit : int, str or None, default=None
        Bytes every buffer of a fit or prediction must fit in (int, or a
        string such as ``"2GiB"``; ``None`` is half of the memory available
        to this process, divided by the number of workers when the process
        is one of joblib's loky workers, as for :class:`memfit.KMeans`).
        Labels returned by :meth:`fit_predict` count toward it; an in-memory
        X does not. A job that cannot fit raises ``MemoryError``.
    n_jobs : int or None, default=None
        Worker threads: ``None`` the CPUs this process may use, at most
        ``OMP_NUM_THREADS`` and a ``threadpoolctl`` limit (as for
        :class:`memfit.KMeans`); -1 all those CPUs, -2 all but one.
    scratch_dir : str, path or None, default=None
        Folder for the scratch files of a fit whose components' parameters
        do not fit ``memory_limit`` together (``None``: the system's
        temporary folder, ``TMPDIR``). Such a fit processes the components
        in groups, keeping their covariances and factors in unnamed scratch
        files (which vanish when the fit ends, however it ends), and its
        fitted ``covariances_``, ``precisions_cholesky_`` and
        ``precisions_`` (float32 for float32 X, else float64, as in memory)
        are, for full covariances, read-only ``numpy.memmap`` arrays of
        ``.npy`` files in a temporary folder there, removed with the estimator (``predict``,
        ``score_samples`` and warm starts read the factors from those files,
        so assigning new arrays to these attributes changes nothing: refit
        instead). ``memory_plan_`` shows the groups and the bytes on disk.
    device : str, default="cpu"
        Where the kernels run, as for :class:`memfit.KMeans`: ``"cpu"``,
        ``"cuda"`` or ``"cuda:N"``. On a device the E-step's log-densities
        are computed there (one thread per row and component, in float64;
        the CPU's to rounding, not bit for bit: lower bounds agreed to
        1.9e-16 relative in float64 on an H200) and the responsibilities
        and M-step on the host. A
        mixture held in component groups, or a fit on a Dask cluster, raises
        ``RuntimeError`` before any work.
    device_memory_limit : int, str or None, default=None
        Bytes of device memory a CUDA job may use (``None``: 90 % of the
        device's memory), as for :class:`memfit.KMeans`.

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
    (any dtype of :data:`memfit.array.DTYPES`: bool, integers, floats). float32 data
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

    _parameter_constraints: dict = {
        # scikit-learn 1.9's GaussianMixture constraints (same errors, same
        # messages).
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0.0, None, closed="left")],
        "reg_covar": [Interval(Real, 0.0, None, closed="left")],
        "max_iter": [Interval(Integral, 0, None, closed="left")],
        "n_init": [Interval(Integral, 1, None, closed="left")],
        "init_params": [StrOptions({"kmeans", "random", "random_from_data", "k-means++"})],
        "random_state": ["random_state"],
        "warm_start": ["boolean"],
        "verbose": ["verbose"],
        "verbose_interval": [Interval(Integral, 1, None, closed="left")],
        "covariance_type": [StrOptions({"full", "tied", "diag", "spherical"})],
        "weights_init": ["array-like", None],
        "means_init": ["array-like", None],
        "precisions_init": ["array-like", None],
        # memfit's own, checked when used.
        "memory_limit": "no_validation",
        "n_jobs": "no_validation",
        "scratch_dir": "no_validation",
        "device": "no_validation",
        "device_memory_limit": "no_validation",
    }

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
        scratch_dir=None,
        device="cpu",
        device_memory_limit=None,
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
        self.scratch_dir = scratch_dir
        self.device = device
        self.device_memory_limit = device_memory_limit

    def __getstate__(self):
        # Parameters on disk pickle as arrays; the folder stays with this
        # object (a task's copy keeps its path, see _task_copy).
        # A copy: object.__getstate__ returns the instance's own __dict__.
        state = dict(super().__getstate__())
        if isinstance(state.get("_params_dir"), _ParamsDir):
            del state["_params_dir"]
        return state

    def _task_copy(self):
        """A copy for Dask tasks (see ``memfit._dask.DaskData.map_estimator``):
        parameters on disk travel as their folder's path, which the tasks
        read a group at a time, not as arrays in the task graph."""
        fitted = copy.copy(self)
        on_disk = self._on_disk()
        if on_disk is not None:
            fitted._params_dir = _ParamsRef(on_disk.path, owner=on_disk)
            for name in ("covariances_", "precisions_", "precisions_cholesky_"):
                fitted.__dict__.pop(name, None)
        return fitted

    def _on_disk(self):
        """The folder of parameters kept on disk, or None."""
        return getattr(self, "_params_dir", None)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = False
        return tags

    def _check_params(self, data):
        if isinstance(self.n_components, bool):
            # What scikit-learn's compiled code raises (its validation lets a bool pass as an int).
            raise TypeError("an integer is required")
        if data.n_samples < self.n_components:
            raise ValueError(
                f"Expected n_samples >= n_components but got n_components = {self.n_components}, "
                f"n_samples = {data.n_samples}"
            )

    def _initial_parameters(self, d):
        """(weights, means, precisions matrix, are-Cholesky, n_init, previous
        lower bound) for the engine; a warm start continues the last fit."""
        k, t = int(self.n_components), self.covariance_type
        # scikit-learn checks the *_init parameters on every fit, a warm
        # one too (which then does not use them).
        weights, means, precisions = self._checked_inits(k, t, d)
        if self.warm_start and hasattr(self, "precisions_cholesky_"):
            fitted = (self.weights_.shape[0], self._fitted_covariance_type)
            if fitted != (k, t):
                raise ValueError(
                    f"warm_start=True continues the previous fit, which has n_components={fitted[0]} and "
                    f"covariance_type={fitted[1]!r}, but n_components={k}, covariance_type={t!r} are set; "
                    "hint: restore them, or set warm_start=False to fit from scratch"
                )
            return (
                c_float64(self.weights_),
                c_float64(self.means_),
                _as_matrix(self.precisions_cholesky_),
                True,
                1,
                self.lower_bound_,
            )
        return weights, means, precisions, False, int(self.n_init), None

    def _checked_inits(self, k, t, d):
        """(weights, means, precisions matrix) of the ``*_init`` parameters
        (None where not given), with the checks and messages of
        scikit-learn's ``_check_weights``, ``_check_means`` and
        ``_check_precisions``."""
        weights = means = precisions = None
        if self.weights_init is not None:
            weights = small_array(self.weights_init, "weights_init", allow_nd=False)
            if weights.shape != (k,):
                raise ValueError(f"The parameter 'weights' should have the shape of ({k},), but got {weights.shape}")
            if np.any(weights < 0.0) or np.any(weights > 1.0):
                # scikit-learn prints the minimum as "max value" and the maximum as "min value".
                raise ValueError(
                    "The parameter 'weights' should be in the range [0, 1], but got max value "
                    f"{weights.min():.5f}, min value {weights.max():.5f}"
                )
            atol = 1e-6 if np.asarray(self.weights_init).dtype == np.float32 else 1e-8
            if not np.allclose(abs(1.0 - weights.sum()), 0.0, atol=atol):
                raise ValueError(
                    f"The parameter 'weights' should be normalized, but got sum(weights) = {weights.sum():.5f}"
                )
        if self.means_init is not None:
            means = small_array(self.means_init, "means_init", allow_nd=False)
            if means.shape != (k, d):
                raise ValueError(f"The parameter 'means' should have the shape of ({k}, {d}), but got {means.shape}")
        if self.precisions_init is not None:
            want = _param_shape(t, k, d)
            p = small_array(self.precisions_init, "precisions_init", allow_nd=t == "full")
            if p.shape != want:
                raise ValueError(f"The parameter '{t} precision' should have the shape of {want}, but got {p.shape}")
            if t in ("full", "tied"):
                for m in p.reshape(-1, d, d):
                    if not (np.allclose(m, m.T) and np.all(np.linalg.eigvalsh(m) > 0.0)):
                        raise ValueError(f"'{t} precision' should be symmetric, positive-definite")
            elif np.any(p <= 0.0):
                raise ValueError(f"'{t} precision' should be positive")
            precisions = _as_matrix(p)
        return weights, means, precisions

    def _fit(self, X, sample_weight, want_labels, client=None):
        # Checked before the data are read: a bad folder fails at once.
        scratch = check_scratch_dir(self.scratch_dir)
        data = check_data(
            on_cluster(X, client),
            self,
            reset=not (self.warm_start and hasattr(self, "precisions_cholesky_")),
            min_samples=2,
        )
        self._check_params(data)
        w = check_sample_weight(sample_weight, data)
        device = check_device(self, data, "gmm", self.n_components, w is not None, self.covariance_type)
        weights, means, precisions, cholesky, n_init, lower_bound = self._initial_parameters(data.n_features)
        limit = check_memory_limit(self.memory_limit)
        labels = np.empty(data.n_samples, dtype=np.int64) if want_labels and data.dask is None else None
        verbose = (
            _Verbose(self.verbose, self.verbose_interval, self.tol, n_init, self.max_iter) if self.verbose else None
        )
        # A warm start hands the engine the fitted model, which it continues
        # (from its folder when its parameters are on disk).
        if cholesky and self._on_disk() is not None:
            init = dict(warm_model_dir=self._on_disk().path)
        elif cholesky:
            init = dict(warm_weights=weights, warm_means=means, warm_precisions_cholesky=precisions,
                        warm_lower_bound=lower_bound)
        else:
            init = dict(weights_init=weights, means_init=means, precisions_init=precisions)
        params_dir = _ParamsDir(scratch)
        # As scikit-learn: a random_state is drawn from only when the start
        # needs it (not for a warm start or all three initial parameters).
        seeded = not cholesky and any(p is None for p in (weights, means, precisions))
        params = dict(
            n_components=int(self.n_components),
            covariance_type=self.covariance_type,
            tol=float(self.tol),
            reg_covar=float(self.reg_covar),
            max_iter=engine_count(self.max_iter),
            n_init=engine_count(n_init),
            init_params=self.init_params,
            random_state=seed_from(self.random_state) if seeded else 0,
            float32=data.float32,
            **init,
        )
        cluster = {} if data.dask is None else data.dask.fit_kwargs(client, w, limit, _memfit.gmm_fit, params)
        try:
            r = checked(self, data, _memfit.gmm_fit)(
                data.engine,
                sample_weight=w,
                memory_limit=limit,
                n_jobs=check_n_jobs(self.n_jobs),
                labels=labels,
                progress=verbose,
                scratch_dir=scratch,
                model_dir=params_dir.path,
                device=device,
                **params,
                **cluster,
            )
        except BaseException:
            params_dir.remove()
            raise
        if verbose:
            verbose.close()
        if not r["converged"] and self.max_iter > 0:
            # scikit-learn's text exactly (callers compare it).
            warnings.warn(_NOT_CONVERGED, ConvergenceWarning, stacklevel=4)
        # The warning above is scikit-learn's; the engine's others follow.
        emit_warnings(r["warnings"], skip=("not_converged",), stacklevel=4)
        # float32 data keep float32 parameters, as scikit-learn's; the
        # engine's float64 values are rounded once.
        dt = data.out_dtype
        self.weights_ = r["weights"].astype(dt, copy=False)
        self.means_ = r["means"].astype(dt, copy=False)
        if "model_dir" in r:
            # Parameters larger than the limit, written by the engine (the
            # precisions too): memmaps of its .npy files, float32 for
            # float32 data (the values of the in-memory fit's attributes).
            mmap = "r" if self.covariance_type == "full" else None
            load = lambda n: np.load(params_dir.file(n), mmap_mode=mmap)  # noqa: E731
            self.covariances_ = load("covariances")
            self.precisions_cholesky_ = load("precisions_cholesky")
            self.precisions_ = load("precisions")
            self._params_dir = params_dir
        else:
            params_dir.remove()
            self.__dict__.pop("_params_dir", None)
            self.covariances_ = r["covariances"].astype(dt, copy=False)
            self.precisions_cholesky_ = r["precisions_cholesky"].astype(dt, copy=False)
            self.precisions_ = r["precisions"].astype(dt, copy=False)
        self.converged_ = bool(r["converged"])
        self.n_iter_ = int(r["n_iter"])
        # NumPy scalars of X's dtype, as scikit-learn's (its bounds are NumPy
        # means); with max_iter=0 its initial -np.inf, a Python float.
        self.lower_bound_ = -np.inf if self.max_iter == 0 else dt.type(r["lower_bound"])
        self.lower_bounds_ = [dt.type(b) for b in r["lower_bounds"]]
        self.memory_plan_ = r["plan_text"] if device is None else f"{r['plan_text']}\n{device.plan}"
        self._fitted_covariance_type = self.covariance_type
        if want_labels and data.dask is not None:
            return self._dask_rows(data, "labels")
        return labels

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None, sample_weight=None, *, client=None):
        """Estimate the parameters by EM (``n_init`` times, keeping the best).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), numpy.memmap, path to a .npy file or dask.array.Array
            Training data.
        y : Ignored
        sample_weight : array-like of shape (n_samples,), scalar, path or None, default=None
            Non-negative weight of each row (an extension over
            scikit-learn: integer weights equal repeated rows).
        client : distributed.Client, optional
            For a Dask array X: the cluster the EM iterations run on
            (default: the active client, if any; else X's chunks are read in
            this process). See the README, "Dask".

        Returns
        -------
        self : GaussianMixture

        Raises
        ------
        ValueError
            Bad parameters (scikit-learn's ``InvalidParameterError``, a
            ``ValueError``) or data, or a covariance that is not positive
            definite (raise ``reg_covar``), with scikit-learn's messages.
        MemoryError
            The job cannot fit ``memory_limit``.
        OSError
            A path that cannot be read.
        """
        with sklearn_messages(self), features_kept_on_failure(self):
            self._fit(X, sample_weight, want_labels=False, client=client)
        return self

    @_fit_context(prefer_skip_nested_validation=True)
    def fit_predict(self, X, y=None, sample_weight=None, *, client=None):
        """Fit, then return the most probable component of each row (from
        the final E-step, so equal to ``predict(X)``).

        Returns
        -------
        labels : ndarray of shape (n_samples,), dtype int64
            A lazy dask.array.Array with X's row chunks when X is a Dask array.
            As scikit-learn's.
        """
        with sklearn_messages(self), features_kept_on_failure(self):
            return self._fit(X, sample_weight, want_labels=True, client=client)

    def _dask_rows(self, data, what):
        """Per-row ``what`` (labels, proba or log_likelihood) of a Dask
        input: a lazy Dask array."""
        k = self.weights_.shape[0]
        f32 = data.float32 and self.means_.dtype == np.float32
        real = np.float32 if f32 else np.float64
        if what == "labels":
            return data.dask.map_estimator(self, "predict", None, np.int64)
        if what == "proba":
            return data.dask.map_estimator(self, "predict_proba", k, real)
        return data.dask.map_estimator(self, "score_samples", None, real)

    def _e_pass(self, X, labels=False, proba=False, log_likelihood=False):
        check_is_fitted(self)
        refuse_strings(X)
        data = check_data(X, self, reset=False)
        device = check_device(self, data, "gmm", self.weights_.shape[0], False, self.covariance_type)
        if data.dask is not None and (labels or proba or log_likelihood):
            what = "labels" if labels else "proba" if proba else "log_likelihood"
            out = self._dask_rows(data, what)
            return None, out if labels else None, out if proba else None, out if log_likelihood else None
        n, k = data.n_samples, self.weights_.shape[0]
        self._check_fitted_shapes()
        out_l = np.empty(n, dtype=np.int64) if labels else None
        out_p = np.empty((n, k), dtype=np.float64) if proba else None
        out_q = np.empty(n, dtype=np.float64) if log_likelihood else None
        limit = check_memory_limit(self.memory_limit)
        # score, bic, aic of a Dask X: one task per chunk on the active client.
        cluster = {} if data.dask is None else data.dask.fit_kwargs(None, None, limit)
        on_disk = self._on_disk()
        if on_disk is not None and not os.path.isdir(on_disk.path):
            # A Dask task's copy (see _task_copy) on a machine without the folder.
            raise FileNotFoundError(
                errno.ENOENT,
                "memfit: the mixture's parameters are on disk (they exceed memory_limit) in a folder this Dask "
                "worker cannot read; fit with a scratch_dir that every worker shares",
                on_disk.path,
            )
        with finite_or_checked(self, data):
            scores = _memfit.gmm_predict(
                data.engine,
                covariance_type=self.covariance_type,
                weights=c_float64(self.weights_),
                means=c_float64(self.means_),
                # Parameters on disk are read from their folder, a group at a time.
                precisions_cholesky=(
                    on_disk.file("precisions_cholesky") if on_disk is not None else _as_matrix(self.precisions_cholesky_)
                ),
                model_dir=None if on_disk is None else on_disk.path,
                memory_limit=limit,
                n_jobs=check_n_jobs(self.n_jobs),
                # float32 X on a float64 model: computed in float64, as
                # scikit-learn's NumPy promotes it.
                float32=data.float32 and self.means_.dtype == np.float32,
                device=device,
                labels=out_l,
                proba=out_p,
                log_likelihood=out_q,
                **cluster,
            )
        if data.float32 and self.means_.dtype == np.float32:
            # float32 results for float32 data on a float32 model, as scikit-learn's.
            out_p = None if out_p is None else out_p.astype(np.float32)
            out_q = None if out_q is None else out_q.astype(np.float32)
        return scores, out_l, out_p, out_q

    def _check_fitted_shapes(self):
        """The fitted attributes fit together for ``covariance_type`` (which
        ``set_params`` may have changed since the fit)."""
        w, m = np.shape(self.weights_), np.shape(self.means_)
        p = np.shape(self.precisions_cholesky_) if self._on_disk() is None else None
        want = _param_shape(self.covariance_type, w[0], m[-1]) if len(w) == 1 and len(m) == 2 else None
        if want is None or m[0] != w[0] or (p is not None and p != want):
            need = "means_ of shape (n_components, n_features), weights_ of shape (n_components,)"
            if want is not None:
                need += f" and precisions_cholesky_ of shape {want}"
            raise ValueError(
                f"weights_ of shape {w}, means_ of shape {m} and precisions_cholesky_ of shape {p} do not fit "
                f"covariance_type={self.covariance_type!r}: it needs {need}. Fit again after changing "
                "covariance_type or the fitted attributes."
            )
        # Shapes that fit both types (tied and diag when n_components ==
        # n_features, or factors on disk) are the fit's, unless reassigned.
        fitted = getattr(self, "_fitted_covariance_type", self.covariance_type)
        if fitted != self.covariance_type and (p is None or p == _param_shape(fitted, w[0], m[-1])):
            raise ValueError(
                f"the fitted attributes are of covariance_type={fitted!r}, but covariance_type="
                f"{self.covariance_type!r} is set. Restore covariance_type={fitted!r}, or fit again."
            )

    def predict(self, X):
        """Most probable component of each row.

        Returns
        -------
        labels : ndarray of shape (n_samples,), dtype int64
            A lazy dask.array.Array with X's row chunks when X is a Dask array.
            As scikit-learn's.
        """
        return self._e_pass(X, labels=True)[1]

    def predict_proba(self, X):
        """Posterior probability of each component for each row.

        Returns
        -------
        resp : ndarray of shape (n_samples, n_components), float32 for float32 X, else float64
            A lazy dask.array.Array with X's row chunks when X is a Dask array.
            A row of zero density under every component (far from them all)
            has NaN probabilities, as scikit-learn's (its ``score_samples``
            is ``-inf``), with a RuntimeWarning counting such rows.
        """
        resp = self._e_pass(X, proba=True)[2]
        if isinstance(resp, np.ndarray) and resp.shape[1] and np.isnan(resp[:, 0]).any():
            n = int(np.isnan(resp[:, 0]).sum())
            warnings.warn(
                f"{n} rows of X have zero density under every component: their probabilities are NaN and their "
                "log-likelihood -inf (as in scikit-learn)",
                RuntimeWarning,
                stacklevel=2,
            )
        return resp

    def score_samples(self, X):
        """Log-likelihood ``log p(x_i)`` of each row under the model.

        Returns
        -------
        log_prob : ndarray of shape (n_samples,), float32 for float32 X, else float64
            A lazy dask.array.Array with X's row chunks when X is a Dask array.
            ``-inf`` for a row of zero density under every component.
        """
        return self._e_pass(X, log_likelihood=True)[3]

    def score(self, X, y=None):
        """Mean log-likelihood per sample of X (higher is better).

        Returns
        -------
        log_likelihood : float
        """
        return float(self._e_pass(X)[0]["score"])

    def _n_parameters(self):
        """Free parameters: means, covariances and ``n_components - 1`` weights
        (the engine's count, as scikit-learn's)."""
        k, d = self.means_.shape
        return int(_memfit.n_parameters(covariance_type=self.covariance_type, n_components=k, n_features=d))

    def bic(self, X):
        """Bayesian information criterion ``-2 log L + p ln n`` on X (lower is better).

        Returns
        -------
        bic : float
        """
        return float(self._e_pass(X)[0]["bic"])

    def aic(self, X):
        """Akaike information criterion ``-2 log L + 2 p`` on X (lower is better).

        Returns
        -------
        aic : float
        """
        return float(self._e_pass(X)[0]["aic"])

    def sample(self, n_samples=1):
        """Draw rows from the fitted mixture.

        scikit-learn's draws from the same ``random_state``: component
        counts are multinomial in ``weights_``; rows of a component come
        from ``RandomState.multivariate_normal`` (full, tied) or are
        ``mean + z * sqrt(var)`` (diag, spherical). The same rows as
        scikit-learn's for an int ``random_state``; a ``RandomState``
        instance is drawn from where the fit left it, and the two
        libraries' fits draw from it differently.

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
        self._check_fitted_shapes()
        if n_samples < 1:
            # scikit-learn's message, which names n_components as the value.
            raise ValueError(
                f"Invalid value for 'n_samples': {self.n_components} . The sampling requires at least one sample."
            )
        rng = check_random_state(self.random_state)
        k, d = self.means_.shape
        counts = rng.multinomial(n_samples, self.weights_)
        # Each component's rows written into the result as drawn (float64,
        # as scikit-learn's vstack of them): one component's rows at a time
        # beside it, not all of them.
        X = np.empty((n_samples, d))
        start = 0
        for c, m in enumerate(counts):
            if self.covariance_type in ("full", "tied"):
                cov = self.covariances_[c] if self.covariance_type == "full" else self.covariances_
                X[start:start + m] = rng.multivariate_normal(self.means_[c], cov, int(m))
            else:
                X[start:start + m] = self.means_[c] + rng.standard_normal(size=(m, d)) * np.sqrt(self.covariances_[c])
            start += m
        return X, np.repeat(np.arange(k), counts)
