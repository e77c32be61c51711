"""The two per-segment indexes, ``.index`` and ``.timeindex``, in Kafka's on-disk format.

Both files are arrays of fixed-size big-endian entries with no header (docs/semantics.md#indexes):

* offset index: ``relative offset int32, position int32`` (8 bytes) — the last offset of a batch and
  the file position where that batch starts;
* time index: ``timestamp int64, relative offset int32`` (12 bytes) — the largest timestamp seen so far
  in the segment and the last offset of the batch that carried it.

minikafka keeps every entry in memory (``array``) for lookups and writes new entries to the file with
``os.pwrite``. The active segment's index files are pre-allocated to ``segment.index.bytes`` like
Kafka's, and trimmed to the real entry count when the segment stops being active or is closed, so that
a cleanly closed directory is byte-compatible with Kafka's.
"""

from __future__ import annotations

import operator
import os
import struct
import sys
from array import array
from bisect import bisect_left, bisect_right
from pathlib import Path

from minikafka.storage.atomic_files import atomic_write

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


class CorruptIndexError(Exception):
    """An index file that fails its sanity check; the caller rebuilds it from the ``.log``."""


def _open_rw(path: Path) -> int:
    return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)


def _read_file(path: Path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _increasing(values: array[int]) -> bool:
    return all(map(operator.lt, values, values[1:]))


def _strip_preallocated(data: bytes, entry_size: int, path: Path) -> bytes:
    """Check the length and drop trailing all-zero entries (never written: an entry at relative
    offset 0 and position 0 cannot occur, the first batch of a segment gets no entry)."""
    if len(data) % entry_size:
        raise CorruptIndexError(f"{path.name}: length {len(data)} is not a multiple of {entry_size}")
    used = len(data.rstrip(b"\0"))
    used += -used % entry_size
    return data[:used] if used < len(data) else data


class IndexFileHandle:
    """The open descriptor of an index file (every per-segment index has at most one)."""

    path: Path
    _fd: int | None

    def dup_fd(self) -> int | None:
        """A duplicate of the open file descriptor, for an fsync off the event loop."""
        return os.dup(self._fd) if self._fd is not None else None

    def fsync(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)

    def delete(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self.path.unlink(missing_ok=True)


class _IndexFile(IndexFileHandle):
    """File handling shared by both indexes: pre-allocation while active, trim when inactive."""

    entry_size: int

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_size // self.entry_size)
        self._fd: int | None = None  # open only while the segment is active
        #: whether the index holds ``max_entries`` entries (the segment then rolls): the roll check
        #: asks for every append, so it is worked out only when the entries change
        self.is_full = False

    def __len__(self) -> int:  # number of entries
        raise NotImplementedError

    def _count_changed(self) -> None:
        self.is_full = len(self) >= self.max_entries

    @property
    def is_active(self) -> bool:
        return self._fd is not None

    def _entries_bytes(self) -> bytes:
        raise NotImplementedError

    def open_active(self, rewrite: bool) -> None:
        """Open for appends, pre-allocating the file to its full size (as Kafka does).

        ``rewrite`` writes the in-memory entries first (after a rebuild)."""
        if self._fd is None:
            self._fd = _open_rw(self.path)
        if rewrite:
            os.ftruncate(self._fd, 0)
            data = self._entries_bytes()
            if data:
                os.pwrite(self._fd, data, 0)
        os.ftruncate(self._fd, self.max_entries * self.entry_size)

    def abandon(self) -> None:
        """Close the file as it is, untrimmed: what a crash leaves behind."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)

    def close_active(self) -> None:
        """Trim the file to its entries and close it (segment roll, log close)."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.ftruncate(fd, len(self) * self.entry_size)
        finally:
            os.close(fd)

    def save(self) -> None:
        """Write the in-memory entries as the whole file (an inactive, rebuilt index) and fsync it."""
        if self._fd is not None:
            self.open_active(rewrite=True)
            return
        atomic_write(self.path, self._entries_bytes())

    def truncate_to(self, offset: int) -> None:
        """Drop every entry for ``offset`` or later and rewrite the file (a follower truncating its
        log; Kafka's ``AbstractIndex.truncateTo``)."""
        keep = bisect_left(self._offsets(), offset - self.base_offset)
        if keep == len(self):
            return
        self._keep_entries(keep)
        self._count_changed()
        if self._fd is not None or self.path.exists():
            self.save()

    def _offsets(self) -> array[int]:
        """The relative offsets of the entries (increasing)."""
        raise NotImplementedError

    def _keep_entries(self, count: int) -> None:
        raise NotImplementedError


class OffsetIndex(_IndexFile):
    """Sparse map from offsets to ``.log`` positions of one segment."""

    entry_size = 8

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        super().__init__(path, base_offset, max_index_size)
        self._rel = array("i")
        self._pos = array("i")

    def __len__(self) -> int:
        return len(self._rel)

    @classmethod
    def load(cls, path: Path, base_offset: int, max_index_size: int, log_size: int) -> OffsetIndex:
        """Read an existing file; raise :class:`CorruptIndexError` if it is not a valid index.

        Valid means: length a multiple of 8, relative offsets and positions strictly increasing,
        every position inside the ``.log``. Trailing all-zero entries (the unused pre-allocated
        part left by a crash) are dropped first."""
        index = cls(path, base_offset, max_index_size)
        data = _strip_preallocated(_read_file(path), cls.entry_size, path)
        words = array("i", data)
        if sys.byteorder == "little":
            words.byteswap()
        rel, pos = words[0::2], words[1::2]
        if not (_increasing(rel) and _increasing(pos)):
            raise CorruptIndexError(f"{path.name}: entries do not increase")
        if rel and (rel[0] < 0 or pos[0] < 0 or pos[-1] >= log_size):
            raise CorruptIndexError(f"{path.name}: entry out of range of the segment")
        index._rel, index._pos = rel, pos
        index._count_changed()
        return index

    def _entries_bytes(self) -> bytes:
        out = bytearray(len(self._rel) * 8)
        for i in range(len(self._rel)):
            _OFFSET_ENTRY.pack_into(out, i * 8, self._rel[i], self._pos[i])
        return bytes(out)

    def append(self, offset: int, position: int) -> None:
        """Add ``(offset, position)``; offsets and positions must increase."""
        rel = offset - self.base_offset
        if self._fd is not None:
            os.pwrite(self._fd, _OFFSET_ENTRY.pack(rel, position), len(self._rel) * 8)
        self._rel.append(rel)
        self._pos.append(position)
        self._count_changed()

    def lookup(self, offset: int) -> tuple[int, int]:
        """The greatest entry with offset <= ``offset``, or ``(base_offset, 0)`` if there is none."""
        i = bisect_right(self._rel, offset - self.base_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self._rel[i], self._pos[i]

    def position_at_or_before(self, position: int) -> int:
        """The greatest indexed batch position <= ``position`` (0 if none): a batch boundary."""
        i = bisect_right(self._pos, position) - 1
        return self._pos[i] if i >= 0 else 0

    def upper_bound_offset(self, position: int) -> int | None:
        """Offset of the first entry whose batch starts at or after ``position`` (None if none):
        Kafka's bound for the aborted transactions of a read that ended before ``position``."""
        i = bisect_left(self._pos, position)
        return self.base_offset + self._rel[i] if i < len(self._pos) else None

    def last_entry(self) -> tuple[int, int]:
        if not self._rel:
            return self.base_offset, 0
        return self.base_offset + self._rel[-1], self._pos[-1]

    def entries(self) -> list[tuple[int, int]]:
        """All entries as absolute offsets (for tests and tools)."""
        return [(self.base_offset + r, p) for r, p in zip(self._rel, self._pos, strict=True)]

    def _offsets(self) -> array[int]:
        return self._rel

    def _keep_entries(self, count: int) -> None:
        del self._rel[count:]
        del self._pos[count:]

    def reset(self) -> None:
        self._rel = array("i")
        self._pos = array("i")
        self.is_full = False


class TimeIndex(_IndexFile):
    """Sparse map from timestamps to offsets of one segment."""

    entry_size = 12

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        super().__init__(path, base_offset, max_index_size)
        self._ts = array("q")
        self._rel = array("i")

    def __len__(self) -> int:
        return len(self._ts)

    @classmethod
    def load(cls, path: Path, base_offset: int, max_index_size: int) -> TimeIndex:
        """Read an existing file; raise :class:`CorruptIndexError` if it is not a valid time index
        (length a multiple of 12, timestamps strictly and offsets weakly increasing, offsets >= 0)."""
        index = cls(path, base_offset, max_index_size)
        data = _strip_preallocated(_read_file(path), cls.entry_size, path)
        entries = list(_TIME_ENTRY.iter_unpack(data))
        ts = array("q", [t for t, _ in entries])
        rel = array("i", [r for _, r in entries])
        if not _increasing(ts) or not all(map(operator.le, rel, rel[1:])) or (rel and rel[0] < 0):
            raise CorruptIndexError(f"{path.name}: entries out of order")
        index._ts, index._rel = ts, rel
        index._count_changed()
        return index

    def _entries_bytes(self) -> bytes:
        out = bytearray(len(self._ts) * 12)
        for i in range(len(self._ts)):
            _TIME_ENTRY.pack_into(out, i * 12, self._ts[i], self._rel[i])
        return bytes(out)

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Append ``(timestamp, offset)`` if the timestamp is above the last entry's (Kafka's rule;
        an empty index counts as ending at timestamp -1)."""
        if timestamp <= (self._ts[-1] if self._ts else -1):
            return
        rel = offset - self.base_offset
        if self._fd is not None:
            os.pwrite(self._fd, _TIME_ENTRY.pack(timestamp, rel), len(self._ts) * 12)
        self._ts.append(timestamp)
        self._rel.append(rel)
        self._count_changed()

    def lookup_below(self, timestamp: int) -> tuple[int, int] | None:
        """The entry with the greatest timestamp strictly below ``timestamp``: every record at or
        before its offset has a smaller timestamp than ``timestamp``. None if there is none."""
        i = bisect_left(self._ts, timestamp) - 1
        if i < 0:
            return None
        return self._ts[i], self.base_offset + self._rel[i]

    def last_entry(self) -> tuple[int, int] | None:
        """``(timestamp, offset)`` of the last entry, or None for an empty index."""
        if not self._ts:
            return None
        return self._ts[-1], self.base_offset + self._rel[-1]

    def entries(self) -> list[tuple[int, int]]:
        return [(t, self.base_offset + r) for t, r in zip(self._ts, self._rel, strict=True)]

    def _offsets(self) -> array[int]:
        return self._rel

    def _keep_entries(self, count: int) -> None:
        del self._ts[count:]
        del self._rel[count:]

    def reset(self) -> None:
        self._ts = array("q")
        self._rel = array("i")
        self.is_full = False
