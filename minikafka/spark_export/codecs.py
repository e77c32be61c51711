"""Decompression of a record batch's records section, for every codec Kafka clients write.

gzip goes through zlib; snappy, lz4 and zstd through ``cramjam``, one small wheel with all three.
Snappy comes in two shapes: librdkafka and most clients send a raw snappy block, while the Java
producer wraps blocks in xerial framing (``\\x82SNAPPY\\x00``, two int32 version fields, then
``int32 length + block`` repeated). LZ4 is the standard frame format; zstd frames may omit the
content size (streaming compressors), which cramjam handles.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from typing import Any

from minikafka.storage.batch import CODEC_GZIP, CODEC_LZ4, CODEC_NONE, CODEC_SNAPPY, CODEC_ZSTD

Buffer = bytes | bytearray | memoryview

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER_SIZE = 16
_INT32 = struct.Struct(">i")

CODEC_NAMES = {CODEC_NONE: "none", CODEC_GZIP: "gzip", CODEC_SNAPPY: "snappy", CODEC_LZ4: "lz4", CODEC_ZSTD: "zstd"}


class CodecError(ValueError):
    """The compressed stream could not be decoded (corrupt data or an unknown codec id)."""


def _cramjam() -> Any:
    try:
        import cramjam
    except ImportError as exc:  # pragma: no cover - the spark extra installs it
        raise CodecError("snappy, lz4 and zstd batches need the 'cramjam' package") from exc
    return cramjam


def gzip_decompress(data: Buffer) -> bytes:
    """One or more concatenated gzip members."""
    out: list[bytes] = []
    rest = bytes(data) if not isinstance(data, bytes) else data
    while rest:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        out.append(d.decompress(rest))
        if not d.eof:
            raise CodecError("truncated gzip stream")
        rest = d.unused_data
    return b"".join(out)


def snappy_decompress(data: Buffer) -> Buffer:
    """Raw snappy, or the xerial block framing the Java producer writes."""
    snappy = _cramjam().snappy
    mv = memoryview(data)
    if bytes(mv[:8]) != XERIAL_MAGIC:
        return snappy.decompress_raw(mv)
    blocks: list[Buffer] = []
    pos, end = _XERIAL_HEADER_SIZE, len(mv)
    while pos < end:
        if end - pos < 4:
            raise CodecError("truncated xerial snappy block header")
        (size,) = _INT32.unpack_from(mv, pos)
        pos += 4
        if size < 0 or pos + size > end:
            raise CodecError("xerial snappy block overruns the batch")
        blocks.append(snappy.decompress_raw(mv[pos : pos + size]))
        pos += size
    return b"".join(blocks)


def lz4_decompress(data: Buffer) -> Buffer:
    return _cramjam().lz4.decompress(memoryview(data))


def zstd_decompress(data: Buffer) -> Buffer:
    return _cramjam().zstd.decompress(memoryview(data))


_DECODERS: dict[int, Callable[[Buffer], Buffer]] = {
    CODEC_GZIP: gzip_decompress,
    CODEC_SNAPPY: snappy_decompress,
    CODEC_LZ4: lz4_decompress,
    CODEC_ZSTD: zstd_decompress,
}


def decompress(codec: int, data: Buffer) -> Buffer:
    """The records bytes of a batch whose attributes name ``codec`` (never codec 0)."""
    decoder = _DECODERS.get(codec)
    if decoder is None:
        raise CodecError(f"unknown compression codec id {codec}")
    try:
        return decoder(data)
    except CodecError:
        raise
    except Exception as exc:  # each library raises its own type for bad input
        raise CodecError(f"{CODEC_NAMES[codec]} decompression failed: {exc}") from exc
