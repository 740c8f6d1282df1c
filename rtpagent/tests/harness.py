"""Real components for the agent's tests: softswitch binary, RTPProxy (rtp.io), the agent."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from rtpagent.app import App
from rtpagent.config import Settings

ROOT = Path(__file__).resolve().parents[2]
SOFTSWITCH = Path(
    os.environ.get(
        "P4RELAY_SOFTSWITCH_BIN", ROOT / "switch" / "target" / "release" / "p4relay-softswitch"
    )
)


def record_pid(pid: int) -> None:
    """Remember a child for scripts/cleanup.d/rtpagent.sh, should a test die
    mid-way. With this test process's pid: the hook (run by every engineer's
    test run) only stops children of test runs that are gone."""
    path = os.environ.get("P4RELAY_RTPAGENT_PIDS")
    if path:
        with open(path, "a") as f:
            f.write(f"{pid} {os.getpid()}\n")


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_udp_pair() -> int:
    """A UDP port p with p+1 also free (agent listen + embedded control)."""
    for _ in range(100):
        p = free_port(socket.SOCK_DGRAM)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            try:
                s.bind(("127.0.0.1", p + 1))
            except OSError:
                continue
        return p
    raise RuntimeError("no free UDP port pair")


class Softswitch:
    def __init__(self, args: list[str] | None = None, grpc_port: int | None = None) -> None:
        self.grpc_port = grpc_port or free_port()
        self.args = args or []
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def start(self) -> None:
        cmd = [
            str(SOFTSWITCH),
            "--grpc-listen",
            self.address,
            "--metrics-listen",
            f"127.0.0.1:{free_port()}",
            "--workers",
            "1",
            *self.args,
        ]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        record_pid(self.proc.pid)
        deadline = time.monotonic() + 15
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"softswitch exited: {cmd}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.grpc_port), 0.2),
            ):
                return
            if time.monotonic() > deadline:
                raise TimeoutError("softswitch not listening")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None


@contextlib.contextmanager
def softswitch(args: list[str] | None = None) -> Iterator[Softswitch]:
    sw = Softswitch(args)
    sw.start()
    try:
        yield sw
    finally:
        sw.stop()


class RtpproxyProcess:
    """The real RTPProxy (rtp.io) in its own process, like a production daemon."""

    def __init__(self, control_port: int, listen: str, ports: str, extra: list[str]) -> None:
        self.control = f"udp:127.0.0.1:{control_port}"
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
            "--workdir",  # where rtp.io's RTPProxy writes rtpproxy_acct.csv
            tempfile.mkdtemp(prefix="p4ra-rtpp-"),
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
    }
    base.update(kw)
    return Settings(**base)


@contextlib.asynccontextmanager
async def running_agent(cfg: Settings) -> AsyncIterator[App]:
    app = App(cfg)
    await app.start()
    try:
        yield app
    finally:
        await app.stop()


async def wait_for(pred: Any, within: float = 5.0, interval: float = 0.02) -> None:
    deadline = time.monotonic() + within
    while True:
        r = pred()
        if asyncio.iscoroutine(r):
            r = await r
        if r:
            return
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(interval)
