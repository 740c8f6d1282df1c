"""structlog setup shared by the daemons: JSON lines on stderr, or console text."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable

import structlog

LEVELS = ("debug", "info", "warning", "error")


def configure_logging(
    level: str = "info", json: bool = True, *, quiet: Iterable[str] = (), cache: bool = True
) -> None:
    """Every record (structlog's and the standard library's) to stderr at `level`;
    the `quiet` standard loggers (a library's chatter) at warning at least. `cache`:
    loggers keep the configuration they were first used with (faster on hot paths;
    off where a process reconfigures, e.g. an app factory called per test)."""
    lvl = logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
    logging.basicConfig(format="%(message)s", stream=sys.stderr, level=lvl, force=True)
    for name in quiet:
        logging.getLogger(name).setLevel(max(lvl, logging.WARNING))
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=cache,
    )
