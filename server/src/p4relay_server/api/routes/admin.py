"""Users, API tokens and switch registration (admin role)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from fastapi import APIRouter, HTTPException, Request, Response, status
from sqlalchemy import select

from p4relay_server.api.deps import AUTH_RESPONSES, DB, Admin, IntId
from p4relay_server.models import ApiToken, Switch, User
from p4relay_server.schemas import api
from p4relay_server.services import accounts

router = APIRouter(tags=["admin"], responses=AUTH_RESPONSES)
_404: dict[int | str, dict[str, Any]] = {404: {"description": "not found"}}
_409: dict[int | str, dict[str, Any]] = {409: {"description": "already exists"}}


@router.get("/users", response_model=list[api.UserOut])
def list_users(db: DB, _: Admin) -> list[User]:
    return list(db.scalars(select(User).order_by(User.username)))


@router.post("/users", response_model=api.UserOut, status_code=201, responses=_409)
def create_user(body: api.UserCreate, db: DB, _: Admin) -> User:
    try:
        return accounts.create_user(db, body.username, body.password, body.role)
    except accounts.Conflict as e:
        raise HTTPException(status.HTTP_409_CONFLICT, str(e)) from e


@router.patch("/users/{user_id}", response_model=api.UserOut, responses=_404)
def update_user(user_id: IntId, body: api.UserUpdate, db: DB, request: Request, _: Admin) -> User:
    """A new password, role or state ends the user's logins (and live streams)."""
    user = db.get(User, user_id)
    if user is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such user")
    user = accounts.update_user(
        db, user, password=body.password, role=body.role, disabled=body.disabled
    )
    request.app.state.live.credentials_changed()
    return user


@router.get("/tokens", response_model=list[api.TokenOut])
def list_tokens(db: DB, _: Admin) -> list[ApiToken]:
    return list(db.scalars(select(ApiToken).order_by(ApiToken.id)))


@router.post("/tokens", response_model=api.TokenCreated, status_code=201)
def create_token(body: api.TokenCreate, db: DB, _: Admin) -> api.TokenCreated:
    if body.expires_at is not None and body.expires_at <= dt.datetime.now(dt.UTC):
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            [
                {
                    "loc": ["body", "expires_at"],
                    "msg": "expires_at must be in the future",
                    "type": "value_error",
                }
            ],
        )
    row, token = accounts.create_token(db, body.name, body.scope, body.expires_at)
    return api.TokenCreated.model_validate(
        {**api.TokenOut.model_validate(row).model_dump(), "token": token}
    )


@router.delete("/tokens/{token_id}", status_code=204, responses=_404)
def revoke_token(token_id: IntId, db: DB, request: Request, _: Admin) -> Response:
    """The token stops working at once; live streams opened with it close (4401)."""
    row = db.get(ApiToken, token_id)
    if row is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such token")
    if row.revoked_at is None:
        row.revoked_at = dt.datetime.now(dt.UTC)
        db.commit()
        request.app.state.live.credentials_changed()
    return Response(status_code=204)


@router.post("/switches", response_model=api.SwitchOut, status_code=201)
def register_switch(body: api.SwitchCreate, db: DB, _: Admin) -> Switch:
    """Register (or update) a switch for the collector to poll."""
    return accounts.register_switch(db, body.name, body.grpc_address, body.device_id)
