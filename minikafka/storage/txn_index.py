"""The aborted-transaction index, ``<base>.txnindex``, one per segment, in Kafka's format.

Each ABORT marker that closes a transaction which wrote data to the partition adds one 34-byte
big-endian entry to the index of the segment holding the marker::

    version int16 (0), producer_id int64, first_offset int64, last_offset int64, last_stable_offset int64

``first_offset`` is the transaction's first data offset (possibly in an earlier segment),
``last_offset`` the marker's offset and ``last_stable_offset`` the partition's LSO once the
transaction was closed. read_committed fetches list the entries overlapping what they return, so
that clients can drop the aborted records. The file exists only once it has an entry; there is no
header and a trailing partial entry is ignored. Kafka's code:
``storage/src/main/java/org/apache/kafka/storage/internals/log/TransactionIndex.java`` and
``AbortedTxn.java``.

Rules: docs/semantics.md#txn-index. Entries are few (one per aborted transaction), so they are all kept in memory; appends go to the
file at once and are fsynced with the segment.
"""

from __future__ import annotations

import os
import struct
from bisect import bisect_left
from pathlib import Path
from typing import NamedTuple

from minikafka.storage.index import CorruptIndexError, IndexFileHandle

_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
VERSION = 0


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(VERSION, *self)


class TransactionIndex(IndexFileHandle):
    """The aborted transactions whose markers lie in one segment, ordered by marker offset."""

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.entries: list[AbortedTxn] = []
        self._last_offsets: list[int] = []
        self._fd: int | None = None

    @classmethod
    def load(cls, path: Path, base_offset: int) -> TransactionIndex:
        """Read the file if there is one. Raises :class:`CorruptIndexError` for an entry of an
        unknown version, one whose marker lies below the segment (Kafka's sanity check) or
        marker offsets that do not increase; the caller then rebuilds the segment's index."""
        index = cls(path, base_offset)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return index
        usable = len(data) - len(data) % ENTRY_SIZE
        for pos in range(0, usable, ENTRY_SIZE):
            version, *fields = _ENTRY.unpack_from(data, pos)
            txn = AbortedTxn(*fields)
            if version != VERSION:
                raise CorruptIndexError(f"{path.name}: entry version {version}")
            if txn.last_offset < base_offset:
                raise CorruptIndexError(
                    f"{path.name}: last offset {txn.last_offset} is below the segment base {base_offset}")
            if index._last_offsets and txn.last_offset <= index._last_offsets[-1]:
                raise CorruptIndexError(f"{path.name}: last offsets do not increase")
            index.entries.append(txn)
            index._last_offsets.append(txn.last_offset)
        return index

    def __len__(self) -> int:
        return len(self.entries)

    def append(self, txn: AbortedTxn) -> None:
        """Add an entry; its marker offset must be above every earlier one. Creates the file."""
        if self._last_offsets and txn.last_offset <= self._last_offsets[-1]:
            raise ValueError(f"aborted transaction at {txn.last_offset} does not follow {self._last_offsets[-1]}")
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            if os.fstat(self._fd).st_size != len(self.entries) * ENTRY_SIZE:
                os.ftruncate(self._fd, len(self.entries) * ENTRY_SIZE)  # a torn tail entry
        os.pwrite(self._fd, txn.encode(), len(self.entries) * ENTRY_SIZE)
        self.entries.append(txn)
        self._last_offsets.append(txn.last_offset)

    def collect(self, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """Entries overlapping ``[fetch_offset, upper_bound)``, and whether the search is complete:
        it stops after the first entry whose last stable offset reaches ``upper_bound`` (no later
        entry can then overlap the range)."""
        found = []
        # An entry's last stable offset is at most its marker offset + 1, so entries with a marker
        # below the fetch offset can neither match nor end the search unless the bound is that low.
        start = bisect_left(self._last_offsets, fetch_offset) if upper_bound > fetch_offset else 0
        for txn in self.entries[start:]:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound:
                return found, True
        return found, False

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at ``offset`` or later, in memory and in the file (a
        follower truncating its log; Kafka's ``TransactionIndex.truncateTo``)."""
        keep = bisect_left(self._last_offsets, offset)
        if keep == len(self.entries):
            return
        del self.entries[keep:]
        del self._last_offsets[keep:]
        if self._fd is not None:
            os.ftruncate(self._fd, keep * ENTRY_SIZE)
        elif self.path.exists():
            os.truncate(self.path, keep * ENTRY_SIZE)

    def reset(self) -> None:
        """Forget every entry and remove the file (the segment's index is being rebuilt)."""
        self.close()
        self.entries = []
        self._last_offsets = []
        self.path.unlink(missing_ok=True)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
