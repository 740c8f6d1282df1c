"""Just enough protobuf wire format to write BfRt updates as bytes.

Building `Update` messages through the Python protobuf API costs 10-25 us per
table entry (every nested message is created, then copied into its parent),
and an install is ~26 updates: that ran on the event loop in front of the
next command. Bytes joined here cost a few microseconds per entry. Field
numbers come from the generated descriptors, never typed in by hand, and the
tests check the result against the generic client's messages.
"""

from __future__ import annotations

from collections.abc import Callable

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

_LEN = 2  # wire type: length-delimited
_VARINT = 0

_SMALL = [bytes([i]) for i in range(128)]


def varint(n: int) -> bytes:
    if n < 128:
        return _SMALL[n]
    out = bytearray()
    while n >= 128:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def tag(msg: type[Message], field: str) -> bytes:
    """The key (field number, wire type) of one field of a message type."""
    f = msg.DESCRIPTOR.fields_by_name[field]
    wt = (
        _LEN
        if f.type
        in (FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_BYTES, FieldDescriptor.TYPE_STRING)
        else _VARINT
    )
    return varint(f.number << 3 | wt)


def ld(key: bytes, payload: bytes) -> bytes:
    """A length-delimited field (bytes, string, sub-message), always written."""
    return key + varint(len(payload)) + payload


def uint(key: bytes, n: int) -> bytes:
    """A scalar varint field; zero is proto3's default and left out, as the
    library's own serialiser does."""
    return key + varint(n) if n else b""


class Template:
    """A message whose only varying parts are fixed-width byte values (keys,
    parameters of a table entry): encoded once, then filled in by joining
    constant pieces with the values. `build` is the encoder itself, so the
    template cannot drift from it: it is run with every value all zeros and
    all ones, and the bytes that differ are the holes, in `build`'s order."""

    def __init__(self, build: Callable[[list[bytes]], bytes], widths: list[int]) -> None:
        lo = build([bytes(n) for n in widths])
        hi = build([b"\xff" * n for n in widths])
        holes = [i for i in range(len(lo)) if lo[i] != hi[i]]
        if len(lo) != len(hi) or len(holes) != sum(widths):
            raise ValueError("not a fixed-width template")
        self.build = build
        self.widths = widths
        self.pieces: list[bytes] = []
        end = i = 0
        for n in widths:
            start = holes[i]
            if holes[i : i + n] != list(range(start, start + n)):
                raise ValueError("a value is not contiguous in the encoding")
            self.pieces.append(lo[end:start])
            end, i = start + n, i + n
        self.tail = lo[end:]

    def fill(self, *values: bytes) -> bytes:
        """The message with these values (each exactly its hole's width)."""
        out = [b""] * (2 * len(values) + 1)
        out[0:-1:2] = self.pieces
        out[1::2] = values
        out[-1] = self.tail
        return b"".join(out)

    def framed(self, key: bytes) -> Template:
        """The message as a length-delimited field `key` of its parent: its
        length is fixed, so the frame is part of the constant pieces."""
        build = self.build
        return Template(lambda v: ld(key, build(v)), self.widths)

    def fixing(self, index: int, value: bytes) -> Template:
        """The template with hole `index` filled in for good (a value that is
        the same for a whole batch, e.g. an entry TTL)."""
        build = self.build
        widths = self.widths[:index] + self.widths[index + 1 :]
        return Template(lambda v: build([*v[:index], value, *v[index:]]), widths)

    def constant(self) -> tuple[bytes, ...]:
        """`pieces` and `tail` in one tuple: hot loops interleave them with
        values themselves (`out += (p[0], v0, p[1], v1, ..., p[-1])`) and join
        a whole request once, instead of a join per message."""
        return (*self.pieces, self.tail)
