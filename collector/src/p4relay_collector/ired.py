"""iRED per port: the settings (`pipe.Egress.ired_port`) and registers of each
port with iRED on, read every poll through `p4relay_switch.ired`, turned into
Prometheus series and `ired_drop` events (one per port and poll in which iRED
dropped, decided or spared anything).

A switch whose program has no iRED (the lean and large Tofino builds) is read
once, found without the table, and not asked again until it reconnects.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import uuid
from dataclasses import dataclass

import structlog
from p4relay_switch import SchemaError, SwitchClient
from p4relay_switch.ired import IredPortState, IredSettings, ired_settings, ired_state
from p4relay_switch.names import IRED_CELL_BYTES, IRED_PORT
from prometheus_client import Gauge

from p4relay_collector import metrics
from p4relay_collector.wire import Event

log = structlog.get_logger("p4relay.collector")


@dataclass(frozen=True, slots=True)
class IredReading:
    """One port's iRED settings and registers at one poll."""

    dev_port: int
    settings: IredSettings
    state: IredPortState


def _grown(now: int, before: int) -> int:
    """Counter growth; a counter that went down was reset (or wrapped at 32 bits)."""
    return now - before if now >= before else now


def _settings_metrics(label: tuple[str, str], s: IredSettings) -> None:
    for name, cells in (
        ("max_len_queue", s.max_len_queue),
        ("min", s.min_thsld),
        ("max", s.max_thsld),
    ):
        metrics.IRED_THRESHOLD_BYTES.labels(*label, name).set(cells * IRED_CELL_BYTES)
    metrics.IRED_DROP_PROB.labels(*label).set(s.drop_prob)
    mode = "tail_drop" if s.tail_drop else ("ired_protect" if s.protect else "ired")
    for m in ("ired", "ired_protect", "tail_drop"):
        metrics.IRED_MODE.labels(*label, m).set(int(m == mode))


def _forget(switch: str, port: int) -> None:
    """A port back on tail drop (iRED off, e.g. an agent reload dropped it): its
    settings and queue average leave /metrics; its counters stay (they only grow)."""
    label = (switch, str(port))
    series: list[tuple[Gauge, tuple[str, ...]]] = [
        (metrics.IRED_QAVG_BYTES, label),
        (metrics.IRED_DROP_PROB, label),
    ]
    series += [(metrics.IRED_THRESHOLD_BYTES, (*label, t)) for t in ("max_len_queue", "min", "max")]
    series += [(metrics.IRED_MODE, (*label, m)) for m in ("ired", "ired_protect", "tail_drop")]
    for gauge, values in series:
        with contextlib.suppress(KeyError):  # never shown
            gauge.remove(*values)


class IredTracker:
    """The previous reading of each port of one switch."""

    def __init__(self, switch: str) -> None:
        self.switch = switch
        self.prev: dict[int, IredPortState] = {}
        self.absent = False
        self.shown: set[int] = set()  # ports with settings gauges on /metrics

    def reset(self) -> None:
        """After a reconnect: the program may have changed."""
        self.prev = {}
        self.absent = False

    async def read(self, sw: SwitchClient) -> list[IredReading]:
        if self.absent:
            return []
        try:
            sw.schema.table(IRED_PORT)
        except SchemaError:
            self.absent = True
            log.info("switch program has no iRED", switch=self.switch)
            return []
        settings = await ired_settings(sw)
        if not settings:
            return []
        states = await ired_state(sw, sorted(settings))
        return [IredReading(p, settings[p], states[p]) for p in sorted(settings)]

    def events(self, readings: list[IredReading], ts: dt.datetime) -> list[Event]:
        """`ired_drop` events for what changed since the previous poll; the
        port's gauges and counters."""
        out: list[Event] = []
        seen: dict[int, IredPortState] = {}
        for r in readings:
            st, p = r.state, r.dev_port
            seen[p] = st
            label = (self.switch, str(p))
            metrics.IRED_QAVG_BYTES.labels(*label).set(st.qavg * IRED_CELL_BYTES)
            _settings_metrics(label, r.settings)
            before = self.prev.get(p)
            if before is None:
                continue  # the first reading is the baseline
            d_drops = _grown(st.drops, before.drops)
            d_decisions = _grown(st.decisions, before.decisions)
            d_spared = _grown(st.spared, before.spared)
            d_tail = _grown(st.tail_drops, before.tail_drops)
            metrics.IRED_DROPS.labels(*label).inc(d_drops)
            metrics.IRED_DECISIONS.labels(*label).inc(d_decisions)
            metrics.IRED_SPARED.labels(*label).inc(d_spared)
            metrics.IRED_TAIL_DROPS.labels(*label).inc(d_tail)
            if d_drops == 0 and d_decisions == 0 and d_spared == 0 and d_tail == 0:
                continue
            s = r.settings
            out.append(
                Event(
                    event_id=str(uuid.uuid4()),
                    type="ired_drop",
                    ts=ts,
                    severity="info",
                    switch=self.switch,
                    message=(
                        f"port {p}: iRED dropped {d_drops}, decided {d_decisions}, "
                        f"spared {d_spared} protected"
                        + (f", tail-dropped {d_tail}" if s.tail_drop else "")
                    ),
                    payload={
                        "dev_port": p,
                        "drops": d_drops + d_tail,
                        "ingress_drops": d_drops,
                        "tail_drops": d_tail,
                        "decisions": d_decisions,
                        "flags_set": _grown(st.flags_set, before.flags_set),
                        "spared": d_spared,
                        "qavg_bytes": st.qavg * IRED_CELL_BYTES,
                        "min_thsld_bytes": s.min_thsld * IRED_CELL_BYTES,
                        "max_thsld_bytes": s.max_thsld * IRED_CELL_BYTES,
                        "mode": "tail_drop" if s.tail_drop else "ired",
                        "protect": s.protect,
                    },
                )
            )
        self.prev = seen
        for p in self.shown - set(seen):
            _forget(self.switch, p)
        self.shown = set(seen)
        return out
