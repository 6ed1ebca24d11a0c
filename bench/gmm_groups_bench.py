"""Gaussian mixtures whose parameters exceed the memory limit (component
groups), and the wide full-covariance E-step against faer's plain GEMM.

1. E-step throughput, in memory: `memfit gmm` on N × d float64 blobs, K = 10
   full, 3 EM iterations, for each d of --widths; the summary's E-step
   GFLOP/s (`d (d + 1)` flops per row and component) against faer's plain
   GEMM in the E-step's shape (`examples/gemm_gflops`: a (256, d) x (d, d)
   float64 product per thread on every thread), the two alternated --repeats
   times on this machine in this run; medians and their ratio.
2. The report's shape scaled: N × 900 float64, K = 200 full, --memory-limit
   256MiB (the parameters are several times the limit), --max-iter 2: the
   plan (groups, bytes on disk), seconds per EM iteration, E-step GFLOP/s
   and peak RSS; then the same fit with every component in memory
   (--memory-limit 8GiB, --max-iter 1) for the cost of grouping. The time
   per iteration is projected to the report's sizes, 1,000,000 × 900 and
   2,000,000 × 10,000 (K = 200), by the E-step's work `n K d²`, on this
   machine and per core.

Usage: python bench/gmm_groups_bench.py [--rows 20000] [--widths 256,512,900] [--repeats 3] [--skip-wide]
Needs: numpy (pip), target/release/memfit and its example gemm_gflops
(`cargo build --release --bin memfit --example gemm_gflops`).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
MEMFIT = os.environ.get("MEMFIT_BIN", str(ROOT / "target" / "release" / "memfit"))
GEMM = str(ROOT / "target" / "release" / "examples" / "gemm_gflops")
MiB = 1 << 20


def blobs(path, n, d, k, seed=0):
    rs = np.random.RandomState(seed)
    X = np.lib.format.open_memmap(path, mode="w+", dtype=np.float64, shape=(n, d))
    centres = rs.randn(k, d) * 2
    for a in range(0, n, 5000):
        m = min(5000, n - a)
        X[a:a + m] = centres[np.arange(a, a + m) % k] + 0.5 * rs.randn(m, d)
    X.flush()
    del X


def gmm(path, k, limit, iters, tmp):
    summary = Path(tmp) / "summary.json"
    subprocess.run([MEMFIT, "gmm", str(path), "--n-components", str(k), "--memory-limit", limit,
                    "--max-iter", str(iters), "--tol", "0", "--init", "random_from_data", "--quiet",
                    "--summary", str(summary)], check=True, capture_output=True, text=True)
    return json.loads(summary.read_text())


def gemm(d):
    out = subprocess.run([GEMM, str(d), "2"], capture_output=True, text=True, check=True).stdout
    dense = [line for line in out.splitlines() if "dense" in line][0]
    return float(dense.split("float64 ")[1].split()[0])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--widths", default="256,512,900")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--skip-wide", action="store_true")
    args = ap.parse_args()
    n = args.rows
    print(f"machine: {os.cpu_count()} cores; memfit {MEMFIT}")
    with tempfile.TemporaryDirectory() as tmp:
        print(f"\n1. E-step GFLOP/s vs faer plain GEMM, {n} rows, K = 10 full, float64 (medians of {args.repeats})")
        for d in map(int, args.widths.split(",")):
            path = Path(tmp) / f"x{d}.npy"
            blobs(path, n, d, 10)
            e, g = [], []
            for _ in range(args.repeats):
                e.append(gmm(path, 10, "4GiB", 3, tmp)["e_step_gflops_per_sec"])
                g.append(gemm(d))
            em, gm = statistics.median(e), statistics.median(g)
            print(f"d = {d:4d}: E-step {em:6.1f} GFLOP/s (runs {', '.join(f'{v:.1f}' for v in e)}); "
                  f"plain GEMM {gm:6.1f} GFLOP/s (runs {', '.join(f'{v:.1f}' for v in g)}); ratio {em / gm:.0%}")
            path.unlink()
        if args.skip_wide:
            return
        d, k = 900, 200
        path = Path(tmp) / "wide.npy"
        blobs(path, n, d, k)
        print(f"\n2. {n} x {d} float64 ({n * d * 8 / MiB:.0f} MiB), K = {k} full")
        rows = []
        for limit, iters in [("256MiB", 2), ("8GiB", 1)]:
            s = gmm(path, k, limit, iters, tmp)
            plan = s["plan"]
            groups = plan.get("component_groups")
            per_iter = s["timings"]["em_secs"] / s["n_iter"]
            rows.append(per_iter)
            print(f"--memory-limit {limit}: plan {plan['total_bytes'] / MiB:.1f} MiB; "
                  + (f"{groups['count']} groups of {groups['size']}, {groups['scratch_bytes'] / MiB:.0f} MiB on disk, "
                     f"{groups['passes_per_iteration']} passes per iteration; " if groups else "all in memory; ")
                  + f"{per_iter:.1f} s/iteration (E {s['timings']['e_step_secs'] / s['n_iter']:.1f} s, "
                  f"M {s['timings']['m_step_secs'] / s['n_iter']:.1f} s); E-step {s['e_step_gflops_per_sec']:.1f} "
                  f"GFLOP/s; peak RSS {s['peak_rss_bytes'] / MiB:.1f} MiB; lower bounds {s['lower_bounds']}")
            if groups:
                params = k * d * d * 8 * 2
                print(f"  parameters (factors + sums, float64): {params / MiB:.0f} MiB = "
                      f"{params / (256 * MiB):.1f}x the limit; peak RSS - limit = "
                      f"{(s['peak_rss_bytes'] - 256 * MiB) / MiB:.1f} MiB")
        print(f"grouping costs {rows[0] / rows[1]:.2f}x the in-memory time per iteration")
        cores = os.cpu_count()
        for (n2, d2) in [(1_000_000, 900), (2_000_000, 10_000)]:
            scale = (n2 / n) * (d2 / d) ** 2
            t = rows[0] * scale
            print(f"projected {n2:,} x {d2:,}, K = {k}, grouped: {t:,.0f} s/iteration on {cores} cores "
                  f"({t / 3600:.1f} h), {t * cores / 3600:,.1f} core-hours per iteration")


if __name__ == "__main__":
    sys.exit(main())
