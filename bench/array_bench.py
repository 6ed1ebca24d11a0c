"""Side-by-side benchmark of memfit.array (issue 11) against Dask array
(threaded scheduler), cubed (threads executor, allowed_mem = the limit) and
NumPy where its result and temporaries fit in memory.

Each (case, peer) runs in its own child process. The child builds its
in-memory inputs (or opens the input files), then resets its peak-RSS counter
(/proc/self/clear_refs) and runs the case, timed from building the
expression to the result being in memory or on disk (files written and
closed). Reported per run:

- seconds (wall clock);
- peak RSS: VmHWM of the child at the end of the run (every peer runs
  threads in that one process; the parent samples the child's process tree
  every 0.1 s and records how many processes it saw, `max_children`, in the
  JSON, and the sampled tree RSS of runs that were killed); "added" is VmHWM
  minus VmRSS just before the run (in-memory inputs and imported libraries
  excluded). memfit's target: added <= limit + 64 MiB;
- written: /proc/self/io write_bytes of the run (outputs and any scratch or
  intermediate files, as the kernel accounts them when pages are dirtied);
- memfit's speed-up against the peer (peer seconds / memfit seconds);
- max relative error of 2,000 random elements of the result (4,000 for
  outputs written to disk) against a reference computed independently in the
  parent (the closed form, or NumPy on just the elements' inputs, float64),
  with |ref| floored at 1 for results near zero (the standardised mean).
  Target 1e-12.

A peer that raises (e.g. cubed refusing a plan over allowed_mem), is killed
(SIGKILL from the kernel's OOM killer) or runs past --timeout is recorded so.
A run is also killed when the disk holding --tmp has under 6 GiB free.

How each peer is called (the same NumPy-style code where the peer
dispatches NumPy's functions; see `expr` in each case):
- memfit: `memfit.array.asarray(ndarray)` (no copy) or `from_npy(path)`;
  `compute(memory_limit=L, n_jobs=T)`, `to_npy(path, memory_limit=L, ...)`,
  `to_zarr(path, memory_limit=L, ...)` (engine-chosen chunks).
- dask: `da.from_array(ndarray, chunks="auto")` for in-memory inputs; .npy
  inputs through `NpyFile` below (positioned reads of each chunk, so no
  memmap pages count in its RSS) with chunks="auto" (128 MiB chunks);
  `.compute()`; .npy outputs through `da.store(x, NpyFile(...), lock=False)`
  (positioned writes); Zarr through `x.to_zarr(path)` with its own chunks.
- cubed: `cubed.Spec(work_dir=<tmp>/cubed, allowed_mem=L, executor_name=
  "threads")`; inputs through `cubed.from_array(..., chunks=C)` with C = the
  largest chunk of at most L/8 bytes that splits the leading axes (so that
  cubed's own projection, about 4-5 chunks per task, fits allowed_mem);
  `.compute()`; Zarr through `cubed.to_zarr`; cubed cannot store to a
  .npy, so .npy outputs are written by a final `map_blocks` that writes each
  block with positioned writes (fused into the last operation, no extra
  Zarr intermediate); cubed has no einsum: the two einsums are written as
  `sum(matmul(A, B) * C, axis=1)` and `matmul(A.T, b[:, None] * C)`.
- numpy: in-memory inputs as they are, .npy inputs with
  `np.load(path, mmap_mode="r")` (mapped file pages it touches count in its
  RSS, and are reclaimable); results computed in memory, then `np.save` /
  `zarr.create_array(path, data=...)`; einsum with optimize=True. Skipped
  (with the reason) where its estimated peak exceeds half of the RAM.

Usage:
    python bench/array_bench.py [--small] [--cases sum,full,...] [--peers memfit,dask,cubed,numpy]
        [--limit 256MiB] [--threads 2] [--timeout 300] [--tmp DIR] [--json results.json]
The peer memfit-base runs the memfit package found on MEMFIT_BASELINE_PYTHONPATH
(a build from before a change) exactly as memfit, for before/after ratios in one run.
Cases: sum (N = 50, 500), full (N = 50 to .npy and Zarr), sqrt, minimum,
rowsum, einsum (two), stdz, transpose; issue 23's: the seed report's three
published forms (a tile per array stacked and swapped, a Python sum() of
lazy tiles, repeat -> reshape -> sum with the copies inner or outer, where N
need not divide the number of arrays), Newton's iteration (reuse), the
GMM E-step as plain NumPy (sum(X.dot(Q) * X, axis=1)) and as einsum, the
M-step (X.T * w).dot(X), and compute(mean, std) of one file (--cases
seed,newton,estep,mstep,meanstd). --small shrinks every size about 8x
for a smoke run. Input files are written under --tmp (default: a new
directory in /tmp) and everything is deleted at the end; at most one case's
inputs and one run's outputs exist at a time (peak about 17 GB on disk for
the full sizes: the 8 GB rowsum input, the 9 GB minimum output).
Needs: numpy, dask[array], cubed, zarr, psutil and memfit (pip install .).
"""
import argparse
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MiB = 1 << 20
GiB = 1 << 30
PEERS = ("memfit", "dask", "cubed", "numpy")
N_SAMPLE = 2000
SEED = 12345


def parse_bytes(s):
    s = str(s).strip()
    for suffix, mult in (("GiB", GiB), ("MiB", MiB), ("KiB", 1024), ("GB", 10**9), ("MB", 10**6), ("B", 1)):
        if s.endswith(suffix):
            return int(float(s[: -len(suffix)]) * mult)
    return int(s)


# ---------------------------------------------------------------------------
# .npy files with positioned I/O (dask and cubed read and write through this)


class NpyFile:
    """A .npy file as an array-like: `f[region]` reads a block with
    positioned reads, `f[region] = block` writes one with positioned writes
    (regions: tuples of unit-step slices, as dask and cubed pass). Opened per
    call, so it pickles and is safe from any thread."""

    def __init__(self, path, shape=None, dtype=None):
        import numpy as np

        self.path = str(path)
        if shape is None:
            with open(self.path, "rb") as f:
                version = np.lib.format.read_magic(f)
                read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
                shape, fortran, dtype = read(f)
                assert not fortran, "NpyFile reads C-order .npy files"
                self.offset = f.tell()
        else:
            with open(self.path, "wb") as f:
                np.lib.format.write_array_header_1_0(
                    f, {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False,
                        "shape": tuple(shape)})
                self.offset = f.tell()
                f.truncate(self.offset + int(np.prod(shape)) * np.dtype(dtype).itemsize)
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        self.ndim = len(self.shape)

    def _runs(self, key):
        """(block shape, list of (file offset, flat start in block, length))."""
        if not isinstance(key, tuple):
            key = (key,)
        key = key + (slice(None),) * (self.ndim - len(key))
        bounds = []
        for sl, d in zip(key, self.shape):
            start, stop, step = sl.indices(d)
            assert step == 1
            bounds.append((start, stop))
        bshape = tuple(b - a for a, b in bounds)
        k = self.ndim - 1  # the runs are contiguous over axes k.. (full after k)
        while k > 0 and bounds[k] == (0, self.shape[k]):
            k -= 1
        inner = 1
        for d in self.shape[k + 1:]:
            inner *= d
        run_len = bshape[k] * inner if self.ndim else 1
        strides = [1] * self.ndim
        for i in range(self.ndim - 2, -1, -1):
            strides[i] = strides[i + 1] * self.shape[i + 1]
        runs = []
        flat = 0
        for idx in itertools.product(*[range(a, b) for a, b in bounds[:k]]):
            off = sum(i * s for i, s in zip(idx, strides)) + bounds[k][0] * strides[k] if self.ndim else 0
            runs.append((self.offset + off * self.dtype.itemsize, flat, run_len))
            flat += run_len
        return bshape, runs

    def __getitem__(self, key):
        import numpy as np

        bshape, runs = self._runs(key)
        out = np.empty(bshape, self.dtype)
        flat = out.reshape(-1).view(np.uint8)
        size = self.dtype.itemsize
        fd = os.open(self.path, os.O_RDONLY)
        try:
            for off, start, n in runs:
                buf = memoryview(flat[start * size:(start + n) * size])
                got = 0
                while got < len(buf):
                    got += os.preadv(fd, [buf[got:]], off + got)
        finally:
            os.close(fd)
        return out

    def __setitem__(self, key, value):
        import numpy as np

        bshape, runs = self._runs(key)
        block = np.ascontiguousarray(np.broadcast_to(value, bshape), dtype=self.dtype).reshape(-1).view(np.uint8)
        size = self.dtype.itemsize
        fd = os.open(self.path, os.O_WRONLY)
        try:
            for off, start, n in runs:
                buf = memoryview(block[start * size:(start + n) * size])
                done = 0
                while done < len(buf):
                    done += os.pwrite(fd, buf[done:], off + done)
        finally:
            os.close(fd)


# ---------------------------------------------------------------------------
# Cases: sizes, input files, per-peer code, references


def sizes(small):
    if small:
        return dict(n_arr=200, sum_n=(5, 50), full_n=5, sqrt=(128, 1024, 256), min_x=(300, 1000),
                    rowsum=(100, 1_000_000), ein1=(500, 1000, 500), ein2=(200_000, 64, 64),
                    stdz=(131072, 128), transpose=(4096, 8192), seed_n=7, newton=(1000, 18),
                    estep=(25_000, 300), mstep=(100_000, 64))
    return dict(n_arr=2000, sum_n=(50, 500), full_n=50, sqrt=(1024, 1024, 256), min_x=(1500, 1000),
                rowsum=(100, 10_000_000), ein1=(2000, 4000, 2000), ein2=(2_000_000, 64, 64),
                stdz=(1 << 20, 128), transpose=(32768, 8192), seed_n=30, newton=(1000, 18),
                estep=(200_000, 300), mstep=(1_000_000, 64))


def case_list(small):
    """(name, family, params) in run order."""
    z = sizes(small)
    out = []
    for n in z["sum_n"]:
        out.append((f"sum N={n}", "sum", {"N": n}))
    out.append((f"full N={z['full_n']} .npy", "full", {"N": z["full_n"], "fmt": "npy"}))
    out.append((f"full N={z['full_n']} zarr", "full", {"N": z["full_n"], "fmt": "zarr"}))
    out.append(("sqrt .npy", "sqrt", {}))
    out.append(("minimum outer", "minimum", {}))
    out.append(("rowsum axis 0", "rowsum", {}))
    out.append(("einsum ij,jk,ik->i", "einsum", {"subs": "ij,jk,ik->i"}))
    out.append(("einsum ji,j,jk->ik", "einsum", {"subs": "ji,j,jk->ik"}))
    out.append(("stdz mean/var", "stdz", {}))
    out.append(("transpose .npy", "transpose", {}))
    for form in ("stack", "pysum", "repeat", "repeat-outer"):
        out.append((f"seed {form} N={z['seed_n']}", "seed", {"form": form, "N": z["seed_n"]}))
    out.append(("newton x18", "newton", {}))
    out.append(("E-step X.dot(Q)*X", "estep", {"form": "dot"}))
    out.append(("E-step einsum", "estep", {"form": "einsum"}))
    out.append(("M-step (X.T*w).dot(X)", "mstep", {}))
    out.append(("compute(mean, std)", "meanstd", {}))
    return out


FAMILY_OF_OPTION = {"sum": "sum", "full": "full", "sqrt": "sqrt", "minimum": "minimum", "rowsum": "rowsum",
                    "einsum": "einsum", "stdz": "stdz", "transpose": "transpose", "seed": "seed",
                    "newton": "newton", "estep": "estep", "mstep": "mstep", "meanstd": "meanstd"}


def write_random_npy(path, shape, dtype, seed):
    """Uniform [0, 1) values (no cancellation in the sums), written in slabs."""
    import numpy as np

    f = NpyFile(path, shape, dtype)
    rng = np.random.default_rng(seed)
    row = int(np.prod(shape[1:])) * np.dtype(dtype).itemsize
    step = max(1, (64 * MiB) // max(row, 1))
    for a in range(0, shape[0], step):
        b = min(shape[0], a + step)
        f[a:b] = rng.random((b - a,) + tuple(shape[1:]), dtype=np.float64).astype(dtype)


def make_inputs(family, params, small, d):
    """Writes the case's input files under d (skipped when present)."""
    z = sizes(small)
    files = {}
    if family == "sqrt":
        files = {"X": (z["sqrt"], "float64")}
    elif family == "rowsum":
        files = {"X": (z["rowsum"], "float64")}
    elif family in ("stdz", "meanstd"):
        files = {"X": (z["stdz"], "float64")}
    elif family == "estep":
        files = {"X": (z["estep"], "float64")}
    elif family == "mstep":
        files = {"X": (z["mstep"], "float64"), "w": ((z["mstep"][0],), "float64")}
    elif family == "transpose":
        files = {"X": (z["transpose"], "float64")}
    elif family == "einsum" and params["subs"] == "ij,jk,ik->i":
        i, j, k = z["ein1"]
        files = {"A": ((i, j), "float64"), "B": ((j, k), "float64"), "C": ((i, k), "float64")}
    elif family == "einsum":
        j, i, k = z["ein2"]
        files = {"A": ((j, i), "float64"), "b": ((j,), "float64"), "C": ((j, k), "float64")}
    for s, (name, (shape, dt)) in enumerate(sorted(files.items())):
        p = d / f"{name}.npy"
        if not p.exists():
            write_random_npy(p, shape, dt, SEED + s)
    return {name: str(d / f"{name}.npy") for name in files}


def sum_data(small):
    import numpy as np

    n = sizes(small)["n_arr"]
    data = np.random.default_rng(SEED).standard_normal((n, 76, 76))
    return data, np.arange(n, dtype=np.float64)


def result_shape(family, params, small):
    z = sizes(small)
    n = z["n_arr"]
    return {
        "sum": lambda: (n, 76, 76),
        "full": lambda: (params["N"], n, 76, 76),
        "sqrt": lambda: z["sqrt"],
        "minimum": lambda: (z["min_x"][0], z["min_x"][0], z["min_x"][1]),
        "rowsum": lambda: (z["rowsum"][1],),
        "einsum": lambda: (z["ein1"][0],) if params["subs"] == "ij,jk,ik->i" else (z["ein2"][1], z["ein2"][2]),
        "stdz": lambda: (z["stdz"][1],),
        "meanstd": lambda: (z["stdz"][1],),
        "transpose": lambda: (z["transpose"][1], z["transpose"][0]),
        "seed": lambda: (n, 76, 76),
        "newton": lambda: (z["newton"][0],),
        "estep": lambda: (z["estep"][0],),
        "mstep": lambda: (z["mstep"][1], z["mstep"][1]),
    }[family]()


def out_bytes(family, params, small):
    import numpy as np

    return int(np.prod(result_shape(family, params, small))) * (4 if family == "minimum" else 8)


def numpy_estimate(family, params, small):
    """NumPy's peak bytes (inputs read, temporaries, result) for the skip rule."""
    z = sizes(small)
    n = z["n_arr"] * 76 * 76 * 8
    if family == "sum":
        return 2 * params["N"] * n  # the tile and the product
    if family == "full":
        return 2 * params["N"] * n
    if family == "sqrt":
        return 2 * out_bytes(family, params, small)
    if family == "minimum":
        return out_bytes(family, params, small)
    if family == "rowsum":
        return z["rowsum"][0] * z["rowsum"][1] * 8
    if family == "einsum":
        return 2 * GiB if params["subs"] != "ij,jk,ik->i" else 3 * z["ein1"][0] * z["ein1"][1] * 8
    if family == "stdz":
        return 3 * z["stdz"][0] * z["stdz"][1] * 8
    if family == "transpose":
        return 2 * out_bytes(family, params, small)
    if family == "seed":
        return 2 * params["N"] * n
    if family == "estep":
        return 3 * z["estep"][0] * z["estep"][1] * 8
    if family == "mstep":
        return 3 * z["mstep"][0] * z["mstep"][1] * 8
    if family == "meanstd":
        return 2 * z["stdz"][0] * z["stdz"][1] * 8
    return 0


def n_samples(family):
    """Elements sampled: more for results written to disk."""
    return 2 * N_SAMPLE if family in ("full", "sqrt", "minimum", "transpose") else N_SAMPLE


def sample_index(shape, n):
    import numpy as np

    rng = np.random.default_rng(SEED + 1)
    return tuple(rng.integers(0, d, n) for d in shape)


def reference(family, params, small, files, idx):
    """The expected values at idx, computed independently (float64)."""
    import numpy as np

    if family in ("sum", "full"):
        data, scales = sum_data(small)
        if family == "sum":
            return params["N"] * (data[idx] * scales[idx[0]])
        return data[idx[1:]] * scales[idx[1]]
    if family == "sqrt":
        return np.sqrt(np.load(files["X"], mmap_mode="r")[idx])
    if family == "minimum":
        x = sum_min_x(small)
        return np.minimum(x[idx[0], idx[2]], x[idx[1], idx[2]])
    if family == "rowsum":
        X = np.load(files["X"], mmap_mode="r")
        cols = np.unique(idx[0])
        sums = {c: s for c, s in zip(cols, np.sum(np.asarray(X[:, cols]), axis=0))}
        return np.array([sums[c] for c in idx[0]])
    if family == "einsum":
        F = {k: np.load(p) for k, p in files.items()}
        if params["subs"] == "ij,jk,ik->i":
            full = np.sum((F["A"] @ F["B"]) * F["C"], axis=1)
        else:
            full = F["A"].T @ (F["b"][:, None] * F["C"])
        return full[idx]
    if family == "stdz":
        X = np.load(files["X"], mmap_mode="r")
        cols = np.unique(idx[0])
        mean, var = {}, {}
        for c0 in range(0, len(cols), 16):
            cs = cols[c0:c0 + 16]
            Y = np.asarray(X[:, cs])
            Z = (Y - Y.mean(axis=0)) / Y.std(axis=0)
            for c, m, v in zip(cs, Z.mean(axis=0), Z.var(axis=0)):
                mean[c], var[c] = m, v
        return {"mean": np.array([mean[c] for c in idx[0]]), "var": np.array([var[c] for c in idx[0]])}
    if family == "transpose":
        return np.load(files["X"], mmap_mode="r")[idx[1], idx[0]]
    if family == "seed":
        data, scales = sum_data(small)
        if params["form"] == "repeat-outer":
            # Output row b sums the repeated rows (a n + b) // N, a < N.
            N, n = params["N"], len(scales)
            rows = (np.arange(N)[:, None] * n + idx[0][None, :]) // N
            return sum(data[r, idx[1], idx[2]] * scales[r] for r in rows)
        return params["N"] * (data[idx] * scales[idx[0]])
    if family == "newton":
        e = np.full(sizes(small)["newton"][0], 3.0)
        for _ in range(sizes(small)["newton"][1]):
            e = 0.5 * (e + 2.0 / e)
        return e[idx]
    if family == "estep":
        X = np.load(files["X"])
        Q = estep_q(X.shape[1])
        return np.einsum("ij,jk,ik->i", X[idx[0]], Q, X[idx[0]])
    if family == "mstep":
        X, w = np.load(files["X"]), np.load(files["w"])
        return ((X.T * w) @ X)[idx]
    if family == "meanstd":
        X = np.load(files["X"], mmap_mode="r")
        cols = np.unique(idx[0])
        Y = np.asarray(X[:, cols])
        mean = dict(zip(cols, Y.mean(axis=0)))
        std = dict(zip(cols, Y.std(axis=0)))
        return {"mean": np.array([mean[c] for c in idx[0]]), "std": np.array([std[c] for c in idx[0]])}
    raise ValueError(family)


def estep_q(d):
    """A fixed symmetric positive definite d x d matrix (a precision)."""
    import numpy as np

    a = np.random.default_rng(SEED + 3).standard_normal((d, d)) / d
    return a @ a.T + np.eye(d)


def sum_min_x(small):
    import numpy as np

    return np.random.default_rng(SEED + 7).random(sizes(small)["min_x"], dtype=np.float64).astype(np.float32)


def chunks_under(shape, itemsize, target):
    """The largest chunk of at most `target` bytes that splits the leading
    axes (trailing axes whole while they fit)."""
    chunks = list(shape)
    nbytes = itemsize
    for d in shape:
        nbytes *= d
    i = 0
    while nbytes > target and i < len(shape):
        rest = nbytes // chunks[i]
        c = max(1, target // rest) if rest else chunks[i]
        nbytes = rest * min(c, chunks[i])
        chunks[i] = min(c, chunks[i])
        i += 1
    return tuple(chunks)


# ---------------------------------------------------------------------------
# The child: one peer on one case


def child(peer, family, params, small, files, out_dir, limit, threads, work_dir):
    import numpy as np

    out_dir = Path(out_dir)
    info = {}

    # -- the peer's array module and input wrapping (not timed; in-memory inputs are made here)
    if peer == "memfit":
        import memfit.array as ma

        def leaf_mem(a):
            return ma.asarray(a)

        def leaf_file(p):
            return ma.from_npy(p)
    elif peer == "dask":
        import dask
        import dask.array as da

        dask.config.set(scheduler="threads", num_workers=threads)

        def leaf_mem(a):
            return da.from_array(a, chunks="auto")

        def leaf_file(p):
            f = NpyFile(p)
            return da.from_array(f, chunks="auto", name="npy-" + Path(p).stem, asarray=False)
    elif peer == "cubed":
        import cubed
        import cubed.array_api as xp

        spec = cubed.Spec(work_dir=work_dir, allowed_mem=limit, executor_name="threads",
                          executor_options={"max_workers": threads})

        def leaf_mem(a):
            return cubed.from_array(a, chunks=chunks_under(a.shape, a.itemsize, cubed_target(a)), spec=spec)

        def cubed_target(a):
            """Chunk bytes of an in-memory input so that the chunks of the
            operation's output are at most limit / 8: the tile repeats each
            chunk N times within one output chunk; the outer minimum's output
            chunk is rows^2 * k of an input chunk of rows * k."""
            if family in ("sum", "full") and a.ndim == 3:
                return max(1, (limit // 8) // params["N"])
            if family == "minimum":
                k = a.shape[1]
                rows = max(1, int(((limit // 8) / (k * a.itemsize)) ** 0.5))
                return rows * k * a.itemsize
            return limit // 8

        def leaf_file(p):
            f = NpyFile(p)
            return cubed.from_array(f, chunks=chunks_under(f.shape, f.dtype.itemsize, limit // 8), spec=spec)
    else:
        def leaf_mem(a):
            return a

        def leaf_file(p):
            return np.load(p, mmap_mode="r")

    def to_memory(x):
        if peer == "memfit":
            return x.compute(memory_limit=limit, n_jobs=threads)
        if peer in ("dask", "cubed"):
            return np.asarray(x.compute())
        return np.asarray(x)

    def to_npy(x, path):
        if peer == "memfit":
            x.to_npy(path, memory_limit=limit, n_jobs=threads, overwrite=True)
        elif peer == "dask":
            da.store(x, NpyFile(path, x.shape, x.dtype), lock=False)
        elif peer == "cubed":
            target = NpyFile(path, x.shape, x.dtype)
            chunks = x.chunks

            def write(block, block_id=None):
                region = tuple(slice(sum(c[:b]), sum(c[:b]) + c[b]) for c, b in zip(chunks, block_id))
                target[region] = block
                return np.zeros((1,) * block.ndim, np.int8)

            marks = cubed.map_blocks(write, x, dtype=np.int8, chunks=tuple((1,) * len(c) for c in chunks))
            marks.compute()
        else:
            np.save(path, np.ascontiguousarray(x))
        return ("npy", path)

    def to_zarr(x, path):
        if peer == "memfit":
            x.to_zarr(path, memory_limit=limit, n_jobs=threads, overwrite=True)
        elif peer == "dask":
            x.to_zarr(path, overwrite=True)
        elif peer == "cubed":
            cubed.to_zarr(x, path)
        else:
            import zarr

            zarr.create_array(path, data=x, overwrite=True)
        return ("zarr", path)

    # -- inputs
    mem_inputs = {}
    if family in ("sum", "full", "seed"):
        mem_inputs["data"], mem_inputs["scales"] = sum_data(small)
    elif family == "estep":
        mem_inputs["Q"] = estep_q(sizes(small)["estep"][1])
    elif family == "minimum":
        mem_inputs["x"] = sum_min_x(small)
    elif family == "einsum":
        mem_inputs = {k: np.load(p) for k, p in files.items()}

    def status(key):
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key + ":"))

    def write_bytes():
        with open("/proc/self/io") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("write_bytes:"))

    # -- the expression (the same NumPy-style code where the peer dispatches NumPy's functions)
    def build():
        if family in ("sum", "full"):
            a, s = leaf_mem(mem_inputs["data"]), leaf_mem(mem_inputs["scales"])
            N = params["N"]
            if peer == "cubed":
                t = xp.tile(a, (N, 1, 1, 1)) * s[:, None, None]
                return xp.sum(t, axis=0) if family == "sum" else t
            t = np.tile(a, (N, 1, 1, 1)) * s[:, None, None]
            return np.sum(t, axis=0) if family == "sum" else t
        if family == "sqrt":
            X = leaf_file(files["X"])
            return xp.sqrt(X) if peer == "cubed" else np.sqrt(X)
        if family == "minimum":
            x = leaf_mem(mem_inputs["x"])
            if peer == "cubed":
                return xp.minimum(x[:, None, :], x[None, :, :])
            return np.minimum(x[:, None, :], x[None, :, :])
        if family == "rowsum":
            X = leaf_file(files["X"])
            return xp.sum(X, axis=0) if peer == "cubed" else np.sum(X, axis=0)
        if family == "einsum":
            ops = {k: leaf_mem(v) for k, v in mem_inputs.items()}
            subs = params["subs"]
            if peer == "cubed":
                if subs == "ij,jk,ik->i":
                    return xp.sum(xp.matmul(ops["A"], ops["B"]) * ops["C"], axis=1)
                return xp.matmul(xp.permute_dims(ops["A"], (1, 0)), ops["b"][:, None] * ops["C"])
            names = ["A", "B", "C"] if subs == "ij,jk,ik->i" else ["A", "b", "C"]
            return np.einsum(subs, *[ops[n] for n in names], optimize=True)
        if family == "stdz":
            X = leaf_file(files["X"])
            if peer == "cubed":
                Z = (X - xp.mean(X, axis=0)) / xp.std(X, axis=0)
                return xp.mean(Z, axis=0), xp.var(Z, axis=0)
            Z = (X - np.mean(X, axis=0)) / np.std(X, axis=0)
            return np.mean(Z, axis=0), np.var(Z, axis=0)
        if family == "transpose":
            X = leaf_file(files["X"])
            return xp.permute_dims(X, (1, 0)) if peer == "cubed" else X.T
        if family == "seed":
            # The report's three published forms, written as a NumPy user would.
            d, s = leaf_mem(mem_inputs["data"]), mem_inputs["scales"]
            N, n = params["N"], len(mem_inputs["scales"])
            lib = xp if peer == "cubed" else np
            if params["form"] == "stack":
                t = lib.stack([lib.tile(d[i], (N, 1, 1)) * s[i] for i in range(n)])
                return lib.sum(lib.moveaxis(t, 0, 1) if peer == "cubed" else t.swapaxes(0, 1), axis=0)
            if params["form"] == "pysum":
                return sum(lib.tile(d * s[:, None, None], (N, 1, 1, 1))[k] for k in range(N))
            r = lib.repeat(d * s[:, None, None], N, axis=0)
            if params["form"] == "repeat-outer":
                # The Dask answer's own form: the copies outermost (N need
                # not divide the number of arrays).
                return lib.sum(lib.reshape(r, (N, n, 76, 76)), axis=0)
            return lib.sum(lib.reshape(r, (n, N, 76, 76)), axis=1)
        if family == "newton":
            e = leaf_mem(np.full(sizes(small)["newton"][0], 3.0))
            for _ in range(sizes(small)["newton"][1]):
                e = 0.5 * (e + 2.0 / e)
            return e
        if family == "estep":
            X, Q = leaf_file(files["X"]), leaf_mem(mem_inputs["Q"])
            if params["form"] == "einsum" and peer != "cubed":
                return np.einsum("ij,jk,ik->i", X, Q, X, optimize=True)
            if peer == "cubed":
                return xp.sum(xp.matmul(X, Q) * X, axis=1)
            return np.sum(X.dot(Q) * X, axis=1)
        if family == "mstep":
            X, w = leaf_file(files["X"]), leaf_file(files["w"])
            if peer == "cubed":
                return xp.matmul(xp.permute_dims(X, (1, 0)) * w, X)
            return (X.T * w).dot(X)
        if family == "meanstd":
            X = leaf_file(files["X"])
            lib = xp if peer == "cubed" else np
            return lib.mean(X, axis=0), lib.std(X, axis=0)
        raise ValueError(family)

    def finish(x):
        if family in ("sum", "einsum", "seed", "newton", "estep", "mstep"):
            return {"out": ("mem", to_memory(x))}
        if family in ("stdz", "meanstd"):
            if peer == "memfit":
                m, v = ma.compute(*x, memory_limit=limit, n_jobs=threads)
            elif peer == "dask":
                m, v = da.compute(*x)
            elif peer == "cubed":
                m, v = cubed.compute(*x)
            else:
                m, v = x
            second = "var" if family == "stdz" else "std"
            return {"mean": ("mem", np.asarray(m)), second: ("mem", np.asarray(v))}
        if family == "full" and params["fmt"] == "zarr":
            return {"out": to_zarr(x, str(out_dir / "out.zarr"))}
        return {"out": to_npy(x, str(out_dir / "out.npy"))}

    if peer == "memfit":  # the plan, for the log (not timed)
        try:
            x = build()
            xs = x if isinstance(x, tuple) else (x,)
            out = None if family in ("sum", "einsum", "stdz", "seed", "newton", "estep", "mstep", "meanstd") else str(
                out_dir / ("out.zarr" if params.get("fmt") == "zarr" else "out.npy"))
            info["plan"] = str(xs[0].explain(memory_limit=limit, n_jobs=threads, output=out))
        except Exception as e:  # noqa: BLE001
            info["plan"] = f"explain failed: {type(e).__name__}: {e}"

    import gc

    gc.collect()
    base = status("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    w0 = write_bytes()
    t0 = time.perf_counter()
    results = finish(build())
    secs = time.perf_counter() - t0
    hwm = status("VmHWM")
    written = write_bytes() - w0

    # -- the sample of the result (after the measurement)
    shape = result_shape(family, params, small)
    idx = sample_index(shape, n_samples(family))
    samples = {}
    for name, (kind, obj) in results.items():
        if kind == "mem":
            arr = obj
        elif kind == "npy":
            arr = np.load(obj, mmap_mode="r")
        else:
            import zarr

            arr = zarr.open_array(obj, mode="r")
            samples[name] = np.asarray(arr.vindex[idx], dtype=np.float64).tolist()
            info.setdefault("shape", list(arr.shape))
            continue
        info.setdefault("shape", list(arr.shape))
        samples[name] = np.asarray(arr[idx], dtype=np.float64).tolist()
    print(json.dumps({"secs": secs, "peak": hwm, "added": hwm - base, "base": base, "written": written,
                      "samples": samples, **info}))


# ---------------------------------------------------------------------------
# The parent


def run_child(peer, family, params, small, files, tmp, limit, threads, timeout):
    import psutil

    out_dir = Path(tempfile.mkdtemp(prefix=f"out-{peer}-", dir=tmp))
    work_dir = Path(tempfile.mkdtemp(prefix=f"cubed-{peer}-", dir=tmp))
    # memfit-base: the memfit package found first on MEMFIT_BASELINE_PYTHONPATH (a
    # build from before a change), run exactly as the peer memfit.
    child_peer = "memfit" if peer == "memfit-base" else peer
    arg = json.dumps({"peer": child_peer, "family": family, "params": params, "small": small, "files": files,
                      "out_dir": str(out_dir), "limit": limit, "threads": threads, "work_dir": str(work_dir)})
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
               MKL_NUM_THREADS=str(threads))
    if peer == "memfit-base":
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.environ["MEMFIT_BASELINE_PYTHONPATH"],
                                                         env.get("PYTHONPATH")]))
    stdout_f = tempfile.TemporaryFile(dir=tmp)
    stderr_f = tempfile.TemporaryFile(dir=tmp)
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, __file__, "--child", arg], stdout=stdout_f, stderr=stderr_f,
                            env=env, start_new_session=True)
    ps = psutil.Process(proc.pid)
    tree_peak, killed, max_children = 0, None, 0
    while proc.poll() is None:
        try:
            kids = ps.children(recursive=True)
            max_children = max(max_children, len(kids))
            rss = ps.memory_info().rss + sum(c.memory_info().rss for c in kids)
            tree_peak = max(tree_peak, rss)
        except psutil.Error:
            pass
        if time.perf_counter() - t0 > timeout:
            killed = f"timeout > {timeout:.0f} s"
        elif shutil.disk_usage(tmp).free < 6 * GiB:
            killed = "killed: disk under 6 GiB free"
        if killed:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            break
        time.sleep(0.1)
    stdout_f.seek(0)
    stderr_f.seek(0)
    out, err = stdout_f.read().decode(errors="replace"), stderr_f.read().decode(errors="replace")
    shutil.rmtree(out_dir, ignore_errors=True)
    shutil.rmtree(work_dir, ignore_errors=True)
    if killed:
        return {"status": killed, "tree_peak": tree_peak}
    if proc.returncode != 0:
        lines = [ln for ln in err.strip().splitlines() if ln.strip()]
        if proc.returncode == -signal.SIGKILL:
            why = "killed (SIGKILL: out of memory)"
        elif lines:
            why = "error: " + lines[-1][:300]
        else:
            why = f"exit code {proc.returncode}"
        return {"status": why, "tree_peak": tree_peak, "stderr": err[-3000:]}
    r = json.loads(out.strip().splitlines()[-1])
    r["status"] = "ok"
    r["tree_peak"] = tree_peak
    r["max_children"] = max_children
    return r


def max_rel_err(samples, ref, floor):
    import numpy as np

    worst = 0.0
    refs = ref if isinstance(ref, dict) else {"out": ref}
    for name, want in refs.items():
        got = np.asarray(samples.get(name, []), dtype=np.float64)
        want = np.asarray(want, dtype=np.float64)
        if got.shape != want.shape:
            return float("inf")
        with np.errstate(invalid="ignore"):
            err = np.abs(got - want) / np.maximum(np.abs(want), floor)
        err = np.where(np.isnan(got) & np.isnan(want), 0.0, err)
        worst = max(worst, float(np.max(err)) if err.size else 0.0)
    return worst


def fmt_row(case, peer, r, memfit_secs):
    if r["status"] != "ok":
        tree = f"{r.get('tree_peak', 0) / MiB:9.0f}" if r.get("tree_peak") else f"{'-':>9}"
        return f"{case:22} {peer:7} {'-':>8} {tree} {'-':>9} {'-':>9} {'-':>8} {'-':>8}  {r['status']}"
    ratio = f"{r['secs'] / memfit_secs:7.2f}x" if memfit_secs and peer != "memfit" else f"{'':8}"
    flag = r.get("flag", "")
    return (f"{case:22} {peer:7} {r['secs']:8.2f} {r['peak'] / MiB:9.0f} {r['added'] / MiB:9.0f} "
            f"{r['written'] / 1e9:9.2f} {ratio:>8} {r['err']:8.1e}  ok{flag}")


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        a = json.loads(sys.argv[2])
        return child(a["peer"], a["family"], a["params"], a["small"], a["files"], a["out_dir"], a["limit"],
                     a["threads"], a["work_dir"])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true", help="sizes about 8x smaller (smoke run)")
    ap.add_argument("--cases", default=",".join(FAMILY_OF_OPTION),
                    help="comma-separated: " + ",".join(FAMILY_OF_OPTION))
    ap.add_argument("--peers", default=",".join(PEERS))
    ap.add_argument("--limit", default="256MiB", help="memfit's memory_limit and cubed's allowed_mem")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per run")
    ap.add_argument("--tmp", help="directory for input and output files (default: a new one in /tmp)")
    ap.add_argument("--json", help="write all results here")
    ap.add_argument("--plans", action="store_true", help="print memfit's plan for each case")
    args = ap.parse_args()
    import numpy as np
    import psutil

    limit = parse_bytes(args.limit)
    families = [c.strip() for c in args.cases.split(",") if c.strip()]
    for c in families:
        if c not in FAMILY_OF_OPTION:
            raise SystemExit(f"unknown case {c!r}; choose from {','.join(FAMILY_OF_OPTION)}")
    peers = [p.strip() for p in args.peers.split(",") if p.strip()]
    ram = psutil.virtual_memory().total
    tmp = Path(args.tmp or tempfile.mkdtemp(prefix="array_bench-", dir="/tmp"))
    tmp.mkdir(parents=True, exist_ok=True)
    versions = {}
    for mod in ("numpy", "dask", "cubed", "zarr", "memfit"):
        try:
            versions[mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001
            versions[mod] = "?"
    print(f"memory_limit / allowed_mem {args.limit} ({limit} bytes), {args.threads} threads, timeout "
          f"{args.timeout:.0f} s, RAM {ram / GiB:.1f} GiB, files in {tmp}; "
          + ", ".join(f"{k} {v}" for k, v in versions.items()), flush=True)
    header = (f"{'case':22} {'peer':7} {'seconds':>8} {'peak MiB':>9} {'added':>9} {'written GB':>9} "
              f"{'speed-up':>8} {'max err':>8}  status")
    print(header, flush=True)
    all_results = []
    try:
        for case, family, params in case_list(args.small):
            if family not in families:
                continue
            d = tmp / "inputs" / family
            d.mkdir(parents=True, exist_ok=True)
            t = time.perf_counter()
            files = make_inputs(family, params, args.small, d)
            idx = sample_index(result_shape(family, params, args.small), n_samples(family))
            ref = reference(family, params, args.small, files, idx)
            setup = time.perf_counter() - t
            floor = 1.0 if family == "stdz" else 1e-300
            got = {}
            for peer in peers:
                if peer == "numpy" and numpy_estimate(family, params, args.small) > ram / 2:
                    r = {"status": f"skipped: needs ~{numpy_estimate(family, params, args.small) / 1e9:.0f} GB "
                                   f"in memory (> half the RAM)"}
                else:
                    r = run_child(peer, family, params, args.small, files, tmp, limit, args.threads, args.timeout)
                if r["status"] == "ok":
                    r["err"] = max_rel_err(r.pop("samples"), ref, floor)
                    if r["err"] > 1e-12:
                        r["flag"] = "  MISMATCH > 1e-12"
                    if peer == "memfit" and r["added"] > limit + 64 * MiB:
                        r["flag"] = r.get("flag", "") + f"  OVER limit+64MiB"
                got[peer] = r
                m = got.get("memfit", {})
                print(fmt_row(case, peer, r, m.get("secs") if m.get("status") == "ok" else None), flush=True)
                if r.get("stderr") and r["status"].startswith(("error", "exit")):
                    print("    " + "\n    ".join(r["stderr"].strip().splitlines()[-6:]), flush=True)
                if args.plans and peer == "memfit" and r.get("plan"):
                    print("    " + "\n    ".join(r["plan"].splitlines()[:25]), flush=True)
                all_results.append({"case": case, "peer": peer,
                                    **{k: v for k, v in r.items() if k not in ("stderr",)}})
            print(f"{'':22} (inputs and reference: {setup:.1f} s)", flush=True)
            # the next case's inputs replace this one's (rowsum's 8 GB input must not linger)
            shutil.rmtree(d, ignore_errors=True)
    finally:
        if args.json:
            Path(args.json).write_text(json.dumps(all_results, indent=1))
        if not args.tmp:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            shutil.rmtree(tmp / "inputs", ignore_errors=True)


if __name__ == "__main__":
    main()
