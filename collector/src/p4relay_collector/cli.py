"""`p4relay-collector` command line: flags over environment (P4RELAY_COLLECTOR_*)
over the TOML file over defaults."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

from p4relay_runtime.logs import configure_logging
from p4relay_runtime.settings import add_setting_flags
from prometheus_client import start_http_server
from pydantic import BaseModel

from p4relay_collector.config import ConfigError, Settings, load, parse_listen
from p4relay_collector.service import Collector

M = TypeVar("M", bound=BaseModel)

EPILOG = """\
examples:
  p4relay-collector --token-file /etc/p4relay/collector.token
  p4relay-collector --server-url http://198.19.0.1:8000 --token-file t --interval-s 0.5
  P4RELAY_COLLECTOR_TOKEN=... p4relay-collector --config /etc/p4relay/collector.toml

The switches to poll are those registered at the server
(`p4relay-server register-switch` or POST /api/v1/switches); the token is an
ingest token (`p4relay-server create-token --scope ingest`). Every setting is a
flag, P4RELAY_COLLECTOR_<NAME> in the environment, or a key of the TOML file's
[collector] table (named like the flag, with _).
"""


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="p4relay-collector",
        description="Switch telemetry collector: polls the registered switches over BfRt "
        "(ports, queues, relay table), raises congestion episodes, sends them to the server.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--config", type=Path, help="TOML file ([collector] table or top-level keys)")
    add_setting_flags(ap, Settings, Settings.model_fields)
    ap.add_argument("--once", action="store_true", help="poll every switch once and exit")
    ap.add_argument(
        "--check-config", action="store_true", help="print the effective settings and exit"
    )
    return ap


async def serve(
    prog: str, metrics_listen: str, work: Callable[[asyncio.Event], Awaitable[None]]
) -> int:
    """How each collector-side daemon runs: SIGTERM/SIGINT set `stop`,
    Prometheus /metrics on `metrics_listen` (empty: off), then `work(stop)`.
    2 when the metrics port cannot be bound."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):  # loops without signal support
            loop.add_signal_handler(sig, stop.set)
    # Metrics after the handlers: once it answers, a SIGTERM stops it cleanly.
    if metrics_listen:
        host, port = parse_listen(metrics_listen)
        try:
            start_http_server(port, addr=host)
        except OSError as e:
            print(f"{prog}: metrics on {metrics_listen}: {e}", file=sys.stderr)
            return 2
    await work(stop)
    return 0


async def _run(cfg: Settings, once: bool) -> int:
    collector = Collector(cfg)
    return await serve(
        "p4relay-collector",
        "" if once else cfg.metrics_listen,
        lambda stop: collector.run(once=once, stop=stop),
    )


def start(
    prog: str,
    configure: Callable[[], tuple[Settings, M]],
    check_config: bool,
    run: Callable[[Settings, M], Coroutine[Any, Any, int]],
) -> int:
    """How each collector-side daemon starts: `configure` reads its settings
    (and what --check-config prints); a configuration error is exit 2 with
    the reason; then logging as configured, and `run`."""
    try:
        settings, shown = configure()
        if check_config:
            print(shown.model_dump_json(indent=2))
            return 0
        settings.ingest_token()
    except ConfigError as e:
        print(f"{prog}: configuration error: {e}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level, settings.log_json)
    return asyncio.run(run(settings, shown))


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    skip = ("config", "check_config", "once")
    overrides: dict[str, object] = {k: v for k, v in vars(a).items() if k not in skip}

    def configure() -> tuple[Settings, Settings]:
        cfg = load(a.config, overrides)
        return cfg, cfg

    return start("p4relay-collector", configure, a.check_config, lambda cfg, _: _run(cfg, a.once))


if __name__ == "__main__":
    raise SystemExit(main())
