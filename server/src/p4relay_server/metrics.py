"""Prometheus metrics of the API process (the collector has its own)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

HTTP_REQUESTS = Counter(
    "p4relay_http_requests_total", "HTTP requests", ["method", "route", "status"]
)
HTTP_LATENCY = Histogram(
    "p4relay_http_request_seconds",
    "HTTP request latency",
    ["method", "route"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
INGEST_BATCHES = Counter("p4relay_ingest_batches_total", "ingest batches", ["outcome"])
INGEST_ITEMS = Counter("p4relay_ingest_items_total", "ingested items", ["kind", "outcome"])
LIVE_SUBSCRIBERS = Gauge("p4relay_live_subscribers", "connected live-stream subscribers")
LIVE_MESSAGES = Counter("p4relay_live_messages_total", "live messages", ["topic"])
LIVE_OVERFLOWS = Counter(
    "p4relay_live_overflows_total", "subscribers cut off because they fell behind"
)
HOMER_REPORTS = Counter(
    "p4relay_homer_reports_total",
    "call quality reports to Homer (HEP) by outcome: sent, failed, dropped (queue full), invalid",
    ["outcome"],
)
HOMER_QUEUE = Gauge("p4relay_homer_queue_reports", "quality reports waiting to be sent to Homer")
