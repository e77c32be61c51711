"""Size-prefixed frames: ``int32 size`` then ``size`` bytes (reference §2.1)."""

from __future__ import annotations

import asyncio
import struct

_SIZE = struct.Struct(">i")


class FrameTooLarge(Exception):
    """A frame whose size is negative or above ``socket.request.max.bytes``: Kafka closes."""


async def read_frame(reader: asyncio.StreamReader, max_bytes: int) -> bytes | None:
    """The next frame's payload, or None on a clean end of stream between frames."""
    try:
        prefix = await reader.readexactly(4)
    except asyncio.IncompleteReadError as exc:
        if exc.partial:
            raise
        return None
    (size,) = _SIZE.unpack(prefix)
    if size < 0 or size > max_bytes:
        raise FrameTooLarge(f"frame size {size} outside 0..{max_bytes}")
    return await reader.readexactly(size)


def frame(payload_parts: list[bytes | bytearray | memoryview]) -> bytes:
    """Prefix the joined parts with their total size."""
    size = sum(len(p) for p in payload_parts)
    return b"".join([_SIZE.pack(size), *payload_parts])
