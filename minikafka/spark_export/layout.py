"""Kafka's log directory layout, read-only: which partitions and segments a data dir holds.

The same code reads a minikafka data dir and a Kafka broker's own log dir (reference §6.1): one
directory ``<topic>-<partition>`` per partition, holding ``<20-digit base offset>.log`` segments
with their ``.index`` and ``.timeindex``. Everything else (snapshots, checkpoints, ``-delete`` and
``-future`` directories, ``meta.properties``, ``minikafka-topics.json``) is ignored. File sizes are
taken once, when the directory is listed, so a read of a live directory sees one consistent cut.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

#: A partition directory: a legal Kafka topic name, a dash, the partition number.
_PARTITION_DIR = re.compile(r"^([A-Za-z0-9._-]{1,249})-(\d{1,9})$")
_SEGMENT_LOG = re.compile(r"^(\d{20})\.log$")
LOG_START_CHECKPOINT = "log-start-offset-checkpoint"


@dataclass(frozen=True, slots=True)
class SegmentFile:
    """One ``.log`` file as it was when listed."""

    base_offset: int
    log_path: str
    size: int

    @property
    def index_path(self) -> str:
        return self.log_path[: -len(".log")] + ".index"

    @property
    def time_index_path(self) -> str:
        return self.log_path[: -len(".log")] + ".timeindex"


@dataclass(slots=True)
class PartitionDir:
    """The segments of one topic-partition, oldest first."""

    topic: str
    partition: int
    path: str
    segments: list[SegmentFile] = field(default_factory=list)
    #: Log start offset from ``log-start-offset-checkpoint`` when the broker recorded one there
    #: (Kafka lists only partitions whose start is above their first segment's base offset).
    checkpoint_start: int | None = None

    @property
    def is_internal(self) -> bool:
        return self.topic.startswith("__")


def parse_partition_dir_name(name: str) -> tuple[str, int] | None:
    """``orders-3`` -> ``("orders", 3)``; None for anything that is not a live partition dir."""
    match = _PARTITION_DIR.match(name)
    if match is None:
        return None
    topic = match.group(1)
    if topic in (".", ".."):
        return None
    return topic, int(match.group(2))


def list_segments(path: str) -> list[SegmentFile]:
    """The ``.log`` segments of one partition directory, sorted by base offset."""
    out: list[SegmentFile] = []
    try:
        names = os.listdir(path)
    except FileNotFoundError:
        return out
    for name in names:
        match = _SEGMENT_LOG.match(name)
        if match is None:
            continue
        log_path = os.path.join(path, name)
        try:
            size = os.stat(log_path).st_size
        except FileNotFoundError:  # deleted by retention while we listed
            continue
        out.append(SegmentFile(int(match.group(1)), log_path, size))
    out.sort(key=lambda s: s.base_offset)
    return out


def read_offset_checkpoint(path: str) -> dict[tuple[str, int], int]:
    """Kafka's offset checkpoint text format (version 0); an unreadable file reads as empty."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except (OSError, UnicodeDecodeError):
        return {}
    if len(lines) < 2 or lines[0].strip() != "0":
        return {}
    try:
        count = int(lines[1].strip())
    except ValueError:
        return {}
    entries = lines[2 : 2 + count]
    if len(entries) != count:
        return {}
    out: dict[tuple[str, int], int] = {}
    for line in entries:
        parts = line.split()
        if len(parts) != 3:
            return {}
        try:
            out[(parts[0], int(parts[1]))] = int(parts[2])
        except ValueError:
            return {}
    return out


def list_partitions(data_dir: str) -> list[PartitionDir]:
    """Every partition directory under ``data_dir`` with its segments, sorted by topic, partition."""
    if not os.path.isdir(data_dir):
        raise FileNotFoundError(f"minikafka data directory not found: {data_dir}")
    starts = read_offset_checkpoint(os.path.join(data_dir, LOG_START_CHECKPOINT))
    out: list[PartitionDir] = []
    for name in os.listdir(data_dir):
        parsed = parse_partition_dir_name(name)
        if parsed is None:
            continue
        path = os.path.join(data_dir, name)
        if not os.path.isdir(path):
            continue
        topic, partition = parsed
        out.append(PartitionDir(topic, partition, path, list_segments(path), starts.get(parsed)))
    out.sort(key=lambda p: (p.topic, p.partition))
    return out
