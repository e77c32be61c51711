"""Kafka's log directory layout, read-only: which partitions and segments a data dir holds.

The same code reads a minikafka data dir and a Kafka broker's own log dir (docs/semantics.md#on-disk-layout): one
directory ``<topic>-<partition>`` per partition, holding ``<20-digit base offset>.log`` segments
with their ``.index`` and ``.timeindex``. Everything else (snapshots, checkpoints, ``-delete`` and
``-future`` directories, ``meta.properties``, ``minikafka-topics.json``) is ignored. File sizes are
taken once, when the directory is listed, so a read of a live directory sees one consistent cut.
A cluster's data dir (``minikafka serve --brokers N``) holds one such log dir per broker; each
partition is then read from one of its replicas (:mod:`.cluster_layout`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from minikafka.spark_export.errors import ExportOptionError
from minikafka.spark_export.files import Entry, Files
from minikafka.storage.disk_format import SEGMENT_LOG_NAME as _SEGMENT_LOG
from minikafka.storage.disk_format import (
    TopicPartition,
    is_internal_topic,
    parse_offset_checkpoint,
    parse_partition_dir_name,
)

LOG_START_CHECKPOINT = "log-start-offset-checkpoint"
META_PROPERTIES = "meta.properties"
#: The controller's records at the root of a cluster's data dir (minikafka.broker.cluster.metadata_file).
CLUSTER_METADATA = "cluster-metadata.json"


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
    #: In a cluster's data dir: the chosen replica's high watermark (from its broker's
    #: ``replication-offset-checkpoint``); records at or above it are not committed and not read.
    high_watermark: int | None = None
    #: In a cluster's data dir: the node id of the broker whose replica this is.
    replica: int | None = None

    @property
    def is_internal(self) -> bool:
        return is_internal_topic(self.topic)


def list_segments(files: Files, path: str) -> list[SegmentFile]:
    """The ``.log`` segments of one partition directory, sorted by base offset."""
    out: list[SegmentFile] = []
    for entry in files.list_dir(path) or []:
        match = _SEGMENT_LOG.match(entry.name)
        if match is None or entry.is_dir:
            continue
        out.append(SegmentFile(int(match.group(1)), files.join(path, entry.name), entry.size))
    out.sort(key=lambda s: s.base_offset)
    return out


def read_offset_checkpoint(files: Files, path: str) -> dict[TopicPartition, int]:
    """Kafka's offset checkpoint text format (version 0); an unreadable file reads as empty."""
    raw = files.read_bytes(path)
    if raw is None:
        return {}
    try:
        return parse_offset_checkpoint(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return {}


def check_data_dir(files: Files, entries: list[Entry] | None) -> list[Entry]:
    """The root's entries, or a clear error when the root is not a broker's data directory.

    Both minikafka and Kafka write ``meta.properties`` into every log directory before the first
    segment, so its absence means the path names something else (a typo, a parent directory, a
    copy that missed files) and reading it would silently give no rows.
    """
    root = files.root
    where = files.describe(root)
    if entries is None:
        if files.kind(root) == "file":
            raise ExportOptionError(f"{where} is a file; load the broker's data directory (log.dirs)")
        raise ExportOptionError(f"minikafka data directory not found: {where}")
    names = {e.name for e in entries}
    if META_PROPERTIES not in names and CLUSTER_METADATA not in names:
        if any(_SEGMENT_LOG.match(n) for n in names):
            raise ExportOptionError(f"{where} looks like one partition's directory; load its parent, the "
                                    "broker's data directory")
        raise ExportOptionError(f"{where} is not a minikafka or Kafka data directory (it has no "
                                f"{META_PROPERTIES}); load the broker's data directory (log.dirs), or a "
                                f"cluster's --data-dir (with {CLUSTER_METADATA})")
    return entries


def list_partitions(files: Files) -> list[PartitionDir]:
    """Every partition of the data dir with its segments, sorted by topic, partition: a broker's
    partition directories, or for a cluster's data dir one replica of each partition."""
    entries = check_data_dir(files, files.list_dir(files.root))
    if not any(e.name == META_PROPERTIES for e in entries):
        from minikafka.spark_export.cluster_layout import cluster_partitions

        return cluster_partitions(files)
    out = [replace(p, segments=list_segments(files, p.path)) for p in partition_dirs(files, files.root, entries)]
    out.sort(key=lambda p: (p.topic, p.partition))
    return out


def partition_dirs(files: Files, log_dir: str, entries: list[Entry]) -> list[PartitionDir]:
    """The partition directories among ``entries`` of one broker's log dir, segments not listed yet."""
    starts = read_offset_checkpoint(files, files.join(log_dir, LOG_START_CHECKPOINT))
    out: list[PartitionDir] = []
    for entry in entries:
        parsed = parse_partition_dir_name(entry.name)
        if parsed is not None and entry.is_dir:
            out.append(PartitionDir(parsed[0], parsed[1], files.join(log_dir, entry.name), [], starts.get(parsed)))
    return out
