"""The agent's operator controls: the admin socket, signals, the server's poll.

Admin socket (`--admin-socket`, a Unix socket made 0600: only its owner,
root or the agent's user, may drive it): one command a line, one JSON answer
a line. Commands: `status`, `drain`, `evacuate`, `resume`. `rtpagent-ctl`
speaks it. SIGUSR1 drains, SIGUSR2 evacuates (resume: the socket or the
server).

The server's poll (`ServerControl`): every `--maintenance-poll-s` the agent
posts its state to the server and takes the modes an operator set there for
the agent and for its switch, and the switch's cap.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from typing import Any

import httpx
import structlog

from .maintenance import Maintenance, Mode

log = structlog.get_logger("rtpagent.admin")

COMMANDS = {"drain": Mode.DRAINING, "evacuate": Mode.EVACUATED, "resume": Mode.ACTIVE}
SWITCH_MODES = ("active", "out_of_service")  # the server's switch states
MAX_LINE = 256  # a command is a word: anything longer is refused unread


def handle(maint: Maintenance, line: str, by: str) -> dict[str, Any]:
    """One admin command; its answer."""
    word = line.strip().lower()
    if word == "status":
        return {"ok": True, **maint.status()}
    mode = COMMANDS.get(word)
    if mode is None:
        return {
            "ok": False,
            "error": f"unknown command {word[:32]!r}",
            "commands": [*COMMANDS, "status"],
        }
    maint.request("local", mode, by)
    return {"ok": True, **maint.status()}


class AdminSocket:
    def __init__(self, path: str, maint: Maintenance) -> None:
        self.path = path
        self.maint = maint
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        old = os.umask(0o177)
        try:
            self._server = await asyncio.start_unix_server(self._client, self.path, limit=MAX_LINE)
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)
        log.info("admin_socket", path=self.path)

    async def _client(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    line = await r.readline()
                except (ValueError, asyncio.LimitOverrunError):
                    w.write(b'{"ok": false, "error": "line too long"}\n')
                    break
                if not line:
                    break
                try:
                    text = line.decode()
                except UnicodeDecodeError:
                    answer: dict[str, Any] = {"ok": False, "error": "not UTF-8"}
                else:
                    answer = handle(self.maint, text, "admin-socket")
                w.write(json.dumps(answer).encode() + b"\n")
                await w.drain()
        except ConnectionError:
            pass
        finally:
            w.close()
            with contextlib.suppress(ConnectionError):
                await w.wait_closed()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)


class ServerControl:
    """The operator's modes and cap from the server, the agent's state to it."""

    def __init__(
        self,
        maint: Maintenance,
        url: str,
        token: str | None,
        agent: str,
        switch: str | None,
        period: float,
    ) -> None:
        self.maint = maint
        self.url = url.rstrip("/") + "/api/v1/maintenance/poll"
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.agent = agent
        self.switch = switch
        self.period = period
        self.client = httpx.AsyncClient(timeout=5.0)
        self.polls_ok = 0

    async def run(self) -> None:
        while True:
            try:
                await self.poll()
            except Exception:
                log.exception("maintenance_poll_failed")
            await asyncio.sleep(self.period)

    async def poll(self) -> bool:
        st = self.maint.status()
        body = {
            "agent": self.agent,
            "switch": self.switch,
            "mode": st["mode"],
            "offloaded": st["offloaded"],
            "capacity": st["capacity"],
            "by_pipe": st["by_pipe"],
        }
        try:
            r = await self.client.post(self.url, json=body, headers=self.headers)
        except httpx.HTTPError as exc:
            log.info("maintenance_poll_unreachable", error=str(exc) or type(exc).__name__)
            return False
        if r.status_code != 200:
            log.warning("maintenance_poll_refused", status=r.status_code, body=r.text[:300])
            return False
        try:
            got = r.json()
            agent_mode = Mode(got["agent_mode"])
            switch_mode = got["switch_mode"]
            if switch_mode not in SWITCH_MODES:
                raise ValueError(f"bad switch mode {switch_mode!r}")
            cap = got.get("switch_cap")
            if cap is not None and (not isinstance(cap, int) or cap < 0):
                raise ValueError(f"bad cap {cap!r}")
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("maintenance_poll_bad_answer", error=str(exc), body=r.text[:300])
            return False
        # A switch out of service: its calls evacuated, whatever its agents' own mode.
        self.maint.request("agent", agent_mode, "server")
        self.maint.request(
            "switch", Mode.EVACUATED if switch_mode == "out_of_service" else Mode.ACTIVE, "server"
        )
        self.maint.set_server_cap(cap)
        self.polls_ok += 1
        return True

    async def close(self) -> None:
        await self.client.aclose()


async def ctl(path: str, command: str, wait: float) -> dict[str, Any]:
    """Send one command; with `wait` > 0 after `evacuate`, wait up to that
    long for the evacuation to finish (its figures in the answer)."""
    r, w = await asyncio.open_unix_connection(path)
    try:

        async def ask(cmd: str) -> dict[str, Any]:
            w.write(cmd.encode() + b"\n")
            await w.drain()
            got: dict[str, Any] = json.loads(await r.readline())
            return got

        answer = await ask(command)
        if command == "evacuate" and wait > 0 and answer.get("ok"):
            loop = asyncio.get_running_loop()
            end = loop.time() + wait
            while answer.get("evacuating") and loop.time() < end:
                await asyncio.sleep(0.05)
                answer = await ask("status")
        return answer
    finally:
        w.close()
