"""Parsers: known shapes and fuzzing (hypothesis, bounded)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rtpagent.protocol import (
    MAX_COMMAND_BYTES,
    MAX_FORWARD_BYTES,
    WIRE,
    Op,
    ProtocolError,
    parse_command,
    parse_reply,
    split_cookie,
    unquote_tag,
    with_notify,
    words,
)
from rtpagent.sockets import parse_spec
from rtpagent.state import Session, SessionTable, compare_tags


def test_update_with_everything() -> None:
    c = parse_command("Uac0,8,101z20e cid 198.18.1.10 6000 ft;1 tt;1 tcp:127.0.0.1:22225 a%20b")
    assert c.op is Op.UPDATE and c.parse_error is None
    assert c.ul is not None and c.ul.asymmetric and c.ul.codecs == (0, 8, 101) and c.ul.ptime == 20
    assert c.ul.external == 1
    assert (c.call_id, c.from_tag, c.to_tag) == ("cid", "ft;1", "tt;1")
    assert (c.notify_socket, c.notify_tag) == ("tcp:127.0.0.1:22225", "a%20b")
    assert with_notify(c, "tcp:127.0.0.1:22224", "x") == (
        "Uac0,8,101z20e cid 198.18.1.10 6000 ft;1 tt;1 tcp:127.0.0.1:22224 x"
    )


def test_update_notify_without_to_tag() -> None:
    c = parse_command("U cid 1.2.3.4 5000 ft unix:/tmp/s tag")
    assert c.to_tag is None and c.notify_socket == "unix:/tmp/s" and c.notify_tag == "tag"


def test_update_notify_socket_without_tag() -> None:
    """Kamailio's rtpproxy module (timeout_socket, up to 5.6) on a U with a
    to-tag: `from_tag to_tag socket`, no tag. Read as meant, sent on in a
    form RTPProxy reads the same way (rpcpv1_ul.c: 8 words, or 6)."""
    body = "Uc0,8 cid 198.18.2.10 7002 tt;1 ft;1 tcp:127.0.0.1:22225"
    c = parse_command(body)
    assert c.parse_error is None
    assert (c.from_tag, c.to_tag) == ("tt;1", "ft;1")
    assert (c.notify_socket, c.notify_tag) == ("tcp:127.0.0.1:22225", None)
    assert (c.addr, c.port) == ("198.18.2.10", "7002")
    sent = with_notify(c, "tcp:127.0.0.1:22224", "p4r_1")
    assert sent == "Uc0,8 cid 198.18.2.10 7002 tt;1 ft;1 tcp:127.0.0.1:22224 p4r_1"
    again = parse_command(sent)
    assert (again.from_tag, again.to_tag, again.notify_tag) == ("tt;1", "ft;1", "p4r_1")
    bare = with_notify(c, None, None)
    assert bare == "Uc0,8 cid 198.18.2.10 7002 tt;1 ft;1"
    assert parse_command(bare).to_tag == "ft;1" and parse_command(bare).notify_socket is None
    unix = parse_command("U cid 1.2.3.4 5000 ft tt unix:/run/k.sock")
    assert (unix.to_tag, unix.notify_socket, unix.notify_tag) == ("tt", "unix:/run/k.sock", None)


@pytest.mark.parametrize(
    ("args", "expect"),
    [
        # RTPProxy's own reading: `from_tag socket tag` (a 7-word U).
        ("ft tcp:127.0.0.1:22225 tag", (None, "tcp:127.0.0.1:22225", "tag")),
        ("ft unix:/s unix:/t", (None, "unix:/s", "unix:/t")),
        # The last word is no socket RTPProxy's -n takes: RTPProxy's reading.
        ("ft tt tcp:127.0.0.1:0", (None, "tt", "tcp:127.0.0.1:0")),
        ("ft tt tcp:127.0.0.1:70000", (None, "tt", "tcp:127.0.0.1:70000")),
        ("ft tt tcp::5", (None, "tt", "tcp::5")),
        ("ft tt unix:", (None, "tt", "unix:")),
        ("ft tt /run/k.sock", (None, "tt", "/run/k.sock")),
        # A socket and no tag after a to-tag.
        ("ft tt tcp:localhost:22225", ("tt", "tcp:localhost:22225", None)),
    ],
)
def test_update_six_words_readings(args: str, expect: tuple[str | None, ...]) -> None:
    c = parse_command(f"U cid 1.2.3.4 5000 {args}")
    assert c.parse_error is None
    assert (c.to_tag, c.notify_socket, c.notify_tag) == expect


@pytest.mark.parametrize(
    ("body", "op", "code"),
    [
        ("", Op.UNKNOWN, 5),
        ("Y x", Op.UNKNOWN, 0),
        ("U", Op.UPDATE, 1),
        ("Ux c 1.2.3.4 5 f", Op.UPDATE, 35),
        ("Uz c 1.2.3.4 5 f", Op.UPDATE, 13),
        ("Uz1000 c 1.2.3.4 5 f", Op.UPDATE, 13),
        ("Uc c 1.2.3.4 5 f", Op.UPDATE, 14),
        ("D c", Op.DELETE, 1),
        ("V x", Op.VERSION, 1),
    ],
)
def test_malformed_commands(body: str, op: Op, code: int) -> None:
    c = parse_command(body)
    assert c.op is op
    assert c.parse_error is not None and c.parse_error.code == code


def test_other_commands() -> None:
    assert parse_command("VF 20081224").op is Op.VER_FEATURE
    assert parse_command("V").op is Op.VERSION
    q = parse_command("Qv cid f t ttl npkts_ina")
    assert q.op is Op.QUERY and q.to_tag == "t" and q.modifiers == "v"
    p = parse_command("P3 cid prompt 0,8 f t")
    assert p.op is Op.PLAY and p.from_tag == "f" and p.to_tag == "t"
    assert parse_command("C cid rec f t").from_tag == "f"
    assert parse_command("X").op is Op.DELETE_ALL
    assert parse_command("Ib").op is Op.INFO


def test_replies() -> None:
    r = parse_reply("35000 198.18.0.10\n")
    assert r.ok and r.port == 35000 and r.addr == "198.18.0.10" and not r.ipv6
    assert parse_reply("35000 ::1 6\n").ipv6
    assert parse_reply("E50\n").error == 50
    assert parse_reply("0\n").port == 0
    assert parse_reply("35000 127.0.0.1 && 0\n").port == 35000


def test_cookie_split() -> None:
    d = split_cookie(b"abc U c 1.2.3.4 5 f\n")
    assert d.cookie == "abc" and d.body == "U c 1.2.3.4 5 f\n"  # as sent: RTPProxy splits it
    with pytest.raises(ProtocolError) as e:
        split_cookie(b"justcookie")
    assert e.value.code == 5 and e.value.cookie == "justcookie"
    with pytest.raises(ProtocolError) as e:
        split_cookie(b"big " + b"x" * MAX_COMMAND_BYTES)
    assert e.value.code == 25 and e.value.cookie == "big"


@pytest.mark.parametrize(
    "sep", ["\x1c", "\x1d", "\x1e", "\x1f", "\x85", "\xa0", "\x0b", "\x0c", "\xc2\xa0"]
)
def test_only_rtpproxys_separators_split(sep: str) -> None:
    """RTPProxy splits on space, tab, CR, LF only: anything else is part of a word."""
    assert words(f"f2{sep}X") == [f"f2{sep}X"]
    with pytest.raises(ProtocolError) as e:
        split_cookie(f"f2{sep}X".encode(WIRE))
    assert e.value.code == 5 and e.value.cookie == f"f2{sep}X"
    d = split_cookie(f"ck V{sep}X".encode(WIRE))
    c = parse_command(d.body)
    assert c.op is Op.VERSION and c.word == f"V{sep}X" and c.parse_error is not None
    assert parse_command(f"U c 1.2.3.4 5000 f{sep}X").from_tag == f"f{sep}X"


def test_datagram_as_rtpproxy_reads_it() -> None:
    d = split_cookie(b"ck\t\r\nU  c\t1.2.3.4 5000 f\xff\r\n")
    assert d.cookie == "ck" and d.body.encode(WIRE) == b"U  c\t1.2.3.4 5000 f\xff\r\n"
    assert parse_command(d.body).from_tag == "f\xff"
    for data, cookie in (
        (b"", ""),
        (b" \t", ""),
        (b"c\x00k V", ""),
        (b"ck", "ck"),
        (b"ck \r\n", "ck"),
    ):
        with pytest.raises(ProtocolError) as e:
            split_cookie(data)
        assert (e.value.code, e.value.cookie) == (5, cookie)
    # Longer than RTPProxy reads: cut where RTPProxy cuts it.
    d = split_cookie(b"a" * 40 + b" V " + b" " * MAX_COMMAND_BYTES + b"X")
    assert words(d.body) == ["V"]
    with pytest.raises(ProtocolError) as e:  # no room for the agent's cookie
        split_cookie(b"c V " + b"x" * MAX_FORWARD_BYTES)
    assert e.value.code == 25


def test_nul_subcommands_and_quoting_are_left_to_rtpproxy() -> None:
    assert parse_command("X\x00").parse_error is not None
    assert parse_command("U c 1.2.3.4 5000 f\x00").parse_error is not None
    c = parse_command("U c 1.2.3.4 5000 f && S 1")
    assert c.op is Op.UPDATE and c.parse_error is None and not c.understood
    assert c.subcommands == ("&&", "S", "1")
    n = parse_command("U c 1.2.3.4 5000 f t tcp:127.0.0.1:9 a&&b && S 1")
    assert with_notify(n, "tcp:1.1.1.1:1", "x").endswith("tcp:1.1.1.1:1 x && S 1")
    bad = parse_command("U c 1.2.3.4 5000 f t tcp:127.0.0.1:9 %zz")
    assert bad.parse_error is not None and bad.parse_error.code == 10
    assert parse_command("Xx").parse_error is not None
    assert parse_command("Dq c f").parse_error is not None
    assert unquote_tag("a%20b%FF") == "a b\xff"


def test_specs() -> None:
    assert str(parse_spec("udp:127.0.0.1:22222")) == "udp:127.0.0.1:22222"
    assert parse_spec("udp6:[::1]:22222").host == "::1"
    assert parse_spec("unix:/run/rtpproxy.sock").path == "/run/rtpproxy.sock"
    for bad in (
        "udp:127.0.0.1",
        "udp:host:1",
        "udp6:127.0.0.1:5",
        "tcp:1.2.3.4:70000",
        "ftp:x",
        "unix:",
    ):
        with pytest.raises(ValueError):
            parse_spec(bad)


def test_tag_matching() -> None:
    assert compare_tags("ft;1", "ft;1") == 1
    assert compare_tags("ft;1", "ft") == 2
    assert compare_tags("ft;1", "other") == 0
    assert compare_tags("f;2\x1cD", "f") == 2  # what follows `;` is not checked
    assert compare_tags("a;b;1", "a") == 2
    assert compare_tags("ftx", "ft") == 0
    t = SessionTable()
    s = Session("cid", "ft;1", to_tag="tt;1")
    t.add(s)
    assert t.find_stream("cid", "ft;1", None) == (s, 0)
    assert t.find_stream("cid", "tt;1", "ft;1") == (s, 1)
    assert t.find_stream("cid", "tt;1", "ft") == (s, 1)  # medianum taken from the from-tag
    assert t.find_stream("cid", "tt", "ft") is None
    assert [x for x, _, _ in t.matching_delete("cid", "ft", "tt")] == [s]


TOKENS = st.sampled_from(
    [
        "U",
        "L",
        "D",
        "Q",
        "V",
        "VF",
        "I",
        "G",
        "R",
        "C",
        "P",
        "S",
        "N",
        "X",
        "Uac0,8z20",
        "Lc",
        "Dw",
        "cid",
        "1.2.3.4",
        "::1",
        "0.0.0.0",
        "6000",
        "99999",
        "-1",
        "ft;1",
        "tt;1",
        "tcp:127.0.0.1:1",
        "unix:/x",
        "%zz",
        "&&",
        "\t",
        "é",
        "\x00",
    ]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(TOKENS | st.text(max_size=12), max_size=10))
def test_fuzz_command_never_raises(tokens: list[str]) -> None:
    c = parse_command(" ".join(tokens))
    assert isinstance(c.op, Op)
    # Round trip: what the agent would send again parses to the same command.
    again = parse_command(c.text)
    assert (again.op, again.word, again.args, again.subcommands) == (
        c.op,
        c.word,
        c.args,
        c.subcommands,
    )
    assert (again.call_id, again.from_tag, again.to_tag) == (c.call_id, c.from_tag, c.to_tag)
    assert words(c.text) == words(" ".join(tokens))
    if c.op is Op.UPDATE and c.parse_error is None and c.notify_socket is not None:
        assert with_notify(c, "tcp:127.0.0.1:1", "t").split()[0] == c.word


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=300))
def test_fuzz_datagram(data: bytes) -> None:
    try:
        d = split_cookie(data)
    except ProtocolError as e:
        assert e.code in (5, 25)
        return
    # What goes on to RTPProxy is the sender's words after the cookie, unsplit.
    sent = data.decode(WIRE)
    assert words(sent) == [d.cookie, *words(d.body)]
    assert sent.endswith(d.body)
    parse_command(d.body)


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=200))
def test_fuzz_reply(text: str) -> None:
    r = parse_reply(text)
    assert r.port is None or 0 <= r.port <= 65535
