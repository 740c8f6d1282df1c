"""Configuration: defaults < TOML file < environment (P4RELAY_RTPAGENT_*) < flags.

The former environment names (`RTPAGENT_<SETTING>`) are still read, with a warning."""

from __future__ import annotations

import ipaddress
import tomllib
from pathlib import Path
from typing import Any, Literal

from p4relay_runtime.settings import LegacyEnvSource, env_prefix
from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from .early import DEFAULT_LISTEN, DEFAULT_RTPPROXY
from .sockets import parse_spec

ENV_PREFIX = env_prefix("rtpagent")


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid")

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, env_settings, LegacyEnvSource(settings_cls, "RTPAGENT_", ENV_PREFIX)

    listen: list[str] = Field(
        default_factory=lambda: list(DEFAULT_LISTEN),
        description="where SIP servers send commands (RTPProxy -s syntax)",
    )
    rtpproxy: str = Field(
        default=DEFAULT_RTPPROXY, description="RTPProxy's control socket, or 'embedded'"
    )
    embedded_ports: str = Field(
        default="35000-65000", description="media port range of the embedded RTPProxy"
    )
    embedded_args: list[str] = Field(
        default_factory=list, description="extra RTPProxy flags (embedded)"
    )
    relay_addr: list[str] = Field(
        default_factory=lambda: ["127.0.0.1"],
        description="RTPProxy's -l address(es): the switch relay_addr",
    )
    relay_ports: str = Field(
        default="35000-65000", description="RTPProxy's media port range (relay_addr entry)"
    )
    reply_timeout: float = Field(
        default=1.0, description="seconds to wait for RTPProxy per attempt"
    )
    reply_retries: int = Field(
        default=2, ge=0, description="times a command is sent again when RTPProxy does not answer"
    )
    rtpproxy_inflight: int = Field(
        default=16,
        description="datagram commands outstanding at RTPProxy at once (its control socket "
        "buffers ~25); more wait in the agent, in order",
    )
    notify_listen: str | None = Field(
        default="tcp:127.0.0.1:22224",
        description="agent's timeout socket written into U (RTPProxy needs -n for it); empty: do not rewrite",
    )
    rtpproxy_ttl: float = Field(
        default=60.0, description="RTPProxy's session TTL (-T); refreshes run every third"
    )
    switch: str = Field(
        default="127.0.0.1:50052", description="switch BfRt gRPC address; empty: no offload"
    )
    switch_name: str = Field(
        default="sw1", description="the switch's name at the server (its calls are filed under it)"
    )
    switch_client_id: int = Field(
        default=1, description="BfRt client id on the switch (unique among its clients)"
    )
    legs: int = Field(
        default=65536, description="leg_rewrite capacity (per pipe; the standard Tofino profile)"
    )
    idle_ttl_ms: int = Field(
        default=60000, description="switch entry idle timeout, ms (RTPProxy's TTL)"
    )
    nat_nets: list[str] = Field(
        default_factory=lambda: [
            "10.0.0.0/8",
            "172.16.0.0/12",
            "192.168.0.0/16",
            "100.64.0.0/10",
            "169.254.0.0/16",
        ],
        description="SDP addresses in these nets are not trusted: wait for the first packet",
    )
    latch_always: bool = Field(
        default=False, description="always wait for the first packet (RTPProxy-like latching)"
    )
    sip_notify: str = Field(
        default="",
        description="SIP server's timeout socket (tcp:host:port or unix:path) for sessions whose U "
        "names none (Kamailio's rtpproxy module sends one only on some U): the agent asks RTPProxy "
        "to notify it and tells this socket '<call-id> <from-tag>' when the media times out; "
        "empty: only sessions whose U named a socket are notified",
    )
    notify_allow: list[str] = Field(
        default_factory=list,
        description="timeout sockets a U may name (tcp:ADDRESS:PORT with a literal address, "
        "unix:/path), besides --sip-notify, which is always allowed: the agent notifies only "
        "these; a U naming another goes to RTPProxy unchanged and the agent never connects to it",
    )
    learn_policy: Literal["strict", "first"] = Field(
        default="strict",
        description="which media source a stream latches to: strict = only the signalled "
        "address (any port), or for a signalled address inside nat_nets the only source seen "
        "over learn_window_ms; first = the first packet's source (RTPProxy's own rule, open to "
        "RTP Bleed)",
    )
    port_binding: Literal["route", "learned", "off"] = Field(
        default="route",
        description="which switch port a party's relay entries match on (media from the "
        "party's address arriving on any other port is a spoofed source, never relayed): "
        "route = the port the switch routes the party's address to (reverse path, read from "
        "the switch; needs symmetric routing); learned = the port the party's first packet "
        "arrived on (asymmetric routing; a stranger spoofing the party first can take it); "
        "off = any port (the agent turns binding off on every switch port: media that may "
        "arrive on several ports; a packet spoofing a party's address and ports is relayed)",
    )
    route_refresh_s: float = Field(
        default=10.0,
        gt=0,
        le=3600,
        description="route binding: how often the agent re-reads the switch's routes",
    )
    learn_window_ms: int = Field(
        default=2000,
        ge=50,
        le=60000,
        description="strict learning: how long a NAT'd party's source must be the only one",
    )
    relay_guard: bool = Field(
        default=True,
        description="guard offloaded calls' relay ports in the switch (contract v2 relay_guard): "
        "packets from any other source are dropped there instead of reaching RTPProxy, "
        "which would latch and relay them; off only for a switch without that table",
    )
    default_asymmetric: bool = Field(default=False, description="RTPProxy runs with -A")
    new_sessions_per_second: float = Field(
        default=5000.0,
        gt=0,
        description="new sessions one command source (SIP server address) may create per "
        "second; more are answered E98 and never reach RTPProxy",
    )
    new_sessions_burst: int = Field(
        default=10000, ge=1, description="new sessions one source may create at once"
    )
    max_sessions_per_source: int = Field(
        default=200000,
        ge=1,
        description="sessions one command source may hold; a U for one more is answered E98",
    )
    state_file: str = Field(
        default="/var/lib/rtpagent/state.sqlite", description="journal + report spool"
    )
    rtpproxy_acct: str = Field(
        default="",
        description="RTPProxy's accounting CSV (acct_csv, rtpproxy_acct.csv): the end, packets "
        "and media times of sessions RTPProxy ended, followed from where the agent left it "
        "(ends it missed, RTPProxy-relayed packets, calls created while it was away); "
        "empty: not read",
    )
    server_url: str | None = Field(
        default=None, description="server base URL, e.g. http://127.0.0.1:8000"
    )
    server_token: str | None = Field(
        default=None, description="bearer token for the server's ingest API"
    )
    agent_name: str = Field(
        default="rtpagent-1", description="the agent's name at the server (unique per agent)"
    )
    sample_interval: float = Field(
        default=1.0,
        description="seconds between reads of the offloaded calls' counters and quality",
    )
    one_way_after_s: float = Field(
        default=5.0,
        ge=0,
        description="an offloaded call with no packets in one direction this long while the "
        "other flows is reported (event one_way_media); 0: off",
    )
    one_way_notify_s: float = Field(
        default=0.0,
        ge=0,
        description="one-way media this long: the SIP server is told as for a media timeout "
        "(the dialog ends); 0: never",
    )
    metrics_listen: str = Field(
        default="127.0.0.1:9102", description="Prometheus /metrics; empty: off"
    )
    admin_socket: str = Field(
        default="",
        description="Unix socket for rtpagent-ctl (status, drain, evacuate, resume), made "
        "0600; empty: off (SIGUSR1 drains, SIGUSR2 evacuates either way)",
    )
    max_offloaded_calls: int = Field(
        default=0,
        ge=0,
        description="calls the agent offloads at most (the switch's cap); above it new calls "
        "stay on RTPProxy (reason capacity); 0: the leg table's size only",
    )
    maintenance_poll_s: float = Field(
        default=2.0,
        ge=0,
        description="how often the agent sends its state to the server and takes the "
        "operator's drain, out-of-service and cap for it and its switch (with --server-url); "
        "0: never",
    )
    event_loop: str = Field(
        default="uvloop",
        description="'uvloop' (libuv: a third less CPU per command) or 'asyncio'",
    )
    log_level: str = Field(default="info", description="debug, info, warning or error")
    log_json: bool = Field(default=True, description="logs as JSON lines; false: for a console")

    @field_validator("listen")
    @classmethod
    def _listen(cls, v: list[str]) -> list[str]:
        for s in v:
            parse_spec(s)
        return v

    @field_validator("relay_addr")
    @classmethod
    def _relay_addr(cls, v: list[str]) -> list[str]:
        """RTPProxy's listen addresses as the switch matches them: IP
        addresses a router forwards (no link-local, zone or IPv4-mapped)."""
        if not v:
            raise ValueError("relay_addr: at least one address")
        out = []
        for a in v:
            try:
                ip = ipaddress.ip_address(a)
            except ValueError:
                raise ValueError(f"relay_addr {a!r} is not an IPv4 or IPv6 address") from None
            if isinstance(ip, ipaddress.IPv6Address) and (
                ip.scope_id is not None or ip.is_link_local or ip.ipv4_mapped is not None
            ):
                raise ValueError(
                    f"relay_addr {a!r}: link-local, scoped and IPv4-mapped addresses are not "
                    "forwarded by the switch"
                )
            out.append(str(ip))
        return out

    @field_validator("notify_allow")
    @classmethod
    def _notify_allow(cls, v: list[str]) -> list[str]:
        for s in v:
            if parse_spec(s).kind not in ("tcp", "tcp6", "unix"):
                raise ValueError(f"notify socket {s!r}: must be tcp: or unix:")
        return v

    @field_validator("sip_notify")
    @classmethod
    def _sip_notify(cls, v: str) -> str:
        if v and parse_spec(v).kind not in ("tcp", "tcp6", "unix"):
            raise ValueError(f"sip_notify {v!r}: must be tcp: or unix:")
        return v

    @field_validator("event_loop")
    @classmethod
    def _loop(cls, v: str) -> str:
        if v not in ("uvloop", "asyncio"):
            raise ValueError(f"event_loop must be 'uvloop' or 'asyncio', not {v!r}")
        return v

    @field_validator("rtpproxy")
    @classmethod
    def _rtpp(cls, v: str) -> str:
        if v != "embedded":
            parse_spec(v)
        return v

    @staticmethod
    def port_range(text: str) -> tuple[int, int]:
        lo, _, hi = text.partition("-")
        a, b = int(lo), int(hi or lo)
        if not 0 < a <= b < 65536:
            raise ValueError(f"bad port range {text!r}")
        return a, b


def load(path: str | None, overrides: dict[str, Any]) -> Settings:
    data: dict[str, Any] = {}
    if path:
        data = tomllib.loads(Path(path).read_text())
        data = data.get("rtpagent", data)
    env = Settings()  # environment over defaults
    merged = {**data, **{k: v for k, v in env.model_dump(exclude_unset=True).items()}}
    merged.update({k: v for k, v in overrides.items() if v is not None})
    return Settings(**merged)
