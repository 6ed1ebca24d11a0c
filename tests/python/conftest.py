"""Shared helpers for memfit's end-to-end tests.

The binary is taken from $MEMFIT_BIN, else <repo>/target/release/memfit.
Real data sets are read from <repo>/../shared/datasets; tests that need one
skip with a clear message when it is absent, or fail when the environment
variable MEMFIT_REQUIRE_DATASETS is set (as .ci/run does where the folder
exists), so that CI never passes by skipping them.
"""

import json
import os
import subprocess
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
DATASETS = REPO.parent / "shared" / "datasets"
MEMFIT_BIN = Path(os.environ.get("MEMFIT_BIN", REPO / "target" / "release" / "memfit"))
MiB = 1 << 20
RSS_SLACK = 64 * MiB  # pass criterion of cases.md: peak RSS <= limit + 64 MiB


def run_memfit(*args, expect=0, timeout=300):
    """Run memfit; check its exit status (and the error format when expect=2)."""
    if not MEMFIT_BIN.is_file():
        pytest.fail(f"memfit binary not found at {MEMFIT_BIN}: build it with "
                    "`cargo build --release --bin memfit` or set MEMFIT_BIN")
    cmd = [str(MEMFIT_BIN), *map(str, args)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == expect, (
        f"{' '.join(cmd)}\nexit {proc.returncode}, expected {expect}\nstderr:\n{proc.stderr}")
    if expect == 2:
        errors = [l for l in proc.stderr.splitlines() if l.startswith("memfit: error:")]
        assert len(errors) == 1, f"expected one 'memfit: error:' line, stderr:\n{proc.stderr}"
    return proc


@pytest.fixture
def memfit():
    """Runner: memfit(*args, expect=0) -> subprocess.CompletedProcess."""
    return run_memfit


def dataset(name, rows=None):
    """Load a shared data set (first `rows` rows), or skip when it is absent
    (fail when MEMFIT_REQUIRE_DATASETS is set)."""
    path = DATASETS / name
    if not path.is_file():
        missing = f"shared data set {name} not found in {DATASETS}"
        if os.environ.get("MEMFIT_REQUIRE_DATASETS", "") not in ("", "0"):
            pytest.fail(f"{missing}, but MEMFIT_REQUIRE_DATASETS is set (CI expects the shared data "
                        "sets): restore the file, or unset the variable to skip", pytrace=False)
        pytest.skip(missing)
    X = np.load(path, mmap_mode="r")
    return np.array(X[:rows] if rows is not None else X)


def save(dir_, name, arr):
    path = Path(dir_) / name
    np.save(path, arr)
    return path


def cli_options(**opts):
    """--long-options from keyword arguments (True means a bare flag)."""
    args = []
    for key, value in opts.items():
        if value is None or value is False:
            continue
        args.append("--" + key.replace("_", "-"))
        if value is not True:
            args.append(value)
    return args


def fit(dir_, X, k, tag="fit", expect=0, timeout=300, **opts):
    """Run `memfit kmeans` on X (an array or a .npy path) and load its outputs.

    Array values of `init` and `sample_weight` are saved to .npy first. Returns
    a namespace with proc, labels, centers, summary and the output paths.
    """
    dir_ = Path(dir_)
    path = X if isinstance(X, (str, Path)) else save(dir_, f"{tag}_X.npy", X)
    for key in ("init", "sample_weight"):
        if isinstance(opts.get(key), np.ndarray):
            opts[key] = save(dir_, f"{tag}_{key}.npy", opts[key])
    out = SimpleNamespace(labels_path=dir_ / f"{tag}_labels.npy",
                          centers_path=dir_ / f"{tag}_centers.npy",
                          summary_path=dir_ / f"{tag}_summary.json")
    out.proc = run_memfit("kmeans", path, "--n-clusters", k, "--quiet",
                          "--labels", out.labels_path, "--centers", out.centers_path,
                          "--summary", out.summary_path, *cli_options(**opts), expect=expect,
                          timeout=timeout)
    if expect == 0:
        out.labels = np.load(out.labels_path)
        out.centers = np.load(out.centers_path)
        out.summary = json.loads(out.summary_path.read_text())
        assert out.labels.dtype == np.int32
        assert out.summary["n_samples"] == len(out.labels)
    return out


def cluster_stats(X, labels, k, weights=None):
    """float64 (means, weight per cluster, max |x| per cluster), sequential sums."""
    X = np.asarray(X, dtype=np.float64)
    w = np.ones(len(X)) if weights is None else np.asarray(weights, dtype=np.float64)
    sums = np.zeros((k, X.shape[1]))
    np.add.at(sums, labels, X * w[:, None])
    counts = np.bincount(labels, weights=w, minlength=k)
    scale = np.zeros(k)
    np.maximum.at(scale, labels, np.abs(X).max(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        means = sums / counts[:, None]
    return means, counts, scale


def assert_centres_are_means(X, centers, labels, rtol, atol=0.0, weights=None):
    """Each non-empty cluster's centre equals the float64 mean of its rows,
    within atol + rtol times the largest |value| in that cluster."""
    k = len(centers)
    means, counts, scale = cluster_stats(X, labels, k, weights)
    used = counts > 0
    err = np.abs(centers[used].astype(np.float64) - means[used]).max(axis=1)
    bad = np.flatnonzero(err > atol + rtol * scale[used])
    assert bad.size == 0, (f"{bad.size} of {used.sum()} centres differ from the mean of their "
                           f"rows; worst error {err.max():.3g} (relative {(err / scale[used]).max():.3g})")


def inertia(X, centers, labels, weights=None):
    """Sum of (weighted) squared distances to the assigned centre, in float64."""
    d = np.asarray(X, dtype=np.float64) - centers.astype(np.float64)[labels]
    sq = np.einsum("ij,ij->i", d, d)
    return float(sq.sum() if weights is None else sq @ weights)


def rel_err(a, b):
    return abs(a - b) / max(abs(b), np.finfo(float).tiny)


def only_files(dir_, names):
    """Assert that dir_ holds exactly the files `names` (no outputs left behind)."""
    assert sorted(p.name for p in Path(dir_).iterdir()) == sorted(names)
