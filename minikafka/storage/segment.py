"""One log segment: ``<base>.log`` with its ``.index`` and ``.timeindex`` (docs/semantics.md#on-disk-layout).
Its ``.txnindex`` of aborted transactions is :mod:`minikafka.storage.txn_index`.

The ``.log`` file is record batches back to back, exactly as assigned by the leader. A segment holds
offsets ``[base_offset, base_offset + 2**31 - 1]``. Appends are one ``os.pwrite`` per batch; index
entries follow Kafka's ``index.interval.bytes`` rule so that indexes rebuilt by recovery match the ones
written by appends.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterator
from pathlib import Path

from crc32c import crc32c

from minikafka.storage.batch import ATTRIBUTES_OFFSET, HEADER_SIZE, INT32_MAX, LOG_OVERHEAD, BatchHeader
from minikafka.storage.disk_format import offset_file_name
from minikafka.storage.index import CorruptIndexError, OffsetIndex, TimeIndex
from minikafka.storage.txn_index import TransactionIndex

log = logging.getLogger(__name__)

#: Bytes up to and including the magic byte; with fewer left the file simply ends (a torn write).
HEADER_SIZE_UP_TO_MAGIC = 17
_PREFIX = struct.Struct(">qiib")
_LENGTH = struct.Struct(">i")
_READ_CHUNK = 1 << 20
_HEADER_CHUNK = 1 << 16
_FIND_CHUNK = 1 << 13


def write_all(fd: int, data: bytes | bytearray | memoryview, position: int) -> None:
    """``os.pwrite`` until every byte is written (short writes are rare but legal). The first
    call is given ``data`` itself: the usual whole write (one per appended batch) makes no view."""
    written = os.pwrite(fd, data, position)
    if written == len(data):
        return
    view = memoryview(data)
    while True:
        if written <= 0:
            raise OSError("pwrite wrote nothing")
        view = view[written:]
        position += written
        if not view:
            return
        written = os.pwrite(fd, view, position)


class LogSegment:
    """A segment file and its indexes. The last segment of a log is the active one (appends go there)."""

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        index_max_bytes: int,
        index_interval_bytes: int,
        now_ms: int,
    ) -> None:
        self.dir = directory
        self.base_offset = base_offset
        self.log_path = directory / offset_file_name(base_offset, ".log")
        self.offset_index = OffsetIndex(directory / offset_file_name(base_offset, ".index"), base_offset, index_max_bytes)
        self.time_index = TimeIndex(directory / offset_file_name(base_offset, ".timeindex"), base_offset, index_max_bytes)
        self.txn_index = TransactionIndex(directory / offset_file_name(base_offset, ".txnindex"), base_offset)
        self.index_interval_bytes = index_interval_bytes
        self.fd = -1
        self.size = 0
        #: offset after the last batch in this segment (== base_offset while empty)
        self.next_offset = base_offset
        #: largest batch maxTimestamp so far and the last offset of the batch that carried it
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        #: maxTimestamp of the first batch: segment.ms is measured from it (docs/semantics.md#segment-roll)
        self.first_batch_timestamp: int | None = None
        self.created_ms = now_ms
        self.bytes_since_last_index_entry = 0

    # ------------------------------------------------------------------ opening

    @classmethod
    def create(
        cls, directory: Path, base_offset: int, index_max_bytes: int, index_interval_bytes: int, now_ms: int
    ) -> LogSegment:
        """A new, empty, active segment (an existing ``.log`` of that name is emptied)."""
        seg = cls(directory, base_offset, index_max_bytes, index_interval_bytes, now_ms)
        seg.fd = os.open(seg.log_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        seg.offset_index.open_active(rewrite=True)
        seg.time_index.open_active(rewrite=True)
        return seg

    @classmethod
    def open(
        cls, directory: Path, base_offset: int, index_max_bytes: int, index_interval_bytes: int, now_ms: int,
        revalidate: bool = False,
    ) -> tuple[LogSegment, str | None]:
        """Open an existing segment. Returns the segment and, if its indexes cannot be trusted, the
        reason it must be recovered (the caller then calls :meth:`recover`). With ``revalidate``
        (a segment past the recovery point after a crash) the indexes are not read at all: recovery
        rebuilds them, and a crashed active segment's are pre-allocated megabytes of zeros."""
        seg = cls(directory, base_offset, index_max_bytes, index_interval_bytes, now_ms)
        seg.fd = os.open(seg.log_path, os.O_RDWR)
        seg.size = os.fstat(seg.fd).st_size
        if revalidate:
            return seg, "past the recovery point after an unclean shutdown"
        try:
            if not seg.offset_index.path.exists():
                return seg, "offset index missing"
            if not seg.time_index.path.exists():
                return seg, "time index missing"
            seg.offset_index = OffsetIndex.load(seg.offset_index.path, base_offset, index_max_bytes, seg.size)
            seg.time_index = TimeIndex.load(seg.time_index.path, base_offset, index_max_bytes)
            seg.txn_index = TransactionIndex.load(seg.txn_index.path, base_offset)
        except CorruptIndexError as e:
            return seg, f"corrupt index ({e})"
        except OSError as e:
            return seg, f"unreadable index ({e})"
        reason = seg._load_tail()
        return seg, reason

    def _load_tail(self) -> str | None:
        """Find the end offset and the max timestamp by scanning from the last index entry."""
        last = self.time_index.last_entry()
        if last is not None:
            self.max_timestamp, self.offset_of_max_timestamp = last
        index_offset, pos = self.offset_index.last_entry()
        first = True
        for bpos, header in self.iter_headers(pos):
            if first and len(self.offset_index) and header.last_offset != index_offset:
                return f"offset index entry {index_offset} does not match the batch at position {bpos}"
            first = False
            self._track(header)
            pos = bpos + header.size
        if pos != self.size:
            return f"incomplete batch at position {pos} of {self.size}"
        if self.size >= HEADER_SIZE:
            self.first_batch_timestamp = BatchHeader.parse(os.pread(self.fd, HEADER_SIZE, 0)).max_timestamp
        return None

    def _track(self, header: BatchHeader) -> None:
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self.offset_of_max_timestamp = header.last_offset
        self.next_offset = header.next_offset

    # ------------------------------------------------------------------ appending

    @property
    def is_empty(self) -> bool:
        return self.size == 0

    def should_roll(self, batch_size: int, last_offset: int, max_timestamp: int, now_ms: int,
                    segment_bytes: int, segment_ms: int) -> str | None:
        """Why the incoming batch must go into a new segment (docs/semantics.md#segment-roll), or None."""
        if self.size == 0:  # only a follower's copy of a compacted log can jump this far from the base
            return "offset overflow" if last_offset - self.base_offset > INT32_MAX else None
        if self.size + batch_size > segment_bytes:
            return "segment.bytes"
        if self.first_batch_timestamp is not None and self.first_batch_timestamp > 0:
            waited = max_timestamp - self.first_batch_timestamp
        else:
            waited = now_ms - self.created_ms
        if waited > segment_ms:
            return "segment.ms"
        if self.offset_index.is_full or self.time_index.is_full:
            return "index full"
        if last_offset - self.base_offset > INT32_MAX:
            return "offset overflow"
        return None

    def append(self, buf: bytes | bytearray | memoryview, header: BatchHeader) -> None:
        """Write one batch (offsets already assigned) at the end of the segment and index it.

        On an I/O error the file is cut back to its previous size and the error re-raised, so a
        failed append leaves the segment as it was."""
        pos = self.size
        try:
            write_all(self.fd, buf, pos)
        except OSError:
            try:
                os.ftruncate(self.fd, pos)
            except OSError:
                log.exception("cannot cut %s back to %d after a failed write", self.log_path, pos)
            raise
        self.size = pos + header.size
        self._index_batch(pos, header)

    def _index_batch(self, pos: int, header: BatchHeader) -> None:
        """Account for a batch at ``pos``: Kafka's index.interval.bytes rule (docs/semantics.md#index-interval),
        shared by appends and recovery so that rebuilt indexes equal written ones."""
        if self.first_batch_timestamp is None:
            self.first_batch_timestamp = header.max_timestamp
        self._track(header)
        if self.bytes_since_last_index_entry > self.index_interval_bytes:
            self.offset_index.append(header.last_offset, pos)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += header.size

    # ------------------------------------------------------------------ reading

    def pread(self, position: int, size: int) -> bytes:
        return os.pread(self.fd, size, position)

    def iter_headers(
        self, start: int = 0, end: int | None = None, chunk: int = _HEADER_CHUNK
    ) -> Iterator[tuple[int, BatchHeader]]:
        """``(position, header)`` of each batch from ``start``, reading headers only (payloads are
        skipped, ``chunk`` bytes read at a time). Stops at the first batch that does not fit."""
        end = self.size if end is None else end
        pos, buf, buf_start = start, b"", start
        read_size = chunk
        while end - pos >= HEADER_SIZE:
            off = pos - buf_start
            if off + HEADER_SIZE > len(buf):
                buf, buf_start, off = os.pread(self.fd, min(read_size, end - pos), pos), pos, 0
                if len(buf) < HEADER_SIZE:
                    return
            header = BatchHeader.parse(buf, off)
            if header.batch_length < HEADER_SIZE - LOG_OVERHEAD or pos + header.size > end:
                return
            yield pos, header
            pos += header.size
            # Large batches: read just the next header rather than a chunk of payload to skip.
            read_size = HEADER_SIZE if header.size * 2 > chunk else chunk

    def find_batch(self, offset: int) -> tuple[int, BatchHeader] | None:
        """Position and header of the batch containing ``offset`` (or the first batch after it)."""
        _, pos = self.offset_index.lookup(offset)
        # Index entries are about index.interval.bytes apart: a small read usually covers the scan.
        for bpos, header in self.iter_headers(pos, chunk=_FIND_CHUNK):
            if header.last_offset >= offset:
                return bpos, header
        return None

    def read_whole_batches(self, position: int, size: int, end: int) -> bytes | memoryview:
        """Up to ``size`` bytes of batches from the batch at ``position``, cut after the last whole
        one unless the read reaches ``end`` (a batch boundary: the segment end or a read limit)."""
        data = self.pread(position, size)
        n = len(data)
        if position + n >= end:
            return data
        # Cut after the last whole batch: start from the closest indexed batch boundary.
        cut = max(position, self.offset_index.position_at_or_before(position + n)) - position
        while n - cut >= LOG_OVERHEAD:
            (length,) = _LENGTH.unpack_from(data, cut + 8)
            if cut + LOG_OVERHEAD + length > n:
                break
            cut += LOG_OVERHEAD + length
        return data if cut == n else memoryview(data)[:cut]

    def read_batch(self, position: int, header: BatchHeader) -> bytes:
        return os.pread(self.fd, header.size, position)

    @property
    def largest_timestamp(self) -> int:
        """What retention.ms compares with: the max timestamp, or the file's mtime without one."""
        if self.max_timestamp > 0:
            return self.max_timestamp
        try:
            return int(os.fstat(self.fd).st_mtime * 1000)
        except OSError:
            return 0

    # ------------------------------------------------------------------ recovery

    def recover(self) -> tuple[int, str | None]:
        """Re-validate every batch (header and CRC-32C) and rebuild both indexes (docs/semantics.md#segment-recovery).

        The file is cut at the first torn or invalid batch. Returns ``(bytes cut, reason)``. The
        aborted-transaction index is emptied: the log rebuilds it by replaying the segment's markers."""
        self._forget_batches()
        file_size = os.fstat(self.fd).st_size
        pos, buf, buf_start = 0, b"", 0
        reason: str | None = None
        while True:
            remaining = file_size - pos
            if remaining <= 0:
                break
            if remaining <= HEADER_SIZE_UP_TO_MAGIC:
                reason = f"torn batch: {remaining} trailing bytes"
                break
            off = pos - buf_start
            if off + HEADER_SIZE_UP_TO_MAGIC > len(buf):
                buf, buf_start, off = os.pread(self.fd, min(_READ_CHUNK, remaining), pos), pos, 0
            base, length, _epoch, magic = _PREFIX.unpack_from(buf, off)
            if length < 14:
                reason = f"batch length field {length} < 14"
                break
            size = LOG_OVERHEAD + length
            if size > remaining:
                reason = f"torn batch: {size} bytes announced, {remaining} left"
                break
            if off + size > len(buf):
                buf, buf_start, off = os.pread(self.fd, max(_READ_CHUNK, size), pos), pos, 0
            reason = self._check_batch(buf, off, size, magic, base)
            if reason is not None:
                break
            header = BatchHeader.parse(buf, off)
            self._index_batch(pos, header)
            pos += size
        truncated = file_size - pos
        if truncated:
            os.ftruncate(self.fd, pos)
        self.size = pos
        self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        return truncated, reason

    def _check_batch(self, buf: bytes, off: int, size: int, magic: int, base: int) -> str | None:
        if size < HEADER_SIZE:
            return f"batch of {size} bytes is smaller than a header"
        if magic != 2:
            return f"magic {magic}"
        (stored_crc,) = struct.unpack_from(">I", buf, off + 17)
        if crc32c(memoryview(buf)[off + ATTRIBUTES_OFFSET : off + size]) != stored_crc:
            return f"CRC mismatch in the batch at offset {base}"
        # Offsets increase; gaps are legal (a compacted segment has them, as in Kafka).
        if base < self.next_offset:
            return f"batch base offset {base} where at least {self.next_offset} was expected"
        (delta,) = struct.unpack_from(">i", buf, off + 23)
        if delta < 0 or base + delta - self.base_offset > INT32_MAX:
            return f"batch at offset {base} has a bad lastOffsetDelta {delta}"
        return None

    # ------------------------------------------------------------------ lifecycle

    def make_active(self, rewrite_indexes: bool) -> None:
        """Pre-allocate the index files for appends (the last segment of a loaded log)."""
        self.offset_index.open_active(rewrite=rewrite_indexes)
        self.time_index.open_active(rewrite=rewrite_indexes)

    def save_indexes(self) -> None:
        """Persist rebuilt indexes of an inactive segment."""
        self.offset_index.save()
        self.time_index.save()

    def on_become_inactive(self) -> None:
        """Roll/close: a last time-index entry, then trim both index files to their entries."""
        self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        self.offset_index.close_active()
        self.time_index.close_active()

    def dup_fds(self) -> list[int]:
        """Duplicated descriptors of every open file, so a flush thread can fsync them safely even
        if the segment is closed meanwhile."""
        fds = [os.dup(self.fd)]
        for index in (self.offset_index, self.time_index, self.txn_index):
            fd = index.dup_fd()
            if fd is not None:
                fds.append(fd)
        return fds

    def fsync(self) -> None:
        os.fsync(self.fd)
        self.offset_index.fsync()
        self.time_index.fsync()
        self.txn_index.fsync()

    def close(self) -> None:
        self.on_become_inactive()
        self.txn_index.close()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def abandon(self) -> None:
        """Close every file as it is, untrimmed and unsynced: what a crash leaves behind."""
        self.offset_index.abandon()
        self.time_index.abandon()
        self.txn_index.close()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def truncate_to(self, offset: int, now_ms: int) -> int:
        """Drop every batch holding ``offset`` or a later offset, and their index entries (a
        follower truncating its log; Kafka's ``LogSegment.truncateTo``). A batch that starts below
        ``offset`` but reaches it goes whole. Returns the number of bytes cut."""
        found = self.find_batch(offset)
        if found is None:
            return 0
        pos, header = found
        cut = header.base_offset
        self.offset_index.truncate_to(cut)
        self.time_index.truncate_to(cut)
        self.txn_index.truncate_to(cut)
        os.ftruncate(self.fd, pos)
        truncated, self.size = self.size - pos, pos
        self.next_offset = self.base_offset
        self.max_timestamp, self.offset_of_max_timestamp = -1, -1
        self.first_batch_timestamp = None
        self.bytes_since_last_index_entry = 0
        if pos == 0:
            self.created_ms = now_ms  # segment.ms counts afresh, as for a new segment
        else:
            self._load_tail()  # the end offset and max timestamp of the batches kept
        return truncated

    def truncate_to_empty(self) -> None:
        """Drop every batch (used when recovery of this segment fails outright)."""
        os.ftruncate(self.fd, 0)
        self.size = 0
        self._forget_batches()

    def _forget_batches(self) -> None:
        """Empty the indexes and the per-batch statistics, as before the first batch."""
        self.next_offset = self.base_offset
        self.offset_index.reset()
        self.time_index.reset()
        self.txn_index.reset()
        self.max_timestamp, self.offset_of_max_timestamp = -1, -1
        self.first_batch_timestamp = None
        self.bytes_since_last_index_entry = 0

    def delete(self) -> None:
        """Close and remove every file of this segment."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        self.offset_index.delete()
        self.time_index.delete()
        self.txn_index.delete()
        self.log_path.unlink(missing_ok=True)

    def __repr__(self) -> str:
        return f"LogSegment(base={self.base_offset}, size={self.size}, next={self.next_offset})"
