"""Packet captures of the relay path and the metrics drawn from them.

The paper measures a packet's delay from the switch's UAC-facing port to its
UAS-facing port. We capture one veth hop further out, as the UAC host sends
and as the UAS host receives (the softswitch's XDP fast path forwards before
a capture on the switch's own ports could see the packet, as a hardware
switch would), with tcpdump (kernel timestamps, nanoseconds, one clock) and match each
caller->callee RTP packet by (SSRC, sequence number), which RTPProxy and the
switch both leave untouched:

  delay        t_egress - t_ingress, per packet
  variation    |D_i - D_{i-1}| of consecutive packets of a stream (RFC 4689 style)
  loss         packets that entered the relay path and never left it (by RTP seq)
  MOS          G.107 E-model per stream (p4relay_server.mos), from loss, delay
               and variation
"""

from __future__ import annotations

import statistics
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np
from p4relay_server.mos import mos

from p4relay_scenarios import topology
from p4relay_scenarios.netns import link_exists
from p4relay_scenarios.procs import Proc, Supervisor

SNAPLEN = 54  # Ethernet 14 + IPv4 20 + UDP 8 + RTP 12
SNAPLEN6 = 74  # Ethernet 14 + IPv6 40 + UDP 8 + RTP 12
PCAP_NS_MAGIC = 0xA1B23C4D
PCAP_US_MAGIC = 0xA1B2C3D4


@dataclass
class PortCapture:
    """tcpdump on one switch port; the pcap file is ready after stop()."""

    name: str
    ifname: str
    bpf: str
    path: Path
    netns: str | None = None  # None: the switch port (root ns, or the kernel forwarder's)


def start_captures(
    sup: Supervisor, out_dir: Path, relay_ports: tuple[int, int], *, family: int = 4
) -> list[PortCapture]:
    """Capture caller->callee RTP as the UAC host sends it (in) and as the UAS
    host receives it (out), over IPv4 or (`family` 6) IPv6. On the hosts'
    interfaces, not the switch's: the softswitch's XDP fast path forwards
    relay hits before a capture on its own ports could see them (as a
    hardware switch would)."""
    lo, hi = relay_ports
    if family == 6:
        uac, relay, uas = topology.UAC.addr6, topology.RELAY.addr6, topology.UAS.addr6
    else:
        uac, relay, uas = topology.UAC.addr, topology.RELAY.addr, topology.UAS.addr
    caps = [
        PortCapture(
            "cap-in",
            topology.HOST_IF,
            f"udp and src host {uac} and dst host {relay} and dst portrange {lo}-{hi}",
            out_dir / "ingress-uac.pcap",
            netns=topology.UAC.netns,
        ),
        PortCapture(
            "cap-out",
            topology.HOST_IF,
            f"udp and src host {relay} and src portrange {lo}-{hi} and dst host {uas}",
            out_dir / "egress-uas.pcap",
            netns=topology.UAS.netns,
        ),
    ]
    out_dir.mkdir(parents=True, exist_ok=True)
    for c in caps:
        netns = c.netns or (None if link_exists(c.ifname) else topology.FWD_NS)
        c.path.unlink(missing_ok=True)
        sup.start(
            c.name,
            [
                "tcpdump",
                "-i",
                c.ifname,
                "-n",
                "-s",
                str(SNAPLEN6 if family == 6 else SNAPLEN),
                "-B",
                "32768",
                "--time-stamp-precision",
                "nano",
                # Each packet to the file as it arrives (not in the kernel's
                # blocks): what was sent before stop() is in the file after it.
                "--immediate-mode",
                "-U",
                "-w",
                str(c.path),
                c.bpf,
            ],
            netns=netns,
        )
    wait_capturing(sup, [c.name for c in caps])
    return caps


def wait_capturing(sup: Supervisor, names: list[str], timeout_s: float = 15.0) -> None:
    """Return once each tcpdump says it is listening: its filter is attached,
    so every packet from now on is captured."""
    for name in names:
        sup.wait_ready(name, partial(_listening, sup.procs[name]), timeout_s, "tcpdump listening")


def _listening(proc: Proc) -> bool:
    return "listening on" in proc.output()


def stop_captures(sup: Supervisor, caps: list[PortCapture]) -> None:
    for c in caps:
        sup.stop(c.name)


def read_rtp(path: Path) -> np.ndarray:
    """(time_ns, ssrc, seq) per RTP packet of a pcap written by tcpdump."""
    data = path.read_bytes()
    if len(data) < 24:
        return np.zeros((0, 3), dtype=np.int64)
    magic = struct.unpack_from("<I", data, 0)[0]
    if magic not in (PCAP_NS_MAGIC, PCAP_US_MAGIC):
        raise ValueError(f"{path}: not a little-endian pcap (magic {magic:#x})")
    scale = 1 if magic == PCAP_NS_MAGIC else 1000
    fast = _read_fixed(data, scale)
    if fast is not None:
        return fast
    rows: list[tuple[int, int, int]] = []
    off = 24
    n = len(data)
    while off + 16 <= n:
        sec, frac, caplen, _ = struct.unpack_from("<IIII", data, off)
        off += 16
        pkt = data[off : off + caplen]
        off += caplen
        if caplen >= SNAPLEN and pkt[12:14] == b"\x08\x00" and pkt[14] == 0x45 and pkt[23] == 17:
            rtp = 42
        elif caplen >= SNAPLEN6 and pkt[12:14] == b"\x86\xdd" and pkt[20] == 17:
            rtp = 62  # IPv6 without extension headers, UDP
        else:
            continue  # not one of our RTP packets
        if pkt[rtp] >> 6 != 2:
            continue  # not RTP version 2
        seq, _ts, ssrc = struct.unpack_from("!HII", pkt, rtp + 2)
        rows.append((sec * 1_000_000_000 + frac * scale, ssrc, seq))
    return np.array(rows, dtype=np.int64).reshape(-1, 3)


# One pcap record of a frame cut at SNAPLEN: record header, then Ethernet/IPv4/UDP/RTP.
_FIXED = np.dtype(
    [
        ("sec", "<u4"),
        ("frac", "<u4"),
        ("caplen", "<u4"),
        ("wirelen", "<u4"),
        ("eth", "V12"),
        ("ethertype", ">u2"),
        ("vihl", "u1"),
        ("ip_mid", "V8"),
        ("proto", "u1"),
        ("ip_rest", "V10"),
        ("udp", "V8"),
        ("rtp0", "u1"),
        ("rtp1", "u1"),
        ("seq", ">u2"),
        ("ts", ">u4"),
        ("ssrc", ">u4"),
    ]
)


def _read_fixed(data: bytes, scale: int) -> np.ndarray | None:
    """Vectorised read when every record is one RTP frame cut at SNAPLEN (the experiment's
    filtered captures: millions of packets); None when the file is not like that."""
    body = memoryview(data)[24:]
    if len(body) % _FIXED.itemsize:
        return None
    rec = np.frombuffer(body, dtype=_FIXED)
    if not (rec["caplen"] == SNAPLEN).all():
        return None
    ok = (
        (rec["ethertype"] == 0x0800)
        & (rec["vihl"] == 0x45)
        & (rec["proto"] == 17)
        & ((rec["rtp0"] >> 6) == 2)
    )
    rec = rec[ok]
    out = np.empty((len(rec), 3), dtype=np.int64)
    out[:, 0] = rec["sec"].astype(np.int64) * 1_000_000_000 + rec["frac"].astype(np.int64) * scale
    out[:, 1] = rec["ssrc"]
    out[:, 2] = rec["seq"]
    return out


@dataclass
class StreamResult:
    ssrc: int
    sent: int
    received: int
    delay_ms_mean: float
    variation_ms_mean: float
    mos: float | None
    delay_ms_max: float = float("nan")
    max_gap_ms: float = float("nan")  # longest time between two arrivals at the far end
    pps: float = float("nan")  # packets arrived per second of the stream's sending time


@dataclass
class PathMetrics:
    """Relay-path metrics over a measurement window, all streams together."""

    streams: int
    packets_in: int
    packets_out: int
    loss_pct: float
    delay_ms_median: float
    delay_ms_p99: float
    delay_ms_mean: float
    variation_ms_median: float
    variation_ms_p99: float
    variation_ms_mean: float
    mos_median: float | None
    mos_min: float | None
    delays_ms: np.ndarray = field(repr=False)
    variations_ms: np.ndarray = field(repr=False)
    per_stream: list[StreamResult] = field(repr=False, default_factory=list)


def _streams(rows: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    if len(rows) == 0:
        return
    order = np.lexsort((rows[:, 0], rows[:, 1]))
    rows = rows[order]
    bounds = np.flatnonzero(np.diff(rows[:, 1])) + 1
    for chunk in np.split(rows, bounds):
        yield int(chunk[0, 1]), chunk


def relay_path_metrics(
    ingress: np.ndarray,
    egress: np.ndarray,
    *,
    window_ns: tuple[int, int] | None = None,
    settle_ms: float = 1000.0,
) -> PathMetrics:
    """Match ingress and egress packets by (SSRC, seq) and compute the metrics.

    Only packets that entered within the window count. A packet counts as lost
    when it entered at least `settle_ms` before the capture's end and never
    left the relay path.
    """
    if window_ns is not None:
        lo, hi = window_ns
        ingress = ingress[(ingress[:, 0] >= lo) & (ingress[:, 0] < hi)]
    end_ns = int(egress[:, 0].max()) if len(egress) else 0
    ingress = ingress[ingress[:, 0] <= end_ns - int(settle_ms * 1e6)]
    out_index: dict[int, dict[int, int]] = {}
    for ssrc, chunk in _streams(egress):
        # First copy of each seq (duplicates would be a relay fault, counted once).
        out_index[ssrc] = dict(zip(chunk[::-1, 2].tolist(), chunk[::-1, 0].tolist(), strict=True))
    all_delays: list[np.ndarray] = []
    all_vars: list[np.ndarray] = []
    per_stream: list[StreamResult] = []
    sent_total = recv_total = 0
    for ssrc, chunk in _streams(ingress):
        seen = out_index.get(ssrc, {})
        t_in = chunk[:, 0]
        t_out = np.array([seen.get(int(s), -1) for s in chunk[:, 2]], dtype=np.int64)
        ok = t_out >= 0
        d = (t_out[ok] - t_in[ok]) / 1e6
        v = np.abs(np.diff(d)) if len(d) > 1 else np.zeros(0)
        sent, recv = len(chunk), int(ok.sum())
        sent_total += sent
        recv_total += recv
        all_delays.append(d)
        all_vars.append(v)
        d_mean = float(d.mean()) if len(d) else float("nan")
        v_mean = float(v.mean()) if len(v) else 0.0
        q = mos(
            "PCMA",
            packets=recv,
            lost=sent - recv,
            jitter_ms=v_mean,
            delay_ms=d_mean if recv else None,
        )
        arrivals = np.sort(t_out[ok])
        span_s = (int(t_in[-1]) - int(t_in[0])) / 1e9 if sent > 1 else 0.0
        per_stream.append(
            StreamResult(
                ssrc,
                sent,
                recv,
                d_mean,
                v_mean,
                q[1] if q else None,
                delay_ms_max=float(d.max()) if len(d) else float("nan"),
                max_gap_ms=float(np.diff(arrivals).max()) / 1e6 if recv > 1 else float("nan"),
                pps=recv / span_s if span_s > 0 else float("nan"),
            )
        )
    delays = np.concatenate(all_delays) if all_delays else np.zeros(0)
    variations = np.concatenate(all_vars) if all_vars else np.zeros(0)
    moses = [s.mos for s in per_stream if s.mos is not None]

    def pct(a: np.ndarray, p: float) -> float:
        return float(np.percentile(a, p)) if len(a) else float("nan")

    return PathMetrics(
        streams=len(per_stream),
        packets_in=sent_total,
        packets_out=recv_total,
        loss_pct=100.0 * (sent_total - recv_total) / sent_total if sent_total else float("nan"),
        delay_ms_median=pct(delays, 50),
        delay_ms_p99=pct(delays, 99),
        delay_ms_mean=float(delays.mean()) if len(delays) else float("nan"),
        variation_ms_median=pct(variations, 50),
        variation_ms_p99=pct(variations, 99),
        variation_ms_mean=float(variations.mean()) if len(variations) else float("nan"),
        mos_median=statistics.median(moses) if moses else None,
        mos_min=min(moses) if moses else None,
        delays_ms=delays,
        variations_ms=variations,
        per_stream=per_stream,
    )


def count_packets(path: Path) -> int:
    """RTP packets in a capture (for cross-checks against switch counters)."""
    return len(read_rtp(path))


def count_frames(path: Path) -> int:
    """Every frame in a pcap (any protocol)."""
    data = path.read_bytes()
    off, n = 24, 0
    while off + 16 <= len(data):
        caplen = struct.unpack_from("<I", data, off + 8)[0]
        off += 16 + caplen
        n += 1
    return n
