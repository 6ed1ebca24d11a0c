"""Faults of the command line found by trying it (helper 93): outputs that
could not be replaced found only after the work, matrix options whose errors
did not name them, and clap's messages cut short."""

import os
import shutil
import subprocess
import tempfile

import numpy as np
import pytest

from conftest import MEMFIT_BIN, save


def _as_nobody(cwd, *args):
    """memfit run by an unprivileged user (root may replace any file), or by
    this user when it is not root."""
    cmd = [str(MEMFIT_BIN), *map(str, args)]
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("setpriv is needed to run as another user")
        cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *cmd]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120)


def test_outputs_that_cannot_be_replaced_are_refused_before_any_work():
    """A read-only output file was replaced (numpy.save refuses it); another
    user's file in a sticky folder failed its rename after the fit, leaving
    the outputs written before it; a folder without write permission was
    blamed on the file."""
    work = tempfile.mkdtemp(prefix="memfit-args-")
    try:
        os.chmod(work, 0o1777)
        np.save(os.path.join(work, "X.npy"), np.random.default_rng(0).standard_normal((500, 3)))
        os.chmod(os.path.join(work, "X.npy"), 0o644)
        other = os.path.join(work, "other.npy")
        with open(other, "w") as f:
            f.write("keep")
        os.chmod(other, 0o444)
        proc = _as_nobody(work, "kmeans", "X.npy", "-k", "3", "--quiet", "--labels", "labels.npy", "--centers", "other.npy")
        assert proc.returncode == 2, proc.stderr
        assert "other.npy: replace failed: the file exists and is read-only" in proc.stderr, proc.stderr
        assert sorted(os.listdir(work)) == ["X.npy", "other.npy"]
        if os.geteuid() == 0:
            # Writable, but root's, in a sticky folder: only its owner may replace it.
            os.chmod(other, 0o666)
            proc = _as_nobody(work, "kmeans", "X.npy", "-k", "3", "--quiet", "--labels", "labels.npy", "--centers", "other.npy")
            assert proc.returncode == 2, proc.stderr
            assert "the file belongs to another user, in a folder where only a file's owner may replace it" in proc.stderr
            assert sorted(os.listdir(work)) == ["X.npy", "other.npy"]
        closed = os.path.join(work, "closed")
        os.mkdir(closed, 0o755)
        if os.geteuid() != 0:
            os.chmod(closed, 0o555)
        proc = _as_nobody(work, "kmeans", "X.npy", "-k", "3", "--quiet", "--labels", "closed/l.npy")
        assert proc.returncode == 2, proc.stderr
        assert "folder closed does not let this user create files" in proc.stderr, proc.stderr
        with open(other) as f:
            assert f.read() == "keep"
    finally:
        os.chmod(work, 0o700)
        shutil.rmtree(work)


def test_matrix_options_are_named_with_the_shape_they_need(tmp_path, memfit):
    """A 1-D file of centres, Q or initial means got the data's hint
    (X.reshape(-1, 1)), which then failed; a missing one did not name its
    option."""
    x = save(tmp_path, "x.npy", np.random.default_rng(0).standard_normal((50, 3)))
    one = save(tmp_path, "one.npy", np.array([0.1, 0.2, 0.3]))
    cases = [
        (["predict", x, "--centers", one, "--labels", tmp_path / "l.npy"],
         "--centers: ", "shape (n_clusters, n_features); for one centre use c.reshape(1, -1)"),
        (["kmeans", x, "-k", "1", "--init", one], "--init: ", "for one centre use c.reshape(1, -1)"),
        (["quadratic-form", x, "--q", one, "--out", tmp_path / "q.npy"], "--q: ", "shape (n_features, n_features)"),
        (["gmm", x, "-k", "1", "--means-init", one], "--means-init: ", "for one component use m.reshape(1, -1)"),
    ]
    for args, flag, hint in cases:
        err = memfit(*args, expect=2).stderr
        assert f"{flag}{one}: expected a 2-D array, found shape [3]" in err and hint in err, err
        missing = [tmp_path / "nope.npy" if a == one else a for a in args]
        err = memfit(*missing, expect=2).stderr
        assert f"{flag}{tmp_path / 'nope.npy'}: open failed" in err, err


def test_a_dry_run_refuses_weights_of_the_wrong_length_as_the_run(tmp_path, memfit):
    """kmeans and gmm --dry-run printed a plan (exit 0) for weights the run
    refuses (helper 131)."""
    x = save(tmp_path, "x.npy", np.random.default_rng(0).standard_normal((10, 4)))
    w = save(tmp_path, "w9.npy", np.ones(9))
    for command in (["kmeans", x, "-k", "3"], ["gmm", x, "-k", "2"]):
        run = memfit(*command, "--sample-weight", w, expect=2).stderr
        dry = memfit(*command, "--sample-weight", w, "--dry-run", expect=2).stderr
        assert dry == run and "shape [9], but [10] is required" in dry, (run, dry)


def test_a_command_alone_shows_its_commands_and_bad_values_list_the_good_ones(tmp_path, memfit):
    """`memfit` alone printed the tool's description as an error; an invalid
    value's message dropped clap's list of the values there are."""
    for args, shown in ([[], "Commands:"], [["generate"], "Commands:"]):
        proc = subprocess.run([str(MEMFIT_BIN), *args], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and shown in proc.stderr and "error:" not in proc.stderr, proc.stderr
    x = save(tmp_path, "x.npy", np.zeros((5, 2)))
    err = memfit("kmeans", x, "--algorithm", "full", expect=2).stderr
    assert "invalid value 'full' for '--algorithm <ALGORITHM>'; possible values: auto, lloyd, bounded;" in err, err


def test_names_longer_than_the_file_system_allows_are_refused_before_any_output(tmp_path, memfit):
    """A 256-byte output name failed when the finished output was linked
    into place, after the work, leaving the outputs written before it
    (labels without their centres); a legal 240-byte model folder failed
    because its temporary folder's name added 20 bytes."""
    x = save(tmp_path, "x.npy", np.random.default_rng(0).standard_normal((300, 3)))
    labels = tmp_path / "labels.npy"
    labels.write_bytes(b"old labels")
    long = tmp_path / ("c" * 256)
    err = memfit("kmeans", x, "-k", "2", "--labels", labels, "--centers", long, "--quiet", expect=2).stderr
    assert "its name is 256 bytes long, more than the 255 file systems allow" in err, err
    assert labels.read_bytes() == b"old labels"
    err = memfit("gmm", x, "-k", "2", "--model", tmp_path / ("m" * 256), "--labels", labels, "--quiet", expect=2).stderr
    assert "256 bytes long" in err and labels.read_bytes() == b"old labels", err
    model = tmp_path / ("m" * 240)
    memfit("gmm", x, "-k", "2", "--model", model, "--quiet")
    assert (model / "model.json").is_file() and sorted(os.listdir(tmp_path)) == sorted(["x.npy", "labels.npy", model.name])


def test_a_damaged_model_folder_is_named_not_the_data(tmp_path, memfit):
    """A hand-edited model.json's shift (1e308) changed every log-likelihood
    silently; a missing covariance_type blamed --covariance-type (not an
    option of gmm-predict); factors that overflow blamed the data and hinted
    at --reg-covar; a flag's overflow in `generate` blamed --n-features."""
    import json

    x = save(tmp_path, "x.npy", np.random.default_rng(1).standard_normal((400, 3)) + 5.0)
    model = tmp_path / "model"
    memfit("gmm", x, "-k", "2", "--model", model, "--quiet")
    ok = memfit("gmm-predict", x, "--model", model, "--labels", tmp_path / "l.npy", "--quiet")
    meta = json.loads((model / "model.json").read_text())

    def damaged(**change):
        bad = tmp_path / f"bad{len(os.listdir(tmp_path))}"
        shutil.copytree(model, bad)
        (bad / "model.json").write_text(json.dumps({**meta, **change}))
        return bad

    for shift in ([1e308, 0, 0], [1e17, 0, 0], [-5.0, 0, 0]):
        err = memfit("gmm-predict", x, "--model", damaged(shift=shift), "--labels", tmp_path / "l.npy", expect=2).stderr
        assert "model.json's shift for feature 0 is" in err and "not within a factor of 2" in err, err
        lo, hi = np.load(model / "means.npy")[:, 0].min(), np.load(model / "means.npy")[:, 0].max()
        assert f"other than 0 span {float(lo)!r} to {float(hi)!r}" in err, err
    # A shift memfit wrote (0, or within a factor of 2 of every mean) is read.
    assert memfit("gmm-predict", x, "--model", damaged(shift=[0.0, 0.0, 0.0]), "--labels", tmp_path / "l.npy").returncode == 0
    for kind in (None, "FULL"):
        err = memfit("gmm-predict", x, "--model", damaged(covariance_type=kind), "--labels", tmp_path / "l.npy", expect=2).stderr
        assert "model.json's covariance_type is" in err and "--covariance-type" not in err, err
    bad = damaged()
    factors = np.load(bad / "precisions_cholesky.npy")
    factors[0, 0, 0] = 1e308
    np.save(bad / "precisions_cholesky.npy", factors)
    err = memfit("gmm-predict", x, "--model", bad, "--labels", tmp_path / "l.npy", expect=2).stderr
    assert "its parameters overflow for this row" in err and "--reg-covar" not in err, err
    assert ok.returncode == 0
    for flag in ("--n-samples", "--centers"):
        sizes = {"--n-samples": "10", flag: str(2**64 - 1)}
        args = [a for kv in sizes.items() for a in kv]
        err = memfit("generate", "blobs", *args, "--out", tmp_path / "g.npy", expect=2).stderr
        assert f"invalid {flag}: " in err, err
