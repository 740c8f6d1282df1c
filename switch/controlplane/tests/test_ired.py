"""iRED as the operator configures it (`[[ired]]`): parsed from the file and
the environment with clear errors; set by the daemon on the real software
switch at connect and again after the switch restarted; a port the switch
does not have is refused and reported without stopping the others; a port
the switch runs iRED on but the configuration no longer lists is set back to
tail drop (at a reload, and at connect for one dropped while the daemon was
stopped); `--show-ired` prints what the switch runs."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from conftest import ROOT_ONLY, Bed, daemon, restart
from p4relay_controlplane import cli
from p4relay_controlplane.config import ConfigError, IredPort, Settings, load
from p4relay_controlplane.daemon import Daemon
from p4relay_switch.ired import IredSettings, ired_settings, set_ired
from p4relay_switch.names import (
    IRED_DECISIONS,
    IRED_PORT,
    REG_IRED_DROP_FLAG,
    REG_IRED_QAVG,
)
from p4relay_testsupport import wait_for
from prometheus_client import REGISTRY

SPEC = "port=1,max_len_queue=256,n_drop=16,ewma_n=2,protect=off"
# 1514-byte packets are 19 cells of 80 bytes.
WANT = IredSettings(
    max_len_queue=256 * 19, n_drop=16 * 19, ewma_n=2, drop_prob=2 / 17, protect=False
)
# As read back: the chance is a 16-bit register.
ON_SWITCH = dataclasses.replace(WANT, drop_prob=WANT.drop_prob_reg / 65536)
P1 = "port = 1\nmax_len_queue = 256\nn_drop = 16\newma_n = 2\nprotect = false"
P1_NEW = "port = 1\nmax_len_queue = 512\nn_drop = 32"
P2 = "port = 2\nmax_len_queue = 64\nn_drop = 4"
SET = "p4relay_controlplane_ired_port_set"
RELOADS = "p4relay_controlplane_config_reloads_total"


def _toml(address: str, *ports: str, extra: str = "") -> str:
    return (
        f'switch = "ired-sw"\ngrpc_address = "{address}"\nreconcile_interval_s = 30\n{extra}'
        + "".join(f"[[ired]]\n{p}\n" for p in ports)
    )


def test_file_and_environment_forms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert IredPort.model_validate(SPEC).settings() == WANT
    f = tmp_path / "s.toml"
    f.write_text(
        "[[ired]]\nport = 1\nmax_len_queue = 256\nn_drop = 16\n"
        "ewma_n = 2\nprotect = false\n[[ired]]\nport = 3\nmax_len_queue = 64\n"
        "n_drop = 4\ntail_drop = true\ndrop_prob = 0.5\n"
    )
    cfg = load(f)
    assert [p.settings() for p in cfg.ired or []] == [
        WANT,
        IredSettings(max_len_queue=64 * 19, n_drop=4 * 19, drop_prob=0.5, tail_drop=True),
    ]
    # the environment (a JSON list, of tables or key=value strings) over the file
    monkeypatch.setenv(
        "P4RELAY_CONTROLPLANE_IRED", json.dumps(["port=5,max_len_queue=128,n_drop=8"])
    )
    assert [p.port for p in load(f).ired or []] == [5]
    monkeypatch.setenv(
        "P4RELAY_CONTROLPLANE_IRED", json.dumps([{"port": 6, "max_len_queue": 128, "n_drop": 8}])
    )
    assert [p.port for p in load(f).ired or []] == [6]
    # no section: iRED not managed; an empty list: every port back to tail drop
    monkeypatch.delenv("P4RELAY_CONTROLPLANE_IRED")
    assert Settings().ired is None
    f.write_text("ired = []\n")
    assert load(f).ired == []


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("port=1,max_len_queue=64,n_drop=32", "n_drop (N) 32 must be below max_len_queue / 2 = 32"),
        ("port=1,max_len_queue=64,n_drop=4,ewma_n=5", "ewma_n (n) 5 must be 1..4"),
        ("port=1,max_len_queue=64,n_drop=4,ewma_n=0", "ewma_n (n) 0 must be 1..4"),
        ("port=1,max_len_queue=64,n_drop=4,drop_prob=2", "drop_prob"),
        ("port=1,max_len_queue=64,n_drop=4,protect=maybe", "protect='maybe' is not on/off"),
        ("port=1,max_len_queue=64,n_drop=4,depth=3", "depth"),
        ("port=1,max_len_queue=64", "n_drop"),
        ("port=1,max_len_queue=64,n_drop", "'n_drop' is not key=value"),
        ("port=1,port=2,max_len_queue=64,n_drop=4", "port given twice"),
        ("port=-1,max_len_queue=64,n_drop=4", "port"),
        ("port=1,max_len_queue=99999,n_drop=4", "max_len_queue"),
    ],
)
def test_bad_settings_are_configuration_errors(
    spec: str,
    says: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    f = tmp_path / "s.toml"
    f.write_text("")
    monkeypatch.setenv("P4RELAY_CONTROLPLANE_IRED", json.dumps([spec]))
    assert cli.main(["--check", str(f)]) == 2
    err = capsys.readouterr().err
    assert "p4relay-controlplane: configuration error" in err and says in err, err


def test_a_port_configured_twice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "s.toml"
    f.write_text(_toml("127.0.0.1:1", P2, P2))
    assert cli.main(["--check", str(f)]) == 2
    assert "iRED: port 2 configured twice" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="configured twice"):
        load(f)


@ROOT_ONLY
@pytest.mark.timeout(120)
async def test_set_at_connect_and_after_a_switch_restart(
    bed: Bed, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = tmp_path / "s.toml"
    # port 7 is not a port of this switch: refused, the rest set
    conf.write_text(_toml(bed.sw.address, P1, "port = 7\nmax_len_queue = 64\nn_drop = 4"))
    with daemon(conf, tmp_path / "d.log") as d:

        async def set_1() -> bool:
            return await ired_settings(bed.probe) == {1: ON_SWITCH}

        await wait_for(set_1, within=30, interval=0.1, what="iRED on port 1")
        await wait_for(
            lambda: d.sample(SET, dev_port="1") == 1 and d.sample(SET, dev_port="7") == 0,
            within=5,
            what="iRED gauges",
        )
        (refused,) = [json.loads(x) for x in d.log_lines("entry_refused")]
        assert refused["table"] == IRED_PORT and "not a port of this switch" in refused["reason"]

        out = await asyncio.to_thread(cli.main, ["--config", str(conf), "--show-ired"])
        text = capsys.readouterr().out
        assert out == 0, text
        (row,) = [ln for ln in text.splitlines() if ln.split()[:2] == ["1", "iRED"]]
        assert row.split()[2:6] == ["256", "16", "112/224", "2"], row
        assert "decisions 0, drops 0" in row
        assert "7  configured but not set on the switch" in text, text

        # another setting than the configuration's is named
        other = tmp_path / "other.toml"
        other.write_text(_toml(bed.sw.address, P1_NEW))
        await asyncio.to_thread(cli.main, ["--config", str(other), "--show-ired"])
        assert "set differently from the configuration" in capsys.readouterr().out

        await restart(bed)  # same address, empty tables and registers
        await wait_for(set_1, within=20, interval=0.1, what="iRED set again")


async def test_show_without_a_switch(capsys: pytest.CaptureFixture[str]) -> None:
    out = await asyncio.to_thread(
        cli.main, ["--grpc-address", "127.0.0.1:1", "--timeout-s", "1", "--show-ired"]
    )
    assert out == 1
    assert "p4relay-controlplane: switch 127.0.0.1:1:" in capsys.readouterr().err


@ROOT_ONLY
@pytest.mark.timeout(180)
async def test_sighup_reloads_ired_and_refuses_a_bad_configuration(
    bed: Bed, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The file edited, SIGHUP: the changed port set, the port dropped from the file
    back to tail drop (its drop flag and average zeroed, its counters kept), a
    restart-only setting named, the reload counted; then a file that does not
    validate is refused and the running setting stays."""
    probe = bed.probe
    conf = tmp_path / "s.toml"
    conf.write_text(_toml(bed.sw.address, P1, P2))
    with daemon(conf, tmp_path / "d.log") as d:

        async def both_set() -> bool:
            # A pass writes the port's entry, then its drop chance (a register):
            # port 1 is set once both are.
            got = await ired_settings(probe)
            return set(got) == {1, 2} and got[1] == ON_SWITCH

        await wait_for(both_set, within=60, interval=0.2, what="ports 1 and 2")
        # port 2 mid-way: a drop flag up, decisions counted
        await probe.write_register(REG_IRED_DROP_FLAG, {2: 1})
        await probe.write_counter(IRED_DECISIONS, {2: 5})

        conf.write_text(_toml(bed.sw.address, P1_NEW, extra="client_id = 12\n"))
        d.hup()
        want = IredSettings(max_len_queue=512 * 19, n_drop=32 * 19, drop_prob=2 / 33)
        want = dataclasses.replace(want, drop_prob=want.drop_prob_reg / 65536)

        async def reloaded() -> bool:
            return await ired_settings(probe) == {1: want}

        await wait_for(reloaded, within=20, interval=0.2, what="reload applied")
        flag = await probe.read_register(REG_IRED_DROP_FLAG, [2])
        decisions = await probe.read_counter(IRED_DECISIONS, [2])
        assert sum(flag[2]) == 0 and sum(decisions[2]) == 5, (flag, decisions)
        await wait_for(lambda: d.sample(RELOADS, result="applied") == 1, within=10, what="count")
        assert d.sample(SET, dev_port="1") == 1
        assert d.sample(SET, dev_port="2") is None
        (restart_line,) = d.log_lines("config_reload_needs_restart")
        assert json.loads(restart_line)["settings"] == ["client_id"]
        removed = [json.loads(x) for x in d.log_lines("entry_set")]
        assert {"table": IRED_PORT, "key": "eg_intr_md.egress_port=2", "kind": "extra"} in [
            {k: e[k] for k in ("table", "key", "kind")} for e in removed
        ]

        # --show-ired with the same file: port 1 as configured, port 2 gone
        assert await asyncio.to_thread(cli.main, ["--config", str(conf), "--show-ired"]) == 0
        shown = capsys.readouterr().out
        assert [ln.split()[:3] for ln in shown.splitlines() if ln[:5].strip().isdigit()] == [
            ["1", "iRED+protect", "512"]
        ], shown
        assert "differently" not in shown and "not set" not in shown, shown

        # a file that does not validate: refused, logged, counted; the switch keeps port 1
        conf.write_text(_toml(bed.sw.address, "port = 1\nmax_len_queue = 512\nn_drop = 300"))
        d.hup()
        await wait_for(lambda: d.sample(RELOADS, result="invalid") == 1, within=10, what="refusal")
        (bad,) = d.log_lines("config_reload_refused")
        assert "n_drop (N) 300 must be below max_len_queue / 2" in bad, bad
        assert await ired_settings(probe) == {1: want}
        assert d.proc.poll() is None  # still running


@ROOT_ONLY
@pytest.mark.timeout(120)
async def test_connect_sets_a_port_dropped_while_the_daemon_was_stopped_back_to_tail_drop(
    bed: Bed, tmp_path: Path
) -> None:
    """The switch runs iRED on ports 1 and 2 (an earlier configuration); the
    daemon starts with only port 1 in its file: at connect port 2 goes back to
    tail drop (entry deleted, drop flag and queue average zeroed, counters kept),
    logged, and port 1 is set as configured."""
    probe = bed.probe
    await set_ired(probe, 1, IredSettings(max_len_queue=64 * 19, n_drop=4 * 19))
    await set_ired(probe, 2, IredSettings(max_len_queue=64 * 19, n_drop=4 * 19))
    await probe.write_register(REG_IRED_DROP_FLAG, {2: 1})
    await probe.write_register(REG_IRED_QAVG, {2: 700})
    await probe.write_counter(IRED_DECISIONS, {2: 5})
    conf = tmp_path / "s.toml"
    conf.write_text(_toml(bed.sw.address, P1))
    with daemon(conf, tmp_path / "d.log") as d:

        async def reconciled() -> bool:
            return await ired_settings(probe) == {1: ON_SWITCH}

        await wait_for(reconciled, within=60, interval=0.2, what="port 2 cleared")
        regs = {
            r: (await probe.read_register(r, [2]))[2] for r in (REG_IRED_DROP_FLAG, REG_IRED_QAVG)
        }
        decisions = (await probe.read_counter(IRED_DECISIONS, [2]))[2]
        assert sum(regs[REG_IRED_DROP_FLAG]) == 0 and sum(regs[REG_IRED_QAVG]) == 0, regs
        assert sum(decisions) == 5, decisions  # counters kept
        await wait_for(lambda: d.log_lines("config_applied"), within=10, what="applied log")
        (applied,) = [json.loads(x) for x in d.log_lines("config_applied")]
        assert applied["written"][IRED_PORT] == {"changed": 1, "extra": 1}, applied
        assert d.sample(SET, dev_port="1") == 1
        assert d.sample(SET, dev_port="2") is None


def _set(port: int) -> float | None:
    return REGISTRY.get_sample_value(SET, {"dev_port": str(port)})


@contextlib.asynccontextmanager
async def _running(cfg: Settings) -> AsyncIterator[Daemon]:
    d = Daemon(cfg)
    stop = asyncio.Event()
    task = asyncio.create_task(d.run(stop))
    try:
        await wait_for(lambda: d.last_report is not None, within=20, what="first pass")
        yield d
    finally:
        stop.set()
        await task


@ROOT_ONLY
@pytest.mark.timeout(120)
async def test_reload_retries_refused_ports_and_waits_for_an_absent_switch(bed: Bed) -> None:
    ports = [
        IredPort.model_validate(SPEC),
        IredPort.model_validate("port=7,max_len_queue=64,n_drop=4"),
    ]
    base = {"grpc_address": bed.sw.address, "reconcile_interval_s": 60, "metrics_listen": ""}

    def cfg(ired: list[IredPort]) -> Settings:
        return Settings.model_validate({**base, "ired": ired})

    async with _running(cfg(ports)) as d:
        assert _set(1) == 1 and _set(7) == 0
        # the same configuration again: port 1 left alone, port 7 (refused) tried again
        assert await d.reload(cfg(ports)) == "failed"
        assert d.last_report is not None
        assert d.last_report.repaired == {}
        assert "not a port of this switch" in d.last_report.refused[IRED_PORT][0][1]
        # port 7 dropped from the configuration: nothing to undo on the switch
        assert await d.reload(cfg(ports[:1])) == "applied"
        assert d.last_report.repaired == {} and not d.last_report.refused
        assert _set(7) is None

        await bed.probe.close()
        bed.sw.stop()
        await wait_for(lambda: not d.client.connected, within=20, interval=0.1, what="switch away")
        # the switch is away: applied when it is back
        assert await d.reload(cfg([])) == "deferred"
        assert _set(1) is None
        bed.sw.start()
        await bed.probe.connect()
        await wait_for(lambda: d.client.connected, within=20, interval=0.1, what="reconnect")
        assert await ired_settings(bed.probe) == {}
