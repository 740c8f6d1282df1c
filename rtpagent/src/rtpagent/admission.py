"""What one command source (a SIP server's address) may create.

A source that sends `U`s for ever new calls (a fuzzer, a looping SIP server,
a spoofed peer on the control network) would make RTPProxy allocate ports
and memory and the agent track sessions without end. Per source the agent
bounds the rate of new sessions (token bucket) and the number it holds; a
`U` over either is answered `E98` (RTPProxy's own overload answer: the SIP
server treats it as RTPProxy refusing the call) and never reaches RTPProxy.
Commands on existing sessions are never refused.
"""

from __future__ import annotations

import time
from collections import OrderedDict

import structlog
from prometheus_client import Counter, Gauge

from .protocol import ECODE_OVERLOAD, Command, Op
from .state import Session, SessionTable

log = structlog.get_logger("rtpagent.admission")

REFUSED = Counter(
    "rtpagent_admission_refused_total",
    "New sessions refused (E98) because their source was over a limit",
    ["reason"],
)
SOURCES = Gauge("rtpagent_admission_sources", "Command sources holding sessions")
PENDING_MAX = 65536  # new sessions asked for, waiting for RTPProxy's answer


class Admission:
    def __init__(
        self, table: SessionTable, per_second: float, burst: int, max_sessions: int
    ) -> None:
        self.table = table
        self.rate = per_second
        self.burst = max(1.0, float(burst))
        self.max_sessions = max_sessions
        self._buckets: dict[str, tuple[float, float]] = {}  # source -> (tokens, at)
        self.held: dict[str, int] = {}  # source -> live sessions it created
        # (call-id, tag) of a U let through -> its source, until it is created.
        self._pending: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._logged: dict[str, float] = {}

    def check(self, source: str, cmd: Command) -> int | None:
        """None: go on; otherwise the E code to answer with."""
        if cmd.op is not Op.UPDATE or cmd.call_id is None or cmd.from_tag is None:
            return None
        if self.table.find_stream(cmd.call_id, cmd.from_tag, cmd.to_tag) is not None:
            return None  # an existing session: never refused
        if self.held.get(source, 0) >= self.max_sessions:
            return self._refuse(source, "sessions", cmd)
        now = time.monotonic()
        tokens, at = self._buckets.get(source, (self.burst, now))
        tokens = min(self.burst, tokens + (now - at) * self.rate)
        if tokens < 1.0:
            self._buckets[source] = (tokens, now)
            return self._refuse(source, "rate", cmd)
        self._buckets[source] = (tokens - 1.0, now)
        if len(self._buckets) > PENDING_MAX:
            self._buckets.pop(next(iter(self._buckets)))
        self._pending[(cmd.call_id, cmd.from_tag)] = source
        self._pending.move_to_end((cmd.call_id, cmd.from_tag))
        while len(self._pending) > PENDING_MAX:
            self._pending.popitem(last=False)
        return None

    def _refuse(self, source: str, reason: str, cmd: Command) -> int:
        REFUSED.labels(reason).inc()
        now = time.monotonic()
        if now - self._logged.get(source, 0.0) >= 1.0:  # at most once a second per source
            self._logged[source] = now
            log.warning(
                "new_session_refused",
                source=source,
                reason=reason,
                held=self.held.get(source, 0),
                limit=self.max_sessions if reason == "sessions" else self.rate,
                call_id=(cmd.call_id or "")[:128],
            )
        return ECODE_OVERLOAD

    def on_event(self, kind: str, s: Session, payload: dict[str, object]) -> None:
        """Offloader listener: attribute created sessions, release ended ones."""
        if kind == "created":
            src = self._pending.pop((s.call_id, s.tag), None)
            if src is not None and not s.source:
                s.source = src
            if s.source:
                self.held[s.source] = self.held.get(s.source, 0) + 1
                SOURCES.set(len(self.held))
        elif kind == "ended" and s.source:
            left = self.held.get(s.source, 0) - 1
            if left > 0:
                self.held[s.source] = left
            else:
                self.held.pop(s.source, None)
                self._buckets.pop(s.source, None)
            SOURCES.set(len(self.held))

    def restore(self, s: Session) -> None:
        """A journalled session counts for its source again."""
        if s.source:
            self.held[s.source] = self.held.get(s.source, 0) + 1
            SOURCES.set(len(self.held))
