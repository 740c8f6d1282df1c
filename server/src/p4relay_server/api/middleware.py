"""ASGI middleware: request body limit (413) and request metrics/logging."""

from __future__ import annotations

import json
import re
import time
from typing import Any

import structlog
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from p4relay_server.metrics import HTTP_LATENCY, HTTP_REQUESTS

log = structlog.get_logger("p4relay.http")


class _TooLarge(Exception):
    pass


async def _send_413(send: Send, limit: int) -> None:
    body = json.dumps({"detail": f"request body over the limit of {limit} bytes"}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class BodyLimit:
    """Refuses bodies over `limit` bytes with 413, by Content-Length or while
    streaming (chunked uploads), before the application parses anything."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope["headers"]:
            if name == b"content-length":
                try:
                    too_big = int(value) > self.limit
                except ValueError:
                    too_big = False
                if too_big:
                    await _send_413(send, self.limit)
                    return
        seen = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal seen
            msg = await receive()
            if msg["type"] == "http.request":
                seen += len(msg.get("body", b""))
                if seen > self.limit:
                    raise _TooLarge
            return msg

        async def tracking_send(msg: Message) -> None:
            nonlocal started
            if msg["type"] == "http.response.start":
                started = True
            await send(msg)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except _TooLarge:
            if not started:
                await _send_413(send, self.limit)


class RequestMetrics:
    """Counts and times requests, labelled by the OpenAPI path template (so
    ids do not explode label cardinality); logs 5xx answers."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._templates: list[tuple[re.Pattern[str], str]] | None = None

    def _route(self, scope: Scope) -> str:
        if self._templates is None:
            paths = scope["app"].openapi().get("paths", {})
            self._templates = [
                (re.compile("^" + re.sub(r"\\{[^}]+\\}", "[^/]+", re.escape(p)) + "$"), p)
                for p in sorted(paths, key=len, reverse=True)
            ]
        path = scope["path"]
        for rx, template in self._templates:
            if rx.match(path):
                return template
        return "other"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        t0 = time.perf_counter()
        status: dict[str, Any] = {"code": 500}

        async def capture(msg: Message) -> None:
            if msg["type"] == "http.response.start":
                status["code"] = msg["status"]
            await send(msg)

        try:
            await self.app(scope, receive, capture)
        finally:
            dt = time.perf_counter() - t0
            path = self._route(scope)
            HTTP_REQUESTS.labels(scope["method"], path, str(status["code"])).inc()
            HTTP_LATENCY.labels(scope["method"], path).observe(dt)
            if status["code"] >= 500:
                log.error(
                    "request",
                    method=scope["method"],
                    path=scope["path"],
                    status=status["code"],
                    ms=round(dt * 1000, 2),
                )
            else:
                log.debug(
                    "request",
                    method=scope["method"],
                    path=scope["path"],
                    status=status["code"],
                    ms=round(dt * 1000, 2),
                )
