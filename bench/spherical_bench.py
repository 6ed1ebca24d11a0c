"""Side-by-side benchmark of spherical (cosine) k-means: memfit's
KMeans(metric="cosine") (plain Lloyd passes and `auto`, which prunes with
bounds) against faiss's Clustering with spherical=True, from the same
initial centres, each in its own child process on the same data.

Reported per peer: seconds per iteration (two fits of m and 2m iterations
with tol = 0: their time difference over their iteration difference; a run
that converges strictly before 2m stops there), the whole fit of 2m
iterations, peak memory the fit added over the data, and, against faiss,
the share of equal labels and the largest centroid difference.

Case: embeddings-like float32 rows (n_samples × 128 around 2,000
directions with noise, unit norm), k = 1,000, initial centres k distinct rows.

Usage: python bench/spherical_bench.py [--n-samples 100000] [--iters 4] [--threads 2]
Needs: the memfit package, faiss-cpu, threadpoolctl.
"""
import argparse
import json
import subprocess
import sys
import time

MiB = 1 << 20
K, D = 1000, 128


def data(n):
    import numpy as np

    rng = np.random.RandomState(0)
    dirs = rng.randn(2000, D)
    X = (dirs[rng.randint(2000, size=n)] + 0.6 * rng.randn(n, D)).astype(np.float32)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    return X, X[rng.choice(n, K, replace=False)].copy()


def child(peer, n, iters, threads):
    import numpy as np
    from threadpoolctl import threadpool_limits

    X, init = data(n)
    if peer == "faiss":
        import faiss
    else:
        from memfit import KMeans

    def status(key):
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key + ":"))

    def fit(max_iter):
        start = time.perf_counter()
        if peer == "faiss":
            faiss.omp_set_num_threads(threads)
            cp = faiss.ClusteringParameters()
            cp.niter, cp.spherical, cp.verbose = max_iter, True, False
            cp.max_points_per_centroid, cp.min_points_per_centroid = 1 << 30, 1
            clus = faiss.Clustering(D, K, cp)
            clus.centroids.resize(init.size)
            faiss.copy_array_to_vector(init.ravel(), clus.centroids)
            index = faiss.IndexFlatIP(D)
            clus.train(X, index)
            _, labels = index.search(X, 1)
            centers, n_iter = faiss.vector_to_array(clus.centroids).reshape(K, D), max_iter
            labels = labels.ravel()
        else:
            km = KMeans(K, init=init, n_init=1, max_iter=max_iter, tol=0, metric="cosine",
                        algorithm=peer.split("-")[1], n_jobs=threads, memory_limit="256MiB").fit(X)
            centers, labels, n_iter = km.cluster_centers_, km.labels_, km.n_iter_
        return time.perf_counter() - start, n_iter, centers, labels

    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    base = status("VmRSS")
    with threadpool_limits(threads):
        fit(1)  # warm: threads, first-use pages
        one, n1, _, _ = fit(iters)
        two, n2, centers, labels = fit(2 * iters)
    print(json.dumps({"per_iter": (two - one) / max(1, n2 - n1), "fit": two, "n_iter": int(n2),
                      "added_mib": (status("VmHWM") - base) / MiB, "centers": np.asarray(centers).tolist(),
                      "labels": np.asarray(labels).tolist()}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-samples", type=int, default=100_000)
    ap.add_argument("--iters", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.child, args.n_samples, args.iters, args.threads)
    import numpy as np

    print(f"{args.n_samples} x {D} float32 unit rows, k = {K}, {args.threads} threads, "
          f"fits of {args.iters} and {2 * args.iters} iterations")
    print(f"{'peer':14} {'s/iter':>8} {'n_iter':>6} {'fit s':>7} {'added MiB':>9} {'same labels':>11} {'max |dc|':>9}")
    got = {}
    for peer in ("faiss", "memfit-lloyd", "memfit-auto"):
        out = subprocess.run([sys.executable, __file__, "--n-samples", str(args.n_samples), "--iters",
                              str(args.iters), "--threads", str(args.threads), "--child", peer],
                             check=True, capture_output=True, text=True).stdout
        r = got[peer] = json.loads(out.strip().splitlines()[-1])
        f = got["faiss"]
        same = np.mean(np.asarray(r["labels"]) == np.asarray(f["labels"]))
        dc = np.abs(np.asarray(r["centers"]) - np.asarray(f["centers"])).max()
        print(f"{peer:14} {r['per_iter']:8.4f} {r['n_iter']:6d} {r['fit']:7.2f} {r['added_mib']:9.1f} "
              f"{same:11.5f} {dc:9.1e}")
    for peer in ("memfit-lloyd", "memfit-auto"):
        print(f"faiss / {peer}: {got['faiss']['per_iter'] / got[peer]['per_iter']:.2f}x per iteration")


if __name__ == "__main__":
    main()
