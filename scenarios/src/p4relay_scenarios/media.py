"""G.711 media sources for SIPp: a looping A-law stream and long RTP pcaps.

Debian's g711a.pcap holds ~5 s of audio; calls of minutes need a longer
source. SIPp's `rtp_stream` loops a raw A-law file (one socket per call, a
random SSRC per stream, a small pool of sender threads), which scales to the
experiment's thousands of calls; `play_pcap_audio` replays a pcap, for which we
write a long one (50 packets/s, 160-byte payload) from the same audio.
"""

from __future__ import annotations

import math
import struct
from pathlib import Path

SAMPLE_RATE = 8000
PTIME_MS = 20
SAMPLES_PER_PACKET = SAMPLE_RATE * PTIME_MS // 1000  # 160 bytes of G.711 per packet
PT_PCMA = 8


def _alaw(sample: int) -> int:
    """ITU-T G.711 A-law encoding of one 16-bit linear sample."""
    sign = 0x80 if sample >= 0 else 0x00
    if sample < 0:
        sample = -sample - 1
    sample = min(sample, 32635)
    if sample >= 256:
        exponent = 7
        mask = 0x4000
        while not sample & mask and exponent > 1:
            exponent -= 1
            mask >>= 1
        mantissa = (sample >> (exponent + 3)) & 0x0F
        value = (exponent << 4) | mantissa
    else:
        value = sample >> 4
    return (value | sign) ^ 0x55


def alaw_tone(seconds: float, freqs: tuple[float, ...] = (440.0, 660.0)) -> bytes:
    """A-law audio: a soft two-tone chord, so listening to a capture says something."""
    n = int(seconds * SAMPLE_RATE)
    amp = 6000 / len(freqs)
    out = bytearray(n)
    for i in range(n):
        v = sum(math.sin(2 * math.pi * f * i / SAMPLE_RATE) for f in freqs)
        out[i] = _alaw(int(amp * v))
    return bytes(out)


def write_alaw_raw(path: Path, seconds: float = 10.0) -> Path:
    """Raw A-law file for SIPp `rtp_stream` (whole packets, looped by SIPp)."""
    audio = alaw_tone(seconds)
    audio = audio[: len(audio) - len(audio) % SAMPLES_PER_PACKET]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(audio)
    return path


def write_rtp_pcap(
    path: Path,
    seconds: float,
    *,
    src: tuple[str, int] = ("198.18.1.10", 6000),
    dst: tuple[str, int] = ("198.18.0.10", 20000),
    ssrc: int = 0x5034524C,
) -> Path:
    """A libpcap file of one G.711 A-law RTP stream (Ethernet/IPv4/UDP).

    SIPp's pcap play rewrites addresses and ports and keeps the timing, the
    RTP header (sequence, timestamp, SSRC) and the payload.
    """
    audio = alaw_tone(min(seconds, 10.0))
    n_packets = int(seconds * 1000 / PTIME_MS)
    src_ip = bytes(int(x) for x in src[0].split("."))
    dst_ip = bytes(int(x) for x in dst[0].split("."))
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i in range(n_packets):
            off = (i * SAMPLES_PER_PACKET) % (len(audio) - SAMPLES_PER_PACKET)
            payload = audio[off : off + SAMPLES_PER_PACKET]
            rtp = struct.pack(
                "!BBHII",
                0x80,
                PT_PCMA,
                i & 0xFFFF,
                (i * SAMPLES_PER_PACKET) & 0xFFFFFFFF,
                ssrc,
            )
            udp_len = 8 + len(rtp) + len(payload)
            udp = struct.pack("!HHHH", src[1], dst[1], udp_len, 0) + rtp + payload
            ip_hdr = struct.pack(
                "!BBHHHBBH4s4s", 0x45, 0xB8, 20 + udp_len, i & 0xFFFF, 0, 64, 17, 0, src_ip, dst_ip
            )
            csum = _ip_checksum(ip_hdr)
            ip_hdr = ip_hdr[:10] + struct.pack("!H", csum) + ip_hdr[12:]
            frame = b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01\x08\x00" + ip_hdr + udp
            t_us = i * PTIME_MS * 1000
            f.write(
                struct.pack("<IIII", t_us // 1_000_000, t_us % 1_000_000, len(frame), len(frame))
            )
            f.write(frame)
    return path


def _ip_checksum(header: bytes) -> int:
    total: int = sum(struct.unpack(f"!{len(header) // 2}H", header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF
