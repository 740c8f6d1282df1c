"""One registered switch: its BfRt session, the previous readings, and one poll.

A poll reads the fixed tables ($PORT, $PORT_STAT, tf1.tm.port.sched_shaping,
tf1.tm.counter.queue), the relay table's occupancy (BfRt TableUsage of
`pipe.Ingress.relay`, its size from bfrt.json) and iRED's ports (ired.py),
through `p4relay_switch`.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
import uuid
from dataclasses import dataclass
from typing import Literal

import structlog
from p4relay_switch import ReadEntry, SchemaError, Subscription, SwitchClient, SwitchError
from p4relay_switch.names import IRED_CELL_BYTES

from p4relay_collector import metrics
from p4relay_collector.ired import IredReading, IredTracker
from p4relay_collector.queues import PortReading, derive_sample, line_rate
from p4relay_collector.wire import Event, PortInfo, QueueSample, Severity, SwitchInfo

log = structlog.get_logger("p4relay.collector")

RELAY_TABLE = "pipe.Ingress.relay"  # the 5-tuple table a call's entries fill


@dataclass(frozen=True, slots=True)
class Poll:
    """What one poll of one switch found."""

    ts: dt.datetime
    switch: SwitchInfo
    samples: list[QueueSample]
    events: list[Event]


class SwitchPoller:
    """A switch's BfRt session (opened on the first poll, again after a failure)
    and the readings of its previous poll."""

    def __init__(
        self, name: str, address: str, device_id: int, *, timeout_s: float, client_id: int = 2
    ) -> None:
        self.name = name
        self.address = address
        self.device_id = device_id
        self.timeout_s = timeout_s
        self.client_id = client_id
        self.client: SwitchClient | None = None
        self.up: bool | None = None  # None until the first poll
        self.prev: dict[int, PortReading] = {}
        self.prev_t: float | None = None
        self.ired = IredTracker(name)

    async def _connected(self) -> SwitchClient:
        if self.client is None:
            client = SwitchClient(
                self.address,
                client_id=self.client_id,
                device_id=self.device_id,
                timeout_s=self.timeout_s,
                connect_timeout_s=self.timeout_s,
                subscription=Subscription(learn=False, idle_timeout=False, port_status=False),
                reconnect=False,
            )
            try:
                await client.connect()
            except BaseException:
                await client.close()
                raise
            self.client = client
        return self.client

    async def close(self) -> None:
        if self.client is not None:
            client, self.client = self.client, None
            try:
                await client.close()
            except (SwitchError, OSError) as e:  # closing a broken channel may fail too
                log.debug("close failed", switch=self.name, error=repr(e))

    async def read_relay_table(self, sw: SwitchClient) -> tuple[int, int] | None:
        """(entries in use, table size); None when the program has no relay table."""
        try:
            size = sw.schema.table(RELAY_TABLE).size
        except SchemaError as e:
            log.warning("no relay table in this switch's program", switch=self.name, error=str(e))
            return None
        return await sw.usage(RELAY_TABLE), size

    async def read(
        self,
    ) -> tuple[list[PortReading], tuple[int, int] | None, list[IredReading]]:
        """Every port's reading, the relay table's (used, size), iRED's ports."""
        sw = await self._connected()
        relay = await self.read_relay_table(sw)
        ired = await self.ired.read(sw)
        ports = sorted(await sw.read("$PORT"), key=_dev_port)
        dev_ports = [_dev_port(e) for e in ports]
        if not dev_ports:
            return [], relay, ired
        shaping = {
            _int(e.key.get("dev_port")): _int(e.data.get("max_rate"))
            for e in await sw.read(
                "tf1.tm.port.sched_shaping", [{"dev_port": p} for p in dev_ports]
            )
        }
        stats = await sw.port_stats(dev_ports)
        out: list[PortReading] = []
        for e, p in zip(ports, dev_ports, strict=True):
            q = await sw.queue_stats(p)
            st = stats.get(p, {})
            up = e.data.get("$PORT_UP", e.data.get("$PORT_ENABLE"))
            out.append(
                PortReading(
                    dev_port=p,
                    name=_str_or_none(e.data.get("$PORT_NAME")),
                    up=up if isinstance(up, bool) else None,
                    line_rate_bps=line_rate(_str_or_none(e.data.get("$SPEED")), shaping.get(p)),
                    tx_packets=st.get("$FramesTransmittedOK", 0),
                    tx_bytes=st.get("$OctetsTransmittedTotal", 0),
                    usage_cells=q.get("usage_cells", 0),
                    queue_drops=q.get("drop_count_packets", 0),
                )
            )
        return out, relay, ired

    async def poll(self) -> Poll:
        """One reading turned into switch info, queue samples and up/down events."""
        now = dt.datetime.now(dt.UTC)
        t0 = time.monotonic()
        try:
            readings, relay, ired = await asyncio.wait_for(self.read(), timeout=self.timeout_s * 4)
        except (SwitchError, TimeoutError, OSError) as e:
            metrics.POLLS.labels(self.name, "error").inc()
            metrics.SWITCH_UP.labels(self.name).set(0)
            await self.close()
            self.prev, self.prev_t = {}, None
            self.ired.reset()
            events: list[Event] = []
            if self.up is not False:
                events.append(self._event("switch_down", now, "error", f"BfRt poll failed: {e!r}"))
                log.warning("switch down", switch=self.name, address=self.address, error=repr(e))
            self.up = False
            info = SwitchInfo(
                name=self.name, grpc_address=self.address, device_id=self.device_id, up=False
            )
            return Poll(now, info, [], events)
        metrics.POLLS.labels(self.name, "ok").inc()
        metrics.POLL_SECONDS.labels(self.name).observe(time.monotonic() - t0)
        metrics.SWITCH_UP.labels(self.name).set(1)
        events = []
        if self.up is not True:
            events.append(self._event("switch_up", now, "info", "BfRt reachable"))
            log.info("switch up", switch=self.name, address=self.address, ports=len(readings))
        self.up = True
        dt_s = t0 - self.prev_t if self.prev_t is not None else 0.0
        qavg = {r.dev_port: r.state.qavg * IRED_CELL_BYTES for r in ired}
        samples = [
            derive_sample(self.name, self.prev.get(r.dev_port), r, dt_s, now, qavg.get(r.dev_port))
            for r in readings
        ]
        self.prev = {r.dev_port: r for r in readings}
        self.prev_t = t0
        events += self.ired.events(ired, now)
        info = SwitchInfo(
            name=self.name,
            grpc_address=self.address,
            device_id=self.device_id,
            up=True,
            relay_table_used=relay[0] if relay else None,
            relay_table_capacity=relay[1] if relay else None,
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
        return Poll(now, info, samples, events)

    def _event(
        self,
        kind: Literal["switch_up", "switch_down"],
        ts: dt.datetime,
        severity: Severity,
        message: str,
    ) -> Event:
        return Event(
            event_id=str(uuid.uuid4()),
            type=kind,
            ts=ts,
            severity=severity,
            switch=self.name,
            message=message,
            payload={"address": self.address},
        )


def _dev_port(e: ReadEntry) -> int:
    return _int(e.key.get("$DEV_PORT"))


def _int(v: object) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


def _str_or_none(v: object) -> str | None:
    return v if isinstance(v, str) and v else None
