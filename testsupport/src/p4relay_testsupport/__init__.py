"""What p4relay's test suites share (tests and benches only, never the product).

* `Softswitch` / `softswitch()`: the real software switch binary on loopback
  (or with ports), started, waited for, stopped; `softswitch_binary()` finds it.
* `free_port`, `free_udp_pair`: ports nothing listens on.
* `wait_for` (asyncio) / `wait_until` (blocking): poll a condition until it
  holds or fail with what was awaited; `wait_value` (blocking): the same,
  returning the condition's truthy value.
* `record_pid`: note a child process for the stage cleanup hooks.
* `running_server` / `Server`: the real p4relay server on a database, with
  an ingest and a read token; `server_on_fresh_database`: the same on a
  database of its own, dropped after.
"""

from p4relay_testsupport.net import free_port, free_udp_pair
from p4relay_testsupport.procs import record_pid
from p4relay_testsupport.server import Server, running_server, server_on_fresh_database
from p4relay_testsupport.softswitch import (
    Softswitch,
    SoftswitchNotBuilt,
    dump_softswitch,
    softswitch,
    softswitch_binary,
)
from p4relay_testsupport.wait import wait_for, wait_until, wait_value

__all__ = [
    "Server",
    "Softswitch",
    "SoftswitchNotBuilt",
    "dump_softswitch",
    "free_port",
    "free_udp_pair",
    "record_pid",
    "running_server",
    "server_on_fresh_database",
    "softswitch",
    "softswitch_binary",
    "wait_for",
    "wait_until",
    "wait_value",
]
