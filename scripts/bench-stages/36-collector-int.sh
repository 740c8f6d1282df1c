#!/usr/bin/env bash
# Collector: INT telemetry report intake on one core (decode + record, and the
# real UDP listener pinned to one CPU with a paced sender on another); prints
# a table. Target >= 20,000 reports/s.
set -euo pipefail
exec uv run --frozen --no-sync python collector/bench/int_reports_bench.py
