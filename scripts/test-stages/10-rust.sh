#!/usr/bin/env bash
# Rust: the software switch's unit, property (parser fuzz) and integration tests.
# One release profile serves tests and benchmarks.
set -o pipefail
cd switch && cargo test --release 2>&1 | tee "$RESULTS/$STAGE.cargo.log"
exit "${PIPESTATUS[0]}"
