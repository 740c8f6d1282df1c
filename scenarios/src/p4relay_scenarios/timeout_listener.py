"""Kamailio's media-timeout listener: RTPProxy says a call's media stopped, we end it.

OpenSIPS has this built in (`rtpp_notify_socket`); Kamailio's rtpproxy module
does not (its `timeout_socket` is unset: see kamailio.cfg), so rtpagent's
`--sip-notify` names this process (TCP, README's `127.0.0.1:22225`). It
reads one notification per line and ends the
matching dialog over Kamailio's JSON-RPC control socket (jsonrpcs, unix
datagram): `dlg.list` to find it by Call-ID, then `dlg.end_dlg`, which sends
BYE both ways. Those BYEs come from the dialog module and never pass the
script's request route, so the listener also deletes the media session itself
(`D` to the rtpproxy socket Kamailio uses, i.e. rtpagent, which then removes
the switch entries).

A notification line is the session's notify tag. Accepted forms:
  `<hex call-id>.<hex from-tag>` (Kamailio timeout_tag_pv with s.encode.hexa),
  `<call-id> [<from-tag> [<to-tag>]]` (space separated, as rtpagent forwards).
Anything else is logged and counted, never silently dropped.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import socket
import tempfile
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("p4relay.timeout_listener")


@dataclass(frozen=True)
class Notification:
    call_id: str
    from_tag: str | None = None


def parse_notification(line: str) -> Notification | None:
    line = line.strip()
    if not line or len(line) > 4096:
        return None
    parts = line.split()
    if len(parts) == 1 and "." in line:
        a, _, b = line.partition(".")
        try:
            return Notification(bytes.fromhex(a).decode(), bytes.fromhex(b).decode() or None)
        except (ValueError, UnicodeDecodeError):
            pass  # not hex: a plain Call-ID that contains a dot
    return Notification(parts[0], parts[1] if len(parts) > 1 else None)


class KamailioRpc:
    """JSON-RPC over Kamailio's jsonrpcs datagram socket."""

    def __init__(self, path: str, timeout_s: float = 3.0) -> None:
        self.path = path
        self.timeout_s = timeout_s
        self._id = 0

    def call(self, method: str, *params: Any) -> Any:
        self._id += 1
        req = {"jsonrpc": "2.0", "method": method, "params": list(params), "id": self._id}
        with tempfile.TemporaryDirectory(prefix="p4r-rpc-") as d:
            reply_path = os.path.join(d, "reply.sock")
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
                s.bind(reply_path)
                s.settimeout(self.timeout_s)
                s.sendto(json.dumps(req).encode(), self.path)
                chunks = [s.recv(65536)]
                # Large replies come in several datagrams; read until the JSON parses.
                while True:
                    try:
                        resp = json.loads(b"".join(chunks))
                        break
                    except json.JSONDecodeError:
                        chunks.append(s.recv(65536))
        if "error" in resp:
            raise RuntimeError(f"{method}: {resp['error']}")
        return resp.get("result")

    def find_dialog(self, n: Notification) -> dict[str, Any] | None:
        dialogs = self.call("dlg.list") or []
        for d in dialogs:
            if d.get("call-id") != n.call_id:
                continue
            caller_tag = (d.get("caller") or {}).get("tag")
            if n.from_tag and caller_tag not in (None, n.from_tag):
                continue
            return dict(d)
        return None

    def end(self, n: Notification) -> dict[str, Any] | None:
        """End the dialog; returns it (None: no such dialog)."""
        d = self.find_dialog(n)
        if d is None:
            return None
        self.call("dlg.end_dlg", int(d["h_entry"]), int(d["h_id"]))
        return d


def rtpproxy_delete(sock: str, call_id: str, from_tag: str, to_tag: str | None) -> str:
    """`D` one session on an rtpproxy control socket (udp:HOST:PORT); returns the reply."""
    host, _, port = sock.removeprefix("udp:").rpartition(":")
    cookie = os.urandom(6).hex()
    cmd = f"{cookie} D {call_id} {from_tag}" + (f" {to_tag}" if to_tag else "")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(3.0)
        s.sendto(cmd.encode(), (host, int(port)))
        reply = s.recv(4096).decode(errors="replace").strip()
    return reply.removeprefix(cookie).strip()


class Listener:
    def __init__(self, rpc: KamailioRpc, rtpproxy: str | None = None) -> None:
        self.rpc = rpc
        self.rtpproxy = rtpproxy
        self.ended = 0
        self.unknown = 0
        self.malformed = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        try:
            while line := await reader.readline():
                text = line.decode(errors="replace")
                n = parse_notification(text)
                if n is None:
                    self.malformed += 1
                    log.warning("malformed timeout notification from %s: %r", peer, text[:200])
                    continue
                try:
                    d = await asyncio.to_thread(self.rpc.end, n)
                except (OSError, RuntimeError) as exc:
                    log.error("cannot end dialog %s over RPC: %s", n.call_id, exc)
                    continue
                if d is not None:
                    self.ended += 1
                    log.info("media timeout: ended dialog call-id=%s", n.call_id)
                    await self.delete_media(n, d)
                else:
                    self.unknown += 1
                    log.warning("media timeout for unknown dialog call-id=%s", n.call_id)
        finally:
            writer.close()

    async def delete_media(self, n: Notification, d: dict[str, Any]) -> None:
        if not self.rtpproxy:
            return
        from_tag = (d.get("caller") or {}).get("tag") or n.from_tag
        to_tag = (d.get("callee") or {}).get("tag") or None
        if not from_tag:
            return
        try:
            reply = await asyncio.to_thread(
                rtpproxy_delete, self.rtpproxy, n.call_id, from_tag, to_tag
            )
            log.info("media session deleted call-id=%s reply=%s", n.call_id, reply)
        except OSError as exc:
            log.error("cannot delete media session %s: %s", n.call_id, exc)


async def serve(listen: str, rpc_path: str, rtpproxy: str | None) -> None:
    host, _, port = listen.removeprefix("tcp:").rpartition(":")
    listener = Listener(KamailioRpc(rpc_path), rtpproxy)
    server = await asyncio.start_server(listener.handle, host, int(port))
    log.info("listening on tcp:%s:%s, Kamailio RPC at %s", host, port, rpc_path)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="p4relay-timeout-listener",
        description="End Kamailio dialogs whose media timed out in RTPProxy.",
    )
    p.add_argument("--listen", default="tcp:127.0.0.1:22225", help="Kamailio's timeout_socket")
    p.add_argument("--rpc", required=True, help="Kamailio jsonrpcs dgram_socket path")
    p.add_argument(
        "--rtpproxy",
        default="udp:127.0.0.1:22222",
        help="the rtpproxy socket Kamailio uses (rtpagent), for the media delete; '' for none",
    )
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.listen, args.rpc, args.rtpproxy or None))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
