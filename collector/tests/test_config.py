"""Settings: defaults < TOML file < environment < flags; every setting has a
flag in --help; bad settings end the program with a message, not a traceback."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from p4relay_collector.cli import main, parser
from p4relay_collector.config import ConfigError, Settings, load, parse_listen, parse_switch_names
from p4relay_testsupport import free_port, wait_until

BIN = Path(sys.executable).parent / "p4relay-collector"


def test_help_lists_every_setting() -> None:
    r = subprocess.run([str(BIN), "--help"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0
    text = " ".join(r.stdout.split())
    for name in Settings.model_fields:
        assert "--" + name.replace("_", "-") in text, name
    for extra in ("--config", "--once", "--check-config"):
        assert extra in text


def test_precedence_file_env_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "c.toml"
    f.write_text(
        '[collector]\ninterval_s = 5.0\nbfrt_timeout_s = 4.0\nserver_url = "http://file:1"\n'
    )
    monkeypatch.setenv("P4RELAY_COLLECTOR_INTERVAL_S", "3.0")
    monkeypatch.setenv("P4RELAY_COLLECTOR_BACKLOG_MAX", "7")
    a = parser().parse_args(["--config", str(f), "--bfrt-timeout-s", "1.5", "--no-log-json"])
    flags = {k: v for k, v in vars(a).items() if k not in ("config", "check_config", "once")}
    cfg = load(a.config, flags)
    assert cfg.interval_s == 3.0  # env over file
    assert cfg.bfrt_timeout_s == 1.5  # flag over file
    assert cfg.server_url == "http://file:1"  # file over default
    assert cfg.backlog_max == 7 and cfg.log_json is False
    assert cfg.metrics_listen == "127.0.0.1:9103"


def test_token_sources(tmp_path: Path) -> None:
    f = tmp_path / "t"
    f.write_text("secret-token\nignored\n")
    assert Settings(token_file=f).ingest_token() == "secret-token"
    assert Settings.model_validate({"token": "t2", "token_file": f}).ingest_token() == "t2"
    with pytest.raises(ConfigError, match="ingest token is needed"):
        Settings().ingest_token()
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(ConfigError, match="empty"):
        Settings(token_file=tmp_path / "empty").ingest_token()
    with pytest.raises(ConfigError, match="cannot read"):
        Settings(token_file=tmp_path / "missing").ingest_token()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--interval-s", "0"], "interval_s"),
        (["--server-url", "ftp://x"], "server_url"),
        (["--metrics-listen", "nowhere"], "host:port"),
        (["--log-level", "loud"], "log_level"),
        (["--backlog-max", "0"], "backlog_max"),
        (["--token", "x", "--int-switch-names", "81"], "ID=NAME"),
        (["--token", "x", "--int-switch-names", "x=s1"], "ID=NAME"),
        (["--token", "x", "--int-switch-names", "1=s1,2=s1"], "given twice"),
        (["--token", "x", "--config", "/nonexistent.toml"], "config file"),
        ([], "ingest token is needed"),
    ],
)
def test_bad_settings_exit_2_with_a_message(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "configuration error" in err and message in err


def test_bad_toml_is_a_config_error(tmp_path: Path) -> None:
    f = tmp_path / "bad.toml"
    f.write_text("interval_s = [\n")
    with pytest.raises(ConfigError, match="config file"):
        load(f, {})
    f.write_text("unknown_key = 1\n")
    with pytest.raises(ConfigError, match="unknown_key"):
        load(f, {})


def test_parse_switch_names() -> None:
    assert parse_switch_names("") == {}
    assert parse_switch_names("81=s1, 0x52 = s2,") == {81: "s1", 0x52: "s2"}
    for bad in ("81", "=s1", "81=", "-1=s1", f"{1 << 32}=s1", "1=a,1=b"):
        with pytest.raises(ValueError):
            parse_switch_names(bad)


def test_parse_listen() -> None:
    assert parse_listen("127.0.0.1:9103") == ("127.0.0.1", 9103)
    assert parse_listen("[::1]:9103") == ("::1", 9103)
    assert parse_listen(":9103") == ("0.0.0.0", 9103)
    for bad in ("9103", "host:", "host:0", "host:70000", "host:x"):
        with pytest.raises(ValueError):
            parse_listen(bad)


def test_cli_serves_metrics_and_stops_on_sigterm(tmp_path: Path) -> None:
    """The real command: metrics on the configured port while it runs (a
    server that cannot be reached is retried, not fatal), exit 0 on SIGTERM."""
    port = free_port()
    token = tmp_path / "token"
    token.write_text("p4r_x_y\n")
    proc = subprocess.Popen(
        [
            str(BIN),
            "--server-url",
            f"http://127.0.0.1:{free_port()}",
            "--token-file",
            str(token),
            "--metrics-listen",
            f"127.0.0.1:{port}",
            "--interval-s",
            "0.2",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:

        def serving() -> bool:
            assert proc.poll() is None, proc.communicate()[1][-2000:]
            try:
                r = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=1)
            except httpx.HTTPError:
                return False
            return "p4relay_collector_backlog_batches" in r.text

        wait_until(serving, within=20, what="collector /metrics")
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text
        for name in ("p4relay_collector_congested_queues", "p4relay_collector_dropped_batches"):
            assert name in text
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
        assert b"cannot list switches" in proc.communicate()[1]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
