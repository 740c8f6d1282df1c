"""Switch telemetry collector: polls each registered switch over BfRt and
sends queue samples to the server's ingest API.

Per poll and switch it reads the fixed tables ($PORT, $PORT_STAT,
tf1.tm.port.sched_shaping, tf1.tm.counter.queue) through `p4relay_switch`
and derives, per port's egress queue:
- depth: usage cells x 80 bytes (Tofino1 cell size; the softswitch counts the same way);
- queueing delay: depth x 8 / line rate (what a packet arriving now waits);
- utilisation: transmitted octets over the interval / line rate;
- drops: growth of the queue's drop counter (a counter that went down was reset).
The line rate is the port's shaping rate when set, else its $SPEED.
It also reads the relay table's occupancy (BfRt TableUsage) and its size
(bfrt.json), sent as the switch's `relay_table_used` / `relay_table_capacity`.
Switch up/down transitions become events. INT reports will land here later.

A batch the server does not take (down, 5xx) is kept and re-sent with the same
idempotency key; the backlog is bounded and overflow is counted and logged.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import datetime as dt
import time
import uuid
from dataclasses import dataclass
from typing import Any

import httpx
import structlog
from prometheus_client import Counter, Gauge, Histogram, start_http_server

from p4relay_server.config import Settings
from p4relay_server.schemas.ingest import (
    EventIn,
    IngestBatch,
    PortInfo,
    QueueSampleIn,
    SwitchInfo,
)

log = structlog.get_logger("p4relay.collector")

CELL_BYTES = 80
COLLECTOR_CLIENT_ID = 2
RELAY_TABLE = "pipe.Ingress.relay"  # the 5-tuple table a call's entries fill
SPEED_BPS = {
    "BF_SPEED_1G": 1e9,
    "BF_SPEED_10G": 10e9,
    "BF_SPEED_25G": 25e9,
    "BF_SPEED_40G": 40e9,
    "BF_SPEED_50G": 50e9,
    "BF_SPEED_100G": 100e9,
    "BF_SPEED_200G": 200e9,
    "BF_SPEED_400G": 400e9,
}

POLLS = Counter("p4relay_collector_polls_total", "switch polls", ["switch", "outcome"])
POLL_SECONDS = Histogram("p4relay_collector_poll_seconds", "time to read one switch", ["switch"])
SENT = Counter("p4relay_collector_batches_total", "batches sent to the server", ["outcome"])
BACKLOG = Gauge("p4relay_collector_backlog_batches", "batches waiting to be re-sent")
DROPPED = Counter(
    "p4relay_collector_dropped_batches_total", "batches lost because the backlog was full"
)


@dataclass(frozen=True)
class PortReading:
    dev_port: int
    name: str | None
    up: bool | None
    line_rate_bps: float | None
    tx_packets: int
    tx_bytes: int
    usage_cells: int
    queue_drops: int


def line_rate(speed: object, shaping_kbps: int | None) -> float | None:
    if shaping_kbps:
        return shaping_kbps * 1000.0
    return SPEED_BPS.get(str(speed)) if speed else None


def derive_sample(
    switch: str, prev: PortReading | None, cur: PortReading, dt_s: float, ts: dt.datetime
) -> QueueSampleIn:
    """A queue sample from two readings `dt_s` apart (prev None: first poll)."""
    depth_bytes = cur.usage_cells * CELL_BYTES
    rate = cur.line_rate_bps
    delay = depth_bytes * 8 / rate * 1e6 if rate else None
    util = drops = tx_p = tx_b = None
    if prev is not None and dt_s > 0:
        tx_b = _delta(prev.tx_bytes, cur.tx_bytes)
        tx_p = _delta(prev.tx_packets, cur.tx_packets)
        drops = _delta(prev.queue_drops, cur.queue_drops)
        if rate:
            util = min(1.0, tx_b * 8 / (dt_s * rate))
    return QueueSampleIn(
        switch=switch,
        dev_port=cur.dev_port,
        queue=0,
        ts=ts,
        depth_bytes=depth_bytes,
        queue_delay_us=delay,
        utilisation=util,
        drops=drops or 0,
        tx_packets=tx_p,
        tx_bytes=tx_b,
    )


def _delta(prev: int, cur: int) -> int:
    return cur - prev if cur >= prev else cur  # the counter was reset


class SwitchPoller:
    """One registered switch: a BfRt session and the previous readings."""

    def __init__(self, name: str, address: str, device_id: int, timeout_s: float) -> None:
        self.name = name
        self.address = address
        self.device_id = device_id
        self.timeout_s = timeout_s
        self.client: Any = None
        self.up: bool | None = None  # None until the first poll
        self.prev: dict[int, PortReading] = {}
        self.prev_t: float | None = None
        self.relay: tuple[int, int] | None = None  # (used, capacity) of the last poll

    async def _connect(self) -> Any:
        from p4relay_switch import Subscription, SwitchClient

        client = SwitchClient(
            self.address,
            client_id=COLLECTOR_CLIENT_ID,
            device_id=self.device_id,
            timeout_s=self.timeout_s,
            connect_timeout_s=self.timeout_s,
            subscription=Subscription(learn=False, idle_timeout=False, port_status=False),
            reconnect=False,
        )
        await client.connect()
        return client

    async def close(self) -> None:
        if self.client is not None:
            client, self.client = self.client, None
            try:
                await client.close()
            except Exception as e:  # closing a broken channel may fail too
                log.debug("close failed", switch=self.name, error=repr(e))

    async def read_relay_table(self) -> tuple[int, int] | None:
        """(entries in use, table size); None when the program has no relay table."""
        from p4relay_switch import SchemaError

        if self.client is None:
            self.client = await self._connect()
        try:
            size = int(self.client.schema.table(RELAY_TABLE).size)
        except SchemaError as e:
            log.warning("no relay table in this switch's program", switch=self.name, error=str(e))
            return None
        return int(await self.client.usage(RELAY_TABLE)), size

    async def read(self) -> list[PortReading]:
        if self.client is None:
            self.client = await self._connect()
        sw = self.client
        self.relay = await self.read_relay_table()
        ports = await sw.read("$PORT")
        dev_ports = sorted(int(e.key["$DEV_PORT"]) for e in ports)
        if not dev_ports:
            return []
        shaping = {
            int(e.key["dev_port"]): int(e.data.get("max_rate") or 0)
            for e in await sw.read(
                "tf1.tm.port.sched_shaping", [{"dev_port": p} for p in dev_ports]
            )
        }
        stats = await sw.port_stats(dev_ports)
        out = []
        for e in sorted(ports, key=lambda e: int(e.key["$DEV_PORT"])):
            p = int(e.key["$DEV_PORT"])
            q = await sw.queue_stats(p)
            st = stats.get(p, {})
            out.append(
                PortReading(
                    dev_port=p,
                    name=_str_or_none(e.data.get("$PORT_NAME")),
                    up=_bool_or_none(e.data.get("$PORT_UP", e.data.get("$PORT_ENABLE"))),
                    line_rate_bps=line_rate(e.data.get("$SPEED"), shaping.get(p)),
                    tx_packets=int(st.get("$FramesTransmittedOK", 0)),
                    tx_bytes=int(st.get("$OctetsTransmittedTotal", 0)),
                    usage_cells=int(q.get("usage_cells", 0)),
                    queue_drops=int(q.get("drop_count_packets", 0)),
                )
            )
        return out

    async def poll(self) -> tuple[SwitchInfo, list[QueueSampleIn], list[EventIn]]:
        """One reading turned into switch info, samples and up/down events."""
        from p4relay_switch import SwitchError

        now = dt.datetime.now(dt.UTC)
        t0 = time.monotonic()
        events: list[EventIn] = []
        try:
            readings = await asyncio.wait_for(self.read(), timeout=self.timeout_s * 4)
        except (SwitchError, TimeoutError, OSError) as e:
            POLLS.labels(self.name, "error").inc()
            await self.close()
            self.prev, self.prev_t = {}, None
            if self.up is not False:
                events.append(self._event("switch_down", now, "error", f"BfRt poll failed: {e!r}"))
                log.warning("switch down", switch=self.name, address=self.address, error=repr(e))
            self.up = False
            return SwitchInfo(name=self.name, grpc_address=self.address, up=False), [], events
        POLLS.labels(self.name, "ok").inc()
        POLL_SECONDS.labels(self.name).observe(time.monotonic() - t0)
        if self.up is not True:
            events.append(self._event("switch_up", now, "info", "BfRt reachable"))
            log.info("switch up", switch=self.name, address=self.address, ports=len(readings))
        self.up = True
        dt_s = t0 - self.prev_t if self.prev_t is not None else 0.0
        samples = [
            derive_sample(self.name, self.prev.get(r.dev_port), r, dt_s, now) for r in readings
        ]
        self.prev = {r.dev_port: r for r in readings}
        self.prev_t = t0
        info = SwitchInfo(
            name=self.name,
            grpc_address=self.address,
            device_id=self.device_id,
            up=True,
            relay_table_used=self.relay[0] if self.relay else None,
            relay_table_capacity=self.relay[1] if self.relay else None,
            ports=[
                PortInfo(
                    dev_port=r.dev_port,
                    name=r.name[:64] if r.name else None,
                    speed_mbps=int(r.line_rate_bps / 1e6) if r.line_rate_bps else None,
                    up=r.up,
                )
                for r in readings
            ],
        )
        return info, samples, events

    def _event(self, kind: str, ts: dt.datetime, severity: str, message: str) -> EventIn:
        return EventIn.model_validate(
            {
                "event_id": str(uuid.uuid4()),
                "type": kind,
                "ts": ts,
                "severity": severity,
                "switch": self.name,
                "message": message,
                "payload": {"address": self.address},
            }
        )


def _str_or_none(v: object) -> str | None:
    return v if isinstance(v, str) and v else None


def _bool_or_none(v: object) -> bool | None:
    return v if isinstance(v, bool) else None


class Collector:
    def __init__(self, settings: Settings, http: httpx.AsyncClient | None = None) -> None:
        self.cfg = settings.collector
        if self.cfg.token is None:
            raise ValueError(
                "collector needs an ingest token (--token-file or P4RELAY_COLLECTOR__TOKEN)"
            )
        headers = {"Authorization": f"Bearer {self.cfg.token.get_secret_value()}"}
        self.http = http or httpx.AsyncClient(
            base_url=self.cfg.server_url, headers=headers, timeout=10.0
        )
        self.http.headers.update(headers)
        self.pollers: dict[str, SwitchPoller] = {}
        self.backlog: collections.deque[IngestBatch] = collections.deque()
        self.backlog_max = 1000

    async def refresh_switches(self) -> None:
        r = await self.http.get("/api/v1/ingest/switches")
        r.raise_for_status()
        seen = set()
        for sw in r.json():
            name, addr = sw["name"], sw["grpc_address"]
            seen.add(name)
            cur = self.pollers.get(name)
            if cur is None or cur.address != addr or cur.device_id != sw["device_id"]:
                if cur is not None:
                    await cur.close()
                self.pollers[name] = SwitchPoller(
                    name, addr, sw["device_id"], self.cfg.bfrt_timeout_s
                )
        for name in set(self.pollers) - seen:
            await self.pollers.pop(name).close()

    async def poll_once(self) -> list[IngestBatch]:
        """Poll every switch and send one batch per switch; returns the batches."""
        results = await asyncio.gather(*(p.poll() for p in self.pollers.values()))
        batches = [
            IngestBatch(
                idempotency_key=f"collector-{uuid.uuid4()}",
                switch=info,
                queue_samples=samples,
                events=events,
            )
            for info, samples, events in results
        ]
        for b in batches:
            self._enqueue(b)
        await self.flush()
        return batches

    def _enqueue(self, batch: IngestBatch) -> None:
        if len(self.backlog) >= self.backlog_max:
            lost = self.backlog.popleft()
            DROPPED.inc()
            log.error("backlog full: oldest batch dropped", idempotency_key=lost.idempotency_key)
        self.backlog.append(batch)
        BACKLOG.set(len(self.backlog))

    async def flush(self) -> None:
        while self.backlog:
            batch = self.backlog[0]
            try:
                r = await self.http.post(
                    "/api/v1/ingest",
                    content=batch.model_dump_json(),
                    headers={"Content-Type": "application/json"},
                )
            except httpx.HTTPError as e:
                SENT.labels("retry").inc()
                log.warning(
                    "server unreachable; will re-send", error=repr(e), backlog=len(self.backlog)
                )
                return
            if r.status_code >= 500:
                SENT.labels("retry").inc()
                log.warning("server error; will re-send", status=r.status_code)
                return
            self.backlog.popleft()
            BACKLOG.set(len(self.backlog))
            if r.status_code == 200:
                SENT.labels("ok").inc()
            else:  # 4xx: re-sending cannot help; say loudly what was refused
                SENT.labels("refused").inc()
                log.error("server refused batch", status=r.status_code, detail=r.text[:2000])

    async def run(self, once: bool = False) -> None:
        refresh_every = max(1, int(10 / max(self.cfg.interval_s, 0.01)))
        n = 0
        try:
            while True:
                t0 = time.monotonic()
                if n % refresh_every == 0:
                    try:
                        await self.refresh_switches()
                    except httpx.HTTPError as e:
                        log.warning("cannot list switches", error=repr(e))
                await self.poll_once()
                n += 1
                if once:
                    return
                await asyncio.sleep(max(0.0, self.cfg.interval_s - (time.monotonic() - t0)))
        finally:
            for p in self.pollers.values():
                await p.close()
            await self.http.aclose()


def run_collector(settings: Settings, once: bool = False) -> int:
    if settings.collector.metrics_port and not once:
        start_http_server(settings.collector.metrics_port, settings.collector.metrics_host)
    try:
        collector = Collector(settings)
    except ValueError as e:
        log.error(str(e))
        return 2
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(collector.run(once=once))
    return 0
