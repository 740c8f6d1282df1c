"""Wire the parts together; start-up recovery; shutdown.

Start-up order matters for restart safety: journal loaded -> every journalled
session checked against RTPProxy (`Q`; gone there = gone here) -> switch
reconciled against the journal (stale entries swept, missing ones
re-installed) -> only then the control socket opens.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from typing import Any

import structlog

from . import __version__
from .agent import Agent
from .config import Settings
from .frontend import Frontend
from .notify import NotifyListener
from .offload import Offloader
from .protocol import ECODE_SESUNKN, parse_reply
from .reporter import Reporter, Sampler, Sender
from .sockets import parse_spec
from .state import Session, SessionTable
from .store import Store
from .switchport import Switch
from .upstream import Upstream, UpstreamTimeout

log = structlog.get_logger("rtpagent")


def setup_logging(level: str, json: bool) -> None:
    lvl = getattr(logging, level.upper(), logging.INFO)
    logging.basicConfig(level=lvl, format="%(message)s")
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer()
            if json
            else structlog.dev.ConsoleRenderer(colors=False),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        cache_logger_on_first_use=True,
    )


class App:
    def __init__(self, cfg: Settings, switch: Switch | None = None) -> None:
        self.cfg = cfg
        self.embedded: Any = None
        self.table = SessionTable()
        self.store = Store(cfg.state_file)
        if switch is None:
            from .bfrt import BfrtSwitch

            lo, hi = Settings.port_range(cfg.relay_ports)
            switch = BfrtSwitch(
                cfg.switch or "127.0.0.1:1",
                client_id=cfg.switch_client_id,
                relay_addrs=cfg.relay_addr,
                port_min=lo,
                port_max=hi,
            )
        self.switch = switch
        self.offloader = Offloader(
            self.table,
            switch,
            legs=cfg.legs,
            idle_ttl_ms=cfg.idle_ttl_ms,
            nat_nets=cfg.nat_nets,
            latch_always=cfg.latch_always,
            enabled=bool(cfg.switch),
            guard=cfg.relay_guard,
        )
        self.upstream: Upstream | None = None
        self.agent: Agent | None = None
        self.frontend: Frontend | None = None
        self.notify_listener: NotifyListener | None = None
        self.reporter = Reporter(self.store, self.offloader, cfg.switch_name)
        self.sampler = Sampler(self.offloader, self.store, cfg.sample_interval)
        self.sampler.reporter = self.reporter
        url = cfg.server_url.rstrip("/") + "/api/v1/ingest" if cfg.server_url else None
        self.sender = Sender(
            self.store,
            url,
            cfg.server_token,
            {
                "name": cfg.agent_name,
                "rtpproxy": cfg.rtpproxy,
                "switch": cfg.switch_name,
                "version": __version__,
            },
        )
        self._tasks: list[asyncio.Task[None]] = []
        self._old_cwd = os.getcwd()

    async def start(self) -> None:
        cfg = self.cfg
        rtpp = cfg.rtpproxy
        if rtpp == "embedded":
            rtpp = self._start_embedded()
        self.upstream = Upstream(
            parse_spec(rtpp), cfg.reply_timeout, cfg.reply_retries, cfg.rtpproxy_inflight
        )
        await self.upstream.start()
        self.agent = Agent(
            self.upstream,
            self.offloader,
            self.table,
            notify_socket=cfg.notify_listen or None,
            rtpp_ttl=cfg.rtpproxy_ttl,
            default_asymmetric=cfg.default_asymmetric,
        )
        if cfg.notify_listen:
            self.notify_listener = NotifyListener(
                parse_spec(cfg.notify_listen), self.agent.on_rtpproxy_timeout
            )
            await self.notify_listener.start()
        await self._recover()
        if cfg.switch:
            await self.switch.start()
        self.offloader.start()
        self.agent.start()
        self._tasks += [
            asyncio.create_task(self.sampler.run(), name="sampler"),
            asyncio.create_task(self.sender.run(), name="sender"),
            asyncio.create_task(self._stats_cache(), name="stats-cache"),
        ]
        self.frontend = Frontend(
            [parse_spec(s) for s in cfg.listen], self.agent.handle, self.agent.handle_cb
        )
        await self.frontend.start()
        self.store.enqueue(
            "event",
            {
                "event_id": __import__("uuid").uuid4().hex,
                "type": "agent_up",
                "ts": _now(),
                "agent": cfg.agent_name,
            },
        )
        log.info(
            "started", listen=cfg.listen, rtpproxy=rtpp, switch=cfg.switch, sessions=len(self.table)
        )

    def _start_embedded(self) -> str:
        from .embedded import start

        control = "udp:127.0.0.1:22223"
        ports = [parse_spec(s).port for s in self.cfg.listen if parse_spec(s).port]
        if ports:  # next to the agent's own port, as the port plan has it
            control = f"udp:127.0.0.1:{ports[0] + 1}"
        lo, hi = Settings.port_range(self.cfg.embedded_ports)
        # RTPProxy's log goes through Python logging in rtp.io: per-command INFO
        # lines cost the agent's interpreter time, so errors only by default.
        extra = ["-T", str(int(self.cfg.rtpproxy_ttl)), "-d", "ERR", *self.cfg.embedded_args]
        if self.cfg.notify_listen:
            extra += ["-n", self.cfg.notify_listen]
        # rtp.io's RTPProxy appends its accounting (rtpproxy_acct.csv) relative
        # to the working directory on every session end: keep it with the state.
        self._old_cwd = os.getcwd()
        os.chdir(os.path.dirname(os.path.abspath(self.cfg.state_file)))
        self.embedded = start(control, self.cfg.relay_addr[0], lo, hi, extra)
        return control

    async def _recover(self) -> None:
        """Rebuild sessions from the journal, keeping only what RTPProxy still has."""
        assert self.upstream is not None and self.agent is not None
        docs = self.store.sessions()
        if not docs:
            return
        kept = dropped = 0
        for d in docs:
            try:
                s = Session.from_json(d)
            except (TypeError, ValueError, KeyError) as exc:
                log.warning("journal_entry_unreadable", error=str(exc))
                continue
            alive = await self._alive_in_rtpproxy(s)
            if alive is False:
                dropped += 1
                self.store.drop_session(s.uid)
                continue
            self.table.add(s)
            if s.notify_token:
                self.agent.notify_tokens[s.notify_token] = s.uid
            self.offloader.restore(s)
            kept += 1
        self.store.flush()
        log.info("recovered", kept=kept, dropped=dropped)

    async def _alive_in_rtpproxy(self, s: Session) -> bool | None:
        assert self.upstream is not None
        if s.to_tag is None:
            return None
        try:
            raw = await self.upstream.call(f"Q {s.call_id} {s.tag} {s.to_tag}")
        except UpstreamTimeout:
            return None  # cannot tell: keep it, the refresh will find out
        r = parse_reply(raw)
        if r.error == ECODE_SESUNKN:
            return False
        return r.ok

    async def _stats_cache(self) -> None:
        assert self.agent is not None
        while True:
            await asyncio.sleep(1.0)
            self.agent.offloader_packets_cache = self.sampler.total_packets

    async def stop(self) -> None:
        if self.frontend is not None:
            await self.frontend.close()
        if self.agent is not None:
            await self.agent.stop()
        await self.offloader.drained_or_timeout(2.0)
        await self.offloader.stop()
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        # Journal every session as it is: a restarted agent picks them up.
        for s in self.table:
            self.store.put_session(s.uid, s.to_json)
        self.store.flush()
        if self.cfg.server_url:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.sender.send_once(), 2.0)
        await self.sender.close()
        if self.notify_listener is not None:
            await self.notify_listener.close()
        if self.upstream is not None:
            await self.upstream.close()
        await self.switch.close()
        self.store.close()
        if self.embedded is not None:
            self.embedded = None
            os.chdir(self._old_cwd)


def _now() -> str:
    from datetime import UTC, datetime

    return datetime.now(UTC).isoformat()
