"""Start the real softswitch binary for tests (loopback gRPC, optional ports)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
BINARY = Path(
    os.environ.get(
        "P4RELAY_SOFTSWITCH_BIN", ROOT / "switch" / "target" / "release" / "p4relay-softswitch"
    )
)


def binary() -> Path:
    if not BINARY.is_file():
        raise FileNotFoundError(
            f"{BINARY} not built: run `cd switch && cargo build --release` "
            "(or set P4RELAY_SOFTSWITCH_BIN)"
        )
    return BINARY


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def dump(flag: str) -> str:
    return subprocess.run(
        [str(binary()), flag], check=True, capture_output=True, text=True, timeout=30
    ).stdout


@contextlib.contextmanager
def running(
    args: Sequence[str] = (), *, log_path: Path | None = None, ready_timeout_s: float = 15.0
) -> Iterator[str]:
    """Yields the gRPC address once the switch accepts connections."""
    grpc_port, metrics_port = free_port(), free_port()
    address = f"127.0.0.1:{grpc_port}"
    cmd = [
        str(binary()),
        "--grpc-listen",
        address,
        "--metrics-listen",
        f"127.0.0.1:{metrics_port}",
        *args,
    ]
    log = open(log_path, "wb") if log_path else subprocess.DEVNULL  # noqa: SIM115
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + ready_timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"softswitch exited with {proc.returncode}: {cmd}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", grpc_port), 0.2),
            ):
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"softswitch not listening on {address}")
            time.sleep(0.05)
        yield address
    finally:
        proc.terminate()
        try:
            proc.wait(3)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if log_path:
            log.close()  # type: ignore[union-attr]
