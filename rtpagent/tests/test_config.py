"""Settings precedence (defaults < file < environment < flags) and the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
from rtpagent.cli import main, parser
from rtpagent.config import load


def test_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "a.toml"
    f.write_text('[rtpagent]\nrtpproxy = "udp:127.0.0.1:1000"\nlegs = 10\nswitch_name = "file"\n')
    monkeypatch.setenv("RTPAGENT_LEGS", "20")
    monkeypatch.setenv("RTPAGENT_RELAY_ADDR", '["198.18.0.10"]')
    cfg = load(str(f), {"switch_name": "flag"})
    assert cfg.rtpproxy == "udp:127.0.0.1:1000"  # file over default
    assert cfg.legs == 20  # environment over file
    assert cfg.relay_addr == ["198.18.0.10"]
    assert cfg.switch_name == "flag"  # flag over everything


def test_bad_config_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--listen", "udp:nothost:1", "--check-config"]) == 2
    assert "configuration error" in capsys.readouterr().err


def test_help_lists_every_setting() -> None:
    text = parser().format_help()
    for flag in (
        "--listen",
        "--rtpproxy",
        "--switch",
        "--notify-listen",
        "--state-file",
        "--metrics-listen",
    ):
        assert flag in text
