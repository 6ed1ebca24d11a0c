"""memfit quadratic-form and memfit scatter against NumPy, out of core."""

import re
import subprocess
import sys

import numpy as np
import pytest

from conftest import MEMFIT_BIN, MiB, RSS_SLACK, run_memfit, save

MEASURE = ("import resource, subprocess, sys; rc = subprocess.run(sys.argv[1:]).returncode; "
           "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(rc)")


def peak_rss(args):
    proc = subprocess.run([sys.executable, "-c", MEASURE, str(MEMFIT_BIN), *map(str, args)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return int(proc.stdout.split()[-1]) * 1024


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_quadratic_form_matches_numpy_with_x_8x_the_limit(tmp_path, dtype):
    rs = np.random.RandomState(0)
    X = rs.randn(300_000, 40).astype(dtype)  # 48 or 96 MB: 11x or 23x a 4 MiB limit
    Q = rs.randn(40, 40)
    x, q, out = save(tmp_path, "X.npy", X), save(tmp_path, "Q.npy", Q), tmp_path / "q.npy"
    peak = peak_rss(["quadratic-form", x, "--q", q, "--out", out, "--memory-limit", "4MiB"])
    assert X.nbytes >= 8 * 4 * MiB and peak <= 4 * MiB + RSS_SLACK
    Xd = X.astype(np.float64)
    want = np.sum((Xd @ Q) * Xd, axis=1)
    rtol = 1e-10 if dtype == np.float64 else 1e-4
    np.testing.assert_allclose(np.load(out), want, rtol=rtol, atol=rtol * np.abs(want).max())


def test_weighted_scatter_matches_numpy_with_x_8x_the_limit(tmp_path):
    rs = np.random.RandomState(1)
    X = rs.randn(300_000, 30)  # 72 MB: 9x an 8 MiB limit
    w = rs.uniform(0, 2, len(X))
    x, wp, out = save(tmp_path, "X.npy", X), save(tmp_path, "w.npy", w), tmp_path / "S.npy"
    peak = peak_rss(["scatter", x, "--weights", wp, "--out", out, "--memory-limit", "8MiB"])
    assert peak <= 8 * MiB + RSS_SLACK
    np.testing.assert_allclose(np.load(out), (X.T * w) @ X, rtol=1e-10, atol=1e-9)
    run_memfit("scatter", x, "--out", out)
    np.testing.assert_allclose(np.load(out), X.T @ X, rtol=1e-10, atol=1e-9)


def test_kernels_reject_bad_input(tmp_path):
    X = np.ones((10, 3))
    X[4, 1] = np.inf
    x = save(tmp_path, "X.npy", X)
    proc = run_memfit("quadratic-form", x, "--q", save(tmp_path, "Q.npy", np.eye(4)), "--out", tmp_path / "q.npy",
                      expect=2)
    assert "(n_features, n_features)" in proc.stderr
    proc = run_memfit("quadratic-form", x, "--q", tmp_path / "Q.npy", "--out", tmp_path / "q.npy", expect=2)
    proc = run_memfit("scatter", x, "--out", tmp_path / "S.npy", expect=2)
    assert "row 4, column 1 is inf" in proc.stderr
    assert not (tmp_path / "q.npy").exists() and not (tmp_path / "S.npy").exists()


def test_scatter_weights_are_refused_by_the_rule_they_break(tmp_path):
    """The scatter takes weights of any sign: a negative one is used, a NaN
    is refused as not finite (not as negative), and a wrong length names
    --weights, the flag that gave it."""
    X = np.random.default_rng(0).standard_normal((100, 3))
    x = save(tmp_path, "X.npy", X)
    w = -np.ones(100)
    run_memfit("scatter", x, "--weights", save(tmp_path, "w.npy", w), "--out", tmp_path / "S.npy")
    np.testing.assert_allclose(np.load(tmp_path / "S.npy"), (X.T * w) @ X, rtol=1e-12)
    w[7] = np.nan
    proc = run_memfit("scatter", x, "--weights", save(tmp_path, "wnan.npy", w), "--out", tmp_path / "S2.npy",
                      expect=2)
    assert "sample_weight[7] = NaN; hint: sample weights must be finite" in proc.stderr
    assert ">= 0" not in proc.stderr
    proc = run_memfit("scatter", x, "--weights", save(tmp_path, "w99.npy", np.ones(99)), "--out", tmp_path / "S2.npy",
                      expect=2)
    assert "--weights" in proc.stderr and "w99.npy" in proc.stderr and "[99]" in proc.stderr
    assert not (tmp_path / "S2.npy").exists()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_large_q_is_planned_as_read_and_held_once(tmp_path, dtype):
    """A Q of 3,000 × 3,000 (72 MB) read by the command is planned beside its
    compute-dtype copy, read in row blocks (not beside a second raw copy),
    and the run stays within a limit just above the plan (helper 84: the
    plan counted one Q of three)."""
    rs = np.random.RandomState(2)
    X = rs.randn(1_000, 3_000).astype(dtype)
    Q = rs.randn(3_000, 3_000)
    x, q, out = save(tmp_path, "X.npy", X), save(tmp_path, "Q.npy", np.asfortranarray(Q)), tmp_path / "q.npy"
    plan = run_memfit("quadratic-form", x, "--q", q, "--out", out, "--memory-limit", "1GiB", "--dry-run").stdout
    assert "Q as read (float64)" in plan and "Q (compute dtype)" in plan
    total = next(int(line.split()[1]) for line in plan.splitlines() if line.strip().startswith("total"))
    limit = total + MiB
    peak = peak_rss(["quadratic-form", x, "--q", q, "--out", out, "--memory-limit", str(limit)])
    assert peak <= limit + RSS_SLACK, (peak, limit)
    Xd = X.astype(np.float64)
    want = np.sum((Xd @ Q) * Xd, axis=1)
    rtol = 1e-10 if dtype == np.float64 else 1e-3
    np.testing.assert_allclose(np.load(out), want, rtol=rtol, atol=rtol * np.abs(want).max())


def peak_rss_of_refusal(args):
    proc = subprocess.run([sys.executable, "-c", MEASURE, str(MEMFIT_BIN), *map(str, args)],
                          capture_output=True, text=True, timeout=300)
    return proc.returncode, proc.stderr, int(proc.stdout.split()[-1]) * 1024


@pytest.mark.parametrize("command", ["quadratic-form", "predict", "kmeans"])
def test_a_matrix_argument_is_read_after_the_plan_fits(tmp_path, command):
    """Q, the centres and the initial centres (72 MB each here) are planned
    from their headers: a refusal, a wrong shape and a dry run read none of
    them (helpers 84 and 89: they peaked at the matrix's size)."""
    rs = np.random.RandomState(3)
    x = save(tmp_path, "X.npy", rs.randn(3_000, 3_000).astype(np.float32))
    m = save(tmp_path, "M.npy", rs.randn(3_000, 3_000))
    wrong = save(tmp_path, "W.npy", rs.randn(3_000, 2_999))
    out = tmp_path / "out.npy"
    args = {"quadratic-form": lambda p: ["quadratic-form", x, "--q", p, "--out", out],
            "predict": lambda p: ["predict", x, "--centers", p, "--labels", out],
            "kmeans": lambda p: ["kmeans", x, "-k", "3000", "--init", p, "--labels", out]}[command]
    for argv, rc, said in [(args(m) + ["--memory-limit", "8MiB"], 2, "memory limit"),
                           (args(wrong), 2, "3000, 2999"),
                           (args(m) + ["--dry-run"], 0, "total")]:
        got, stderr_text, peak = peak_rss_of_refusal(argv)
        assert got == rc, stderr_text
        assert peak < 40 * MiB, (argv, peak)
        assert rc == 0 or said in stderr_text, stderr_text
    assert not out.exists()


def test_weights_and_headers_are_named_in_short_words(tmp_path):
    """A tiny or huge weight is shown in exponent form (-1e-300 was printed
    with 300 zeros), and a .npy header beyond the 16 MiB read is refused as
    such (it was said to claim more bytes than the file has; helpers 118,
    119)."""
    X = np.random.default_rng(0).standard_normal((100, 3))
    x = save(tmp_path, "X.npy", X)
    w = np.ones(100)
    w[3] = -1e-300
    proc = run_memfit("kmeans", x, "-k", 2, "--sample-weight", save(tmp_path, "w.npy", w), expect=2)
    assert "sample_weight[3] = -1e-300; hint: sample weights must be >= 0" in proc.stderr
    head = "{'descr': '<f8', 'fortran_order': False, 'shape': (100, 3), }"
    n = 17_000_000
    pad = (64 - (12 + len(head) + n + 1) % 64) % 64
    h = (head + " " * (n + pad) + "\n").encode()
    big = tmp_path / "big_header.npy"
    big.write_bytes(b"\x93NUMPY\x02\x00" + len(h).to_bytes(4, "little") + h + X.tobytes())
    proc = run_memfit("kmeans", big, "-k", 2, expect=2)
    assert re.search(r"its header is 170\d{5} bytes, more than the 16777216 bytes read", proc.stderr), proc.stderr
