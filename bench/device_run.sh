#!/usr/bin/env bash
# The prepared device run of issue 26: GPU tests and the k-means benchmark,
# CPU against CUDA from the same initial centres, in one command on a
# machine with an NVIDIA GPU (under 8 minutes of device time).
#
# The device machine has CUDA but no Rust toolchain, so the binaries are
# built here and carried there:
#
#   bash bench/device_run.sh prepare      # here: builds with the cuda feature,
#                                         # strips into .device/ (about 41 MB)
#   bash bench/device_run.sh run          # there (the device tool's `run`,
#                                         # carry [".device"]): tests + benchmark
#
# `run` writes its log and the timings to $OUT (or ./out) as device_run.txt.
# What it checks:
# - the engine's device tests (`device` filter) and the CLI's CUDA tests,
#   with MEMFIT_HAS_CUDA_DRIVER=1: a device fit's labels, centres and
#   inertia equal the CPU's bit for bit, float64 and float32, whole and
#   small tiles (`a_cuda_kmeans_fit_has_the_cpu_bits`);
# - the report's case: 2,000,000 × 3 blobs, k = 200, 30 Lloyd iterations
#   from the same centres, on the CPU (all cores) and on the GPU with a
#   256 MiB device memory limit; the labels files must be identical.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
case "$mode" in
prepare)
  features=(--features memfit/cuda,memfit-cli/cuda -p memfit -p memfit-cli)
  cargo build --release -p memfit-cli --features cuda
  list=$(cargo test --release "${features[@]}" --no-run 2>&1)
  engine=$(grep -o 'unittests src/lib.rs (target/release/deps/memfit-[0-9a-f]*)' <<<"$list" | grep -o 'target/[^)]*')
  cli=$(grep -o 'tests/cli.rs (target/release/deps/cli-[0-9a-f]*)' <<<"$list" | grep -o 'target/[^)]*')
  rm -rf .device && mkdir -p .device
  strip -o .device/memfit target/release/memfit
  strip -o .device/engine_tests "$engine"
  strip -o .device/cli_tests "$cli"
  # The CLI tests run the binary they were built beside.
  echo "$(pwd)/target/release/memfit" >.device/memfit_path
  ls -la .device
  ;;
run)
  out=${OUT:-out}
  mkdir -p "$out"
  exec > >(tee "$out/device_run.txt") 2>&1
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
  # NVRTC: cudarc looks for libnvrtc.so (or .so.12); the machine's may be .so.13.
  mkdir -p /tmp/nvrtc
  nvrtc=$( (ldconfig -p | awk '/libnvrtc\.so/ {print $NF}'; find /usr /opt -name 'libnvrtc.so*' 2>/dev/null) | grep -v builtins | head -1)
  [ -n "$nvrtc" ] || { echo "no libnvrtc on this machine"; exit 1; }
  ln -sf "$nvrtc" /tmp/nvrtc/libnvrtc.so
  export LD_LIBRARY_PATH=/tmp/nvrtc:$(dirname "$nvrtc"):${LD_LIBRARY_PATH:-}
  echo "NVRTC: $nvrtc"
  # The CLI tests call the binary at the path they were built with.
  want=$(cat .device/memfit_path)
  [ -e "$want" ] || { mkdir -p "$(dirname "$want")" && ln -s "$(pwd)/.device/memfit" "$want"; }
  export MEMFIT_HAS_CUDA_DRIVER=1 MEMFIT_REQUIRE_NVRTC=1
  status=0
  m=.device/memfit
  d=$(mktemp -d)
  echo "== pre-flight: a tiny fit on the device (driver, NVRTC and PTX loading)"
  $m generate blobs --n-samples 1000 --n-features 3 --centers 4 --seed 1 --out "$d/tiny.npy" >/dev/null
  $m kmeans "$d/tiny.npy" -k 4 --max-iter 3 --device cuda --quiet --labels "$d/tiny_l.npy" || status=1
  echo "== engine device tests"
  .device/engine_tests device || status=1
  echo "== CLI CUDA tests"
  .device/cli_tests cuda || status=1
  echo "== benchmark: 2,000,000 x 3, k = 200, 30 iterations"
  $m generate blobs --n-samples 2000000 --n-features 3 --centers 200 --seed 42 --out "$d/x.npy" >/dev/null
  $m generate blobs --n-samples 200 --n-features 3 --centers 200 --seed 7 --out "$d/init.npy" >/dev/null
  common=(kmeans "$d/x.npy" -k 200 --init "$d/init.npy" --max-iter 30 --tol 0 --algorithm lloyd --quiet)
  for dtype in float64 float32; do
    $m "${common[@]}" --dtype $dtype --device cpu --labels "$d/cpu.npy" || { status=1; continue; }
    $m "${common[@]}" --dtype $dtype --device cuda --device-memory-limit 256MiB --dry-run | grep -E "device cuda|limit" || true
    $m "${common[@]}" --dtype $dtype --device cuda --device-memory-limit 256MiB --labels "$d/gpu.npy" ||
      { echo "$dtype: the CUDA fit failed"; status=1; continue; }
    if cmp -s "$d/cpu.npy" "$d/gpu.npy"; then echo "$dtype: labels equal"; else echo "$dtype: LABELS DIFFER"; status=1; fi
  done
  echo "== done: status $status"
  sleep 1
  exit $status
  ;;
*)
  echo "usage: bash bench/device_run.sh prepare|run" >&2
  exit 2
  ;;
esac
