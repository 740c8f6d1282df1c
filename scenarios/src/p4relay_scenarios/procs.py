"""Start, watch and stop the testbed's processes (each in its namespace).

Every process gets its own session (process group) and log file under the
run directory, and its pid is recorded in `<run>/pids/<name>.pid` so the
cleanup hook (scripts/cleanup.d/testbed.sh) can stop exactly what we started
even after this Python process died.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path


class StartError(RuntimeError):
    """A component did not come up; the message names it and quotes its log."""


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    pidfile: Path
    log_start: int = 0  # where this run's output starts in the (appended) log

    def output(self) -> str:
        """What this run of the process wrote so far."""
        try:
            with self.log.open("rb") as f:
                f.seek(self.log_start)
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self, n: int = 15) -> str:
        try:
            lines = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-n:])


@dataclass
class Supervisor:
    run_dir: Path
    procs: dict[str, Proc] = field(default_factory=dict)

    def __post_init__(self) -> None:
        (self.run_dir / "pids").mkdir(parents=True, exist_ok=True)
        (self.run_dir / "logs").mkdir(parents=True, exist_ok=True)

    def start(
        self,
        name: str,
        cmd: Sequence[str],
        *,
        netns: str | None = None,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        stdin_data: bytes | None = None,
    ) -> Proc:
        if name in self.procs and self.procs[name].alive():
            raise StartError(f"{name} is already running")
        full = ["ip", "netns", "exec", netns, *cmd] if netns else list(cmd)
        log = self.run_dir / "logs" / f"{name}.log"
        with log.open("ab") as out:
            out.write(f"\n=== {time.strftime('%H:%M:%S')} {' '.join(full)}\n".encode())
            out.flush()
            log_start = out.tell()
            popen = subprocess.Popen(
                full,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL,
                env={**os.environ, **(env or {})},
                cwd=cwd,
                start_new_session=True,
            )
        if stdin_data is not None and popen.stdin is not None:
            popen.stdin.write(stdin_data)
            popen.stdin.close()
        pidfile = self.run_dir / "pids" / f"{name}.pid"
        pidfile.write_text(str(popen.pid))
        proc = Proc(name, popen, log, pidfile, log_start)
        self.procs[name] = proc
        return proc

    def wait_ready(
        self, name: str, probe: Callable[[], bool], timeout_s: float = 30.0, what: str = ""
    ) -> None:
        proc = self.procs[name]
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not proc.alive():
                raise StartError(
                    f"{name} exited ({proc.popen.returncode}) while starting; "
                    f"log {proc.log}:\n{proc.log_tail()}"
                )
            if probe():
                return
            time.sleep(0.2)
        raise StartError(
            f"{name} not ready after {timeout_s:.0f}s ({what}); log {proc.log}:\n{proc.log_tail()}"
        )

    def stop(self, name: str, timeout_s: float = 8.0) -> None:
        proc = self.procs.pop(name, None)
        if proc is None:
            return
        if proc.alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.popen.pid, signal.SIGTERM)
            try:
                proc.popen.wait(timeout_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.popen.pid, signal.SIGKILL)
                proc.popen.wait(5)
        proc.pidfile.unlink(missing_ok=True)

    def stop_all(self) -> None:
        for name in reversed(list(self.procs)):
            self.stop(name)

    def check_alive(self) -> list[str]:
        """Names of processes that died on their own."""
        return [n for n, p in self.procs.items() if not p.alive()]


def kill_recorded(run_dir: Path) -> int:
    """Stop every process recorded under run_dir/pids (crash recovery); returns how many."""
    n = 0
    for pidfile in sorted((run_dir / "pids").glob("*.pid")):
        try:
            pid = int(pidfile.read_text().strip())
        except (OSError, ValueError):
            pidfile.unlink(missing_ok=True)
            continue
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, sig)
                n += sig == signal.SIGTERM
            time.sleep(0.5)
        pidfile.unlink(missing_ok=True)
    return n


def tcp_open(host: str, port: int, timeout_s: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def in_netns_ok(netns: str, code: str, timeout_s: float = 5.0) -> bool:
    """Run a short Python probe inside a namespace; True when it exits 0."""
    try:
        r = subprocess.run(
            ["ip", "netns", "exec", netns, "python3", "-c", code],
            capture_output=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return False
    return r.returncode == 0


def udp_control_probe(netns: str, host: str, port: int) -> bool:
    """RTPProxy's `V` (version) command answered on a control socket."""
    code = (
        "import os,socket,sys;s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.settimeout(1);"
        "c=os.urandom(6).hex().encode();"  # fresh cookie: RTPProxy caches replies by cookie
        f"s.sendto(c+b' V',('{host}',{port}));"
        "sys.exit(0 if s.recv(256).startswith(c) else 1)"
    )
    return in_netns_ok(netns, code)


def udp_bound_in(netns: str, port: int, addr: str | None = None) -> bool:
    """A socket in `netns` is bound to UDP `port` (a SIPp listening for SIP),
    on `addr` when given."""
    where = f"sport = :{port}"
    if addr is not None:
        where = f"src [{addr}]:{port}" if ":" in addr else f"src {addr}:{port}"
    r = subprocess.run(
        ["ip", "netns", "exec", netns, "ss", "-Hnlu", where],
        capture_output=True,
        text=True,
        check=False,
    )
    return r.returncode == 0 and bool(r.stdout.strip())


def tcp_probe_in(netns: str, host: str, port: int) -> bool:
    code = f"import socket;socket.create_connection(('{host}',{port}),timeout=1).close()"
    return in_netns_ok(netns, code)
