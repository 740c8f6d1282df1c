"""Which media source a stream may latch to (RTP Bleed protection).

RTPProxy latches a stream to the first packet it gets; the switch reports
every new source to a relay port (the learn digest). Handing a stream to the
first packet lets a stranger who sends to a relay port before the real party
(early media, a slow phone, a pause after the answer) take the party's place
for the rest of the call. The policy:

* ``strict`` (default): a source is latched only when
  - its address is the one signalling gave for the party (the command's
    address: the SDP's, or the SIP message's source when the SIP server
    substitutes it); the port may differ (a NAT picks its own), or
  - signalling's address is not trusted (inside ``--nat-nets`` or with
    ``--latch-always``: the party is behind a NAT and its public address is
    unknown) and the source is the only one seen for that stream over the
    learning window (``--learn-window-ms``). Two sources in one window: both
    refused, and the next window starts with the next packet.
  Anything else is refused and reported (event ``learn_refused``).
* ``first``: RTPProxy's own rule, the first source wins.

A refused source never reaches the other party: on an offloaded call the
switch's guard drops its packets; a call still learning stays on RTPProxy.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from .state import Endpoint


class LearnPolicy(enum.StrEnum):
    STRICT = "strict"
    FIRST = "first"


class Verdict(enum.Enum):
    LATCH = "latch"
    WAIT = "wait"  # a candidate: decided when the learning window closes
    REFUSE = "refuse"


@dataclass(frozen=True, slots=True)
class Judgement:
    verdict: Verdict
    reason: str = ""
    refused: tuple[Endpoint, ...] = ()  # for REFUSE: every source refused now
    opened: float | None = None  # for WAIT: a new window opened at this time


@dataclass
class _Window:
    opened: float
    sources: list[Endpoint] = field(default_factory=list)


class Learner:
    """The learning windows of the streams that await a latch; pure bookkeeping
    (the caller owns the clock and the timers)."""

    def __init__(self, policy: LearnPolicy = LearnPolicy.STRICT, window_s: float = 2.0) -> None:
        self.policy = policy
        self.window_s = window_s
        self._windows: dict[tuple[str, int], _Window] = {}
        self._refused: dict[str, list[str]] = {}  # per session: sources reported

    def note_refused(self, uid: str, source: str, keep: int) -> bool:
        """Record a refused source; True the first time (up to `keep` per session)."""
        seen = self._refused.setdefault(uid, [])
        if source in seen or len(seen) >= keep:
            return False
        seen.append(source)
        return True

    def refused(self, uid: str) -> list[str]:
        return list(self._refused.get(uid, ()))

    def judge(
        self,
        uid: str,
        side: int,
        src: Endpoint,
        expected: Endpoint | None,
        expected_trusted: bool,
        now: float,
    ) -> Judgement:
        """A new source for stream `side` of session `uid`, which is not latched yet."""
        if self.policy is LearnPolicy.FIRST:
            return Judgement(Verdict.LATCH)
        if expected is not None and src.addr == expected.addr:
            self._windows.pop((uid, side), None)
            return Judgement(Verdict.LATCH)
        if expected is not None and expected_trusted:
            return Judgement(Verdict.REFUSE, "not_signalled_address", (src,))
        key = (uid, side)
        w = self._windows.get(key)
        if w is None or now - w.opened > self.window_s:
            self._windows[key] = _Window(now, [src])
            return Judgement(Verdict.WAIT, opened=now)
        if src not in w.sources:
            w.sources.append(src)
        return Judgement(Verdict.WAIT)

    def window_closed(self, uid: str, side: int, opened: float) -> Judgement | None:
        """The window opened at `opened` is over: the one source seen latches;
        several are all refused. None if that window is gone (decided
        meanwhile, or replaced by a later one)."""
        w = self._windows.get((uid, side))
        if w is None or w.opened != opened:
            return None
        del self._windows[(uid, side)]
        if len(w.sources) == 1:
            return Judgement(Verdict.LATCH)
        return Judgement(Verdict.REFUSE, "several_sources", tuple(w.sources))

    def candidate(self, uid: str, side: int) -> Endpoint | None:
        w = self._windows.get((uid, side))
        return w.sources[0] if w is not None and len(w.sources) == 1 else None

    def forget(self, uid: str) -> None:
        """The session ended."""
        for side in (0, 1):
            self._windows.pop((uid, side), None)
        self._refused.pop(uid, None)
