"""Real components for the agent's tests: RTPProxy (rtp.io) in its own process,
the SIP server's side of the control protocol, the agent; the softswitch
launcher and the waiting/port helpers come from p4relay_testsupport."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from p4relay_testsupport import (
    Softswitch,
    free_port,
    free_udp_pair,
    record_pid,
    softswitch,
    wait_for,
)
from rtpagent.app import App
from rtpagent.config import Settings

# The shared launchers and helpers, for the suites that import them from here.
__all__ = [
    "Client",
    "RtpproxyProcess",
    "Softswitch",
    "free_port",
    "free_udp_pair",
    "record_pid",
    "route_all",
    "running_agent",
    "settings",
    "softswitch",
    "wait_for",
]


class RtpproxyProcess:
    """The real RTPProxy (rtp.io) in its own process, like a production daemon."""

    def __init__(self, control_port: int, listen: str, ports: str, extra: list[str]) -> None:
        self.control = f"udp:127.0.0.1:{control_port}"
        # rtp.io's RTPProxy writes its accounting (rtpproxy_acct.csv) here
        self.workdir = tempfile.mkdtemp(prefix="p4ra-rtpp-")
        self.acct = f"{self.workdir}/rtpproxy_acct.csv"
        self.cmd = [
            sys.executable,
            "-m",
            "rtpagent.embedded",
            "--control",
            self.control,
            "--listen",
            listen,
            "--ports",
            ports,
            "--workdir",
            self.workdir,
            "--",
            *extra,
        ]
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        record_pid(self.proc.pid)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if b"ready" not in line:
            raise RuntimeError(f"rtpproxy did not start: {line!r}")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Client:
    """A SIP server's rtpproxy module, as far as the control protocol goes."""

    def __init__(self, port: int) -> None:
        self.addr = ("127.0.0.1", port)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setblocking(False)
        self.n = 0

    async def raw(self, data: bytes, wait: float = 3.0) -> bytes | None:
        loop = asyncio.get_running_loop()
        await loop.sock_sendto(self.sock, data, self.addr)
        try:
            return await asyncio.wait_for(loop.sock_recv(self.sock, 65536), wait)
        except TimeoutError:
            return None

    async def cmd(self, body: str, wait: float = 3.0) -> str | None:
        self.n += 1
        cookie = f"t{self.n}"
        got = await self.raw(f"{cookie} {body}".encode(), wait)
        if got is None:
            return None
        text = got.decode()
        assert text.startswith(cookie + " "), text
        return text[len(cookie) + 1 :]

    def close(self) -> None:
        self.sock.close()


def settings(tmp: Path, **kw: Any) -> Settings:
    base: dict[str, Any] = {
        "listen": [f"udp:127.0.0.1:{kw.pop('port', free_udp_pair())}"],
        "rtpproxy": "embedded",
        "embedded_ports": "36000-36999",
        "relay_addr": ["127.0.0.1"],
        "relay_ports": "36000-36999",
        "notify_listen": f"tcp:127.0.0.1:{free_port()}",
        "state_file": str(tmp / "state.sqlite"),
        "metrics_listen": "",
        "rtpproxy_ttl": 60.0,
        "idle_ttl_ms": 60000,
        "reply_timeout": 0.5,
        "reply_retries": 1,
        "log_json": False,
        "log_level": "warning",
        "route_refresh_s": 0.5,
    }
    base.update(kw)
    return Settings(**base)


async def route_all(address: str, port: int = 1) -> None:
    """What a bootstrap does: every address routed to `port` (the agent binds
    each party's relay entries to the port its address is routed to)."""
    from p4relay_switch import Nexthop, Pipeline, SwitchClient

    async with SwitchClient(address, client_id=7) as c:
        p = Pipeline(c)
        await p.add_nexthops([Nexthop(1, port, "02:00:00:00:00:01", "02:00:00:00:00:02")])
        await p.add_routes([("0.0.0.0/0", 1)])


@contextlib.asynccontextmanager
async def running_agent(cfg: Settings) -> AsyncIterator[App]:
    app = App(cfg)
    await app.start()
    try:
        yield app
    finally:
        await app.stop()
