"""Wire the parts together; start-up recovery; shutdown.

Start-up, for restart safety without a blind spell: the control socket opens
first, so SIP servers' commands pass through from the first moment; the
journal is loaded as it was (no round trip) in slices between them, then the
agent learns from the commands that passed meanwhile, in order, and handles
every command from then on; the offloader takes the journalled sessions back
in slices between commands; the switch is
reconciled against the journal when it connects (stale entries swept,
missing ones re-installed), and every journalled session is checked against
RTPProxy in the background (`Q`, a few at a time, behind the SIP servers'
commands): one RTPProxy no longer has is ended as a `D` would end it (final
counters read, entries removed, the session reported ended) as soon as its
answer comes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sys
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator

import structlog
from p4relay_switch import FlowKey
from prometheus_client import Counter

from . import __version__, metrics
from .acct import AcctFile, AcctRecord
from .admin import AdminSocket, ServerControl
from .admission import Admission
from .agent import Agent
from .config import Settings
from .early import EarlyRelay
from .frontend import Frontend
from .maintenance import Maintenance
from .notify import NotifyListener
from .offload import Offloader
from .oneway import OneWay
from .planner import Plan
from .protocol import ECODE_SESUNKN, Command, parse_command, parse_reply
from .reporter import Reporter, Sampler, Sender
from .sockets import SocketSpec, parse_spec
from .state import OffloadState, Session, SessionTable
from .store import Store
from .switchport import OffloadRefused, Switch
from .upstream import Upstream, UpstreamTimeout

log = structlog.get_logger("rtpagent")

# Journalled sessions checked against RTPProxy at once after a restart.
RECONCILE_WORKERS = 4
# Journalled sessions loaded / taken back by the offloader per event-loop turn at start.
LOAD_SLICE = 256
RESTORE_SLICE = 256
AGED_OUT = Counter(
    "rtpagent_sessions_aged_out_total",
    "Sessions RTPProxy no longer had when asked after a TTL without commands (ended)",
)
ACCT_ENDED = Counter(
    "rtpagent_rtpproxy_ended_total",
    "Sessions RTPProxy's accounting says it ended without the agent seeing the end",
)
ADOPTED = Counter(
    "rtpagent_adopted_sessions_total",
    "Sessions RTPProxy ended that the agent never saw (created while it was away), recorded",
)
ACCT_OFFSET = "rtpproxy_acct_offset"
ACCT_POLL_S = 0.5
ACCT_GRACE_S = 2.0  # a record no session matches waits this long before it is adopted
# Ended sessions kept for RTPProxy's record of them.
ENDED_KEPT = 100_000
ENDED_KEPT_S = 120.0
# RTPProxy writes a session's row a moment after its end. One that has not
# come this long after the agent saw the end was lost: RTPProxy drops rows
# when its accounting queue (128 rows, fixed at its build) is full (a burst
# of ends, or its accounting thread starved of CPU), logging "accounting
# queue is full".
ACCT_ROW_WAIT_S = 15.0
ACCT_RECHECK_S = 60.0
ACCT_MISSING = Counter(
    "rtpagent_rtpproxy_acct_missing_total",
    "Ended sessions whose RTPProxy accounting row did not come within "
    f"{ACCT_ROW_WAIT_S:g} s (RTPProxy dropped it: its accounting queue was full)",
)
ACCT_RECHECKS = Counter(
    "rtpagent_rtpproxy_acct_rechecks_total",
    "Passes asking RTPProxy about every session after accounting rows were lost",
)
RECONCILED_GONE = Counter(
    "rtpagent_reconciled_gone_total",
    "Journalled sessions RTPProxy no longer had after a restart (ended by the agent)",
)


class App:
    def __init__(
        self, cfg: Settings, switch: Switch | None = None, early: EarlyRelay | None = None
    ) -> None:
        self.cfg = cfg
        # The control sockets as the process opened them at its start, relaying.
        self.early = early
        self.embedded: asyncio.subprocess.Process | None = None
        self.table = SessionTable()
        # Counted when scraped, not at every command.
        metrics.SESSIONS.set_function(self.table.__len__)
        self.store = Store(cfg.state_file)
        # The leg counters last read before a restart, with when: evidence of
        # how long a call's media went on while the agent was away.
        self._sampled_before = self.store.sampled_at()
        if switch is None:
            from .bfrt import BfrtSwitch

            lo, hi = Settings.port_range(cfg.relay_ports)
            switch = BfrtSwitch(
                cfg.switch or "127.0.0.1:1",
                client_id=cfg.switch_client_id,
                relay_addrs=cfg.relay_addr,
                port_min=lo,
                port_max=hi,
                port_bound=cfg.port_binding != "off",
            )
        self.switch = switch
        self.offloader = Offloader(
            self.table,
            switch,
            legs=cfg.legs,
            idle_ttl_ms=cfg.idle_ttl_ms,
            nat_nets=cfg.nat_nets,
            latch_always=cfg.latch_always,
            learn_policy=cfg.learn_policy,
            learn_window_ms=cfg.learn_window_ms,
            port_binding=cfg.port_binding,
            route_refresh_s=cfg.route_refresh_s,
            enabled=bool(cfg.switch),
            guard=cfg.relay_guard,
        )
        self.upstream: Upstream | None = None
        self.agent: Agent | None = None
        self.frontend: Frontend | None = None
        self.notify_listener: NotifyListener | None = None
        self.admission = Admission(
            self.table,
            cfg.new_sessions_per_second,
            cfg.new_sessions_burst,
            cfg.max_sessions_per_source,
        )
        self.offloader.listeners.append(self.admission.on_event)
        self.maintenance = Maintenance(
            self.offloader,
            max_offloaded_calls=cfg.max_offloaded_calls,
            legs=cfg.legs,
            emit_event=self._maintenance_event,
        )
        self.admin: AdminSocket | None = None
        self.server_control: ServerControl | None = None
        self.reporter = Reporter(self.store, self.offloader, cfg.switch_name)
        self.sampler = Sampler(self.offloader, self.store, cfg.sample_interval)
        self.sampler.reporter = self.reporter
        self.oneway = OneWay(
            cfg.one_way_after_s,
            self.offloader.emit,
            notify_after_s=cfg.one_way_notify_s,
            notify_sip=self._one_way_timeout,
        )
        self.sampler.oneway = self.oneway
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
        offset = self.store.meta(ACCT_OFFSET)
        self._acct_saved = int(offset) if offset is not None else None
        self.acct = (
            AcctFile(cfg.rtpproxy_acct, int(offset) if offset is not None else None)
            if cfg.rtpproxy_acct
            else None
        )
        # Ended sessions by (call-id, tag), a while: RTPProxy's record of them
        # comes after (its packets are added to theirs).
        self._ended: OrderedDict[tuple[str, str], tuple[float, Session]] = OrderedDict()
        self.offloader.listeners.append(self._note_ended)
        self._unmatched: deque[tuple[float, AcctRecord]] = deque()
        # Ended sessions waiting for their row, oldest first: (seen, key, uid).
        self._awaited: deque[tuple[float, tuple[str, str], str]] = deque()
        # Sessions whose row came while the agent still held them (no row to await).
        self._accounted: set[str] = set()
        self._recheck: asyncio.Task[None] | None = None
        self._recheck_again = False
        # Commands passed through (and their answers) while the journal loads;
        # None once the agent handles every command itself.
        self._passing: list[tuple[str, str, float]] | None = []
        self._admitted: tuple[str, Command] | None = None  # the last U `_admit` parsed
        self.passed_through = 0  # commands that passed while the journal loaded
        # Set when every journalled session has been checked against RTPProxy.
        self.reconciled = asyncio.Event()
        self.reconcile_seconds = 0.0

    async def start(self) -> None:
        cfg = self.cfg
        rtpp = cfg.rtpproxy
        if rtpp == "embedded":
            rtpp = await self._start_embedded()
        self.upstream = Upstream(
            parse_spec(rtpp), cfg.reply_timeout, cfg.reply_retries, cfg.rtpproxy_inflight
        )
        await self.upstream.start()
        self.agent = Agent(
            self.upstream,
            self.offloader,
            self.table,
            notify_socket=cfg.notify_listen or None,
            sip_notify=cfg.sip_notify or None,
            notify_allow=cfg.notify_allow,
            rtpp_ttl=cfg.rtpproxy_ttl,
            default_asymmetric=cfg.default_asymmetric,
        )
        if cfg.notify_listen:
            self.notify_listener = NotifyListener(
                parse_spec(cfg.notify_listen), self.agent.on_rtpproxy_timeout
            )
            await self.notify_listener.start()
        # Commands pass through from here on; until the journal is loaded
        # they only pass (answers kept to be learnt from, in order, after).
        specs = [parse_spec(s) for s in cfg.listen]
        bound: dict[SocketSpec, socket.socket] = {}
        if self.early is not None:
            early, self.early = self.early, None
            if early.listen == specs and early.rtpproxy == parse_spec(rtpp):
                socks, passed = await asyncio.to_thread(early.hand_over)
                bound = dict(zip(specs, socks, strict=True))
                assert self._passing is not None
                self._passing[:0] = passed
                log.info("early_relay_handed_over", commands=len(passed))
            else:  # the settings read in full name other sockets
                early.close()
        self.frontend = Frontend(specs, self._handle, self._handle_cb, self._admit, bound)
        await self.frontend.start()
        journalled = await self._load_journal()
        self.agent.start()
        self._catch_up()
        # What commands change for the switch waits (marked) until the
        # journal's plans are back and the switch is connected.
        await self._restore(journalled)
        if cfg.switch:
            await self.switch.start()
        self.offloader.start()
        if self.acct is not None:
            # What RTPProxy ended while the agent was away, before anything asks
            # it (the sessions' entries back, so their counters are read first).
            while await self._read_acct():
                pass
        self._tasks += [
            asyncio.create_task(self.sampler.run(), name="sampler"),
            asyncio.create_task(self.sender.run(), name="sender"),
            asyncio.create_task(self._stats_cache(), name="stats-cache"),
            asyncio.create_task(self._reconcile_rtpproxy(journalled), name="reconcile-rtpproxy"),
            asyncio.create_task(self._age(), name="age-sessions"),
        ]
        if self.acct is not None:
            self._tasks.append(asyncio.create_task(self._follow_acct(), name="rtpproxy-acct"))
        await self._start_maintenance()
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

    async def _start_maintenance(self) -> None:
        cfg = self.cfg
        if cfg.admin_socket:
            self.admin = AdminSocket(cfg.admin_socket, self.maintenance)
            await self.admin.start()
        if cfg.server_url and cfg.maintenance_poll_s > 0:
            self.server_control = ServerControl(
                self.maintenance,
                cfg.server_url,
                cfg.server_token,
                cfg.agent_name,
                cfg.switch_name,
                cfg.maintenance_poll_s,
            )
            self._tasks.append(
                asyncio.create_task(self.server_control.run(), name="maintenance-poll")
            )
        self._tasks.append(asyncio.create_task(self._pipe_gauges(), name="pipe-gauges"))

    async def _pipe_gauges(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            self.maintenance.publish_pipes()

    def _maintenance_event(self, kind: str, payload: dict[str, object]) -> None:
        """A mode change or a finished evacuation, for the server's events."""
        self.store.enqueue(
            "event",
            {
                "event_id": __import__("uuid").uuid4().hex,
                "type": kind,
                "ts": _now(),
                "severity": "warning" if kind == "maintenance" else "info",
                "agent": self.cfg.agent_name,
                "switch": self.cfg.switch_name,
                "payload": payload,
            },
        )

    async def _start_embedded(self) -> str:
        """RTPProxy (rtp.io) as the agent's child process, as production runs
        the daemon beside it: a fault in RTPProxy's C engine ends RTPProxy,
        not the agent and its switch state."""
        control = "udp:127.0.0.1:22223"
        ports = [parse_spec(s).port for s in self.cfg.listen if parse_spec(s).port]
        if ports:  # next to the agent's own port, as the port plan has it
            control = f"udp:127.0.0.1:{ports[0] + 1}"
        # RTPProxy's log goes through Python logging in rtp.io: errors only by default.
        extra = ["-T", str(int(self.cfg.rtpproxy_ttl)), "-d", "ERR", *self.cfg.embedded_args]
        if self.cfg.notify_listen:
            extra += ["-n", self.cfg.notify_listen]
        v6 = [a for a in self.cfg.relay_addr[1:] if ":" in a]
        if v6 and "-6" not in extra:
            # Dual stack: IPv6 calls (`U6`) get this address; RTPProxy wants a
            # label on every listen address after the first.
            extra += ["-6", f"v6@{v6[0]}"]
        workdir = _state_dir(self.cfg.state_file)
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "rtpagent.embedded",
            "--control",
            control,
            "--listen",
            self.cfg.relay_addr[0],
            "--ports",
            self.cfg.embedded_ports,
            # its accounting (rtpproxy_acct.csv) is kept with the agent's state
            "--workdir",
            workdir,
            "--",
            *extra,
            stdout=asyncio.subprocess.PIPE,
        )
        assert proc.stdout is not None
        try:
            line = await asyncio.wait_for(proc.stdout.readline(), 60.0)
        except TimeoutError:
            line = b""
        if b"ready" not in line:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
            raise RuntimeError(f"embedded RTPProxy did not start (exit {proc.returncode})")
        self.embedded = proc
        self._tasks.append(asyncio.create_task(self._watch_embedded(proc)))
        log.info("embedded_rtpproxy_started", pid=proc.pid, control=control)
        return control

    async def _watch_embedded(self, proc: asyncio.subprocess.Process) -> None:
        code = await proc.wait()
        if self.embedded is proc:  # not stopped by us
            log.error("embedded_rtpproxy_exited", pid=proc.pid, returncode=code)

    def _one_way_timeout(self, s: Session) -> None:
        """One-way media for --one-way-notify-s: the SIP server hears of it as
        of a media timeout (and ends the dialog)."""
        if self.agent is not None:
            self.agent.notify_sip(s)

    # ------------------------------------------------------------ control socket
    def _admit(self, source: str, body: str) -> int | None:
        """Only a `U` may create a session: the others go on unparsed here."""
        if body[:1] not in ("U", "u"):
            return None
        cmd = parse_command(body)
        # The agent handles this very text next: it takes the parse (`_parsed`).
        self._admitted = (body, cmd)
        return self.admission.check(source, cmd)

    def _parsed(self, body: str) -> Command | None:
        """`body` as `_admit` just parsed it, if it did."""
        got, self._admitted = self._admitted, None
        return got[1] if got is not None and got[0] is body else None

    def _handle_cb(self, body: str, done: Callable[[str | None], None]) -> None:
        parsed = self._parsed(body)
        if self._passing is None:
            assert self.agent is not None
            self.agent.handle_cb(body, done, parsed)
            return
        assert self.upstream is not None
        backlog = self._passing

        def answered(raw: str | None) -> None:
            if raw is not None:
                backlog.append((body, raw, time.time()))
            done(raw)

        if self.upstream.spec.datagram:
            self.upstream.call_cb(body, answered)
        else:
            t = asyncio.ensure_future(self._handle(body))
            t.add_done_callback(lambda f: done(None if f.cancelled() else f.result()))

    async def _handle(self, body: str) -> str | None:
        parsed = self._parsed(body)
        if self._passing is None:
            assert self.agent is not None
            return await self.agent.handle(body, parsed)
        assert self.upstream is not None
        backlog = self._passing
        try:
            raw = await self.upstream.call(body)
        except UpstreamTimeout:
            return None
        backlog.append((body, raw, time.time()))
        return raw

    def _catch_up(self) -> None:
        """The journal is loaded: learn from what passed meanwhile, in order;
        from now on the agent handles every command."""
        assert self.agent is not None
        backlog, self._passing = self._passing or [], None
        for body, raw, at in backlog:
            try:
                self.agent.learn(body, raw, at)
            except Exception:
                log.exception("catch_up_failed", command=body[:200])
        self.passed_through = len(backlog)
        if backlog:
            log.info("caught_up", commands=len(backlog))

    # ------------------------------------------------------------ recovery
    async def _load_journal(self) -> list[Session]:
        """The journalled sessions, back in the table as they were (no round
        trip), LOAD_SLICE per event-loop turn while commands pass through."""
        loaded: list[Session] = []
        docs = await asyncio.to_thread(self.store.sessions)
        for n, d in enumerate(docs, 1):
            if n % LOAD_SLICE == 0:
                await asyncio.sleep(0)
            try:
                s = Session.from_json(d)
            except (TypeError, ValueError, KeyError) as exc:
                log.warning("journal_entry_unreadable", error=str(exc))
                continue
            self.table.add(s)
            self.admission.restore(s)
            if s.notify_token and self.agent is not None:
                self.agent.notify_tokens[s.notify_token] = s.uid
            loaded.append(s)
        if loaded:
            log.info("journal_loaded", sessions=len(loaded))
        else:
            self.reconciled.set()
        return loaded

    async def _restore(self, sessions: list[Session]) -> None:
        """The offloader takes the journalled sessions back (legs, plans,
        ports), RESTORE_SLICE per event-loop turn: commands get their turns
        in between. One a command ended meanwhile is skipped (its entries
        are swept when the switch is reconciled)."""
        for n, s in enumerate(sessions, 1):
            if s.uid in self.table.by_uid:
                self.offloader.restore(s)
            if n % RESTORE_SLICE == 0:
                await asyncio.sleep(0)

    async def _reconcile_rtpproxy(self, sessions: list[Session]) -> None:
        """Ask RTPProxy about every journalled session, RECONCILE_WORKERS at a
        time (SIP servers' commands wait behind at most that many); end each
        one it no longer has. A session a command touched meanwhile is left
        alone: the command's answer already told."""
        if not sessions:
            return
        t0 = time.monotonic()
        todo = iter(sessions)
        gone = kept = unknown = 0
        stopped, aged = await self._media_stopped()
        idle = 0

        async def worker() -> None:
            nonlocal gone, kept, unknown, idle
            for s in todo:
                if s.uid not in self.table.by_uid:
                    continue
                seen = s.last_refresh
                alive = await self._alive_in_rtpproxy(s)
                if alive is None:
                    unknown += 1
                elif s.last_refresh != seen or s.uid not in self.table.by_uid:
                    kept += 1
                elif alive:
                    p = self.offloader.plans.get(s.uid)
                    rtp = [r.key for r in p.relays if not r.rtcp] if p is not None else []
                    if p is not None and rtp and all(k in aged for k in rtp):
                        # Its media stopped both ways while the agent was away, long
                        # enough for the switch's idle timeout (its `D` lost, say):
                        # ended as that timeout ends a call.
                        idle += 1
                        assert self.agent is not None
                        self.agent.switch_idle(s, await self._stopped_after_read(s, p))
                    else:
                        kept += 1
                else:
                    gone += 1
                    self._end_gone(s, stopped)

        await asyncio.gather(*(worker() for _ in range(RECONCILE_WORKERS)))
        self.reconcile_seconds = time.monotonic() - t0
        self.reconciled.set()
        log.info(
            "reconciled_with_rtpproxy",
            kept=kept,
            gone=gone,
            idle=idle,
            unknown=unknown,
            seconds=round(self.reconcile_seconds, 3),
        )

    async def _age(self) -> None:
        """Sessions age out with RTPProxy's: one on RTPProxy (not offloaded:
        the agent keeps those alive itself) that no command touched for a TTL
        is asked about (`Q`), at most once per TTL, and ended if RTPProxy no
        longer has it (it timed out there and nobody was told, or the SIP
        server's `D` went to RTPProxy some other way)."""
        ttl = self.cfg.rtpproxy_ttl
        period = max(0.5, ttl / 2)
        while True:
            await asyncio.sleep(period)
            now = time.monotonic()
            due = [
                s
                for s in self.table
                if s.uid not in self.offloader.plans and now - s.last_refresh >= ttl
            ]
            todo = iter(due)
            try:
                await asyncio.gather(*(self._age_some(todo) for _ in range(RECONCILE_WORKERS)))
            except Exception:
                log.exception("ageing_failed")

    async def _age_some(self, todo: Iterator[Session]) -> None:
        for s in todo:
            if s.uid not in self.table.by_uid:
                continue
            seen = s.last_refresh
            alive = await self._alive_in_rtpproxy(s)
            if s.uid not in self.table.by_uid or s.last_refresh != seen:
                continue  # a command came meanwhile
            if alive is False:
                AGED_OUT.inc()
                self._end_gone(s)
            else:
                s.last_refresh = time.monotonic()  # next look in a TTL

    # ------------------------------------------------------------ RTPProxy's accounting
    def _note_ended(self, kind: str, s: Session, payload: dict[str, object]) -> None:
        if kind != "ended" or self.acct is None:
            return
        if s.uid in self._accounted:  # its row ended it
            self._accounted.discard(s.uid)
            return
        now = time.monotonic()
        self._awaited.append((now, s.key, s.uid))
        self._ended[s.key] = (now, s)
        self._ended.move_to_end(s.key)
        while self._ended and (
            len(self._ended) > ENDED_KEPT
            or now - next(iter(self._ended.values()))[0] > ENDED_KEPT_S
        ):
            self._ended.popitem(last=False)

    async def _follow_acct(self) -> None:
        while True:
            await asyncio.sleep(ACCT_POLL_S)
            try:
                await self._read_acct()
            except Exception:
                log.exception("rtpproxy_acct_failed")

    async def _read_acct(self) -> bool:
        """Apply the rows RTPProxy appended; True if there were any."""
        assert self.acct is not None
        rows = await asyncio.to_thread(self.acct.read)
        self._adopt_unmatched()
        for n, rec in enumerate(rows, 1):
            self._on_acct(rec)
            if n % LOAD_SLICE == 0:
                await asyncio.sleep(0)
        self._check_missing()
        if self.acct.offset is not None and self.acct.offset != self._acct_saved:
            self._acct_saved = self.acct.offset
            self.store.set_meta(ACCT_OFFSET, str(self.acct.offset))
        return bool(rows)

    def _on_acct(self, rec: AcctRecord) -> None:
        """RTPProxy ended a session: one the agent still holds ended behind its
        back (its end and RTPProxy's packets from the record); one the agent
        ended gets RTPProxy's packets added; one it never saw was created
        while it was away: recorded whole (reason `agent_away`)."""
        key = (rec.call_id, rec.tag)
        live = next((s for s in self.table.for_call(rec.call_id) if s.tag == rec.tag), None)
        if live is not None and live.created <= rec.teardown_ts + 1.0:
            _add_rtpproxy_packets(live, rec)
            if live.answered_at is None and rec.first_rtp_o > 0:
                live.answered_at = rec.first_rtp_o
            live.ended_at = rec.teardown_ts
            log.info("rtpproxy_ended_session", call_id=rec.call_id, tag=rec.tag)
            ACCT_ENDED.inc()
            self._accounted.add(live.uid)
            self._end_gone(live)
            return
        got = self._ended.pop(key, None)
        ending = got[1] if got else None
        if ending is not None:
            fresh = ending.answered_at is None and rec.first_rtp_o > 0
            if fresh:  # its answer went to RTPProxy directly: the callee's first packet
                ending.answered_at = rec.first_rtp_o
            added = _add_rtpproxy_packets(ending, rec)
            if (added or fresh) and ending.state is OffloadState.ENDED:
                self.offloader.emit("amended", ending)
            return
        # Not known (yet): the agent may be ending it right now (its removal
        # under way); a session it never saw is adopted after ACCT_GRACE_S.
        self._unmatched.append((time.monotonic(), rec))

    def _check_missing(self) -> None:
        """Ended sessions whose row has not come in ACCT_ROW_WAIT_S: RTPProxy
        dropped it. Counted and logged; and as the rows of ends the agent
        did not see may be lost with them, every session is checked with
        RTPProxy (`_recheck_all`, a pass at most every ACCT_RECHECK_S). A row
        that comes later still adds its packets (the session stays in `_ended`)."""
        now, missing = time.monotonic(), []
        while self._awaited and now - self._awaited[0][0] >= ACCT_ROW_WAIT_S:
            _, key, uid = self._awaited.popleft()
            got = self._ended.get(key)
            if got is not None and got[1].uid == uid:
                missing.append(key)
        if not missing:
            return
        ACCT_MISSING.inc(len(missing))
        log.warning(
            "rtpproxy_acct_rows_missing",
            sessions=len(missing),
            first=[f"{c} {t}" for c, t in missing[:5]],
            waited_s=ACCT_ROW_WAIT_S,
            cause="RTPProxy's accounting queue was full (its log: 'accounting queue is full')",
        )
        if self._recheck is None or self._recheck.done():
            self._recheck = asyncio.create_task(self._recheck_all(), name="acct-recheck")
        else:
            self._recheck_again = True

    async def _recheck_all(self) -> None:
        """Every session asked about (`Q`), RECONCILE_WORKERS at a time; the
        ones RTPProxy no longer has are ended (their end row may be among
        the lost). Again after it if more rows were lost meanwhile."""
        while True:
            self._recheck_again = False
            ACCT_RECHECKS.inc()
            t0 = time.monotonic()
            todo = iter(list(self.table))
            try:
                await asyncio.gather(*(self._age_some(todo) for _ in range(RECONCILE_WORKERS)))
            except Exception:
                log.exception("acct_recheck_failed")
            if not self._recheck_again:
                return
            # Rows lost all the time (a writer that stays stalled): a pass at
            # most every ACCT_RECHECK_S, not RTPProxy asked without a pause.
            await asyncio.sleep(max(0.0, t0 + ACCT_RECHECK_S - time.monotonic()))

    def _adopt_unmatched(self) -> None:
        now = time.monotonic()
        while self._unmatched and now - self._unmatched[0][0] >= ACCT_GRACE_S:
            _, rec = self._unmatched.popleft()
            got = self._ended.pop((rec.call_id, rec.tag), None)
            if got is not None:  # ended meanwhile: its packets
                if _add_rtpproxy_packets(got[1], rec):
                    self.offloader.emit("amended", got[1])
            elif not any(s.tag == rec.tag for s in self.table.for_call(rec.call_id)):
                self._adopt(rec)

    def _adopt(self, rec: AcctRecord) -> None:
        """A session RTPProxy had and the agent never saw: the SIP server
        placed the call with RTPProxy directly while the agent was away."""
        s = Session(call_id=rec.call_id, tag=rec.tag, created=rec.setup_ts)
        # The callee's media starts with its answer (the caller's, if the callee sent none).
        s.answered_at = rec.first_rtp_o or rec.first_rtp_a or None
        s.ended_at = rec.teardown_ts
        s.adopted = "agent_away"
        _add_rtpproxy_packets(s, rec)
        s.state, s.reason = OffloadState.FALLBACK, "agent_away"
        ADOPTED.inc()
        log.info("adopted_session", call_id=rec.call_id, tag=rec.tag, reason="agent_away")
        self.offloader.emit("fallback", s, reason="agent_away")
        s.state = OffloadState.ENDED
        self.offloader.emit("ended", s)

    async def _media_stopped(self) -> tuple[dict[FlowKey, float], set[FlowKey]]:
        """When each relay entry last saw a packet (wall clock), from the time
        the switch has left on it: the evidence of when a call that ended
        while the agent was away stopped. An entry that aged already says
        only that it was at least its TTL ago: that bound is taken (and the
        entry is among the aged, the second result)."""
        if not self.cfg.switch or not self.switch.connected:
            return {}, set()
        try:
            left = await self.switch.read_ttl_left()
        except OffloadRefused as exc:
            log.warning("entry_ages_unread", reason=exc.reason)
            return {}, set()
        now, ttl = time.time(), self.cfg.idle_ttl_ms
        stopped = {k: now - max(0, ttl - ms) / 1000.0 for k, ms in left.items()}
        return stopped, {k for k, ms in left.items() if ms <= 0}

    async def _stopped_after_read(self, s: Session, p: Plan) -> float | None:
        """When a call's media stopped while the agent was away, its entries
        aged since: the leg counters now against those last read before (and
        when), at the rate the leg carried until then; at most a TTL ago."""
        latest = time.time() - self.cfg.idle_ttl_ms / 1000.0
        try:
            now = await self.switch.read_leg_counters([lg.leg for lg in p.legs])
        except OffloadRefused:
            return None
        ends: list[float] = []
        for lg in p.legs:
            before, c = self._sampled_before.get((s.uid, lg.leg)), now.get(lg.leg)
            if before is None or c is None or s.offloaded_at is None:
                continue
            packets, at = before
            if packets <= 0 or at <= s.offloaded_at:
                continue
            rate = packets / (at - s.offloaded_at)
            ends.append(min(latest, at + max(0, c.packets - packets) / rate))
        return max(ends) if ends else None

    def _end_gone(self, s: Session, stopped: dict[FlowKey, float] | None = None) -> None:
        """RTPProxy no longer has it (ended while the agent was away): as a `D`
        ends it: final counters, entries removed, reported ended; its end is
        when its media stopped on the switch (`stopped`), if it was there."""
        assert self.agent is not None
        p = self.offloader.plans.get(s.uid)
        if stopped and p is not None:
            hits = [stopped[r.key] for r in p.relays if not r.rtcp and r.key in stopped]
            if hits:
                s.ended_at = max(hits)
        self.table.remove(s)
        self.agent.forget_tokens(s)
        self.offloader.end(s)
        RECONCILED_GONE.inc()

    async def _alive_in_rtpproxy(self, s: Session) -> bool | None:
        """True/False: RTPProxy has it or not; None: it did not answer."""
        assert self.upstream is not None
        to = f" {s.to_tag}" if s.to_tag else ""
        try:
            raw = await self.upstream.call(f"Q {s.call_id} {s.tag}{to}")
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

    async def reload(self, read: Callable[[], Settings]) -> bool:
        """SIGHUP: the configuration read again (the file and the environment; flags
        still win). One that does not validate is refused, logged and counted, and the
        running one stays. Settings that changed are named in the log: they take effect
        at a restart. (The switch's own features, iRED among them, are the switch control
        plane's: p4relay-controlplane.)"""
        try:
            cfg = read()
        except (ValueError, OSError) as exc:
            metrics.RELOADS.labels("invalid").inc()
            log.error("config_reload_refused", error=str(exc), kept="the running configuration")
            return False
        later = sorted(k for k in Settings.model_fields if getattr(cfg, k) != getattr(self.cfg, k))
        if later:
            log.warning("config_reload_needs_restart", settings=later)
        metrics.RELOADS.labels("applied").inc()
        log.info("config_reloaded", result="applied")
        return True

    async def stop(self) -> None:
        if self.admin is not None:
            await self.admin.close()
        if self.server_control is not None:
            await self.server_control.close()
        if self.frontend is not None:
            await self.frontend.close()
        if self.agent is not None:
            await self.agent.stop()
        await self.offloader.drained_or_timeout(2.0)
        await self.offloader.stop()
        if self._recheck is not None:
            self._tasks.append(self._recheck)
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
            proc, self.embedded = self.embedded, None
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 10.0)
            except TimeoutError:
                proc.kill()
                await proc.wait()


def _state_dir(state_file: str) -> str:
    return os.path.dirname(os.path.abspath(state_file))


def _now() -> str:
    from datetime import UTC, datetime

    return datetime.now(UTC).isoformat()


def _add_rtpproxy_packets(s: Session, rec: AcctRecord) -> bool:
    """What RTPProxy relayed itself (before an offload, in a fallback, the
    whole call when it was never offloaded) goes into the session's totals;
    the switch counted none of it. True if there was any."""
    p0, p1 = rec.relayed_by_stream()
    if not (p0 or p1):
        return False
    s.switch_totals.packets[0] += p0
    s.switch_totals.packets[1] += p1
    return True
