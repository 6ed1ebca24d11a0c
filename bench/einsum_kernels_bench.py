"""The GMM report's E- and M-steps written in plain NumPy on memfit.array,
side by side with memfit's own fused kernels, in one run (issue 23, item 4:
the E-step forms within 2x of ``row_quadratic_form``).

    python bench/einsum_kernels_bench.py [--rows 200000] [--features 300] [--limit 64MiB] [--threads 2]

Writes X (rows x features float64 .npy) to a temporary folder (deleted at
the end) and prints, per form, the best of two warm runs in seconds, the
ratio to the kernel and the largest difference from it.
"""

import argparse
import os
import tempfile
import time

import numpy as np

import memfit
import memfit.array as ma


def best(f, repeats=2):
    secs, out = float("inf"), None
    for _ in range(repeats):
        started = time.perf_counter()
        out = f()
        secs = min(secs, time.perf_counter() - started)
    return secs, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--features", type=int, default=300)
    ap.add_argument("--limit", default="64MiB")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    n, d, lim, jobs = a.rows, a.features, a.limit, a.threads
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "X.npy")
        rng = np.random.default_rng(0)
        X = np.lib.format.open_memmap(path, mode="w+", dtype=np.float64, shape=(n, d))
        for at in range(0, n, 20_000):
            X[at:at + 20_000] = rng.standard_normal((min(20_000, n - at), d))
        X.flush()
        del X
        A = rng.standard_normal((d, d))
        Q = A @ A.T / d
        w = rng.random(n)
        x, mm = ma.from_npy(path), np.load(path, mmap_mode="r")
        rows = [("row_quadratic_form", best(lambda: memfit.row_quadratic_form(mm, Q, memory_limit=lim, n_jobs=jobs)))]
        rows.append(("einsum ij,jk,ik->i", best(lambda: np.einsum("ij,jk,ik->i", x, Q, x).compute(memory_limit=lim, n_jobs=jobs))))
        rows.append(("sum(X.dot(Q) * X, 1)", best(lambda: np.sum(x.dot(Q) * x, axis=1).compute(memory_limit=lim, n_jobs=jobs))))
        rows.append(("weighted_scatter", best(lambda: memfit.weighted_scatter(mm, w, memory_limit=lim, n_jobs=jobs))))
        rows.append(("(X.T * w) @ X", best(lambda: ((x.T * w) @ x).compute(memory_limit=lim, n_jobs=jobs))))
    print(f"{n} x {d} .npy, memory_limit {lim}, {jobs} threads; numpy {np.__version__}")
    print(f"{'form':24} {'seconds':>8} {'vs kernel':>10} {'max diff':>9}")
    for i, (name, (secs, out)) in enumerate(rows):
        kernel = rows[0] if i < 3 else rows[3]
        ratio = f"{secs / kernel[1][0]:9.2f}x" if kernel[0] != name else ""
        diff = np.abs(out - kernel[1][1]).max()
        print(f"{name:24} {secs:8.2f} {ratio:>10} {diff:9.1e}")


if __name__ == "__main__":
    main()
