"""The fleet as the database sees it, for Prometheus (`/api/v1/overview/metrics`).

A prometheus_client collector reads the database when scraped; each scrape gets its
own registry, bound to that request's database session.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from p4relay_server.models import Agent, CallSession, QualitySample, Switch
from p4relay_server.services.queries.congestion import congestion_episodes

RECENT_SAMPLES = dt.timedelta(seconds=30)  # a call's "current" quality: its samples this recent
QUANTILES = (0.1, 0.5, 0.9, 0.99)
MOS_DEGRADED = 3.6


def _gauge(
    name: str, help_: str, label: str | None, rows: Sequence[tuple[str, float]]
) -> GaugeMetricFamily:
    g = GaugeMetricFamily(name, help_, labels=[label] if label else None)
    for value_of_label, v in rows:
        g.add_metric([value_of_label] if label else [], v)
    return g


class FleetCollector(Collector):
    """Calls up and offloaded, why calls stay on RTPProxy, quantiles over active
    calls of their current quality (the worse direction's samples of the last 30 s),
    switch and agent health, open congestion episodes."""

    def __init__(self, db: Session, now: dt.datetime) -> None:
        self.db = db
        self.now = now

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield from self._calls()
        yield from self._quality()
        yield from self._switches()

    def _calls(self) -> Iterator[GaugeMetricFamily]:
        c = CallSession
        up = c.state.in_(("setup", "active"))
        active, offloaded = self.db.execute(
            select(func.count(), func.count().filter(c.offloaded.is_(True))).where(up)
        ).one()
        yield GaugeMetricFamily("p4relay_calls_active", "calls in setup or active", value=active)
        yield GaugeMetricFamily(
            "p4relay_calls_offloaded", "active calls relayed by the switch", value=offloaded
        )
        reason = func.coalesce(c.offload_reason, "unknown")
        reasons = self.db.execute(
            select(reason, func.count())
            .where(up, c.offloaded.is_(False))
            .group_by(reason)
            .order_by(reason)
        ).all()
        yield _gauge(
            "p4relay_calls_not_offloaded",
            "active calls left on RTPProxy, by reason",
            "reason",
            [(r, float(n)) for r, n in reasons],
        )

    def _quality(self) -> Iterator[GaugeMetricFamily]:
        qs = QualitySample
        per_call = (
            select(
                func.min(qs.mos).label("mos"),
                func.max(100.0 * qs.lost / func.nullif(qs.packets + qs.lost, 0)).label("loss"),
                func.max(qs.jitter_ms).label("jitter"),
            )
            .where(
                qs.ts >= self.now - RECENT_SAMPLES, qs.ts <= self.now, qs.session_id.is_not(None)
            )
            .group_by(qs.session_id)
            .subquery()
        )
        fracs = list(QUANTILES)
        sampled, degraded, mos_q, loss_q, jit_q = self.db.execute(
            select(
                func.count(),
                func.count().filter(per_call.c.mos < MOS_DEGRADED),
                func.percentile_cont(fracs).within_group(per_call.c.mos),
                func.percentile_cont(fracs).within_group(per_call.c.loss),
                func.percentile_cont(fracs).within_group(per_call.c.jitter),
            )
        ).one()
        yield GaugeMetricFamily(
            "p4relay_calls_sampled", "calls with quality samples in the last 30 s", value=sampled
        )
        yield GaugeMetricFamily(
            "p4relay_calls_mos_degraded", "of those, calls with MOS under 3.6", value=degraded
        )
        for name, help_, vals, scale in (
            ("p4relay_calls_mos", "MOS quantiles over calls (worse direction, last 30 s)", mos_q, 1.0),
            ("p4relay_calls_loss_ratio", "packet loss quantiles over calls (last 30 s)", loss_q, 0.01),
            ("p4relay_calls_jitter_seconds", "jitter quantiles over calls (last 30 s)", jit_q, 0.001),
        ):  # fmt: skip
            # Gauges labelled by quantile: no summary's _sum/_count, which a
            # quantile of per-call values has no meaning for.
            yield _gauge(
                name,
                help_,
                "quantile",
                [
                    (str(f), float(v) * scale)
                    for f, v in zip(fracs, vals or (), strict=False)
                    if v is not None
                ],
            )

    def _switches(self) -> Iterator[GaugeMetricFamily]:
        now = self.now
        switches = self.db.execute(select(Switch).order_by(Switch.name)).scalars().all()
        yield _gauge(
            "p4relay_switch_up",
            "1 when the collector reads the switch",
            "switch",
            [(s.name, float(s.up)) for s in switches],
        )
        yield _gauge(
            "p4relay_switch_last_seen_age_seconds",
            "seconds since the collector last read the switch",
            "switch",
            [(s.name, (now - s.last_seen).total_seconds()) for s in switches if s.last_seen],
        )
        yield _gauge(
            "p4relay_switch_relay_table_used",
            "relay table entries in use (collector's last reading)",
            "switch",
            [
                (s.name, float(s.relay_table_used))
                for s in switches
                if s.relay_table_used is not None
            ],
        )
        yield _gauge(
            "p4relay_switch_relay_table_capacity",
            "relay table size in entries",
            "switch",
            [(s.name, float(s.relay_table_capacity)) for s in switches if s.relay_table_capacity],
        )
        agent_rows = self.db.execute(select(Agent.name, Agent.last_seen).order_by(Agent.name)).all()
        yield _gauge(
            "p4relay_agent_last_seen_age_seconds",
            "seconds since the agent last reported",
            "agent",
            [(n, (now - t).total_seconds()) for n, t in agent_rows if t is not None],
        )
        episodes = congestion_episodes(
            self.db,
            since=now - dt.timedelta(seconds=1),
            until=now + dt.timedelta(seconds=1),
            open_only=True,
        )
        per_switch: dict[str, int] = {s.name: 0 for s in switches}
        for ep in episodes:
            per_switch[ep.switch or "unknown"] = per_switch.get(ep.switch or "unknown", 0) + 1
        yield _gauge(
            "p4relay_congestion_open",
            "congestion episodes open now (onset without clear)",
            "switch",
            [(k, float(v)) for k, v in sorted(per_switch.items())],
        )


def fleet_metrics(db: Session, now: dt.datetime | None = None) -> str:
    """The fleet in Prometheus' text format (0.0.4)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(FleetCollector(db, now or dt.datetime.now(dt.UTC)))
    return generate_latest(registry).decode()
