"""One writer per switch table: the switch control plane (switch/controlplane)
is the only production code that writes routes, next hops, shaping, congestion
reroute, INT or iRED. Checked by `make lint` (scripts/lint.sh, imports group).

Import-linter sees modules, not calls: a component can write any table through
the plain `SwitchClient` by its name. So this walks the syntax tree of every
production module (the components' sources, the deploy images' scripts, the
bfshell bootstrap) and fails on

- a call of one of the client library's writers of those features
  (`add_routes`, `set_ired`, `set_hop`, `Reroute.watch`'s module, ...);
- a write (`insert`, `modify`, `insert_or_modify`, `delete`, `clear`,
  `set_default`, `write_register`) whose table is one of them, named by a
  string literal, a contract constant (`IPV4_LPM`) or a module-level constant
  holding the name;
- a bfrt_python path (a tuple of strings) into one of those tables;
- a module that writes to a switch at all and names one of those tables
  other than as the table a read reads (it may reach a write through a
  variable).

Out of scope: the client library that defines the writers (switch/client/src),
the tests, the benches, and scenarios/ (test beds and experiments that stand
up their own switches).

    python3 scripts/check_table_owners.py [PATH ...]   # default: the production roots
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OWNER = "switch/controlplane/src/"
PRODUCTION = ("collector/src/", "rtpagent/src/", "server/src/", "deploy/", "switch/bfrt/", OWNER)

OWNED_TABLES = {
    "pipe.Ingress.ipv4_lpm",
    "pipe.Ingress.ipv6_lpm",
    "pipe.Ingress.nexthop",
    "pipe.Ingress.reroute_watch",
    "pipe.Egress.reroute_class",
    "pipe.Ingress.int_watch",
    "pipe.Ingress.int_role",
    "pipe.Egress.int_hop_config",
    "pipe.Egress.int_report",
    "pipe.Egress.ired_port",
    "pipe.Egress.ired_drop_prob",
    "tf1.tm.port.sched_shaping",
    "tf1.tm.port.sched_cfg",
}
# The contract's names for them (p4relay_switch.names).
OWNED_CONSTANTS = {
    "IPV4_LPM",
    "IPV6_LPM",
    "NEXTHOP",
    "REROUTE_WATCH",
    "REROUTE_CLASS",
    "INT_WATCH",
    "INT_ROLE",
    "INT_HOP_CONFIG",
    "INT_REPORT",
    "IRED_PORT",
    "REG_IRED_DROP_PROB",
}
# bfrt_python paths name a table by its last part (bfrt.p4relay.pipe.Ingress.ipv4_lpm).
OWNED_SHORT = {t.rsplit(".", 1)[1] for t in OWNED_TABLES if t.startswith("pipe.")}
# The client library's writers of those features.
WRITERS = {
    "add_routes",
    "delete_routes",
    "add_nexthops",
    "delete_nexthops",
    "set_port_shaping",
    "set_ired",
    "clear_ired",
    "set_hop",
    "set_role",
    "set_report_target",
    "watch_relay_sessions",
    "watch_flows",
    "set_classes",
    "unwatch",
    "move_back",
    "move_to_backup",
}
WRITES = {
    "insert",
    "modify",
    "insert_or_modify",
    "delete",
    "clear",
    "set_default",
    "write_register",
}

READS = {"read", "read_one", "usage", "read_register", "table"}


def _name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _module_strings(tree: ast.Module) -> dict[str, str]:
    """NAME = "..." at module level."""
    out: dict[str, str] = {}
    for st in tree.body:
        if (
            isinstance(st, ast.Assign)
            and isinstance(st.value, ast.Constant)
            and isinstance(st.value.value, str)
        ):
            for t in st.targets:
                if isinstance(t, ast.Name):
                    out[t.id] = st.value.value
    return out


def _table(arg: ast.expr, strings: dict[str, str]) -> str | None:
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value if arg.value in OWNED_TABLES else None
    name = _name(arg)
    if name in OWNED_CONSTANTS:
        return name
    if name is not None and strings.get(name) in OWNED_TABLES:
        return strings[name]
    return None


def check(path: Path, rel: str) -> list[str]:
    try:
        tree = ast.parse(path.read_text(), str(path))
    except SyntaxError as e:
        return [f"{rel}:{e.lineno}: cannot parse: {e.msg}"]
    strings = _module_strings(tree)
    found: list[str] = []
    writes = any(
        isinstance(n, ast.Call) and _name(n.func) in WRITES | {"write", "write_updates"}
        for n in ast.walk(tree)
    )
    # A table named as the first argument of a read is only read.
    read_args = {
        id(n.args[0])
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and _name(n.func) in READS and n.args
    }
    for node in ast.walk(tree):
        if id(node) in read_args:
            continue
        if writes and isinstance(node, (ast.Constant, ast.Name, ast.Attribute)):
            named = (
                _table(node, strings)
                if not isinstance(node, ast.Name) or isinstance(node.ctx, ast.Load)
                else None
            )
            if named is not None:
                found.append(f"{rel}:{node.lineno}: names {named} in a module that writes")
        if isinstance(node, ast.Call):
            fn = _name(node.func)
            if fn in WRITERS:
                found.append(f"{rel}:{node.lineno}: calls {fn}()")
            elif fn in WRITES and node.args:
                table = _table(node.args[0], strings)
                if table is not None:
                    found.append(f"{rel}:{node.lineno}: {fn}() on {table}")
        elif isinstance(node, ast.Tuple):
            parts = [e.value for e in node.elts if isinstance(e, ast.Constant)]
            if any(p in OWNED_SHORT for p in parts if isinstance(p, str)) and any(
                isinstance(p, str) and p.startswith(("add_with_", "mod_with_", "delete", "clear"))
                for p in parts
            ):
                found.append(f"{rel}:{node.lineno}: bfrt_python write into {parts}")
    return found


def main(argv: list[str]) -> int:
    if argv:
        files = [Path(a).resolve() for a in argv]
    else:
        listed = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.py"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        files = [ROOT / f for f in listed if f.startswith(PRODUCTION) and not f.startswith(OWNER)]
    bad: list[str] = []
    for f in files:
        if f.is_file():
            bad += check(f, str(f.relative_to(ROOT)) if f.is_relative_to(ROOT) else str(f))
    for line in bad:
        print(f"{line}: only the switch control plane ({OWNER}) writes this", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
