"""Quality reports of offloaded calls to Homer, over HEPv3 (see hep.py).

Per leg (call direction), every `interval_s` while the call is up and once
when it ends, the server sends the figures it holds for the leg (packets,
loss, jitter, MOS and R from the quality samples) correlated with the SIP
Call-ID, so Homer shows them on the call beside its SIP ladder.

Ingest never waits on it: ends are heard from the live feed (after the
batch commits), the figures are read in a worker thread, and reports wait
in a bounded queue for one sender. What cannot be queued or sent is
counted (p4relay_homer_reports_total) and logged, never retried: a report
is about a moment, and a later one supersedes it.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import ipaddress
import time
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import structlog
from fastapi.concurrency import run_in_threadpool
from sqlalchemy import text
from sqlalchemy.orm import Session

from p4relay_server import mos as emodel
from p4relay_server.config import Homer, parse_host_port
from p4relay_server.hep import HepError, LegQuality, encode_report
from p4relay_server.live import LiveHub, Subscriber
from p4relay_server.metrics import HOMER_QUEUE, HOMER_REPORTS

log = structlog.get_logger("p4relay.homer")

_FINAL = frozenset({"ended", "failed"})
_RECONNECT_MAX_S = 5.0
_SEND_TIMEOUT_S = 5.0
_LOG_EVERY_S = 60.0

# Per (session, direction): the running figures since the call started.
_AGGREGATES = text(
    """
    SELECT s.id, s.session_key, s.call_id, s.codec, s.plc, q.direction,
           sum(q.packets)::bigint, sum(q.lost)::bigint,
           avg(q.jitter_ms), max(q.jitter_ms), avg(q.delay_ms),
           avg(q.mos), min(q.mos), avg(q.r_factor), avg(q.burst_ratio)
    FROM sessions s JOIN quality_samples q ON q.session_id = s.id
    WHERE s.id = ANY(:ids)
      AND (s.offloaded OR EXISTS (
            SELECT 1 FROM session_legs l
            WHERE l.session_id = s.id AND l.installed_at IS NOT NULL))
    GROUP BY s.id, q.direction
    """
)
# Where each leg's media goes: the relay's side towards the receiver.
_LEGS = text(
    """
    SELECT DISTINCT ON (session_id, direction)
           session_id, direction, relay_out_addr, relay_out_port, dst_addr, dst_port
    FROM session_legs WHERE session_id = ANY(:ids)
    ORDER BY session_id, direction, media_index
    """
)
# Calls up and offloaded with samples since `since` (the samples' ts index).
_ACTIVE = text(
    """
    SELECT DISTINCT q.session_id FROM quality_samples q
    JOIN sessions s ON s.id = q.session_id
    WHERE q.ts > :since AND q.resolution_s = 0 AND s.state = 'active' AND s.offloaded
    """
)

_CLOCK_RATES = {"OPUS": 48000, "L16": 44100}


def _clock_rate(codec: str | None) -> int:
    return _CLOCK_RATES.get((codec or "PCMU").upper().split("/")[0], 8000)


def _listening_mos(
    codec: str | None, plc: bool, loss_pct: float, burst: float | None
) -> float | None:
    """MOS-LQ: the E-model without the delay term (listening, not conversation)."""
    imp = emodel.codec_impairment(codec, plc)
    if imp is None:
        return None
    r = emodel.R_DEFAULT - emodel.ie_eff(imp.ie, imp.bpl, loss_pct, max(1.0, burst or 1.0))
    return emodel.r_to_mos(r)


@dataclass(slots=True)
class _Seen:
    packets: int
    lost: int
    at: float


class LegReader:
    """Reads legs' figures from the database (in a worker thread)."""

    def __init__(self) -> None:
        self._prev: dict[tuple[int, str], _Seen] = {}

    def active_since(self, db: Session, since: dt.datetime) -> list[int]:
        return [r[0] for r in db.execute(_ACTIVE, {"since": since})]

    def legs(self, db: Session, ids: list[int], *, final: bool, now: float) -> list[LegQuality]:
        if not ids:
            return []
        rows = db.execute(_AGGREGATES, {"ids": ids}).all()
        where = {(r[0], r[1]): (r[2], r[3], r[4], r[5]) for r in db.execute(_LEGS, {"ids": ids})}
        delays: dict[int, list[float]] = {}
        for r in rows:
            if r[10] is not None:
                delays.setdefault(r[0], []).append(float(r[10]))
        out: list[LegQuality] = []
        for r in rows:
            sid, key, call_id, codec, plc, direction = r[0], r[1], r[2], r[3], r[4], r[5]
            packets, lost = int(r[6]), int(r[7])
            jitter, jitter_max, mos, mos_min, r_factor, burst = (
                r[8],
                r[9],
                r[11],
                r[12],
                r[13],
                r[14],
            )
            prev = self._prev.get((sid, direction))
            if final:
                self._prev.pop((sid, direction), None)
            else:
                self._prev[(sid, direction)] = _Seen(packets, lost, now)
            src, src_port, dst, dst_port = where.get(
                (sid, direction),
                (ipaddress.IPv4Address(0), 0, ipaddress.IPv4Address(0), 0),
            )
            src, dst = ipaddress.ip_address(src), ipaddress.ip_address(dst)
            if src.version != dst.version:
                src = type(dst)(0)
            both = delays.get(sid, [])
            expected = packets + lost
            loss_pct = 100.0 * lost / expected if expected else 0.0
            out.append(
                LegQuality(
                    call_id=call_id,
                    session_key=key,
                    direction=direction,
                    src=src,
                    src_port=src_port,
                    dst=dst,
                    dst_port=dst_port,
                    ssrc=zlib.crc32(f"{key}\0{direction}".encode()),
                    packets=packets,
                    lost=lost,
                    interval_packets=packets - (prev.packets if prev else 0),
                    interval_lost=lost - (prev.lost if prev else 0),
                    jitter_ms=float(jitter or 0.0),
                    jitter_max_ms=float(jitter_max or 0.0),
                    clock_rate=_clock_rate(codec),
                    mos=mos,
                    mos_min=mos_min,
                    mos_lq=_listening_mos(codec, plc, loss_pct, burst),
                    r_factor=r_factor,
                    round_trip_ms=sum(both) if len(both) == 2 else None,
                    plc=plc,
                    codec=codec,
                    final=final,
                )
            )
        return out

    def forget_older_than(self, cutoff: float) -> None:
        """Legs of calls that went quiet without an end (an agent lost)."""
        for k in [k for k, v in self._prev.items() if v.at < cutoff]:
            del self._prev[k]


class _Sender:
    """One HEP connection (UDP, or TCP with reconnects)."""

    def __init__(self, cfg: Homer) -> None:
        assert cfg.address is not None
        self._host, self._port = parse_host_port(cfg.address)
        self._tcp = cfg.transport == "tcp"
        self._udp: asyncio.DatagramTransport | None = None
        self._errors: asyncio.Queue[Exception] = asyncio.Queue(100)
        self._writer: asyncio.StreamWriter | None = None
        self._retry_at = 0.0
        self._backoff = 0.1

    async def send(self, packet: bytes) -> None:
        if self._tcp:
            await self._send_tcp(packet)
        else:
            await self._send_udp(packet)

    async def _send_udp(self, packet: bytes) -> None:
        if self._udp is None:
            errors = self._errors

            class _Proto(asyncio.DatagramProtocol):
                def error_received(self, exc: Exception) -> None:
                    if not errors.full():
                        errors.put_nowait(exc)

            loop = asyncio.get_running_loop()
            self._udp, _ = await loop.create_datagram_endpoint(
                _Proto, remote_addr=(self._host, self._port)
            )
        if not self._errors.empty():
            # An ICMP error for an earlier datagram (nothing listening): that
            # one is lost already; report it against this attempt.
            raise self._errors.get_nowait()
        self._udp.sendto(packet)

    async def _send_tcp(self, packet: bytes) -> None:
        writer = self._writer or await self._connect()
        try:
            writer.write(packet)
            await asyncio.wait_for(writer.drain(), _SEND_TIMEOUT_S)
        except (OSError, TimeoutError):
            writer.close()
            self._writer = None
            raise

    async def _connect(self) -> asyncio.StreamWriter:
        if time.monotonic() < self._retry_at:
            raise ConnectionError("reconnecting")
        try:
            _, writer = await asyncio.wait_for(
                asyncio.open_connection(self._host, self._port), _SEND_TIMEOUT_S
            )
        except (OSError, TimeoutError):
            self._retry_at = time.monotonic() + self._backoff
            self._backoff = min(_RECONNECT_MAX_S, self._backoff * 2)
            raise
        self._backoff = 0.1
        self._writer = writer
        return writer

    def close(self) -> None:
        if self._udp is not None:
            self._udp.close()
        if self._writer is not None:
            self._writer.close()


class HomerExporter:
    """Collects legs' reports and sends them; `run()` until cancelled."""

    def __init__(
        self,
        cfg: Homer,
        sessionmaker: Callable[[], Session],
        live: LiveHub,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if cfg.address is None:
            raise ValueError("homer.address is not set")
        self._cfg = cfg
        self._sessionmaker = sessionmaker
        self._live = live
        self._clock = clock
        self._reader = LegReader()
        self._reading = asyncio.Lock()
        self._queue: asyncio.Queue[bytes] = asyncio.Queue(cfg.queue_size)
        self._auth = cfg.auth_key.get_secret_value() if cfg.auth_key else None
        self._unsent = 0
        self._last_log = 0.0

    async def run(self) -> None:
        host, port = parse_host_port(self._cfg.address or "")
        log.info(
            "homer export on",
            host=host,
            port=port,
            transport=self._cfg.transport,
            capture_id=self._cfg.capture_id,
            interval_s=self._cfg.interval_s,
            payload=self._cfg.payload,
        )
        sender = _Sender(self._cfg)
        try:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(self._ends())
                tg.create_task(self._intervals())
                tg.create_task(self._send(sender))
        except Exception:
            log.exception("homer export stopped")  # a bug: the server serves on without it
            raise
        finally:
            sender.close()

    # ------------------------------------------------------------ collecting
    async def _ends(self) -> None:
        """Final reports for sessions the live feed says have ended."""
        sub: Subscriber | None = None
        try:
            while True:
                if sub is None or sub.overflowed:
                    if sub is not None:
                        self._live.unsubscribe(sub)
                        self._note_unsent("live feed overflow: some ends not reported", 0)
                    sub = self._live.subscribe(["sessions"])
                try:
                    # Bounded wait: an overflowed subscription gets nothing more.
                    msg = await asyncio.wait_for(sub.queue.get(), 1.0)
                except TimeoutError:
                    continue
                ended = [int(i["id"]) for i in msg.get("items", ()) if i.get("state") in _FINAL]
                # Take what else is waiting now: one read for a burst of ends.
                while not sub.queue.empty():
                    more = sub.queue.get_nowait()
                    ended += [
                        int(i["id"]) for i in more.get("items", ()) if i.get("state") in _FINAL
                    ]
                if ended:
                    await self._collect(sorted(set(ended)), final=True)
        finally:
            if sub is not None:
                self._live.unsubscribe(sub)

    async def _intervals(self) -> None:
        every = self._cfg.interval_s
        while True:
            await asyncio.sleep(every)
            now = self._clock()
            # Calls with a sample lately: an agent reports every few seconds.
            since = dt.datetime.fromtimestamp(now - max(2 * every, 60.0), dt.UTC)

            try:
                ids = await run_in_threadpool(self._active_since, since)
            except Exception:  # the database may be down for a while; next interval tries again
                log.exception("homer: reading active calls failed")
                continue
            await self._collect(ids, final=False)
            self._reader.forget_older_than(now - 10 * every)

    def _active_since(self, since: dt.datetime) -> list[int]:
        with self._sessionmaker() as db:
            return self._reader.active_since(db, since)

    async def _collect(self, ids: list[int], *, final: bool) -> None:
        now = self._clock()

        def read() -> list[LegQuality]:
            with self._sessionmaker() as db:
                return self._reader.legs(db, ids, final=final, now=now)

        try:
            async with self._reading:  # one read at a time: the legs' previous counts
                legs = await run_in_threadpool(read)
        except Exception:
            HOMER_REPORTS.labels("failed").inc(len(ids))
            log.exception("homer: reading call quality failed", sessions=len(ids), final=final)
            return
        self.enqueue(legs, now)

    def enqueue(self, legs: Iterable[LegQuality], now: float) -> None:
        for q in legs:
            try:
                packet = encode_report(
                    q,
                    ts=now,
                    capture_id=self._cfg.capture_id,
                    auth_key=self._auth,
                    payload=self._cfg.payload,
                )
            except HepError as e:
                HOMER_REPORTS.labels("invalid").inc()
                log.warning("homer: report not encodable", call_id=q.call_id, error=str(e))
                continue
            try:
                self._queue.put_nowait(packet)
            except asyncio.QueueFull:
                HOMER_REPORTS.labels("dropped").inc()
                self._note_unsent("queue full", 1)
        HOMER_QUEUE.set(self._queue.qsize())

    # --------------------------------------------------------------- sending
    async def _send(self, sender: _Sender) -> None:
        while True:
            packet = await self._queue.get()
            HOMER_QUEUE.set(self._queue.qsize())
            try:
                await sender.send(packet)
            except (OSError, TimeoutError) as e:
                HOMER_REPORTS.labels("failed").inc()
                self._note_unsent(f"send failed: {e!r}", 1)
                continue
            HOMER_REPORTS.labels("sent").inc()

    def _note_unsent(self, why: str, n: int) -> None:
        """Logged at most once a minute, with the count since the last line."""
        self._unsent += n
        now = time.monotonic()
        if now - self._last_log >= _LOG_EVERY_S:
            log.warning("homer: reports not sent", reason=why, unsent=self._unsent)
            self._unsent = 0
            self._last_log = now


def exporter_for(app_state: Any) -> HomerExporter | None:
    """The app's exporter, or None while `homer.address` is unset (the default)."""
    cfg: Homer = app_state.settings.homer
    if cfg.address is None:
        return None
    return HomerExporter(cfg, app_state.sessionmaker, app_state.live)
