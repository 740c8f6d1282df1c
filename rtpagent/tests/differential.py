"""Differential fuzzing of the control path: the same datagrams go to one
RTPProxy directly and to another through the agent (both the real rtp.io
engine, same flags); every reply must be of the same class (the same `E<n>`,
or both a success), echo the same cookie bytes, and the agent may not hold a
session, or a switch entry, that its RTPProxy does not hold.

The corpus is generated from a seed: well-formed commands on a few calls
(so sessions collide), mutated with the bytes that separate words in other
grammars (0x1c-0x1f, NEL, NBSP, vertical tab, form feed), NULs, `&&`, bad
URL quoting, high bytes, cut words and swapped letters, plus datagrams built
to smuggle a `X` (delete all) past a parser that splits differently.
Shared by the test (a bounded corpus) and the benchmark (a long one).
"""

from __future__ import annotations

import asyncio
import random
import socket
import time
from dataclasses import dataclass, field

from rtpagent.protocol import MAX_FORWARD_BYTES

# Bytes that some parser somewhere treats as whitespace, and RTPProxy does not.
CONFUSABLE = [b"\x1c", b"\x1d", b"\x1e", b"\x1f", b"\x85", b"\xa0", b"\xc2\xa0", b"\x0b", b"\x0c"]
# Bytes RTPProxy itself treats specially.
SPECIAL = [b" ", b"\t", b"\r", b"\n", b"\x00", b"&&", b" && ", b"%", b"%zz", b"%4", b"+"]
OTHER = [b"\xff", b"\xe9", b"\x01", b"\x7f", b";", b";2", b":", b"[", b"]", b"-", b"0"]


def _calls(rng: random.Random) -> bytes:
    return rng.choice([b"c1", b"c2", b"c3", b"call-4@h", b"c5"])


def _tag(rng: random.Random) -> bytes:
    return rng.choice([b"f;1", b"f", b"t;1", b"t", b"f;2", b"g;1"])


def _addr(rng: random.Random) -> bytes:
    return rng.choice(
        [b"198.18.1.10", b"198.18.2.10", b"0.0.0.0", b"10.0.0.7", b"::1", b"1.2.3.999", b"x"]
    )


def _port(rng: random.Random) -> bytes:
    return rng.choice([b"6000", b"7000", b"0", b"65535", b"70000", b"-1", b"6a"])


def _mods(rng: random.Random, base: bytes) -> bytes:
    return base + rng.choice([b"", b"", b"a", b"s", b"w", b"c0,8", b"z20", b"x", b"e", b"6", b"n"])


def well_formed(rng: random.Random) -> bytes:
    c, f, t = _calls(rng), _tag(rng), _tag(rng)
    k = rng.randrange(20)
    if k < 6:
        tail = b""
        r = rng.random()
        if r < 0.3:
            tail = b" " + t
        elif r < 0.4:
            tail = b" tcp:127.0.0.1:9 n%41"
        elif r < 0.5:
            tail = b" " + t + b" tcp:127.0.0.1:9 dlg"
        return b" ".join((_mods(rng, b"U"), c, _addr(rng), _port(rng), f)) + tail
    if k < 10:
        return b" ".join((_mods(rng, b"L"), c, _addr(rng), _port(rng), f, t))
    if k < 13:
        return b" ".join((rng.choice([b"D", b"Dw"]), c, f, t))
    if k < 15:
        return b" ".join((rng.choice([b"Q", b"Qv"]), c, f, t))
    return rng.choice(
        [
            b"V",
            b"VF 20081224",
            b"I",
            b"Ib",
            b"G nsess_created",
            b"R " + c + b" " + f,
            b"S " + c + b" " + f + b" " + t,
            b"N " + c + b" " + f,
            b"C " + c + b" rec " + f,
        ]
    )


def mutate(rng: random.Random, cmd: bytes) -> bytes:
    b = bytearray(cmd)
    for _ in range(rng.randrange(1, 4)):
        op = rng.randrange(5)
        pos = rng.randrange(len(b) + 1)
        if op == 0:  # insert a confusable or special byte
            b[pos:pos] = rng.choice(CONFUSABLE + SPECIAL + OTHER)
        elif op == 1 and b:  # replace a separator by a confusable
            spaces = [i for i, ch in enumerate(b) if ch == 0x20]
            if spaces:
                i = rng.choice(spaces)
                b[i : i + 1] = rng.choice(CONFUSABLE)
        elif op == 2 and b:  # cut
            del b[pos : pos + rng.randrange(1, 4)]
        elif op == 3:  # flip case of a letter
            if pos < len(b) and chr(b[pos]).isalpha():
                b[pos] ^= 0x20
        else:  # append a smuggled command
            b += rng.choice([*CONFUSABLE, b"\x00", b" && "]) + rng.choice([b"X", b"D c1 f;1"])
    return bytes(b)


def smuggling(rng: random.Random, cookie: bytes) -> bytes:
    """Datagrams that are `X` only to a parser splitting on more than RTPProxy."""
    sep = rng.choice(CONFUSABLE)
    return rng.choice(
        [
            cookie + sep + b"X",
            cookie + b" " + rng.choice([b"f2", b"V", b"I"]) + sep + b"X",
            cookie + sep + b"X" + sep,
            cookie + b"\x00 X",
            cookie + b" X\x00",
            cookie + b" X" + sep,
            cookie + b" " + sep + b"X",
            cookie + b" D" + sep + b"c1 f;1",
        ]
    )


def corpus(seed: int, n: int, reset_every: int = 400) -> list[bytes]:
    """`n` datagrams; each carries a cookie unique in the corpus (RTPProxy
    answers a repeated cookie from its cache, the agent from its own). Every
    `reset_every`-th is a plain `X`: mutated tags create sessions without end,
    and an RTPProxy out of ports or descriptors (E71/E72) answers by chance."""
    rng = random.Random(seed)
    out: list[bytes] = []
    for i in range(n):
        cookie = b"k%x" % i
        r = rng.random()
        if i % reset_every == reset_every - 1 and i < n - reset_every // 2:
            d = cookie + b" X"
        elif r < 0.35:
            d = cookie + b" " + well_formed(rng)
        elif r < 0.85:
            d = cookie + b" " + mutate(rng, well_formed(rng))
        elif r < 0.97:
            d = smuggling(rng, cookie)
        else:
            d = rng.choice([cookie, cookie + b" ", b"", b" \t", cookie + b"\x1f", b"\x00"])
        out.append(d[:MAX_FORWARD_BYTES])
    return out


def reply_class(reply: bytes | None) -> tuple[bytes, str]:
    """(cookie part, class): class is `E<n>`, `ok`, or `none` (no answer)."""
    if reply is None:
        return b"", "none"
    body = reply
    head = b""
    # RTPProxy's reply: `<cookie> <answer>` or, without a cookie, `E5\n`.
    if not (reply[:1] == b"E" and reply[1:].rstrip(b"\n").isdigit()):
        head, _, body = reply.partition(b" ")
    first = body.split(b" && ", 1)[0].strip()
    if first[:1] == b"E" and first[1:].isdigit():
        return head, first.decode()
    return head, "ok"


@dataclass
class Mismatch:
    datagram: bytes
    direct: bytes | None
    agent: bytes | None


@dataclass
class Result:
    sent: int = 0
    classes: dict[str, int] = field(default_factory=dict)
    mismatches: list[Mismatch] = field(default_factory=list)
    seconds: float = 0.0


class Peer:
    """A UDP client of one control socket, one datagram at a time."""

    def __init__(self, port: int) -> None:
        self.addr = ("127.0.0.1", port)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setblocking(False)

    async def ask(self, data: bytes, wait: float) -> bytes | None:
        loop = asyncio.get_running_loop()
        while True:  # drop late answers to earlier datagrams
            try:
                self.sock.recv(70000)
            except BlockingIOError:
                break
        await loop.sock_sendto(self.sock, data, self.addr)
        try:
            return await asyncio.wait_for(loop.sock_recv(self.sock, 70000), wait)
        except TimeoutError:
            return None

    def close(self) -> None:
        self.sock.close()


async def run(
    datagrams: list[bytes], direct_port: int, agent_port: int, wait: float = 1.0
) -> Result:
    """Send each datagram to RTPProxy directly and through the agent; compare."""
    direct, agent = Peer(direct_port), Peer(agent_port)
    res = Result()
    t0 = time.monotonic()
    try:
        for d in datagrams:
            a = await direct.ask(d, wait)
            b = await agent.ask(d, wait)
            res.sent += 1
            ca, cb = reply_class(a), reply_class(b)
            res.classes[ca[1]] = res.classes.get(ca[1], 0) + 1
            if ca != cb:
                res.mismatches.append(Mismatch(d, a, b))
    finally:
        direct.close()
        agent.close()
    res.seconds = time.monotonic() - t0
    return res


def active_sessions(info: bytes | None) -> int:
    """`active sessions: N` of an `I` reply."""
    assert info is not None
    for line in info.split(b"\n"):
        if b"active sessions:" in line:
            return int(line.rsplit(b":", 1)[1])
    raise AssertionError(f"no session count in {info!r}")


async def ask_once(port: int, data: bytes, wait: float = 2.0) -> bytes | None:
    p = Peer(port)
    try:
        return await p.ask(data, wait)
    finally:
        p.close()
