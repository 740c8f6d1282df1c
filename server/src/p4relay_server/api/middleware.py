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
    """Refuses bodies over `limit` bytes with 413 before the application parses
    anything: by Content-Length, or, for a body without one (chunked
    uploads), by reading it up to the limit first and handing the application
    the body read."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length: int | None = None
        for name, value in scope["headers"]:
            if name == b"content-length":
                try:
                    length = int(value)
                except ValueError:
                    length = None
        if length is not None:
            if length > self.limit:
                await _send_413(send, self.limit)
                return
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        seen = 0
        while True:
            msg = await receive()
            if msg["type"] != "http.request":  # the client went away
                return
            chunk = msg.get("body", b"")
            seen += len(chunk)
            if seen > self.limit:
                await _send_413(send, self.limit)
                return
            chunks.append(chunk)
            if not msg.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def buffered_receive() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, buffered_receive, send)


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
