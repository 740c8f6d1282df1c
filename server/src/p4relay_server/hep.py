"""HEPv3 (Homer Encapsulation Protocol) packets carrying a call's quality report.

HEPv3 (sipcapture/HEP, "HEP3 Network Protocol Specification"): a 6-byte
header ("HEP3", total length, 16 bits) and chunks, each `vendor id (16) |
type (16) | length (16, header included) | value`, all big-endian. Written
here rather than taken from a library: no maintained Python HEP encoder
exists, and the format is a dozen fixed chunks.

The payload is one leg's quality as RTCP: Homer's RTCP JSON (the shape
captagent, rtpengine and heplify produce and Homer's QoS tab reads: a
receiver report block plus `report_blocks_xr`, here with every RFC 3611
§4.7 VoIP Metrics field), or the binary RTCP packets themselves (an RR and
an XR with a VoIP Metrics block), for receivers that parse RTCP.
"""

from __future__ import annotations

import ipaddress
import json
import struct
from dataclasses import dataclass
from typing import Any, Literal

HEP_MAGIC = b"HEP3"
HEP_MAX_LEN = 0xFFFF  # the header's total length is 16 bits

# Generic chunk types (vendor 0x0000).
CHUNK_IP_FAMILY = 0x0001
CHUNK_IP_PROTO = 0x0002
CHUNK_IPV4_SRC = 0x0003
CHUNK_IPV4_DST = 0x0004
CHUNK_IPV6_SRC = 0x0005
CHUNK_IPV6_DST = 0x0006
CHUNK_SRC_PORT = 0x0007
CHUNK_DST_PORT = 0x0008
CHUNK_TS_SEC = 0x0009
CHUNK_TS_USEC = 0x000A
CHUNK_PROTO_TYPE = 0x000B
CHUNK_CAPTURE_ID = 0x000C
CHUNK_AUTH_KEY = 0x000E
CHUNK_PAYLOAD = 0x000F
CHUNK_CORRELATION_ID = 0x0011

AF_INET = 2
AF_INET6 = 10
IPPROTO_UDP = 17
PROTO_TYPE_RTCP = 0x05  # HEP capture protocol type: RTCP (Homer: JSON or binary)

RTCP_RR = 201
RTCP_XR = 207
XR_VOIP_METRICS = 7
UNAVAILABLE = 127  # RFC 3611 §4.7: signal, noise, RERL, R factors, MOS "unavailable"
GMIN_DEFAULT = 16  # RFC 3611 §4.7: the recommended Gmin

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
PayloadFormat = Literal["json", "rtcp"]


class HepError(ValueError):
    """A report that cannot be encoded (a field out of its range, a packet over 64 KiB)."""


def _u8(v: int) -> int:
    return max(0, min(0xFF, v))


def _u16(v: int) -> int:
    return max(0, min(0xFFFF, v))


def fraction_256(num: int, den: int) -> int:
    """A fraction as RTCP's 8-bit fixed point (binary point at the left edge), saturating at 255."""
    if den <= 0 or num <= 0:
        return 0
    return _u8(num * 256 // den)


def mos_x10(mos: float | None) -> int:
    """MOS as RFC 3611 carries it: times 10, 10..50, 127 when unavailable."""
    if mos is None:
        return UNAVAILABLE
    return max(10, min(50, round(mos * 10)))


def r_field(r: float | None) -> int:
    """R factor, 0..100 (127: unavailable)."""
    if r is None:
        return UNAVAILABLE
    return max(0, min(100, round(r)))


@dataclass(frozen=True, slots=True)
class LegQuality:
    """One leg's quality since the start of the call, as the server has it."""

    call_id: str
    session_key: str
    direction: str
    src: Address
    src_port: int
    dst: Address
    dst_port: int
    ssrc: int  # a stable 32-bit id of the leg (the switch does not read SSRCs)
    packets: int  # received over the call so far
    lost: int
    interval_packets: int  # since the previous report of this leg
    interval_lost: int
    jitter_ms: float  # mean of the interval samples
    jitter_max_ms: float
    clock_rate: int  # RTP clock, for the RR's jitter in timestamp units
    mos: float | None  # the E-model MOS (conversational: with delay), mean
    mos_min: float | None
    mos_lq: float | None  # listening quality: the E-model without the delay term
    r_factor: float | None
    round_trip_ms: float | None  # both directions' one-way delays, when both known
    plc: bool
    codec: str | None
    final: bool

    @property
    def loss_pct(self) -> float:
        expected = self.packets + self.lost
        return 100.0 * self.lost / expected if expected else 0.0


def _voip_metrics(q: LegQuality) -> dict[str, int]:
    """RFC 3611 §4.7 fields. The switch sees each packet, not the receiver's
    jitter buffer: discards are 0 and the jitter buffer fields 0 (unknown);
    losses count as gap losses (isolated), signal, noise, RERL and the
    external R factor are unavailable."""
    loss = fraction_256(q.lost, q.packets + q.lost)
    return {
        "loss_rate": loss,
        "discard_rate": 0,
        "burst_density": 0,
        "gap_density": loss,
        "burst_duration": 0,
        "gap_duration": 0,
        "round_trip_delay": _u16(round(q.round_trip_ms or 0)),
        "end_system_delay": 0,
        "signal_level": UNAVAILABLE,
        "noise_level": UNAVAILABLE,
        "rerl": UNAVAILABLE,
        "gmin": GMIN_DEFAULT,
        "r_factor": r_field(q.r_factor),
        "ext_r_factor": UNAVAILABLE,
        "mos_lq": mos_x10(q.mos_lq),
        "mos_cq": mos_x10(q.mos),
        # PLC bits 7-6: 11 standard, 01 disabled; JBA 00 unknown; JB rate 0.
        "rx_config": 0xC0 if q.plc else 0x40,
        "jb_nominal": 0,
        "jb_maximum": 0,
        "jb_abs_max": 0,
    }


def _report_block(q: LegQuality) -> dict[str, int]:
    return {
        "source_ssrc": q.ssrc,
        "fraction_lost": fraction_256(q.interval_lost, q.interval_packets + q.interval_lost),
        "packets_lost": min(q.lost, 0x7FFFFF),  # 24-bit signed in RTCP
        "highest_seq_no": (q.packets + q.lost) & 0xFFFFFFFF,
        "ia_jitter": round(q.jitter_ms * q.clock_rate / 1000),
        "lsr": 0,
        "dlsr": 0,
    }


def rtcp_json(q: LegQuality) -> bytes:
    """Homer's RTCP JSON: an RR's report block and the XR VoIP Metrics
    (`report_blocks_xr`, Homer's names), plus `p4relay` with the server's own
    figures unquantised."""
    xr = _voip_metrics(q)
    doc: dict[str, Any] = {
        "type": RTCP_RR,
        "ssrc": q.ssrc,
        "report_count": 1,
        "report_blocks": [_report_block(q)],
        "report_blocks_xr": {
            "type": XR_VOIP_METRICS,
            "id": q.ssrc,
            "fraction_lost": xr["loss_rate"],
            "fraction_discard": xr["discard_rate"],
            **{k: v for k, v in xr.items() if k not in ("loss_rate", "discard_rate")},
        },
        "p4relay": {
            "session_key": q.session_key,
            "direction": q.direction,
            "final": q.final,
            "codec": q.codec,
            "packets": q.packets,
            "lost": q.lost,
            "loss_pct": round(q.loss_pct, 4),
            "jitter_ms": round(q.jitter_ms, 3),
            "jitter_max_ms": round(q.jitter_max_ms, 3),
            "mos": None if q.mos is None else round(q.mos, 3),
            "mos_min": None if q.mos_min is None else round(q.mos_min, 3),
            "r_factor": None if q.r_factor is None else round(q.r_factor, 2),
        },
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def rtcp_binary(q: LegQuality) -> bytes:
    """A compound RTCP packet: RR (one report block) then XR with one VoIP
    Metrics block (RFC 3550 §6.4.2, RFC 3611 §2 and §4.7)."""
    rb = _report_block(q)
    rr = struct.pack(
        "!BBHI I I I I I I",
        0x80 | 1,  # V=2, P=0, RC=1
        RTCP_RR,
        7,  # length in 32-bit words minus one
        q.ssrc,
        rb["source_ssrc"],
        (rb["fraction_lost"] << 24) | rb["packets_lost"],
        rb["highest_seq_no"],
        rb["ia_jitter"] & 0xFFFFFFFF,
        0,
        0,
    )
    m = _voip_metrics(q)
    block = struct.pack(
        "!BBH I BBBB HH HH bbBB BBBB BB HHH",
        XR_VOIP_METRICS,
        0,
        8,  # block length in 32-bit words minus one
        q.ssrc,
        m["loss_rate"],
        m["discard_rate"],
        m["burst_density"],
        m["gap_density"],
        m["burst_duration"],
        m["gap_duration"],
        m["round_trip_delay"],
        m["end_system_delay"],
        m["signal_level"],
        m["noise_level"],
        m["rerl"],
        m["gmin"],
        m["r_factor"],
        m["ext_r_factor"],
        m["mos_lq"],
        m["mos_cq"],
        m["rx_config"],
        0,
        m["jb_nominal"],
        m["jb_maximum"],
        m["jb_abs_max"],
    )
    xr_header = struct.pack("!BBHI", 0x80, RTCP_XR, (8 + len(block)) // 4 - 1, q.ssrc)
    return rr + xr_header + block


def _chunk(ctype: int, value: bytes) -> bytes:
    if 6 + len(value) > HEP_MAX_LEN:
        raise HepError(f"chunk 0x{ctype:04x} of {len(value)} bytes is over 65535")
    return struct.pack("!HHH", 0, ctype, 6 + len(value)) + value


def encode_hep3(
    *,
    src: Address,
    src_port: int,
    dst: Address,
    dst_port: int,
    ts_sec: int,
    ts_usec: int,
    proto_type: int,
    capture_id: int,
    payload: bytes,
    correlation_id: str,
    auth_key: str | None = None,
) -> bytes:
    """One HEPv3 packet; raises HepError if a field is out of range or the
    packet would be over the 16-bit total length."""
    if src.version != dst.version:
        raise HepError("source and destination must be the same address family")
    if not (0 <= src_port <= 0xFFFF and 0 <= dst_port <= 0xFFFF):
        raise HepError("ports must be 0..65535")
    if not 0 <= capture_id <= 0xFFFFFFFF:
        raise HepError("capture id must be 0..2^32-1")
    if not (0 <= ts_sec <= 0xFFFFFFFF and 0 <= ts_usec < 1_000_000):
        raise HepError("timestamp out of range")
    v4 = src.version == 4
    chunks = [
        _chunk(CHUNK_IP_FAMILY, bytes([AF_INET if v4 else AF_INET6])),
        _chunk(CHUNK_IP_PROTO, bytes([IPPROTO_UDP])),
        _chunk(CHUNK_IPV4_SRC if v4 else CHUNK_IPV6_SRC, src.packed),
        _chunk(CHUNK_IPV4_DST if v4 else CHUNK_IPV6_DST, dst.packed),
        _chunk(CHUNK_SRC_PORT, struct.pack("!H", src_port)),
        _chunk(CHUNK_DST_PORT, struct.pack("!H", dst_port)),
        _chunk(CHUNK_TS_SEC, struct.pack("!I", ts_sec)),
        _chunk(CHUNK_TS_USEC, struct.pack("!I", ts_usec)),
        _chunk(CHUNK_PROTO_TYPE, bytes([proto_type & 0xFF])),
        _chunk(CHUNK_CAPTURE_ID, struct.pack("!I", capture_id)),
    ]
    if auth_key:
        chunks.append(_chunk(CHUNK_AUTH_KEY, auth_key.encode()))
    chunks.append(_chunk(CHUNK_CORRELATION_ID, correlation_id.encode()))
    chunks.append(_chunk(CHUNK_PAYLOAD, payload))
    body = b"".join(chunks)
    total = 6 + len(body)
    if total > HEP_MAX_LEN:
        raise HepError(f"HEP packet of {total} bytes is over {HEP_MAX_LEN}")
    return HEP_MAGIC + struct.pack("!H", total) + body


def encode_report(
    q: LegQuality,
    *,
    ts: float,
    capture_id: int,
    auth_key: str | None,
    payload: PayloadFormat = "json",
) -> bytes:
    """One leg's quality report as a HEPv3 packet correlated with its SIP Call-ID."""
    sec = int(ts)
    return encode_hep3(
        src=q.src,
        src_port=q.src_port,
        dst=q.dst,
        dst_port=q.dst_port,
        ts_sec=sec,
        ts_usec=min(999_999, int((ts - sec) * 1_000_000)),
        proto_type=PROTO_TYPE_RTCP,
        capture_id=capture_id,
        payload=rtcp_json(q) if payload == "json" else rtcp_binary(q),
        correlation_id=q.call_id,
        auth_key=auth_key,
    )


def decode_hep3(packet: bytes) -> dict[int, bytes]:
    """Chunks by type (generic vendor only); raises HepError on a malformed packet.
    The exporter's tests and operators' debugging read packets back with it."""
    if len(packet) < 6 or packet[:4] != HEP_MAGIC:
        raise HepError("not a HEPv3 packet")
    (total,) = struct.unpack("!H", packet[4:6])
    if total != len(packet):
        raise HepError(f"length field {total} != packet length {len(packet)}")
    out: dict[int, bytes] = {}
    i = 6
    while i < total:
        if i + 6 > total:
            raise HepError("truncated chunk header")
        vendor, ctype, clen = struct.unpack("!HHH", packet[i : i + 6])
        if clen < 6 or i + clen > total:
            raise HepError(f"chunk 0x{ctype:04x} length {clen} out of bounds")
        if vendor == 0:
            out[ctype] = packet[i + 6 : i + clen]
        i += clen
    return out
