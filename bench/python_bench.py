"""Side-by-side benchmark of the Python package: memfit.KMeans and
memfit.GaussianMixture against scikit-learn's classes, called the same way
from Python on the same in-memory arrays and the same initial parameters.

Each (peer, case) runs in its own child process, which builds the data, then
resets its peak-RSS counter (/proc/self/clear_refs) and fits: the reported
peak is what the fit added on top of the data (a copy of X shows up here).
Times are whole `fit` calls (validation, every iteration, final pass).

Cases:
- kmeans-blobs: 1,000,000 × 8 float64, k = 100, init = the same 100 rows, 20 iterations (tol 0).
- kmeans-mnist: MNIST 70,000 × 784 uint8 as stored (scikit-learn converts it to float64), k = 10, 20 iterations.
- gmm-blobs: 200,000 × 20 float64, 10 full components from the same weights/means/precisions, 10 iterations.

Usage: python bench/python_bench.py [--threads 2] [--only kmeans-blobs|kmeans-mnist|gmm-blobs]
Needs: the memfit package (pip install .), scikit-learn, threadpoolctl; MNIST from
../shared/datasets/mnist_X_uint8.npy (skipped when absent).
"""
import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MNIST = ROOT.parent / "shared" / "datasets" / "mnist_X_uint8.npy"
MiB = 1 << 20


def data(case):
    """The case's X and initial parameters (seeded)."""
    import numpy as np

    rng = np.random.RandomState(0)
    if case == "kmeans-blobs":
        centers = rng.randn(100, 8) * 5
        X = centers[rng.randint(100, size=1_000_000)] + rng.randn(1_000_000, 8)
        return X, {"init": X[:100].copy()}
    if case == "kmeans-mnist":
        X = np.load(MNIST)
        return X, {"init": X[:10].astype(np.float64)}
    centers = rng.randn(10, 20) * 4
    X = centers[rng.randint(10, size=200_000)] + rng.randn(200_000, 20)
    return X, {
        "weights_init": np.full(10, 0.1),
        "means_init": centers + 0.5,
        "precisions_init": np.repeat(np.eye(20)[None], 10, axis=0),
    }


def child(peer, case, threads):
    """Fits one peer on one case in this process; prints a JSON line."""
    from threadpoolctl import threadpool_limits

    X, init = data(case)

    def status(key):
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key + ":"))

    if peer == "memfit":
        import memfit as lib

        extra = {"n_jobs": threads, "memory_limit": "1GiB"}
    else:
        import sklearn.cluster
        import sklearn.mixture

        lib = type("sk", (), {"KMeans": sklearn.cluster.KMeans, "GaussianMixture": sklearn.mixture.GaussianMixture})
        extra = {}
    if case.startswith("kmeans"):
        est = lib.KMeans(n_clusters=len(init["init"]), init=init["init"], n_init=1, max_iter=20, tol=0, **extra)
    else:
        est = lib.GaussianMixture(n_components=10, max_iter=10, tol=0, **init, **extra)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    base = status("VmRSS")
    with threadpool_limits(threads):
        start = time.perf_counter()
        est.fit(X)
        secs = time.perf_counter() - start
    score = float(est.inertia_) if case.startswith("kmeans") else float(est.lower_bound_)
    print(json.dumps({"secs": secs, "added_mib": (status("VmHWM") - base) / MiB, "n_iter": int(est.n_iter_),
                      "score": score, "x_mib": X.nbytes / MiB}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(*args.child, args.threads)
    cases = [c for c in ("kmeans-blobs", "kmeans-mnist", "gmm-blobs") if args.only in (None, c)]
    print(f"{'case':14} {'peer':8} {'fit s':>8} {'added MiB':>10} {'X MiB':>7} {'n_iter':>6} {'inertia / lower bound':>24}")
    for case in cases:
        if case == "kmeans-mnist" and not MNIST.exists():
            print(f"{case:14} skipped: {MNIST} not found")
            continue
        got = {}
        for peer in ("memfit", "sklearn"):
            out = subprocess.run([sys.executable, __file__, "--threads", str(args.threads), "--child", peer, case],
                                 check=True, capture_output=True, text=True).stdout
            r = got[peer] = json.loads(out.strip().splitlines()[-1])
            print(f"{case:14} {peer:8} {r['secs']:8.2f} {r['added_mib']:10.1f} {r['x_mib']:7.0f} {r['n_iter']:6d} "
                  f"{r['score']:24.10e}")
        m, s = got["memfit"], got["sklearn"]
        print(f"{case:14} ratio    speed-up {s['secs'] / m['secs']:.2f}x, memory added {m['added_mib']:.1f} vs "
              f"{s['added_mib']:.1f} MiB, score rel. diff {abs(m['score'] - s['score']) / abs(s['score']):.1e}")


if __name__ == "__main__":
    main()
