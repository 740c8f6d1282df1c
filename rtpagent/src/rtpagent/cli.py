"""`rtpagent` command line: flags over environment (P4RELAY_RTPAGENT_*) over the TOML file."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from .early import EarlyRelay, start_from_argv

if TYPE_CHECKING:  # loaded in main, after the control sockets are open (early.py)
    from .config import Settings

SWITCH_INTERVAL_S = 0.0002

EPILOG = """\
examples:
  rtpagent --rtpproxy udp:127.0.0.1:22223 --listen udp:127.0.0.1:22222 --switch 127.0.0.1:50052
  rtpagent --rtpproxy embedded --relay-addr 198.18.0.10 --embedded-ports 20000-29999
  P4RELAY_RTPAGENT_SERVER_TOKEN=... rtpagent --config /etc/rtpagent.toml
  kill -HUP <agent pid>   # re-read the file and the environment: checked, logged
  kill -USR1 <agent pid>  # drain: new calls stay on RTPProxy (rtpagent-ctl resume ends it)
  kill -USR2 <agent pid>  # evacuate: every offloaded call back to RTPProxy, none offloaded

SIGHUP reloads the configuration (the file, P4RELAY_RTPAGENT_* and the flags, which
still win): a configuration that does not validate is refused in the log and
the running one stays; changed settings are named and take effect at a restart.
The agent writes only the calls' entries, the relay addresses and the port
binding; the switch's routes, shaping, iRED, INT and reroute are
p4relay-controlplane's.

RTPProxy must allow the agent's timeout socket: add `-n tcp:127.0.0.1:22224`
(the value of --notify-listen) to its flags; the SIP server's own socket stays
in its own -n. The agent notifies only --sip-notify and the --notify-allow
sockets; a U naming another is forwarded unchanged. Every setting can be
given as a flag, as P4RELAY_RTPAGENT_<NAME> in the environment, or in the TOML file
(keys named like the flags, with _).
"""


def parser() -> argparse.ArgumentParser:
    from .config import Settings

    ap = argparse.ArgumentParser(
        prog="rtpagent",
        description="RTPProxy control-protocol proxy: offloads calls' media to a P4 switch, fail-open.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--config", help="TOML file ([rtpagent] table or top-level keys)")
    for name, field in Settings.model_fields.items():
        flag = "--" + name.replace("_", "-")
        help_ = (
            f"{field.description or ''} (default: {field.get_default(call_default_factory=True)!r})"
        )
        ann = field.annotation
        if ann is bool:
            ap.add_argument(
                flag, dest=name, action=argparse.BooleanOptionalAction, default=None, help=help_
            )
        elif "list" in str(ann):
            ap.add_argument(
                flag, dest=name, action="append", default=None, help=help_ + "; repeatable"
            )
        elif ann is int:
            ap.add_argument(flag, dest=name, type=int, default=None, help=help_)
        elif ann is float:
            ap.add_argument(flag, dest=name, type=float, default=None, help=help_)
        else:
            ap.add_argument(flag, dest=name, default=None, help=help_)
    ap.add_argument(
        "--check-config", action="store_true", help="print the effective settings and exit"
    )
    return ap


async def _run(cfg: Settings, read: Callable[[], Settings], early: EarlyRelay | None = None) -> int:
    from p4relay_runtime.logs import configure_logging

    from .app import App

    configure_logging(cfg.log_level, cfg.log_json)
    if cfg.metrics_listen:
        from prometheus_client import start_http_server

        host, _, port = cfg.metrics_listen.rpartition(":")
        start_http_server(int(port), addr=host or "0.0.0.0")
    app = App(cfg, early=early)
    stop = asyncio.Event()
    started = asyncio.Event()
    loop = asyncio.get_running_loop()
    reloads: set[asyncio.Task[bool]] = set()

    async def reload_when_started() -> bool:
        await started.wait()
        return await app.reload(read)

    def reload() -> None:
        t = asyncio.create_task(reload_when_started(), name="reload")
        reloads.add(t)
        t.add_done_callback(reloads.discard)

    # Before the start: a SIGHUP meanwhile waits for it instead of ending the agent
    # (the signal's default). Event loops without signal support (not Linux's) raise
    # NotImplementedError; Ctrl-C still works.
    with contextlib.suppress(NotImplementedError):
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        loop.add_signal_handler(signal.SIGHUP, reload)
    await app.start()
    # Maintenance without the admin socket: SIGUSR1 drains, SIGUSR2 evacuates.
    with contextlib.suppress(NotImplementedError):
        loop.add_signal_handler(
            signal.SIGUSR1, lambda: app.maintenance.request("local", "draining", "SIGUSR1")
        )
        loop.add_signal_handler(
            signal.SIGUSR2, lambda: app.maintenance.request("local", "evacuated", "SIGUSR2")
        )
    started.set()
    _tune_gc()
    # Threads beside the loop (the store's JSON encoding, gRPC's) may hold
    # the GIL at most this long while a command waits (default: 5 ms).
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    await stop.wait()
    await app.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    # Before anything heavy is loaded: SIP servers' commands are relayed from here on.
    early = start_from_argv(sys.argv[1:] if argv is None else argv)
    try:
        return _main(argv, early)
    finally:
        if early is not None:
            early.close()


def _main(argv: list[str] | None, early: EarlyRelay | None) -> int:
    from .config import load

    a = parser().parse_args(argv)
    overrides = {k: v for k, v in vars(a).items() if k not in ("config", "check_config")}
    try:
        cfg = load(a.config, overrides)
    except (ValueError, OSError) as exc:
        print(f"rtpagent: configuration error: {exc}", file=sys.stderr)
        return 2
    if a.check_config:
        print(cfg.model_dump_json(indent=2))
        return 0
    with asyncio.Runner(loop_factory=_loop_factory(cfg.event_loop)) as runner:
        return runner.run(_run(cfg, lambda: load(a.config, overrides), early))


def _tune_gc() -> None:
    """Fewer, cheaper collections, the older generations' survivors frozen
    out of later scans (gcpolicy.py): with the default thresholds (700, 10,
    10) the collector was ~15 % of the agent's CPU under load, and a full
    scan of the calls up a 100-470 ms pause."""
    from . import gcpolicy

    gcpolicy.install()


def _loop_factory(kind: str) -> Callable[[], asyncio.AbstractEventLoop] | None:
    if kind == "uvloop":
        try:
            import uvloop
        except ImportError:  # not built for this platform: the stock loop works too
            return None
        return uvloop.new_event_loop
    return None


if __name__ == "__main__":
    sys.exit(main())
