"""Writes of memfit.array results (issue 23, item 5): `.npy` outputs by
large aligned slabs evaluated while the previous one is written, and Zarr
outputs with shards (Zarr v3's sharding codec, read by zarr-python 3)
whose chunks are compressed in parallel. Results equal NumPy's bitwise at
two limits and two thread counts; every write buffer is in the plan."""

import os
import re

import numpy as np
import pytest

import memfit.array as ma


def rng_data(shape, dtype="float64", seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * 10
    return x.astype(dtype) if np.dtype(dtype).kind != "b" else x > 0


def files_in(path):
    return sum(len(names) for _, _, names in os.walk(path))


CASES = {
    # name: (NumPy input builder, expression on a memfit or NumPy array)
    "tile-scale": (lambda: rng_data((40, 30, 20)), lambda a, m: m.tile(a * 1.5 - 2, (3, 1, 1, 1))),
    "transpose": (lambda: rng_data((120, 90)), lambda a, m: (a + 1).T),
    "int32 swapaxes": (lambda: rng_data((30, 20, 10), "int32"), lambda a, m: m.swapaxes(a * 3, 0, 2)),
    "float32 slice": (lambda: rng_data((500, 70), "float32"), lambda a, m: a[::-2, 3:] * np.float32(0.5)),
    "bool": (lambda: rng_data((77, 31), "bool"), lambda a, m: ~a),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("limit", ["96KiB", "64MiB"])
@pytest.mark.parametrize("n_jobs", [1, 2])
def test_npy_by_slabs_equals_numpy(tmp_path, case, limit, n_jobs):
    """Slabs of a few KiB (many, cut across rows and tiles) or one: NumPy's bits."""
    make, expr = CASES[case]
    x = make()
    want = expr(x, np)
    out = tmp_path / "out.npy"
    expr(ma.asarray(x), np).to_npy(out, memory_limit=limit, n_jobs=n_jobs)
    got = np.load(out)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    assert os.listdir(tmp_path) == ["out.npy"]  # the temporary file was renamed


def test_npy_write_buffers_are_planned():
    """Two slab buffers in the plan of a .npy output, none for memory; a
    quarter of the limit at most, whole pages."""
    x = ma.asarray(rng_data((256, 1024))) * 2
    plan = x.explain(memory_limit="1MiB", n_jobs=2, output="x.npy")
    bufs = {b["name"]: b["bytes"] for b in plan["buffers"]}
    assert "positioned writes by slabs" in str(plan), str(plan)
    slab = bufs["stage 0: write buffers"]
    assert slab <= (1 << 20) // 2 and slab % (2 * 4096) == 0, slab
    assert sum(bufs.values()) <= 1 << 20
    names = [b["name"] for b in x.explain(memory_limit="4MiB", n_jobs=2)["buffers"]]
    assert not any("write buffers" in n for n in names), names


def test_npy_edges(tmp_path):
    """0-d, empty and one-element results; an existing file is refused and kept."""
    for i, (x, want) in enumerate([
        (ma.asarray(np.float64(3.0)) * 2, np.float64(6.0)),
        (ma.zeros((0, 5)) + 1, np.zeros((0, 5)) + 1),
        (ma.ones((1,), dtype="int8") * 3, np.ones((1,), dtype="int8") * 3),
    ]):
        out = tmp_path / f"e{i}.npy"
        x.to_npy(out, memory_limit="64KiB")
        got = np.load(out)
        assert got.dtype == np.asarray(want).dtype and got.shape == np.shape(want)
        np.testing.assert_array_equal(got, want)
    with pytest.raises(FileExistsError):
        (ma.ones(3) * 5).to_npy(tmp_path / "e0.npy")
    np.testing.assert_array_equal(np.load(tmp_path / "e0.npy"), 6.0)


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_zarr_shards_read_by_zarr_python(tmp_path, n_jobs):
    """Explicit shards: one file per shard, zarr-python 3 reads chunks and
    shards as given and NumPy's values; memfit reads it back too."""
    zarr = pytest.importorskip("zarr")
    x = rng_data((50, 40, 6))
    want = x * 3 + 1
    path = tmp_path / "s.zarr"
    (ma.asarray(x) * 3 + 1).to_zarr(path, chunks=(5, 8, 6), shards=(20, 16, 6), memory_limit="1MiB", n_jobs=n_jobs)
    z = zarr.open_array(str(path), mode="r")
    assert z.chunks == (5, 8, 6) and z.shards == (20, 16, 6)
    np.testing.assert_array_equal(z[...], want)
    assert files_in(path) == 1 + 3 * 3  # zarr.json and 3 x 3 shards
    np.testing.assert_array_equal(ma.from_zarr(str(path))[7:33:2].compute(), want[7:33:2])
    # The same bits as unsharded.
    (ma.asarray(x) * 3 + 1).to_zarr(tmp_path / "u.zarr", chunks=(5, 8, 6), shards=None, n_jobs=n_jobs)
    u = zarr.open_array(str(tmp_path / "u.zarr"), mode="r")
    assert u.shards is None and files_in(tmp_path / "u.zarr") == 1 + 10 * 5
    np.testing.assert_array_equal(u[...], z[...])


def test_zarr_auto_shards_only_for_small_chunks(tmp_path):
    """Small chunks are grouped into shards (few files), large ones are not;
    shards given without chunks get chunks that divide them."""
    zarr = pytest.importorskip("zarr")
    x = rng_data((64, 100, 50))  # 2.56 MB
    want = x - 1
    a = ma.asarray(x) - 1
    a.to_zarr(tmp_path / "small.zarr", chunks=(1, 10, 50), memory_limit="64MiB")
    z = zarr.open_array(str(tmp_path / "small.zarr"), mode="r")
    assert z.chunks == (1, 10, 50) and z.shards is not None, z.shards
    assert all(s % c == 0 for s, c in zip(z.shards, z.chunks))
    assert files_in(tmp_path / "small.zarr") < 64 * 10 // 4, files_in(tmp_path / "small.zarr")
    np.testing.assert_array_equal(z[...], want)
    a.to_zarr(tmp_path / "big.zarr", chunks=(32, 100, 50), memory_limit="64MiB")
    assert zarr.open_array(str(tmp_path / "big.zarr"), mode="r").shards is None
    a.to_zarr(tmp_path / "given.zarr", shards=(6, 100, 50), memory_limit="8MiB")
    g = zarr.open_array(str(tmp_path / "given.zarr"), mode="r")
    assert g.shards == (6, 100, 50) and all(s % c == 0 for s, c in zip(g.shards, g.chunks)), g.chunks
    np.testing.assert_array_equal(g[...], want)


def test_zarr_shards_have_the_same_bytes_for_any_n_jobs(tmp_path):
    """A shard's chunks lie in chunk order (they lay in the order parallel
    compression finished them: the files changed from run to run), and
    shards="auto" picks the same layout for any n_jobs (it dropped the
    shards on two threads) (helper 132)."""
    zarr = pytest.importorskip("zarr")
    x = ma.asarray(rng_data((100_000, 20)))

    def files(path):
        data = {f.relative_to(path): f.read_bytes() for f in sorted(path.rglob("*")) if f.is_file()}
        return data, zarr.open_array(str(path))

    for case, kw in enumerate((dict(chunks=(1000, 20), shards=(5000, 20), memory_limit="8MiB"),
                               dict(chunks=(100, 20), memory_limit="8MiB"))):
        runs = []
        for i, n_jobs in enumerate([1, 2, 2, 1, 2]):
            path = tmp_path / f"{case}-{i}.zarr"
            x.to_zarr(path, n_jobs=n_jobs, **kw)
            runs.append(files(path))
        (first, z), rest = runs[0], runs[1:]
        assert z.shards is not None and len(first) < 100, (kw, z.shards)
        for other, o in rest:
            assert (o.chunks, o.shards) == (z.chunks, z.shards), kw
            assert other == first, kw
        np.testing.assert_array_equal(z[...], x.compute())


def test_zarr_bad_shards(tmp_path):
    """ValueError for shards that are not positive multiples of the chunks
    or of the wrong length; nothing is left behind."""
    a = ma.ones((10, 10))
    for shards, match in [((3, 10), "shards"), ((10,), "shards"), ((0, 10), "shards"), ((-4, 10), "shards")]:
        with pytest.raises(ValueError, match=match):
            a.to_zarr(tmp_path / "b.zarr", chunks=(2, 5), shards=shards)
    assert os.listdir(tmp_path) == []


def test_zarr_sharded_within_the_limit_plan():
    """A sharded write's buffers (shards held, compression) are in the plan."""
    x = ma.asarray(rng_data((64, 100, 50)))
    text = str(x.explain(memory_limit="4MiB", n_jobs=2, output="x.zarr"))
    assert "Zarr v3" in text, text


def test_an_input_opened_again_is_the_file_there_now(tmp_path):
    """from_npy and from_zarr read what the path holds when they are called,
    even while an earlier array of the same path (another file by then) is
    alive: no metadata, header or file is shared between them."""
    zarr = pytest.importorskip("zarr")
    p = tmp_path / "x.npy"
    np.save(p, np.zeros((3, 4)))
    old = ma.from_npy(p)
    os.remove(p)
    np.save(p, np.ones((3, 4)))
    assert ma.from_npy(p).sum().compute() == 12.0
    (ma.from_npy(p) * 5).to_npy(p, overwrite=True)
    assert ma.from_npy(p).sum().compute() == 60.0
    assert old.sum().compute() == 0.0  # the file it opened
    z = tmp_path / "x.zarr"
    zarr.create_array(z, shape=(10, 4), chunks=(5, 4), dtype="<f8")[...] = np.arange(40.0).reshape(10, 4)
    old = ma.from_zarr(z)
    zarr.create_array(z, shape=(10, 4), chunks=(5, 4), dtype=">f8", overwrite=True)[...] = np.arange(40.0).reshape(10, 4)
    np.testing.assert_array_equal(ma.from_zarr(z)[0].compute(), [0.0, 1.0, 2.0, 3.0])
    zarr.create_array(z, shape=(10, 4), chunks=(5, 4), dtype="<f8", fill_value=7.0, overwrite=True)
    assert ma.from_zarr(z).sum().compute() == 280.0
    del old


def test_a_result_never_replaces_an_input_a_later_stage_reads(tmp_path):
    """store() commits a result when its stage ends: onto an input that a
    later stage of the job still reads, it is refused before anything is
    written (the input and the other target untouched); onto an input no
    other stage reads, it is written."""
    zarr = pytest.importorskip("zarr")
    A = np.arange(40000.0).reshape(10000, 4)
    p = tmp_path / "x.zarr"
    zarr.create_array(p, shape=A.shape, chunks=(1000, 4), dtype="f8")[...] = A
    x = ma.from_zarr(p)
    for first in (x.reshape(10, 1000, 4).sum(axis=0), x.sum(axis=0)):
        with pytest.raises(ValueError, match="a later stage of the same job still reads it"):
            ma.store([first, x - x.mean(axis=0)], [p, tmp_path / "c.npy"], overwrite=True)
        np.testing.assert_array_equal(zarr.open_array(p)[...], A)
        assert not (tmp_path / "c.npy").exists()
    q = tmp_path / "y.npy"
    np.save(q, A)
    y = ma.from_npy(q)
    other = ma.from_zarr(p)
    ma.store([y * 2, other.sum(axis=0)], [q, tmp_path / "s.npy"], overwrite=True)
    np.testing.assert_array_equal(np.load(q), A * 2)
    np.testing.assert_array_equal(np.load(tmp_path / "s.npy"), A.sum(axis=0))


def test_a_result_never_replaces_a_group_holding_an_input_a_later_stage_reads(tmp_path):
    """A result written onto a Zarr group that holds an input a later stage
    reads (or into the input's own folder) is refused too: the later stage
    read the vanished array as its fill value, silently zeros."""
    zarr = pytest.importorskip("zarr")
    A = np.arange(12.0).reshape(3, 4)
    g = zarr.open_group(tmp_path / "grp.zarr", mode="w")
    g.create_array("arr", shape=A.shape, dtype="f8", chunks=(2, 2))[...] = A
    x = ma.from_zarr(tmp_path / "grp.zarr" / "arr")
    for results, targets in [
        ([x.sum(0), x * 2], [tmp_path / "grp.zarr", tmp_path / "s.npy"]),
        ([x * 2, x - x.sum(0)], [tmp_path / "grp.zarr", tmp_path / "s.npy"]),
        ([x.sum(0), x * 2], [tmp_path / "grp.zarr" / "arr" / "c", tmp_path / "s.npy"]),
    ]:
        with pytest.raises(ValueError, match="a later stage of the same job still reads .*grp.zarr.arr, which"):
            ma.store(results, targets, overwrite=True)
        np.testing.assert_array_equal(zarr.open_array(tmp_path / "grp.zarr" / "arr")[...], A)
        assert not (tmp_path / "s.npy").exists()


@pytest.mark.parametrize("write", ["to_npy", "to_npy_new", "to_zarr", "store"])
def test_an_error_state_that_raises_commits_no_output(tmp_path, write):
    # np.errstate(divide="raise"): the FloatingPointError came after the
    # file had been renamed into place, replacing the old one.
    old = tmp_path / "old.npy"
    np.save(old, np.arange(3.0))
    x = ma.asarray(np.array([1.0, 0.0])) / 0
    calls = {
        "to_npy": lambda: x.to_npy(old, overwrite=True),
        "to_npy_new": lambda: x.to_npy(tmp_path / "new.npy"),
        "to_zarr": lambda: x.to_zarr(tmp_path / "new.zarr"),
        "store": lambda: ma.store([x + 1, x], [tmp_path / "a.npy", tmp_path / "b.npy"]),
    }
    with np.errstate(divide="raise"), pytest.raises(FloatingPointError, match="^divide by zero encountered"):
        calls[write]()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.npy"]
    np.testing.assert_array_equal(np.load(old), np.arange(3.0))
    # Kinds left to warn still write.
    with np.errstate(divide="raise", invalid="warn"), pytest.warns(RuntimeWarning, match="invalid value"):
        (ma.asarray(np.array([0.0, 1.0])) * np.inf).to_npy(tmp_path / "warned.npy")
    assert (tmp_path / "warned.npy").exists()


@pytest.mark.parametrize("shape, chunks", [((700, 300), (128, 64)), ((30, 41, 17), (7, 10, 5))])
def test_scattered_zarr_reads_are_numpys(tmp_path, shape, chunks):
    """Column indices, strided and fancy selections of a Zarr input read each
    chunk once per tile (helper 87: they decoded a chunk per element, hours
    for a 40 MB array); chunks that do not divide the shape, and NumPy's
    values."""
    zarr = pytest.importorskip("zarr")
    x = rng_data(shape)
    path = tmp_path / "x.zarr"
    z = zarr.create_array(str(path), shape=shape, chunks=chunks, dtype=x.dtype)
    z[...] = x
    a = ma.from_zarr(str(path))
    rs = np.random.RandomState(0)
    idx = rs.randint(0, shape[-1], 40)
    rows = rs.randint(0, shape[0], 25)
    for got, want in [(a[..., ::9], x[..., ::9]), (a[..., idx], x[..., idx]), (a[rows][..., ::4], x[rows][..., ::4]),
                      (a.T * 1.5, x.T * 1.5), (a[::-3], x[::-3])]:
        for limit in ("3MiB", "256MiB"):
            np.testing.assert_array_equal(got.compute(memory_limit=limit), want)


def test_tiles_over_a_zarr_input_hold_whole_chunks(tmp_path):
    """Tiles of an elementwise expression hold whole chunks of its Zarr
    input, through a transpose too, when the limit holds one: each chunk is
    decoded once (a transpose's runs decoded a chunk per tile row: 84 s for
    a 40 MB array where zarr reads it in 0.2 s; C-order tiles of a few rows
    decoded each chunk ~20 times). NumPy's values at every limit."""
    zarr = pytest.importorskip("zarr")
    x = rng_data((600, 700))
    path = tmp_path / "x.zarr"
    zarr.create_array(str(path), shape=x.shape, chunks=(200, 100), dtype=x.dtype)[...] = x
    a = ma.from_zarr(str(path))
    for expr, want, chunk in [(a * 1.5, x * 1.5, (200, 100)), (a.T - 1, x.T - 1, (100, 200)),
                              (a[50:].T[::-1] * 2, x[50:].T[::-1] * 2, (100, 200))]:
        tile = re.search(r"tile \[(\d+), (\d+)\]", str(expr.explain(memory_limit="256MiB"))).groups()
        assert all(int(t) % c == 0 or int(t) == n for t, c, n in zip(tile, chunk, want.shape)), (tile, chunk)
        for limit in ("4MiB", "256MiB"):
            np.testing.assert_array_equal(expr.compute(memory_limit=limit), want)
        expr.to_npy(tmp_path / "small.npy", memory_limit="1MiB", overwrite=True)
        np.testing.assert_array_equal(np.load(tmp_path / "small.npy"), want)


def test_a_sharded_zarr_input_is_read_by_inner_chunks_without_a_cache(tmp_path):
    """A shard (here 4 MiB, its inner chunks 32 KiB) is read by the inner
    chunks a unit needs, never decoded whole into the stage's chunk cache,
    so a limit far below a shard per thread still runs, with the .npy
    input's bits."""
    zarr = pytest.importorskip("zarr")
    a = np.random.default_rng(4).standard_normal((1024, 1024))
    z = zarr.create_array(str(tmp_path / "s.zarr"), shape=a.shape, chunks=(64, 64), shards=(512, 1024), dtype=a.dtype)
    z[...] = a
    np.save(tmp_path / "s.npy", a)
    Z, X = ma.from_zarr(tmp_path / "s.zarr"), ma.from_npy(tmp_path / "s.npy")
    for f in (lambda v: v.sum(axis=0), lambda v: v.var(axis=1), lambda v: (v.T * 2)[::7].max(axis=1)):
        assert "Zarr chunk cache" not in str(f(Z).explain(memory_limit="2MiB"))
        got = f(Z).compute(memory_limit="2MiB", n_jobs=2)
        assert got.tobytes() == f(X).compute(memory_limit="2MiB", n_jobs=2).tobytes()


def test_reductions_read_a_zarr_inputs_chunks_whole_with_the_bits_of_a_npy_input(tmp_path):
    """A reduction along a Zarr input's rows reads several accumulation
    chunks as one box (a chunk decoded at most twice, where a unit per
    accumulation chunk of 26 rows decoded each 500-row chunk ~20 times:
    1.06 s against Dask's 0.14 for a 40 MB ``x.sum(0)``). Each chunk is
    still folded one by one: the bits of the same data in a ``.npy`` file
    (read one accumulation chunk at a time), at every limit."""
    zarr = pytest.importorskip("zarr")
    x = rng_data((700, 2000)) * 1e3
    x[5, 7], x[650, 3] = np.nan, np.inf
    path = tmp_path / "x.zarr"
    zarr.create_array(str(path), shape=x.shape, chunks=(200, 250), dtype=x.dtype)[...] = x
    np.save(tmp_path / "x.npy", x)
    z, n = ma.from_zarr(str(path)), ma.from_npy(tmp_path / "x.npy")
    x3 = x.reshape(7, 100, 2000)
    cases = [
        lambda a: a.sum(0), lambda a: a.mean(0), lambda a: a.argmax(0), lambda a: a.var(0), lambda a: a.sum(),
        lambda a: a[::-1].sum(0), lambda a: a.T.min(1), lambda a: ma.nansum(a, axis=0),
        lambda a: a.reshape(7, 100, 2000).sum(axis=(0, 1)), lambda a: (a * 2).prod(0),
    ]
    with np.errstate(all="ignore"):
        for i, f in enumerate(cases):
            assert ("chunks read together" in str(f(z).explain(memory_limit="256MiB"))) == (i not in (6, 8)), i
            want = np.asarray(f(n).compute(memory_limit="256MiB"))
            for limit in ("2MiB", "256MiB"):
                np.testing.assert_array_equal(f(z).compute(memory_limit=limit), want, err_msg=str(i))
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(z.sum(0).compute(), x.sum(0))
        np.testing.assert_allclose(ma.nansum(z.reshape(7, 100, 2000), axis=(0, 1)).compute(), np.nansum(x3, axis=(0, 1)))


@pytest.mark.parametrize("write", ["to_npy", "to_zarr"])
def test_an_output_under_a_file_is_not_a_directory_error(tmp_path, write):
    """A target whose folder is a file raises NotADirectoryError, as np.save
    and zarr-python do (to_zarr said FileNotFoundError, "does not exist")."""
    np.save(tmp_path / "in.npy", np.arange(3.0))
    with pytest.raises(NotADirectoryError, match="in.npy is not a folder"):
        getattr(ma.ones(3), write)(tmp_path / "in.npy" / "sub")
    np.testing.assert_array_equal(np.load(tmp_path / "in.npy"), np.arange(3.0))


@pytest.mark.parametrize("limit", ["64MiB", "4MiB"])
def test_a_corrupt_zarr_chunk_is_named_by_its_file(tmp_path, limit):
    """A chunk that fails to decode is named by its file (the array's folder
    was named), read whole into the chunk cache or in part without it."""
    zarr = pytest.importorskip("zarr")
    src = tmp_path / "in.zarr"
    zarr.create_array(store=str(src), shape=(400, 100), chunks=(100, 50), dtype="float64")[...] = 1.0
    with open(src / "c" / "3" / "1", "wb") as f:
        f.write(b"not zstd")
    x = ma.from_zarr(src)
    for e in (x.sum(axis=0), x[390:, 60:] * 2):
        with pytest.raises(OSError, match=r"in.zarr/c/3/1: read failed"):
            e.compute(memory_limit=limit)


def test_an_array_that_cannot_be_removed_is_not_replaced():
    """to_zarr(overwrite=True) over an array whose folders this user cannot
    change: refused with the old array in place and nothing left beside it
    (the new array replaced it, then removing the old one failed: an error
    for a done write, the old array kept in a hidden folder; helper 120).
    Refused before the work: an expression that would raise as it is
    computed is never computed."""
    import shutil
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    # A folder the other user can reach (pytest's tmp_path is root's alone).
    tmp_path = Path(tempfile.mkdtemp())
    child = [sys.executable, "-c", (
        "import sys, numpy as np, memfit.array as ma\n"
        "x = ma.asarray(np.arange(1000.).reshape(100, 10))\n"
        "try:\n"
        "    with np.errstate(divide='raise'):\n"
        "        (x / 0).to_zarr(sys.argv[1], overwrite=True)\n"
        "except PermissionError as e:\n"
        "    print('refused', e)\n"
    ), str(tmp_path / "e.zarr")]
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("setpriv is needed to run as another user")
        child = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *child]
    ma.asarray(np.arange(1000.0).reshape(100, 10)).to_zarr(tmp_path / "e.zarr", chunks=10, shards=None)
    for root, dirs, files in os.walk(tmp_path):
        for name in [root, *(os.path.join(root, f) for f in files)]:
            os.chown(name, 65534, 65534) if os.geteuid() == 0 else None
    os.chmod(tmp_path / "e.zarr" / "c", 0o555)
    try:
        out = subprocess.run(child, capture_output=True, text=True, timeout=120)
        assert out.stdout.startswith("refused") and "remove the replaced array" in out.stdout, out.stdout + out.stderr
        np.testing.assert_array_equal(np.asarray(ma.from_zarr(tmp_path / "e.zarr")), np.arange(1000.0).reshape(100, 10))
        assert sorted(os.listdir(tmp_path)) == ["e.zarr"]
    finally:
        os.chmod(tmp_path / "e.zarr" / "c", 0o755)
        shutil.rmtree(tmp_path)


def test_a_folder_that_refuses_new_files_is_a_permission_error():
    """to_npy and to_zarr into a folder this user cannot write raise
    PermissionError (errno 13), as np.save does (they raised a bare
    OSError; helper report)."""
    import shutil
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    tmp_path = Path(tempfile.mkdtemp())
    os.chmod(tmp_path, 0o555)
    child = [sys.executable, "-c", (
        "import sys, numpy as np, memfit.array as ma\n"
        "x = ma.asarray(np.arange(10.)) + 1\n"
        "for write in (lambda p: np.save(p, np.arange(3.)), x.to_npy, x.to_zarr):\n"
        "    try:\n"
        "        write(sys.argv[1] + '/a.out')\n"
        "    except OSError as e:\n"
        "        print(type(e).__name__, e.errno)\n"
    ), str(tmp_path)]
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("setpriv is needed to run as another user")
        child = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *child]
    try:
        out = subprocess.run(child, capture_output=True, text=True, timeout=120)
        assert out.stdout.split("\n")[:3] == ["PermissionError 13"] * 3, out.stdout + out.stderr
        assert os.listdir(tmp_path) == []
    finally:
        os.chmod(tmp_path, 0o755)
        shutil.rmtree(tmp_path)
