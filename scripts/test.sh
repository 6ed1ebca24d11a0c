#!/usr/bin/env bash
# Runs every test: formatting, lints, Rust unit and CLI integration tests, and
# the Python parity tests against scikit-learn (in a virtual environment that
# this script creates at .venv if needed).
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --release --all-targets -- -D warnings
echo "== cargo test (release: one build serves the tests and the CLI)"
cargo build --release --bin memfit
cargo test --release --workspace

echo "== python tests"
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/pip install --quiet --disable-pip-version-check -r tests/python/requirements.txt
export MEMFIT_BIN="${MEMFIT_BIN:-${CARGO_TARGET_DIR:-$PWD/target}/release/memfit}"
.venv/bin/python -m pytest -q tests/python
