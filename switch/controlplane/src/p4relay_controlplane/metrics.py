"""The daemon's Prometheus metrics (p4relay_controlplane_*)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

CONNECTED = Gauge(
    "p4relay_controlplane_switch_connected", "1 while the daemon holds a BfRt session"
)
DRIFT_REPAIRED = Counter(
    "p4relay_controlplane_drift_repaired_total",
    "Entries (and register values, shaped ports) found differing from the configuration "
    "after it was applied (another client's write, a switch restart) and set back; "
    "kind: missing, changed, extra",
    ["table", "kind"],
)
REFUSED = Counter(
    "p4relay_controlplane_refused_total",
    "Writes the switch (or the daemon's own check) refused: an unknown port, a program "
    "without the feature, a full table; the log names the entry and the reason",
    ["table"],
)
ENTRIES = Gauge(
    "p4relay_controlplane_entries",
    "Entries the configuration asks for, per managed table",
    ["table"],
)
RECONCILES = Counter(
    "p4relay_controlplane_reconciles_total",
    "Passes over the switch: clean (nothing to repair), repaired, failed (switch away or "
    "refused something)",
    ["result"],
)
RECONCILE_SECONDS = Histogram(
    "p4relay_controlplane_reconcile_seconds",
    "Time of one pass: read every managed table back and repair it",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
)
RELOADS = Counter(
    "p4relay_controlplane_config_reloads_total",
    "Configuration reloads (SIGHUP): applied, invalid (refused whole, the running one kept), "
    "deferred (switch away: applied when it connects)",
    ["result"],
)
IRED_SET = Gauge(
    "p4relay_controlplane_ired_port_set",
    "1 when the port runs the configured iRED, 0 when the switch refused it (the log "
    "says why); no series for a port not configured",
    ["dev_port"],
)
REROUTES = Counter(
    "p4relay_controlplane_reroutes_total",
    "Reroutes heard and made: to_backup (the data plane moved a flow), notify_upstream (no "
    "backup here: a notice went upstream), to_primary (moved back after the hold time)",
    ["direction"],
)
ON_BACKUP = Gauge("p4relay_controlplane_flows_on_backup", "Watched flows on their backup now")
INT_REPORTS = Counter(
    "p4relay_controlplane_int_reports_total",
    "Telemetry reports at the INT loop: primary (a watched destination on its primary path), "
    "not_primary (on its backup, or not from this source), unwatched, bad (did not decode), "
    "foreign_source (not from a configured sink: dropped)",
    ["result"],
)
INT_REPORTS_FORWARD_FAILED = Counter(
    "p4relay_controlplane_int_reports_forward_failed_total",
    "Accepted reports the INT loop could not pass on to its forward address",
)
INT_HOPS_CONGESTED = Gauge(
    "p4relay_controlplane_int_hops_congested",
    "Hops (switch, egress port) the INT loop holds congested now",
)
