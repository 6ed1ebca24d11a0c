#!/usr/bin/env bash
# The prepared device run of issue 26: GPU tests and the benchmarks (k-means
# and a Gaussian mixture, CPU against CUDA from the same initialisation), in
# one command on a machine with an NVIDIA GPU (under 8 minutes of device
# time).
#
# The device machine has CUDA but no Rust toolchain, so the binaries are
# built here and carried there:
#
#   bash bench/device_run.sh prepare      # here: builds with the cuda feature,
#                                         # strips into .device/ (about 41 MB),
#                                         # and the Python wheel (maturin, in
#                                         # $VIRTUAL_ENV or /work/venv)
#   bash bench/device_run.sh run          # there (the device tool's `run`,
#                                         # carry [".device"]): tests + benchmark
#
# `run` writes its log and the timings to $OUT (or ./out) as device_run.txt.
# What it checks:
# - the engine's device tests (`device` filter) and the CLI's CUDA tests,
#   with MEMFIT_HAS_CUDA_DRIVER=1: a device fit's labels, centres and
#   inertia equal the CPU's bit for bit, float64 and float32, whole and
#   small tiles (`a_cuda_kmeans_fit_has_the_cpu_bits`); a mixture's
#   log-densities and fits are the CPU's to rounding, every covariance type
#   (`log_densities_on_the_device_are_the_hosts_to_rounding`,
#   `a_cuda_gmm_fit_is_the_cpu_fit_to_rounding`);
# - the Python estimators with device="cuda" (python/tests/test_device.py's
#   `on_a_cuda_device` tests, the wheel installed into /tmp/mfpy): k-means
#   fits, predict and score with the CPU's bits, mixtures of every
#   covariance type to rounding;
# - the report's case: 2,000,000 × 3 blobs, k = 200, 30 Lloyd iterations
#   from the same centres, and flights3m (when ../shared has it), on the
#   CPU (all cores) and on the GPU with a 256 MiB device memory limit; the
#   labels files must be identical; CuPy's whole-matrix Lloyd beside;
# - a full Gaussian mixture, 200,000 × 50, K = 20, on the CPU and on the
#   GPU (256 MiB): labels equal, lower bounds within 1e-9 relative.
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
  # flights3m (../shared, which does not travel), compressed to about 8 MB.
  shared=../shared/datasets/flights3m_f64.npy
  if [ -e "$shared" ]; then xz -T0 -6 -c "$shared" >.device/flights3m_f64.npy.xz; fi
  # The Python extension with the cuda feature (abi3: any CPython >= 3.9).
  maturin=${VIRTUAL_ENV:-/work/venv}/bin/maturin
  "$maturin" build --release --strip --features cuda --compatibility linux -o .device/wheels
  ls -la .device .device/wheels
  du -sh .device
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
  echo "== Python estimators on the device"
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/mfpy .device/wheels/*.whl || status=1
  PYTHONPATH=/tmp/mfpy python3 -m pytest -q -p no:cacheprovider python/tests/test_device.py -k on_a_cuda_device || status=1
  # One benchmark case: k-means of $2 from the centres $3 (k = $4), 30
  # Lloyd iterations, on the CPU (all cores, the default algorithm) and on
  # the GPU (256 MiB device limit), float64 and float32; the labels files
  # must be identical; seconds per iteration side by side with CuPy's
  # whole-matrix Lloyd (bench/cupy_kmeans_peer.py) from the same centres.
  bench_case() {
    local name=$1 x=$2 init=$3 k=$4
    echo "== benchmark: $name, k = $k, 30 iterations"
    local common=(kmeans "$x" -k "$k" --init "$init" --max-iter 30 --tol 0 --quiet)
    for dtype in float64 float32; do
      $m "${common[@]}" --dtype $dtype --device cpu --labels "$d/cpu.npy" --summary "$d/cpu.json" || { status=1; continue; }
      $m "${common[@]}" --dtype $dtype --algorithm lloyd --device cuda --device-memory-limit 256MiB --dry-run | grep -E "device cuda|limit" || true
      $m "${common[@]}" --dtype $dtype --algorithm lloyd --device cuda --device-memory-limit 256MiB \
        --labels "$d/gpu.npy" --summary "$d/gpu.json" || { echo "$name $dtype: the CUDA fit failed"; status=1; continue; }
      if cmp -s "$d/cpu.npy" "$d/gpu.npy"; then echo "$name $dtype: labels equal"; else echo "$name $dtype: LABELS DIFFER"; status=1; fi
      python3 bench/device_summary.py "$name $dtype" "$d/cpu.json" "$d/gpu.json" || status=1
      python3 bench/cupy_kmeans_peer.py "$x" "$init" --iters 30 --dtype $dtype || echo "$name $dtype: the CuPy peer failed"
    done
  }
  $m generate blobs --n-samples 2000000 --n-features 3 --centers 200 --seed 42 --out "$d/x.npy" >/dev/null
  $m generate blobs --n-samples 200 --n-features 3 --centers 200 --seed 7 --out "$d/init.npy" >/dev/null
  bench_case "blobs 2,000,000 x 3" "$d/x.npy" "$d/init.npy" 200
  if [ -e .device/flights3m_f64.npy.xz ]; then
    python3 -c "import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], 'wb'))" \
      .device/flights3m_f64.npy.xz "$d/flights.npy"
    python3 -c "import numpy as np, sys; x = np.load(sys.argv[1], mmap_mode='r'); \
i = np.sort(np.random.default_rng(0).choice(len(x), 200, replace=False)); np.save(sys.argv[2], np.asarray(x[i]))" \
      "$d/flights.npy" "$d/flights_init.npy"
    bench_case "flights3m" "$d/flights.npy" "$d/flights_init.npy" 200
  fi
  # A Gaussian mixture (full covariances, 200,000 x 50, K = 20, 20 EM
  # iterations, the same k-means initialisation) on the CPU and with its
  # log-densities on the GPU (256 MiB device limit): labels equal, lower
  # bounds within 1e-9 relative in float64 (1e-5 in float32).
  echo "== benchmark: Gaussian mixture, full, 200,000 x 50, K = 20, 20 iterations"
  $m generate blobs --n-samples 200000 --n-features 50 --centers 20 --seed 5 --out "$d/g.npy" >/dev/null
  gcommon=(gmm "$d/g.npy" -k 20 --covariance-type full --max-iter 20 --tol 0 --seed 0 --quiet)
  for dtype in float64 float32; do
    rtol=$([ $dtype = float64 ] && echo 1e-9 || echo 1e-5)
    $m "${gcommon[@]}" --dtype $dtype --device cpu --labels "$d/gcpu.npy" --summary "$d/gcpu.json" || { status=1; continue; }
    $m "${gcommon[@]}" --dtype $dtype --device cuda --device-memory-limit 256MiB --dry-run | grep -E "device cuda|limit" || true
    $m "${gcommon[@]}" --dtype $dtype --device cuda --device-memory-limit 256MiB \
      --labels "$d/ggpu.npy" --summary "$d/ggpu.json" || { echo "gmm $dtype: the CUDA fit failed"; status=1; continue; }
    if cmp -s "$d/gcpu.npy" "$d/ggpu.npy"; then echo "gmm $dtype: labels equal"; else echo "gmm $dtype: LABELS DIFFER"; status=1; fi
    python3 bench/device_summary.py "gmm full $dtype" "$d/gcpu.json" "$d/ggpu.json" --rtol $rtol || status=1
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
