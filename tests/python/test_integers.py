"""Issue 9, parts 2 and 6 (cases.md N2): integer input through the CLI, against
NumPy and scikit-learn. int32/int64/uint32/uint64 compute in float64 by
default, as scikit-learn and memfit's Python package do; --dtype float32
warns about values beyond 2^24, naming the column; weights are 1-D."""

import json

import numpy as np
import pytest
from sklearn.cluster import KMeans
from sklearn.mixture import GaussianMixture

from conftest import fit, inertia, only_files, run_memfit, save

N2_INT64 = (10**9 + np.array([0, 1, 2, 10, 11, 12], dtype=np.int64)).reshape(-1, 1)
# Column 1 just above 2^24 (int32), column 0 constant.
N2_INT32 = np.column_stack([np.full(6, 7), 2**24 + np.array([1, 3, 5, 101, 103, 105])]).astype(np.int32)


def groups(centres, labels):
    """Centres sorted by their last column, and whether labels split rows 0-2 from rows 3-5."""
    order = np.argsort(centres[:, -1])
    split = len(set(labels[:3])) == 1 and len(set(labels[3:])) == 1 and labels[0] != labels[3]
    return centres[order], split


def test_int64_near_1e9_kmeans_predict_match_scikit_learn(tmp_path):
    m = fit(tmp_path, N2_INT64, 2)
    sk = KMeans(2, n_init=1, random_state=0).fit(N2_INT64)
    centres, split = groups(m.centers, m.labels)
    assert split and m.centers.dtype == np.float64
    np.testing.assert_array_equal(centres.ravel(), [10**9 + 1, 10**9 + 11])
    np.testing.assert_array_equal(centres, groups(sk.cluster_centers_, sk.labels_)[0])
    assert m.summary["inertia"] == 4.0 == sk.inertia_
    assert inertia(N2_INT64, m.centers, m.labels) == 4.0  # the written centres agree
    assert m.summary["compute_dtype"] == "float64" and m.summary["warnings"] == []
    assert "warning" not in m.proc.stderr
    out = tmp_path / "pl.npy"
    run_memfit("predict", tmp_path / "fit_X.npy", "--centers", m.centers_path, "--labels", out, "--quiet")
    np.testing.assert_array_equal(np.load(out), m.labels)


@pytest.mark.parametrize("X, covariance_type", [(N2_INT64, "full"), (N2_INT32, "diag")], ids=["int64", "int32"])
def test_integer_gmm_keeps_two_components(tmp_path, X, covariance_type):
    path = save(tmp_path, "X.npy", X)
    model, labels = tmp_path / "model", tmp_path / "l.npy"
    proc = run_memfit("gmm", path, "-k", 2, "--covariance-type", covariance_type, "--model", model,
                      "--labels", labels, "--quiet")
    assert "warning" not in proc.stderr
    means, split = groups(np.load(model / "means.npy"), np.load(labels))
    assert split
    right = np.array([X[:3].mean(axis=0), X[3:].mean(axis=0)])  # exact in float64
    np.testing.assert_array_equal(means, right)
    sk = GaussianMixture(2, covariance_type=covariance_type, random_state=0).fit(X)
    np.testing.assert_allclose(means, groups(sk.means_, sk.predict(X))[0], rtol=1e-12)
    out = tmp_path / "gpl.npy"
    run_memfit("gmm-predict", path, "--model", model, "--labels", out, "--quiet")
    np.testing.assert_array_equal(np.load(out), np.load(labels))


def test_int32_above_2_pow_24_exact_by_default(tmp_path):
    m = fit(tmp_path, N2_INT32, 2)
    centres, split = groups(m.centers, m.labels)
    assert split
    np.testing.assert_array_equal(centres, [[7, 2**24 + 3], [7, 2**24 + 103]])
    sk = KMeans(2, n_init=1, random_state=0).fit(N2_INT32)
    assert m.summary["inertia"] == 16.0 == sk.inertia_


@pytest.mark.parametrize("command", ["kmeans", "predict", "gmm", "gmm-predict", "quadratic-form"])
def test_float32_warns_about_integers_beyond_2_pow_24_naming_the_column(tmp_path, command):
    path = save(tmp_path, "X.npy", N2_INT32)
    centres, model = save(tmp_path, "c.npy", N2_INT32[[0, 3]].astype(np.float64)), tmp_path / "model"
    run_memfit("gmm", path, "-k", 2, "--covariance-type", "diag", "--model", model, "--quiet")
    q = save(tmp_path, "q.npy", np.eye(2))
    args = {
        "kmeans": ["-k", 2, "--summary", tmp_path / "s.json"],
        "predict": ["--centers", centres, "--labels", tmp_path / "l.npy"],
        "gmm": ["-k", 2, "--covariance-type", "diag", "--summary", tmp_path / "s.json"],
        "gmm-predict": ["--model", model, "--labels", tmp_path / "l.npy"],
        "quadratic-form": ["--q", q, "--out", tmp_path / "q_out.npy"],
    }[command]
    proc = run_memfit(command, path, *args, "--dtype", "float32", "--quiet")
    expected = (f"warning: {path}: column 1 holds int32 values beyond 2^24 in magnitude "
                f"(first: {2**24 + 1} at row 0), which float32 cannot represent exactly")
    assert expected in proc.stderr and "use --dtype float64, which holds integers exactly up to 2^53" in proc.stderr, proc.stderr
    if command in ("kmeans", "gmm"):
        summary = json.loads((tmp_path / "s.json").read_text())
        assert any("column 1 holds int32 values beyond 2^24" in w for w in summary["warnings"])


def test_uint64_beyond_2_pow_53_warns_in_float64(tmp_path):
    X = (2**53 + np.array([1, 3, 5, 101, 103, 105], dtype=np.uint64)).reshape(-1, 1)
    m = fit(tmp_path, X, 2)
    assert m.summary["input_dtype"] == "uint64" and m.summary["compute_dtype"] == "float64"
    assert f"column 0 holds uint64 values beyond 2^53 in magnitude (first: {2**53 + 1} at row 0)" in m.proc.stderr
    # uint32 is exact in float64: no warning, scikit-learn's centres.
    X32 = (2**31 + np.array([1, 3, 5, 101, 103, 105], dtype=np.uint32)).reshape(-1, 1)
    m = fit(tmp_path, X32, 2, tag="u32")
    sk = KMeans(2, n_init=1, random_state=0).fit(X32)
    np.testing.assert_array_equal(groups(m.centers, m.labels)[0], groups(sk.cluster_centers_, sk.labels_)[0])
    assert "warning" not in m.proc.stderr


def test_sparse_integers_that_the_compute_dtype_rounds_warn_as_dense_ones(tmp_path):
    """A sparse .npz of int64 beyond 2^53 (or int32 beyond 2^24 in float32)
    warns naming the column and the first value, as the same .npy does (the
    sparse reader converted them silently; helper 90)."""
    import scipy.sparse as sp

    X = np.zeros((6, 3), np.int64)
    X[:, 0] = np.arange(6)
    X[4, 2], X[5, 2] = 2**53 + 1, 2**53 + 3
    Xi = np.zeros((6, 3), np.int32)
    Xi[:, 0] = np.arange(6)
    Xi[3, 1] = 2**24 + 1
    for data, dtype, want in [(X, "float64", f"column 2 holds int64 values beyond 2^53 in magnitude (first: {2**53 + 1} at row 4)"),
                              (Xi, "float32", f"column 1 holds int32 values beyond 2^24 in magnitude (first: {2**24 + 1} at row 3)")]:
        for path in (save(tmp_path, "d.npy", data), tmp_path / "s.npz"):
            sp.save_npz(tmp_path / "s.npz", sp.csr_matrix(data))
            proc = run_memfit("kmeans", path, "-k", "2", "--dtype", dtype, "--quiet")
            assert want in proc.stderr, (path, proc.stderr)


@pytest.mark.parametrize("command, flag, shape", [
    ("kmeans", "--sample-weight", (6, 1)),
    ("gmm", "--sample-weight", (6, 1)),
    ("gmm", "--weights-init", (2, 1)),
])
def test_column_weights_are_refused_as_scikit_learn_refuses_them(tmp_path, command, flag, shape):
    path = save(tmp_path, "X.npy", N2_INT64)
    w = save(tmp_path, "w.npy", np.full(shape, 0.5))
    if flag == "--sample-weight":
        with pytest.raises(ValueError, match="1D array"):
            KMeans(2, n_init=1).fit(N2_INT64, sample_weight=np.load(w))
    else:
        with pytest.raises(ValueError, match=r"shape of \(2,\)"):
            GaussianMixture(2, weights_init=np.load(w)).fit(N2_INT64)
    proc = run_memfit(command, path, "-k", 2, flag, w, expect=2)
    assert f"{flag}: {w}: expected a 1-D array, found shape [{shape[0]}, 1]" in proc.stderr
    assert "w.ravel()" in proc.stderr
    only_files(tmp_path, ["X.npy", "w.npy"])


@pytest.mark.parametrize("command", ["kmeans", "gmm"])
def test_empty_input_names_its_file(tmp_path, command):
    path = save(tmp_path, "empty.npy", np.zeros((0, 3), dtype=np.int64))
    proc = run_memfit(command, path, "-k", 1, expect=2)
    assert f"{path} has shape (0, 3)" in proc.stderr


def test_bool_bytes_other_than_one_are_true(tmp_path):
    """A uint8 array viewed as bool holds bytes such as 255: they are True (1.0),
    as NumPy's astype(float) reads them, not their byte value (helper 75: a
    centre of 51.2 and inertia 1e5 for data of zeros and ones)."""
    raw = np.array([[0, 0], [0, 1], [0, 255], [1, 0], [255, 0]], dtype=np.uint8)
    init = np.array([[0.5, 0.5]])
    m = fit(tmp_path, raw.view(bool), 1, tag="b", init=init)
    ones = fit(tmp_path, (raw != 0).astype(np.uint8), 1, tag="f", init=init)
    np.testing.assert_array_equal(m.centers, [[0.4, 0.4]])  # float64 centres of float32 passes
    np.testing.assert_array_equal(m.centers, ones.centers)
    assert m.summary["inertia"] == ones.summary["inertia"] == pytest.approx(2.4)
    out = tmp_path / "s.npy"
    run_memfit("scatter", tmp_path / "b_X.npy", "--out", out, "--quiet")
    np.testing.assert_array_equal(np.load(out), [[2.0, 0.0], [0.0, 2.0]])


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.bool_, np.float16])
def test_data_float32_holds_keep_the_float64_fits_centres(tmp_path, dtype):
    """uint8, int16, bool and float16 data compute in float32 (which holds
    their values exactly) while k-means keeps float64 centres: the bits of
    the --dtype float64 fit, which the Python package's KMeans gives on the
    same file (before, the CLI wrote float32 centres, and its inertia
    differed from Python's in the last digits); predict on float64 centres
    computes in float64, as Python's predict does."""
    rng = np.random.default_rng(0)
    X = (np.abs(rng.standard_normal((3000, 4))) * 10).astype(dtype)
    init = X[[0, 7, 19, 50, 300]].astype(np.float64)
    a = fit(tmp_path, X, 5, tag="a", init=init, max_iter=20)
    b = fit(tmp_path, X, 5, tag="b", init=init, max_iter=20, dtype="float64")
    assert a.summary["compute_dtype"] == "float32" and a.centers.dtype == np.float64
    np.testing.assert_array_equal(a.centers, b.centers)
    np.testing.assert_array_equal(a.labels, b.labels)
    assert a.summary["inertia"] == b.summary["inertia"]
    out = tmp_path / "pl.npy"
    run_memfit("predict", tmp_path / "a_X.npy", "--centers", a.centers_path, "--labels", out, "--quiet")
    np.testing.assert_array_equal(np.load(out), a.labels)


def test_big_endian_float32_computes_in_float64_as_scikit_learn(tmp_path):
    """A '>f4' file computes in float64, as scikit-learn converts a
    non-native float32 array and as the Python package reads the file (the
    CLI computed it in float32: centres 4e-7 from Python's; helper 118):
    the float64 copy's results to the bit; predict on float32 centres too."""
    X = (np.random.default_rng(4).standard_normal((3000, 3)) * [1, 5, 20]).astype(np.float32)
    init = X[:5].astype(np.float64)
    big = fit(tmp_path, X.astype(">f4"), 5, tag="big", init=init)
    wide = fit(tmp_path, X.astype(np.float64), 5, tag="wide", init=init)
    assert big.summary["compute_dtype"] == "float64" and big.centers.dtype == np.float64
    np.testing.assert_array_equal(big.centers, wide.centers)
    np.testing.assert_array_equal(big.labels, wide.labels)
    c32 = save(tmp_path, "c32.npy", wide.centers.astype(np.float32))
    for name, data in (("big", X.astype(">f4")), ("wide", X.astype(np.float64))):
        run_memfit("predict", save(tmp_path, f"p_{name}.npy", data), "--centers", c32,
                   "--labels", tmp_path / f"pl_{name}.npy", "--quiet")
    np.testing.assert_array_equal(np.load(tmp_path / "pl_big.npy"), np.load(tmp_path / "pl_wide.npy"))
