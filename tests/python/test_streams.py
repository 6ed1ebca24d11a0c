"""Standard output that cannot be written (found by trying memfit: a closed
pipe or a full device made the tool panic with a backtrace)."""

import os
import subprocess

from conftest import MEMFIT_BIN


def _data(tmp_path, memfit):
    x = tmp_path / "x.npy"
    memfit("generate", "blobs", "--n-samples", "2000", "--n-features", "3", "--out", x)
    return x


def test_a_closed_pipe_ends_the_run_quietly(tmp_path, memfit):
    x = _data(tmp_path, memfit)
    for args in (["kmeans", x, "-k", "5", "--quiet"], ["kmeans", x, "-k", "5", "--dry-run"]):
        proc = subprocess.Popen([str(MEMFIT_BIN), *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        proc.stdout.close()  # the reader is gone before the tool prints
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=120) == 0, err
        assert "panicked" not in err and "error" not in err, err


def test_a_full_standard_output_is_one_error_line(tmp_path, memfit):
    if not os.path.exists("/dev/full"):
        return
    x = _data(tmp_path, memfit)
    for args in (["kmeans", x, "-k", "5", "--quiet"], ["kmeans", x, "-k", "5", "--summary", "-"]):
        with open("/dev/full", "w") as full:
            proc = subprocess.run([str(MEMFIT_BIN), *map(str, args)], stdout=full, stderr=subprocess.PIPE, text=True)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.strip() == "memfit: error: writing to standard output: No space left on device (os error 28)"
