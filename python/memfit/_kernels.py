"""Blocked kernels for NumPy users: each reads X in row blocks within
``memory_limit`` and never builds an ``(n_samples, n_features)`` or
``(n_samples, n_clusters)`` temporary."""

from __future__ import annotations

import numpy as np

from . import _memfit
from ._options import check_memory_limit, check_n_jobs
from ._validation import check_data, check_sample_weight, small_array


def row_quadratic_form(X, Q, *, memory_limit=None, n_jobs=None):
    """Row-wise quadratic form ``q_i = x_iᵀ Q x_i``, i.e.
    ``np.sum((X @ Q) * X, axis=1)`` without the ``X @ Q`` temporary.

    Per tile of 256 rows, ``X_t Q`` is one GEMM into a per-thread tile and
    each row's dot product with itself is summed in float64.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features), numpy.memmap, path to a .npy file or dask.array.Array
        float32 data are multiplied in float32 (in float64 when a value of Q
        is beyond float32's normal range: NumPy's float64 result, where
        float32 would lose it), every other dtype in float64.
    Q : array-like of shape (n_features, n_features)
        Any square matrix (need not be symmetric).
    memory_limit : int, str or None, default=None
        Bytes for every buffer (``"2GiB"``; None: half of the available
        memory, shared among joblib's workers as for :class:`memfit.KMeans`);
        the result (8 bytes per row) is the caller's.
    n_jobs : int or None, default=None
        Worker threads (None: the CPUs this process may use, at most
        ``OMP_NUM_THREADS`` and a ``threadpoolctl`` limit; -1: all those CPUs).

    Returns
    -------
    q : ndarray of shape (n_samples,), float64
        A lazy dask.array.Array with X's row chunks when X is a Dask array.

    Raises
    ------
    ValueError
        Q of the wrong shape, non-finite values, a result that overflows float64.
    MemoryError
        ``memory_limit`` cannot hold Q and one tile of rows.
    OSError
        A path that cannot be read.
    """
    data = check_data(X)
    Q = small_array(Q, "Q", 2, estimator=False)
    if Q.shape != (data.n_features, data.n_features):
        raise ValueError(f"Q has shape {Q.shape}, but X has {data.n_features} features: Q must be ({data.n_features}, {data.n_features})")
    if data.dask is not None:
        return data.dask.map_rows(_QuadraticForm(Q), check_memory_limit(memory_limit), None, np.float64)
    out = np.empty(data.n_samples, dtype=np.float64)
    _memfit.row_quadratic_form(
        data.engine,
        q=Q,
        memory_limit=check_memory_limit(memory_limit),
        out=out,
        n_jobs=check_n_jobs(n_jobs),
        float32=data.float32,
    )
    return out


class _QuadraticForm:
    """A Dask task's :func:`row_quadratic_form` of one chunk."""

    def __init__(self, Q):
        self.Q = Q

    def __call__(self, limit, block):
        return row_quadratic_form(block, self.Q, memory_limit=limit, n_jobs=1)


class _Assign:
    """A Dask task's :func:`assign` of one chunk: ``(rows, 2)`` float64
    (label, squared distance); labels are exact in float64."""

    def __init__(self, centers):
        self.centers = centers

    def __call__(self, limit, block):
        labels, dist = assign(block, self.centers, memory_limit=limit, n_jobs=1)
        return np.stack([labels.astype(np.float64), dist], axis=1)


def weighted_scatter(X, w=None, *, memory_limit=None, n_jobs=None, client=None):
    """Weighted scatter matrix ``S = Xᵀ diag(w) X = Σ_i w_i x_i x_iᵀ``, i.e.
    ``(X.T * w) @ X`` without the ``X.T * w`` temporary.

    Each tile of 256 rows adds ``X_tᵀ (w_t ∘ X_t)`` by one GEMM, in float64,
    in row order (the result does not depend on ``n_jobs`` or the limit).

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features), numpy.memmap, path to a .npy file or dask.array.Array
    w : array-like of shape (n_samples,), scalar, path or None, default=None
        Finite weights of any sign (all ones when None).
    memory_limit : int, str or None, default=None
    n_jobs : int or None, default=None

    Returns
    -------
    S : ndarray of shape (n_features, n_features), float64

    Raises
    ------
    ValueError
        Weights of the wrong length, non-finite values, a result that overflows float64.
    MemoryError
        ``memory_limit`` cannot hold S and one tile of rows.
    OSError
        A path that cannot be read.
    """
    data = check_data(X)
    weights = check_sample_weight(w, data, name="w", all_zero=True)
    limit = check_memory_limit(memory_limit)
    cluster = {} if data.dask is None else data.dask.fit_kwargs(client, weights, limit)
    return _memfit.weighted_scatter(data.engine, memory_limit=limit, w=weights, n_jobs=check_n_jobs(n_jobs), **cluster)


def assign(X, centers, *, memory_limit=None, n_jobs=None):
    """Nearest centre of each row and the squared distance to it, without
    the ``(n_samples, n_clusters)`` distance matrix.

    The label is the exact nearest centre, whatever the data's distance from
    the origin, unless two centres are tied within float64 rounding of the
    squared distances: candidates come from the GEMM identity on data shifted
    to the centres' mean (k-means' fused kernel), certified by its error
    bound, and rows the bound cannot decide are decided from exact float64
    differences. The squared distance is computed from exact differences.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features), numpy.memmap, path to a .npy file or dask.array.Array
        float32 data are computed in float32, every other dtype in float64.
    centers : array-like of shape (n_clusters, n_features)
    memory_limit : int, str or None, default=None
    n_jobs : int or None, default=None

    Returns
    -------
    labels : ndarray of shape (n_samples,), int32
        A lazy dask.array.Array with X's row chunks when X is a Dask array.
        Index of the nearest centre (the lowest index on ties).
    sq_distances : ndarray of shape (n_samples,), float64
        A lazy dask.array.Array with X's row chunks when X is a Dask array.
        Squared Euclidean distance to that centre.

    Raises
    ------
    ValueError
        Centres of the wrong width, non-finite values.
    MemoryError
        ``memory_limit`` cannot hold the centres and one tile of rows.
    OSError
        A path that cannot be read.
    """
    data = check_data(X)
    centers = small_array(centers, "centers", 2, estimator=False)
    if centers.ndim != 2 or centers.shape[1] != data.n_features or centers.shape[0] < 1:
        raise ValueError(f"centers has shape {centers.shape}, but (n_clusters, {data.n_features}) is required")
    if data.dask is not None:
        both = data.dask.map_rows(_Assign(centers), check_memory_limit(memory_limit), 2, np.float64)
        return both[:, 0].astype(np.int32), both[:, 1]
    labels = np.empty(data.n_samples, dtype=np.int32)
    dist = np.empty(data.n_samples, dtype=np.float64)
    _memfit.assign(
        data.engine,
        centers=centers,
        memory_limit=check_memory_limit(memory_limit),
        labels=labels,
        distances=dist,
        n_jobs=check_n_jobs(n_jobs),
        float32=data.float32,
    )
    return labels, dist
