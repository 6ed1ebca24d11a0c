"""NumPy functions whose result's size depends on the values: ``bincount``,
``histogram`` (and ``histogram_bin_edges``) and ``unique`` of a lazy array, in
one streamed pass with bounded state (a ``histogram`` without a range first
takes the minimum and maximum, both in one pass).

The array's values are read in consecutive row blocks computed by the engine
within the memory limit (``memfit._memfit.Expr.row_blocks``: its intermediates
once, then each block as large as the limit allows). Counts are integers, so
any split gives the same counts; sums of float weights are folded per fixed
piece of :data:`PIECE` elements of the flattened array, in order, so their
bits do not depend on the memory limit or the number of threads either (they
may differ from NumPy's, which adds every weight in one sequence, in the last
bits). The results are NumPy arrays, as NumPy's are.
"""

from __future__ import annotations

import warnings
from typing import Any, Iterator

import numpy as np

from .._options import check_memory_limit, check_n_jobs
from ._core import Array, operand

#: Elements of the flattened array per fixed piece: float partial sums
#: (weights) are folded piece after piece in this order.
PIECE = 1 << 16


def _blocks(x: Array, memory_limit: Any, n_jobs: Any) -> Iterator[np.ndarray]:
    """The flattened (C-order) values of ``x`` in consecutive blocks."""
    if x.size == 0:
        return
    column = x.reshape(x.size, 1)
    for block in column._expr.row_blocks(check_memory_limit(memory_limit), check_n_jobs(n_jobs)):
        yield block.reshape(-1)


def _pieces(x: Array, memory_limit: Any, n_jobs: Any) -> Iterator[np.ndarray]:
    """The flattened values of ``x`` in consecutive pieces of :data:`PIECE`
    elements (the last one shorter), whatever the blocks read."""
    carry = np.empty(0, dtype=x.dtype)
    for block in _blocks(x, memory_limit, n_jobs):
        start = 0
        if carry.size:
            # Complete the piece begun in the block before (a copy of at
            # most one piece, never of the block).
            start = min(PIECE - carry.size, block.size)
            carry = np.concatenate([carry, block[:start]])
            if carry.size < PIECE:
                continue
            yield carry
        end = start + (block.size - start) // PIECE * PIECE
        for s in range(start, end, PIECE):
            yield block[s:s + PIECE]
        carry = block[end:].copy()
    if carry.size:
        yield carry


def bincount(x: Any, weights: Any = None, minlength: Any = 0, *, memory_limit: Any = None, n_jobs: Any = None) -> np.ndarray:
    """``numpy.bincount`` of a lazy array: the number of occurrences of each
    value ``0 .. max(x)`` (or the sum of ``weights`` at them), in one pass.

    Parameters
    ----------
    x : array-like or Array, 1-d, non-negative integers (or bool)
    weights : array-like or Array of the same shape, optional
        Cast to float64.
    minlength : int, default=0
        Least length of the result.
    memory_limit : int, str or None, default=None
        Bytes for the evaluation (None: half of the available memory).
    n_jobs : int or None, default=None
        Threads for the array's intermediates.

    Returns
    -------
    numpy.ndarray
        int64 counts, or float64 sums of weights, of length
        ``max(max(x) + 1, minlength)``.

    Raises
    ------
    ValueError
        ``x`` not 1-d, a negative value, weights of another length,
        negative ``minlength`` (NumPy's messages).
    TypeError
        Values that do not cast safely to int64 (floats), ``minlength=None``.
    """
    a = operand(x)
    if a.ndim != 1:
        raise ValueError("object of too small depth for desired array" if a.ndim == 0 else "object too deep for desired array")
    # NumPy's own checks of the dtype and of minlength, on no values.
    np.bincount(np.zeros(0, dtype=a.dtype), minlength=minlength)
    w = None
    if weights is not None:
        w = operand(weights)
        if w.shape != a.shape:
            raise ValueError("The weights and list don't have the same length.")
        w = w.astype(np.float64)
    if a.size == 0:
        # NumPy's result of no values (int64 even with weights).
        return np.bincount(np.zeros(0, dtype=a.dtype), weights=None if w is None else np.zeros(0), minlength=minlength)
    # Each piece's values are added into the result in place, in order (the
    # weights' sums are NumPy's, bit for bit): a piece never allocates a
    # result of its own (that cost a result-sized array per piece). The
    # result grows in place by half again at least, and is cut to its length.
    length = int(minlength)
    total = np.zeros(length, dtype=np.intp if w is None else np.float64)
    values = _pieces(a, memory_limit, n_jobs)
    sums = _pieces(w, memory_limit, n_jobs) if w is not None else None
    for piece in values:
        piece = piece.astype(np.intp, copy=False)
        if piece.min() < 0:
            raise ValueError("'list' argument must have no negative elements")
        length = max(length, int(piece.max()) + 1)
        if length > total.size:
            total.resize(max(length, total.size + total.size // 2), refcheck=False)
        np.add.at(total, piece, 1 if sums is None else next(sums))
    total.resize(length, refcheck=False)
    return total


def histogram_bin_edges(a: Any, bins: Any = 10, range: Any = None, weights: Any = None, *, memory_limit: Any = None, n_jobs: Any = None) -> np.ndarray:  # noqa: A002
    """``numpy.histogram_bin_edges`` of a lazy array: without ``range``, the
    minimum and maximum are computed (one pass for both).

    Parameters
    ----------
    a : array-like or Array (flattened)
    bins : int or sequence of scalars, default=10
        A number of equal-width bins, or the edges (increasing). NumPy's
        named estimators (``"auto"``, ``"fd"``, ...) need the data's
        percentiles and are not supported.
    range : (float, float), optional
    weights : ignored (as by NumPy's equal-width bins)
    memory_limit, n_jobs : as :func:`bincount`

    Returns
    -------
    numpy.ndarray
        The ``bins + 1`` edges, as NumPy computes them.

    Raises
    ------
    ValueError
        A range autodetected as not finite, bad bins or range (NumPy's messages).
    TypeError
        A named estimator for ``bins``.
    """
    x = _subtractable(a)
    edges = _edges(x, bins, range, memory_limit, n_jobs)[0]
    return edges


def _subtractable(a: Any) -> Array:
    """``a`` as NumPy's histogram functions take it: bool values as uint8
    (NumPy's RuntimeWarning included), so that its range can be subtracted."""
    x = operand(a)
    if x.dtype == np.bool_:
        warnings.warn(f"Converting input from {x.dtype} to {np.uint8} for compatibility.", RuntimeWarning, stacklevel=3)
        x = x.astype(np.uint8)
    return x


def _edges(x: Array, bins: Any, range: Any, memory_limit: Any, n_jobs: Any) -> tuple:  # noqa: A002
    """The edges, and the arguments of NumPy's histogram of one piece that
    bins it as NumPy bins the whole array: the number of bins and the range
    NumPy would use (the user's, or the data's minimum and maximum as
    scalars of its dtype), or the edges given."""
    if isinstance(bins, str):
        raise TypeError(
            f"memfit.array.histogram does not support bins={bins!r}: NumPy's named bin estimators need the data's "
            "percentiles; pass a number of bins or the edges, or compute the array first"
        )
    if isinstance(bins, Array):
        bins = bins.compute()
    none = np.zeros(0, dtype=x.dtype)
    if np.ndim(bins) == 0 and range is None and x.size:
        from ._compute import compute
        from ._functions import max as amax
        from ._functions import min as amin

        lo, hi = compute(amin(x), amax(x), memory_limit=memory_limit, n_jobs=n_jobs)
        range = (np.asarray(lo)[()], np.asarray(hi)[()])  # noqa: A001
        # NumPy's edges from the data's range (its checks and its widening of
        # an empty range included).
        edges = np.histogram_bin_edges(np.array(range, dtype=x.dtype), bins)
    else:
        edges = np.histogram_bin_edges(none, bins, range=range)
    per_piece = {"bins": bins, "range": range} if np.ndim(bins) == 0 else {"bins": edges}
    return edges, per_piece


def histogram(a: Any, bins: Any = 10, range: Any = None, density: Any = None, weights: Any = None, *, memory_limit: Any = None, n_jobs: Any = None) -> tuple:  # noqa: A002
    """``numpy.histogram`` of a lazy array, in one pass over the values (two
    when the range is not given: the minimum and maximum first).

    Parameters
    ----------
    a : array-like or Array (flattened)
    bins : int or sequence of scalars, default=10
        See :func:`histogram_bin_edges`.
    range : (float, float), optional
        Values outside are ignored.
    density : bool, optional
        The probability density (counts / bin width / total).
    weights : array-like or Array of ``a``'s shape, optional
    memory_limit, n_jobs : as :func:`bincount`

    Returns
    -------
    hist : numpy.ndarray
        int64 counts, or float64 (weights or density).
    bin_edges : numpy.ndarray
        float64, length ``len(hist) + 1``.

    Raises
    ------
    ValueError, TypeError
        As :func:`histogram_bin_edges`; weights of another shape.
    """
    x = _subtractable(a)
    w = None
    if weights is not None:
        w = operand(weights)
        if w.shape != x.shape:
            raise ValueError("weights should have the same shape as a.")
    edges, per_piece = _edges(x, bins, range, memory_limit, n_jobs)
    if edges.size < 2:
        return np.histogram(np.zeros(0, dtype=x.dtype), bins=edges, density=density)
    # NumPy's count dtype (the weights'); it bins in blocks of 65,536 values,
    # as the pieces are, adding each block's counts in that dtype.
    counts = np.zeros(edges.size - 1, dtype=np.intp if w is None else w.dtype)
    sums = _pieces(w, memory_limit, n_jobs) if w is not None else None
    if sums is not None and np.ndim(bins) != 0:
        # Edges given, weights: NumPy adds each block's cumulative weights at
        # the edges and takes their differences once, at the end.
        cumulative = np.zeros(edges.size, dtype=counts.dtype)
        for piece in _pieces(x, memory_limit, n_jobs):
            order = np.argsort(piece)
            ordered = piece[order]
            running = np.concatenate((np.zeros(1, dtype=counts.dtype), next(sums)[order].cumsum()))
            at = np.concatenate((ordered.searchsorted(edges[:-1], "left"), ordered.searchsorted(edges[-1:], "right")))
            cumulative += running[at]
        counts = np.diff(cumulative)
    else:
        for piece in _pieces(x, memory_limit, n_jobs):
            part, _ = np.histogram(piece, weights=None if sums is None else next(sums), **per_piece)
            counts += part
    if density:
        db = np.diff(edges).astype(np.float64)
        return counts / db / counts.sum(), edges
    return counts, edges


def unique(ar: Any, return_index: Any = False, return_inverse: Any = False, return_counts: Any = False, axis: Any = None, *, equal_nan: Any = True, sorted: Any = True, memory_limit: Any = None, n_jobs: Any = None) -> Any:  # noqa: A002
    """``numpy.unique`` of a lazy array (flattened), in one pass: each block's
    distinct values, merged; the state is the distinct values found so far
    (and a second pass for ``return_inverse``).

    Parameters
    ----------
    ar : array-like or Array
    return_index : bool, default=False
        Also the index (in the flattened array) of each value's first
        occurrence.
    return_inverse : bool, default=False
        Also, for each element, the index of its value among the distinct
        values (``ar``'s shape, intp), by a second pass; it is a result as
        large as the array, held in memory (8 bytes per element) beside the
        limit's working memory.
    return_counts : bool, default=False
        Also the number of occurrences of each value.
    axis : None
        Only the flattened array is supported.
    equal_nan : bool, default=True
        NaNs count as one value.
    sorted : bool, default=True
        The values are always sorted.
    memory_limit, n_jobs : as :func:`bincount`

    Returns
    -------
    numpy.ndarray or tuple of numpy.ndarray
        The sorted distinct values (``ar``'s dtype), then the first indices,
        the inverse and the counts (intp) when asked for, in NumPy's order.

    Raises
    ------
    TypeError
        ``axis`` (unique slices).
    """
    if axis is not None:
        raise TypeError(
            "memfit.array.unique does not support axis= (unique slices); compute the array first "
            "(np.asarray(x) or x.compute(), within the memory limit)"
        )
    x = operand(ar)
    values = np.zeros(0, dtype=x.dtype)
    first = np.zeros(0, dtype=np.intp)
    counts = np.zeros(0, dtype=np.intp)
    pending: list = []
    pending_size = 0
    offset = 0

    # First indices and counts are carried only when asked for: each value
    # found then holds 24 bytes, and a merge about three times that.
    keep_i, keep_c = bool(return_index), bool(return_counts)

    def merge(values, first, counts, parts):
        # Sorted by value, equal values in the order they were found (a
        # stable sort of the parts in block order, whose first indices
        # increase): each group's first entry is its first occurrence.
        v = np.concatenate([values, *(p[0] for p in parts)])
        if keep_i or keep_c:
            order = np.argsort(v, kind="stable")
            v = v[order]
            i = np.concatenate([first, *(p[1] for p in parts)])[order] if keep_i else first
            c = np.concatenate([counts, *(p[2] for p in parts)])[order] if keep_c else counts
            del order
        else:
            v.sort(kind="stable")
            i, c = first, counts
        if v.size == 0:
            return v, i, c
        new = np.ones(v.size, dtype=bool)
        np.not_equal(v[1:], v[:-1], out=new[1:])
        if equal_nan and v.dtype.kind == "f":
            new[1:] &= ~(np.isnan(v[1:]) & np.isnan(v[:-1]))
        starts = np.flatnonzero(new)
        del new
        v = v[starts]
        i = i[starts] if keep_i else i
        c = np.add.reduceat(c, starts).astype(np.intp) if keep_c else c
        return v, i, c

    # -0.0 and 0.0 are one value: the one kept is the first occurrence's (as
    # NumPy's with return_index), never the blocks' (which depend on the limit).
    negative_zero = None
    for block in _blocks(x, memory_limit, n_jobs):
        if negative_zero is None and x.dtype.kind == "f":
            flat = block.reshape(-1)
            at = int(np.argmax(flat == 0))
            if flat.size and flat[at] == 0:
                negative_zero = bool(np.signbit(flat[at]))
        found = np.unique(block, return_index=keep_i, return_counts=keep_c, equal_nan=bool(equal_nan))
        u, *rest = found if keep_i or keep_c else (found,)
        i = rest.pop(0) + offset if keep_i else first
        c = rest.pop(0) if keep_c else counts
        pending.append((u, i, c))
        pending_size += u.size
        offset += block.size
        # Merge when the pending parts outgrow the values found so far.
        if pending_size > max(values.size, PIECE):
            values, first, counts = merge(values, first, counts, pending)
            pending, pending_size = [], 0
    if pending or x.size == 0:
        values, first, counts = merge(values, first, counts, pending)
    if negative_zero is not None:
        values[values == 0] = -0.0 if negative_zero else 0.0
    out = [values]
    if return_index:
        out.append(first)
    if return_inverse:
        out.append(_inverse(x, values, bool(equal_nan), memory_limit, n_jobs))
    if return_counts:
        out.append(counts)
    return out[0] if len(out) == 1 else tuple(out)


def _inverse(x: Array, values: np.ndarray, equal_nan: bool, memory_limit: Any, n_jobs: Any) -> np.ndarray:
    """Each element's index in the sorted distinct ``values``, in ``x``'s
    shape: one more pass, block by block into the result. NaNs (sorted
    last) go to the first NaN's index, or with ``equal_nan=False`` each to
    its own, in order of occurrence."""
    inverse = np.empty(x.size, dtype=np.intp)
    nan_at = int(np.searchsorted(values, np.nan)) if values.dtype.kind in "fc" else values.size
    seen_nans = 0
    at = 0
    for block in _blocks(x, memory_limit, n_jobs):
        flat = block.reshape(-1)
        idx = np.searchsorted(values, flat)
        if nan_at < values.size:
            nans = np.flatnonzero(np.isnan(flat))
            idx[nans] = nan_at if equal_nan else nan_at + seen_nans + np.arange(nans.size)
            seen_nans += nans.size
        inverse[at:at + flat.size] = idx
        at += flat.size
    return inverse.reshape(x.shape)
