"""The real software switch binary for tests: loopback gRPC, optional ports."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO

from p4relay_testsupport.net import free_port
from p4relay_testsupport.procs import record_pid

ROOT = Path(__file__).resolve().parents[3]
DEFAULT_BINARY = ROOT / "switch" / "target" / "release" / "p4relay-softswitch"


class SoftswitchNotBuilt(FileNotFoundError):
    pass


def softswitch_binary() -> Path:
    """$P4RELAY_SOFTSWITCH_BIN or the release build in switch/target."""
    path = Path(os.environ.get("P4RELAY_SOFTSWITCH_BIN", DEFAULT_BINARY))
    if not path.is_file():
        raise SoftswitchNotBuilt(
            f"{path} not built: run `cd switch && cargo build --release` "
            "(or set P4RELAY_SOFTSWITCH_BIN)"
        )
    return path


def dump_softswitch(flag: str) -> str:
    """The output of a one-shot flag (`--dump-bfrt-json`, ...)."""
    return subprocess.run(
        [str(softswitch_binary()), flag], check=True, capture_output=True, text=True, timeout=30
    ).stdout


class Softswitch:
    """One softswitch process. ``args`` are added to the gRPC/metrics listen
    flags; ``workers`` (default 1, the tests' machine is small) unless the
    args set ``--workers`` themselves."""

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

    def start(self) -> None:
        """Start and wait until the gRPC port accepts connections."""
        cmd = [
            str(softswitch_binary()),
            "--grpc-listen",
            self.address,
            "--metrics-listen",
            self.metrics_address,
            *self.args,
        ]
        out: IO[bytes] | int = subprocess.DEVNULL
        if self.log_path is not None:
            self._log = out = open(self.log_path, "ab")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        record_pid(self.proc.pid)
        deadline = time.monotonic() + self.ready_timeout_s
        while True:
            if self.proc.poll() is not None:
                code = self.proc.returncode
                self.stop()
                raise RuntimeError(f"softswitch exited with {code}: {cmd}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.grpc_port), 0.2),
            ):
                return
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"softswitch not listening on {self.address}")
            time.sleep(0.05)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 10 s."""
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None
        if self._log is not None:
            self._log.close()
            self._log = None


@contextlib.contextmanager
def softswitch(
    args: Sequence[str] = (), *, log_path: Path | None = None, workers: int = 1
) -> Iterator[Softswitch]:
    """A started softswitch, stopped on exit."""
    sw = Softswitch(args, log_path=log_path, workers=workers)
    sw.start()
    try:
        yield sw
    finally:
        sw.stop()
