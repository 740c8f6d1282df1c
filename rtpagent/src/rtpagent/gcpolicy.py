"""The cyclic garbage collector kept off the command path.

Every command allocates short-lived containers (freed by reference counting:
the command path makes no reference cycles, see upstream._Command), while the
sessions, plans and indexes of the calls up live for minutes. With thousands
of calls up, a collection of the older generations walks all of those and
frees nothing: a 100-470 ms pause of the event loop on a loaded host, landing
on the commands that came meanwhile.

So what survives a collection of the older generations is frozen (moved out
of every later scan, `gc.freeze`): the next ones walk only what was allocated
since. Frozen objects are still freed by reference counting when a call
ends; only garbage cycles among them would stay. Once every `rescan_s` the
frozen objects are given back (`gc.unfreeze`) for one full collection, which
frees such cycles; freezing starts again after it.
"""

from __future__ import annotations

import gc
import time
from typing import Any

# Young collections every 5,000 net allocations keep each well under a
# millisecond. Generation 1 every 10 of them: it walks what survived those
# (the calls set up meanwhile), a few ms; after it all is frozen, so
# generation 2 (every 100 of those) holds little.
THRESHOLDS = (5000, 10, 100)
RESCAN_S = 600.0


class GcPolicy:
    """A `gc.callbacks` entry: freeze the survivors of each collection of
    generation 1 or 2; a full collection of everything every `rescan_s`."""

    def __init__(self, rescan_s: float = RESCAN_S) -> None:
        self.rescan_s = rescan_s
        self.last_rescan = time.monotonic()
        self.rescanning = False
        self.rescans = 0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase != "stop" or info.get("generation", 0) == 0:
            return
        now = time.monotonic()
        if self.rescanning:
            if info["generation"] < 2:
                return  # until the full collection has walked everything
            self.rescanning = False
            self.last_rescan = now
            self.rescans += 1
        elif now - self.last_rescan >= self.rescan_s:
            # The next collection of generation 2 walks everything (a
            # collection cannot be started from within one).
            gc.unfreeze()
            self.rescanning = True
            return
        gc.freeze()


def install(rescan_s: float = RESCAN_S) -> GcPolicy:
    """At start: what start-up built frozen, the thresholds set, the policy
    on every collection."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
    policy = GcPolicy(rescan_s)
    gc.callbacks.append(policy)
    return policy
