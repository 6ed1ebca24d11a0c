#!/usr/bin/env bash
# Runs every test: formatting, lints, Rust unit and CLI integration tests, then
# builds the Python package into a fresh virtual environment and runs the
# Python tests (the CLI's parity tests, the package's, the README's blocks)
# against scikit-learn. Each step says when it starts and how long the run has
# taken so far; cargo's and pip's progress is shown as they go.
set -euo pipefail
cd "$(dirname "$0")/.."
step() { printf '\n== %s   [%s, %dm%02ds since start]\n' "$1" "$(date +%T)" $((SECONDS / 60)) $((SECONDS % 60)); }

step "cargo fmt --check"
cargo fmt --all -- --check
step "cargo clippy (release: the build below reuses its dependencies)"
cargo clippy --release --all-targets -- -D warnings
step "cargo doc (warnings denied: broken links, bad markup, output collisions)"
# Cargo's own warnings (such as two targets writing the same doc folder) fail the step too.
doc_log="$(mktemp)"
RUSTDOCFLAGS="${RUSTDOCFLAGS:-} -D warnings" cargo doc --release --no-deps --workspace 2>&1 | tee "$doc_log"
if grep -qE '^(warning|error)' "$doc_log"; then echo "cargo doc reported warnings" >&2; exit 1; fi
rm -f "$doc_log"
step "cargo test (release: one build serves the tests, the CLI binary and the Python extension)"
cargo test --release --workspace

step "python: a fresh virtual environment, the package built with maturin and installed with pip"
# maturin builds the extension into the same cargo target folder, so the
# engine compiled above is reused; -v shows its progress instead of silence.
VENV="${CARGO_TARGET_DIR:-$PWD/target}/test-venv"
python3 -m venv --clear "$VENV"
pip_log="$VENV.pip.log"
set +e
"$VENV/bin/pip" install --disable-pip-version-check --progress-bar off -v ".[test]" 2>&1 | tee "$pip_log" |
  grep -E --line-buffered '^ *(Compiling|Finished|Building wheel|Successfully installed)'
pip_status=${PIPESTATUS[0]}
set -e
if [ "$pip_status" -ne 0 ]; then tail -n 60 "$pip_log" >&2; echo "pip install failed (full log: $pip_log)" >&2; exit "$pip_status"; fi
"$VENV/bin/python" -c 'import memfit; print("memfit", memfit.__version__, "from", memfit.__file__)'
export MEMFIT_BIN="${MEMFIT_BIN:-${CARGO_TARGET_DIR:-$PWD/target}/release/memfit}"
# Two runs: each folder has its own conftest.py.
step "pytest tests/python (the CLI, against scikit-learn)"
"$VENV/bin/python" -m pytest -q tests/python
step "pytest python/tests (the Python package memfit, the README's code blocks)"
"$VENV/bin/python" -m pytest -q python/tests
step "the cuda feature: lints, the no-driver errors, and NVRTC compiles every kernel source"
# No GPU or driver is needed: NVIDIA's NVRTC wheel provides the run-time
# compiler, and MEMFIT_REQUIRE_NVRTC makes the compile test fail, not pass
# with a note, when it cannot load it.
"$VENV/bin/pip" install --disable-pip-version-check --progress-bar off -q nvidia-cuda-nvrtc-cu12
NVRTC_LIB="$("$VENV/bin/python" -c 'import nvidia.cuda_nvrtc, os; print(os.path.join(list(nvidia.cuda_nvrtc.__path__)[0], "lib"))')"
cargo clippy --release --all-targets -p memfit -p memfit-cli --features memfit/cuda,memfit-cli/cuda -- -D warnings
export LD_LIBRARY_PATH="$NVRTC_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" MEMFIT_REQUIRE_NVRTC=1
cargo test --release -p memfit --features cuda --lib -- device
cargo test --release -p memfit-cli --features cuda --test cli -- cuda
step "all tests passed"
