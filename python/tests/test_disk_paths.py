"""Disk space, scratch folders, paths of any bytes and memory sizes
(issue 21, T3-04 and T3-05): whatever a job writes is checked against each
file system's free space before any work; a bad scratch folder is reported
before the data are read; any path a file system accepts works."""

import contextlib
import errno
import os
import subprocess
import time
import warnings

import numpy as np
import pytest

import memfit
from memfit import GaussianMixture, KMeans


@contextlib.contextmanager
def small_fs(path, size, read_only=False):
    """A tmpfs of ``size`` mounted at ``path``; skips where mounting is refused."""
    os.makedirs(path, exist_ok=True)
    opts = f"size={size}" + (",ro" if read_only else "")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", os.fsencode(path)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode(errors='replace').strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", os.fsencode(path)], check=False)


def test_grouped_mixture_refused_before_work_when_scratch_and_model_exceed_the_disk(tmp_path):
    """T3-04: the scratch files fit the 40 MiB file system, and so would the
    model folder alone, but not both: refused before any EM iteration,
    with the numbers, and nothing is left there."""
    X = np.random.RandomState(0).randn(2000, 160)
    with small_fs(tmp_path / "small", "40m") as small:
        gm = GaussianMixture(64, memory_limit="16MiB", scratch_dir=small, max_iter=2, random_state=0)
        started = time.perf_counter()
        with pytest.raises(OSError, match=r"not enough free disk space: the files written on its file system "
                           r"\(scratch files .*, model folder .*\) need \d+ bytes .* but 41943040 bytes "
                           r"\(40.00 MiB\) are available; nothing was written") as e:
            gm.fit(X)
        assert e.value.errno == errno.ENOSPC
        assert time.perf_counter() - started < 5
        assert os.listdir(small) == []


@pytest.mark.parametrize("kind", ["missing", "file", "read-only"])
def test_a_bad_scratch_folder_is_reported_before_the_data_are_read(tmp_path, kind):
    X = np.random.RandomState(0).randn(100, 2)
    X[-1, -1] = np.nan  # reported instead if the data were read first
    if kind == "missing":
        ctx, where, cls, why = contextlib.nullcontext(), tmp_path / "missing", FileNotFoundError, "the folder does not exist"
    elif kind == "file":
        where = tmp_path / "file"
        where.write_bytes(b"x")
        ctx, cls, why = contextlib.nullcontext(), OSError, "it is not a folder"
    else:
        where = tmp_path / "ro"
        ctx, cls, why = small_fs(where, "64k", read_only=True), OSError, "cannot create files there"
    with ctx:
        with pytest.raises(cls, match=f"use as the scratch folder failed: {why}"):
            GaussianMixture(2, scratch_dir=where).fit(X)


ODD = [b"x\xff", b"with space", b"new\nline", b"-dash"]


@pytest.mark.parametrize("name", ODD, ids=["non-utf8", "space", "newline", "dash"])
def test_any_path_the_file_system_accepts_works(tmp_path, name):
    """T3-05's kind in Python: inputs (str from os.fsdecode, bytes,
    pathlib), sample weights, scratch folders, and array outputs."""
    X = np.random.RandomState(0).randn(300, 2) + np.repeat(np.eye(2) * 9, 150, axis=0)
    base = os.fsencode(tmp_path) + b"/" + name
    x_path = base + b".npy"
    with open(x_path, "wb") as f:
        np.save(f, X)
    w_path = base + b"_w.npy"
    with open(w_path, "wb") as f:
        np.save(f, np.ones(300))
    want = KMeans(2, random_state=0, n_init=1).fit(X).inertia_
    for given in (x_path, os.fsdecode(x_path)):
        got = KMeans(2, random_state=0, n_init=1).fit(given, sample_weight=w_path)
        assert got.inertia_ == pytest.approx(want)
    scratch = base + b"_scratch"
    os.mkdir(scratch)
    gm = GaussianMixture(2, scratch_dir=scratch, random_state=0).fit(os.fsdecode(x_path))
    assert gm.converged_
    # Components in groups: the model folder lies in the scratch folder.
    big = np.random.RandomState(1).randn(600, 40)
    grouped = GaussianMixture(12, memory_limit="600KiB", scratch_dir=scratch, max_iter=2, random_state=0).fit(big)
    assert "component groups" in grouped.memory_plan_
    out = base + b"_out.npy"
    memfit.array.asarray(X).to_npy(out)
    np.testing.assert_array_equal(np.load(os.fsdecode(out)), X)


def test_memory_sizes_are_parsed_strictly():
    X = np.random.RandomState(0).randn(50, 2)
    for bad in ["1e", "1..5GiB", "5 GiBs", "inf"]:
        with pytest.raises(ValueError, match="invalid memory_limit"):
            KMeans(2, memory_limit=bad).fit(X)
    for ok in ["1e9", 1e9, 10**9]:
        KMeans(2, memory_limit=ok, n_init=1).fit(X)
    with pytest.raises(ValueError, match="whole number of bytes"):
        KMeans(2, memory_limit=1.5e9 + 0.5).fit(X)
