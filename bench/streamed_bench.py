"""Side-by-side benchmark of memfit.array's value-dependent results
(``bincount``, ``histogram``, ``unique``) against NumPy on the same
in-memory values, each (case, peer) in its own child process.

The child builds the values, resets its peak-RSS counter
(/proc/self/clear_refs) and runs the case; reported: seconds (wall clock),
"added" peak RSS (VmHWM minus VmRSS before the run: the result and every
temporary), and whether memfit's result equals NumPy's bit for bit.

    python bench/streamed_bench.py [--limit 16MiB] [--threads 2]
"""

import argparse
import json
import subprocess
import sys
import textwrap

CASES = {
    # 2M values up to 5e7: a result of 400 MB (helper 116's case).
    "bincount, 2M values < 5e7": (
        "x = rng.integers(0, 5 * 10**7, 2_000_000); x[0] = 5 * 10**7 - 1",
        "np.bincount(x)",
        "ma.bincount(ma.asarray(x), memory_limit=LIMIT, n_jobs=THREADS)",
    ),
    "bincount, 20M values < 3e6, weights": (
        "x = rng.integers(0, 3 * 10**6, 20_000_000); w = rng.standard_normal(x.size)",
        "np.bincount(x, w)",
        "ma.bincount(ma.asarray(x), ma.asarray(w), memory_limit=LIMIT, n_jobs=THREADS)",
    ),
    "histogram, 2M values, 1e7 bins": (
        "x = rng.standard_normal(2_000_000)",
        "np.histogram(x, bins=10**7)[0]",
        "ma.histogram(ma.asarray(x), bins=10**7, memory_limit=LIMIT, n_jobs=THREADS)[0]",
    ),
    "unique, 5M values, 1M distinct": (
        "x = rng.integers(0, 10**6, 5_000_000).astype(np.float64)",
        "np.unique(x)",
        "ma.unique(ma.asarray(x), memory_limit=LIMIT, n_jobs=THREADS)",
    ),
}

CHILD = textwrap.dedent(
    """
    import hashlib, json, sys, time
    import numpy as np
    import memfit.array as ma
    LIMIT, THREADS = sys.argv[1], int(sys.argv[2])
    rng = np.random.default_rng(0)
    exec(sys.argv[3])
    def status(key):
        for line in open("/proc/self/status"):
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    ma.bincount(ma.asarray(np.arange(3)))  # imports done before the baseline
    open("/proc/self/clear_refs", "w").write("5")
    base = status("VmRSS")
    t = time.perf_counter()
    r = np.asarray(eval(sys.argv[4]))
    seconds = time.perf_counter() - t
    print(json.dumps({"seconds": seconds, "added": status("VmHWM") - base,
                      "digest": hashlib.sha256(r.tobytes()).hexdigest() + str(r.dtype) + str(r.shape)}))
    """
)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", default="16MiB")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    print(f"memory_limit {args.limit}, {args.threads} threads; added = peak RSS over the run's start")
    print(f"{'case':40} {'peer':7} {'seconds':>8} {'added MiB':>10} {'numpy/memfit':>13}  same bits")
    for name, (setup, numpy_call, memfit_call) in CASES.items():
        runs = {}
        for peer, call in (("numpy", numpy_call), ("memfit", memfit_call)):
            out = subprocess.run([sys.executable, "-c", CHILD, args.limit, str(args.threads), setup, call],
                                 capture_output=True, text=True, check=True)
            runs[peer] = json.loads(out.stdout.strip().splitlines()[-1])
        for peer, r in runs.items():
            ratio = f"{runs['numpy']['seconds'] / r['seconds']:.2f}x" if peer == "memfit" else ""
            same = str(r["digest"] == runs["numpy"]["digest"]) if peer == "memfit" else ""
            print(f"{name:40} {peer:7} {r['seconds']:8.3f} {r['added'] / 2**20:10.1f} {ratio:>13}  {same}")


if __name__ == "__main__":
    main()
