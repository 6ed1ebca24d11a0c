"""K-means clustering within a memory limit (scikit-learn's ``KMeans`` API)."""

from __future__ import annotations

import warnings
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, ClusterMixin, TransformerMixin, _fit_context
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from . import _memfit
from . import _dask
from ._dask import is_dask_array
from ._options import check_device, check_memory_limit, check_n_jobs, check_scratch_dir, engine_count
from ._sparse import is_sparse
from ._validation import (
    c_float64,
    on_cluster,
    check_data,
    check_sample_weight,
    emit_warnings,
    seed_from,
    sklearn_messages,
    features_kept_on_failure,
    checked,
    finite_or_checked,
    small_array,
)


class _Verbose:
    """Prints scikit-learn's ``KMeans`` verbose lines (``KMeans.fit`` and
    ``_kmeans_single_lloyd``) from the engine's progress events: per
    initialisation "Initialization complete", then "Iteration i, inertia
    x." per Lloyd iteration (i from 0; without the period for ``algorithm=
    "elkan"``, as ``_kmeans_single_elkan`` prints it) and the line saying
    why it stopped."""

    def __init__(self, verbose=1, elkan=False):
        self.run, self.verbose, self.end = None, verbose, "" if elkan else "."

    def __call__(self, event):
        if event[0] != "iteration":
            return
        _, run, iteration, _, inertia, shift, tol, _, skip_share = event
        if run != self.run:
            self.run = run
            print("Initialization complete")
        i = iteration - 1
        print(f"Iteration {i}, inertia {inertia}{self.end}")
        if self.verbose > 1 and skip_share > 0:
            print(f"  bounds skipped {100 * skip_share:.1f}% of the distances")
        # scikit-learn's strict convergence (labels unchanged) is a shift of
        # 0 after the first iteration; its tolerance is 0 (an int) for tol=0.
        if shift == 0 and i > 0:
            print(f"Converged at iteration {i}: strict convergence.")
        elif shift <= tol:
            print(f"Converged at iteration {i}: center shift {shift} within tolerance {tol if tol else 0}.")


class _Centers(ClassNamePrefixFeaturesOutMixin, TransformerMixin, ClusterMixin, BaseEstimator):
    """What every k-means estimator does with its fitted ``cluster_centers_``
    (``predict``, ``score``, ``transform``; the engine's exact assignment
    within ``memory_limit`` on ``n_jobs`` threads) and how it keeps
    ``labels_``."""

    @property
    def labels_(self):
        try:
            labels = self._labels
        except AttributeError:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute 'labels_'") from None
        return _dask.check_live(labels, "labels_")

    @labels_.setter
    def labels_(self, labels):
        self._labels = labels

    def __getstate__(self):
        # Lazy labels (a Dask input) are computed: a pickle holds 4 bytes
        # per row, as scikit-learn's, never the input's graph or data.
        return _dask.computed_state(super().__getstate__(), lambda name: name.lstrip("_") + "_")

    #: Whether ``fit`` takes scipy.sparse input (``predict``, ``score`` and
    #: ``transform`` always do).
    _accepts_sparse = False

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = self._accepts_sparse
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags

    def fit_predict(self, X, y=None, sample_weight=None):
        """Fit and return the label of each row (``labels_``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), numpy.memmap, path to a .npy file or dask.array.Array
        y : Ignored
        sample_weight : array-like of shape (n_samples,), scalar, path or None, default=None

        Returns
        -------
        labels : ndarray of shape (n_samples,), dtype int32
            A lazy dask.array.Array with X's row chunks when X is a Dask array.
        """
        return self.fit(X, sample_weight=sample_weight).labels_

    #: How rows are compared with the centres ("euclidean"; KMeans also "cosine").
    _metric = "euclidean"

    def _dask_labels(self, data):
        """Labels of a Dask input's rows: a lazy Dask array."""
        return data.dask.map_estimator(self, "predict", None, np.int32)

    def _assign(self, X, sample_weight=None):
        """(labels, inertia) of X against the centres; the inertia weighted
        by ``sample_weight`` when given. For a Dask X the inertia is computed
        here (X's chunks read one at a time) and the labels are not kept."""
        check_is_fitted(self)
        data = check_data(X, self, reset=False, accept_sparse=True)
        return self._assign_checked(data, check_sample_weight(sample_weight, data))

    def _assign_checked(self, data, w):
        """:meth:`_assign` of data and weights already checked (by
        ``check_data`` and ``check_sample_weight``)."""
        device = check_device(self, data, "kmeans", self.cluster_centers_.shape[0], w is not None)
        labels = np.empty(data.n_samples, dtype=np.int32)
        with finite_or_checked(self, data):
            inertia = _memfit.assign(
                data.engine,
                centers=c_float64(self.cluster_centers_),
                memory_limit=check_memory_limit(self.memory_limit),
                labels=labels,
                sample_weight=w,
                n_jobs=check_n_jobs(self.n_jobs),
                float32=data.float32,
                metric=self._metric,
                device=device,
            )
        return labels, inertia

    def predict(self, X):
        """Nearest centre of each row.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), numpy.memmap, path to a .npy file or dask.array.Array

        Returns
        -------
        labels : ndarray of shape (n_samples,), dtype int32
            A lazy dask.array.Array with X's row chunks when X is a Dask array.
        """
        if is_dask_array(X):
            check_is_fitted(self)
            data = check_data(X, self, reset=False, accept_sparse=True)
            check_device(self, data, "kmeans", self.cluster_centers_.shape[0], False)
            return self._dask_labels(data)
        return self._assign(X)[0]

    def score(self, X, y=None, sample_weight=None):
        """Opposite of the (weighted) inertia of X on the fitted centres.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), numpy.memmap, path to a .npy file or dask.array.Array
        y : Ignored
        sample_weight : array-like of shape (n_samples,), scalar or None, default=None

        Returns
        -------
        score : float
            ``-sum_i w_i * min_k ||x_i - c_k||^2`` (higher is better).
        """
        return -float(self._assign(X, sample_weight)[1])

    def transform(self, X):
        """Euclidean distance of each row to every centre.

        Computed in row blocks within ``memory_limit`` (the result itself,
        ``n_samples × n_clusters``, is the caller's), each from exact float64
        differences (the square roots of the squared distances ``predict``
        minimises, so ``transform(X).argmin(axis=1)`` is ``predict(X)`` unless
        two distances round to the same value).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), numpy.memmap, path to a .npy file or dask.array.Array

        Returns
        -------
        distances : ndarray of shape (n_samples, n_clusters)
            A lazy dask.array.Array with X's row chunks when X is a Dask array.
            float32 for float32 X, else float64.
        """
        check_is_fitted(self)
        data = check_data(X, self, reset=False, accept_sparse=True)
        check_device(self, data, "kmeans", self.cluster_centers_.shape[0], False)
        # float32 only for float32 data on float32 centres, as scikit-learn's.
        dtype = np.float32 if data.float32 and self.cluster_centers_.dtype == np.float32 else np.float64
        if data.dask is not None:
            return data.dask.map_estimator(self, "transform", self.cluster_centers_.shape[0], dtype)
        out = np.empty((data.n_samples, self.cluster_centers_.shape[0]), dtype=dtype)
        with finite_or_checked(self, data):
            _memfit.transform(
                data.engine,
                centers=c_float64(self.cluster_centers_),
                memory_limit=check_memory_limit(self.memory_limit),
                out=out,
                n_jobs=check_n_jobs(self.n_jobs),
                float32=data.float32,
                metric=self._metric,
            )
        return out

    def fit_transform(self, X, y=None, sample_weight=None):
        """Fit, then return :meth:`transform` of X.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), numpy.memmap, path to a .npy file or dask.array.Array
        y : Ignored
        sample_weight : array-like of shape (n_samples,), scalar, path or None, default=None

        Returns
        -------
        distances : ndarray of shape (n_samples, n_clusters)
            A lazy dask.array.Array with X's row chunks when X is a Dask array.
        """
        return self.fit(X, sample_weight=sample_weight).transform(X)

    def _check_centers(self, centers, data):
        """``centers`` (an array or a callable's result) as float64 of
        shape (n_clusters, n_features), with scikit-learn's messages (a
        sparse matrix, as a callable gives for sparse X, filled in)."""
        centers = small_array(centers.toarray() if is_sparse(centers) else centers, "init", 2)
        # scikit-learn's `_validate_center_shape`.
        if centers.shape[0] != self.n_clusters:
            raise ValueError(
                f"The shape of the initial centers {centers.shape} does not match the number of clusters "
                f"{self.n_clusters}."
            )
        if centers.shape[1] != data.n_features:
            raise ValueError(
                f"The shape of the initial centers {centers.shape} does not match the number of features of the "
                f"data {data.n_features}."
            )
        if data.float32:
            # scikit-learn converts init to X's dtype, then checks it.
            with np.errstate(over="ignore"):
                beyond = np.argwhere(np.isinf(centers.astype(np.float32)))
            if len(beyond):
                i, j = beyond[0]
                raise ValueError(
                    "Input contains infinity or a value too large for dtype('float32'). "
                    f"memfit: init[{i}, {j}] = {centers[i, j]}"
                )
        return centers


class KMeans(_Centers):
    """K-means clustering (Lloyd's algorithm) on data larger than memory.

    A drop-in for :class:`sklearn.cluster.KMeans` that reads X in row blocks
    within ``memory_limit``: no ``(n_samples, n_clusters)`` distance matrix is
    ever built, in-memory arrays are used without a copy, and a path to a
    ``.npy`` file is read out of core. Distances and argmin are fused in one
    blocked kernel whose label is the exact nearest centre unless two centres
    are tied within float64 rounding (GEMM-identity candidates certified by
    their error bound, exact float64 differences where it cannot decide);
    sums are accumulated in float64 in a fixed order, so results are
    identical for any ``n_jobs`` and limit. Each centre is the float64 mean
    of its rows rounded once to X's dtype.

    Parameters
    ----------
    n_clusters : int, default=8
        Number of clusters ``k`` (1 ≤ k ≤ n_samples).
    init : {"k-means++", "random"}, array-like of shape (n_clusters, n_features) or callable, default="k-means++"
        Greedy k-means++ (Arthur & Vassilvitskii 2007, with scikit-learn's
        ``2 + ln k`` local trials) on a uniform sample of rows; ``"random"``
        picks ``n_clusters`` distinct rows; an array gives the centres; a
        callable ``init(X, n_clusters, random_state)`` returns them (X as
        given: a Dask array stays one, a ``.npy`` path is a read-only
        memory map), called once per initialisation with
        ``check_random_state(random_state)`` (a ``RandomState`` given is
        passed itself), as scikit-learn calls it.
    n_init : "auto" or int, default="auto"
        Initialisations; the run with the lowest inertia is kept (the first
        of equal ones). ``"auto"``: 1 for k-means++ or an array (which is
        one initialisation whatever ``n_init`` says); 10 for ``"random"`` or
        a callable. Each of a callable's initialisations is one fit.
    max_iter : int, default=300
        Maximum Lloyd iterations per initialisation (at least 1, as
        scikit-learn's).
    tol : float, default=1e-4
        Relative tolerance: a run stops when the sum of squared centre
        shifts is at most ``tol * mean(var(X, axis=0))``.
    verbose : int, default=0
        Print scikit-learn's lines: "Initialization complete" per
        initialisation, "Iteration i, inertia x." per iteration and
        "Converged at iteration i: ..." when a run converges.
    random_state : int, RandomState instance or None, default=None
        Seed of every random choice; the same int gives the same result for
        any ``n_jobs`` and ``memory_limit``.
    copy_x : bool, default=True
        Accepted for compatibility; memfit never modifies X.
    algorithm : {"auto", "lloyd", "bounded", "elkan"}, default="auto"
        How iterations assign rows; every choice gives the same labels,
        centres, inertia and ``n_iter_``, bit for bit. ``"bounded"`` keeps
        per row its label and a lower bound on its distance to every other
        centre (Hamerly, "Making k-means even faster", SDM 2010, with
        rounding margins that make it exact: 16 bytes per row, planned
        within ``memory_limit`` or in a scratch file) and skips the
        distances that cannot change a label; ``"elkan"`` is accepted as
        ``"bounded"`` (memfit never holds Elkan's n_samples × n_clusters
        bounds); ``"lloyd"`` computes every distance every iteration;
        ``"auto"`` times two plain iterations, then bounded ones; a bounded
        iteration slower than the latest plain one (or not clearly faster
        while its share of skipped distances has stopped rising) pauses the
        bounds for 4, then 8, 16, ... plain iterations, after which they
        start afresh (early iterations, whose centres move far, may skip too
        little where later ones pay); it runs plain when the bounds do not
        fit ``memory_limit``. On a Dask cluster each chunk's
        bounds stay on the worker that ran its task, 16 bytes per row held
        by Dask between passes (see ``memfit._dask``); a chunk whose bounds
        are lost with a worker is assigned in full, with the same results.
    metric : {"euclidean", "cosine"}, default="euclidean"
        memfit's own. ``"cosine"`` is spherical k-means (Dhillon and Modha,
        "Concept decompositions for large sparse text data using
        clustering", Machine Learning 2001; faiss's ``spherical=True``): rows
        are scaled to unit norm as they are read (never copied; rows of
        zeros stay zero), each goes to the centre of largest cosine
        similarity (largest inner product ``x/‖x‖ · c``, computed exactly as
        distances are for ``"euclidean"``; the lowest index on ties, as in
        faiss: a row of zeros, or a row orthogonal to every centre, goes to
        centre 0), and each centre is its rows' weighted mean scaled to unit
        norm (given ``init`` centres are scaled too). Rows of zeros have no
        direction: they move no centre, k-means++ does not seed from them
        and an empty cluster is not refilled with one (a cluster of only
        such rows counts as empty). ``inertia_`` and ``score`` are then
        ``Σ w ‖x/‖x‖ − c‖² = 2 Σ w (1 − cos(x, c))`` (distances computed as
        ``1 + ‖x/‖x‖‖² − 2 x/‖x‖ · c``, so a given centre of zeros is at
        cosine 0, as in faiss); ``predict``,
        ``transform`` and ``score`` scale the rows they read the same way
        (and the centres to unit norm). On a Dask cluster the workers read
        their chunks' rows so.
    memory_limit : int, str or None, default=None
        Bytes every buffer of a run must fit in: an int (bytes) or a string
        such as ``"2GiB"`` (powers of 1024) or ``"2GB"`` (powers of 1000);
        ``None`` is half of the memory available to this process
        (``MemAvailable``, or the room under its cgroup's limit if lower),
        divided by the number of workers when the process is one of
        joblib's loky workers (``GridSearchCV(..., n_jobs=2)``: a quarter
        each). The returned ``labels_`` (4 bytes per row) count toward it;
        X itself does not when it is an in-memory array. A job that cannot
        fit raises ``MemoryError`` before reading data, saying the smallest
        limit that works.
    n_jobs : int or None, default=None
        Worker threads: ``None`` the CPUs this process may use (affinity
        mask, cgroup CPU quota), at most ``OMP_NUM_THREADS`` (which joblib
        sets in its workers) and the OpenMP limit of a
        ``threadpoolctl.threadpool_limits`` context; -1 all those CPUs, -2
        all but one.
    scratch_dir : str, path or None, default=None
        Folder for scratch files (``None``: the system's temporary folder,
        ``TMPDIR``): the k-means++ sample when its values do not fit
        ``memory_limit`` (its size never depends on the limit) and the
        bounds of ``algorithm="bounded"`` when they do not. The files have
        no name there and vanish when the fit ends, however it ends.
        ``memory_plan_`` shows the bytes on disk; a folder that cannot hold
        them raises ``OSError`` before any work.
    device : str, default="cpu"
        Where the kernels run: ``"cpu"``, ``"cuda"`` (device 0) or
        ``"cuda:N"``. CUDA needs memfit built with its ``cuda`` feature
        (``pip install`` of a wheel built by ``maturin build --features
        cuda``) and an NVIDIA driver; the job is then planned within
        ``device_memory_limit`` (shown in ``memory_plan_``). On a device,
        ``fit``, ``predict`` and ``score`` compute the nearest centres there
        (the same labels, centres and inertia as on the CPU, bit for bit)
        and the rest (sums, k-means++) on the host; ``transform`` runs on
        the host. A machine without a driver or a GPU, or a fit on a Dask
        cluster, raises ``RuntimeError`` saying why, before any work.
    device_memory_limit : int, str or None, default=None
        Bytes of device memory a CUDA job may use (as ``memory_limit``);
        ``None`` is 90 % of the device's memory. A job that cannot fit raises
        ``MemoryError`` saying the smallest limit that works.

    Attributes
    ----------
    cluster_centers_ : ndarray of shape (n_clusters, n_features)
        Centres, float32 for float32 X, else float64.
    labels_ : ndarray of shape (n_samples,), dtype int32
        Label of each row. For a Dask X, a lazy Dask array with X's row
        chunks; pickling the estimator computes it into NumPy (the pickle
        never holds X), and reading it once the client that persisted X has
        closed raises RuntimeError saying what to do.
    inertia_ : float
        Sum of (weighted) squared distances of rows to their centre.
    n_iter_ : int
        Iterations run by the kept initialisation.
    skip_share_ : ndarray of shape (n_iter_,), dtype float64
        Per iteration of the kept initialisation, the share of the
        ``n_samples × n_clusters`` distances the bounds skipped (0 for plain
        Lloyd iterations). With ``verbose >= 2`` it is printed per iteration.
        A diagnostic of speed only: with ``algorithm="auto"`` the fit keeps
        bounds or drops them by the time its passes take, so this share can
        differ between runs, thread counts and memory limits, while the
        centres, labels, inertia and ``n_iter_`` are the same bits.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Column names when X has them (a pandas DataFrame).
    memory_plan_ : str
        The plan of the last fit: every buffer and its bytes, block rows and
        passes.

    Notes
    -----
    X may be an array-like, a ``numpy.memmap`` or a path (``str`` or
    ``os.PathLike``) to a ``.npy`` file of any dtype of
    :data:`memfit.array.DTYPES` (bool, integers, floats). Integer data are
    converted to float64 one block at a time; float32 data are computed in float32. A long fit stops
    within about a second on Ctrl-C (``KeyboardInterrupt``).

    An empty cluster (no weight) takes the rows farthest from their centres,
    as in scikit-learn. One that stays without weight (more clusters than
    distinct points, or only rows of weight zero to take) keeps its centre,
    where scikit-learn moves it onto the heaviest cluster's centre; such fits
    can then label rows, and rows of weight zero, otherwise than
    scikit-learn. The "distinct clusters" warning counts the clusters that
    hold rows, as scikit-learn's does.

    Sparse X (a ``scipy.sparse`` matrix or array: TF-IDF, one-hot, bag of
    words) is read as CSR in place, never densified: a canonical CSR matrix
    of float32 or float64 is borrowed; other formats and dtypes are
    converted once (as scikit-learn's ``check_array(accept_sparse="csr")``),
    a non-canonical one is copied with its duplicates summed. Distances come
    from O(nnz · n_clusters) sparse × dense products, certified as for dense
    data, so the labels, centres and ``n_iter_`` are those of the same fit on
    ``X.toarray()``, bit for bit; ``inertia_`` sums each row's distance from
    its stored values alone and may differ from the dense one in its last
    bits (so with ``n_init > 1``, two initialisations whose inertias differ
    only in those bits may be kept in the other order than the dense fit
    keeps them). Read blocks hold at most the densest row's values per row,
    the centres a transposed copy (``n_features × n_clusters`` float64, and
    float16 for a first pass) and each thread one dense row. Sparse fits run plain Lloyd passes whatever
    ``algorithm`` says (the same results), on the CPU. A Dask array of
    scipy.sparse chunks is read chunk by chunk as CSR (in this process
    without a client, else by the workers that hold the chunks), after one
    pass that computes every chunk for its densest row; the fit has the bits
    of the fit on the matrix.

    Examples
    --------
    >>> import numpy as np
    >>> from memfit import KMeans
    >>> X = np.array([[1, 2], [1, 4], [1, 0], [10, 2], [10, 4], [10, 0]], dtype=float)
    >>> km = KMeans(n_clusters=2, random_state=0).fit(X)
    >>> sorted(km.cluster_centers_[:, 0].tolist())
    [1.0, 10.0]
    """

    _parameter_constraints: dict = {
        # scikit-learn 1.9's KMeans constraints (same errors, same messages).
        "n_clusters": [Interval(Integral, 1, None, closed="left")],
        "init": [StrOptions({"k-means++", "random"}), callable, "array-like"],
        "n_init": [StrOptions({"auto"}), Interval(Integral, 1, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "verbose": ["verbose"],
        "random_state": ["random_state"],
        "copy_x": ["boolean"],
        "algorithm": [StrOptions({"auto", "lloyd", "bounded", "elkan"})],
        # memfit's own, checked when used.
        "metric": [StrOptions({"euclidean", "cosine"})],
        "memory_limit": "no_validation",
        "n_jobs": "no_validation",
        "scratch_dir": "no_validation",
        "device": "no_validation",
        "device_memory_limit": "no_validation",
    }

    _accepts_sparse = True

    def __init__(
        self,
        n_clusters=8,
        *,
        init="k-means++",
        n_init="auto",
        max_iter=300,
        tol=1e-4,
        verbose=0,
        random_state=None,
        copy_x=True,
        algorithm="auto",
        metric="euclidean",
        memory_limit=None,
        n_jobs=None,
        scratch_dir=None,
        device="cpu",
        device_memory_limit=None,
    ):
        self.n_clusters = n_clusters
        self.init = init
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.verbose = verbose
        self.random_state = random_state
        self.copy_x = copy_x
        self.algorithm = algorithm
        self.metric = metric
        self.memory_limit = memory_limit
        self.n_jobs = n_jobs
        self.scratch_dir = scratch_dir
        self.device = device
        self.device_memory_limit = device_memory_limit

    @property
    def _metric(self):
        return self.metric

    def _check_params(self, data):
        if isinstance(self.n_clusters, bool):
            # What scikit-learn's compiled code raises (its validation lets a bool pass as an int).
            raise TypeError("an integer is required")
        if data.n_samples < self.n_clusters:
            raise ValueError(f"n_samples={data.n_samples} should be >= n_clusters={self.n_clusters}.")

    def _init_centers(self, data):
        """(engine init name, the float64 centres of each init or None,
        n_init or None). A callable ``init`` is called once per init, all
        with one random state, as scikit-learn calls it ("auto": 10 inits);
        an array is one init."""
        init = self.init
        n_init = None if self.n_init == "auto" else int(self.n_init)
        if isinstance(init, str):
            return init, None, n_init
        if callable(init):
            from sklearn.utils import check_random_state

            random_state = check_random_state(self.random_state)
            rows = data.rows()
            runs = 10 if n_init is None else n_init
            inits = [self._check_centers(init(rows, self.n_clusters, random_state=random_state), data) for _ in range(runs)]
            return "array", inits, 1
        centers = self._check_centers(init, data)
        if n_init not in (None, 1):
            warnings.warn(
                f"Explicit initial center position passed: performing only one init in {type(self).__name__} "
                f"instead of n_init={n_init}.",
                RuntimeWarning,
                stacklevel=4,
            )
        return "array", [centers], 1

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None, sample_weight=None, *, client=None):
        """Compute k-means clustering.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), numpy.memmap, path to a .npy file or dask.array.Array
            Training data (see the class notes for dtypes).
        y : Ignored
            Not used, present for API consistency.
        sample_weight : array-like of shape (n_samples,), scalar, path or None, default=None
            Non-negative, finite weight of each row (all ones when None).
        client : distributed.Client, optional
            For a Dask array X: the cluster the iterations run on (default:
            the active client, if any; else X's chunks are read in this
            process). ``labels_`` is then a lazy Dask array. See the README,
            "Dask".

        Returns
        -------
        self : KMeans
            Fitted estimator.

        Raises
        ------
        ValueError
            Bad parameters (scikit-learn's ``InvalidParameterError``, a
            ``ValueError``), non-finite values or weights, shapes, with
            scikit-learn's messages where it raises the same error. Also
            data whose squared distances overflow the compute dtype (a column
            spanning more than about 1e153 in float64, 1e18 in float32) or
            all underflow it (no column spanning more than about 1e-154 in
            float64), and weighted sums that overflow: the exact nearest
            centres cannot be told apart there (scikit-learn returns an
            infinite inertia or labels from rounding).
        MemoryError
            The job cannot fit ``memory_limit``.
        OSError
            A path that cannot be read.
        """
        with sklearn_messages(self), features_kept_on_failure(self):
            return self._fit(X, sample_weight, client)

    def _fit(self, X, sample_weight, client):
        """:meth:`fit`'s work (its warnings' ``stacklevel`` counts this frame)."""
        data = check_data(on_cluster(X, client), self, reset=True, accept_sparse=self._accepts_sparse)
        self._check_params(data)
        w = check_sample_weight(sample_weight, data)
        device = check_device(self, data, "kmeans", self.n_clusters, w is not None)
        # Only a named init draws from random_state here; a callable gets it
        # itself, as scikit-learn gives it, and given centres need nothing
        # (a shared RandomState is not advanced, as scikit-learn's is not).
        seed = seed_from(self.random_state) if isinstance(self.init, str) else 0
        init, inits, n_init = self._init_centers(data)
        limit = check_memory_limit(self.memory_limit)
        scratch = check_scratch_dir(self.scratch_dir)
        k = int(self.n_clusters)
        best = None
        # One engine fit, or one per init a callable gave: the first of the
        # lowest inertia is kept, as the engine keeps its own inits.
        for centers in inits or [None]:
            params = dict(
                n_clusters=k,
                init=init,
                init_centers=centers,
                n_init=engine_count(n_init),
                max_iter=engine_count(self.max_iter),
                tol=float(self.tol),
                random_state=seed,
                float32=data.float32,
                algorithm="bounded" if self.algorithm == "elkan" else self.algorithm,
                metric=self.metric,
            )
            labels = np.empty(data.n_samples, dtype=np.int32) if data.dask is None else None
            cluster = {} if data.dask is None else data.dask.fit_kwargs(client, w, limit, _memfit.kmeans_fit, params)
            result = checked(self, data, _memfit.kmeans_fit)(
                data.engine,
                sample_weight=w,
                memory_limit=limit,
                n_jobs=check_n_jobs(self.n_jobs),
                labels=labels,
                progress=_Verbose(self.verbose, self.algorithm == "elkan") if self.verbose else None,
                scratch_dir=scratch,
                device=device,
                # Arrays and files of integers (or float16) that float32 holds
                # exactly: float32 passes, the float64 fit's results.
                exact=device is None and isinstance(data.engine, (np.ndarray, str)),
                **params,
                **cluster,
            )
            if best is None or result["inertia"] < best[0]["inertia"]:
                best = (result, labels)
        result, labels = best
        if result["n_nonempty_clusters"] < k:
            warnings.warn(
                f"Number of distinct clusters ({result['n_nonempty_clusters']}) found smaller than n_clusters ({k}). "
                "Possibly due to duplicate points in X.",
                ConvergenceWarning,
                stacklevel=3,
            )
        # The warnings above are scikit-learn's; the engine's others follow,
        # except reaching max_iter, on which scikit-learn's KMeans is silent.
        emit_warnings(
            result["warnings"], skip=("init_centers_with_n_init", "fewer_clusters", "not_converged"), stacklevel=4
        )
        self.cluster_centers_ = result["cluster_centers"]
        self.labels_ = labels if data.dask is None else self._dask_labels(data)
        self.inertia_ = float(result["inertia"])
        self.n_iter_ = int(result["n_iter"])
        self.skip_share_ = np.asarray(result["skip_share"], dtype=np.float64)
        self.memory_plan_ = result["plan_text"] if device is None else f"{result['plan_text']}\n{device.plan}"
        self._n_features_out = self.cluster_centers_.shape[0]
        return self
