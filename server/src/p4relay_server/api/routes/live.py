"""WS /live: session, sample, queue and event changes as they are stored.

Browsers cannot set headers on a WebSocket, so the token comes as the
`token` query parameter (a login JWT or a read token). Messages are JSON:
`{"topic": "sessions"|"samples"|"queues"|"events", "items": [...]}`; the first
message is `{"topic": "hello", "topics": [...]}`. A subscriber that falls too
far behind gets `{"topic": "overflow"}` and is closed with code 1013: re-fetch
and reconnect. The credentials are checked again every `live_recheck_s` and at
once when a token is revoked or a user's logins end: a stream whose
credentials no longer hold is closed with code 4401 (log in again).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from fastapi import APIRouter, WebSocket, WebSocketDisconnect, status
from fastapi.concurrency import run_in_threadpool

from p4relay_server.api.deps import Principal, resolve_token
from p4relay_server.live import TOPICS, LiveHub, Subscriber

router = APIRouter(tags=["live"])

CLOSE_UNAUTHORIZED = 4401  # application close code: credentials no longer valid


@router.websocket("/live")
async def live(
    ws: WebSocket, token: str = "", topics: str = "sessions,samples,queues,events"
) -> None:
    wanted = {t.strip() for t in topics.split(",") if t.strip()}
    if not wanted <= TOPICS:
        await ws.close(
            code=status.WS_1008_POLICY_VIOLATION,
            reason=f"unknown topics: {sorted(wanted - TOPICS)}",
        )
        return

    async def allowed() -> bool:
        def auth() -> Principal | None:
            with ws.app.state.sessionmaker() as db:
                return resolve_token(db, token, ws.app.state.jwt_key)

        who = await run_in_threadpool(auth) if token else None
        return who is not None and who.can_read

    if not await allowed():
        await ws.close(
            code=status.WS_1008_POLICY_VIOLATION, reason="a read token or login is required"
        )
        return
    await ws.accept()
    hub: LiveHub = ws.app.state.live
    sub = hub.subscribe(wanted)
    overflow = asyncio.create_task(sub.closed.wait())
    # Reading notices the client going away while we wait for data.
    gone = asyncio.create_task(_drain(ws))
    revoked = asyncio.create_task(
        _watch_credentials(sub, allowed, ws.app.state.settings.live_recheck_s)
    )
    try:
        await ws.send_json({"topic": "hello", "topics": sorted(sub.topics)})
        while True:
            get = asyncio.create_task(sub.queue.get())
            done, _ = await asyncio.wait(
                {get, overflow, gone, revoked}, return_when=asyncio.FIRST_COMPLETED
            )
            if get in done:
                await ws.send_json(get.result())
                continue
            get.cancel()
            if overflow in done:
                await ws.send_json({"topic": "overflow"})
                await ws.close(code=status.WS_1013_TRY_AGAIN_LATER, reason="subscriber fell behind")
            elif revoked in done:
                await ws.close(code=CLOSE_UNAUTHORIZED, reason="credentials revoked or expired")
            break
    except WebSocketDisconnect:
        pass
    finally:
        hub.unsubscribe(sub)
        overflow.cancel()
        gone.cancel()
        revoked.cancel()


async def _watch_credentials(
    sub: Subscriber, allowed: Callable[[], Awaitable[bool]], every_s: float
) -> None:
    """Returns when the stream's credentials no longer hold: checked every
    `every_s` and whenever the hub says some credential changed."""
    while True:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(sub.recheck.wait(), timeout=every_s)
        sub.recheck.clear()
        if not await allowed():
            return


async def _drain(ws: WebSocket) -> None:
    with contextlib.suppress(WebSocketDisconnect, RuntimeError):
        while True:
            await ws.receive_text()
