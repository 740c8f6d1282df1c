"""Homer 5's capture server for a test: Kamailio's sipcapture module on a
free loopback port (UDP and TCP) storing the HEP reports it decodes into a
fresh PostgreSQL database (sipcapture/: its configuration and table)."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from p4relay_testsupport.net import free_port
from p4relay_testsupport.procs import record_pid
from p4relay_testsupport.wait import wait_until

HERE = Path(__file__).parent / "sipcapture"
KAMAILIO_MODULES = Path("/usr/lib/x86_64-linux-gnu/kamailio/modules")
# The capture id the e2e testbed's server stamps on its HEP reports
# (scenarios/tests/e2e: conftest sets it, the Homer case checks it).
E2E_CAPTURE_ID = 2077


def available() -> bool:
    """Kamailio with sipcapture and db_postgres installed (make setup)."""
    return (KAMAILIO_MODULES / "sipcapture.so").exists() and (
        KAMAILIO_MODULES / "db_postgres.so"
    ).exists()


@dataclass(frozen=True)
class HomerCapture:
    port: int
    database_url: str  # libpq form
    log: Path

    def rows(self) -> list[dict[str, Any]]:
        """What the capture server stored, oldest first."""
        with psycopg.connect(self.database_url, row_factory=dict_row) as c:
            return list(c.execute("SELECT * FROM rtcp_capture ORDER BY id"))


def _libpq(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


def _udp_and_tcp_port() -> int:
    for _ in range(50):
        port = free_port(socket.SOCK_DGRAM)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as t:
            try:
                t.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise RuntimeError("no port free for both UDP and TCP")


@contextlib.contextmanager
def homer_capture(cluster_url: str, work: Path, auth_key: str) -> Iterator[HomerCapture]:
    """Runs the capture server until the block ends; `cluster_url` is any
    database URL on the cluster the new database goes to."""
    base = _libpq(cluster_url)
    name = f"homer_{secrets.token_hex(4)}"
    head, _, _ = base.rpartition("/")
    url = f"{head}/{name}"
    with psycopg.connect(base, autocommit=True) as c:
        c.execute(f'CREATE DATABASE "{name}"')
        # sipcapture's {sql.val.str} escapes quotes with a backslash.
        c.execute(f'ALTER DATABASE "{name}" SET standard_conforming_strings = off')
        c.execute(f'ALTER DATABASE "{name}" SET escape_string_warning = off')
    proc: subprocess.Popen[bytes] | None = None
    try:
        with psycopg.connect(url, autocommit=True) as c:
            c.execute((HERE / "rtcp_capture.sql").read_text().encode())
        port = _udp_and_tcp_port()
        work.mkdir(parents=True, exist_ok=True)
        cfg = work / "sipcapture.cfg"
        cfg.write_text(
            (HERE / "sipcapture.cfg")
            .read_text()
            .replace("@PORT@", str(port))
            .replace("@DB_URL@", url.replace("postgresql://", "postgres://"))
            .replace("@AUTH_KEY@", auth_key)
        )
        log = work / "kamailio.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                ["kamailio", "-f", str(cfg), "-DD", "-E", "-w", str(work), "-P", str(work / "pid")],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        record_pid(proc.pid)
        running = proc

        def listening() -> bool:
            if running.poll() is not None:
                raise AssertionError(f"kamailio exited: {log.read_text()[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            except OSError:
                return False
            return b"SO_RCVBUF is finally" in log.read_bytes()  # the UDP listener too

        wait_until(listening, 20, what="kamailio sipcapture listening")
        yield HomerCapture(port, url, log)
    finally:
        if proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        with psycopg.connect(base, autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
