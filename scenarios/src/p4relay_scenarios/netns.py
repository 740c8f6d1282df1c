"""Thin wrappers over iproute2 and friends: run a command, inside a namespace or not."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence


class CommandError(RuntimeError):
    """A system command failed; carries the command line and its stderr."""


def run(cmd: Sequence[str], *, check: bool = True, netns: str | None = None) -> str:
    """Run cmd (inside netns when given) and return its stdout."""
    full = ["ip", "netns", "exec", netns, *cmd] if netns else list(cmd)
    proc = subprocess.run(full, capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise CommandError(f"{' '.join(full)}: exit {proc.returncode}: {proc.stderr.strip()}")
    return proc.stdout


def ok(cmd: Sequence[str], *, netns: str | None = None) -> bool:
    """True when cmd exits 0 (output discarded)."""
    full = ["ip", "netns", "exec", netns, *cmd] if netns else list(cmd)
    return subprocess.run(full, capture_output=True, check=False).returncode == 0


def namespaces() -> list[str]:
    out = run(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def link_exists(name: str, netns: str | None = None) -> bool:
    return ok(["ip", "link", "show", "dev", name], netns=netns)


def mac_of(name: str, netns: str | None = None) -> str:
    out = run(["cat", f"/sys/class/net/{name}/address"], netns=netns)
    return out.strip()


def sysctl(key: str, value: str, netns: str | None = None) -> None:
    run(["sysctl", "-qw", f"{key}={value}"], netns=netns)
