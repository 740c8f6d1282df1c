"""Many RTP streams from one host, each received back from its peer, with the
loss and the largest gap each receiver saw.

    ip netns exec NS python -m p4relay_scenarios.rtpflows --spec flows.json --out stats.json

The spec is a JSON list of streams, one per call: `[local_addr, local_port,
dest_addr, dest_port]`. Each stream's socket sends a G.711 packet (20 ms,
160 bytes) to its destination every --ptime-ms and receives whatever its
peer sends it. On SIGTERM or SIGINT it stops sending, keeps receiving for
--drain-s (packets in flight), writes per stream: `sent`, `received`, `lost`
(sequence numbers missing between the first and the last received),
`max_gap_ms` (the largest time between two packets received in a row),
`last_rx` (wall clock), and exits. It prints "ready" once every socket is
bound. A sender written here rather than SIPp or a media tool: the receiver
must tell which packet of which call is missing, by call.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import selectors
import signal
import socket
import struct
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

PAYLOAD = bytes(160)  # 20 ms of G.711
RTP_HEADER = struct.Struct("!BBHII")


@dataclass
class Stream:
    sock: socket.socket
    dest: tuple[str, int]
    ssrc: int
    sent: int = 0
    first_seq: int | None = None
    last_seq: int | None = None
    seqs: set[int] = field(default_factory=set)
    last_rx: float | None = None
    max_gap: float = 0.0
    max_gap_at: float | None = None

    def send(self) -> None:
        hdr = RTP_HEADER.pack(0x80, 8, self.sent & 0xFFFF, self.sent * 160, self.ssrc)
        # A refused or full send still counts as sent: the peer's loss figure shows it.
        with contextlib.suppress(BlockingIOError, ConnectionRefusedError):
            self.sock.send(hdr + PAYLOAD)
        self.sent += 1

    def receive(self, now: float) -> None:
        while True:
            try:
                data = self.sock.recv(2048)
            except (BlockingIOError, ConnectionRefusedError):
                return
            if len(data) < RTP_HEADER.size:
                continue
            seq = RTP_HEADER.unpack_from(data)[2]
            if self.first_seq is None:
                self.first_seq = seq
            self.last_seq = seq if self.last_seq is None else max(self.last_seq, seq)
            self.seqs.add(seq)
            if self.last_rx is not None and now - self.last_rx > self.max_gap:
                self.max_gap, self.max_gap_at = now - self.last_rx, now
            self.last_rx = now

    def stats(self) -> dict[str, object]:
        span = (
            0
            if self.first_seq is None or self.last_seq is None
            else self.last_seq - self.first_seq + 1
        )
        return {
            "sent": self.sent,
            "received": len(self.seqs),
            "lost": span - len(self.seqs),
            "max_gap_ms": round(self.max_gap * 1000, 2),
            "max_gap_at": self.max_gap_at,
            "last_rx": self.last_rx,
        }


def open_streams(spec: list[list[object]]) -> list[Stream]:
    streams = []
    for i, (laddr, lport, daddr, dport) in enumerate(spec):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        s.bind((str(laddr), int(str(lport))))
        dest = (str(daddr), int(str(dport)))
        s.connect(dest)
        s.setblocking(False)
        streams.append(Stream(s, dest, 0x10000 + i))
    return streams


def run(streams: list[Stream], ptime: float, drain: float) -> None:
    stop = False

    def on_signal(_sig: int, _frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    sel = selectors.DefaultSelector()
    for st in streams:
        sel.register(st.sock, selectors.EVENT_READ, st)
    print("ready", flush=True)
    next_tick = time.monotonic()
    end: float | None = None
    while True:
        mono = time.monotonic()
        if stop and end is None:
            end = mono + drain
        if end is not None and mono >= end:
            break
        if end is None and mono >= next_tick:
            for st in streams:
                st.send()
            next_tick += ptime
            if next_tick < mono:  # starved of CPU: no burst to catch up
                next_tick = mono + ptime
        wait = (end if end is not None else next_tick) - time.monotonic()
        for key, _ in sel.select(max(0.0, wait)):
            st = key.data
            assert isinstance(st, Stream)
            st.receive(time.time())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spec", required=True, help="JSON file: [[laddr, lport, daddr, dport], ...]")
    ap.add_argument("--out", required=True, help="where the per-stream figures go (JSON)")
    ap.add_argument("--ptime-ms", type=float, default=20.0)
    ap.add_argument("--drain-s", type=float, default=0.5)
    a = ap.parse_args(argv)
    spec = json.loads(Path(a.spec).read_text())
    if not isinstance(spec, list) or not all(isinstance(x, list) and len(x) == 4 for x in spec):
        print("rtpflows: the spec must be a list of [laddr, lport, daddr, dport]", file=sys.stderr)
        return 2
    streams = open_streams(spec)
    run(streams, a.ptime_ms / 1000.0, a.drain_s)
    tmp = a.out + ".tmp"
    Path(tmp).write_text(json.dumps([st.stats() for st in streams]))
    os.replace(tmp, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
