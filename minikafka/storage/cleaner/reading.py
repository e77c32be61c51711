"""Reading segment files for a cleaning: the batches of a file through the cleaner's own
descriptor, under the broker's I/O bound (Kafka's ``Throttler``), and the spans of their records."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final

from minikafka.storage.batch import CONTROL_FLAG, HEADER_SIZE, BatchHeader
from minikafka.storage.records import decompress, read_varint

_READ_CHUNK = 1 << 20


#: One record as the cleaner sees it: ``(start, end, offset, timestamp delta, key, tombstone)``, its
#: span in the uncompressed records section first. A plain tuple: the cleaner makes one per record
#: twice per cleaning, and a class's ``__init__`` cost a third of its time.
Record = tuple[int, int, int, int, bytes | None, bool]
START: Final = 0
END: Final = 1
OFFSET: Final = 2
TS_DELTA: Final = 3
KEY: Final = 4
TOMBSTONE: Final = 5


def parse_records(raw: bytes, header: BatchHeader) -> list[Record]:
    """Span, offset, timestamp delta, key and tombstone flag of each record (values not copied)."""
    out: list[Record] = []
    pos = 0
    base = header.base_offset
    for _ in range(header.records_count):
        length, p = read_varint(raw, pos)
        end = p + length
        b = raw[p + 1]  # after the attributes byte: the timestamp delta
        if b < 0x80:
            ts_delta, p = (b >> 1) ^ -(b & 1), p + 2
        else:
            ts_delta, p = read_varint(raw, p + 1)
        b = raw[p]
        if b < 0x80:
            offset_delta, p = (b >> 1) ^ -(b & 1), p + 1
        else:
            offset_delta, p = read_varint(raw, p)
        key_len, p = read_varint(raw, p)
        key = raw[p : p + key_len] if key_len >= 0 else None
        p += max(key_len, 0)
        out.append((pos, end, base + offset_delta, ts_delta, key, raw[p] == 1))  # value length -1 is 0x01
        pos = end
    return out


class Throttler:
    """Sleeps the cleaning thread so that its reads and writes stay under a byte rate (Kafka's
    ``Throttler``); idle time earns at most ``WINDOW`` seconds of burst."""

    WINDOW = 0.3

    def __init__(self, bytes_per_second: float, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.rate = bytes_per_second
        self.clock = clock
        self.sleep = sleep
        self.started = clock()
        self.bytes = 0

    def add(self, n: int) -> None:
        self.bytes += n
        if self.rate <= 0 or self.rate >= 1e300:
            return
        now = self.clock()
        ahead = self.bytes / self.rate - (now - self.started)
        if ahead < -self.WINDOW:  # after idle time: keep at most one window of unused allowance
            self.started = now - self.bytes / self.rate - self.WINDOW
        elif ahead > 0.001:
            self.sleep(ahead)


class Cancelled(Exception):
    """The broker is stopping or the log went away: the cleaning is abandoned (files removed)."""


def iter_batches(path: Path, size: int, throttler: Throttler) -> Iterator[tuple[BatchHeader, memoryview]]:
    """``(header, batch bytes)`` of each batch of a segment file, read with its own descriptor."""
    fd = os.open(path, os.O_RDONLY)
    try:
        pos, buf, buf_start = 0, b"", 0
        while size - pos >= HEADER_SIZE:
            off = pos - buf_start
            if off + HEADER_SIZE > len(buf):
                buf, buf_start, off = os.pread(fd, min(_READ_CHUNK, size - pos), pos), pos, 0
                throttler.add(len(buf))
            header = BatchHeader.parse(buf, off)
            if pos + header.size > size or header.size < HEADER_SIZE:
                return
            if off + header.size > len(buf):
                buf, buf_start, off = os.pread(fd, max(_READ_CHUNK, header.size), pos), pos, 0
                throttler.add(len(buf))
            yield header, memoryview(buf)[off : off + header.size]
            pos += header.size
    finally:
        os.close(fd)



def untouched(header: BatchHeader) -> bool:
    """Markers (control batches) and batches without records are kept as they are."""
    return bool(header.attributes & CONTROL_FLAG) or header.records_count <= 0


def raw_records(batch: memoryview, header: BatchHeader) -> bytes:
    body = batch[HEADER_SIZE : header.size]
    return decompress(header.compression, body) if header.compression else bytes(body)

