"""Reports reach the real server through the durable spool: nothing lost while
the server is down, replayed in order when it returns, idempotent."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fakeswitch import FakeSwitch
from harness import Client, settings
from p4relay_testsupport import free_port, wait_for, wait_until
from rtpagent.app import App
from rtpagent.reporter import Sender
from rtpagent.store import Store
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

BASE = os.environ.get("P4RELAY_TEST_DATABASE_URL")
pytestmark = pytest.mark.skipif(not BASE, reason="needs $P4RELAY_TEST_DATABASE_URL (make test)")


@pytest.fixture(scope="module")
def server_db() -> Iterator[tuple[str, str]]:
    from p4relay_server.config import Settings
    from p4relay_server.db import make_engine, make_sessionmaker
    from p4relay_server.migrate import run_alembic
    from p4relay_server.services import accounts

    assert BASE is not None
    name = f"rtpagent_test_{secrets.token_hex(4)}"
    admin = create_engine(make_url(BASE), isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f'CREATE DATABASE "{name}"'))
    url = make_url(BASE).set(database=name).render_as_string(hide_password=False)
    settings = Settings(database_url=url)
    run_alembic(settings, ["upgrade", "head"])
    engine = make_engine(settings)
    with make_sessionmaker(engine)() as db:
        _, token = accounts.create_token(db, "rtpagent-test", "ingest")
    engine.dispose()
    yield url, token
    with admin.connect() as c:
        c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


class Server:
    def __init__(self, db_url: str, port: int) -> None:
        self.port = port
        self.env = {**os.environ, "P4RELAY_SERVER_DATABASE_URL": db_url}
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = tempfile.TemporaryFile()  # noqa: SIM115  # closed in stop(); stderr shown if it exits

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "p4relay_server.cli",
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
            ],
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=self.log,
        )
        proc = self.proc

        def serving() -> bool:
            if proc.poll() is not None:
                self.log.seek(0)
                err = self.log.read()
                raise RuntimeError(f"server exited {proc.returncode}: {err[-2000:]!r}")
            try:
                return (
                    httpx.get(f"http://127.0.0.1:{self.port}/docs", timeout=0.5).status_code < 500
                )
            except httpx.HTTPError:
                return False

        # Generous: importing the server takes seconds on a busy 2-core machine.
        wait_until(serving, within=120.0, interval=0.1, what="the server's start")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(10)
        self.log.close()


async def test_spool_replays_when_server_returns(
    tmp_path: Path, server_db: tuple[str, str]
) -> None:
    db_url, token = server_db
    port = free_port()
    cfg = settings(
        tmp_path,
        switch="fake:1",
        server_url=f"http://127.0.0.1:{port}",
        server_token=token,
        agent_name="agent-spool",
    )
    fake = FakeSwitch()
    app = App(cfg, switch=fake)
    await app.start()
    cl = Client(int(cfg.listen[0].rsplit(":", 1)[1]))
    server = Server(db_url, port)
    try:
        for n in range(3):
            await cl.cmd(f"U sp{n} 198.18.1.10 {6000 + 2 * n} f;1")
            await cl.cmd(f"L sp{n} 198.18.2.10 {7000 + 2 * n} f;1 t;1")
        await wait_for(lambda: len(fake.relays) == 12)
        for n in range(3):
            await cl.cmd(f"D sp{n} f t")
        await wait_for(lambda: not fake.relays)
        await wait_for(lambda: app.store.spool_depth() > 0 and app.store.pending_writes == 0)
        depth = app.store.spool_depth()
        assert depth >= 9  # sessions + events, kept while the server is down
        server.start()
        await wait_for(lambda: app.store.spool_depth() == 0, within=30.0)
        eng = create_engine(db_url)
        with eng.connect() as c:
            rows = c.execute(
                text("SELECT call_id, state, offloaded FROM sessions ORDER BY call_id")
            ).all()
            kinds = {r[0] for r in c.execute(text("SELECT type FROM events")).all()}
            legs = c.execute(
                text("SELECT switch_leg, installed, installed_at, removed_at FROM session_legs")
            ).all()
        eng.dispose()
        assert [(r[0], r[1], r[2]) for r in rows] == [(f"sp{n}", "ended", True) for n in range(3)]
        # Every leg of an ended call: the switch leg it used, installed, then removed.
        assert len(legs) == 6
        for switch_leg, installed, installed_at, removed_at in legs:
            assert switch_leg is not None and not installed
            assert installed_at is not None and removed_at is not None
            assert removed_at >= installed_at
        assert {"offload_installed", "offload_removed", "agent_up"} <= kinds
    finally:
        await app.stop()
        server.stop()
        cl.close()


def test_spool_survives_restart(tmp_path: Path) -> None:
    s = Store(tmp_path / "s.sqlite")
    s.enqueue("event", {"a": 1})
    s.enqueue("sample", {"b": 2})
    s.close()
    s2 = Store(tmp_path / "s.sqlite")
    rows = s2.spool_head(10)
    assert [(k, d) for _, k, d in rows] == [("event", {"a": 1}), ("sample", {"b": 2})]
    s2.spool_ack([rows[0][0]])
    assert [k for _, k, _ in s2.spool_head(10)] == ["sample"]
    s2.close()


async def test_rows_resent_by_an_upgraded_agent_are_taken(
    tmp_path: Path, server_db: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server applied a batch but its answer was lost; the agent restarts
    with another version and re-sends the same rows. The server takes them
    (its entities upsert) instead of answering 409 for ever."""
    db_url, token = server_db
    port = free_port()
    cfg = settings(tmp_path, switch="fake:1", agent_name="agent-upgrade")
    fake = FakeSwitch()
    app = App(cfg, switch=fake)
    await app.start()
    cl = Client(int(cfg.listen[0].rsplit(":", 1)[1]))
    try:
        await cl.cmd("U up0 198.18.1.10 6000 f;1")
        await cl.cmd("L up0 198.18.2.10 7000 f;1 t;1")
        await wait_for(lambda: len(fake.relays) == 4)
        await wait_for(lambda: app.store.spool_depth() > 0 and app.store.pending_writes == 0)
    finally:
        await app.stop()
        cl.close()
    store = Store(Path(cfg.state_file))
    depth = store.spool_depth()
    assert depth > 0
    server = Server(db_url, port)
    server.start()
    url = f"http://127.0.0.1:{port}/api/v1/ingest"
    agent = {"name": "agent-upgrade", "rtpproxy": "udp:127.0.0.1:7722", "switch": "fake:1"}
    try:
        before = Sender(store, url, token, {**agent, "version": "1.0"})
        with monkeypatch.context() as m:
            m.setattr(store, "spool_ack", lambda ids: None)  # the answer is lost
            assert await before.send_once()
        assert store.spool_depth() == depth
        await before.close()
        after = Sender(store, url, token, {**agent, "version": "1.1"})
        assert await after.send_once()
        assert store.spool_depth() == 0
        await after.close()
    finally:
        server.stop()
        store.close()


def test_report_timestamps_read_as_datetime_writes_them() -> None:
    """The reports' timestamps: the text `datetime.isoformat` gives, its
    rounding to the microsecond included (half-way, the next second, zero)."""
    import random
    import time
    from datetime import UTC, datetime

    from rtpagent.reporter import _ts

    now = time.time()
    whole = float(int(now))
    edge = [0.0, 0.5, 1e-6, 5e-7, 4.9e-7, 0.9999995, 0.9999994, 0.9999999, 0.25]
    values = [whole + d for d in edge] + [1.0, 86399.9999996, 951782400.0000005]
    values += [now + random.uniform(-3e8, 3e8) for _ in range(20000)]
    for t in values:
        assert _ts(t) == datetime.fromtimestamp(t, UTC).isoformat(), t
    assert _ts().endswith("+00:00")
