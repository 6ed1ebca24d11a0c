"""Evaluating a lazy array on a Dask cluster (``distributed``):
:meth:`memfit.array.Array.to_zarr` with ``client=``, and the reductions of
:meth:`memfit.array.Array.compute` and :meth:`~memfit.array.Array.to_npy`
with ``client=``.

``to_zarr``: the output's chunks are independent tasks: each computes
``x[chunk]`` with the engine, within a memory limit derived from its
worker's, and writes it into a Zarr array with zarr-python. The array is
written into a temporary directory beside ``path`` and renamed onto ``path``
only when every task has succeeded, so there is never a half-written output.

``compute`` / ``to_npy``: the engine runs each reduction stage of the array
as tasks over consecutive ranges of the stage's fixed accumulation chunks
(:func:`run_reductions`); each task returns its chunks' statistics and the
engine folds them here in chunk order, so the result has the same bits as a
local run.

``distributed`` and ``zarr`` are imported only here, when a client is
given or active, so :mod:`memfit` works without Dask installed.
"""

from __future__ import annotations

import itertools
import os
import shutil
import sys
import uuid
from typing import Any, Optional

import numpy as np

from .. import _memfit
from .._dask import combined_limit, describe, error_state, gather, task_limit, tightest_worker
from .._options import check_memory_limit, check_n_jobs, distributed_module, resolve_client

#: Created in the temporary directory when a task has failed: the tasks not
#: yet started then return without computing.
_ABORT_MARKER = ".memfit-abort"

_INSTALL_HINT = 'install it with: pip install "memfit[dask]"'


def _import_zarr():
    try:
        import zarr
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            f"to_zarr(client=...) writes the chunks with zarr-python >= 3 ({e}); {_INSTALL_HINT}"
        ) from e
    return zarr


def _chunk_regions(shape: tuple, chunks: tuple) -> list:
    """The chunks of an array of ``shape``, in C order, as tuples of slices."""
    axes = [[slice(s, min(s + c, d)) for s in range(0, d, c)] for d, c in zip(shape, chunks)]
    return [tuple(r) for r in itertools.product(*axes)]


def _sibling(path: str, what: str) -> str:
    """A new, unused name in the directory of ``path``."""
    head, tail = os.path.split(path)
    return os.path.join(head, f".{tail}.memfit-{what}-{uuid.uuid4().hex[:12]}")


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        os.unlink(path)


def _write_chunk(x: Any, tmp: str, region: tuple, user_limit: Optional[int], n_jobs: Any, errstate: dict) -> bool:
    """One task: computes ``x[region]`` within this worker's task limit,
    under the caller's NumPy error state ``errstate`` (:func:`memfit._dask.error_state`),
    and writes it into the Zarr array ``tmp``. False (nothing done) when
    another task has failed already."""
    if os.path.exists(os.path.join(tmp, _ABORT_MARKER)):
        return False
    distributed = distributed_module()
    zarr = _import_zarr()
    limit = task_limit(user_limit)
    jobs = 1 if n_jobs is None else check_n_jobs(n_jobs)
    with np.errstate(**errstate):
        values = x[region].compute(memory_limit=limit, n_jobs=jobs)
    zarr.open_array(tmp, mode="r+")[region] = values
    return True


def to_zarr(
    x: Any,
    path: Any,
    chunks: Optional[tuple],
    memory_limit: Any,
    n_jobs: Any,
    overwrite: bool,
    client: Any,
    shards: Optional[tuple] = None,
) -> None:
    """:meth:`memfit.array.Array.to_zarr` on a Dask cluster: one task per
    output chunk, or per shard when ``shards`` is given (see that method for
    the parameters and errors)."""
    distributed = distributed_module()
    zarr = _import_zarr()
    from zarr.codecs import BytesCodec, ZstdCodec

    path = os.path.abspath(os.fsdecode(os.fspath(path)))
    overwrite = bool(overwrite)
    if os.path.lexists(path) and not overwrite:
        raise FileExistsError(f"{path}: the output exists; hint: allow overwriting it or choose another path")
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        raise FileNotFoundError(f"{path}: the directory {parent} does not exist")
    user_limit = None if memory_limit is None else check_memory_limit(memory_limit)
    jobs = 1 if n_jobs is None else check_n_jobs(n_jobs)

    budget, worker_limit, nthreads, address, held = tightest_worker(client)
    limit = combined_limit(user_limit, budget)

    def refuse(what: str, error: BaseException) -> MemoryError:
        if budget is None:
            source = "memory_limit" if user_limit else "memfit's default (half of the available memory)"
            origin = f"the workers have no memory limit, so the limit is {source}"
        else:
            origin = f"a task may use {budget} bytes on {describe(worker_limit, nthreads, held, address)}"
            if user_limit is not None and user_limit < budget:
                origin += f", and memory_limit={user_limit} bytes is smaller"
        return MemoryError(
            f"to_zarr(client=...): {what} does not fit one Dask task: {origin} (the task limit is {limit} bytes). "
            f"Use smaller chunks, or workers with more memory per thread. The engine: {error}"
        )

    if chunks is None:
        # The engine's rule, as the local to_zarr at the task limit.
        try:
            chunks = tuple(x._expr.default_chunks(limit, jobs))
        except MemoryError as e:
            raise refuse("one chunk of the default shape", e) from None
        if shards is not None:
            chunks = tuple(max(c for c in range(1, min(d, s) + 1) if s % c == 0) for d, s in zip(chunks, shards))
    if shards is not None and any(s % c for s, c in zip(shards, chunks)):
        raise ValueError(f"shards {shards} must be multiples of the chunks {tuple(chunks)}")
    regions = _chunk_regions(x.shape, shards if shards is not None else chunks)
    if regions:
        try:
            x[regions[0]].explain(limit, jobs)
        except MemoryError as e:
            raise refuse(f"one chunk of shape {tuple(chunks)} ({x[regions[0]].nbytes} bytes)", e) from None

    tmp = _sibling(path, "tmp")
    futures: list = []
    try:
        zarr.create_array(
            store=tmp,
            shape=x.shape,
            chunks=tuple(chunks),
            shards=shards,
            dtype=x.dtype,
            fill_value=False if x.dtype.kind == "b" else 0,
            serializer=BytesCodec(endian="little"),
            compressors=[ZstdCodec(level=1, checksum=False)],
            zarr_format=3,
        )
        if regions:
            shipped = client.scatter(x, hash=False)
            token = uuid.uuid4().hex
            errstate = error_state()
            futures = [
                client.submit(
                    _write_chunk, shipped, tmp, region, user_limit, n_jobs, errstate, key=f"memfit-to_zarr-{token}-{i}"
                )
                for i, region in enumerate(regions)
            ]
            client.gather(futures)
        if os.path.lexists(path):
            if not overwrite:
                raise FileExistsError(f"{path}: the output exists; hint: allow overwriting it or choose another path")
            old = _sibling(path, "old")
            os.rename(path, old)
            os.rename(tmp, path)
            _remove(old)
        else:
            os.rename(tmp, path)
    except BaseException:
        if futures:
            # Tasks already running cannot be stopped: let them end (those
            # not yet started see the marker and return) before removing.
            try:
                open(os.path.join(tmp, _ABORT_MARKER), "w").close()
            except OSError:
                pass
            try:
                distributed.wait(futures)
            except Exception:
                pass
        _remove(tmp)
        raise


def _in_task() -> bool:
    """Whether this thread runs a Dask task (where ``client=None`` computes
    here: a task waiting on tasks of its own cluster could starve it)."""
    distributed = sys.modules.get("distributed")
    if distributed is None:
        return False
    try:
        distributed.get_worker()
    except ValueError:
        return False
    return True


def reduction_client(x: Any, client: Any) -> Any:
    """The client ``x.compute`` / ``x.to_npy`` run the reductions of ``x``
    on, or None to run here: ``client`` as
    :func:`memfit._options.resolve_client` resolves it, except that
    ``None`` (or ``"auto"``) runs here inside a Dask task and for an array
    that has nothing to run as tasks (no reduction, or a step that runs in
    one process only: see :meth:`memfit.array.Array.compute`). An explicit
    client runs there or fails with the engine's reason."""
    resolved = resolve_client(client)
    if resolved is None or not (client is None or (isinstance(client, str) and client == "auto")):
        return resolved
    if _in_task() or x._expr.cluster_refusal(check_memory_limit(None)) is not None:
        return None
    return resolved


def _reduce_range(x: Any, task: bytes, start: int, stop: int, memory_limit: int) -> bytes:
    """One task: the statistics of chunks ``start:stop`` of the reduction
    stage ``task`` names, on one thread within ``memory_limit`` bytes."""
    _, out = _memfit.run_array_task(task, x._expr, (start, stop), memory_limit=memory_limit, n_jobs=1)
    return out


class _Ranges:
    """Runs a reduction stage's task over ranges of its chunks on
    ``client``: one Dask task per range, the array shipped once per job."""

    def __init__(self, client: Any, x: Any, task_limit: int):
        self.client, self.x, self.task_limit = client, x, task_limit
        self.shipped = None

    def __call__(self, task: bytes, ranges: list, cancelled: Any = None) -> list:
        if self.shipped is None:
            self.shipped = self.client.scatter(self.x, hash=False)
        token = uuid.uuid4().hex
        futures = [
            self.client.submit(
                _reduce_range, self.shipped, task, a, b, self.task_limit, key=f"memfit-reduce-{token}-{i}", pure=False
            )
            for i, (a, b) in enumerate(ranges)
        ]
        try:
            return gather(self.client, futures, cancelled)
        finally:
            for f in futures:
                f.release()


def run_reductions(
    x: Any, memory_limit: Any, n_jobs: Any, client: Any, path: Optional[str] = None, overwrite: bool = False
) -> Any:
    """:meth:`memfit.array.Array.compute` (``path`` None: returns the
    result) or :meth:`~memfit.array.Array.to_npy` with the array's
    reductions as tasks on ``client`` (see those methods for the parameters
    and errors): at most one range of chunks per worker thread a stage, each
    task within ``min(memory_limit, the tightest worker's share)`` bytes
    (:func:`memfit._dask.task_limit`'s rule, planned before any task runs);
    the rest runs here within ``memory_limit``."""
    user_limit = None if memory_limit is None else check_memory_limit(memory_limit)
    jobs = check_n_jobs(n_jobs)
    budget, worker_limit, nthreads, address, held = tightest_worker(client)
    if budget == 0:
        raise MemoryError(
            f"memfit: no room for a task on {describe(worker_limit, nthreads, held, address)}; "
            "give the workers a larger memory_limit"
        )
    limit = combined_limit(user_limit, budget)
    tasks = max(1, sum(client.nthreads().values()))
    runner = _Ranges(client, x, limit)
    try:
        return x._expr.run_on_cluster(runner, tasks, limit, check_memory_limit(memory_limit), jobs, path, overwrite)
    except MemoryError as e:
        if budget is None:
            raise
        raise MemoryError(
            f"{e} (a task may use {limit} bytes: {describe(worker_limit, nthreads, held, address)}; "
            "give the workers more memory per thread)"
        ) from None
