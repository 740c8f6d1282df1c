"""Python values <-> BfRt KeyField/DataField messages, by the schema's widths."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

from p4relay_switch.errors import EncodeError
from p4relay_switch.proto import bfruntime_pb2 as pb
from p4relay_switch.schema import FieldInfo

IntLike = int | bytes | str | ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True, slots=True)
class Lpm:
    value: IntLike
    prefix_len: int


@dataclass(frozen=True, slots=True)
class Ternary:
    value: IntLike
    mask: IntLike


@dataclass(frozen=True, slots=True)
class Range:
    """Inclusive on both ends."""

    low: IntLike
    high: IntLike


KeyValue = IntLike | Lpm | Ternary | Range
DataValue = int | bytes | str | bool | float | ipaddress.IPv4Address | Sequence[int]
# What reads return per data field.
ReadValue = int | bytes | str | bool | float | list[int] | list[bool] | list[str]


def to_int(value: IntLike) -> int:
    """int, big-endian bytes, IPv4 address ("198.18.0.10"), IPv6 address
    ("2001:db8::10") or MAC ("02:00:00:00:00:01")."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, ipaddress.IPv4Address | ipaddress.IPv6Address):
        return int(value)
    if isinstance(value, bytes):
        return int.from_bytes(value, "big")
    if isinstance(value, str):
        s = value.strip()
        if ":" in s:
            parts = s.split(":")
            if len(parts) != 6 or not all(len(p) in (1, 2) for p in parts):
                # six groups of 1-2 digits is a MAC; an IPv6 address never is one
                try:
                    return int(ipaddress.IPv6Address(s))
                except ValueError:
                    raise EncodeError(f"not a MAC or IPv6 address: {value!r}") from None
            try:
                return int("".join(p.zfill(2) for p in parts), 16)
            except ValueError:
                raise EncodeError(f"not a MAC address: {value!r}") from None
        try:
            return int(ipaddress.IPv4Address(s))
        except ValueError:
            pass
        try:
            return int(s, 0)
        except ValueError:
            raise EncodeError(f"not an integer, IPv4, IPv6 or MAC address: {value!r}") from None
    raise EncodeError(f"cannot use {type(value).__name__} as an integer field value")


def encode_int(value: IntLike, f: FieldInfo) -> bytes:
    """Big-endian, exactly the field's byte width; refuses values that do not fit."""
    if not f.is_int:
        raise EncodeError(f"field {f.name} ({f.type}) is not an integer field")
    n = to_int(value)
    if n < 0 or n >= (1 << f.bits):
        raise EncodeError(f"value {n} does not fit field {f.name} ({f.bits} bits)")
    return n.to_bytes(f.nbytes, "big")


def decode_int(raw: bytes) -> int:
    return int.from_bytes(raw, "big")


def key_field(f: FieldInfo, value: KeyValue) -> pb.KeyField:
    kf = pb.KeyField(field_id=f.id)
    mt = f.match_type
    if mt == "Exact":
        if isinstance(value, Lpm | Ternary | Range):
            raise EncodeError(f"key {f.name} is Exact; got {type(value).__name__}")
        kf.exact.value = encode_int(value, f)
    elif mt == "LPM":
        if isinstance(value, Ternary | Range):
            raise EncodeError(f"key {f.name} is LPM; got {type(value).__name__}")
        if not isinstance(value, Lpm):
            value = Lpm(value, f.bits)
        if not 0 <= value.prefix_len <= f.bits:
            raise EncodeError(f"prefix length {value.prefix_len} out of range for {f.name}")
        kf.lpm.value = encode_int(value.value, f)
        kf.lpm.prefix_len = value.prefix_len
    elif mt == "Range":
        if isinstance(value, Lpm | Ternary):
            raise EncodeError(f"key {f.name} is Range; got {type(value).__name__}")
        if not isinstance(value, Range):
            value = Range(value, value)
        lo, hi = encode_int(value.low, f), encode_int(value.high, f)
        if decode_int(lo) > decode_int(hi):
            raise EncodeError(f"range {f.name}: low > high")
        kf.range.low, kf.range.high = lo, hi
    elif mt == "Ternary":
        if isinstance(value, Lpm | Range):
            raise EncodeError(f"key {f.name} is Ternary; got {type(value).__name__}")
        if not isinstance(value, Ternary):
            value = Ternary(value, (1 << f.bits) - 1)
        kf.ternary.value = encode_int(value.value, f)
        kf.ternary.mask = encode_int(value.mask, f)
    else:
        raise EncodeError(f"key {f.name}: match type {mt!r} is not supported by this client")
    return kf


def decode_key_field(f: FieldInfo | None, kf: pb.KeyField) -> KeyValue:
    which = kf.WhichOneof("match_type")
    if which == "exact":
        return decode_int(kf.exact.value)
    if which == "lpm":
        return Lpm(decode_int(kf.lpm.value), kf.lpm.prefix_len)
    if which == "range":
        return Range(decode_int(kf.range.low), decode_int(kf.range.high))
    if which == "ternary":
        return Ternary(decode_int(kf.ternary.value), decode_int(kf.ternary.mask))
    if which == "optional":
        return decode_int(kf.optional.value)
    name = f.name if f else str(kf.field_id)
    raise EncodeError(f"key field {name} has no value")


def data_field(f: FieldInfo, value: DataValue) -> pb.DataField:
    df = pb.DataField(field_id=f.id)
    if f.type == "bool":
        if not isinstance(value, bool | int):
            raise EncodeError(f"field {f.name} is bool; got {value!r}")
        df.bool_val = bool(value)
    elif f.type == "string":
        if not isinstance(value, str):
            raise EncodeError(f"field {f.name} is a string; got {value!r}")
        if f.choices and value not in f.choices:
            raise EncodeError(f"field {f.name}: {value!r} is not one of {list(f.choices)}")
        df.str_val = value
    elif f.type == "float":
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise EncodeError(f"field {f.name} is float; got {value!r}")
        df.float_val = float(value)
    elif f.is_int:
        if isinstance(value, list | tuple):
            df.int_arr_val.val.extend(int(v) for v in value)
        elif isinstance(value, float) or not isinstance(value, IntLike):
            raise EncodeError(f"field {f.name} is an integer; got {value!r}")
        else:
            df.stream = encode_int(value, f)
    else:
        raise EncodeError(f"field {f.name}: type {f.type!r} is not supported by this client")
    return df


def decode_data_field(df: pb.DataField) -> ReadValue:
    which = df.WhichOneof("value")
    if which == "stream":
        return decode_int(df.stream)
    if which == "bool_val":
        return df.bool_val
    if which == "str_val":
        return df.str_val
    if which == "float_val":
        return df.float_val
    if which == "int_arr_val":
        return list(df.int_arr_val.val)
    if which == "bool_arr_val":
        return list(df.bool_arr_val.val)
    if which == "str_arr_val":
        return list(df.str_arr_val.val)
    return 0
