"""Real SIP phones on the testbed: baresip (Debian's baresip-core) in a host's
namespace, and what its peer's audio looked like when it arrived.

A `Phone` is one baresip user agent: G.711 A-law only, a sine tone of its own
as its microphone (ausine), the ALSA null device as its speaker, auto-answer,
every request through the SIP server (its outbound proxy). It is driven over
baresip's ctrl_tcp socket (netstring JSON), which listens on the namespace's
loopback: each command runs a short client inside the namespace.

`received_audio` reads a capture of what reached the phone (tcpdump on its
interface) and tells what a listener would have heard: the RTP packets per
stream, the ones missing by sequence number, the pauses, and the tone in the
decoded A-law.
"""

from __future__ import annotations

import itertools
import json
import re
import struct
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from p4relay_scenarios import topology
from p4relay_scenarios.procs import StartError, Supervisor

CTRL_PORT = 4444
SIP_PORT = 5060
PTIME_S = 0.02
PT_PCMA = 8
SAMPLE_RATE = 8000
# A pause longer than this in a stream's arrivals is a gap a listener hears.
GAP_S = 0.1

# The ctrl_tcp client run inside the phone's namespace: one command, one answer.
_CLIENT = r"""
import json, socket, sys
port, cmd, params = int(sys.argv[1]), sys.argv[2], sys.argv[3]
body = json.dumps({"command": cmd, "params": params, "token": "p4r"}).encode()
s = socket.create_connection(("127.0.0.1", port), timeout=5)
s.sendall(str(len(body)).encode() + b":" + body + b",")
buf = b""
while True:
    head, sep, rest = buf.partition(b":")
    if sep and head.isdigit() and len(rest) > int(head):
        msg = json.loads(rest[: int(head)])
        buf = rest[int(head) + 1 :]
        if msg.get("response"):
            print(json.dumps(msg))
            break
        continue
    chunk = s.recv(65536)
    if not chunk:
        sys.exit("baresip closed the control connection")
    buf += chunk
"""


@dataclass
class Phone:
    """One baresip user agent on a testbed host."""

    name: str  # the SIP user: sip:<name>@<host address>
    host: topology.Host
    tone_hz: int  # what its microphone plays
    run_dir: Path
    proxy: str = f"sip:{topology.RELAY.addr}:{SIP_PORT};lr"
    rtp_ports: tuple[int, int] = (31000, 31099)

    @property
    def uri(self) -> str:
        return f"sip:{self.name}@{self.host.addr}"

    @property
    def proc(self) -> str:
        return f"phone-{self.name}"

    @property
    def dir(self) -> Path:
        return self.run_dir / self.proc

    def write_config(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        lo, hi = self.rtp_ports
        conf = {
            "poll_method": "epoll",
            "sip_listen": f"{self.host.addr}:{SIP_PORT}",
            "audio_player": "alsa,null",
            "audio_alert": "alsa,null",
            "audio_source": f"ausine,{self.tone_hz}",
            "ausrc_srate": "48000",  # ausine's only format; resampled to G.711's 8 kHz
            "ausrc_channels": "2",
            "rtp_ports": f"{lo}-{hi}",
            "jitter_buffer_delay": "1-20",
            "module_path": "/usr/lib/baresip/modules",
            "ctrl_tcp_listen": f"127.0.0.1:{CTRL_PORT}",
        }
        lines = [f"{k} {v}" for k, v in conf.items()]
        lines += [f"module {m}.so" for m in ("g711", "ausine", "alsa")]
        lines += [f"module_app {m}.so" for m in ("account", "menu", "ctrl_tcp")]
        (self.dir / "config").write_text("\n".join(lines) + "\n")
        (self.dir / "accounts").write_text(
            f'<{self.uri}>;regint=0;answermode=auto;audio_codecs=PCMA;outbound="{self.proxy}"\n'
        )

    def start(self, sup: Supervisor) -> None:
        self.write_config()
        sup.start(self.proc, ["baresip", "-f", str(self.dir)], netns=self.host.netns)
        sup.wait_ready(self.proc, self._answers, 20, "ctrl_tcp")

    def _answers(self) -> bool:
        try:
            self.command("listcalls")
        except StartError:
            return False
        return True

    def command(self, cmd: str, params: str = "") -> str:
        """One ctrl_tcp command; its answer's text (StartError if refused)."""
        r = subprocess.run(
            ["ip", "netns", "exec", self.host.netns, sys.executable, "-c", _CLIENT,
             str(CTRL_PORT), cmd, params],
            capture_output=True, text=True, timeout=15, check=False,
        )  # fmt: skip
        if r.returncode != 0:
            raise StartError(f"{self.proc} {cmd}: {r.stderr.strip()[-500:]}")
        answer = json.loads(r.stdout)
        if not answer.get("ok"):
            raise StartError(f"{self.proc} {cmd} {params}: refused: {answer.get('data')!r}")
        return str(answer.get("data", ""))

    def log(self, sup: Supervisor) -> str:
        return sup.procs[self.proc].log.read_text(errors="replace")

    def dial(self, other: Phone) -> None:
        self.command("dial", other.uri)

    def calls(self) -> int:
        """Calls this phone has up now."""
        out = self.command("listcalls")
        return len(re.findall(r"sip:\S+@", out))


@dataclass
class Stream:
    """One RTP stream (SSRC) as it reached the phone."""

    ssrc: int
    packets: int
    lost: int  # sequence numbers never seen between the first and the last
    first_s: float
    last_s: float
    gaps: list[tuple[float, float]] = field(default_factory=list)  # (start, length) > GAP_S


@dataclass
class Audio:
    """What a phone received: its RTP streams and the tone in their audio."""

    streams: list[Stream]
    tone_hz: float | None  # the strongest frequency of the decoded audio
    tone_share: float  # its share of the signal's energy (a clean tone: near 1)

    @property
    def packets(self) -> int:
        return sum(s.packets for s in self.streams)

    @property
    def lost(self) -> int:
        return sum(s.lost for s in self.streams)

    @property
    def seconds(self) -> float:
        return self.packets * PTIME_S

    @property
    def gaps(self) -> list[tuple[float, float]]:
        return sorted(g for s in self.streams for g in s.gaps)


def _alaw_table() -> np.ndarray:
    """ITU-T G.711 A-law to linear, every byte value."""
    out = np.zeros(256, dtype=np.float64)
    for b in range(256):
        v = b ^ 0x55
        exp = (v & 0x70) >> 4
        mant = v & 0x0F
        mag = (mant << 4) + 8 if exp == 0 else ((mant << 4) + 0x108) << (exp - 1)
        out[b] = mag if v & 0x80 else -mag
    return out


_ALAW = _alaw_table()


def read_rtp_payloads(pcap: Path, port_range: tuple[int, int]) -> list[tuple[float, bytes]]:
    """(arrival time, UDP payload) of the packets to `port_range` in a tcpdump
    pcap of an Ethernet interface (IPv4 only, as the testbed is)."""
    data = pcap.read_bytes()
    if len(data) < 24:
        return []
    magic = struct.unpack_from("<I", data, 0)[0]
    if magic not in (0xA1B2C3D4, 0xA1B23C4D):
        raise ValueError(f"{pcap}: not a little-endian pcap (magic {magic:#x})")
    frac = 1e-9 if magic == 0xA1B23C4D else 1e-6
    out: list[tuple[float, bytes]] = []
    off = 24
    lo, hi = port_range
    while off + 16 <= len(data):
        sec, sub, incl, _orig = struct.unpack_from("<IIII", data, off)
        frame = data[off + 16 : off + 16 + incl]
        off += 16 + incl
        if len(frame) < 42 or frame[12:14] != b"\x08\x00" or frame[23] != 17:
            continue
        ihl = (frame[14] & 0x0F) * 4
        udp = 14 + ihl
        dport = struct.unpack_from("!H", frame, udp + 2)[0]
        if lo <= dport <= hi:
            out.append((sec + sub * frac, frame[udp + 8 :]))
    return out


def received_audio(pcap: Path, port_range: tuple[int, int]) -> Audio:
    """The A-law RTP streams in `pcap` and the tone they carry."""
    per: dict[int, list[tuple[float, int, bytes]]] = {}
    for t, udp in read_rtp_payloads(pcap, port_range):
        if len(udp) < 12 or udp[0] >> 6 != 2 or udp[1] & 0x7F != PT_PCMA:
            continue  # RTCP, or not G.711 A-law RTP
        seq, _ts, ssrc = struct.unpack_from("!HII", udp, 2)
        cc = udp[0] & 0x0F
        per.setdefault(ssrc, []).append((t, seq, udp[12 + 4 * cc :]))
    streams: list[Stream] = []
    chunks: list[bytes] = []
    for ssrc, pkts in per.items():
        pkts.sort()
        ext, last, wraps = [], None, 0
        for _t, seq, _p in pkts:
            if last is not None and seq < last and last - seq > 0x8000:
                wraps += 1
            last = seq
            ext.append(seq + (wraps << 16))
        seen = set(ext)
        lost = (max(seen) - min(seen) + 1) - len(seen)
        times = [t for t, _s, _p in pkts]
        gaps = [(a, b - a) for a, b in itertools.pairwise(times) if b - a > GAP_S]
        streams.append(Stream(ssrc, len(seen), lost, times[0], times[-1], gaps))
        # In sequence order: what the phone's jitter buffer plays out.
        chunks += [p for _e, (_t, _s, p) in sorted(zip(ext, pkts, strict=True))]
    audio = _ALAW[np.frombuffer(b"".join(chunks), dtype=np.uint8)]
    tone: float | None = None
    share = 0.0
    if len(audio) >= SAMPLE_RATE // 2:
        spectrum = np.abs(np.fft.rfft(audio * np.hanning(len(audio)))) ** 2
        freqs = np.fft.rfftfreq(len(audio), 1 / SAMPLE_RATE)
        peak = int(np.argmax(spectrum[1:])) + 1
        tone = float(freqs[peak])
        band = (freqs > tone - 10) & (freqs < tone + 10)
        share = float(spectrum[band].sum() / spectrum[1:].sum())
    return Audio(streams, tone, share)


def start_capture(sup: Supervisor, phone: Phone, out: Path) -> str:
    """tcpdump of what reaches `phone`'s RTP ports; the process name to stop."""
    lo, hi = phone.rtp_ports
    name = f"cap-{phone.name}"
    out.unlink(missing_ok=True)
    sup.start(
        name,
        ["tcpdump", "-i", topology.HOST_IF, "-n", "-s", "300", "-B", "8192",
         "--time-stamp-precision", "nano", "-w", str(out),
         f"udp and dst host {phone.host.addr} and dst portrange {lo}-{hi}"],
        netns=phone.host.netns,
    )  # fmt: skip
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not (out.exists() and out.stat().st_size >= 24):
        time.sleep(0.05)  # tcpdump writes the file header once its filter is on
    return name
