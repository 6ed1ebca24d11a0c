"""Out-of-core runs: peak resident memory within the limit and within the
planned total, and results that do not depend on the memory limit or the
thread count."""

import json
import os
import re
import subprocess
import sys

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from conftest import MEMFIT_BIN, MiB, RSS_SLACK, fit, run_memfit, save

# Runs memfit as its only child, then prints the children's peak RSS (KiB on Linux).
MEASURE = ("import resource, subprocess, sys; rc = subprocess.run(sys.argv[1:]).returncode; "
           "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(rc)")


def test_peak_rss_out_of_core(tmp_path, memfit):
    if not sys.platform.startswith("linux"):
        pytest.skip("ru_maxrss is in KiB only on Linux")
    limit = 32 * MiB
    data = tmp_path / "big.npy"  # 4,000,000 x 8 float64 = 256 MB, 8x the limit
    try:
        memfit("generate", "blobs", "--n-samples", 4_000_000, "--n-features", 8,
               "--centers", 8, "--seed", 0, "--out", data, "--memory-limit", "32MiB")
        summary = tmp_path / "summary.json"
        proc = subprocess.run(
            [sys.executable, "-c", MEASURE, str(MEMFIT_BIN), "kmeans", str(data),
             "--n-clusters", "8", "--max-iter", "5", "--memory-limit", "32MiB", "--quiet",
             "--labels", str(tmp_path / "labels.npy"), "--summary", str(summary)],
            capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        peak = int(proc.stdout.split()[-1]) * 1024
        reported = json.loads(summary.read_text())["peak_rss_bytes"]
        planned = json.loads(summary.read_text())["plan"]["total_bytes"]
    finally:
        data.unlink(missing_ok=True)
    print(f"peak RSS {peak / MiB:.1f} MiB (memfit reports {reported / MiB:.1f} MiB, "
          f"planned {planned / MiB:.1f} MiB)")
    assert planned <= limit
    assert peak <= planned + RSS_SLACK
    # memfit samples its own peak before writing its outputs
    assert 0.8 * peak - 4 * MiB <= reported <= peak


def test_a_finished_phase_leaves_no_memory_resident(tmp_path, memfit):
    # A mixture's k-means initialisation, then EM, planned at 64 MiB: the
    # allocator kept the initialisation's freed buffers resident beside EM's
    # and the fit peaked at 93 MiB. Freed buffers now go back to the kernel.
    if not sys.platform.startswith("linux"):
        pytest.skip("ru_maxrss is in KiB only on Linux")
    data = tmp_path / "X.npy"  # 1,500,000 x 10 float64 = 120 MB
    try:
        memfit("generate", "blobs", "--n-samples", 1_500_000, "--n-features", 10, "--centers", 8, "--seed", 0,
               "--out", data)
        proc = subprocess.run(
            [sys.executable, "-c", MEASURE, str(MEMFIT_BIN), "gmm", str(data), "-k", "8", "--max-iter", "3",
             "--seed", "0", "--memory-limit", "64MiB", "--quiet"],
            capture_output=True, text=True, timeout=300)
    finally:
        data.unlink(missing_ok=True)
    assert proc.returncode == 0, proc.stderr
    peak = int(proc.stdout.split()[-1]) * 1024
    print(f"peak RSS {peak / MiB:.1f} MiB at a 64 MiB limit")
    assert peak <= 64 * MiB + 16 * MiB  # the binary, its libraries and stacks: about 6 MiB


@pytest.fixture(scope="module")
def medium(tmp_path_factory):
    path = tmp_path_factory.mktemp("medium") / "X.npy"  # 300,000 x 5 float64
    run_memfit("generate", "blobs", "--n-samples", 300_000, "--n-features", 5,
               "--centers", 20, "--seed", 7, "--out", path)
    return path


@pytest.mark.parametrize("init,limit", [("first_rows", "2MiB"), ("k-means++", "8MiB")])
def test_memory_limit_invariance(tmp_path, medium, init, limit):
    init = np.load(medium)[:20] if init == "first_rows" else init
    small, large = (fit(tmp_path, medium, 20, tag=lim, init=init, memory_limit=lim)
                    for lim in (limit, "1GiB"))
    assert small.summary["plan"]["n_blocks"] > 1 and large.summary["plan"]["n_blocks"] == 1
    np.testing.assert_array_equal(small.labels, large.labels)
    scale = np.abs(large.centers).max()
    assert np.abs(small.centers - large.centers).max() <= 1e-12 * scale
    assert small.summary["n_iter"] == large.summary["n_iter"]


@pytest.mark.parametrize("limit", ["1MiB", "2MiB"])
def test_init_sample_is_never_cut_by_the_limit(tmp_path, medium, limit):
    # At 1-2 MiB the limit cannot hold even 48 bytes per row of the default
    # k-means++ sample (100,000 rows here): the whole sample goes to scratch
    # files, with nothing per row in memory, and the fit is the one a large
    # limit gives, for any thread count and without a warning.
    runs = [fit(tmp_path, medium, 20, tag=f"{limit}-t{t}", memory_limit=limit, threads=t, max_iter=3)
            for t in (1, 2)]
    large = fit(tmp_path, medium, 20, tag="large", memory_limit="1GiB", max_iter=3)
    for r in runs:
        assert r.summary["plan"]["init_sample"]["rows"] == 100_000
        assert "piece_rows" in r.summary["plan"]["init_sample"]
        assert r.summary["warnings"] == [] and "k-means++" not in r.proc.stderr
        assert r.centers_path.read_bytes() == large.centers_path.read_bytes()
        assert r.labels_path.read_bytes() == large.labels_path.read_bytes()
        assert r.summary["inertia"] == large.summary["inertia"]
    plan = run_memfit("kmeans", medium, "-k", 20, "--memory-limit", limit, "--dry-run").stdout
    assert "init sample: 100000 rows in unnamed scratch files" in plan, plan


def test_init_sample_spilled_to_disk_gives_the_same_fit(tmp_path, medium):
    # At 6 MiB the limit cannot hold the default k-means++ sample (100,000 rows
    # here): its values go to a scratch file, the same rows are drawn, and the
    # fit is the one a large limit gives, without a warning.
    small, large = (fit(tmp_path, medium, 20, tag=lim, memory_limit=lim) for lim in ("6MiB", "1GiB"))
    assert small.summary["plan"]["init_sample"]["rows"] == 100_000
    assert "piece_rows" in small.summary["plan"]["init_sample"]
    assert "piece_rows" not in large.summary["plan"]["init_sample"]
    assert small.summary["warnings"] == [] and "k-means++" not in small.proc.stderr
    assert small.labels_path.read_bytes() == large.labels_path.read_bytes()
    assert small.centers_path.read_bytes() == large.centers_path.read_bytes()
    assert small.summary["inertia"] == large.summary["inertia"]


def test_scratch_dir_receives_the_spilled_sample_and_is_checked_before_work(tmp_path, medium):
    # --scratch-dir names where the spilled k-means++ sample goes (the plan
    # says so); a folder that cannot hold it, or a missing TMPDIR when none
    # is named, is refused by the dry run and before any output is written.
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    r = fit(tmp_path, medium, 20, tag="s", memory_limit="6MiB", scratch_dir=scratch)
    disk = [w for w in r.summary["plan"]["disk"] if w["name"].startswith("init sample")]
    assert [w["path"] for w in disk] == [str(scratch)], r.summary["plan"]["disk"]
    assert list(scratch.iterdir()) == []
    base = ["kmeans", medium, "-k", 20, "--memory-limit", "6MiB", "--quiet"]
    for extra, env in [(["--scratch-dir", tmp_path / "missing"], None),
                       ([], {**os.environ, "TMPDIR": str(tmp_path / "gone")})]:
        for dry in (["--dry-run"], ["--labels", tmp_path / "l.npy"]):
            p = subprocess.run([str(MEMFIT_BIN), *map(str, base + extra + dry)], capture_output=True, text=True, env=env)
            assert p.returncode != 0 and "scratch folder" in p.stderr and "does not exist" in p.stderr, p.stderr
            assert ("(the TMPDIR environment variable's)" in p.stderr) == (env is not None), p.stderr
            assert not (tmp_path / "l.npy").exists()
    # An empty TMPDIR is unset (/tmp), as Python's tempfile takes it.
    p = subprocess.run([str(MEMFIT_BIN), *map(str, base + ["--dry-run"])], capture_output=True, text=True,
                       env={**os.environ, "TMPDIR": ""})
    assert p.returncode == 0 and "in /tmp" in p.stdout, p.stderr + p.stdout
    # A mixture initialised by k-means plans that fit's spilled sample too.
    gmm = ["gmm", medium, "--n-components", 20, "--covariance-type", "diag", "--memory-limit", "6MiB", "--dry-run"]
    out = run_memfit(*gmm, "--scratch-dir", scratch).stdout
    assert f"disk: k-means initialisation: init sample (scratch files) in {scratch}" in out, out
    p = subprocess.run([str(MEMFIT_BIN), *map(str, gmm)], capture_output=True, text=True,
                       env={**os.environ, "TMPDIR": str(tmp_path / "gone")})
    assert p.returncode != 0 and "scratch folder" in p.stderr, p.stderr
    # A limit that holds the sample needs no scratch folder at all.
    p = subprocess.run([str(MEMFIT_BIN), *map(str, ["kmeans", medium, "-k", 20, "--dry-run"])], capture_output=True,
                       text=True, env={**os.environ, "TMPDIR": str(tmp_path / "gone")})
    assert p.returncode == 0, p.stderr


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ru_maxrss is in KiB only on Linux")
def test_spilled_init_sample_is_not_resident(tmp_path):
    """A k-means++ sample of 32 MiB of values at a 16 MiB limit: the peak RSS is
    that of a random init at the same limit (no sample), give or take 8 MiB."""
    X = save(tmp_path, "wide.npy", np.random.RandomState(0).rand(2048, 4096).astype(np.float32))
    common = ["kmeans", X, "--n-clusters", 8, "--max-iter", 2, "--memory-limit", SMALL_LIMIT,
              "--threads", 2, "--quiet"]
    out = run_memfit(*common, "--dry-run").stdout
    assert re.search(r"init sample: 1024 rows in unnamed scratch files", out), out
    with_sample = peak_rss(common)
    without = peak_rss([*common, "--init", "random"])
    print(f"peak RSS: k-means++ (spilled sample) {with_sample / MiB:.1f} MiB, random init {without / MiB:.1f} MiB")
    assert with_sample <= without + 8 * MiB
    assert planned_total(common) <= 16 * MiB


def test_thread_invariance_bitwise(tmp_path, medium):
    runs = [fit(tmp_path, medium, 20, tag=f"t{t}", threads=t, memory_limit="8MiB")
            for t in (1, 2)]
    assert runs[0].labels_path.read_bytes() == runs[1].labels_path.read_bytes()
    assert runs[0].centers_path.read_bytes() == runs[1].centers_path.read_bytes()
    assert runs[0].summary["inertia"] == runs[1].summary["inertia"]


# Planned against measured peak memory for the jobs that read a file 6x the
# limit once (k-means fit and GMM fit are measured above and in test_gmm.py;
# KMeans.transform, which no front end plans aloud, in crates/memfit/tests/peak_memory.rs).
SMALL_LIMIT = "16MiB"


@pytest.fixture(scope="module")
def six_times_the_limit(tmp_path_factory):
    """1,500,000 x 8 float64 (96 MB, 6x 16 MiB), and what each job needs
    beside it: centres, a fitted mixture, Q, weights."""
    d = tmp_path_factory.mktemp("six")
    f = SimpleNamespace(X=d / "X.npy", centers=d / "centers.npy", model=d / "model", Q=d / "Q.npy", w=d / "w.npy")
    run_memfit("generate", "blobs", "--n-samples", 1_500_000, "--n-features", 8, "--centers", 8,
               "--seed", 1, "--out", f.X)
    X = np.load(f.X, mmap_mode="r")
    np.save(f.centers, np.array(X[:8]))
    small = save(d, "small.npy", np.array(X[:20_000]))
    run_memfit("gmm", small, "--n-components", 4, "--max-iter", 5, "--quiet", "--model", f.model)
    A = np.random.RandomState(0).randn(8, 8)
    np.save(f.Q, A @ A.T)
    np.save(f.w, np.random.RandomState(1).rand(1_500_000))
    yield f
    for path in (f.X, f.w):
        path.unlink()


def planned_total(args):
    """The planned total bytes that `memfit ARGS --dry-run` prints."""
    out = run_memfit(*args, "--dry-run").stdout
    found = re.search(r"^\s*total\s+(\d+) B\b", out, re.M)
    assert found, out
    return int(found.group(1))


def peak_rss(args, timeout=120):
    """Peak resident bytes of `memfit ARGS`, measured from outside."""
    proc = subprocess.run([sys.executable, "-c", MEASURE, str(MEMFIT_BIN), *map(str, args)],
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr
    return int(proc.stdout.split()[-1]) * 1024


JOBS = {
    "kmeans-predict": lambda f, o: ["predict", f.X, "--centers", f.centers, "--labels", o / "labels.npy"],
    "gmm-predict": lambda f, o: ["gmm-predict", f.X, "--model", f.model, "--labels", o / "labels.npy",
                                 "--proba", o / "proba.npy", "--log-likelihood", o / "ll.npy"],
    "row_quadratic_form": lambda f, o: ["quadratic-form", f.X, "--q", f.Q, "--out", o / "q.npy"],
    "weighted_scatter": lambda f, o: ["scatter", f.X, "--weights", f.w, "--out", o / "S.npy"],
    "kmeans-mini-batch": lambda f, o: ["kmeans", f.X, "-k", 8, "--mini-batch", 2048, "--max-iter", 3,
                                       "--max-no-improvement", 0, "--labels", o / "labels.npy"],
    "kmeans-mini-batch-weighted": lambda f, o: ["kmeans", f.X, "-k", 8, "--mini-batch", 2048, "--max-iter", 2,
                                                "--sample-weight", f.w, "--labels", o / "labels.npy"],
}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ru_maxrss is in KiB only on Linux")
@pytest.mark.parametrize("job", JOBS)
def test_peak_rss_within_the_plan(tmp_path, six_times_the_limit, job):
    """A file 6x the limit: the --dry-run plan fits the limit, and the run's peak RSS
    stays within the planned total + 64 MiB."""
    f = six_times_the_limit
    args = [*JOBS[job](f, tmp_path), "--memory-limit", SMALL_LIMIT, "--threads", 2, "--quiet"]
    planned = planned_total(args)
    try:
        peak = peak_rss(args)
        outputs = sorted(p.name for p in tmp_path.iterdir())
    finally:
        for p in tmp_path.iterdir():
            p.unlink()
    print(f"{job}: planned {planned / MiB:.1f} MiB, peak RSS {peak / MiB:.1f} MiB")
    assert outputs == sorted(str(a.name) for a in args if isinstance(a, Path) and a.parent == tmp_path)
    assert f.X.stat().st_size >= 5 * planned
    assert planned <= 16 * MiB
    assert peak <= planned + RSS_SLACK
