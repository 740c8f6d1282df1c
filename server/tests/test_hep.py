"""The HEPv3 encoder: byte-exact chunk layout and lengths, the RTCP payloads
(RFC 3550 RR, RFC 3611 XR VoIP Metrics) at their offsets, refusals."""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from p4relay_server.hep import (
    HepError,
    LegQuality,
    decode_hep3,
    encode_hep3,
    encode_report,
    fraction_256,
    mos_x10,
    r_field,
    rtcp_binary,
    rtcp_json,
)

V4 = ipaddress.IPv4Address
V6 = ipaddress.IPv6Address

LEG = LegQuality(
    call_id="a84b4c76e66710@pc33.example.com",
    session_key="a84b4c76e66710@pc33.example.com;ft",
    direction="caller_to_callee",
    src=V4("198.18.0.10"),
    src_port=20002,
    dst=V4("198.18.2.10"),
    dst_port=7000,
    ssrc=0x11223344,
    packets=980,
    lost=20,
    interval_packets=490,
    interval_lost=10,
    jitter_ms=2.5,
    jitter_max_ms=6.0,
    clock_rate=8000,
    mos=4.03,
    mos_min=3.8,
    mos_lq=4.12,
    r_factor=82.6,
    round_trip_ms=41.6,
    plc=True,
    codec="PCMU",
    final=True,
)


def test_chunk_layout_is_byte_exact() -> None:
    pkt = encode_hep3(
        src=V4("10.0.0.1"),
        src_port=5004,
        dst=V4("10.0.0.2"),
        dst_port=5006,
        ts_sec=0x01020304,
        ts_usec=999_999,
        proto_type=5,
        capture_id=2001,
        payload=b"xyz",
        correlation_id="cid",
        auth_key="key",
    )
    expected = (
        b"HEP3"
        + struct.pack("!H", 6 + 7 + 7 + 10 + 10 + 8 + 8 + 10 + 10 + 7 + 10 + 9 + 9 + 9)
        + bytes.fromhex("0000 0001 0007 02")  # IP family: AF_INET
        + bytes.fromhex("0000 0002 0007 11")  # IP protocol: UDP
        + bytes.fromhex("0000 0003 000a 0a000001")
        + bytes.fromhex("0000 0004 000a 0a000002")
        + bytes.fromhex("0000 0007 0008 138c")
        + bytes.fromhex("0000 0008 0008 138e")
        + bytes.fromhex("0000 0009 000a 01020304")
        + bytes.fromhex("0000 000a 000a 000f423f")
        + bytes.fromhex("0000 000b 0007 05")  # protocol type: RTCP
        + bytes.fromhex("0000 000c 000a 000007d1")  # capture id 2001
        + bytes.fromhex("0000 000e 0009")
        + b"key"
        + bytes.fromhex("0000 0011 0009")
        + b"cid"
        + bytes.fromhex("0000 000f 0009")
        + b"xyz"
    )
    assert pkt == expected


def test_ipv6_chunks_and_no_auth_chunk_without_a_key() -> None:
    pkt = encode_hep3(
        src=V6("2001:db8::1"),
        src_port=1,
        dst=V6("2001:db8::2"),
        dst_port=2,
        ts_sec=1,
        ts_usec=0,
        proto_type=5,
        capture_id=0,
        payload=b"",
        correlation_id="c",
    )
    chunks = decode_hep3(pkt)
    assert chunks[0x0001] == b"\x0a"
    assert chunks[0x0005] == V6("2001:db8::1").packed
    assert chunks[0x0006] == V6("2001:db8::2").packed
    assert 0x0003 not in chunks and 0x000E not in chunks
    assert chunks[0x000F] == b""


def test_rtcp_binary_rr_and_xr_voip_metrics_offsets() -> None:
    raw = rtcp_binary(LEG)
    assert len(raw) == 32 + 44
    # RR: V=2 RC=1, PT 201, length 7 words - 1.
    assert raw[:4] == bytes([0x81, 201, 0, 7])
    assert struct.unpack("!I", raw[4:8])[0] == 0x11223344
    fraction, cum = raw[12], int.from_bytes(raw[13:16], "big")
    assert fraction == 10 * 256 // 500 and cum == 20
    assert struct.unpack("!I", raw[16:20])[0] == 1000  # extended expected count
    assert struct.unpack("!I", raw[20:24])[0] == 20  # 2.5 ms at 8 kHz
    xr = raw[32:]
    assert xr[:4] == bytes([0x80, 207, 0, 10])  # 44 bytes = 11 words
    block = xr[8:]
    assert block[:4] == bytes([7, 0, 0, 8])  # VoIP Metrics, 36 bytes
    assert struct.unpack("!I", block[4:8])[0] == 0x11223344
    loss = 20 * 256 // 1000
    assert list(block[8:12]) == [loss, 0, 0, loss]  # loss, discard, burst, gap density
    assert struct.unpack("!HHHH", block[12:20]) == (0, 0, 42, 0)  # durations, RTT, ESD
    assert struct.unpack("!bbBB", block[20:24]) == (127, 127, 127, 16)
    assert list(block[24:28]) == [83, 127, 41, 40]  # R, ext R, MOS-LQ, MOS-CQ
    assert block[28] == 0xC0  # PLC standard
    assert struct.unpack("!HHH", block[30:36]) == (0, 0, 0)


def test_rtcp_json_is_homers_shape_with_voip_metrics() -> None:
    doc = json.loads(rtcp_json(LEG))
    assert doc["type"] == 201 and doc["report_count"] == 1
    rb = doc["report_blocks"][0]
    assert rb["packets_lost"] == 20 and rb["ia_jitter"] == 20
    xr = doc["report_blocks_xr"]
    assert xr["type"] == 7 and xr["fraction_lost"] == 5 and xr["fraction_discard"] == 0
    assert (xr["r_factor"], xr["mos_lq"], xr["mos_cq"]) == (83, 41, 40)
    assert (xr["signal_level"], xr["noise_level"], xr["ext_r_factor"]) == (127, 127, 127)
    assert doc["p4relay"]["packets"] == 980 and doc["p4relay"]["final"] is True


def test_report_is_correlated_by_call_id() -> None:
    pkt = encode_report(LEG, ts=1700000000.25, capture_id=7, auth_key=None, payload="rtcp")
    chunks = decode_hep3(pkt)
    assert chunks[0x0011] == LEG.call_id.encode()
    assert chunks[0x000F] == rtcp_binary(LEG)
    assert struct.unpack("!I", chunks[0x000A])[0] == 250_000
    assert chunks[0x0003] == LEG.src.packed and chunks[0x0004] == LEG.dst.packed


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"dst": V6("::1")}, "same address family"),
        ({"src_port": 70000}, "ports"),
        ({"capture_id": -1}, "capture id"),
        ({"ts_usec": 1_000_000}, "timestamp"),
        ({"payload": b"x" * 65_536}, "over 65535"),
    ],
)
def test_refuses_what_hep_cannot_carry(change: dict[str, object], message: str) -> None:
    args: dict[str, object] = {
        "src": V4("10.0.0.1"),
        "src_port": 1,
        "dst": V4("10.0.0.2"),
        "dst_port": 2,
        "ts_sec": 1,
        "ts_usec": 0,
        "proto_type": 5,
        "capture_id": 1,
        "payload": b"",
        "correlation_id": "c",
    }
    args.update(change)
    with pytest.raises(HepError, match=message):
        encode_hep3(**args)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "bad",
    [
        b"",
        b"HEP2\x00\x06",
        b"HEP3\x00\x07",
        b"HEP3\x00\x0a\x00\x00\x00\x01",
        b"HEP3\x00\x0c" + bytes(6),
    ],
)
def test_decoder_refuses_malformed_packets(bad: bytes) -> None:
    with pytest.raises(HepError):
        decode_hep3(bad)


def test_fixed_point_fields_saturate() -> None:
    assert fraction_256(1, 0) == 0 and fraction_256(5, 5) == 255 and fraction_256(1, 256) == 1
    assert mos_x10(None) == 127 and mos_x10(0.5) == 10 and mos_x10(4.9) == 49
    assert r_field(None) == 127 and r_field(120.0) == 100 and r_field(-3.0) == 0


@given(
    call_id=st.text(min_size=1, max_size=200),
    packets=st.integers(0, 2**48),
    lost=st.integers(0, 2**48),
    jitter=st.floats(0, 60_000),
)
def test_any_leg_encodes_and_decodes(call_id: str, packets: int, lost: int, jitter: float) -> None:
    leg = dataclasses.replace(
        LEG,
        call_id=call_id,
        packets=packets,
        lost=lost,
        interval_packets=packets,
        interval_lost=lost,
        jitter_ms=jitter,
    )
    for payload in ("json", "rtcp"):
        pkt = encode_report(leg, ts=1.5, capture_id=1, auth_key="k", payload=payload)
        assert decode_hep3(pkt)[0x0011] == call_id.encode()
