"""Settings: defaults < TOML file < environment (P4RELAY_SERVER_*) < command-line flags.

The file is named by `--config` or `P4RELAY_SERVER_CONFIG`. Nested sections use `__`
in the environment, e.g. `P4RELAY_SERVER_RETENTION__RAW_HOURS=24`. The former names
(`P4RELAY_<SETTING>`, `P4RELAY_CONFIG`) are still read, with a warning.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from p4relay_runtime.settings import LegacyEnvSource, env_prefix, legacy_env
from pydantic import BaseModel, Field, SecretStr, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

_REPO_ROOT = Path(__file__).resolve().parents[3]
ENV_PREFIX = env_prefix("server")
LEGACY_PREFIX = "P4RELAY_"
CONFIG_ENV = f"{ENV_PREFIX}CONFIG"


def config_path_from_env() -> str | None:
    """The settings file the environment names ($P4RELAY_SERVER_CONFIG, formerly $P4RELAY_CONFIG)."""
    return legacy_env(CONFIG_ENV, f"{LEGACY_PREFIX}CONFIG")


def _default_console_dir() -> Path:
    return _REPO_ROOT / "webui" / "dist"


def _default_migrations_dir() -> Path:
    return _REPO_ROOT / "migrations"


class Limits(BaseModel):
    """Ingest batch limits; over any of them the batch gets 413."""

    max_body_bytes: int = Field(default=8 * 1024 * 1024, description="request body, bytes")
    max_sessions: int = Field(default=1000, description="sessions in one batch")
    max_samples: int = Field(default=20_000, description="quality samples in one batch")
    max_queue_samples: int = Field(default=20_000, description="queue samples in one batch")
    max_events: int = Field(default=2000, description="events in one batch")
    max_paths: int = Field(default=5000, description="INT path records in one batch")


class Retention(BaseModel):
    """Samples older than `raw_hours` are folded into `bucket_seconds` averages;
    those are deleted after `downsampled_days`. Sessions, events and INT path records are kept."""

    raw_hours: float = Field(default=48.0, description="samples kept as sent this long")
    bucket_seconds: int = Field(default=60, description="then averaged into buckets this wide")
    downsampled_days: float = Field(default=30.0, description="buckets deleted after this")
    interval_minutes: float = Field(
        default=60.0, description="`serve` runs retention this often; 0: only the command"
    )


class Homer(BaseModel):
    """Per-leg quality of offloaded calls to a Homer capture server over HEPv3
    (operators' guide: docs/operators.md). Off while `address` is unset."""

    address: str | None = Field(
        default=None, description="HEP capture server, host:port (e.g. homer:9060); unset: off"
    )
    transport: Literal["udp", "tcp"] = Field(default="udp", description="udp or tcp")
    capture_id: int = Field(
        default=2001, ge=0, le=2**32 - 1, description="HEP capture agent id of this server"
    )
    auth_key: SecretStr | None = Field(default=None, description="HEP auth key (chunk 0x000e)")
    interval_s: float = Field(
        default=30.0, gt=0, description="a report per leg this often while a call is up"
    )
    payload: Literal["json", "rtcp"] = Field(
        default="json", description="json: Homer's RTCP JSON; rtcp: binary RTCP RR + XR"
    )
    queue_size: int = Field(
        default=10_000, ge=1, description="reports waiting to be sent; over it they are dropped"
    )

    @field_validator("address")
    @classmethod
    def _host_port(cls, v: str | None) -> str | None:
        if v is not None:
            parse_host_port(v)
        return v


def parse_host_port(address: str) -> tuple[str, int]:
    """`host:port` or `[v6]:port` -> (host, port); ValueError otherwise."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"expected host:port, got {address!r}")
    return host.removeprefix("[").removesuffix("]"), int(port)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="ignore"
    )

    database_url: str = Field(
        default="postgresql+psycopg://p4relay@127.0.0.1:5432/p4relay",
        description="SQLAlchemy URL of the PostgreSQL database",
    )
    db_pool_size: int = Field(default=10, description="database connections kept open")
    host: str = Field(default="127.0.0.1", description="`serve` listen address")
    port: int = Field(default=8000, description="`serve` listen port")
    # Signing key for login tokens. Without one, a random key is made at start
    # (logins then do not survive a restart); there is no built-in default.
    jwt_secret: SecretStr | None = Field(
        default=None, description="signing key of login tokens; none: a random one per start"
    )
    jwt_ttl_minutes: int = Field(
        default=15, ge=1, description="login token lifetime; POST /auth/refresh renews it"
    )
    jwt_max_login_hours: float = Field(
        default=12.0, gt=0, description="refreshes end this long after the login"
    )
    live_recheck_s: float = Field(
        default=30.0, gt=0, description="WS /live re-checks its credentials this often"
    )
    cors_origins: list[str] = Field(
        default_factory=list, description="origins allowed cross-origin requests (JSON list)"
    )
    console_dir: Path = Field(
        default_factory=_default_console_dir, description="the built operator console, served at /"
    )
    migrations_dir: Path = Field(
        default_factory=_default_migrations_dir, description="Alembic migrations (`migrate`)"
    )
    metrics_public: bool = Field(
        default=False, description="serve /metrics without a token (for scrapers on a trusted net)"
    )
    log_level: str = Field(default="info", description="debug, info, warning or error")
    log_json: bool = Field(default=True, description="JSON lines on stderr (else console text)")
    live_queue_size: int = Field(
        default=1000, description="messages a live subscriber may fall behind before it is cut off"
    )
    limits: Limits = Field(default_factory=Limits, description="ingest batch limits (413 over)")
    retention: Retention = Field(default_factory=Retention, description="sample retention")
    homer: Homer = Field(default_factory=Homer, description="call quality to Homer (HEPv3)")

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [
            init_settings,
            env_settings,
            LegacyEnvSource(settings_cls, LEGACY_PREFIX, ENV_PREFIX, "__"),
        ]
        path = config_path_from_env()
        if path:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=Path(path)))
        return tuple(sources)


def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings:
    """Settings from file (`config_file` or $P4RELAY_SERVER_CONFIG), env, then overrides."""
    if config_file is not None:
        if not config_file.is_file():
            raise FileNotFoundError(f"config file not found: {config_file}")
        os.environ[CONFIG_ENV] = str(config_file)
    elif (path := config_path_from_env()) and not Path(path).is_file():
        raise FileNotFoundError(f"config file not found: {path} (from the environment)")
    return Settings(**{k: v for k, v in overrides.items() if v is not None})
