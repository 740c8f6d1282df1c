"""The control socket from the first moment of the process.

Loading the agent (its settings library, the switch client, gRPC) takes
seconds on a loaded host, and a SIP server whose commands go unanswered that
long gives up on the call. So `rtpagent` binds its datagram control sockets
before it loads anything else, with the standard library only, and relays
every command to RTPProxy unchanged (behind a cookie of its own) from a
thread; the answers go back to the SIP servers. When the agent is loaded it
takes the sockets over (`hand_over`) with what passed meanwhile, which it
learns from like the commands that pass while its journal loads (`app.py`).

Only the datagram sockets and a datagram RTPProxy, named by flag, the
environment or the TOML file (`--listen`, `--rtpproxy`, `--config`); with
anything else (`--rtpproxy embedded`, a stream socket) the agent opens its
sockets once loaded, as before.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import selectors
import socket
import sys
import threading
import time
import tomllib
from collections.abc import Sequence
from typing import Any

from .protocol import MAX_COMMAND_BYTES, WIRE, ProtocolError, error_reply, split_cookie
from .sockets import SocketSpec, parse_spec

DEFAULT_LISTEN = ["udp:127.0.0.1:22222"]
DEFAULT_RTPPROXY = "udp:127.0.0.1:22223"
RESEND_S = 1.0  # an unanswered command is sent again after this, TRIES times in all
TRIES = 3
DRAIN_S = RESEND_S * TRIES  # what hand_over waits at most for answers under way

Passed = tuple[str, str, float]  # command, RTPProxy's answer, when it came (wall clock)


def _family(spec: SocketSpec) -> socket.AddressFamily:
    return socket.AF_INET6 if spec.kind == "udp6" or ":" in spec.host else socket.AF_INET


class EarlyRelay:
    """Relays commands from the bound control sockets to RTPProxy until the
    agent takes the sockets over."""

    def __init__(self, listen: Sequence[SocketSpec], rtpproxy: SocketSpec) -> None:
        self.listen = list(listen)
        self.rtpproxy = rtpproxy
        self.socks: list[socket.socket] = []
        self.passed: list[Passed] = []
        self._prefix = "e" + secrets.token_hex(4) + "_"
        self._n = 0
        # our cookie -> (listen socket, client address, client cookie, command, sent at, tries)
        self._pending: dict[str, tuple[socket.socket, Any, str, str, float, int]] = {}
        self._answered: dict[tuple[Any, str], bytes] = {}  # retransmissions: the same answer
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._up: socket.socket | None = None

    def start(self) -> None:
        for spec in self.listen:
            s = socket.socket(_family(spec), socket.SOCK_DGRAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((spec.host, spec.port))
            s.setblocking(False)
            self.socks.append(s)
        up = socket.socket(_family(self.rtpproxy), socket.SOCK_DGRAM)
        up.connect((self.rtpproxy.host, self.rtpproxy.port))
        up.setblocking(False)
        self._up = up
        self._thread = threading.Thread(target=self._run, name="early-relay", daemon=True)
        self._thread.start()

    def hand_over(self) -> tuple[list[socket.socket], list[Passed]]:
        """Stop relaying (answers under way still go back, for up to DRAIN_S)
        and give the agent the bound sockets and what passed."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(DRAIN_S + 1.0)
        if self._up is not None:
            self._up.close()
        return self.socks, self.passed

    def close(self) -> None:
        """Stop (if the agent did not take over) and close the sockets; the
        agent's transports close the same socket objects: closing twice is harmless."""
        if not self._stop.is_set():
            self.hand_over()
        for s in self.socks:
            s.close()

    # ------------------------------------------------------------ the thread
    def _run(self) -> None:
        assert self._up is not None
        sel = selectors.DefaultSelector()
        for s in self.socks:
            sel.register(s, selectors.EVENT_READ)
        sel.register(self._up, selectors.EVENT_READ)
        stop_at: float | None = None
        while True:
            if self._stop.is_set():
                if stop_at is None:
                    stop_at = time.monotonic() + DRAIN_S
                    for s in self.socks:  # new commands wait for the agent in the buffer
                        sel.unregister(s)
                if not self._pending or time.monotonic() > stop_at:
                    break
            for key, _ in sel.select(0.05):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if sock is self._up:
                    self._from_rtpproxy()
                else:
                    self._from_client(sock)
            self._resend()
        sel.close()

    def _from_client(self, sock: socket.socket) -> None:
        try:
            data, addr = sock.recvfrom(MAX_COMMAND_BYTES + 1)
        except OSError:
            return
        try:
            dg = split_cookie(data)
        except ProtocolError as exc:  # RTPProxy's own answer, as the agent gives it
            head = f"{exc.cookie} " if exc.cookie else ""
            self._send(sock, f"{head}{error_reply(exc.code)}".encode(WIRE), addr)
            return
        done = self._answered.get((addr, dg.cookie))
        if done is not None:
            self._send(sock, done, addr)
            return
        if any(p[1] == addr and p[2] == dg.cookie for p in self._pending.values()):
            return  # a retransmission of one under way
        self._n += 1
        ours = f"{self._prefix}{self._n:x}"
        self._pending[ours] = (sock, addr, dg.cookie, dg.body, time.monotonic(), 1)
        self._forward(ours, dg.body)

    def _forward(self, ours: str, body: str) -> None:
        assert self._up is not None
        # RTPProxy away: resent, then given up (the SIP server retransmits)
        with contextlib.suppress(OSError):
            self._up.send(f"{ours} {body}".encode(WIRE))

    def _from_rtpproxy(self) -> None:
        assert self._up is not None
        try:
            data = self._up.recv(65535)
        except OSError:
            return
        text = data.decode(WIRE)
        ours, _, reply = text.partition(" ")
        got = self._pending.pop(ours, None)
        if got is None:
            return
        sock, addr, cookie, body, _, _ = got
        out = f"{cookie} {reply}".encode(WIRE)
        if len(self._answered) > 65536:
            self._answered.clear()
        self._answered[(addr, cookie)] = out
        self.passed.append((body, reply, time.time()))
        self._send(sock, out, addr)

    def _resend(self) -> None:
        now = time.monotonic()
        for ours, (sock, addr, cookie, body, sent, tries) in list(self._pending.items()):
            if now - sent < RESEND_S:
                continue
            if tries >= TRIES:
                del self._pending[ours]  # unanswered, as with a dead RTPProxy
                continue
            self._pending[ours] = (sock, addr, cookie, body, now, tries + 1)
            self._forward(ours, body)

    @staticmethod
    def _send(sock: socket.socket, data: bytes, addr: Any) -> None:
        with contextlib.suppress(OSError):  # the client's problem: it retransmits
            sock.sendto(data, addr)


def _env(setting: str) -> str | None:
    # The current name, else the former one (the settings warn about it when loaded).
    return os.environ.get(f"P4RELAY_RTPAGENT_{setting}", os.environ.get(f"RTPAGENT_{setting}"))


def settings_for(argv: Sequence[str]) -> tuple[list[str], str] | None:
    """`--listen` and `--rtpproxy` as the agent will read them (flags over
    P4RELAY_RTPAGENT_* over the TOML file over the defaults), without loading the
    settings library; None when the process will not relay (a one-shot
    command) or cannot tell."""
    if any(a in ("-h", "--help", "--check-config", "--show-ired") for a in argv):
        return None
    flags: dict[str, list[str]] = {}
    it = iter(argv)
    for a in it:
        name, eq, value = a.partition("=")
        if name in ("--listen", "--rtpproxy", "--config"):
            if not eq:
                value = next(it, "")
            flags.setdefault(name[2:], []).append(value)
    try:
        file: dict[str, Any] = {}
        if flags.get("config"):
            with open(flags["config"][-1], "rb") as fh:
                doc = tomllib.load(fh)
            file = doc.get("rtpagent", doc) if isinstance(doc.get("rtpagent", doc), dict) else {}
        listen: list[str] = (
            flags.get("listen")
            or (json.loads(env_listen) if (env_listen := _env("LISTEN")) is not None else None)
            or file.get("listen")
            or DEFAULT_LISTEN
        )
        rtpproxy = (
            (flags.get("rtpproxy") or [""])[-1]
            or _env("RTPPROXY")
            or file.get("rtpproxy")
            or DEFAULT_RTPPROXY
        )
    except (OSError, ValueError, tomllib.TOMLDecodeError):
        return None  # the settings' own errors are reported by the full load
    if not isinstance(listen, list) or not all(isinstance(x, str) for x in listen):
        return None
    if not isinstance(rtpproxy, str):
        return None
    return listen, rtpproxy


def start_from_argv(argv: Sequence[str]) -> EarlyRelay | None:
    """An EarlyRelay on the agent's datagram sockets, started; None if this
    run has none to offer (see the module doc) or a socket cannot be bound
    (the agent reports that itself once loaded)."""
    got = settings_for(argv)
    if got is None:
        return None
    try:
        listen = [parse_spec(s) for s in got[0]]
        up = parse_spec(got[1])
    except ValueError:
        return None
    if not listen or not all(s.datagram for s in listen) or not up.datagram:
        return None
    relay = EarlyRelay(listen, up)
    try:
        relay.start()
    except OSError:
        relay.close()
        return None
    # The logging library is not loaded yet: one JSON line, as the agent's own.
    print(
        json.dumps(
            {
                "event": "control_socket_open",
                "listen": got[0],
                "after_s": _since_process_start(),
                "level": "info",
            }
        ),
        file=sys.stderr,
        flush=True,
    )
    return relay


def _since_process_start() -> float | None:
    """Seconds since this process started (Linux /proc), None elsewhere."""
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return round(uptime - start_ticks / os.sysconf("SC_CLK_TCK"), 3)
