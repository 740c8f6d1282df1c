"""One-way media: one direction of an offloaded call silent while the other flows.

A party that died (kill -9, a crashed phone, a NAT binding gone) leaves the
other one sending: the media has not stopped both ways, so no idle timeout
ends the call, and the switch relays into the void. The switch counts each
direction (one leg counter per direction), and the sampler reads them every
interval; `OneWay` is fed each leg's new packets from there and decides:

* one_way_media: direction d had no packets for `after_s` while the other
  direction had some within the last `after_s`; reported once, until
* one_way_media_cleared: d carries packets again (or the other direction
  stops too, which is the idle timeout's business, not this one's).

A call put on hold the old way (SDP address 0.0.0.0, which RTPProxy's
protocol shows) is left alone; an `a=sendonly` hold is not visible to the
relay (the rtpproxy protocol does not carry it): a hold with music reads as
one-way media, and clears when the call is resumed.

With `notify_after_s`, a call one-way that long is told to the SIP server as
a media timeout (the same notification as RTPProxy's), so the dialog can end.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import structlog

from . import metrics
from .state import Session

log = structlog.get_logger("rtpagent.oneway")

# Stream index i carries what party i sends (state.py): 1 the caller, 0 the callee.
DIRECTIONS = ("callee_to_caller", "caller_to_callee")

Emit = Callable[..., None]


@dataclass
class _Call:
    since: float  # first seen by the detector (offloaded then)
    last: list[float | None] = field(
        default_factory=lambda: [None, None]
    )  # last packets, per index
    silent: int | None = None  # the index reported one-way, if any
    silent_from: float = 0.0
    notified: bool = False


class OneWay:
    def __init__(
        self,
        after_s: float,
        emit: Emit,
        *,
        notify_after_s: float = 0.0,
        notify_sip: Callable[[Session], None] | None = None,
    ) -> None:
        """`after_s` 0: off. `emit(kind, session, **payload)`: the offloader's
        notifications (reporter, journal)."""
        if after_s < 0 or notify_after_s < 0:
            raise ValueError("one-way media timeouts must not be negative")
        self.after_s = after_s
        self.notify_after_s = notify_after_s
        self.emit = emit
        self.notify_sip = notify_sip
        self._calls: dict[str, _Call] = {}
        self._sessions: dict[str, Session] = {}
        metrics.ONE_WAY_CALLS.set_function(self.count)

    def count(self) -> int:
        return sum(1 for c in self._calls.values() if c.silent is not None)

    def observe(self, s: Session, i: int, packets: int, now: float) -> None:
        """Leg `i` of `s` (offloaded) carried `packets` new packets by `now`."""
        if not self.after_s:
            return
        c = self._calls.get(s.uid)
        if c is None:
            c = self._calls[s.uid] = _Call(since=now)
            self._sessions[s.uid] = s
        if packets > 0:
            c.last[i] = now

    def evaluate(self, now: float, live: set[str]) -> None:
        """After a sampling round: `live` are the sessions the switch carries."""
        for uid in [u for u in self._calls if u not in live]:
            # Ended or taken back: nothing to say any more (the call's end is its own event).
            del self._calls[uid]
            del self._sessions[uid]
        for uid, c in self._calls.items():
            self._judge(self._sessions[uid], c, now)

    def _judge(self, s: Session, c: _Call, now: float) -> None:
        held = any(st.on_hold for st in s.streams)
        quiet = [now - (t if t is not None else c.since) for t in c.last]
        if c.silent is not None:
            d = c.silent
            if quiet[d] < self.after_s or quiet[1 - d] >= self.after_s or held:
                # It talks again, or both are quiet (idle timeout's case), or held.
                self._report(s, "one_way_media_cleared", d, now - c.silent_from)
                c.silent, c.notified = None, False
            elif (
                self.notify_after_s
                and not c.notified
                and now - c.silent_from >= self.notify_after_s
                and self.notify_sip is not None
            ):
                c.notified = True
                log.info("one_way_media_timeout", call_id=s.call_id, tag=s.tag)
                self.notify_sip(s)
            return
        if held:
            return
        for d in (0, 1):
            if quiet[d] >= self.after_s and quiet[1 - d] < self.after_s:
                # Silent since its last packet (or since the call was offloaded).
                c.silent, c.silent_from = d, now - quiet[d]
                metrics.ONE_WAY.labels(DIRECTIONS[d]).inc()
                self._report(s, "one_way_media", d, quiet[d])
                return

    def _report(self, s: Session, kind: str, d: int, silent_s: float) -> None:
        log.info(kind, call_id=s.call_id, tag=s.tag, direction=DIRECTIONS[d], silent_s=silent_s)
        self.emit(
            kind,
            s,
            direction=DIRECTIONS[d],
            silent_s=round(silent_s, 3),
            after_s=self.after_s,
        )
