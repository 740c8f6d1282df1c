"""The real software switch binary for tests: loopback gRPC, optional ports.

The launcher is the product's (`p4relay_runtime.procs`); a test's switch is also
noted for the stage cleanup hooks, should the test die mid-way.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

from p4relay_runtime import procs
from p4relay_runtime.procs import SoftswitchNotBuilt, softswitch_binary

from p4relay_testsupport.procs import record_pid


def dump_softswitch(flag: str) -> str:
    """The output of a one-shot flag (`--dump-bfrt-json`, ...)."""
    return subprocess.run(
        [str(softswitch_binary()), flag], check=True, capture_output=True, text=True, timeout=30
    ).stdout


class Softswitch(procs.Softswitch):
    """`p4relay_runtime.procs.Softswitch`, its pid recorded for the cleanup hooks."""

    def start(self) -> None:
        super().start()
        assert self.proc is not None
        record_pid(self.proc.pid)


@contextlib.contextmanager
def softswitch(
    args: Sequence[str] = (), *, log_path: Path | None = None, workers: int = 1
) -> Iterator[Softswitch]:
    """A started softswitch, stopped on exit."""
    sw = Softswitch(args, log_path=log_path, workers=workers)
    sw.start()
    try:
        yield sw
    finally:
        sw.stop()


__all__ = ["Softswitch", "SoftswitchNotBuilt", "dump_softswitch", "softswitch", "softswitch_binary"]
