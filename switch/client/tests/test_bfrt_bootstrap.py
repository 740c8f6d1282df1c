"""switch/bfrt/bootstrap.py (bfshell's chassis set-up) writes the contract's names,
no table entry, and refuses bad site configs; its jitter write-back sessions are the P4 build's."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from contract_check import load_contract

P4_ROOT = Path(__file__).resolve().parents[2] / "p4"


@pytest.fixture(scope="module")
def contract() -> dict[str, Any]:
    return load_contract()


def writeback_session_base() -> int:
    text = (P4_ROOT / "include" / "defines.p4").read_text()
    m = re.search(r"#define JITTER_WRITEBACK_SESSION_BASE (\d+)", text)
    assert m is not None, "defines.p4 lost JITTER_WRITEBACK_SESSION_BASE"
    return int(m.group(1))


# ---------------------------------------------------------------- BfRt bootstrap


def _bootstrap() -> Any:
    import importlib.util
    import sys

    if "p4relay_bfrt_bootstrap" in sys.modules:
        return sys.modules["p4relay_bfrt_bootstrap"]
    path = P4_ROOT.parent / "bfrt" / "bootstrap.py"
    spec = importlib.util.spec_from_file_location("p4relay_bfrt_bootstrap", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def test_bootstrap_writes_contract_names_and_no_table_entry(contract: dict[str, Any]) -> None:
    """The chassis only: entry scope of the contract's per-pipe tables, ports,
    mirror sessions; no entry of any P4 table (one writer per table: the
    switch control plane, rtpagent)."""
    boot = _bootstrap()
    tables = {t["name"]: t for t in contract["table"]}
    for t in boot.PER_PIPE_TABLES:
        assert t in tables, t
        assert tables[t].get("entry_scope") == "per_pipe", t
    ops = boot.plan(boot.load_config(str(P4_ROOT.parent / "bfrt" / "site.example.json")))
    assert [op for op in ops if op.path[:2] == ("p4relay", "pipe")] == [
        op for op in ops if op.path[-1] == "symmetric_mode_set"
    ]
    assert {op.path[:2] for op in ops} == {("port", "port"), ("p4relay", "pipe"), ("mirror", "cfg")}


@pytest.mark.parametrize(
    ("patch", "needle"),
    [
        ({"nexthops": []}, r"nexthops: next hops are the switch control plane's"),
        ({"routes": []}, r"\[\[routes\]\] of p4relay-controlplane"),
        ({"default_route": {"nexthop_id": 1}}, "route 0.0.0.0/0"),
        ({"relay_addrs": []}, "the relay addresses are rtpagent's"),
        ({"ports": [{"port": 600}]}, "outside 0..511"),
        ({"ports": [{"port": "1/0", "speed": "400G"}]}, "speed"),
        ({"mirror_sessions": [{"sid": 1, "port": 5, "direction": "UP"}]}, "direction"),
        ({"colour": "blue"}, "unknown keys"),
        ({"jitter_writeback": {"ports": [68, 68]}}, "is in pipe 0; the copy must stay in pipe 1"),
        ({"mirror_sessions": [{"sid": 1001, "port": 5}]}, "jitter write-back session"),
        ({"jitter_writeback": {"base": 1000}}, "session_base and ports"),
        ({"jitter_writeback": {"session_base": 1015}}, "session_base"),
    ],
)
def test_bootstrap_rejects_bad_config(patch: dict[str, Any], needle: str) -> None:
    boot = _bootstrap()
    config = boot.load_config(str(P4_ROOT.parent / "bfrt" / "site.example.json"))
    config.update(patch)
    with pytest.raises(boot.ConfigError, match=needle):
        boot.plan(config)


def test_bootstrap_creates_the_programs_writeback_sessions() -> None:
    """One egress session per pipe at the P4 build's JITTER_WRITEBACK_SESSION_BASE,
    each to a port of its own pipe; none when the config says null (LEAN)."""
    boot = _bootstrap()
    config = boot.load_config(str(P4_ROOT.parent / "bfrt" / "site.example.json"))
    base = writeback_session_base()
    wb = [op for op in boot.plan(config) if op.what.startswith("jitter write-back")]
    assert [op.kwargs["sid"] for op in wb] == [base, base + 1]
    for pipe, op in enumerate(wb):
        assert op.path == ("mirror", "cfg", "add_with_normal")
        assert op.kwargs["direction"] == "EGRESS"
        assert op.kwargs["ucast_egress_port"] >> 7 == pipe
    config["jitter_writeback"] = None
    assert not [op for op in boot.plan(config) if op.what.startswith("jitter write-back")]


# ---------------------------------------------------------------- checksum lists
#
# Checksums are where a first compile goes silently wrong: a field missing from
# a list still compiles. This evaluates the parser's subtract lists and the
# deparser's update lists as written in the source, with the ones' complement
# arithmetic of Tofino's checksum engines, on random relayed packets, and
# compares with checksums computed from scratch.


class _RecordingBfrt:
    """Stands in for bfshell's ``bfrt`` object (not runnable here): records calls,
    raises on the first add of an entry that "exists", answers the scope getter."""

    def __init__(self, existing: set[str], symmetric: bool) -> None:
        self.calls: list[str] = []
        self.existing = existing
        self.symmetric = symmetric
        self.path: tuple[str, ...] = ()

    def __getattr__(self, name: str) -> Any:
        child = _RecordingBfrt(self.existing, self.symmetric)
        child.calls = self.calls
        child.path = (*self.path, name)
        return child

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        name = ".".join(self.path)
        if self.path[-1] == "symmetric_mode_get":
            return self.symmetric
        if self.path[-1] == "get":  # port_hdl_info.get -> .data[b"$DEV_PORT"]
            return type("Info", (), {"data": {b"$DEV_PORT": 100 + kwargs["CONN_ID"]}})()
        self.calls.append(f"{name}{sorted(kwargs.items())}")
        if self.path[-1].startswith("add") and self.path[-2] in self.existing:
            raise RuntimeError("entry exists")
        return None


def test_bootstrap_apply_modifies_existing_and_keeps_scope() -> None:
    import io

    boot = _bootstrap()
    ops = boot.plan(boot.load_config(str(P4_ROOT.parent / "bfrt" / "site.example.json")))
    mirrors = [op for op in ops if op.path == ("mirror", "cfg", "add_with_normal")]
    fake = _RecordingBfrt(existing={"cfg"}, symmetric=False)
    out = io.StringIO()
    assert boot.apply(fake, ops, out) == 0
    log = out.getvalue()
    assert log.count("mod   mirror session 1 (existed)") == 1
    assert log.count(" (existed)") == len(mirrors) == 7
    assert "same  pipe.Ingress.relay entry scope" in log
    assert not any("symmetric_mode_set" in c for c in fake.calls)
    assert any(c.startswith("port.port.add") and "('DEV_PORT', 101)" in c for c in fake.calls)
    assert sum("mod_with_normal" in c for c in fake.calls) == len(mirrors)


def test_bootstrap_creates_the_programs_reroute_notice_sessions() -> None:
    """One egress session per pipe at the build's REROUTE_NOTICE_SESSION_BASE, to
    each pipe's recirculation port (the notice re-enters that pipe's Ingress);
    none when the config says null; sessions never overlap the write-back ones."""
    boot = _bootstrap()
    text = (P4_ROOT / "include" / "defines.p4").read_text()
    m = re.search(r"#define REROUTE_NOTICE_SESSION_BASE (\d+)", text)
    assert m is not None, "defines.p4 lost REROUTE_NOTICE_SESSION_BASE"
    base = int(m.group(1))
    config = boot.load_config(str(P4_ROOT.parent / "bfrt" / "site.example.json"))
    ops = boot.plan(config)
    rr = [op for op in ops if op.what.startswith("reroute notice")]
    assert [op.kwargs["sid"] for op in rr] == [base, base + 1]
    assert [op.kwargs["ucast_egress_port"] & 0x7F for op in rr] == [68, 68]
    wb = {op.kwargs["sid"] for op in ops if op.what.startswith("jitter write-back")}
    assert not wb & {op.kwargs["sid"] for op in rr}
    config["reroute_notice"] = None
    assert not [op for op in boot.plan(config) if op.what.startswith("reroute notice")]
    with pytest.raises(boot.ConfigError, match="must stay in pipe 1"):
        boot.plan({"reroute_notice": {"ports": [68, 68]}})


def test_bootstrap_default_ports_are_the_programs_recirculation_ports() -> None:
    """Each target's per-pipe sessions go by default to the recirculation port
    the P4 program recognises on that generation (defines.p4's
    RECIRC_PORT_LOCAL + 128 * pipe): 68 on Tofino 1; on Tofino 2, whose
    recirculation ports are local ports 0-7 and whose local port 68 is a
    front-panel port, 6."""
    boot = _bootstrap()
    defines = (P4_ROOT / "include" / "defines.p4").read_text()
    m = re.search(
        r"#if __TARGET_TOFINO__ == 2\n#define RECIRC_PORT_LOCAL 7w(\d+)\n"
        r"#else\n#define RECIRC_PORT_LOCAL 7w(\d+)\n",
        defines,
    )
    assert m is not None, "defines.p4: RECIRC_PORT_LOCAL per generation"
    local = {"tofino2": int(m.group(1)), "tofino": int(m.group(2))}
    assert local == {"tofino": 68, "tofino2": 6}
    for target, port in local.items():
        ops = boot.plan({"target": target})
        for what in ("jitter write-back", "reroute notice", "iRED feedback"):
            per_pipe = sorted(
                (op.kwargs["sid"], op.kwargs["ucast_egress_port"])
                for op in ops
                if op.what.startswith(what)
            )
            assert [p for _, p in per_pipe] == [port, 128 + port], (target, what)


def test_bootstrap_tofino2_sessions_are_the_t2_builds() -> None:
    """``"target": "tofino2"``: the per-pipe sessions at the bases build.sh's
    Tofino 2 builds compile in (8-bit mirror ids), and no session id above 255."""
    boot = _bootstrap()
    build = (P4_ROOT / "build.sh").read_text()
    t2 = build.split("standard-t2|large-t2)", 1)[1].split(";;", 1)[0]
    bases = {k: int(v) for k, v in re.findall(r"-D(\w+_SESSION(?:_BASE)?)=(\d+)", t2)}
    config = boot.load_config(str(P4_ROOT.parent / "bfrt" / "site.example.json"))
    config.pop("jitter_writeback")
    config.pop("ired_feedback")
    config["target"] = "tofino2"
    config["mirror_sessions"] = [
        {"sid": bases["INT_REPORT_SESSION"], "port": 5, "direction": "INGRESS"}
    ]
    sids = {
        what: sorted(op.kwargs["sid"] for op in boot.plan(config) if op.what.startswith(what))
        for what in ("jitter write-back", "reroute notice", "iRED feedback", "mirror session")
    }
    assert sids == {
        "jitter write-back": [bases["JITTER_WRITEBACK_SESSION_BASE"] + p for p in (0, 1)],
        "reroute notice": [bases["REROUTE_NOTICE_SESSION_BASE"] + p for p in (0, 1)],
        "iRED feedback": [bases["IRED_SESSION_BASE"] + p for p in (0, 1)],
        "mirror session": [bases["INT_REPORT_SESSION"]],
    }
    config["mirror_sessions"] = [{"sid": 1020, "port": 5}]
    with pytest.raises(boot.ConfigError, match=r"sid: expected an integer in 1\.\.255"):
        boot.plan(config)
    config["mirror_sessions"] = []
    config["jitter_writeback"] = {"session_base": 1000}
    with pytest.raises(boot.ConfigError, match=r"session_base: expected an integer in 1\.\.254"):
        boot.plan(config)
    with pytest.raises(boot.ConfigError, match="target: one of"):
        boot.plan({"target": "tofino3"})
