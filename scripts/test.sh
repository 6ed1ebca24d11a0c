#!/usr/bin/env bash
# Runs every test: formatting, lints, Rust unit and CLI integration tests, then
# builds the Python package into a fresh virtual environment and runs the
# Python tests (the CLI's parity tests and the package's) against scikit-learn.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --release --all-targets -- -D warnings
echo "== cargo doc (warnings denied: broken links, bad markup, output collisions)"
# --release reuses the dependencies clippy just checked. Cargo's own warnings
# (such as two targets writing the same doc folder) fail the step too.
doc_log="$(mktemp)"
RUSTDOCFLAGS="${RUSTDOCFLAGS:-} -D warnings" cargo doc --release --no-deps --workspace 2>&1 | tee "$doc_log"
if grep -qE '^(warning|error)' "$doc_log"; then echo "cargo doc reported warnings" >&2; exit 1; fi
rm -f "$doc_log"
echo "== cargo test (release: one build serves the tests and the CLI)"
cargo build --release --bin memfit
cargo test --release --workspace

echo "== python: build the package into a fresh virtual environment, run pytest"
# pip builds the extension with maturin into the same cargo target folder,
# so the engine compiled above is reused.
VENV="${CARGO_TARGET_DIR:-$PWD/target}/test-venv"
python3 -m venv --clear "$VENV"
"$VENV/bin/pip" install --quiet --disable-pip-version-check ".[test]"
export MEMFIT_BIN="${MEMFIT_BIN:-${CARGO_TARGET_DIR:-$PWD/target}/release/memfit}"
# Two runs: each folder has its own conftest.py.
"$VENV/bin/python" -m pytest -q tests/python       # the CLI, against scikit-learn
"$VENV/bin/python" -m pytest -q python/tests       # the Python package memfit
