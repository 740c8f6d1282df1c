#!/usr/bin/env bash
# The operators' tools: alert rules valid and doing what their tests say, the
# scrape configuration valid, and every metric the rules and the Grafana
# dashboard query exported by some component. Run by scripts/lint.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
promtool check rules deploy/prometheus/alerts.yml
promtool test rules deploy/prometheus/alerts.test.yml
promtool check config --syntax-only deploy/prometheus/prometheus.yml
uv run --frozen --no-sync python deploy/grafana/check_metrics.py deploy/grafana/p4relay.json deploy/prometheus/alerts.yml
