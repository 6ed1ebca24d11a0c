"""Side-by-side k-means benchmark: memfit vs scikit-learn vs faiss.

Each run happens in its own child process so that its peak resident memory
(ru_maxrss of that child) is measured alone. All peers start from the same
initial centres and run exactly ITER Lloyd iterations (tol = 0; faiss with
subsampling turned off). Seconds per iteration = fit wall time / iterations,
including each peer's own validation and final assignment; Python peers load
the data before their timer starts, memfit reads its .npy inside the timer.

With --baseline-bin PATH, a second memfit build runs as one more peer
("memfit-base"): e.g. a build from before a change, to measure the change's
cost in the same run (BENCHMARKS.md uses it for the exact-argmin refinement).

Each peer runs --repeat times (default 3) and its fastest run is reported,
so that a background hiccup on a shared machine does not decide a ratio.

With --algorithms, memfit also runs as "memfit-lloyd" (--algorithm lloyd)
and "memfit-bounded" (--algorithm bounded) beside "memfit" (the default,
auto): the bounded iterations' speed-up in the same run, their share of
skipped distances, and the same inertia. --features sets the generated
blobs' width (default 3; bounds pay most on wider data). --scale S
multiplies the generated blobs by S (e.g. 1e-20 or 1e20: data far from
1 in magnitude, which memfit's certified fast path handles by an exact
power-of-two scaling). --embeddings replaces the data sets by an
embeddings-like float32 set: 100,000 × 128 unit rows around 200 random
directions (use with --k 1000: issue 24's float32 target).

Usage: python bench/kmeans_bench.py [--iters 10] [--k 200] [--threads 2] [--repeat 3] [--baseline-bin PATH]
       [--algorithms] [--features 3] [--no-flights] [--scale 1] [--embeddings]
Needs: numpy, scikit-learn, faiss-cpu (pip), and target/release/memfit.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MEMFIT = os.environ.get("MEMFIT_BIN", str(ROOT / "target" / "release" / "memfit"))
SHARED = ROOT.parent / "shared" / "datasets"


def child(peer, data, init, iters, threads):
    """Runs one peer in this (child) process; prints a JSON line."""
    import numpy as np

    if peer.startswith("memfit"):
        binary = os.environ["MEMFIT_BASELINE_BIN"] if peer == "memfit-base" else MEMFIT
        algorithm = peer.split("-", 1)[1] if peer in ("memfit-lloyd", "memfit-bounded") else None
        summary = Path(tempfile.mkdtemp()) / "s.json"
        cmd = [binary, "kmeans", data, "--n-clusters", str(np.load(init).shape[0]), "--init", init,
               "--max-iter", str(iters), "--tol", "0", "--threads", str(threads), "--quiet",
               "--summary", str(summary), "--memory-limit", "2GiB"]
        if algorithm:
            cmd += ["--algorithm", algorithm]
        t = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - t
        s = json.loads(summary.read_text())
        print(json.dumps({"secs": wall, "n_iter": s["n_iter"], "inertia": s["inertia"],
                          "lloyd_secs_per_iter": s["timings"]["iterations_secs"] / s["n_iter"],
                          "skip": s.get("mean_skip_share", 0.0)}))
        return
    X = np.load(data)
    C = np.load(init).astype(X.dtype)
    if peer == "sklearn":
        from sklearn.cluster import KMeans
        from threadpoolctl import threadpool_limits

        with threadpool_limits(threads):
            t = time.perf_counter()
            km = KMeans(C.shape[0], init=C, n_init=1, max_iter=iters, tol=0, algorithm="lloyd").fit(X)
            wall = time.perf_counter() - t
        print(json.dumps({"secs": wall, "n_iter": int(km.n_iter_), "inertia": float(km.inertia_)}))
    elif peer == "faiss":
        import faiss

        faiss.omp_set_num_threads(threads)
        X32 = np.ascontiguousarray(X, dtype=np.float32)
        t = time.perf_counter()
        km = faiss.Kmeans(X.shape[1], C.shape[0], niter=iters, max_points_per_centroid=X.shape[0],
                          min_points_per_centroid=1, seed=0, verbose=False)
        km.train(X32, init_centroids=C.astype(np.float32))
        _, labels = km.index.search(X32, 1)
        wall = time.perf_counter() - t
        inertia = float(((X - km.centroids[labels[:, 0]].astype(X.dtype)) ** 2).sum())
        print(json.dumps({"secs": wall, "n_iter": iters, "inertia": inertia}))


def run_child(peer, data, init, iters, threads):
    env = dict(os.environ)
    # Older OpenBLAS builds need these on some CPUs; they slow a current numpy.
    env.pop("OPENBLAS_CORETYPE", None)
    env.pop("OPENBLAS_L2_SIZE", None)
    code = ("import sys, json, resource, subprocess; "
            "r = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
            "sys.stderr.write(r.stderr); r.check_returncode(); "
            "out = json.loads(r.stdout.strip().splitlines()[-1]); "
            "out['peak_rss_bytes'] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024; "
            "print(json.dumps(out))")
    cmd = [sys.executable, "-c", code, sys.executable, __file__, "--child", peer, data, init, str(iters), str(threads)]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        return {"error": r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "failed"}
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--k", type=int, default=200)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--repeat", type=int, default=3, help="runs per peer; the fastest is reported")
    ap.add_argument("--baseline-bin", help="another memfit binary to run as the peer memfit-base")
    ap.add_argument("--algorithms", action="store_true", help="also memfit --algorithm lloyd and bounded")
    ap.add_argument("--features", type=int, default=3, help="columns of the generated blobs")
    ap.add_argument("--no-flights", action="store_true", help="only the generated blobs")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the generated blobs by this")
    ap.add_argument("--embeddings", action="store_true", help="only 100,000 x 128 float32 unit rows")
    ap.add_argument("--child", nargs=5)
    a = ap.parse_args()
    peers = ["memfit", "sklearn", "faiss"]
    if a.algorithms:
        peers[1:1] = ["memfit-lloyd", "memfit-bounded"]
    if a.baseline_bin:
        os.environ["MEMFIT_BASELINE_BIN"] = a.baseline_bin
        peers.insert(1, "memfit-base")
    if a.child:
        peer, data, init, iters, threads = a.child
        return child(peer, data, init, int(iters), int(threads))
    import numpy as np

    tmp = Path(tempfile.mkdtemp(prefix="memfit-bench-"))
    blobs = tmp / "blobs1m_f64.npy"
    subprocess.run([MEMFIT, "generate", "blobs", "--n-samples", "1000000", "--n-features", str(a.features),
                    "--centers", str(a.k), "--seed", "7", "--out", str(blobs)], check=True, stdout=subprocess.DEVNULL)
    label = f"blobs 1,000,000 × {a.features}"
    if a.scale != 1.0:
        np.save(blobs, np.load(blobs) * a.scale)
        label += f" × {a.scale:g}"
    sets = [(label, blobs, ("float64", "float32"))]
    flights = SHARED / "flights3m_f64.npy"
    if a.embeddings:
        rng = np.random.default_rng(0)
        directions = rng.standard_normal((200, 128)).astype(np.float32)
        E = directions[rng.integers(0, 200, 100_000)] + 0.5 * rng.standard_normal((100_000, 128)).astype(np.float32)
        E /= np.linalg.norm(E, axis=1, keepdims=True)
        np.save(tmp / "embeddings.npy", E)
        sets = [("embeddings 100,000 × 128 (unit)", tmp / "embeddings.npy", ("float32",))]
    elif a.no_flights:
        pass
    elif flights.exists():
        sets.append(("flights3m 3,000,000 × 3", flights, ("float64", "float32")))
    else:
        print(f"skipping flights3m: {flights} not found")
    print(f"k = {a.k}, {a.iters} iterations, {a.threads} threads, same initial centres for every peer")
    print("s/iter = whole fit / iterations; 'peer/memfit' = the peer's s/iter over memfit's")
    print(f"{'data':<34}{'dtype':<9}{'peer':<15}{'s/iter':>9}{'peer/memfit':>12}{'peak RSS':>11}{'inertia':>18}")
    for name, path, dtypes in sets:
        X = np.load(path, mmap_mode="r")
        rng = np.random.default_rng(0)
        init = tmp / f"init_{path.stem}.npy"
        np.save(init, np.asarray(X[np.sort(rng.choice(X.shape[0], a.k, replace=False))], dtype=np.float64))
        for dtype in dtypes:
            data = path
            if dtype == "float32" and X.dtype != np.float32:
                data = tmp / f"{path.stem}_f32.npy"
                np.save(data, np.asarray(X, dtype=np.float32))
            runs = {p: [] for p in peers}
            for _ in range(a.repeat):  # interleaved, so that drifts hit every peer alike
                for p in peers:
                    runs[p].append(run_child(p, str(data), str(init), a.iters, a.threads))
            res = {p: min(r, key=lambda o: o.get("secs", float("inf"))) for p, r in runs.items()}
            m = res["memfit"]["secs"] / res["memfit"]["n_iter"]
            for peer, r in res.items():
                if "error" in r:
                    print(f"{name:<34}{dtype:<9}{peer:<15}  failed: {r['error']}")
                    continue
                s = r["secs"] / r["n_iter"]
                ratio = "" if peer == "memfit" else f"{s / m:.2f}x"
                note = f"  (Lloyd passes alone: {r['lloyd_secs_per_iter']:.4f} s/iter" if "lloyd_secs_per_iter" in r else ""
                note += f", {100 * r['skip']:.0f} % of distances skipped)" if "skip" in r else (")" if note else "")
                print(f"{name:<34}{dtype:<9}{peer:<15}{s:>9.4f}{ratio:>12}{r['peak_rss_bytes'] / 2**20:>8.0f} MiB{r['inertia']:>18.10e}{note}")
            if data != path:
                os.remove(data)


if __name__ == "__main__":
    main()
