"""Alembic driven from the server settings (migrations/ holds the scripts)."""

from __future__ import annotations

from collections.abc import Sequence

from alembic.config import CommandLine, Config

from p4relay_server.config import Settings


def alembic_config(settings: Settings) -> Config:
    ini = settings.migrations_dir / "alembic.ini"
    if not ini.is_file():
        raise FileNotFoundError(f"migrations not found: {ini} (set migrations_dir)")
    cfg = Config(str(ini))
    cfg.set_main_option("script_location", str(settings.migrations_dir))
    # ConfigParser interpolation: a literal % in a password must be doubled.
    cfg.set_main_option("sqlalchemy.url", settings.database_url.replace("%", "%%"))
    return cfg


def run_alembic(settings: Settings, argv: Sequence[str]) -> None:
    """Any alembic command line, e.g. ["upgrade", "head"] or ["downgrade", "base"]."""
    cli = CommandLine(prog="p4relay-server migrate")
    options = cli.parser.parse_args(list(argv) or ["upgrade", "head"])
    if not hasattr(options, "cmd"):
        cli.parser.error("too few arguments")
    cli.run_cmd(alembic_config(settings), options)
