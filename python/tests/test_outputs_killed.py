"""A process killed (SIGTERM or SIGKILL) while writing an output leaves
nothing: no partial file and no temporary beside it. On Linux outputs are
written to unnamed files (O_TMPFILE) linked into place only when complete,
so even SIGKILL, which runs no handler, leaves the folder as it was."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="unnamed files are Linux's")

# An expression slow enough (a few seconds on one thread) to be killed
# while its .npy output is written.
ARRAY_CHILD = textwrap.dedent(
    """
    import sys
    import memfit.array as ma
    n = 8_000_000
    x = ma.arange(float(n))
    y = ma.sqrt(ma.exp(ma.sin(x) * 0.5) + ma.cos(x) ** 2 + ma.log(x + 1.0))
    for _ in range(6):
        y = ma.sqrt(y * y + ma.sin(y))
    y.to_npy(sys.argv[1], memory_limit="16MiB", n_jobs=1, overwrite=True)
    """
)


def output_open(pid, folder):
    """Whether the process holds a file of `folder` open (its output being
    written: `folder/#inode (deleted)` when unnamed)."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(folder) + os.sep):
            return True
    return False


def kill_while_writing(cmd, folder, sig):
    """Starts `cmd`, sends `sig` once it writes into `folder`, waits for it
    to end, and returns whether it was still writing when signalled."""
    child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not output_open(child.pid, folder) and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(0.05)
        writing = child.poll() is None and output_open(child.pid, folder)
        child.send_signal(sig)
        child.wait(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    return writing, child.stderr.read().decode(errors="replace")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
@pytest.mark.parametrize("existing", [False, True], ids=["new", "replaced"])
def test_to_npy_killed_leaves_nothing(tmp_path, sig, existing):
    out = tmp_path / "out.npy"
    if existing:
        out.write_bytes(b"old contents")
    writing, err = kill_while_writing([sys.executable, "-c", ARRAY_CHILD, str(out)], tmp_path, sig)
    assert writing, f"the child ended before it was signalled: {err}"
    assert sorted(os.listdir(tmp_path)) == (["out.npy"] if existing else []), err
    if existing:
        assert out.read_bytes() == b"old contents"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_cli_generate_killed_leaves_nothing(tmp_path, sig):
    cmd = [sys.executable, "-m", "memfit", "generate", "blobs", "--n-samples", "20000000", "--n-features", "4",
           "--dtype", "float32", "--memory-limit", "4MiB",
           "--out", str(tmp_path / "x.npy"), "--labels", str(tmp_path / "labels.npy")]
    writing, err = kill_while_writing(cmd, tmp_path, sig)
    assert writing, f"the child ended before it was signalled: {err}"
    assert os.listdir(tmp_path) == [], err


GROUPED_FIT_CHILD = textwrap.dedent(
    """
    import os, signal, sys
    import numpy as np
    from memfit import GaussianMixture
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2000, 128))
    gm = GaussianMixture(16, max_iter=1, random_state=0, memory_limit=sys.argv[2], scratch_dir=sys.argv[1]).fit(x)
    assert gm.memory_plan_.count("component groups"), gm.memory_plan_
    if sys.argv[3] == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    """
)


def test_a_killed_process_model_folder_is_removed_by_the_next_fit(tmp_path):
    """A grouped fit keeps its parameters in a model folder while the
    estimator lives; a process killed then leaves it, and the next grouped
    fit in the same place removes it (its owner no longer runs)."""
    limit = "6MiB"
    child = subprocess.run([sys.executable, "-c", GROUPED_FIT_CHILD, str(tmp_path), limit, "kill"],
                           capture_output=True, text=True)
    assert child.returncode == -signal.SIGKILL, child.stderr
    left = os.listdir(tmp_path)
    assert len(left) == 1 and left[0].startswith("memfit-gmm-"), left
    child = subprocess.run([sys.executable, "-c", GROUPED_FIT_CHILD, str(tmp_path), limit, "exit"],
                           capture_output=True, text=True)
    assert child.returncode == 0, child.stderr
    assert os.listdir(tmp_path) == []
