"""What the estimators accept and how they fail: inputs used in place,
.npy paths, memmaps, error classes, Ctrl-C, the GIL, progress output."""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning

import memfit
from memfit import GaussianMixture, KMeans
from memfit._validation import check_data


@pytest.mark.parametrize(
    "make",
    [
        lambda X: X,
        lambda X: np.asfortranarray(X),
        lambda X: X.astype(np.float32),
        lambda X: X[::3],
        lambda X: X[:, ::2],
        lambda X: np.round(X * 10).astype(np.int16),
        lambda X: np.round(X).astype(np.uint8),
    ],
    ids=["c-float64", "fortran", "float32", "row-step", "column-step", "int16", "uint8"],
)
def test_arrays_are_used_in_place(make):
    """Every supported array layout and dtype reaches the engine as the same memory, not a copy."""
    X = make(np.abs(np.random.RandomState(0).randn(300, 4)) * 3)
    X.setflags(write=False)
    data = check_data(X)
    assert data.engine is X or np.shares_memory(data.engine, X)
    assert data.float32 == (X.dtype == np.float32)


def test_a_negative_stride_on_a_length_one_axis_is_read_in_place():
    """One row read backwards (X[::-1]) or one column (X[:, ::-1]): NumPy
    calls such views contiguous, and the engine reads them in place, with
    the results of their copies, in the estimators and the kernels."""
    rng = np.random.RandomState(0)
    for view in (rng.randn(1, 4)[::-1], rng.randn(30, 1)[:, ::-1]):
        assert view.strides[0 if view.shape[0] == 1 else 1] < 0 and view.flags.c_contiguous
        data = check_data(view)
        assert np.shares_memory(data.engine, view)
        copy = view.copy()
        np.testing.assert_array_equal(memfit.row_quadratic_form(view, np.eye(view.shape[1])),
                                      memfit.row_quadratic_form(copy, np.eye(view.shape[1])))
        np.testing.assert_array_equal(memfit.weighted_scatter(view), memfit.weighted_scatter(copy))
        km = KMeans(1, n_init=1).fit(view)
        np.testing.assert_array_equal(km.cluster_centers_, KMeans(1, n_init=1).fit(copy).cluster_centers_)
        np.testing.assert_array_equal(km.transform(view), km.transform(copy))


def test_memmap_of_a_whole_npy_file_is_read_from_the_file(tmp_path):
    """np.load(mmap_mode="r") of a .npy reaches the engine as its path; slices and copy-on-write maps as arrays."""
    X = np.arange(60.0).reshape(20, 3)
    for order in ("C", "F"):
        np.save(tmp_path / f"{order}.npy", np.asarray(X, order=order))
        m = np.load(tmp_path / f"{order}.npy", mmap_mode="r")
        assert check_data(m).engine == str((tmp_path / f"{order}.npy").resolve())
        assert check_data(np.load(str(tmp_path / f"{order}.npy"), mmap_mode="r")).engine == str(tmp_path / f"{order}.npy")
        assert isinstance(check_data(m[2:]).engine, np.ndarray)
        assert isinstance(check_data(np.load(tmp_path / f"{order}.npy", mmap_mode="c")).engine, np.ndarray)
        assert isinstance(check_data(m.T).engine, np.ndarray)
    raw = np.memmap(tmp_path / "raw.bin", dtype=np.float64, mode="w+", shape=(20, 3))
    assert isinstance(check_data(raw).engine, np.ndarray)


def test_other_inputs_are_converted_once():
    """Lists, bool, int8, uint16, big-endian and negative-stride arrays are
    converted to an engine dtype: bool, int8 and uint16 to the narrowest
    that holds them (not float64: 8× an int8 array)."""
    X = np.arange(12.0).reshape(6, 2)
    others = (X.tolist(), X > 3, X.astype(np.int8), X.astype(np.uint16), X.astype(">f8"), X.astype(">i2"), X[::-1])
    for other, dtype in zip(others, (np.float64, np.uint8, np.int16, np.int32, np.float64, np.int16, np.float64)):
        data = check_data(other)
        assert data.engine.dtype == dtype and data.engine.strides[0] > 0
        np.testing.assert_array_equal(np.asarray(data.engine, dtype=float), np.asarray(other, dtype=float))


def test_big_endian_float32_computes_in_float64_as_scikit_learn(tmp_path, blobs):
    """scikit-learn keeps native float32 only; a big-endian float32 array,
    memmap or file is computed in float64, the same fit for each."""
    X, centers = blobs
    big = X.astype(">f4")
    path = tmp_path / "big.npy"
    np.save(path, big)
    fits = [KMeans(4, init=centers, n_init=1).fit(s) for s in (big, np.load(path, mmap_mode="r"), str(path))]
    ref = KMeans(4, init=centers, n_init=1).fit(big.astype(np.float64))
    for f in fits:
        assert f.cluster_centers_.dtype == np.float64
        np.testing.assert_array_equal(f.cluster_centers_, ref.cluster_centers_)
        assert f.inertia_ == ref.inertia_
    assert KMeans(4, init=centers, n_init=1).fit(X.astype(np.float32)).cluster_centers_.dtype == np.float32


def test_path_memmap_and_array_agree(tmp_path, blobs):
    """A .npy path (str or Path), a memmap and the array give identical fits."""
    X, centers = blobs
    path = tmp_path / "X.npy"
    np.save(path, np.asfortranarray(X))
    fits = [
        KMeans(4, init=centers, n_init=1).fit(source)
        for source in (X, str(path), path, np.load(path, mmap_mode="r"))
    ]
    for f in fits[1:]:
        np.testing.assert_array_equal(f.cluster_centers_, fits[0].cluster_centers_)
        np.testing.assert_array_equal(f.labels_, fits[0].labels_)
    assert fits[1].n_features_in_ == 3
    gm = [GaussianMixture(4, means_init=centers, random_state=0).fit(s) for s in (X, str(path))]
    np.testing.assert_array_equal(gm[0].means_, gm[1].means_)
    np.testing.assert_array_equal(gm[0].predict(X), gm[1].predict(str(path)))


def test_error_classes(tmp_path, blobs):
    """Engine errors arrive as ValueError, MemoryError, OSError; sparse input as TypeError."""
    X, _ = blobs
    with pytest.raises(FileNotFoundError, match="missing.npy"):
        KMeans(2).fit(str(tmp_path / "missing.npy"))
    (tmp_path / "text.npy").write_text("not an array")
    with pytest.raises(ValueError, match="not a valid .npy file"):
        KMeans(2).fit(str(tmp_path / "text.npy"))
    np.save(tmp_path / "c.npy", X.astype(np.complex128))
    with pytest.raises(ValueError, match="unsupported dtype"):
        KMeans(2).fit(str(tmp_path / "c.npy"))
    with pytest.raises(MemoryError, match="memory limit"):
        KMeans(2, memory_limit=10_000).fit(X)
    with pytest.raises(MemoryError, match="memory limit"):
        GaussianMixture(2, memory_limit="20KiB").fit(X)
    bad = X.copy()
    bad[5, 1] = np.nan
    with pytest.raises(ValueError, match=r"X: row 5, column 1 is NaN"):
        KMeans(2).fit(bad)
    with pytest.raises(ValueError, match=r"row 5, column 1 is NaN"):
        GaussianMixture(2).fit(bad)
    with pytest.raises(TypeError, match="Sparse data was passed for X"):
        GaussianMixture(2).fit(sp.csr_matrix(X))
    with pytest.raises(ValueError, match="invalid memory_limit"):
        KMeans(2, memory_limit="lots").fit(X)
    with pytest.raises(ValueError, match="n_jobs"):
        KMeans(2, n_jobs=0).fit(X)
    with pytest.raises(ValueError, match="sample_weight"):
        KMeans(2).fit(X, sample_weight=np.ones(3))
    with pytest.raises(ValueError, match="Complex data not supported"):
        KMeans(2).fit(X + 1j)
    with pytest.raises(ValueError, match="Expected 2D array"):
        KMeans(2).fit(X[:, 0])


def test_path_errors_leave_the_estimator_unfitted(tmp_path):
    """A path with the wrong number of dimensions is refused before any fit."""
    np.save(tmp_path / "v.npy", np.arange(10.0))
    km = KMeans(2)
    with pytest.raises(ValueError, match=r"expected a 2-D array.*X.reshape\(-1, 1\) for a single feature"):
        km.fit(str(tmp_path / "v.npy"))
    assert not hasattr(km, "cluster_centers_")
    # A 3-D file's hint is not the single feature's (helper 105).
    np.save(tmp_path / "c.npy", np.ones((1, 4, 3)))
    with pytest.raises(ValueError, match=r"found shape \(1, 4, 3\); hint: save X.reshape\(n_samples, -1\)"):
        GaussianMixture(2).fit(tmp_path / "c.npy")


def test_memory_limit_forms(blobs):
    """memory_limit takes bytes or a size string, and the plan says what it used."""
    X, centers = blobs
    a = KMeans(4, init=centers, memory_limit="1MiB").fit(X)
    b = KMeans(4, init=centers, memory_limit=1 << 20).fit(X)
    np.testing.assert_array_equal(a.cluster_centers_, b.cluster_centers_)
    assert "1.0 MiB" in a.memory_plan_ or "1048576" in a.memory_plan_
    assert memfit.parse_size("2GiB") == 2 << 30 and memfit.parse_size("2GB") == 2_000_000_000


def test_convergence_warning(blobs):
    """Too few iterations and duplicate points warn with ConvergenceWarning."""
    X, _ = blobs
    with pytest.warns(ConvergenceWarning, match="did not converge"):
        GaussianMixture(4, max_iter=1, random_state=0).fit(X)
    with pytest.warns(ConvergenceWarning, match="distinct clusters"):
        KMeans(3, n_init=1, random_state=0).fit(np.repeat(X[:2], 10, axis=0))


def test_verbose_prints_progress(capsys, blobs):
    """verbose=1 prints scikit-learn's lines through Python's stdout."""
    X, centers = blobs
    KMeans(4, init=centers, verbose=1).fit(X)
    GaussianMixture(2, verbose=1, random_state=0).fit(X)
    out = capsys.readouterr().out
    assert "Iteration 0, inertia" in out and "Initialization 0\n" in out and "Initialization converged." in out


def test_gil_is_released():
    """Python threads keep running while a fit works in the engine."""
    X = np.random.RandomState(0).randn(400_000, 8)
    counter = [0]
    done = threading.Event()

    def count():
        while not done.is_set():
            counter[0] += 1

    t = threading.Thread(target=count)
    t.start()
    start = time.perf_counter()
    KMeans(50, n_init=1, max_iter=20, tol=0, random_state=0, n_jobs=1).fit(X)
    elapsed = time.perf_counter() - start
    done.set()
    t.join()
    assert elapsed > 0.2, "the fit was too short to tell"
    assert counter[0] > 100_000 * elapsed, f"only {counter[0]} increments in {elapsed:.2f} s"


CHILD = textwrap.dedent(
    """
    import signal, sys, time
    import numpy as np
    # Python leaves SIGINT ignored when started from a background job;
    # an interactive session has the default handler.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from memfit import {cls}
    X = np.random.RandomState(0).randn(1_000_000, 8)
    est = {cls}({args})
    print("started", flush=True)
    try:
        est.fit(X)
        print("finished", flush=True)
    except KeyboardInterrupt:
        print("interrupted", time.time(), flush=True)
    """
)


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT")
@pytest.mark.parametrize(
    "cls,args",
    [
        ("KMeans", "n_clusters=300, n_init=1, max_iter=10_000, tol=0, random_state=0"),
        ("GaussianMixture", "n_components=30, max_iter=10_000, tol=0, random_state=0"),
    ],
)
def test_ctrl_c_stops_a_fit_within_a_second(cls, args):
    """SIGINT during a long fit raises KeyboardInterrupt in under a second."""
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD.format(cls=cls, args=args)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "started"
        time.sleep(1.5)
        sent = time.time()
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
    finally:
        proc.kill()
    line = out.split()
    assert proc.returncode == 0 and line[0] == "interrupted", out
    assert float(line[1]) - sent < 1.0


def test_engine_warnings_are_classified_by_kind(blobs):
    """The engine hands warnings as (kind, category, message); the category
    picks the Python class, and no message names a command-line flag."""
    from memfit import _memfit
    from memfit._validation import emit_warnings

    X, _ = blobs
    r = _memfit.kmeans_fit(X, n_clusters=3, memory_limit=1 << 30, init="random", n_init=1, max_iter=1)
    kinds = {kind: (category, message) for kind, category, message in r["warnings"]}
    assert kinds["not_converged"][0] == "convergence", kinds
    assert "raise max_iter" in kinds["not_converged"][1] and "--" not in kinds["not_converged"][1]
    with pytest.warns(ConvergenceWarning, match="did not converge"):
        emit_warnings(r["warnings"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        emit_warnings(r["warnings"], skip=("not_converged",))


def test_bindings_take_keywords_only(blobs):
    """The extension's functions name their arguments (no positional lists)."""
    from memfit import _memfit

    X, _ = blobs
    with pytest.raises(TypeError):
        _memfit.kmeans_fit(X, None, 3)
    labels = np.empty(X.shape[0], dtype=np.int32)
    inertia = _memfit.assign(X, centers=X[:3].copy(), memory_limit=1 << 30, labels=labels)
    assert inertia >= 0.0 and labels.min() >= 0


def test_weighted_score_from_a_path(tmp_path, blobs):
    """KMeans.score weighs squared distances in the engine, for weights given
    as an array or a .npy path alike."""
    X, _ = blobs
    w = np.random.RandomState(1).uniform(0.5, 2.0, size=X.shape[0])
    np.save(tmp_path / "w.npy", w)
    km = KMeans(3, random_state=0).fit(X)
    dist = ((X[:, None, :] - km.cluster_centers_[None]) ** 2).sum(axis=2).min(axis=1)
    expected = -float(np.dot(w, dist))
    assert km.score(X, sample_weight=w) == pytest.approx(expected, rel=1e-12)
    assert km.score(X, sample_weight=str(tmp_path / "w.npy")) == km.score(X, sample_weight=w)


def test_bic_and_aic_come_from_the_engine(blobs):
    """bic/aic on new data follow -2 log L + p ln n and -2 log L + 2 p."""
    X, _ = blobs
    gm = GaussianMixture(2, covariance_type="diag", random_state=0).fit(X)
    n, p = X.shape[0], gm._n_parameters()
    assert p == 2 * X.shape[1] * 2 + 1
    assert gm.bic(X) == pytest.approx(-2.0 * gm.score(X) * n + p * np.log(n), rel=1e-12)
    assert gm.aic(X) == pytest.approx(-2.0 * gm.score(X) * n + 2.0 * p, rel=1e-12)
