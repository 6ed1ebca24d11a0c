"""Side-by-side benchmark of k-means on sparse TF-IDF rows: memfit's
KMeans on a scipy.sparse CSR matrix (read in place, within a memory limit
100 times smaller than the dense matrix, at least 1 GiB) against scikit-learn's sparse
Lloyd, from the same initial centres, each in its own child process on the
same matrix; and memfit's KMeans on the matrix as a Dask array of CSR
chunks of 65,536 rows, read chunk by chunk in the child (no client:
"memfit-dask") and on a LocalCluster of as many single-threaded worker
processes as threads, the chunks persisted there ("memfit-cluster").

Data: a synthetic corpus (no text corpus is reachable here): n_samples
documents over n_features terms, each document 40 + Poisson(120) tokens
drawn from a Zipf law (exponent 1.07) over the vocabulary, half of them
through a permutation of the vocabulary of the document's topic (one of 50),
turned into l2-normalised TF-IDF with sublinear tf (scikit-learn's
TfidfTransformer). Saved once with scipy.sparse.save_npz beside the script's
temporary folder and loaded by each child.

With --uniform-docs N, each document is instead N distinct terms drawn
uniformly (term frequencies uniform in [0.1, 1.1)), l2-normalised: two
documents rarely share a term, so most rows are exactly as far from every
initial centre (rows of X) and the labels are decided by exact ties, the
case where memfit once took 15-50x scikit-learn's time.

Reported per peer: seconds per iteration (two fits of m and 2m iterations
with tol = 0: their time difference over their iteration difference), the
whole fit of 2m iterations, peak memory the fit added over the loaded
matrix, and against scikit-learn the share of equal labels, the largest
centre difference and the relative inertia difference.

Usage: python bench/sparse_bench.py [--n-samples 200000] [--n-features 100000] [--k 100] [--iters 3] [--threads 2]
       [--uniform-docs N]
       [--peers scikit-learn,memfit,memfit-dask,memfit-cluster]   (memfit is always run: the others compare with it)
Needs: the memfit package, scikit-learn, scipy, threadpoolctl, dask[distributed].
Peak memory is the child's: for memfit-cluster, the client's alone (the workers are other processes).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

MiB = 1 << 20
TOPICS = 50
PEERS = ("scikit-learn", "memfit", "memfit-dask", "memfit-cluster")


def corpus(n, d, path):
    import numpy as np
    import scipy.sparse as sp
    from sklearn.feature_extraction.text import TfidfTransformer

    rng = np.random.default_rng(0)
    p = 1.0 / np.arange(1, d + 1) ** 1.07
    p /= p.sum()
    lengths = 40 + rng.poisson(120, n)
    docs = np.repeat(np.arange(n), lengths)
    ranks = rng.choice(d, size=docs.size, p=p)
    topic = rng.integers(TOPICS, size=n)[docs]
    own = rng.random(docs.size) < 0.5
    terms = ranks.copy()
    for t in range(TOPICS):
        sel = own & (topic == t)
        terms[sel] = rng.permutation(d)[ranks[sel]]
    counts = sp.csr_matrix((np.ones(docs.size), (docs, terms)), shape=(n, d))
    counts.sum_duplicates()
    X = TfidfTransformer(sublinear_tf=True).fit_transform(counts).tocsr()
    sp.save_npz(path, X)


def uniform_corpus(n, d, terms, path):
    import numpy as np
    import scipy.sparse as sp
    from sklearn.preprocessing import normalize

    rng = np.random.default_rng(0)
    cols = np.concatenate([rng.choice(d, terms, replace=False) for _ in range(n)])
    X = sp.csr_matrix((rng.random(n * terms) + 0.1, (np.repeat(np.arange(n), terms), cols)), shape=(n, d))
    sp.save_npz(path, normalize(X).tocsr())


def child(peer, path, k, iters, threads, limit):
    import numpy as np
    import scipy.sparse as sp
    from threadpoolctl import threadpool_limits

    X = sp.load_npz(path).tocsr()
    rng = np.random.default_rng(1)
    init = X[np.sort(rng.choice(X.shape[0], k, replace=False))].toarray()
    if peer == "scikit-learn":
        from sklearn.cluster import KMeans
    else:
        from memfit import KMeans
    data, client = X, None
    if peer in ("memfit-dask", "memfit-cluster"):
        import dask.array as da

        data = da.from_array(X, chunks=(65_536, X.shape[1]), asarray=False)
    if peer == "memfit-cluster":
        from distributed import Client, LocalCluster

        client = Client(LocalCluster(n_workers=threads, threads_per_worker=1, dashboard_address=":0"))
        data = client.persist(data)

    def status(key):
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key + ":"))

    def fit(max_iter):
        start = time.perf_counter()
        if peer == "scikit-learn":
            km = KMeans(k, init=init, n_init=1, max_iter=max_iter, tol=0, algorithm="lloyd").fit(X)
        else:
            km = KMeans(k, init=init, n_init=1, max_iter=max_iter, tol=0, n_jobs=threads, memory_limit=limit)
            km.fit(data, client=client)
        return time.perf_counter() - start, km

    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    base = status("VmRSS")
    with threadpool_limits(threads):
        fit(1)  # warm: threads, first-use pages
        one, km1 = fit(iters)
        two, km = fit(2 * iters)
    print(json.dumps({"per_iter": (two - one) / max(1, km.n_iter_ - km1.n_iter_), "fit": two,
                      "n_iter": int(km.n_iter_), "inertia": float(km.inertia_),
                      "added_mib": (status("VmHWM") - base) / MiB, "centers": km.cluster_centers_.tolist(),
                      "labels": np.asarray(km.labels_).tolist()}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-samples", type=int, default=200_000)
    ap.add_argument("--n-features", type=int, default=100_000)
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--peers", default=",".join(PEERS), help="comma-separated peers to run (memfit always runs)")
    ap.add_argument("--uniform-docs", type=int, help="documents of this many uniform random terms (exact ties)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--path", help=argparse.SUPPRESS)
    ap.add_argument("--limit", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.child, args.path, args.k, args.iters, args.threads, int(args.limit))
    import numpy as np
    import scipy.sparse as sp

    n, d = args.n_samples, args.n_features
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "tfidf.npz")
        t = time.perf_counter()
        if args.uniform_docs:
            uniform_corpus(n, d, args.uniform_docs, path)
        else:
            corpus(n, d, path)
        X = sp.load_npz(path)
        # At least 1 GiB: a small corpus's centres (n_clusters × n_features)
        # need more than its dense matrix / 100.
        limit = max(n * d * 8 // 100, 1 << 30)
        print(f"TF-IDF {n} x {d}, {X.nnz} stored values ({X.nnz / n:.0f} per row, density {X.nnz / n / d:.2e}), "
              f"built in {time.perf_counter() - t:.1f} s; k = {args.k}, {args.threads} threads, fits of "
              f"{args.iters} and {2 * args.iters} iterations; memfit's memory_limit {limit / MiB:.0f} MiB "
              f"(the dense matrix / 100, at least 1 GiB)")
        print(f"{'peer':13} {'s/iter':>8} {'n_iter':>6} {'fit s':>7} {'added MiB':>9} {'same labels':>11} "
              f"{'max |dc|':>9} {'d inertia':>9}")
        got = {}
        wanted = set(args.peers.split(",")) | {"memfit"}
        for peer in (p for p in PEERS if p in wanted):
            out = subprocess.run([sys.executable, __file__, "--k", str(args.k), "--iters", str(args.iters),
                                  "--threads", str(args.threads), "--child", peer, "--path", path,
                                  "--limit", str(limit)], check=True, capture_output=True, text=True).stdout
            r = got[peer] = json.loads(out.strip().splitlines()[-1])
            s = got.get("scikit-learn", {"labels": np.nan, "centers": np.nan, "inertia": np.nan})
            same = np.mean(np.asarray(r["labels"]) == np.asarray(s["labels"]))
            dc = np.abs(np.asarray(r["centers"]) - np.asarray(s["centers"])).max()
            di = abs(r["inertia"] - s["inertia"]) / s["inertia"]
            print(f"{peer:13} {r['per_iter']:8.4f} {r['n_iter']:6d} {r['fit']:7.2f} {r['added_mib']:9.1f} "
                  f"{same:11.5f} {dc:9.1e} {di:9.1e}")
        if "scikit-learn" in got:
            print(f"scikit-learn / memfit: {got['scikit-learn']['per_iter'] / got['memfit']['per_iter']:.2f}x per iteration")
        for peer in (p for p in ("memfit-dask", "memfit-cluster") if p in got):
            same = all(got[peer][key] == got["memfit"][key] for key in ("centers", "labels", "inertia", "n_iter"))
            print(f"{peer}: {'bitwise' if same else 'NOT'} the in-memory fit's centres, labels and inertia; "
                  f"{got[peer]['per_iter'] / got['memfit']['per_iter']:.2f}x its seconds per iteration")


if __name__ == "__main__":
    main()
