"""Typed errors: what a caller can act on (leave the call on RTPProxy, retry, ...).

A failed Write or Read is decided from its per-update `bfrt_proto.Error`
details (the `grpc-status-details-bin` trailer, a `google.rpc.Status`), as
bf_switchd reports them: the call itself fails with UNKNOWN "Write Error
Status", and the details list the batch's updates in order (successes with
code 0), up to the last one that failed. The call's own code decides only
when there are no details (transport errors, an unbound client).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, cast

import grpc
import grpc.aio
from google.rpc import status_pb2

from p4relay_switch.proto import bfruntime_pb2 as pb


class SwitchError(Exception):
    """Base of every error this package raises."""

    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(self, message: str, *, code: grpc.StatusCode | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


class SchemaError(SwitchError):
    """A name is not in the switch's bfrt.json, or the schema is malformed."""

    code = grpc.StatusCode.INVALID_ARGUMENT


class EncodeError(SwitchError):
    """A value does not fit its field (width, type) — caught before it is sent."""

    code = grpc.StatusCode.INVALID_ARGUMENT


class SwitchUnavailableError(SwitchError):
    """The switch cannot be reached (down, restarting, deadline exceeded)."""

    code = grpc.StatusCode.UNAVAILABLE


class NotBoundError(SwitchError):
    """Read/Write before SetForwardingPipelineConfig(BIND), or the program is absent."""

    code = grpc.StatusCode.FAILED_PRECONDITION


@dataclass(frozen=True, slots=True)
class UpdateError:
    """One failed update of a batch (index into the batch, gRPC code, message)."""

    index: int
    code: grpc.StatusCode
    message: str


class WriteError(SwitchError):
    """A Write failed; ``errors`` lists each failed update when the switch said which."""

    def __init__(
        self,
        message: str,
        *,
        code: grpc.StatusCode | None = None,
        errors: tuple[UpdateError, ...] = (),
    ) -> None:
        super().__init__(message, code=code)
        self.errors = errors


class TableFullError(WriteError):
    """RESOURCE_EXHAUSTED: no room in a table; leave the call on RTPProxy."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class EntryExistsError(WriteError):
    """ALREADY_EXISTS: an INSERT for a key that is present."""

    code = grpc.StatusCode.ALREADY_EXISTS


class NotFoundError(WriteError):
    """NOT_FOUND: MODIFY/DELETE/read of a key that is absent."""

    code = grpc.StatusCode.NOT_FOUND


class InvalidArgumentError(WriteError):
    """INVALID_ARGUMENT (or OUT_OF_RANGE, UNIMPLEMENTED): the switch rejected the request."""

    code = grpc.StatusCode.INVALID_ARGUMENT


_BY_CODE: dict[grpc.StatusCode, type[WriteError]] = {
    grpc.StatusCode.RESOURCE_EXHAUSTED: TableFullError,
    grpc.StatusCode.ALREADY_EXISTS: EntryExistsError,
    grpc.StatusCode.NOT_FOUND: NotFoundError,
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgumentError,
    grpc.StatusCode.OUT_OF_RANGE: InvalidArgumentError,
    grpc.StatusCode.UNIMPLEMENTED: InvalidArgumentError,
}

_CODE_BY_NUMBER: dict[int, grpc.StatusCode] = {c.value[0]: c for c in grpc.StatusCode}


def status_code(number: int) -> grpc.StatusCode:
    """google.rpc.Code number -> grpc.StatusCode (UNKNOWN for numbers outside the enum)."""
    return _CODE_BY_NUMBER.get(number, grpc.StatusCode.UNKNOWN)


def write_error(
    code: grpc.StatusCode, message: str, errors: tuple[UpdateError, ...] = ()
) -> SwitchError:
    """The typed error for a failed Write: the first failed update's code decides."""
    if errors:
        code = errors[0].code
        message = f"{message}: update {errors[0].index}: {errors[0].message}"
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        return SwitchUnavailableError(message, code=code)
    if code == grpc.StatusCode.FAILED_PRECONDITION:
        return NotBoundError(message, code=code)
    cls = _BY_CODE.get(code, WriteError)
    return cls(message, code=code, errors=errors)


_UNAVAILABLE = (
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.CANCELLED,
)


class FailedCall(Protocol):
    """What a failed call tells, blocking (grpc.Call) or asyncio (AioRpcError)."""

    def code(self) -> grpc.StatusCode: ...

    def details(self) -> str | None: ...

    def trailing_metadata(self) -> Any: ...


def update_errors(e: FailedCall, n_updates: int) -> tuple[UpdateError, ...]:
    """The failed updates named in the call's `bfrt_proto.Error` details.

    Details come in update order from the first update; a list longer than
    the batch cannot be matched to updates (index -1)."""
    raw: bytes | None = None
    for k, v in e.trailing_metadata() or ():
        if k == "grpc-status-details-bin" and isinstance(v, bytes):
            raw = v
    if raw is None:
        return ()
    try:
        st = status_pb2.Status.FromString(raw)
    except Exception:  # malformed trailer: the call's own code decides
        return ()
    matched = len(st.details) <= n_updates
    out: list[UpdateError] = []
    for i, anyv in enumerate(st.details):
        err = pb.Error()
        if not anyv.Unpack(err) or err.canonical_code == 0:
            continue
        out.append(UpdateError(i if matched else -1, status_code(err.canonical_code), err.message))
    return tuple(out)


def rpc_error(exc: grpc.RpcError, what: str, n_updates: int = 0) -> SwitchError:
    """The typed error of a failed RPC (blocking or asyncio): from its
    per-update details when it has any, else from the call's code."""
    e = cast(FailedCall, exc)  # both kinds of failed call carry their status
    code = e.code()
    msg = f"{what}: {code.name}: {e.details()}"
    errors = update_errors(e, n_updates)
    if not errors and code in _UNAVAILABLE:
        return SwitchUnavailableError(msg, code=code)
    return write_error(code, msg, errors)
