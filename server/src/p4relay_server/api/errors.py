"""Error answers: every failure is a documented status with a `detail`, never
an echo of the input and never a bare 500 page."""

from __future__ import annotations

import structlog
from fastapi import FastAPI, Request, status
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from sqlalchemy.exc import DataError, OperationalError
from starlette.exceptions import HTTPException as StarletteHTTPException

log = structlog.get_logger("p4relay.server")


async def invalid(_: Request, exc: Exception) -> Response:
    """422 in FastAPI's shape, without echoing (possibly huge) input."""
    assert isinstance(exc, RequestValidationError)
    errors = [{k: v for k, v in e.items() if k in ("loc", "msg", "type")} for e in exc.errors()]
    return JSONResponse({"detail": errors}, status_code=status.HTTP_422_UNPROCESSABLE_CONTENT)


async def http_error(request: Request, exc: Exception) -> Response:
    """FastAPI answers an undecodable body with 400; it is invalid input like
    any other, so it gets the documented 422 and a message."""
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 400 and "parsing the body" in str(exc.detail):
        detail = [{"loc": ["body"], "msg": "body is not valid UTF-8 JSON", "type": "json_invalid"}]
        return JSONResponse({"detail": detail}, status_code=422)
    return await http_exception_handler(request, exc)


async def bad_value(request: Request, exc: Exception) -> Response:
    """A value the schema let through but PostgreSQL cannot store or compare."""
    assert isinstance(exc, DataError)
    log.warning("value refused by the database", path=request.url.path, error=str(exc.orig)[:300])
    msg = f"value not accepted: {str(exc.orig).splitlines()[0][:200]}"
    return JSONResponse({"detail": [{"loc": ["body"], "msg": msg, "type": "value_error"}]}, 422)


async def db_down(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, OperationalError)
    log.error("database unavailable", path=request.url.path, error=str(exc.orig)[:500])
    return JSONResponse(
        {"detail": "database unavailable; retry later"},
        status_code=status.HTTP_503_SERVICE_UNAVAILABLE,
        headers={"Retry-After": "5"},
    )


async def crashed(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error", path=request.url.path)
    return JSONResponse({"detail": "internal error (logged)"}, status_code=500)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(DataError, bad_value)
    app.add_exception_handler(OperationalError, db_down)
    app.add_exception_handler(Exception, crashed)
