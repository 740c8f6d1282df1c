"""The fabric demo's pieces that need no testbed: each switch's control-plane
configuration as the daemon validates it, and the summary line."""

from __future__ import annotations

import datetime as dt
import itertools
from pathlib import Path

import pytest
from p4relay_controlplane.config import load
from p4relay_scenarios import demo_fabric, reroute_bed, topology
from p4relay_scenarios.stack import toml_tables

_macs = (f"02:00:00:00:{i // 256:02x}:{i % 256:02x}" for i in itertools.count(1))


@pytest.fixture
def no_testbed(monkeypatch: pytest.MonkeyPatch) -> None:
    """MACs as the links would have them (each interface its own)."""
    seen: dict[tuple[object, ...], str] = {}

    def mac(*key: object, **_: object) -> str:
        return seen.setdefault(key, next(_macs))

    monkeypatch.setattr(demo_fabric, "mac_of", mac)
    monkeypatch.setattr(reroute_bed, "peer_mac", mac)


@pytest.mark.usefixtures("no_testbed")
@pytest.mark.parametrize("name", demo_fabric.NAMES)
def test_each_switch_config_is_one_the_daemon_accepts(name: str, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("t\n")
    f = tmp_path / f"{name}.toml"
    f.write_text(toml_tables(demo_fabric.controlplane_config(name, "http://127.0.0.1:8000", token)))
    cfg = load(f)
    assert cfg.switch == name
    assert cfg.routes is not None and cfg.nexthops is not None
    routed = {str(r.prefix): r.nexthop for r in cfg.routes}
    want: dict[str, int] = dict(reroute_bed.routes(name, demo_fabric.LAYOUT))
    # a dual-stack host's IPv6 subnet goes the way of its IPv4 one
    v6 = {h.name: h.v6.subnet for h in topology.HOSTS}
    want |= {v6[h.name]: want[h.subnet] for h in demo_fabric.LAYOUT.hosts if h.name in v6}
    assert routed == want
    roles = {n.id: n.int_role for n in cfg.nexthops}
    assert cfg.int is not None
    if name == "s1":
        # the relay switch: iRED on the bottleneck, every call traced, reroute by s3
        assert [p.port for p in cfg.ired or []] == [demo_fabric.bottleneck_port()]
        assert cfg.int.calls == "all"
        assert roles[7] == roles[8] == "transit"
        assert cfg.reroute is not None
        # the UAS's IPv4 and IPv6 prefixes, each its own slot, both moved by s3
        watch, watch6 = cfg.reroute.watch
        assert str(watch.prefix) == demo_fabric.LAYOUT.uas.subnet
        assert str(watch6.prefix) == v6[demo_fabric.LAYOUT.uas.name]
        assert (watch.slot, watch6.slot) == (0, 1)
        for w in (watch, watch6):
            assert (w.primary_port, w.backup_nexthop_id, w.flow_class) == (7, 8, 1)
    elif name == "s2":
        assert cfg.ired is None and cfg.reroute is None
        assert roles[demo_fabric.LAYOUT.uas.port] == "sink"
        assert cfg.int.report is not None and cfg.int.report.port == demo_fabric.REPORT_PORT
    else:
        assert cfg.int.calls == "none" and [h.port for h in cfg.int.hops] == [2]


def test_summary_line_says_what_happened() -> None:
    s = demo_fabric.Summary(
        sessions=240,
        offloaded=238,
        congestion_at_s=40.2,
        rerouted_at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        reroute_after_ms=141.6,
        moved_calls=38,
        backup_path="s1→s3→s2",
        back_after_s=39.4,
        mos_moved=4.41,
        worst_mos_moved=4.26,
        ired_drops=9120,
        ired_spared=12,
        max_hop_delay_ms=73.2,
    )
    assert s.line() == (
        "congestion on s1→s2 at 40 s: 38 calls moved to s1→s3→s2 in 142 ms, their MOS 4.4 "
        "(median), worst sample 4.3, back on s1→s2 after 39 s, iRED on s1 port 7 dropped 9120 "
        "packets and spared 12 of the calls', deepest INT hop delay 73 ms, 240 sessions, "
        "238 offloaded"
    )
    no_reroute = demo_fabric.Summary(sessions=3, offloaded=3, congestion_at_s=40.0)
    assert no_reroute.line().startswith("congestion on s1→s2 at 40 s: no reroute, ")
    assert demo_fabric.Summary(sessions=5, offloaded=4).line() == (
        "no congestion episode ran; 5 sessions, 4 offloaded"
    )


def test_path_text_names_the_switches_in_order() -> None:
    record = {"hops": [{"switch": "s1"}, {"switch": "s3"}, {"switch": "s2"}], "sink": "s2"}
    assert demo_fabric.path_text(record) == "s1→s3→s2"
    assert demo_fabric.path_text({"hops": [{"switch": "s1"}], "sink": "s2"}) == "s1→s2"
