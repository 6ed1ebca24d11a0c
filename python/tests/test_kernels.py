"""The NumPy kernels against NumPy on arrays, memmaps and .npy paths."""

import numpy as np
import pytest

import memfit


@pytest.fixture
def data():
    rng = np.random.RandomState(3)
    return rng.randn(5000, 7) * 3 + 10, rng.randn(7, 7), rng.rand(5000) * 2 - 0.5


@pytest.mark.parametrize("layout", ["c", "fortran", "path", "memmap", "int32", "view"])
def test_row_quadratic_form(tmp_path, data, layout):
    """row_quadratic_form equals np.sum((X @ Q) * X, axis=1) for every input form."""
    X, Q, _ = data
    if layout == "int32":
        X = np.round(X).astype(np.int32)
    elif layout == "view":
        X = np.hstack([X, X])[::2, ::2]
    src = {"c": X, "fortran": np.asfortranarray(X), "int32": X, "view": X}.get(layout)
    if src is None:
        np.save(tmp_path / "X.npy", X)
        src = str(tmp_path / "X.npy") if layout == "path" else np.load(tmp_path / "X.npy", mmap_mode="r")
    got = memfit.row_quadratic_form(src, Q, memory_limit="1MiB")
    want = np.sum((X.astype(float) @ Q) * X, axis=1)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-9 * np.abs(want).max())


def test_row_quadratic_form_float32(data):
    """float32 X is multiplied in float32 (relative error of float32 sums)."""
    X, Q, _ = data
    got = memfit.row_quadratic_form(X.astype(np.float32), Q)
    want = np.sum((X.astype(np.float32).astype(float) @ Q) * X.astype(np.float32), axis=1)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


@pytest.mark.parametrize("weights", ["none", "signed", "path", "int"])
def test_weighted_scatter(tmp_path, data, weights):
    """weighted_scatter equals (X.T * w) @ X, weights of any sign."""
    X, _, w = data
    if weights == "none":
        w_arg, w = None, np.ones(len(X))
    elif weights == "path":
        np.save(tmp_path / "w.npy", w)
        w_arg = str(tmp_path / "w.npy")
    elif weights == "int":
        w = np.arange(len(X)) % 3
        w_arg = w
    else:
        w_arg = w
    got = memfit.weighted_scatter(X, w_arg, memory_limit="1MiB", n_jobs=2)
    np.testing.assert_allclose(got, (X.T * w) @ X, rtol=1e-11)


def test_assign(data):
    """assign gives the brute-force nearest centre and its squared distance."""
    X, _, _ = data
    centers = X[:37] + 0.01
    labels, dist = memfit.assign(X, centers, memory_limit="1MiB")
    d2 = ((X[:, None, :] - centers[None]) ** 2).sum(-1)
    np.testing.assert_array_equal(labels, d2.argmin(1))
    np.testing.assert_allclose(dist, d2.min(1), rtol=1e-9)
    assert labels.dtype == np.int32


def test_results_do_not_depend_on_threads_or_limit(data):
    """Bitwise equal results for n_jobs 1 and 2 and limits 1 MiB and 1 GiB."""
    X, Q, w = data
    runs = [dict(n_jobs=1, memory_limit="1MiB"), dict(n_jobs=2, memory_limit="1GiB")]
    q = [memfit.row_quadratic_form(X, Q, **r) for r in runs]
    s = [memfit.weighted_scatter(X, w, **r) for r in runs]
    np.testing.assert_array_equal(q[0], q[1])
    np.testing.assert_array_equal(s[0], s[1])


def test_kernel_errors(data):
    """Bad shapes and non-finite values are ValueError; a tiny limit is MemoryError."""
    X, Q, w = data
    with pytest.raises(ValueError, match="Q must be"):
        memfit.row_quadratic_form(X, Q[:3])
    bad = X.copy()
    bad[10, 2] = np.inf
    with pytest.raises(ValueError, match="row 10, column 2 is inf"):
        memfit.row_quadratic_form(bad, Q)
    with pytest.raises(ValueError, match="row 10, column 2 is inf"):
        memfit.weighted_scatter(bad)
    with pytest.raises(ValueError, match=r"w.shape"):
        memfit.weighted_scatter(X, w[:10])
    with pytest.raises(ValueError, match="centers"):
        memfit.assign(X, X[:3, :2])
    with pytest.raises(MemoryError, match="memory limit"):
        memfit.row_quadratic_form(X, Q, memory_limit=1000)


def test_weighted_scatter_of_all_zero_weights_is_zero():
    # NumPy's (X.T * w) @ X is the zero matrix; the estimators' check (at
    # least one non-zero weight) refused it.
    X = np.random.default_rng(0).standard_normal((50, 3))
    w = np.zeros(50)
    np.testing.assert_array_equal(memfit.weighted_scatter(X, w), (X.T * w) @ X)


@pytest.mark.parametrize("scale", [1e-50, 1e-42, 1e39])
def test_float32_rows_with_a_q_outside_float32s_normal_range_are_computed_in_float64(scale):
    # Q cast to float32 with float32 rows: 1e-50 became 0 silently (NumPy,
    # promoting to float64: 3e-50), 1e-42 lost its digits; then such a Q was
    # refused (helper 119: one negligible entry refused the call). Now
    # float64, as NumPy computes it, and as float64 rows give it.
    X = np.random.default_rng(0).standard_normal((300, 3)).astype(np.float32)
    Q = np.eye(3)
    Q[0, 1] = scale
    want = memfit.row_quadratic_form(X.astype(np.float64), Q)
    np.testing.assert_array_equal(memfit.row_quadratic_form(X, Q), want)
    np.testing.assert_array_equal(memfit.row_quadratic_form(X, Q, memory_limit="1MiB", n_jobs=1), want)
    np.testing.assert_allclose(want, np.einsum("ij,jk,ik->i", X, Q, X), rtol=1e-12)
    X = np.ones((1, 3), np.float32)
    np.testing.assert_allclose(memfit.row_quadratic_form(X, np.eye(3) * 1e-30), [3e-30], rtol=1e-6)
