"""The configuration: one file per switch, the environment and the flags over
it, validated whole and refused whole with every reason; `--check` prints the
entries without a switch; `--help` answers."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from p4relay_controlplane import cli
from p4relay_controlplane.config import ConfigError, load
from p4relay_controlplane.desired import desired

S1 = """
switch = "s1"
grpc_address = "127.0.0.1:50052"

[[ports]]
port = 2
rate_kbps = 10000

[[nexthops]]
id = 1
port = 2
src_mac = "02:00:00:00:00:01"
dst_mac = "02:00:00:00:00:99"
int_role = "transit"
[[nexthops]]
id = 3
port = 3
src_mac = "02:00:00:00:00:01"
dst_mac = "02:00:00:00:00:98"
int_role = "sink"

[[routes]]
prefix = "198.18.2.0/24"
nexthop = 1
[[routes]]
prefix = "0.0.0.0/0"
nexthop = 3

[int]
switch_id = 1
calls = "sampled"
sample_one_in = 8
[[int.hops]]
port = 2
[int.report]
port = 3
src_mac = "02:00:00:00:00:01"
dst_mac = "02:00:00:00:00:50"
src_addr = "198.19.0.1"
dst_addr = "198.19.0.50"
"""


def _file(tmp_path: Path, text: str) -> Path:
    f = tmp_path / "s.toml"
    f.write_text(text)
    return f


def test_check_prints_every_entry_without_a_switch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["--check", str(_file(tmp_path, S1))]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert "configuration OK" in err
    assert (
        "pipe.Ingress.ipv4_lpm: hdr.ipv4.dst_addr=0.0.0.0/0 -> Ingress.set_nexthop(nexthop_id=3)"
        in lines
    )
    assert "pipe.Ingress.int_role: ig_md.nexthop_id=3 -> Ingress.int_sink()" in lines
    # 1 in 8 calls: the leg index's low three bits are zero
    (watch,) = [ln for ln in lines if ln.startswith("pipe.Ingress.int_watch:")]
    assert "hdr.bridged.leg=0x0&0x7" in watch and "hdr.bridged.relay=0x1&0x1" in watch
    assert "tf1.tm.port.sched_shaping: dev_port=2 -> 10000 kbit/s, burst 9000 B" in lines


def test_sections_left_out_are_not_managed(tmp_path: Path) -> None:
    d = desired(
        load(_file(tmp_path, 'switch = "s"\n[[ired]]\nport=1\nmax_len_queue=64\nn_drop=4\n'))
    )
    assert set(d.tables) == {"pipe.Egress.ired_port", "pipe.Ingress.ired_spare"}
    assert d.shaping == {}
    empty = desired(load(_file(tmp_path, "routes = []\nnexthops = []\n")))
    assert empty.tables == {
        "pipe.Ingress.nexthop": {},
        "pipe.Ingress.ipv4_lpm": {},
        "pipe.Ingress.ipv6_lpm": {},
    }


def test_ipv6_routes_go_to_ipv6_lpm_beside_the_ipv4_ones(tmp_path: Path) -> None:
    text = (
        "[[nexthops]]\nid = 1\nport = 2\nsrc_mac = '02:00:00:00:00:01'\n"
        "dst_mac = '02:00:00:00:00:02'\n"
        "[[routes]]\nprefix = '198.18.2.0/24'\nnexthop = 1\n"
        "[[routes]]\nprefix = '2001:db8:2::/64'\nnexthop = 1\n"
        "[[routes]]\nprefix = '::/0'\nnexthop = 1\n"
    )
    lines = desired(load(_file(tmp_path, text))).lines()
    assert [ln for ln in lines if "_lpm" in ln] == [
        "pipe.Ingress.ipv4_lpm: hdr.ipv4.dst_addr=198.18.2.0/24 -> Ingress.set_nexthop(nexthop_id=1)",
        "pipe.Ingress.ipv6_lpm: hdr.ipv6.dst_addr=2001:db8:2::/64 -> Ingress.set_nexthop(nexthop_id=1)",
        "pipe.Ingress.ipv6_lpm: hdr.ipv6.dst_addr=::/0 -> Ingress.set_nexthop(nexthop_id=1)",
    ]


def test_reroute_watches_of_both_families_go_to_their_own_tables(tmp_path: Path) -> None:
    text = (
        "[reroute]\n[[reroute.classes]]\nflow_class = 1\nt_q_us = 100\nm = 2\nhold_ms = 1\n"
        "[[reroute.watch]]\nprefix = '198.18.2.0/24'\nslot = 0\nflow_class = 1\n"
        "primary_port = 2\nbackup_nexthop_id = 3\n"
        "[[reroute.watch]]\nprefix = 'fd00:198:18:2::/64'\nslot = 1\nflow_class = 1\n"
        "primary_port = 2\nbackup_nexthop_id = 3\n"
        "[[reroute.watch]]\nprefix = 'fd00:198:18:9::/64'\nslot = 2\nflow_class = 1\n"
        "primary_port = 4\n"
    )
    lines = [ln for ln in desired(load(_file(tmp_path, text))).lines() if "watch" in ln]
    assert lines == [
        "pipe.Ingress.reroute_watch: hdr.ipv4.dst_addr=198.18.2.0/24 -> Ingress.reroute_backup("
        "slot=0, flow_class=1, backup_nexthop_id=3, primary_port=2)",
        "pipe.Ingress.reroute_watch6: hdr.ipv6.dst_addr=fd00:198:18:2::/64 -> "
        "Ingress.reroute_backup(slot=1, flow_class=1, backup_nexthop_id=3, primary_port=2)",
        "pipe.Ingress.reroute_watch6: hdr.ipv6.dst_addr=fd00:198:18:9::/64 -> "
        "Ingress.reroute_notify(slot=2, flow_class=1, primary_port=4)",
    ]
    # one slot space for both families
    dup = text.replace("slot = 1", "slot = 0")
    with pytest.raises(ConfigError, match="share a slot"):
        load(_file(tmp_path, dup))


def test_ired_spares_sip_by_default_and_as_configured(tmp_path: Path) -> None:
    base = "[[ired]]\nport=1\nmax_len_queue=64\nn_drop=4\n"

    def spare(extra: str) -> list[str]:
        d = desired(load(_file(tmp_path, base + extra)))
        return [
            ln.split(": ", 1)[1] for ln in d.lines() if ln.startswith("pipe.Ingress.ired_spare")
        ]

    default = spare("")
    assert len(default) == 6  # CS3, CS5; to and from 5060 and 5061
    assert default[0].startswith("$MATCH_PRIORITY=1,ig_md.dscp=0x18&0x3f ")
    assert "ig_md.l4_dst_port=0x13c4&0xffff" in default[2]
    assert "ig_md.l4_src_port=0x13c4&0xffff" in default[3]
    assert all(ln.endswith("-> Ingress.ired_spare_packet()") for ln in default)
    own = spare("[ired_spare]\ndscp = ['af31', 40]\nudp_ports = []\n")
    assert [ln.split(" ")[0] for ln in own] == [
        "$MATCH_PRIORITY=1,ig_md.dscp=0x1a&0x3f",
        "$MATCH_PRIORITY=2,ig_md.dscp=0x28&0x3f",
    ]
    assert spare("[ired_spare]\ndscp = []\nudp_ports = []\n") == ["empty"]


def test_int_call_selection(tmp_path: Path) -> None:
    def watch(int_table: str, table: str = "pipe.Ingress.int_watch") -> list[str]:
        cfg = load(_file(tmp_path, f"[int]\nswitch_id = 2\n{int_table}"))
        return [ln for ln in desired(cfg).lines() if ln.startswith(f"{table}:")]

    (every,) = watch('calls = "all"\n')
    assert "hdr.bridged.relay=0x1&0x1" in every and "leg" not in every
    assert watch('calls = "none"\n') == ["pipe.Ingress.int_watch: empty"]
    two = watch('calls = "prefixes"\nprefixes = ["198.18.2.0/24", "203.0.113.0/24"]\n')
    assert len(two) == 2
    assert "hdr.ipv4.dst_addr=0xc6120200&0xffffff00" in two[0]
    assert "$MATCH_PRIORITY=10" in two[0] and "$MATCH_PRIORITY=11" in two[1]
    # IPv6 prefixes go to int_watch6 (LPM), IPv4 ones stay int_watch's
    mixed = 'calls = "prefixes"\nprefixes = ["198.18.2.0/24", "2001:db8:2::/48"]\n'
    (v4,) = watch(mixed)
    assert "hdr.ipv4.dst_addr=0xc6120200&0xffffff00" in v4
    (v6,) = watch(mixed, "pipe.Ingress.int_watch6")
    assert v6 == (
        "pipe.Ingress.int_watch6: hdr.ipv6.dst_addr=2001:db8:2::/48 -> Ingress.int_watch_flow()"
    )
    assert watch('calls = "all"\n', "pipe.Ingress.int_watch6") == ["pipe.Ingress.int_watch6: empty"]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[int]\nswitch_id = 1\ncalls = 'sampled'\nsample_one_in = 6\n", "power of two"),
        ("[int]\nswitch_id = 1\ncalls = 'sampled'\n", "sample_one_in > 1"),
        ("[int]\nswitch_id = 1\ncalls = 'prefixes'\n", "needs int.prefixes"),
        ("[int]\nswitch_id = 1\nprefixes = ['10.0.0.0/8']\n", "only with calls = prefixes"),
        ("[int]\nswitch_id = 1\ncalls = 'some'\n", "int.calls"),
        ("[int]\ncalls = 'all'\n", "int.switch_id: Field required"),
        (
            "[int]\nswitch_id = 1\n[[int.hops]]\nport = 2\nonset_cells = 10\nclear_cells = 20\n",
            "must not exceed the onset",
        ),
        ("[int]\nswitch_id = 1\n[[int.hops]]\nport = 2\n[[int.hops]]\nport = 2\n", "given twice"),
        (
            "[int]\nswitch_id = 1\n[int.report]\nport = 1\nsrc_mac = 'x'\ndst_mac = '02:00:00:00:00:01'\n"
            "src_addr = '1.2.3.4'\ndst_addr = '1.2.3.5'\n",
            "MAC address",
        ),
        (
            "[[nexthops]]\nid = 1\nport = 1\nsrc_mac = '02:00:00:00:00:01'\n"
            "dst_mac = '02:00:00:00:00:02'\nint_role = 'sink'\n",
            "no [int] section",
        ),
        (
            "[int]\nswitch_id = 1\n[[nexthops]]\nid = 1\nport = 1\nsrc_mac = '02:00:00:00:00:01'\n"
            "dst_mac = '02:00:00:00:00:02'\nint_role = 'sink'\n",
            "needs [int.report]",
        ),
        ("[[routes]]\nprefix = '10.0.0.0/8'\nnexthop = 1\n", "routes need the nexthops"),
        ("nexthops = []\n[[routes]]\nprefix = '10.0.0.0/8'\nnexthop = 1\n", "nexthop 1 is not in"),
        ("nexthops = []\n[[routes]]\nprefix = '10.0.0.1/8'\nnexthop = 1\n", "host bits set"),
        ("nexthops = []\n[[routes]]\nprefix = '2001:db8::1/64'\nnexthop = 1\n", "host bits set"),
        ("nexthops = []\n[[routes]]\nprefix = '2001:db8::/129'\nnexthop = 1\n", "at most /128"),
        ("nexthops = []\n[[routes]]\nprefix = '10.0.0.0/33'\nnexthop = 1\n", "at most /32"),
        ("nexthops = []\n[[routes]]\nprefix = '2001:db8::zz/64'\nnexthop = 1\n", "IPv6 prefix"),
        ("nexthops = []\n[[routes]]\nprefix = 'fe80::/64'\nnexthop = 1\n", "link-local"),
        ("nexthops = []\n[[routes]]\nprefix = '::ffff:0:0/96'\nnexthop = 1\n", "IPv4-mapped"),
        (
            "[int]\nswitch_id = 1\ncalls = 'prefixes'\nprefixes = ['2001:db8::1/32']\n",
            "host bits set",
        ),
        (
            "[int]\nswitch_id = 1\ncalls = 'prefixes'\nprefixes = ['fe80::/64']\n",
            "link-local",
        ),
        (
            "[int]\nswitch_id = 1\ncalls = 'prefixes'\nprefixes = ['::ffff:0:0/104']\n",
            "IPv4-mapped",
        ),
        (
            "[reroute]\n[[reroute.classes]]\nflow_class = 1\nt_q_us = 100\nm = 2\nhold_ms = 1\n"
            "[[reroute.watch]]\nprefix = '2001:db8:2::1/64'\nslot = 0\nflow_class = 1\n"
            "primary_port = 2\n",
            "host bits set",
        ),
        (
            "[reroute]\n[[reroute.classes]]\nflow_class = 1\nt_q_us = 100\nm = 2\nhold_ms = 1\n"
            "[[reroute.watch]]\nprefix = 'fe80::/64'\nslot = 0\nflow_class = 1\n"
            "primary_port = 2\n",
            "link-local",
        ),
        ("[ired_spare]\ndscp = ['CS3']\n", "ired_spare needs [[ired]]"),
        (
            "[[ired]]\nport=1\nmax_len_queue=64\nn_drop=4\n[ired_spare]\ndscp = ['XX9']\n",
            "is not a DSCP",
        ),
        (
            "[[ired]]\nport=1\nmax_len_queue=64\nn_drop=4\n[ired_spare]\ndscp = [64]\n",
            "less than or equal to 63",
        ),
        (
            "[[ired]]\nport=1\nmax_len_queue=64\nn_drop=4\n[ired_spare]\nudp_ports = [0]\n",
            "UDP port 0",
        ),
        (
            "[[ired]]\nport=1\nmax_len_queue=64\nn_drop=4\n[ired_spare]\ndscp = ['CS0']\n",
            "best effort",
        ),
        (
            "[[ired]]\nport=1\nmax_len_queue=64\nn_drop=4\n[ired_spare]\n"
            "udp_ports = [5060, 5061, 5062, 5063, 5064, 5065, 5066, 5067]\n",
            "ired_spare holds 16",
        ),
        ("[[ports]]\nport = 512\nrate_kbps = 1\n", "ports.0.port"),
        (
            "[[ports]]\nport = 2\nrate_kbps = 1\n[[ports]]\nport = 2\nrate_kbps = 2\n",
            "port 2 given twice",
        ),
        ("grpc_address = 'nowhere'\n", "expected host:port"),
        ("server_url = 'ftp://x'\n", "server_url must start with http"),
        ("reconcile_interval_s = 0\n", "reconcile_interval_s"),
        ("bogus = 1\n", "bogus"),
    ],
)
def test_bad_configuration_is_refused_whole(
    text: str, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = _file(tmp_path, text)
    with pytest.raises(ConfigError, match=None) as exc:
        load(f)
    assert says in str(exc.value), str(exc.value)
    assert cli.main(["--check", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("p4relay-controlplane: configuration error:") and says in err, err


def test_environment_over_file_and_flags_over_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    f = _file(tmp_path, S1)
    monkeypatch.setenv("P4RELAY_CONTROLPLANE_GRPC_ADDRESS", "127.0.0.1:50099")
    monkeypatch.setenv("P4RELAY_CONTROLPLANE_INT__CALLS", "all")
    monkeypatch.setenv("P4RELAY_CONTROLPLANE_INT__SAMPLE_ONE_IN", "1")
    cfg = load(f)
    assert cfg.grpc_address == "127.0.0.1:50099"
    assert cfg.int is not None and cfg.int.calls == "all" and cfg.int.switch_id == 1
    assert load(f, {"grpc_address": "127.0.0.1:50100"}).grpc_address == "127.0.0.1:50100"
    monkeypatch.setenv(
        "P4RELAY_CONTROLPLANE_ROUTES", json.dumps([{"prefix": "10.0.0.0/8", "nexthop": 1}])
    )
    assert [str(r.prefix) for r in load(f).routes or []] == ["10.0.0.0/8"]
    monkeypatch.setenv("P4RELAY_CONTROLPLANE_ROUTES", "[{not json")
    assert cli.main(["--check", str(f)]) == 2
    assert "routes" in capsys.readouterr().err


def test_a_missing_file_and_an_unreadable_token(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["--check", str(tmp_path / "nope.toml")]) == 2
    assert "cannot read" in capsys.readouterr().err
    f = _file(tmp_path, f'token_file = "{tmp_path / "absent.token"}"\n')
    assert cli.main(["--check", str(f)]) == 2
    assert "cannot read token_file" in capsys.readouterr().err


def test_help_answers(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for words in ("--check CONFIG", "--once", "P4RELAY_CONTROLPLANE_", "drift_repaired", "SIGHUP"):
        assert words in out, words


def test_once_without_a_switch_fails_cleanly(tmp_path: Path) -> None:
    f = _file(tmp_path, 'grpc_address = "127.0.0.1:1"\ntimeout_s = 1\nlog_json = false\n')
    r = subprocess.run(
        [sys.executable, "-m", "p4relay_controlplane.cli", "--config", str(f), "--once"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 1, r
    assert "p4relay-controlplane: switch 127.0.0.1:1:" in r.stderr


def test_the_operator_page_names_every_setting() -> None:
    """switch/controlplane/README.md is the configuration reference: every
    setting and every key of every section is in it."""
    from pathlib import Path

    from p4relay_controlplane.config import (
        IntHopConfig,
        IntReportConfig,
        IntSection,
        IredPort,
        NexthopConfig,
        PortShaping,
        RerouteClassConfig,
        RerouteSection,
        RerouteWatchConfig,
        RouteConfig,
        Settings,
    )

    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    models = (
        Settings,
        PortShaping,
        NexthopConfig,
        RouteConfig,
        RerouteSection,
        RerouteClassConfig,
        RerouteWatchConfig,
        IredPort,
        IntSection,
        IntHopConfig,
        IntReportConfig,
    )
    missing = [
        f"{m.__name__}.{name}"
        for m in models
        for name in m.model_fields
        # `name`, `[[name]]`, `[[section.name]]`, `name` in a `a`/`b` pair
        if not re.search(rf"[`\[.]{name}[`\]]", text)
    ]
    assert not missing, missing


def test_the_daemon_serves_metrics_waits_for_its_switch_and_stops_on_sigterm(
    tmp_path: Path,
) -> None:
    """No switch yet: /metrics answers (connected 0) and the daemon keeps trying;
    a second one on the same metrics port is exit 2, named; SIGTERM is exit 0."""
    import signal
    import urllib.request

    from p4relay_testsupport import free_port, wait_until

    port = free_port()
    f = _file(tmp_path, f'grpc_address = "127.0.0.1:{free_port()}"\ntimeout_s = 0.5\n')
    cmd = [sys.executable, "-m", "p4relay_controlplane.cli", "--config", str(f)]
    cmd += ["--metrics-listen", f"127.0.0.1:{port}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:

        def serving() -> bool:
            assert proc.poll() is None, proc.communicate()[1][-2000:]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1) as r:
                    return "p4relay_controlplane_switch_connected 0.0" in r.read().decode()
            except OSError:
                return False

        wait_until(serving, within=20, what="/metrics")
        taken = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
        assert taken.returncode == 2
        assert f"p4relay-controlplane: metrics on 127.0.0.1:{port}" in taken.stderr
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
        assert '"switch_unavailable"' in proc.communicate()[1]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize(
    "example", sorted((Path(__file__).parents[1] / "examples").glob("*.toml")), ids=lambda p: p.name
)
def test_shipped_examples_are_valid(example: Path) -> None:
    cfg = load(example)
    assert desired(cfg).lines(), f"{example.name} asks for no entry"
