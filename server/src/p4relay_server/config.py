"""Settings: defaults < TOML file < environment (P4RELAY_*) < command-line flags.

The file is named by `--config` or `P4RELAY_CONFIG`. Nested sections use `__`
in the environment, e.g. `P4RELAY_RETENTION__RAW_HOURS=24`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, SecretStr
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

_REPO_ROOT = Path(__file__).resolve().parents[3]


def _default_console_dir() -> Path:
    return _REPO_ROOT / "webui" / "dist"


def _default_migrations_dir() -> Path:
    return _REPO_ROOT / "migrations"


class Limits(BaseModel):
    """Ingest batch limits; over any of them the batch gets 413."""

    max_body_bytes: int = 8 * 1024 * 1024
    max_sessions: int = 1000
    max_samples: int = 20_000
    max_queue_samples: int = 20_000
    max_events: int = 2000
    max_paths: int = 5000


class Retention(BaseModel):
    """Samples older than `raw_hours` are folded into `bucket_seconds` averages;
    those are deleted after `downsampled_days`. Sessions, events and INT path records are kept."""

    raw_hours: float = 48.0
    bucket_seconds: int = 60
    downsampled_days: float = 30.0
    interval_minutes: float = 60.0  # `serve` runs retention this often; 0: only the command


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="P4RELAY_", env_nested_delimiter="__", extra="ignore"
    )

    database_url: str = "postgresql+psycopg://p4relay@127.0.0.1:5432/p4relay"
    db_pool_size: int = 10
    host: str = "127.0.0.1"
    port: int = 8000
    # Signing key for login tokens. Without one, a random key is made at start
    # (logins then do not survive a restart); there is no built-in default.
    jwt_secret: SecretStr | None = None
    jwt_ttl_minutes: int = Field(
        default=15, ge=1, description="login token lifetime; POST /auth/refresh renews it"
    )
    jwt_max_login_hours: float = Field(
        default=12.0, gt=0, description="refreshes end this long after the login"
    )
    live_recheck_s: float = Field(
        default=30.0, gt=0, description="WS /live re-checks its credentials this often"
    )
    cors_origins: list[str] = Field(default_factory=list)
    console_dir: Path = Field(default_factory=_default_console_dir)
    migrations_dir: Path = Field(default_factory=_default_migrations_dir)
    metrics_public: bool = Field(
        default=False, description="serve /metrics without a token (for scrapers on a trusted net)"
    )
    log_level: str = "info"
    log_json: bool = True
    live_queue_size: int = 1000
    limits: Limits = Field(default_factory=Limits)
    retention: Retention = Field(default_factory=Retention)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        path = os.environ.get("P4RELAY_CONFIG")
        if path:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=Path(path)))
        return tuple(sources)


def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings:
    """Settings from file (`config_file` or $P4RELAY_CONFIG), env, then overrides."""
    if config_file is not None:
        if not config_file.is_file():
            raise FileNotFoundError(f"config file not found: {config_file}")
        os.environ["P4RELAY_CONFIG"] = str(config_file)
    elif (path := os.environ.get("P4RELAY_CONFIG")) and not Path(path).is_file():
        raise FileNotFoundError(f"config file not found: {path} (from P4RELAY_CONFIG)")
    return Settings(**{k: v for k, v in overrides.items() if v is not None})
