"""INT telemetry report intake of the collector, on one core (prints a table).

1. decode + record: `IntTelemetry.handle` over 50,000 reports of 1,000 flows
   (2 hops each, a congestion onset and clear now and then), drained every
   1,000 reports as the poll loop does; 5 runs, median reports/s.
2. over UDP: the collector's real listener (`int_reports.listen`) in a child
   process pinned to CPU 0, a sender pinned to CPU 1 pacing reports for 3 s
   at each offered rate; decoded / sent.
Target: >= 20,000 reports/s on one core.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import multiprocessing as mp
import os
import platform
import socket
import statistics
import struct
import subprocess
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path

from p4relay_collector.int_reports import IntTelemetry, Report, listen

TARGET = 20_000
RATES = (20_000, 40_000)
SECONDS = 3.0


def hop(sw: int, inp: int, outp: int, lat_ns: int, cells: int) -> bytes:
    return struct.pack("!IHHIII", sw, inp, outp, lat_ns, cells, 0)


def make_report(flow: int, hot: bool) -> bytes:
    """A sink's report of a 2-hop path (switch/p4/include/int_headers.p4)."""
    hops = hop(3, 2, 1, 1000, 2) + hop(1, 5, 2, 9_000_000 if hot else 800, 500 if hot else 4)
    flags = 0xC000 if hot else 0
    shim = bytes([0x10, 14, 0, 0])
    md = bytes([0x20, 0, 5, 0]) + struct.pack("!HHHH", 0xF100, 0x7072, 0, flags)
    body = shim + md + hops + b"\x80" + bytes(171)
    udp = struct.pack("!HHHH", 10000 + flow % 50000, 20000, 8 + len(body), 0) + body
    ip = struct.pack(
        "!BBHHHBBH4s4s", 0x45, 0x17 << 2, 20 + len(udp), 0, 0, 62, 17, 0,
        bytes([10, 0, flow >> 8 & 255, flow & 255]), bytes([10, 1, 0, 2]),
    )  # fmt: skip
    frame = b"\x02" * 6 + b"\x04" * 6 + b"\x08\x00" + ip + udp
    return struct.pack("!II", (2 << 28) | flow, 9) + bytes([0x13, 80, 0, 0x30]) + bytes(8) + frame


def reports(n: int) -> list[bytes]:
    return [make_report(i % 1000, hot=(i // 1000) % 10 == 9) for i in range(n)]


def decode_rate(data: list[bytes]) -> float:
    t = IntTelemetry()
    now = dt.datetime.now(dt.UTC)
    t0 = time.perf_counter()
    for i, d in enumerate(data):
        if t.handle(d, now) is None:
            raise SystemExit("bench report did not decode")
        if i % 1000 == 999:
            t.drain()
    return len(data) / (time.perf_counter() - t0)


class _Counting(IntTelemetry):
    decoded: int = 0

    def handle(self, data: bytes, now: dt.datetime) -> Report | None:
        r = super().handle(data, now)
        if r is not None:
            self.decoded += 1
            if self.decoded % 1000 == 0:
                self.drain()
        return r


def _listener(port: int, ready: Connection, done: Connection) -> None:
    os.sched_setaffinity(0, {0})

    async def run() -> None:
        t = _Counting()
        transport = await listen(t, "127.0.0.1", port)
        ready.send(True)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, done.recv)
        await asyncio.sleep(0.5)
        transport.close()
        done.send(t.decoded)

    asyncio.run(run())


def udp_run(rate: int, data: list[bytes]) -> tuple[int, int]:
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    ready_r, ready_w = mp.Pipe(duplex=False)
    done_a, done_b = mp.Pipe()
    child = mp.Process(target=_listener, args=(port, ready_w, done_b))
    child.start()
    ready_r.recv()
    os.sched_setaffinity(0, {1})
    sent = 0
    batch = max(1, rate // 1000)  # one batch per ms
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        t0 = time.perf_counter()
        while (elapsed := time.perf_counter() - t0) < SECONDS:
            due = int(elapsed * rate)
            while sent < due:
                for _ in range(min(batch, due - sent)):
                    s.sendto(data[sent % len(data)], ("127.0.0.1", port))
                    sent += 1
            time.sleep(0.0005)
    done_a.send(True)
    decoded = int(done_a.recv())
    child.join(10)
    return sent, decoded


def commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main() -> int:
    if len(os.sched_getaffinity(0)) < 2:
        print("int_reports_bench: needs 2 CPUs (listener and sender pinned apart)", file=sys.stderr)
        return 2
    data = reports(50_000)
    os.sched_setaffinity(0, {0})
    rates = [decode_rate(data) for _ in range(5)]
    os.sched_setaffinity(0, set(range(os.cpu_count() or 2)))
    med = statistics.median(rates)
    rows = [
        f"| decode + record (`IntTelemetry.handle`), 50,000 reports, median of 5 "
        f"| {med:,.0f} reports/s | {med / TARGET:.1f}x |"
    ]
    for rate in RATES:
        sent, decoded = udp_run(rate, data)
        rows.append(
            f"| UDP listener, {rate:,} reports/s offered for {SECONDS:.0f} s "
            f"| {decoded / SECONDS:,.0f} reports/s decoded ({decoded:,} of {sent:,}, "
            f"{100 * decoded / max(sent, 1):.1f} %) | {decoded / SECONDS / TARGET:.1f}x |"
        )
    head = (
        f"INT report intake, one core (target >= {TARGET:,} reports/s)\n\n"
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}; commit {commit()}; "
        f"{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC; "
        "command: `make bench STAGE=collector-int`\n\n"
        "| measure | result | vs target |\n|---|---|---|"
    )
    table = head + "\n" + "\n".join(rows)
    print(table)
    if out := os.environ.get("BENCH_TABLE"):
        Path(out).write_text(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
