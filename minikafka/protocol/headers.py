"""Request header v1/v2 parsing (docs/semantics.md#framing); response headers: :func:`minikafka.protocol.fast.frame_head`.

Parsed by hand rather than through the codec: the header must be read before the API and its
flexibility are known, and this is the hottest few bytes of every request.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

_FIXED = struct.Struct(">hhih")


class MalformedRequest(Exception):
    """The bytes cannot be a request: Kafka closes the connection."""


@dataclass(slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    size: int  # bytes the header occupies in the frame
    flexible: bool  # header v2; the response then uses header v1 (ApiVersions excepted)


def read_uvarint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """Unsigned varint (flexible encodings); returns (value, new position)."""
    result = 0
    shift = 0
    end = len(buf)
    while True:
        if pos >= end:
            raise MalformedRequest("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 28:
            raise MalformedRequest("varint too long")


def skip_tagged_fields(buf: bytes | memoryview, pos: int) -> int:
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
        if pos > len(buf):
            raise MalformedRequest("truncated tagged field")
    return pos


def parse_request_header(frame: bytes | memoryview, flexible_of: object) -> RequestHeader:
    """Parse the header at the start of ``frame``.

    ``flexible_of(api_key, api_version)`` says whether that request uses header v2; it is
    consulted only after the fixed part is read.
    """
    if len(frame) < 10:
        raise MalformedRequest(f"frame of {len(frame)} bytes is shorter than a request header")
    api_key, api_version, correlation_id, client_len = _FIXED.unpack_from(frame, 0)
    pos = 10
    client_id: str | None = None
    if client_len >= 0:
        if pos + client_len > len(frame):
            raise MalformedRequest("client id runs past the frame")
        try:
            client_id = str(frame[pos : pos + client_len], "utf-8")
        except UnicodeDecodeError as exc:
            raise MalformedRequest("client id is not UTF-8") from exc
        pos += client_len
    elif client_len != -1:
        raise MalformedRequest(f"negative client id length {client_len}")
    flexible = bool(flexible_of(api_key, api_version))  # type: ignore[operator]
    if flexible:
        if pos < len(frame) and frame[pos] == 0:  # no tagged fields, as nearly always
            pos += 1
        else:
            pos = skip_tagged_fields(frame, pos)
    return RequestHeader(api_key, api_version, correlation_id, client_id, pos, flexible)

