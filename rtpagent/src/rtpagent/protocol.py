"""RTPProxy control protocol: parse commands and replies, format replies.

The agent forwards every command to RTPProxy byte for byte (but for the
notify socket/tag of `U`, and the cookie, which is the agent's own), so this
parser only has to *understand* commands: it never rejects one on its own,
except what RTPProxy could not read either. Grammar and error codes follow
sippy/rtpproxy (`rtpp_command.c` rtpp_command_split, `rtpp_command_parse.c`,
`commands/rpcpv1_ul.c`, `rtpp_command_ecodes.h`).

Text is handled as Latin-1 (one character per byte, every byte value valid):
a command goes back out exactly as it came in, and only RTPProxy's own
separators (ASCII space, tab, CR, LF) separate words. Splitting on Unicode
whitespace (0x1c-0x1f, 0x85, NBSP) let a datagram that RTPProxy reads as one
word pass through as several, e.g. `f2\x1fX` (RTPProxy: `E5`) as `X`.
"""

from __future__ import annotations

import enum
import functools
import ipaddress
import re
from dataclasses import dataclass
from typing import NamedTuple
from urllib.parse import unquote_to_bytes

# Commands and replies are bytes on the wire; one str character per byte.
WIRE = "latin-1"
# RTPProxy reads a datagram into an 8 KiB buffer (RTPP_CMD_BUFLEN) less the
# terminating NUL: what is longer is cut there, and the rest is lost.
MAX_COMMAND_BYTES = 8 * 1024 - 1
# Room the agent needs for its own cookie in front of a forwarded command
# (`<10 hex>_<counter hex>` and a space).
COOKIE_ROOM = 32
# The longest command text the agent can forward whole: a longer one would be
# cut by RTPProxy at a different place than the sender's datagram was.
MAX_FORWARD_BYTES = MAX_COMMAND_BYTES - COOKIE_ROOM
# Replies can carry `I`/`G` output; RTPProxy never sends more than 64 KiB.
MAX_REPLY_BYTES = 64 * 1024
# rtpp_strsplit's separators: nothing else separates words.
SEPARATORS = " \t\r\n"
_SEP_RUN = re.compile(r"[ \t\r\n]+")
# A subcommand separator word (rtpp_command_split ISAMPAMP).
SUBCOMMAND = "&&"

# Error codes of rtpp_command_ecodes.h that the agent itself may answer with.
ECODE_CMDUNKN = 0
ECODE_PARSE_NARGS = 1
ECODE_PARSE_MODS = 2
ECODE_PARSE_SUBC = 3
ECODE_PARSE_1 = 5
ECODE_PARSE_4 = 8
ECODE_PARSE_10 = 10
ECODE_RTOOBIG_1 = 25
ECODE_SESUNKN = 50
ECODE_QRYFAIL = 62
ECODE_OVERLOAD = 98


def words(text: str) -> list[str]:
    """The words of `text` as RTPProxy splits them (ASCII space/tab/CR/LF only)."""
    if "\t" in text or "\r" in text or "\n" in text:
        return [w for w in _SEP_RUN.split(text) if w]
    return [w for w in text.split(" ") if w]  # spaces only: the common case, cheaper


class Op(enum.Enum):
    """Command verbs (the first letter(s) of the command word)."""

    VERSION = "V"
    VER_FEATURE = "VF"
    UPDATE = "U"
    LOOKUP = "L"
    DELETE = "D"
    QUERY = "Q"
    INFO = "I"
    GET_STATS = "G"
    RECORD = "R"
    COPY = "C"
    PLAY = "P"
    NOPLAY = "S"
    NORECORD = "N"
    DELETE_ALL = "X"
    UNKNOWN = "?"


# Minimum/maximum number of arguments after the command word, per op
# (fill_cmd_props). None: unbounded (RTPProxy's limit depends on its build).
_NARGS: dict[Op, tuple[int, int | None]] = {
    Op.VERSION: (0, 0),
    Op.VER_FEATURE: (1, 1),
    Op.UPDATE: (4, 7),
    Op.LOOKUP: (4, 5),
    Op.DELETE: (2, 3),
    Op.QUERY: (2, None),
    Op.INFO: (0, 0),
    Op.GET_STATS: (0, None),
    Op.RECORD: (2, 3),
    Op.COPY: (3, 4),
    Op.PLAY: (4, 5),
    Op.NOPLAY: (2, 3),
    Op.NORECORD: (2, 3),
    Op.DELETE_ALL: (0, 0),
}
# Commands that take no modifiers (RTPProxy answers E2).
_NO_MODS = (Op.VERSION, Op.VER_FEATURE, Op.NOPLAY, Op.DELETE_ALL)


class ProtocolError(ValueError):
    """A command the agent could not understand; `code` is RTPProxy's E code."""

    def __init__(self, code: int, reason: str, cookie: str = "") -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason
        self.cookie = cookie


@dataclass(frozen=True)
class ULOptions:
    """Modifiers of `U`/`L` (rpcpv1_ul.c: rtpp_command_ul_opts_parse)."""

    asymmetric: bool | None = None  # None: RTPProxy's default (-A)
    ipv6: bool = False
    weak: bool = False
    ptime: int | None = None  # `z<ms>`: repacketise -> stays on RTPProxy
    codecs: tuple[int, ...] = ()
    external: int = 0  # count of `e` modifiers (bridging mode)
    internal: int = 0  # count of `i` modifiers
    local_addr: str | None = None  # `l<addr>`
    remote_addr: str | None = None  # `r<addr>`
    new_port: bool = False


@dataclass(frozen=True)
class Command:
    """One parsed command, without its cookie."""

    op: Op
    word: str  # the command word as sent, modifiers included
    args: tuple[str, ...]
    modifiers: str = ""
    call_id: str | None = None
    from_tag: str | None = None
    to_tag: str | None = None
    addr: str | None = None  # U/L: SDP address
    port: str | None = None  # U/L: SDP port (string: RTPProxy resolves it)
    notify_socket: str | None = None  # U only
    # U only, as sent (URL-quoted). None with a notify_socket: a socket without
    # a tag (Kamailio's `timeout_socket`), which RTPProxy cannot take as sent.
    notify_tag: str | None = None
    ul: ULOptions | None = None
    parse_error: ProtocolError | None = None
    # Words after the first `&&` (subcommands): RTPProxy acts on them too,
    # so the agent does not act on the command at all.
    subcommands: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        return " ".join((self.word, *self.args, *self.subcommands))

    @property
    def understood(self) -> bool:
        """Parsed completely: the agent may act on RTPProxy's answer to it."""
        return self.parse_error is None and not self.subcommands


@dataclass(frozen=True)
class Datagram:
    """A command as received on a datagram socket: cookie + command text,
    the text exactly as sent (RTPProxy splits it again, the same way)."""

    cookie: str
    body: str


def split_cookie(data: bytes) -> Datagram:
    """Split `<cookie> <command>` as rtpp_command_split does; raises
    ProtocolError with RTPProxy's answer (`cookie` empty: answered without one)."""
    # RTPProxy reads at most MAX_COMMAND_BYTES of a datagram: the same cut here.
    text = data[:MAX_COMMAND_BYTES].decode(WIRE)
    head = text.lstrip(SEPARATORS)
    end = 0
    while end < len(head) and head[end] not in SEPARATORS:
        end += 1
    cookie = head[:end]
    if not cookie:
        raise ProtocolError(ECODE_PARSE_1, "datagram without cookie or command")
    if "\x00" in cookie:
        raise ProtocolError(ECODE_PARSE_1, "NUL inside the cookie")
    body = head[end:].lstrip(SEPARATORS)
    if not body.strip(SEPARATORS):
        raise ProtocolError(ECODE_PARSE_1, "command without body", cookie)
    if len(body) > MAX_FORWARD_BYTES:
        # Behind the agent's cookie RTPProxy would read a different command.
        raise ProtocolError(ECODE_RTOOBIG_1, f"command of {len(body)} bytes", cookie)
    return Datagram(cookie, body)


# Letter -> op, built once (iterating the Enum per command showed in profiles).
_OPS: dict[str, Op] = {
    op.value: op for op in Op if op not in (Op.VER_FEATURE, Op.UNKNOWN) and len(op.value) == 1
}


def _op_of(word: str) -> tuple[Op, str]:
    head = word[:1].upper()
    if head == "V":
        if word[1:2].upper() == "F":
            return Op.VER_FEATURE, word[2:]
        return Op.VERSION, word[1:]
    return _OPS.get(head, Op.UNKNOWN), word[1:]


def _parse_ul_modifiers(mods: str) -> ULOptions:
    asym: bool | None = None
    ipv6 = weak = new_port = False
    ptime: int | None = None
    codecs: tuple[int, ...] = ()
    ext = intl = 0
    laddr: str | None = None
    raddr: str | None = None
    i = 0
    n = len(mods)
    while i < n:
        c = mods[i].lower()
        i += 1
        if c == "a":
            asym = True
        elif c == "s":
            asym = False
        elif c == "6":
            ipv6 = True
        elif c == "w":
            weak = True
        elif c == "n":
            new_port = True
        elif c == "e":
            ext += 1
        elif c == "i":
            intl += 1
        elif c == "z":
            j = i
            while j < n and mods[j] in "0123456789":
                j += 1
            if j == i or not 0 < int(mods[i:j]) < 1000:
                raise ProtocolError(13, f"invalid ptime in modifiers {mods!r}")
            ptime = int(mods[i:j])
            i = j
        elif c == "c":
            j = i
            while j < n and mods[j] in "0123456789,":
                j += 1
            if j == i or codecs:
                raise ProtocolError(14, f"invalid codec list in modifiers {mods!r}")
            codecs = tuple(int(x) for x in mods[i:j].split(",") if x)
            i = j
        elif c in "lr":
            j, addr = _extract_addr(mods, i)
            if not addr:
                raise ProtocolError(15 if c == "l" else 16, f"invalid address in {mods!r}")
            if c == "l":
                laddr = addr
            else:
                raddr = addr
            i = j
        else:
            raise ProtocolError(35, f"unknown command modifier {mods[i - 1]!r}")
    if ext + intl > 2:
        raise ProtocolError(11, "more than two e/i modifiers")
    return ULOptions(asym, ipv6, weak, ptime, codecs, ext, intl, laddr, raddr, new_port)


# `U`/`L` without modifiers (most of them): one shared, immutable instance.
_NO_UL_OPTIONS = ULOptions()


def _extract_addr(mods: str, i: int) -> tuple[int, str]:
    """`l`/`r` take an address up to the next modifier letter (rtpp extractaddr)."""
    if i < len(mods) and mods[i] == "[":
        end = mods.find("]", i)
        if end < 0:
            return i, ""
        return end + 1, mods[i + 1 : end]
    j = i
    while j < len(mods) and mods[j] in "0123456789.:abcdefABCDEF":
        # IPv4 dotted quad; a bare IPv6 literal must be bracketed.
        if mods[j] in ":abcdefABCDEF" and "." in mods[i:j]:
            break
        if mods[j] in "abcdefABCDEF:":
            break
        j += 1
    return j, mods[i:j]


def parse_command(body: str) -> Command:
    """Parse a command body (cookie already removed). Never raises: a command
    the agent cannot understand is still forwarded, with `parse_error` set."""
    tokens = words(body)
    if not tokens:
        return Command(Op.UNKNOWN, "", (), parse_error=ProtocolError(ECODE_PARSE_1, "empty"))
    subc: tuple[str, ...] = ()
    if SUBCOMMAND in tokens:
        cut = tokens.index(SUBCOMMAND)
        subc = tuple(tokens[cut:])
        tokens = tokens[:cut]
        if not tokens:
            err = ProtocolError(ECODE_PARSE_1, "&&")
            return Command(Op.UNKNOWN, "", (), subcommands=subc, parse_error=err)
    word, args = tokens[0], tuple(tokens[1:])
    op, mods = _op_of(word)
    # Each Command is built once, complete (a frozen dataclass costs ~1.5 us to
    # build, and every command is parsed).
    problem = _syntax_error(op, word, args, mods, body)
    if problem is not None:
        return Command(op, word, args, mods, subcommands=subc, parse_error=problem)
    if op in (Op.VERSION, Op.VER_FEATURE, Op.INFO, Op.GET_STATS, Op.DELETE_ALL):
        return Command(op, word, args, mods, subcommands=subc)
    call_id = args[0]
    if op in (Op.UPDATE, Op.LOOKUP):
        return _parse_ul(op, word, call_id, args, mods, subc)
    if op is Op.COPY:  # C callid recording_name from_tag [to_tag]
        from_tag, to_tag = args[2], _opt(args, 3)
    elif op is Op.PLAY:  # P callid pname codecs from_tag [to_tag]
        from_tag, to_tag = args[3], _opt(args, 4)
    else:  # Q callid from_tag to_tag [counter names...]; D, R, S, N callid from_tag [to_tag]
        from_tag, to_tag = args[1], _opt(args, 2)
    return Command(op, word, args, mods, call_id, from_tag, to_tag, subcommands=subc)


def _syntax_error(
    op: Op, word: str, args: tuple[str, ...], mods: str, body: str
) -> ProtocolError | None:
    """What RTPProxy refuses before looking at the session, in its order."""
    if "\x00" in body:
        # rtpp_command_split: a NUL inside a word is a syntax error (NUL is no
        # separator: one in the text is inside some word).
        return ProtocolError(ECODE_PARSE_1, "NUL inside a word")
    if op is Op.UNKNOWN:
        return ProtocolError(ECODE_CMDUNKN, f"unknown command {word!r}")
    lo, hi = _NARGS[op]
    if len(args) < lo or (hi is not None and len(args) > hi):
        return ProtocolError(ECODE_PARSE_NARGS, f"{op.name}: {len(args)} arguments")
    if op in _NO_MODS and mods:
        return ProtocolError(ECODE_PARSE_MODS, f"{op.name} takes no modifiers")
    if op is Op.DELETE and mods.strip("wW"):
        return ProtocolError(ECODE_PARSE_4, f"unknown delete modifier in {mods!r}")
    return None


def notify_socket_form(word: str) -> bool:
    """`word` is written as RTPProxy's notify sockets are (its `-n` list,
    rtpp_tnotify_set.c parse_timeout_sock): `unix:<path>` or
    `tcp:<host>:<port>`, port 1-65535. (RTPProxy also takes a bare path for
    an old `unix:` entry; a bare word cannot be told from a tag.)"""
    if word.startswith("unix:"):
        return len(word) > 5
    if not word.startswith("tcp:"):
        return False
    host, sep, port = word[4:].rpartition(":")
    return bool(sep and host and port.isascii() and port.isdigit() and 0 < int(port) <= 65535)


def _parse_ul(
    op: Op, word: str, call_id: str, args: tuple[str, ...], mods: str, subc: tuple[str, ...]
) -> Command:
    # U callid addr port from_tag [to_tag] [notify_socket notify_tag]
    # L callid addr port from_tag to_tag
    to_tag = _opt(args, 4)
    nsock = ntag = None
    if op is Op.UPDATE and len(args) == 7:
        nsock, ntag = args[5], args[6]
    elif op is Op.UPDATE and len(args) == 6:
        if notify_socket_form(args[5]) and not notify_socket_form(args[4]):
            # `from_tag to_tag notify_socket`, no tag: what Kamailio's rtpproxy
            # module (up to 5.6, `timeout_socket`) sends on a U with a to-tag.
            # RTPProxy would take the to-tag for the socket and the socket for
            # the tag, drop the to-tag and open a second session for the
            # callee's re-INVITE; the agent reads what was meant and forwards
            # it in a form RTPProxy reads the same way (`forward_text`).
            nsock = args[5]
        else:
            nsock, ntag, to_tag = args[4], args[5], None
    try:
        ul = _parse_ul_modifiers(mods) if mods else _NO_UL_OPTIONS
    except ProtocolError as exc:
        return Command(
            op, word, args, mods, call_id, args[3], to_tag, subcommands=subc, parse_error=exc
        )
    if ntag is not None and not _url_quoted(ntag):
        # RTPProxy refuses it (E10); the agent must not replace it with its own.
        err = ProtocolError(ECODE_PARSE_10, "notify tag quoting")
        return Command(
            op, word, args, mods, call_id, args[3], to_tag, subcommands=subc, parse_error=err
        )
    return Command(
        op,
        word,
        args,
        mods,
        call_id=call_id,
        from_tag=args[3],
        to_tag=to_tag,
        addr=args[1],
        port=args[2],
        notify_socket=nsock,
        notify_tag=ntag,
        ul=ul,
        subcommands=subc,
    )


def _opt(args: tuple[str, ...], i: int) -> str | None:
    return args[i] if len(args) > i else None


_QUOTED = re.compile(r"(?:[^%]|%[0-9A-Fa-f]{2})*")


def _url_quoted(tag: str) -> bool:
    """url_unquote succeeds: every `%` starts a two-digit hex escape."""
    return _QUOTED.fullmatch(tag) is not None


def with_notify(c: Command, socket: str | None, tag: str | None) -> str:
    """The command text with its notify socket/tag replaced (U only); None:
    without one. Words joined by one space: RTPProxy splits them back into
    the same words."""
    args = list(c.args)
    if socket is None or tag is None:
        del args[5 if c.to_tag is not None else 4 :]
    elif len(args) == 7 or (len(args) == 6 and c.to_tag is not None):
        args[5:] = [socket, tag]
    elif len(args) == 6:
        args[4], args[5] = socket, tag
    elif c.to_tag is not None:
        args[5:] = [socket, tag]
    else:
        args[4:] = [socket, tag]
    return " ".join((c.word, *args, *c.subcommands))


def unquote_tag(tag: str) -> str:
    """RTPProxy URL-unquotes the notify tag before sending it back (bytes)."""
    return unquote_to_bytes(tag.encode(WIRE)).decode(WIRE)


# ---------------------------------------------------------------- replies


class Reply(NamedTuple):
    """A parsed reply body (cookie removed). A named tuple: every reply is
    parsed, and it builds in a third of a frozen dataclass's time."""

    text: str
    error: int | None = None
    port: int | None = None  # U/L: allocated port (0: L found nothing)
    addr: str | None = None  # U/L: relay address, when given
    ipv6: bool = False
    numbers: tuple[int, ...] = ()

    @property
    def ok(self) -> bool:
        return self.error is None


def parse_reply(body: str) -> Reply:
    """Parse a reply body. Unknown shapes come back as text only."""
    text = body.rstrip("\r\n\x00")
    first = text.split(" && ", 1)[0]  # subcommand results follow ` && `
    tokens = words(first)
    if (
        len(tokens) == 1
        and tokens[0][:1] == "E"
        and (tokens[0][1:].isascii() and tokens[0][1:].isdigit())
    ):
        return Reply(text, error=int(tokens[0][1:]))
    nums: list[int] = []
    for t in tokens:
        digits = t.lstrip("-")
        if digits.isascii() and digits.isdigit():
            nums.append(int(t))
        else:
            break
    port = nums[0] if tokens and nums and 0 <= nums[0] <= 65535 else None
    addr = None
    v6 = False
    if port is not None and len(tokens) >= 2 and len(nums) == 1 and _is_address(tokens[1]):
        addr = tokens[1]
        v6 = (len(tokens) >= 3 and tokens[2] == "6") or ":" in tokens[1]
    return Reply(text, port=port, addr=addr, ipv6=v6, numbers=tuple(nums))


@functools.lru_cache(maxsize=4096)
def _is_address(text: str) -> bool:
    """An IP address? RTPProxy answers with its few relay addresses: cached."""
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def error_reply(code: int) -> str:
    return f"E{code}\n"
