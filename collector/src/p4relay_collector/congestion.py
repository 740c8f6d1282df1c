"""Congestion episodes per egress queue, from the queue samples the collector derives.

An episode starts (`congestion_onset`) when, for `onset_polls` consecutive
polls, the queue is over any onset threshold in use: queueing delay, depth, or
tail drops in the interval. It ends (`congestion_clear`) when, for
`clear_polls` consecutive polls, the queue is under every clear threshold in
use and drops nothing. Clear thresholds sit below onset thresholds
(hysteresis), so a queue hovering around one level does not flap. A switch
that stops answering ends its open episodes (nothing is known about them any
more). In-band telemetry reports feed the same detector.
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass, field
from typing import Literal

from p4relay_collector.config import Settings
from p4relay_collector.wire import Event, PayloadValue, QueueSample

Trigger = Literal["delay", "depth", "drops"]


@dataclass(frozen=True, slots=True)
class Thresholds:
    """A threshold of 0 is not used (for delay and depth, neither is its clear level)."""

    onset_delay_us: float = 20_000.0
    clear_delay_us: float = 5_000.0
    onset_depth_bytes: int = 150_000
    clear_depth_bytes: int = 30_000
    onset_drops: int = 1
    onset_polls: int = 1
    clear_polls: int = 3

    @classmethod
    def from_settings(cls, s: Settings) -> Thresholds:
        return cls(
            onset_delay_us=s.congestion_onset_delay_ms * 1000.0,
            clear_delay_us=s.congestion_clear_delay_ms * 1000.0,
            onset_depth_bytes=s.congestion_onset_depth_bytes,
            clear_depth_bytes=s.congestion_clear_depth_bytes,
            onset_drops=s.congestion_onset_drops,
            onset_polls=s.congestion_onset_polls,
            clear_polls=s.congestion_clear_polls,
        )

    def over(self, s: QueueSample) -> list[Trigger]:
        """The onset thresholds this sample reaches."""
        out: list[Trigger] = []
        if self.onset_delay_us and (s.queue_delay_us or 0.0) >= self.onset_delay_us:
            out.append("delay")
        if self.onset_depth_bytes and (s.depth_bytes or 0) >= self.onset_depth_bytes:
            out.append("depth")
        if self.onset_drops and s.drops >= self.onset_drops:
            out.append("drops")
        return out

    def under(self, s: QueueSample) -> bool:
        """Whether this sample is under every clear threshold in use, without drops."""
        if self.onset_delay_us and (s.queue_delay_us or 0.0) > self.clear_delay_us:
            return False
        if self.onset_depth_bytes and (s.depth_bytes or 0) > self.clear_depth_bytes:
            return False
        return not (self.onset_drops and s.drops > 0)


@dataclass(slots=True)
class _Queue:
    congested: bool = False
    over: int = 0  # consecutive polls over an onset threshold
    under: int = 0  # consecutive polls under every clear threshold
    since: dt.datetime | None = None
    triggers: list[Trigger] = field(default_factory=list)
    max_delay_us: float = 0.0
    max_depth_bytes: int = 0
    drops: int = 0


class CongestionDetector:
    """Episode state per (switch, dev_port, queue); `observe` each sample in time order."""

    def __init__(self, thresholds: Thresholds) -> None:
        self.thresholds = thresholds
        self._queues: dict[tuple[str, int, int], _Queue] = {}

    def open_episodes(self) -> list[tuple[str, int, int]]:
        return sorted(k for k, q in self._queues.items() if q.congested)

    def observe(self, s: QueueSample) -> Event | None:
        """The onset or clear event this sample causes, if any."""
        q = self._queues.setdefault((s.switch, s.dev_port, s.queue), _Queue())
        over = self.thresholds.over(s)
        q.over = q.over + 1 if over else 0
        q.under = q.under + 1 if self.thresholds.under(s) else 0
        if q.congested:
            q.max_delay_us = max(q.max_delay_us, s.queue_delay_us or 0.0)
            q.max_depth_bytes = max(q.max_depth_bytes, s.depth_bytes or 0)
            q.drops += s.drops
            if q.under >= self.thresholds.clear_polls:
                return self._clear(s.switch, s.dev_port, s.queue, q, s.ts, "below thresholds", s)
            return None
        if q.over >= self.thresholds.onset_polls:
            q.congested, q.since, q.triggers = True, s.ts, over
            q.max_delay_us = s.queue_delay_us or 0.0
            q.max_depth_bytes = s.depth_bytes or 0
            q.drops = s.drops
            payload: dict[str, PayloadValue] = {
                "dev_port": s.dev_port,
                "queue": s.queue,
                "trigger": ",".join(over),
                "queue_delay_us": s.queue_delay_us,
                "depth_bytes": s.depth_bytes,
                "drops": s.drops,
                "utilisation": s.utilisation,
                "source": "queue_poll",
            }
            what = ", ".join(
                {
                    "delay": f"queueing delay {(s.queue_delay_us or 0) / 1000:.1f} ms",
                    "depth": f"depth {s.depth_bytes or 0} B",
                    "drops": f"{s.drops} drops",
                }[t]
                for t in over
            )
            return _event("congestion_onset", "warning", s.switch, s.ts, what, payload)
        return None

    def switch_down(self, switch: str, ts: dt.datetime) -> list[Event]:
        """Ends the switch's open episodes: an unreachable switch tells nothing more."""
        out: list[Event] = []
        for key in sorted(self._queues):
            if key[0] != switch:
                continue
            q = self._queues.pop(key)
            if q.congested:
                out.append(self._clear(switch, key[1], key[2], q, ts, "switch unreachable"))
        return out

    def forget(self, switch: str) -> None:
        """A switch no longer registered: its state goes, without events."""
        for key in [k for k in self._queues if k[0] == switch]:
            del self._queues[key]

    def _clear(
        self,
        switch: str,
        dev_port: int,
        queue: int,
        q: _Queue,
        ts: dt.datetime,
        reason: str,
        last: QueueSample | None = None,
    ) -> Event:
        since = q.since or ts
        payload: dict[str, PayloadValue] = {
            "dev_port": dev_port,
            "queue": queue,
            "reason": reason,
            "queue_delay_us": last.queue_delay_us if last else None,
            "depth_bytes": last.depth_bytes if last else None,
            "utilisation": last.utilisation if last else None,
            "onset_ts": since.isoformat(),
            "duration_s": round((ts - since).total_seconds(), 3),
            "trigger": ",".join(q.triggers),
            "max_queue_delay_us": q.max_delay_us,
            "max_depth_bytes": q.max_depth_bytes,
            "drops": q.drops,
            "source": "queue_poll",
        }
        q.congested, q.since, q.triggers, q.over = False, None, [], 0
        return _event("congestion_clear", "info", switch, ts, reason, payload)


def _event(
    kind: Literal["congestion_onset", "congestion_clear"],
    severity: Literal["info", "warning"],
    switch: str,
    ts: dt.datetime,
    what: str,
    payload: dict[str, PayloadValue],
) -> Event:
    verb = "congestion on" if kind == "congestion_onset" else "congestion over on"
    return Event(
        event_id=str(uuid.uuid4()),
        type=kind,
        ts=ts,
        severity=severity,
        switch=switch,
        message=f"{verb} port {payload['dev_port']} queue {payload['queue']}: {what}",
        payload=payload,
    )
