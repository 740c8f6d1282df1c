"""The control-plane INT loop: congestion anywhere on a watched destination's
path, as the INT sinks report it, moves the destination at this (the INT
source) switch to its backup next hop.

The sinks send their Telemetry Reports (the collector's format, decoded by
its `parse_report`) to `int_loop.listen`; each accepted report may be passed
on unchanged to the collector (`forward`), so one report stream feeds both.
Per hop (INT switch id, egress port), from every report that carries it:

- over onset: queue depth at dequeue >= `onset_cells` (or hop latency >=
  `onset_us` when set); `m` consecutive reports over onset make the hop
  congested, a report under onset resets the run;
- clear: no report with the hop over `clear_cells` / `clear_us` for
  `hold_ms`.

A report is on the primary path of a watch when its first hop is this
switch's own (`[int] switch_id`) leaving by the watch's `primary_port`. When
a hop becomes congested, every watch seen crossing it on its primary moves to
its backup (reroute.py writes `reroute_active`, as a data-plane notice does);
a later report on the primary crossing a congested hop moves its watch too.
The flow moves back when the hop stayed clear for `hold_ms` (reports of other
flows still crossing it, or none: after the hold it is tried again, as the
local detection's return does). A hop stays congested until a report finds
it under clear after the hold (hysteresis), so a flow back on a hop still
over clear moves again at once, and the next hold is doubled (reroute.py:
up to 8x), so a lasting congestion is probed ever less often; a hop that
cleared needs `m` reports over onset again.

Reports are taken only from `sources` (the sinks' report addresses): a
forged report from elsewhere cannot move a call. What the loop cannot see:
congestion on a hop no traced flow crosses, and anything faster than the
sinks' report suppression (one report per flow and second, besides onset,
clear and path changes).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
from dataclasses import dataclass, field

import structlog
from p4relay_collector.int_reports import CELL_BYTES, Hop, Report, ReportError, parse_report
from p4relay_collector.wire import PayloadValue
from p4relay_switch import SwitchError

from p4relay_controlplane import metrics
from p4relay_controlplane.config import IntLoopSection, RerouteWatchConfig, parse_listen
from p4relay_controlplane.reroute import HopKey, RerouteControl

log = structlog.get_logger("p4relay.controlplane.int_loop")

MAX_HOPS_TRACKED = 4096  # hops (switch id, port) kept: forged ids cannot grow memory past it


@dataclass
class HopState:
    run: int = 0  # consecutive reports over onset
    congested: bool = False
    over_clear_at: float = 0.0  # monotonic time of the last report over clear
    slots: set[int] = field(default_factory=set)  # watches seen crossing it on their primary
    last: Hop | None = None


class IntLoop:
    """Reports in, moves out (through `reroute`)."""

    def __init__(self, cfg: IntLoopSection, switch_id: int, reroute: RerouteControl) -> None:
        self.reroute = reroute
        self.hops: dict[HopKey, HopState] = {}
        self._transport: asyncio.DatagramTransport | None = None
        self._forward: socket.socket | None = None
        self._pending: set[asyncio.Task[None]] = set()
        self.configure(cfg, switch_id)
        reroute.hop_clear_since = self.clear_since

    def configure(self, cfg: IntLoopSection, switch_id: int) -> None:
        self.cfg = cfg
        self.switch_id = switch_id
        self.sources = {str(a) for a in cfg.sources}
        self.forward_to = parse_listen(cfg.forward) if cfg.forward else None
        self.reroute.int_hold_ms = cfg.hold_ms
        # longest prefix first: a report's destination takes its most specific watch
        self.watches = sorted(
            (w for w in self.reroute.cfg.watch if w.backup_nexthop_id is not None),
            key=lambda w: -w.prefix.prefixlen,
        )

    # ------------------------------------------------------------ the socket

    async def start(self) -> None:
        host, port = parse_listen(self.cfg.listen)
        loop = asyncio.get_running_loop()
        self._transport, _ = await loop.create_datagram_endpoint(
            lambda: _Protocol(self), local_addr=(host, port), family=socket.AF_INET
        )
        self._forward = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._forward.setblocking(False)
        log.info("int_loop_listening", listen=self.cfg.listen, forward=self.cfg.forward or None)

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
            self._transport = None
        if self._forward is not None:
            self._forward.close()
            self._forward = None

    def datagram(self, data: bytes, addr: tuple[str, int]) -> None:
        if addr[0] not in self.sources:
            metrics.INT_REPORTS.labels("foreign_source").inc()
            return
        try:
            r = parse_report(data)
        except ReportError as e:
            metrics.INT_REPORTS.labels("bad").inc()
            log.debug("int_report_bad", source=addr[0], reason=e.reason)
            return
        if self._forward is not None and self.forward_to is not None:
            try:
                self._forward.sendto(data, self.forward_to)
            except OSError as e:  # a full buffer or an unreachable collector loses this copy only
                metrics.INT_REPORTS_FORWARD_FAILED.inc()
                log.debug("int_report_forward_failed", error=str(e))
        moves = self.observe(r, time.monotonic())
        if moves:
            task = asyncio.get_running_loop().create_task(self._move(moves))
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)

    # ------------------------------------------------------------ the logic

    def _watch(self, dst: str) -> RerouteWatchConfig | None:
        try:
            a = ipaddress.IPv4Address(dst)
        except ValueError:
            return None
        return next((w for w in self.watches if a in w.prefix), None)

    def observe(self, r: Report, now: float) -> list[tuple[int, HopKey, Report]]:
        """One report: hop states updated; returns the (slot, congested hop,
        report) moves it calls for."""
        w = self._watch(r.flow.dst)
        first = r.hops[-1] if r.hops else None  # the source's hop (newest first on the wire)
        on_primary = (
            w is not None
            and first is not None
            and first.switch_id == self.switch_id
            and first.egress_port == w.primary_port
        )
        if w is None:
            metrics.INT_REPORTS.labels("unwatched").inc()
        else:
            metrics.INT_REPORTS.labels("primary" if on_primary else "not_primary").inc()
        moves: list[tuple[int, HopKey, Report]] = []
        for h in r.hops:
            key = (h.switch_id, h.egress_port)
            st = self.hops.get(key)
            if st is None:
                if len(self.hops) >= MAX_HOPS_TRACKED:
                    continue
                st = self.hops[key] = HopState()
            st.last = h
            over_clear = self._over_clear(h)
            if over_clear:
                st.over_clear_at = now
            st.run = st.run + 1 if self._over_onset(h) else 0
            if on_primary and w is not None:
                st.slots.add(w.slot)
            if not st.congested and st.run >= self.cfg.m:
                st.congested = True
                log.warning("int_hop_congested", hop=self._hop_name(key), **_hop_fields(h))
                moves += [(s, key, r) for s in sorted(st.slots)]
            elif st.congested and over_clear and on_primary and w is not None:
                moves.append((w.slot, key, r))  # still congested: back on it too early
            elif st.congested and now - st.over_clear_at >= self.cfg.hold_ms / 1000:
                st.congested = False
                log.info("int_hop_clear", hop=self._hop_name(key))
        metrics.INT_HOPS_CONGESTED.set(sum(1 for s in self.hops.values() if s.congested))
        return [m for m in moves if m[0] not in self.reroute.episodes]

    def clear_since(self, key: HopKey) -> float | None:
        """Monotonic time since which the hop is clear: its last report over
        clear (a hop no report carries any more counts as clear since then)."""
        st = self.hops.get(key)
        return 0.0 if st is None else st.over_clear_at

    def _over_onset(self, h: Hop) -> bool:
        c = self.cfg
        if c.onset_cells and h.queue_cells >= c.onset_cells:
            return True
        return bool(c.onset_us) and h.latency_ns >= c.onset_us * 1000

    def _over_clear(self, h: Hop) -> bool:
        c = self.cfg
        if c.onset_cells and h.queue_cells > c.clear_cells:
            return True
        return bool(c.onset_us) and h.latency_ns > c.clear_us * 1000

    def _hop_name(self, key: HopKey) -> str:
        return f"{self.cfg.name(key[0])} port {key[1]}"

    async def _move(self, moves: list[tuple[int, HopKey, Report]]) -> None:
        done: set[int] = set()
        for slot, key, r in moves:
            if slot in done:
                continue
            done.add(slot)
            st = self.hops[key]
            h = st.last
            if h is None:
                continue
            extra: dict[str, PayloadValue] = {
                "hop_switch": self.cfg.name(h.switch_id),
                "hop_switch_id": h.switch_id,
                "hop_port": h.egress_port,
                **_hop_fields(h),
                "reported_by": self.cfg.name(r.node_id),
                "int_path": ",".join(self.cfg.name(s) for s in r.path),
                "run": st.run,
            }
            what = f"queue {h.queue_cells} cells ({h.queue_cells * CELL_BYTES} B)"
            if self.cfg.onset_us:
                what += f", hop latency {h.latency_ns / 1000:.0f} us"
            trigger = (
                f"INT: {self._hop_name(key)} {what} over onset "
                f"({self.cfg.onset_cells} cells) in {st.run} reports (sink "
                f"{self.cfg.name(r.node_id)})"
            )
            try:
                await self.reroute.move_by_int(slot, key, trigger, extra)
            except SwitchError as e:  # the switch went away: the next report tries again
                log.warning("int_loop_move_failed", slot=slot, error=str(e))


def _hop_fields(h: Hop) -> dict[str, PayloadValue]:
    return {
        "hop_queue_cells": h.queue_cells,
        "hop_queue_bytes": h.queue_cells * CELL_BYTES,
        "hop_latency_us": round(h.latency_ns / 1000, 1),
    }


class _Protocol(asyncio.DatagramProtocol):
    def __init__(self, loop: IntLoop) -> None:
        self.loop = loop

    def datagram_received(self, data: bytes, addr: tuple[str | int, ...]) -> None:
        self.loop.datagram(data, (str(addr[0]), int(addr[1])))

    def error_received(self, exc: Exception) -> None:
        log.warning("int_loop_socket_error", error=str(exc))
