"""p4relay BfRt bootstrap: the chassis of a Tofino, before anything connects.

What only bf_switchd's own Python shell sets up on a Tofino: ports with their
speeds and FEC, per-pipe entry scope of the session tables, mirror sessions,
the jitter write-back sessions the program's egress RTP quality needs, the
congestion reroute notice sessions and the iRED feedback sessions (one per
pipe each). No table entry is written here: next hops, routes, shaping,
reroute, INT and iRED are the switch control plane's (p4relay-controlplane,
switch/controlplane/README.md), the relay addresses and the calls' entries
rtpagent's.

On the switch, inside bfshell (bfrt_python provides the global ``bfrt``)::

    P4RELAY_BFRT_CONFIG=/etc/p4relay/bfrt.json \\
        $SDE_INSTALL/bin/bfshell -b /opt/p4relay/switch/bfrt/bootstrap.py

Anywhere, with plain Python 3.8+, to validate a config and print the calls
it would make (nothing is sent)::

    python3 switch/bfrt/bootstrap.py --check switch/bfrt/site.example.json

The script is idempotent: an entry that exists is modified instead of added.
It runs on the SDE's Python (3.8 and later), so it uses only the standard
library and no syntax newer than 3.8.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass, field
from typing import Any

PROGRAM = "p4relay"
CONFIG_ENV = "P4RELAY_BFRT_CONFIG"
DEFAULT_CONFIG = "/etc/p4relay/bfrt.json"

# Contract names (switch/contract.toml) this script writes; the bootstrap test
# (switch/client/tests/test_bfrt_bootstrap.py) checks them.
TABLE_RELAY = "pipe.Ingress.relay"
TABLE_LEG_REWRITE = "pipe.Ingress.leg_rewrite"
TABLE_RELAY_GUARD = "pipe.Ingress.relay_guard"
PER_PIPE_TABLES = (TABLE_RELAY, TABLE_LEG_REWRITE, TABLE_RELAY_GUARD)

SPEEDS = {
    "10G": "BF_SPEED_10G",
    "25G": "BF_SPEED_25G",
    "40G": "BF_SPEED_40G",
    "50G": "BF_SPEED_50G",
    "100G": "BF_SPEED_100G",
}
# FEC each speed needs by default (IEEE: RS for 100G/25G, none for 10G/40G).
DEFAULT_FEC = {
    "10G": "BF_FEC_TYP_NONE",
    "25G": "BF_FEC_TYP_REED_SOLOMON",
    "40G": "BF_FEC_TYP_NONE",
    "50G": "BF_FEC_TYP_REED_SOLOMON",
    "100G": "BF_FEC_TYP_REED_SOLOMON",
}
FECS = {"BF_FEC_TYP_NONE", "BF_FEC_TYP_FIRECODE", "BF_FEC_TYP_REED_SOLOMON"}
MIRROR_DIRECTIONS = {"INGRESS", "EGRESS", "BOTH"}
MAX_DEV_PORT = 511  # PortId_t is 9 bits
MAX_SID = 1015  # Tofino 1 normal mirror sessions 1..1015

# Jitter write-back (switch/p4/controls/rtp_quality.p4): the egress pass of an
# RTP packet sends an E2E mirror copy through session BASE + pipe, to a port of
# that pipe, whose egress pass writes the new jitter and drops the copy.
# BASE is the P4 build's JITTER_WRITEBACK_SESSION_BASE. Default ports: each
# pipe's recirculation port (the target's recirc_ports, 2-pipe part).
WRITEBACK_SESSION_BASE = 1000
WRITEBACK_MAX_PKT_LEN = 64  # the copy needs only its 8-byte mirror header
# Congestion reroute notices (switch/p4/controls/reroute.p4): the m-th hot
# packet of a watched flow sends an E2E mirror copy through session BASE + (the
# flow's ingress pipe) to that pipe's recirculation port, where it re-enters
# Ingress as a notice. BASE is the build's REROUTE_NOTICE_SESSION_BASE.
NOTICE_SESSION_BASE = 1010
NOTICE_MAX_PKT_LEN = 128  # mirror header, Ethernet, the flow's IPv4 header and a little more
# iRED feedback copies (WITH_IRED, standard profile): session IRED_SESSION_BASE + pipe to
# that pipe's recirculation port, where the copy re-enters Ingress and sets
# the drop flag; truncated, it needs only its 4-byte mirror header.
IRED_SESSION_BASE = 1004
IRED_MAX_PKT_LEN = 64


@dataclass(frozen=True)
class Target:
    """What differs between the chip generations the program is built for:
    the highest mirror session id the program can name, the sessions'
    bases (the build's -D values, switch/p4/build.sh) and each pipe's
    recirculation port (the program's RECIRC_PORT_LOCAL + 128 * pipe), the
    default destination of the per-pipe sessions."""

    max_sid: int
    writeback_base: int
    notice_base: int
    ired_base: int
    recirc_ports: tuple[int, ...]


# Tofino 1: local ports 64-71 of every pipe can recirculate; 68 is the one
# the program recognises (64 is pipe 0's CPU Ethernet port group).
# Tofino 2 (build.sh standard-t2, large-t2): a mirror session id is 8 bits in
# T2NA, so those builds move the program's sessions 768 lower (its INT report
# session is 252); a session the program names must be below 256. Its
# recirculation ports are local ports 0-7 of each pipe (bf-drivers'
# pm_recirc_port_to_dev_port_map), pipe 0's port 0 being the PCIe CPU port
# and 2-5 its CPU Ethernet ports: the program uses local port 6. Local port
# 68 is a front-panel MAC port there.
TARGETS = {
    "tofino": Target(
        MAX_SID, WRITEBACK_SESSION_BASE, NOTICE_SESSION_BASE, IRED_SESSION_BASE, (68, 196)
    ),
    "tofino2": Target(255, 232, 242, 236, (6, 134)),
}


class ConfigError(ValueError):
    """The bootstrap config is wrong; the message says where."""


@dataclass(frozen=True)
class FrontPanel:
    """A front-panel port "conn/chnl", resolved to a dev port on the switch."""

    conn: int
    chnl: int

    def __str__(self) -> str:
        return f"{self.conn}/{self.chnl}"


@dataclass
class Op:
    """One bfrt_python call: ``bfrt.<path...>(*args, **kwargs)``."""

    path: tuple[str, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)
    args: tuple[Any, ...] = ()
    fallback: str | None = None  # method to call instead when the entry exists
    skip_if: tuple[str, Any] | None = None  # (getter, value): already in that state
    what: str = ""

    def describe(self) -> str:
        parts = [repr(a) for a in self.args]
        parts += [f"{k}={_show(v)}" for k, v in self.kwargs.items()]
        return f"bfrt.{'.'.join(self.path)}({', '.join(parts)})  # {self.what}"


def _show(v: Any) -> str:
    return f"<dev port of {v}>" if isinstance(v, FrontPanel) else repr(v)


# ---------------------------------------------------------------- validation


def _port(value: Any, where: str) -> int | FrontPanel:
    if isinstance(value, bool):
        raise ConfigError(f"{where}: port must be a dev port number or 'conn/chnl', got {value!r}")
    if isinstance(value, int):
        if not 0 <= value <= MAX_DEV_PORT:
            raise ConfigError(f"{where}: dev port {value} outside 0..{MAX_DEV_PORT}")
        return value
    if isinstance(value, str) and value.count("/") == 1:
        conn, chnl = value.split("/")
        if conn.isdigit() and chnl.isdigit() and int(chnl) < 8:
            return FrontPanel(int(conn), int(chnl))
    raise ConfigError(f"{where}: port must be a dev port number or 'conn/chnl', got {value!r}")


def _int(value: Any, where: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ConfigError(f"{where}: expected an integer in {lo}..{hi}, got {value!r}")
    return value


def _list(config: dict[str, Any], key: str) -> list[dict[str, Any]]:
    value = config.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise ConfigError(f"{key}: expected a list of objects")
    return value


KNOWN_KEYS = {
    "program",
    "target",
    "ports",
    "mirror_sessions",
    "session_entry_scope",
    "jitter_writeback",
    "reroute_notice",
    "ired_feedback",
}

# Table entries this file once carried, and who writes them now (one writer per table).
MOVED = {
    "nexthops": "next hops are the switch control plane's ([[nexthops]] of p4relay-controlplane)",
    "routes": "routes are the switch control plane's ([[routes]] of p4relay-controlplane)",
    "default_route": "the default route is the switch control plane's (route 0.0.0.0/0 "
    "in [[routes]] of p4relay-controlplane)",
    "relay_addrs": "the relay addresses are rtpagent's (--relay-addr, --relay-ports: "
    "RTPProxy's -l and -m/-M), set at every connect",
}


def plan(config: dict[str, Any]) -> list[Op]:
    """Validate ``config`` and return the calls that set the switch up."""
    for key, owner in MOVED.items():
        if key in config:
            raise ConfigError(f"{key}: {owner}; remove it from this file")
    unknown = sorted(set(config) - KNOWN_KEYS)
    if unknown:
        raise ConfigError(f"unknown keys {unknown}; known: {sorted(KNOWN_KEYS)}")
    program = config.get("program", PROGRAM)
    if not isinstance(program, str) or not program.isidentifier():
        raise ConfigError(f"program: expected the P4 program name, got {program!r}")
    target_name = config.get("target", "tofino")
    if target_name not in TARGETS:
        raise ConfigError(f"target: one of {sorted(TARGETS)}, got {target_name!r}")
    target = TARGETS[target_name]
    ops: list[Op] = []

    for i, p in enumerate(_list(config, "ports")):
        where = f"ports[{i}]"
        speed = p.get("speed", "100G")
        if speed not in SPEEDS:
            raise ConfigError(f"{where}: speed {speed!r} not one of {sorted(SPEEDS)}")
        fec = p.get("fec", DEFAULT_FEC[speed])
        if fec not in FECS:
            raise ConfigError(f"{where}: fec {fec!r} not one of {sorted(FECS)}")
        port = _port(p.get("port"), where)
        kwargs: dict[str, Any] = {"DEV_PORT": port, "SPEED": SPEEDS[speed], "FEC": fec}
        if not p.get("autoneg", False):
            kwargs["AUTO_NEGOTIATION"] = "PM_AN_FORCE_DISABLE"
        kwargs["PORT_ENABLE"] = True
        ops.append(Op(("port", "port", "add"), kwargs, fallback="mod", what=f"port {port} {speed}"))

    scope = config.get("session_entry_scope", "per_pipe")
    if scope not in ("per_pipe", "all_pipes"):
        raise ConfigError(f"session_entry_scope: 'per_pipe' or 'all_pipes', got {scope!r}")
    for table in PER_PIPE_TABLES:
        path = (program, *table.split("."))
        ops.append(
            Op(
                (*path, "symmetric_mode_set"),
                args=(scope == "all_pipes",),
                skip_if=("symmetric_mode_get", scope == "all_pipes"),
                what=f"{table} entry scope {scope} (the table must be empty to change it)",
            )
        )

    writeback_ops = (
        _writeback_sessions(config, target)
        + _notice_sessions(config, target)
        + _pipe_sessions(
            config,
            "ired_feedback",
            target,
            target.ired_base,
            target.recirc_ports,
            IRED_MAX_PKT_LEN,
            "iRED feedback session",
        )
    )
    sids = {op.kwargs["sid"] for op in writeback_ops}
    for i, m in enumerate(_list(config, "mirror_sessions")):
        where = f"mirror_sessions[{i}]"
        sid = _int(m.get("sid"), f"{where}.sid", 1, target.max_sid)
        if sid in sids:
            raise ConfigError(f"{where}: sid {sid} given twice (or a jitter write-back session)")
        sids.add(sid)
        direction = m.get("direction", "BOTH")
        if direction not in MIRROR_DIRECTIONS:
            raise ConfigError(
                f"{where}: direction {direction!r} not one of {sorted(MIRROR_DIRECTIONS)}"
            )
        ops.append(
            Op(
                ("mirror", "cfg", "add_with_normal"),
                {
                    "sid": sid,
                    "direction": direction,
                    "session_enable": True,
                    "ucast_egress_port": _port(m.get("port"), f"{where}.port"),
                    "ucast_egress_port_valid": True,
                    "max_pkt_len": _int(
                        m.get("max_pkt_len", 16384), f"{where}.max_pkt_len", 64, 16384
                    ),
                },
                fallback="mod_with_normal",
                what=f"mirror session {sid}",
            )
        )
    return ops + writeback_ops


def _writeback_sessions(config: dict[str, Any], target: Target) -> list[Op]:
    """One egress mirror session per pipe for the jitter write-back copies;
    ``"jitter_writeback": null`` for a build without them (LEAN profile)."""
    return _pipe_sessions(
        config,
        "jitter_writeback",
        target,
        target.writeback_base,
        target.recirc_ports,
        WRITEBACK_MAX_PKT_LEN,
        "jitter write-back session",
    )


def _notice_sessions(config: dict[str, Any], target: Target) -> list[Op]:
    """One egress mirror session per pipe for the congestion reroute notices,
    to the pipe's recirculation port; ``"reroute_notice": null`` for a build
    without reroute (LEAN, large)."""
    return _pipe_sessions(
        config,
        "reroute_notice",
        target,
        target.notice_base,
        target.recirc_ports,
        NOTICE_MAX_PKT_LEN,
        "reroute notice session",
    )


def _pipe_sessions(
    config: dict[str, Any],
    key: str,
    target: Target,
    default_base: int,
    default_ports: tuple[int, ...],
    max_pkt_len: int,
    what: str,
) -> list[Op]:
    wb = config.get(key, {})
    if wb is None:
        return []
    if not isinstance(wb, dict) or set(wb) - {"session_base", "ports"}:
        raise ConfigError(f"{key}: expected null or an object with session_base and ports")
    ports = wb.get("ports", list(default_ports))
    if not isinstance(ports, list) or not 1 <= len(ports) <= 4:
        raise ConfigError(f"{key}.ports: expected one dev port per pipe (1 to 4)")
    base = _int(
        wb.get("session_base", default_base),
        f"{key}.session_base",
        1,
        target.max_sid + 1 - len(ports),
    )
    ops: list[Op] = []
    for pipe, value in enumerate(ports):
        where = f"{key}.ports[{pipe}]"
        port = _int(value, where, 0, MAX_DEV_PORT)
        if port >> 7 != pipe:
            raise ConfigError(
                f"{where}: dev port {port} is in pipe {port >> 7}; the copy must stay in pipe {pipe}"
            )
        ops.append(
            Op(
                ("mirror", "cfg", "add_with_normal"),
                {
                    "sid": base + pipe,
                    "direction": "EGRESS",
                    "session_enable": True,
                    "ucast_egress_port": port,
                    "ucast_egress_port_valid": True,
                    "max_pkt_len": max_pkt_len,
                },
                fallback="mod_with_normal",
                what=f"{what} {base + pipe} -> port {port} (pipe {pipe})",
            )
        )
    return ops


# ---------------------------------------------------------------- applying


def _node(bfrt: Any, path: tuple[str, ...]) -> Any:
    node = bfrt
    for part in path:
        node = getattr(node, part)
    return node


def _resolve(bfrt: Any, value: Any) -> Any:
    if isinstance(value, FrontPanel):
        info = bfrt.port.port_hdl_info.get(CONN_ID=value.conn, CHNL_ID=value.chnl, print_ents=False)
        return info.data[b"$DEV_PORT"]
    return value


def apply(bfrt: Any, ops: list[Op], out: Any = sys.stdout) -> int:
    """Run ``ops`` against bfrt_python; returns the number of failed calls."""
    failed = 0
    for op in ops:
        kwargs = {k: _resolve(bfrt, v) for k, v in op.kwargs.items()}
        if op.skip_if is not None:
            getter, value = op.skip_if
            try:
                current = _node(bfrt, (*op.path[:-1], getter))()
            except Exception:  # no getter on this SDE: just set it
                current = None
            if current == value:
                print(f"same  {op.what}", file=out)
                continue
        try:
            _node(bfrt, op.path)(*op.args, **kwargs)
            print(f"ok    {op.what}", file=out)
        except Exception as e:  # bfrt_python raises plain exceptions
            if op.fallback is None:
                print(f"FAIL  {op.what}: {e}", file=out)
                failed += 1
                continue
            try:
                _node(bfrt, (*op.path[:-1], op.fallback))(*op.args, **kwargs)
                print(f"mod   {op.what} (existed)", file=out)
            except Exception as e2:
                print(f"FAIL  {op.what}: {e}; {op.fallback}: {e2}", file=out)
                failed += 1
    return failed


def load_config(path: str) -> dict[str, Any]:
    try:
        with open(path) as f:
            config = json.load(f)
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror}") from e
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}: invalid JSON at line {e.lineno}: {e.msg}") from e
    if not isinstance(config, dict):
        raise ConfigError(f"{path}: expected a JSON object")
    return config


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=(
            "Validate a p4relay switch bootstrap config and print the BfRt calls "
            "it makes. On the switch, run this file with 'bfshell -b' instead "
            f"(config from ${CONFIG_ENV}, default {DEFAULT_CONFIG})."
        )
    )
    parser.add_argument("--check", metavar="CONFIG", required=True, help="JSON config to check")
    args = parser.parse_args(argv)
    try:
        ops = plan(load_config(args.check))
    except ConfigError as e:
        print(f"config error: {e}", file=sys.stderr)
        return 2
    for op in ops:
        print(op.describe())
    print(f"{len(ops)} calls; config OK", file=sys.stderr)
    return 0


def _run_in_bfshell(bfrt: Any) -> None:
    path = os.environ.get(CONFIG_ENV, DEFAULT_CONFIG)
    try:
        ops = plan(load_config(path))
    except ConfigError as e:
        print(f"p4relay bootstrap: config error: {e}")
        return
    failed = apply(bfrt, ops)
    print(f"p4relay bootstrap: {len(ops) - failed}/{len(ops)} calls done from {path}")


if "bfrt" in globals():  # inside bfshell's bfrt_python
    _run_in_bfshell(globals()["bfrt"])
elif __name__ == "__main__":
    sys.exit(main())
