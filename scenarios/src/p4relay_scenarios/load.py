"""SIPp call load: profiles, a UAC run with a live progress bar, and its summary.

The UAC places calls through the SIP server (OpenSIPS or Kamailio at
198.18.0.10:5060, or [fd00:198:18::10]:5060 over IPv6),
each streaming G.711 A-law both ways at 50 packets/s per direction for the
call's hold time. Numbers come from SIPp's own statistics file (`-trace_stat`,
one line a second); media quality is measured elsewhere (captures, switch).
"""

from __future__ import annotations

import csv
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from p4relay_scenarios import topology
from p4relay_scenarios.stack import SCENARIOS


@dataclass(frozen=True)
class Profile:
    name: str
    rate: float  # calls per second
    calls: int  # calls to place
    hold_s: float  # each call's length (media time)
    limit: int = 0  # max concurrent calls (0: calls)
    about: str = ""

    @property
    def concurrent(self) -> int:
        """Steady-state concurrency: calls alive at once once the ramp is done."""
        return min(self.limit or self.calls, self.calls, int(self.rate * self.hold_s))

    @property
    def duration_s(self) -> float:
        return self.calls / self.rate + self.hold_s


def level(n: int, hold_s: float = 300.0, rate: float = 30.0) -> Profile:
    """n concurrent calls, as in the paper's 750/1500/1800 runs (30 calls/s ramp)."""
    return Profile(f"c{n}", rate, n, max(hold_s, n / rate), n, f"{n} concurrent calls")


PROFILES: dict[str, Profile] = {
    "smoke": Profile("smoke", 5.0, 5, 8.0, about="5 calls, 8 s each"),
    "paper": Profile(
        "paper", 30.0, 900, 270.0, about="the paper's run: 30 calls/s, 900 calls, 300 s in all"
    ),
    "c750": level(750),
    "c1500": level(1500),
    "c1800": level(1800),
    "soak": Profile("soak", 2.0, 7200, 120.0, 240, "an hour at 240 concurrent calls"),
    "demo": Profile("demo", 1.0, 240, 45.0, 45, "about 45 concurrent calls for 4 minutes"),
}


@dataclass
class SippStats:
    created: int = 0
    current: int = 0
    successful: int = 0
    failed: int = 0
    retransmissions: int = 0
    elapsed_s: float = 0.0


@dataclass
class UacResult:
    profile: Profile
    stats: SippStats
    returncode: int
    log: Path
    stat_file: Path


def read_stats(stat_file: Path) -> SippStats | None:
    """The last line of SIPp's -trace_stat CSV (semicolon separated)."""
    try:
        with stat_file.open(newline="") as f:
            rows = list(csv.reader(f, delimiter=";"))
    except OSError:
        return None
    if len(rows) < 2:
        return None
    head, last = rows[0], rows[-1]
    if len(last) < len(head) - 1:
        last = rows[-2] if len(rows) > 2 else last  # a line being written
    row = dict(zip(head, last, strict=False))

    def num(key: str) -> int:
        try:
            return int(float(row.get(key, "0") or 0))
        except ValueError:
            return 0

    # HH:MM:SS:micro
    elapsed = (row.get("ElapsedTime(C)", "") + ":0:0:0:0").split(":")[:4]
    try:
        h, m, sec, us = (int(x) for x in elapsed)
        secs = h * 3600 + m * 60 + sec + us / 1e6
    except ValueError:
        secs = 0.0
    return SippStats(
        created=num("TotalCallCreated"),
        current=num("CurrentCall"),
        successful=num("SuccessfulCall(C)"),
        failed=num("FailedCall(C)"),
        retransmissions=num("Retransmissions(C)"),
        elapsed_s=secs,
    )


def uac_command(
    profile: Profile,
    host: str,
    stat_file: Path,
    err_file: Path,
    builtin: str | None = None,
    scenario: str = "uac.xml",
    service: str | None = None,
    callee: str | None = None,
) -> list[str]:
    """SIPp's command line: one of our scenarios (sipp/), or SIPp's built-in `builtin`;
    over IPv6 when `host` is an IPv6 address (to the SIP server's IPv6 address).
    `service`: the Request-URI's user (`v4`/`v6` pick the trunk's address family);
    `callee`: the Request-URI's host instead of the SIP server's (a trunk's call
    names its callee; SIPp still sends to the SIP server, `-rsa`)."""
    server = f"[{topology.RELAY.addr6}]" if ":" in host else topology.RELAY.addr
    cmd = ["sipp", f"{server}:5060"]
    if callee is not None:
        cmd = ["sipp", f"[{callee}]:5060" if ":" in callee else f"{callee}:5060"]
        cmd += ["-rsa", f"{server}:5060"]
    if builtin is None:
        cmd += ["-sf", str(SCENARIOS / "sipp" / scenario), "-s", service or "p4relay"]
    else:
        cmd += ["-sn", builtin]
        if service is not None:
            cmd += ["-s", service]
    cmd += ["-i", host, "-mi", host, "-p", "5060"]
    cmd += [
        "-r",
        f"{profile.rate:g}",
        "-m",
        str(profile.calls),
        "-d",
        str(int(profile.hold_s * 1000)),
    ]
    if profile.limit:
        cmd += ["-l", str(profile.limit)]
    cmd += ["-nostdin", "-max_socket", "65000", "-rtp_threadtasks", "64"]
    cmd += [
        "-trace_stat",
        "-fd",
        "1",
        "-stf",
        str(stat_file),
        "-trace_err",
        "-error_file",
        str(err_file),
    ]
    return cmd


def run_uac(
    profile: Profile,
    media_dir: Path,
    out_dir: Path,
    *,
    behind_nat: bool = False,
    on_tick: Callable[[SippStats], None] | None = None,
    on_spawn: Callable[[int], None] | None = None,
    stop: Callable[[], bool] | None = None,
    grace_s: float = 30.0,
    tag: str = "uac",
    builtin: str | None = None,
    scenario: str = "uac.xml",
    family: Literal[4, 6] = 4,
    service: str | None = None,
    caller: topology.Host | None = None,
    callee: str | None = None,
) -> UacResult:
    """Place the profile's calls from the UAC host (or from behind the NAT).

    scenario: our SIPp scenario (in sipp/); builtin: one of SIPp's own (`uac`, `uac_pcap`);
    family: the address family the UAC calls from (and reaches the SIP server over);
    service: the Request-URI's user (`v4`/`v6`: the trunk's family, a bridged call);
    caller: another host to call from (the trunk's own calls come from the UAS host),
    callee: the host the Request-URI names (the SIP server routes the call there).
    """
    if behind_nat:
        netns = topology.NATUAC_NS
        host = topology.NATUAC_ADDR6 if family == 6 else topology.NATUAC_ADDR
    else:
        h = caller or topology.UAC
        netns, host = h.netns, h.addr6 if family == 6 else h.addr
    out_dir.mkdir(parents=True, exist_ok=True)
    stat_file = out_dir / f"{tag}-stats.csv"
    stat_file.unlink(missing_ok=True)
    log = out_dir / f"{tag}.log"
    cmd = [
        "ip",
        "netns",
        "exec",
        netns,
        *uac_command(
            profile,
            host,
            stat_file,
            out_dir / f"{tag}-errors.log",
            builtin,
            scenario,
            service,
            callee,
        ),
    ]
    deadline = time.monotonic() + profile.duration_s + grace_s
    with log.open("wb") as out:
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=media_dir
        )
        if on_spawn is not None:
            on_spawn(proc.pid)  # `ip netns exec` execs SIPp in place: the same pid
        try:
            while proc.poll() is None:
                time.sleep(1.0)
                st = read_stats(stat_file)
                if st is not None and on_tick is not None:
                    on_tick(st)
                if (stop is not None and stop()) or time.monotonic() > deadline:
                    proc.terminate()
                    try:
                        proc.wait(10)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                    break
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
    final = read_stats(stat_file) or SippStats()
    return UacResult(profile, final, proc.returncode, log, stat_file)
