"""Walk the record batches of one slice of a segment file, checking each as Kafka's reader does.

A slice is a byte range of one ``.log`` file plus the offset range wanted from it. The file is read
with ``pread`` in chunks (never memory-mapped: a broker may truncate the file under us, which would
kill the process through SIGBUS), each batch's framing, magic and CRC-32C are checked, and batches
outside the offset range are passed over without being decompressed.

What ends a read and what counts as damage:

* a batch cut short by the end of the data, in the slice that ends where the partition's log ended
  when the read was planned, is a torn tail (a crash, or a write still in progress): the read ends
  cleanly at the last complete batch; so does a zero-filled header there (pre-allocated space);
* the same anywhere else, a CRC mismatch, a bad magic byte, an impossible length, offsets going
  backwards, an undecodable compressed stream or malformed records are damage: with
  ``failOnDataLoss`` the read fails with :class:`DataLossError`, without it the batch is skipped
  (a damaged header is skipped by jumping to the next offset-index entry, or to the end of the slice).
"""

from __future__ import annotations

import logging
import os
import socket
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from minikafka.spark_export.errors import DataDirUnreachable, DataLossError
from minikafka.spark_export.files import Files, RangeFile
from minikafka.spark_export.indexes import OffsetIndex
from minikafka.spark_export.layout import CLUSTER_METADATA, META_PROPERTIES
from minikafka.spark_export.records import PADDING
from minikafka.storage.batch import HEADER_SIZE, LOG_OVERHEAD, BatchHeader, compute_crc

log = logging.getLogger(__name__)

#: Bytes read per ``pread``; a batch larger than this is read whole.
CHUNK_BYTES = 8 << 20
#: Read buffers a slice reader (and the next slices of its input partition) keeps for reuse: the
#: one being walked, the one the group being built may still use, and one free.
KEPT_BUFFERS = 3
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD


@dataclass(frozen=True, slots=True)
class SegmentSlice:
    """Part of one segment that one Spark task reads: batches starting in
    ``[start_position, end_position)`` and, of their records, offsets in ``[start_offset, end_offset)``."""

    topic: str
    partition: int
    log_path: str
    base_offset: int
    start_position: int
    end_position: int
    start_offset: int
    end_offset: int
    #: True when the slice ends where the partition's log ended at planning time, so that a
    #: batch cut short there is a torn tail rather than damage.
    at_log_end: bool
    #: With read_committed: aborted transactions whose batches may lie in this slice (see
    #: :mod:`.transactions`); their transactional batches are skipped.
    aborted: tuple[Any, ...] = ()

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}/{os.path.basename(self.log_path)}"


class BatchReader:
    """Iterates ``(file position, header, records section)`` of a slice; sections are still compressed."""

    def __init__(self, sl: SegmentSlice, fail_on_data_loss: bool, files: Files,
                 buffers: list[bytearray] | None = None) -> None:
        self.slice = sl
        self.fail_on_data_loss = fail_on_data_loss
        self.files = files
        self._index: OffsetIndex | None = None
        #: The bytes read last, followed by PADDING zero bytes, and the file position of the first:
        #: the section yielded last lies in them, at ``position + HEADER_SIZE - chunk_position``.
        self.chunk = memoryview(b"")
        self.chunk_position = 0
        #: Kept read buffers, shared by the slices of one input partition.
        self._buffers: list[bytearray] = [] if buffers is None else buffers

    # -- damage handling -------------------------------------------------------------------------

    def damaged(self, position: int, problem: str) -> None:
        """Report damage at ``position``: raise, or log and let the caller skip it."""
        message = f"{self.slice.name}: {problem} at byte {position}."
        if self.fail_on_data_loss:
            raise DataLossError(message)
        log.warning("skipping damaged data: %s", message)

    def _resync(self, position: int) -> int:
        """The next offset-index position after ``position``, or the end of the slice."""
        if self._index is None:
            self._index = OffsetIndex.load(
                self.files, self.slice.log_path[: -len(".log")] + ".index", self.slice.base_offset, self.slice.end_position
            )
        for p in self._index.positions:
            if p > position:
                return p
        return self.slice.end_position

    # -- reading ---------------------------------------------------------------------------------

    def _open(self) -> RangeFile | None:
        for path in (self.slice.log_path, self.slice.log_path + ".deleted"):
            try:
                return self.files.open(path)
            except FileNotFoundError:
                continue
        self._check_reachable()
        self.damaged(0, "segment file no longer exists")
        return None

    def _check_reachable(self) -> None:
        """A missing segment is data loss only if the data directory itself is here; a data
        directory this process cannot see at all (a path that exists only on the driver) is an
        error whatever ``failOnDataLoss`` says, since skipping would return nothing silently."""
        root = self.files.root
        if all(self.files.read_bytes(self.files.join(root, name)) is None for name in (META_PROPERTIES, CLUSTER_METADATA)):
            raise DataDirUnreachable(
                f"{self.files.describe(root)} is not readable on host {socket.gethostname()} (pid {os.getpid()}), "
                f"where the task reading {self.slice.name} runs: every Spark executor must see the data "
                "directory at the same path as the driver (a shared file system, or object storage such "
                "as s3://bucket/prefix)")

    def __iter__(self) -> Iterator[tuple[int, BatchHeader, memoryview]]:
        fd = self._open()
        if fd is None:
            return
        try:
            yield from self._batches(fd)
        finally:
            fd.close()

    def _batches(self, fd: RangeFile) -> Iterator[tuple[int, BatchHeader, memoryview]]:
        sl = self.slice
        end = sl.end_position
        pos = sl.start_position
        expected_offset = sl.base_offset  # batches must not go back below this
        buf = memoryview(b"")
        buf_pos = pos
        while pos < end:
            rel = pos - buf_pos
            if len(buf) - rel < HEADER_SIZE:
                buf = self._read(fd, min(max(CHUNK_BYTES, HEADER_SIZE), end - pos), pos)
                buf_pos, rel = pos, 0
                if len(buf) < HEADER_SIZE:
                    if self._tail(pos, "incomplete batch header"):
                        return
                    break
            header = BatchHeader.parse(buf, rel)
            length, magic = header.batch_length, header.magic
            if length < MIN_BATCH_LENGTH or magic != 2:
                if sl.at_log_end and not any(buf[rel : rel + HEADER_SIZE]):
                    return  # zero-filled space after the last batch
                problem = f"invalid batch (length {length}, magic {magic})"
                if magic in (0, 1) and length >= 14:
                    problem = f"message format v{magic} batch (only v2, Kafka 0.11+, is supported)"
                self.damaged(pos, problem)
                pos = self._resync(pos)
                continue
            size = LOG_OVERHEAD + length
            if pos + size > end:
                if self._tail(pos, f"batch of {size} bytes runs past the end of the data"):
                    return
                pos = self._resync(pos)
                continue
            if rel + size > len(buf):
                buf = self._read(fd, max(CHUNK_BYTES, size), pos)
                buf_pos, rel = pos, 0
                if len(buf) < size:
                    if self._tail(pos, "segment shrank while being read"):
                        return
                    break
            if header.base_offset < expected_offset or header.last_offset_delta < 0:
                self.damaged(pos, f"batch offset {header.base_offset} goes back below {expected_offset}")
                pos += size
                continue
            if header.base_offset >= sl.end_offset:
                return
            pos += size
            if header.last_offset < sl.start_offset:
                continue
            expected_offset = header.next_offset
            if compute_crc(buf, rel, size) != header.crc:
                self.damaged(pos - size, f"CRC mismatch in batch at offset {header.base_offset}")
                continue
            yield pos - size, header, buf[rel + HEADER_SIZE : rel + size]

    def _read(self, fd: RangeFile, size: int, position: int) -> memoryview:
        """``size`` bytes at ``position`` (fewer at the end of the file), read into a buffer of the
        last few that nothing refers to any more, or a new one. Reusing buffers matters: the page
        faults of a fresh 8 MiB allocation cost about as much as the copy from the page cache."""
        buf = None
        for kept in self._buffers:
            # references: the list, ``kept`` and getrefcount's argument; one more is a section, an
            # array or an Arrow buffer still using the bytes
            if len(kept) >= size + PADDING and sys.getrefcount(kept) == 3:
                buf = kept
                break
        if buf is None:
            buf = bytearray(max(size, CHUNK_BYTES) + PADDING)
            self._buffers[:] = [*self._buffers[-(KEPT_BUFFERS - 1) :], buf]
        view = memoryview(buf)
        got = fd.pread_into(view[:size], position)
        view[got : got + PADDING] = bytes(PADDING)
        self.chunk = view[: got + PADDING]
        self.chunk_position = position
        return view[:got]

    def _tail(self, position: int, problem: str) -> bool:
        """A short read at ``position``: True if it is a torn tail that ends the read cleanly."""
        if self.slice.at_log_end:
            return True
        self.damaged(position, problem)
        return False
