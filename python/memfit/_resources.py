"""This process's share of the machine: the worker threads and the memory
limit used when ``n_jobs`` and ``memory_limit`` are None.

The engine knows the process (``_memfit.default_threads``: the CPUs it may
use, within its affinity mask and cgroup CPU quota, at most
``OMP_NUM_THREADS``; ``_memfit.default_memory_limit``: half of the available
memory). Python adds only what Python can see: the OpenMP limit a
``threadpoolctl.threadpool_limits`` context of the caller set, and whether
this process is one of several joblib (loky) workers sharing the machine.
"""

from __future__ import annotations

import os
import sys
from typing import Optional

from . import _memfit

#: threadpoolctl's controllers of the OpenMP runtimes loaded in this process,
#: once one is found (a runtime, once loaded, stays loaded), and how many
#: modules were imported when the process was last searched for one (a
#: runtime comes with an extension module: none can have appeared since).
_openmp: list = []
_searched_at = [-1]

#: What a loky worker's command line runs (``python -m ...popen_loky_posix``).
_LOKY_WORKER = b"loky.backend.popen_loky_posix"


def _openmp_limit() -> Optional[int]:
    """The smallest thread limit of the OpenMP runtimes loaded in this
    process, as the calling thread sees it (what ``threadpool_limits`` sets;
    ``OMP_NUM_THREADS`` otherwise); None when none is loaded, or when
    threadpoolctl was never imported (then no ``threadpool_limits`` context
    can be active, and nothing is imported to find out)."""
    threadpoolctl = sys.modules.get("threadpoolctl")
    if threadpoolctl is None:
        return None
    if not _openmp and _searched_at[0] != len(sys.modules):
        _searched_at[0] = len(sys.modules)
        _openmp.extend(threadpoolctl.ThreadpoolController().select(user_api="openmp").lib_controllers)
    limits = [c.num_threads for c in _openmp]
    return min(limits) if limits else None


def default_threads() -> int:
    """Worker threads for ``n_jobs=None``: the engine's default (the CPUs
    this process may use, at most ``OMP_NUM_THREADS``, which joblib sets in
    its process workers), at most the OpenMP limit of an active
    ``threadpoolctl.threadpool_limits`` context. OpenMP's own default (the
    CPUs) is no such limit: ``RAYON_NUM_THREADS`` may set more threads than
    CPUs, as in the CLI."""
    n = int(_memfit.default_threads())
    limit = _openmp_limit()
    return max(1, min(n, limit)) if limit and limit < int(_memfit.available_cpus()) else n


def _in_loky_worker() -> bool:
    """Whether this process is a loky worker (joblib's default process
    backend): loky records its nesting depth there, 0 in the parent."""
    for name in ("joblib.externals.loky.process_executor", "loky.process_executor"):
        if getattr(sys.modules.get(name), "_CURRENT_DEPTH", 0) > 0:
            return True
    return False


def loky_workers() -> int:
    """How many loky workers, this one included, run side by side: the
    children of this process's parent that run a loky worker (read from
    ``/proc``; loky starts all of an executor's workers together). 1 outside
    a loky worker, and where ``/proc`` cannot be read."""
    if not _in_loky_worker():
        return 1
    parent = os.getppid()
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return 1
    count = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                # The parent's pid is the second field after the command
                # name, which is in parentheses and may hold spaces.
                if int(f.read().rpartition(b")")[2].split()[1]) != parent:
                    continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                count += _LOKY_WORKER in f.read()
        except (OSError, ValueError, IndexError):  # a process that ended meanwhile
            continue
    return max(1, count)


def default_memory_limit() -> int:
    """Bytes for ``memory_limit=None``: half of the memory available to this
    process (``MemAvailable``, or the room left under its cgroup's limit if
    lower), divided by the number of loky workers running side by side
    when this process is one (:func:`loky_workers`), as in
    ``GridSearchCV(..., n_jobs=2)``."""
    return max(1, int(_memfit.default_memory_limit()) // loky_workers())
