"""`p4relay-controlplane` command line: flags over the environment
(P4RELAY_CONTROLPLANE_*) over the TOML file over defaults."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from pathlib import Path
from typing import Any

import structlog
from p4relay_runtime.logs import configure_logging
from p4relay_runtime.settings import add_setting_flags
from pydantic import SecretStr

from p4relay_controlplane.config import ENV_PREFIX, ConfigError, Settings, load, parse_listen

PROG = "p4relay-controlplane"
# BfRt client id of `--show-ired` (a one-shot reader beside the running daemon).
SHOW_CLIENT_ID = 13
# Settings given as flags (the feature sections live in the file or the environment).
SCALARS = (
    "switch",
    "grpc_address",
    "client_id",
    "timeout_s",
    "reconcile_interval_s",
    "metrics_listen",
    "server_url",
    "token_file",
    "log_level",
    "log_json",
)

EPILOG = """\
examples:
  p4relay-controlplane --config /etc/p4relay/controlplane.toml
  p4relay-controlplane --check /etc/p4relay/controlplane.toml   # validate, print the entries
  p4relay-controlplane --config s1.toml --once                   # apply, repair, exit
  p4relay-controlplane --config s1.toml --diff                   # what differs; writes nothing
  p4relay-controlplane --config s1.toml --show-ired
  kill -HUP <pid>    # re-read the file and the environment; the flags still win

The daemon owns, on one switch, the tables of every section its configuration
has: [[ports]] (egress shaping), [[nexthops]] and [[routes]], [reroute]
(flow classes, watched destinations, moving flows back), [[ired]] (iRED per
egress port) and [int] (watch list, hops, roles, report target). A section
left out is not managed; a section present is the whole truth for its tables
(an empty list empties them). Per-call entries, relay addresses and port
binding are rtpagent's. At connect, after a switch restart and every
--reconcile-interval-s it reads the switch back and repairs what differs,
counted in p4relay_controlplane_drift_repaired_total{table,kind} and logged
as drift_repaired with the table and key.

A reload (SIGHUP) that does not validate is refused whole (logged, counted in
p4relay_controlplane_config_reloads_total{result="invalid"}) and the running
configuration stays. Every setting is P4RELAY_CONTROLPLANE_<NAME> in the
environment (lists and tables as JSON, nested keys with __) or a key of the
TOML file; switch/controlplane/README.md has the reference.
Exit status: 0 done, 1 the switch refused something (--once), is
unreachable, or differs from the file (--diff), 2 configuration error
(--diff: 2 also when the switch cannot be read).
"""


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog=PROG,
        description="The control plane of one p4relay switch: applies its configuration "
        "(shaping, routes, congestion reroute, INT, iRED) over BfRt, keeps it there "
        "(reconciles drift, re-applies after a switch restart), moves rerouted flows back.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    mode = ap.add_mutually_exclusive_group()
    ap.add_argument("--config", type=Path, help="the switch's TOML file")
    mode.add_argument(
        "--check",
        type=Path,
        metavar="CONFIG",
        help="validate CONFIG (with the environment and flags) and print the entries it "
        "asks for; nothing is sent to a switch",
    )
    mode.add_argument("--once", action="store_true", help="apply and repair once, then exit")
    mode.add_argument(
        "--diff",
        action="store_true",
        help="read the switch and print what differs from the configuration (missing, "
        "changed, extra), writing nothing; exit 1 when something differs",
    )
    mode.add_argument(
        "--show-ired",
        action="store_true",
        help="print the switch's iRED per port (settings, counters, against the config)",
    )
    add_setting_flags(ap, Settings, SCALARS)
    return ap


def _flags(a: argparse.Namespace) -> dict[str, Any]:
    return {k: getattr(a, k) for k in SCALARS}


def _report_mode_logs() -> None:
    """The report modes print on stdout: log lines (the client's) go to
    stderr (whichever it is when a line is written), warnings and errors only."""
    structlog.configure(
        logger_factory=lambda *_: structlog.PrintLogger(sys.stderr),
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
    )


async def _show_ired(cfg: Settings) -> int:
    from p4relay_switch import Subscription, SwitchClient, SwitchError

    from p4relay_controlplane.ired_show import show

    client = SwitchClient(
        cfg.grpc_address,
        client_id=SHOW_CLIENT_ID,
        reconnect=False,
        timeout_s=cfg.timeout_s,
        connect_timeout_s=cfg.timeout_s,
        subscription=Subscription(learn=False, idle_timeout=False),
    )
    try:
        await client.connect()
        print(await show(client, cfg.ired or []), end="")
    except SwitchError as exc:
        print(f"{PROG}: switch {cfg.grpc_address}: {exc}", file=sys.stderr)
        return 1
    finally:
        await client.close()
    return 0


async def _once(cfg: Settings) -> int:
    from p4relay_switch import SwitchError

    from p4relay_controlplane.daemon import Daemon

    d = Daemon(cfg)
    d.client.reconnect_enabled = False
    try:
        await d.client.connect()
    except SwitchError as exc:
        print(f"{PROG}: switch {cfg.grpc_address}: {exc}", file=sys.stderr)
        return 1
    try:
        report = await d.converge(drift=False)
    finally:
        await d.client.close()
    if report is None:
        return 1
    for (table, kind), n in sorted(report.repaired.items()):
        print(f"{table}: {n} {kind}")
    for table, items in sorted(report.refused.items()):
        for key, why in items:
            print(f"REFUSED {table}: {key}: {why}")
    print(f"{PROG}: {report.touched} written, {sum(map(len, report.refused.values()))} refused")
    return 1 if report.refused else 0


async def _diff(cfg: Settings) -> int:
    from p4relay_switch import Subscription, SwitchClient, SwitchError

    from p4relay_controlplane.desired import desired
    from p4relay_controlplane.reconcile import Reconciler

    client = SwitchClient(
        cfg.grpc_address,
        client_id=SHOW_CLIENT_ID,
        reconnect=False,
        timeout_s=cfg.timeout_s,
        connect_timeout_s=cfg.timeout_s,
        subscription=Subscription(learn=False, idle_timeout=False),
    )
    try:
        await client.connect()
        report = await Reconciler(client, dry_run=True).run(desired(cfg), drift=False)
    except SwitchError as exc:
        print(f"{PROG}: switch {cfg.grpc_address}: {exc}", file=sys.stderr)
        return 2
    finally:
        await client.close()
    for table, kind, key in report.differs:
        print(f"{kind:<8} {table}: {key}")
    for table, items in sorted(report.refused.items()):
        for key, why in items:
            print(f"REFUSED  {table}: {key}: {why}")
    n = len(report.differs)
    print(f"{PROG}: {n} difference{'s' if n != 1 else ''}", file=sys.stderr)
    return 1 if n else 0


async def _serve(cfg: Settings, reread: Any) -> int:
    from prometheus_client import start_http_server

    from p4relay_controlplane import metrics
    from p4relay_controlplane.daemon import Daemon
    from p4relay_controlplane.reroute import Submit

    log = structlog.get_logger("p4relay.controlplane")
    collector = None
    submit: Submit | None = None
    token = cfg.ingest_token()
    if cfg.server_url:
        if token is None:
            print(f"{PROG}: server_url needs token_file or {ENV_PREFIX}TOKEN", file=sys.stderr)
            return 2
        from p4relay_collector.config import Settings as CollectorSettings
        from p4relay_collector.service import Collector

        collector = Collector(
            CollectorSettings(server_url=cfg.server_url, token=SecretStr(token), metrics_listen="")
        )
        submit = collector.submit
    daemon = Daemon(cfg, submit, collector.flush if collector is not None else None)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    reloads: set[asyncio.Task[str]] = set()

    def reload() -> None:
        try:
            new = reread()
        except ConfigError as e:
            metrics.RELOADS.labels("invalid").inc()
            log.error("config_reload_refused", reason=str(e))
            return
        t = loop.create_task(daemon.reload(new), name="reload")
        reloads.add(t)
        t.add_done_callback(reloads.discard)

    with contextlib.suppress(NotImplementedError):  # loops without signal support
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        loop.add_signal_handler(signal.SIGHUP, reload)
    if cfg.metrics_listen:
        host, port = parse_listen(cfg.metrics_listen)
        try:
            start_http_server(port, addr=host)
        except OSError as e:
            print(f"{PROG}: metrics on {cfg.metrics_listen}: {e}", file=sys.stderr)
            return 2
    log.info("starting", switch=cfg.switch, grpc_address=cfg.grpc_address)
    try:
        await daemon.run(stop)
    finally:
        if collector is not None:
            await collector.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    flags = _flags(a)
    path = a.check if a.check is not None else a.config
    try:
        cfg = load(path, flags)
        cfg.ingest_token()
    except ConfigError as e:
        print(f"{PROG}: configuration error: {e}", file=sys.stderr)
        return 2
    if a.check is not None:
        from p4relay_controlplane.desired import desired

        lines = desired(cfg).lines()
        print("\n".join(lines))
        print(f"{PROG}: {path}: configuration OK ({len(lines)} lines)", file=sys.stderr)
        return 0
    if a.show_ired or a.diff:  # a report on stdout
        _report_mode_logs()
        return asyncio.run(_show_ired(cfg) if a.show_ired else _diff(cfg))
    configure_logging(cfg.log_level, cfg.log_json)
    if a.once:
        return asyncio.run(_once(cfg))
    return asyncio.run(_serve(cfg, lambda: load(a.config, flags)))


if __name__ == "__main__":
    raise SystemExit(main())
