"""Several lazy arrays evaluated in one job: :func:`compute` and
:func:`store`, with Dask's names and calling conventions."""

from __future__ import annotations

import os
from typing import Any, Sequence

from .. import _memfit
from .._options import check_memory_limit, check_n_jobs
from ._core import Array, Plan, _zarr_path, zarr_chunks


def compute(*args: Any, traverse: bool = True, memory_limit: Any = None, n_jobs: Any = None) -> tuple:
    """Evaluates several lazy arrays together, as ``dask.compute`` does.

    The arrays are evaluated in one job: a subexpression they share (equal
    expressions built separately count as shared) is computed once, so
    ``compute(x.mean(0), x.std(0))`` reads ``x`` for its mean once and
    ``compute(m, (x - m) / s)`` computes ``m`` once. Each result is bitwise
    identical to the array's own :meth:`Array.compute`, for any ``n_jobs``
    and ``memory_limit``.

    Parameters
    ----------
    *args : Array or any object
        Lazy arrays to evaluate, also inside lists, tuples and dicts
        (rebuilt with the computed arrays, as Dask does); other arguments
        are returned unchanged.
    traverse : bool, default=True
        Look inside those containers (False: only top-level arrays).
    memory_limit : int, str or None, default=None
        Bytes for every buffer of the evaluation, all results included
        (None: half of the available memory).
    n_jobs : int or None, default=None
        Worker threads, as in :meth:`Array.compute`.

    Returns
    -------
    tuple
        One item per argument: a NumPy array for each lazy array (in
        containers too), the argument itself otherwise.

    Raises
    ------
    MemoryError
        The results together, or one minimal block of the plan, do not fit
        ``memory_limit`` (before anything runs).
    OSError
        An input file that cannot be read.

    Warns
    -----
    RuntimeWarning
        Values that became inf or NaN from finite inputs, one warning per kind
        (overflow, divide by zero, invalid value) with its count, as
        ``np.errstate`` asks (``"raise"``: ``FloatingPointError``).
    """
    found: list = []

    def collect(a: Any, depth: int) -> None:
        if isinstance(a, Array):
            found.append(a)
        elif traverse and depth < _MAX_DEPTH and isinstance(a, (list, tuple)):
            for b in a:
                collect(b, depth + 1)
        elif traverse and depth < _MAX_DEPTH and isinstance(a, dict):
            for b in a.values():
                collect(b, depth + 1)

    for a in args:
        collect(a, 0)
    if not found:
        return tuple(args)
    exprs = [a._expr for a in found]
    values = iter(_memfit.compute_all(exprs, [None] * len(exprs), check_memory_limit(memory_limit), check_n_jobs(n_jobs)))

    def rebuild(a: Any, depth: int) -> Any:
        if isinstance(a, Array):
            return next(values)
        if traverse and depth < _MAX_DEPTH and isinstance(a, (list, tuple)):
            items = [rebuild(b, depth + 1) for b in a]
            return type(a)(*items) if hasattr(a, "_fields") else type(a)(items)
        if traverse and depth < _MAX_DEPTH and isinstance(a, dict):
            return type(a)((k, rebuild(b, depth + 1)) for k, b in a.items())
        return a

    return tuple(rebuild(a, 0) for a in args)


#: Containers nested deeper than this are returned as they are.
_MAX_DEPTH = 100


def _destination(target: Any, source: Array, overwrite: bool, chunks: Any) -> tuple:
    """``compute_all``'s destination for ``target``: a ``.npy`` path or a
    Zarr directory path (str, bytes or os.PathLike); TypeError for anything
    else, an open zarr.Array included."""
    if _zarr_path(target) is not None:
        raise TypeError(
            "store writes new arrays at paths, not into an open zarr.Array (its metadata would be replaced "
            "under the open handle); pass the path of a new .npy file or Zarr directory"
        )
    try:
        # Paths as to_npy and to_zarr take them: str, bytes or os.PathLike.
        path = os.fsdecode(os.fspath(target))
    except TypeError:
        raise TypeError(
            f"store targets are .npy paths or Zarr directory paths (str, bytes or os.PathLike), "
            f"got {type(target).__name__}"
        ) from None
    if path.endswith(".npy"):
        return ("npy", path, None, bool(overwrite))
    return ("zarr", path, zarr_chunks(chunks, source.shape), bool(overwrite))


def _plan_args(sources: Sequence[Any], targets: Sequence[Any], overwrite: bool, chunks: Any) -> tuple:
    if isinstance(sources, Array) or isinstance(targets, (str, bytes, os.PathLike)):
        sources, targets = [sources], [targets]
    sources, targets = list(sources), list(targets)
    if len(sources) != len(targets):
        raise ValueError(f"Different number of sources [{len(sources)}] and targets [{len(targets)}]")
    for s in sources:
        if not isinstance(s, Array):
            raise TypeError(f"store sources are memfit arrays, got {type(s).__name__}")
    return [s._expr for s in sources], [_destination(t, s, overwrite, chunks) for s, t in zip(sources, targets)]


def store(
    sources: Any,
    targets: Any,
    memory_limit: Any = None,
    n_jobs: Any = None,
    overwrite: bool = False,
    chunks: Any = None,
) -> None:
    """Streams several lazy arrays to files in one job, as ``dask.array.store``
    does: subexpressions they share are computed once (see :func:`compute`).

    Parameters
    ----------
    sources : Array or sequence of Array
    targets : path or a sequence of paths
        One per source (str, bytes or os.PathLike): a path ending in ``.npy`` (written as
        :meth:`Array.to_npy` writes) or another path (a new Zarr v3
        directory, as :meth:`Array.to_zarr` writes). An open ``zarr.Array``
        is refused (TypeError): its metadata would be replaced under it.
    memory_limit : int, str or None, default=None
        Bytes for every buffer of the evaluation (None: half of the
        available memory).
    n_jobs : int or None, default=None
        Worker threads, as in :meth:`Array.compute`.
    overwrite : bool, default=False
        Replace existing files at target paths.
    chunks : int, tuple of int or None, default=None
        Chunk shape of Zarr targets given as paths (None: chosen as
        :meth:`Array.to_zarr` chooses).

    Raises
    ------
    ValueError
        Different numbers of sources and targets, or one path twice.
    TypeError
        A source that is not a memfit array, or a target that is not a path.
    FileExistsError
        A target path exists and ``overwrite`` is False (before anything runs).
    MemoryError
        One minimal block of the plan does not fit ``memory_limit``.
    FloatingPointError
        The evaluation raised a floating-point exception that ``np.errstate``
        sets to ``"raise"``: no target whose values were computed after it
        is written.

    Notes
    -----
    Each file is written under a temporary name and renamed when complete;
    an error leaves the files written before it complete and no partial
    file.
    """
    exprs, dests = _plan_args(sources, targets, overwrite, chunks)
    if not exprs:
        return
    paths = [os.path.abspath(d[1]) for d in dests]
    if len(set(paths)) != len(paths):
        raise ValueError("store targets must be distinct paths")
    _memfit.compute_all(exprs, dests, check_memory_limit(memory_limit), check_n_jobs(n_jobs))


def explain(*args: Array, memory_limit: Any = None, n_jobs: Any = None) -> Plan:
    """The plan of ``compute(*args)``, without evaluating anything: its
    stages (each shared intermediate once), block shapes and buffers.

    Returns
    -------
    Plan
        ``str(plan)`` is the printable plan, ``plan.data`` the same as a dict.
    """
    if not args:
        raise TypeError("explain() needs at least one memfit array")
    for a in args:
        if not isinstance(a, Array):
            raise TypeError(f"explain() takes memfit arrays, got {type(a).__name__}")
    exprs = [a._expr for a in args]
    text, data = _memfit.explain_all_exprs(
        exprs, [None] * len(exprs), check_memory_limit(memory_limit), check_n_jobs(n_jobs)
    )
    return Plan(text, data)
