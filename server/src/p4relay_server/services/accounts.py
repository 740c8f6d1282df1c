"""Users, API tokens and switch registration (shared by the admin API and the CLI)."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.orm import Session

from p4relay_server import security
from p4relay_server.models import ApiToken, Switch, User


class Conflict(ValueError):
    pass


def create_user(db: Session, username: str, password: str, role: str) -> User:
    security.check_password_strength(password)
    if db.scalar(select(User.id).where(User.username == username)) is not None:
        raise Conflict(f"user {username!r} already exists")
    user = User(username=username, password_hash=security.hash_password(password), role=role)
    db.add(user)
    db.commit()
    db.refresh(user)
    return user


def end_logins(db: Session, user: User) -> None:
    """Every login JWT issued to `user` so far stops being valid."""
    db.execute(update(User).where(User.id == user.id).values(token_version=User.token_version + 1))
    db.commit()


def update_user(
    db: Session,
    user: User,
    *,
    password: str | None = None,
    role: str | None = None,
    disabled: bool | None = None,
) -> User:
    """Changes a user; a new password, role or state ends the user's logins."""
    changed = False
    if password is not None:
        user.password_hash = security.hash_password(password)
        changed = True
    if role is not None and role != user.role:
        user.role = role
        changed = True
    if disabled is not None and disabled != user.disabled:
        user.disabled = disabled
        changed = True
    if changed:
        user.token_version += 1
    db.commit()
    db.refresh(user)
    return user


def create_token(
    db: Session, name: str, scope: str, expires_at: dt.datetime | None = None
) -> tuple[ApiToken, str]:
    new = security.new_api_token()
    row = ApiToken(
        name=name,
        prefix=new.prefix,
        secret_hash=new.secret_hash,
        scope=scope,
        expires_at=expires_at,
    )
    db.add(row)
    db.commit()
    db.refresh(row)
    return row, new.token


def register_switch(db: Session, name: str, grpc_address: str, device_id: int = 0) -> Switch:
    """Create or update a switch the collector polls (by name)."""
    ins = pg_insert(Switch).values(name=name, grpc_address=grpc_address, device_id=device_id)
    db.execute(
        ins.on_conflict_do_update(
            index_elements=[Switch.name],
            set_={"grpc_address": ins.excluded.grpc_address, "device_id": ins.excluded.device_id},
        )
    )
    db.commit()
    sw = db.scalar(select(Switch).where(Switch.name == name))
    assert sw is not None
    db.refresh(sw)
    return sw
