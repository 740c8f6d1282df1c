"""The whole system on the namespace testbed, shared by the e2e modules.

Needs root, the softswitch binary (switch/target/release), OpenSIPS, Kamailio,
SIPp and the throwaway PostgreSQL the test runner starts
($P4RELAY_TEST_DATABASE_URL); each e2e run gets its own database in that
cluster.

One stack serves every module that uses conftest's `base_stack` (starting
it takes half a minute); those modules run one after another, first. Its
server exports HEP to Homer 5's capture server (the `homer` fixture, where
Kamailio's sipcapture is installed) for the Homer case. Each
module gets it quiet: no call entry on the switch, no call up at the server
(a module's checks select their calls by start time or Call-ID, so what an
earlier module's calls left on record cannot be taken for theirs); a stack
that does not settle, or lost a component, is started afresh. A module that
defines its own `base_stack` (other settings) gets a stack of its own
(`StackPool.own`), and modules that build their own testbed run with no
stack up.

A case gets the stack through the `stack` fixture with its SIP server
running: OpenSIPS unless the case is marked `each_sip_server`, which runs it
once with every SIP server (the fixture swaps the SIP server only, the rest
of the stack stays). Cases keep their file order per module and SIP server
(OpenSIPS's first, then Kamailio's), except that on the shared stack the
cases marked `restarts_switch` run after all others and those marked
`takes_switch_down` (they take the softswitch away for good) last; the stack
is stopped after them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import secrets
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from p4relay_scenarios import switchcfg, topology
from p4relay_scenarios.stack import (
    GRPC_ADDR,
    ROOT,
    SIP_SERVERS,
    SOFTSWITCH_BIN,
    SipServer,
    Stack,
    StackConfig,
)
from p4relay_testsupport import homer as homer_support
from p4relay_testsupport import wait_until

DEFAULT_SIP: SipServer = "opensips"
# Switch entries idle this long (no media either way) end the call: the media-timeout case.
IDLE_TTL_MS = 5000
# A module's stack must be quiet within this (an earlier module's last calls end
# at their BYE or, idle, after IDLE_TTL_MS); else the stack is started afresh.
SETTLE_S = 15.0
# The shared stack's HEP export to the Homer capture server (test_homer).
HOMER_AUTH_KEY = "e2e-homer-key"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "each_sip_server: run the case once with each SIP server (OpenSIPS, Kamailio)"
    )
    config.addinivalue_line(
        "markers",
        "restarts_switch: the case kills the softswitch and starts it again empty; "
        "runs after the others on the shared stack",
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


def on_shared_stack(item: pytest.Item | None) -> bool:
    """The case runs on the shared stack: it uses conftest's `base_stack`,
    which its module does not replace by its own."""
    return (
        isinstance(item, pytest.Function)
        and "base_stack" in item.fixturenames
        and not hasattr(item.module, "base_stack")
    )


def phase(item: pytest.Item | None) -> int:
    if item is None:
        return 0
    if item.get_closest_marker("takes_switch_down"):
        return 2
    return 1 if item.get_closest_marker("restarts_switch") else 0


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    modules: dict[object, int] = {}
    for it in items:
        modules.setdefault(it.parent, len(modules))
    shared = [modules[it.parent] for it in items if on_shared_stack(it)]
    first_shared = min(shared, default=0)

    def key(it: pytest.Item) -> tuple[int, int, int, int]:
        m, sip = modules[it.parent], SIP_SERVERS.index(sip_of(it))
        if on_shared_stack(it):
            return (first_shared, phase(it), m, sip)
        return (m, phase(it), 0, sip)

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


def e2e_config(database_url: str) -> StackConfig:
    """The e2e stack's settings; a module with its own stack changes some."""
    return StackConfig(
        # Not under $RESULTS: any other `make test` in this checkout starts by wiping
        # build/test-results, which would pull the logs and pidfiles from under a live stack.
        run_dir=ROOT / "build" / "e2e-run",
        database_url=database_url,
        sip=DEFAULT_SIP,
        rtpproxy_ttl_s=30,
        idle_ttl_ms=IDLE_TTL_MS,
        collector_metrics_port=0,
        # Small egress queues so the shaping case loses packets within seconds.
        switch_args=["--queue-depth", "64"],
    )


def quiet(s: Stack) -> bool:
    """No call entry on the switch, no call up at the server."""
    if asyncio.run(switchcfg.relay_entry_count(GRPC_ADDR)) != (0, 0):
        return False
    if asyncio.run(switchcfg.guard_entries(GRPC_ADDR)) != 0:
        return False
    api = s.api()
    try:
        return not api.all_sessions(state=["setup", "active"])
    finally:
        api.close()


class StackPool:
    """The one live stack (each holds the testbed): the shared one, or a
    module's own."""

    def __init__(self) -> None:
        self.stack: Stack | None = None
        self.shared = False

    def _start(self, cfg: StackConfig) -> Stack:
        if os.geteuid() != 0:
            pytest.fail("the e2e test builds network namespaces: run as root")
        if not SOFTSWITCH_BIN.exists():
            pytest.fail(f"{SOFTSWITCH_BIN} missing: cargo build --release in switch/")
        s = Stack(cfg)
        s.lock()  # fails while another run (demo, experiment, e2e) holds the testbed
        try:
            topology.down()  # leftovers of a crashed run
            s.up()
        except BaseException:
            s.down()
            raise
        self.stack = s
        return s

    def shared_stack(self, database_url: str, env: dict[str, str]) -> Stack:
        """The shared stack, its components started with `env` added."""
        live = self.stack
        if live is not None and self.shared and not live.dead():
            try:
                wait_until(lambda: quiet(live), within=SETTLE_S, interval=0.5, what="stack quiet")
                return live
            except AssertionError as e:
                print(f"\ne2e: the shared stack is not quiet ({e}); starting it afresh")
        self.close()
        with pytest.MonkeyPatch.context() as mp:
            for k, v in env.items():
                mp.setenv(k, v)
            s = self._start(e2e_config(database_url))
        self.shared = True
        return s

    @contextmanager
    def own(self, cfg: StackConfig) -> Iterator[Stack]:
        """A stack with other settings, for one module."""
        self.close()
        try:
            yield self._start(cfg)
        finally:
            self.close()

    def close(self) -> None:
        if self.stack is not None:
            self.stack.down()
            self.stack = None
        self.shared = False


POOL = StackPool()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    yield
    # The testbed is free for what follows unless it runs on the same stack
    # (and the stack still has its switch).
    spent = phase(item) == 2 and phase(nextitem) != 2
    if POOL.shared and (spent or not on_shared_stack(nextitem)):
        POOL.close()
    return None


def pytest_sessionfinish() -> None:
    POOL.close()


@pytest.fixture(scope="session")
def homer(
    database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[homer_support.HomerCapture | None]:
    """Homer 5's capture server (Kamailio's sipcapture storing into PostgreSQL)
    the shared stack's server exports to; None where it is not installed (the
    Homer case then fails, the others run). Started before the shared stack and
    stopped after it."""
    if not homer_support.available():
        yield None
        return
    work = tmp_path_factory.mktemp("homer")
    with homer_support.homer_capture(database_url, work, HOMER_AUTH_KEY) as capture:
        yield capture


@pytest.fixture(scope="module")
def base_stack(database_url: str, homer: homer_support.HomerCapture | None) -> Stack:
    """The shared stack, quiet (module scope: checked once per module)."""
    env: dict[str, str] = {}
    if homer is not None:
        env = {
            "P4RELAY_SERVER_HOMER__ADDRESS": f"127.0.0.1:{homer.port}",
            "P4RELAY_SERVER_HOMER__AUTH_KEY": HOMER_AUTH_KEY,
            "P4RELAY_SERVER_HOMER__CAPTURE_ID": str(homer_support.E2E_CAPTURE_ID),
            "P4RELAY_SERVER_HOMER__INTERVAL_S": "2",
        }
    return POOL.shared_stack(database_url, env)


@pytest.fixture
def stack(request: pytest.FixtureRequest, base_stack: Stack) -> Stack:
    """The module's stack with the case's SIP server running."""
    sip: SipServer = getattr(request, "param", DEFAULT_SIP)
    base_stack.use_sip_server(sip)
    return base_stack


OwnStack = Callable[..., AbstractContextManager[Stack]]


@pytest.fixture(scope="session")
def own_stack(database_url: str) -> OwnStack:
    """For a module's own `base_stack`: `with own_stack(**changes) as s:` runs a
    stack with the e2e settings, `changes` (StackConfig fields) applied."""

    def start(**changes: Any) -> AbstractContextManager[Stack]:
        return POOL.own(dataclasses.replace(e2e_config(database_url), **changes))

    return start


@pytest.fixture
def testbed_lock(tmp_path: Path) -> Iterator[None]:
    """Hold the testbed (no live stack) for tests that build and remove it themselves."""
    s = Stack(StackConfig(run_dir=tmp_path / "lock-only"))
    s.lock()
    try:
        yield
    finally:
        s.down()
