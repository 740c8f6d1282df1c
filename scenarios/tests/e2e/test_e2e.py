"""End to end: SIPp calls through the SIP server -> rtpagent -> RTPProxy, media in the switch.

The cases run on one stack (conftest): the SIP-facing ones once with OpenSIPS
and once with Kamailio (`each_sip_server`), the others with OpenSIPS; the
switch-down cases run last because they take the softswitch away.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from p4relay_scenarios import capture, rtpp, switchcfg, topology
from p4relay_scenarios.agent_metrics import AgentMetrics, agent_count
from p4relay_scenarios.load import Profile, UacResult, run_uac
from p4relay_scenarios.procs import udp_bound_in
from p4relay_scenarios.stack import GRPC_ADDR, RELAY_PORTS, SIP_TIMEOUT_SOCK, Stack
from p4relay_testsupport import wait_value

UAS_PORT = topology.UAS.port
RTPP_COUNTERS = ("npkts_rcvd", "npkts_relayed")
SIP_NOTIFY_PORT = int(SIP_TIMEOUT_SOCK.rsplit(":", 1)[1])


def calls(
    stack: Stack,
    name: str,
    n: int,
    hold_s: float,
    *,
    nat: bool = False,
    stop: Callable[[], bool] | None = None,
) -> UacResult:
    prof = Profile(name, rate=5.0, calls=n, hold_s=hold_s, limit=n)
    out = stack.cfg.run_dir / "load"
    return run_uac(prof, stack.media_dir, out, behind_nat=nat, tag=name, stop=stop)


def sessions_of(stack: Stack, since: float) -> list[dict[str, Any]]:
    api = stack.api()
    try:
        out = []
        for s in api.sessions():
            started = s["started_at"]
            if _ts(started) >= since:
                out.append(s)
        return out
    finally:
        api.close()


def idle_ttl_s(stack: Stack) -> float:
    assert stack.cfg.idle_ttl_ms is not None, "the e2e stack sets rtpagent's idle TTL"
    return stack.cfg.idle_ttl_ms / 1000


def _ts(iso: str) -> float:
    import datetime as dt

    return dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def switch_tx(port: int) -> int:
    return asyncio.run(switchcfg.frames_transmitted(GRPC_ADDR, port))


def entries() -> tuple[int, int]:
    return asyncio.run(switchcfg.relay_entry_count(GRPC_ADDR))


MEDIA_BLOCK_TABLE = "p4r_media_block"


def drop_media(netns: str) -> None:
    """The host's link stops carrying RTP/RTCP to the relay's ports (an nftables egress
    hook on the device: SIPp's sends still succeed, nothing leaves the host)."""
    lo, hi = RELAY_PORTS
    rules = (
        f"table netdev {MEDIA_BLOCK_TABLE} {{\n"
        f"  chain out {{\n"
        f'    type filter hook egress device "{topology.HOST_IF}" priority 0; policy accept;\n'
        f"    ip daddr {topology.RELAY.addr} udp dport {lo}-{hi} drop\n"
        f"  }}\n"
        f"}}\n"
    )
    subprocess.run(
        ["ip", "netns", "exec", netns, "nft", "-f", "-"],
        input=rules, text=True, check=True, timeout=10,
    )  # fmt: skip


def undrop_media(netns: str) -> None:
    subprocess.run(
        ["ip", "netns", "exec", netns, "nft", "delete", "table", "netdev", MEDIA_BLOCK_TABLE],
        check=False,
        timeout=10,
    )


def sip_timeline(pcap: Path) -> tuple[list[float], list[float]]:
    """(times of timeout notifications to the SIP server, times of BYEs it sent) in a capture."""
    tshark = shutil.which("tshark")
    assert tshark, "tshark not installed (make setup)"

    def times(display_filter: str) -> list[float]:
        out = subprocess.run(
            [
                tshark,
                "-r",
                str(pcap),
                "-Y",
                display_filter,
                "-T",
                "fields",
                "-e",
                "frame.time_epoch",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
        return sorted(float(x) for x in out.split())

    notified = times(f"tcp.dstport == {SIP_NOTIFY_PORT} && tcp.len > 0")
    byes = times(f'sip.Method == "BYE" && ip.src == {topology.RELAY.addr}')
    return notified, byes


@pytest.mark.each_sip_server
def test_calls_relayed_by_the_switch(stack: Stack, tmp_path: Path) -> None:
    t0 = time.time() - 1
    before = rtpp.stats(*RTPP_COUNTERS)
    # Every frame the UAS host receives, to compare with the switch's transmit counter.
    cap_all = capture.PortCapture(
        "cap-uas-all", topology.HOST_IF, "", tmp_path / "uas-all.pcap", netns=topology.UAS.netns
    )
    caps = capture.start_captures(stack.sup, tmp_path, RELAY_PORTS)
    stack.sup.start(
        cap_all.name,
        [
            "tcpdump",
            "-i",
            cap_all.ifname,
            "-Q",
            "in",
            "-n",
            "-s",
            "64",
            "--immediate-mode",
            "-U",
            "-w",
            str(cap_all.path),
        ],
        netns=cap_all.netns,
    )
    capture.wait_capturing(stack.sup, [cap_all.name])
    tx0 = switch_tx(UAS_PORT)

    result = calls(stack, "e2e-smoke", 5, 8.0)

    # The calls' last frames in the captures before they stop: the frames the
    # switch sent to the UAS host are in its capture (written as they arrive;
    # the check below allows 2 apart).
    tx1 = switch_tx(UAS_PORT)
    wait_value(
        lambda: capture.count_frames(cap_all.path) >= tx1 - tx0 - 2 or None,
        5,
        "the switch's frames to the UAS in its capture",
    )
    capture.stop_captures(stack.sup, [*caps, cap_all])
    after = rtpp.stats(*RTPP_COUNTERS)

    assert result.stats.successful == 5, f"SIPp: {result.stats} (log {result.log})"
    assert result.stats.failed == 0

    ingress = capture.read_rtp(caps[0].path)
    egress = capture.read_rtp(caps[1].path)
    m = capture.relay_path_metrics(ingress, egress)
    # The UAS receives the media: 5 calls x ~7 s x 50 packets/s, all through.
    assert m.streams == 5
    assert m.packets_in > 5 * 6 * 50
    assert m.loss_pct < 1.0, m

    # RTPProxy itself relayed at most 1 % of the calls' RTP (both directions).
    relayed = after["npkts_relayed"] - before["npkts_relayed"]
    rtp_total = 2 * len(ingress)
    assert relayed <= 0.01 * rtp_total, f"RTPProxy relayed {relayed} of {rtp_total}"

    # The switch's transmit counter on the UAS port equals what the UAS captured.
    frames = capture.count_frames(cap_all.path)
    assert abs((tx1 - tx0) - frames) <= 2, f"switch sent {tx1 - tx0}, UAS captured {frames}"

    # Every switch entry is gone after the BYEs.
    wait_value(lambda: entries() == (0, 0) or None, 10, "relay entries removed")

    # The sessions are in the server with MOS.
    def ended_with_mos() -> list[dict[str, Any]] | None:
        got = [s for s in sessions_of(stack, t0) if s["call_id"].endswith("@198.18.1.10")]
        done = [s for s in got if s["state"] == "ended" and s["mos_avg"] is not None]
        return done if len(done) >= 5 else None

    done = wait_value(ended_with_mos, 20, "5 ended sessions with MOS in the API")
    assert all(s["offloaded"] for s in done), [s["offload_reason"] for s in done]
    assert all(s["mos_avg"] > 4.0 for s in done), [s["mos_avg"] for s in done]


@pytest.mark.each_sip_server
def test_nat_call_offloaded_after_learning(stack: Stack) -> None:
    t0 = time.time() - 1
    before = rtpp.stats(*RTPP_COUNTERS)
    seen: dict[str, int] = {}

    def watch() -> None:
        # During the call the switch holds the call's entries, keyed by the NAT's address.
        n, _ = entries()
        seen["max"] = max(seen.get("max", 0), n)

    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            watch()
            stop.wait(1.0)  # a poll each second; ends at once with the calls

    th = threading.Thread(target=poll, daemon=True)
    th.start()
    try:
        result = calls(stack, "e2e-nat", 2, 10.0, nat=True)
    finally:
        stop.set()
        th.join()
    after = rtpp.stats(*RTPP_COUNTERS)
    assert result.stats.successful == 2, f"SIPp: {result.stats} (log {result.log})"
    assert seen.get("max", 0) >= 4, "the NAT calls were never offloaded to the switch"
    # Learning takes the first packets through RTPProxy; the rest goes through the switch.
    relayed = after["npkts_relayed"] - before["npkts_relayed"]
    assert relayed < 0.2 * (2 * 2 * 10 * 50), f"RTPProxy relayed {relayed} packets"

    def offloaded() -> list[dict[str, Any]] | None:
        got = [s for s in sessions_of(stack, t0) if s["call_id"].endswith("@100.64.77.10")]
        return got if len(got) >= 2 and all(s["offloaded"] for s in got) else None

    wait_value(offloaded, 20, "the NAT sessions offloaded in the API")
    wait_value(lambda: entries() == (0, 0) or None, 10, "relay entries removed")


def attacker_counted() -> float:
    """A stranger's digests on an offloaded call's guarded port, as rtpagent counts
    them: a foreign source once the party's stream is latched, a refused learn (not
    the signalled address) when the spray beats the party's first packet."""
    m = AgentMetrics.read()
    return m.required("rtpagent_guard_foreign_sources_total") + m.count(
        "rtpagent_learn_refused_total", reason="not_signalled_address"
    )


def test_attacker_cannot_inject_media(stack: Stack, tmp_path: Path) -> None:
    """RTP sprayed at the relay's port range from another host never reaches the callee.

    An offloaded call's media never reaches RTPProxy, so its streams stay unlatched;
    the switch's relay_guard (installed by rtpagent with the call) drops packets from
    any other source to the call's relay ports before they can latch RTPProxy.
    """
    caps = capture.start_captures(stack.sup, tmp_path, RELAY_PORTS)
    counted0 = attacker_counted()
    guarded: dict[str, int] = {}
    spray = (
        "import socket,struct;s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
        "for rnd in range(2):\n"
        f" for p in range({RELAY_PORTS[0]},{RELAY_PORTS[1]},2):\n"
        "  s.sendto(struct.pack('!BBHII',0x80,8,rnd,0,0xBADBAD)+bytes(160),"
        f"('{topology.RELAY.addr}',p))\n"
    )
    attackers: list[subprocess.Popen[bytes]] = []

    def stop_watch() -> bool:
        # While the calls are up, their relay ports are guarded in the switch; the
        # spray starts once both calls' ports (4 each) are.
        guarded["max"] = max(guarded.get("max", 0), asyncio.run(switchcfg.guard_entries(GRPC_ADDR)))
        if not attackers and guarded["max"] >= 8:
            attackers.append(
                subprocess.Popen(
                    ["ip", "netns", "exec", topology.ATTACKER.netns, "python3", "-c", spray]
                )
            )
        return False

    try:
        result = calls(stack, "e2e-attack", 2, 8.0, stop=stop_watch)
    finally:
        for attacker in attackers:
            attacker.wait(30)
    assert attackers, f"the calls' relay ports were never guarded: {guarded}"
    capture.stop_captures(stack.sup, caps)
    assert attackers[0].returncode == 0
    assert result.stats.successful == 2, f"SIPp: {result.stats} (log {result.log})"
    assert guarded.get("max", 0) >= 8, f"2 calls x 4 relay ports guarded: {guarded}"
    egress = capture.read_rtp(caps[1].path)
    assert len(egress) > 2 * 6 * 50
    leaked = int((egress[:, 1] == 0xBADBAD).sum())
    assert leaked == 0, f"{leaked} injected RTP packets reached the callee"
    # The spray hit the calls' guarded ports: the switch raised learn digests for the
    # foreign source and rtpagent counted them.
    wait_value(
        lambda: attacker_counted() > counted0 or None,
        10,
        "rtpagent counting the attacker as a foreign source or a refused learn",
    )
    wait_value(
        lambda: asyncio.run(switchcfg.guard_entries(GRPC_ADDR)) == 0 or None,
        10,
        "guard entries removed after BYE",
    )


def _int(v: object) -> int:
    """An exact key read back from the relay table: an integer."""
    assert isinstance(v, int), v
    return v


async def caller_flows() -> list[tuple[int, int, int]]:
    """(src port, relay port, ingress port) of the caller's installed relay entries."""
    from p4relay_switch.client import SwitchClient

    sw = SwitchClient(GRPC_ADDR, client_id=8, reconnect=False, connect_timeout_s=30.0)
    await sw.connect()
    try:
        caller = int.from_bytes(bytes(map(int, topology.UAC.addr.split("."))), "big")
        return [
            (
                _int(e.key["hdr.udp.src_port"]),
                _int(e.key["hdr.udp.dst_port"]),
                _int(e.key["ig_md.bound_port"]),
            )
            for e in await sw.read(switchcfg.T_RELAY)
            if e.key["hdr.ipv4.src_addr"] == caller
        ]
    finally:
        await sw.close()


def test_spoofed_caller_on_another_port_is_not_relayed(stack: Stack, tmp_path: Path) -> None:
    """The attacker host sends the caller's exact flows (its address, its media
    ports, to its relay ports) from its own switch port while the call is up:
    the relay entries are bound to the caller's port, so nothing of it reaches
    the callee; rtpagent refuses the spoofed source (reason ingress_port)."""
    caps = capture.start_captures(stack.sup, tmp_path, RELAY_PORTS)
    refused0 = agent_count("rtpagent_learn_refused_total", reason="ingress_port")
    spoofers: list[subprocess.Popen[bytes]] = []
    seen: dict[str, list[tuple[int, int, int]]] = {}

    def spoof_once_installed() -> bool:
        if spoofers:
            return False
        flows = asyncio.run(caller_flows())
        if len(flows) < 2:
            return False
        seen["flows"] = flows
        # Raw IPv4 with the caller's source address (IP_HDRINCL), RTP marked by SSRC,
        # paced as media (a packet per flow each 20 ms, for 2 s).
        code = (
            "import socket,struct,time\n"
            "s=socket.socket(socket.AF_INET,socket.SOCK_RAW,socket.IPPROTO_RAW)\n"
            f"src=socket.inet_aton('{topology.UAC.addr}');dst=socket.inet_aton('{topology.RELAY.addr}')\n"
            f"flows={[(sp, dp) for sp, dp, _ in flows]!r}\n"
            "for n in range(100):\n"
            " for sp,dp in flows:\n"
            "  rtp=struct.pack('!BBHII',0x80,8,n,0,0x5B00F)+bytes(160)\n"
            "  udp=struct.pack('!HHHH',sp,dp,8+len(rtp),0)+rtp\n"
            "  ip=struct.pack('!BBHHHBBH4s4s',0x45,0,20+len(udp),n,0,64,17,0,src,dst)\n"
            "  s.sendto(ip+udp,(socket.inet_ntoa(dst),0))\n"
            " time.sleep(0.02)\n"
        )
        spoofers.append(
            subprocess.Popen(
                ["ip", "netns", "exec", topology.ATTACKER.netns, "python3", "-c", code]
            )
        )
        return False

    try:
        result = calls(stack, "e2e-spoof", 1, 8.0, stop=spoof_once_installed)
    finally:
        for sp in spoofers:
            sp.wait(30)
    capture.stop_captures(stack.sup, caps)
    assert result.stats.successful == 1, f"SIPp: {result.stats} (log {result.log})"
    assert spoofers and spoofers[0].returncode == 0, "the spoofer never ran"
    assert {port for _, _, port in seen["flows"]} == {topology.UAC.port}, seen
    for cap in caps:
        got = capture.read_rtp(cap.path)
        leaked = int((got[:, 1] == 0x5B00F).sum())
        assert leaked == 0, f"{leaked} spoofed packets left the switch ({cap.path})"
    assert len(capture.read_rtp(caps[1].path)) > 6 * 50, "the caller's own media was relayed"
    wait_value(
        lambda: (
            agent_count("rtpagent_learn_refused_total", reason="ingress_port") > refused0 or None
        ),
        10,
        "rtpagent refusing the spoofed source",
    )


@pytest.mark.each_sip_server
def test_media_stop_ends_the_dialog(
    stack: Stack, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A call whose media stops both ways is ended by the SIP server (BYE both ways).

    The hosts stop sending RTP mid-call (dropped at their links); the switch's
    entries go idle, rtpagent deletes the session and notifies the SIP server's
    notify socket: the one OpenSIPS named in its offer (`n` flag), or for Kamailio
    (which names none on an initial offer) rtpagent's --sip-notify, where the timeout
    listener ends the dialog over Kamailio's RPC.
    """
    sip_cap = tmp_path / "sip.pcap"
    stack.sup.start(
        "cap-sip",
        [
            "tcpdump",
            "-i",
            "any",
            "-n",
            "-s",
            "0",
            "-w",
            str(sip_cap),
            f"tcp port {SIP_NOTIFY_PORT} or udp port 5060",
        ],
        netns=topology.RELAY.netns,
    )
    kamailio = _kamailio_rpc(stack)
    old = {d["call-id"] for d in kamailio.call("dlg.list") or []} if kamailio else set()
    box: dict[str, UacResult] = {}
    abort = threading.Event()
    th = threading.Thread(
        target=lambda: box.update(r=calls(stack, "e2e-timeout", 1, 60.0, stop=abort.is_set))
    )
    th.start()
    blocked: list[str] = []
    try:
        wait_value(lambda: entries()[0] >= 4 or None, 15, "the call offloaded to the switch")
        tx = switch_tx(UAS_PORT)
        wait_value(lambda: switch_tx(UAS_PORT) > tx + 10 or None, 10, "media through the switch")
        for netns in (topology.UAC.netns, topology.UAS.netns):
            drop_media(netns)
            blocked.append(netns)
        t_stop = time.time()
        th.join(idle_ttl_s(stack) + 10)  # the UAC's call ends with the BYE it is sent
        ended_in = time.time() - t_stop
    finally:
        for netns in blocked:
            undrop_media(netns)
        abort.set()  # a failed case must not leave its UAC holding the SIP port
        th.join(30)
        stack.sup.stop("cap-sip")
        if kamailio is not None:  # a dialog left up would keep the UAS's call (and media) up
            for d in kamailio.call("dlg.list") or []:
                if d["call-id"] not in old and d["state"] < 5:
                    kamailio.call("dlg.end_dlg", int(d["h_entry"]), int(d["h_id"]))
    assert ended_in < idle_ttl_s(stack) + 8, f"the call was not ended ({ended_in:.0f} s)"
    # The UAC got a BYE it did not expect: SIPp counts the call as failed, none still up.
    assert box["r"].stats.current == 0, box["r"].stats
    assert box["r"].stats.failed == 1, box["r"].stats
    notified, byes = sip_timeline(sip_cap)
    assert notified, "no timeout notification reached the SIP server"
    assert len(byes) >= 2, f"the SIP server sent {len(byes)} BYE (one each way expected)"
    delay_ms = (byes[0] - notified[0]) * 1000
    after_stop_s = byes[0] - t_stop
    record_property = request.node.user_properties.append
    record_property(("bye_after_notification_ms", round(delay_ms, 1)))
    record_property(("bye_after_media_stop_s", round(after_stop_s, 2)))
    print(
        f"{stack.cfg.sip}: BYE {delay_ms:.1f} ms after the notification, "
        f"{after_stop_s:.2f} s after the media stopped (idle TTL {idle_ttl_s(stack):g} s)"
    )
    assert 0 <= delay_ms < 1000, f"BYE {delay_ms:.0f} ms after the notification"
    wait_value(lambda: entries() == (0, 0) or None, 10, "relay entries removed")


def _kamailio_rpc(stack: Stack) -> Any:
    """Kamailio's JSON-RPC (None with OpenSIPS)."""
    from p4relay_scenarios.timeout_listener import KamailioRpc

    if stack.cfg.sip != "kamailio":
        return None
    return KamailioRpc(str(stack.cfg.run_dir / "kamailio" / "jsonrpc.sock"))


@pytest.mark.parametrize("stack", ["kamailio"], indirect=True)
def test_kamailio_timeout_listener_ends_the_dialog(stack: Stack) -> None:
    """A notification at Kamailio's timeout_socket ends the call through the listener."""
    from p4relay_scenarios.timeout_listener import KamailioRpc

    rpc = KamailioRpc(str(stack.cfg.run_dir / "kamailio" / "jsonrpc.sock"))
    # Dialogs of earlier calls (a call ended by killing its UAC keeps its dialog).
    old = {d["call-id"] for d in rpc.call("dlg.list") or []}
    box: dict[str, UacResult] = {}
    abort = threading.Event()
    th = threading.Thread(
        target=lambda: box.update(r=calls(stack, "e2e-listener", 1, 60.0, stop=abort.is_set))
    )
    t0 = time.monotonic()
    th.start()
    try:
        _timeout_ends_dialog(stack, rpc, old)
        th.join(30)  # the UAC's call ends with the BYE Kamailio sent it
    finally:
        abort.set()  # a failed case must not leave its UAC holding the SIP port
        th.join(30)
    assert time.monotonic() - t0 < 50, "the call ran its full length: the timeout did not end it"
    assert box["r"].stats.current == 0, box["r"].stats
    assert box["r"].stats.failed == 1, box["r"].stats
    wait_value(lambda: entries() == (0, 0) or None, 10, "relay entries removed")


def _timeout_ends_dialog(stack: Stack, rpc: Any, old: set[str]) -> None:
    # The call's confirmed dialog (state 4: 200 and ACK seen); media timeouts come long after.
    dialogs = wait_value(
        lambda: (
            [d for d in rpc.call("dlg.list") or [] if d["state"] == 4 and d["call-id"] not in old]
            or None
        ),
        15,
        "the call's confirmed dialog in Kamailio",
    )
    call_id = dialogs[0]["call-id"]
    from_tag = dialogs[0]["caller"]["tag"]
    # What RTPProxy (through rtpagent) writes to the SIP server's timeout socket.
    notify = (
        "import socket,sys;c=socket.create_connection(('127.0.0.1',22225),timeout=5);"
        "c.sendall(sys.argv[1].encode()+b'\\n');c.close()"
    )
    subprocess.run(
        [
            "ip",
            "netns",
            "exec",
            topology.RELAY.netns,
            "python3",
            "-c",
            notify,
            f"{call_id} {from_tag}",
        ],
        check=True,
        timeout=10,
    )

    def ended() -> bool | None:
        # dlg.end_dlg sends BYE both ways; the dialog is deleted (state 5) or gone.
        mine = [d for d in rpc.call("dlg.list") or [] if d["call-id"] == call_id]
        return all(d["state"] == 5 for d in mine) or None

    wait_value(ended, 15, "the dialog ended by the listener")


# Where Debian's sip-tester keeps the recordings SIPp's built-in uac_pcap plays.
SIPP_PCAPS = (Path("/usr/share/sip-tester"), Path("/usr/share/sipp"), Path("/usr/local/share/sipp"))


@pytest.mark.each_sip_server
def test_stock_sipp_scenarios_complete(
    stack: Stack, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """SIPp's own `uac` and `uac_pcap` against its own `uas -rtp_echo`, unmodified.

    They ignore Record-Route (no Route header in ACK and BYE, Request-URI the
    proxy): the SIP server routes them by the dialog. Media is offloaded and the
    entries leave the switch at the BYE (well before the idle timeout).
    """
    work = tmp_path / "stock"
    (work / "pcap").mkdir(parents=True)
    for name in ("g711a.pcap", "dtmf_2833_1.pcap"):
        src = next((d / name for d in SIPP_PCAPS if (d / name).exists()), None)
        assert src is not None, f"SIPp's {name} not found in {[str(d) for d in SIPP_PCAPS]}"
        (work / "pcap" / name).symlink_to(src)
    out = stack.cfg.run_dir / "load"
    uas = topology.UAS.addr
    stack.sup.stop("sipp-uas")
    try:
        stack.sup.start(
            "sipp-uas-stock",
            [
                "sipp",
                "-sn",
                "uas",
                "-rtp_echo",
                "-i",
                uas,
                "-mi",
                uas,
                "-p",
                "5060",
                "-nostdin",
                "-trace_err",
                "-error_file",
                str(tmp_path / "uas-errors.log"),
            ],
            netns=topology.UAS.netns,
            cwd=work,
        )
        stack.sup.wait_ready(
            "sipp-uas-stock", partial(udp_bound_in, topology.UAS.netns, 5060), 20, "SIP on UDP 5060"
        )

        plain = run_uac(
            Profile("stock-uac", rate=10.0, calls=10, hold_s=0.0, limit=10),
            work,
            out,
            tag=f"stock-uac-{stack.cfg.sip}",
            builtin="uac",
        )
        assert plain.stats.successful == 10, f"SIPp uac: {plain.stats} (log {plain.log})"
        assert plain.stats.failed == 0, plain.stats
        wait_value(lambda: entries() == (0, 0) or None, 3, "entries removed after the uac calls")

        before = rtpp.stats(*RTPP_COUNTERS)
        tx0 = switch_tx(UAS_PORT)
        seen: dict[str, int] = {}

        def watch() -> bool:
            seen["max"] = max(seen.get("max", 0), entries()[0])
            return False

        pcap = run_uac(
            Profile("stock-uac-pcap", rate=2.0, calls=2, hold_s=9.0, limit=2),
            work,
            out,
            tag=f"stock-uac-pcap-{stack.cfg.sip}",
            builtin="uac_pcap",
            stop=watch,
        )
        ended = time.monotonic()
        tx1 = switch_tx(UAS_PORT)
        after = rtpp.stats(*RTPP_COUNTERS)
        assert pcap.stats.successful == 2, f"SIPp uac_pcap: {pcap.stats} (log {pcap.log})"
        assert pcap.stats.failed == 0, pcap.stats
        wait_value(lambda: entries() == (0, 0) or None, 3, "entries removed at the uac_pcap BYEs")
        assert time.monotonic() - ended < idle_ttl_s(stack), "removed by the idle timeout"
    finally:
        stack.sup.stop("sipp-uas-stock")
        stack.sipp_uas()
    # Both calls were on the switch (4 relay entries each) and it relayed their media:
    # uac_pcap plays g711a.pcap (236 RTP packets) and dtmf_2833_1.pcap (10) towards the
    # UAS, which echoes them back.
    assert seen.get("max", 0) >= 8, f"uac_pcap calls not offloaded: {seen}"
    assert tx1 - tx0 >= 2 * 236, f"switch sent {tx1 - tx0} frames to the UAS"
    relayed = after["npkts_relayed"] - before["npkts_relayed"]
    assert relayed <= 0.05 * 2 * 2 * 246, f"RTPProxy relayed {relayed} packets"
    request.node.user_properties.append(
        (
            "stock_calls",
            f"uac {plain.stats.successful}/{plain.stats.failed}, "
            f"uac_pcap {pcap.stats.successful}/{pcap.stats.failed} (ok/failed)",
        )
    )
    print(
        f"{stack.cfg.sip}: stock uac {plain.stats.successful} ok/{plain.stats.failed} failed, "
        f"uac_pcap {pcap.stats.successful} ok/{pcap.stats.failed} failed, switch relayed "
        f"{tx1 - tx0} frames to the UAS, RTPProxy {relayed} packets"
    )


@pytest.mark.each_sip_server
def test_reinvite_and_hold_keep_the_call_on_the_switch(stack: Stack) -> None:
    """re-INVITEs along the dialog's route set: a refresh, hold (c=0.0.0.0, a=sendonly)
    and resume. Each is answered; the call's media stays on the switch across them and
    its entries leave at the BYE."""
    before = rtpp.stats(*RTPP_COUNTERS)
    tx0 = switch_tx(UAS_PORT)
    phases: list[tuple[float, int]] = []
    stack.sup.stop("sipp-uas")
    try:
        stack.sipp_uas("uas-reinvite.xml")
        t0 = time.monotonic()

        def watch() -> bool:
            phases.append((time.monotonic() - t0, entries()[0]))
            return False

        prof = Profile("e2e-reinvite", rate=2.0, calls=2, hold_s=12.0, limit=2)
        result = run_uac(
            prof, stack.media_dir, stack.cfg.run_dir / "load",
            tag=f"e2e-reinvite-{stack.cfg.sip}", scenario="uac-reinvite.xml", stop=watch,
        )  # fmt: skip
        ended = time.monotonic()
        tx1 = switch_tx(UAS_PORT)
        after = rtpp.stats(*RTPP_COUNTERS)
        assert result.stats.successful == 2, f"SIPp: {result.stats} (log {result.log})"
        assert result.stats.failed == 0, result.stats
        wait_value(lambda: entries() == (0, 0) or None, 3, "entries removed at the BYEs")
        assert time.monotonic() - ended < idle_ttl_s(stack), "removed by the idle timeout"
    finally:
        stack.sup.stop("sipp-uas")
        stack.sipp_uas()
    # The three re-INVITEs come 3, 6 and 9 s after the ACK, the BYE at 12 s (the second
    # call 0.5 s later). Both calls' entries (4 each) are on the switch after the resume.
    late = [n for t, n in phases if 10.0 <= t <= 11.5]
    assert late and max(late) >= 8, f"entries after the resume: {phases}"
    # ~12 s of media each way per call, relayed by the switch, not RTPProxy.
    assert tx1 - tx0 >= 2 * 10 * 50, f"switch sent {tx1 - tx0} frames to the UAS"
    relayed = after["npkts_relayed"] - before["npkts_relayed"]
    assert relayed <= 0.05 * 2 * 2 * 12 * 50, f"RTPProxy relayed {relayed} packets"


def test_congested_port_moves_queue_loss_and_mos(stack: Stack) -> None:
    api = stack.api()
    try:
        sw = wait_value(lambda: [s for s in api.switches() if s["name"] == "sw1"], 20, "switch sw1")
        switch_id = sw[0]["id"]
        t0 = time.time() - 1
        # 8 calls send ~690 kbit/s towards the UAS; the port gets 300 kbit/s.
        asyncio.run(switchcfg.shape_port(GRPC_ADDR, UAS_PORT, 300))
        try:
            result = calls(stack, "e2e-shaped", 8, 12.0)
        finally:
            asyncio.run(switchcfg.shape_port(GRPC_ADDR, UAS_PORT, None))
        assert result.stats.successful + result.stats.failed == 8

        def congested_queue() -> list[dict[str, Any]] | None:
            pts = [
                p
                for q in api.queues(switch_id)
                if q["dev_port"] == UAS_PORT
                for p in q["points"]
                if _ts(p["ts"]) >= t0 and ((p["depth_max_pkts"] or 0) > 10 or p["drops"] > 0)
            ]
            return pts or None

        wait_value(congested_queue, 20, "queue depth/drops on the shaped port in the API")

        def lossy_sessions() -> list[dict[str, Any]] | None:
            got = [
                s
                for s in sessions_of(stack, t0)
                if s["call_id"].endswith("@198.18.1.10") and s["mos_min"] is not None
            ]
            lossy = [s for s in got if (s["lost"] or 0) > 0]
            return lossy if len(lossy) >= 4 else None

        # Quality registers sit in Egress (contract v2): packets the shaped port's queue
        # tail-drops show as sequence gaps, i.e. loss, and pull the sessions' MOS down
        # (unshaped calls score > 4.0, see test_calls_relayed_by_the_switch).
        lossy = wait_value(lossy_sessions, 30, "sessions with loss on the shaped port")
        assert min(s["mos_min"] for s in lossy) < 4.0, [s["mos_min"] for s in lossy]
    finally:
        api.close()


def router_reaches_hosts() -> bool:
    """The kernel router (the switch's stand-in) has an ICMP echo answered by
    every host (the request makes it resolve the host's address)."""
    code = (
        "import sys;from p4relay_scenarios.pinger import ping;"
        "sys.exit(0 if all(ping(a, 0.2, 0.2, 1.0)[1] for a in sys.argv[1:]) else 1)"
    )
    addrs = [h.addr for h in topology.HOSTS]
    r = subprocess.run(
        ["ip", "netns", "exec", topology.FWD_NS, sys.executable, "-c", code, *addrs],
        capture_output=True,
        timeout=30,
        check=False,
    )
    return r.returncode == 0


@pytest.mark.each_sip_server
@pytest.mark.takes_switch_down
def test_switch_down_calls_fall_back_to_rtpproxy(stack: Stack, tmp_path: Path) -> None:
    t0 = time.time() - 1
    # The switch goes away; a Linux router takes its ports so packets still flow.
    stack.sup.stop("softswitch")
    topology.hand_ports_to_kernel()
    # The kernel's router needs its neighbours before the calls' media crosses it
    # (rtpagent notices the switch only when it next writes to it: the calls below).
    wait_value(
        lambda: router_reaches_hosts() or None,
        15,
        "the kernel router reaching every host",
    )
    before = rtpp.stats(*RTPP_COUNTERS)
    caps = capture.start_captures(stack.sup, tmp_path, RELAY_PORTS)
    result = calls(stack, "e2e-fallback", 2, 8.0)
    capture.stop_captures(stack.sup, caps)
    after = rtpp.stats(*RTPP_COUNTERS)

    assert result.stats.successful == 2, f"SIPp: {result.stats} (log {result.log})"
    m = capture.relay_path_metrics(capture.read_rtp(caps[0].path), capture.read_rtp(caps[1].path))
    assert m.streams == 2 and m.loss_pct < 1.0, m
    relayed = after["npkts_relayed"] - before["npkts_relayed"]
    assert relayed >= 0.9 * 2 * m.packets_in, "RTPProxy did not relay the calls"

    api = stack.api()
    try:

        def fallbacks() -> list[dict[str, Any]] | None:
            evs = [e for e in api.events("fallback") if _ts(e["ts"]) >= t0]
            return evs if len(evs) >= 2 else None

        evs = wait_value(fallbacks, 30, "fallback events in the API")
        assert all(e["payload"].get("reason") for e in evs)
    finally:
        api.close()


@pytest.fixture(autouse=True)
def _alive(stack: Stack) -> None:
    dead = [n for n in stack.dead() if not n.startswith("cap")]
    assert not dead, f"components died: {dead}"
