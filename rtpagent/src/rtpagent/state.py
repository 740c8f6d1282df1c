"""Session state, mirroring RTPProxy's own model closely enough to predict it.

An RTPProxy session is one media stream of a call: (call-id, session tag) where
the session tag is the from-tag of the creating `U`, media number included
(`tag;2`). It has two streams; stream[i] receives on `port` from party i and is
sent to party i at `remote`:

  * stream 1 is the caller's side: the caller sends to its port, which RTPProxy
    returned to the answer (`L`); `U` (the offer) prefills its remote address.
  * stream 0 is the callee's side: port returned to the offer (`U`), remote
    prefilled by `L`.

A command with from-tag == session tag hits index 0, with to-tag == session
tag index 1 (`find_stream`); `U` replies with stream[idx]'s port and prefills
stream[1-idx]; all other commands use the flipped index. The agent reproduces
this to know, from each command and its reply, every port and address.
"""

from __future__ import annotations

import enum
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any


class OffloadState(enum.StrEnum):
    PENDING = "pending"  # not both legs known yet
    LEARNING = "learning"  # waiting for the first packet (NAT latch)
    OFFLOADED = "offloaded"  # entries active in the switch
    FALLBACK = "fallback"  # stays on RTPProxy; see `reason`
    HELD = "held"  # taken back: recording/copy/play/repacketise
    ENDED = "ended"


@dataclass
class Endpoint:
    addr: str
    port: int

    def key(self) -> tuple[str, int]:
        return (self.addr, self.port)

    def __str__(self) -> str:
        """`addr:port`, an IPv6 address in brackets (`[2001:db8::1]:4000`)."""
        return f"[{self.addr}]:{self.port}" if ":" in self.addr else f"{self.addr}:{self.port}"


@dataclass
class Stream:
    """One of RTPProxy's two streams of a session (see module doc)."""

    port: int | None = None  # relay port this party sends to
    laddr: str | None = None  # relay address (RTPProxy's reply)
    sdp: Endpoint | None = None  # where signalling says the party is
    learned: Endpoint | None = None  # real source, from the switch's learn digest
    learned_rtcp: Endpoint | None = None
    # The switch port (dev port) this party's media arrives on: its relay
    # entries match there only (see planner.PortBinding).
    ingress_port: int | None = None
    asymmetric: bool = False
    on_hold: bool = False
    codecs: tuple[int, ...] = ()
    ptime: int | None = None  # `z`: RTPProxy repacketises packets from this party
    weak: bool = False
    modifiers: str = ""  # the `U`/`L` modifiers that last set this side, for refresh


@dataclass
class Counters:
    """Totals moved off the switch (taken back, re-keyed) or read at the end."""

    # per stream index (from party i): its leg's counter, RTP and RTCP
    packets: list[int] = field(default_factory=lambda: [0, 0])
    bytes: list[int] = field(default_factory=lambda: [0, 0])
    lost: list[int] = field(default_factory=lambda: [0, 0])
    foreign_dropped: int = 0  # packets from other sources the guard dropped


@dataclass
class Session:
    call_id: str
    tag: str  # session tag: from-tag of the creating U, media number included
    uid: str = field(default_factory=lambda: uuid.uuid4().hex)
    to_tag: str | None = None
    streams: list[Stream] = field(default_factory=lambda: [Stream(), Stream()])
    strong: bool = False
    # The SIP server's own timeout notification target (from `U`).
    notify_socket: str | None = None
    notify_tag: str | None = None
    recording: bool = False
    copying: bool = False
    playing: list[bool] = field(default_factory=lambda: [False, False])
    state: OffloadState = OffloadState.PENDING
    reason: str | None = None
    legs: list[int] | None = None  # switch leg index per stream, while offloaded
    installed: dict[str, Any] | None = None  # the entries written, for removal
    switch_totals: Counters = field(default_factory=Counters)
    idle_since: list[float | None] = field(default_factory=lambda: [None, None])
    created: float = field(default_factory=time.time)
    last_refresh: float = field(default_factory=time.monotonic)
    offloaded_at: float | None = None
    # Wall-clock times from evidence: the answer's reply (both parties known),
    # and when media stopped if the agent learnt of the end only later (idle
    # entries, the switch's time left on them); None: the end is when it is seen.
    answered_at: float | None = None
    ended_at: float | None = None
    # The switch legs it was last given (kept past their release) and when its
    # entries left the switch: what its report's legs say after the removal.
    legs_used: list[int] | None = None
    removed_at: float | None = None
    # Why the agent took it over from RTPProxy instead of seeing its `U`:
    # created while the agent was away ("agent_away"), found at start.
    adopted: str | None = None
    refresh_cmd: str | None = None  # an `L` that re-states the session (timer refresh)
    notify_token: str | None = None  # the tag RTPProxy notifies the agent with
    pending_since: float | None = None  # perf_counter() of the reply that made it offloadable
    # Sources the relay guard dropped (from learn digests; a few, for the
    # report): their packets never reached RTPProxy or the other party.
    foreign_sources: list[str] = field(default_factory=list)
    # The last `seq` of this session's reports (journalled: a restarted agent
    # goes on from it; the server ignores a report whose seq is not higher).
    report_seq: int = 0
    # The command source (SIP server address) whose `U` created it: what
    # that source holds counts against its limit (admission.py).
    source: str | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.call_id, self.tag)

    @property
    def medianum(self) -> int:
        _, _, num = self.tag.rpartition(";")
        return int(num) if (num.isascii() and num.isdigit()) else 1

    def held_back_reason(self) -> str | None:
        """Why RTPProxy must carry this session's media itself, if it must."""
        if self.recording:
            return "recording"
        if self.copying:
            return "copying"
        if any(self.playing):
            return "playing"
        if any(s.ptime for s in self.streams):
            return "repacketising"
        return None

    def to_json(self) -> dict[str, Any]:
        # Hand-written: dataclasses.asdict deep-copies and dominated the profile.
        def ep(e: Endpoint | None) -> dict[str, Any] | None:
            return None if e is None else {"addr": e.addr, "port": e.port}

        return {
            "call_id": self.call_id,
            "tag": self.tag,
            "uid": self.uid,
            "to_tag": self.to_tag,
            "streams": [
                {
                    "port": st.port,
                    "laddr": st.laddr,
                    "sdp": ep(st.sdp),
                    "learned": ep(st.learned),
                    "learned_rtcp": ep(st.learned_rtcp),
                    "ingress_port": st.ingress_port,
                    "asymmetric": st.asymmetric,
                    "on_hold": st.on_hold,
                    "codecs": list(st.codecs),
                    "ptime": st.ptime,
                    "weak": st.weak,
                    "modifiers": st.modifiers,
                }
                for st in self.streams
            ],
            "strong": self.strong,
            "notify_socket": self.notify_socket,
            "notify_tag": self.notify_tag,
            "recording": self.recording,
            "copying": self.copying,
            "playing": list(self.playing),
            "state": self.state.value,
            "reason": self.reason,
            "legs": list(self.legs) if self.legs else None,
            "installed": None,
            "switch_totals": {
                "packets": list(self.switch_totals.packets),
                "bytes": list(self.switch_totals.bytes),
                "lost": list(self.switch_totals.lost),
                "foreign_dropped": self.switch_totals.foreign_dropped,
            },
            "idle_since": [None, None],
            "created": self.created,
            "last_refresh": 0.0,
            "offloaded_at": self.offloaded_at,
            "answered_at": self.answered_at,
            "ended_at": self.ended_at,
            "legs_used": self.legs_used,
            "removed_at": self.removed_at,
            "adopted": self.adopted,
            "refresh_cmd": self.refresh_cmd,
            "notify_token": self.notify_token,
            "report_seq": self.report_seq,
            "source": self.source,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Session:
        d = dict(d)
        streams = []
        for sd in d.pop("streams"):
            sd = dict(sd)
            for k in ("sdp", "learned", "learned_rtcp"):
                if sd.get(k) is not None:
                    sd[k] = Endpoint(**sd[k])
            sd["codecs"] = tuple(sd.get("codecs", ()))
            streams.append(Stream(**sd))
        t = dict(d.pop("switch_totals"))
        # Journals of agents that counted per relay entry kept RTCP apart;
        # the leg counters count it with the packets.
        rtcp = t.pop("rtcp_packets", None)
        if rtcp is not None:
            t["packets"] = [p + r for p, r in zip(t["packets"], rtcp, strict=True)]
        totals = Counters(**t)
        state = OffloadState(d.pop("state"))
        return cls(streams=streams, switch_totals=totals, state=state, **d)


def compare_tags(session_tag: str, tag: str) -> int:
    """rtpproxy compare_session_tags: 0 no match, 1 exact, 2 `tag` followed
    by `;` (the session tag's media number, whatever follows the `;`)."""
    if not session_tag.startswith(tag):
        return 0
    rest = session_tag[len(tag) :]
    if not rest:
        return 1
    return 2 if rest[0] == ";" else 0


class SessionTable:
    """All sessions by call-id, with RTPProxy's tag matching."""

    def __init__(self) -> None:
        self._by_call: dict[str, list[Session]] = {}
        self.by_uid: dict[str, Session] = {}

    def __len__(self) -> int:
        return len(self.by_uid)

    def __iter__(self) -> Iterator[Session]:
        return iter(list(self.by_uid.values()))

    def add(self, s: Session) -> None:
        self._by_call.setdefault(s.call_id, []).append(s)
        self.by_uid[s.uid] = s

    def remove(self, s: Session) -> None:
        lst = self._by_call.get(s.call_id, [])
        if s in lst:
            lst.remove(s)
        if not lst:
            self._by_call.pop(s.call_id, None)
        self.by_uid.pop(s.uid, None)

    def find_stream(
        self, call_id: str, from_tag: str, to_tag: str | None
    ) -> tuple[Session, int] | None:
        """rtpproxy find_stream(): the session and the raw index (0/1)."""
        for s in self._by_call.get(call_id, ()):
            if s.tag == from_tag:
                return s, 0
            if to_tag is not None:
                m = compare_tags(s.tag, to_tag)
                if m == 1:
                    return s, 1
                if m == 2:
                    _, sep1, n1 = s.tag.rpartition(";")
                    _, sep2, n2 = from_tag.rpartition(";")
                    if sep1 and sep2 and n1 == n2:
                        return s, 1
        return None

    def matching_delete(
        self, call_id: str, from_tag: str, to_tag: str | None
    ) -> list[tuple[Session, int, int]]:
        """The sessions `D` may affect, in order (rtpp_cmd_delete_ematch):
        (session, stream index whose weak flag a `Dw` clears, match kind)."""
        out: list[tuple[Session, int, int]] = []
        for s in list(self._by_call.get(call_id, ())):
            m = compare_tags(s.tag, from_tag)
            idx = 1
            if m == 0 and to_tag is not None:
                m = compare_tags(s.tag, to_tag)
                idx = 0
            if m:
                out.append((s, idx, m))
        return out

    def for_call(self, call_id: str) -> list[Session]:
        return list(self._by_call.get(call_id, ()))
