"""Free loopback ports."""

from __future__ import annotations

import socket


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    """A port on 127.0.0.1 that nothing is bound to now (TCP by default)."""
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_udp_pair() -> int:
    """A UDP port p with p+1 also free (e.g. an agent's listen + RTPProxy's control)."""
    for _ in range(100):
        p = free_port(socket.SOCK_DGRAM)
        if p >= 65535:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            try:
                s.bind(("127.0.0.1", p + 1))
            except OSError:
                continue
        return p
    raise RuntimeError("no free UDP port pair")
