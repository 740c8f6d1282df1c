"""The real p4relay server for a test: its CLI migrates the database and makes
tokens, `serve` runs on a free loopback port until the test is done."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from p4relay_testsupport.net import free_port
from p4relay_testsupport.procs import record_pid
from p4relay_testsupport.wait import wait_until

BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class Server:
    url: str
    ingest_token: str
    read_token: str
    database_url: str

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        """`p4relay-server ARGS` on this server's database; a failure raises
        with what the CLI printed."""
        cmd = [str(BIN / "p4relay-server"), "--database-url", self.database_url, *args]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
        if r.returncode != 0:
            raise RuntimeError(f"p4relay-server {' '.join(args)}: exit {r.returncode}: {r.stderr}")
        return r

    def get(self, path: str, **params: str | int) -> Any:
        """GET an API path with the read token: the decoded JSON (raises
        urllib.error.HTTPError on an error status)."""
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        req = urllib.request.Request(
            self.url + path + query, headers={"Authorization": f"Bearer {self.read_token}"}
        )
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read())

    def token(self, name: str, scope: str) -> str:
        """A new API token."""
        out = self.cli("create-token", "--name", name, "--scope", scope).stdout
        return out.split()[-1]


def _ready(url: str) -> bool:
    with (
        contextlib.suppress(urllib.error.URLError, OSError),
        urllib.request.urlopen(url + "/readyz", timeout=1) as r,
    ):
        return int(r.status) == 200
    return False


@contextlib.contextmanager
def running_server(
    database_url: str, log: Path, env: Mapping[str, str] | None = None
) -> Iterator[Server]:
    """Migrate `database_url`, make an ingest and a read token, serve on a free
    port (output to `log`) and wait until /readyz answers; stopped on exit."""
    env = {**(env or {}), "P4RELAY_SERVER_LOG_LEVEL": "warning"}
    port = free_port()
    admin = Server(f"http://127.0.0.1:{port}", "", "", database_url)
    admin.cli("migrate")
    ingest, read = admin.token("ingest", "ingest"), admin.token("reader", "read")
    server = Server(admin.url, ingest, read, database_url)
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(BIN / "p4relay-server"), "serve", "--host", "127.0.0.1", "--port", str(port)],
            env={
                **os.environ,
                "P4RELAY_SERVER_DATABASE_URL": database_url,
                "P4RELAY_SERVER_JWT_SECRET": secrets.token_hex(32),
                **env,
            },
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        record_pid(proc.pid)
        try:

            def ready() -> bool:
                assert proc.poll() is None, log.read_text()[-2000:]
                return _ready(server.url)

            # Seconds when the host is idle; a loaded one takes long to import the app.
            wait_until(ready, within=90, what="server /readyz")
            yield server
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _libpq(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


@contextlib.contextmanager
def server_on_fresh_database(
    name_prefix: str, log: Path, env: Mapping[str, str] | None = None
) -> Iterator[Server]:
    """`running_server` on a database of its own in the stage's throwaway
    cluster ($P4RELAY_TEST_DATABASE_URL, which `make test` sets), dropped after."""
    base = os.environ.get("P4RELAY_TEST_DATABASE_URL")
    if not base:
        raise RuntimeError(
            "P4RELAY_TEST_DATABASE_URL is not set: run the suite through "
            "`make test STAGE=...` (it starts a throwaway PostgreSQL)"
        )
    name = f"{name_prefix}_{secrets.token_hex(4)}"
    with psycopg.connect(_libpq(base), autocommit=True) as c:
        c.execute(f'CREATE DATABASE "{name}"')
    try:
        with running_server(base.rsplit("/", 1)[0] + "/" + name, log, env) as srv:
            yield srv
    finally:
        with psycopg.connect(_libpq(base), autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
