"""Side-by-side Gaussian-mixture benchmark: memfit gmm vs scikit-learn's
GaussianMixture, full covariances, the same initial weights, means and
precisions, ITER EM iterations (tol = 0).

Each peer runs in its own child process so that its peak resident memory
(ru_maxrss of that child) is measured alone. Seconds per EM iteration:
memfit's own E+M pass timer (`em_secs / n_iter`); scikit-learn's `_e_step` +
`_m_step` time of the ITER iterations (both exclude initialisation and the
final E-step). The E-step's GFLOP/s (memfit's summary, `d (d + 1)` flops per
row and component) is printed next to faer's plain GEMM GFLOP/s in the same
shape (`cargo run --release --example gemm_gflops`).

With --baseline-bin PATH, a second memfit build runs as one more peer
("memfit-base"), e.g. a build from before a change, to measure the change's
cost in the same run.

Usage: python bench/gmm_bench.py [--iters 5] [--threads 2] [--only blobs|mnist] [--baseline-bin PATH]
Needs: numpy, scikit-learn (pip), target/release/memfit, and for MNIST
../shared/datasets/mnist_X_uint8.npy (scaled to [0, 1]).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MEMFIT = os.environ.get("MEMFIT_BIN", str(ROOT / "target" / "release" / "memfit"))
SHARED = ROOT.parent / "shared" / "datasets"


def child(peer, data, init_dir, iters, threads):
    """Runs one peer in this (child) process; prints a JSON line."""
    import numpy as np

    init = {n: Path(init_dir) / f"{n}.npy" for n in ("weights", "means", "precisions")}
    k = len(np.load(init["weights"]))
    if peer.startswith("memfit"):
        binary = MEMFIT if peer == "memfit" else os.environ["MEMFIT_BASELINE_BIN"]
        summary = Path(tempfile.mkdtemp()) / "s.json"
        cmd = [binary, "gmm", data, "--n-components", str(k), "--weights-init", str(init["weights"]),
               "--means-init", str(init["means"]), "--precisions-init", str(init["precisions"]),
               "--max-iter", str(iters), "--tol", "0", "--threads", str(threads), "--quiet",
               "--summary", str(summary)]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        s = json.loads(summary.read_text())
        print(json.dumps({"secs_per_iter": s["timings"]["em_secs"] / s["n_iter"],
                          "lower_bound": s["lower_bound"], "n_iter": s["n_iter"],
                          "e_step_gflops": s["e_step_gflops_per_sec"],
                          "e_secs": s["timings"]["e_step_secs"] / s["n_iter"],
                          "m_secs": s["timings"]["m_step_secs"] / s["n_iter"]}))
        return
    from sklearn.mixture import GaussianMixture
    from threadpoolctl import threadpool_limits

    X = np.load(data)
    times = {"e": [], "m": []}

    class Timed(GaussianMixture):
        def _e_step(self, X, **kw):
            t = time.perf_counter()
            out = super()._e_step(X, **kw)
            times["e"].append(time.perf_counter() - t)
            return out

        def _m_step(self, X, log_resp, **kw):
            t = time.perf_counter()
            super()._m_step(X, log_resp, **kw)
            times["m"].append(time.perf_counter() - t)

    with threadpool_limits(threads):
        g = Timed(k, covariance_type="full", weights_init=np.load(init["weights"]),
                  means_init=np.load(init["means"]), precisions_init=np.load(init["precisions"]),
                  init_params="random_from_data", max_iter=iters, tol=0).fit(X)
    per_iter = (sum(times["e"][:iters]) + sum(times["m"][:iters])) / iters
    print(json.dumps({"secs_per_iter": per_iter, "lower_bound": float(g.lower_bound_), "n_iter": int(g.n_iter_),
                      "e_secs": sum(times["e"][:iters]) / iters, "m_secs": sum(times["m"][:iters]) / iters}))


def run_child(peer, data, init_dir, iters, threads):
    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)
    env.pop("OPENBLAS_L2_SIZE", None)
    code = ("import sys, json, resource, subprocess; "
            "r = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
            "sys.stderr.write(r.stderr[-2000:]); r.check_returncode(); "
            "out = json.loads(r.stdout.strip().splitlines()[-1]); "
            "out['peak_rss_bytes'] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024; "
            "print(json.dumps(out))")
    cmd = [sys.executable, "-c", code, sys.executable, __file__, "--child", peer, data, init_dir, str(iters),
           str(threads)]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise SystemExit(f"{peer} failed:\n{r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def make_case(name, tmp):
    import numpy as np

    rs = np.random.RandomState(0)
    if name == "blobs":
        k, d, n = 20, 50, 200_000
        centres = rs.uniform(-5, 5, (k, d))
        X = centres[rs.randint(0, k, n)] + rs.randn(n, d)
    else:
        path = SHARED / "mnist_X_uint8.npy"
        if not path.is_file():
            print(f"skipping MNIST: {path} not found")
            return None
        k = 10
        X = np.load(path) / 255.0
        d = X.shape[1]
    data = tmp / f"{name}.npy"
    np.save(data, X)
    init = tmp / f"{name}_init"
    init.mkdir()
    np.save(init / "weights.npy", np.full(k, 1.0 / k))
    np.save(init / "means.npy", X[rs.choice(len(X), k, replace=False)])
    cov = np.cov(X.T) + 0.1 * np.eye(d)  # MNIST has constant pixels: regularise the start
    np.save(init / "precisions.npy", np.repeat(np.linalg.inv(cov)[None], k, axis=0))
    return str(data), str(init), X.shape, k


def gemm_gflops(d):
    out = subprocess.run(["cargo", "run", "--quiet", "--release", "--example", "gemm_gflops", "--", str(d), "2"],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout
    dense = [line for line in out.splitlines() if "dense" in line][0]
    return float(dense.split("float64 ")[1].split()[0])


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6]))
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--only", choices=["blobs", "mnist"])
    ap.add_argument("--baseline-bin", help="another memfit binary to run as the peer memfit-base")
    args = ap.parse_args()
    peers = ["memfit", "sklearn"]
    if args.baseline_bin:
        os.environ["MEMFIT_BASELINE_BIN"] = str(Path(args.baseline_bin).resolve())
        peers.insert(1, "memfit-base")
    with tempfile.TemporaryDirectory() as tmp:
        for name in ["blobs", "mnist"]:
            if args.only and name != args.only:
                continue
            case = make_case(name, Path(tmp))
            if case is None:
                continue
            data, init, shape, k = case
            print(f"\n== {name}: X {shape} float64, K = {k}, full, {args.iters} EM iterations, "
                  f"{args.threads} threads")
            res = {p: run_child(p, data, init, args.iters, args.threads) for p in peers}
            for p, r in res.items():
                print(f"{p:11s} {r['secs_per_iter']:8.3f} s/iter (E {r['e_secs']:.3f}, M {r['m_secs']:.3f})  "
                      f"peak RSS {r['peak_rss_bytes'] / 2**20:8.1f} MiB  lower bound {r['lower_bound']:.10f}")
            m, s = res["memfit"], res["sklearn"]
            if "memfit-base" in res:
                b = res["memfit-base"]
                print(f"memfit vs memfit-base: {m['secs_per_iter'] / b['secs_per_iter']:.3f}x time, "
                      f"lower bound rel. diff {abs(m['lower_bound'] - b['lower_bound']) / abs(b['lower_bound']):.1e}")
            print(f"speed-up {s['secs_per_iter'] / m['secs_per_iter']:.2f}x  "
                  f"memory {m['peak_rss_bytes'] / s['peak_rss_bytes']:.3f} of scikit-learn's  "
                  f"lower bound rel. diff {abs(m['lower_bound'] - s['lower_bound']) / abs(s['lower_bound']):.1e}")
            plain = gemm_gflops(shape[1])
            print(f"E-step {m['e_step_gflops']:.1f} GFLOP/s vs faer plain GEMM {plain:.1f} GFLOP/s (float64): "
                  f"{100 * m['e_step_gflops'] / plain:.0f}%")


if __name__ == "__main__":
    main()
