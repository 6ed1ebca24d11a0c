"""Dask distributed benchmark (issue 12): memfit's passes on a Dask cluster vs
dask-ml's KMeans, scikit-learn's GaussianMixture and memfit in one process.

Every run happens in its own child process. The cluster runs start, in that
child, a ``LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
memory_limit=--worker-memory)``; the data (written once to a .npy file by
this process) is loaded by the workers chunk by chunk (``--chunk-rows`` rows,
default 262144) and persisted on the cluster before the timer starts, so the
driver never holds it. The one-process runs load the .npy before their timer.

1. k-means, blobs N x 8 float64 (default N = 2,000,000), k = 100, exactly
   ITER Lloyd iterations from the same initial centres (rows of X drawn with a
   fixed seed): ``init=C, n_init=1, max_iter=ITER, tol=0``.
   - ``memfit-cluster``: ``memfit.KMeans(...).fit(X_dask)`` with the client
     active (one task per chunk per pass, ``memfit._dask._run_chunk``).
   - ``dask-ml``: ``dask_ml.cluster.KMeans(k, init=C, n_init=1,
     max_iter=ITER, tol=0)`` on the same persisted array (an ndarray init is
     used as given; its loop is Lloyd's with ``shift < tol`` as the stop, so
     tol=0 runs all ITER iterations). It runs in ``--daskml-python``'s
     interpreter (default: this one), so dask-ml may live in its own venv.
   - ``memfit-local``: ``memfit.KMeans(...).fit(X_numpy)``, n_jobs = 2.
2. Gaussian mixture, full covariances, N x 20 (default N = 500,000), K = 10,
   ITER EM iterations (``max_iter=ITER, tol=0``) from the same
   ``weights_init/means_init/precisions_init``:
   ``memfit-cluster``, ``sklearn`` (scikit-learn's GaussianMixture, one
   process, BLAS threads = 2) and ``memfit-local`` (n_jobs = 2).

Columns of the table:
- ``fit s``: wall time of ``fit`` (validation, initialisation, all passes;
  for a Dask input memfit's validation pass reads the chunks through the
  client). ``s/iter``: fit s / n_iter_.
- ``1st iter`` / ``later iter``: the first iteration and the median of the
  others. memfit-cluster: wall time of each ``memfit._dask.Cluster.__call__``
  (one per pass: the Lloyd iterations and a final pass; the EM iterations and
  the final E-step), wrapped in the driver. dask-ml: the ``compute`` of each
  Lloyd iteration (``dask_ml.cluster.k_means.compute`` wrapped; its first
  call, the NaN/inf check, is not an iteration). memfit-local: time between
  the engine's progress events (``verbose`` callback replaced by a recorder);
  the first is from the start of ``fit`` (so includes validation).
  scikit-learn: ``_e_step`` + ``_m_step`` of each iteration.
- ``overhead ms``: per pass, the ``Cluster.__call__`` wall time minus the
  busiest worker's summed ``_run_chunk`` compute time in that pass (from
  ``distributed.get_task_stream``; with more chunks than workers a worker
  runs several tasks one after the other); median over the passes. The
  footer also gives wall minus the longest single task (which counts a
  worker's other tasks in the pass as overhead). Not given for dask-ml,
  whose iteration is several tasks per chunk.
- ``worker peak MiB``: the largest VmHWM (peak RSS) of the worker processes
  after the fit (``client.run``); in brackets the growth during the fit
  (peak after minus peak before; "before" is after the data were persisted
  and the library (memfit, or dask_ml.cluster) imported on every worker). The worker
  limit is --worker-memory. ``driver MiB``: VmHWM of the child process
  (which, for cluster runs, also holds the scheduler).
- ``vs memfit-local``: memfit-cluster: bitwise equality of centres, inertia,
  labels (k-means); weights, means, covariances, precisions_cholesky,
  lower_bound_ (mixture). Others: the largest absolute centre difference and
  the fraction of equal labels (k-means); the largest relative difference of
  means / covariances and of lower_bound_ (mixture).

Every peer runs --repeat times (default 2, interleaved) and its fastest fit
is reported (the machine is shared; equality is checked on the last run's
results, which are deterministic).

With --algorithms, the k-means case also runs ``memfit cluster lloyd``
and ``memfit cluster bounded`` (``algorithm="lloyd"`` / ``"bounded"``;
the plain ``memfit cluster`` is the default, ``"auto"``): bounded passes
on the cluster keep each chunk's bounds on its worker (issue 24), and
``skip`` gives the mean share of distances they skipped. --no-daskml
leaves dask-ml out (when it is not installed).

With MEMFIT_BASELINE_PYTHONPATH set, a peer ``memfit-base cluster`` runs the
cluster fit with the memfit package found first there (a build from before a
change), for before-and-after runs in one run.

Usage: PYTHONPATH=python python bench/dask_bench.py [--quick] [--n 2000000] [--gmm-n 500000]
       [--iters 10] [--repeat 2] [--chunk-rows 262144] [--worker-memory 2GiB] [--daskml-python PATH] [--json PATH]
Needs: numpy, scikit-learn, dask[distributed], dask-ml; memfit importable by the workers
(installed, or PYTHONPATH, which the workers inherit).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KMEANS_D, KMEANS_K = 8, 100
ALGORITHM_PEERS = ("km-memfit-lloyd-cluster", "km-memfit-bounded-cluster")
GMM_D, GMM_K = 20, 10


# ---------------------------------------------------------------- data
def make_kmeans(n, path, seed=7):
    import numpy as np

    rs = np.random.default_rng(seed)
    centres = rs.uniform(-10, 10, (KMEANS_K, KMEANS_D))
    X = centres[rs.integers(0, KMEANS_K, n)] + rs.standard_normal((n, KMEANS_D))
    np.save(path / "km_X.npy", X)
    init = X[np.sort(np.random.default_rng(0).choice(n, KMEANS_K, replace=False))].copy()
    np.save(path / "km_init.npy", init)


def make_gmm(n, path, seed=11):
    import numpy as np

    rs = np.random.default_rng(seed)
    means = rs.uniform(-5, 5, (GMM_K, GMM_D))
    comp = rs.integers(0, GMM_K, n)
    X = np.empty((n, GMM_D))
    for j in range(GMM_K):
        A = np.eye(GMM_D) + 0.3 * rs.standard_normal((GMM_D, GMM_D))
        rows = comp == j
        X[rows] = means[j] + rs.standard_normal((rows.sum(), GMM_D)) @ A
    np.save(path / "gmm_X.npy", X)
    r0 = np.random.default_rng(0)
    np.save(path / "gmm_weights.npy", np.full(GMM_K, 1.0 / GMM_K))
    np.save(path / "gmm_means.npy", X[np.sort(r0.choice(n, GMM_K, replace=False))])
    cov = np.cov(X.T)
    np.save(path / "gmm_precisions.npy", np.repeat(np.linalg.inv(cov)[None], GMM_K, axis=0))


# ---------------------------------------------------------------- child helpers
def _load_rows(path, start, stop):
    import numpy as np

    return np.array(np.load(path, mmap_mode="r")[start:stop])


def start_cluster(worker_memory):
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit=worker_memory,
                           dashboard_address=None)
    return cluster, Client(cluster)


def persisted(client, path, chunk_rows):
    """The .npy at ``path`` as a Dask array, each chunk read by a worker and
    kept there (the driver never holds the data)."""
    import dask
    import dask.array as da
    import numpy as np
    from distributed import wait

    X = np.load(path, mmap_mode="r")
    n, d = X.shape
    parts = [da.from_delayed(dask.delayed(_load_rows)(str(path), s, min(n, s + chunk_rows)),
                             (min(n, s + chunk_rows) - s, d), X.dtype) for s in range(0, n, chunk_rows)]
    Xd = da.concatenate(parts, axis=0).persist()
    wait(Xd)
    return Xd


def vm_hwm():
    """This process's peak resident memory (VmHWM, bytes). Not ru_maxrss: on
    Linux that survives execve, so a child started from a bigger process
    reports its parent's peak."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def worker_peaks(client):
    return client.run(vm_hwm)


def pass_recorder():
    """Wraps memfit._dask.Cluster.__call__: (start, stop) epoch seconds of
    every pass."""
    from memfit import _dask

    calls = []
    orig = _dask.Cluster.__call__

    def timed(self, task, ranges, **kw):
        # The pass ends when its last result has been handed on: a runner
        # returns a list (memfit before issue 22) or an iterator consumed as
        # the results arrive.
        t = time.time()
        out = orig(self, task, ranges, **kw)
        if isinstance(out, list):
            calls.append((t, time.time()))
            return out

        def each():
            try:
                yield from out
            finally:
                calls.append((t, time.time()))

        return each()

    _dask.Cluster.__call__ = timed
    return calls


def pass_overheads(calls, stream):
    """Per pass: its wall time, the longest _run_chunk compute in it, and the
    busiest worker's summed _run_chunk compute (seconds)."""
    comp = []
    for t in stream:
        if not str(t["key"]).startswith("_run_chunk"):
            continue
        for s in t["startstops"]:
            if s["action"] == "compute":
                comp.append((s["start"], s["stop"] - s["start"], t["worker"]))
    out = []
    for a, b in calls:
        inside = [(dur, w) for start, dur, w in comp if a <= start <= b]
        busy = {}
        for dur, w in inside:
            busy[w] = busy.get(w, 0.0) + dur
        out.append({"wall": b - a, "longest_task": max((d for d, _ in inside), default=0.0),
                    "busiest_worker": max(busy.values(), default=0.0), "tasks": len(inside)})
    return out


def event_recorder(module):
    """Replaces memfit's verbose printer in ``module`` with a recorder of
    iteration-event times."""
    times = []

    class Recorder:
        def __init__(self, *a, **k):
            pass

        def __call__(self, event):
            if event[0] in ("iteration", "em_iteration"):
                times.append(time.perf_counter())

        def close(self):
            pass

    module._Verbose = Recorder
    return times


def iter_split(durations):
    if not durations:
        return None, None
    return durations[0], (statistics.median(durations[1:]) if len(durations) > 1 else None)


def child(peer, tmp, a):
    import numpy as np

    tmp = Path(tmp)
    out = {"peer": peer}
    task = "kmeans" if peer.startswith("km-") else "gmm"
    if task == "kmeans":
        C = np.load(tmp / "km_init.npy")
        xpath = tmp / "km_X.npy"
    else:
        init = {n: np.load(tmp / f"gmm_{n}.npy") for n in ("weights", "means", "precisions")}
        xpath = tmp / "gmm_X.npy"
    cluster_run = peer.endswith("cluster") or peer == "km-daskml"
    if cluster_run:
        from distributed import get_task_stream

        cluster, client = start_cluster(a.worker_memory)
        Xd = persisted(client, xpath, a.chunk_rows)
        out["chunks"] = len(Xd.chunks[0])
        # The library's import (memfit pulls in scikit-learn and SciPy) is
        # not the fit's: every worker imports it before the "before" peak.
        lib = "dask_ml.cluster" if peer == "km-daskml" else "memfit"
        client.run(lambda: __import__(lib) and None)
        before = worker_peaks(client)
    else:
        X = np.load(xpath)

    if peer in ("km-memfit-cluster", "gmm-memfit-cluster", "km-memfit-base-cluster", "gmm-memfit-base-cluster",
                *ALGORITHM_PEERS):
        import memfit
        from memfit import _kmeans, _mixture

        calls = pass_recorder()
        events = event_recorder(_kmeans if task == "kmeans" else _mixture)
        if task == "kmeans":
            algorithm = peer.split("-")[2] if peer in ALGORITHM_PEERS else "auto"
            est = memfit.KMeans(KMEANS_K, init=C, n_init=1, max_iter=a.iters, tol=0, verbose=1,
                                memory_limit=a.memfit_memory, algorithm=algorithm)
        else:
            est = memfit.GaussianMixture(GMM_K, covariance_type="full", weights_init=init["weights"],
                                         means_init=init["means"], precisions_init=init["precisions"],
                                         max_iter=a.iters, tol=0, verbose=1, memory_limit=a.memfit_memory)
        with get_task_stream(client=client) as ts:
            t = time.perf_counter()
            est.fit(Xd)
            out["fit_s"] = time.perf_counter() - t
        passes = pass_overheads(calls, ts.data)
        out["passes"] = passes
        walls = [p["wall"] for p in passes]
        out["first_s"], out["later_s"] = iter_split(walls[: est.n_iter_])
        out["overhead_ms"] = 1000 * statistics.median(p["wall"] - p["busiest_worker"] for p in passes)
        out["overhead_ms_task"] = 1000 * statistics.median(p["wall"] - p["longest_task"] for p in passes)
        out["in_passes_s"] = sum(walls)
        if task == "kmeans":
            out["skip"] = float(np.mean(est.skip_share_))
    elif peer == "km-daskml":
        import dask_ml
        import dask_ml.cluster.k_means as dkm

        out["daskml_version"] = dask_ml.__version__
        computes = []
        orig = dkm.compute

        def timed(*args, **kw):
            t0 = time.perf_counter()
            try:
                return orig(*args, **kw)
            finally:
                computes.append(time.perf_counter() - t0)

        dkm.compute = timed
        est = dkm.KMeans(n_clusters=KMEANS_K, init=C, n_init=1, max_iter=a.iters, tol=0)
        t = time.perf_counter()
        est.fit(Xd)
        out["fit_s"] = time.perf_counter() - t
        out["check_s"] = computes[0]
        out["first_s"], out["later_s"] = iter_split(computes[1:])
    elif peer in ("km-memfit-local", "gmm-memfit-local"):
        import memfit
        from memfit import _kmeans, _mixture

        events = event_recorder(_kmeans if task == "kmeans" else _mixture)
        if task == "kmeans":
            est = memfit.KMeans(KMEANS_K, init=C, n_init=1, max_iter=a.iters, tol=0, verbose=1,
                                memory_limit=a.memfit_memory, n_jobs=2)
        else:
            est = memfit.GaussianMixture(GMM_K, covariance_type="full", weights_init=init["weights"],
                                         means_init=init["means"], precisions_init=init["precisions"],
                                         max_iter=a.iters, tol=0, verbose=1, memory_limit=a.memfit_memory,
                                         n_jobs=2)
        t = time.perf_counter()
        est.fit(X)
        out["fit_s"] = time.perf_counter() - t
        marks = [t] + events
        out["first_s"], out["later_s"] = iter_split([b - a_ for a_, b in zip(marks, marks[1:])])
    elif peer == "gmm-sklearn":
        from sklearn.mixture import GaussianMixture

        its = []

        class Timed(GaussianMixture):
            def _e_step(self, X, **kw):
                self._t0 = time.perf_counter()
                return super()._e_step(X, **kw)

            def _m_step(self, X, log_resp, **kw):
                super()._m_step(X, log_resp, **kw)
                its.append(time.perf_counter() - self._t0)

        est = Timed(GMM_K, covariance_type="full", weights_init=init["weights"], means_init=init["means"],
                    precisions_init=init["precisions"], max_iter=a.iters, tol=0)
        t = time.perf_counter()
        est.fit(X)
        out["fit_s"] = time.perf_counter() - t
        out["first_s"], out["later_s"] = iter_split(its)
    else:
        raise SystemExit(f"unknown peer {peer}")

    out["n_iter"] = int(est.n_iter_)
    save = {}
    if task == "kmeans":
        labels = est.labels_
        if hasattr(labels, "compute"):
            labels = labels.compute()
        save.update(centers=est.cluster_centers_, labels=np.asarray(labels), inertia=np.float64(est.inertia_))
        out["inertia"] = float(est.inertia_)
    else:
        save.update(weights=est.weights_, means=est.means_, covariances=est.covariances_,
                    precisions_cholesky=est.precisions_cholesky_, lower_bound=np.float64(est.lower_bound_))
        out["lower_bound"] = float(est.lower_bound_)
    np.savez(tmp / f"res_{peer}.npz", **save)
    if cluster_run:
        after = worker_peaks(client)
        out["worker_peak"] = max(after.values())
        out["worker_growth"] = max(after[w] - before[w] for w in after)
        out["worker_before"] = max(before.values())
        client.close()
        cluster.close()
    out["driver_peak"] = vm_hwm()
    print(json.dumps(out))


def run_child(peer, tmp, a, python):
    cmd = [python, __file__, "--child", peer, str(tmp), "--iters", str(a.iters), "--chunk-rows",
           str(a.chunk_rows), "--worker-memory", a.worker_memory, "--memfit-memory", a.memfit_memory]
    env = dict(os.environ)
    if "-base-" in peer:
        # memfit-base: the package found first on MEMFIT_BASELINE_PYTHONPATH
        # (a build from before a change), in the driver and, by inheritance,
        # in the workers.
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.environ["MEMFIT_BASELINE_PYTHONPATH"],
                                                         env.get("PYTHONPATH")]))
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        tail = r.stderr.strip().splitlines()[-15:]
        print(f"{peer} failed:\n" + "\n".join(tail), file=sys.stderr)
        return {"peer": peer, "error": tail[-1] if tail else "failed"}
    res = json.loads(r.stdout.strip().splitlines()[-1])
    res["child_s"] = time.perf_counter() - t
    return res


# ---------------------------------------------------------------- comparison
def compare(tmp, peer, ref, task):
    import numpy as np

    p, q = Path(tmp) / f"res_{peer}.npz", Path(tmp) / f"res_{ref}.npz"
    if not (p.exists() and q.exists()):
        return "-"
    A, B = np.load(p), np.load(q)
    if peer.startswith(("km-memfit", "gmm-memfit")) and peer.endswith("cluster"):
        names = ["centers", "inertia", "labels"] if task == "kmeans" else \
            ["weights", "means", "covariances", "precisions_cholesky", "lower_bound"]
        bad = [n for n in names if not (A[n].shape == B[n].shape and A[n].tobytes() == B[n].tobytes())]
        if task == "kmeans" and "labels" in bad and np.array_equal(A["labels"], B["labels"]):
            bad.remove("labels")  # equal values, other integer dtype
        return "bitwise equal" if not bad else "DIFFER: " + ", ".join(bad)
    if task == "kmeans":
        d = np.abs(A["centers"] - B["centers"]).max()
        agree = np.mean(A["labels"] == B["labels"])
        di = abs(float(A["inertia"]) - float(B["inertia"])) / abs(float(B["inertia"]))
        return f"max abs centre diff {d:.1e}, labels {100 * agree:.4f}% equal, inertia rel. diff {di:.1e}"
    rel = lambda n: np.abs(A[n] - B[n]).max() / np.abs(B[n]).max()
    lb = abs(float(A["lower_bound"]) - float(B["lower_bound"])) / abs(float(B["lower_bound"]))
    return f"rel. means {rel('means'):.1e}, cov {rel('covariances'):.1e}, lower bound {lb:.1e}"


def fmt(x, spec, scale=1.0):
    return "-" if x is None else format(x * scale, spec)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=2_000_000, help="k-means rows (8 features, k = 100)")
    ap.add_argument("--gmm-n", type=int, default=500_000, help="mixture rows (20 features, K = 10)")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--chunk-rows", type=int, default=262144)
    ap.add_argument("--worker-memory", default="2GiB", help="LocalCluster memory_limit per worker")
    ap.add_argument("--memfit-memory", default="2GiB", help="memfit's memory_limit (a task gets at most "
                    "worker memory / threads x memfit._dask.SAFETY)")
    ap.add_argument("--quick", action="store_true", help="n = 200,000, gmm-n = 100,000, 5 iterations")
    ap.add_argument("--only", choices=["kmeans", "gmm"])
    ap.add_argument("--daskml-python", default=sys.executable, help="interpreter for the dask-ml run")
    ap.add_argument("--repeat", type=int, default=2, help="runs per peer, interleaved; the fastest fit is reported")
    ap.add_argument("--json", help="write all results here")
    ap.add_argument("--algorithms", action="store_true", help="k-means on the cluster with each algorithm too")
    ap.add_argument("--no-daskml", action="store_true", help="leave dask-ml out")
    ap.add_argument("--child", nargs=2, metavar=("PEER", "TMP"))
    a = ap.parse_args()
    if a.child:
        return child(a.child[0], a.child[1], a)
    if a.quick:
        a.n, a.gmm_n, a.iters = min(a.n, 200_000), min(a.gmm_n, 100_000), min(a.iters, 5)

    import dask
    import distributed
    import numpy as np
    import sklearn

    import memfit

    r = subprocess.run([a.daskml_python, "-c", "import dask, distributed, dask_ml; "
                        "print(dask.__version__, distributed.__version__, dask_ml.__version__)"],
                       capture_output=True, text=True)
    daskml_env = r.stdout.strip() if r.returncode == 0 else f"unavailable ({r.stderr.strip().splitlines()[-1:]})"
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}, scikit-learn {sklearn.__version__}, "
          f"dask {dask.__version__}, distributed {distributed.__version__}, memfit {memfit.__file__}")
    print(f"dask-ml interpreter {a.daskml_python}: dask, distributed, dask-ml = {daskml_env}")
    print(f"LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit={a.worker_memory}), "
          f"chunks of {a.chunk_rows} rows, memfit memory_limit={a.memfit_memory}, {a.iters} iterations, tol=0")
    def base(task):
        return [f"{task}-memfit-base-cluster"] if os.environ.get("MEMFIT_BASELINE_PYTHONPATH") else []

    results = []
    with tempfile.TemporaryDirectory(prefix="memfit-dask-bench-") as tmp:
        tmp = Path(tmp)
        plan = []
        if a.only in (None, "kmeans"):
            make_kmeans(a.n, tmp)
            peers = ("km-memfit-cluster", *(ALGORITHM_PEERS if a.algorithms else ()), *base("km"),
                     *(() if a.no_daskml else ("km-daskml",)), "km-memfit-local")
            plan += [("kmeans", f"k-means {a.n:,} x {KMEANS_D}, k={KMEANS_K}", p) for p in peers]
        if a.only in (None, "gmm"):
            make_gmm(a.gmm_n, tmp)
            plan += [("gmm", f"GMM full {a.gmm_n:,} x {GMM_D}, K={GMM_K}", p)
                     for p in ("gmm-memfit-cluster", *base("gmm"), "gmm-sklearn", "gmm-memfit-local")]
        runs = {peer: [] for _, _, peer in plan}
        for rep in range(a.repeat):  # interleaved, so that a drift of the machine hits every peer alike
            for task, case, peer in plan:
                python = a.daskml_python if peer == "km-daskml" else sys.executable
                res = run_child(peer, tmp, a, python)
                res.update(task=task, case=case)
                print(f"  run {rep + 1}, {peer}: {res.get('fit_s', float('nan')):.2f} s fit, "
                      f"child {res.get('child_s', 0):.1f} s", flush=True)
                runs[peer].append(res)
        results = [min(r, key=lambda o: o.get("fit_s", float("inf"))) for r in runs.values()]
        for res in results:
            ref = "km-memfit-local" if res["task"] == "kmeans" else "gmm-memfit-local"
            if "error" not in res and res["peer"] != ref:
                res["equality"] = compare(tmp, res["peer"], ref, res["task"])
    names = {"km-memfit-cluster": "memfit cluster", "km-memfit-base-cluster": "memfit-base cluster",
             "km-memfit-lloyd-cluster": "memfit cluster lloyd", "km-memfit-bounded-cluster": "memfit cluster bounded",
             "gmm-memfit-base-cluster": "memfit-base cluster", "km-daskml": "dask-ml cluster", "km-memfit-local": "memfit local",
             "gmm-memfit-cluster": "memfit cluster", "gmm-sklearn": "scikit-learn local",
             "gmm-memfit-local": "memfit local"}
    print()
    print("| case | peer | n_iter | fit s | s/iter | 1st iter s | later iter s (median) | overhead ms/pass (median) "
          "| worker peak MiB (growth) | driver peak MiB | vs memfit local |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in results:
        if "error" in r:
            print(f"| {r['case']} | {names[r['peer']]} | failed: {r['error']} |||||||||")
            continue
        wp = "-" if "worker_peak" not in r else f"{r['worker_peak'] / 2**20:.0f} (+{r['worker_growth'] / 2**20:.0f})"
        skip = f" (skipped {100 * r['skip']:.0f} %)" if r.get("skip") else ""
        print(f"| {r['case']} | {names[r['peer']]}{skip} | {r['n_iter']} | {r['fit_s']:.2f} | {r['fit_s'] / r['n_iter']:.3f} "
              f"| {fmt(r.get('first_s'), '.3f')} | {fmt(r.get('later_s'), '.3f')} "
              f"| {fmt(r.get('overhead_ms'), '.1f')} | {wp} | {r['driver_peak'] / 2**20:.0f} "
              f"| {r.get('equality', 'reference')} |")
    print()
    for r in results:
        if r.get("passes"):
            ps = r["passes"]
            print(f"{r['case']}, memfit cluster: {len(ps)} passes ({r['chunks']} chunks), in passes "
                  f"{r['in_passes_s']:.2f} s of {r['fit_s']:.2f} s fit; overhead ms per pass: "
                  + ", ".join(f"{1000 * (p['wall'] - p['busiest_worker']):.0f}" for p in ps)
                  + f"; median of wall minus the longest single task (counts the other tasks a worker "
                  f"ran in the pass as overhead) {r['overhead_ms_task']:.1f} ms")
        if r.get("check_s") is not None:
            print(f"{r['case']}, dask-ml: NaN/inf check {r['check_s']:.2f} s, {r['fit_s'] - r['check_s'] - r['first_s'] - (r['n_iter'] - 1) * r['later_s']:.2f} s "
                  "after the iterations (inertia/labels), dask-ml "
                  f"{r.get('daskml_version')}")
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
