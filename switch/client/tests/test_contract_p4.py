"""The Tofino program (switch/p4) declares exactly the contract's names.

No P4 compiler runs here, so this test models what bf-p4c does with the
source: a small C preprocessor (#include/#define/#if/#error), a parser for the
P4_16 subset the program uses, and bf-p4c's naming for bfrt.json:

  tables     pipe.<Control>.<table>     (nested control instances add
  registers  pipe.<Control>.<register>   ".<instance>" to the path; an
  actions    <Control>.<action>          @name(".abs") replaces the whole path)
  digests    pipe.<Deparser>.<digest>, fields by struct member name
  keys       by P4 expression; range/ternary tables add $MATCH_PRIORITY
  data       direct counter -> $COUNTER_SPEC_*, idle_timeout -> $ENTRY_TTL

The synthesized bfrt.json goes through the same checker as the software
switch's (contract_check.check_program); sizes, default actions and the
[config] values are checked on top. Mutated sources must fail.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from contract_check import check_program, load_contract

P4_ROOT = Path(__file__).resolve().parents[2] / "p4"
MAIN = "p4relay.p4"

# Types that come from tna.p4 / core.p4 (system includes are not read).
BUILTIN_WIDTHS = {
    "PortId_t": 9,
    "MulticastGroupId_t": 16,
    "QueueId_t": 5,
    "MirrorId_t": 10,
    "ReplicationId_t": 16,
    "bool": 1,
}
BUILTIN_ACTIONS = {"NoAction"}
MATCH_KINDS = {"exact": "Exact", "lpm": "LPM", "range": "Range", "ternary": "Ternary"}


class P4ModelError(Exception):
    """The source is outside what this model (and, presumably, bf-p4c) accepts."""


# ---------------------------------------------------------------- preprocessor

_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)


def _strip_comments(text: str) -> str:
    # keep line structure so directives stay on their own lines
    return _COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), text)


class Preprocessor:
    """Object-like macros, #include "..." (system includes skipped), #if with
    defined()/!/&&/||/comparisons, #ifdef/#ifndef/#else/#endif, #error."""

    def __init__(self, root: Path, defines: dict[str, str], overrides: dict[str, str]) -> None:
        self.root = root
        self.macros = dict(defines)
        self.overrides = overrides

    def _read(self, rel: str) -> str:
        if rel in self.overrides:
            return self.overrides[rel]
        return (self.root / rel).read_text()

    def run(self, rel: str) -> str:
        out: list[str] = []
        self._file(rel, out)
        return "\n".join(out)

    def _file(self, rel: str, out: list[str]) -> None:
        text = _strip_comments(self._read(rel))
        base = str(Path(rel).parent)
        stack: list[tuple[bool, bool]] = []  # (this branch active, any branch taken)

        def active() -> bool:
            return all(a for a, _ in stack)

        for line in text.split("\n"):
            s = line.strip()
            if not s.startswith("#"):
                if active():
                    out.append(self.expand(line))
                continue
            d = s[1:].strip()
            word, _, rest = d.partition(" ")
            rest = rest.strip()
            if word == "ifdef":
                c = rest in self.macros
                stack.append((c, c))
            elif word == "ifndef":
                c = rest not in self.macros
                stack.append((c, c))
            elif word == "if":
                c = self.eval_condition(rest)
                stack.append((c, c))
            elif word == "elif":
                _, taken = stack.pop()
                c = not taken and self.eval_condition(rest)
                stack.append((c, taken or c))
            elif word == "else":
                _, taken = stack.pop()
                stack.append((not taken, True))
            elif word == "endif":
                stack.pop()
            elif not active():
                continue
            elif word == "define":
                name, _, value = rest.partition(" ")
                self.macros[name] = value.strip()
            elif word == "undef":
                self.macros.pop(rest, None)
            elif word == "include":
                if rest.startswith("<"):
                    continue  # core.p4 / tna.p4: modelled by BUILTIN_*
                inc = rest.strip('"')
                self._file(str(Path(base) / inc) if base != "." else inc, out)
            elif word == "error":
                raise P4ModelError(f"#error in {rel}: {rest}")
            else:
                raise P4ModelError(f"unsupported directive #{word} in {rel}")
        if stack:
            raise P4ModelError(f"unterminated #if in {rel}")

    def expand(self, line: str, depth: int = 0) -> str:
        if depth > 20:
            raise P4ModelError(f"macro recursion in {line!r}")

        def sub(m: re.Match[str]) -> str:
            name = m.group(0)
            return self.expand(self.macros[name], depth + 1) if name in self.macros else name

        return re.sub(r"\b[A-Za-z_][A-Za-z0-9_]*\b", sub, line)

    def eval_condition(self, expr: str) -> bool:
        expr = re.sub(
            r"defined\s*\(\s*(\w+)\s*\)|defined\s+(\w+)",
            lambda m: "1" if (m.group(1) or m.group(2)) in self.macros else "0",
            expr,
        )
        expr = self.expand(expr)
        expr = re.sub(r"\b[A-Za-z_]\w*\b", "0", expr)  # undefined identifiers are 0
        py = expr.replace("&&", " and ").replace("||", " or ")
        py = re.sub(r"!(?!=)", " not ", py)
        if not re.fullmatch(r"[\d\s()<>=!+\-*/%&|^~andortx]*", py):
            raise P4ModelError(f"cannot evaluate #if {expr!r}")
        return bool(eval(py, {"__builtins__": {}}, {}))  # digits and operators only


# ---------------------------------------------------------------- lexer

_TOKEN = re.compile(
    r"""(?P<ws>\s+)
    |(?P<str>"(?:[^"\\]|\\.)*")
    |(?P<num>\d+[ws](?:0[xX][0-9a-fA-F_]+|0[bB][01_]+|\d+)|0[xX][0-9a-fA-F_]+|0[bB][01_]+|\d+)
    |(?P<id>[A-Za-z_][A-Za-z0-9_]*)
    |(?P<op>&&&|<<|>>|==|!=|<=|>=|&&|\|\||\+\+|[{}()\[\]<>;:,.=@!~+\-*/%&|^?])""",
    re.X,
)


def tokenize(text: str) -> list[str]:
    toks: list[str] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise P4ModelError(f"cannot tokenize near {text[pos : pos + 40]!r}")
        if m.lastgroup != "ws":
            toks.append(m.group(0))
        pos = m.end()
    return toks


def int_value(tok: str) -> int:
    m = re.fullmatch(r"\d+[ws](.+)", tok)
    if m:
        tok = m.group(1)
    return int(tok.replace("_", ""), 0)


def eval_int(tokens: list[str]) -> int:
    parts = []
    for t in tokens:
        if re.fullmatch(r"\d.*", t):
            parts.append(str(int_value(t)))
        elif t in {"(", ")", "+", "-", "*", "/", "<<", ">>", "%"}:
            parts.append("//" if t == "/" else t)
        else:
            raise P4ModelError(f"not a constant expression: {' '.join(tokens)}")
    return int(eval(" ".join(parts), {"__builtins__": {}}, {}))  # digits and operators only


# ---------------------------------------------------------------- model


@dataclass
class TypeRef:
    name: str  # "bit", "int", a typedef/struct/header/extern name
    args: list[list[str]] = field(default_factory=list)


@dataclass
class Param:
    direction: str
    type: TypeRef
    name: str


@dataclass
class Action:
    name: str
    annotations: dict[str, str | None]
    params: list[Param]


@dataclass
class Table:
    name: str
    annotations: dict[str, str | None]
    keys: list[tuple[str, str]]  # (P4 expression, match kind)
    actions: list[tuple[str, dict[str, str | None]]]
    default_action: str | None
    size: int | None
    counters: str | None
    idle_timeout: bool


@dataclass
class Instance:
    type: TypeRef
    args: list[str]
    name: str
    annotations: dict[str, str | None]


@dataclass
class Control:
    name: str
    params: list[Param]
    actions: dict[str, Action] = field(default_factory=dict)
    tables: dict[str, Table] = field(default_factory=dict)
    instances: dict[str, Instance] = field(default_factory=dict)
    locals: set[str] = field(default_factory=set)
    bodies: list[list[str]] = field(default_factory=list)  # action and apply bodies


@dataclass
class ParserBlock:
    name: str
    params: list[Param]
    instances: set[str]
    states: dict[str, list[str]]  # state -> its body tokens


@dataclass
class Program:
    typedefs: dict[str, TypeRef] = field(default_factory=dict)
    structs: dict[str, list[tuple[str, TypeRef]]] = field(default_factory=dict)
    controls: dict[str, Control] = field(default_factory=dict)
    parsers: dict[str, ParserBlock] = field(default_factory=dict)
    pipelines: dict[str, list[str]] = field(default_factory=dict)
    macros: dict[str, str] = field(default_factory=dict)

    def width(self, t: TypeRef) -> int:
        if t.name in ("bit", "int"):
            return eval_int(t.args[0])
        if t.name in BUILTIN_WIDTHS:
            return BUILTIN_WIDTHS[t.name]
        if t.name in self.typedefs:
            return self.width(self.typedefs[t.name])
        raise P4ModelError(f"no width for type {t.name}")

    def resolve(self, t: TypeRef) -> TypeRef:
        while t.name in self.typedefs:
            t = self.typedefs[t.name]
        return t

    def member_width(self, ctl: Control, expr: str) -> int:
        root, *path = expr.split(".")
        param = next((p for p in ctl.params if p.name == root), None)
        if param is None:
            raise P4ModelError(f"{ctl.name}: key {expr}: {root} is not a parameter")
        t = param.type
        for member in path:
            fields = self.structs.get(self.resolve(t).name)
            if fields is None:
                raise P4ModelError(f"{ctl.name}: key {expr}: {t.name} has no members")
            found = next((ft for fn, ft in fields if fn == member), None)
            if found is None:
                raise P4ModelError(f"{ctl.name}: key {expr}: no member {member}")
            t = found
        return self.width(t)


class Parser:
    def __init__(self, tokens: list[str]) -> None:
        self.t = tokens
        self.i = 0
        self.prog = Program()

    # -- token helpers
    def peek(self, k: int = 0) -> str:
        return self.t[self.i + k] if self.i + k < len(self.t) else ""

    def next(self) -> str:
        tok = self.peek()
        if not tok:
            raise P4ModelError("unexpected end of source")
        self.i += 1
        return tok

    def expect(self, tok: str) -> None:
        got = self.next()
        if got != tok:
            ctx = " ".join(self.t[max(0, self.i - 8) : self.i + 4])
            raise P4ModelError(f"expected {tok!r}, got {got!r} near: {ctx}")

    def close_angle(self) -> None:
        if self.peek() == ">>":
            self.t[self.i] = ">"  # '>>' closing two type argument lists
        else:
            self.expect(">")

    def skip_balanced(self, open_: str, close: str) -> list[str]:
        self.expect(open_)
        depth, start = 1, self.i
        while depth:
            tok = self.next()
            depth += tok == open_
            depth -= tok == close
        return self.t[start : self.i - 1]

    def until(self, *stops: str) -> list[str]:
        out: list[str] = []
        depth = 0
        while depth or self.peek() not in stops:
            tok = self.next()
            depth += tok in "([{"
            depth -= tok in ")]}"
            out.append(tok)
        return out

    # -- grammar pieces
    def annotations(self) -> dict[str, str | None]:
        ann: dict[str, str | None] = {}
        while self.peek() == "@":
            self.next()
            name = self.next()
            value: str | None = None
            if self.peek() == "(":
                body = self.skip_balanced("(", ")")
                value = body[0][1:-1] if body and body[0].startswith('"') else " ".join(body)
            ann[name] = value
        return ann

    def type_ref(self) -> TypeRef:
        name = self.next()
        args: list[list[str]] = []
        if self.peek() == "<":
            self.next()
            while True:
                if name in ("bit", "int", "varbit"):
                    args.append(self.until(">", ">>"))
                else:
                    inner = self.type_ref()
                    args.append([inner.name, *(a for arg in inner.args for a in arg)])
                    if inner.name in ("bit", "int"):
                        args[-1] = ["bit", *inner.args[0]]
                if self.peek() == ",":
                    self.next()
                    continue
                break
            self.close_angle()
        return TypeRef(name, args)

    def params(self) -> list[Param]:
        self.expect("(")
        out: list[Param] = []
        while self.peek() != ")":
            self.annotations()
            direction = self.next() if self.peek() in ("in", "out", "inout") else ""
            t = self.type_ref()
            out.append(Param(direction, t, self.next()))
            if self.peek() == ",":
                self.next()
        self.expect(")")
        return out

    def program(self) -> Program:
        while self.peek():
            ann = self.annotations()
            tok = self.peek()
            if tok == "typedef":
                self.next()
                t = self.type_ref()
                self.prog.typedefs[self.next()] = t
                self.expect(";")
            elif tok == "const":
                self.until(";")
                self.expect(";")
            elif tok in ("header", "struct"):
                self.next()
                name = self.next()
                self.expect("{")
                fields: list[tuple[str, TypeRef]] = []
                while self.peek() != "}":
                    self.annotations()
                    ft = self.type_ref()
                    fields.append((self.next(), ft))
                    self.expect(";")
                self.expect("}")
                self.prog.structs[name] = fields
            elif tok == "parser":
                self.parser_block()
            elif tok == "control":
                self.control()
            else:
                t = self.type_ref()
                if t.name not in ("Pipeline", "Switch"):
                    raise P4ModelError(f"unexpected top-level {t.name} ({ann})")
                body = self.skip_balanced("(", ")")
                name = self.next()
                self.expect(";")
                if t.name == "Pipeline":
                    self.prog.pipelines[name] = [
                        body[k]
                        for k in range(len(body))
                        if k + 1 < len(body) and body[k + 1] == "("
                    ]
        return self.prog

    def parser_block(self) -> None:
        self.expect("parser")
        blk = ParserBlock(self.next(), [], set(), {})
        blk.params = self.params()
        self.expect("{")
        while self.peek() != "}":
            self.annotations()
            if self.peek() == "state":
                self.next()
                name = self.next()
                if name in blk.states:
                    raise P4ModelError(f"{blk.name}: state {name} declared twice")
                blk.states[name] = self.skip_balanced("{", "}")
            else:
                self.type_ref()
                if self.peek() == "(":
                    self.skip_balanced("(", ")")
                blk.instances.add(self.next())
                self.expect(";")
        self.expect("}")
        self.prog.parsers[blk.name] = blk

    def control(self) -> None:
        self.expect("control")
        ctl = Control(self.next(), [])
        ctl.params = self.params()
        if self.peek() == "(":
            self.params()  # constructor parameters
        self.expect("{")
        while self.peek() != "apply":
            ann = self.annotations()
            if self.peek() == "action":
                self.next()
                name = self.next()
                ctl.actions[name] = Action(name, ann, self.params())
                ctl.bodies.append(self.skip_balanced("{", "}"))
            elif self.peek() == "table":
                self.next()
                tbl = self.table(self.next(), ann)
                ctl.tables[tbl.name] = tbl
            elif self.peek() == "const":
                self.until(";")
                self.expect(";")
            else:
                t = self.type_ref()
                if self.peek() == "(":
                    args = self.skip_balanced("(", ")")
                    name = self.next()
                    ctl.instances[name] = Instance(t, args, name, ann)
                    if self.peek() == "=":
                        self.next()
                        ctl.bodies.append(self.skip_balanced("{", "}"))
                else:
                    ctl.locals.add(self.next())
                    if self.peek() == "=":
                        self.until(";")
                self.expect(";")
        self.expect("apply")
        ctl.bodies.append(self.skip_balanced("{", "}"))
        self.expect("}")
        self.prog.controls[ctl.name] = ctl

    def table(self, name: str, ann: dict[str, str | None]) -> Table:
        tbl = Table(name, ann, [], [], None, None, None, False)
        self.expect("{")
        while self.peek() != "}":
            if self.peek() == "const":
                self.next()
            prop = self.next()
            self.expect("=")
            if prop == "key":
                self.expect("{")
                while self.peek() != "}":
                    expr = "".join(self.until(":"))
                    self.expect(":")
                    kind = self.next()
                    key_ann = self.annotations()
                    self.expect(";")
                    tbl.keys.append((key_ann.get("name") or expr, kind))
                self.expect("}")
                continue
            elif prop == "actions":
                self.expect("{")
                while self.peek() != "}":
                    a_ann = self.annotations()
                    aname = self.next()
                    if self.peek() == "(":
                        self.skip_balanced("(", ")")
                    self.expect(";")
                    tbl.actions.append((aname, a_ann))
                self.expect("}")
                continue
            elif prop == "entries":
                self.skip_balanced("{", "}")
                continue
            else:
                value = self.until(";")
                if prop == "default_action":
                    tbl.default_action = value[0]
                elif prop == "size":
                    tbl.size = eval_int(value)
                elif prop == "counters":
                    tbl.counters = value[0]
                elif prop == "idle_timeout":
                    tbl.idle_timeout = value == ["true"]
            self.expect(";")
        self.expect("}")
        return tbl


HEADER_METHODS = {"isValid", "setValid", "setInvalid"}
CALLS = {"apply", "execute", "get", "count", "pack", "emit", "hit"}


def _member_paths(tokens: list[str]) -> list[list[str]]:
    """Dotted paths (a.b.c) in a token stream, without method-call tails."""
    paths: list[list[str]] = []
    i = 0
    while i < len(tokens):
        if re.fullmatch(r"[A-Za-z_]\w*", tokens[i]) and (i == 0 or tokens[i - 1] != "."):
            path = [tokens[i]]
            while (
                i + 2 < len(tokens) and tokens[i + 1] == "." and re.fullmatch(r"\w+", tokens[i + 2])
            ):
                path.append(tokens[i + 2])
                i += 2
            if len(path) > 1:
                paths.append(path)
        i += 1
    return paths


def check_references(prog: Program) -> list[str]:
    """Member accesses on parameters resolve to declared fields; method calls
    go to declared tables/externs; parser transitions go to declared states."""
    errs: list[str] = []

    def resolve(where: str, params: list[Param], path: list[str]) -> None:
        param = next((p for p in params if p.name == path[0]), None)
        if param is None:
            return  # a local, an extern instance, an enum: checked elsewhere
        t = param.type
        for member in path[1:]:
            fields = prog.structs.get(prog.resolve(t).name)
            if fields is None:
                return  # an intrinsic (tna.p4) type or a scalar: not modelled
            found = next((ft for fn, ft in fields if fn == member), None)
            if found is None:
                if member in HEADER_METHODS:
                    return
                errs.append(f"{where}: {'.'.join(path)}: {prog.resolve(t).name} has no {member}")
                return
            t = found

    for ctl in prog.controls.values():
        known = set(ctl.tables) | set(ctl.instances) | set(ctl.actions) | ctl.locals
        for body in ctl.bodies:
            for path in _member_paths(body):
                resolve(ctl.name, ctl.params, path)
                declared = path[0] in known or path[0] in {p.name for p in ctl.params}
                if not declared and path[-1] in CALLS:
                    errs.append(f"{ctl.name}: {'.'.join(path)} refers to nothing declared")
    for blk in prog.parsers.values():
        if "start" not in blk.states:
            errs.append(f"parser {blk.name}: no start state")
        reached = {"start"}
        todo = ["start"]
        while todo:
            body = blk.states.get(todo.pop(), [])
            for path in _member_paths(body):
                resolve(f"parser {blk.name}", blk.params, path)
            targets = [body[i + 1] for i, t in enumerate(body) if t == "transition"]
            targets += [body[i + 1] for i, t in enumerate(body) if t == ":" and i + 1 < len(body)]
            for target in targets:
                if not re.fullmatch(r"[A-Za-z_]\w*", target) or target in ("accept", "reject"):
                    continue
                if target in blk.states:
                    if target not in reached:
                        reached.add(target)
                        todo.append(target)
                elif target != "select":
                    errs.append(f"parser {blk.name}: transition to undeclared state {target}")
        for unreached in sorted(set(blk.states) - reached):
            errs.append(f"parser {blk.name}: state {unreached} is unreachable")
    return errs


def load_program(
    defines: dict[str, str] | None = None, overrides: dict[str, str] | None = None
) -> Program:
    pp = Preprocessor(P4_ROOT, defines or {}, overrides or {})
    text = pp.run(MAIN)
    prog = Parser(tokenize(text)).program()
    prog.macros = pp.macros
    return prog


# ---------------------------------------------------------------- bf-p4c naming


def control_plane_name(prefix: str, local: str, ann: dict[str, str | None]) -> str:
    name = ann.get("name")
    if name is None:
        return f"{prefix}.{local}"
    return name[1:] if name.startswith(".") else f"{prefix}.{name}"


@dataclass
class Scope:
    path: str  # e.g. "Ingress" or "Ingress.relay_sessions"
    control: Control


def scopes(prog: Program) -> list[Scope]:
    """Every control instance reachable from the Pipeline, with its path."""
    if list(prog.pipelines) != ["pipe"]:
        raise P4ModelError(f"expected one Pipeline named pipe, got {list(prog.pipelines)}")
    out: list[Scope] = []

    def walk(path: str, ctl: Control) -> None:
        out.append(Scope(path, ctl))
        for inst in ctl.instances.values():
            sub = prog.controls.get(inst.type.name)
            if sub is not None:
                walk(control_plane_name(path, inst.name, inst.annotations), sub)

    for block in prog.pipelines["pipe"]:
        if block in prog.controls:
            walk(block, prog.controls[block])
        elif block not in prog.parsers:
            raise P4ModelError(f"Pipeline block {block} is not declared")
    return out


def _bytes(width: int) -> dict[str, Any]:
    return {"type": "bytes", "width": width}


def synthesize_bfrt(prog: Program) -> dict[str, Any]:
    """The parts of bf-p4c's bfrt.json that contract_check reads."""
    tables: list[dict[str, Any]] = []
    learn_filters: list[dict[str, Any]] = []
    for sc in scopes(prog):
        ctl = sc.control
        for tbl in ctl.tables.values():
            keys = [
                {
                    "name": expr,
                    "match_type": MATCH_KINDS[kind],
                    "type": _bytes(prog.member_width(ctl, expr)),
                }
                for expr, kind in tbl.keys
            ]
            if any(kind in ("range", "ternary") for _, kind in tbl.keys):
                keys.append(
                    {"name": "$MATCH_PRIORITY", "match_type": "Exact", "type": {"type": "uint32"}}
                )
            specs: list[dict[str, Any]] = []
            for aname, _ in tbl.actions:
                if aname in BUILTIN_ACTIONS:
                    specs.append({"name": aname, "data": []})
                    continue
                act = ctl.actions.get(aname)
                if act is None:
                    raise P4ModelError(f"{sc.path}.{tbl.name}: action {aname} not declared")
                specs.append(
                    {
                        "name": control_plane_name(sc.path, act.name, act.annotations),
                        "data": [
                            {"name": p.name, "type": _bytes(prog.width(p.type))} for p in act.params
                        ],
                    }
                )
            data: list[dict[str, Any]] = []
            if tbl.counters is not None:
                inst = ctl.instances.get(tbl.counters)
                if inst is None or inst.type.name != "DirectCounter":
                    raise P4ModelError(f"{tbl.name}: counters = {tbl.counters} is no DirectCounter")
                kind = inst.args[-1]
                if kind in ("PACKETS_AND_BYTES", "BYTES"):
                    data.append({"singleton": {"name": "$COUNTER_SPEC_BYTES"}})
                if kind in ("PACKETS_AND_BYTES", "PACKETS"):
                    data.append({"singleton": {"name": "$COUNTER_SPEC_PKTS"}})
            attributes = ["EntryScope"]
            if tbl.idle_timeout:
                # bf-p4c (BfRtSchemaGenerator::addMatchTables) publishes both
                data.append({"singleton": {"name": "$ENTRY_HIT_STATE", "read_only": True}})
                data.append({"singleton": {"name": "$ENTRY_TTL"}})
                attributes.append("IdleTimeout")
            default = tbl.default_action
            if default is not None and default in ctl.actions:
                act = ctl.actions[default]
                default = control_plane_name(sc.path, act.name, act.annotations)
            tables.append(
                {
                    "name": "pipe." + control_plane_name(sc.path, tbl.name, tbl.annotations),
                    "table_type": "MatchAction_Direct",
                    "size": tbl.size,
                    "key": keys,
                    "action_specs": specs,
                    "data": data,
                    "attributes": attributes,
                    "default_action": default,
                }
            )
        for inst in ctl.instances.values():
            cp = control_plane_name(sc.path, inst.name, inst.annotations)
            if inst.type.name == "Register":
                value_t = TypeRef(inst.type.args[0][0], [inst.type.args[0][1:]])
                tables.append(
                    {
                        "name": "pipe." + cp,
                        "table_type": "Register",
                        "size": eval_int(
                            inst.args[: inst.args.index(",")] if "," in inst.args else inst.args
                        ),
                        "key": [{"name": "$REGISTER_INDEX", "match_type": "Exact"}],
                        "data": [
                            {"singleton": {"name": cp + ".f1", "type": _bytes(prog.width(value_t))}}
                        ],
                    }
                )
            elif inst.type.name == "Hash":
                # every Hash extern gets a dynamic-hashing configure table
                tables.append(
                    {"name": f"pipe.{cp}.$CONFIGURE", "table_type": "DynHashConfigure", "key": []}
                )
            elif inst.type.name == "Digest":
                struct = prog.structs[inst.type.args[0][0]]
                learn_filters.append(
                    {
                        "name": "pipe." + cp,
                        "fields": [{"name": n, "type": _bytes(prog.width(t))} for n, t in struct],
                    }
                )
    names = [t["name"] for t in tables] + [d["name"] for d in learn_filters]
    dups = sorted({n for n in names if names.count(n) > 1})
    if dups:
        raise P4ModelError(f"control-plane names declared twice: {dups}")
    return {"tables": tables, "learn_filters": learn_filters}


def strip_target_generated(bfrt: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """bfrt.json without what bf-p4c adds on its own and the control plane
    does not use: dynamic-hash configure tables and $ENTRY_HIT_STATE (poll
    mode). Returns the view and what was removed, so the test pins that list."""
    removed: list[str] = []
    tables = []
    for t in bfrt["tables"]:
        if t.get("table_type") == "DynHashConfigure":
            removed.append(t["name"])
            continue
        data = []
        for d in t.get("data", []):
            if d.get("singleton", {}).get("name") == "$ENTRY_HIT_STATE":
                removed.append(f"{t['name']}: $ENTRY_HIT_STATE")
            else:
                data.append(d)
        tables.append({**t, "data": data})
    return {**bfrt, "tables": tables}, removed


def check_p4_extras(contract: dict[str, Any], prog: Program, bfrt: dict[str, Any]) -> list[str]:
    """What a bfrt.json comparison does not see: build-time sizes, defaults, config."""
    errs: list[str] = []
    tables = {t["name"]: t for t in bfrt["tables"]}
    for ct in contract.get("table", []) + contract.get("register", []):
        t = tables.get(ct["name"])
        if t is None:
            continue
        if t["size"] != ct.get("size_p4"):
            errs.append(f"{ct['name']}: size {t['size']} != contract size_p4 {ct.get('size_p4')}")
        if "default_action" in ct and t.get("default_action") != ct["default_action"]:
            errs.append(
                f"{ct['name']}: default action {t.get('default_action')} != contract {ct['default_action']}"
            )
    cfg = contract.get("config", {})
    m = prog.macros

    def macro(name: str) -> int | None:
        return eval_int(tokenize(m[name])) if name in m else None

    expect = {
        "relay_entries_p4": macro("RELAY_TABLE_SIZE"),
        "legs_p4": macro("LEG_TABLE_SIZE"),
        "learn_filter_size": macro("LEARN_FILTER_SIZE"),
        "learn_filter_age_ms": macro("LEARN_FILTER_AGE_MS"),
        "jitter_shift": macro("JITTER_SHIFT"),
        "rtp_clock_hz": macro("RTP_CLOCK_HZ"),
    }
    for key, got in expect.items():
        if got != cfg.get(key):
            errs.append(f"config {key}: P4 has {got}, contract {cfg.get(key)}")
    bits = macro("LEARN_FILTER_INDEX_BITS")
    if bits is None or 1 << bits != macro("LEARN_FILTER_SIZE"):
        errs.append(f"LEARN_FILTER_INDEX_BITS {bits} does not index LEARN_FILTER_SIZE exactly")
    return errs


# ---------------------------------------------------------------- contract semantics
#
# What the names cannot show: where relay_guard applies and what a hit does,
# and that the quality registers run in Egress on what Ingress bridged.


def _conditions(tokens: list[str], idx: int) -> list[str]:
    """The if-conditions enclosing tokens[idx], outermost first; an else branch
    reads ``!(cond)``. Conditions are joined without spaces."""
    stack: list[str] = []
    pending: str | None = None
    last_closed = ""
    i = 0
    while i < idx:
        tok = tokens[i]
        if tok == "if" and tokens[i + 1] == "(":
            depth, j = 0, i + 1
            while True:
                depth += tokens[j] == "("
                depth -= tokens[j] == ")"
                if depth == 0:
                    break
                j += 1
            cond = "".join(tokens[i + 2 : j])
            pending = f"{pending}&&({cond})" if pending else cond
            i = j + 1
            continue
        if tok == "else":
            pending = f"!({last_closed})"
        elif tok == "{":
            stack.append(pending or "")
            pending = None
        elif tok == "}":
            last_closed = stack.pop()
        elif tok == ";":
            pending = None
        i += 1
    return [c for c in stack if c]


def _calls(tokens: list[str], target: str, method: str) -> list[int]:
    """Indexes of ``target.method(`` in tokens (target may be dotted)."""
    parts = target.split(".")
    want = [p for part in parts for p in (part, ".")] + [method, "("]
    return [i for i in range(len(tokens)) if tokens[i : i + len(want)] == want]


def _body(prog: Program, control: str) -> list[str]:
    ctl = prog.controls.get(control)
    if ctl is None:
        raise P4ModelError(f"control {control} not declared")
    return ctl.bodies[-1]


def _owner(prog: Program, cp_name: str) -> tuple[Control, str]:
    """The control declaring the table/instance published as cp_name, and its local name."""
    for sc in scopes(prog):
        for tbl in sc.control.tables.values():
            if control_plane_name(sc.path, tbl.name, tbl.annotations) == cp_name:
                return sc.control, tbl.name
    raise P4ModelError(f"nothing is published as {cp_name}")


def check_guard(prog: Program) -> list[str]:
    errs: list[str] = []
    ctl, local = _owner(prog, "Ingress.relay_guard")
    applies = _calls(ctl.bodies[-1], local, "apply")
    if not applies:
        errs.append("relay_guard is never applied")
    for i in applies:
        conds = "&&".join(_conditions(ctl.bodies[-1], i))
        if "relay_dst" not in conds or "!ig_md.relay_hit" not in conds:
            errs.append(
                f"relay_guard applied under {conds!r}, not only on relay_addr hit + relay miss"
            )
    ingress = _body(prog, "Ingress")
    for i in _calls(ingress, "learning", "apply"):
        if any("guard_drop" in c for c in _conditions(ingress, i)):
            errs.append("the learn digest is not raised for guarded (dropped) packets")
    for i in _calls(ingress, "forwarding", "apply"):
        if "!(ig_md.guard_drop)" not in _conditions(ingress, i):
            errs.append("a guard hit is still forwarded (forwarding not in the else of guard_drop)")
    drops = [
        i
        for i in range(len(ingress) - 4)
        if ingress[i : i + 5] == ["ig_dprsr_md", ".", "drop_ctl", "=", "1"]
        and _conditions(ingress, i)[-1:] == ["ig_md.guard_drop"]
    ]
    if not drops:
        errs.append("a guard hit does not set drop_ctl")
    return errs


def _header_fields(prog: Program, struct: str, member: str) -> list[tuple[str, TypeRef]]:
    t = next((ft for fn, ft in prog.structs[struct] if fn == member), None)
    if t is None:
        raise P4ModelError(f"{struct} has no {member}")
    return prog.structs[prog.resolve(t).name]


def check_bridging(prog: Program) -> list[str]:
    errs: list[str] = []
    ig_members = [n for n, _ in prog.structs["ingress_headers_t"]]
    if ig_members[:1] != ["bridged"]:
        errs.append(f"ingress_headers_t starts with {ig_members[:1]}, not the bridged header")
    bridged = _header_fields(prog, "ingress_headers_t", "bridged")
    if bridged != _header_fields(prog, "egress_headers_t", "bridged"):
        errs.append("ingress and egress disagree on the bridged header")
    for name, fields in (
        ("bridged", bridged),
        ("writeback", _header_fields(prog, "egress_metadata_t", "writeback")),
    ):
        width = sum(prog.width(t) for _, t in fields)
        if width % 8:
            errs.append(f"{name} header is {width} bits, not whole bytes")
        if [(n, prog.width(t)) for n, t in fields[:1]] != [("pkt_type", 8)]:
            errs.append(f"{name} header does not start with the 8-bit pkt_type")
    members = {n for n, _ in bridged}
    if not {"leg", "rtcp", "relay"} <= members:
        errs.append(f"bridged header lacks {sorted({'leg', 'rtcp', 'relay'} - members)}")
    ingress = _body(prog, "Ingress")
    text = "".join(ingress)
    for m in ("leg", "rtcp", "relay"):
        if f"hdr.bridged.{m}=" not in text:
            errs.append(f"Ingress never sets hdr.bridged.{m}")
    if not _calls(ingress, "hdr.bridged", "setValid"):
        errs.append("Ingress never makes the bridged header valid")
    dep = "".join(_body(prog, "IngressDeparser"))
    if "pkt.emit(hdr)" not in dep:
        errs.append("IngressDeparser does not emit hdr (bridged header first)")
    parser = prog.parsers["EgressParser"]
    if not any("".join(b).startswith("pkt.extract(hdr.bridged)") for b in parser.states.values()):
        errs.append("EgressParser never extracts hdr.bridged")
    edep = "".join(_body(prog, "EgressDeparser"))
    if "pkt.emit(hdr)" in edep or "pkt.emit(hdr.bridged)" in edep:
        errs.append("EgressDeparser emits the bridged header onto the wire")
    return errs


def _gates(body: list[str], idx: int) -> str:
    """The conditions under which tokens[idx] runs, joined with &&; a local bool
    flag in them (``if (flag) ...``) is replaced by the conditions of its
    ``flag = true`` assignments."""
    conds = _conditions(body, idx)
    out: list[str] = []
    for c in conds:
        out.append(c)
        for flag in re.findall(r"\b([A-Za-z_]\w*)\b", c):
            sets = [
                i
                for i in range(len(body) - 3)
                if body[i : i + 4] == [flag, "=", "true", ";"] and (i == 0 or body[i - 1] != ".")
            ]
            out += ["&&".join(_conditions(body, i)) for i in sets]
    return "&&".join(out)


def check_egress_quality(prog: Program) -> list[str]:
    """Quality registers only when the profile has them; then under Egress,
    gated like the contract says, timed by the egress global timestamp."""
    egress = _body(prog, "Egress")
    if "WITH_RTP_QUALITY" not in prog.macros:
        return []
    errs: list[str] = []
    gated = False
    for i in _calls(egress, "rtp_quality", "apply"):
        gates = _gates(egress, i)
        if all(
            c in gates for c in ("hdr.bridged.relay==1", "hdr.bridged.rtcp==0", "hdr.rtp.isValid()")
        ):
            gated = True
    if not gated:
        errs.append("Egress applies RtpQuality without relay == 1, rtcp == 0, RTP valid")
    if "rtp_clock.apply(eg_prsr_md.global_tstamp" not in "".join(egress):
        errs.append("RtpQuality's clock is not the egress global timestamp")
    for sc in scopes(prog):
        for inst in sc.control.instances.values():
            cp = control_plane_name(sc.path, inst.name, inst.annotations)
            if inst.type.name == "Register" and ".rtp_" in cp and not sc.path.startswith("Egress"):
                errs.append(f"register {cp} is instantiated under {sc.path}, not Egress")
    return errs


def check_single_apply(prog: Program) -> list[str]:
    """A table or a control instance is applied at one place: p4c would copy a
    control applied twice (and its registers with it) and rejects a table
    applied twice."""
    errs: list[str] = []
    for ctl in prog.controls.values():
        body = ctl.bodies[-1]
        appliable = set(ctl.tables) | {
            n for n, inst in ctl.instances.items() if inst.type.name in prog.controls
        }
        for name in sorted(appliable):
            n = len(_calls(body, name, "apply"))
            if n > 1:
                errs.append(f"{ctl.name}: {name} is applied {n} times")
    return errs


def all_errors(
    contract: dict[str, Any],
    defines: dict[str, str] | None = None,
    overrides: dict[str, str] | None = None,
) -> list[str]:
    prog = load_program(defines, overrides)
    bfrt, _ = strip_target_generated(synthesize_bfrt(prog))
    return (
        check_program(contract, bfrt)
        + check_p4_extras(contract, prog, bfrt)
        + check_references(prog)
        + check_guard(prog)
        + check_bridging(prog)
        + check_egress_quality(prog)
        + check_single_apply(prog)
    )


# ---------------------------------------------------------------- tests


@pytest.fixture(scope="module")
def contract() -> dict[str, Any]:
    return load_contract()


def test_p4_names_match_contract(contract: dict[str, Any]) -> None:
    errs = all_errors(contract)
    assert not errs, "switch/p4 disagrees with contract.toml:\n" + "\n".join(errs)


def test_only_known_target_objects_are_set_aside() -> None:
    """What the contract comparison ignores is exactly this (report it if it grows)."""
    _, removed = strip_target_generated(synthesize_bfrt(load_program()))
    assert removed == [
        "pipe.Ingress.relay: $ENTRY_HIT_STATE",
        "pipe.Ingress.learning.flow_hash.$CONFIGURE",
    ]


def test_model_sees_every_contract_object(contract: dict[str, Any]) -> None:
    """Guard against a model that silently finds nothing."""
    bfrt = synthesize_bfrt(load_program())
    names = {t["name"] for t in bfrt["tables"]}
    assert {t["name"] for t in contract["table"]} <= names
    assert {r["name"] for r in contract["register"]} <= names
    assert [d["name"] for d in bfrt["learn_filters"]] == [d["name"] for d in contract["digest"]]
    relay = next(t for t in bfrt["tables"] if t["name"] == "pipe.Ingress.relay")
    assert [k["name"] for k in relay["key"]] == [
        "hdr.ipv4.src_addr",
        "hdr.ipv4.dst_addr",
        "hdr.udp.src_port",
        "hdr.udp.dst_port",
    ]


def test_lean_profile_drops_only_quality_registers(contract: dict[str, Any]) -> None:
    errs = all_errors(contract, defines={"P4RELAY_PROFILE_LEAN": ""})
    quality = {r["name"] for r in contract["register"]} - {"pipe.Ingress.learn_filter"}
    assert errs == [
        f"register {n} missing" for n in (r["name"] for r in contract["register"]) if n in quality
    ]


def test_large_scale_build_changes_sizes_only(contract: dict[str, Any]) -> None:
    errs = all_errors(contract, defines={"P4RELAY_SCALE_LARGE": ""})
    assert errs, "the large build has other sizes than the contract's defaults"
    assert all("size" in e or "relay_entries_p4" in e or "legs_p4" in e for e in errs), errs


def test_conflicting_profiles_are_a_build_error() -> None:
    with pytest.raises(P4ModelError, match="choose one profile"):
        load_program({"P4RELAY_PROFILE_LEAN": "", "P4RELAY_PROFILE_STANDARD": ""})


def _mutate(rel: str, old: str, new: str) -> dict[str, str]:
    text = (P4_ROOT / rel).read_text()
    assert old in text, f"mutation anchor {old!r} not in {rel}"
    return {rel: text.replace(old, new, 1)}


MUTATIONS = [
    pytest.param(
        "controls/relay_sessions.p4",
        '@name(".Ingress.relay")',
        '@name(".Ingress.relays")',
        "table pipe.Ingress.relay missing",
        id="table-renamed",
    ),
    pytest.param(
        "controls/rtp_quality.p4",
        '@name(".Egress.rtp_jitter")\n',
        "",
        "register pipe.Egress.rtp_jitter missing",
        id="register-loses-absolute-name",
    ),
    pytest.param(
        "controls/rtp_quality.p4",
        '@name(".Egress.rtp_lost")',
        '@name(".Ingress.rtp_lost")',
        "register pipe.Egress.rtp_lost missing",
        id="register-in-wrong-gress",
    ),
    pytest.param(
        "controls/relay_sessions.p4",
        "        counters = guard_counter;\n",
        "",
        "pipe.Ingress.relay_guard: data fields",
        id="guard-counter-dropped",
    ),
    pytest.param(
        "controls/relay_sessions.p4",
        "            hdr.udp.dst_port  : exact;\n        }\n        actions = {\n            guard_drop;",
        "            hdr.udp.src_port  : exact;\n        }\n        actions = {\n            guard_drop;",
        "pipe.Ingress.relay_guard: keys",
        id="guard-keyed-on-source",
    ),
    pytest.param(
        "include/defines.p4",
        "typedef bit<21> leg_t;",
        "typedef bit<20> leg_t;",
        "Ingress.relay_leg: params",
        id="leg-width",
    ),
    pytest.param(
        "controls/relay_sessions.p4",
        "hdr.udp.dst_port  : range;",
        "hdr.udp.dst_port  : ternary;",
        "pipe.Ingress.relay_addr: keys",
        id="match-kind",
    ),
    pytest.param(
        "controls/relay_sessions.p4",
        "        idle_timeout = true;\n",
        "",
        "pipe.Ingress.relay: data fields",
        id="idle-timeout-dropped",
    ),
    pytest.param(
        "controls/relay_sessions.p4",
        "action rewrite(ipv4_addr_t src_addr,",
        "action rewrite(ipv4_addr_t source_addr,",
        "Ingress.rewrite: params",
        id="param-renamed",
    ),
    pytest.param(
        "include/metadata.p4",
        "    l4_port_t   src_port;\n    l4_port_t   dst_port;\n    PortId_t",
        "    l4_port_t   sport;\n    l4_port_t   dst_port;\n    PortId_t",
        "digest pipe.IngressDeparser.learn",
        id="digest-field",
    ),
    pytest.param(
        "include/sizes.p4",
        "#define RELAY_TABLE_SIZE 65536",
        "#define RELAY_TABLE_SIZE 65535",
        "pipe.Ingress.relay: size 65535",
        id="table-size",
    ),
    pytest.param(
        "controls/forwarding.p4",
        "default_action = drop();\n        size = IPV4_LPM_TABLE_SIZE;",
        "default_action = set_nexthop(0);\n        size = IPV4_LPM_TABLE_SIZE;",
        "pipe.Ingress.ipv4_lpm: default action",
        id="default-action",
    ),
    pytest.param(
        "include/defines.p4",
        "#define LEARN_FILTER_AGE_MS 2000",
        "#define LEARN_FILTER_AGE_MS 5000",
        "config learn_filter_age_ms",
        id="config-value",
    ),
    pytest.param(
        "controls/learn_filter.p4",
        "Register<bit<32>, bit<LEARN_FILTER_INDEX_BITS>>",
        "Register<bit<16>, bit<LEARN_FILTER_INDEX_BITS>>",
        "register pipe.Ingress.learn_filter: data",
        id="register-width",
    ),
    pytest.param(
        "controls/forwarding.p4",
        "hdr.ethernet.dst_addr = dst_mac;",
        "hdr.ethernet.dmac = dst_mac;",
        "ethernet_h has no dmac",
        id="field-typo-in-action",
    ),
    pytest.param(
        "controls/rtp_quality.p4",
        "eg_md.rtp_transit = eg_md.now_clk - hdr.rtp.timestamp;",
        "eg_md.rtp_transit = eg_md.now_clk - hdr.rtp.ts;",
        "rtp_h has no ts",
        id="field-typo-in-apply",
    ),
    pytest.param(
        "controls/forwarding.p4",
        "            nexthop.apply();",
        "            next_hop.apply();",
        "next_hop.apply refers to nothing declared",
        id="apply-unknown-table",
    ),
    pytest.param(
        "parsers/ingress_parser.p4",
        "(0, 0, IP_PROTOCOLS_UDP) : parse_udp;",
        "(0, 0, IP_PROTOCOLS_UDP) : parse_udpp;",
        "undeclared state parse_udpp",
        id="parser-undeclared-state",
    ),
    pytest.param(
        "parsers/ingress_parser.p4",
        "            ETHERTYPE_VLAN : parse_vlan;\n            ETHERTYPE_IPV4 : parse_ipv4;\n            default : accept;\n        }\n    }\n\n    state parse_vlan",
        "            ETHERTYPE_IPV4 : parse_ipv4;\n            default : accept;\n        }\n    }\n\n    state parse_vlan",
        "state parse_vlan is unreachable",
        id="parser-unreachable-state",
    ),
    pytest.param(
        "parsers/ingress_parser.p4",
        "pkt.extract(hdr.ipv4_options.w3);",
        "pkt.extract(hdr.ipv4_options.w10);",
        "ipv4_options_t has no w10",
        id="parser-extract-unknown-header",
    ),
]


SEMANTIC_MUTATIONS = [
    pytest.param(
        "controls/relay_sessions.p4",
        "            if (ig_md.relay_dst && !ig_md.relay_hit) {\n"
        "                relay_guard.apply();\n            }\n",
        "            relay_guard.apply();\n",
        "relay_guard applied under",
        id="guard-unconditional",
    ),
    pytest.param(
        "controls/ingress.p4",
        "if (ig_md.relay_dst && !ig_md.relay_hit) {\n                /* also for a guarded port",
        "if (ig_md.relay_dst && !ig_md.relay_hit && !ig_md.guard_drop) {\n"
        "                /* also for a guarded port",
        "learn digest is not raised for guarded",
        id="guard-suppresses-digest",
    ),
    pytest.param(
        "controls/ingress.p4",
        "            } else {\n                forwarding.apply(",
        "            }\n            {\n                forwarding.apply(",
        "a guard hit is still forwarded",
        id="guard-hit-forwarded",
    ),
    pytest.param(
        "controls/ingress.p4",
        "                ig_dprsr_md.drop_ctl = 1;\n            } else {\n                forwarding",
        "                ig_md.guard_drop = true;\n            } else {\n                forwarding",
        "a guard hit does not set drop_ctl",
        id="guard-hit-not-dropped",
    ),
    pytest.param(
        "deparsers/egress_deparser.p4",
        "        pkt.emit(hdr.ethernet);",
        "        pkt.emit(hdr.bridged);\n        pkt.emit(hdr.ethernet);",
        "emits the bridged header onto the wire",
        id="bridged-not-stripped",
    ),
    pytest.param(
        "parsers/egress_parser.p4",
        "        pkt.extract(hdr.bridged);",
        "        pkt.advance(32);",
        "never extracts hdr.bridged",
        id="bridged-not-parsed",
    ),
    pytest.param(
        "controls/ingress.p4",
        "            hdr.bridged.leg = ig_md.leg;\n",
        "",
        "never sets hdr.bridged.leg",
        id="leg-not-bridged",
    ),
    pytest.param(
        "include/headers.p4",
        "    bit<1> _pad;\n    leg_t  leg;",
        "    leg_t  leg;",
        "bridged header is 31 bits",
        id="bridged-not-whole-bytes",
    ),
    pytest.param(
        "controls/egress.p4",
        "hdr.bridged.relay == 1 && hdr.bridged.rtcp == 0 && hdr.rtp.isValid()",
        "hdr.bridged.relay == 1 && hdr.rtp.isValid()",
        "without relay == 1, rtcp == 0",
        id="quality-counts-rtcp",
    ),
    pytest.param(
        "controls/egress.p4",
        "                rtp_clock.apply(eg_prsr_md.global_tstamp, eg_md.now_clk);\n",
        "                rtp_clock.apply(eg_prsr_md.global_tstamp, eg_md.now_clk);\n"
        "                rtp_quality.apply(hdr, eg_md, eg_intr_md, eg_dprsr_md);\n",
        "rtp_quality is applied 2 times",
        id="quality-applied-twice",
    ),
    pytest.param(
        "controls/egress.p4",
        "            else if (hdr.bridged.relay == 1 && hdr.bridged.rtcp == 0 && hdr.rtp.isValid()) {\n"
        "                measure = true;",
        "            else if (hdr.bridged.relay == 1 && hdr.bridged.rtcp == 0 && hdr.rtp.isValid()) {\n"
        "                measure = false;",
        "without relay == 1, rtcp == 0",
        id="quality-flag-never-set",
    ),
    pytest.param(
        "controls/egress.p4",
        "rtp_clock.apply(eg_prsr_md.global_tstamp, eg_md.now_clk);",
        "rtp_clock.apply((bit<48>)eg_intr_md.enq_tstamp, eg_md.now_clk);",
        "not the egress global timestamp",
        id="quality-timed-at-enqueue",
    ),
]


@pytest.mark.parametrize(("rel", "old", "new", "needle"), MUTATIONS + SEMANTIC_MUTATIONS)
def test_mutated_source_fails(
    contract: dict[str, Any], rel: str, old: str, new: str, needle: str
) -> None:
    errs = all_errors(contract, overrides=_mutate(rel, old, new))
    assert any(needle in e for e in errs), f"{needle!r} not reported; got:\n" + "\n".join(errs)


def test_duplicate_absolute_name_is_an_error(contract: dict[str, Any]) -> None:
    with pytest.raises(P4ModelError, match="declared twice"):
        all_errors(
            contract,
            overrides=_mutate(
                "controls/rtp_quality.p4",
                '@name(".Egress.rtp_lost")',
                '@name(".Egress.rtp_jitter")',
            ),
        )


def test_unknown_action_in_table_is_an_error(contract: dict[str, Any]) -> None:
    with pytest.raises(P4ModelError, match="not declared"):
        all_errors(
            contract,
            overrides=_mutate(
                "controls/forwarding.p4", "            set_nexthop;", "            hop;"
            ),
        )


# ---------------------------------------------------------------- BfRt bootstrap


def _bootstrap() -> Any:
    import importlib.util
    import sys

    if "p4relay_bfrt_bootstrap" in sys.modules:
        return sys.modules["p4relay_bfrt_bootstrap"]
    path = P4_ROOT.parent / "bfrt" / "bootstrap.py"
    spec = importlib.util.spec_from_file_location("p4relay_bfrt_bootstrap", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def bfrt_python_kwargs(contract: dict[str, Any], table: str, action: str) -> set[str]:
    """Keyword names bfrt_python accepts for add_with_<action> on a contract table."""
    ct = next(t for t in contract["table"] if t["name"] == table)
    names: set[str] = set()
    for k in ct["keys"]:
        if k["name"] == "$MATCH_PRIORITY":
            names.add("MATCH_PRIORITY")
            continue
        base = k["name"].split(".")[-1]
        suffixes = {"LPM": ["", "_p_length"], "Range": ["_start", "_end"], "Ternary": ["", "_mask"]}
        names |= {base + s for s in suffixes.get(k["match"], [""])}
    ca = next(a for a in contract["action"] if a["name"] == action)
    return names | {p["name"] for p in ca["params"]}


def test_bootstrap_writes_contract_names(contract: dict[str, Any]) -> None:
    boot = _bootstrap()
    tables = {t["name"]: t for t in contract["table"]}
    for name in (
        boot.TABLE_IPV4_LPM,
        boot.TABLE_NEXTHOP,
        boot.TABLE_RELAY_ADDR,
        *boot.PER_PIPE_TABLES,
    ):
        assert name in tables, name
    for t in boot.PER_PIPE_TABLES:
        assert tables[t].get("entry_scope") == "per_pipe", t
    ops = boot.plan(boot.load_config(str(P4_ROOT.parent / "bfrt" / "site.example.json")))
    table_ops = [
        op for op in ops if op.path[:2] == ("p4relay", "pipe") and "add_with_" in op.path[-1]
    ]
    assert {op.path[3] for op in table_ops} == {"ipv4_lpm", "nexthop", "relay_addr"}
    for op in table_ops:
        table = "pipe." + ".".join(op.path[2:-1])
        action = "Ingress." + op.path[-1].removeprefix("add_with_")
        assert action in tables[table]["actions"], (table, action)
        assert set(op.kwargs) == bfrt_python_kwargs(contract, table, action), op.describe()
    default = [op for op in table_ops if op.kwargs.get("dst_addr_p_length") == 0]
    assert len(default) == 1, "the example config installs exactly one default route"


@pytest.mark.parametrize(
    ("patch", "needle"),
    [
        (
            {
                "nexthops": [
                    {"id": 1, "port": "1/0", "src_mac": "zz", "dst_mac": "02:00:00:00:00:01"}
                ]
            },
            "src_mac",
        ),
        ({"default_route": {"nexthop_id": 99}}, "nexthop_id 99 is not in nexthops"),
        ({"routes": [{"prefix": "198.18.1.1/24", "nexthop_id": 1}]}, "host bits"),
        (
            {"relay_addrs": [{"addr": "198.18.0.10", "port_min": 30000, "port_max": 20000}]},
            "port_max",
        ),
        ({"ports": [{"port": 600}]}, "outside 0..511"),
        ({"ports": [{"port": "1/0", "speed": "400G"}]}, "speed"),
        ({"mirror_sessions": [{"sid": 1, "port": 5, "direction": "UP"}]}, "direction"),
        ({"colour": "blue"}, "unknown keys"),
        ({"jitter_writeback": {"ports": [68, 68]}}, "is in pipe 0; the copy must stay in pipe 1"),
        ({"mirror_sessions": [{"sid": 1001, "port": 5}]}, "jitter write-back session"),
        ({"jitter_writeback": {"base": 1000}}, "session_base and ports"),
        ({"jitter_writeback": {"session_base": 1015}}, "session_base"),
    ],
)
def test_bootstrap_rejects_bad_config(patch: dict[str, Any], needle: str) -> None:
    boot = _bootstrap()
    config = boot.load_config(str(P4_ROOT.parent / "bfrt" / "site.example.json"))
    config.update(patch)
    with pytest.raises(boot.ConfigError, match=needle):
        boot.plan(config)


def test_bootstrap_creates_the_programs_writeback_sessions() -> None:
    """One egress session per pipe at the P4 build's JITTER_WRITEBACK_SESSION_BASE,
    each to a port of its own pipe; none when the config says null (LEAN)."""
    boot = _bootstrap()
    config = boot.load_config(str(P4_ROOT.parent / "bfrt" / "site.example.json"))
    base = eval_int(tokenize(load_program().macros["JITTER_WRITEBACK_SESSION_BASE"]))
    wb = [op for op in boot.plan(config) if op.what.startswith("jitter write-back")]
    assert [op.kwargs["sid"] for op in wb] == [base, base + 1]
    for pipe, op in enumerate(wb):
        assert op.path == ("mirror", "cfg", "add_with_normal")
        assert op.kwargs["direction"] == "EGRESS"
        assert op.kwargs["ucast_egress_port"] >> 7 == pipe
    config["jitter_writeback"] = None
    assert not [op for op in boot.plan(config) if op.what.startswith("jitter write-back")]


# ---------------------------------------------------------------- checksum lists
#
# Checksums are where a first compile goes silently wrong: a field missing from
# a list still compiles. This evaluates the parser's subtract lists and the
# deparser's update lists as written in the source, with the ones' complement
# arithmetic of Tofino's checksum engines, on random relayed packets, and
# compares with checksums computed from scratch.


def _call_lists(tokens: list[str], method: str) -> list[tuple[str, str | None, list[str]]]:
    """(instance, assigned-to, [fields]) for every ``inst.method({...})`` in tokens."""
    out: list[tuple[str, str | None, list[str]]] = []
    for i in range(len(tokens) - 3):
        if tokens[i + 1] == "." and tokens[i + 2] == method and tokens[i + 3] == "(":
            j = i + 4
            if tokens[j] == "data":
                j += 2  # named argument "data ="
            if tokens[j] != "{":
                continue
            k = tokens.index("}", j)
            fields = "".join(tokens[j + 1 : k]).split(",")
            target = None
            if i >= 2 and tokens[i - 1] == "=":
                m = i - 2
                while m > 0 and tokens[m - 1] == ".":
                    m -= 2
                target = "".join(tokens[m : i - 1])
            out.append((tokens[i], target, fields))
    return out


def _ones_add(acc: int, data: bytes) -> int:
    for k in range(0, len(data), 2):
        acc += int.from_bytes(data[k : k + 2], "big")
        acc = (acc & 0xFFFF) + (acc >> 16)
    return acc


def _ones_sub(acc: int, data: bytes) -> int:
    inverted = bytes(b ^ 0xFF for b in data)
    return _ones_add(acc, inverted)


def _field_bytes(values: dict[str, tuple[int, int]], names: list[str]) -> bytes:
    bits = 0
    acc = 0
    for n in names:
        value, width = values[n]
        acc = (acc << width) | value
        bits += width
    assert bits % 8 == 0, f"checksum list {names} is not byte aligned ({bits} bits)"
    return acc.to_bytes(bits // 8, "big")


def checksum_mismatch(overrides: dict[str, str] | None = None) -> str | None:
    """First packet whose P4-computed checksums differ from scapy's, or None."""
    import random

    from scapy.layers.inet import IP, UDP, IPOption_RR
    from scapy.packet import Raw

    prog = load_program(overrides=overrides)
    parser = prog.parsers["IngressParser"]
    parser_tokens = [t for body in parser.states.values() for t in body]
    subtracts = _call_lists(parser_tokens, "subtract")
    gets: dict[str, str] = {}
    for i in range(len(parser_tokens) - 4):
        if parser_tokens[i + 1 : i + 4] == [".", "get", "("] and parser_tokens[i - 1] == "=":
            m = i - 2
            while m > 0 and parser_tokens[m - 1] == ".":
                m -= 2
            gets["".join(parser_tokens[m : i - 1])] = parser_tokens[i]
    updates = _call_lists(prog.controls["IngressDeparser"].bodies[-1], "update")
    if {t for _, t, _ in updates} != {"hdr.ipv4.hdr_checksum", "hdr.udp.checksum"}:
        return f"deparser updates {[t for _, t, _ in updates]}"

    ctl = prog.controls["IngressDeparser"]
    rng = random.Random(7)
    for n in range(400):
        opts = [IPOption_RR(routers=["0.0.0.0"] * rng.randint(1, 4))] if n % 3 == 0 else []
        pkt = (
            IP(
                src=f"198.18.1.{rng.randint(1, 254)}",
                dst="198.18.0.10",
                ttl=rng.randint(2, 255),
                options=opts,
            )
            / UDP(sport=rng.randint(1, 65535), dport=rng.randint(20000, 29999))
            / Raw(bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 40))))
        )
        pkt = IP(bytes(pkt))

        def values(p: Any) -> dict[str, tuple[int, int]]:
            fields = {
                "hdr.ipv4.ttl": p.ttl,
                "hdr.ipv4.protocol": p.proto,
                "hdr.ipv4.hdr_checksum": p.chksum,
                "hdr.ipv4.src_addr": int.from_bytes(bytes(map(int, p.src.split("."))), "big"),
                "hdr.ipv4.dst_addr": int.from_bytes(bytes(map(int, p.dst.split("."))), "big"),
                "hdr.udp.src_port": p[UDP].sport,
                "hdr.udp.dst_port": p[UDP].dport,
                "hdr.udp.checksum": p[UDP].chksum,
            }
            return {k: (v, prog.member_width(ctl, k)) for k, v in fields.items()}

        before = values(pkt)
        residual: dict[str, int] = {}
        for inst, _, fields in subtracts:
            residual[inst] = _ones_sub(residual.get(inst, 0), _field_bytes(before, fields))

        out = pkt.copy()
        out.src = f"203.0.113.{rng.randint(1, 254)}"
        out.dst = f"198.18.2.{rng.randint(1, 254)}"
        rtcp = n % 2
        out[UDP].sport = (rng.randint(20000, 29998) + rtcp) & 0xFFFF
        out[UDP].dport = (rng.randint(1024, 65534) + rtcp) & 0xFFFF
        out.ttl = pkt.ttl - 1
        after = values(out)
        for md, inst in gets.items():
            after[md] = (residual.get(inst, 0), 16)
        got = {}
        for _, target, fields in updates:
            s = (~_ones_add(0, _field_bytes(after, fields))) & 0xFFFF
            got[target] = 0xFFFF if (s == 0 and target == "hdr.udp.checksum") else s

        del out.chksum
        del out[UDP].chksum
        want = IP(bytes(out))
        if (got["hdr.ipv4.hdr_checksum"], got["hdr.udp.checksum"]) != (
            want.chksum,
            want[UDP].chksum,
        ):
            return f"packet {n} ({pkt.summary()}, ihl {pkt.ihl}): got {got}"
    return None


def test_checksum_lists_produce_correct_checksums() -> None:
    assert checksum_mismatch() is None


@pytest.mark.parametrize(
    ("rel", "old", "new"),
    [
        pytest.param(
            "deparsers/ingress_deparser.p4",
            "                hdr.ipv4.dst_addr,\n                ig_md.ipv4_csum_residual",
            "                ig_md.ipv4_csum_residual",
            id="ipv4-update-misses-dst",
        ),
        pytest.param(
            "parsers/ingress_parser.p4",
            "        udp_residual.subtract({hdr.udp.src_port, hdr.udp.dst_port});\n",
            "        udp_residual.subtract({hdr.udp.src_port});\n",
            id="udp-residual-keeps-dst-port",
        ),
        pytest.param(
            "parsers/ingress_parser.p4",
            "        ipv4_residual.subtract({hdr.ipv4.ttl, hdr.ipv4.protocol});\n",
            "",
            id="ipv4-residual-keeps-ttl",
        ),
    ],
)
def test_wrong_checksum_list_is_caught(rel: str, old: str, new: str) -> None:
    assert checksum_mismatch(_mutate(rel, old, new)) is not None


class _RecordingBfrt:
    """Stands in for bfshell's ``bfrt`` object (not runnable here): records calls,
    raises on the first add of an entry that "exists", answers the scope getter."""

    def __init__(self, existing: set[str], symmetric: bool) -> None:
        self.calls: list[str] = []
        self.existing = existing
        self.symmetric = symmetric
        self.path: tuple[str, ...] = ()

    def __getattr__(self, name: str) -> Any:
        child = _RecordingBfrt(self.existing, self.symmetric)
        child.calls = self.calls
        child.path = (*self.path, name)
        return child

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        name = ".".join(self.path)
        if self.path[-1] == "symmetric_mode_get":
            return self.symmetric
        if self.path[-1] == "get":  # port_hdl_info.get -> .data[b"$DEV_PORT"]
            return type("Info", (), {"data": {b"$DEV_PORT": 100 + kwargs["CONN_ID"]}})()
        self.calls.append(f"{name}{sorted(kwargs.items())}")
        if self.path[-1].startswith("add") and self.path[-2] in self.existing:
            raise RuntimeError("entry exists")
        return None


def test_bootstrap_apply_modifies_existing_and_keeps_scope() -> None:
    import io

    boot = _bootstrap()
    ops = boot.plan(boot.load_config(str(P4_ROOT.parent / "bfrt" / "site.example.json")))
    fake = _RecordingBfrt(existing={"nexthop"}, symmetric=False)
    out = io.StringIO()
    assert boot.apply(fake, ops, out) == 0
    log = out.getvalue()
    assert log.count("mod   next hop") == 4 and "same  pipe.Ingress.relay entry scope" in log
    assert not any("symmetric_mode_set" in c for c in fake.calls)
    assert any(c.startswith("port.port.add") and "('DEV_PORT', 101)" in c for c in fake.calls)
    assert sum("mod_with_forward" in c for c in fake.calls) == 4
