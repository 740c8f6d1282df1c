"""`p4relay-server` command line: serve, migrate, create-admin, create-token,
register-switch, retention, openapi."""

from __future__ import annotations

import argparse
import datetime as dt
import getpass
import json
import sys
from pathlib import Path
from typing import Any

from p4relay_runtime.settings import legacy_env

from p4relay_server.config import Settings, load_settings
from p4relay_server.logs import configure_logging


def _settings(args: argparse.Namespace, **extra: Any) -> Settings:
    return load_settings(
        args.config,
        database_url=args.database_url,
        log_level=args.log_level,
        **extra,
    )


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from p4relay_server.app import create_app

    settings = _settings(args, host=args.host, port=args.port)
    configure_logging(settings.log_level, settings.log_json)
    app = create_app(settings)
    uvicorn.run(app, host=settings.host, port=settings.port, log_config=None, access_log=False)
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    from p4relay_server.migrate import run_alembic

    run_alembic(_settings(args), args.alembic_args)
    return 0


def _read_password(args: argparse.Namespace) -> str:
    if args.password_stdin:
        return sys.stdin.readline().rstrip("\n")
    env = legacy_env("P4RELAY_SERVER_ADMIN_PASSWORD", "P4RELAY_ADMIN_PASSWORD")
    if env:
        return env
    if not sys.stdin.isatty():
        raise SystemExit(
            "no password: use --password-stdin, P4RELAY_SERVER_ADMIN_PASSWORD or a terminal"
        )
    first = getpass.getpass("password: ")
    if getpass.getpass("again: ") != first:
        raise SystemExit("passwords differ")
    return first


def cmd_create_admin(args: argparse.Namespace) -> int:
    from p4relay_server.db import make_engine, make_sessionmaker
    from p4relay_server.services import accounts

    settings = _settings(args)
    password = _read_password(args)
    engine = make_engine(settings)
    try:
        with make_sessionmaker(engine)() as db:
            user = accounts.create_user(db, args.username, password, args.role)
    except (ValueError, accounts.Conflict) as e:
        print(f"create-admin: {e}", file=sys.stderr)
        return 1
    finally:
        engine.dispose()
    print(f"created {user.role} {user.username!r} (id {user.id})")
    return 0


def cmd_create_token(args: argparse.Namespace) -> int:
    from p4relay_server.db import make_engine, make_sessionmaker
    from p4relay_server.services import accounts

    settings = _settings(args)
    expires = (
        dt.datetime.now(dt.UTC) + dt.timedelta(days=args.expires_days)
        if args.expires_days
        else None
    )
    engine = make_engine(settings)
    try:
        with make_sessionmaker(engine)() as db:
            row, token = accounts.create_token(db, args.name, args.scope, expires)
    finally:
        engine.dispose()
    print(f"# token {row.id} {row.name!r} scope={row.scope}; shown once:", file=sys.stderr)
    print(token)
    return 0


def cmd_register_switch(args: argparse.Namespace) -> int:
    from p4relay_server.db import make_engine, make_sessionmaker
    from p4relay_server.services import accounts

    engine = make_engine(_settings(args))
    try:
        with make_sessionmaker(engine)() as db:
            sw = accounts.register_switch(db, args.name, args.grpc_address, args.device_id)
    finally:
        engine.dispose()
    print(f"switch {sw.name!r} (id {sw.id}) at {sw.grpc_address}, device {sw.device_id}")
    return 0


def cmd_retention(args: argparse.Namespace) -> int:
    from p4relay_server.db import make_engine
    from p4relay_server.retention import run_retention

    settings = _settings(args)
    configure_logging(settings.log_level, settings.log_json)
    engine = make_engine(settings)
    try:
        report = run_retention(engine, settings.retention)
    finally:
        engine.dispose()
    print(json.dumps(report.as_dict()))
    return 0


def cmd_openapi(args: argparse.Namespace) -> int:
    from p4relay_server.openapi import openapi_json

    text = openapi_json()
    if args.output:
        Path(args.output).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


def _positive_days(text: str) -> float:
    try:
        days = float(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from e
    if not 0 < days <= 36_500:
        raise argparse.ArgumentTypeError("must be more than 0 and at most 36500 days")
    return days


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="p4relay-server",
        description="p4relay server: session audit, telemetry, MOS, live feed; and its tools. "
        "Settings: defaults < TOML file (--config or P4RELAY_SERVER_CONFIG) < "
        "P4RELAY_SERVER_* env < flags.",
    )
    p.add_argument("--config", type=Path, help="TOML settings file")
    p.add_argument("--database-url", help="SQLAlchemy URL (P4RELAY_SERVER_DATABASE_URL)")
    p.add_argument("--log-level", help="debug|info|warning|error (P4RELAY_SERVER_LOG_LEVEL)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    s = sub.add_parser("serve", help="run the API and console server")
    s.add_argument("--host", help="listen address (default 127.0.0.1)")
    s.add_argument("--port", type=int, help="listen port (default 8000)")
    s.set_defaults(func=cmd_serve)

    s = sub.add_parser(
        "migrate",
        help="alembic on the server database (default: upgrade head)",
        description="Runs alembic with migrations/ and the configured database, "
        "e.g. `migrate`, `migrate downgrade base`, `migrate current`.",
    )
    s.add_argument("alembic_args", nargs=argparse.REMAINDER, help="alembic command and arguments")
    s.set_defaults(func=cmd_migrate)

    s = sub.add_parser("create-admin", help="create a user (admin by default); no default password")
    s.add_argument("--username", required=True)
    s.add_argument("--role", choices=["admin", "operator", "viewer"], default="admin")
    s.add_argument(
        "--password-stdin",
        action="store_true",
        help="read the password from stdin (else P4RELAY_SERVER_ADMIN_PASSWORD or a prompt)",
    )
    s.set_defaults(func=cmd_create_admin)

    s = sub.add_parser("create-token", help="create an API token and print it once")
    s.add_argument("--name", required=True, help="who uses it, e.g. agent-relay-1")
    s.add_argument(
        "--scope",
        choices=["ingest", "read"],
        required=True,
        help="ingest: agents and the collector; read: read-only API and /metrics",
    )
    s.add_argument("--expires-days", type=_positive_days, help="lifetime, > 0 (default: no expiry)")
    s.set_defaults(func=cmd_create_token)

    s = sub.add_parser(
        "register-switch", help="register (or update) a switch for the collector to poll"
    )
    s.add_argument("--name", required=True, help="switch name, as agents report it")
    s.add_argument(
        "--grpc-address", required=True, help="BfRt gRPC host:port, e.g. 127.0.0.1:50052"
    )
    s.add_argument("--device-id", type=int, default=0)
    s.set_defaults(func=cmd_register_switch)

    s = sub.add_parser("retention", help="downsample and expire samples per the retention policy")
    s.set_defaults(func=cmd_retention)

    s = sub.add_parser("openapi", help="print the OpenAPI document (JSON)")
    s.add_argument("--output", "-o", help="write to this file instead of stdout")
    s.set_defaults(func=cmd_openapi)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # Logs go to stderr (stdout carries command output such as tokens, OpenAPI).
    level = legacy_env("P4RELAY_SERVER_LOG_LEVEL", "P4RELAY_LOG_LEVEL")
    configure_logging(args.log_level or level or "info")
    try:
        rc: int = args.func(args)
    except FileNotFoundError as e:
        print(f"p4relay-server: {e}", file=sys.stderr)
        return 2
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
