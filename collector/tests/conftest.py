"""Fixtures: the real p4relay server (its CLI: a fresh database on the test
PostgreSQL cluster, $P4RELAY_TEST_DATABASE_URL, migrated; tokens; `serve` on a
free port) and the real softswitch binary with veth ports whose far ends sit
in network namespace p4rcolc."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from p4relay_testsupport import (
    Server,
    Softswitch,
    SoftswitchNotBuilt,
    server_on_fresh_database,
    softswitch_binary,
)

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
NS = "p4rcolc"
LINKS = ("p4rcc1", "p4rcc2")  # switch side; peers are <name>n inside NS
LINE_RATE = 10_000_000  # bit/s: a few hundred packets queue up and show in utilisation
QUEUE_DEPTH = 64  # packets: a burst of a few hundred tail-drops


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    """The real server on a fresh database of the test cluster, dropped after."""
    with server_on_fresh_database(
        "p4relay_collector",
        tmp_path / "server.log",
        {"P4RELAY_SERVER_RETENTION__INTERVAL_MINUTES": "0"},
    ) as srv:
        yield srv


def sh(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True, timeout=20)


def teardown_net(ns: str = NS, links: tuple[str, ...] = LINKS) -> None:
    for link in links:
        subprocess.run(["ip", "link", "del", link], capture_output=True, check=False)
    subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)


@contextlib.contextmanager
def two_port_net(ns: str = NS, links: tuple[str, ...] = LINKS) -> Iterator[None]:
    """Two switch ports `links` whose peers sit in namespace `ns` (198.18.91.10
    and 198.18.92.10); traffic from `ns` to 198.18.99.0/24 enters by port 1."""
    teardown_net(ns, links)
    sh("ip", "netns", "add", ns)
    try:
        for i, link in enumerate(links, start=1):
            sh("ip", "link", "add", link, "type", "veth", "peer", "name", f"{link}n", "netns", ns)
            sh("ip", "link", "set", link, "up")
            sh("ip", "-n", ns, "link", "set", f"{link}n", "up")
            sh("ip", "-n", ns, "addr", "add", f"198.18.9{i}.10/24", "dev", f"{link}n")
        sh("ip", "-n", ns, "route", "add", "198.18.99.0/24", "dev", f"{links[0]}n")
        sh(
            "ip",
            "-n",
            ns,
            "neigh",
            "add",
            "198.18.99.10",
            "lladdr",
            "02:00:00:00:00:02",
            "dev",
            f"{links[0]}n",
        )
        yield
    finally:
        teardown_net(ns, links)


@contextlib.contextmanager
def shaped_switch(
    log_path: Path, ns: str = NS, links: tuple[str, ...] = LINKS
) -> Iterator[Softswitch]:
    """The softswitch with two veth ports (`two_port_net`), a 10 Mbit/s line
    rate and a 64-packet egress queue."""
    with two_port_net(ns, links):
        try:
            softswitch_binary()
        except SoftswitchNotBuilt as e:
            pytest.fail(str(e))
        sw = Softswitch(
            [
                "--port",
                f"1={links[0]}",
                "--port",
                f"2={links[1]}",
                "--line-rate",
                str(LINE_RATE),
                "--queue-depth",
                str(QUEUE_DEPTH),
            ],
            log_path=log_path,
        )
        sw.start()
        try:
            yield sw
        finally:
            sw.stop()


@pytest.fixture
def softswitch(tmp_path: Path) -> Iterator[Softswitch]:
    """Traffic from NS to 198.18.99.0/24 enters by port 1."""
    with shaped_switch(tmp_path / "softswitch.log") as sw:
        yield sw
