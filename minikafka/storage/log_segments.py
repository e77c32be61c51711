"""The segments of one partition log, in offset order, with their base offsets beside them.

Kafka keeps the same list (``LogSegments.java``): lookups by offset (the floor segment, the batch
holding an offset, the aborted transactions from a segment on) and the changes the log makes to
it (a roll appends, retention removes from the front, the cleaner replaces consecutive segments,
a follower's truncation removes from the back). It does no locking: :class:`PartitionLog
<minikafka.storage.log.PartitionLog>` changes it under its lock, which a flush thread also takes.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Sequence
from typing import overload

from minikafka.storage.batch import BatchHeader
from minikafka.storage.segment import LogSegment


class LogSegments(Sequence[LogSegment]):
    """The segments in offset order; the last is the active one (appends go there)."""

    def __init__(self, segments: Iterable[LogSegment]) -> None:
        self._list: list[LogSegment] = list(segments)
        self._bases: list[int] = [seg.base_offset for seg in self._list]

    @overload
    def __getitem__(self, i: int) -> LogSegment: ...
    @overload
    def __getitem__(self, i: slice) -> list[LogSegment]: ...
    def __getitem__(self, i: int | slice) -> LogSegment | list[LogSegment]:
        return self._list[i]

    def __len__(self) -> int:
        return len(self._list)

    def __iter__(self) -> Iterator[LogSegment]:
        return iter(self._list)

    @property
    def active(self) -> LogSegment:
        return self._list[-1]

    def base_offsets(self) -> list[int]:
        return list(self._bases)

    @property
    def size_bytes(self) -> int:
        return sum(seg.size for seg in self._list)

    # ------------------------------------------------------------------ lookups

    def floor_index(self, offset: int) -> int:
        """Index of the segment that would hold ``offset`` (the first one for offsets below it)."""
        return max(0, bisect.bisect_right(self._bases, offset) - 1)

    def locate(self, offset: int) -> tuple[LogSegment, int, BatchHeader] | None:
        """Segment, position and header of the batch holding ``offset`` (or the first after it)."""
        segments = self._list
        i = self.floor_index(offset)
        found = segments[i].find_batch(offset)
        while found is None and i + 1 < len(segments):  # a gap between segments
            i += 1
            found = segments[i].find_batch(offset)
        return None if found is None else (segments[i], found[0], found[1])

    def base_after(self, seg: LogSegment) -> int | None:
        """Base offset of the segment after ``seg``, or None for the active one."""
        i = bisect.bisect_right(self._bases, seg.base_offset)
        return self._bases[i] if i < len(self._bases) else None

    def collect_aborted(self, fetch_offset: int, upper_bound: int) -> list[tuple[int, int]]:
        """``(producer_id, first_offset)`` of the aborted-transaction index entries overlapping
        ``[fetch_offset, upper_bound)``, from the segment holding ``fetch_offset`` on, stopping
        after the first entry whose last stable offset reaches the bound (Kafka's selection)."""
        out: list[tuple[int, int]] = []
        for seg in self._list[self.floor_index(fetch_offset):]:
            found, complete = seg.txn_index.collect(fetch_offset, upper_bound)
            out.extend((txn.producer_id, txn.first_offset) for txn in found)
            if complete:
                break
        return out

    # ------------------------------------------------------------------ changes (under the log's lock)

    def add(self, new: LogSegment) -> None:
        """A roll: the active segment becomes inactive (indexes trimmed) and ``new`` active."""
        self._list[-1].on_become_inactive()
        self._list.append(new)
        self._bases.append(new.base_offset)

    def remove(self, doomed: Sequence[LogSegment]) -> None:
        """Take ``doomed`` out of the list (their files are the caller's to delete)."""
        gone = {id(seg) for seg in doomed}
        self._set([seg for seg in self._list if id(seg) not in gone])

    def replace(self, old: Sequence[LogSegment], new: LogSegment) -> None:
        """Put ``new`` in place of the consecutive segments ``old`` (the log cleaner's swap)."""
        i = next(k for k, seg in enumerate(self._list) if seg is old[0])
        if [id(seg) for seg in self._list[i : i + len(old)]] != [id(seg) for seg in old]:
            raise ValueError(f"segments {[s.base_offset for s in old]} are no longer consecutive")
        self._list[i : i + len(old)] = [new]
        self._bases = [seg.base_offset for seg in self._list]

    def above(self, offset: int) -> list[LogSegment]:
        """The segments a truncation to ``offset`` removes whole: those starting after it, or all
        of them when ``offset`` is below the first segment."""
        if offset < self._bases[0]:
            return list(self._list)
        return self._list[bisect.bisect_right(self._bases, offset):]

    def cut_files(self, doomed: Sequence[LogSegment], offset: int, now_ms: int, *, afresh: bool) -> LogSegment:
        """The files' side of a truncation to ``offset`` the list already shows: the removed
        segments deleted and, unless the log started afresh, the active one cut at ``offset``
        (its indexes open for appends again if it was not active before). Returns the active one."""
        for seg in doomed:
            seg.delete()
        active = self.active
        if not afresh:
            active.truncate_to(offset, now_ms)
            if doomed:
                active.make_active(rewrite_indexes=True)
        return active

    def reset(self, segments: Iterable[LogSegment]) -> list[LogSegment]:
        """Replace the whole list; returns the segments it held."""
        old = self._list
        self._set(list(segments))
        return old

    def _set(self, segments: list[LogSegment]) -> None:
        self._list = segments
        self._bases = [seg.base_offset for seg in segments]
