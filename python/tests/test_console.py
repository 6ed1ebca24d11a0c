"""The package's `memfit` console command is the engine's command-line tool."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import memfit


def console(*args, cwd=None):
    """Runs the `memfit` command that pip installed beside this interpreter."""
    exe = shutil.which("memfit", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.fail(f"no memfit console command beside {sys.executable}: `pip install .` installs one")
    return subprocess.run([exe, *args], capture_output=True, cwd=cwd, timeout=300)


def test_version_and_help():
    out = console("--version")
    assert out.returncode == 0
    assert out.stdout.decode().split() == ["memfit", memfit.__version__]
    out = console("--help")
    assert out.returncode == 0 and b"kmeans" in out.stdout


def test_python_dash_m_runs_the_same_tool():
    out = subprocess.run([sys.executable, "-m", "memfit", "--version"], capture_output=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.decode().split() == ["memfit", memfit.__version__]


def test_kmeans_on_a_non_utf8_path(tmp_path):
    """A file name that is not UTF-8 passes through sys.argv to the engine unchanged."""
    X = np.repeat(np.array([[0.0, 0.0], [10.0, 10.0], [20.0, 0.0]]), 20, axis=0)
    name = os.fsdecode(b"x\xff.npy")
    np.save(tmp_path / name, X)
    out = console("kmeans", name, "-k", "3", "--labels", "l.npy", "--seed", "0", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    labels = np.load(tmp_path / "l.npy")
    assert len(np.unique(labels)) == 3 and labels.shape == (60,)


def test_errors_exit_2_with_one_line(tmp_path):
    out = console("kmeans", "missing.npy", "-k", "3", cwd=tmp_path)
    assert out.returncode == 2
    lines = [l for l in out.stderr.decode().splitlines() if l.startswith("memfit: error:")]
    assert len(lines) == 1 and "missing.npy" in lines[0]
    assert console("kmeans", "--no-such-flag", cwd=tmp_path).returncode == 2


def test_says_when_nothing_is_saved(tmp_path):
    np.save(tmp_path / "X.npy", np.arange(40.0).reshape(20, 2))
    out = console("kmeans", "X.npy", "-k", "2", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert b"nothing was saved" in out.stderr
    out = console("kmeans", "X.npy", "-k", "2", "--labels", "l.npy", cwd=tmp_path)
    assert b"nothing was saved" not in out.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="signals")
def test_ctrl_c_stops_the_console_command_without_a_traceback(tmp_path):
    """With Python's own SIGINT handler installed (an interactive shell),
    the tool's clean stop was followed by a KeyboardInterrupt traceback."""
    import signal
    import time

    code = (
        "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "from memfit._cli import main; "
        "sys.argv = ['memfit', 'kmeans', '--init', 'random', '--n-init', '50', '--tol', '0', '--quiet', "
        f"'--labels', {str(tmp_path / 'labels.npy')!r}]; main()"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE)
    time.sleep(3)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert b"interrupted" in err and b"Traceback" not in err, err
    assert os.listdir(tmp_path) == []
