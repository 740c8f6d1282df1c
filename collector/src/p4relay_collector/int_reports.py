"""Telemetry reports from INT sinks (switch/p4 standard profile): a UDP listener,
the report decoder, and what the reports become — per switch/port/queue
samples, per-flow path records, congestion_onset/congestion_clear events.

Wire format (switch/p4/include/int_headers.p4): Telemetry Report v2.0 group
header (8 bytes) and individual report (12 bytes, rep_type 1 = INT, in_type 3
= Ethernet), the sink's own hop as the report's metadata (md_len words,
fields by rep_md_bits: the sink sends level-1 ports, hop latency, queue id +
occupancy; md_len 0 when it has none), then the sink's frame: Ethernet (optional 802.1Q), IPv4 without
options marked with DSCP 0x17, UDP, INT-MD shim (4), metadata header (12) and
1..2 hops of 20 bytes (newest first): switch id, ingress and egress port, hop
latency (ns in the egress queue), queue id + occupancy (80-byte cells), the
egress port's tx byte count. ds_flags: bit 15 a hop was at/over its onset
threshold, bit 14 a hop was over its clear threshold, bits 13 / 12 the
second / first hop from the source was at/over onset, bits 11..0 path
signature. A report that does not decode is counted by reason and dropped.
"""

from __future__ import annotations

import datetime as dt
import socket
import struct
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import Counter, Gauge

from p4relay_collector.wire import Endpoint, Event, PathHop, PathRecord, QueueSample

INT_DSCP = 0x17
INT_TYPE_MD = 1
INT_VERSION = 2
HOP_WORDS = 5
HOP_BYTES = 20
MAX_HOPS = 2
INSTRUCTIONS = 0xF100
CELL_BYTES = 80
FLAG_ONSET = 0x8000
FLAG_OVER_CLEAR = 0x4000
SIG_MASK = 0x0FFF

REPORTS = Counter("p4relay_collector_int_reports_total", "telemetry reports decoded", ["switch"])
BAD_REPORTS = Counter(
    "p4relay_collector_int_reports_bad_total", "telemetry reports dropped", ["reason"]
)
PATH_CHANGES = Counter(
    "p4relay_collector_int_path_changes_total", "flows seen on a new path of switches"
)
HOP_QUEUE_CELLS = Gauge(
    "p4relay_collector_int_queue_cells",
    "deepest queue occupancy at dequeue reported in the last interval (80-byte cells)",
    ["switch", "port", "queue"],
)
HOP_LATENCY = Gauge(
    "p4relay_collector_int_hop_latency_seconds",
    "longest time in the egress queue reported in the last interval",
    ["switch", "port", "queue"],
)
PATHS_DROPPED = Counter(
    "p4relay_collector_int_path_records_dropped_total",
    "path records not sent: more path changes between two sends than max_path_records",
)
FLOWS = Gauge("p4relay_collector_int_flows", "flows with a path record")
CONGESTED_FLOWS = Gauge("p4relay_collector_int_congested_flows", "flows in a congestion episode")


class ReportError(ValueError):
    """A datagram that is not a telemetry report this collector reads; `reason`
    is the metric label."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


@dataclass(frozen=True)
class Hop:
    switch_id: int
    ingress_port: int
    egress_port: int
    latency_ns: int
    queue_id: int
    queue_cells: int
    tx_bytes: int | None  # None: the sink's own hop (its report carries no tx count)


@dataclass(frozen=True)
class Flow:
    src: str
    dst: str
    sport: int
    dport: int

    def __str__(self) -> str:
        return f"{self.src}:{self.sport}->{self.dst}:{self.dport}"


@dataclass(frozen=True)
class Report:
    node_id: int
    seq: int
    flow: Flow
    onset: bool
    over_clear: bool
    path_sig: int
    hop_limit_hit: bool
    hops: tuple[Hop, ...]  # newest first, as on the wire
    sink: Hop | None = None  # the sink's own hop (the report's metadata), if sent

    @property
    def path(self) -> tuple[int, ...]:
        """Switch ids from the source onwards."""
        return tuple(h.switch_id for h in reversed(self.hops))

    @property
    def route(self) -> tuple[tuple[int, int, int], ...]:
        """(switch id, ingress port, egress port) per hop from the source on;
        the sink last (ports -1 when its report carries no hop of its own)."""
        s = self.sink
        return (
            *((h.switch_id, h.ingress_port, h.egress_port) for h in reversed(self.hops)),
            (self.node_id, -1, -1) if s is None else (self.node_id, s.ingress_port, s.egress_port),
        )

    @property
    def all_hops(self) -> tuple[Hop, ...]:
        """The stack's hops and the sink's own."""
        return self.hops if self.sink is None else (*self.hops, self.sink)


def _need(data: bytes, end: int, what: str) -> None:
    if len(data) < end:
        raise ReportError("truncated", f"{what} needs {end} bytes, report has {len(data)}")


def _ip(b: bytes) -> str:
    return ".".join(str(x) for x in b)


# Telemetry Report v2.0 rep_md_bits (bit 0 = the most significant): the
# bytes each field takes in the individual report's metadata
MD_FIELD_BYTES = (
    4,
    4,
    4,
    8,
    8,
    8,
    4,
    4,
)  # ports, latency, queue, ingress/egress ts, L2 ports, tx, buffer


def _sink_hop(data: bytes, node_id: int, md_len: int, bits: int) -> Hop | None:
    """The sink's own hop from the individual report's metadata (at byte 20);
    None without one. Fields it does not carry read as 0."""
    if md_len == 0:
        return None
    if bits & 0xFF or not bits:
        raise ReportError("metadata", f"rep_md_bits {bits:#06x}: unknown fields")
    sizes = [n for i, n in enumerate(MD_FIELD_BYTES) if bits & (0x8000 >> i)]
    if sum(sizes) != 4 * md_len:
        raise ReportError("metadata", f"md_len {md_len} words for rep_md_bits {bits:#06x}")
    _need(data, 20 + 4 * md_len, "report metadata")
    off, vals = 20, {}
    for i, n in enumerate(MD_FIELD_BYTES):
        if bits & (0x8000 >> i):
            vals[i] = data[off : off + n]
            off += n
    inp, outp = struct.unpack("!HH", vals[0]) if 0 in vals else (0, 0)
    lat = struct.unpack("!I", vals[1])[0] if 1 in vals else 0
    q = struct.unpack("!I", vals[2])[0] if 2 in vals else 0
    return Hop(node_id, inp, outp, lat, q >> 24, q & 0xFFFFFF, None)


def parse_report(data: bytes) -> Report:
    """Decodes one report datagram (the UDP payload); raises ReportError."""
    _need(data, 20, "report headers")
    w0, node_id = struct.unpack_from("!II", data, 0)
    if w0 >> 28 != 2:
        raise ReportError("version", f"group header version {w0 >> 28}, want 2")
    seq = w0 & 0x3FFFFF
    rep_type = data[8] >> 4
    in_type = data[8] & 0xF
    if rep_type != 1 or in_type != 3:
        raise ReportError("type", f"rep_type {rep_type} in_type {in_type}, want INT over Ethernet")
    md_len = data[10]
    sink = _sink_hop(data, node_id, md_len, struct.unpack_from("!H", data, 12)[0])
    off = 20 + 4 * md_len
    _need(data, off + 14, "Ethernet")
    ether = struct.unpack_from("!H", data, off + 12)[0]
    off += 14
    if ether == 0x8100:
        _need(data, off + 4, "802.1Q")
        ether = struct.unpack_from("!H", data, off + 2)[0]
        off += 4
    if ether != 0x0800:
        raise ReportError("not_ipv4", f"ether type {ether:#06x}")
    _need(data, off + 20, "IPv4")
    vihl, tos = data[off], data[off + 1]
    if vihl != 0x45:
        raise ReportError("ipv4", f"version/ihl {vihl:#04x}: INT packets carry no options")
    if tos >> 2 != INT_DSCP:
        raise ReportError("no_int", f"DSCP {tos >> 2} is not the INT marker")
    if data[off + 9] != 17:
        raise ReportError("no_int", f"IP protocol {data[off + 9]} is not UDP")
    src, dst = _ip(data[off + 12 : off + 16]), _ip(data[off + 16 : off + 20])
    off += 20
    _need(data, off + 8 + 16, "UDP + INT shim + MD header")
    sport, dport, udp_len = struct.unpack_from("!HHH", data, off)
    off += 8
    shim_type, shim_len = data[off] >> 4, data[off + 1]
    if shim_type != INT_TYPE_MD or (data[off] >> 2) & 3 != 0:
        raise ReportError("int", f"shim type {shim_type}, want INT-MD with NPT 0")
    md = off + 4
    ver, hop_ml = data[md] >> 4, data[md + 2] & 0x1F
    e_bit = bool(data[md] & 0x04)
    remaining = data[md + 3]
    bitmap, _ds_id, _csum, ds_flags = struct.unpack_from("!HHHH", data, md + 4)
    if ver != INT_VERSION or hop_ml != HOP_WORDS or bitmap != INSTRUCTIONS:
        raise ReportError("int", f"version {ver}, hop size {hop_ml}, instructions {bitmap:#06x}")
    hops_n = (shim_len - 4) // HOP_WORDS
    if shim_len != 4 + HOP_WORDS * hops_n or not 1 <= hops_n <= MAX_HOPS:
        raise ReportError("int", f"shim length {shim_len} words")
    if remaining != MAX_HOPS - hops_n:
        raise ReportError("int", f"{remaining} hops remaining with {hops_n} on board")
    if udp_len < 8 + 4 * shim_len:
        raise ReportError("int", f"UDP length {udp_len} shorter than its INT")
    off = md + 12
    _need(data, off + HOP_BYTES * hops_n, "hop stack")
    hops = []
    for i in range(hops_n):
        sw, inp, outp, lat, q, tx = struct.unpack_from("!IHHIII", data, off + i * HOP_BYTES)
        hops.append(Hop(sw, inp, outp, lat, q >> 24, q & 0xFFFFFF, tx))
    return Report(
        node_id=node_id,
        seq=seq,
        flow=Flow(src, dst, sport, dport),
        onset=bool(ds_flags & FLAG_ONSET),
        over_clear=bool(ds_flags & FLAG_OVER_CLEAR),
        path_sig=ds_flags & SIG_MASK,
        hop_limit_hit=e_bit,
        hops=tuple(hops),
        sink=sink,
    )


@dataclass
class _FlowState:
    route: tuple[tuple[int, int, int], ...]
    congested: bool = False
    last_seen: float = 0.0


@dataclass
class _QueueAgg:
    """One queue's hops since the last drain: the deepest and the longest."""

    ts: dt.datetime
    cells: int
    latency_ns: int
    cells_g: Any
    latency_g: Any


@dataclass
class IntTelemetry:
    """Turns reports into samples, path records and congestion events; the
    collector drains them into its ingest batches. A flow's path record (its
    hops with their ports, the sink last) is sent on its first report and
    whenever it changes. Congestion per flow with the switches' hysteresis:
    onset when a hop reports at/over its onset threshold, clear when no hop is
    over its clear threshold any more. `names` maps switch ids to the names
    the server knows (default: the id)."""

    names: dict[int, str] = field(default_factory=dict)
    max_flows: int = 100_000
    # path records kept between two drains (a flapping flood is counted, not kept)
    max_path_records: int = 5000
    # bounds a stream of forged switch ids cannot push memory or label sets past
    max_queues: int = 4096
    max_switches: int = 256
    _flows: dict[Flow, _FlowState] = field(default_factory=dict)
    _queues: dict[tuple[int, int, int], _QueueAgg] = field(default_factory=dict)
    _events: list[Event] = field(default_factory=list)
    _paths: list[PathRecord] = field(default_factory=list)
    _congested: int = 0
    _reports: dict[int, Any] = field(default_factory=dict)
    # the listener's thread records, the poll loop drains
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def name(self, switch_id: int) -> str:
        return self.names.get(switch_id, str(switch_id))

    def path(self, flow: Flow) -> tuple[str, ...] | None:
        """The flow's switches from the INT source on, the sink excluded."""
        st = self._flows.get(flow)
        return None if st is None else tuple(self.name(s) for s, _, _ in st.route[:-1])

    def handle(self, data: bytes, now: dt.datetime) -> Report | None:
        """One datagram; a bad one is counted and dropped (None)."""
        try:
            r = parse_report(data)
        except ReportError as e:
            BAD_REPORTS.labels(e.reason).inc()
            return None
        with self._lock:
            self.record(r, now)
        return r

    def record(self, r: Report, now: dt.datetime) -> None:
        rep = self._reports.get(r.node_id)
        if rep is None:
            if len(self._reports) >= self.max_switches:
                BAD_REPORTS.labels("too_many_switches").inc()
                return
            rep = self._reports[r.node_id] = REPORTS.labels(self.name(r.node_id))
        rep.inc()
        for h in r.all_hops:
            key = (h.switch_id, h.egress_port, h.queue_id)
            q = self._queues.get(key)
            if q is None:
                if len(self._queues) >= self.max_queues:
                    continue
                labels = (self.name(h.switch_id), str(h.egress_port), str(h.queue_id))
                q = self._queues[key] = _QueueAgg(
                    now, -1, -1, HOP_QUEUE_CELLS.labels(*labels), HOP_LATENCY.labels(*labels)
                )
            # a sample per queue and drain, like a poll: its deepest and longest
            q.ts = now
            q.cells = max(q.cells, h.queue_cells)
            q.latency_ns = max(q.latency_ns, h.latency_ns)
        st = self._flows.get(r.flow)
        route = r.route
        if st is None:
            if len(self._flows) >= self.max_flows:
                # forget the longest-silent flow: memory stays bounded
                oldest = min(self._flows, key=lambda f: self._flows[f].last_seen)
                self._congested -= self._flows.pop(oldest).congested
            st = self._flows[r.flow] = _FlowState(route=route)
            FLOWS.set(len(self._flows))
            self._path_record(r, now)
        elif st.route != route:
            PATH_CHANGES.inc()
            st.route = route
            self._path_record(r, now)
        st.last_seen = now.timestamp()
        if r.onset and not st.congested:
            st.congested = True
            self._congested += 1
            self._event("congestion_onset", "warning", self.name(r.node_id), r, now)
            CONGESTED_FLOWS.set(self._congested)
        elif st.congested and not r.over_clear and not r.onset:
            st.congested = False
            self._congested -= 1
            self._event("congestion_clear", "info", self.name(r.node_id), r, now)
            CONGESTED_FLOWS.set(self._congested)

    def _path_record(self, r: Report, now: dt.datetime) -> None:
        if len(self._paths) >= self.max_path_records:
            PATHS_DROPPED.inc()
            return
        self._paths.append(
            PathRecord(
                ts=now,
                src=Endpoint(addr=r.flow.src, port=r.flow.sport),
                dst=Endpoint(addr=r.flow.dst, port=r.flow.dport),
                hops=[
                    PathHop(
                        switch=self.name(sw),
                        ingress_port=None if inp < 0 else inp,
                        egress_port=None if outp < 0 else outp,
                    )
                    for sw, inp, outp in r.route
                ],
            )
        )

    def _event(self, kind: str, severity: str, sink: str, r: Report, now: dt.datetime) -> None:
        hot = max(r.hops, key=lambda h: (h.queue_cells, h.latency_ns))
        self._events.append(
            Event(
                event_id=str(uuid.uuid4()),
                type="congestion_onset" if kind == "congestion_onset" else "congestion_clear",
                ts=now,
                severity="warning" if severity == "warning" else "info",
                switch=self.name(hot.switch_id),
                message=f"{kind.replace('_', ' ')} on the path of {r.flow} (INT)",
                payload={
                    "source": "int",
                    "flow": str(r.flow),
                    "path": ",".join(self.name(s) for s in r.path),
                    "dev_port": hot.egress_port,
                    "queue": hot.queue_id,
                    "depth_bytes": hot.queue_cells * CELL_BYTES,
                    "queue_delay_us": hot.latency_ns / 1000,
                    "reported_by": sink,
                },
            )
        )

    def drain(self) -> tuple[list[QueueSample], list[Event], list[PathRecord]]:
        """What arrived since the last drain, for the next ingest batch: one
        sample per queue (deepest occupancy, longest queue time), the events,
        the path records."""
        with self._lock:
            return self._drain()

    def _drain(self) -> tuple[list[QueueSample], list[Event], list[PathRecord]]:
        samples = []
        for (sw, port, queue), q in self._queues.items():
            if q.cells < 0:
                continue  # no hop since the last drain
            q.cells_g.set(q.cells)
            q.latency_g.set(q.latency_ns / 1e9)
            if port <= 511 and queue <= 127:
                samples.append(
                    QueueSample(
                        switch=self.name(sw),
                        dev_port=port,
                        queue=queue,
                        ts=q.ts,
                        depth_bytes=q.cells * CELL_BYTES,
                        queue_delay_us=q.latency_ns / 1000,
                    )
                )
            q.cells = q.latency_ns = -1
        events, self._events = self._events, []
        paths, self._paths = self._paths, []
        return samples, events, paths


class ReportListener:
    """The UDP side: a thread receiving into `telemetry` (a blocking receive
    loop costs a fraction of an event-loop callback per datagram; the socket
    buffer absorbs bursts). Nothing a datagram holds makes it raise."""

    def __init__(self, telemetry: IntTelemetry, host: str, port: int, rcvbuf: int = 4 << 20):
        self.telemetry = telemetry
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.bind((host, port))
        self.sock.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="int-reports", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                data = self.sock.recv(65535)
            except TimeoutError:
                continue
            except OSError:
                return
            self.telemetry.handle(data, dt.datetime.now(dt.UTC))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()


async def listen(telemetry: IntTelemetry, host: str, port: int) -> ReportListener:
    """Binds the report listener (OSError when the address is taken); close()
    stops it."""
    return ReportListener(telemetry, host, port)
