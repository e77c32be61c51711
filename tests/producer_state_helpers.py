"""The producer-state tests' stand-ins: a settable clock, client batch headers, and a partition
that drives a real ProducerStateManager the way the partition log does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from minikafka.storage.batch import BatchHeader
from minikafka.storage.producer_state import ProducerStateManager

P = 1000
Q = 2000
NOW = 1_700_000_000_000
DAY_MS = 86_400_000


class Clock:
    """The broker clock a test moves by hand (``clock.now += DAY_MS``)."""

    def __init__(self, now: int = NOW) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def header(
    pid: int, epoch: int, seq: int, count: int = 1, *, offset: int = 0, ts: int = NOW, attributes: int = 0,
    crc: int = 0,
) -> BatchHeader:
    """A v2 batch header as a client sends it (base offset ``offset``, 0 from a client)."""
    return BatchHeader(offset, 49 + 20 * count, -1, 2, crc, attributes, count - 1, ts, ts, pid, epoch, seq, count)


class Partition:
    """Drives the manager like the partition log: check, then append at the log end, then update.

    It keeps the headers it appended, so a restart can replay the tail as the log does from its
    segments; the log end is the end of the last of them (``log_start`` while there are none).
    """

    def __init__(self, directory: Path, clock: Clock, **kw: Any) -> None:
        self.directory = directory
        self.clock = clock
        self.kw = kw
        self.mgr = ProducerStateManager(directory, now_ms=clock, **kw)
        self.headers: list[BatchHeader] = []
        self.log_start = 0

    @property
    def leo(self) -> int:
        return self.headers[-1].next_offset if self.headers else self.log_start

    def append(self, h: BatchHeader) -> None:
        """Write ``h`` at the log end and record it, without the client checks (a replayed batch or a
        transaction marker)."""
        h.base_offset = self.leo
        self.mgr.update(h)
        self.headers.append(h)

    def produce(self, pid: int, epoch: int, seq: int, count: int = 1, **kw: Any) -> int:
        """Base offset of the batch: the original one for a duplicate; raises KafkaError."""
        h = header(pid, epoch, seq, count, **kw)
        dup = self.mgr.check(h)
        if dup is not None:
            return dup.first_offset
        self.append(h)
        return h.base_offset

    def truncate(self, leo: int) -> None:
        self.headers = [h for h in self.headers if h.base_offset < leo]

    def restart(self) -> int:
        """New manager: reload from snapshots, replay from map_end_offset, snapshot at the LEO.
        Returns the offset replay started from."""
        self.mgr = ProducerStateManager(self.directory, now_ms=self.clock, **self.kw)
        self.mgr.truncate_and_reload(self.log_start, self.leo)
        start = self.mgr.map_end_offset
        for h in self.headers:
            if h.base_offset >= start:
                self.mgr.update(h)
        self.mgr.take_snapshot(self.leo)
        return start

    def window(self, pid: int) -> list[str]:
        """The cached batches as 'first..last@offset' (single records as 'seq@offset')."""
        out = []
        for m in self.mgr.producers()[pid].batches:
            rng = str(m.first_seq) if m.first_seq == m.last_seq else f"{m.first_seq}..{m.last_seq}"
            out.append(f"{rng}@{m.first_offset}")
        return out
