"""Out-of-core runs: peak resident memory within the limit, and results that do
not depend on the memory limit or the thread count."""

import json
import subprocess
import sys

import numpy as np
import pytest

from conftest import MEMFIT_BIN, MiB, RSS_SLACK, fit, run_memfit

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
    finally:
        data.unlink(missing_ok=True)
    print(f"peak RSS {peak / MiB:.1f} MiB (memfit reports {reported / MiB:.1f} MiB)")
    assert peak <= limit + RSS_SLACK
    # memfit samples its own peak before writing its outputs
    assert 0.8 * peak - 4 * MiB <= reported <= peak


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


def test_shrunk_init_sample_is_announced(tmp_path, medium):
    # At 2 MiB the limit cannot hold the default k-means++ sample (100,000 rows
    # here): memfit shrinks it, so the result may change, and it says so.
    r = fit(tmp_path, medium, 20, tag="shrunk", memory_limit="2MiB")
    assert "k-means++ sample" in r.proc.stderr and "raise --memory-limit" in r.proc.stderr
    assert any("k-means++ sample" in w for w in r.summary["warnings"])


def test_thread_invariance_bitwise(tmp_path, medium):
    runs = [fit(tmp_path, medium, 20, tag=f"t{t}", threads=t, memory_limit="8MiB")
            for t in (1, 2)]
    assert runs[0].labels_path.read_bytes() == runs[1].labels_path.read_bytes()
    assert runs[0].centers_path.read_bytes() == runs[1].centers_path.read_bytes()
    assert runs[0].summary["inertia"] == runs[1].summary["inertia"]
