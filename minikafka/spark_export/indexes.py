"""Read-only views of a segment's ``.index`` and ``.timeindex`` (docs/semantics.md#indexes).

The indexes only ever serve as hints for where to start reading: every position taken from them
is checked against the batch header found there before it is trusted, and a missing or damaged
index just means reading the segment from its first byte. The index files of the active segment
may be pre-allocated with zero entries, so only the leading run of strictly increasing entries
counts.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

import numpy as np

from minikafka.spark_export.files import Files


def _increasing_prefix(*columns: np.ndarray, strict: tuple[bool, ...]) -> int:
    """Length of the leading run where every column increases (strictly where asked)."""
    n = len(columns[0])
    if n <= 1:
        return n
    ok = np.ones(n - 1, dtype=bool)
    for col, is_strict in zip(columns, strict, strict=True):
        step = col[1:] - col[:-1]
        ok &= step > 0 if is_strict else step >= 0
    bad = np.flatnonzero(~ok)
    return int(bad[0]) + 1 if len(bad) else n


@dataclass(frozen=True, slots=True)
class OffsetIndex:
    """``(last offset of a batch, file position of that batch)`` pairs, absolute offsets."""

    offsets: list[int]
    positions: list[int]

    @classmethod
    def load(cls, files: Files, path: str, base_offset: int, log_size: int) -> OffsetIndex:
        return cls.parse(files.read_bytes(path) or b"", base_offset, log_size)

    @classmethod
    def parse(cls, data: bytes, base_offset: int, log_size: int) -> OffsetIndex:
        raw = np.frombuffer(data[: len(data) // 8 * 8], dtype=">i4").reshape(-1, 2).astype(np.int64)
        rel, pos = raw[:, 0], raw[:, 1]
        keep = (rel >= 0) & (pos >= 0) & (pos < log_size)
        stop = int(np.argmin(keep)) if not keep.all() else len(keep)
        rel, pos = rel[:stop], pos[:stop]
        n = _increasing_prefix(rel, pos, strict=(True, True))
        return cls((rel[:n] + base_offset).tolist(), pos[:n].tolist())

    def __len__(self) -> int:
        return len(self.offsets)

    def floor(self, offset: int) -> tuple[int, int] | None:
        """The entry with the greatest offset <= ``offset``, or None."""
        i = bisect_right(self.offsets, offset)
        return (self.offsets[i - 1], self.positions[i - 1]) if i else None


@dataclass(frozen=True, slots=True)
class TimeIndex:
    """``(largest timestamp so far, offset carrying it)`` pairs, absolute offsets."""

    timestamps: list[int]
    offsets: list[int]

    @classmethod
    def load(cls, files: Files, path: str, base_offset: int) -> TimeIndex:
        return cls.parse(files.read_bytes(path) or b"", base_offset)

    @classmethod
    def parse(cls, data: bytes, base_offset: int) -> TimeIndex:
        usable = len(data) // 12 * 12
        raw = np.frombuffer(data[:usable], dtype=np.dtype([("ts", ">i8"), ("rel", ">i4")]))
        ts = raw["ts"].astype(np.int64)
        rel = raw["rel"].astype(np.int64)
        valid = rel >= 0
        stop = int(np.argmin(valid)) if not valid.all() else len(valid)
        ts, rel = ts[:stop], rel[:stop]
        n = _increasing_prefix(ts, rel, strict=(True, False))
        return cls(ts[:n].tolist(), (rel[:n] + base_offset).tolist())

    def __len__(self) -> int:
        return len(self.timestamps)

    def last_below(self, timestamp: int) -> tuple[int, int] | None:
        """The entry with the greatest timestamp < ``timestamp``: every record up to its offset
        has a smaller timestamp, so a search for ``timestamp`` may start after it."""
        i = bisect_right(self.timestamps, timestamp - 1)
        return (self.timestamps[i - 1], self.offsets[i - 1]) if i else None

    @property
    def max_timestamp(self) -> int | None:
        return self.timestamps[-1] if self.timestamps else None
