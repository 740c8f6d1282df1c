"""IPv6 end to end on the dual-stack testbed: SIPp calls over IPv6 through the
SIP server -> rtpagent -> RTPProxy, media relayed by the switch's IPv6 tables.

The cases share the e2e stack (conftest): calls over IPv6 with the project's
scenario and with SIPp's stock `uac_pcap` against its stock `uas`, once per
SIP server; with OpenSIPS a bridged call (an IPv4 caller, the trunk over
IPv6: RTPProxy bridges it, the call stays there with its reason), a NAT66
caller, the trunk's own call over IPv6, a re-INVITE in a bridged call, a
re-INVITE that moves the callee's media port, and a media timeout. Calls are
few and short (CI time).
"""

from __future__ import annotations

import asyncio
import ipaddress
import subprocess
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, Literal

import pytest
from p4relay_scenarios import rtpp, switchcfg, topology
from p4relay_scenarios.agent_metrics import agent_count
from p4relay_scenarios.load import Profile, UacResult, run_uac
from p4relay_scenarios.procs import udp_bound_in
from p4relay_scenarios.stack import GRPC_ADDR, RELAY_PORTS, SCENARIOS, SIP_PORT, Stack
from p4relay_switch.client import ReadEntry, SwitchClient
from p4relay_testsupport import wait_value as wait_for

UAS_PORT = topology.UAS.port
RTPP = ("npkts_rcvd", "npkts_relayed")
# What SIPp's stock uac_pcap plays (Debian's sip-tester keeps the recordings here).
SIPP_PCAPS = (Path("/usr/share/sip-tester"), Path("/usr/share/sipp"), Path("/usr/local/share/sipp"))
PCAP_RTP = 236  # RTP packets in g711a.pcap


def entries6() -> tuple[int, int]:
    return asyncio.run(switchcfg.relay_entry_count(GRPC_ADDR, family=6))


def switch_tx(port: int) -> int:
    stats = asyncio.run(switchcfg.port_counters(GRPC_ADDR, [port]))[port]
    for key in ("$FramesTransmittedAll", "$FramesTransmittedOK"):
        if key in stats:
            return stats[key]
    raise AssertionError(f"no transmit counter in {sorted(stats)}")


def v6_calls(
    stack: Stack,
    tag: str,
    n: int,
    hold_s: float,
    *,
    family: Literal[4, 6] = 6,
    nat: bool = False,
    service: str | None = None,
    stop: Callable[[], bool] | None = None,
) -> UacResult:
    prof = Profile(tag, rate=5.0, calls=n, hold_s=hold_s, limit=n)
    return run_uac(
        prof, stack.media_dir, stack.cfg.run_dir / "load", tag=f"{tag}-{stack.cfg.sip}",
        behind_nat=nat, family=family, service=service, stop=stop,
    )  # fmt: skip


def sessions_from(stack: Stack, uac_host: str, since: float) -> list[dict[str, Any]]:
    """Sessions started since `since` by SIPp on `uac_host` (its Call-IDs name it)."""
    api = stack.api()
    try:
        got = api.all_sessions(started_from=_iso(since))
    finally:
        api.close()
    return [s for s in got if s["call_id"].rsplit("@", 1)[-1].strip("[]") == uac_host]


def _iso(t: float) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(t, dt.UTC).isoformat()


def _ts(iso: str) -> float:
    import datetime as dt

    return dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def watch_entries(seen: dict[str, int]) -> Callable[[], bool]:
    """A UAC `stop` hook that records the most IPv6 relay entries seen (never stops)."""

    def tick() -> bool:
        seen["max"] = max(seen.get("max", 0), entries6()[0])
        return False

    return tick


@pytest.mark.each_sip_server
def test_ipv6_calls_are_offloaded_to_the_switch(stack: Stack) -> None:
    """Two calls from the UAC's IPv6 address to the trunk over IPv6: the switch's
    IPv6 relay carries the media (RTPProxy almost none), the entries leave at
    the BYEs, and the server shows the calls with IPv6 parties and MOS."""
    t0 = time.time() - 1
    before = rtpp.stats(*RTPP)
    tx0 = switch_tx(UAS_PORT)
    seen: dict[str, int] = {}
    result = v6_calls(stack, "v6-calls", 2, 6.0, stop=watch_entries(seen))
    ended = time.monotonic()
    tx1 = switch_tx(UAS_PORT)
    after = rtpp.stats(*RTPP)
    assert result.stats.successful == 2, f"SIPp: {result.stats} (log {result.log})"
    assert result.stats.failed == 0, result.stats
    assert seen.get("max", 0) >= 4, f"IPv6 calls not offloaded: {seen}"
    # ~6 s of media each way per call at 50 packets/s, through the switch.
    assert tx1 - tx0 >= 2 * 5 * 50, f"switch sent {tx1 - tx0} frames to the UAS"
    relayed = after["npkts_relayed"] - before["npkts_relayed"]
    assert relayed <= 0.05 * 2 * 2 * 6 * 50, f"RTPProxy relayed {relayed} packets"
    # Teardown: the BYEs remove every IPv6 entry, long before the idle timeout.
    wait_for(lambda: entries6() == (0, 0) or None, 5, "IPv6 relay entries removed at the BYEs")
    assert time.monotonic() - ended < 5

    def ended_with_mos() -> list[dict[str, Any]] | None:
        got = sessions_from(stack, topology.UAC.addr6, t0)
        done = [s for s in got if s["state"] == "ended" and s["mos_avg"] is not None]
        return done if len(done) >= 2 else None

    done = wait_for(ended_with_mos, 20, "2 ended IPv6 sessions with MOS in the API")
    assert all(s["offloaded"] for s in done), [s["offload_reason"] for s in done]
    assert all(s["mos_avg"] > 4.0 for s in done), [s["mos_avg"] for s in done]
    assert all(s["caller"].startswith(f"[{topology.UAC.addr6}]:") for s in done), done
    assert all(s["callee"].startswith(f"[{topology.UAS.addr6}]:") for s in done), done
    # The server's prefix filter finds them by the caller's /64.
    api = stack.api()
    try:
        mine = {s["id"] for s in api.all_sessions(prefix=topology.UAC.v6.subnet)}
    finally:
        api.close()
    assert {s["id"] for s in done} <= mine


@pytest.mark.each_sip_server
def test_stock_uac_pcap_over_ipv6(stack: Stack, tmp_path: Path) -> None:
    """SIPp's own `uac_pcap` from the UAC's IPv6 address against its own `uas
    -rtp_echo` on the UAS's: offloaded, the recording and its echo relayed by
    the switch."""
    work = tmp_path / "stock"
    (work / "pcap").mkdir(parents=True)
    for name in ("g711a.pcap", "dtmf_2833_1.pcap"):
        src = next((d / name for d in SIPP_PCAPS if (d / name).exists()), None)
        assert src is not None, f"SIPp's {name} not found in {[str(d) for d in SIPP_PCAPS]}"
        (work / "pcap" / name).symlink_to(src)
    uas = topology.UAS.addr6
    stack.sup.stop("sipp-uas6")
    try:
        stack.sup.start(
            "sipp-uas6-stock",
            ["sipp", "-sn", "uas", "-rtp_echo", "-i", uas, "-mi", uas, "-p", str(SIP_PORT),
             "-nostdin", "-trace_err", "-error_file", str(tmp_path / "uas-errors.log")],
            netns=topology.UAS.netns,
            cwd=work,
        )  # fmt: skip
        stack.sup.wait_ready(
            "sipp-uas6-stock",
            partial(udp_bound_in, topology.UAS.netns, SIP_PORT, uas),
            20,
            "SIP on the UAS's IPv6 address",
        )
        before = rtpp.stats(*RTPP)
        tx0 = switch_tx(UAS_PORT)
        seen: dict[str, int] = {}
        pcap = run_uac(
            Profile("v6-uac-pcap", rate=2.0, calls=1, hold_s=9.0, limit=1),
            work,
            stack.cfg.run_dir / "load",
            tag=f"v6-uac-pcap-{stack.cfg.sip}",
            builtin="uac_pcap",
            family=6,
            stop=watch_entries(seen),
        )
        tx1 = switch_tx(UAS_PORT)
        after = rtpp.stats(*RTPP)
        assert pcap.stats.successful == 1, f"SIPp uac_pcap: {pcap.stats} (log {pcap.log})"
        wait_for(lambda: entries6() == (0, 0) or None, 5, "IPv6 entries removed at the BYE")
    finally:
        stack.sup.stop("sipp-uas6-stock")
        stack.sipp_uas(ipv6=True)
    assert seen.get("max", 0) >= 4, f"uac_pcap call not offloaded: {seen}"
    assert tx1 - tx0 >= PCAP_RTP, f"switch sent {tx1 - tx0} frames to the UAS"
    relayed = after["npkts_relayed"] - before["npkts_relayed"]
    assert relayed <= 0.05 * 2 * PCAP_RTP, f"RTPProxy relayed {relayed} packets"


def test_bridged_call_is_relayed_by_rtpproxy_with_its_reason(stack: Stack) -> None:
    """An IPv4 caller dials the trunk over IPv6 (Request-URI user `v6`): the SIP
    server has RTPProxy bridge the families; the switch does not translate
    headers, so the call stays on RTPProxy with the reason `family_bridge`."""
    t0 = time.time() - 1
    before = rtpp.stats(*RTPP)
    result = v6_calls(stack, "v6-bridged", 1, 5.0, family=4, service="v6")
    after = rtpp.stats(*RTPP)
    assert result.stats.successful == 1, f"SIPp: {result.stats} (log {result.log})"
    relayed = after["npkts_relayed"] - before["npkts_relayed"]
    assert relayed >= 0.8 * 2 * 5 * 50, f"RTPProxy relayed only {relayed} packets"
    assert entries6() == (0, 0)

    def bridged() -> list[dict[str, Any]] | None:
        return sessions_from(stack, topology.UAC.addr, t0) or None

    s = wait_for(bridged, 20, "the bridged session in the API")[0]
    assert not s["offloaded"]
    assert s["offload_reason"] == "family_bridge", s


def test_nat66_call_is_offloaded_after_learning(stack: Stack) -> None:
    """A caller behind the NAT66 firewall: its signalled address is private, the
    switch's IPv6 learning digest names the NAT's address and port, and the
    call is offloaded from then on."""
    t0 = time.time() - 1
    before = rtpp.stats(*RTPP)
    seen: dict[str, int] = {}
    result = v6_calls(stack, "v6-nat", 1, 6.0, nat=True, stop=watch_entries(seen))
    after = rtpp.stats(*RTPP)
    assert result.stats.successful == 1, f"SIPp: {result.stats} (log {result.log})"
    assert seen.get("max", 0) >= 2, f"the NAT66 call was never offloaded: {seen}"
    relayed = after["npkts_relayed"] - before["npkts_relayed"]
    assert relayed < 0.2 * 2 * 6 * 50, f"RTPProxy relayed {relayed} packets"

    def offloaded() -> list[dict[str, Any]] | None:
        got = sessions_from(stack, topology.NATUAC_ADDR6, t0)
        return got if got and all(s["offloaded"] for s in got) else None

    wait_for(offloaded, 20, "the NAT66 session offloaded in the API")
    wait_for(lambda: entries6() == (0, 0) or None, 5, "IPv6 entries removed")


# The SIPp UAS's media port (SIPp's default -mp), and where uas-newport.xml moves it.
UAS_MEDIA_PORT, NEW_MEDIA_PORT = 6000, 6002


def all_entries() -> tuple[int, int, int, int]:
    """Every call entry on the switch, both families: relay, leg_rewrite, relay_guard (IPv4),
    then IPv6's relay6 + leg_rewrite6 + relay_guard6 in one sum."""
    v4 = asyncio.run(switchcfg.relay_entry_count(GRPC_ADDR))
    g4 = asyncio.run(switchcfg.guard_entries(GRPC_ADDR))
    g6 = asyncio.run(switchcfg.guard_entries(GRPC_ADDR, family=6))
    return v4[0], v4[1], g4, sum(entries6()) + g6


def uas_media6() -> tuple[set[int], set[int]]:
    """The UAS's media ports in the switch's IPv6 entries: the source ports of
    its relay6 keys (where it sends from) and the destination ports of the
    leg_rewrite6 rewrites towards it (where it is sent to)."""

    async def read() -> tuple[list[ReadEntry], list[ReadEntry]]:
        sw = SwitchClient(GRPC_ADDR, client_id=11, reconnect=False, connect_timeout_s=30)
        await sw.connect()
        try:
            return await sw.read(switchcfg.T_RELAY6), await sw.read(switchcfg.T_LEG6)
        finally:
            await sw.close()

    def num(v: object) -> int:
        assert isinstance(v, int), v
        return v

    uas = int(ipaddress.IPv6Address(topology.UAS.addr6))
    relay6, legs6 = asyncio.run(read())
    sends = {num(e.key["hdr.udp.src_port"]) for e in relay6 if e.key["hdr.ipv6.src_addr"] == uas}
    sent_to = {num(e.data["dst_port"]) for e in legs6 if e.data.get("dst_addr") == uas}
    return sends, sent_to


@pytest.mark.each_sip_server
def test_trunk_call_over_ipv6_is_offloaded(stack: Stack) -> None:
    """The trunk's own call over IPv6: SIPp on the UAS host (the trunk) sends the
    INVITE to the SIP server's IPv6 address naming the callee on the UAC host; the
    SIP server routes it there by its Request-URI, and the switch relays its media."""
    callee = topology.UAC.addr6
    stack.sup.stop("sipp-uas6")  # the trunk's SIPp calls from its SIP and media ports
    stack.sup.start(
        "sipp-callee6",
        ["sipp", "-sf", str(SCENARIOS / "sipp" / "uas.xml"), "-i", callee, "-mi", callee,
         "-p", str(SIP_PORT), "-nostdin", "-trace_err",
         "-error_file", str(stack.cfg.run_dir / "logs" / "sipp-callee6-errors.log")],
        netns=topology.UAC.netns,
        cwd=stack.prepare_media(),
    )  # fmt: skip
    try:
        stack.sup.wait_ready(
            "sipp-callee6",
            partial(udp_bound_in, topology.UAC.netns, SIP_PORT, callee),
            20,
            "SIP on the UAC's IPv6 address",
        )
        t0 = time.time() - 1
        before = rtpp.stats(*RTPP)
        tx0 = switch_tx(topology.UAC.port)
        seen: dict[str, int] = {}
        result = run_uac(
            Profile("v6-trunk", rate=2.0, calls=1, hold_s=5.0, limit=1),
            stack.media_dir,
            stack.cfg.run_dir / "load",
            tag=f"v6-trunk-{stack.cfg.sip}",
            family=6,
            caller=topology.UAS,
            callee=callee,
            stop=watch_entries(seen),
        )
        tx1 = switch_tx(topology.UAC.port)
        after = rtpp.stats(*RTPP)
        assert result.stats.successful == 1, f"SIPp: {result.stats} (log {result.log})"
        wait_for(lambda: entries6() == (0, 0) or None, 5, "IPv6 entries removed at the BYE")
    finally:
        stack.sup.stop("sipp-callee6")
        stack.sipp_uas(ipv6=True)
    assert seen.get("max", 0) >= 2, f"the trunk's call was not offloaded: {seen}"
    # ~5 s of the trunk's media at 50 packets/s to the callee, through the switch.
    assert tx1 - tx0 >= 4 * 50, f"switch sent {tx1 - tx0} frames to the callee"
    relayed = after["npkts_relayed"] - before["npkts_relayed"]
    assert relayed <= 0.05 * 2 * 5 * 50, f"RTPProxy relayed {relayed} packets"

    def ended_with_mos() -> list[dict[str, Any]] | None:
        got = sessions_from(stack, topology.UAS.addr6, t0)
        return got if got and all(s["state"] == "ended" and s["mos_avg"] for s in got) else None

    (s,) = wait_for(ended_with_mos, 20, "the trunk's IPv6 session ended with MOS in the API")
    assert s["offloaded"], s["offload_reason"]
    assert s["caller"].startswith(f"[{topology.UAS.addr6}]:"), s
    assert s["callee"].startswith(f"[{callee}]:"), s
    assert s["mos_avg"] > 4.0, s


def test_reinvite_in_a_bridged_call_stays_on_rtpproxy(stack: Stack) -> None:
    """A re-INVITE in a call bridged between IPv4 and IPv6: RTPProxy keeps relaying
    it before and after (the re-INVITE's offer and answer carry the bridging
    flags), the switch never gets an entry of it, and it ends with `family_bridge`."""
    stack.sup.stop("sipp-uas6")
    try:
        stack.sipp_uas("uas-reinvite.xml", ipv6=True)
        t0 = time.time() - 1
        offloads0 = agent_count("rtpagent_offloads_total")
        bridged0 = agent_count("rtpagent_fallbacks_total", reason="family_bridge")
        start = time.monotonic()
        ticks: list[tuple[float, int, tuple[int, int, int, int]]] = []

        def watch() -> bool:
            relayed = rtpp.stats("npkts_relayed")["npkts_relayed"]
            ticks.append((time.monotonic() - start, relayed, all_entries()))
            return False

        result = run_uac(
            Profile("v6-bridged-reinvite", rate=2.0, calls=1, hold_s=6.0, limit=1),
            stack.media_dir,
            stack.cfg.run_dir / "load",
            tag=f"v6-bridged-reinvite-{stack.cfg.sip}",
            scenario="uac-reoffer.xml",
            family=4,
            service="v6",
            stop=watch,
        )
    finally:
        stack.sup.stop("sipp-uas6")
        stack.sipp_uas(ipv6=True)
    assert result.stats.successful == 1, f"SIPp: {result.stats} (log {result.log})"
    assert result.stats.failed == 0, result.stats
    # Nothing of the call on the switch at any time, not even half of it.
    assert all(e == (0, 0, 0, 0) for _, _, e in ticks), ticks
    assert agent_count("rtpagent_offloads_total") == offloads0
    # The re-INVITE comes 3 s after the ACK, the BYE 6 s later: RTPProxy relays
    # both ways (100 packets/s) after the re-INVITE as before it.
    early = [(t, r) for t, r, _ in ticks if t <= 3.0]
    late = [(t, r) for t, r, _ in ticks if 4.5 <= t <= 8.5]
    assert early and len(late) >= 2, ticks
    rate = (late[-1][1] - late[0][1]) / (late[-1][0] - late[0][0])
    assert rate >= 60, f"RTPProxy relayed {rate:.0f} packets/s after the re-INVITE: {ticks}"

    def bridged() -> list[dict[str, Any]] | None:
        got = sessions_from(stack, topology.UAC.addr, t0)
        return got if got and got[0]["state"] == "ended" else None

    (s,) = wait_for(bridged, 20, "the bridged session ended in the API")
    assert not s["offloaded"]
    assert s["offload_reason"] == "family_bridge", s
    assert agent_count("rtpagent_fallbacks_total", reason="family_bridge") > bridged0


def test_reinvite_moving_the_callee_port_moves_the_entries(stack: Stack) -> None:
    """An IPv6 call whose callee answers a re-INVITE with another media port (and
    sends from it from then on): the switch's IPv6 entries follow, to and from
    the new port, and the switch keeps relaying the call."""
    pcap = stack.prepare_media() / "pcap" / "g711a.pcap"
    if not pcap.exists():
        src = next((d / pcap.name for d in SIPP_PCAPS if (d / pcap.name).exists()), None)
        assert src is not None, f"SIPp's {pcap.name} not found in {[str(d) for d in SIPP_PCAPS]}"
        pcap.parent.mkdir(exist_ok=True)
        pcap.symlink_to(src)
    stack.sup.stop("sipp-uas6")
    try:
        stack.sipp_uas("uas-newport.xml", ipv6=True)
        modified0 = agent_count("rtpagent_offload_modifications_total")
        ticks: list[tuple[float, set[int], set[int], int]] = []
        start = time.monotonic()

        def watch() -> bool:
            sends, sent_to = uas_media6()
            ticks.append((time.monotonic() - start, sends, sent_to, switch_tx(topology.UAC.port)))
            return False

        before = rtpp.stats(*RTPP)
        result = run_uac(
            Profile("v6-newport", rate=2.0, calls=1, hold_s=5.0, limit=1),
            stack.media_dir,
            stack.cfg.run_dir / "load",
            tag=f"v6-newport-{stack.cfg.sip}",
            scenario="uac-reoffer.xml",
            family=6,
            stop=watch,
        )
        after = rtpp.stats(*RTPP)
        wait_for(lambda: entries6() == (0, 0) or None, 5, "IPv6 entries removed at the BYE")
    finally:
        stack.sup.stop("sipp-uas6")
        stack.sipp_uas(ipv6=True)
    assert result.stats.successful == 1, f"SIPp: {result.stats} (log {result.log})"
    assert result.stats.failed == 0, result.stats
    # Offloaded first on the callee's media port, then on its new port both ways
    # (relay6 keys its RTP and its RTCP, port + 1).
    old, new = UAS_MEDIA_PORT, NEW_MEDIA_PORT
    on_old = [i for i, (_, s, d, _) in enumerate(ticks) if s == {old, old + 1} and d == {old}]
    on_new = [i for i, (_, s, d, _) in enumerate(ticks) if s == {new, new + 1} and d == {new}]
    assert on_old and len(on_new) >= 2 and on_old[-1] < on_new[0], ticks
    assert agent_count("rtpagent_offload_modifications_total") > modified0
    # The callee's media from its new port (the recording: 236 packets in 7 s)
    # reaches the caller through the switch; RTPProxy relays almost nothing.
    (t0, *_, tx0), (t1, *_, tx1) = ticks[on_new[0]], ticks[on_new[-1]]
    assert t1 - t0 >= 1.5, ticks
    assert (tx1 - tx0) / (t1 - t0) >= 20, f"to the caller from the new port: {ticks}"
    relayed = after["npkts_relayed"] - before["npkts_relayed"]
    assert relayed <= 0.1 * 2 * 8 * 50, f"RTPProxy relayed {relayed} packets"


MEDIA_BLOCK6 = "p4r_media_block6"


def _block_media6(netns: str, on: bool) -> None:
    """The host's link stops carrying IPv6 media to the relay's ports (nftables egress hook)."""
    lo, hi = RELAY_PORTS
    if not on:
        cmd = ["ip", "netns", "exec", netns, "nft", "delete", "table", "netdev", MEDIA_BLOCK6]
        subprocess.run(cmd, check=False, timeout=10)
        return
    rules = (
        f"table netdev {MEDIA_BLOCK6} {{\n"
        f"  chain out {{\n"
        f'    type filter hook egress device "{topology.HOST_IF}" priority 0; policy accept;\n'
        f"    ip6 daddr {topology.RELAY.addr6} udp dport {lo}-{hi} drop\n"
        f"  }}\n"
        f"}}\n"
    )
    subprocess.run(
        ["ip", "netns", "exec", netns, "nft", "-f", "-"],
        input=rules, text=True, check=True, timeout=10,
    )  # fmt: skip


def test_ipv6_media_timeout_ends_the_call(stack: Stack) -> None:
    """An IPv6 call whose media stops both ways: its switch entries go idle,
    rtpagent ends the session and the SIP server sends the BYEs."""
    assert stack.cfg.idle_ttl_ms is not None
    idle_s = stack.cfg.idle_ttl_ms / 1000
    box: dict[str, UacResult] = {}
    abort = threading.Event()
    th = threading.Thread(
        target=lambda: box.update(r=v6_calls(stack, "v6-timeout", 1, 60.0, stop=abort.is_set))
    )
    th.start()
    blocked: list[str] = []
    try:
        wait_for(lambda: entries6()[0] >= 2 or None, 15, "the IPv6 call offloaded")
        tx = switch_tx(UAS_PORT)
        wait_for(lambda: switch_tx(UAS_PORT) > tx + 10 or None, 10, "media through the switch")
        for netns in (topology.UAC.netns, topology.UAS.netns):
            _block_media6(netns, True)
            blocked.append(netns)
        t_stop = time.monotonic()
        th.join(idle_s + 10)  # the UAC's call ends with the BYE it is sent
        ended_in = time.monotonic() - t_stop
    finally:
        for netns in blocked:
            _block_media6(netns, False)
        abort.set()  # a failed case must not leave its UAC holding the SIP port
        th.join(30)
    assert ended_in < idle_s + 8, f"the call was not ended ({ended_in:.0f} s)"
    assert box["r"].stats.current == 0, box["r"].stats
    assert box["r"].stats.failed == 1, box["r"].stats  # a BYE the UAC did not expect
    wait_for(lambda: entries6() == (0, 0) or None, 10, "IPv6 relay entries removed")


@pytest.fixture(autouse=True)
def _alive(stack: Stack) -> None:
    dead = [n for n in stack.dead() if not n.startswith("cap")]
    assert not dead, f"components died: {dead}"
