"""Expressions over a Zarr input, side by side in one run: memfit.array
(`ma.from_zarr`), Dask (`da.from_zarr`) and Zarr's own read of the whole
array then NumPy, each in a child process (seconds and peak resident
memory), on a zstd-compressed float64 array whose chunks a transpose and a
column reduction cut across.

    python bench/zarr_input_bench.py                 # 2000 x 2500, chunks 500 x 250 (40 MB)
    python bench/zarr_input_bench.py --rows 20000    # 400 MB
    python bench/zarr_input_bench.py --rows 4096 --cols 4096 --chunks 300,1024 --limit 33554432 \
        --cases "x.sum(0);x.sum(1);x.var(1)"     # reductions of 128 MB at a 32 MiB limit

Results are checked against NumPy's (np.allclose) before they are timed.
Needs: numpy, zarr, dask[array] and memfit (pip install .).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

CASES = {
    "x * 1.5": "x * 1.5",
    "x.T * 1.5": "x.T * 1.5",
    "x[:, ::50]": "x[:, ::50]",
    "x.sum(0)": "x.sum(0)",
    "x.sum(1)": "x.sum(1)",
    "x.var(1)": "x.var(1)",
    "x.T[::-1] + 1": "x.T[::-1] + 1",
}

CHILD = r"""
import json, resource, sys, time
import numpy as np
peer, path, expr, limit = sys.argv[1:5]
import zarr
if peer == "memfit":
    import memfit.array as ma
    x = ma.from_zarr(path)
    run = lambda: np.asarray(eval(expr).compute(memory_limit=int(limit)))
elif peer == "dask":
    import dask
    import dask.array as da
    dask.config.set(scheduler="threads")
    x = da.from_zarr(path)
    run = lambda: np.asarray(eval(expr).compute())
else:
    def run():
        x = zarr.open_array(path, mode="r")[...]
        return np.asarray(eval(expr))
want = eval(expr, {"x": zarr.open_array(path, mode="r")[...]})
got = run()
assert got.shape == want.shape and np.allclose(got, want), (peer, expr)
del got, want
t = time.perf_counter()
run()
seconds = time.perf_counter() - t
print(json.dumps({"seconds": seconds, "peak_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=2000)
    ap.add_argument("--cols", type=int, default=2500)
    ap.add_argument("--chunks", default="500,250", help="chunk shape, rows,cols")
    ap.add_argument("--limit", default=str(1 << 30), help="memfit's memory_limit in bytes")
    ap.add_argument("--cases", default=";".join(CASES), help="expressions separated by ; (default: all)")
    args = ap.parse_args()
    import numpy as np
    import zarr

    chunks = tuple(int(c) for c in args.chunks.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "x.zarr")
        z = zarr.create_array(path, shape=(args.rows, args.cols), chunks=chunks, dtype="f8")
        rng = np.random.default_rng(0)
        for r in range(0, args.rows, chunks[0]):
            z[r:r + chunks[0]] = rng.standard_normal((min(chunks[0], args.rows - r), args.cols))
        print(f"x: {args.rows} x {args.cols} float64 ({args.rows * args.cols * 8 / 1e6:.0f} MB), chunks {chunks}, "
              f"zstd; {os.cpu_count()} CPUs")
        print(f"{'expression':<16}{'memfit s':>10}{'dask s':>10}{'zarr+numpy s':>14}{'memfit/dask':>13}"
              f"{'memfit MB':>11}{'dask MB':>9}{'numpy MB':>10}")
        for name in args.cases.split(";"):
            expr = CASES[name]
            got = {}
            for peer in ("memfit", "dask", "numpy"):
                out = subprocess.run([sys.executable, "-c", CHILD, peer, path, expr, args.limit],
                                     capture_output=True, text=True, check=True)
                got[peer] = json.loads(out.stdout.strip().splitlines()[-1])
            s = {p: got[p]["seconds"] for p in got}
            mb = {p: got[p]["peak_bytes"] / 1e6 for p in got}
            print(f"{name:<16}{s['memfit']:>10.3f}{s['dask']:>10.3f}{s['numpy']:>14.3f}"
                  f"{s['memfit'] / s['dask']:>13.2f}{mb['memfit']:>11.0f}{mb['dask']:>9.0f}{mb['numpy']:>10.0f}")


if __name__ == "__main__":
    main()
