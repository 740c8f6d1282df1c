"""The switch's notifications about calls: learn digests (a new source at a
relay port: the party's first packet, a NAT's port, or a stranger) and idle
timeouts (no media on a relay entry for its TTL).

A learn digest latches a stream through the learning policy (`learning.py`),
or, on an offloaded call, names a foreign source the relay guard dropped.
Both RTP directions idle: the session has timed out (`on_timeout`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Protocol

import structlog
from p4relay_switch import FlowKey, LearnEvent, RelayIdle

from . import metrics
from .learning import Judgement, Learner, LearnPolicy, Verdict
from .planner import Plan, Planner, PortBinding, source
from .state import Endpoint, OffloadState, Session, SessionTable
from .switchport import Switch

log = structlog.get_logger("rtpagent.switch_events")

FOREIGN_SOURCES_KEPT = 8  # per session: logged and reported; beyond, only counted


class OffloadView(Protocol):
    """What the handler needs of the offloader."""

    table: SessionTable
    switch: Switch
    planner: Planner

    def at_port(self, addr: str, port: int) -> tuple[str, int, bool] | None:
        """(session uid, stream index, rtcp) using this relay port."""
        ...

    def flow_owner(self, key: FlowKey) -> tuple[str, int, bool] | None:
        """(session uid, stream index, rtcp) whose relay entry this is."""
        ...

    def plan_of(self, uid: str) -> Plan | None: ...

    def touch(self, s: Session) -> None: ...

    def emit(self, kind: str, s: Session, **payload: object) -> None: ...


class SwitchEventHandler:
    def __init__(self, view: OffloadView, learner: Learner) -> None:
        self.view = view
        self.learner = learner
        self.on_timeout: Callable[[Session], None] | None = None
        # The port of the first digest of an open learning window (a second
        # source in the window, from any port, refuses both).
        self._window_port: dict[tuple[str, int], int] = {}

    async def on_learn(self, ev: LearnEvent) -> None:
        hit = self.view.at_port(str(ev.dst.addr), ev.dst.port)
        metrics.DIGESTS.inc()
        if hit is None:
            return
        uid, i, rtcp = hit
        s = self.view.table.by_uid.get(uid)
        if s is None:
            return
        st = s.streams[i]
        src = Endpoint(str(ev.src.addr), ev.src.port)
        p = self.view.plan_of(s.uid)
        planner = self.view.planner
        if planner.port_binding is PortBinding.ROUTE and planner.routes is None:
            # The switch's routes are not read yet: no port can be judged. The
            # learn filter reports the flow again (learn_filter_age_ms).
            log.info("learn_deferred_no_routes", call_id=s.call_id, src=src.key())
            return
        if not planner.accepts_port(s, i, src.addr, ev.ingress_port):
            # The party's address (or anyone's) on a port its media does not
            # arrive on: a spoofed source. Its packets miss the relay entries
            # (the guard drops them on an offloaded call); never latched.
            self._spoofed(s, i, ev, src)
            return
        if rtcp:
            if st.learned_rtcp is None and self._rtcp_acceptable(s, i, src, p is not None):
                st.learned_rtcp = src
                if p is not None or s.state is OffloadState.LEARNING:
                    self.view.touch(s)
            elif p is not None and src != st.learned_rtcp:
                self._foreign(s, ev, src)
            return
        if st.learned == src or (st.learned is None and st.sdp == src and p is not None):
            if st.ingress_port is None:
                # Learned binding: the signalled source's first packet names its port.
                st.ingress_port = ev.ingress_port
                self.view.touch(s)
            return
        if st.learned is not None:
            # Latched already: packets from elsewhere are not relayed (RTPProxy
            # ignores them; on an offloaded call the guard drops them).
            if p is not None:
                self._foreign(s, ev, src)
            else:
                log.info("stray_source", call_id=s.call_id, src=src.key())
            return
        if p is not None:
            # The leg counts only what its relay entries matched: packets
            # there mean the planned source is the party, latched already.
            key = next(r.key for r in p.relays if not r.rtcp and r.leg == p.legs[i].leg)
            leg = p.legs[i].leg
            counts = await self.view.switch.read_leg_counters([leg])
            c = counts.get(leg)
            if c is not None and c.packets > 0:
                st.learned = Endpoint(key.src_addr, key.src_port)  # latched by traffic already
                self._foreign(s, ev, src)
                return
        expected = st.sdp
        trusted = expected is not None and self.view.planner.trusted(expected)
        loop = asyncio.get_running_loop()
        j = self.learner.judge(s.uid, i, src, expected, trusted, loop.time())
        if j.verdict is Verdict.LATCH:
            self._latch(s, i, src, ev.ingress_port)
        elif j.verdict is Verdict.REFUSE:
            self._refuse_learn(s, i, j)
        elif j.opened is not None:
            # A new learning window: decided when it closes.
            self._window_port[(s.uid, i)] = ev.ingress_port
            loop.call_later(self.learner.window_s, self._window_closed, s.uid, i, j.opened)

    def _latch(self, s: Session, i: int, src: Endpoint, port: int) -> None:
        st = s.streams[i]
        st.learned = src
        st.ingress_port = port
        log.info("latched", call_id=s.call_id, tag=s.tag, side=i, src=src.key(), port=port)
        self.view.touch(s)

    def _spoofed(self, s: Session, i: int, ev: LearnEvent, src: Endpoint) -> None:
        """A source on the wrong switch port: counted, logged and reported
        once per source (up to FOREIGN_SOURCES_KEPT per call)."""
        metrics.LEARN_REFUSED.labels("ingress_port").inc()
        text = str(src)
        if not self.learner.note_refused(s.uid, f"{text}@{ev.ingress_port}", FOREIGN_SOURCES_KEPT):
            return
        st = s.streams[i]
        expected = self.view.planner.route_port(src.addr) if st.ingress_port is None else None
        log.warning(
            "spoofed_source",
            call_id=s.call_id,
            tag=s.tag,
            side=i,
            src=text,
            ingress_port=ev.ingress_port,
            bound_port=st.ingress_port if st.ingress_port is not None else expected,
        )
        self.view.emit(
            "learn_refused",
            s,
            source=text,
            expected=str(st.sdp) if st.sdp else None,
            policy=str(self.learner.policy),
            relay_port=st.port,
            reason="ingress_port",
            ingress_port=ev.ingress_port,
        )

    def _window_closed(self, uid: str, i: int, opened: float) -> None:
        src = self.learner.candidate(uid, i)
        j = self.learner.window_closed(uid, i, opened)
        s = self.view.table.by_uid.get(uid)
        port = self._window_port.pop((uid, i), None)
        if j is None or s is None or s.streams[i].learned is not None:
            return
        if j.verdict is Verdict.LATCH and src is not None and port is not None:
            self._latch(s, i, src, port)
        elif j.verdict is Verdict.REFUSE:
            self._refuse_learn(s, i, j)

    def _refuse_learn(self, s: Session, i: int, j: Judgement) -> None:
        """Sources the learning policy did not accept: counted, logged and
        reported once per source (up to FOREIGN_SOURCES_KEPT per call)."""
        st = s.streams[i]
        for src in j.refused:
            metrics.LEARN_REFUSED.labels(j.reason).inc()
            text = str(src)
            if not self.learner.note_refused(s.uid, text, FOREIGN_SOURCES_KEPT):
                continue
            log.warning(
                "learn_refused",
                call_id=s.call_id,
                tag=s.tag,
                side=i,
                src=text,
                expected=str(st.sdp) if st.sdp else None,
                reason=j.reason,
            )
            self.view.emit(
                "learn_refused",
                s,
                source=text,
                expected=str(st.sdp) if st.sdp else None,
                policy=str(self.learner.policy),
                relay_port=st.port,
                reason=j.reason,
            )

    def _rtcp_acceptable(self, s: Session, i: int, src: Endpoint, installed: bool) -> bool:
        """May this source latch the stream's RTCP? RTCP comes from its RTP
        source's address (a NAT may pick another port). Under the strict policy
        an unlatched stream whose signalled address is not trusted waits for
        its RTP source first."""
        st = s.streams[i]
        if self.learner.policy is LearnPolicy.FIRST:
            return not installed or self._rtcp_from_party(s, i, src)
        if st.learned is None and (st.sdp is None or not self.view.planner.trusted(st.sdp)):
            return False
        return self._rtcp_from_party(s, i, src)

    def _rtcp_from_party(self, s: Session, i: int, src: Endpoint) -> bool:
        """An offloaded stream's RTCP comes from its RTP source's address (a NAT
        may pick another port); another address is foreign, not a latch."""
        return src.addr == source(s, i).addr

    def _foreign(self, s: Session, ev: LearnEvent, src: Endpoint) -> None:
        """A packet from someone else hit an offloaded call's guarded port: the
        switch dropped it (never relayed, never latched by RTPProxy)."""
        metrics.GUARD_FOREIGN.inc()
        text = str(src)
        if text in s.foreign_sources or len(s.foreign_sources) >= FOREIGN_SOURCES_KEPT:
            return  # logged once per source; the counters keep counting
        s.foreign_sources.append(text)
        log.warning(
            "foreign_media_dropped",
            call_id=s.call_id,
            tag=s.tag,
            src=text,
            relay=str(ev.dst),
        )

    def on_idle(self, ev: RelayIdle) -> None:
        hit = self.view.flow_owner(ev.key)
        if hit is None:
            return
        uid, i, rtcp = hit
        s = self.view.table.by_uid.get(uid)
        if s is None or rtcp:
            return
        if not ev.idle:
            s.idle_since[i] = None
            return
        s.idle_since[i] = time.monotonic()
        if all(t is not None for t in s.idle_since):
            log.info("switch_idle_timeout", call_id=s.call_id, tag=s.tag)
            metrics.IDLE_TIMEOUTS.inc()
            if self.on_timeout is not None:
                self.on_timeout(s)
