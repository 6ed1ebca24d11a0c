"""Dask arrays as estimator and kernel inputs, and fits on a Dask cluster.

A 2-D :class:`dask.array.Array` is read chunk by chunk: rows are cut into
chunks whose boundaries are multiples of the engine's accumulation chunk
(:data:`CHUNK_ROWS` rows; arrays whose chunks are not are rechunked lazily)
and whose columns are whole; chunks of zero rows are legal and read by no
task.

- **Without a client** the engine reads the chunks in this process, one at a
  time (Dask's default scheduler computes each), within ``memory_limit``:
  the largest chunk is planned as held by the input.
- **With a client** (``client=`` given, or a ``distributed`` client active:
  see :func:`memfit._options.resolve_client`),
  every pass over the data that only accumulates statistics (validation
  with the k-means++ sample, the Lloyd iterations and final pass of k-means,
  every EM iteration and the E-step's lower bound of a mixture, the weighted
  scatter) runs as one task per chunk on the workers. The graph holds
  descriptors, never the data: each task reads its chunk where Dask keeps
  or computes it, gets the pass's parameters (one node of the pass's
  graph, shared by its tasks), runs the pass within its worker's budget (see
  :func:`task_limit`) on one thread, and returns its statistics; the client
  merges them in row order as they come back (it holds at most as many
  chunks' results as the cluster runs tasks at once), and the chunks run in about that order
  (:func:`in_row_order`). The client process reads single rows only (a
  random initialisation's ``k`` rows, the value an error names). A
  ``numpy.memmap`` the input's graph holds (``da.from_array(np.load(path,
  mmap_mode="r"))``) is passed as a plain array (:func:`plain_values`).
- Per-row results (``labels_``, ``predict``, ``transform``,
  ``predict_proba``, ``score_samples``, the kernels' per-row outputs) of a
  Dask input are lazy Dask arrays with the input's row chunks, computed by
  the engine block by block where the chunks are. An estimator pickles
  them computed (:func:`computed_state`), never the input's graph.
- **Bounded k-means** keeps each chunk's bounds (16 bytes per row) on the
  worker that ran its task: a task returns its statistics and its chunk's
  new bounds, the client fetches only the statistics and keeps a future of
  the bounds, and the next pass's task for the same chunk reads them from
  the memory of the worker it runs on (:class:`Kept`). Dask runs it where
  its chunk is: for a persisted input, where the last one ran. A chunk
  whose bounds are not there (its task ran elsewhere, the worker was lost,
  the bounds were spilled) is assigned in full, with the same results.

Results are bitwise identical to the single-process fit on the same data,
seed and ``memory_limit`` semantics: statistics merge in the same order
whatever the chunking, the number of workers or their threads.
"""

from __future__ import annotations

import bisect
import collections
import contextlib
import copy
import hashlib
import operator
import sys
import threading
from typing import Any, Iterator, Optional

import numpy as np

from . import _memfit, _options
from ._options import distributed_module
from ._sparse import is_sparse, sparse_input

#: Rows per accumulation chunk of the engine (``memfit._memfit.CHUNK_ROWS``):
#: Dask chunks start on multiples of it, so that statistics merge exactly.
CHUNK_ROWS = _memfit.CHUNK_ROWS

#: Fraction of a worker's ``memory_limit`` that its process may reach: what
#: it already holds (the interpreter, memfit and its libraries, data Dask
#: keeps) plus its ``nthreads`` tasks. Dask's worker spills to disk at
#: 60-70 % of its ``memory_limit``, pauses at 80 % and is restarted at 95 %;
#: the chunk a task reads (held by Dask) and Dask's own bookkeeping need the
#: rest.
SAFETY = 0.5


def is_dask_array(x: Any) -> bool:
    """Whether ``x`` is a :class:`dask.array.Array` (without importing dask)."""
    return type(x).__module__.startswith("dask.array") and type(x).__name__ == "Array"


def worker_budget(memory_limit: Any, nthreads: int, held: int = 0) -> Optional[int]:
    """Bytes one task may use on a worker: ``(memory_limit × SAFETY - held)
    / nthreads``, ``held`` being what the worker's process already holds
    (0 when nothing is left); None for a worker without a memory limit (0
    or None)."""
    if not memory_limit:
        return None
    return max(0, int(memory_limit * SAFETY) - int(held)) // max(1, int(nthreads))


def process_memory() -> int:
    """Resident bytes of this process (``psutil``, a dependency of
    ``distributed``), after importing the engine (what a worker holds once
    it ran a memfit task)."""
    import psutil

    return int(psutil.Process().memory_info().rss)


def workers(client: Any) -> list:
    """``(address, memory_limit, nthreads, held)`` of every worker of the
    cluster, ``held`` being the resident bytes of its process with memfit
    imported (asked of the workers; the scheduler's last heartbeat figure
    for a worker that does not answer)."""
    try:
        info = client.scheduler_info(n_workers=-1)
    except TypeError:  # distributed before 2025: all workers by default
        info = client.scheduler_info()
    found = info.get("workers", {})
    try:
        held = client.run(process_memory, workers=list(found), on_error="return") if found else {}
    except Exception:  # a worker being restarted, say: the heartbeat's figure
        held = {}
    out = []
    for a, w in found.items():
        h = held.get(a)
        if not isinstance(h, int):
            h = int((w.get("metrics") or {}).get("memory") or 0)
        out.append((a, w.get("memory_limit"), int(w.get("nthreads") or 1), h))
    return out


def describe(limit: int, threads: int, held: int, address: str) -> str:
    """A worker's memory as memfit's errors name it."""
    return (
        f"the Dask worker {address} (memory_limit {limit} B, nthreads {threads}, already holding {held} B): "
        f"(memory_limit × SAFETY {SAFETY} - held) / nthreads = {worker_budget(limit, threads, held)} B per task"
    )


# Seconds a job waits for a worker when the cluster has none.
WAIT_FOR_WORKERS = 30


def tightest_worker(client: Any, wait: bool = True) -> tuple:
    """``(budget, memory_limit, nthreads, address, held)`` of the worker with
    the smallest :func:`worker_budget` (a task may run on any worker);
    ``budget`` is None when no worker has a memory limit. A cluster without
    workers is waited for (with ``wait``, up to ``WAIT_FOR_WORKERS``
    seconds), then refused (RuntimeError)."""
    found = workers(client)
    if not found and wait:
        # Workers being restarted by their nannies (after a lost worker),
        # or an adaptive cluster starting some: wait for one, a while.
        try:
            client.wait_for_workers(1, timeout=WAIT_FOR_WORKERS)
        except Exception:  # TimeoutError (asyncio's or distributed's)
            pass
        found = workers(client)
    if not found:
        raise RuntimeError(
            f"memfit: the Dask cluster has no workers (none came within {WAIT_FOR_WORKERS} s); start some, "
            "or run without a client"
        )
    limited = [(worker_budget(m, t, h), m, t, a, h) for a, m, t, h in found if m]
    return min(limited) if limited else (None, None, found[0][2], found[0][0], found[0][3])


def combined_limit(user_limit: Optional[int], budget: Optional[int]) -> int:
    """The smaller of the user's limit and a worker's budget; memfit's
    default (half of the available memory) when there is neither."""

    limits = [v for v in (user_limit, budget) if v]
    return min(limits) if limits else _options.check_memory_limit(None)


#: What this worker process held when it first ran a memfit task (see
#: :func:`task_limit`).
_HELD_AT_START: Optional[int] = None


def task_limit(user_limit: Optional[int]) -> int:
    """The memory limit of a task on this worker: ``min(user_limit,
    worker_budget(...))`` with what the process held when it first ran a
    memfit task (see :func:`combined_limit`); ``user_limit`` outside a
    worker.

    Raises
    ------
    MemoryError
        The worker has no room left for a task.
    """
    global _HELD_AT_START
    try:
        worker = distributed_module().get_worker()
    except ValueError:
        return combined_limit(user_limit, None)
    limit, threads = worker.memory_manager.memory_limit, worker.state.nthreads
    if _HELD_AT_START is None:
        _HELD_AT_START = process_memory()
    budget = worker_budget(limit, threads, _HELD_AT_START)
    if budget == 0:
        raise MemoryError(f"memfit: no room for a task on {describe(limit, threads, _HELD_AT_START, worker.address)}; "
                          "give the workers a larger memory_limit")
    return combined_limit(user_limit, budget)


def known_chunk_sizes(x: Any) -> Any:
    """``x``, or when some of its chunk sizes are unknown (NaN, as a boolean
    mask leaves them) a copy of it whose sizes are computed: each chunk is
    computed once for its shape, which is all that is kept (the caller's
    array is left as it is, as scikit-learn leaves it)."""
    if not any(np.isnan(s) for s in x.shape):
        return x
    return x.copy().compute_chunk_sizes()


def aligned(x: Any) -> Any:
    """``x`` with whole rows per chunk and every chunk with rows but the last
    a multiple of :data:`CHUNK_ROWS` rows (rechunked lazily when it is
    not); chunks of zero rows are left as they are (no task reads them)."""
    rows = [c for c in x.chunks[0] if c]
    if len(x.chunks[1]) == 1 and all(c % CHUNK_ROWS == 0 for c in rows[:-1]):
        return x
    typical = int(np.median(rows)) if rows else CHUNK_ROWS
    target = max(CHUNK_ROWS, round(typical / CHUNK_ROWS) * CHUNK_ROWS)
    return x.rechunk({0: target, 1: -1})


def plain_values(x: Any) -> Any:
    """``x`` with every :class:`numpy.memmap` its graph holds as a value
    viewed as a plain :class:`numpy.ndarray` (the same memory, no copy).
    ``da.from_array(np.load(path, mmap_mode="r"))`` holds one (Dask copies
    it into memory, as a ``memmap`` still): a ``memmap`` pickles by copying
    all its values, an ``ndarray`` without copying them, so that each
    graph a pass sends to the cluster would otherwise add two copies of the
    whole array to the client's and the in-process workers' memory. ``x``
    itself when its graph holds none."""
    from dask._task_spec import DataNode
    from dask.highlevelgraph import HighLevelGraph, MaterializedLayer

    graph = x.__dask_graph__()
    if not isinstance(graph, HighLevelGraph):
        return x
    layers, changed = dict(graph.layers), False
    for name, layer in graph.layers.items():
        if not isinstance(layer, MaterializedLayer):
            continue
        found = {
            k: np.asarray(v.value if isinstance(v, DataNode) else v)
            for k, v in layer.mapping.items()
            if isinstance(v.value if isinstance(v, DataNode) else v, np.memmap)
        }
        if found:
            layers[name] = MaterializedLayer({**layer.mapping, **found}, annotations=layer.annotations)
            changed = True
    if not changed:
        return x
    import dask.array as da

    return da.Array(HighLevelGraph(layers, graph.dependencies), x.name, x.chunks, meta=x._meta)


def in_row_order(x: Any) -> list:
    """The row chunks of ``x`` (2-D with one column chunk, or 1-D) as
    :class:`dask.delayed.Delayed` objects of one optimised graph (as
    ``x.to_delayed()``) whose tasks have Dask priorities by row chunk: the
    tasks of a key ``(name, i, ...)`` run before those of ``(name, i + 1,
    ...)``; a task of no row chunk (a reduction over all rows, a delayed
    value) runs with the first chunk that needs it. Dask would otherwise
    run the chunks in an order of its own, and the results of the chunks
    after one still running would wait in memory until it is merged (up
    to every chunk's). ``x.to_delayed()`` when the cluster holds its
    chunks (persisted). Compute them with
    ``optimize_graph=False``: the graph is optimised already (and Dask's
    culling of delayed objects does not keep these layers' keys)."""
    from dask.core import get_dependencies, toposort
    from dask.delayed import Delayed
    from dask.highlevelgraph import HighLevelGraph, MaterializedLayer

    keys = [k if x.ndim == 1 else k[0] for k in x.__dask_keys__()]
    graph = dict(x.__dask_optimize__(x.__dask_graph__(), keys))
    if not all(k in graph for k in keys):  # chunks the cluster holds (persisted): computed already
        return list(x.to_delayed().ravel())
    # A key's row chunk: its second field for a Dask array's key, else the
    # first chunk that needs it (a reduction over all rows: the first).
    deps = {k: [d for d in get_dependencies(graph, k) if d in graph] for k in graph}
    chunk_of: dict = {}
    for k in reversed(toposort(graph, dependencies=deps)):  # every key after the keys that need it
        if isinstance(k, tuple) and len(k) > 1 and isinstance(k[1], int):
            chunk_of[k] = k[1]
        chunk_of.setdefault(k, 0)
        for d in deps[k]:
            if not (isinstance(d, tuple) and len(d) > 1 and isinstance(d[1], int)):
                chunk_of[d] = min(chunk_of.get(d, chunk_of[k]), chunk_of[k])
    layer_of = {k: f"{x.name}-rows-{i}" for k, i in chunk_of.items()}
    layers: dict = collections.defaultdict(dict)
    dependencies: dict = collections.defaultdict(set)
    for k, v in graph.items():
        layers[layer_of[k]][k] = v
        # (Keys outside the graph are data the cluster holds: a persisted input.)
        dependencies[layer_of[k]] |= {layer_of[d] for d in deps[k]} - {layer_of[k]}
    hlg = HighLevelGraph(
        {f"{x.name}-rows-{i}": MaterializedLayer(layers[f"{x.name}-rows-{i}"], annotations={"priority": -i})
         for i in set(chunk_of.values())},
        {name: dependencies[name] for name in layers},
    )
    return [Delayed(k, hlg, layer=layer_of[k]) for k in keys]


def _starts(chunks: tuple) -> list:
    return [0] + list(np.cumsum(chunks[:-1], dtype=np.int64).tolist()) if chunks else [0]


def error_state() -> dict:
    """The caller's NumPy error state (``np.geterr()``, set by
    ``np.errstate``) for tasks that evaluate on a worker thread, whose own
    is the default: a kind the caller raises raises there too (the task
    fails and nothing is written), one it ignores is ignored. ``"call"``
    and ``"log"`` warn there instead: the function or object they report
    to (``np.geterrcall()``) is the caller's and stays here."""
    kept = ("ignore", "warn", "raise", "print")
    return {kind: mode if mode in kept else "warn" for kind, mode in np.geterr().items()}


def from_expression(x: Any, rows: int = 4 * CHUNK_ROWS) -> Any:
    """A 2-D :class:`memfit.array.Array` as a Dask array of ``rows``-row
    chunks, each computed by the engine where its task runs (the expression
    is shipped, never its values: keep its leaves on storage the workers
    share), under the caller's NumPy error state (:func:`error_state`)."""
    import dask
    import dask.array as da

    n, d = x.shape
    errstate = error_state()
    parts = [
        da.from_delayed(
            dask.delayed(_expression_rows, pure=True)(x, a, min(a + rows, n), errstate),
            shape=(min(a + rows, n) - a, d),
            dtype=x.dtype,
        )
        for a in range(0, n, rows)
    ]
    return da.concatenate(parts) if parts else da.zeros((0, d), dtype=x.dtype)


def _expression_rows(x: Any, start: int, stop: int, errstate: dict) -> np.ndarray:
    with np.errstate(**errstate):
        return x[start:stop].compute(memory_limit=task_limit(None), n_jobs=1)


def refuse_sparse_chunks(kind: str, name: str = "X", accept_sparse: bool = True) -> None:
    """Raises the TypeError for a Dask array whose chunks are ``kind``
    (scipy.sparse matrices) given where they are not read, saying what to
    pass instead (the sparse matrix itself where the estimator reads sparse
    input, else dense rows)."""
    instead = (
        f"pass the sparse matrix itself ({name}.compute(): memfit reads it where it lies, without densifying it)"
        if accept_sparse
        else f"this estimator needs dense rows: pass {name}.map_blocks(lambda b: b.toarray()) or a dense .npy path"
    )
    where = "by this estimator" if accept_sparse else "where dense rows are needed"
    raise TypeError(f"memfit does not read Dask arrays of scipy.sparse chunks {where} ({name}'s chunks are {kind}); {instead}")


def dense_chunk(chunk: Any) -> np.ndarray:
    """A computed chunk as a NumPy array; a scipy.sparse chunk (of an array
    whose ``meta`` says its chunks are dense) is refused with a TypeError,
    not turned into an object array."""
    if is_sparse(chunk):
        raise TypeError(
            f"X's Dask meta says its chunks are dense, but a chunk is a {type(chunk).__name__}: memfit reads Dask "
            "arrays of scipy.sparse chunks (in KMeans) when their meta says so, e.g. "
            "da.map_blocks(..., meta=scipy.sparse.csr_matrix((0, 0))) (Dask keeps no coo, bsr or dia meta: "
            "use csr or csc); other estimators need dense rows: pass X.map_blocks(lambda b: b.toarray())"
        )
    return np.asarray(chunk)


def engine_chunk(chunk: Any, first_row: int = 0) -> Any:
    """A computed chunk, the rows of X from ``first_row`` on, as the engine
    reads it: a scipy.sparse chunk checked (errors name rows as in X) and
    in canonical CSR (:func:`memfit._sparse.sparse_input`), anything else as
    a NumPy array."""
    return sparse_input(chunk, first_row=first_row) if is_sparse(chunk) else np.asarray(chunk)


def check_shape(chunk: Any, i: int, start: int, shape: tuple) -> str:
    """Raises ValueError unless chunk ``i`` of X (its rows from ``start``
    on) has the ``shape`` the Dask array declares; returns how errors name
    the chunk."""
    where = f"chunk {i} of X (rows {start}..{start + shape[0]})"
    found = tuple(getattr(chunk, "shape", ()))
    if found != tuple(shape):
        raise ValueError(
            f"{where} computed to shape {found}, but the Dask array declares {tuple(shape)}; "
            "hint: give map_blocks the chunks its function returns (chunks=...), or call X.compute_chunk_sizes()"
        )
    return where


def checked_chunk(chunk: Any, i: int, start: int, shape: tuple, sparse: bool) -> Any:
    """Chunk ``i`` of X (its rows from ``start`` on), computed, as the engine
    reads it, after checking that it is what the Dask array declares: its
    ``shape`` and whether it is sparse (a chunk of other rows or columns
    would be read as other rows of X).

    Raises
    ------
    ValueError
        A shape other than the declared one.
    TypeError
        A dense chunk among sparse ones, or the reverse.
    """
    where = check_shape(chunk, i, start, shape)
    if sparse and not is_sparse(chunk):
        raise TypeError(
            f"{where} is a {type(chunk).__name__}, but X's Dask meta says its chunks are scipy.sparse matrices; "
            "hint: return the same kind of chunk from every block"
        )
    return engine_chunk(chunk, start) if sparse else dense_chunk(chunk)


def _csr_chunk(chunk: Any, block_info: Any = None) -> Any:
    """A scipy.sparse chunk as CSR (a chunk Dask can slice), checked as
    :func:`checked_chunk` does."""
    info = (block_info or {}).get(0)
    if info is not None:
        (start, stop), (a, b) = info["array-location"]
        chunk = checked_chunk(chunk, info["chunk-location"][0], start, (stop - start, b - a), True)
    return chunk.tocsr()


def _dense_checked(chunk: Any, block_info: Any = None) -> Any:
    """A dense chunk, after :func:`check_shape` (with its place in X)."""
    info = (block_info or {}).get(0)
    if info is not None:
        (start, stop), (a, b) = info["array-location"]
        check_shape(chunk, info["chunk-location"][0], start, (stop - start, b - a))
    return chunk


def _sparse_bytes(m: Any) -> int:
    """Bytes of a scipy.sparse matrix's arrays (any format)."""
    return sum(int(getattr(m, a).nbytes) for a in ("data", "indices", "indptr", "row", "col", "offsets") if hasattr(m, a))


def _csr_stats(chunk: Any, i: int, start: int, shape: tuple) -> np.ndarray:
    """Sparse chunk ``i``'s ``[stored values, most values in a row, bytes
    held to read it, values not finite]`` (checked as :func:`checked_chunk`
    does): the bytes are the chunk's arrays and those of its canonical CSR
    copy when it is not one already; the last is 2 when a value is NaN, 1
    when one is infinite (and none NaN), else 0."""
    c = checked_chunk(chunk, i, start, shape, True)
    per_row = np.diff(c.indptr)
    nbytes = _sparse_bytes(chunk) + (0 if c is chunk else _sparse_bytes(c))
    finite = np.isfinite(c.data)
    nonfinite = 0 if finite.all() else 2 if np.isnan(c.data).any() else 1
    return np.array([[c.nnz, int(per_row.max()) if per_row.size else 0, nbytes, nonfinite]], dtype=np.int64)


def _checked_call(func: Any, chunk: Any, i: int, start: int, shape: tuple) -> Any:
    """``func`` of sparse chunk ``i`` checked as :func:`checked_chunk` does."""
    return func(checked_chunk(chunk, i, start, shape, True))


class _Chunks:
    """The chunks of a 2-D Dask array ``x`` (one column chunk) computed one
    at a time in this process, the last one kept, each checked as
    :func:`checked_chunk` does (sparse ones when :attr:`SPARSE`)."""

    SPARSE = False

    def __init__(self, x: Any):
        self.x = x
        self.shape = tuple(int(s) for s in x.shape)
        self.starts = _starts(x.chunks[0])
        self._at, self._chunk = None, None

    def _compute(self, i: int) -> Any:
        """Chunk ``i``, computed."""
        return self.x.blocks[i].compute()

    def _shape(self, i: int) -> tuple:
        """The declared shape of chunk ``i``."""
        return (int(self.x.chunks[0][i]), self.shape[1])

    def _get(self, i: int) -> Any:
        if self._at != i:
            self._chunk = None
            self._chunk = checked_chunk(self._compute(i), i, self.starts[i], self._shape(i), self.SPARSE)
            self._at = i
        return self._chunk


class SparseRows(_Chunks):
    """Rows of a 2-D Dask array of scipy.sparse chunks read one chunk at a
    time in this process (the engine's sparse reader: ``shape``, ``dtype``,
    ``max_row_nnz``, ``held_bytes``, ``read_csr``). What the engine plans
    with (the most values a row stores, the largest chunk's bytes) is found
    when first asked for, by computing every chunk once (with the active
    Dask scheduler: on the cluster when a client is active); per-row
    results (predict, transform) never ask."""

    SPARSE = True

    def __init__(self, x: Any):
        super().__init__(x)
        self.dtype = np.dtype(np.float32 if x.dtype == np.float32 else np.float64).name
        self._stats: Optional[np.ndarray] = None
        # The engine may read from several threads: one chunk is computed at a time.
        self._lock = threading.Lock()

    @staticmethod
    def scheduler() -> Optional[str]:
        """Without a client, chunks are computed one at a time in the
        calling thread (what the plan holds); with one, by its cluster."""
        return None if _options.resolve_client(None) is not None else "sync"

    def _chunk_stats(self) -> np.ndarray:
        if self._stats is None:
            import dask

            parts = [
                dask.delayed(_csr_stats)(b, i, self.starts[i], self._shape(i))
                for i, b in enumerate(self.x.to_delayed().ravel())
            ]
            self._stats = (
                np.concatenate(dask.compute(*parts, scheduler=self.scheduler())) if parts else np.zeros((0, 4), np.int64)
            )
        return self._stats

    @property
    def max_row_nnz(self) -> int:
        """The most values a row of the array stores."""
        stats = self._chunk_stats()
        return int(stats[:, 1].max()) if len(stats) else 0

    @property
    def held_bytes(self) -> int:
        """What reading the largest chunk holds: the computed chunk (and its
        canonical CSR copy when it is not one), twice: computing a chunk
        (scipy's slicing of a matrix, say) copies as much on the way."""
        stats = self._chunk_stats()
        return 2 * int(stats[:, 2].max()) if len(stats) else 0

    @property
    def nonfinite(self) -> int:
        """2 when a stored value is NaN, 1 when one is infinite (and none
        NaN), else 0."""
        stats = self._chunk_stats()
        return int(stats[:, 3].max()) if len(stats) else 0

    def folded(self, func: Any, merge: Any) -> Any:
        """``func(chunk)`` of every chunk (checked, in canonical CSR, as the
        engine reads it) folded in row order by ``merge(a, b)``: computed
        where the chunks lie when a client is active, else one chunk at a
        time in this process."""
        import dask

        acc = None
        for i, b in enumerate(self.x.to_delayed().ravel()):
            part = dask.delayed(_checked_call)(func, b, i, self.starts[i], self._shape(i))
            acc = part if acc is None else dask.delayed(merge)(acc, part)
        return acc.compute(scheduler=self.scheduler())

    def _compute(self, i: int) -> Any:
        # As a delayed value: computing x.blocks[i] would join its one chunk into a copy.
        return self.x.to_delayed().ravel()[i].compute(scheduler=self.scheduler())

    def read_csr(self, start: int, stop: int) -> tuple:
        """Rows ``start:stop`` as ``(indptr, indices, data)``: int64 offsets
        from 0, int64 columns, float64 values (views of the chunk's arrays
        where they are of those dtypes; a block that spans chunks is joined)."""
        with self._lock:
            return self._read_csr(start, stop)

    def _read_csr(self, start: int, stop: int) -> tuple:
        parts, at = [], start
        while at < stop:
            i = bisect.bisect_right(self.starts, at) - 1
            if parts:
                # The block spans chunks: what it took of the last one is
                # copied, so that the two chunks are never held together.
                parts = [tuple(np.array(a) for a in p) for p in parts]
            c = self._get(i)
            lo = at - self.starts[i]
            take = min(stop - at, c.shape[0] - lo)
            a, b = int(c.indptr[lo]), int(c.indptr[lo + take])
            offsets = np.asarray(c.indptr[lo : lo + take + 1], dtype=np.int64) - a
            parts.append((offsets, np.asarray(c.indices[a:b], dtype=np.int64), np.asarray(c.data[a:b], dtype=np.float64)))
            del c
            at += take
        if not parts:
            return np.zeros(1, np.int64), np.zeros(0, np.int64), np.zeros(0)
        if len(parts) == 1:
            return parts[0]
        # Each part's offsets after the first's continue from the values before it.
        bases = np.cumsum([p[0][-1] for p in parts[:-1]])
        offsets = np.concatenate([parts[0][0]] + [p[0][1:] + base for p, base in zip(parts[1:], bases)])
        return offsets, np.concatenate([p[1] for p in parts]), np.concatenate([p[2] for p in parts])


class Rows(_Chunks):
    """Rows of a 2-D Dask array read one chunk at a time in this process (the
    engine's reader: ``shape``, ``dtype``, ``held_bytes``, ``read_rows``)."""

    def __init__(self, x: Any):
        super().__init__(x)
        self.dtype = np.dtype(x.dtype).name
        widest = max(x.chunks[0]) if x.chunks[0] else 0
        # One computed chunk, and the float64 rows handed to the engine.
        self.held_bytes = int(widest * self.shape[1] * (np.dtype(x.dtype).itemsize + 8))

    def read_rows(self, start: int, stop: int) -> np.ndarray:
        """Rows ``start:stop`` as a C-contiguous float64 array."""
        out = np.empty((stop - start, self.shape[1]), dtype=np.float64)
        at = start
        while at < stop:
            i = bisect.bisect_right(self.starts, at) - 1
            c = self._get(i)
            lo = at - self.starts[i]
            take = min(stop - at, c.shape[0] - lo)
            out[at - start : at - start + take] = c[lo : lo + take]
            at += take
        return out


class Kept:
    """Names the result of a chunk's previous stateful task (its Dask key)
    without making it a dependency of the next one: Dask would move it to
    wherever the next task runs, and recompute every earlier pass to rebuild
    it after a lost worker. The next task reads it where it is
    (:meth:`state`), or starts afresh."""

    def __init__(self, key: Any):
        self.key = key

    def state(self) -> Optional[np.ndarray]:
        """The row state the task of :attr:`key` left, when this worker
        holds its result in memory; else None.

        A worker's store is not safe to change from a task's thread: its
        in-memory dict is only read (a plain ``dict`` without a memory
        limit, or the dict under a spilling buffer's ``fast`` LRU); a result
        spilled to disk is left there and the chunk starts afresh."""
        distributed = distributed_module()
        try:
            data = distributed.get_worker().data
        except ValueError:  # not on a worker
            return None
        fast = getattr(data, "fast", None)
        for store in (data, fast, getattr(fast, "d", None)):
            if type(store) is dict:
                held = store.get(self.key)
                return held[1] if isinstance(held, tuple) and len(held) == 2 else None
        return None


def _run_chunk(
    task: bytes,
    x: np.ndarray,
    w: Optional[np.ndarray],
    first_row: int,
    memory_limit: int,
    kept: Any = False,
    declared: Optional[tuple] = None,
) -> Any:
    """A pass's task over one chunk, on a worker (one thread, the GIL
    released), within ``memory_limit`` bytes (the budget planned for the
    tightest worker). Returns the encoded statistics; a task with per-row
    state (``kept`` is a :class:`Kept`, or None on a run's first pass)
    returns them with its chunk's new state. ``declared`` (the chunk's
    index and shape in X) is checked first (see :func:`check_shape`)."""
    if declared is not None:
        check_shape(x, declared[0], first_row, declared[1])
    x = engine_chunk(x, first_row)
    if isinstance(x, np.ndarray) and (x.dtype.byteorder == ">" or not x.flags.aligned):
        x = x.astype(x.dtype.newbyteorder("="))
    # Arrays unpickled on a worker may be misaligned: the engine borrows aligned ones.
    w2 = None if w is None else np.require(np.asarray(w, dtype=np.float64).reshape(-1, 1), requirements=["C", "A"])
    state = kept.state() if isinstance(kept, Kept) else None
    _, out, left = _memfit.run_task(
        task, x, first_row=first_row, memory_limit=memory_limit, sample_weight=w2, n_jobs=1, row_state=state
    )
    return out if kept is False else (out, left)


def _lost_worker_errors() -> tuple:
    """The exceptions by which ``distributed`` reports a worker lost during
    a computation (restarted by its nanny, killed, disconnected)."""
    distributed = distributed_module()
    from distributed import client
    from distributed.client import FutureCancelledError
    from distributed.comm.core import CommClosedError

    # `distributed.wait` raises the plural class (not a subclass of the
    # singular one) in versions that have it.
    plural = getattr(client, "FuturesCancelledError", FutureCancelledError)
    return (distributed.KilledWorker, FutureCancelledError, plural, CommClosedError)


class Cluster:
    """Runs a fit's passes on a ``distributed`` client: the engine calls it
    with an encoded task and the row ranges (the chunks of ``x`` that have
    rows; chunks of zero rows run no task) and merges the results it
    yields in order.

    Before any task runs, every worker is asked what its process holds
    (:func:`workers`): a worker whose budget (:func:`worker_budget`) is
    nothing refuses the job with MemoryError, naming it. ``probe(x, w,
    limit)``, when given, plans the whole job over the rows of ``x`` within
    ``limit`` bytes and raises MemoryError when it cannot fit: it is called
    once, before any task runs, with zero-strided stand-ins for the largest
    chunk, against the tightest worker's budget; each pass's task is checked
    the same way before it is submitted. A worker lost during a pass (Dask
    reruns its tasks elsewhere until it gives up) or the client closed
    during the fit raise RuntimeError saying so and what to change."""

    def __init__(
        self, client: Any, x: Any, w: Any, memory_limit: int, probe: Any = None, max_row_nnz: Optional[int] = None
    ):
        self.client, self.memory_limit = client, memory_limit
        # For scipy.sparse chunks: the most values a row stores (the stand-ins' densest row).
        self.max_row_nnz = max_row_nnz
        full = [i for i, c in enumerate(x.chunks[0]) if c]
        starts = _starts(x.chunks[0])
        self.starts = [starts[i] for i in full]
        self.rows = [int(x.chunks[0][i]) for i in full]
        # Each task's chunk: its index in X and its declared shape.
        self.declared = [(i, (r, int(x.shape[1]))) for i, r in zip(full, self.rows)]
        x_parts = in_row_order(x)
        w_parts = [None] * len(x_parts) if w is None else in_row_order(w)
        self.x_parts, self.w_parts = [x_parts[i] for i in full], [w_parts[i] for i in full]
        self.n_features, self.dtype, self.weighted = int(x.shape[1]), np.dtype(x.dtype), w is not None
        budget, limit, threads, address, held = tightest_worker(client)
        self.worker = None if limit is None else describe(limit, threads, held, address)
        if budget == 0:
            raise MemoryError(
                f"memfit: no room for a task on {self.worker}; give the workers a larger memory_limit "
                "(or fewer threads each)"
            )
        if budget is None or budget >= memory_limit:
            self.budget, self.budget_text = memory_limit, None
        else:
            self.budget, self.budget_text = budget, self.worker
        if probe is not None:
            self._refuse_unless(lambda xp, wp: probe(xp, wp, self.budget))
        # The id of the per-row states kept and, per chunk, the future of
        # its last stateful task's result (statistics and state).
        self._state_id: Optional[int] = None
        self._states: list = []

    @property
    def row_bounds(self) -> list:
        """The first rows of the chunks with rows (the engine's row split)."""
        return self.starts[1:]

    def _refuse_unless(self, plan: Any) -> None:
        """Calls ``plan(x, w)`` with zero-strided stand-ins for the largest
        chunk (no memory); its MemoryError names the worker's budget."""
        rows = max(self.rows, default=0)
        if self.max_row_nnz is None:
            xp = np.lib.stride_tricks.as_strided(np.zeros(1, self.dtype), (rows, self.n_features), (0, 0))
        else:
            # A CSR matrix whose last row is as dense as the densest: the plan reads no more.
            import scipy.sparse as sp

            nnz = self.max_row_nnz if rows else 0
            indptr = np.zeros(rows + 1, np.int64)
            indptr[-1] = nnz
            xp = sp.csr_matrix((np.zeros(nnz, self.dtype), np.arange(nnz, dtype=np.int64), indptr), shape=(rows, self.n_features))
        wp = np.lib.stride_tricks.as_strided(np.ones(1), (rows, 1), (0, 0)) if self.weighted else None
        try:
            plan(xp, wp)
        except MemoryError as e:
            if self.budget_text is None:
                raise
            raise MemoryError(
                f"memfit: a task over {rows} rows does not fit {self.budget_text} (memfit._dask.SAFETY); "
                f"give the workers more memory per thread (a larger worker memory_limit, or fewer nthreads), "
                f"or use smaller chunks when the rows' blocks are what does not fit. The plan: {e}"
            ) from None

    def __call__(
        self, task: bytes, ranges: list, row_state: Optional[tuple] = None, cancelled: Any = None
    ) -> Iterator[bytes]:
        """Submits ``task`` over every chunk of ``ranges`` and returns the
        chunks' results (encoded statistics) in row order, fetched a round of
        tasks at a time as the engine asks for them: the engine merges each
        result before asking for the next, so this process holds at most a
        round's results (a k-means++ sample comes back from every chunk),
        not all of them. A task with per-row state (``row_state=(id,
        fresh)``) runs where its chunk's last task of that id left its state
        (see :class:`Kept`). ``cancelled()`` says whether the run was
        interrupted (see :func:`gather`)."""
        import dask

        if [r[0] for r in ranges] != self.starts:
            raise ValueError(f"memfit: ranges {ranges} are not the chunks starting at {self.starts}")
        self._refuse_unless(
            lambda xp, wp: _memfit.run_task(
                task, xp, first_row=0, memory_limit=self.budget, sample_weight=wp, n_jobs=1, execute=False
            )
        )
        # The pass's parameters: one node of the graph that every task
        # refers to (not scattered: Dask recomputes a node whose every
        # holder died, never scattered data).
        # Named by a hash of its bytes: Dask's own token of bytes formats
        # their repr (four times their size) before hashing it.
        spec = dask.delayed(task, name=f"memfit-task-{hashlib.blake2b(task, digest_size=16).hexdigest()}")
        run = dask.delayed(_run_chunk, pure=False)
        # The states this pass's tasks read (none on a run's first pass),
        # held until they have run.
        reading = self._states if row_state is not None and row_state == (self._state_id, False) else []
        self._state_id, self._states = (None, []) if row_state is None else (row_state[0], [])
        try:
            if row_state is None:
                tasks = [
                    run(spec, xp, wp, start, self.budget, declared=declared)
                    for xp, wp, start, declared in zip(self.x_parts, self.w_parts, self.starts, self.declared)
                ]
                # The graph is optimised already (see in_row_order).
                futures = self.client.compute(tasks, optimize_graph=False)
            else:
                futures = self._stateful(spec, run, reading)
        except Exception as e:
            self._explain(e)
            raise
        return self._in_order(futures, max(1, sum(self.client.nthreads().values())), reading, cancelled)

    def _stateful(self, spec: Any, run: Any, reading: list) -> list:
        """Submits the tasks of a pass with per-row state, each told the key
        of its chunk's previous result (``reading``, the last pass's futures;
        empty on a run's first pass), and returns the futures of their
        statistics; the futures of their results (statistics and states)
        become :attr:`_states`, for the next pass.

        The tasks are not restricted to the workers that hold the states:
        a task restricted to a worker that is lost before it runs waits for
        that worker forever when no other worker is there at that moment
        (``distributed`` reconsiders such tasks only for the workers they
        name). Dask places a chunk's task where its chunk is, which is where
        the chunk's last task ran; a task placed elsewhere assigns its chunk
        in full."""
        tasks = [
            run(spec, xp, wp, start, self.budget, Kept(reading[i].key) if reading else None, declared=declared)
            for i, (xp, wp, start, declared) in enumerate(zip(self.x_parts, self.w_parts, self.starts, self.declared))
        ]
        self._states = self.client.compute(tasks, optimize_graph=False)
        return [self.client.submit(operator.getitem, f, 0) for f in self._states]

    def _in_order(self, futures: list, batch: int, reading: list, cancelled: Any) -> Iterator[bytes]:
        """The results of ``futures`` in order, fetched ``batch`` at a time
        (the tasks the cluster runs at once: one round trip each, and this
        process holds at most that many results, not every chunk's), each
        released once fetched; the rest released when the engine stops
        early (an error). ``reading`` (the states the pass's tasks read) is
        released with them: once every result is in, every task has run."""
        try:
            for a in range(0, len(futures), batch):
                outs = gather(self.client, futures[a:a + batch], cancelled)
                for i in range(a, a + len(outs)):
                    futures[i].release()
                    futures[i] = None
                while outs:
                    yield outs.pop(0)
        except Exception as e:
            self._explain(e)
            raise
        finally:
            for f in futures:
                if f is not None:
                    f.release()
            reading.clear()

    def _explain(self, e: Exception) -> None:
        explain_lost(e, self.client, lambda: self.worker)


@contextlib.contextmanager
def lost_workers_explained() -> Any:
    """Dask computations of a fit outside a :class:`Cluster`'s passes (a
    mini-batch's rows, weights): a lost worker, a restarted scheduler or a
    closed client raise what a pass raises (:func:`explain_lost`)."""
    try:
        yield
    except Exception as e:
        client = _options.resolve_client(None) if "distributed" in sys.modules else None
        if client is not None:
            explain_lost(e, client, lambda: _tightest_described(client))
        raise


def _tightest_described(client: Any) -> Optional[str]:
    """The tightest worker as :func:`describe` names it, None when no
    worker has a memory limit or none is left to ask."""
    try:
        _, limit, threads, address, held = tightest_worker(client, wait=False)
    except Exception:  # no worker left to describe
        return None
    return None if limit is None else describe(limit, threads, held, address)


def explain_lost(e: Exception, client: Any, worker: Any) -> None:
    """Raises an error saying what happened when ``e`` is ``client``
    closing, its scheduler restarted or a worker lost during a fit
    (``worker()``: the tightest worker, as :func:`describe` names it, asked
    only then)."""
    if client.status in ("closing", "closed"):
        raise RuntimeError(
            f"memfit: the Dask client was closed during the fit ({type(e).__name__}: {e}); keep the client "
            "(and its cluster) open until the fit returns"
        ) from e
    if "scheduler-restart" in str(e):
        raise RuntimeError(
            f"memfit: the Dask scheduler was restarted during the fit ({type(e).__name__}: {e}), which cancels "
            "every task; restart the client (client.restart()) only when no fit is running"
        ) from e
    if isinstance(e, _lost_worker_errors()):
        tightest = worker()
        limits = f"the tightest worker is {tightest}" if tightest else "the workers have no memory limit"
        raise RuntimeError(
            f"memfit: Dask lost a worker during the fit ({type(e).__name__}: {e}); a worker's nanny restarts it "
            f"when its process passes 95 % of its memory_limit, and {limits}. Give the workers a larger "
            "memory_limit (or fewer threads each), or lower the estimator's memory_limit or use smaller chunks "
            "so that each task needs less; the workers' logs say why they were lost"
        ) from e


def gather(client: Any, futures: list, cancelled: Any = None) -> list:
    """``client.gather(futures)``, waiting a quarter of a second at a time
    while ``cancelled()`` (the run's Ctrl-C, see ``memfit._memfit.Cancelled``)
    is false: Dask waits for a worker forever when none is left, and the run
    stops instead of hanging."""
    if cancelled is not None:
        import asyncio

        from distributed import wait

        while True:
            try:
                with client.as_current():
                    wait(futures, timeout=0.25)
                break
            except (TimeoutError, asyncio.TimeoutError):
                if cancelled():
                    raise RuntimeError("memfit: the run was interrupted while waiting for Dask tasks") from None
    return client.gather(futures)


class DaskData:
    """A Dask input as the estimators use it: the input with whole rows
    (its row chunks kept, for per-row results), the aligned array, its
    reader and, when a client is in use, the remote runner."""

    def __init__(self, x: Any):
        x = plain_values(x)
        #: Whether the chunks are scipy.sparse matrices (as the array's meta says).
        self.sparse = is_sparse(getattr(x, "_meta", None))
        if self.sparse and (len(x.chunks[1]) != 1 or aligned(x) is not x):
            # Dask rechunks by slicing chunks, which a COO chunk cannot be.
            x = x.map_blocks(_csr_chunk, dtype=x.dtype, meta=x._meta)
        self.input = x if len(x.chunks[1]) == 1 else x.rechunk({1: -1})
        self.x = aligned(self.input)
        self.reader = SparseRows(self.x) if self.sparse else Rows(self.x)

    @property
    def checked(self) -> Any:
        """The input (dense chunks) with each chunk's shape checked as it is
        computed (:func:`check_shape`), for code that indexes it with Dask
        (a chunk of other rows or columns would be read as other rows)."""
        x = self.input
        return x.map_blocks(_dense_checked, dtype=x.dtype, meta=x._meta)

    def weights(self, sample_weight: Any) -> Any:
        """``sample_weight`` (``(n_samples,)`` array or Dask array) as a Dask
        array with the data's row chunks."""
        import dask.array as da

        w = sample_weight if is_dask_array(sample_weight) else da.from_array(np.asarray(sample_weight))
        return w.astype(np.float64).rechunk((self.x.chunks[0],))

    def fit_kwargs(
        self, client: Any, w: Optional[Rows], memory_limit: int, fit: Any = None, params: Optional[dict] = None
    ) -> dict:
        """The engine's ``remote`` and ``row_bounds`` for a job on ``client``
        (none without one); ``w`` is the weights' reader from
        ``check_sample_weight``. ``fit`` (``_memfit.kmeans_fit`` or
        ``gmm_fit``, called with ``params`` and ``dry_run=True``) plans the
        whole job before any task runs (see :class:`Cluster`)."""
        client = _options.resolve_client(client)
        if client is None:
            return {}

        def probe(x, wp, limit):
            r = fit(x, sample_weight=wp, memory_limit=limit, dry_run=True, **(params or {}))
            # A mixture in component groups runs its passes in one process:
            # its tasks must hold every component.
            if r["plan"].get("component_groups") is not None:
                raise MemoryError(
                    "the mixture's components do not fit a task together (its plan would process them in "
                    f"groups, which run in one process only):\n{r['plan_text']}"
                )

        runner = Cluster(
            client,
            self.x,
            None if w is None else w.x.reshape(-1),
            memory_limit,
            probe if fit is not None else None,
            self.reader.max_row_nnz if self.sparse else None,
        )
        return {"remote": runner, "row_bounds": runner.row_bounds}

    def map_rows(self, func: Any, memory_limit: int, n_out: Optional[int], dtype: Any) -> Any:
        """``func(limit, block)`` over the aligned row chunks (chunks of zero
        rows give empty results), ``limit`` being the task's memory limit
        (:func:`task_limit` of ``memory_limit``): a lazy Dask array of shape
        ``(n_samples,)`` (``n_out`` None) or ``(n_samples, n_out)`` with the
        input's row chunks (rechunked lazily from the aligned ones when they
        differ: the engine's pieces start on multiples of
        :data:`CHUNK_ROWS`). ``func`` is one node of the graph that every
        chunk's task refers to (its parameters are in the graph once)."""
        import dask

        block = _RowsBlock(memory_limit, n_out, dtype)
        func = dask.delayed(func, pure=True, traverse=False)
        x = self.x
        if n_out is None:
            out = x.map_blocks(block, func, drop_axis=1, dtype=dtype, meta=np.empty((0,), dtype))
        else:
            out = x.map_blocks(block, func, chunks=(x.chunks[0], (n_out,)), dtype=dtype, meta=np.empty((0, 0), dtype))
        return out if x.chunks[0] == self.input.chunks[0] else out.rechunk({0: self.input.chunks[0]})

    def map_estimator(self, estimator: Any, method: str, n_out: Optional[int], dtype: Any) -> Any:
        """``estimator.method(block)`` over the row chunks (see
        :meth:`map_rows`), each on one thread within the task's limit."""
        # What the tasks get: the fitted estimator without its lazy results
        # (a Dask array inside a task cannot be unpacked by the scheduler),
        # parameters on disk as their folder (``_task_copy``).
        source = estimator._task_copy() if hasattr(estimator, "_task_copy") else estimator
        fitted = object.__new__(type(source))  # not copy.copy: no __getstate__ (it computes lazy results)
        fitted.__dict__.update((k, v) for k, v in vars(source).items() if not is_dask_array(v))
        # Each task's result is a chunk of the lazy array: NumPy, whatever
        # container set_output asks of the whole (scikit-learn's attribute).
        fitted._sklearn_output_config = {"transform": "default"}
        return self.map_rows(_EstimatorMethod(fitted, method), _options.check_memory_limit(estimator.memory_limit), n_out, dtype)


class _RowsBlock:
    """One chunk's task of :meth:`DaskData.map_rows` (a class, not a closure,
    so that the lazy results, and estimators holding them, pickle)."""

    def __init__(self, memory_limit: int, n_out: Optional[int], dtype: Any):
        self.memory_limit, self.n_out, self.dtype = memory_limit, n_out, np.dtype(dtype)

    def __call__(self, b: Any, func: Any, block_info: Any = None) -> np.ndarray:
        if b.shape[0] == 0:
            return np.empty((0,) if self.n_out is None else (0, self.n_out), dtype=self.dtype)
        if not block_info:
            return func(task_limit(self.memory_limit), Piece(engine_chunk(b), 0))
        (start, stop), (a, c) = block_info[0]["array-location"]
        chunk = checked_chunk(b, block_info[0]["chunk-location"][0], start, (stop - start, c - a), is_sparse(b))
        return func(task_limit(self.memory_limit), Piece(chunk, start))


class Piece:
    """Rows ``first_row .. first_row + len(array)`` of a larger array (a Dask
    chunk): the engine reads ``array`` and names its rows as in the whole,
    so an error in a chunk's task names the same row as in a NumPy fit."""

    def __init__(self, array: Any, first_row: int):
        self.array, self.first_row = array, int(first_row)


class _EstimatorMethod:
    """``estimator.method(block)`` within a task's memory limit, one thread."""

    def __init__(self, estimator: Any, method: str):
        self.estimator, self.method = estimator, method

    def __call__(self, limit: int, block: np.ndarray) -> np.ndarray:
        est = copy.copy(self.estimator)
        est.memory_limit, est.n_jobs = limit, 1
        return getattr(est, self.method)(block)


def check_live(x: Any, what: str) -> Any:
    """``x`` (a lazy result named ``what``), or a RuntimeError saying what
    to do when it depends on data Dask kept for a client that has closed
    (chunks persisted on its cluster: computing it would fail with Dask's
    "Missing dependency")."""
    if not is_dask_array(x):
        return x
    try:
        from distributed import futures_of
    except ImportError:  # pragma: no cover - exercised without distributed
        return x
    gone = [f for f in futures_of(x) if f.client.status in ("closing", "closed") or f.status in ("cancelled", "lost")]
    if gone:
        raise RuntimeError(
            f"memfit: {what} is a lazy Dask array over the input's chunks, which were kept (persisted) for a Dask "
            f"client that has closed, so it can no longer be computed; call predict(X) with X on a live cluster, "
            f"or compute {what} (np.asarray) before closing the client"
        )
    return x


def computed_state(state: dict, public: Any) -> dict:
    """``state`` (an estimator's ``__getstate__``) with every lazy Dask
    array computed into NumPy, so that a pickle holds the per-row results
    (as scikit-learn's, e.g. 4 bytes per row of int32 labels), never the
    input's task graph or data; ``public(name)`` is the attribute's public
    name for errors."""
    return {
        k: np.asarray(check_live(v, public(k)).compute()) if is_dask_array(v) else v for k, v in state.items()
    }
