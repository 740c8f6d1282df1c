"""The few server API calls the scenarios need (sessions, queues, events)."""

from __future__ import annotations

from typing import Any

import httpx


class ServerApi:
    def __init__(self, base_url: str, token: str, timeout_s: float = 10.0) -> None:
        self.http = httpx.Client(
            base_url=base_url, headers={"Authorization": f"Bearer {token}"}, timeout=timeout_s
        )

    @classmethod
    def login(cls, base_url: str, username: str, password: str) -> ServerApi:
        r = httpx.post(
            f"{base_url}/api/v1/auth/login",
            json={"username": username, "password": password},
            timeout=10.0,
        )
        r.raise_for_status()
        return cls(base_url, r.json()["access_token"])

    def _get(self, path: str, **params: Any) -> Any:
        r = self.http.get(path, params={k: v for k, v in params.items() if v is not None})
        r.raise_for_status()
        return r.json()

    def sessions(self, limit: int = 500) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self._get("/api/v1/sessions", limit=limit)["items"]
        return items

    def all_sessions(self, **filters: Any) -> list[dict[str, Any]]:
        """Every session the filters select, following `next_cursor` to the last page."""
        out: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            page = self._get("/api/v1/sessions", limit=500, cursor=cursor, **filters)
            out += page["items"]
            cursor = page.get("next_cursor")
            if not cursor:
                return out

    def events_since(self, type_: str, since: str) -> list[dict[str, Any]]:
        """Every event of one type since `since` (ISO 8601), every page."""
        out: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            page = self._get("/api/v1/events", type=type_, since=since, limit=1000, cursor=cursor)
            out += page["items"]
            cursor = page.get("next_cursor")
            if not cursor:
                return out

    def paths(self, addr: str, since: str | None = None) -> list[dict[str, Any]]:
        """INT path records of flows from or to `addr`."""
        out: list[dict[str, Any]] = self._get("/api/v1/paths", addr=addr, since=since, limit=1000)
        return out

    def hop_queues(self, since: str) -> list[dict[str, Any]]:
        """Every switch's queue series (INT hops and polled ports) since `since`."""
        out: list[dict[str, Any]] = self._get("/api/v1/queues", **{"from": since})
        return out

    def session(self, session_id: int) -> dict[str, Any]:
        out: dict[str, Any] = self._get(f"/api/v1/sessions/{session_id}")
        return out

    def switches(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = self._get("/api/v1/switches")
        return out

    def queues(self, switch_id: int) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = self._get(f"/api/v1/switches/{switch_id}/queues")
        return out

    def events(self, type_: str | None = None, limit: int = 1000) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self._get("/api/v1/events", type=type_, limit=limit)["items"]
        return items

    def register_switch(self, name: str, grpc_address: str) -> dict[str, Any]:
        r = self.http.post("/api/v1/switches", json={"name": name, "grpc_address": grpc_address})
        r.raise_for_status()
        out: dict[str, Any] = r.json()
        return out

    def close(self) -> None:
        self.http.close()
