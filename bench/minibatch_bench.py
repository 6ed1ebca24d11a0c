"""Side-by-side benchmark of mini-batch k-means: memfit.MiniBatchKMeans
against scikit-learn's MiniBatchKMeans, from the same random_state (so the
same batches, initial centres, reassignments and number of steps), each in
its own child process on the same in-memory data.

Reported per peer: seconds per step (the steps alone, clocked inside the fit
of `max_iter` 2m with `compute_labels` and early stopping off: the time from
the first step's start to the last's over the steps between, so each step
counts with the drawing of its batch and the convergence check; after a fit of
m that warms up both peers), the whole fit of 2m with labels,
peak memory the fit added over the data, and the final inertia of one exact
pass (the same pass for both: memfit's `score` on each peer's centres).

Cases:
- blobs: 1,000,000 × 8 float64, k = 100, batch 1,024.
- embeddings: 100,000 × 128 float32 unit rows around 200 directions, k = 1,000, batch 4,096.
- mnist: MNIST 70,000 × 784 uint8 as stored, k = 100, batch 1,024.
- tfidf: sparse TF-IDF rows (scipy CSR), the synthetic Zipf corpus of
  bench/sparse_bench.py, 200,000 documents × 100,000 terms, k = 100, batch 1,024
  (made once into the temporary folder and reused).

Usage: python bench/minibatch_bench.py [--threads 2] [--only blobs|embeddings|mnist|tfidf] [--steps 300]
Needs: the memfit package, scikit-learn, scipy, threadpoolctl; MNIST from ../shared/datasets (skipped when absent).
"""
import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MNIST = ROOT.parent / "shared" / "datasets" / "mnist_X_uint8.npy"
MiB = 1 << 20
CASES = {"blobs": (100, 1024), "embeddings": (1000, 4096), "mnist": (100, 1024), "tfidf": (100, 1024)}
TFIDF = Path(tempfile.gettempdir()) / "memfit_bench_tfidf_200000x100000.npz"


def data(case):
    import numpy as np

    rng = np.random.RandomState(0)
    if case == "blobs":
        centers = rng.randn(100, 8) * 5
        return centers[rng.randint(100, size=1_000_000)] + rng.randn(1_000_000, 8)
    if case == "embeddings":
        dirs = rng.randn(200, 128)
        X = (dirs[rng.randint(200, size=100_000)] + 0.3 * rng.randn(100_000, 128)).astype(np.float32)
        return X / np.linalg.norm(X, axis=1, keepdims=True)
    if case == "tfidf":
        import scipy.sparse as sp

        if not TFIDF.exists():
            from sparse_bench import corpus

            corpus(200_000, 100_000, TFIDF)
        return sp.load_npz(TFIDF)
    return np.load(MNIST)


def child(peer, case, threads, steps):
    from threadpoolctl import threadpool_limits

    X = data(case)
    k, batch = CASES[case]

    def status(key):
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key + ":"))

    starts = []

    def clocked(step):
        def step_clocked(*args, **kwargs):
            starts.append(time.perf_counter())
            return step(*args, **kwargs)

        return step_clocked

    if peer == "memfit":
        from memfit import MiniBatchKMeans

        MiniBatchKMeans._step = clocked(MiniBatchKMeans._step)
        extra = {"n_jobs": threads, "memory_limit": "1GiB"}
    else:
        from sklearn.cluster import MiniBatchKMeans, _kmeans

        _kmeans._mini_batch_step = clocked(_kmeans._mini_batch_step)
        extra = {}
    n = X.shape[0]
    # max_iter * n // batch steps: the smallest max_iter giving `steps`.
    max_iter = max(1, -(-steps * batch // n))

    def fit(max_iter, compute_labels):
        est = MiniBatchKMeans(k, batch_size=batch, random_state=0, max_iter=max_iter, max_no_improvement=None,
                              compute_labels=compute_labels, **extra)
        start = time.perf_counter()
        est.fit(X)
        return est, time.perf_counter() - start

    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    base = status("VmRSS")
    with threadpool_limits(threads):
        fit(max_iter, False)
        starts.clear()
        est, _ = fit(2 * max_iter, False)
        per_step = (starts[-1] - starts[0]) / max(1, len(starts) - 1)
        _, with_labels = fit(2 * max_iter, True)
    print(json.dumps({"per_step": per_step, "steps": int(est.n_steps_), "fit": with_labels,
                      "added_mib": (status("VmHWM") - base) / MiB, "centers": est.cluster_centers_.tolist()}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--only")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(*args.child, args.threads, args.steps)
    import numpy as np

    from memfit import KMeans

    print(f"{'case':11} {'peer':8} {'ms/step':>8} {'steps':>6} {'fit s':>7} {'added MiB':>9} {'inertia':>18}")
    for case in CASES:
        if args.only not in (None, case):
            continue
        if case == "mnist" and not MNIST.exists():
            print(f"{case:11} skipped: {MNIST} not found")
            continue
        X = data(case)
        got = {}
        for peer in ("memfit", "sklearn"):
            out = subprocess.run(
                [sys.executable, __file__, "--threads", str(args.threads), "--steps", str(args.steps),
                 "--child", peer, case],
                check=True, capture_output=True, text=True,
            ).stdout
            r = got[peer] = json.loads(out.strip().splitlines()[-1])
            c = np.asarray(r["centers"], dtype=X.dtype if X.dtype == np.float32 else np.float64)
            km = KMeans(len(c), init=c, n_init=1, max_iter=1)
            km.cluster_centers_, km.n_features_in_, km._n_features_out = c, X.shape[1], len(c)
            r["inertia"] = -km.score(X)
            print(f"{case:11} {peer:8} {1e3 * r['per_step']:8.2f} {r['steps']:6d} {r['fit']:7.2f} "
                  f"{r['added_mib']:9.1f} {r['inertia']:18.10e}")
        m, s = got["memfit"], got["sklearn"]
        print(f"{case:11} ratio    per step {s['per_step'] / m['per_step']:.2f}x, whole fit {s['fit'] / m['fit']:.2f}x, "
              f"inertia rel. diff {abs(m['inertia'] - s['inertia']) / s['inertia']:.1e}")


if __name__ == "__main__":
    main()
