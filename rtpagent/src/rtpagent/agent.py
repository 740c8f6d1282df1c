"""The control path: every command from a SIP server goes through `Agent.handle`.

forward (U's notify socket rewritten) -> RTPProxy -> reply -> update sessions
-> mark them for the offload worker -> reply goes back (Q/I/G with the
switch's counts added for offloaded sessions). The switch is never on the
reply's path.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import time
import uuid
from collections.abc import Callable, Coroutine, Iterable
from typing import Any
from urllib.parse import quote_from_bytes

import structlog

from . import metrics
from .notify import Notifier
from .offload import Offloader
from .protocol import (
    ECODE_SESUNKN,
    WIRE,
    Command,
    Op,
    Reply,
    parse_command,
    parse_reply,
    unquote_tag,
    with_notify,
)
from .sockets import SocketSpec, parse_spec
from .state import OffloadState, Session, SessionTable
from .tracker import Outcome, Tracker
from .upstream import Upstream, UpstreamTimeout

log = structlog.get_logger("rtpagent.agent")


# The agent's own commands at RTPProxy at once (session refreshes, the deletes
# of calls the switch saw idle): what a SIP server's command can find queued
# ahead of it there. Calls set up together fall due and go idle together.
OWN_INFLIGHT = 8


class Agent:
    def __init__(
        self,
        upstream: Upstream,
        offloader: Offloader,
        table: SessionTable,
        *,
        notify_socket: str | None,
        notifier: Notifier | None = None,
        sip_notify: str | None = None,
        notify_allow: Iterable[str] = (),
        rtpp_ttl: float = 60.0,
        default_asymmetric: bool = False,
    ) -> None:
        self.upstream = upstream
        self.offloader = offloader
        self.table = table
        self.tracker = Tracker(table, default_asymmetric)
        self.notify_socket = notify_socket  # ours; None: do not rewrite
        # The SIP server's socket for sessions whose U names none.
        self.sip_notify = sip_notify or None
        # The timeout sockets a U may name (the SIP server's, always allowed):
        # the agent connects to no other.
        self.notify_allow = NotifyAllow(
            [*notify_allow, *([self.sip_notify] if self.sip_notify else [])]
        )
        self._refused_logged: dict[str, float] = {}
        self.notifier = notifier or Notifier()
        self.rtpp_ttl = rtpp_ttl
        self.notify_tokens: dict[str, str] = {}  # our notify tag -> session uid
        self._tok = itertools.count(1)
        self._tok_prefix = "p4r" + uuid.uuid4().hex[:10]
        self._tasks: set[asyncio.Task[object]] = set()
        self._queries: set[asyncio.Future[str | None]] = set()
        self._refresh_task: asyncio.Task[None] | None = None
        self._own_slots = asyncio.Semaphore(OWN_INFLIGHT)
        # Switch-carried packets (all sessions), refreshed by the sampler: added
        # to RTPProxy's own totals in `I`/`G` answers.
        self.offloader_packets_cache = 0
        offloader.on_timeout = self.switch_idle

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        self._refresh_task = asyncio.create_task(self._refresh_loop(), name="refresh")

    async def stop(self) -> None:
        if self._refresh_task is not None:
            self._refresh_task.cancel()
        for t in list(self._tasks):
            t.cancel()
        await self.notifier.close()

    def _spawn(self, coro: Coroutine[Any, Any, object]) -> None:
        t = asyncio.ensure_future(coro)
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)

    # ------------------------------------------------------------------ commands
    def _prepare(self, body: str, parsed: Command | None) -> tuple[Command, str, str | None]:
        """Parse (unless `parsed` is `body` parsed already); rewrite U's notify
        socket. -> (command, text to send, our notify token)."""
        cmd = parse_command(body) if parsed is None else parsed
        metrics.command_counter(cmd.op.name).inc()
        if cmd.parse_error is not None:
            metrics.BAD_INPUT.labels("command").inc()
            log.info("command_not_understood", reason=cmd.parse_error.reason, command=body[:200])
        if (
            cmd.op is Op.UPDATE
            and cmd.understood
            and cmd.notify_socket is not None
            and self.notify_socket is not None
            and not self.notify_allow.permits(cmd.notify_socket)
        ):
            # Not ours to reach: RTPProxy gets the U as sent (and applies its
            # own -n list); the session keeps no notify socket of the agent's.
            # A socket without a tag RTPProxy would misread: it goes without.
            self._refuse_notify(cmd.notify_socket)
            return cmd, body if cmd.notify_tag is not None else with_notify(cmd, None, None), None
        if (
            cmd.op is Op.UPDATE
            and cmd.understood
            and (cmd.notify_socket is not None or self.sip_notify is not None)
            and self.notify_socket is not None
        ):
            token = f"{self._tok_prefix}_{next(self._tok):x}"
            return cmd, with_notify(cmd, self.notify_socket, token), token
        if cmd.op is Op.UPDATE and cmd.notify_socket is not None and cmd.notify_tag is None:
            # No socket of the agent's: RTPProxy notifies the SIP server itself,
            # and needs a tag for it; the one the SIP server finds its dialog by.
            return cmd, with_notify(cmd, cmd.notify_socket, self._dialog_tag(cmd)), None
        return cmd, body, None

    def _dialog_tag(self, cmd: Command) -> str:
        """The default notify tag of the session `cmd` names (the command's own
        call-id and from-tag when the agent has no such session)."""
        assert cmd.call_id is not None and cmd.from_tag is not None
        found = self.table.find_stream(cmd.call_id, cmd.from_tag, cmd.to_tag)
        if found is not None:
            return default_notify_tag(found[0])
        tag = cmd.from_tag.split(";", 1)[0]
        return quote_from_bytes(f"{cmd.call_id} {tag}".encode(WIRE), safe="")

    def _refuse_notify(self, socket: str) -> None:
        metrics.NOTIFY_REFUSED.inc()
        now = time.monotonic()
        if now - self._refused_logged.get(socket, -1e9) >= 60.0:  # once a minute per socket
            if len(self._refused_logged) >= 1024:
                self._refused_logged.clear()
            self._refused_logged[socket] = now
            log.warning("notify_socket_refused", socket=socket[:200])

    def _complete(self, cmd: Command, raw: str, token: str | None, at: float | None = None) -> str:
        """RTPProxy answered (at wall-clock `at`, default now): update sessions;
        the reply (I/G with switch counts)."""
        reply = parse_reply(raw)
        if reply.error is None:
            metrics.REPLY_OK.inc()
        else:
            metrics.REPLY_ERROR.inc()
        out = self.tracker.apply(cmd, reply)
        self._after(cmd, reply, out, token, at)
        if cmd.op in (Op.INFO, Op.GET_STATS) and reply.ok:
            return self._rewrite_stats(cmd, raw)
        return raw

    def learn(self, body: str, raw: str, at: float | None = None) -> None:
        """A command that passed through unchanged (at start, while the
        journal was loading) and RTPProxy's answer at `at`: the sessions catch up."""
        self._complete(parse_command(body), raw, None, at)

    async def handle(self, body: str, parsed: Command | None = None) -> str | None:
        """One command (cookie removed) -> reply body, or None if RTPProxy
        never answered. `parsed`: `body` parsed already (admission)."""
        cmd, send, token = self._prepare(body, parsed)
        try:
            raw = await self.upstream.call(send)
        except UpstreamTimeout as exc:
            log.warning("rtpproxy_no_reply", error=str(exc), op=cmd.op.name)
            return None
        raw = self._complete(cmd, raw, token)
        if cmd.op is Op.QUERY and cmd.understood and parse_reply(raw).ok:
            raw = await self._rewrite_query(cmd, raw)
        return raw

    def handle_cb(
        self, body: str, done: Callable[[str | None], None], parsed: Command | None = None
    ) -> None:
        """`handle` without a task per command (datagram RTPProxy): the reply
        continues in a callback. Q, which may read the switch, takes the task path."""
        if not self.upstream.spec.datagram or body.lstrip()[:1] in ("Q", "q"):
            t = asyncio.ensure_future(self.handle(body, parsed))
            self._queries.add(t)

            def finished(f: asyncio.Future[str | None]) -> None:
                self._queries.discard(f)
                done(_result(f))

            t.add_done_callback(finished)
            return
        cmd, send, token = self._prepare(body, parsed)

        def on_raw(raw: str | None) -> None:
            if raw is None:
                log.warning("rtpproxy_no_reply", op=cmd.op.name, command=body[:60])
                done(None)
                return
            try:
                out = self._complete(cmd, raw, token)
            except Exception:  # the reply still goes back unchanged
                log.exception("reply_processing_failed", command=body[:200])
                out = raw
            done(out)

        self.upstream.call_cb(send, on_raw)

    def _after(
        self, cmd: Command, reply: Reply, out: Outcome, token: str | None, at: float | None = None
    ) -> None:
        for s in out.created:
            self.offloader.emit("created", s)
        if token is not None and out.changed:
            s = out.changed[0]
            self.forget_tokens(s)  # RTPProxy keeps only the latest U's socket and tag
            if cmd.notify_socket is not None:
                s.notify_socket = cmd.notify_socket
                # A socket without a tag: the one the SIP server finds its dialog by.
                s.notify_tag = cmd.notify_tag or default_notify_tag(s)
            elif s.notify_socket is None or s.notify_socket == self.sip_notify:
                # The default socket: the call named as the SIP server finds
                # its dialog (call-id, the dialog's from-tag), URL-quoted as
                # RTPProxy keeps a tag.
                s.notify_socket = self.sip_notify
                s.notify_tag = default_notify_tag(s)
            s.notify_token = token
            self.notify_tokens[token] = s.uid
        elif (
            cmd.op is Op.UPDATE
            and cmd.notify_socket is None
            and self.sip_notify is None
            and out.changed
            and reply.ok
        ):
            # RTPProxy drops the timeout handler of a U without one.
            out.changed[0].notify_socket = None
        now = time.perf_counter()
        for s in out.changed:
            if s.answered_at is None and all(st.port and st.sdp for st in s.streams):
                s.answered_at = time.time() if at is None else at  # the answer's reply
            if s.uid not in self.offloader.plans:
                s.pending_since = now
            s.last_refresh = time.monotonic()
            self.offloader.touch(s)
            self.offloader.emit("changed", s)
        for s in out.ended:
            self.forget_tokens(s)
            self.offloader.end(s)

    def forget_tokens(self, s: Session) -> None:
        """`s`'s token no longer names it. A session has at most one token in
        `notify_tokens`, the one it keeps (`notify_token`): no scan of all."""
        t = s.notify_token
        if t is not None and self.notify_tokens.get(t) == s.uid:
            del self.notify_tokens[t]

    # ------------------------------------------------------------------ truthful answers
    async def _rewrite_query(self, cmd: Command, raw: str) -> str:
        assert cmd.call_id is not None and cmd.from_tag is not None
        found = self.table.find_stream(cmd.call_id, cmd.from_tag, cmd.to_tag)
        if found is None:
            return raw
        s, i = found
        if s.uid not in self.offloader.plans and not any(s.switch_totals.packets):
            return raw
        idx = 1 - i
        pk, _ = await self.offloader.live_counts(s)
        extra = {"npkts_ina": pk[idx], "npkts_ino": pk[1 - idx], "nrelayed": pk[0] + pk[1]}
        body, nl, tail = raw.partition("\n")
        head, sep, subc = body.partition(" && ")
        names = list(cmd.args[3:]) or ["ttl", "npkts_ina", "npkts_ino", "nrelayed", "ndropped"]
        vals = head.split()
        if len(vals) != len(names):
            return raw
        outv = []
        for name, v in zip(names, vals, strict=True):
            key, eq, num = v.partition("=")
            if not eq:
                num, key = key, name
            if key in extra and (num.isascii() and num.isdigit()):
                num = str(int(num) + extra[key])
            outv.append(f"{key}={num}" if eq else num)
        return " ".join(outv) + sep + subc + nl + tail

    def _rewrite_stats(self, cmd: Command, raw: str) -> str:
        extra = self.offloader_packets_cache
        if not extra:
            return raw
        if cmd.op is Op.INFO:

            def bump(m: re.Match[str]) -> str:
                return f"{m.group(1)}{int(m.group(2)) + extra}"

            return re.sub(r"(packets (?:received|transmitted): )(\d+)", bump, raw)
        names = cmd.args
        body, nl, tail = raw.partition("\n")
        vals = body.split()
        if len(vals) != len(names):
            return raw
        outv = []
        for name, v in zip(names, vals, strict=True):
            key, eq, num = v.partition("=")
            if not eq:
                num = key
            if name in ("npkts_rcvd", "npkts_relayed") and (num.isascii() and num.isdigit()):
                num = str(int(num) + extra)
            outv.append(f"{name}={num}" if eq else num)
        return " ".join(outv) + nl + tail

    # ------------------------------------------------------------------ timeouts
    async def _refresh_loop(self) -> None:
        """Keep RTPProxy from timing out sessions whose media it no longer sees.
        At most OWN_INFLIGHT of the agent's commands are at RTPProxy at once:
        calls set up together fall due together (thousands at a time), and
        sent all at once they queued every SIP server's command behind them."""
        period = max(0.5, self.rtpp_ttl / 3)
        slots = self._own_slots
        while True:
            await asyncio.sleep(min(period, 1.0))
            now = time.monotonic()
            due = [
                s
                for s in self.table
                if s.state is OffloadState.OFFLOADED
                and s.refresh_cmd
                and now - s.last_refresh >= period
            ]
            for s in due:
                await slots.acquire()
                if s.uid not in self.table.by_uid or not s.refresh_cmd:
                    slots.release()  # ended or changed while it waited its turn
                    continue
                s.last_refresh = time.monotonic()
                t = asyncio.ensure_future(self._refresh(s))
                self._tasks.add(t)
                t.add_done_callback(self._tasks.discard)
                t.add_done_callback(lambda _t: slots.release())

    async def _refresh(self, s: Session) -> None:
        assert s.refresh_cmd is not None
        try:
            raw = await self.upstream.call(s.refresh_cmd)
        except UpstreamTimeout:
            log.warning("refresh_unanswered", call_id=s.call_id)
            return
        metrics.REFRESHES.inc()
        r = parse_reply(raw)
        if not r.ok or r.port == 0:
            # RTPProxy no longer has it (deleted behind our back): clean up.
            log.info("refresh_found_nothing", call_id=s.call_id, reply=raw.strip())
            self._close(s)

    def on_rtpproxy_timeout(self, token: str) -> None:
        """RTPProxy timed a session out and told us (its notify socket is ours)."""
        uid = self.notify_tokens.pop(token, None)
        s = self.table.by_uid.get(uid) if uid else None
        if s is None:
            metrics.RTPP_TIMEOUTS.labels("unknown").inc()
            log.warning("rtpproxy_timeout_unknown", token=token)
            return
        offloaded = s.uid in self.offloader.plans
        metrics.RTPP_TIMEOUTS.labels("offloaded" if offloaded else "forwarded").inc()
        log.info("rtpproxy_timeout", call_id=s.call_id, tag=s.tag, offloaded=offloaded)
        self._close(s)
        self._notify_sip(s)

    def switch_idle(self, s: Session, stopped: float | None = None) -> None:
        """The switch saw no media either way for the TTL: end it as RTPProxy
        would. `stopped`: when its media stopped, if known better than a TTL ago."""
        if s.uid not in self.table.by_uid:
            return
        # Its media stopped a TTL ago (the switch sweeps once a second): the end.
        s.ended_at = stopped or time.time() - self.offloader.installed.idle_ttl_ms / 1000.0
        self._spawn(self._end_idle(s))

    async def _end_idle(self, s: Session) -> None:
        """RTPProxy's session deleted, then the call ended and its SIP server
        told. The deletes take their turn among the agent's own commands
        (OWN_INFLIGHT): thousands of calls set up together go idle in one
        sweep, and deleted all at once they queued every SIP server's command
        behind them at RTPProxy."""
        to = f" {s.to_tag}" if s.to_tag else ""
        async with self._own_slots:
            if s.uid not in self.table.by_uid:
                return  # its SIP server ended it while it waited its turn
            try:
                raw = await self.upstream.call(f"D {s.call_id} {s.tag}{to}")
                r = parse_reply(raw)
                if not r.ok and r.error != ECODE_SESUNKN:
                    log.warning("idle_delete_refused", call_id=s.call_id, reply=raw.strip())
            except UpstreamTimeout:
                log.warning("idle_delete_unanswered", call_id=s.call_id)
        self.offloader.emit("timeout", s, reason="switch_idle")
        self._close(s)
        self._notify_sip(s)

    def _close(self, s: Session) -> None:
        if s.uid in self.table.by_uid:
            self.table.remove(s)
            self.forget_tokens(s)
            self.offloader.end(s)

    def notify_sip(self, s: Session) -> None:
        """Tell the session's SIP server its media timed out (as RTPProxy would)."""
        self._notify_sip(s)

    def _notify_sip(self, s: Session) -> None:
        if s.notify_socket and not self.notify_allow.permits(s.notify_socket):
            # Journalled under a different allow list: not reached now either.
            self._refuse_notify(s.notify_socket)
            return
        if s.notify_socket and s.notify_tag is not None:
            self._spawn(self.notifier.send(s.notify_socket, unquote_tag(s.notify_tag)))


class NotifyAllow:
    """The permitted timeout sockets, compared by what they name (protocol,
    address, port; or path), never through DNS: a name that is not a literal
    address matches only an entry spelled the same."""

    def __init__(self, entries: Iterable[str]) -> None:
        self.texts = frozenset(entries)
        self.keys = frozenset(k for k in map(_notify_key, self.texts) if k is not None)

    def permits(self, socket: str) -> bool:
        if socket in self.texts:
            return True
        key = _notify_key(socket)
        return key is not None and key in self.keys


def _notify_key(text: str) -> tuple[str, str, int] | None:
    try:
        spec: SocketSpec = parse_spec(text)
    except ValueError:
        return None
    if spec.kind == "unix":
        return ("unix", spec.path, 0)
    if spec.kind in ("tcp", "tcp6"):
        return ("tcp", spec.host, spec.port)
    return None


def _result(f: asyncio.Future[str | None]) -> str | None:
    if f.cancelled():
        return None
    exc = f.exception()
    if exc is not None:
        log.error("handler_failed", error=repr(exc))
        return None
    return f.result()


def default_notify_tag(s: Session) -> str:
    """'<call-id> <from-tag>' (the session tag without its media number),
    URL-quoted byte for byte as RTPProxy stores a notify tag."""
    from_tag = s.tag.split(";", 1)[0]
    return quote_from_bytes(f"{s.call_id} {from_tag}".encode(WIRE), safe="")
