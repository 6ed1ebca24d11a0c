"""memfit.array as a DAG engine: shared subexpressions evaluated once, any
depth, several results in one job, and rewrites that survive stack /
concatenate / swapaxes / reshape (issue 23, cases T3-09 to T3-11)."""

import os
import pickle
import re
import subprocess
import sys
import time

import numpy as np
import pytest
import zarr

import memfit.array as ma

LIMITS = ["1MiB", "64MiB"]
JOBS = [1, 2]


def same_everywhere(a):
    """The array computed at two limits and two thread counts, bitwise equal."""
    first = a.compute(memory_limit=LIMITS[0], n_jobs=JOBS[0])
    for limit in LIMITS:
        for jobs in JOBS:
            np.testing.assert_array_equal(a.compute(memory_limit=limit, n_jobs=jobs), first)
    return first


def test_t3_09_newton_iteration_is_linear_not_exponential():
    e = ma.asarray(np.full(1000, 3.0))
    w = np.full(1000, 3.0)
    for _ in range(40):
        e = 0.5 * (e + 2.0 / e)
        w = 0.5 * (w + 2.0 / w)
    started = time.perf_counter()
    np.testing.assert_array_equal(same_everywhere(e), w)
    assert time.perf_counter() - started < 30


def test_t3_10_python_sum_of_many_lazy_tiles():
    rng = np.random.default_rng(0)
    d = rng.random((2000, 6, 5))
    s = rng.random(2000)
    total = sum(np.tile(ma.asarray(d[i]), (3, 1, 1)) * s[i] for i in range(2000))
    want = sum(np.tile(d[i], (3, 1, 1)) * s[i] for i in range(2000))
    np.testing.assert_allclose(total.compute(), want, rtol=1e-12)
    np.testing.assert_array_equal(total.compute(memory_limit="1MiB", n_jobs=1), total.compute(n_jobs=2))


def test_chains_of_100000_operations_build_compute_pickle_and_drop():
    code = """
import pickle, numpy as np, memfit.array as ma
x = ma.asarray(np.arange(8.0))
s = x
for i in range(100000):
    s = s + x * (i % 3)
got = s.compute(memory_limit="64MiB")
assert np.array_equal(got, np.arange(8.0) * (1 + sum(i % 3 for i in range(100000)))), got
again = pickle.loads(pickle.dumps(s))
assert np.array_equal(again.compute(), got)
del s, again
print("ok")
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert proc.stdout.strip() == "ok"


def test_equal_subexpressions_built_twice_are_computed_once():
    x = np.random.default_rng(1).random((300, 4))
    a = ma.asarray(x)
    z = (a - a.mean(axis=0)) / a.std(axis=0)
    plan = z.explain(memory_limit="64MiB")
    # mean and std's squared deviations in one pass, then the map.
    assert len(plan["stages"]) == 2, plan
    np.testing.assert_allclose(same_everywhere(z), (x - x.mean(0)) / x.std(0), rtol=1e-12)


def test_compute_evaluates_several_results_together():
    x = np.random.default_rng(2).random((500, 3))
    a = ma.asarray(x)
    m, s, same, plain = ma.compute(a.mean(0), a.std(0), a.mean(0), 7, memory_limit="1MiB")
    assert plain == 7 and type(plain) is int
    (alone,) = ma.compute(a.sum())
    assert alone == a.sum().compute()
    assert ma.compute("s", None) == ("s", None)
    np.testing.assert_array_equal(m, a.mean(0).compute())
    np.testing.assert_array_equal(s, a.std(0).compute())
    np.testing.assert_array_equal(same, m)
    np.testing.assert_allclose(m, x.mean(0), rtol=1e-12)
    np.testing.assert_allclose(s, x.std(0), rtol=1e-12)
    for jobs in JOBS:
        for limit in LIMITS:
            again = ma.compute(a.mean(0), a.std(0), memory_limit=limit, n_jobs=jobs)
            np.testing.assert_array_equal(again[0], m)
            np.testing.assert_array_equal(again[1], s)
    joint = ma.explain(a.mean(0), a.std(0), memory_limit="64MiB")
    # mean and the squared deviations in one pass, then std's division:
    # not 4 passes (nor 3: the deviations need no mean computed first).
    assert len(joint["stages"]) == 2, joint
    assert ma.compute() == ()


def test_store_writes_several_files_in_one_job(tmp_path):
    x = np.random.default_rng(3).random((400, 5)).astype(np.float32)
    a = ma.asarray(x)
    ma.store(
        [a * 2, a.sum(axis=0), a.max(axis=0)],
        [tmp_path / "a.npy", str(tmp_path / "b.zarr"), str(tmp_path / "z.zarr")],
        memory_limit="1MiB",
        chunks=2,
    )
    np.testing.assert_array_equal(np.load(tmp_path / "a.npy"), x * 2)
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "b.zarr"))[:], a.sum(axis=0).compute())
    stored = zarr.open_array(str(tmp_path / "z.zarr"))
    np.testing.assert_array_equal(stored[:], x.max(axis=0))
    assert stored.chunks == (2,)
    existing = zarr.create_array(str(tmp_path / "e.zarr"), shape=(5,), chunks=(2,), dtype="float32")
    with pytest.raises(TypeError, match="open zarr.Array"):
        ma.store([a.max(axis=0)], [existing])
    with pytest.raises(ValueError, match="distinct"):
        ma.store([a, a + 1], [tmp_path / "f.npy", tmp_path / "f.npy"])
    ma.store([], [])
    with pytest.raises(TypeError, match="at least one"):
        ma.explain()
    with pytest.raises(FileExistsError):
        ma.store([a], [tmp_path / "a.npy"])
    with pytest.raises(ValueError, match="Different number of sources"):
        ma.store([a, a], [tmp_path / "c.npy"])
    with pytest.raises(TypeError, match="store sources"):
        ma.store([x], [tmp_path / "d.npy"])
    assert not (tmp_path / "c.npy").exists() and not (tmp_path / "d.npy").exists()


def seed_forms(d, s, n):
    """The seed report's stack form, with its NumPy reference."""
    lazy = ma.stack([np.tile(ma.asarray(d)[i], (n, 1, 1)) * s[i] for i in range(len(d))]).swapaxes(0, 1).sum(0)
    want = np.stack([np.tile(d[i], (n, 1, 1)) * s[i] for i in range(len(d))]).swapaxes(0, 1).sum(0)
    return lazy, want


@pytest.mark.parametrize("n", [1, 7, 30])
def test_t3_11_seed_stack_form_reads_only_the_input(n):
    rng = np.random.default_rng(4)
    d, s = rng.random((200, 9, 8)), rng.random(200)
    lazy, want = seed_forms(d, s, n)
    plan = lazy.explain(memory_limit="64MiB")
    assert plan["scratch_bytes"] == 0 and len(plan["stages"]) == 1, plan
    np.testing.assert_allclose(same_everywhere(lazy), want, rtol=1e-12)


@pytest.mark.parametrize("n", [4, 5, 7, 30])
def test_seed_repeat_reshape_form_needs_no_intermediate_whether_or_not_n_divides(n):
    """The Dask answer's form: repeat n times, reshape to (n, rows, ...),
    sum over the copies. When n does not divide the rows, the reshape does
    not separate; it is read through a joint index, never materialised."""
    rng = np.random.default_rng(7)
    d, s = rng.random((200, 9, 8)), rng.random(200)
    lazy = ma.repeat(ma.asarray(d) * s[:, None, None], n, axis=0).reshape(n, 200, 9, 8).sum(0)
    want = np.repeat(d * s[:, None, None], n, axis=0).reshape(n, 200, 9, 8).sum(0)
    plan = lazy.explain(memory_limit="64MiB")
    assert plan["scratch_bytes"] == 0 and len(plan["stages"]) == 1, plan
    np.testing.assert_allclose(same_everywhere(lazy), want, rtol=1e-12)


RESHAPES = {
    "transposed": lambda a: a.T.reshape(4, 30),
    "repeat-split": lambda a: np.repeat(a, 7, axis=0).reshape(7, 12, 10),
    "tile-split": lambda a: np.tile(a, (1, 3)).reshape(9, 40),
    "slice-then": lambda a: a[::-2, 1:9].reshape(4, 12),
    "after-joint": lambda a: a.T.reshape(4, 30)[1:3, ::-4].T,
    "joint-split": lambda a: a.T.reshape(8, 15).reshape(2, 4, 15)[:, 1],
    # One element (a box whose first offset is not the base's).
    "joint-element": lambda a: a.T.reshape(4, 30)[2:3, 7:8],
    "chained-element": lambda a: a.reshape(3, 40).reshape(6, 20)[2:3, 1:2],
    "chained-scalar": lambda a: a.reshape(3, 40).reshape(40, 3).reshape(120)[37],
    # A harmless reshape first: still no scratch.
    "leading-reshape": lambda a: a.reshape(1, 120).reshape(8, 15).T.reshape(3, 40),
}


@pytest.mark.parametrize("name", sorted(RESHAPES))
def test_reshapes_that_do_not_separate_match_numpy_without_scratch(tmp_path, name):
    x = np.random.default_rng(8).random((12, 10))
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "f.npy", np.asfortranarray(x))
    for a in (ma.asarray(x), ma.from_npy(tmp_path / "x.npy"), ma.from_npy(tmp_path / "f.npy")):
        lazy, want = RESHAPES[name](a), RESHAPES[name](x)
        assert lazy.shape == want.shape
        assert lazy.explain(memory_limit="64MiB", output=tmp_path / "o.npy")["scratch_bytes"] == 0
        np.testing.assert_array_equal(same_everywhere(lazy), want)
        if want.ndim:
            np.testing.assert_array_equal(same_everywhere(lazy.sum(axis=-1)), want.sum(axis=-1))


def test_views_of_empty_files_read_nothing(tmp_path):
    np.save(tmp_path / "e.npy", np.zeros((0,), np.int32))
    x = ma.from_npy(tmp_path / "e.npy")
    for f in (lambda a: np.tile(a, (3, 2))[1], lambda a: np.tile(a, (3, 2))[:1], lambda a: np.repeat(a, 0),
              lambda a: np.repeat(a, 3, axis=0).sum(), lambda a: np.repeat(a, 3).prod(axis=0)):
        want = f(np.zeros((0,), np.int32))
        got = f(x).compute()
        assert got.shape == want.shape and got.dtype == want.dtype


VIEWS = {
    "transpose": lambda c: c.T,
    "swapaxes": lambda c: c.swapaxes(0, 2),
    "moveaxis": lambda c: np.moveaxis(c, 1, 0),
    "expand": lambda c: c[None, :, None],
    "squeeze": lambda c: c[:, :1].squeeze(1),
    "broadcast": lambda c: np.broadcast_to(c, (2, *c.shape)),
    "tile": lambda c: np.tile(c, (1, 3, 2)),
    "repeat": lambda c: np.repeat(c, 2, axis=1),
    "slice": lambda c: c[:, 2:9, 1:],
    "slice-one": lambda c: c[:, 4:5],
    "reshape": lambda c: c.reshape(c.shape[0] * c.shape[1] // c.shape[1], c.shape[1], -1),
    "reshape-merge": lambda c: c.reshape(c.shape[0], c.shape[1], -1).reshape(c.shape[0], -1),
}


@pytest.mark.parametrize("view", sorted(VIEWS))
def test_views_of_concatenations_match_numpy(view):
    rng = np.random.default_rng(5)
    parts = [rng.random((3, n, 4)) for n in (2, 5, 3)]
    lazy = VIEWS[view](ma.concatenate([ma.asarray(p) for p in parts], axis=1))
    want = VIEWS[view](np.concatenate(parts, axis=1))
    assert lazy.shape == want.shape
    np.testing.assert_array_equal(same_everywhere(lazy), want)
    np.testing.assert_allclose(same_everywhere(lazy.sum(axis=0)), want.sum(axis=0), rtol=1e-12)


def test_sums_through_stacked_tiles_use_the_tile_rewrite():
    rng = np.random.default_rng(6)
    d = rng.random((50, 4, 4))
    lazy = ma.stack([np.tile(ma.asarray(d[i]), (1000, 1, 1)) for i in range(50)], axis=1).sum(axis=0)
    plan = lazy.explain(memory_limit="64MiB")
    assert "rewrite" in str(plan) and plan["scratch_bytes"] == 0
    np.testing.assert_allclose(lazy.compute(), 1000 * d, rtol=1e-12)


def test_compute_traverses_containers_as_dask_does():
    import collections

    x = ma.asarray(np.arange(6.0))
    pair = collections.namedtuple("pair", "a b")
    got = ma.compute({"m": x.mean(), "l": [x.sum(), (x.max(), 3)], "p": pair(x.min(), "k")}, x * 2, 5)
    assert got[0]["m"] == 2.5 and got[0]["l"][0] == 15.0 and got[0]["l"][1] == (5.0, 3)
    assert got[0]["p"] == pair(0.0, "k") and isinstance(got[0]["p"], pair)
    np.testing.assert_array_equal(got[1], np.arange(6.0) * 2)
    assert got[2] == 5
    lazy = [x.sum()]
    assert ma.compute(lazy, traverse=False)[0] is lazy


def test_many_results_share_a_shared_input_once(tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, np.arange(24.0).reshape(6, 4))
    x = ma.from_npy(path)
    lo, hi, total = ma.compute(x.min(axis=0), x.max(axis=0), x.sum())
    np.testing.assert_array_equal(lo, [0, 1, 2, 3])
    np.testing.assert_array_equal(hi, [20, 21, 22, 23])
    assert total == 276.0
    assert os.listdir(tmp_path) == ["x.npy"]


def test_a_limit_too_small_for_every_thread_runs_on_fewer(tmp_path):
    """A job whose per-thread buffers fit one thread but not two runs on
    one (the same bits on any number); the plan says so. Too small even
    for one: refused with one thread's requirement."""
    np.save(tmp_path / "a.npy", np.ones((300, 421)))
    x = ma.from_npy(tmp_path / "a.npy")
    for jobs in (1, 2, 8):
        assert x.sum().compute(memory_limit="1MiB", n_jobs=jobs) == 126300.0
    assert "threads: 1" in str(x.sum().explain(memory_limit="1MiB", n_jobs=2))
    assert "threads: 2" in str(x.sum().explain(memory_limit="64MiB", n_jobs=2))
    with pytest.raises(MemoryError, match="needs at least") as refused:
        x.sum().compute(memory_limit="100KiB", n_jobs=2)
    needed = int(re.search(r"needs at least (\d+) bytes", str(refused.value)).group(1))
    assert x.sum().compute(memory_limit=needed, n_jobs=2) == 126300.0
