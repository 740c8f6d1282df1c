"""Login and who-am-I."""

from __future__ import annotations

import datetime as dt

from fastapi import APIRouter, Depends, HTTPException, Request, status
from sqlalchemy import select

from p4relay_server import security
from p4relay_server.api.deps import AUTH_RESPONSES, DB, Principal, principal
from p4relay_server.models import User
from p4relay_server.schemas import api

router = APIRouter(prefix="/auth", tags=["auth"])

# Verified against when the user does not exist, so timing does not reveal names.
_DUMMY_HASH = security.hash_password("p4relay-timing-equaliser")


@router.post(
    "/login",
    response_model=api.LoginResponse,
    responses={
        401: {"description": "wrong username or password"},
        422: {"description": "invalid body"},
    },
)
def login(body: api.LoginRequest, db: DB, request: Request) -> api.LoginResponse:
    user = db.scalar(select(User).where(User.username == body.username))
    ok = security.verify_password(user.password_hash if user else _DUMMY_HASH, body.password)
    if user is None or not ok or user.disabled:
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "wrong username or password")
    settings = request.app.state.settings
    token, exp = security.issue_jwt(
        user.id,
        user.role,
        request.app.state.jwt_key,
        dt.timedelta(minutes=settings.jwt_ttl_minutes),
    )
    return api.LoginResponse(
        access_token=token, expires_at=exp, role="admin" if user.role == "admin" else "viewer"
    )


@router.get("/me", response_model=api.Me, responses=AUTH_RESPONSES)
def me(who: Principal = Depends(principal)) -> api.Me:  # noqa: B008
    return api.Me(kind=who.kind, id=who.id, name=who.name, role=who.role, scope=who.scope)
