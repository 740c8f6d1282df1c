#!/usr/bin/env bash
# Rust: the software switch's unit, property (parser fuzz) and integration tests,
# with their line coverage (cargo-llvm-cov, installed by make setup) printed at
# the end. One release profile serves tests and benchmarks.
set -o pipefail
cd switch || exit 1
if cargo llvm-cov --version >/dev/null 2>&1; then
  cargo llvm-cov --release --summary-only 2>&1 | tee "$RESULTS/$STAGE.cargo.log"
else
  echo "rust stage: cargo-llvm-cov is not installed (make setup installs it): no coverage figure"
  cargo test --release 2>&1 | tee "$RESULTS/$STAGE.cargo.log"
fi
exit "${PIPESTATUS[0]}"
