"""One line of the device benchmark (bench/device_run.sh): a CPU and a CUDA
fit's `--summary` JSON files side by side: seconds per iteration, their
ratio, iterations, and the relative difference of the final objective
(k-means inertia, or a mixture's lower bound). Exits 1 when that
difference exceeds --rtol.

    python3 bench/device_summary.py NAME CPU.json CUDA.json [--rtol 1e-9]
"""

import argparse
import json


def per_iter(s):
    t = s["timings"]
    secs = t.get("iterations_secs", t.get("em_secs"))
    return secs / max(s["n_iter"], 1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("name")
    p.add_argument("cpu")
    p.add_argument("cuda")
    p.add_argument("--rtol", type=float, default=1e-9)
    a = p.parse_args()
    cpu, gpu = (json.load(open(f)) for f in (a.cpu, a.cuda))
    key = "inertia" if "inertia" in cpu else "lower_bound"
    rel = abs(cpu[key] - gpu[key]) / max(abs(cpu[key]), 1e-300)
    c, g = per_iter(cpu), per_iter(gpu)
    algo = cpu.get("algorithm", cpu.get("covariance_type", ""))
    print(
        f"{a.name}: cpu ({algo}) {c:.4f} s/iter, cuda {g:.4f} s/iter ({c / g:.2f}x); "
        f"n_iter {cpu['n_iter']} / {gpu['n_iter']}; {key} {gpu[key]!r}, relative difference {rel:.1e}; "
        f"total {cpu['timings']['total_secs']:.2f} / {gpu['timings']['total_secs']:.2f} s"
    )
    raise SystemExit(0 if rel <= a.rtol else 1)


if __name__ == "__main__":
    main()
