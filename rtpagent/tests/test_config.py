"""Settings precedence (defaults < file < environment < flags) and the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
from rtpagent.cli import main, parser
from rtpagent.config import load


def test_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "a.toml"
    f.write_text('[rtpagent]\nrtpproxy = "udp:127.0.0.1:1000"\nlegs = 10\nswitch_name = "file"\n')
    monkeypatch.setenv("P4RELAY_RTPAGENT_LEGS", "20")
    monkeypatch.setenv("P4RELAY_RTPAGENT_RELAY_ADDR", '["198.18.0.10"]')
    cfg = load(str(f), {"switch_name": "flag"})
    assert cfg.rtpproxy == "udp:127.0.0.1:1000"  # file over default
    assert cfg.legs == 20  # environment over file
    assert cfg.relay_addr == ["198.18.0.10"]
    assert cfg.switch_name == "flag"  # flag over everything


def test_former_environment_names_are_read_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RTPAGENT_LEGS", "30")
    monkeypatch.setenv("RTPAGENT_SWITCH_NAME", "old")
    monkeypatch.setenv("P4RELAY_RTPAGENT_SWITCH_NAME", "new")
    with pytest.warns(FutureWarning) as got:
        cfg = load(None, {})
    assert (cfg.legs, cfg.switch_name) == (30, "new")  # the current name wins
    assert {str(w.message).split()[0] for w in got} == {"RTPAGENT_LEGS", "RTPAGENT_SWITCH_NAME"}
    assert "use P4RELAY_RTPAGENT_LEGS" in str(got[0].message)


def test_bad_config_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--listen", "udp:nothost:1", "--check-config"]) == 2
    assert "configuration error" in capsys.readouterr().err
    for addr, says in (
        ("2001:db8::zz", "not an IPv4 or IPv6 address"),
        ("fe80::1", "link-local"),
        ("::ffff:198.18.0.10", "IPv4-mapped"),
    ):
        assert main(["--relay-addr", addr, "--check-config"]) == 2
        assert says in capsys.readouterr().err, addr


def test_help_lists_every_setting() -> None:
    """Every field of the settings model has its flag, described in --help."""
    from rtpagent.config import Settings

    text = parser().format_help()
    for name, f in Settings.model_fields.items():
        flag = "--" + name.replace("_", "-")
        assert flag in text, flag
        assert f.description is None or f.description.split()[0] in text, name


def test_cli_runs_and_serves_metrics(tmp_path: Path) -> None:
    """`rtpagent` as operators run it: embedded RTPProxy, /metrics, SIGTERM."""
    import signal
    import socket
    import subprocess
    import sys
    import urllib.request

    from harness import free_port, free_udp_pair, record_pid
    from p4relay_testsupport import wait_until

    port, mport = free_udp_pair(), free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rtpagent.cli",
            "--rtpproxy",
            "embedded",
            "--listen",
            f"udp:127.0.0.1:{port}",
            "--embedded-ports",
            "38000-38999",
            "--relay-ports",
            "38000-38999",
            "--switch",
            "",
            "--notify-listen",
            f"tcp:127.0.0.1:{free_port()}",
            "--state-file",
            str(tmp_path / "s.sqlite"),
            "--metrics-listen",
            f"127.0.0.1:{mport}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    record_pid(proc.pid)
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(0.3)
        replies: list[bytes] = []

        def answered() -> bool:  # asked again until the process is up
            s.sendto(b"k1 V", ("127.0.0.1", port))
            try:
                replies.append(s.recv(100))
            except TimeoutError:
                return False
            return True

        wait_until(answered, within=40.0, interval=0.1, what="the agent's answer")
        assert replies == [b"k1 20040107\n"]
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        text = opener.open(f"http://127.0.0.1:{mport}/metrics", timeout=5).read().decode()
        assert 'rtpagent_commands_total{op="VERSION"}' in text
        assert "rtpagent_offload_seconds_bucket" in text
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 0
    assert b'"event": "started"' in out  # structured (JSON) logs
