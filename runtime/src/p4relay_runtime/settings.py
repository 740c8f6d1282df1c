"""One configuration mechanism for every component (pydantic-settings): defaults <
TOML file < environment < flags, the environment named `P4RELAY_<COMPONENT>_<SETTING>`
(nested keys after `__`). A name a component used before is still read, below the
new one, with a warning naming its replacement. `reference_table` writes a
component's settings as the Markdown table its README carries
(scripts/settings_reference.py keeps them current).
"""

from __future__ import annotations

import argparse
import os
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import UnionType
from typing import Any, get_args

from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined
from pydantic_settings import BaseSettings, EnvSettingsSource

ROOT = Path(__file__).resolve().parents[3]


def env_prefix(component: str) -> str:
    """`P4RELAY_<COMPONENT>_` for a component name (`rtpagent` -> `P4RELAY_RTPAGENT_`)."""
    return f"P4RELAY_{component.upper()}_"


def deprecated_name(old: str, new: str) -> None:
    # FutureWarning: shown by default (a DeprecationWarning is hidden outside __main__),
    # which is what an operator running the daemon needs to see.
    warnings.warn(
        f"{old} is deprecated and will be removed: use {new}", FutureWarning, stacklevel=3
    )


def legacy_env(name: str, old: str) -> str | None:
    """The environment variable `name`, else the older `old` (with a warning)."""
    if name in os.environ:
        return os.environ[name]
    if old in os.environ:
        deprecated_name(old, name)
        return os.environ[old]
    return None


class LegacyEnvSource(EnvSettingsSource):
    """The environment under a component's former prefix (`RTPAGENT_`, `P4RELAY_`),
    each variable found named in a warning with its `P4RELAY_<COMPONENT>_` name.
    Placed below the current environment source: the new name wins."""

    def __init__(
        self,
        settings_cls: type[BaseSettings],
        old_prefix: str,
        new_prefix: str,
        nested_delimiter: str | None = None,
    ) -> None:
        super().__init__(settings_cls, env_prefix=old_prefix, env_nested_delimiter=nested_delimiter)
        self.old_prefix = old_prefix
        self.new_prefix = new_prefix
        self.delimiter = nested_delimiter

    def __call__(self) -> dict[str, Any]:
        data = super().__call__()
        if data:
            fields = set(self.settings_cls.model_fields)
            for var in sorted(os.environ):
                if not var.upper().startswith(self.old_prefix):
                    continue
                rest = var[len(self.old_prefix) :]
                head = rest.split(self.delimiter)[0] if self.delimiter else rest
                if head.lower() in fields and head.lower() in data:
                    deprecated_name(var, self.new_prefix + rest)
        return data


# --- the reference table ---------------------------------------------------------------


def _default(f: FieldInfo) -> str:
    if f.default_factory is not None:
        value = f.default_factory()  # type: ignore[call-arg]  # no validated-data factories here
    elif f.default is PydanticUndefined:
        return "(required)"
    else:
        value = f.default
    if value is None or (isinstance(value, SecretStr) and not value.get_secret_value()):
        return "—"
    if isinstance(value, SecretStr):
        return "(secret)"
    if isinstance(value, Path) and value.is_relative_to(ROOT):
        return f"`{value.relative_to(ROOT)}` in the checkout"
    if isinstance(value, BaseModel):
        return "see below"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, list | tuple) and not value:
        return "`[]`"
    if value == "":
        return '`""`'
    return f"`{value}`"


def _describe(f: FieldInfo) -> str:
    return " ".join((f.description or "").split()).replace("|", "\\|")


def _model(annotation: Any) -> type[BaseModel] | None:
    return (
        annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
    )


def _rows(
    model: type[BaseModel], prefix: str, key: str, env: str, delimiter: str | None
) -> Iterator[tuple[str, str, str, str]]:
    for name, f in model.model_fields.items():
        sub = _model(f.annotation)
        toml_key, var = f"{key}{name}", f"{env}{name.upper()}"
        if sub is not None and delimiter:
            yield from _rows(sub, prefix, f"{toml_key}.", f"{var}{delimiter}", delimiter)
            continue
        yield toml_key, var, _default(f), _describe(f)


def reference_table(
    settings_cls: type[BaseSettings], *, flags: bool = False, delimiter: str | None = None
) -> str:
    """Every setting as a Markdown table: its TOML key, environment variable (and
    flag, where each setting is one), default and description."""
    prefix = str(settings_cls.model_config.get("env_prefix") or "")
    head = ["setting (TOML)", "environment"] + (["flag"] if flags else []) + ["default", "meaning"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key, var, default, meaning in _rows(settings_cls, prefix, "", prefix, delimiter):
        cells = [f"`{key}`", f"`{var}`"]
        if flags:
            cells.append(f"`--{key.replace('_', '-')}`")
        lines.append("| " + " | ".join([*cells, default, meaning]) + " |")
    return "\n".join(lines) + "\n"


def _scalar_kind(annotation: object) -> type:
    """The scalar type behind `X | None` (str for anything else)."""
    if isinstance(annotation, UnionType):
        inner = [a for a in get_args(annotation) if a is not type(None)]
        annotation = inner[0] if len(inner) == 1 else str
    for t in (bool, int, float):
        if annotation is t:
            return t
    return str


def add_setting_flags(
    ap: argparse.ArgumentParser, settings_cls: type[BaseSettings], names: Iterable[str]
) -> None:
    """A `--the-name` flag for each named setting, its description and default
    as help; booleans take `--no-…` too. Unset flags stay None, so the file and
    the environment keep their say."""
    for name in names:
        field = settings_cls.model_fields[name]
        flag = "--" + name.replace("_", "-")
        default = field.get_default(call_default_factory=True)
        help_ = f"{field.description or ''} (default: {default!r})"
        kind = _scalar_kind(field.annotation)
        if kind is bool:
            ap.add_argument(
                flag, dest=name, action=argparse.BooleanOptionalAction, default=None, help=help_
            )
        else:
            ap.add_argument(flag, dest=name, type=kind, default=None, help=help_)
