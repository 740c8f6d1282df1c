"""Apply each command and RTPProxy's reply to the session table (pure logic).

Only a successful reply changes state, since only then RTPProxy changed its
own; the rules follow rtpp_command.c / rpcpv1_ul.c (see state.py).
"""

from __future__ import annotations

import functools
import ipaddress
from dataclasses import dataclass, field

import structlog

from . import metrics
from .protocol import ECODE_SESUNKN, Command, Op, Reply
from .state import Endpoint, Session, SessionTable

log = structlog.get_logger("rtpagent.tracker")

# Modifiers that re-state a side without side effects (`n` would allocate a
# new port, `w` add a weak flag, `z` never applies: such sessions stay on RTPProxy).
_RESTATE_DROP = set("nNwWzZ0123456789")


@dataclass
class Outcome:
    """What a command did to the table."""

    changed: list[Session] = field(default_factory=list)  # re-evaluate offload
    created: list[Session] = field(default_factory=list)
    ended: list[Session] = field(default_factory=list)  # closed: remove entries
    all_ended: bool = False  # X


def _endpoint(addr: str | None, port: str | None, v6: bool) -> tuple[Endpoint | None, bool]:
    """SDP address -> (endpoint, on_hold). Invalid -> (None, False); so is an
    address of the other family than the command's (`6`: IPv6), which
    RTPProxy resolves in that family only and never prefills."""
    if addr is None or port is None or not (port.isascii() and port.isdigit()):
        return None, False
    canon = _canonical_ip(addr, v6)
    if canon is None:
        return None, False
    p = int(port)
    if canon == "":
        return None, True
    if not 0 < p < 65535:
        return None, False
    return Endpoint(canon, p), False


@functools.lru_cache(maxsize=65536)
def _canonical_ip(addr: str, v6: bool) -> str | None:
    """Canonical text of an address of the family `v6` names ("" if
    unspecified, None if invalid); cached: the same parties' addresses come
    back in every U/L. A scoped IPv6 address keeps its zone (`fe80::1%eth0`)."""
    try:
        ip = ipaddress.ip_address(addr)
    except ValueError:
        return None
    if (ip.version == 6) != v6:
        return None
    return "" if ip.is_unspecified else str(ip)


def _restate_mods(mods: str) -> str:
    out = []
    skip_digits = False
    for ch in mods:
        if ch in "zZ":
            skip_digits = True
            continue
        if skip_digits and (ch.isascii() and ch.isdigit()):
            continue
        skip_digits = False
        if ch in "nNwW":
            continue
        out.append(ch)
    return "".join(out)


class Tracker:
    def __init__(self, table: SessionTable, default_asymmetric: bool = False) -> None:
        self.table = table
        self.default_asymmetric = default_asymmetric

    def apply(self, cmd: Command, reply: Reply) -> Outcome:
        out = Outcome()
        if not cmd.understood:
            return out
        op = cmd.op
        if op in (Op.UPDATE, Op.LOOKUP):
            self._ul(cmd, reply, out)
        elif op is Op.DELETE:
            if reply.ok or reply.error == ECODE_SESUNKN:
                self._delete(cmd, reply, out)
        elif op is Op.DELETE_ALL:
            if reply.ok:
                out.ended.extend(self.table)
                out.all_ended = True
                for s in out.ended:
                    self.table.remove(s)
        elif op in (Op.RECORD, Op.NORECORD):
            if reply.ok:
                self._record(cmd, op is Op.RECORD, out)
        elif op in (Op.COPY, Op.PLAY, Op.NOPLAY) and reply.ok:
            self._stream_op(cmd, out)
        return out

    # ------------------------------------------------------------ U / L
    def _ul(self, cmd: Command, reply: Reply, out: Outcome) -> None:
        assert cmd.call_id is not None and cmd.from_tag is not None and cmd.ul is not None
        if not reply.ok or not reply.port:
            return  # error, or `L` that found nothing (port 0)
        found = self.table.find_stream(cmd.call_id, cmd.from_tag, cmd.to_tag)
        if found is None:
            # New session (U), or one the agent never saw (L after a restart
            # without a journal): adopt it the way RTPProxy created it.
            s = Session(call_id=cmd.call_id, tag=cmd.from_tag)
            self.table.add(s)
            out.created.append(s)
            raw = 0
            if cmd.ul.weak:
                s.streams[0].weak = True
            else:
                s.strong = True
        else:
            s, raw = found
        sidx = raw if cmd.op is Op.UPDATE else 1 - raw
        pidx = 1 - sidx
        if raw == 0 and cmd.to_tag is not None and s.to_tag is None:
            s.to_tag = cmd.to_tag
        if raw == 1 and s.to_tag is None:
            s.to_tag = cmd.from_tag
        if found is not None:
            if cmd.ul.weak:
                s.streams[sidx].weak = True
            elif cmd.op is Op.UPDATE:
                s.strong = True
        side = s.streams[sidx]
        side.port = reply.port
        if reply.addr is not None:
            # Canonical text, as the switch's learn digests name it (IPv6 has many spellings).
            side.laddr = _canonical_ip(reply.addr, ":" in reply.addr) or reply.addr
        peer = s.streams[pidx]
        ep, hold = _endpoint(cmd.addr, cmd.port, cmd.ul.ipv6)
        if ep is not None:
            if peer.sdp != ep:
                # RTPProxy prefills the new address and latches afresh.
                peer.learned = None
                peer.learned_rtcp = None
                peer.ingress_port = None
            peer.sdp = ep
            peer.on_hold = False
        elif hold:
            peer.on_hold = True
        else:
            # RTPProxy may still accept it (it wraps ports); the session then
            # simply stays on RTPProxy: nothing to offload to.
            metrics.BAD_INPUT.labels("sdp_endpoint").inc()
            log.info("sdp_endpoint_invalid", call_id=cmd.call_id, addr=cmd.addr, port=cmd.port)
        asym = cmd.ul.asymmetric
        peer.asymmetric = self.default_asymmetric if asym is None else asym
        peer.codecs = cmd.ul.codecs
        peer.ptime = cmd.ul.ptime
        peer.modifiers = _restate_mods(cmd.modifiers)
        s.refresh_cmd = self._refresh_command(s)
        out.changed.append(s)

    def _refresh_command(self, s: Session) -> str | None:
        """An `L` that re-states stream 0 as it is: RTPProxy restarts both
        stream timers on any U/L of an existing session."""
        st = s.streams[0]
        if s.to_tag is None or st.sdp is None:
            return None
        return f"L{st.modifiers} {s.call_id} {st.sdp.addr} {st.sdp.port} {s.tag} {s.to_tag}"

    # ------------------------------------------------------------ D
    def _delete(self, cmd: Command, reply: Reply, out: Outcome) -> None:
        """As rtpp_cmd_delete_ematch: each matching session loses the flag; one
        left with none is deleted, and an exact tag match ends the search.
        RTPProxy found none (E50): whatever the agent still holds is stale."""
        assert cmd.call_id is not None and cmd.from_tag is not None
        weak = "w" in cmd.modifiers.lower()
        for s, idx, kind in self.table.matching_delete(cmd.call_id, cmd.from_tag, cmd.to_tag):
            if reply.ok:
                if weak:
                    s.streams[idx].weak = False
                else:
                    s.strong = False
                if s.strong or any(st.weak for st in s.streams):
                    continue
            self.table.remove(s)
            out.ended.append(s)
            if reply.ok and kind != 2:
                break

    # ------------------------------------------------------------ R / N / C / P / S
    def _record(self, cmd: Command, on: bool, out: Outcome) -> None:
        assert cmd.call_id is not None and cmd.from_tag is not None
        for s in self.table.for_call(cmd.call_id):
            from .state import compare_tags

            if compare_tags(s.tag, cmd.from_tag) or (
                cmd.to_tag is not None and compare_tags(s.tag, cmd.to_tag)
            ):
                s.recording = on
                if not on:
                    s.copying = False
                out.changed.append(s)

    def _stream_op(self, cmd: Command, out: Outcome) -> None:
        assert cmd.call_id is not None and cmd.from_tag is not None
        found = self.table.find_stream(cmd.call_id, cmd.from_tag, cmd.to_tag)
        if found is None:
            return
        s, raw = found
        idx = 1 - raw
        if cmd.op is Op.COPY:
            s.copying = True
        elif cmd.op is Op.PLAY:
            s.playing[idx] = True
        else:
            s.playing[idx] = False
        out.changed.append(s)
