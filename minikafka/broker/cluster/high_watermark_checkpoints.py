"""A cluster broker's ``replication-offset-checkpoint``: restored at start, written on a timer and
at a clean stop (the file and Kafka's rule: :mod:`minikafka.storage.high_watermarks`).

Kafka: ``ReplicaManager.checkpointHighWatermarks`` and ``Partition.createLog``,
https://github.com/apache/kafka/blob/trunk/core/src/main/scala/kafka/server/ReplicaManager.scala.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from minikafka.storage.high_watermarks import HighWatermarkCheckpoint, restore_high_watermark

if TYPE_CHECKING:
    from minikafka.broker.cluster.controller import Controller
    from minikafka.storage.log_manager import LogManager

log = logging.getLogger(__name__)


class HighWatermarkCheckpoints:
    """The high watermarks of one cluster broker's replicas, kept across restarts."""

    def __init__(self, storage: LogManager, controller: Controller) -> None:
        self.storage = storage
        self.controller = controller
        self.file = HighWatermarkCheckpoint(storage.data_dir)

    def restore(self) -> None:
        """Before the broker takes up its replicas: each replica of a partition the controller
        knows starts from the checkpointed high watermark, not from its log end, so a restarted
        follower does not serve records its leader never committed, and a restarted leader's
        high watermark rises from there as its followers fetch."""
        saved = self.file.read()
        for plog in self.storage.all_logs():
            if self.controller.partition(plog.topic, plog.partition) is not None:
                plog.replicated = True
                restore_high_watermark(plog, saved)

    def write(self) -> None:
        """Record every hosted replica's high watermark (``replica.high.watermark.checkpoint.interval.ms``)."""
        self.file.write(self.storage.all_logs())

    def write_at_stop(self) -> None:
        """The last write of a clean stop: a failure is logged, the stop goes on."""
        try:
            self.write()
        except OSError:
            log.exception("cannot write %s", self.file.path)
