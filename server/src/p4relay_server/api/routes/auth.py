"""Login, refresh, logout and who-am-I."""

from __future__ import annotations

import datetime as dt

from fastapi import APIRouter, Depends, HTTPException, Request, Response, status
from sqlalchemy import select

from p4relay_server import security
from p4relay_server.api.deps import AUTH_RESPONSES, DB, Principal, principal
from p4relay_server.models import User
from p4relay_server.schemas import api
from p4relay_server.services import accounts

router = APIRouter(prefix="/auth", tags=["auth"])

# Verified against when the user does not exist, so timing does not reveal names.
_DUMMY_HASH = security.hash_password("p4relay-timing-equaliser")


def _login_response(
    request: Request, user: User, auth_time: dt.datetime | None = None
) -> api.LoginResponse:
    settings = request.app.state.settings
    token, exp = security.issue_jwt(
        user.id,
        user.role,
        user.token_version,
        request.app.state.jwt_key,
        dt.timedelta(minutes=settings.jwt_ttl_minutes),
        auth_time,
    )
    return api.LoginResponse(access_token=token, expires_at=exp, role=api.role_of(user.role))


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
    return _login_response(request, user)


def _user(db: DB, who: Principal) -> User:
    if who.kind != "user":
        raise HTTPException(
            status.HTTP_403_FORBIDDEN,
            "a login token is required (API tokens are revoked by an admin)",
        )
    user = db.get(User, who.id)
    if user is None:
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "no such user")
    return user


@router.post("/refresh", response_model=api.LoginResponse, responses=AUTH_RESPONSES)
def refresh(
    request: Request,
    db: DB,
    who: Principal = Depends(principal),  # noqa: B008
) -> api.LoginResponse:
    """A fresh login token for a valid one, until `jwt_max_login_hours` after the login."""
    user = _user(db, who)
    settings = request.app.state.settings
    login_at = who.login_at or dt.datetime.now(dt.UTC)
    if dt.datetime.now(dt.UTC) - login_at > dt.timedelta(hours=settings.jwt_max_login_hours):
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "login too old to refresh: log in again",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return _login_response(request, user, login_at)


@router.post("/logout", status_code=204, responses=AUTH_RESPONSES)
def logout(
    request: Request,
    db: DB,
    who: Principal = Depends(principal),  # noqa: B008
) -> Response:
    """Ends every login of the calling user (their tokens stop working at once,
    open live streams close with 4401)."""
    user = _user(db, who)
    accounts.end_logins(db, user)
    request.app.state.live.credentials_changed()
    return Response(status_code=204)


@router.get("/me", response_model=api.Me, responses=AUTH_RESPONSES)
def me(who: Principal = Depends(principal)) -> api.Me:  # noqa: B008
    return api.Me(kind=who.kind, id=who.id, name=who.name, role=who.role, scope=who.scope)
