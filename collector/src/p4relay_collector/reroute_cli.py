"""`p4relay-reroute` command line: the reroute control plane of one switch."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from p4relay_collector.cli import serve, start
from p4relay_collector.config import Settings, load
from p4relay_collector.reroute import RerouteAgent, RerouteConfig, load_config
from p4relay_collector.service import Collector

EPILOG = """\
The TOML file holds the server settings in [collector] (server_url, token or
token_file: an ingest token; metrics_listen: its Prometheus /metrics, beside
a collector on the same host give it its own port, empty: off) and the
switch's reroute in [reroute]:

  [reroute]
  switch = "s1"                    # its name at the server
  grpc_address = "198.19.0.1:50052"
  poll_ms = 100                    # how often primaries are checked for the return
  [[reroute.classes]]              # class 0: packets of unwatched destinations
  flow_class = 0                   # (they only stamp their port as hot)
  t_q_us = 1000
  m = 1
  hold_ms = 2000
  [[reroute.classes]]
  flow_class = 1
  t_q_us = 1000                    # queueing delay threshold
  m = 5                            # consecutive packets over it
  hold_ms = 2000                   # primary clear this long -> move back
  [[reroute.watch]]
  prefix = "198.18.2.0/24"
  slot = 0
  flow_class = 1
  primary_port = 2                 # dev_port of the primary next hop
  backup_nexthop_id = 3            # omit: notify the upstream switch instead
  backup_port = 3

example:
  p4relay-reroute --config /etc/p4relay/reroute.toml
"""


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="p4relay-reroute",
        description="Congestion reroute control plane of one switch: installs flow classes and "
        "watched destinations, records every data-plane reroute as a server event, and moves "
        "flows back after their primary stayed clear for the hold time.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--config", type=Path, required=True, help="TOML file ([collector], [reroute])")
    ap.add_argument("--check-config", action="store_true", help="print the settings and exit")
    return ap


async def _run(settings: Settings, cfg: RerouteConfig) -> int:
    collector = Collector(settings)

    async def work(stop: asyncio.Event) -> None:
        try:
            await RerouteAgent(cfg, collector.submit).run(stop)
        finally:
            await collector.close()

    return await serve("p4relay-reroute", settings.metrics_listen, work)


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    return start(
        "p4relay-reroute",
        lambda: (load(a.config, {}), load_config(a.config)),
        a.check_config,
        _run,
    )


if __name__ == "__main__":
    raise SystemExit(main())
