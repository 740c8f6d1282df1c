"""Request dependencies: settings, database session, who is calling."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from fastapi import Depends, HTTPException, Path, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from p4relay_server import security
from p4relay_server.config import Settings
from p4relay_server.models import ApiToken, User
from p4relay_server.schemas.api import role_of

bearer = HTTPBearer(auto_error=False, description="login JWT or API token (p4r_…)")


@dataclass(frozen=True)
class Principal:
    kind: Literal["user", "token"]
    id: int
    name: str
    role: Literal["viewer", "operator", "admin"] | None = None
    scope: Literal["ingest", "read"] | None = None
    login_at: dt.datetime | None = None  # users: when they logged in (refreshes keep it)

    @property
    def can_read(self) -> bool:
        return self.kind == "user" or self.scope == "read"

    @property
    def is_admin(self) -> bool:
        return self.kind == "user" and self.role == "admin"

    @property
    def is_operator(self) -> bool:
        """May drain and take switches and agents out of service (operators and admins)."""
        return self.kind == "user" and self.role in ("operator", "admin")

    @property
    def can_ingest(self) -> bool:
        return self.kind == "token" and self.scope == "ingest"


def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def get_db(request: Request) -> Iterator[Session]:
    maker: sessionmaker[Session] = request.app.state.sessionmaker
    with maker() as db:
        yield db


DB = Annotated[Session, Depends(get_db)]

_UNAUTHORIZED = HTTPException(
    status.HTTP_401_UNAUTHORIZED,
    "missing, invalid or expired credentials",
    headers={"WWW-Authenticate": "Bearer"},
)


def resolve_token(db: Session, token: str, jwt_key: str) -> Principal | None:
    """Who a bearer token (JWT or API token) belongs to; None if nobody."""
    now = dt.datetime.now(dt.UTC)
    parts = security.split_api_token(token)
    if parts is not None:
        prefix, secret = parts
        row = db.scalar(select(ApiToken).where(ApiToken.prefix == prefix))
        if (
            row is None
            or not security.secret_matches(secret, row.secret_hash)
            or row.revoked_at is not None
            or (row.expires_at is not None and row.expires_at <= now)
        ):
            return None
        # Bounded write load: last use is recorded at most once a minute.
        if row.last_used_at is None or now - row.last_used_at > dt.timedelta(minutes=1):
            db.execute(update(ApiToken).where(ApiToken.id == row.id).values(last_used_at=now))
            db.commit()
        scope: Literal["ingest", "read"] = "ingest" if row.scope == "ingest" else "read"
        return Principal("token", row.id, row.name, scope=scope)
    claims = security.decode_jwt(token, jwt_key)
    if claims is None:
        return None
    user = db.get(User, claims.user_id)
    # A logout or a change of password, role or state bumps the version: every
    # login issued before it ends.
    if user is None or user.disabled or user.token_version != claims.version:
        return None
    role = role_of(user.role)
    return Principal("user", user.id, user.username, role=role, login_at=claims.auth_time)


def principal(
    request: Request,
    db: DB,
    creds: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Principal:
    if creds is None or creds.scheme.lower() != "bearer":
        raise _UNAUTHORIZED
    who = resolve_token(db, creds.credentials, request.app.state.jwt_key)
    if who is None:
        raise _UNAUTHORIZED
    return who


def metrics_reader(
    request: Request,
    db: DB,
    creds: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> None:
    """/metrics: a read credential (401 otherwise), unless `metrics_public`."""
    if get_settings(request).metrics_public:
        return
    who = principal(request, db, creds)
    if not who.can_read:
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "a read token is required",
            headers={"WWW-Authenticate": "Bearer"},
        )


# Role checks are async: FastAPI runs sync dependencies in the threadpool,
# a hop per dependency that costs more than the check itself.
async def reader(who: Annotated[Principal, Depends(principal)]) -> Principal:
    if not who.can_read:
        raise HTTPException(status.HTTP_403_FORBIDDEN, "this token may only ingest")
    return who


async def admin(who: Annotated[Principal, Depends(principal)]) -> Principal:
    if not who.is_admin:
        raise HTTPException(status.HTTP_403_FORBIDDEN, "admin role required")
    return who


async def operator(who: Annotated[Principal, Depends(principal)]) -> Principal:
    if not who.is_operator:
        raise HTTPException(status.HTTP_403_FORBIDDEN, "operator role required")
    return who


async def ingester(who: Annotated[Principal, Depends(principal)]) -> Principal:
    if not who.can_ingest:
        raise HTTPException(
            status.HTTP_403_FORBIDDEN, "an API token with scope 'ingest' is required"
        )
    return who


Reader = Annotated[Principal, Depends(reader)]
Admin = Annotated[Principal, Depends(admin)]
Operator = Annotated[Principal, Depends(operator)]
Ingester = Annotated[Principal, Depends(ingester)]

# Documented error answers, so clients (and schemathesis) know every status.
AUTH_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"description": "missing or invalid credentials"},
    403: {"description": "credentials lack the needed role or scope"},
    422: {"description": "invalid parameters or body"},
}

# Path ids: out-of-range numbers are invalid input (422), not a database error.
IntId = Annotated[int, Path(ge=1, le=2**31 - 1)]
BigId = Annotated[int, Path(ge=1, le=2**63 - 1)]
