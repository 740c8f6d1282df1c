"""Children a test starts, noted for the stage cleanup hooks."""

from __future__ import annotations

import os

PID_FILE_VARS = ("P4RELAY_TEST_PIDS", "P4RELAY_RTPAGENT_PIDS")


def record_pid(pid: int) -> None:
    """Append "<child pid> <test process pid>" to the file the stage names
    ($P4RELAY_TEST_PIDS or $P4RELAY_RTPAGENT_PIDS), should a test die mid-way:
    the cleanup hook stops only children of test runs that are gone."""
    for var in PID_FILE_VARS:
        path = os.environ.get(var)
        if path:
            with open(path, "a") as f:
                f.write(f"{pid} {os.getpid()}\n")
            return
