"""Free loopback ports."""

from __future__ import annotations

import socket

from p4relay_runtime.procs import free_port


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


__all__ = ["free_port", "free_udp_pair"]
