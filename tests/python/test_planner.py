"""The planner sized to the job (issue 9, case N4): the smallest limit it accepts is at most
twice the peak resident memory measured at that limit, on short-wide and tall-narrow data, for
k-means and the four covariance types; and the run at that limit stays within it."""

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from conftest import MEMFIT_BIN, RSS_SLACK, save

# Runs memfit as its only child, then prints the children's peak RSS (KiB on Linux).
MEASURE = ("import resource, subprocess, sys; rc = subprocess.run(sys.argv[1:]).returncode; "
           "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(rc)")


def smallest_limit(args):
    """The limit the planner asks for when refusing a 1-byte limit."""
    proc = subprocess.run([str(MEMFIT_BIN), *map(str, args), "--memory-limit", "1", "--dry-run"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    return int(re.search(r"at least [^(]*\((\d+) bytes\)", proc.stderr).group(1))


def peak_at(args, limit):
    proc = subprocess.run([sys.executable, "-c", MEASURE, str(MEMFIT_BIN), *map(str, args),
                           "--memory-limit", str(limit), "--quiet", "--max-iter", "3"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return int(proc.stdout.split()[-1]) * 1024


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("shapes")
    rng = np.random.default_rng(0)
    return {
        # 30 × 100,000 float64 (23 MiB): diag GMM was refused below 838 MiB on 2 threads.
        "short-wide": save(d, "sw.npy", rng.normal(size=(30, 100_000))),
        # full and tied hold d × d matrices per component: short-wide at d = 2,000.
        "short-wide-2k": save(d, "sw2k.npy", rng.normal(size=(30, 2_000))),
        "tall-narrow": save(d, "tn.npy", rng.normal(size=(200_000, 4))),
    }


CASES = [("short-wide", ["kmeans", "--n-clusters", 2]),
         ("short-wide", ["gmm", "--n-components", 2, "--covariance-type", "diag"]),
         ("short-wide", ["gmm", "--n-components", 2, "--covariance-type", "spherical"]),
         ("short-wide-2k", ["gmm", "--n-components", 2, "--covariance-type", "full"]),
         ("short-wide-2k", ["gmm", "--n-components", 2, "--covariance-type", "tied"]),
         ("tall-narrow", ["kmeans", "--n-clusters", 8])] + \
        [("tall-narrow", ["gmm", "--n-components", 3, "--covariance-type", t])
         for t in ["full", "tied", "diag", "spherical"]]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ru_maxrss is in KiB only on Linux")
@pytest.mark.parametrize("shape,args", CASES, ids=[f"{s}-{' '.join(map(str, a[:1] + a[3:]))}" for s, a in CASES])
def test_smallest_accepted_limit_is_within_twice_the_peak(data, shape, args):
    args = [args[0], data[shape], *args[1:]]
    limit = smallest_limit(args)
    peak = peak_at(args, limit)
    print(f"{shape} {args[0]}: smallest limit {limit / 2**20:.1f} MiB, peak {peak / 2**20:.1f} MiB")
    assert limit <= 2 * peak
    assert peak <= limit + RSS_SLACK


def test_a_refusal_names_the_mini_batch_draws_weights(tmp_path):
    """Found by trying memfit: a mini-batch fit refused for its cumulative
    weights (8 B per row) named a 6 KB buffer as the largest."""
    from conftest import run_memfit

    x = save(tmp_path, "x.npy", np.random.default_rng(0).standard_normal((400_000, 4)))
    w = save(tmp_path, "w.npy", np.ones(400_000))
    proc = run_memfit("kmeans", x, "-k", 20, "--mini-batch", 1024, "--sample-weight", w, "--memory-limit", "2MiB",
                      expect=2)
    assert "largest buffer: mini-batch steps: cumulative weights" in proc.stderr


def _header_only_npy(path, shape):
    """A .npy of float64 `shape` whose data are a hole (a sparse file of
    almost no disk): the planner reads the header only."""
    header = ("{'descr': '<f8', 'fortran_order': False, 'shape': %s, }" % (shape,)).encode()
    header += b" " * ((64 - (10 + len(header) + 1) % 64) % 64) + b"\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header)
    os.truncate(path, os.path.getsize(path) + shape[0] * shape[1] * 8)


@pytest.mark.parametrize("n_features", [2**31, 2**32])
def test_sizes_beyond_64_bits_are_refused_never_wrapped(tmp_path, memfit, n_features):
    # d × d matrices of d = 2^31 or 2^32 features are 2^65 bytes or more:
    # sizes that wrapped once gave plans of a few GiB, accepted.
    x = tmp_path / "wide.npy"
    _header_only_npy(x, (10, n_features))
    for args in (["gmm", x, "-k", 3, "--dry-run"], ["gmm", x, "-k", 3, "--covariance-type", "tied", "--dry-run"],
                 ["scatter", x, "--out", tmp_path / "s.npy"]):
        err = memfit(*args, "--memory-limit", "7EiB", expect=2).stderr
        assert "float64 values exceed 8 EiB" in err, err
    assert not (tmp_path / "s.npy").exists()
    # diag and spherical hold no d × d matrix: planned as before.
    out = memfit("gmm", x, "-k", 3, "--covariance-type", "diag", "--dry-run", "--memory-limit", "7EiB").stdout
    assert "total" in out
    # generate: the rows and centres of 2^61 features are beyond any array.
    err = memfit("generate", "blobs", "--n-samples", 10, "--n-features", 2**61, "--out", tmp_path / "g.npy",
                 expect=2).stderr
    assert "exceed the largest array" in err and "panicked" not in err
    assert not (tmp_path / "g.npy").exists()
