"""Apply switch/bfrt's bootstrap config over BfRt gRPC instead of bfshell.

    python3 grpc_bootstrap.py --config /etc/p4relay/bfrt.json --switch 127.0.0.1:50052

The same JSON file `switch/bfrt/bootstrap.py` runs inside bfshell, checked by
the same validation (`bootstrap.plan`). Over gRPC it writes the forwarding
state rtpagent relies on: next hops (`pipe.Ingress.nexthop`), routes with the
default route (`pipe.Ingress.ipv4_lpm`) and the relay ranges
(`pipe.Ingress.relay_addr`), insert-or-modify, so running it again is safe.
Port speeds, pipe scope and mirror sessions are bf_switchd's own (fixed)
tables, set through bfshell on a Tofino; the software switch takes its ports
from its command line. Dev ports must be numbers here ("1/0" front-panel names
resolve only inside bfshell). Exit 2: bad config; 1: switch unreachable or a
write refused.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import sys
from pathlib import Path
from typing import Any

from p4relay_switch.client import Entry, SwitchClient
from p4relay_switch.codec import Lpm, Range

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bootstrap  # switch/bfrt/bootstrap.py, copied beside this file

T_NEXTHOP = "pipe.Ingress.nexthop"
T_LPM = "pipe.Ingress.ipv4_lpm"
T_RELAY_ADDR = "pipe.Ingress.relay_addr"


def _dev_port(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise bootstrap.ConfigError(
            f"{where}: over gRPC a port is a dev port number, got {value!r}"
        )
    return value


def entries(config: dict[str, Any]) -> dict[str, list[Entry]]:
    """The gRPC entries of a config `bootstrap.plan` accepted."""
    nexthops = [
        Entry(
            {"ig_md.nexthop_id": int(n["id"])},
            "Ingress.forward",
            {
                "port": _dev_port(n["port"], f"nexthops[{i}].port"),
                "src_mac": str(n["src_mac"]),
                "dst_mac": str(n["dst_mac"]),
            },
        )
        for i, n in enumerate(config.get("nexthops", []))
    ]
    routes = list(config.get("routes", []))
    if config.get("default_route") is not None:
        routes.append({"prefix": "0.0.0.0/0", **config["default_route"]})
    lpms = []
    for r in routes:
        net = ipaddress.IPv4Network(r["prefix"], strict=True)
        lpms.append(
            Entry(
                {"hdr.ipv4.dst_addr": Lpm(str(net.network_address), net.prefixlen)},
                "Ingress.set_nexthop",
                {"nexthop_id": int(r["nexthop_id"])},
            )
        )
    relay = [
        Entry(
            {
                "hdr.ipv4.dst_addr": str(a["addr"]),
                "hdr.udp.dst_port": Range(int(a["port_min"]), int(a["port_max"])),
                "$MATCH_PRIORITY": int(a.get("priority", 1)),
            },
            "Ingress.mark_relay",
        )
        for a in config.get("relay_addrs", [])
    ]
    return {T_NEXTHOP: nexthops, T_LPM: lpms, T_RELAY_ADDR: relay}


async def apply(address: str, tables: dict[str, list[Entry]], timeout_s: float) -> None:
    sw = SwitchClient(address, client_id=6, connect_timeout_s=timeout_s, reconnect=False)
    await sw.connect()
    try:
        for table, rows in tables.items():  # next hops before the routes naming them
            if rows:
                await sw.insert_or_modify(table, rows)
            print(f"ok {table}: {len(rows)} entries")
    finally:
        await sw.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True, help="bootstrap JSON (switch/bfrt/README.md)")
    ap.add_argument("--switch", default="127.0.0.1:50052", help="BfRt gRPC address")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the switch")
    a = ap.parse_args(argv)
    try:
        config = bootstrap.load_config(a.config)
        bootstrap.plan(config)
        tables = entries(config)
    except bootstrap.ConfigError as e:
        print(f"config error: {e}", file=sys.stderr)
        return 2
    try:
        asyncio.run(apply(a.switch, tables, a.timeout))
    except Exception as e:  # the switch's own error text is the useful part
        print(f"bootstrap over gRPC at {a.switch} failed: {e}", file=sys.stderr)
        return 1
    print(f"bootstrap over gRPC at {a.switch}: done from {a.config}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
