"""One switch's configuration: defaults < TOML file < environment
(P4RELAY_CONTROLPLANE_*) < flags, validated whole.

The file holds top-level keys (or a `[controlplane]` table) named like the
settings below. Each feature section says what the switch runs, whole: a
section that is present is the truth for its tables (an empty list empties
them); a section left out is not managed at all (its tables are left as they
are). Lists in the environment are JSON (`P4RELAY_CONTROLPLANE_ROUTES='[...]'`);
nested keys take `__` (`P4RELAY_CONTROLPLANE_INT__CALLS=all`).
"""

from __future__ import annotations

import contextvars
import ipaddress
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from p4relay_switch import SwitchError, limits
from p4relay_switch.ired import IredSettings, cells
from p4relay_switch.names import IRED_EWMA_N_MAX, REROUTE_SLOTS
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

ENV_PREFIX = "P4RELAY_CONTROLPLANE_"
FRAME_BYTES = 1514  # iRED depths are given in full-size packets (the iRED paper's unit)
# Table sizes of the Tofino build (switch/contract.toml size_p4): a config that
# cannot fit is refused before anything is written.
NEXTHOP_SIZE = 4096
IPV4_LPM_SIZE = 16384
IPV6_LPM_SIZE = 2048
INT_WATCH_SIZE = 256
INT_WATCH6_SIZE = 512
REROUTE_WATCH_SIZE = 4096
REROUTE_WATCH6_SIZE = 512
IRED_SPARE_SIZE = 16
LEG_BITS = 21

DevPort = Annotated[int, Field(ge=0, le=511, description="dev_port")]
U16 = Annotated[int, Field(ge=0, le=65535)]
U32 = Annotated[int, Field(ge=0, le=2**32 - 1)]


def _any_prefix(v: Any) -> Any:
    """An IPv4 or IPv6 prefix, host bits clear, with the reason when it is not one."""
    if not isinstance(v, str):
        return v
    addr, sep, length = v.partition("/")
    v6 = ":" in addr
    family, bits = ("IPv6", 128) if v6 else ("IPv4", 32)
    if sep and length.isdigit() and int(length) > bits:
        raise ValueError(f"{v!r}: an {family} prefix is at most /{bits}, not /{length}")
    try:
        net = ipaddress.ip_network(v, strict=True)
    except ValueError as e:
        raise ValueError(f"{v!r} is not an {family} prefix (address/length): {e}") from None
    if isinstance(net, ipaddress.IPv6Network):
        if "%" in addr:
            raise ValueError(f"{v!r}: a prefix has no zone (%...)")
        for special, what in _V6_NEVER_ROUTED:
            if net.subnet_of(special):
                raise ValueError(f"{v!r} is {what}: no router forwards it")
    return net


# IPv6 destinations a router never forwards (RFC 4291): a route for them never matches.
_V6_NEVER_ROUTED = (
    (ipaddress.IPv6Network("fe80::/10"), "link-local (fe80::/10)"),
    (ipaddress.IPv6Network("::ffff:0:0/96"), "IPv4-mapped (::ffff:0:0/96): IPv4 on the wire"),
)


# A traced far party: IPv4 (int_watch) or IPv6 (int_watch6), host bits clear.
Prefix = Annotated[ipaddress.IPv4Network | ipaddress.IPv6Network, BeforeValidator(_any_prefix)]
# A watched destination: IPv4 (reroute_watch) or IPv6 (reroute_watch6).
WatchPrefix = Annotated[ipaddress.IPv4Network | ipaddress.IPv6Network, BeforeValidator(_any_prefix)]
# A route's prefix: IPv4 ("0.0.0.0/0" the default) or IPv6 ("::/0").
RoutePrefix = Annotated[ipaddress.IPv4Network | ipaddress.IPv6Network, BeforeValidator(_any_prefix)]
_BOOLS = {"1": True, "true": True, "on": True, "yes": True}
_BOOLS |= {"0": False, "false": False, "off": False, "no": False}


class ConfigError(ValueError):
    """The configuration cannot be used: the message says which setting and why."""


def mac(text: str) -> int:
    parts = text.split(":")
    if len(parts) != 6 or not all(len(p) == 2 for p in parts):
        raise ValueError(f"MAC address must look like 02:00:00:00:00:01, got {text!r}")
    try:
        return int("".join(parts), 16)
    except ValueError:
        raise ValueError(f"MAC address must look like 02:00:00:00:00:01, got {text!r}") from None


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PortShaping(_Section):
    """Egress shaping of one port (tf1.tm.port.sched_shaping)."""

    port: DevPort
    rate_kbps: Annotated[int, Field(ge=0, le=400_000_000)] = Field(
        description="egress rate, kbit/s; 0: unshaped (line rate)"
    )
    burst_bytes: Annotated[int, Field(ge=0, le=16_777_215)] = Field(
        default=9000, description="shaper burst, bytes"
    )


class NexthopConfig(_Section):
    """A next hop (pipe.Ingress.nexthop): the port and MACs a route sends by."""

    id: U16
    port: DevPort
    src_mac: str
    dst_mac: str
    int_role: Literal["transit", "sink"] | None = Field(
        default=None,
        description="INT role of the next hop: transit = another INT switch, sink = the "
        "edge of the INT domain (strip and report); none: outside INT",
    )

    @field_validator("src_mac", "dst_mac")
    @classmethod
    def _mac(cls, v: str) -> str:
        mac(v)
        return v.lower()


class RouteConfig(_Section):
    """A route (pipe.Ingress.ipv4_lpm, or ipv6_lpm for an IPv6 prefix); 0.0.0.0/0
    and ::/0 are the default routes."""

    prefix: RoutePrefix
    nexthop: U16


class RerouteClassConfig(_Section):
    flow_class: Annotated[int, Field(ge=0, le=255)]
    t_q_us: Annotated[float, Field(ge=0, le=4_294_967)] = Field(
        description="threshold of a packet's delay from ingress to egress, us "
        "(measured in ticks of 65.536 us: at least one tick)"
    )
    m: U16 = Field(description="consecutive packets over t_q that move the flow (0: never)")
    hold_ms: U32 = Field(description="the primary stays clear this long before a flow moves back")

    @property
    def t_q_ns(self) -> int:
        return round(self.t_q_us * 1000)

    @model_validator(mode="after")
    def _representable(self) -> Self:
        """The switch must be able to measure t_q (m = 0: the class never triggers)."""
        if self.m:
            try:
                limits.check_reroute_t_q(self.t_q_ns)
            except limits.UnrepresentableThreshold as e:
                raise ValueError(f"reroute class {self.flow_class}: {e}") from e
        return self


class RerouteWatchConfig(_Section):
    prefix: WatchPrefix = Field(description="IPv4 or IPv6 destination prefix")
    slot: Annotated[int, Field(ge=0, le=REROUTE_SLOTS - 1)]
    flow_class: Annotated[int, Field(ge=0, le=255)]
    primary_port: DevPort = Field(
        description="dev_port of the primary next hop (upstream notices only from there)"
    )
    backup_nexthop_id: U16 | None = Field(
        default=None, description="next hop to move to; none: notify the upstream switch"
    )
    backup_port: DevPort | None = Field(
        default=None, description="dev_port of the backup next hop (for the record)"
    )


def _switch_names(v: dict[str, str]) -> dict[str, str]:
    """INT switch id (decimal) -> name: ids of 32 bits, names of 1..128 characters."""
    for k, name in v.items():
        if not k.isdigit() or int(k) >= 2**32:
            raise ValueError(f"switch_names: {k!r} is not an INT switch id (0..2^32-1)")
        if not 0 < len(name) <= 128:
            raise ValueError(f"switch_names: the name of {k} must be 1..128 characters")
    return v


class RerouteSection(_Section):
    """Congestion reroute: flow classes, watched destinations, the return."""

    poll_ms: Annotated[int, Field(ge=10, le=10_000)] = Field(
        default=100, description="how often the primaries of moved flows are checked"
    )
    classes: list[RerouteClassConfig] = Field(default_factory=list)
    watch: list[RerouteWatchConfig] = Field(default_factory=list)
    switch_names: dict[str, str] = Field(
        default_factory=dict,
        description="INT switch id (decimal) -> name: the congested hop a sink's notice "
        "names, in events and logs",
    )

    @field_validator("switch_names")
    @classmethod
    def _names(cls, v: dict[str, str]) -> dict[str, str]:
        return _switch_names(v)

    def name(self, switch_id: int) -> str:
        return self.switch_names.get(str(switch_id), str(switch_id))

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        slots = [w.slot for w in self.watch]
        if len(set(slots)) != len(slots):
            raise ValueError("two reroute watches share a slot")
        prefixes = [w.prefix for w in self.watch]
        if len(set(prefixes)) != len(prefixes):
            raise ValueError("a reroute watch prefix is given twice")
        v6 = sum(1 for p in prefixes if p.version == 6)
        if len(prefixes) - v6 > REROUTE_WATCH_SIZE:
            raise ValueError(f"reroute: at most {REROUTE_WATCH_SIZE} IPv4 watches (reroute_watch)")
        if v6 > REROUTE_WATCH6_SIZE:
            raise ValueError(
                f"reroute: at most {REROUTE_WATCH6_SIZE} IPv6 watches (reroute_watch6)"
            )
        classes = [c.flow_class for c in self.classes]
        if len(set(classes)) != len(classes):
            raise ValueError("a reroute flow class is defined twice")
        for w in self.watch:
            if w.flow_class not in classes:
                raise ValueError(f"watch {w.prefix} names flow class {w.flow_class}, not defined")
        return self


class IredPort(_Section):
    """One port's iRED: a TOML table, or `port=4,max_len_queue=1024,n_drop=64`
    (the environment's JSON list) with the same keys."""

    port: DevPort
    max_len_queue: int = Field(ge=1, description="maxLenQueue, full-size packets")
    n_drop: int = Field(ge=1, description="N, full-size packets: minThsld = maxLenQueue/2 - N")
    ewma_n: int = Field(default=1, description="n of the queue average, 1..4")
    drop_prob: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="chance between the thresholds; default the paper's 2 / (N + 1)",
    )
    tail_drop: bool = Field(
        default=False, description="plain tail drop at maxLenQueue instead (comparisons)"
    )
    protect: bool = Field(
        default=True,
        description="never pick offloaded calls' media, DSCP EF or the signalling class "
        "([ired_spare])",
    )

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, v: Any) -> Any:
        if not isinstance(v, str):
            return v
        out: dict[str, Any] = {}
        for part in (p.strip() for p in v.split(",")):
            if not part:
                continue
            key, sep, val = part.partition("=")
            key = key.strip()
            if not sep:
                raise ValueError(f"iRED port {v!r}: {part!r} is not key=value")
            if key in out:
                raise ValueError(f"iRED port {v!r}: {key} given twice")
            val = val.strip()
            if key in ("tail_drop", "protect"):
                if val.lower() not in _BOOLS:
                    raise ValueError(f"iRED port {v!r}: {key}={val!r} is not on/off")
                out[key] = _BOOLS[val.lower()]
            else:
                out[key] = val
        return out

    @model_validator(mode="after")
    def _check(self) -> Self:
        where = f"iRED on port {self.port}"
        if not 1 <= self.ewma_n <= IRED_EWMA_N_MAX:
            raise ValueError(f"{where}: ewma_n (n) {self.ewma_n} must be 1..{IRED_EWMA_N_MAX}")
        if 2 * self.n_drop >= self.max_len_queue:
            raise ValueError(
                f"{where}: n_drop (N) {self.n_drop} must be below max_len_queue / 2 = "
                f"{self.max_len_queue / 2:g} (minThsld = maxLenQueue/2 - N must stay above 0)"
            )
        try:
            self.settings().check()
        except SwitchError as e:
            raise ValueError(f"{where}: {e}") from None
        return self

    def settings(self) -> IredSettings:
        """The switch's entry (depths in cells)."""
        return IredSettings(
            max_len_queue=cells(self.max_len_queue, FRAME_BYTES),
            n_drop=cells(self.n_drop, FRAME_BYTES),
            ewma_n=self.ewma_n,
            drop_prob=2.0 / (self.n_drop + 1) if self.drop_prob is None else self.drop_prob,
            tail_drop=self.tail_drop,
            protect=self.protect,
        )


# DSCP names (RFC 2474 class selectors, RFC 2597 AFxy, RFC 3246 EF).
DSCP_NAMES = {f"CS{i}": 8 * i for i in range(8)} | {"EF": 46}
DSCP_NAMES |= {f"AF{c}{d}": 8 * c + 2 * d for c in range(1, 5) for d in range(1, 4)}


def _dscp(v: Any) -> Any:
    """A DSCP by name (CS3, AF31, EF) or number 0..63."""
    if isinstance(v, str):
        name = v.strip().upper()
        if name in DSCP_NAMES:
            return DSCP_NAMES[name]
        if not name.isdigit():
            raise ValueError(f"{v!r} is not a DSCP (a name such as CS3, AF31, EF, or 0..63)")
        return int(name)
    return v


Dscp = Annotated[int, BeforeValidator(_dscp), Field(ge=0, le=63)]


class IredSpareSection(_Section):
    """The signalling class a protecting port's iRED never picks, beside
    offloaded media and DSCP EF (pipe.Ingress.ired_spare): SIP, whose lost
    requests cost a call set-up a retransmission timer (T1 = 500 ms). SIP
    over TCP/TLS is recognised by its DSCP only (the switch parses UDP)."""

    dscp: list[Dscp] = Field(
        default_factory=lambda: [DSCP_NAMES["CS3"], DSCP_NAMES["CS5"]],
        description="DSCP classes of signalling (names or 0..63); default CS3 and CS5",
    )
    udp_ports: list[U16] = Field(
        default_factory=lambda: [5060, 5061],
        description="UDP ports of signalling, either direction; default 5060 and 5061",
    )

    @model_validator(mode="after")
    def _fits(self) -> Self:
        _unique(self.dscp, "ired_spare: DSCP {} given twice")
        _unique(self.udp_ports, "ired_spare: UDP port {} given twice")
        if 0 in self.udp_ports:
            raise ValueError("ired_spare: UDP port 0 would match every packet that is not UDP")
        if 0 in self.dscp:
            raise ValueError("ired_spare: DSCP 0 (CS0, best effort) is the bulk iRED is for")
        n = len(self.dscp) + 2 * len(self.udp_ports)
        if n > IRED_SPARE_SIZE:
            raise ValueError(
                f"ired_spare: {len(self.dscp)} DSCP classes + 2 x {len(self.udp_ports)} "
                f"ports = {n} entries, ired_spare holds {IRED_SPARE_SIZE}"
            )
        return self


class IntHopConfig(_Section):
    """This switch's INT hop on an egress port, with the congestion thresholds
    a hop is marked by (clear <= onset: hysteresis)."""

    port: DevPort
    onset_cells: U32 = Field(default=200, description="queue depth at dequeue, 80-byte cells")
    clear_cells: U32 = Field(default=50)
    onset_us: Annotated[float, Field(ge=0, le=4_294_967)] = Field(
        default=0.0,
        description="hop latency, us (0: not used; at most 262.143: the target's "
        "deq_timedelta stops there)",
    )
    clear_us: Annotated[float, Field(ge=0, le=4_294_967)] = Field(default=0.0)

    @model_validator(mode="after")
    def _representable(self) -> Self:
        """Thresholds the switch's queue depth and hop latency can reach
        (p4relay_switch.limits; latency 0: not used)."""
        unused = limits.NEVER
        try:
            limits.check_int_hop(
                self.onset_cells,
                self.clear_cells,
                round(self.onset_us * 1000) if self.onset_us else unused,
                round(self.clear_us * 1000) if self.onset_us else unused,
            )
        except limits.UnrepresentableThreshold as e:
            raise ValueError(f"INT hop on port {self.port}: {e}") from e
        return self

    @model_validator(mode="after")
    def _hysteresis(self) -> Self:
        if self.clear_cells > self.onset_cells or self.clear_us > self.onset_us:
            raise ValueError(
                f"INT hop on port {self.port}: clear thresholds ({self.clear_cells} cells, "
                f"{self.clear_us} us) must not exceed the onset thresholds "
                f"({self.onset_cells} cells, {self.onset_us} us)"
            )
        return self


class IntReportConfig(_Section):
    """Where a sink's telemetry reports go (the collector's --int-report-listen)."""

    port: DevPort = Field(description="dev_port the reports leave by")
    src_mac: str
    dst_mac: str
    src_addr: ipaddress.IPv4Address
    dst_addr: ipaddress.IPv4Address
    dst_port: Annotated[int, Field(ge=1, le=65535)] = 32766

    @field_validator("src_mac", "dst_mac")
    @classmethod
    def _mac(cls, v: str) -> str:
        mac(v)
        return v.lower()


class IntSection(_Section):
    """In-band network telemetry on this switch: which calls it traces as the
    source (the relay switch), the hop it adds per egress port, and where a
    sink's reports go. Roles are per next hop (`nexthops[].int_role`)."""

    switch_id: Annotated[int, Field(ge=1, le=2**32 - 1)] = Field(
        description="this switch's INT node id (hops and reports); 1..2^32-1: a reroute "
        "notice's hop id 0 names no hop"
    )
    calls: Literal["none", "all", "sampled", "prefixes"] = Field(
        default="all",
        description="calls traced from here: every offloaded call, one in sample_one_in "
        "(by leg index), those whose far party is in prefixes, or none (transit/sink only)",
    )
    sample_one_in: Annotated[int, Field(ge=1, le=1 << LEG_BITS)] = Field(
        default=1, description="calls = sampled: a power of two (a ternary match on the leg)"
    )
    prefixes: list[Prefix] = Field(
        default_factory=list,
        description="calls = prefixes: the far party's address; IPv4 prefixes trace "
        "offloaded calls to them (int_watch), IPv6 ones every UDP packet to them "
        "(int_watch6, programs with IPv6)",
    )
    hops: list[IntHopConfig] = Field(default_factory=list)
    report: IntReportConfig | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        n = self.sample_one_in
        if n & (n - 1):
            raise ValueError(
                f"int.sample_one_in {n} must be a power of two (the switch samples by the "
                "low bits of the call's leg index, a ternary match)"
            )
        if self.calls == "sampled" and n == 1:
            raise ValueError("int.calls = sampled needs sample_one_in > 1 (1 is calls = all)")
        if self.calls == "prefixes" and not self.prefixes:
            raise ValueError("int.calls = prefixes needs int.prefixes")
        if self.calls != "prefixes" and self.prefixes:
            raise ValueError(f"int.prefixes is used only with calls = prefixes, not {self.calls}")
        if len(set(self.prefixes)) != len(self.prefixes):
            raise ValueError("an int prefix is given twice")
        v6 = sum(1 for p in self.prefixes if p.version == 6)
        if len(self.prefixes) - v6 > INT_WATCH_SIZE:
            raise ValueError(
                f"int.prefixes: at most {INT_WATCH_SIZE} IPv4 prefixes (int_watch's size)"
            )
        if v6 > INT_WATCH6_SIZE:
            raise ValueError(
                f"int.prefixes: at most {INT_WATCH6_SIZE} IPv6 prefixes (int_watch6's size)"
            )
        ports = [h.port for h in self.hops]
        if len(set(ports)) != len(ports):
            raise ValueError("an INT hop port is given twice")
        return self


class IntLoopSection(_Section):
    """The control-plane INT loop: the sinks' telemetry reports come here, a
    hop on a watched destination's primary path that stays over onset makes
    this (the source) switch move the destination to its backup; the hop
    under clear for hold_ms moves it back. For fabrics where a data-plane
    notice cannot travel to the source."""

    listen: str = Field(description="UDP host:port the sinks' telemetry reports arrive at")
    sources: list[ipaddress.IPv4Address] = Field(
        min_length=1,
        description="report source addresses taken (the sinks' int.report src_addr); "
        "any other datagram is counted and dropped",
    )
    forward: str = Field(
        default="",
        description="host:port every accepted report is passed on to, unchanged (the "
        "collector's int_report_listen); empty: none",
    )
    onset_cells: U32 = Field(
        default=400, description="a hop at/over this queue depth (80-byte cells) is over onset"
    )
    clear_cells: U32 = Field(default=100, description="a hop over this depth is not clear")
    onset_us: Annotated[float, Field(ge=0, le=4_294_967)] = Field(
        default=0.0,
        description="hop latency onset, us (0: not used; Tofino 1 hop latency saturates at 262 us)",
    )
    clear_us: Annotated[float, Field(ge=0, le=4_294_967)] = Field(default=0.0)
    m: Annotated[int, Field(ge=1, le=1000)] = Field(
        default=2, description="consecutive reports of a hop over onset that make it congested"
    )
    hold_ms: Annotated[int, Field(ge=0, le=3_600_000)] = Field(
        default=2000, description="the hop stays clear this long before flows move back"
    )
    switch_names: dict[str, str] = Field(
        default_factory=dict, description="INT switch id (decimal) -> name, for events and logs"
    )

    @field_validator("listen", "forward")
    @classmethod
    def _addr(cls, v: str, info: Any) -> str:
        if v or info.field_name == "listen":
            host, _ = parse_listen(v)
            try:
                ipaddress.IPv4Address(host)
            except ValueError:
                raise ValueError(f"{info.field_name}: {host!r} is not an IPv4 address") from None
        return v

    @field_validator("switch_names")
    @classmethod
    def _names(cls, v: dict[str, str]) -> dict[str, str]:
        return _switch_names(v)

    @model_validator(mode="after")
    def _hysteresis(self) -> Self:
        if self.onset_cells == 0 and self.onset_us == 0:
            raise ValueError("int_loop: onset_cells or onset_us must be set")
        if self.clear_cells > self.onset_cells or self.clear_us > self.onset_us:
            raise ValueError(
                f"int_loop: clear thresholds ({self.clear_cells} cells, {self.clear_us} us) "
                f"must not exceed the onset ones ({self.onset_cells} cells, {self.onset_us} us)"
            )
        return self

    def name(self, switch_id: int) -> str:
        return self.switch_names.get(str(switch_id), str(switch_id))


# The config file's content for the settings being built: pydantic-settings'
# sources are per class, the file is per load.
_FILE: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("file", default=None)


class _FileSource(PydanticBaseSettingsSource):
    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return (_FILE.get() or {}).get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(_FILE.get() or {})


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="forbid", frozen=True
    )

    switch: str = Field(
        default="sw1", min_length=1, max_length=128, description="the switch's name at the server"
    )
    grpc_address: str = Field(
        default="127.0.0.1:50052", description="the switch's BfRt gRPC host:port"
    )
    client_id: U16 = Field(default=11, description="BfRt client id (rtpagent 1, the collector 2)")
    timeout_s: Annotated[float, Field(gt=0, le=60)] = Field(
        default=2.0, description="BfRt connect and RPC timeout, s"
    )
    reconcile_interval_s: Annotated[float, Field(gt=0, le=3600)] = Field(
        default=5.0, description="how often the switch is read back and drift repaired, s"
    )
    metrics_listen: str = Field(
        default="127.0.0.1:9104", description="Prometheus /metrics host:port; empty: off"
    )
    server_url: str = Field(
        default="", description="the p4relay server for reroute events; empty: logged only"
    )
    token: SecretStr | None = Field(default=None, description="ingest token (prefer token_file)")
    token_file: Path | None = Field(
        default=None, description="file holding the ingest token (first line)"
    )
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    log_json: bool = Field(default=True, description="JSON lines on stderr (else console text)")

    ports: list[PortShaping] | None = Field(
        default=None, description="egress shaping per port; ports not listed are left alone"
    )
    nexthops: list[NexthopConfig] | None = Field(
        default=None, description="next hops (pipe.Ingress.nexthop, int_role)"
    )
    routes: list[RouteConfig] | None = Field(
        default=None,
        description="routes (pipe.Ingress.ipv4_lpm, ipv6_lpm); 0.0.0.0/0 and ::/0 = default",
    )
    reroute: RerouteSection | None = Field(default=None, description="congestion reroute")
    ired: list[IredPort] | None = Field(default=None, description="iRED per egress port")
    ired_spare: IredSpareSection | None = Field(
        default=None,
        description="signalling that protecting ports spare (with [[ired]]: SIP by CS3, CS5, "
        "UDP 5060, 5061 when absent)",
    )
    int: IntSection | None = Field(default=None, description="in-band network telemetry")
    int_loop: IntLoopSection | None = Field(
        default=None,
        description="control-plane INT loop: move watched destinations on the sinks' reports "
        "(off when absent)",
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, env_settings, _FileSource(settings_cls)

    @field_validator("grpc_address", "metrics_listen")
    @classmethod
    def _host_port(cls, v: str, info: Any) -> str:
        if v or info.field_name == "grpc_address":
            parse_listen(v)
        return v

    @field_validator("server_url")
    @classmethod
    def _url(cls, v: str) -> str:
        if v and not v.startswith(("http://", "https://")):
            raise ValueError(f"server_url must start with http:// or https://, not {v!r}")
        return v.rstrip("/")

    @model_validator(mode="after")
    def _whole(self) -> Self:
        if self.ports is not None:
            _unique([p.port for p in self.ports], "ports: port {} given twice")
        if self.ired is not None:
            _unique([p.port for p in self.ired], "iRED: port {} configured twice")
        if self.ired_spare is not None and self.ired is None:
            raise ValueError("ired_spare needs [[ired]] (the ports that spare it)")
        nexthop_ids: set[int] | None = None
        if self.nexthops is not None:
            _unique([n.id for n in self.nexthops], "nexthops: id {} given twice")
            if len(self.nexthops) > NEXTHOP_SIZE:
                raise ValueError(f"nexthops: at most {NEXTHOP_SIZE}")
            nexthop_ids = {n.id for n in self.nexthops}
            if self.int is None and any(n.int_role for n in self.nexthops):
                raise ValueError("nexthops name an int_role but there is no [int] section")
        if self.routes is not None:
            _unique([str(r.prefix) for r in self.routes], "routes: prefix {} given twice")
            v6 = sum(1 for r in self.routes if r.prefix.version == 6)
            if len(self.routes) - v6 > IPV4_LPM_SIZE:
                raise ValueError(f"routes: at most {IPV4_LPM_SIZE} IPv4 prefixes (ipv4_lpm)")
            if v6 > IPV6_LPM_SIZE:
                raise ValueError(f"routes: at most {IPV6_LPM_SIZE} IPv6 prefixes (ipv6_lpm)")
            if nexthop_ids is None:
                raise ValueError("routes need the nexthops they name ([[nexthops]])")
            for r in self.routes:
                if r.nexthop not in nexthop_ids:
                    raise ValueError(f"route {r.prefix}: nexthop {r.nexthop} is not in nexthops")
        if self.reroute is not None and nexthop_ids is not None:
            for w in self.reroute.watch:
                if w.backup_nexthop_id is not None and w.backup_nexthop_id not in nexthop_ids:
                    raise ValueError(
                        f"reroute watch {w.prefix}: backup_nexthop_id {w.backup_nexthop_id} "
                        "is not in nexthops"
                    )
        if self.int_loop is not None:
            if self.reroute is None or self.int is None:
                raise ValueError(
                    "int_loop needs [reroute] (the watches it moves) and [int] (this "
                    "switch's INT id: a report's first hop must be its own)"
                )
            if not any(w.backup_nexthop_id is not None for w in self.reroute.watch):
                raise ValueError("int_loop: no reroute watch has a backup_nexthop_id to move to")
        sinks = [n for n in self.nexthops or [] if n.int_role == "sink"]
        if self.int is not None and self.int.report is None and sinks:
            raise ValueError("a sink next hop needs [int.report] (where its reports go)")
        return self

    def ingest_token(self) -> str | None:
        """The token from `token`, else the first line of `token_file`; None without either."""
        if self.token is not None and self.token.get_secret_value():
            return self.token.get_secret_value()
        if self.token_file is None:
            return None
        try:
            text = self.token_file.read_text().strip()
        except OSError as e:
            raise ConfigError(f"cannot read token_file {self.token_file}: {e.strerror}") from e
        if not text:
            raise ConfigError(f"token_file {self.token_file} is empty")
        return text.splitlines()[0].strip()


def _unique(values: list[Any], msg: str) -> None:
    seen: set[Any] = set()
    for v in values:
        if v in seen:
            raise ValueError(msg.format(v))
        seen.add(v)


def parse_listen(text: str) -> tuple[str, int]:
    """`host:port` (IPv6 as `[::1]:9104`) -> (host, port)."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"expected host:port, got {text!r}")
    return host.strip("[]") or "0.0.0.0", int(port)


def _explain(e: ValidationError) -> str:
    lines = []
    for err in e.errors():
        where = ".".join(str(p) for p in err["loc"]) or "config"
        msg = err["msg"].removeprefix("Value error, ")
        lines.append(f"{where}: {msg}")
    return "; ".join(lines)


def read_file(path: Path) -> dict[str, Any]:
    try:
        doc = tomllib.loads(path.read_text())
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror}") from e
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from e
    table = doc.get("controlplane", doc)
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [controlplane] must be a table")
    return table


def load(path: Path | None, flags: dict[str, Any] | None = None) -> Settings:
    """Settings from the file, the environment and `flags` (None values ignored),
    validated whole; ConfigError says every reason."""
    data = read_file(path) if path is not None else {}
    token = _FILE.set(data)
    try:
        return Settings(**{k: v for k, v in (flags or {}).items() if v is not None})
    except ValidationError as e:
        where = f"{path}: " if path is not None else ""
        raise ConfigError(f"{where}{_explain(e)}") from e
    finally:
        _FILE.reset(token)


__all__ = [
    "ENV_PREFIX",
    "ConfigError",
    "IntHopConfig",
    "IntLoopSection",
    "IntReportConfig",
    "IntSection",
    "IredPort",
    "NexthopConfig",
    "PortShaping",
    "RerouteClassConfig",
    "RerouteSection",
    "RerouteWatchConfig",
    "RouteConfig",
    "Settings",
    "load",
    "mac",
    "parse_listen",
]
