"""Schema resolution and value encoding, on the softswitch's real bfrt.json."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st
from p4relay_switch import EncodeError, Lpm, Range, Schema, SchemaError, Ternary, codec
from p4relay_switch import pipeline as pl
from p4relay_switch.proto import bfruntime_pb2 as pb
from p4relay_switch.schema import FieldInfo
from p4relay_testsupport import dump_softswitch as dump


@pytest.fixture(scope="module")
def schema() -> Schema:
    return Schema.from_json(dump("--dump-bfrt-json"), dump("--dump-fixed-bfrt-json"))


def test_names_resolve(schema: Schema) -> None:
    relay = schema.table(pl.RELAY)
    assert schema.table("Ingress.relay") is relay  # unique suffix
    assert schema.table_by_id(relay.id) is relay
    assert relay.key(pl.K_SRC_ADDR).bits == 32
    assert relay.key(pl.K_DST_PORT).match_type == "Exact"
    leg = relay.action(pl.A_RELAY_LEG)
    assert relay.action("relay_leg") is leg
    assert [p for p in leg.params] == ["leg", "rtcp"]
    assert relay.data_field(pl.TTL).bits == 32
    assert schema.table(pl.LEG_REWRITE).data_field(pl.COUNTER_PKTS).bits == 64
    assert schema.table(pl.GUARD_DROPS).key(pl.COUNTER_INDEX).bits == 32
    assert relay.data_field("leg", leg).bits == 21
    assert "IdleTimeout" in relay.attributes
    assert schema.learn("learn").name == pl.LEARN_DIGEST
    assert schema.table("$PORT_STAT").key("$DEV_PORT").bits == 32
    assert schema.table("tf1.tm.port.sched_shaping").data["unit"].type == "string"


def test_unknown_names_are_schema_errors(schema: Schema) -> None:
    with pytest.raises(SchemaError, match="no table"):
        schema.table("pipe.Ingress.nope")
    with pytest.raises(SchemaError, match="no key field"):
        schema.table(pl.RELAY).key("hdr.ipv4.ttl")
    with pytest.raises(SchemaError, match="no action"):
        schema.table(pl.RELAY).action("Ingress.forward")
    with pytest.raises(SchemaError, match="no data field"):
        schema.table(pl.NEXTHOP).data_field("$ENTRY_TTL")
    with pytest.raises(SchemaError, match="not valid JSON"):
        Schema.from_json("{")
    with pytest.raises(SchemaError, match="malformed"):
        Schema.from_json('{"tables": [{"name": "x"}]}')


def test_ambiguous_suffix() -> None:
    doc = {"tables": [{"name": "pipe.A.t", "id": 1}, {"name": "pipe.B.t", "id": 2}]}
    with pytest.raises(SchemaError, match="ambiguous"):
        Schema.from_json(doc).table("t")


def f(bits: int, match: str = "Exact", type_: str = "bytes") -> FieldInfo:
    return FieldInfo(id=1, name="x", type=type_, bits=bits, match_type=match)


def test_int_values() -> None:
    assert codec.to_int("198.18.0.10") == int(ipaddress.IPv4Address("198.18.0.10"))
    assert codec.to_int("02:00:00:00:00:01") == 0x020000000001
    assert codec.to_int(b"\x01\x00") == 256
    assert codec.to_int("0x10") == 16
    assert codec.encode_int(5, f(9)) == b"\x00\x05"
    assert codec.encode_int(511, f(9)) == b"\x01\xff"
    assert codec.encode_int((1 << 21) - 1, f(21)) == b"\x1f\xff\xff"
    for bad in (512, -1):
        with pytest.raises(EncodeError, match="does not fit"):
            codec.encode_int(bad, f(9))
    for junk in ("02:00:00", "zz:00:00:00:00:01", "hello", "1.2.3.4.5"):
        with pytest.raises(EncodeError):
            codec.to_int(junk)


def test_key_fields() -> None:
    k = codec.key_field(f(32, "LPM"), Lpm("198.18.0.0", 15))
    assert (k.lpm.value, k.lpm.prefix_len) == (b"\xc6\x12\x00\x00", 15)
    assert codec.decode_key_field(None, k) == Lpm(0xC6120000, 15)
    with pytest.raises(EncodeError, match="prefix length"):
        codec.key_field(f(32, "LPM"), Lpm(0, 33))
    r = codec.key_field(f(16, "Range"), Range(20000, 29999))
    assert codec.decode_key_field(None, r) == Range(20000, 29999)
    with pytest.raises(EncodeError, match="low > high"):
        codec.key_field(f(16, "Range"), Range(2, 1))
    t = codec.key_field(f(8, "Ternary"), Ternary(0x12, 0xF0))
    assert codec.decode_key_field(None, t) == Ternary(0x12, 0xF0)
    with pytest.raises(EncodeError, match="is Exact"):
        codec.key_field(f(16), Range(1, 2))


def test_data_fields() -> None:
    s = FieldInfo(id=2, name="unit", type="string", bits=0, choices=("BPS", "PPS"))
    assert codec.decode_data_field(codec.data_field(s, "BPS")) == "BPS"
    with pytest.raises(EncodeError, match="not one of"):
        codec.data_field(s, "bps")
    b = FieldInfo(id=3, name="en", type="bool", bits=0)
    assert codec.decode_data_field(codec.data_field(b, True)) is True
    u = FieldInfo(id=4, name="n", type="uint64", bits=64)
    assert codec.decode_data_field(codec.data_field(u, 2**40)) == 2**40
    with pytest.raises(EncodeError):
        codec.data_field(u, 1.5)
    with pytest.raises(EncodeError):
        codec.data_field(b, "yes")


@given(bits=st.integers(1, 128), data=st.data())
def test_int_roundtrip_any_width(bits: int, data: st.DataObject) -> None:
    v = data.draw(st.integers(0, (1 << bits) - 1))
    raw = codec.encode_int(v, f(bits))
    assert len(raw) == (bits + 7) // 8
    assert codec.decode_int(raw) == v
    with pytest.raises(EncodeError):
        codec.encode_int(v + (1 << bits), f(bits))


@given(
    value=st.integers(0, 2**32 - 1),
    plen=st.integers(0, 32),
    lo=st.integers(0, 65535),
    hi=st.integers(0, 65535),
)
def test_key_roundtrip(value: int, plen: int, lo: int, hi: int) -> None:
    k = codec.key_field(f(32, "LPM"), Lpm(value, plen))
    assert codec.decode_key_field(None, pb.KeyField.FromString(k.SerializeToString())) == Lpm(
        value, plen
    )
    if lo <= hi:
        r = codec.key_field(f(16, "Range"), Range(lo, hi))
        assert codec.decode_key_field(None, r) == Range(lo, hi)
    else:
        with pytest.raises(EncodeError):
            codec.key_field(f(16, "Range"), Range(lo, hi))


@given(st.binary(min_size=6, max_size=6), st.booleans(), st.sampled_from(["", " ", "\t"]))
def test_to_int_reads_a_mac(b: bytes, upper: bool, pad: str) -> None:
    mac = b.hex(":").upper() if upper else b.hex(":")
    assert codec.to_int(f"{pad}{mac}{pad}") == int.from_bytes(b, "big")
    # groups of one digit, as "2:0:0:0:0:1", are padded, not run together
    assert codec.to_int(":".join(f"{x:x}" for x in b)) == int.from_bytes(b, "big")


@given(st.binary(min_size=2, max_size=20).filter(lambda b: len(b) not in (6, 8)))
def test_to_int_refuses_other_colon_groups(b: bytes) -> None:
    """Six groups are a MAC, eight an IPv6 address; any other count neither."""
    with pytest.raises(EncodeError, match="not a MAC or IPv6 address"):
        codec.to_int(b.hex(":"))


@given(st.binary(min_size=8, max_size=8))
def test_to_int_reads_eight_colon_groups_as_ipv6(b: bytes) -> None:
    """Each of the eight groups is one 16-bit word of the address."""
    assert codec.to_int(b.hex(":")) == sum(x << (16 * (7 - i)) for i, x in enumerate(b))


@given(st.integers(-(2**70), 2**70))
def test_to_int_reads_decimal_and_hex(n: int) -> None:
    assert codec.to_int(str(n)) == n
    assert codec.to_int(f" {hex(n)} ") == n


@given(st.ip_addresses(v=4))
def test_to_int_reads_an_ipv4_address(ip: ipaddress.IPv4Address) -> None:
    assert codec.to_int(str(ip)) == int(ip)


@given(st.text(max_size=40) | st.binary(max_size=20).map(lambda b: b.hex(":")))
def test_to_int_never_crashes_on_text(s: str) -> None:
    """Arbitrary strings either parse to an int or raise EncodeError, nothing else."""
    try:
        n = codec.to_int(s)
    except EncodeError:
        return
    assert type(n) is int
