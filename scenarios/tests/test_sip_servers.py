"""Both SIP server configs, started for real on the loopback (no testbed needed).

A config check (`opensips -c`, `kamailio -c`) passes configs that fail at start
(a function's parameters are fixed up only then; mi_fifo needs its directory),
so each server is started with the command line the stack uses and must stay
up, answer an OPTIONS ping over IPv4 and IPv6 (dual stack, on the loopback's
`::1`) and refuse an in-dialog request of no dialog it knows.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from p4relay_scenarios.procs import StartError
from p4relay_scenarios.stack import (
    SCENARIOS,
    SIP_SERVERS,
    SipEndpoints,
    SipServer,
    kamailio_command,
    opensips_command,
    render_opensips_cfg,
)
from p4relay_testsupport import free_port

COMMANDS: dict[SipServer, Callable[[Path, SipEndpoints, int], list[str]]] = {
    "opensips": opensips_command,
    "kamailio": kamailio_command,
}


def _free_sip_port() -> int:
    """A port free for UDP and TCP on both loopbacks (the servers listen on all four)."""
    for _ in range(50):
        port = free_port(socket.SOCK_DGRAM)
        try:
            for fam, kind, host in (
                (socket.AF_INET, socket.SOCK_STREAM, "127.0.0.1"),
                (socket.AF_INET6, socket.SOCK_DGRAM, "::1"),
                (socket.AF_INET6, socket.SOCK_STREAM, "::1"),
            ):
                with socket.socket(fam, kind) as t:
                    t.bind((host, port))
        except OSError:
            continue
        return port
    raise RuntimeError("no free port for UDP and TCP")


def _request(
    port: int, method: str, timeout_s: float, *, to_tag: str = "", host: str = "127.0.0.1"
) -> str:
    """Send a request to the server until it answers; returns the status line ('' if none).

    With to_tag the request claims to be in a dialog (an in-dialog request with no Route,
    addressed to a third party)."""
    deadline = time.monotonic() + timeout_s
    v6 = ":" in host
    me_host = f"[{host}]" if v6 else host
    ruri = "sip:victim@192.0.2.99:5060" if to_tag else f"sip:{me_host}:{port}"
    with socket.socket(socket.AF_INET6 if v6 else socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((host, 0))
        me = s.getsockname()[1]
        s.settimeout(0.5)
        n = 0
        while time.monotonic() < deadline:
            n += 1
            msg = (
                f"{method} {ruri} SIP/2.0\r\n"
                f"Via: SIP/2.0/UDP {me_host}:{me};branch=z9hG4bK-p4r-{os.getpid()}-{n}\r\n"
                "Max-Forwards: 70\r\n"
                f"From: <sip:probe@{me_host}:{me}>;tag=p4r{n}\r\n"
                f"To: <{ruri}>" + (f";tag={to_tag}" if to_tag else "") + "\r\n"
                f"Call-ID: p4r-{method.lower()}-{os.getpid()}-{n}@{me_host}\r\n"
                f"CSeq: {n} {method}\r\n"
                f"Contact: <sip:probe@{me_host}:{me}>\r\n"
                "Content-Length: 0\r\n\r\n"
            )
            s.sendto(msg.encode(), (host, port))
            try:
                data = s.recv(65536)
            except TimeoutError:
                continue
            return data.decode(errors="replace").split("\r\n", 1)[0]
    return ""


@pytest.mark.parametrize("sip", SIP_SERVERS)
def test_sip_server_starts_and_answers(sip: SipServer, tmp_path: Path) -> None:
    port = _free_sip_port()
    ep = SipEndpoints(
        listen_ip="127.0.0.1",
        port=port,
        uas_uri="sip:127.0.0.1:9",
        listen_ip6="::1",
        uas_uri6="sip:[::1]:9",
        rtpproxy_sock=f"udp:127.0.0.1:{free_port(socket.SOCK_DGRAM)}",
        notify_sock=f"tcp:127.0.0.1:{free_port(socket.SOCK_STREAM)}",
    )
    run_dir = tmp_path / sip  # does not exist yet: the command makes it
    try:
        cmd = COMMANDS[sip](run_dir, ep, 1)
    except StartError as exc:
        pytest.fail(f"{sip}: {exc}")
    log = tmp_path / f"{sip}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, cwd=run_dir, start_new_session=True
        )
    try:
        status = _request(port, "OPTIONS", 20.0)
        assert proc.poll() is None, f"{sip} exited ({proc.returncode}):\n{log.read_text()[-3000:]}"
        assert status == "SIP/2.0 200 OK", f"{sip} answered {status!r}:\n{log.read_text()[-3000:]}"
        status = _request(port, "OPTIONS", 5.0, host="::1")
        assert status == "SIP/2.0 200 OK", f"{sip} over IPv6: {status!r}"
        # A request claiming a dialog the server does not know (no Route header) is
        # refused, not relayed to its Request-URI: the dialog fallback is no open relay.
        status = _request(port, "BYE", 5.0, to_tag="forged")
        assert status.startswith("SIP/2.0 404"), f"{sip} answered a forged BYE with {status!r}"
        if sip == "opensips":
            assert (run_dir / "opensips_fifo").exists(), "mi_fifo made no FIFO in the run dir"
        text = log.read_text(errors="replace")
        assert "CRITICAL" not in text and "ERROR:core" not in text, text[-3000:]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


def test_opensips_cfg_placeholders_are_all_filled_and_checked() -> None:
    text = (SCENARIOS / "sip" / "opensips.cfg").read_text()
    values = {
        "SIP_LISTEN_IP": "192.0.2.1",
        "SIP_PORT": "5060",
        "UAS_URI": "sip:192.0.2.2:5060",
        "RTPAGENT_SOCK": "udp:127.0.0.1:22222",
        "RTPPROXY_SOCK": "udp:127.0.0.1:22223",
        "NOTIFY_SOCK": "tcp:127.0.0.1:22225",
        "RUN_DIR": "/run/opensips",
        "MODULES_DIR": "/usr/lib/x86_64-linux-gnu/opensips/modules/",
    }
    out = render_opensips_cfg(text, values)
    code = [ln for ln in out.splitlines() if not ln.lstrip().startswith("#")]
    assert not [ln for ln in code if "__" in ln], "a placeholder left unfilled"
    assert "socket = udp:192.0.2.1:5060" in code
    assert not [ln for ln in code if "[" in ln and "socket" in ln], "IPv6 sockets without IPv6"
    dual = render_opensips_cfg(
        text, {**values, "SIP_LISTEN_IP6": "2001:db8::1", "UAS_URI6": "sip:[2001:db8::2]:5060"}
    )
    code6 = [ln.strip() for ln in dual.splitlines() if not ln.lstrip().startswith("#")]
    assert "socket = udp:[2001:db8::1]:5060" in code6
    assert '$var(trunk6) = "sip:[2001:db8::2]:5060";' in code6
    with pytest.raises(StartError, match="RUN_DIR"):
        render_opensips_cfg(text, {k: v for k, v in values.items() if k != "RUN_DIR"})
    with pytest.raises(StartError, match="quotes"):
        render_opensips_cfg(text, {**values, "UAS_URI": 'sip:x"; loadmodule "exec.so'})
