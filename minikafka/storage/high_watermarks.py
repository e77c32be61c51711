"""``replication-offset-checkpoint``: the high watermark of every replica a cluster broker hosts.

A replica's high watermark lives in memory: the leader moves it as its followers catch up, a
follower learns it from the leader's Fetch answers. A broker that restarts must not start from its
log end (a follower may hold records the leader never committed) nor wait for a leader to learn
it, so, as Kafka's ``ReplicaManager.checkpointHighWatermarks`` does, the broker writes every
replica's high watermark to this file in its data dir every
``replica.high.watermark.checkpoint.interval.ms`` and at a clean stop, and a restarted replica
starts from ``min(checkpoint, log end)`` (no entry counts as 0; both are raised to the log start).
Kafka's offset checkpoint format (``0``, the entry count, ``<topic> <partition> <offset>`` lines,
https://github.com/apache/kafka/blob/trunk/storage/src/main/java/org/apache/kafka/storage/internals/checkpoint/OffsetCheckpointFile.java),
written atomically like the data dir's other checkpoints (:mod:`.atomic_files`). The Spark reader
reads it too, to stop a cluster replica's records at what was committed.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from minikafka.storage.checkpoints import read_offset_checkpoint, write_offset_checkpoint
from minikafka.storage.disk_format import REPLICATION_OFFSET_CHECKPOINT, TopicPartition

if TYPE_CHECKING:
    from minikafka.storage.log import PartitionLog


class HighWatermarkCheckpoint:
    """One data dir's ``replication-offset-checkpoint`` file."""

    def __init__(self, data_dir: Path) -> None:
        self.path = Path(data_dir) / REPLICATION_OFFSET_CHECKPOINT

    def read(self) -> dict[TopicPartition, int]:
        """The recorded high watermarks; empty (with a warning when unreadable) if there are none."""
        return read_offset_checkpoint(self.path)

    def write(self, logs: Iterable[PartitionLog]) -> None:
        """Record the high watermark of every log in ``logs`` (temp file, fsync, rename)."""
        write_offset_checkpoint(self.path, {(plog.topic, plog.partition): plog.high_watermark for plog in logs})


def restore_high_watermark(plog: PartitionLog, checkpointed: dict[TopicPartition, int]) -> int:
    """Give a freshly loaded replica the high watermark it had: ``min(checkpoint, log end)``, at
    least the log start (Kafka: ``Partition.createLog`` then ``UnifiedLog.updateHighWatermark``)."""
    return plog.update_high_watermark(checkpointed.get((plog.topic, plog.partition), 0))
