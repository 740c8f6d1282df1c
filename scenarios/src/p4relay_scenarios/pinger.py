"""ICMP echo round-trip times, as ping measures them, as JSON for the experiments.

    ip netns exec NS python -m p4relay_scenarios.pinger DST --interval 0.05 --seconds 20

Prints {"sent": n, "rtt_ms": [...]} (one RTT per answered request, in send
order); a request not answered within --wait after the last one counts as
lost. A raw socket (root), so no ping binary is needed in the namespace.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import socket
import struct
import sys
import time

ECHO_REQUEST = 8
ECHO_REPLY = 0
PAYLOAD = 48  # bytes after the 8-byte send time: ping's default 56-byte data


def checksum(data: bytes) -> int:
    """The Internet checksum (RFC 1071)."""
    if len(data) % 2:
        data += b"\0"
    s: int = sum(struct.unpack(f"!{len(data) // 2}H", data))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def echo_request(ident: int, seq: int, sent_ns: int) -> bytes:
    body = struct.pack("!Q", sent_ns) + bytes(PAYLOAD)
    head = struct.pack("!BBHHH", ECHO_REQUEST, 0, 0, ident, seq)
    return struct.pack("!BBHHH", ECHO_REQUEST, 0, checksum(head + body), ident, seq) + body


def parse_reply(packet: bytes, ident: int) -> tuple[int, int] | None:
    """(seq, send time ns) of one of our echo replies (an IPv4 packet), else None."""
    if len(packet) < 20:
        return None
    ihl = (packet[0] & 0x0F) * 4
    icmp = packet[ihl:]
    if len(icmp) < 16:
        return None
    kind, _code, _csum, rid, seq = struct.unpack_from("!BBHHH", icmp)
    if kind != ECHO_REPLY or rid != ident:
        return None
    return seq, struct.unpack_from("!Q", icmp, 8)[0]


def ping(dst: str, interval_s: float, seconds: float, wait_s: float) -> tuple[int, list[float]]:
    """Send a request every interval_s for seconds; (sent, RTTs in ms in send order)."""
    ident = os.getpid() & 0xFFFF
    rtts: dict[int, float] = {}
    with socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP) as s:
        s.setblocking(False)
        t0 = time.monotonic()
        end = t0 + seconds
        sent = 0
        while True:
            now = time.monotonic()
            if now >= end + wait_s:
                break
            if now < end and now >= t0 + sent * interval_s:
                s.sendto(echo_request(ident, sent & 0xFFFF, time.monotonic_ns()), (dst, 0))
                sent += 1
                continue
            next_send = t0 + sent * interval_s if now < end else end + wait_s
            ready, _, _ = select.select([s], [], [], max(0.0, next_send - now))
            while ready:
                try:
                    packet = s.recv(2048)
                except BlockingIOError:
                    break
                got = parse_reply(packet, ident)
                if got is not None:
                    seq, sent_ns = got
                    rtts.setdefault(seq, (time.monotonic_ns() - sent_ns) / 1e6)
    # seq wraps at 65536: at most 65536 requests are told apart (55 min at 50 ms).
    return sent, [rtts[k] for k in sorted(rtts)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m p4relay_scenarios.pinger",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("dst", help="IPv4 address to ping")
    ap.add_argument("--interval", type=float, default=0.1, help="seconds between requests")
    ap.add_argument("--seconds", type=float, default=10.0, help="how long to send")
    ap.add_argument("--wait", type=float, default=2.0, help="seconds to wait for late replies")
    a = ap.parse_args(argv)
    if a.interval <= 0 or a.seconds <= 0 or a.wait < 0:
        ap.error("--interval and --seconds must be positive, --wait not negative")
    if a.seconds / a.interval > 65536:
        ap.error("at most 65536 requests per run (--seconds / --interval)")
    try:
        sent, rtts = ping(a.dst, a.interval, a.seconds, a.wait)
    except PermissionError:
        print("pinger: a raw ICMP socket needs root", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"pinger: {a.dst}: {exc}", file=sys.stderr)
        return 1
    print(json.dumps({"sent": sent, "rtt_ms": [round(r, 3) for r in rtts]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
