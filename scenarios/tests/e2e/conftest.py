"""The whole system on the namespace testbed, once per e2e module.

Needs root, the softswitch binary (switch/target/release), OpenSIPS, Kamailio,
SIPp and the throwaway PostgreSQL the test runner starts
($P4RELAY_TEST_DATABASE_URL); each e2e run gets its own database in that
cluster.

The stack comes up once per module (`base_stack`); a case gets it through the
`stack` fixture with its SIP server running: OpenSIPS unless the case is
marked `each_sip_server`, which runs it once with every SIP server (the
fixture swaps the SIP server only, the rest of the stack stays). Within a
module the cases keep their file order per SIP server: OpenSIPS's first, then
Kamailio's, and cases marked `takes_switch_down` (they take the softswitch
away for good) after all others.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from p4relay_scenarios import topology
from p4relay_scenarios.stack import (
    ROOT,
    SIP_SERVERS,
    SOFTSWITCH_BIN,
    SipServer,
    Stack,
    StackConfig,
)

DEFAULT_SIP: SipServer = "opensips"
# Switch entries idle this long (no media either way) end the call: the media-timeout case.
IDLE_TTL_MS = 5000


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "each_sip_server: run the case once with each SIP server (OpenSIPS, Kamailio)"
    )
    config.addinivalue_line(
        "markers", "takes_switch_down: the case stops the softswitch; runs after the others"
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "stack" in metafunc.fixturenames and metafunc.definition.get_closest_marker(
        "each_sip_server"
    ):
        metafunc.parametrize("stack", SIP_SERVERS, indirect=True)


def sip_of(item: pytest.Item) -> SipServer:
    callspec = getattr(item, "callspec", None)
    sip: SipServer = callspec.params.get("stack", DEFAULT_SIP) if callspec else DEFAULT_SIP
    return sip


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    modules: dict[object, int] = {}
    for it in items:
        modules.setdefault(it.parent, len(modules))

    def key(it: pytest.Item) -> tuple[int, bool, int]:
        return (
            modules[it.parent],
            it.get_closest_marker("takes_switch_down") is not None,
            SIP_SERVERS.index(sip_of(it)),
        )

    items.sort(key=key)  # stable: file order within each group


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
def base_stack(database_url: str) -> Iterator[Stack]:
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
            sip=DEFAULT_SIP,
            rtpproxy_ttl_s=30,
            idle_ttl_ms=IDLE_TTL_MS,
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
def stack(request: pytest.FixtureRequest, base_stack: Stack) -> Stack:
    """The module's stack with the case's SIP server running."""
    sip: SipServer = getattr(request, "param", DEFAULT_SIP)
    base_stack.use_sip_server(sip)
    return base_stack


@pytest.fixture
def testbed_lock(tmp_path: Path) -> Iterator[None]:
    """Hold the testbed (no live stack) for tests that build and remove it themselves."""
    s = Stack(StackConfig(run_dir=tmp_path / "lock-only"))
    s.lock()
    try:
        yield
    finally:
        s.down()
