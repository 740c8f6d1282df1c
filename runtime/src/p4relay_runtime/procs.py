"""Start a process, wait until it listens, stop it; the software switch's launcher.

The testbeds (p4relay_scenarios) and the test suites (p4relay_testsupport) start
the same processes the same way with these.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parents[3]
DEFAULT_SOFTSWITCH = ROOT / "switch" / "target" / "release" / "p4relay-softswitch"


class StartError(RuntimeError):
    """A process did not come up; the message says which and why."""


class SoftswitchNotBuilt(StartError, FileNotFoundError):
    pass


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    """A port on 127.0.0.1 that nothing is bound to now (TCP by default)."""
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_tcp(
    addr: str, proc: subprocess.Popen[bytes] | None = None, within: float = 20.0, what: str = ""
) -> None:
    """Until `addr` (host:port) accepts a TCP connection; StartError when `proc`
    exits first or `within` seconds pass."""
    host, _, port = addr.rpartition(":")
    name = what or addr
    deadline = time.monotonic() + within
    while True:
        if proc is not None and proc.poll() is not None:
            raise StartError(f"{name} exited with {proc.returncode} before listening on {addr}")
        with (
            contextlib.suppress(OSError),
            socket.create_connection((host.strip("[]"), int(port)), 0.2),
        ):
            return
        if time.monotonic() > deadline:
            raise StartError(f"{name} not listening on {addr} after {within:.0f} s")
        time.sleep(0.05)


def stop(proc: subprocess.Popen[bytes], timeout_s: float = 10.0) -> int:
    """SIGTERM, then SIGKILL after `timeout_s`; the exit status."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


def softswitch_binary() -> Path:
    """$P4RELAY_SOFTSWITCH_BIN or the release build in switch/target."""
    path = Path(os.environ.get("P4RELAY_SOFTSWITCH_BIN", DEFAULT_SOFTSWITCH))
    if not path.is_file():
        raise SoftswitchNotBuilt(
            f"{path} not built: run `cd switch && cargo build --release` "
            "(or set P4RELAY_SOFTSWITCH_BIN)"
        )
    return path


class Softswitch:
    """One softswitch process with loopback gRPC and metrics ports. ``args`` are
    added to the listen flags; ``workers`` (default 1: test and testbed hosts are
    small) unless the args set ``--workers`` themselves."""

    def __init__(
        self,
        args: Sequence[str] = (),
        *,
        grpc_port: int | None = None,
        workers: int = 1,
        log_path: Path | None = None,
        ready_timeout_s: float = 15.0,
    ) -> None:
        self.grpc_port = grpc_port or free_port()
        self.metrics_port = free_port()
        self.args = list(args)
        if "--workers" not in self.args:
            self.args += ["--workers", str(workers)]
        self.log_path = log_path
        self.ready_timeout_s = ready_timeout_s
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def metrics_address(self) -> str:
        return f"127.0.0.1:{self.metrics_port}"

    def command(self) -> list[str]:
        return [
            str(softswitch_binary()),
            "--grpc-listen",
            self.address,
            "--metrics-listen",
            self.metrics_address,
            *self.args,
        ]

    def start(self) -> None:
        """Start and wait until the gRPC port accepts connections."""
        cmd = self.command()
        out: IO[bytes] | int = subprocess.DEVNULL
        if self.log_path is not None:
            self._log = out = open(self.log_path, "ab")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        try:
            wait_tcp(self.address, self.proc, self.ready_timeout_s, what="softswitch")
        except StartError:
            self.stop()
            raise

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 10 s."""
        if self.proc is not None:
            stop(self.proc)
            self.proc = None
        if self._log is not None:
            self._log.close()
            self._log = None
