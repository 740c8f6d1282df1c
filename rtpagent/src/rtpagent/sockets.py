"""RTPProxy socket specifiers (`-s`, `-n`): udp:, udp6:, tcp:, unix:."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass


@dataclass(frozen=True)
class SocketSpec:
    kind: str  # udp | udp6 | tcp | tcp6 | unix
    host: str = ""
    port: int = 0
    path: str = ""

    @property
    def datagram(self) -> bool:
        return self.kind in ("udp", "udp6")

    def __str__(self) -> str:
        if self.kind == "unix":
            return f"unix:{self.path}"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.kind}:{host}:{self.port}"


def parse_spec(text: str) -> SocketSpec:
    """Parse `udp:127.0.0.1:22222`, `udp6:[::1]:22222`, `tcp:…`, `unix:/path`."""
    kind, sep, rest = text.partition(":")
    if not sep:
        raise ValueError(f"socket spec {text!r}: expected kind:address")
    kind = kind.lower()
    if kind == "unix":
        if not rest:
            raise ValueError(f"socket spec {text!r}: empty path")
        return SocketSpec("unix", path=rest)
    if kind not in ("udp", "udp6", "tcp", "tcp6"):
        raise ValueError(f"socket spec {text!r}: unknown kind {kind!r}")
    if rest.startswith("["):
        host, _, port_s = rest[1:].partition("]")
        port_s = port_s.lstrip(":")
    else:
        host, _, port_s = rest.rpartition(":")
    if not host or not (port_s.isascii() and port_s.isdigit()) or not 0 < int(port_s) < 65536:
        raise ValueError(f"socket spec {text!r}: expected host:port")
    try:
        ip = ipaddress.ip_address(host)
    except ValueError as exc:
        raise ValueError(f"socket spec {text!r}: invalid address {host!r}") from exc
    if kind in ("udp6", "tcp6") and ip.version != 6:
        raise ValueError(f"socket spec {text!r}: {kind} needs an IPv6 address")
    return SocketSpec(kind, host=str(ip), port=int(port_s))
