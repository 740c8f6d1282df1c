"""Fixtures: the real softswitch binary with veth ports whose peers sit in a
network namespace of this test run, the daemon as operators run it (its CLI
as a child process, /metrics on a free port), a BfRt probe that reads what the
daemon wrote, and the real p4relay server on a fresh database of the test
PostgreSQL cluster ($P4RELAY_TEST_DATABASE_URL)."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import urllib.request
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pytest
from p4relay_switch import Subscription, SwitchClient
from p4relay_testsupport import (
    Server,
    Softswitch,
    SoftswitchNotBuilt,
    free_port,
    record_pid,
    server_on_fresh_database,
    softswitch_binary,
)

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for a network namespace")


def sh(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True, timeout=20)


@contextlib.contextmanager
def veth_ports(count: int) -> Iterator[tuple[list[str], str]]:
    """`count` veth pairs: (switch-side ifnames, namespace); the peers live in the
    namespace, named like the switch side with a trailing `n`."""
    tag = secrets.token_hex(3)
    ns = f"p4cp-{os.getpid()}-{tag}"  # the owner's pid: scripts/cleanup.d/controlplane.sh
    names = [f"p4cp{tag}{i}" for i in range(count)]
    sh("ip", "netns", "add", ns)
    try:
        for a in names:
            sh("ip", "link", "add", a, "type", "veth", "peer", "name", f"{a}n", "netns", ns)
            sh("ip", "link", "set", a, "up")
            sh("ip", "-n", ns, "link", "set", f"{a}n", "up")
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        yield names, ns
    finally:
        for a in names:
            subprocess.run(["ip", "link", "del", a], capture_output=True, check=False)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)


def probe_client(address: str) -> SwitchClient:
    return SwitchClient(
        address, client_id=9, subscription=Subscription(learn=False, idle_timeout=False)
    )


@dataclass
class Bed:
    """A softswitch on `ports` (dev ports 1..n) and a probe client (connected)."""

    sw: Softswitch
    probe: SwitchClient
    ifnames: list[str]
    ns: str


def _start_switch(ifnames: list[str], extra: list[str], log: Path) -> Softswitch:
    try:
        softswitch_binary()
    except SoftswitchNotBuilt as e:
        pytest.fail(str(e))
    args: list[str] = []
    for i, name in enumerate(ifnames, start=1):
        args += ["--port", f"{i}={name}"]
    sw = Softswitch([*args, *extra], log_path=log)
    sw.start()
    return sw


@pytest.fixture
async def bed(tmp_path: Path) -> AsyncIterator[Bed]:
    """A softswitch with three veth ports (dev ports 1, 2, 3)."""
    with veth_ports(3) as (names, ns):
        sw = _start_switch(names, [], tmp_path / "softswitch.log")
        probe = probe_client(sw.address)
        try:
            await probe.connect()
            yield Bed(sw, probe, names, ns)
        finally:
            await probe.close()
            sw.stop()


async def restart(b: Bed) -> None:
    """The softswitch stops and starts again on the same address: empty tables."""
    await b.probe.close()
    b.sw.stop()
    b.sw.start()
    await b.probe.connect()


class Daemon:
    """`p4relay-controlplane --config conf` as a child process."""

    def __init__(self, conf: Path, log_path: Path) -> None:
        self.conf = conf
        self.metrics_port = free_port()
        self.log_path = log_path
        self._log: IO[bytes] = log_path.open("ab")
        self.proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "p4relay_controlplane.cli", "--config", str(conf)),
                *("--metrics-listen", f"127.0.0.1:{self.metrics_port}"),
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        record_pid(self.proc.pid)

    def metrics(self) -> str:
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                return str(r.read().decode())
        except OSError:
            return ""

    def sample(self, name: str, **labels: str) -> float | None:
        """The value of the series `name` with these labels (in any order)."""
        want = {f'{k}="{v}"' for k, v in labels.items()}
        for line in self.metrics().splitlines():
            series, _, value = line.rpartition(" ")
            metric, _, rest = series.partition("{")
            if metric == name and set(filter(None, rest.rstrip("}").split(","))) == want:
                return float(value)
        return None

    def log_lines(self, event: str) -> list[str]:
        return [ln for ln in self.log_path.read_text().splitlines() if f'"{event}"' in ln]

    def hup(self) -> None:
        self.proc.send_signal(signal.SIGHUP)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it has not exited in 20 s."""
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


@contextlib.contextmanager
def daemon(conf: Path, log_path: Path) -> Iterator[Daemon]:
    d = Daemon(conf, log_path)
    try:
        yield d
    finally:
        d.stop()


# ------------------------------------------------------------------ server


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    """The real server on a fresh database of the test cluster, dropped after."""
    with server_on_fresh_database(
        "p4relay_controlplane",
        tmp_path / "server.log",
        {"P4RELAY_SERVER_RETENTION__INTERVAL_MINUTES": "0"},
    ) as srv:
        yield srv


LINE_RATE = 10_000_000  # bit/s: a burst of a few hundred packets queues for ms


@pytest.fixture
def shaped(tmp_path: Path) -> Iterator[tuple[Softswitch, str]]:
    """(softswitch, namespace): two ports at 10 Mbit/s with a 64-packet queue;
    the namespace sends to 198.18.99.0/24 through port 1."""
    with veth_ports(2) as (names, ns):
        sh("ip", "-n", ns, "addr", "add", "198.18.91.10/24", "dev", f"{names[0]}n")
        sh("ip", "-n", ns, "route", "add", "198.18.99.0/24", "dev", f"{names[0]}n")
        sh(
            *("ip", "-n", ns, "neigh", "add", "198.18.99.10"),
            *("lladdr", "02:00:00:00:00:02", "dev", f"{names[0]}n"),
        )
        sw = _start_switch(
            names,
            ["--line-rate", str(LINE_RATE), "--queue-depth", "64"],
            tmp_path / "softswitch.log",
        )
        try:
            yield sw, ns
        finally:
            sw.stop()
