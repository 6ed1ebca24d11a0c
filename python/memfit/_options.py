"""The run options every entry point takes, read in one place: the memory
limit (``memory_limit``), the worker threads (``n_jobs``), the Dask client
(``client``) and the scratch folder (``scratch_dir``).

Their defaults come from the engine through :mod:`memfit._resources` (this
process's share of the machine).
"""

from __future__ import annotations

import math
import numbers
import os
import sys
from typing import Any, Optional

from . import _memfit, _resources


def check_memory_limit(memory_limit: Any) -> int:
    """The limit in bytes: ``None`` is half of the available memory, or of
    this process's share in a joblib worker
    (:func:`memfit._resources.default_memory_limit`); an ``int`` or a whole
    ``float`` (``1e9``) is bytes; a ``str`` is a size such as ``"2GiB"``
    (powers of 1024), ``"2GB"`` (powers of 1000), ``"1e9"`` or ``"1000"``;
    malformed sizes (``"1e"``) raise ``ValueError``."""
    if memory_limit is None:
        return _resources.default_memory_limit()
    return _size(memory_limit, "memory_limit")


def _size(value: Any, name: str) -> int:
    """A byte size given as ``name`` (see :func:`check_memory_limit`)."""
    if isinstance(value, str):
        return int(_memfit.parse_size(value, name))
    if isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral):
        # 1e9 as NumPy users write sizes: a whole number of bytes.
        if not (math.isfinite(value) and float(value).is_integer()):
            raise ValueError(f"{name} must be a whole number of bytes, got {value!r}")
        value = int(value)
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        if not 1 <= value < 1 << 63:
            raise ValueError(f"{name} must be a positive number of bytes below 2**63 (8 EiB), got {value}")
        return int(value)
    raise TypeError(f"{name} must be None, an int or whole float (bytes) or a str such as '2GiB', got {value!r}")


def check_device(estimator: Any, data: Any, job: str, n_components: int, weighted: bool, covariance_type=None) -> Any:
    """Checks where ``estimator`` runs (its ``device`` and
    ``device_memory_limit``; the CPU for estimators without them) before any
    work. Returns None for the CPU; for a CUDA device, the engine opens it
    and plans the job on it, and returns the ``_memfit.DeviceBackend`` the
    fit and predict functions take as ``device=``, or raises
    ``RuntimeError`` saying why it cannot run there (``MemoryError`` when
    the job cannot fit the device)."""
    device = getattr(estimator, "device", "cpu")
    limit = getattr(estimator, "device_memory_limit", None)
    if not isinstance(device, str):
        raise TypeError(f"device must be a str ('cpu', 'cuda' or 'cuda:N'), got {device!r}")
    return _memfit.check_device(
        device,
        None if limit is None else _size(limit, "device_memory_limit"),
        job,
        int(data.n_samples),
        int(data.n_features),
        bool(data.float32),
        bool(weighted),
        int(n_components),
        covariance_type,
    )


def engine_count(value: Any) -> Optional[int]:
    """A count scikit-learn takes unbounded (``max_iter``, ``n_init``,
    ``max_no_improvement``) as the engine's 64-bit count: at most
    2**63 - 1, which no fit reaches (2**64 raised OverflowError); None
    (the engine's default) stays None."""
    return None if value is None else min(int(value), (1 << 63) - 1)


def check_n_jobs(n_jobs: Any) -> int:
    """Worker threads: ``None`` the process's default
    (:func:`memfit._resources.default_threads`: the CPUs it may use, within
    ``OMP_NUM_THREADS`` and a ``threadpoolctl`` limit); as joblib counts
    them, ``-1`` all the CPUs this process may use (affinity mask, cgroup CPU
    quota), ``-2`` all but one, a positive int that many."""
    if n_jobs is None:
        return _resources.default_threads()
    if not isinstance(n_jobs, numbers.Integral) or isinstance(n_jobs, bool) or n_jobs == 0:
        raise ValueError(f"n_jobs must be None or a non-zero int, got {n_jobs!r}")
    cores, most = int(_memfit.available_cpus()), int(_memfit.most_threads())
    if n_jobs < 0:
        return max(1, cores + 1 + int(n_jobs))
    if n_jobs > most:
        raise ValueError(
            f"n_jobs = {n_jobs} is too many threads for the {cores} CPUs this process may use; use at most {most}"
        )
    return int(n_jobs)


def distributed_module():
    """``distributed``, or an ImportError saying how to install it."""
    try:
        import distributed
    except ImportError as e:  # pragma: no cover - exercised without dask
        raise ImportError(
            f'memfit: running on a Dask cluster needs dask.distributed ({e}); pip install "memfit[dask]"'
        ) from e
    return distributed


def resolve_client(client: Any) -> Any:
    """The Dask client a job runs on, for every entry point that takes
    ``client`` (``fit``, the kernels, ``Array.to_zarr``).

    Parameters
    ----------
    client : None, "auto" or distributed.Client
        None (or ``"auto"``, the same): the active ``distributed`` client
        (``distributed.default_client()``, as Dask's own computations use)
        when there is one, else this process. A ``distributed.Client``:
        that one.

    Returns
    -------
    distributed.Client or None
        None: the job runs in this process.

    Raises
    ------
    TypeError
        ``client`` is none of these.
    RuntimeError
        A client that is closing or closed.
    ImportError
        A client is given and ``distributed`` is not installed.
    """
    if client is None or (isinstance(client, str) and client == "auto"):
        # Without distributed imported, no client can be active.
        distributed = sys.modules.get("distributed")
        if distributed is None:
            return None
        try:
            return distributed.default_client()
        except ValueError:  # no client is active
            return None
    if not isinstance(client, distributed_module().Client):
        raise TypeError(f'client must be None, "auto" or a distributed.Client, got {type(client).__name__}')
    if client.status in ("closing", "closed"):
        raise RuntimeError(f"memfit: the Dask client is {client.status}; pass a running client, or none")
    return client


def check_scratch_dir(scratch_dir: Any) -> Optional[str]:
    """``scratch_dir`` as the engine takes it: None, or the path as a
    ``str`` (any bytes a file system accepts: ``os.fsdecode`` round-trips
    them), checked to be an existing, writable folder before any work
    (``OSError`` naming it otherwise)."""
    if scratch_dir is None:
        return None
    scratch = os.fsdecode(os.fspath(scratch_dir))
    _memfit.check_scratch_dir(scratch)
    return scratch
