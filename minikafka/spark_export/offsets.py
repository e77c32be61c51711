"""Offsets of a partition as the planner needs them, read from segment headers and indexes.

All of this runs on the driver and touches little data: batch headers are read 61 bytes at a
time, and only from where the indexes say the answer lies.

* :func:`log_end_offset` — the offset after the last complete batch (a torn tail does not count);
* :func:`position_for_offset` — where to start reading for an offset, from the offset index,
  checked against the batch header found there;
* :func:`offset_for_timestamp` — the earliest offset whose record timestamp is at or after a
  time, through the time index (Kafka's ListOffsets by timestamp).
"""

from __future__ import annotations

from collections.abc import Iterator

from minikafka.spark_export.codecs import Buffer, CodecError, decompress
from minikafka.spark_export.files import Files, RangeFile
from minikafka.spark_export.indexes import OffsetIndex, TimeIndex
from minikafka.spark_export.layout import PartitionDir, SegmentFile
from minikafka.spark_export.records import RecordFormatError, decode_records
from minikafka.storage.batch import HEADER_SIZE, LOG_OVERHEAD, BatchHeader

_MIN_LENGTH = HEADER_SIZE - LOG_OVERHEAD


def iter_headers(fd: RangeFile, start: int, end: int) -> Iterator[tuple[int, BatchHeader]]:
    """Headers of the complete, well-framed batches in ``[start, end)``; stops at the first that is not."""
    pos = start
    while end - pos >= HEADER_SIZE:
        raw = fd.pread(HEADER_SIZE, pos)
        if len(raw) < HEADER_SIZE:
            return
        header = BatchHeader.parse(raw)
        if header.batch_length < _MIN_LENGTH or header.magic != 2 or pos + header.size > end:
            return
        yield pos, header
        pos += header.size


def header_at(fd: RangeFile, position: int, size: int) -> BatchHeader | None:
    """The header at ``position`` if a plausible complete batch starts there."""
    for _, header in iter_headers(fd, position, size):
        return header
    return None


def load_offset_index(files: Files, seg: SegmentFile) -> OffsetIndex:
    return OffsetIndex.load(files, seg.index_path, seg.base_offset, seg.size)


def position_for_offset(fd: RangeFile, seg: SegmentFile, index: OffsetIndex, offset: int) -> int:
    """A batch boundary at or before the batch holding ``offset`` (0 when the index cannot help)."""
    entry = index.floor(offset)
    if entry is None:
        return 0
    last_offset, position = entry
    header = header_at(fd, position, seg.size)
    if header is None or header.last_offset != last_offset or header.base_offset < seg.base_offset:
        return 0  # stale or damaged index: fall back to a full scan of the segment
    return position


def log_end_offset(files: Files, pdir: PartitionDir) -> int:
    """The next offset the partition would assign, judging from its files."""
    for seg in reversed(pdir.segments):
        if seg.size == 0:
            return seg.base_offset
        index = load_offset_index(files, seg)
        fd = files.open(seg.log_path)
        try:
            start = 0
            if len(index):
                last_offset, position = index.offsets[-1], index.positions[-1]
                header = header_at(fd, position, seg.size)
                if header is not None and header.last_offset == last_offset:
                    start = position
            end = seg.base_offset
            for _, header in iter_headers(fd, start, seg.size):
                end = header.next_offset
            return end
        finally:
            fd.close()
    return 0


def _first_at_or_after(fd: RangeFile, header: BatchHeader, position: int, timestamp: int, min_offset: int) -> int | None:
    """Offset of the first record of the batch at ``position`` with timestamp >= ``timestamp``."""
    if header.is_log_append_time:
        return max(header.base_offset, min_offset) if header.max_timestamp >= timestamp else None
    raw = fd.pread(header.size, position)
    section: Buffer = memoryview(raw)[HEADER_SIZE:]
    try:
        if header.compression:
            section = decompress(header.compression, section)
        cols = decode_records([section], [header.records_count])
    except (CodecError, RecordFormatError):
        return None
    offsets = header.base_offset + cols.offset_delta
    times = header.base_timestamp + cols.timestamp_delta
    for off, ts in zip(offsets.tolist(), times.tolist(), strict=True):
        if ts >= timestamp and off >= min_offset:
            return off
    return None


def _search_segment(files: Files, seg: SegmentFile, timestamp: int, min_offset: int) -> int | None:
    index = load_offset_index(files, seg)
    tindex = TimeIndex.load(files, seg.time_index_path, seg.base_offset)
    try:
        fd = files.open(seg.log_path)
    except FileNotFoundError:  # deleted by retention since it was listed
        return None
    try:
        # Batches after the last offset-index entry may not be in the time index yet; without a
        # time index at all, every batch is "after" it.
        tail_start = 0
        if len(index) and len(tindex):
            tail_start = position_for_offset(fd, seg, index, index.offsets[-1])
        tail_max = max(
            (h.max_timestamp for _, h in iter_headers(fd, tail_start, seg.size) if not h.is_control), default=-1
        )
        indexed_max = tindex.max_timestamp if tindex.max_timestamp is not None else -1
        if max(tail_max, indexed_max) < timestamp:
            return None
        below = tindex.last_below(timestamp)
        # every record up to ``below``'s offset has a smaller timestamp
        start_offset = max(min_offset, below[1] + 1 if below else seg.base_offset)
        start = position_for_offset(fd, seg, index, start_offset)
        for position, header in iter_headers(fd, start, seg.size):
            if header.is_control or header.last_offset < start_offset or header.max_timestamp < timestamp:
                continue
            found = _first_at_or_after(fd, header, position, timestamp, start_offset)
            if found is not None:
                return found
    finally:
        fd.close()
    return None


def offset_for_timestamp(files: Files, pdir: PartitionDir, timestamp: int, log_start: int) -> int | None:
    """Earliest offset >= ``log_start`` whose timestamp is >= ``timestamp``; None if there is none."""
    segments = pdir.segments
    for i, seg in enumerate(segments):
        next_base = segments[i + 1].base_offset if i + 1 < len(segments) else None
        if next_base is not None and next_base <= log_start:
            continue
        found = _search_segment(files, seg, timestamp, log_start)
        if found is not None:
            return found
    return None
