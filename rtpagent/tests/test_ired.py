"""iRED as the operator configures it (`ired`): parsed from flags, the
environment and the TOML file with clear errors; set by the agent on the real
software switch at connect and again after the switch restarted; a port the
switch does not have is refused and reported without stopping the others;
`--show-ired` prints what the switch runs."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
from pathlib import Path

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


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for a network namespace")
@pytest.mark.timeout(120)
async def test_set_at_connect_and_after_a_switch_restart(
    netns_port: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
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
        assert await ired_settings(probe) == {1: ON_SWITCH}
        assert _set(1) == 1 and _set(7) == 0  # port 7 is not a port of this switch

        out = await asyncio.to_thread(
            cli.main, ["--switch", sw.address, "--ired", SPEC, "--show-ired"]
        )
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
    finally:
        await agent.close()
        await probe.close()
        sw.stop()


async def test_show_without_a_switch(capsys: pytest.CaptureFixture[str]) -> None:
    out = await asyncio.to_thread(cli.main, ["--switch", "127.0.0.1:1", "--show-ired"])
    assert out == 1
    assert "rtpagent: switch 127.0.0.1:1:" in capsys.readouterr().err
