"""The whole system on the namespace testbed, once for the e2e module.

Needs root, the softswitch binary (switch/target/release), Kamailio, SIPp and
the throwaway PostgreSQL the test runner starts ($P4RELAY_TEST_DATABASE_URL);
each e2e run gets its own database in that cluster.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from p4relay_scenarios import topology
from p4relay_scenarios.stack import ROOT, SOFTSWITCH_BIN, Stack, StackConfig


def _admin_url(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


@pytest.fixture(scope="session")
def database_url() -> Iterator[str]:
    base = os.environ.get("P4RELAY_TEST_DATABASE_URL")
    if not base:
        pytest.fail("P4RELAY_TEST_DATABASE_URL is not set (run through make test)")
    name = f"p4relay_e2e_{secrets.token_hex(4)}"
    with psycopg.connect(_admin_url(base), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    head, _, _ = base.rpartition("/")
    yield f"{head}/{name}"
    with psycopg.connect(_admin_url(base), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def stack(database_url: str) -> Iterator[Stack]:
    if os.geteuid() != 0:
        pytest.fail("the e2e test builds network namespaces: run as root")
    if not SOFTSWITCH_BIN.exists():
        pytest.fail(f"{SOFTSWITCH_BIN} missing: cargo build --release in switch/")
    # Not under $RESULTS: any other `make test` in this checkout starts by wiping
    # build/test-results, which would pull the logs and pidfiles from under a live stack.
    run_dir = ROOT / "build" / "e2e-run"
    s = Stack(
        StackConfig(
            run_dir=run_dir,
            database_url=database_url,
            rtpproxy_ttl_s=30,
            collector_metrics_port=0,
            # Small egress queues so the shaping case loses packets within seconds.
            switch_args=["--queue-depth", "64"],
        )
    )
    s.lock()  # fails while another run (demo, experiment, e2e) holds the testbed
    try:
        topology.down()  # leftovers of a crashed run
        s.up()
        yield s
    finally:
        s.down()


@pytest.fixture
def testbed_lock(tmp_path: Path) -> Iterator[None]:
    """Hold the testbed (no live stack) for tests that build and remove it themselves."""
    s = Stack(StackConfig(run_dir=tmp_path / "lock-only"))
    s.lock()
    try:
        yield
    finally:
        s.down()
