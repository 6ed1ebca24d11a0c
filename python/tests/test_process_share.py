"""The process's share of the machine (T3-06) and the cost of ``import
memfit`` (T3-07)."""

import json
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import memfit
from memfit import KMeans, _memfit, _resources

# KMeans imported scikit-learn, which loaded its OpenMP runtime: the runtime
# reads OMP_NUM_THREADS once, here, not under a test's monkeypatch.


def plan_threads(plan: str) -> int:
    return int(re.search(r"threads: (\d+)", plan).group(1))


def plan_limit(plan: str) -> int:
    return int(re.search(r"\(limit .* = (\d+) bytes\)", plan).group(1))


def run_child(code: str, env=None, timeout=120) -> str:
    """Runs ``code`` in a fresh interpreter; its stdout."""
    r = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


X = np.random.default_rng(0).normal(size=(300, 3))


def test_omp_num_threads_caps_the_default_threads(monkeypatch):
    monkeypatch.delenv("RAYON_NUM_THREADS", raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert _memfit.default_threads() == 1
    km = KMeans(n_clusters=2, n_init=1, random_state=0).fit(X)
    assert plan_threads(km.memory_plan_) == 1
    assert memfit.array.asarray(X).explain(memory_limit="64MiB")["threads"] == 1
    # n_jobs=-1 is all the CPUs this process may use, whatever OMP_NUM_THREADS says.
    km = memfit.KMeans(n_clusters=2, n_init=1, random_state=0, n_jobs=-1).fit(X)
    assert plan_threads(km.memory_plan_) == _memfit.available_cpus()


def test_default_threads_are_the_cpus_this_process_may_use(monkeypatch):
    monkeypatch.delenv("RAYON_NUM_THREADS", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    cpus = _memfit.available_cpus()
    assert 1 <= cpus <= len(os.sched_getaffinity(0))
    assert _memfit.default_threads() == cpus
    # An affinity mask of one CPU (taskset) gives one thread.
    out = run_child(
        """
        import os
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
        from memfit import _memfit
        print(_memfit.available_cpus(), _memfit.default_threads())
        """
    )
    assert out.split() == ["1", "1"]


def test_threadpool_limits_cap_the_default_threads():
    default = _memfit.default_threads()
    with threadpool_limits(limits=1):
        assert _resources.default_threads() == 1
        km = KMeans(n_clusters=2, n_init=1, random_state=0).fit(X)
        assert plan_threads(km.memory_plan_) == 1
        q = memfit.row_quadratic_form(X, np.eye(3))
    np.testing.assert_allclose(q, np.sum(X * X, axis=1))
    assert _resources.default_threads() == default


def test_outside_joblib_the_default_limit_is_the_engines():
    assert _resources.loky_workers() == 1
    a = _memfit.default_memory_limit()
    b = _resources.default_memory_limit()
    assert abs(a - b) <= 0.1 * a


GRID_SEARCH = """
import json, re
import numpy as np
import memfit
from memfit import _resources
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

def threads(est, X, y=None):
    return int(re.search(r"threads: (\\d+)", est[-1].memory_plan_).group(1))

def limit(est, X, y=None):
    return int(re.search(r"\\(limit .* = (\\d+) bytes\\)", est[-1].memory_plan_).group(1))

def workers(est, X, y=None):
    return _resources.loky_workers()

if __name__ == "__main__":
    X = np.random.default_rng(0).normal(size=(400, 3))
    parent = _resources.default_memory_limit()
    pipe = Pipeline([("scale", StandardScaler()), ("km", memfit.KMeans(n_init=1, random_state=0))])
    gs = GridSearchCV(
        pipe, {"km__n_clusters": [2, 3]}, cv=2, n_jobs=2, refit=False,
        scoring={"threads": threads, "limit": limit, "workers": workers},
    ).fit(X)
    r = gs.cv_results_
    print(json.dumps({
        "parent": parent,
        **{k: [float(v) for s in range(2) for v in r[f"split{s}_test_{k}"]] for k in ("threads", "limit", "workers")},
    }))
"""


def test_grid_search_workers_plan_with_their_share(tmp_path):
    """T3-06: ``GridSearchCV(..., n_jobs=2)``: each loky worker is given
    ``OMP_NUM_THREADS=1`` by joblib (2 CPUs / 2 jobs) and plans with one
    thread and half of the default memory limit."""
    script = tmp_path / "grid.py"
    script.write_text(GRID_SEARCH)
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "RAYON_NUM_THREADS")}
    env["LOKY_MAX_CPU_COUNT"] = "2"
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["threads"] == [1.0] * 4
    assert got["workers"] == [2.0] * 4
    for limit in got["limit"]:
        # Half of what the parent would plan with, within what the other
        # processes on the machine took or freed meanwhile.
        assert 0.35 * got["parent"] <= limit <= 0.65 * got["parent"], (limit, got["parent"])


IMPORT_COST = """
import sys

def rss():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmRSS:"))

import numpy as np
before = rss()
import memfit
after = rss()
heavy = ("sklearn", "scipy", "pandas", "dask", "distributed", "zarr", "threadpoolctl", "joblib")
print("import", (after - before) / 2**20, [m for m in heavy if m in sys.modules])

X = np.arange(60.0).reshape(20, 3)
memfit.row_quadratic_form(X, np.eye(3))
memfit.weighted_scatter(X)
memfit.assign(X, X[:2])
a = memfit.array.asarray(X)
(a * 2 + 1).mean(axis=0).compute()
print("kernels", [m for m in heavy if m in sys.modules])

assert "KMeans" in dir(memfit) and "GaussianMixture" in dir(memfit)
from memfit import GaussianMixture
import pickle
km = pickle.loads(pickle.dumps(memfit.KMeans(n_clusters=2, n_init=1, random_state=0).fit(X)))
print("estimators", "sklearn" in sys.modules, type(km).__module__, GaussianMixture.__module__, km.predict(X[:2]).tolist())
"""


def test_import_costs_little_and_imports_no_scikit_learn():
    """T3-07: ``import memfit`` costs at most 40 MiB over ``import numpy``;
    neither it nor the kernels and ``memfit.array`` import scikit-learn or
    anything else heavy; the estimators import it on first use."""
    lines = dict(line.split(" ", 1) for line in run_child(IMPORT_COST).strip().splitlines())
    cost, imported = lines["import"].split(" ", 1)
    assert float(cost) <= 40, f"import memfit costs {float(cost):.1f} MiB over numpy"
    assert imported == "[]"
    assert lines["kernels"] == "[]"
    assert lines["estimators"].startswith("True memfit._kmeans memfit._mixture [")


def test_the_console_command_imports_neither_numpy_nor_the_estimators():
    """``import memfit`` (and with it the ``memfit`` command pip installs)
    loads the engine only: NumPy, the kernels and memfit.array come on
    first use, so the command's resident memory is the engine's."""
    out = run_child(
        "import sys, memfit, memfit._cli\n"
        "print(sorted(m for m in ('numpy', 'memfit.array', 'memfit._kernels', 'sklearn') if m in sys.modules))\n"
        "memfit.assign\n"
        "print('numpy' in sys.modules and 'memfit._kernels' in sys.modules)\n"
    )
    assert out.split() == ["[]", "True"]


def test_lazy_attributes():
    assert memfit.KMeans.__module__ == "memfit._kmeans"
    # The public names are the package's own: no helper imported at its top.
    public = {name for name in dir(memfit) if not name.startswith("_")}
    assert public == {name for name in memfit.__all__ if not name.startswith("_")} | {"array"}
    assert "KMeans" in dir(memfit)
    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        memfit.Nope  # noqa: B018


def test_a_forked_child_starts_its_own_threads():
    """Each calling thread keeps its engine threads between calls; a child
    forked after a fit has none of them and must start its own (not wait
    forever on threads that do not exist in it)."""
    out = run_child(
        """
        import multiprocessing as mp
        import numpy as np
        from memfit import KMeans, MiniBatchKMeans

        # Wide enough that the drawn rows are scanned and converted in
        # parallel pieces.
        X = np.random.RandomState(0).rand(5000, 33)

        def fits():
            km = KMeans(4, random_state=0, n_init=1, n_jobs=2).fit(X).inertia_
            mb = MiniBatchKMeans(4, random_state=0, n_jobs=2, batch_size=4096).fit(X)
            return km, mb.cluster_centers_.tolist()

        parent = fits()

        def child(q):
            q.put(fits())

        q = mp.get_context("fork").Queue()
        p = mp.get_context("fork").Process(target=child, args=(q,), daemon=True)
        p.start()
        got = q.get(timeout=60)
        p.join(60)
        print(got == parent, p.exitcode)
        """,
        timeout=120,
    )
    assert out.split()[-2:] == ["True", "0"]
