"""A CuPy peer for the device benchmark (bench/device_run.sh): Lloyd's
k-means as the report behind issue 26 writes it on a GPU, with the whole
n x k distance matrix per iteration (||x||^2 - 2 x c^T + ||c||^2), argmin,
and per-cluster sums by scatter-add (float atomics: not repeatable bit for
bit). Empty clusters keep their centre. Runs from the given initial centres
for a fixed number of iterations and prints one JSON line: seconds per
iteration (after one warm-up iteration), the inertia of the final centres'
labels (float64), and the device's peak pool bytes.

    python3 bench/cupy_kmeans_peer.py X.npy INIT.npy --iters 30 --dtype float64
"""

import argparse
import json
import time

import cupy as cp
import cupyx
import numpy as np


def lloyd_step(x, c, x2):
    d2 = x2[:, None] - 2.0 * (x @ c.T) + (c * c).sum(1)[None, :]
    labels = d2.argmin(1)
    k, d = c.shape
    sums = cp.zeros((k, d), dtype=x.dtype)
    cupyx.scatter_add(sums, labels, x)
    counts = cp.bincount(labels, minlength=k).astype(x.dtype)
    nonempty = counts > 0
    new = cp.where(nonempty[:, None], sums / cp.maximum(counts, 1)[:, None], c)
    return new, labels


def main():
    p = argparse.ArgumentParser()
    p.add_argument("x")
    p.add_argument("init")
    p.add_argument("--iters", type=int, default=30)
    p.add_argument("--dtype", default="float64")
    a = p.parse_args()
    x = cp.asarray(np.load(a.x).astype(a.dtype))
    c = cp.asarray(np.load(a.init).astype(a.dtype))
    x2 = (x * x).sum(1)
    c, _ = lloyd_step(x, c, x2)  # warm-up (kernel compilation)
    cp.cuda.Stream.null.synchronize()
    t = time.perf_counter()
    for _ in range(a.iters - 1):
        c, labels = lloyd_step(x, c, x2)
    cp.cuda.Stream.null.synchronize()
    secs = (time.perf_counter() - t) / max(a.iters - 1, 1)
    xd, cd = x.astype(cp.float64), c.astype(cp.float64)
    d2 = (xd * xd).sum(1)[:, None] - 2.0 * (xd @ cd.T) + (cd * cd).sum(1)[None, :]
    inertia = float(cp.maximum(d2.min(1), 0).sum())
    print(json.dumps({
        "peer": "cupy " + cp.__version__,
        "dtype": a.dtype,
        "secs_per_iter": secs,
        "inertia": inertia,
        "pool_bytes": cp.get_default_memory_pool().total_bytes(),
    }))


if __name__ == "__main__":
    main()
