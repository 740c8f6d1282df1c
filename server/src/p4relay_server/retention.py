"""Retention: fold old raw samples into fixed buckets, expire old buckets.

Quality and queue samples older than `raw_hours` are replaced by one row per
`bucket_seconds` (per session direction, per switch port queue) in the same
transaction, so a series never has a gap or a double; buckets older than
`downsampled_days` are deleted. Sessions and events are audit records: kept.
Safe to run repeatedly and concurrently with ingest (rows already folded are
gone; a late raw sample for a folded bucket merges into it).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass

import structlog
from sqlalchemy import Engine, text

from p4relay_server.config import Retention

log = structlog.get_logger("p4relay.retention")

_EPOCH = "TIMESTAMPTZ '2000-01-01 00:00:00+00'"

_FOLD_QUALITY = f"""
WITH moved AS (
    DELETE FROM quality_samples WHERE resolution_s = 0 AND ts < :cutoff
    RETURNING *
), agg AS (
    SELECT max(session_id) AS session_id, session_key, direction,
           date_bin(make_interval(secs => :bucket), ts, {_EPOCH}) AS ts,
           sum(interval_ms)::int AS interval_ms, sum(packets) AS packets, sum(bytes) AS bytes,
           sum(lost) AS lost, sum(reordered) AS reordered, avg(jitter_ms) AS jitter_ms,
           avg(delay_ms) AS delay_ms, avg(burst_ratio) AS burst_ratio, max(codec) AS codec,
           avg(r_factor) AS r_factor, avg(mos) AS mos, count(*) AS n
    FROM moved GROUP BY session_key, direction, 4
)
INSERT INTO quality_samples (session_id, session_key, direction, ts, resolution_s, interval_ms,
    packets, bytes, lost, reordered, jitter_ms, delay_ms, burst_ratio, codec, r_factor, mos)
SELECT session_id, session_key, direction, ts, :bucket, interval_ms, packets, bytes, lost,
       reordered, jitter_ms, delay_ms, burst_ratio, codec, r_factor, mos
FROM agg
ON CONFLICT (session_key, direction, resolution_s, ts) DO UPDATE SET
    interval_ms = quality_samples.interval_ms + EXCLUDED.interval_ms,
    packets = quality_samples.packets + EXCLUDED.packets,
    bytes = quality_samples.bytes + EXCLUDED.bytes,
    lost = quality_samples.lost + EXCLUDED.lost,
    reordered = quality_samples.reordered + EXCLUDED.reordered,
    jitter_ms = greatest(quality_samples.jitter_ms, EXCLUDED.jitter_ms),
    mos = least(quality_samples.mos, EXCLUDED.mos)
"""

_FOLD_QUEUES = f"""
WITH moved AS (
    DELETE FROM queue_samples WHERE resolution_s = 0 AND ts < :cutoff
    RETURNING *
), agg AS (
    SELECT switch_id, dev_port, queue,
           date_bin(make_interval(secs => :bucket), ts, {_EPOCH}) AS ts,
           avg(depth_pkts) AS depth_pkts, avg(depth_bytes) AS depth_bytes,
           max(depth_max_pkts) AS depth_max_pkts, avg(queue_delay_us) AS queue_delay_us,
           max(queue_delay_max_us) AS queue_delay_max_us, avg(utilisation) AS utilisation,
           sum(drops) AS drops, sum(tx_packets) AS tx_packets, sum(tx_bytes) AS tx_bytes,
           avg(ired_qavg_bytes) AS ired_qavg_bytes
    FROM moved GROUP BY switch_id, dev_port, queue, 4
)
INSERT INTO queue_samples (switch_id, dev_port, queue, ts, resolution_s, depth_pkts, depth_bytes,
    depth_max_pkts, queue_delay_us, queue_delay_max_us, utilisation, drops, tx_packets, tx_bytes,
    ired_qavg_bytes)
SELECT switch_id, dev_port, queue, ts, :bucket, depth_pkts, depth_bytes, depth_max_pkts,
       queue_delay_us, queue_delay_max_us, utilisation, drops, tx_packets, tx_bytes,
       ired_qavg_bytes
FROM agg
ON CONFLICT (switch_id, dev_port, queue, resolution_s, ts) DO UPDATE SET
    depth_max_pkts = greatest(queue_samples.depth_max_pkts, EXCLUDED.depth_max_pkts),
    queue_delay_max_us = greatest(queue_samples.queue_delay_max_us, EXCLUDED.queue_delay_max_us),
    drops = queue_samples.drops + EXCLUDED.drops
"""


@dataclass
class RetentionReport:
    quality_buckets: int
    quality_expired: int
    queue_buckets: int
    queue_expired: int
    batches_expired: int

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def run_retention(
    engine: Engine, policy: Retention, now: dt.datetime | None = None
) -> RetentionReport:
    now = now or dt.datetime.now(dt.UTC)
    raw_cutoff = now - dt.timedelta(hours=policy.raw_hours)
    old_cutoff = now - dt.timedelta(days=policy.downsampled_days)
    # Fold only whole buckets: the cutoff is rounded down to a bucket edge.
    epoch = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
    b = policy.bucket_seconds
    raw_cutoff = epoch + dt.timedelta(seconds=(raw_cutoff - epoch).total_seconds() // b * b)
    params = {"cutoff": raw_cutoff, "bucket": b}
    with engine.begin() as conn:
        q_folded = conn.execute(text(_FOLD_QUALITY), params).rowcount
        q_expired = conn.execute(
            text("DELETE FROM quality_samples WHERE resolution_s > 0 AND ts < :c"),
            {"c": old_cutoff},
        ).rowcount
    with engine.begin() as conn:
        u_folded = conn.execute(text(_FOLD_QUEUES), params).rowcount
        u_expired = conn.execute(
            text("DELETE FROM queue_samples WHERE resolution_s > 0 AND ts < :c"), {"c": old_cutoff}
        ).rowcount
        # Idempotency keys only need to outlive any producer's retry window.
        b_expired = conn.execute(
            text("DELETE FROM ingest_batches WHERE received_at < :c"), {"c": old_cutoff}
        ).rowcount
    report = RetentionReport(q_folded, q_expired, u_folded, u_expired, b_expired)
    log.info("retention", **report.as_dict(), raw_cutoff=raw_cutoff.isoformat())
    return report
