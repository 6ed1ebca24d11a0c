"""memfit.array contractions at GEMM shape against NumPy: the E-step's row
quadratic forms (one matrix and K at once), the M-step's weighted scatter,
written as einsum and in plain NumPy (``np.sum(X.dot(Q) * X, axis=1)``,
``(X.T * w) @ X``), at two memory limits and two thread counts, bitwise
identical across them; and T3-12's plan (contracted labels whole, large row
tiles, one pass, no scratch)."""

import numpy as np
import pytest

import memfit.array as ma

RUNS = [("256MiB", 1), ("2MiB", 1), ("2MiB", 2), ("256MiB", 2)]


def data(tmp_path, n=4000, d=24, k=3, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d))
    q = rng.standard_normal((d, d))
    p = rng.standard_normal((k, d, d))
    w = rng.random(n)
    np.save(tmp_path / "x.npy", x)
    return x, q, p, w, ma.from_npy(tmp_path / "x.npy")


def forms(x, q, p, w, lx):
    """(name, lazy, NumPy's result)."""
    lq, lp, lw = ma.asarray(q), ma.asarray(p), ma.asarray(w)
    return [
        ("einsum ij,jk,ik->i", np.einsum("ij,jk,ik->i", lx, lq, lx), np.einsum("ij,jk,ik->i", x, q, x)),
        ("np.sum(X.dot(Q) * X, axis=1)", np.sum(lx.dot(lq) * lx, axis=1), np.sum(x.dot(q) * x, axis=1)),
        ("(X @ Q * X).sum(1)", (lx @ lq * lx).sum(1), (x @ q * x).sum(1)),
        ("einsum ij,kjl,il->ik", np.einsum("ij,kjl,il->ik", lx, lp, lx), np.einsum("ij,kjl,il->ik", x, p, x)),
        ("einsum ij,i,ik->jk", np.einsum("ij,i,ik->jk", lx, lw, lx), np.einsum("ij,i,ik->jk", x, w, x)),
        ("(X.T * w).dot(X)", (lx.T * lw).dot(lx), (x.T * w).dot(x)),
        ("(X.T * w) @ X", (lx.T * lw) @ lx, (x.T * w) @ x),
    ]


@pytest.mark.parametrize("index", range(7))
def test_contractions_match_numpy_bitwise_across_limits_and_threads(tmp_path, index):
    x, q, p, w, lx = data(tmp_path)
    name, lazy, want = forms(x, q, p, w, lx)[index]
    results = [lazy.compute(memory_limit=limit, n_jobs=jobs) for limit, jobs in RUNS]
    for (limit, jobs), got in zip(RUNS, results):
        assert got.dtype == want.dtype and got.shape == want.shape, name
        np.testing.assert_array_equal(got, results[0], err_msg=f"{name}: {limit}, n_jobs={jobs}")
    scale = np.abs(want).max()
    np.testing.assert_allclose(results[0], want, rtol=1e-12, atol=1e-12 * scale, err_msg=name)
    # One fused pass: the product is never written to scratch.
    plan = lazy.explain(memory_limit="2MiB", n_jobs=2).data
    assert len(plan["stages"]) == 1, (name, plan)
    assert plan["scratch_bytes"] == 0, (name, plan)


def test_plain_numpy_forms_are_the_einsum(tmp_path):
    x, q, p, w, lx = data(tmp_path, n=1000, d=10)
    lq, lw = ma.asarray(q), ma.asarray(w)
    same = [
        (np.sum(lx.dot(lq) * lx, axis=1), np.einsum("ij,jk,ik->i", lx, lq, lx)),
        ((lx.T * lw) @ lx, np.einsum("ji,j,jk->ik", lx, lw, lx)),
    ]
    for plain, fused in same:
        np.testing.assert_array_equal(plain.compute(), fused.compute())


def test_t3_12_plan_keeps_contracted_labels_whole(tmp_path):
    # T3-12 at a small size: einsum('ij,jk,ik->i') over an (n, 300) .npy at
    # 64 MiB used [5, 5] chunks at n = 200,000 and [1, 1] at 1M x 900.
    n, d = 20_000, 300
    x, q, _, _, lx = data(tmp_path, n=n, d=d, k=1)
    e = np.einsum("ij,jk,ik->i", lx, ma.asarray(q), lx)
    stage = e.explain(memory_limit="64MiB", n_jobs=2).data["stages"][-1]
    assert stage["chunk"] == [d, d], stage
    assert stage["tile"][0] >= 512, stage
    got = e.compute(memory_limit="64MiB", n_jobs=2)
    want = np.einsum("ij,jk,ik->i", x, q, x)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * np.abs(want).max())


INTEGER_CONTRACTIONS = {
    # (lazy/eager function, operands): integer and boolean results are NumPy's
    # exactly (float64 lost integers above 2**53 and saturated instead of wrapping).
    "dot_above_2_53": (lambda m, a, b: m.dot(a, b), np.array([2**53 + 1, 1]), np.array([1, 0])),
    "sum_einsum_above_2_53": (lambda m, a, b: m.einsum("i->", a), np.array([2**53 + 1, 1]), None),
    "matmul_cancelling": (lambda m, a, b: a @ b, np.array([[3037000500, 3037000500]]), np.array([[3037000500], [-3037000500]])),
    "matmul_wraps_int64": (lambda m, a, b: a @ b, np.array([[2**62]]), np.array([[4]])),
    "matmul_wraps_int32": (lambda m, a, b: a @ b, np.array([[2**31 - 1, 3]], np.int32), np.array([[2**31 - 1], [5]], np.int32)),
    "uint8": (lambda m, a, b: a @ b, np.arange(35, dtype=np.uint8).reshape(5, 7) * 7, np.arange(63, dtype=np.uint8).reshape(7, 9)),
    "bool": (lambda m, a, b: m.einsum("ij,jk->ik", a, b), np.eye(5, 7, dtype=bool), np.ones((7, 3), dtype=bool)),
    "quadratic_form": (lambda m, a, b: m.einsum("ij,jk,ik->i", a, b, a), np.arange(-20, 15).reshape(5, 7), np.arange(49).reshape(7, 7)),
    "trace": (lambda m, a, b: m.einsum("ii", a), np.arange(49).reshape(7, 7) * 10**15, None),
    "batched": (lambda m, a, b: m.einsum("bij,bjk->bik", a, b), np.arange(24).reshape(2, 3, 4), np.arange(40).reshape(2, 4, 5)),
    "tensordot": (lambda m, a, b: m.tensordot(a, b, axes=([0, 1], [1, 0])), np.arange(12).reshape(3, 4), np.arange(12).reshape(4, 3)),
    "vdot": (lambda m, a, b: m.vdot(a, b), np.arange(10) * 2**50, np.arange(10)),
}


@pytest.mark.parametrize("name", sorted(INTEGER_CONTRACTIONS))
@pytest.mark.parametrize("limit,n_jobs", [("64MiB", 1), ("1MiB", 2)])
def test_integer_contractions_are_exact_and_wrap_as_numpy(name, limit, n_jobs):
    f, a, b = INTEGER_CONTRACTIONS[name]
    want = np.asarray(f(np, a, b))
    lazy = f(ma, ma.asarray(a), None if b is None else ma.asarray(b))
    got = lazy.compute(memory_limit=limit, n_jobs=n_jobs)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
