"""Configuration: defaults < TOML file < environment (P4RELAY_COLLECTOR_*) < flags.

The TOML file holds a `[collector]` table or top-level keys named like the
settings below. Every setting is also a flag (`--interval-s`) and an
environment variable (`P4RELAY_COLLECTOR_INTERVAL_S`).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated, Self

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

Positive = Annotated[float, Field(gt=0)]
NonNegative = Annotated[float, Field(ge=0)]


class ConfigError(ValueError):
    """The settings cannot be used: the message says which and why."""


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="P4RELAY_COLLECTOR_", extra="forbid")

    server_url: str = Field(
        default="http://127.0.0.1:8000", description="the p4relay server's base URL"
    )
    token: SecretStr | None = Field(
        default=None, description="ingest token (prefer token_file or the environment)"
    )
    token_file: Path | None = Field(
        default=None, description="file holding the ingest token (first line)"
    )
    interval_s: Positive = Field(default=1.0, description="seconds between polls of a switch")
    switches_refresh_s: Positive = Field(
        default=10.0, description="seconds between re-reads of the registered switches"
    )
    bfrt_timeout_s: Positive = Field(default=2.0, description="BfRt connect and RPC timeout")
    client_id: Annotated[int, Field(ge=0, le=65535)] = Field(
        default=2, description="BfRt client id (rtpagent uses 1)"
    )
    backlog_max: Annotated[int, Field(ge=1)] = Field(
        default=1000, description="batches kept while the server is unreachable; oldest dropped"
    )
    metrics_listen: str = Field(
        default="127.0.0.1:9103", description="Prometheus /metrics host:port; empty: off"
    )
    int_report_listen: str = Field(
        default="",
        description="UDP host:port for INT telemetry reports from the switches' sinks; empty: off",
    )
    int_switch_names: str = Field(
        default="",
        description="INT switch ids (each sink's and hop's `switch_id`) as the server's switch "
        "names: `ID=NAME,...`, ids decimal or 0x hex; an id not named is sent as its number",
    )
    congestion_onset_delay_ms: NonNegative = Field(
        default=20.0, description="queueing delay that starts a congestion episode; 0: not used"
    )
    congestion_clear_delay_ms: NonNegative = Field(
        default=5.0, description="queueing delay under which an episode may end"
    )
    congestion_onset_depth_bytes: Annotated[int, Field(ge=0)] = Field(
        default=150_000, description="queue depth that starts an episode; 0: not used"
    )
    congestion_clear_depth_bytes: Annotated[int, Field(ge=0)] = Field(
        default=30_000, description="queue depth under which an episode may end"
    )
    congestion_onset_drops: Annotated[int, Field(ge=0)] = Field(
        default=1, description="tail drops in one poll interval that start an episode; 0: not used"
    )
    congestion_onset_polls: Annotated[int, Field(ge=1)] = Field(
        default=1, description="consecutive polls over an onset threshold before the onset"
    )
    congestion_clear_polls: Annotated[int, Field(ge=1)] = Field(
        default=3,
        description="consecutive polls under every clear threshold, without drops, before the clear",
    )
    log_level: str = Field(default="info", description="debug, info, warning or error")
    log_json: bool = Field(default=True, description="JSON lines on stderr (else console text)")

    @field_validator("server_url")
    @classmethod
    def _url(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError(f"server_url must start with http:// or https://, not {v!r}")
        return v.rstrip("/")

    @field_validator("metrics_listen")
    @classmethod
    def _listen(cls, v: str) -> str:
        if v:
            parse_listen(v)
        return v

    @field_validator("int_switch_names")
    @classmethod
    def _int_names(cls, v: str) -> str:
        parse_switch_names(v)
        return v

    @field_validator("log_level")
    @classmethod
    def _level(cls, v: str) -> str:
        if v.lower() not in ("debug", "info", "warning", "error"):
            raise ValueError(f"log_level must be debug, info, warning or error, not {v!r}")
        return v.lower()

    @model_validator(mode="after")
    def _hysteresis(self) -> Self:
        if self.congestion_clear_delay_ms > self.congestion_onset_delay_ms > 0:
            raise ValueError("congestion_clear_delay_ms must not exceed congestion_onset_delay_ms")
        if self.congestion_clear_depth_bytes > self.congestion_onset_depth_bytes > 0:
            raise ValueError(
                "congestion_clear_depth_bytes must not exceed congestion_onset_depth_bytes"
            )
        return self

    def int_switch_name_map(self) -> dict[int, str]:
        return parse_switch_names(self.int_switch_names)

    def ingest_token(self) -> str:
        """The token from `token`, else the first line of `token_file`."""
        if self.token is not None and self.token.get_secret_value():
            return self.token.get_secret_value()
        if self.token_file is not None:
            try:
                text = self.token_file.read_text().strip()
            except OSError as e:
                raise ConfigError(f"cannot read token_file {self.token_file}: {e}") from e
            if text:
                return text.splitlines()[0].strip()
            raise ConfigError(f"token_file {self.token_file} is empty")
        raise ConfigError(
            "an ingest token is needed: --token-file, P4RELAY_COLLECTOR_TOKEN or the config file"
        )


def parse_switch_names(text: str) -> dict[int, str]:
    """`81=s1,0x52=s2` -> {81: "s1", 82: "s2"}; ids are 32-bit, names unique."""
    out: dict[int, str] = {}
    for item in filter(None, (x.strip() for x in text.split(","))):
        sid, sep, name = (x.strip() for x in item.partition("="))
        try:
            n = int(sid, 0)
        except ValueError:
            n = -1
        if not sep or not name or not 0 <= n < 1 << 32 or len(name) > 128:
            raise ValueError(f"expected ID=NAME (32-bit id, 1-128 character name), got {item!r}")
        if n in out or name in out.values():
            raise ValueError(f"switch id {sid} or name {name!r} given twice")
        out[n] = name
    return out


def parse_listen(text: str) -> tuple[str, int]:
    """`host:port` (IPv6 as `[::1]:9103`) -> (host, port)."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"expected host:port, got {text!r}")
    return host.strip("[]") or "0.0.0.0", int(port)


def load(path: Path | None, overrides: dict[str, object]) -> Settings:
    """Settings from the TOML file, then the environment, then `overrides` (flags)."""
    data: dict[str, object] = {}
    try:
        if path is not None:
            raw = tomllib.loads(path.read_text())
            table = raw.get("collector", raw)
            if not isinstance(table, dict):
                raise ConfigError(f"{path}: [collector] must be a table")
            data = {str(k): v for k, v in table.items()}
        env = Settings()  # the environment over the defaults
        merged = {**data, **env.model_dump(exclude_unset=True)}
        merged.update({k: v for k, v in overrides.items() if v is not None})
        return Settings.model_validate(merged)
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"config file: {e}") from e
    except ValidationError as e:
        raise ConfigError(str(e)) from e
