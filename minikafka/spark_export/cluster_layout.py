"""A cluster's data dir: each partition read from one replica, up to that replica's high watermark.

``minikafka serve --brokers N --data-dir D`` keeps the controller's records in
``D/cluster-metadata.json`` (per partition its replicas, in-sync replicas and leader) and one Kafka
log dir per broker, ``D/node-<id>/``, holding that broker's replicas. Every replica holds the same
committed records at the same offsets; what differs is how far each reaches: a follower may lag,
and any replica may hold records past the high watermark that were never committed (written with
acks=1 to a leader its followers could not reach, or the tail of a replica that was not in sync)
and that a consumer never sees. So, as a consumer reads from the leader up to the high watermark,
the reader takes each partition from ONE replica:

* the in-sync replica with the highest checkpointed high watermark, the leader the controller
  records first on a tie, then the ISR's order (the leader's own high watermark may lag: a broker
  elected leader as the cluster stopped, or just before, starts from the one it had as a follower,
  which rises only once its followers fetch from it);
* else (no in-sync replica on any broker's disk) any replica, chosen the same way;

and reads it up to that replica's high watermark, taken from its broker's
``replication-offset-checkpoint`` (written every ``replica.high.watermark.checkpoint.interval.ms``
and at a clean stop; a partition missing there counts as 0, as Kafka's broker counts it). A
replica's checkpointed high watermark is never above what the cluster committed, so no record
is read that a consumer could not read, and none twice.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from minikafka.spark_export.errors import ExportOptionError
from minikafka.spark_export.files import Files
from minikafka.spark_export.layout import (
    CLUSTER_METADATA,
    PartitionDir,
    list_segments,
    partition_dirs,
    read_offset_checkpoint,
)
from minikafka.storage.disk_format import REPLICATION_OFFSET_CHECKPOINT, TopicPartition


@dataclass(frozen=True, slots=True)
class PartitionRecord:
    """What the controller recorded of one partition."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int


def read_cluster_metadata(files: Files) -> list[PartitionRecord]:
    """Every partition in ``cluster-metadata.json``; a clear error when it cannot be read."""
    path = files.join(files.root, CLUSTER_METADATA)
    raw = files.read_bytes(path)
    if raw is None:
        raise ExportOptionError(f"cannot read {files.describe(path)}")
    try:
        doc: Any = json.loads(raw)
        return [PartitionRecord(str(t["name"]), i, tuple(int(r) for r in p["replicas"]),
                                tuple(int(r) for r in p["isr"]), int(p["leader"]))
                for t in doc["topics"] for i, p in enumerate(t["partitions"])]
    except (ValueError, KeyError, TypeError) as exc:
        raise ExportOptionError(f"{files.describe(path)} is not a minikafka cluster metadata file ({exc})") from exc


class _Broker:
    """One broker's log dir: its partition directories and checkpointed high watermarks."""

    def __init__(self, files: Files, node_id: int) -> None:
        path = files.join(files.root, f"node-{node_id}")
        entries = files.list_dir(path)
        self.partitions = {(p.topic, p.partition): replace(p, replica=node_id)
                           for p in partition_dirs(files, path, entries or [])}
        self.high_watermarks = read_offset_checkpoint(files, files.join(path, REPLICATION_OFFSET_CHECKPOINT))

    def high_watermark(self, tp: TopicPartition) -> int:
        return self.high_watermarks.get(tp, 0)


def choose_replica(record: PartitionRecord, brokers: dict[int, _Broker]) -> PartitionDir | None:
    """The replica to read ``record``'s partition from (see the module docstring), or None when no
    broker's dir holds it."""
    tp = (record.topic, record.partition)
    present = [r for r in record.replicas if r in brokers and tp in brokers[r].partitions]
    in_sync = [r for r in record.isr if r in present]
    candidates = in_sync or present
    if not candidates:
        return None
    node = max(candidates, key=lambda r: (brokers[r].high_watermark(tp), r == record.leader, -candidates.index(r)))
    return replace(brokers[node].partitions[tp], high_watermark=brokers[node].high_watermark(tp))


def cluster_partitions(files: Files) -> list[PartitionDir]:
    """One replica of every partition the controller records, with its segments, sorted by topic,
    partition; a partition that no broker's dir holds is left out."""
    records = read_cluster_metadata(files)
    brokers = {n: _Broker(files, n) for n in sorted({r for rec in records for r in rec.replicas})}
    out: list[PartitionDir] = []
    for record in records:
        chosen = choose_replica(record, brokers)
        if chosen is not None:
            out.append(replace(chosen, segments=list_segments(files, chosen.path)))
    out.sort(key=lambda p: (p.topic, p.partition))
    return out
