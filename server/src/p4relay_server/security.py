"""Passwords (argon2id), login tokens (JWT HS256) and scoped API tokens.

API tokens look like `p4r_<prefix>_<secret>`; the prefix finds the row, only
SHA-256(secret) is stored (the secret has 256 bits of entropy, so a slow hash
adds nothing), compared in constant time.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import secrets
from dataclasses import dataclass

import jwt
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

_hasher = PasswordHasher()
TOKEN_PREFIX = "p4r_"
JWT_ALG = "HS256"
MIN_PASSWORD_LEN = 10


def hash_password(password: str) -> str:
    return _hasher.hash(password)


def verify_password(password_hash: str, password: str) -> bool:
    try:
        return _hasher.verify(password_hash, password)
    except (VerificationError, InvalidHashError):
        return False


def check_password_strength(password: str) -> None:
    if len(password) < MIN_PASSWORD_LEN:
        raise ValueError(f"password must have at least {MIN_PASSWORD_LEN} characters")


@dataclass(frozen=True)
class NewApiToken:
    token: str  # shown once to the operator
    prefix: str
    secret_hash: str


def new_api_token() -> NewApiToken:
    prefix = secrets.token_hex(6)
    secret = secrets.token_urlsafe(32)
    return NewApiToken(f"{TOKEN_PREFIX}{prefix}_{secret}", prefix, hash_secret(secret))


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def split_api_token(token: str) -> tuple[str, str] | None:
    """(prefix, secret) of an API token, or None if it is not one."""
    if not token.startswith(TOKEN_PREFIX):
        return None
    prefix, sep, secret = token[len(TOKEN_PREFIX) :].partition("_")
    if not sep or not prefix or not secret:
        return None
    return prefix, secret


def secret_matches(secret: str, secret_hash: str) -> bool:
    return hmac.compare_digest(hash_secret(secret), secret_hash)


@dataclass(frozen=True)
class LoginClaims:
    """What a valid login JWT says: whose it is, the user's token version it
    was issued under (a password, role or disabled change, or a logout, bumps
    the version and so ends every older login), and when the login happened
    (refreshes keep it, so a login cannot be stretched forever)."""

    user_id: int
    version: int
    auth_time: dt.datetime


def issue_jwt(
    user_id: int,
    role: str,
    version: int,
    key: str,
    ttl: dt.timedelta,
    auth_time: dt.datetime | None = None,
) -> tuple[str, dt.datetime]:
    now = dt.datetime.now(dt.UTC)
    exp = now + ttl
    claims = {
        "sub": str(user_id),
        "role": role,
        "ver": version,
        "iat": now,
        "exp": exp,
        "auth_time": int((auth_time or now).timestamp()),
    }
    return jwt.encode(claims, key, algorithm=JWT_ALG), exp


def decode_jwt(token: str, key: str) -> LoginClaims | None:
    """The claims of a valid, unexpired login token; None otherwise."""
    try:
        claims = jwt.decode(
            token,
            key,
            algorithms=[JWT_ALG],
            options={"require": ["sub", "exp", "ver", "auth_time"]},
        )
        ver, auth_time = claims["ver"], claims["auth_time"]
        if not isinstance(ver, int) or not isinstance(auth_time, int):
            return None
        return LoginClaims(int(claims["sub"]), ver, dt.datetime.fromtimestamp(auth_time, dt.UTC))
    except (jwt.PyJWTError, ValueError, KeyError, OverflowError, OSError):
        return None
