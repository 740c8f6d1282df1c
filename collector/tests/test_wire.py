"""The collector's view of the ingest API agrees with the server's published
OpenAPI schema (server/openapi.json): every field it sends exists there with a
compatible type, every event type it raises is one the server accepts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypedDict, cast, get_args

import pytest
from p4relay_collector.wire import (
    CollectorEventType,
    Endpoint,
    Event,
    IngestBatch,
    PathHop,
    PathRecord,
    PortInfo,
    QueueSample,
    SwitchInfo,
)
from pydantic import BaseModel

OPENAPI = Path(__file__).resolve().parents[2] / "server/openapi.json"


class _Schema(TypedDict, total=False):
    properties: dict[str, dict[str, object]]
    required: list[str]
    enum: list[str]


def schemas() -> dict[str, _Schema]:
    doc = json.loads(OPENAPI.read_text())
    return cast(dict[str, _Schema], doc["components"]["schemas"])


def _types(prop: dict[str, object]) -> set[str]:
    """JSON types a property accepts (following anyOf and $ref to objects)."""
    out: set[str] = set()
    for alt in cast(list[dict[str, object]], prop.get("anyOf", [prop])):
        if "$ref" in alt:
            out.add("object")
        elif isinstance(alt.get("type"), str):
            out.add(cast(str, alt["type"]))
        elif "const" in alt or "enum" in alt:
            out.add("string")
    return out


@pytest.mark.parametrize(
    ("model", "server_name"),
    [
        (IngestBatch, "IngestBatch"),
        (SwitchInfo, "SwitchInfo"),
        (PortInfo, "PortInfo"),
        (QueueSample, "QueueSampleIn"),
        (Event, "EventIn"),
        (PathRecord, "PathRecordIn"),
        (PathHop, "PathHopIn"),
        (Endpoint, "Endpoint"),
    ],
)
def test_fields_exist_on_the_server_with_compatible_types(
    model: type[BaseModel], server_name: str
) -> None:
    server = schemas()[server_name]
    props = server.get("properties", {})
    ours = model.model_json_schema()["properties"]
    for name, prop in ours.items():
        assert name in props, f"{server_name} has no field {name!r}"
        mine = _types(prop) - {"null"}
        theirs = _types(props[name]) - {"null"}
        if "number" in theirs:
            theirs.add("integer")
        assert mine <= theirs, f"{server_name}.{name}: we send {mine}, server takes {theirs}"
    for name in server.get("required", []):
        assert name in ours, f"{server_name} requires {name!r}, which we do not send"


def test_event_types_are_the_servers() -> None:
    ev = schemas()["EventIn"].get("properties", {})["type"]
    accepted = set(cast(list[str], ev.get("enum", [])))
    assert accepted, "EventIn.type has no enum in the server's schema"
    assert set(get_args(CollectorEventType)) <= accepted
