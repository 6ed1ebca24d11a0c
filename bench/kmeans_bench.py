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
embeddings-like float32 set: 200,000 × 128 unit rows around 200 random
directions (use with --k 1000: issue 24's float32 target).

--matrix runs issue 24's whole matrix instead, each peer once (--repeat
1 unless given), with memfit's three algorithms and scikit-learn's lloyd
and elkan: 2,000,000 × 3 blobs with k = 200 and 30 iterations (the first
report's shape), flights3m with k = 200 and k = 1,000, an embeddings-like
200,000 × 128 float32 set with k = 1,000, and MNIST (70,000 × 784 uint8)
with k = 100, 10 iterations each but the first. It also reports the
distances each peer computed: n · k per iteration for plain Lloyd (faiss,
scikit-learn's lloyd), the distances memfit's bounds did not skip; not known
for elkan, which is skipped where its n × k bounds would not fit in a
quarter of the machine's memory.

Usage: python bench/kmeans_bench.py [--iters 10] [--k 200] [--threads 2] [--repeat 3] [--baseline-bin PATH]
       [--algorithms] [--features 3] [--no-flights] [--scale 1] [--embeddings] [--matrix]
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
    if peer in ("sklearn", "sklearn-elkan"):
        from sklearn.cluster import KMeans
        from threadpoolctl import threadpool_limits

        algorithm = "elkan" if peer == "sklearn-elkan" else "lloyd"
        with threadpool_limits(threads):
            t = time.perf_counter()
            km = KMeans(C.shape[0], init=C, n_init=1, max_iter=iters, tol=0, algorithm=algorithm).fit(X)
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
        Xf = X if X.dtype.kind == "f" else X.astype(np.float64)
        inertia = float(((Xf - km.centroids[labels[:, 0]].astype(Xf.dtype)) ** 2).sum())
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


def embeddings(path, n, seed=0):
    """n × 128 float32 unit rows around 200 random directions, saved to path."""
    import numpy as np

    rng = np.random.default_rng(seed)
    directions = rng.standard_normal((200, 128)).astype(np.float32)
    E = directions[rng.integers(0, 200, n)] + 0.5 * rng.standard_normal((n, 128)).astype(np.float32)
    E /= np.linalg.norm(E, axis=1, keepdims=True)
    np.save(path, E)
    return path


def blobs(tmp, n, features, centers):
    path = tmp / f"blobs_{n}x{features}.npy"
    if not path.exists():
        subprocess.run([MEMFIT, "generate", "blobs", "--n-samples", str(n), "--n-features", str(features),
                        "--centers", str(centers), "--seed", "7", "--out", str(path)], check=True,
                       stdout=subprocess.DEVNULL)
    return path


def cases(a, tmp):
    """(label, path, dtypes, k, iterations) of each data set to run."""
    import numpy as np

    flights, mnist = SHARED / "flights3m_f64.npy", SHARED / "mnist_X_uint8.npy"
    if a.matrix:
        out = [("blobs 2,000,000 × 3", blobs(tmp, 2_000_000, 3, 200), ("float64",), 200, a.iters or 30)]
        for k in (200, 1000):
            if flights.exists():
                out.append(("flights3m 3,000,000 × 3", flights, ("float64",), k, a.iters or 10))
        out.append(("embeddings 200,000 × 128 (unit)", embeddings(tmp / "emb200k.npy", 200_000), ("float32",),
                    1000, a.iters or 10))
        if mnist.exists():
            out.append(("MNIST 70,000 × 784 (uint8)", mnist, ("uint8",), 100, a.iters or 10))
        return out
    iters = a.iters or 10
    if a.embeddings:
        return [("embeddings 200,000 × 128 (unit)", embeddings(tmp / "emb200k.npy", 200_000), ("float32",), a.k, iters)]
    path = blobs(tmp, 1_000_000, a.features, a.k)
    label = f"blobs 1,000,000 × {a.features}"
    if a.scale != 1.0:
        np.save(path, np.load(path) * a.scale)
        label += f" × {a.scale:g}"
    out = [(label, path, ("float64", "float32"), a.k, iters)]
    if a.no_flights:
        pass
    elif flights.exists():
        out.append(("flights3m 3,000,000 × 3", flights, ("float64", "float32"), a.k, iters))
    else:
        print(f"skipping flights3m: {flights} not found")
    return out


def elkan_fits(n, k):
    """Whether scikit-learn's elkan (n × k float64 lower bounds) fits in a
    quarter of this machine's memory."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return n * k * 8 <= total // 4


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, help="iterations (default 10; 30 for the matrix's first case)")
    ap.add_argument("--k", type=int, default=200)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--repeat", type=int, help="runs per peer; the fastest is reported (default 3; 1 with --matrix)")
    ap.add_argument("--baseline-bin", help="another memfit binary to run as the peer memfit-base")
    ap.add_argument("--algorithms", action="store_true", help="also memfit --algorithm lloyd and bounded")
    ap.add_argument("--features", type=int, default=3, help="columns of the generated blobs")
    ap.add_argument("--no-flights", action="store_true", help="only the generated blobs")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the generated blobs by this")
    ap.add_argument("--embeddings", action="store_true", help="only 200,000 x 128 float32 unit rows")
    ap.add_argument("--matrix", action="store_true", help="issue 24's matrix of data sets, k and peers")
    ap.add_argument("--child", nargs=5)
    a = ap.parse_args()
    peers = ["memfit", "sklearn", "faiss"]
    if a.algorithms or a.matrix:
        peers[1:1] = ["memfit-lloyd", "memfit-bounded"]
    if a.matrix:
        peers.insert(peers.index("sklearn") + 1, "sklearn-elkan")
    if a.baseline_bin:
        os.environ["MEMFIT_BASELINE_BIN"] = a.baseline_bin
        peers.insert(1, "memfit-base")
    if a.child:
        peer, data, init, iters, threads = a.child
        return child(peer, data, init, int(iters), int(threads))
    import numpy as np

    repeat = a.repeat or (1 if a.matrix else 3)
    tmp = Path(tempfile.mkdtemp(prefix="memfit-bench-"))
    print(f"{a.threads} threads, same initial centres for every peer, fastest of {repeat} run(s)")
    print("s/iter = whole fit / iterations; 'peer/memfit' = the peer's s/iter over memfit's; "
          "distances = point-to-centre distances computed over the fit's iterations")
    print(f"{'data':<34}{'k':>6}{'iters':>6} {'dtype':<9}{'peer':<15}{'s/iter':>9}{'peer/memfit':>12}"
          f"{'peak RSS':>11}{'distances':>11}{'inertia':>18}")
    for name, path, dtypes, k, iters in cases(a, tmp):
        X = np.load(path, mmap_mode="r")
        n = X.shape[0]
        rng = np.random.default_rng(0)
        init = tmp / f"init_{path.stem}_{k}.npy"
        np.save(init, np.asarray(X[np.sort(rng.choice(n, k, replace=False))], dtype=np.float64))
        for dtype in dtypes:
            data = path
            if dtype != X.dtype.name:
                data = tmp / f"{path.stem}_{dtype}.npy"
                np.save(data, np.asarray(X, dtype=dtype))
            here = [p for p in peers if p != "sklearn-elkan" or elkan_fits(n, k)]
            runs = {p: [] for p in here}
            for _ in range(repeat):  # interleaved, so that drifts hit every peer alike
                for p in here:
                    runs[p].append(run_child(p, str(data), str(init), iters, a.threads))
            res = {p: min(r, key=lambda o: o.get("secs", float("inf"))) for p, r in runs.items()}
            m = res["memfit"]["secs"] / res["memfit"]["n_iter"]
            head = f"{name:<34}{k:>6}{iters:>6} {dtype:<9}"
            for peer in peers:
                if peer not in res:
                    print(f"{head}{peer:<15}  skipped: its n × k bounds need {n * k * 8 / 2**30:.0f} GiB")
                    continue
                r = res[peer]
                if "error" in r:
                    print(f"{head}{peer:<15}  failed: {r['error']}")
                    continue
                s = r["secs"] / r["n_iter"]
                ratio = "" if peer == "memfit" else f"{s / m:.2f}x"
                dist = "" if peer == "sklearn-elkan" else f"{n * k * r['n_iter'] * (1 - r.get('skip', 0.0)):.2e}"
                note = f"  (Lloyd passes alone: {r['lloyd_secs_per_iter']:.4f} s/iter" if "lloyd_secs_per_iter" in r else ""
                note += f", {100 * r['skip']:.0f} % of distances skipped)" if "skip" in r else (")" if note else "")
                print(f"{head}{peer:<15}{s:>9.4f}{ratio:>12}{r['peak_rss_bytes'] / 2**20:>8.0f} MiB{dist:>11}"
                      f"{r['inertia']:>18.10e}{note}", flush=True)
            if data != path:
                os.remove(data)


if __name__ == "__main__":
    main()
