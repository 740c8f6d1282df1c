"""The collector's loop: list the registered switches, poll each, raise
congestion episodes, and send one batch per switch to the server.

A batch the server does not take (unreachable, 5xx) is kept and re-sent with
the same idempotency key, so a retry after a lost answer is a replay on the
server side; a refused token (401, 403) is retried the same way, so nothing
is lost while an operator fixes it. The backlog is bounded (`backlog_max`) and
overflow is counted and logged. Any other 4xx answer cannot be helped by
re-sending: it is logged with the server's reason and the batch is dropped.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
import uuid

import httpx
import structlog
from pydantic import TypeAdapter, ValidationError

from p4relay_collector import metrics
from p4relay_collector.config import Settings, parse_listen
from p4relay_collector.congestion import CongestionDetector, Thresholds
from p4relay_collector.int_reports import IntTelemetry, ReportListener, listen
from p4relay_collector.poller import Poll, SwitchPoller
from p4relay_collector.wire import IngestBatch, RegisteredSwitch

log = structlog.get_logger("p4relay.collector")

INGEST = "/api/v1/ingest"
SWITCHES = "/api/v1/ingest/switches"
_SWITCH_LIST = TypeAdapter(list[RegisteredSwitch])


class Collector:
    def __init__(self, settings: Settings, http: httpx.AsyncClient | None = None) -> None:
        self.cfg = settings
        headers = {"Authorization": f"Bearer {settings.ingest_token()}"}
        self.http = http or httpx.AsyncClient(base_url=settings.server_url, timeout=10.0)
        self.http.headers.update(headers)
        self.pollers: dict[str, SwitchPoller] = {}
        self.congestion = CongestionDetector(Thresholds.from_settings(settings))
        self.backlog: collections.deque[IngestBatch] = collections.deque()
        # One sender at a time: two would both post the head batch and pop twice.
        self._flushing = asyncio.Lock()
        self.int_telemetry = IntTelemetry(names=settings.int_switch_name_map())

    async def refresh_switches(self) -> None:
        """Follows the server's list of registered switches (added, moved, removed)."""
        r = await self.http.get(SWITCHES)
        r.raise_for_status()
        try:
            listed = _SWITCH_LIST.validate_json(r.content)
        except ValidationError as e:
            raise httpx.DecodingError(f"unexpected switch list: {e}") from e
        seen: set[str] = set()
        for sw in listed:
            seen.add(sw.name)
            cur = self.pollers.get(sw.name)
            if cur is None or cur.address != sw.grpc_address or cur.device_id != sw.device_id:
                if cur is not None:
                    await cur.close()
                self.pollers[sw.name] = SwitchPoller(
                    sw.name,
                    sw.grpc_address,
                    sw.device_id,
                    timeout_s=self.cfg.bfrt_timeout_s,
                    client_id=self.cfg.client_id,
                )
        for name in set(self.pollers) - seen:
            await self.pollers.pop(name).close()
            self.congestion.forget(name)

    def _batch(self, poll: Poll) -> IngestBatch:
        events = list(poll.events)
        if poll.switch.up:
            for s in poll.samples:
                ev = self.congestion.observe(s)
                if ev is not None:
                    events.append(ev)
        else:
            events.extend(self.congestion.switch_down(poll.switch.name, poll.ts))
        for ev in events:
            if ev.type in ("congestion_onset", "congestion_clear"):
                metrics.CONGESTION_EVENTS.labels(ev.type).inc()
                log.info(ev.type, switch=ev.switch, message=ev.message)
        metrics.CONGESTED_QUEUES.set(len(self.congestion.open_episodes()))
        return IngestBatch(
            idempotency_key=f"collector-{uuid.uuid4()}",
            switch=poll.switch,
            queue_samples=poll.samples,
            events=events,
        )

    def _int_batch(self) -> IngestBatch | None:
        """What the INT reports since the last poll turned into, as one batch."""
        samples, events, paths = self.int_telemetry.drain()
        if not samples and not events and not paths:
            return None
        for ev in events:
            metrics.CONGESTION_EVENTS.labels(ev.type).inc()
            log.info(ev.type, switch=ev.switch, message=ev.message)
        return IngestBatch(
            idempotency_key=f"collector-int-{uuid.uuid4()}",
            queue_samples=samples,
            events=events,
            paths=paths,
        )

    async def poll_once(self) -> list[IngestBatch]:
        """Polls every switch and sends one batch per switch; returns the batches."""
        polls = await asyncio.gather(*(p.poll() for p in self.pollers.values()))
        batches = [self._batch(p) for p in polls]
        int_batch = self._int_batch()
        if int_batch is not None:
            batches.append(int_batch)
        for b in batches:
            self._enqueue(b)
        await self.flush()
        return batches

    async def submit(self, batch: IngestBatch) -> None:
        """Queues a batch from another producer (the switch control plane) and sends
        the backlog, with the same ordering, retries and bounds."""
        self._enqueue(batch)
        await self.flush()

    def _enqueue(self, batch: IngestBatch) -> None:
        if len(self.backlog) >= self.cfg.backlog_max:
            lost = self.backlog.popleft()
            metrics.DROPPED.inc()
            log.error("backlog full: oldest batch dropped", idempotency_key=lost.idempotency_key)
        self.backlog.append(batch)
        metrics.BACKLOG.set(len(self.backlog))

    async def flush(self) -> None:
        """Sends the backlog in order; stops at the first batch the server did not take."""
        async with self._flushing:
            await self._send_backlog()

    async def _send_backlog(self) -> None:
        while self.backlog:
            batch = self.backlog[0]
            try:
                r = await self.http.post(
                    INGEST,
                    content=batch.model_dump_json(exclude_none=True),
                    headers={"Content-Type": "application/json"},
                )
            except httpx.HTTPError as e:
                metrics.SENT.labels("retry").inc()
                log.warning(
                    "server unreachable; will re-send", error=repr(e), backlog=len(self.backlog)
                )
                return
            if r.status_code >= 500:
                metrics.SENT.labels("retry").inc()
                log.warning("server error; will re-send", status=r.status_code)
                return
            if r.status_code in (401, 403):
                # The token is wrong or revoked: nothing is lost while an
                # operator fixes it (the backlog bounds what is kept).
                metrics.SENT.labels("retry").inc()
                log.error("server refused the token; will re-send", status=r.status_code)
                return
            self.backlog.popleft()
            metrics.BACKLOG.set(len(self.backlog))
            if r.status_code == 200:
                metrics.SENT.labels("ok").inc()
            else:
                metrics.SENT.labels("refused").inc()
                log.error("server refused batch", status=r.status_code, detail=r.text[:2000])

    async def run(self, *, once: bool = False, stop: asyncio.Event | None = None) -> None:
        """Polls every `interval_s` until `stop` is set (or once)."""
        stop = stop or asyncio.Event()
        next_refresh = 0.0
        reports: ReportListener | None = None
        if self.cfg.int_report_listen:
            host, port = parse_listen(self.cfg.int_report_listen)
            try:
                reports = await listen(self.int_telemetry, host, port)
            except OSError as e:
                raise OSError(f"INT report listener on {self.cfg.int_report_listen}: {e}") from e
            log.info("INT report listener", listen=self.cfg.int_report_listen)
        try:
            while not stop.is_set():
                t0 = time.monotonic()
                if t0 >= next_refresh:
                    try:
                        await self.refresh_switches()
                        next_refresh = t0 + self.cfg.switches_refresh_s
                    except httpx.HTTPError as e:
                        log.warning("cannot list switches", error=repr(e))
                await self.poll_once()
                if once:
                    return
                wait = max(0.0, self.cfg.interval_s - (time.monotonic() - t0))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=wait)
        finally:
            if reports is not None:
                reports.close()
            await self.close()

    async def close(self) -> None:
        for p in self.pollers.values():
            await p.close()
        await self.http.aclose()
