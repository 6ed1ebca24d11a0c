"""Mini-batch k-means within a memory limit (scikit-learn's ``MiniBatchKMeans`` API)."""

from __future__ import annotations

import contextlib
import math
import warnings
from numbers import Integral, Real

import numpy as np
from sklearn.base import _fit_context
from sklearn.cluster import kmeans_plusplus
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions

from . import _dask, _memfit
from ._kmeans import _Centers
from ._options import check_memory_limit, check_n_jobs, engine_count, resolve_client
from ._sparse import is_sparse, sparse_input
from ._validation import (
    c_float64,
    check_data,
    check_sample_weight,
    check_weight_values,
    features_kept_on_failure,
    finite_or_checked,
    on_cluster,
    sparse_chunks,
)


def _as_current(client):
    """A context in which Dask computes on ``client`` (checked as every
    ``client=`` is: :func:`memfit._options.resolve_client`): the client
    given made current (``distributed.Client.as_current``); None, the
    active client or this process, as before."""
    on = resolve_client(client)
    return contextlib.nullcontext() if client is None or on is None else on.as_current()


def _take(w, idx):
    """The weights of rows ``idx`` (ones when ``w`` is None)."""
    return np.ones(len(idx)) if w is None else w[idx]


def _dense(rows):
    """Drawn rows as a dense array (a sparse batch's rows filled in)."""
    return rows.toarray() if is_sparse(rows) else rows


class MiniBatchKMeans(_Centers):
    """Mini-batch k-means (Sculley 2010) on data larger than memory.

    A drop-in for :class:`sklearn.cluster.MiniBatchKMeans`: the same
    parameters, attributes, random stream and stopping rules, so that the same
    ``random_state`` draws the same batches, initial centres and reassignments
    as scikit-learn. Each step runs in the engine: every row of the batch goes
    to its exact nearest centre (the kernel of :class:`memfit.KMeans`), and
    each centre that received rows moves to the weighted mean of all the rows
    it has absorbed, ``c ← (c·W + Σ w x) / (W + Σ w)`` with the batch's sums
    in compensated float64 (so steps do not depend on ``n_jobs``), rounded to
    X's dtype. Batches are read from X (an array, a ``.npy`` path, a lazy
    :class:`memfit.array.Array` or a Dask array) with positioned reads, never
    a copy of X; ``labels_`` and ``inertia_`` come from one exact pass over X
    within ``memory_limit``.

    Sparse X (a ``scipy.sparse`` matrix or array) is read as CSR in place,
    as :class:`memfit.KMeans` reads it: batches are drawn as CSR rows (at
    most ``batch_size`` times the densest row's values), assigned by the
    sparse kernel of :class:`memfit.KMeans` (the labels of the rows with
    their zeros filled in) and summed with the dense sums' bits, so a fit on
    sparse X gives the centres of the same fit on X densified, as
    scikit-learn's ``_minibatch_update_sparse`` does. (Inertias of sparse
    rows, summed from their stored values, may differ from the dense ones
    in their last bits: with ``n_init > 1``, initialisations whose
    inertias agree to rounding may be chosen differently, and scikit-learn's
    k-means++ may draw other centres from sparse rows than from dense ones.)
    A Dask array of scipy.sparse chunks gives the fit on the matrix: each
    batch's rows are taken by Dask where the chunks lie (without a client,
    one chunk at a time here). A Dask X (dense or sparse chunks) is read
    by the validation pass as every other X is, one chunk at a time here:
    the same refusals, in the same words, and ``tol``'s scale with the
    same bits as for the array in memory.

    Parameters
    ----------
    n_clusters : int, default=8
        Number of clusters.
    init : {"k-means++", "random"}, array-like of shape (n_clusters, n_features) or callable, default="k-means++"
        As scikit-learn's: k-means++ (its ``kmeans_plusplus``) or
        ``n_clusters`` distinct rows drawn with probability proportional to
        ``sample_weight``, on ``init_size`` rows drawn from X; an array gives
        the centres; a callable ``init(X_sample, n_clusters, random_state)``
        returns them.
    max_iter : int, default=100
        Passes over X's size: ``max_iter * n_samples // batch_size`` steps at
        most.
    batch_size : int, default=1024
        Rows per step (at most n_samples).
    verbose : int, default=0
        Print scikit-learn's lines per initialisation and step.
    compute_labels : bool, default=True
        Compute ``labels_`` and ``inertia_`` over all of X once the steps end
        (else ``inertia_`` is the smoothed batch inertia times the weight sum).
    random_state : int, RandomState instance or None, default=None
        Seeds every draw: batches, initialisation, reassignments.
    tol : float, default=0.0
        Stop when the squared change of the centres in a step is at most
        ``tol * mean(var(X, axis=0))`` (0 disables it; else one pass over X
        computes the variances).
    max_no_improvement : int or None, default=10
        Stop after this many steps without improvement of the smoothed batch
        inertia (None disables it).
    init_size : int or None, default=None
        Rows drawn for the initialisation (default ``3 * batch_size``, at
        least ``3 * n_clusters``, at most n_samples).
    n_init : "auto" or int, default="auto"
        Initialisations tried, the best kept by inertia on ``init_size``
        drawn rows; ``"auto"``: 1 for k-means++ or an array, 3 for
        ``"random"`` or a callable.
    reassignment_ratio : float, default=0.01
        Centres whose absorbed weight is below this share of the largest are
        moved to random rows of the batch (at most half the batch), checked
        every ``10 * n_clusters`` rows or when a centre has absorbed nothing.
    metric : {"euclidean", "cosine"}, default="euclidean"
        ``"cosine"``: spherical mini-batch k-means, as :class:`memfit.KMeans`'s
        ``metric="cosine"``: rows are scaled to unit norm as they are read
        (never copied), the initial centres and every moved centre too, and
        rows go to the centre of largest cosine similarity (the nearest unit
        centre). ``inertia_`` is then the sum of ``||x/||x|| - c||^2``.
    memory_limit : int, str or None, default=None
        Bytes a step, a drawn batch and the final assignment must fit in (see
        :class:`memfit.KMeans`); too small raises ``MemoryError``.
    n_jobs : int or None, default=None
        Worker threads (see :class:`memfit.KMeans`).

    Attributes
    ----------
    cluster_centers_ : ndarray of shape (n_clusters, n_features)
        Centres, float32 for float32 X, else float64.
    labels_ : ndarray of shape (n_samples,), dtype int32
        Label of each row (when ``compute_labels``); for a Dask X, a
        dask.array.Array with X's row chunks holding them.
    inertia_ : float
        Weighted sum of squared distances of rows to their centre.
    n_iter_ : int
        Passes over the data's size the steps made.
    n_steps_ : int
        Steps run.
    memory_plan_ : str
        The last ``fit``'s plan of its steps' buffers and of what it holds
        per row (the draws' cumulative weights, the weights, ``labels_``).
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Column names when X has them.

    Notes
    -----
    ``fit`` draws batch rows with probability proportional to
    ``sample_weight`` and steps them with unit weights, as scikit-learn
    does; ``partial_fit`` steps its rows with their weights. Unlike
    scikit-learn, labels are exact nearest centres (its GEMM-identity
    distances can lose a close call) and float32 sums are float64.

    Examples
    --------
    >>> import numpy as np
    >>> from memfit import MiniBatchKMeans
    >>> X = np.array([[1, 2], [1, 4], [1, 0], [4, 2], [4, 0], [4, 4],
    ...               [4, 5], [0, 1], [2, 2], [3, 2], [5, 5], [1, -1]], dtype=float)
    >>> km = MiniBatchKMeans(n_clusters=2, random_state=0, batch_size=6, n_init="auto").fit(X)
    >>> km.cluster_centers_.shape
    (2, 2)
    """

    _parameter_constraints: dict = {
        # scikit-learn 1.9's MiniBatchKMeans constraints (same errors, same messages).
        "n_clusters": [Interval(Integral, 1, None, closed="left")],
        "init": [StrOptions({"k-means++", "random"}), callable, "array-like"],
        "n_init": [StrOptions({"auto"}), Interval(Integral, 1, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "verbose": ["verbose"],
        "compute_labels": ["boolean"],
        "random_state": ["random_state"],
        "tol": [Interval(Real, 0, None, closed="left")],
        "max_no_improvement": [Interval(Integral, 0, None, closed="left"), None],
        "init_size": [Interval(Integral, 1, None, closed="left"), None],
        "reassignment_ratio": [Interval(Real, 0, None, closed="left")],
        "metric": [StrOptions({"euclidean", "cosine"})],
        # memfit's own, checked when used.
        "memory_limit": "no_validation",
        "n_jobs": "no_validation",
    }

    def __init__(
        self,
        n_clusters=8,
        *,
        init="k-means++",
        max_iter=100,
        batch_size=1024,
        verbose=0,
        compute_labels=True,
        random_state=None,
        tol=0.0,
        max_no_improvement=10,
        init_size=None,
        n_init="auto",
        reassignment_ratio=0.01,
        metric="euclidean",
        memory_limit=None,
        n_jobs=None,
    ):
        self.n_clusters = n_clusters
        self.init = init
        self.max_iter = max_iter
        self.batch_size = batch_size
        self.verbose = verbose
        self.compute_labels = compute_labels
        self.random_state = random_state
        self.tol = tol
        self.max_no_improvement = max_no_improvement
        self.init_size = init_size
        self.n_init = n_init
        self.reassignment_ratio = reassignment_ratio
        self.metric = metric
        self.memory_limit = memory_limit
        self.n_jobs = n_jobs

    _accepts_sparse = True

    @property
    def _metric(self):
        return self.metric

    # -- checks (scikit-learn's _check_params_vs_input) -------------------

    def _check_params_vs_input(self, data, mean_variance):
        """scikit-learn's checks and derived parameters, after
        :meth:`_check_shapes`; ``mean_variance`` is the validation pass's
        mean column variance (``tol``'s scale)."""
        n, k = data.n_samples, self.n_clusters
        self._tol = mean_variance * self.tol if self.tol else 0.0
        self._n_init = self.n_init
        if self._n_init == "auto":
            # scikit-learn's rule: 3 for "random" and a callable, else 1.
            random = callable(self.init) or (isinstance(self.init, str) and self.init == "random")
            self._n_init = 3 if random else 1
        if not (isinstance(self.init, str) or callable(self.init)) and self._n_init != 1:
            warnings.warn(
                f"Explicit initial center position passed: performing only one init in {type(self).__name__} "
                f"instead of n_init={self._n_init}.",
                RuntimeWarning,
                stacklevel=3,
            )
            self._n_init = 1
        if self.init_size is not None and self.init_size < k:
            warnings.warn(
                f"init_size={self.init_size} should be larger than n_clusters={k}. Setting it to "
                "min(3*n_clusters, n_samples)",
                RuntimeWarning,
                stacklevel=3,
            )
        self._batch_size, self._init_size = self._sizes(n)

    def _check_shapes(self, data):
        """scikit-learn's checks of the parameters against X's shape alone:
        no fewer rows than clusters, an ``init`` array of ``(n_clusters,
        n_features)``; made before the plan (a fit refused for its memory
        named a limit at which these refused it)."""
        n, k = data.n_samples, self.n_clusters
        if n < k:
            raise ValueError(f"n_samples={n} should be >= n_clusters={k}.")
        if not (isinstance(self.init, str) or callable(self.init)):
            self._check_centers(self.init, data)

    def _sizes(self, n):
        """The batch size and ``init_size`` of a fit on ``n`` rows
        (scikit-learn's rules; :meth:`_check_params_vs_input` warns about a
        small ``init_size``)."""
        k = self.n_clusters
        batch = min(self.batch_size, n)
        init = self.init_size
        if init is None:
            init = 3 * batch if 3 * batch >= k else 3 * k
        elif init < k:
            init = 3 * k
        return batch, min(init, n)

    def _validate(self, data, w):
        """KMeans's validation pass over X, whatever its kind (a Dask
        array's chunks read one at a time, as ``KMeans`` reads them):
        refuses what KMeans refuses, in its words (NaN and infinity as
        scikit-learn's ``check_array`` says them; columns whose squared
        distances overflow or all underflow; negative weights, naming the
        row); returns the mean column variance (of the unit rows for
        ``"cosine"``), ``tol``'s scale."""
        with finite_or_checked(self, data):
            return _memfit.kmeans_validate(
                data.engine,
                sample_weight=w,
                memory_limit=check_memory_limit(self.memory_limit),
                n_jobs=check_n_jobs(self.n_jobs),
                float32=data.float32,
                metric=self.metric,
            )

    # -- drawing rows ------------------------------------------------------

    def _rows(self, data, idx, out=None, exact=False):
        """Rows ``idx`` of X as a C-contiguous array of the compute dtype
        (unit rows for ``metric="cosine"``), written into ``out`` (the
        previous batch) when given and the engine reads X; a CSR matrix of
        them for sparse X. With ``exact``, float32 rows where float32 holds
        X's values exactly (the engine's choice; a step reads them with the
        results of float64 rows)."""
        idx = np.asarray(idx, dtype=np.int64)
        x = data.engine
        if sparse_chunks(data):
            # Dask takes the rows where the chunks lie (without a client,
            # one chunk at a time here); checked as a matrix.
            x = sparse_input(data.dask.input[idx].compute(scheduler=data.engine.scheduler()))
            if x.shape != (len(idx), data.n_features):
                raise ValueError(f"X's rows computed to shape {x.shape}, expected {(len(idx), data.n_features)}")
            idx = np.arange(x.shape[0])
        if is_sparse(x):
            import scipy.sparse as sp

            values, indices, indptr = _memfit.gather_rows(
                x,
                rows=idx,
                memory_limit=check_memory_limit(self.memory_limit),
                float32=data.float32,
                metric=self.metric,
                n_jobs=check_n_jobs(self.n_jobs),
            )
            return sp.csr_matrix((values, indices, indptr), shape=(len(idx), data.n_features))
        if data.dask is not None:
            # Each distinct row once, in order (Dask gathers sorted rows
            # chunk by chunk, 2-3x faster on a cluster than in draw order),
            # then in the order drawn: that indexing copies the rows into a
            # new C-order, aligned array (distributed can rebuild a chunk at
            # an odd address, which the engine cannot borrow).
            distinct, order = np.unique(idx, return_inverse=True)
            x = np.asarray(data.dask.checked[distinct])[order]
            if self.metric == "euclidean":
                return np.asarray(x, dtype=data.out_dtype)
            idx = np.arange(x.shape[0])
        return _memfit.gather_rows(
            x,
            rows=idx,
            memory_limit=check_memory_limit(self.memory_limit),
            float32=data.float32,
            metric=self.metric,
            out=out,
            n_jobs=check_n_jobs(self.n_jobs),
            exact=exact,
        )

    @staticmethod
    def _weights(w, data):
        """The weights (``check_sample_weight``'s, not None) as a float64
        vector of ``data.n_samples`` values, checked as
        ``check_sample_weight`` checks weights in memory (finite, not all
        zero, in its words): those it hands to the engine unread (a Dask
        array's, a path's) are used here before the engine reads them (the
        initialisation's draws). Called before the validation pass, so
        that bad weights are refused before bad X, as for NumPy weights;
        negative ones are refused by that pass, naming the row."""
        if isinstance(w, str):
            w = np.load(w)
        elif isinstance(w, _dask.Rows):
            w = w.x.compute()
        elif not isinstance(w, np.ndarray):
            w = np.asarray(w.array if hasattr(w, "array") else w)
        w = np.asarray(w, dtype=np.float64).reshape(-1)
        check_weight_values(w, data)
        return w

    def _init_centroids(self, data, sample, w_sample, random_state):
        """scikit-learn's ``_init_centroids`` on the drawn rows ``sample``;
        for cosine, rows of zeros (no direction) are drawn as rows of weight
        0 are, unless fewer than ``n_clusters`` rows of positive weight are
        not."""
        init, k = self.init, self.n_clusters
        if isinstance(init, str) and not np.any(w_sample):
            raise ValueError(
                f"the {sample.shape[0]} rows drawn for the initialisation (init_size={self._init_size}) all have "
                "zero weight; hint: raise init_size, or leave out the rows of zero weight"
            )
        if self.metric == "cosine":
            directed = w_sample * (np.asarray(abs(sample).sum(axis=1)).reshape(-1) > 0)
            if np.count_nonzero(directed) >= k:
                w_sample = directed
        if isinstance(init, str) and init == "k-means++":
            centers, _ = kmeans_plusplus(sample, k, random_state=random_state, sample_weight=w_sample)
        elif isinstance(init, str) and init == "random":
            seeds = random_state.choice(sample.shape[0], size=k, replace=False, p=w_sample / w_sample.sum())
            centers = _dense(sample[seeds])
        else:
            if callable(init):
                centers = init(sample, k, random_state=random_state)
            else:
                centers = init
            centers = self._check_centers(centers, data)
        centers = np.array(centers, dtype=np.float64, order="C")
        _memfit.minibatch_start_centers(centers, float32=data.float32, metric=self.metric)
        return centers.astype(data.out_dtype)

    def _draw_init(self, data, w, random_state):
        """Initial centres from ``init_size`` rows drawn from X (all rows when
        X has no more)."""
        n = data.n_samples
        if self._init_size < n:
            idx = random_state.randint(0, n, self._init_size)
            return self._init_centroids(data, self._rows(data, idx), _take(w, idx), random_state)
        return self._init_centroids(data, self._rows(data, np.arange(n)), _take(w, np.arange(n)), random_state)

    def _plan_batch(self, data, in_place):
        """Refuses a ``partial_fit`` batch whose step does not fit the limit
        before its validation pass reads it: the step's plan beside the rows
        gathered for it (none when the step reads X where it lies), the
        Dask chunk they come from and ``labels_``."""
        held = []
        sparse = is_sparse(data.engine) or sparse_chunks(data)
        if sparse_chunks(data):
            held.append(("a computed chunk of X, a batch drawn from it", data.engine.held_bytes))
        if self.compute_labels:
            held.append(("labels_ (int32, returned to Python)", 4 * data.n_samples))
        _memfit.minibatch_plan(
            self.n_clusters,
            data.n_features,
            data.n_samples,
            memory_limit=check_memory_limit(self.memory_limit),
            held=held,
            n_jobs=check_n_jobs(self.n_jobs),
            float32=data.float32,
            sparse_x=data.engine if sparse else None,
            gathered=not in_place,
        )

    def _drawn_bytes(self, data, m):
        """What a fit holds for its ``m`` (``init_size``) drawn rows, as (name,
        bytes): the validation rows (their draw, values, weights and labels)
        throughout, and beside them an initialisation's rows (draw, values,
        weights) with scikit-learn's k-means++ work (squared norms, closest
        distances, and the distances of each step's candidates and their
        minimum). Sparse rows count their draws and weights only (the
        values are checked as they are drawn)."""
        row = 0
        if not (is_sparse(data.engine) or sparse_chunks(data)):
            row = data.n_features * (4 if data.float32 else 8)
        trials = 2 + int(math.log(self.n_clusters))
        kpp = isinstance(self.init, str) and self.init == "k-means++"
        drawn = [
            (f"validation rows ({m} drawn rows, their weights and labels)", m * (row + 8 + 8 + 4)),
            (f"initial centres' sample ({m} drawn rows, their weights)", m * (row + 8 + 8)),
            ("k-means++ on the sample (float64)", 8 * m * (2 + 2 * trials) if kpp else 0),
        ]
        return [(name, b) for name, b in drawn if b]

    # -- the step ----------------------------------------------------------

    def _step(self, batch, w, centers, random_state, work=None, float64_centers=False):
        """One engine step on ``batch``; ``centers`` (float64) and the counts
        move in place; light centres are replaced by rows of the batch drawn
        from ``random_state``. The centres keep float64 values with
        ``float64_centers`` (a float32 batch of float64 data, see ``_rows``),
        else the batch's dtype's. Returns (batch inertia, squared centre change)."""
        inertia, diff, to_reassign, pool, self._n_since_last_reassign = _memfit.minibatch_step(
            batch,
            centers=centers,
            counts=self._counts,
            n_since_last_reassign=self._n_since_last_reassign,
            seen=self._batch_size,
            reassignment_ratio=float(self.reassignment_ratio),
            memory_limit=check_memory_limit(self.memory_limit),
            sample_weight=w,
            n_jobs=check_n_jobs(self.n_jobs),
            metric=self.metric,
            work=work,
            float64_centers=float64_centers,
        )
        if to_reassign:
            to_reassign = self._lightest(to_reassign, batch.shape[0], len(pool))
        if to_reassign:
            # The engine's pool: every row, or the rows with a direction.
            rows = np.asarray(pool)[random_state.choice(len(pool), replace=False, size=len(to_reassign))]
            if self.verbose:
                print(f"[MiniBatchKMeans] Reassigning {len(to_reassign)} cluster centers.")
            centers[to_reassign] = _dense(batch[rows])
        return inertia, diff

    def _lightest(self, light, batch_rows, pool_rows):
        """scikit-learn's choice among the ``light`` centres (those the engine
        found below ``reassignment_ratio`` times the heaviest): at most half the
        batch, the lightest as ``np.argsort`` orders the counts (its order among
        ties included). At most ``pool_rows`` of them move (the rows they
        can move to: for ``"cosine"``, the rows with a direction); the counts
        of those that move rise to the smallest count kept, a centre that
        cannot move keeps its count."""
        counts = self._counts
        to_reassign = np.zeros(counts.shape[0], dtype=bool)
        to_reassign[light] = True
        if to_reassign.sum() > 0.5 * batch_rows:
            to_reassign[np.argsort(counts)[int(0.5 * batch_rows):]] = False
        moved = np.flatnonzero(to_reassign)[:pool_rows]
        if not to_reassign.all():
            counts[moved] = np.min(counts[~to_reassign])
        return moved.tolist()

    def _converged(self, stop, step, n_steps, n_samples, centers_squared_diff, batch_inertia):
        """Early stopping (scikit-learn's ``_mini_batch_convergence``, kept
        by the engine's ``stop``) with scikit-learn's verbose messages."""
        why = stop.update(
            step,
            batch_inertia,
            batch_size=self._batch_size,
            n_samples=n_samples,
            centers_squared_diff=centers_squared_diff,
            tol=self._tol,
            max_no_improvement=engine_count(self.max_no_improvement),
        )
        if self.verbose:
            mean = batch_inertia / self._batch_size
            ewa = "" if stop.ewa_inertia is None else f", ewa inertia: {stop.ewa_inertia}"
            print(f"Minibatch step {step + 1}/{n_steps}: mean batch inertia: {mean}{ewa}")
            if why is not None:
                print(f"Converged ({why}) at step {step + 1}/{n_steps}")
        return why is not None

    def _validation_inertia(self, sample, w, centers):
        # Drawn rows and centres are already unit rows for "cosine": the
        # Euclidean assignment is the spherical one.
        labels = np.empty(sample.shape[0], dtype=np.int32)
        return _memfit.assign(
            sample,
            centers=c_float64(centers),
            memory_limit=check_memory_limit(self.memory_limit),
            labels=labels,
            sample_weight=w.reshape(-1, 1),
            n_jobs=check_n_jobs(self.n_jobs),
            float32=sample.dtype == np.float32,
        )

    # -- public API --------------------------------------------------------

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None, sample_weight=None, *, client=None):
        """Compute the centres on X by mini-batches.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features), numpy.memmap, path to a .npy file or dask.array.Array
            Training data.
        y : Ignored
        sample_weight : array-like of shape (n_samples,), scalar, path or None, default=None
            Non-negative weight of each row: batches draw rows with
            probability proportional to it.
        client : distributed.Client, optional
            For a Dask array X (or a memfit array): the cluster whose
            workers compute its chunks, as ``KMeans.fit``'s (default: the
            active client, if any; else the chunks are computed in this
            process).

        Returns
        -------
        self : MiniBatchKMeans
        """
        with _as_current(client), features_kept_on_failure(self), _dask.lost_workers_explained():
            data = check_data(on_cluster(X, client), self, reset=True, accept_sparse=True)
            w_engine = check_sample_weight(sample_weight, data)
            # No weights: unit weights, never held.
            w = None if w_engine is None else self._weights(w_engine, data)
            n = data.n_samples
            self._check_shapes(data)
            batch_size, init_size = self._sizes(n)
            # Planned before X is read (its validation pass reads it all): a
            # fit that cannot fit is refused first. What the fit holds per row
            # (the steps' own buffers are the engine's): the draws' cumulative
            # weights, the weights, labels_.
            held = [("cumulative weights of the rows (float64)", 8 * n)]
            if w_engine is not None:
                held.append(("sample_weight (float64)", 8 * n))
            if sparse_chunks(data):
                held.append(("a computed chunk of X, a batch drawn from it", data.engine.held_bytes))
            if self.compute_labels:
                held.append(("labels_ (int32, returned to Python)", 4 * n))
            held += self._drawn_bytes(data, init_size)
            memory_plan = _memfit.minibatch_plan(
                self.n_clusters,
                data.n_features,
                batch_size,
                memory_limit=check_memory_limit(self.memory_limit),
                held=held,
                n_jobs=check_n_jobs(self.n_jobs),
                float32=data.float32,
                sparse_x=data.engine if is_sparse(data.engine) or sparse_chunks(data) else None,
            )
            mean_variance = self._validate(data, w_engine)
            self._check_params_vs_input(data, mean_variance)
            random_state = check_random_state(self.random_state)
            # Rows are checked as they are drawn; a bad one makes X checked whole,
            # for scikit-learn's message (NaN before infinity, anywhere in X).
            with finite_or_checked(self, data):
                valid = random_state.randint(0, n, self._init_size)
                X_valid, w_valid = self._rows(data, valid), _take(w, valid)
                best = None
                for i in range(self._n_init):
                    if self.verbose:
                        print(f"Init {i + 1}/{self._n_init} with method {self.init}")
                    centers = self._draw_init(data, w, random_state)
                    inertia = self._validation_inertia(X_valid, w_valid, centers)
                    if self.verbose:
                        print(f"Inertia for init {i + 1}/{self._n_init}: {inertia}")
                    if best is None or inertia < best[0]:
                        best = (inertia, centers)
                centers = c_float64(best[1]).copy()
                self._counts = np.zeros(self.n_clusters)
                stop = _memfit.MiniBatchEarlyStop()
                work = _memfit.MiniBatchWork()
                self._n_since_last_reassign = 0
                weight_sum = float(n) if w is None else float(w.sum())
                n_steps = (self.max_iter * n) // self._batch_size
                # RandomState.choice(n, size, p=w / w.sum()) draws, without its O(n)
                # cumulative sum per step: the same uniform draws and search.
                cdf = np.empty(n)
                if w is None:
                    cdf.fill(1.0 / weight_sum)
                else:
                    np.divide(w, weight_sum, out=cdf)
                np.cumsum(cdf, out=cdf)
                cdf /= cdf[-1]
                i, batch = -1, None
                for i in range(n_steps):
                    idx = cdf.searchsorted(random_state.random_sample(self._batch_size), side="right")
                    batch = self._rows(data, idx, out=batch, exact=True)
                    previous = centers.copy() if self._tol > 0 else None
                    inertia, _ = self._step(batch, None, centers, random_state, work, float64_centers=not data.float32)
                    diff = float(np.sum((centers - previous) ** 2)) if previous is not None else 0.0
                    if self._converged(stop, i, n_steps, n, diff, inertia):
                        break
            # The steps' buffers, the last batch, the draws' cumulative weights,
            # the weights' copy and the validation rows go before the final pass
            # plans its own within the limit.
            del work, batch, cdf, w, X_valid, w_valid
            self.cluster_centers_ = centers.astype(data.out_dtype)
            self.memory_plan_ = memory_plan
            self._n_features_out = self.cluster_centers_.shape[0]
            self.n_steps_ = i + 1
            self.n_iter_ = int(np.ceil(((i + 1) * self._batch_size) / n))
            if self.compute_labels:
                self.labels_, self.inertia_ = self._labels_once_warned(data, w_engine)
            else:
                self.inertia_ = float(stop.ewa_inertia * weight_sum) if stop.ewa_inertia is not None else np.nan
            return self

    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y=None, sample_weight=None, *, client=None):
        """Update the centres with one mini-batch X.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features), numpy.memmap, path to a .npy file or dask.array.Array
            The batch (read whole: it must fit ``memory_limit``). The centres
            keep the dtype of the first batch's (float32 or float64); a later
            batch of another dtype updates them in that dtype (scikit-learn
            raises a buffer dtype mismatch).
        y : Ignored
        sample_weight : array-like of shape (n_samples,), scalar, path or None, default=None
            Non-negative weight of each row.
        client : distributed.Client, optional
            As :meth:`fit`'s.

        Returns
        -------
        self : MiniBatchKMeans
        """
        has_centers = hasattr(self, "cluster_centers_")
        with _as_current(client), features_kept_on_failure(self), _dask.lost_workers_explained():
            data = check_data(on_cluster(X, client), self, reset=not has_centers, accept_sparse=True)
            w_engine = check_sample_weight(sample_weight, data)
            # No weights: unit weights, never held.
            w = None if w_engine is None else self._weights(w_engine, data)
            x = data.engine
            in_place = (
                self.metric == "euclidean"
                and isinstance(x, np.ndarray)
                and x.flags.c_contiguous
                and x.dtype == (np.float32 if data.float32 else np.float64)
            )
            self._plan_batch(data, in_place)
            mean_variance = self._validate(data, w_engine)
            self._random_state = getattr(self, "_random_state", check_random_state(self.random_state))
            self.n_steps_ = getattr(self, "n_steps_", 0)
            if in_place:
                batch = x  # checked by the validation pass: the step reads it where it lies
            else:
                with finite_or_checked(self, data):
                    batch = self._rows(data, np.arange(data.n_samples))
            if not has_centers:
                self._check_shapes(data)
                self._check_params_vs_input(data, mean_variance)
                self.cluster_centers_ = self._partial_init(data, batch, w)
                self._counts = np.zeros(self.n_clusters)
                self._n_since_last_reassign = 0
            # The centres keep the dtype of the first batch (scikit-learn raises
            # on a batch of another float dtype).
            out_dtype = self.cluster_centers_.dtype if has_centers else np.dtype(data.out_dtype)
            centers = c_float64(self.cluster_centers_).copy()
            with finite_or_checked(self, data):
                self._step(batch, w, centers, self._random_state, float64_centers=out_dtype == np.float64)
            self.cluster_centers_ = centers.astype(out_dtype)
            if self.compute_labels:
                # As predict(X) labels them (X and the weights checked above).
                self.labels_, self.inertia_ = self._labels_once_warned(data, w_engine)
            self.n_steps_ += 1
            self._n_features_out = self.cluster_centers_.shape[0]
            return self

    def fit_predict(self, X, y=None, sample_weight=None, *, client=None):
        """Fit and return the label of each row (``labels_``).

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features), numpy.memmap, path to a .npy file or dask.array.Array
        y : Ignored
        sample_weight : array-like of shape (n_samples,), scalar, path or None, default=None
        client : distributed.Client, optional
            As :meth:`fit`'s.

        Returns
        -------
        labels : ndarray of shape (n_samples,), dtype int32
            ``labels_`` (computed by the fit's last pass); for a Dask X, as
            a dask.array.Array with X's row chunks holding them.
        """
        return self.fit(X, sample_weight=sample_weight, client=client).labels_

    def _labels_once_warned(self, data, w):
        """(labels, inertia) of the fit's X, whose validation pass already
        warned about values its compute dtype does not hold exactly (the
        labels pass reads them again and would warn again); for a Dask X
        the labels as a Dask array with its row chunks."""
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r".*: column \d+ holds ", category=UserWarning)
            labels, inertia = self._assign_checked(data, w)
        if data.dask is not None:
            # Per-row results of a Dask X are Dask arrays with its row chunks
            # (as KMeans's), here over the labels the pass computed.
            import dask.array as da

            labels = da.from_array(labels, chunks=(data.dask.input.chunks[0],))
        return labels, float(inertia)

    def _partial_init(self, data, batch, w):
        """Initial centres for ``partial_fit`` from its first batch."""
        n = batch.shape[0]
        if self._init_size < n:
            idx = self._random_state.randint(0, n, self._init_size)
            return self._init_centroids(data, batch[idx], _take(w, idx), self._random_state)
        return self._init_centroids(data, batch, np.ones(n) if w is None else w, self._random_state)
