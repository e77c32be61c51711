"""The offset map and the transaction bookkeeping of a cleaning (Kafka's ``OffsetMap`` and the
aborted-transaction and marker tracking of ``Cleaner``, ``core/src/main/scala/kafka/log/LogCleaner.scala``).

The map notes the latest offset of each key in the dirty segments; records of aborted
transactions shadow nothing. :class:`TransactionsSeen` tells the rewrite which markers are still
needed."""

from __future__ import annotations

import threading
from bisect import bisect_right
from typing import TYPE_CHECKING

from minikafka.storage.batch import TRANSACTIONAL_FLAG, BatchHeader
from minikafka.storage.cleaner.reading import (
    Cancelled,
    Throttler,
    iter_batches,
    parse_records,
    raw_records,
    untouched,
)
from minikafka.storage.control import parse_marker
from minikafka.storage.txn_index import AbortedTxn

if TYPE_CHECKING:
    from minikafka.storage.cleaner.manager import Plan


class AbortedRanges:
    """Which transactional batches belong to aborted transactions, from the ``.txnindex`` entries
    of the whole log. The cleaned range lies below the last stable offset, so every transaction
    there is complete: a transactional batch outside every aborted range was committed."""

    def __init__(self, entries: list[AbortedTxn]) -> None:
        self.entries = entries
        ranges: dict[int, list[tuple[int, int]]] = {}
        for txn in entries:
            ranges.setdefault(txn.producer_id, []).append((txn.first_offset, txn.last_offset))
        self._firsts = {pid: [r[0] for r in sorted(rs)] for pid, rs in ranges.items()}
        self._lasts = {pid: [r[1] for r in sorted(rs)] for pid, rs in ranges.items()}

    def contains(self, header: BatchHeader) -> bool:
        firsts = self._firsts.get(header.producer_id)
        if not firsts or not header.attributes & TRANSACTIONAL_FLAG:
            return False
        i = bisect_right(firsts, header.base_offset) - 1
        return i >= 0 and header.base_offset <= self._lasts[header.producer_id][i]



class TransactionsSeen:
    """Which markers a cleaning still needs, found while it reads its range in offset order
    (Kafka's ``CleanedTransactionMetadata``): per producer, whether a batch of its current
    transaction has been read since its last marker. The aborted transactions come from the
    ``.txnindex`` entries; one becomes current for its producer once the reading reaches its
    first offset."""

    def __init__(self, aborted: list[AbortedTxn]) -> None:
        self._pending = sorted(aborted, key=lambda t: t.first_offset)
        self._next = 0
        self._aborted: dict[int, tuple[AbortedTxn, bool]] = {}  # producer -> (entry, a batch was read)
        self._committed: set[int] = set()  # producers with a batch read since their last marker

    def _reach(self, offset: int) -> None:
        pending = self._pending
        while self._next < len(pending) and pending[self._next].first_offset <= offset:
            txn = pending[self._next]
            self._aborted.setdefault(txn.producer_id, (txn, False))
            self._next += 1

    def on_data(self, header: BatchHeader) -> bool:
        """Note a data batch (empty ones too); True if it belongs to an aborted transaction."""
        self._reach(header.last_offset)
        if not header.attributes & TRANSACTIONAL_FLAG:
            return False
        pid = header.producer_id
        current = self._aborted.get(pid)
        if current is not None:
            self._aborted[pid] = (current[0], True)
            return True
        self._committed.add(pid)
        return False

    def on_control(self, batch: memoryview, header: BatchHeader) -> tuple[bool, AbortedTxn | None]:
        """Note a control batch: whether nothing before it needs it any more, and the
        ``.txnindex`` entry it keeps (an ABORT marker whose transaction has batches left)."""
        self._reach(header.last_offset)
        marker = parse_marker(batch, header)
        pid = header.producer_id
        if marker is None:
            return header.records_count <= 0, None  # an emptied control batch; other kinds stay
        if marker.commit:
            needed = pid in self._committed
            self._committed.discard(pid)
            return not needed, None
        current = self._aborted.pop(pid, None)
        if current is not None and current[1]:
            return False, current[0]
        return True, None


def build_offset_map(plan: Plan, throttler: Throttler, cancelled: threading.Event) -> tuple[dict[bytes, int], int]:
    """Latest offset of each key in the dirty segments, and the offset the map reaches."""
    latest: dict[bytes, int] = {}
    end = plan.first_dirty
    for seg, size in zip(plan.segments, plan.sizes, strict=True):
        if seg.next_offset <= plan.first_dirty:
            continue
        if latest and len(latest) >= plan.max_map_keys:
            break  # full: the map ends at this segment boundary
        for header, batch in iter_batches(seg.log_path, size, throttler):
            if cancelled.is_set():
                raise Cancelled
            if untouched(header) or plan.aborted_ranges.contains(header):
                continue  # aborted records shadow nothing
            first_dirty = plan.first_dirty
            for _start, _end, offset, _ts, key, _tomb in parse_records(raw_records(batch, header), header):
                if key is not None and offset >= first_dirty:
                    latest[key] = offset
        end = seg.next_offset
    return latest, end
