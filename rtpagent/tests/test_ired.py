"""iRED as the operator configures it (`ired`): parsed from flags, the
environment and the TOML file with clear errors; set by the agent on the real
software switch at connect and again after the switch restarted; a port the
switch does not have is refused and reported without stopping the others;
a port the switch runs iRED on but the configuration no longer lists is set back
to tail drop at connect; `--show-ired` prints what the switch runs."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import IO

import pytest
from harness import wait_for
from p4relay_switch import Subscription, SwitchClient
from p4relay_switch.ired import IredSettings, ired_settings
from p4relay_testsupport import Softswitch
from prometheus_client import REGISTRY
from rtpagent.bfrt import BfrtSwitch
from rtpagent.config import load
from rtpagent.ired import IredPort

from rtpagent import cli

SPEC = "port=1,max_len_queue=256,n_drop=16,ewma_n=2,protect=off"
# 1514-byte packets are 19 cells of 80 bytes.
WANT = IredSettings(
    max_len_queue=256 * 19, n_drop=16 * 19, ewma_n=2, drop_prob=2 / 17, protect=False
)
# As read back: the chance is a 16-bit register.
ON_SWITCH = dataclasses.replace(WANT, drop_prob=WANT.drop_prob_reg / 65536)


def test_flag_env_and_file_forms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert IredPort.model_validate(SPEC).settings() == WANT
    f = tmp_path / "agent.toml"
    f.write_text(
        "[rtpagent]\n[[rtpagent.ired]]\nport = 1\nmax_len_queue = 256\nn_drop = 16\n"
        "ewma_n = 2\nprotect = false\n[[rtpagent.ired]]\nport = 3\nmax_len_queue = 64\n"
        "n_drop = 4\ntail_drop = true\ndrop_prob = 0.5\n"
    )
    cfg = load(str(f), {})
    assert [p.settings() for p in cfg.ired] == [
        WANT,
        IredSettings(max_len_queue=64 * 19, n_drop=4 * 19, drop_prob=0.5, tail_drop=True),
    ]
    # the environment (a JSON list) over the file, flags over both
    monkeypatch.setenv("RTPAGENT_IRED", json.dumps(["port=5,max_len_queue=128,n_drop=8"]))
    assert [p.port for p in load(str(f), {}).ired] == [5]
    assert [p.port for p in load(str(f), {"ired": [SPEC]}).ired] == [1]


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
    spec: str, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["--ired", spec, "--check-config"]) == 2
    err = capsys.readouterr().err
    assert "rtpagent: configuration error" in err and says in err, err


def test_a_port_configured_twice(capsys: pytest.CaptureFixture[str]) -> None:
    a = "port=2,max_len_queue=64,n_drop=4"
    assert cli.main(["--ired", a, "--ired", a, "--check-config"]) == 2
    assert "iRED: port 2 configured twice" in capsys.readouterr().err


def _set(port: int) -> float | None:
    return REGISTRY.get_sample_value("rtpagent_ired_port_set", {"dev_port": str(port)})


@dataclasses.dataclass
class Bed:
    """A softswitch with port 1, the agent's switch connection configured for ports 1
    and 7 (not a port of this switch), and a probe reading what it wrote."""

    sw: Softswitch
    probe: SwitchClient
    agent: BfrtSwitch
    ports: list[IredPort]


@pytest.fixture
async def bed(netns_port: tuple[str, str]) -> AsyncIterator[Bed]:
    sw = Softswitch(["--port", f"1={netns_port[0]}"])
    sw.start()
    probe = SwitchClient(
        sw.address, client_id=9, subscription=Subscription(learn=False, idle_timeout=False)
    )
    ports = [
        IredPort.model_validate(SPEC),
        IredPort.model_validate("port=7,max_len_queue=64,n_drop=4"),
    ]
    agent = BfrtSwitch(sw.address, relay_addrs=["127.0.0.1"], ired_ports=ports)
    try:
        await agent.start()
        await probe.connect()
        yield Bed(sw, probe, agent, ports)
    finally:
        await agent.close()
        await probe.close()
        sw.stop()


ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for a network namespace")


@pytest.fixture
async def two_port_switch(
    netns_two_ports: tuple[list[str], str],
) -> AsyncIterator[tuple[Softswitch, SwitchClient]]:
    """A softswitch on two veth ports and a BfRt client that reads its state."""
    (a, b), _ = netns_two_ports
    sw = Softswitch(["--port", f"1={a}", "--port", f"2={b}"])
    sw.start()
    probe = SwitchClient(
        sw.address, client_id=9, subscription=Subscription(learn=False, idle_timeout=False)
    )
    try:
        yield sw, probe
    finally:
        await probe.close()
        sw.stop()


@ROOT_ONLY
@pytest.mark.timeout(120)
async def test_set_at_connect_and_after_a_switch_restart(
    bed: Bed, capsys: pytest.CaptureFixture[str]
) -> None:
    sw, probe = bed.sw, bed.probe
    assert await ired_settings(probe) == {1: ON_SWITCH}
    assert _set(1) == 1 and _set(7) == 0  # port 7 is not a port of this switch

    out = await asyncio.to_thread(cli.main, ["--switch", sw.address, "--ired", SPEC, "--show-ired"])
    text = capsys.readouterr().out
    assert out == 0, text
    (row,) = [ln for ln in text.splitlines() if ln.split()[:2] == ["1", "iRED"]]
    assert row.split()[2:6] == ["256", "16", "112/224", "2"], row
    assert "configured" in text and "decisions 0, drops 0" in row

    # another setting than the configuration's is named
    await asyncio.to_thread(
        cli.main,
        ["--switch", sw.address, "--ired", "port=1,max_len_queue=512,n_drop=16", "--show-ired"],
    )
    assert "set differently from the configuration" in capsys.readouterr().out

    await probe.close()
    sw.stop()
    sw.start()  # same address, empty tables and registers
    await probe.connect()

    async def set_again() -> bool:
        return await ired_settings(probe) == {1: ON_SWITCH}

    await wait_for(set_again, within=20.0, interval=0.2)


async def test_show_without_a_switch(capsys: pytest.CaptureFixture[str]) -> None:
    out = await asyncio.to_thread(cli.main, ["--switch", "127.0.0.1:1", "--show-ired"])
    assert out == 1
    assert "rtpagent: switch 127.0.0.1:1:" in capsys.readouterr().err


def _toml(switch: str, *ports: str, extra: str = "") -> str:
    return f'[rtpagent]\nswitch = "{switch}"\n{extra}' + "".join(
        f"[[rtpagent.ired]]\n{p}\n" for p in ports
    )


def _agent(conf: Path, metrics_port: int, log: IO[bytes]) -> subprocess.Popen[bytes]:
    """`rtpagent --config conf` with an embedded RTPProxy, /metrics on `metrics_port`."""
    from harness import free_port, free_udp_pair

    return subprocess.Popen(
        [
            *(sys.executable, "-m", "rtpagent.cli", "--config", str(conf)),
            *("--rtpproxy", "embedded", "--listen", f"udp:127.0.0.1:{free_udp_pair()}"),
            *("--embedded-ports", "34000-34499", "--relay-ports", "34000-34499"),
            *("--notify-listen", f"tcp:127.0.0.1:{free_port()}"),
            *("--state-file", str(conf.parent / "s.sqlite")),
            *("--metrics-listen", f"127.0.0.1:{metrics_port}"),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL if the agent has not exited in 20 s."""
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _sample(text: str, name: str, labels: str) -> float | None:
    series = f"{name}{{{labels}}} " if labels else f"{name} "
    for line in text.splitlines():
        if line.startswith(series):
            return float(line.rsplit(" ", 1)[1])
    return None


@ROOT_ONLY
@pytest.mark.timeout(180)
async def test_sighup_reloads_ired_and_refuses_a_bad_configuration(
    two_port_switch: tuple[Softswitch, SwitchClient],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`rtpagent` as operators run it: the file edited, SIGHUP; the changed port set, the
    port dropped from the file back to tail drop (its drop flag and average zeroed, its
    counters kept), a restart-only setting named, the reload counted; then a file that
    does not validate is refused and the running setting stays."""
    import signal
    import urllib.request

    from harness import free_port, record_pid
    from p4relay_switch.names import REG_IRED_DECISIONS, REG_IRED_DROP_FLAG

    sw, probe = two_port_switch
    conf = tmp_path / "agent.toml"
    p1 = "port = 1\nmax_len_queue = 256\nn_drop = 16\newma_n = 2\nprotect = false"
    p1_new = "port = 1\nmax_len_queue = 512\nn_drop = 32"
    p2 = "port = 2\nmax_len_queue = 64\nn_drop = 4"
    conf.write_text(_toml(sw.address, p1, p2))
    mport = free_port()
    log_path = tmp_path / "agent.log"
    log = log_path.open("wb")
    proc = _agent(conf, mport, log)
    record_pid(proc.pid)

    def metrics() -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=5) as r:
            return str(r.read().decode())

    async def ports_on() -> set[int]:
        return set(await ired_settings(probe))

    try:
        await probe.connect()

        async def both_set() -> bool:
            return await ports_on() == {1, 2}

        await wait_for(both_set, within=60.0, interval=0.2)
        assert (await ired_settings(probe))[1] == ON_SWITCH
        # port 2 mid-way: a drop flag up, decisions counted
        await probe.write_register(REG_IRED_DROP_FLAG, {2: 1})
        await probe.write_register(REG_IRED_DECISIONS, {2: 5})

        conf.write_text(_toml(sw.address, p1_new, extra="idle_ttl_ms = 30000\n"))
        proc.send_signal(signal.SIGHUP)
        want = IredSettings(max_len_queue=512 * 19, n_drop=32 * 19, drop_prob=2 / 33)
        want = dataclasses.replace(want, drop_prob=want.drop_prob_reg / 65536)

        async def reloaded() -> bool:
            return await ired_settings(probe) == {1: want}

        await wait_for(reloaded, within=20.0, interval=0.2)
        flag = await probe.read_register(REG_IRED_DROP_FLAG, [2])
        decisions = await probe.read_register(REG_IRED_DECISIONS, [2])
        assert sum(flag[2]) == 0 and sum(decisions[2]) == 5, (flag, decisions)

        async def counted() -> bool:
            return _sample(metrics(), "rtpagent_config_reloads_total", 'result="applied"') == 1

        await wait_for(counted, within=10.0, interval=0.2)
        text = metrics()
        assert _sample(text, "rtpagent_ired_port_set", 'dev_port="1"') == 1
        assert _sample(text, "rtpagent_ired_port_set", 'dev_port="2"') is None
        logged = log_path.read_text()
        assert '"config_reload_needs_restart"' in logged and "idle_ttl_ms" in logged, logged
        (line,) = [ln for ln in logged.splitlines() if '"config_reloaded"' in ln]
        got = json.loads(line)
        assert (got["ired_set"], got["ired_cleared"], got["result"]) == ([1], [2], "applied")

        # --show-ired with the same file: port 1 as configured, port 2 gone
        assert await asyncio.to_thread(cli.main, ["--config", str(conf), "--show-ired"]) == 0
        shown = capsys.readouterr().out
        assert [ln.split()[:3] for ln in shown.splitlines() if ln[:5].strip().isdigit()] == [
            ["1", "iRED+protect", "512"]
        ], shown
        assert "differently" not in shown and "not set" not in shown, shown

        # a file that does not validate: refused, logged, counted; the switch keeps port 1
        conf.write_text(_toml(sw.address, "port = 1\nmax_len_queue = 512\nn_drop = 300"))
        proc.send_signal(signal.SIGHUP)

        async def refused() -> bool:
            return _sample(metrics(), "rtpagent_config_reloads_total", 'result="invalid"') == 1

        await wait_for(refused, within=10.0, interval=0.2)
        (bad,) = [ln for ln in log_path.read_text().splitlines() if "config_reload_refused" in ln]
        assert "n_drop (N) 300 must be below max_len_queue / 2" in bad, bad
        assert await ired_settings(probe) == {1: want}
        assert proc.poll() is None  # still running
    finally:
        _stop(proc)
        log.close()


@ROOT_ONLY
@pytest.mark.timeout(120)
async def test_connect_sets_a_port_dropped_while_the_agent_was_stopped_back_to_tail_drop(
    two_port_switch: tuple[Softswitch, SwitchClient],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The switch runs iRED on ports 1 and 2 (an earlier agent's configuration); the
    agent starts with only port 1 in its file: at connect port 2 goes back to tail
    drop (entry deleted, drop flag and queue average zeroed, counters kept), logged
    and counted, and port 1 is set as configured."""
    import urllib.request

    from harness import free_port, record_pid
    from p4relay_switch.ired import set_ired
    from p4relay_switch.names import REG_IRED_DECISIONS, REG_IRED_DROP_FLAG, REG_IRED_QAVG

    sw, probe = two_port_switch
    conf = tmp_path / "agent.toml"
    conf.write_text(
        _toml(sw.address, "port = 1\nmax_len_queue = 256\nn_drop = 16\newma_n = 2\nprotect = false")
    )
    log_path = tmp_path / "agent.log"
    log = log_path.open("wb")
    proc: subprocess.Popen[bytes] | None = None
    try:
        await probe.connect()
        # what the agent left before it stopped: port 1 otherwise, port 2 mid-way
        await set_ired(probe, 1, IredSettings(max_len_queue=64 * 19, n_drop=4 * 19))
        await set_ired(probe, 2, IredSettings(max_len_queue=64 * 19, n_drop=4 * 19))
        await probe.write_register(REG_IRED_DROP_FLAG, {2: 1})
        await probe.write_register(REG_IRED_QAVG, {2: 700})
        await probe.write_register(REG_IRED_DECISIONS, {2: 5})
        mport = free_port()
        proc = _agent(conf, mport, log)
        record_pid(proc.pid)

        async def reconciled() -> bool:
            return await ired_settings(probe) == {1: ON_SWITCH}

        await wait_for(reconciled, within=60.0, interval=0.2)
        regs = {
            r: (await probe.read_register(r, [2]))[2]
            for r in (REG_IRED_DROP_FLAG, REG_IRED_QAVG, REG_IRED_DECISIONS)
        }
        assert sum(regs[REG_IRED_DROP_FLAG]) == 0 and sum(regs[REG_IRED_QAVG]) == 0, regs
        assert sum(regs[REG_IRED_DECISIONS]) == 5, regs  # counters kept

        def metrics() -> str:
            with urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=5) as r:
                return str(r.read().decode())

        async def counted() -> bool:
            return _sample(metrics(), "rtpagent_ired_unlisted_cleared_total", "") == 1

        await wait_for(counted, within=10.0, interval=0.2)
        text = metrics()
        assert _sample(text, "rtpagent_ired_port_set", 'dev_port="1"') == 1
        assert _sample(text, "rtpagent_ired_port_set", 'dev_port="2"') is None
        (line,) = [ln for ln in log_path.read_text().splitlines() if "ired_unlisted_cleared" in ln]
        got = json.loads(line)
        assert (got["dev_ports"], got["failed"]) == ([2], []), got

        assert await asyncio.to_thread(cli.main, ["--config", str(conf), "--show-ired"]) == 0
        shown = capsys.readouterr().out
        assert [ln.split()[:2] for ln in shown.splitlines() if ln[:5].strip().isdigit()] == [
            ["1", "iRED"]
        ], shown
    finally:
        if proc is not None:
            _stop(proc)
        log.close()


@ROOT_ONLY
@pytest.mark.timeout(120)
async def test_reload_retries_refused_ports_and_waits_for_an_absent_switch(bed: Bed) -> None:
    sw, probe, agent, ports = bed.sw, bed.probe, bed.agent, bed.ports
    # the same configuration again: port 1 left alone, port 7 (refused) tried again
    change = await agent.reload_ired(ports)
    assert (change.set, change.unchanged, change.cleared) == ([7], [1], [])
    assert "not a port of this switch" in change.refused[7]
    assert _set(7) == 0
    # port 7 dropped from the configuration: nothing to undo on the switch
    change = await agent.reload_ired(ports[:1])
    assert (change.set, change.cleared, change.refused) == ([], [7], {})
    assert _set(7) is None

    await probe.close()
    sw.stop()
    await wait_for(lambda: not agent.connected, within=20.0, interval=0.1)
    change = await agent.reload_ired([])  # the switch is away: done when it is back
    assert not change.applied and change.cleared == [1]
    sw.start()
    await probe.connect()
    # reconnected: the pending port cleared (its metric gone), nothing set
    await wait_for(lambda: _set(1) is None, within=20.0, interval=0.2)
    assert await ired_settings(probe) == {}
