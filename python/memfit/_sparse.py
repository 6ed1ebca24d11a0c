"""scipy.sparse input as the engine reads it: which objects are sparse
matrices, and a matrix checked and put in the canonical CSR form the
engine borrows in place (``sparse_input``)."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from . import _memfit


def is_sparse(X: Any) -> bool:
    # Without scipy.sparse imported, X cannot be one of its matrices.
    sp = sys.modules.get("scipy.sparse")
    return sp is not None and sp.issparse(X)


def _check_compressed(X: Any, name: str, first_row: int = 0) -> None:
    """The offsets and indices of a CSR or CSC matrix as scipy's own
    routines (``tocsr``, ``sum_duplicates``) and scikit-learn's sparse
    statistics assume them, checked before any of them runs: a matrix
    built by hand with an index out of range or decreasing offsets would
    otherwise crash them or be silently changed into another matrix. (The
    engine checks the rest, the columns' order within a row, as it reads.)
    Rows are named from ``first_row`` (X's rows, for a chunk of X)."""
    major, minor = X.shape if X.format == "csr" else X.shape[::-1]
    what = "row" if X.format == "csr" else "column"
    indptr, indices = np.asarray(X.indptr), np.asarray(X.indices)
    why = None
    if indptr.ndim != 1 or indptr.size != major + 1:
        why = f"indptr holds {indptr.size} offsets, expected {major + 1}"
    elif indices.ndim != 1 or indices.size != np.asarray(X.data).size:
        why = f"indices holds {indices.size} entries but data {np.asarray(X.data).size}"
    elif indptr[0] != 0 or indptr[-1] != indices.size:
        why = f"indptr runs from {indptr[0]} to {indptr[-1]}, expected 0 to len(data) = {indices.size}"
    elif (np.diff(indptr) < 0).any():
        i = int(np.argmax(np.diff(indptr) < 0))
        why = f"indptr decreases at {what} {i + (first_row if what == 'row' else 0)} ({indptr[i]} then {indptr[i + 1]})"
    elif indices.size and (indices.min() < 0 or indices.max() >= minor):
        p = int(np.argmax((indices < 0) | (indices >= minor)))
        i = int(np.searchsorted(indptr, p, side="right") - 1)
        why = f"{what} {i + (first_row if what == 'row' else 0)} has index {indices[p]}, outside 0..{minor}"
    if why is not None:
        raise ValueError(f"the sparse matrix {name} is not valid {X.format.upper()}: {why}")


def _is_canonical(X: Any, step: int = 1 << 20) -> bool:
    """Whether every row of the CSR matrix ``X`` holds strictly increasing
    column indices, found by one pass over them in pieces of ``step``
    (temporaries of a piece only). scipy caches the answer in
    ``X.has_canonical_format``, which an in-place change of ``X.indices``
    leaves stale; a fresh scipy matrix over the same arrays would compute it
    again, but copies 64-bit indices that fit 32 bits."""
    indptr, indices = np.asarray(X.indptr), np.asarray(X.indices)
    for a in range(0, max(indices.size - 1, 0), step):
        b = min(indices.size, a + step + 1)
        rising = indices[a + 1:b] > indices[a:b - 1]
        # Pairs that straddle two rows: p + 1 starts a row.
        starts = indptr[np.searchsorted(indptr, a + 1):np.searchsorted(indptr, b - 1, side="right")]
        rising[starts - a - 1] = True
        if not rising.all():
            return False
    return True


def _warn_inexact(X: Any) -> None:
    """The engine's warning for integer values that float64 rounds (beyond
    2^53 in magnitude): the first in row-major order (as dense input
    warns)."""
    if X.dtype.kind not in "iu" or not X.nnz:
        return
    limit = _memfit.inexact_integer_limit(X.dtype.name, "float64")
    if limit is None:
        return
    big = X.data > limit
    if X.dtype.kind == "i":
        big |= X.data < -limit
    at = np.flatnonzero(big)
    if not at.size:
        return
    rows = np.searchsorted(X.indptr, at, side="right") - 1
    k = np.lexsort((X.indices[at], rows))[0]
    found = _memfit.inexact_integer_warning(int(rows[k]), int(X.indices[at[k]]), int(X.data[at[k]]), X.dtype.name, "float64")
    from ._validation import emit_warnings

    emit_warnings([found], stacklevel=4)


def sparse_input(X: Any, name: str = "X", first_row: int = 0, warn: bool = False) -> Any:
    """A ``scipy.sparse`` matrix or array as the engine reads it in place:
    CSR in canonical form (sorted column indices, no duplicates) with
    float32 or float64 values and offsets and columns of one integer dtype.
    As scikit-learn's ``check_array(accept_sparse="csr", dtype=[float64,
    float32])``, other formats are converted to CSR and other dtypes to
    float64 (copies); a non-canonical CSR matrix is copied and its
    duplicates summed (``sum_duplicates``), never changed in place. A
    canonical CSR matrix of those dtypes is borrowed, not copied. Errors
    name rows from ``first_row`` (X's rows, for a chunk of X). With
    ``warn``, 64-bit integers that float64 rounds are warned about as a
    dense X's are (UserWarning).

    Raises
    ------
    ValueError
        For complex values or another number of dimensions than 2.
    """
    if len(X.shape) < 2:
        # scikit-learn's check_array for sparse input.
        raise ValueError(
            f"Expected 2D input, got input with shape {X.shape}.\n"
            "Reshape your data either using array.reshape(-1, 1) if your data has a single feature or "
            "array.reshape(1, -1) if it contains a single sample."
        )
    if len(X.shape) != 2:
        raise ValueError(f"Expected 2D array, got {len(X.shape)}D array instead ({name} has shape {X.shape}).")
    if np.iscomplexobj(X.data if hasattr(X, "data") else np.empty(0, X.dtype)):
        raise ValueError(f"Complex data not supported: {name} has dtype {X.dtype}")
    if X.format in ("csr", "csc"):
        _check_compressed(X, name, first_row)
    if X.format != "csr":
        X = X.tocsr()
    if warn:
        _warn_inexact(X)
    if X.dtype not in (np.float32, np.float64):
        X = X.astype(np.float64)
    if not _is_canonical(X):
        X = X.copy()
        # The copy may carry X's stale flags, which would make scipy skip the work.
        X.has_sorted_indices = False
        X.has_canonical_format = False
        X.sum_duplicates()
    index = np.int32 if X.indptr.dtype == X.indices.dtype == np.int32 else np.int64
    arrays = (X.data, X.indices, X.indptr)
    # Arrays unpickled on a Dask worker may be misaligned: the engine borrows aligned ones.
    if X.indptr.dtype != index or X.indices.dtype != index or not all(a.flags.c_contiguous and a.flags.aligned for a in arrays):
        X = type(X)(
            (
                np.require(X.data, requirements=["C", "A"]),
                np.require(X.indices, dtype=index, requirements=["C", "A"]),
                np.require(X.indptr, dtype=index, requirements=["C", "A"]),
            ),
            shape=X.shape,
        )
    return X
