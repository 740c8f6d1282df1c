"""The scenarios' pieces that need no testbed: media, parsing, metrics, configs."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from p4relay_scenarios import capture, media, phones
from p4relay_scenarios import ired_report as rep
from p4relay_scenarios.load import PROFILES, Profile, level, read_stats
from p4relay_scenarios.stack import SCENARIOS
from p4relay_scenarios.timeout_listener import Notification, parse_notification


def test_alaw_matches_g711_reference_points() -> None:
    # G.711 A-law: silence encodes as 0xD5 (positive) / 0x55 (negative), full scale 0xAA/0x2A.
    assert media._alaw(0) == 0xD5
    assert media._alaw(-1) == 0x55
    assert media._alaw(32767) == 0xAA
    assert media._alaw(-32768) == 0x2A


def test_alaw_raw_is_whole_packets(tmp_path: Path) -> None:
    f = media.write_alaw_raw(tmp_path / "t.alaw", seconds=1.01)
    assert f.stat().st_size % media.SAMPLES_PER_PACKET == 0
    assert f.stat().st_size == 8000


def test_rtp_pcap_has_50_packets_per_second_and_reads_back(tmp_path: Path) -> None:
    f = media.write_rtp_pcap(tmp_path / "g711.pcap", 3.0)
    rows = capture.read_rtp(f)
    assert len(rows) == 150
    assert rows[:, 2].tolist() == list(range(150))  # sequence numbers
    gaps = np.diff(rows[:, 0])
    assert np.all(gaps == 20_000_000)  # 20 ms, in ns
    assert capture.count_frames(f) == 150


def _snap(src: Path, dst: Path, snaplen: int) -> Path:
    """The pcap as tcpdump -s snaplen would have written it."""
    data = src.read_bytes()
    out, off = bytearray(data[:24]), 24
    while off + 16 <= len(data):
        sec, frac, caplen, wire = struct.unpack_from("<IIII", data, off)
        cut = min(caplen, snaplen)
        out += struct.pack("<IIII", sec, frac, cut, wire) + data[off + 16 : off + 16 + cut]
        off += 16 + caplen
    dst.write_bytes(bytes(out))
    return dst


def test_read_rtp_fixed_snaplen_fast_path_matches_general_reader(tmp_path: Path) -> None:
    full = media.write_rtp_pcap(tmp_path / "full.pcap", 2.0)
    snapped = _snap(full, tmp_path / "snapped.pcap", capture.SNAPLEN)
    general = capture.read_rtp(full)  # 214-byte records: the record-by-record reader
    assert capture._read_fixed(full.read_bytes(), 1000) is None
    fast = capture._read_fixed(snapped.read_bytes(), 1000)
    assert fast is not None and len(fast) == 100
    assert np.array_equal(fast, general)
    assert np.array_equal(capture.read_rtp(snapped), general)


def _as_ipv6(src: Path, dst: Path) -> Path:
    """The IPv4 RTP pcap's frames carried over IPv6 (same UDP and RTP, no extension headers)."""
    data = src.read_bytes()
    out, off = bytearray(data[:24]), 24
    while off + 16 <= len(data):
        sec, frac, caplen, _ = struct.unpack_from("<IIII", data, off)
        frame = data[off + 16 : off + 16 + caplen]
        udp = frame[34:]
        ip6 = struct.pack("!IHBB", 6 << 28, len(udp), 17, 64) + bytes(range(32))
        new = frame[:12] + b"\x86\xdd" + ip6 + udp
        out += struct.pack("<IIII", sec, frac, len(new), len(new)) + new
        off += 16 + caplen
    dst.write_bytes(bytes(out))
    return dst


def test_read_rtp_reads_ipv6_captures_full_and_snapped(tmp_path: Path) -> None:
    v4 = media.write_rtp_pcap(tmp_path / "v4.pcap", 2.0)
    v6 = _as_ipv6(v4, tmp_path / "v6.pcap")
    snapped = _snap(v6, tmp_path / "v6-snapped.pcap", capture.SNAPLEN6)
    expected = capture.read_rtp(v4)
    assert len(expected) == 100
    assert np.array_equal(capture.read_rtp(v6), expected)
    assert np.array_equal(capture.read_rtp(snapped), expected)
    # cut before the RTP header: not read as RTP
    assert len(capture.read_rtp(_snap(v6, tmp_path / "short.pcap", capture.SNAPLEN))) == 0


def test_read_rtp_rejects_non_pcap(tmp_path: Path) -> None:
    f = tmp_path / "x.pcap"
    f.write_bytes(b"\x00" * 64)
    with pytest.raises(ValueError, match="not a little-endian pcap"):
        capture.read_rtp(f)


def _stream(ssrc: int, t0_ns: int, n: int) -> np.ndarray:
    t = t0_ns + np.arange(n, dtype=np.int64) * 20_000_000
    return np.stack([t, np.full(n, ssrc), np.arange(n)], axis=1).astype(np.int64)


def test_relay_path_metrics_delay_variation_loss() -> None:
    ing = np.concatenate([_stream(1, 0, 500), _stream(2, 5_000_000, 500)])
    eg = ing.copy()
    eg[:, 0] += 1_000_000  # 1 ms through the relay path
    eg[1::2, 0] += 2_000_000  # every other packet 2 ms later: variation 2 ms
    keep = np.ones(len(eg), dtype=bool)
    keep[10:20] = False  # 10 packets of stream 1 lost
    m = capture.relay_path_metrics(ing, eg[keep], settle_ms=0)
    assert m.streams == 2
    assert m.packets_in == 1000
    assert m.packets_out == 990
    assert m.loss_pct == pytest.approx(1.0)
    assert m.delay_ms_median == pytest.approx(2.0, abs=1.0)
    assert m.variation_ms_median == pytest.approx(2.0)
    assert m.mos_median is not None and 4.0 < m.mos_median <= 4.5


def test_relay_path_metrics_window_and_tail() -> None:
    ing = _stream(7, 0, 100)
    eg = ing.copy()
    eg[:, 0] += 500_000
    # Packets that entered in the last settle_ms are not counted as lost.
    m = capture.relay_path_metrics(ing, eg[:95], settle_ms=150)
    assert m.loss_pct == 0.0
    m = capture.relay_path_metrics(
        ing, eg, window_ns=(20 * 20_000_000, 40 * 20_000_000), settle_ms=0
    )
    assert m.packets_in == 20


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("abc@host ftag ttag\n", Notification("abc@host", "ftag")),
        ("abc@host\n", Notification("abc@host", None)),
        (b"call.1@x".hex() + "." + b"tag9".hex(), Notification("call.1@x", "tag9")),
        ("1.2@example.org", Notification("1.2@example.org", None)),  # a dot, not hex
        ("", None),
        ("x" * 5000, None),
    ],
)
def test_timeout_notification_forms(line: str, expected: Notification | None) -> None:
    assert parse_notification(line) == expected


def test_profiles() -> None:
    paper = PROFILES["paper"]
    assert (paper.rate, paper.calls) == (30.0, 900)
    assert paper.duration_s == pytest.approx(300.0)
    assert PROFILES["smoke"].calls == 5
    for n in (750, 1500, 1800):
        assert level(n).concurrent == n
    assert Profile("x", 2, 10, 100.0, 4).concurrent == 4


def test_read_stats_parses_sipp_trace_stat(tmp_path: Path) -> None:
    f = tmp_path / "s.csv"
    head = "StartTime;ElapsedTime(C);TotalCallCreated;CurrentCall;SuccessfulCall(C);FailedCall(C);Retransmissions(C);"
    row = "x;00:01:02:500000;10;3;6;1;2;"
    f.write_text(head + "\n" + row + "\n")
    st = read_stats(f)
    assert st is not None
    assert (st.created, st.current, st.successful, st.failed, st.retransmissions) == (
        10,
        3,
        6,
        1,
        2,
    )
    assert st.elapsed_s == pytest.approx(62.5)
    assert read_stats(tmp_path / "missing.csv") is None


@pytest.mark.parametrize("name", ["uac.xml", "uas.xml", "uac-reinvite.xml", "uas-reinvite.xml"])
def test_sipp_scenarios_are_well_formed(name: str) -> None:
    root = ET.parse(SCENARIOS / "sipp" / name).getroot()
    assert root.tag == "scenario"
    execs = [e.get("rtp_stream") for e in root.iter("exec")]
    assert "media/tone.alaw,-1,8" in execs  # G.711 A-law, looped


@pytest.mark.skipif(shutil.which("kamailio") is None, reason="kamailio not installed")
def test_kamailio_config_parses(tmp_path: Path) -> None:
    r = subprocess.run(
        ["kamailio", "-c", "-f", str(SCENARIOS / "sip" / "kamailio.cfg"),
         "-A", f'RUNDIR="{tmp_path}"', "-A", f'JSONRPC_SOCK="{tmp_path}/j.sock"',
         "-A", f'CTL_SOCK="unix:{tmp_path}/ctl.sock"',
         "-A", "SIP_UDP=udp:127.0.0.1:5090", "-A", "SIP_TCP=tcp:127.0.0.1:5090"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]


def test_cpu_accounting_sees_a_busy_component() -> None:
    from p4relay_scenarios import cpuacct

    pids = {"me": [os.getpid()], "gone": [2**22 + 12345]}
    a = cpuacct.snapshot(pids)
    c0 = time.process_time()
    while time.process_time() - c0 < 0.3:  # 0.3 s of CPU, however busy the machine is
        pass
    b = cpuacct.snapshot(pids)
    use = cpuacct.usage(a, b)
    cpu_s = use.components["me"] / 100.0 * (b.t - a.t)
    assert 0.25 < cpu_s < 0.4, use  # tick accounting: 10 ms granularity
    assert use.components["gone"] != use.components["gone"]  # NaN: no such process
    assert use.machine_busy > 0.0 and use.other >= 0.0


def test_experiment_replot_writes_readme_and_plots(tmp_path: Path) -> None:
    import dataclasses

    from p4relay_scenarios import experiment

    def row(mode: str, calls: int, loss: float) -> dict[str, object]:
        fields: dict[str, object] = {f.name: 1.0 for f in dataclasses.fields(experiment.Row)}
        fields.update(mode=mode, calls=calls, loss_pct=loss, mos_median=4.4, mos_min=4.3)
        return fields

    rows = [row("server", 150, 0.0), row("server", 750, 5.0), row("switch", 750, 0.0)]
    meta = {"command": "x", "machine": {"cores": 2}, "rate": 30.0, "hold_s": 80.0}
    cdf = {"server-150": [0.1, 1.0, 2.0], "switch-750": [0.05, 0.1, 0.2]}
    (tmp_path / "results.json").write_text(
        json.dumps({"meta": {**meta, "knee_server": 750}, "rows": rows, "delay_quantiles_ms": cdf})
    )
    reading = f"{experiment.READING}\n\nWritten by hand.\n"
    (tmp_path / "README.md").write_text(f"# an older README\n\n{reading}")
    experiment.replot(tmp_path)
    readme = (tmp_path / "README.md").read_text()
    assert "Knee of server-based relay on this machine: 750" in readme
    assert readme.endswith(f"\n\n{reading}") and "an older README" not in readme
    assert "| switch | 750 |" in readme
    for png in ("delay.png", "loss.png", "cpu_breakdown.png", "delay_cdf.png"):
        assert (tmp_path / png).stat().st_size > 1000


def test_experiment_merge_adds_parts_and_replaces_remeasured_levels(tmp_path: Path) -> None:
    import dataclasses

    from p4relay_scenarios import experiment

    def row(mode: str, calls: int, loss: float) -> experiment.Row:
        fields: dict[str, object] = {f.name: 1.0 for f in dataclasses.fields(experiment.Row)}
        fields.update(mode=mode, calls=calls, loss_pct=loss, mos_median=4.4, mos_min=4.3)
        return experiment.Row(**fields)  # type: ignore[arg-type]

    def meta(command: str, levels: list[int]) -> dict[str, object]:
        return {
            "command": command,
            "machine": {"cores": 2, "commit": f"c-{command}", "date_utc": f"d-{command}"},
            "rate": 30.0,
            "hold_s": 80.0,
            "sip_server": "OpenSIPS 3",
            "levels": levels,
            "modes": ["server"],
        }

    first = meta("part-a", [150, 750])
    rows = [row("server", 150, 0.0), row("server", 750, 9.0)]
    experiment.write(tmp_path, rows, {"server-150": [0.1], "server-750": [5.0]}, first)
    earlier = experiment.earlier_results(tmp_path, rate=30.0, hold_s=80.0, sip_server="OpenSIPS 3")
    again = [row("server", 750, 0.5), row("server", 1500, 30.0)]
    cdfs = {"server-750": [0.2], "server-1500": [9.0]}
    all_rows, all_cdfs, all_meta = experiment.merged(
        earlier, again, cdfs, meta("part-b", [750, 1500])
    )
    assert [(r.calls, r.loss_pct) for r in all_rows] == [(150, 0.0), (750, 0.5), (1500, 30.0)]
    assert all_cdfs == {"server-150": [0.1], "server-750": [0.2], "server-1500": [9.0]}
    assert [p["command"] for p in all_meta["parts"]] == ["part-a", "part-b"]  # type: ignore[attr-defined]
    assert all_meta["levels"] == [150, 750, 1500]
    assert experiment.knee(all_rows) == 1500
    all_meta["knee_server"] = 1500
    experiment.write(tmp_path, all_rows, all_cdfs, all_meta)
    readme = (tmp_path / "README.md").read_text()
    assert "- `part-a`: cores 2" in readme and "- `part-b`: cores 2" in readme
    # Each part's commit and time stay in results.json, out of the README.
    assert "c-part-a" not in readme and "d-part-b" not in readme
    kept = json.loads((tmp_path / "results.json").read_text())["meta"]["parts"]
    assert [p["machine"]["commit"] for p in kept] == ["c-part-a", "c-part-b"]
    assert "| 1.0/1.0 |" in readme  # the host load sampled over the window
    # Another hold time (or rate, or SIP server) is not the same experiment: refused.
    with pytest.raises(ValueError, match="hold_s"):
        experiment.earlier_results(tmp_path, rate=30.0, hold_s=30.0, sip_server="OpenSIPS 3")


def test_pinger_request_checksums_and_reply_parses() -> None:
    from p4relay_scenarios import pinger

    req = pinger.echo_request(0x1234, 7, 123_456_789)
    assert len(req) == 8 + 8 + pinger.PAYLOAD
    assert pinger.checksum(req) == 0  # a correct Internet checksum sums to zero
    # The reply as the kernel hands it to a raw socket: IPv4 header, then ICMP type 0.
    reply = bytes([0x45]) + bytes(19) + bytes([pinger.ECHO_REPLY]) + req[1:]
    assert pinger.parse_reply(reply, 0x1234) == (7, 123_456_789)
    assert pinger.parse_reply(reply, 0x4321) is None  # another pinger's reply
    assert pinger.parse_reply(bytes([0x45]) + bytes(19) + req, 0x1234) is None  # a request
    assert pinger.parse_reply(b"\x45", 0x1234) is None  # truncated


def test_pinger_refuses_bad_arguments() -> None:
    from p4relay_scenarios import pinger

    with pytest.raises(SystemExit):
        pinger.main(["198.18.2.10", "--interval", "0"])
    with pytest.raises(SystemExit):
        pinger.main(["198.18.2.10", "--interval", "0.001", "--seconds", "100"])


def test_ired_experiment_follows_table_one() -> None:
    from p4relay_scenarios import ired_experiment as ix

    for buffer, n, lo, hi in ((64, 4, 28, 56), (512, 32, 224, 448), (1024, 64, 448, 896)):
        assert ix.TABLE_I[buffer] == n
        s = ix.settings(buffer, n, "ired-protect")
        frame_cells = -(-ix.FRAME // 80)
        assert (s.min_thsld, s.max_thsld) == (lo * frame_cells, hi * frame_cells)
        assert s.protect and not s.tail_drop
        assert s.drop_prob == pytest.approx(2 / (n + 1))  # random(0, N) <= 1
        s.check()  # the switch would take it
    assert not ix.settings(64, 4, "ired").protect
    # the baselines: the port's queue limited to maxLenQueue cells, an egress AQM
    # beside it for codel and pi2; iRED's cells in the deep physical queue
    port = ix.BOTTLENECK.port
    buf = ["--port-queue-cells", f"{port}={ix.settings(64, 4, 'ired').max_len_queue}"]
    assert list(ix.port_setup(64, "taildrop")) == buf
    for pol, arg in (("codel", "codel:5000:100000"), ("pi2", "pi2:20000:33000:0.3125:3.125")):
        assert list(ix.port_setup(64, pol)) == [*buf, "--port-aqm", f"{port}={arg}"]
    assert ix.port_setup(1024, "taildrop") != ix.port_setup(64, "taildrop")
    assert ix.port_setup(64, "ired") == ix.port_setup(1024, "ired-protect") == ()
    assert list(ix.port_setup(64, "ired-enq")) == ["--ired-sample", "enq"]
    args = ix.stack_config(Path("/tmp/x"), 30.0, ix.port_setup(64, "pi2")).switch_args
    assert args[-4:] == list(ix.port_setup(64, "pi2"))
    assert "--port-aqm" not in ix.stack_config(Path("/tmp/x"), 30.0).switch_args


def _ired_row(
    policy: str, rtt: float, tcp: float, mos: float, run: int = 1, buffer: int = 64
) -> rep.Row:
    return rep.Row(
        buffer=buffer, n=4, policy=policy, min_thsld=28, max_thsld=56, drop_prob=0.4,
        rtt_ms_mean=rtt, rtt_ms_p50=rtt, rtt_ms_p99=2 * rtt, ping_loss_pct=0.0,
        tcp_mbps=tcp, tcp_retransmits=1, port_packets=100, policy_drops=5,
        drop_rate_pct=5.0, decisions=0, spared=0, queue_drops=0, calls=2, calls_ok=2,
        calls_failed=0, rtp_loss_pct=0.0, delay_ms_median=1.0, delay_ms_p99=2.0,
        jitter_ms_median=1.0, jitter_ms_max=1.0, mos_min=mos, mos_median=mos,
        calls_mos_ok=2 if mos >= 4.2 else 0, window_s=10.0, load_1m=3.0, run=run,
        per_call=[{"loss_pct": 0.0, "jitter_ms": 1.0, "mos": mos}] * 2,
    )  # fmt: skip


IRED_META: dict[str, object] = {
    "command": "x", "machine": {"cores": 2}, "rate_mbit": 30.0, "calls": 2,
    "seconds": 10.0, "flows": 4,
}  # fmt: skip


def test_ired_experiment_table_and_plots_from_rows(tmp_path: Path) -> None:
    rows = [
        _ired_row("taildrop", 25.0, 24.0, 3.4),
        _ired_row("ired-protect", 10.0, 18.0, 4.41),
        _ired_row("pi2", 20.0, 20.0, 4.0),
    ]
    rep.write(rows, IRED_META, tmp_path)
    md = (tmp_path / "README.md").read_text()
    # The side-by-side lines: RTT 2.50x lower, TCP at 0.75x of tail drop's, MOS 3.40 -> 4.41.
    assert (
        "| 64 | ired-protect | taildrop | 2.50x | 2.50x | 0.75x | 60 % | 3.40 -> 4.41 "
        "| 0/2 -> 2/2 |" in md
    )
    assert "| 64 | ired-protect | pi2 | 2.00x | 2.00x | 0.90x | 60 % | 4.00 -> 4.41 |" in md
    # one run: plain figures, no interval
    assert "| 64 | 4 | 28/56 | ired-protect | 1 | 10.0 | 20.0 | 0.0 | 18.0 |" in md
    assert "median 3.0, min 3.0, max 3.0" in md  # the machine's load is stated
    for png in ("rtt.png", "throughput.png", "drops.png", "calls.png"):
        assert (tmp_path / png).stat().st_size > 1000
    rep.replot(tmp_path)  # the same again from results.json
    assert (tmp_path / "README.md").read_text() == md
    # a second run of other buffers/policies merges over the first's rows
    later = _ired_row("codel", 12.0, 21.0, 4.3)
    merged, m = rep.merge(
        tmp_path, [later, _ired_row("pi2", 30.0, 20.0, 4.0)], {**IRED_META, "command": "y"}
    )
    assert [r.policy for r in merged] == ["taildrop", "ired-protect", "codel", "pi2"]
    assert [r.rtt_ms_mean for r in merged if r.policy == "pi2"] == [30.0]
    assert m["runs"] == ["x", "y"]
    with pytest.raises(SystemExit, match="other calls"):
        rep.merge(tmp_path, [later], {**IRED_META, "calls": 3})


def test_ired_report_sets_the_two_averages_side_by_side() -> None:
    rows = [
        _ired_row(pol, rtt, 24.0, 4.4, run=i + 1)
        for i in range(2)
        for pol, rtt in (("ired", 10.0 + i), ("ired-enq", 15.0 + 3 * i))
    ]
    md = rep.markdown(rows, IRED_META)
    # RTT 10.5 (deq) against 16.5 (enq): 1.57x, single passes 1.50x and 1.64x
    assert "| 64 | 10.5 ± 6.4 / 16.5 ± 19.1 | 1.57x [1.50-1.64] |" in md
    assert "| 64 | ired-enq | taildrop |" not in md  # no baseline: no side-by-side line


def test_ired_experiment_runs_give_a_mean_and_its_interval(tmp_path: Path) -> None:
    # three passes: tail drop 20/24/28 ms, iRED 10/10/13 ms (its RTT a third of a pass's)
    rows = [
        _ired_row("taildrop", t, 24.0, 3.4, run=i + 1) for i, t in enumerate((20.0, 24.0, 28.0))
    ] + [_ired_row("ired", t, 24.0, 4.4, run=i + 1) for i, t in enumerate((10.0, 10.0, 13.0))]
    s = rep.stat([20.0, 24.0, 28.0])
    # mean 24, sd 4: 4.303 * 4 / sqrt(3)
    assert (s.mean, s.n) == (24.0, 3) and s.half == pytest.approx(9.937, abs=1e-3)
    assert rep.stat([5.0]) == rep.Stat(5.0, 0.0, 1)
    rep.write(rows, {**IRED_META, "repetitions": 3}, tmp_path)
    md = (tmp_path / "README.md").read_text()
    assert "| 64 | - | - | taildrop | 3 | 24.0 ± 9.9 | 48.0 ± 19.9 |" in md
    assert "3 runs" in md and "6/6" in md  # calls over every run
    # ratio of the means (24 / 11), and the range of the per-pass ratios (2.0 .. 2.4)
    assert "| 64 | ired | taildrop | 2.18x [2.00-2.40] |" in md
    # the paper's view: iRED at each buffer against the AQMs in the largest buffer measured
    view = rep.as_the_paper(
        [
            *rows,
            _ired_row("pi2", 22.0, 24.0, 4.3, buffer=1024),
            _ired_row("codel", 11.0, 24.0, 4.3, buffer=1024),
        ]
    )
    assert "in the 1024-packet buffer" in view[0]
    # and its recirculated (decisions) and dropped shares of the packets at the port
    assert (
        "| 64 | 11.0 ± 4.3 | 1.00x | 1.00x | 2.00x | 1.00x | 0.000 ± 0.000 | 5.000 ± 0.000 |"
        in view
    )
    # a cell measured again takes only the new passes
    merged, _ = rep.merge(tmp_path, [_ired_row("ired", 12.0, 24.0, 4.4)], IRED_META)
    assert [(r.policy, r.run) for r in merged] == [
        ("taildrop", 1), ("taildrop", 2), ("taildrop", 3), ("ired", 1)
    ]  # fmt: skip


def test_recorded_command_leaves_out_the_database_url() -> None:
    from p4relay_scenarios.experiment import recorded_command

    url = "postgresql+psycopg://u:secret@127.0.0.1:5432/db"
    assert (
        recorded_command(
            "python -m p4relay_scenarios x", ["--a", "1", "--database-url", url, "--b"]
        )
        == "python -m p4relay_scenarios x --a 1 --b"
    )
    assert recorded_command("p", [f"--database-url={url}", "--out", "a b"]) == "p --out 'a b'"


def test_ired_report_states_the_aqms_and_the_rate_as_run() -> None:
    assert rep.aqm_params(rep.AQM["pi2"]) == {
        "target": 20.0, "tupdate": 33.0, "alpha": 0.3125, "beta": 3.125,
    }  # fmt: skip
    assert rep.aqm_params("codel:5000:100000") == {"target": 5.0, "interval": 100.0}
    for bad in ("pi2:20000", "red:1:2", "codel:x:1"):
        with pytest.raises(ValueError):
            rep.aqm_params(bad)
    text = rep.aqm_text(rep.AQM)
    assert "target 20 ms with its PI controller updated every 33 ms, alpha 0.3125 Hz" in text
    assert "target 5 ms / interval 100 ms" in text
    # 64 frames of 1514 bytes: 25.8 ms at 30 Mbit/s (above PI2's 20 ms target), 15.5 ms
    # at 50 (below it); minThsld at 128 (56 frames): 22.6 ms and 13.6 ms
    at30 = "\n".join(rep.setup_vs_paper(30.0, rep.AQM))
    at50 = "\n".join(rep.setup_vs_paper(50.0, rep.AQM))
    assert "25.8 ms of queue at 30 Mbit/s, close to PI2's 20 ms target" in at30
    assert "15.5 ms of queue at 50 Mbit/s, below PI2's 20 ms target" in at50
    assert "from 128 packets on the buffer holds more" in at50
    assert "22.6 ms at 128 (56 frames), above PI2's" in at30
    assert "13.6 ms at 128 (56 frames), below PI2's" in at50
    md = rep.markdown([_ired_row("pi2", 20.0, 20.0, 4.0)], {**IRED_META, "aqm": rep.AQM})
    assert "alpha 0.3125 Hz, beta 3.125 Hz (the paper's Table III" in md


def test_ired_report_names_its_rate_and_quotes_probes_apart(tmp_path: Path) -> None:
    rows = [_ired_row("ired-protect", 10.0, 24.0, 4.41), _ired_row("pi2", 25.0, 24.0, 4.0)]
    probe = tmp_path / "probe"
    rep.write(rows, {**IRED_META, "rate_mbit": 30.0, "command": "probe-30"}, probe)
    (tmp_path / rep.PROBES).mkdir()
    (probe / "results.json").rename(tmp_path / rep.PROBES / "30.json")
    rep.write(rows, {**IRED_META, "rate_mbit": rep.RATE_MBIT}, tmp_path)
    md = (tmp_path / "README.md").read_text()
    assert rep.RATE_WHY in md
    assert "Probes, not part of the table above" in md and "`probe-30`" in md
    # the probe's PI2 against its iRED: 25 / 10 (mean), 50 / 20 (p99)
    assert "| 30.0 | 64 | pi2 | 1 | 25.0 | 50.0 | 24.0 | 2.50x / 2.50x | 4.00 | 3.0 |" in md
    assert "| 30.0 | 64 | ired-protect | 1 | 10.0 | 20.0 | 24.0 | - |" in md
    other = rep.markdown(rows, {**IRED_META, "rate_mbit": 20.0})
    assert "Rate: " not in other and "Probes" not in other


def _rtp_pcap(path: Path, packets: list[tuple[float, int]], tone_hz: float, dport: int) -> None:
    """An Ethernet/IPv4/UDP pcap of A-law RTP: (arrival time, sequence number)
    per packet, each carrying its 20 ms of a tone."""
    frames = []
    for t, seq in packets:
        pcm = [
            media._alaw(int(8000 * np.sin(2 * np.pi * tone_hz * (seq * 160 + k) / 8000)))
            for k in range(160)
        ]
        rtp = struct.pack("!BBHII", 0x80, 8, seq & 0xFFFF, seq * 160, 0x1234) + bytes(pcm)
        udp = struct.pack("!HHHH", 20000, dport, 8 + len(rtp), 0) + rtp
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0, 64, 17, 0,
                         bytes([198, 18, 0, 10]), bytes([198, 18, 1, 10]))  # fmt: skip
        frame = b"\x02" * 12 + b"\x08\x00" + ip + udp
        us = round(t * 1e6)
        frames.append(struct.pack("<IIII", us // 10**6, us % 10**6, len(frame), len(frame)) + frame)
    path.write_bytes(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1) + b"".join(frames))


def test_received_audio_counts_what_a_phone_heard(tmp_path: Path) -> None:
    # 2 s of a 500 Hz tone; seq 30 never arrives; a 0.5 s pause after seq 60
    # (a hold: the sender stops, its sequence goes on where it stopped).
    pkts = [(0.02 * s, s) for s in range(100) if s != 30]
    pkts = [(t + (0.5 if s > 60 else 0.0), s) for t, s in pkts]
    _rtp_pcap(tmp_path / "rx.pcap", pkts, 500.0, 31000)
    audio = phones.received_audio(tmp_path / "rx.pcap", (31000, 31099))
    assert (audio.packets, audio.lost) == (99, 1)
    assert audio.seconds == pytest.approx(1.98)
    assert audio.tone_hz == pytest.approx(500.0, abs=2.0) and audio.tone_share > 0.9
    assert [(round(s, 2), round(g, 2)) for s, g in audio.gaps] == [(1.2, 0.52)]
    # Packets to other ports are not the phone's RTP.
    assert phones.received_audio(tmp_path / "rx.pcap", (40000, 40099)).packets == 0


def test_reroute_int_call_metrics_count_losses_gaps_and_p99() -> None:
    """reroute-int's per-call figures over the cross traffic's window: the
    lost packets of a call count (their sequence numbers are due), the longest
    inter-arrival gap spans the loss, MOS takes the p99 delay."""
    from p4relay_scenarios import reroute_int as ri

    t0 = 1_000_000_000_000
    rows = []
    for c in range(2):
        for k in range(200):  # 4 s at 50 packets/s
            sent = t0 + k * 20_000_000
            if c == 1 and 100 <= k < 150:
                continue  # call 1 loses 1 s in the window
            delay = 2_000_000 if k % 100 else 80_000_000  # a spike every 100th packet
            rows.append((c, k, sent, sent + delay))
    arr = np.array(rows, dtype=np.dtype([("c", "<i4"), ("s", "<i4"), ("t", "<i8"), ("r", "<i8")]))
    start = t0 + 50 * 20_000_000  # the window: packets 50..149 (2 s)
    ok, lossy = ri.call_metrics(arr, 2, start, 2.0)
    assert (ok.sent, ok.received, ok.loss_pct) == (100, 100, 0.0)
    # the spike is overtaken: arrivals 99, 101 (40 ms apart), 102, 103, 100, 104
    assert ok.pps == pytest.approx(50.0) and ok.max_gap_ms == pytest.approx(40.0)
    assert ok.delay_max_ms == pytest.approx(80.0) and ok.delay_p99_ms > 2.0
    assert (lossy.received, lossy.loss_pct) == (50, 50.0)
    assert lossy.max_gap_ms > 1000 and lossy.mos < ok.mos
    run = ri.Run("int-cp", 2.0, 0, [ok, lossy], 120.0, 1, 50.0, "s3 port 2", early_moves=1)
    rows_ = ri.summary([run])
    assert rows_[0]["loss_max"] == 50.0 and rows_[0]["move_after_ms"] == 120.0
    assert rows_[0]["early_moves"] == 1
    # moves before the cross traffic, then the hop named
    assert "| 2x | int-cp | 1 x 2 |" in ri.table(rows_)
    assert "| 1 | s3 port 2 |" in ri.table(rows_)
