"""Reports to the server: session updates, events and quality samples.

Everything goes into the durable spool first (store.py); `Sender` posts the
spool's head as `IngestBatch`es to `/api/v1/ingest` in id order, deleting rows
only after a 2xx, retrying with backoff while the server or network is down.
The batch idempotency key is derived from the spool ids, so a retry after a
lost answer is a replay on the server side.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import json
import math
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import httpx
import structlog
from p4relay_switch import Counters, LegQuality

from . import metrics
from .installed import LiveReading
from .offload import Offloader
from .oneway import OneWay
from .state import OffloadState, Session
from .store import Store
from .switchport import OffloadRefused

log = structlog.get_logger("rtpagent.reporter")

PT_NAMES = {0: "PCMU", 3: "GSM", 4: "G723", 8: "PCMA", 9: "G722", 18: "G729"}


# Offloader notifications after which the session's state is reported.
_SESSION_REPORTS = frozenset(
    {
        "created",
        "state",
        "offload_installed",
        "offload_removed",
        "fallback",
        "modified",
        "ended",
        "amended",
        "timeout",
    }
)


# Offloader notifications that go to the server as events.
_EVENTS = frozenset(
    {
        "offload_installed",
        "offload_removed",
        "fallback",
        "learn_refused",
        "one_way_media",
        "one_way_media_cleared",
    }
)
_WARNINGS = frozenset({"fallback", "learn_refused", "one_way_media"})


_SECONDS: dict[int, str] = {}  # whole second -> its ISO text (calls report a few seconds)


def _ts(t: float | None = None) -> str:
    """`datetime.fromtimestamp(t, UTC).isoformat()`, the same text (its
    rounding of the microseconds included) in half the time: each call's
    reports carry several of these, and the date part repeats."""
    if t is None:
        t = time.time()
    frac, whole = math.modf(t)
    sec, us = int(whole), round(frac * 1e6)
    if us >= 1_000_000:
        sec, us = sec + 1, us - 1_000_000
    elif us < 0:  # before 1970
        sec, us = sec - 1, us + 1_000_000
    text = _SECONDS.get(sec)
    if text is None:
        if len(_SECONDS) >= 4096:
            _SECONDS.clear()
        text = _SECONDS[sec] = datetime.fromtimestamp(sec, UTC).isoformat()[:-6]
    return f"{text}.{us:06d}+00:00" if us else f"{text}+00:00"


def session_key(s: Session) -> str:
    return f"{s.call_id};{s.tag}"[:512]


def codec_of(s: Session, pt: int | None = None) -> str | None:
    for st in s.streams:
        if st.codecs:
            return PT_NAMES.get(st.codecs[0], str(st.codecs[0]))
    if pt is not None and pt in PT_NAMES:
        return PT_NAMES[pt]
    return None


def _offloaded_doc(s: Session, now: float) -> dict[str, Any]:
    """The session's journal row as it is once its entries are written."""
    d = s.to_json()
    d["state"], d["reason"] = OffloadState.OFFLOADED.value, None
    if d["offloaded_at"] is None:
        d["offloaded_at"] = now
    return d


class Reporter:
    """Turns offloader/agent notifications into spooled reports and journal writes."""

    def __init__(self, store: Store, offloader: Offloader, switch_name: str | None) -> None:
        self.store = store
        self.offloader = offloader
        self.switch_name = switch_name
        self.seq: dict[str, int] = {}
        self.ended_at: dict[str, float] = {}
        self.pt: dict[str, int] = {}
        offloader.listeners.append(self.on_event)
        offloader.writer.journal_ahead = self.journal_ahead

    async def journal_ahead(self, sessions: list[Session]) -> None:
        """Sessions about to go on the switch, journalled as offloaded on their
        legs before their entries are written: an agent killed right after
        the write finds them at its restart (kept, counted, ended from
        RTPProxy's accounting), never as entries of no session. Killed
        before the write, it installs them again at its restart."""
        now = time.time()
        await self.store.journal_ahead(
            [(s.uid, functools.partial(_offloaded_doc, s, now)) for s in sessions]
        )

    def on_event(self, kind: str, s: Session, payload: dict[str, object]) -> None:
        if s.legs and s.legs != s.legs_used:
            s.legs_used = list(s.legs)  # released before the removal is told
        if kind == "offload_removed":
            s.removed_at = time.time()
        elif kind == "offload_installed":
            s.removed_at = None
        if kind == "ended":
            # From evidence when the agent learnt of the end late (state.py).
            if s.ended_at is None:
                s.ended_at = time.time()
            self.ended_at[s.uid] = s.ended_at
            self.store.drop_session(s.uid)
        elif kind == "amended" and s.ended_at is not None:
            # An ended session's totals completed (RTPProxy's record): reported again.
            self.ended_at[s.uid] = s.ended_at
        else:
            self.store.put_session(s.uid, s.to_json)
        if kind in _EVENTS:
            if kind == "offload_removed" and s.foreign_sources:
                # The server has no event kind of its own for stray media:
                # what the relay guard kept out travels with the removal.
                payload = {
                    **payload,
                    "foreign_packets_dropped": s.switch_totals.foreign_dropped,
                    "foreign_sources": list(s.foreign_sources),
                }
            ev: dict[str, Any] = {
                "event_id": str(uuid.uuid4()),
                "type": kind,
                "ts": _ts(),
                "severity": "warning" if kind in _WARNINGS else "info",
                "session_key": session_key(s),
                "switch": self.switch_name,
                "payload": {k: v for k, v in payload.items()},
            }
            self.store.enqueue("event", ev)
        if kind in _SESSION_REPORTS and not self.store.session_queued(s.uid):
            # Coalesced: the server keeps only the highest `seq`, so one full
            # state per session per spool flush is enough (fewer encodes).
            self.store.enqueue_session(s.uid, functools.partial(self._final_doc, s))

    def _final_doc(self, s: Session) -> dict[str, Any]:
        doc = self.session_doc(s)
        if s.state is OffloadState.ENDED:
            self.seq.pop(s.uid, None)
            self.ended_at.pop(s.uid, None)
            self.pt.pop(s.uid, None)
        return doc

    def session_doc(self, s: Session) -> dict[str, Any]:
        s.report_seq += 1  # journalled with the session: continues after a restart
        self.seq[s.uid] = s.report_seq
        complete = all(st.port and st.sdp for st in s.streams)
        state = "ended" if s.state is OffloadState.ENDED else ("active" if complete else "setup")
        legs = []
        removed_at = s.removed_at
        if state == "ended" and removed_at is None:
            # Never on the switch (or its removal not seen): the leg ended with the call.
            removed_at = self.ended_at.get(s.uid, s.ended_at or time.time())
        switch_legs = s.legs or s.legs_used
        if complete:
            for i, direction in ((1, "caller_to_callee"), (0, "callee_to_caller")):
                me, other = s.streams[i], s.streams[1 - i]
                assert me.sdp is not None and other.sdp is not None
                src = me.learned or me.sdp
                dst = other.learned or other.sdp
                legs.append(
                    {
                        "direction": direction,
                        "media_index": max(0, s.medianum - 1),
                        "switch_leg": switch_legs[i] if switch_legs else None,
                        "src": {"addr": src.addr, "port": src.port},
                        "relay_in": {"addr": me.laddr, "port": me.port},
                        "relay_out": {"addr": other.laddr, "port": other.port},
                        "dst": {"addr": dst.addr, "port": dst.port},
                        "installed": s.state is OffloadState.OFFLOADED,
                        "installed_at": _ts(s.offloaded_at) if s.offloaded_at else None,
                        "removed_at": _ts(removed_at)
                        if removed_at is not None and s.state is not OffloadState.OFFLOADED
                        else None,
                        "packets": s.switch_totals.packets[i],
                        "bytes": s.switch_totals.bytes[i],
                    }
                )
        doc: dict[str, Any] = {
            "session_key": session_key(s),
            "seq": self.seq[s.uid],
            "call_id": s.call_id[:512],
            "from_tag": s.tag[:256],
            "to_tag": s.to_tag[:256] if s.to_tag else None,
            "state": state,
            "offloaded": s.state is OffloadState.OFFLOADED
            or (state == "ended" and s.offloaded_at is not None),
            "offload_reason": s.reason,
            "codec": codec_of(s, self.pt.get(s.uid)),
            "switch": self.switch_name,
            "started_at": _ts(s.created),
            # The answer's reply (journalled), never when the report is built.
            "answered_at": _ts(s.answered_at) if s.answered_at is not None else None,
            "ended_at": _ts(self.ended_at.get(s.uid, time.time())) if state == "ended" else None,
            "legs": legs,
        }
        if state == "ended":
            doc["packets"] = sum(s.switch_totals.packets)
            doc["bytes"] = sum(s.switch_totals.bytes)
            doc["lost"] = sum(s.switch_totals.lost)
        return doc


# Sessions read and sampled per event-loop turn: a slice's Reads, decoding and
# samples take a few ms, so a command arriving meanwhile waits that long.
SESSIONS_PER_SLICE = 128


class Sampler:
    """Periodic quality samples from the switch's counters and RTP registers."""

    def __init__(self, offloader: Offloader, store: Store, interval: float = 1.0) -> None:
        self.offloader = offloader
        self.store = store
        self.interval = interval
        # (uid, leg) -> pkts, bytes, lost, reordered as last sampled; persisted
        # with the samples, so the first sample after a restart is an interval.
        self._last: dict[tuple[str, int], tuple[int, ...]] = store.sampled()
        # leg -> its quality registers as last read, with the leg's packet
        # count then: registers change only with the leg's packets, so a leg
        # whose count did not move is not read again (a call on hold, one-way
        # media, a stream that stopped).
        self._quality: dict[int, tuple[int, LegQuality]] = {}
        self.total_packets = 0
        self.reporter: Reporter | None = None
        self.oneway: OneWay | None = None  # fed each leg's new packets (oneway.py)

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.sample()
            except OffloadRefused as exc:
                log.info("sample_skipped", reason=exc.reason)
            except Exception:
                log.exception("sample_failed")

    async def sample(self) -> int:
        """One round: every offloaded session's counters and registers, read
        and turned into samples a slice of sessions at a time, the event loop
        free between slices (commands wait for one slice at most, not for
        the whole round: at thousands of calls a round is hundreds of ms).
        A session that left the switch before its slice is skipped."""
        off = self.offloader
        everything = off.offloaded()
        now = _ts()
        mono = time.monotonic()
        n = total = 0
        seen: set[tuple[str, int]] = set()
        live_uids: set[str] = set()
        complete = bool(everything)
        for i in range(0, len(everything), SESSIONS_PER_SLICE):
            if i:
                await asyncio.sleep(0)
            plans = off.plans
            part = [
                (s, p) for s, p in everything[i : i + SESSIONS_PER_SLICE] if plans.get(s.uid) is p
            ]
            if not part:
                continue
            reading = await off.installed.read_live(part, self._quality_wanted)
            if reading is None:  # the switch is away
                complete = False
                break
            got, pk = self._account(reading, now, mono, seen)
            n += got
            total += pk
            live_uids.update(s.uid for s, _ in part)
        if not complete:
            if self.oneway is not None:
                self.oneway.evaluate(mono, set())
            return n
        if self.oneway is not None:
            self.oneway.evaluate(mono, live_uids)
        for key in list(self._last):
            if key not in seen:
                del self._last[key]
                self.store.drop_sampled(key)
        legs = {leg for _, leg in seen}
        for leg in [leg for leg in self._quality if leg not in legs]:
            del self._quality[leg]
        self.total_packets = total
        return n

    def _quality_wanted(self, leg: int, c: Counters) -> bool:
        had = self._quality.get(leg)
        return had is None or had[0] != c.packets

    def _account(
        self, reading: LiveReading, now: str, mono: float, seen: set[tuple[str, int]]
    ) -> tuple[int, int]:
        """Samples of one slice: (samples enqueued, packets the switch carried)."""
        off = self.offloader
        live, counts, quality = reading.sessions, reading.counts, reading.quality
        n = 0
        total = 0
        for s, p in live:
            for i, direction in ((1, "caller_to_callee"), (0, "callee_to_caller")):
                # the leg's counter: this direction's RTP and RTCP
                leg = p.legs[i].leg
                c = counts.get(leg)
                if c is None:
                    continue
                q = quality.get(leg)
                if q is not None:
                    self._quality[leg] = (c.packets, q)
                elif (had := self._quality.get(leg)) is not None and had[0] == c.packets:
                    q = had[1]
                else:
                    continue
                total += c.packets + s.switch_totals.packets[i]
                key = (s.uid, leg)
                seen.add(key)
                prev = self._last.get(key, (0, 0, 0, 0))
                cur = (c.packets, c.bytes, q.lost, q.reordered)
                if cur[0] < prev[0]:  # written again (the switch restarted): from 0
                    prev = (0, 0, 0, 0)
                self._last[key] = cur
                if cur != prev:
                    self.store.put_sampled(key, cur)
                d = [max(0, a - b) for a, b in zip(cur, prev, strict=True)]
                if self.oneway is not None:
                    self.oneway.observe(s, i, d[0], mono)
                if d[0] > 0:
                    off.mark_active(s, i)
                    if self.reporter is not None and q.payload_type:
                        self.reporter.pt.setdefault(s.uid, q.payload_type)
                if d[0] == 0 and prev == (0, 0, 0, 0) and c.packets == 0:
                    continue
                jitter_ms = q.jitter_ms
                s.switch_totals.lost[i] = q.lost
                self.store.enqueue(
                    "sample",
                    {
                        "session_key": session_key(s),
                        "direction": direction,
                        "ts": now,
                        "interval_ms": int(self.interval * 1000),
                        "packets": d[0],
                        "bytes": d[1],
                        "lost": d[2],
                        "reordered": d[3],
                        "jitter_ms": min(60000.0, jitter_ms),
                        "codec": codec_of(s, q.payload_type),
                    },
                )
                n += 1
        return n, total


JSON = {"Content-Type": "application/json"}


class Sender:
    def __init__(
        self,
        store: Store,
        url: str | None,
        token: str | None,
        agent: dict[str, Any],
        *,
        batch: int = 500,
        timeout: float = 5.0,
    ) -> None:
        self.store = store
        self.url = url
        self.token = token
        self.agent = agent
        self.batch = self.max_batch = batch
        self.client = httpx.AsyncClient(timeout=timeout)
        self.instance = uuid.uuid4().hex[:12]
        self.backoff = 0.5
        self._to_send = asyncio.Event()  # the flush committed reports

    async def close(self) -> None:
        await self.client.aclose()

    async def run(self, flush_interval: float = 0.05) -> None:
        """Commit what is buffered every `flush_interval` (0.2 s when idle) and
        send the spool beside it: the commits never wait on the server (a
        slow or unreachable server would otherwise hold the journal back for
        its timeouts and back-off, and a `kill -9` meanwhile lose it)."""
        sending = asyncio.create_task(self._send_loop(), name="spool-sender") if self.url else None
        try:
            while True:
                batch = await self.store.take_sliced()
                write = asyncio.ensure_future(self.store.write_async(batch))
                try:
                    await asyncio.shield(write)
                except asyncio.CancelledError:
                    # Cancelling cannot stop the writer thread: let it commit what
                    # was taken before the agent goes on to close the store.
                    await write
                    raise
                metrics.SPOOL_DEPTH.set(self.store.spool_depth())
                if self.store.spool_committed():
                    self._to_send.set()
                await asyncio.sleep(flush_interval if self.store.pending_writes else 0.2)
        finally:
            if sending is not None:
                sending.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await sending

    async def _send_loop(self) -> None:
        while True:
            await self._to_send.wait()
            self._to_send.clear()
            while self.store.spool_committed():
                if await self.send_once():
                    self.backoff = 0.5
                    continue
                await asyncio.sleep(self.backoff)
                self.backoff = min(self.backoff * 2, 30.0)

    async def send_once(self) -> bool:
        rows = self.store.spool_head(self.batch)
        if not rows:
            return True
        first, last = rows[0][0], rows[-1][0]
        body: dict[str, Any] = {
            "agent": self.agent,
            "sessions": [d for _, k, d in rows if k == "session"],
            "samples": [d for _, k, d in rows if k == "sample"],
            "events": [d for _, k, d in rows if k == "event"],
        }
        body["idempotency_key"] = self.batch_key(body, first, last)
        headers = {"Authorization": f"Bearer {self.token}", **JSON} if self.token else JSON
        assert self.url is not None
        try:
            r = await self.client.post(self.url, content=json.dumps(body), headers=headers)
        except httpx.HTTPError as exc:
            metrics.SPOOL_ERRORS.labels("network").inc()
            log.info("ingest_unreachable", error=str(exc) or type(exc).__name__, depth=len(rows))
            return False
        if r.status_code // 100 == 2:
            self.store.spool_ack(i for i, _, _ in rows)
            metrics.SPOOL_SENT.inc(len(rows))
            self.batch = min(self.max_batch, self.batch * 2)  # back up after isolating a bad row
            return True
        if r.status_code == 413 and len(rows) > 1:
            self.batch = max(1, self.batch // 2)
            return False
        if r.status_code in (409, 422):
            # 422: a payload the server will never take. 409: the server holds
            # another body under this key, which a content-derived key rules out
            # short of a server fault; retrying would stall the spool forever.
            # Kept out of the way but never silently: logged with the server's
            # reasons, counted.
            reason = "conflict" if r.status_code == 409 else "rejected"
            metrics.SPOOL_ERRORS.labels(reason).inc()
            log.error(f"ingest_{reason}", detail=r.text[:2000], first=first, last=last)
            if len(rows) == 1:
                self.store.spool_ack([first])
                return True
            self.batch = 1  # isolate the bad row
            return False
        metrics.SPOOL_ERRORS.labels(f"http_{r.status_code}").inc()
        log.warning("ingest_failed", status=r.status_code, body=r.text[:500])
        return False

    def batch_key(self, body: dict[str, Any], first: int, last: int) -> str:
        """The batch's idempotency key. The same rows with the same agent
        details give the same key, so a retry after a lost answer is a replay;
        a changed body (the agent restarted with another version or RTPProxy
        address) gets a new key instead of the server's 409. Re-applying rows
        is harmless: the server upserts every entity."""
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]
        tail = f"-{self.store_id()}-{first}-{last}-{digest}"
        return str(self.agent["name"])[: 128 - len(tail)] + tail

    def store_id(self) -> str:
        sid = self.store.meta("spool_id")
        if sid is None:
            sid = uuid.uuid4().hex[:16]
            self.store.set_meta("spool_id", sid)
        return sid
