"""Maintenance and capacity: drain, evacuation, the offload cap.

Three modes, the most restrictive of what each source asks wins:

* ``active``: calls are offloaded.
* ``draining``: new calls stay on RTPProxy (reason ``draining``); calls on
  the switch stay there until they end (rtpengine's `maxsessions 0`).
* ``evacuated``: every call is on RTPProxy (reason ``evacuated``): the
  offloaded ones are taken back, keeping their counts, and none is offloaded
  until the mode is left. Before a switch upgrade, say.

Sources: ``local`` (the admin socket, SIGUSR1/SIGUSR2), ``agent`` and
``switch`` (the server's, operator-set, polled by `ServerControl`). A
switch the server has out of service evacuates every agent that programs it.

A take-back loses no media a listener hears: RTPProxy keeps each offloaded
session (the agent refreshes its timer) with the ports and addresses of the
call, so it relays whatever reaches it; the removal deletes the relay
guards, then the relay entries, then the legs in one ordered write, so
every packet is either rewritten by the switch or, from the moment its
relay entry is gone, forwarded by the switch's routes to RTPProxy.

The cap (``max_offloaded_calls``, or the server's per switch, the lower
wins) bounds the calls on the switch: above it new calls stay on RTPProxy
(reason ``capacity``) and get their turn as offloaded calls end.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from typing import Any

import structlog
from p4relay_switch.names import UNBOUND_PORT
from prometheus_client import Counter, Gauge, Histogram

from .offload import Offloader
from .state import OffloadState, Session

log = structlog.get_logger("rtpagent.maintenance")


class Mode(enum.StrEnum):
    ACTIVE = "active"
    DRAINING = "draining"
    EVACUATED = "evacuated"


SEVERITY = {Mode.ACTIVE: 0, Mode.DRAINING: 1, Mode.EVACUATED: 2}
SOURCES = ("local", "agent", "switch")
# Reasons a call stays on RTPProxy because of maintenance or the cap: such a
# call is planned again when the mode or the room changes.
HELD_REASONS = frozenset({"draining", "evacuated", "capacity"})
# Tofino: a dev port's pipe is its upper bits (dev_port >> 7).
PIPE_SHIFT = 7

MODE = Gauge(
    "rtpagent_maintenance_mode",
    "1 for the agent's maintenance mode now (active, draining, evacuated)",
    ["mode"],
)
MODE_REQUESTED = Gauge(
    "rtpagent_maintenance_requested",
    "1 for the mode each source asks for (local: admin socket or signal; agent, switch: "
    "the server's)",
    ["source", "mode"],
)
MODE_CHANGES = Counter(
    "rtpagent_maintenance_changes_total", "Maintenance mode changes", ["source", "mode"]
)
EVACUATIONS = Counter(
    "rtpagent_evacuations_total", "Evacuations completed (every offloaded call back on RTPProxy)"
)
EVACUATION_SECONDS = Histogram(
    "rtpagent_evacuation_seconds",
    "Evacuation asked -> the last offloaded call's entries removed from the switch",
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
)
EVACUATED_CALLS = Counter(
    "rtpagent_evacuated_calls_total", "Offloaded calls moved back to RTPProxy by an evacuation"
)
CAPACITY = Gauge(
    "rtpagent_offload_capacity_calls",
    "Calls the agent may offload to its switch (the cap, or the leg table's size / 2)",
)
HEADROOM = Gauge(
    "rtpagent_offload_headroom_calls", "Calls the switch can still take (capacity - offloaded)"
)
PIPE_CALLS = Gauge(
    "rtpagent_offloaded_calls_by_pipe",
    "Offloaded calls by the pipe of their caller's ingress port ('unbound': port binding off)",
    ["pipe"],
)


def pipe_of(port: int | None) -> str:
    if port is None or port == UNBOUND_PORT:
        return "unbound"
    return str(port >> PIPE_SHIFT)


class Maintenance:
    """The agent's maintenance mode and offload cap, applied to the planner."""

    def __init__(
        self,
        offloader: Offloader,
        *,
        max_offloaded_calls: int,
        legs: int,
        emit_event: Callable[[str, dict[str, Any]], None],
    ) -> None:
        self.offloader = offloader
        self.requested: dict[str, Mode] = dict.fromkeys(SOURCES, Mode.ACTIVE)
        self.configured_cap = max_offloaded_calls  # 0: no cap but the table's
        self.server_cap: int | None = None
        self.table_calls = legs // 2
        self._emit_event = emit_event
        self.mode = Mode.ACTIVE
        self.changed_at = time.time()
        self.changed_by = "start"
        # Evacuation under way: when it was asked and how many calls it moves.
        self._evac_t0: float | None = None
        self._evac_calls = 0
        self.last_evacuation: dict[str, Any] | None = None
        # Calls held for the cap, first come first served when room frees.
        self._waiting: dict[str, Session] = {}
        self._pipes: set[str] = set()
        offloader.listeners.append(self._on_event)
        # The install writer's rounds: a take-back is done only once its write is.
        after, writer = offloader.writer.after_round, offloader.writer

        def after_round() -> None:
            after()
            if self._evac_t0 is not None:
                self._check_evacuated()

        writer.after_round = after_round
        planner = offloader.planner
        planner.capacity = self.capacity
        planner.occupied = self.occupied
        self._publish()

    # ---------------------------------------------------------------- capacity
    def capacity(self) -> int:
        caps = [self.table_calls]
        if self.configured_cap > 0:
            caps.append(self.configured_cap)
        if self.server_cap is not None:
            caps.append(self.server_cap)
        return min(caps)

    def occupied(self) -> int:
        """Calls on the switch, and those the write under way adds."""
        return len(self.offloader.plans) + self.offloader.writer.adding

    def by_pipe(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for s, _p in self.offloader.offloaded():
            k = pipe_of(s.streams[1].ingress_port)
            out[k] = out.get(k, 0) + 1
        return out

    def set_server_cap(self, cap: int | None) -> None:
        if cap == self.server_cap:
            return
        self.server_cap = cap
        log.info("offload_cap_set", source="server", cap=cap, capacity=self.capacity())
        self._release_waiting()
        self._publish()

    # ---------------------------------------------------------------- mode
    def request(self, source: str, mode: Mode | str, by: str) -> Mode:
        """`source` asks for `mode`: the agent's mode is the most restrictive
        asked. Returns the mode now."""
        if source not in SOURCES:
            raise ValueError(f"unknown maintenance source {source!r}")
        mode = Mode(mode)
        if self.requested[source] is not mode:
            self.requested[source] = mode
            MODE_CHANGES.labels(source, mode.value).inc()
            log.info("maintenance_requested", source=source, mode=mode.value, by=by)
        self._apply(by=f"{source}:{by}")
        return self.mode

    def _apply(self, by: str) -> None:
        mode = max(self.requested.values(), key=SEVERITY.__getitem__)
        planner = self.offloader.planner
        planner.draining = mode is Mode.DRAINING
        planner.evacuating = mode is Mode.EVACUATED
        if mode is self.mode:
            self._publish()
            return
        prev, self.mode = self.mode, mode
        self.changed_at, self.changed_by = time.time(), by
        log.warning("maintenance_mode", mode=mode.value, previous=prev.value, by=by)
        offloaded = self.offloader.offloaded()
        if mode is Mode.EVACUATED:
            self._evac_t0 = time.monotonic()
            self._evac_calls = len(offloaded)
            for s, _p in offloaded:
                self.offloader.touch(s)
        else:
            self._evac_t0 = None
        if SEVERITY[mode] < SEVERITY[prev]:
            # Calls held for the mode get another chance (the cap still holds).
            for s in list(self.offloader.table):
                if s.reason in HELD_REASONS:
                    self.offloader.touch(s)
        self._event(
            "maintenance",
            {"mode": mode.value, "previous": prev.value, "by": by, "offloaded": len(offloaded)},
        )
        self._publish()
        self._check_evacuated()

    # ---------------------------------------------------------------- progress
    def _on_event(self, kind: str, s: Session, payload: dict[str, object]) -> None:
        if kind == "fallback" and payload.get("reason") == "capacity":
            self._waiting[s.uid] = s
        elif kind == "ended":
            self._waiting.pop(s.uid, None)
        # A call left the switch: room for one held for the cap.
        if kind in ("ended", "state") and s.state is not OffloadState.OFFLOADED and self._waiting:
            self._release_waiting()

    def _release_waiting(self) -> None:
        room = self.capacity() - self.occupied()
        while room > 0 and self._waiting:
            uid = next(iter(self._waiting))
            s = self._waiting.pop(uid)
            if uid in self.offloader.table.by_uid and s.reason == "capacity":
                self.offloader.touch(s)
                room -= 1
        self._publish()

    def _check_evacuated(self) -> None:
        if self._evac_t0 is None or self.offloader.plans:
            return
        seconds = time.monotonic() - self._evac_t0
        self._evac_t0 = None
        EVACUATIONS.inc()
        EVACUATION_SECONDS.observe(seconds)
        EVACUATED_CALLS.inc(self._evac_calls)
        self.last_evacuation = {
            "calls": self._evac_calls,
            "seconds": round(seconds, 4),
            "at": time.time(),
        }
        log.warning("evacuated", calls=self._evac_calls, seconds=round(seconds, 4))
        self._event("evacuated", {"calls": self._evac_calls, "seconds": round(seconds, 4)})

    def _event(self, kind: str, payload: dict[str, Any]) -> None:
        try:
            self._emit_event(kind, payload)
        except Exception:  # reporting must not stop a maintenance step
            log.exception("maintenance_event_failed", kind=kind)

    def _publish(self) -> None:
        for m in Mode:
            MODE.labels(m.value).set(1 if m is self.mode else 0)
            for src, want in self.requested.items():
                MODE_REQUESTED.labels(src, m.value).set(1 if want is m else 0)
        cap = self.capacity()
        CAPACITY.set(cap)
        HEADROOM.set(max(0, cap - len(self.offloader.plans)))

    def publish_pipes(self) -> dict[str, int]:
        pipes = self.by_pipe()
        for k in self._pipes - pipes.keys():  # pipes no call is on any more
            PIPE_CALLS.labels(k).set(0)
        for k, n in pipes.items():
            PIPE_CALLS.labels(k).set(n)
        self._pipes |= pipes.keys()
        HEADROOM.set(max(0, self.capacity() - len(self.offloader.plans)))
        return pipes

    def status(self) -> dict[str, Any]:
        offloaded = len(self.offloader.plans)
        cap = self.capacity()
        return {
            "mode": self.mode.value,
            "requested": {k: v.value for k, v in self.requested.items()},
            "changed_at": self.changed_at,
            "changed_by": self.changed_by,
            "offloaded": offloaded,
            "capacity": cap,
            "headroom": max(0, cap - offloaded),
            "cap": {
                "configured": self.configured_cap or None,
                "server": self.server_cap,
                "table": self.table_calls,
            },
            "by_pipe": self.publish_pipes(),
            "evacuating": self._evac_t0 is not None,
            "last_evacuation": self.last_evacuation,
        }
