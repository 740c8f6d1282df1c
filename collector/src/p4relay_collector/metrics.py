"""The collector's own Prometheus metrics (served on `metrics_listen`, default :9103)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

POLLS = Counter("p4relay_collector_polls_total", "switch polls", ["switch", "outcome"])
POLL_SECONDS = Histogram("p4relay_collector_poll_seconds", "time to read one switch", ["switch"])
SWITCH_UP = Gauge(
    "p4relay_collector_switch_up", "1 when the last poll of a switch worked", ["switch"]
)
SENT = Counter("p4relay_collector_batches_total", "batches sent to the server", ["outcome"])
BACKLOG = Gauge("p4relay_collector_backlog_batches", "batches waiting to be re-sent")
DROPPED = Counter(
    "p4relay_collector_dropped_batches_total", "batches lost because the backlog was full"
)
CONGESTION_EVENTS = Counter(
    "p4relay_collector_congestion_events_total", "congestion onsets and clears raised", ["type"]
)
CONGESTED_QUEUES = Gauge(
    "p4relay_collector_congested_queues", "egress queues in an open congestion episode"
)

# iRED, per switch and egress port (collector/src/p4relay_collector/ired.py)
IRED_QAVG_BYTES = Gauge(
    "p4relay_collector_ired_qavg_bytes", "iRED queue average of a port", ["switch", "dev_port"]
)
IRED_DROPS = Counter(
    "p4relay_collector_ired_drops_total", "packets iRED dropped in Ingress", ["switch", "dev_port"]
)
IRED_DECISIONS = Counter(
    "p4relay_collector_ired_decisions_total", "iRED drop decisions", ["switch", "dev_port"]
)
IRED_SPARED = Counter(
    "p4relay_collector_ired_spared_total",
    "protected packets (relay hits, DSCP EF) iRED let pass",
    ["switch", "dev_port"],
)
IRED_TAIL_DROPS = Counter(
    "p4relay_collector_ired_tail_drops_total",
    "packets dropped by iRED's tail-drop comparison mode",
    ["switch", "dev_port"],
)
# The port's iRED settings as the switch holds them (what p4relay-controlplane set).
IRED_THRESHOLD_BYTES = Gauge(
    "p4relay_collector_ired_threshold_bytes",
    "iRED thresholds of a port: max_len_queue, min (maxLenQueue/2 - N) and max (2 x min)",
    ["switch", "dev_port", "threshold"],
)
IRED_DROP_PROB = Gauge(
    "p4relay_collector_ired_drop_prob",
    "iRED's chance of a drop decision between the thresholds",
    ["switch", "dev_port"],
)
IRED_MODE = Gauge(
    "p4relay_collector_ired_mode",
    "1 for the port's iRED mode (ired, ired_protect or tail_drop), 0 for the others",
    ["switch", "dev_port", "mode"],
)
