"""The leader-epoch cache of a partition and its ``leader-epoch-checkpoint`` file, in Kafka's format.

Each entry says "epoch E started at offset S": the leader adds ``(E, log end)`` when it becomes
leader at a higher epoch, and every appended batch adds ``(partitionLeaderEpoch, baseOffset)`` when
its epoch is new. Followers learn epochs only from the batches they copy. The cache answers "where
did epoch E end?" (:meth:`LeaderEpochCache.end_offset_for`), which is how a follower or a consumer
finds out that its log has diverged from the leader's and where to truncate.

File format (``leader-epoch-checkpoint`` in the partition directory): UTF-8 lines, ``0`` (the
version), the number of entries, then ``<epoch> <start offset>`` per entry; an empty file means no
entries. Written whole to ``.tmp``, fsynced and renamed, as every checkpoint file.

Kafka: ``LeaderEpochFileCache`` and ``LeaderEpochCheckpointFile``,
https://github.com/apache/kafka/blob/trunk/storage/src/main/java/org/apache/kafka/storage/internals/epoch/LeaderEpochFileCache.java,
https://github.com/apache/kafka/blob/trunk/storage/src/main/java/org/apache/kafka/storage/internals/checkpoint/LeaderEpochCheckpointFile.java.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from pathlib import Path

from minikafka.storage.atomic_files import atomic_write

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1
_VERSION = 0


class LeaderEpochFileError(ValueError):
    """A checkpoint file that is not in Kafka's format (Kafka takes the log dir offline)."""


@dataclass(frozen=True)
class EpochEntry:
    epoch: int
    start_offset: int


def parse_leader_epoch_checkpoint(text: str, where: str = LEADER_EPOCH_CHECKPOINT) -> list[EpochEntry]:
    if not text:
        return []
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    try:
        version, count = int(lines[0]), int(lines[1])
    except (IndexError, ValueError):
        raise LeaderEpochFileError(f"{where}: malformed header {lines[:2]!r}") from None
    if version != _VERSION:
        raise LeaderEpochFileError(f"{where}: unknown version {version}")
    entries: list[EpochEntry] = []
    for line in lines[2:]:
        fields = line.split()
        if len(fields) != 2:
            raise LeaderEpochFileError(f"{where}: malformed entry {line!r}")
        try:
            entries.append(EpochEntry(int(fields[0]), int(fields[1])))
        except ValueError:
            raise LeaderEpochFileError(f"{where}: malformed entry {line!r}") from None
    if len(entries) != count:
        raise LeaderEpochFileError(f"{where}: {count} entries announced, {len(entries)} found")
    return entries


def format_leader_epoch_checkpoint(entries: list[EpochEntry]) -> str:
    return "".join([f"{_VERSION}\n{len(entries)}\n", *(f"{e.epoch} {e.start_offset}\n" for e in entries)])


class LeaderEpochCache:
    """The epochs of one partition's log, kept in memory and in its checkpoint file.

    Entries are kept in rising epoch order with rising start offsets: adding an entry first drops
    every entry it contradicts (a higher or equal epoch, or a start at or after its start).
    """

    def __init__(self, path: Path, entries: list[EpochEntry]) -> None:
        self.path = path
        self._entries = list(entries)

    @classmethod
    def load(cls, partition_dir: Path) -> LeaderEpochCache:
        """The cache of ``partition_dir``; a missing file is an empty cache. Raises
        :class:`LeaderEpochFileError` for a file in another format."""
        path = partition_dir / LEADER_EPOCH_CHECKPOINT
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            text = ""
        except UnicodeDecodeError:
            raise LeaderEpochFileError(f"{path}: not UTF-8 text") from None
        return cls(path, parse_leader_epoch_checkpoint(text, str(path)))

    # ----------------------------------------------------------------- reading
    @property
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int:
        return self._entries[-1].epoch if self._entries else UNDEFINED_EPOCH

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch the record at ``offset`` was written in, or -1 before the first entry."""
        i = bisect.bisect_right([e.start_offset for e in self._entries], offset)
        return self._entries[i - 1].epoch if i else UNDEFINED_EPOCH

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """``(epoch found, end offset)`` for a requested epoch: the latest epoch ends at the log
        end; an epoch below every entry ends where the first entry starts; an epoch between entries
        is answered with the floor epoch and where the next one starts; an unknown higher epoch, or
        -1, is ``(-1, -1)``. Kafka: ``LeaderEpochFileCache.endOffsetFor``."""
        if epoch == UNDEFINED_EPOCH or not self._entries:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if epoch == self._entries[-1].epoch:
            return epoch, log_end_offset
        epochs = [e.epoch for e in self._entries]
        higher = bisect.bisect_right(epochs, epoch)
        if higher == len(epochs):
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if higher == 0:
            return epoch, self._entries[0].start_offset
        return self._entries[higher - 1].epoch, self._entries[higher].start_offset

    # ----------------------------------------------------------------- changing
    def assign(self, epoch: int, start_offset: int, *, durable: bool = True) -> bool:
        """Record that ``epoch`` starts at ``start_offset`` unless the latest entry already says so
        (same epoch, no later start); returns whether the cache changed. ``durable=False`` skips the
        fsyncs, for an entry that loading writes again when the file is missing."""
        if epoch < 0:
            return False
        if self._entries:
            latest = self._entries[-1]
            if latest.epoch == epoch and latest.start_offset <= start_offset:
                return False
        while self._entries and (self._entries[-1].epoch >= epoch or self._entries[-1].start_offset >= start_offset):
            self._entries.pop()
        self._entries.append(EpochEntry(epoch, start_offset))
        self._write(durable)
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """The log was cut at ``end_offset``: drop the entries that start at or after it."""
        if end_offset < 0 or not self._entries or self._entries[-1].start_offset < end_offset:
            return
        while self._entries and self._entries[-1].start_offset >= end_offset:
            self._entries.pop()
        self._write()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: entries before it go, and the last of them moves
        up to start there, so the epoch of the first remaining record stays known."""
        removed = [e for e in self._entries if e.start_offset <= start_offset]
        if not removed:
            return
        kept = self._entries[len(removed):]
        self._entries = [EpochEntry(removed[-1].epoch, start_offset), *kept]
        self._write()

    def clear(self) -> None:
        self._entries = []
        self._write()

    def _write(self, durable: bool = True) -> None:
        atomic_write(self.path, format_leader_epoch_checkpoint(self._entries).encode(), durable=durable)
