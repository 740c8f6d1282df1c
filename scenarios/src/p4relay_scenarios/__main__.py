"""`python -m p4relay_scenarios COMMAND`: the scenarios' command line.

testbed up|down|ports|rate ...   the namespace testbed (p4relay_scenarios.topology)
demo                             the whole system with live calls (make demo)
experiment ...                   server- vs switch-based relay (make bench STAGE=relay)
reroute-experiment ...           loss and MOS without / with congestion reroute (three switches)
reroute-detection ...            reaction time: data-plane detection vs a polling controller
reroute-int ...                  INT-driven reroute, congestion two hops down: local vs INT loops
ired-experiment ...              tail drop vs iRED on a port shared by TCP, ping and calls
int-live ...                     INT on three switches, a traced call, the collector feeding a server
run PROFILE                      the stack plus one SIPp load profile, with a summary
cleanup                          stop recorded processes, remove the testbed
"""

from __future__ import annotations

import sys


def cleanup() -> int:
    from p4relay_scenarios import topology
    from p4relay_scenarios.procs import kill_recorded
    from p4relay_scenarios.stack import ROOT, testbed_in_use

    if testbed_in_use():
        print("cleanup: a live run holds the testbed; left alone")
        return 0
    build = ROOT / "build"
    n = 0
    if build.exists():
        for pids in build.glob("**/pids"):
            n += kill_recorded(pids.parent)
    topology.down()
    print(f"cleanup: stopped {n} process groups, testbed removed")
    return 0


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    cmd, rest = argv[0], argv[1:]
    if cmd == "testbed":
        from p4relay_scenarios.topology import main as testbed_main

        return testbed_main(rest)
    if cmd == "experiment":
        from p4relay_scenarios.experiment import main as exp_main

        return exp_main(rest)
    if cmd == "reroute-experiment":
        from p4relay_scenarios.reroute_experiment import main as rr_main

        return rr_main(rest)
    if cmd == "reroute-detection":
        from p4relay_scenarios.reroute_detection import main as rd_main

        return rd_main(rest)
    if cmd == "reroute-int":
        from p4relay_scenarios.reroute_int import main as ri_main

        return ri_main(rest)
    if cmd == "ired-experiment":
        from p4relay_scenarios.ired_experiment import main as ired_main

        return ired_main(rest)
    if cmd == "int-live":
        from p4relay_scenarios.int_bed import main as int_main

        return int_main(rest)
    if cmd in ("demo", "run"):
        from p4relay_scenarios.demo import main as demo_main

        return demo_main(argv)
    if cmd == "cleanup":
        return cleanup()
    print(f"unknown command {cmd!r}\n{__doc__}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
