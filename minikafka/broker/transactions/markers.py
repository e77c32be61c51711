"""Writing transaction markers into the partitions a broker holds.

The transaction coordinator ends a transaction by writing a COMMIT or ABORT marker into each of
its partitions (Kafka's ``WriteTxnMarkers``, sent by the coordinator to each partition's leader).
:class:`LocalMarkers` is what a broker does with them: it appends each marker to its partition's
log; in a cluster it does so only as the partition's leader, and answers once every in-sync
replica has the marker (Kafka appends markers with acks=all), so that a marker acknowledged to the
coordinator survives any later election. A marker on ``__consumer_offsets`` also completes the
transaction's offsets in the broker's group coordinator. A single broker's transaction coordinator
writes through it directly; in a cluster the coordinator sends ``WriteTxnMarkers`` to the leaders
(:mod:`minikafka.broker.cluster.markers`), whose handler writes through it.

Kafka: ``KafkaApis.handleWriteTxnMarkersRequest``,
https://github.com/apache/kafka/blob/trunk/core/src/main/scala/kafka/server/KafkaApis.scala.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from minikafka.broker.groups.records import OFFSETS_TOPIC
from minikafka.errors import ErrorCode, KafkaError
from minikafka.storage.disk_format import TopicPartition

if TYPE_CHECKING:
    from minikafka.broker.internal_log import Replication
    from minikafka.storage.facade import PartitionStorage, Storage

log = logging.getLogger(__name__)

#: What the group coordinator is told when a marker lands on a partition of ``__consumer_offsets``:
#: (that partition, producer id, COMMIT?).
OffsetsMarkerCallback = Callable[[int, int, bool], None]


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """One transaction's outcome as its markers carry it."""

    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int


class MarkerWriter(Protocol):
    """Where a transaction coordinator's markers go: the error of each partition (NONE once its
    marker is written and durable; UNKNOWN_TOPIC_OR_PARTITION when the partition is gone)."""

    async def write(self, marker: TxnMarker, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]: ...


class LocalMarkers:
    """Markers appended to this broker's logs (see the module docstring)."""

    def __init__(self, storage: Storage, now_ms: Callable[[], int], on_offsets_marker: OffsetsMarkerCallback,
                 flush: Callable[[PartitionStorage], Awaitable[Any]] | None = None,
                 replication: Replication | None = None, not_here: Callable[[str, int], int] | None = None) -> None:
        """``flush`` (with ``--fsync``) makes a written marker durable on disk; ``replication`` (in
        a cluster) checks leadership and waits for the in-sync replicas; ``not_here`` says what a
        partition without a replica here answers (a single broker: UNKNOWN_TOPIC_OR_PARTITION)."""
        self._storage = storage
        self._now_ms = now_ms
        self._on_offsets_marker = on_offsets_marker
        self._flush = flush
        self._replication = replication
        self._not_here = not_here

    async def write(self, marker: TxnMarker, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        errors: dict[TopicPartition, int] = {}
        written: list[tuple[TopicPartition, PartitionStorage]] = []
        for topic, partition in partitions:
            tp = (topic, partition)
            try:
                plog = self._storage.get_log(topic, partition)
                if plog is None:
                    errors[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if self._not_here is None
                                  else self._not_here(topic, partition))
                    continue
                if self._replication is not None:
                    self._replication.check_writable(topic, partition)
                plog.append_marker(marker.producer_id, marker.producer_epoch, marker.commit,
                                   marker.coordinator_epoch, now_ms=self._now_ms())
            except KafkaError as exc:
                errors[tp] = exc.code
                continue
            written.append((tp, plog))
        # every written marker waits for its fsync and its ISR at once, not one after the other
        durable = await asyncio.gather(*(self._durable(tp, plog) for tp, plog in written))
        for (tp, _plog), error in zip(written, durable, strict=True):
            errors[tp] = error
            if error == ErrorCode.NONE and tp[0] == OFFSETS_TOPIC:
                self._on_offsets_marker(tp[1], marker.producer_id, marker.commit)
        return errors

    async def _durable(self, tp: TopicPartition, plog: PartitionStorage) -> int:
        """NONE once the marker just appended to ``plog`` is fsynced (``--fsync``) and in the ISR."""
        try:
            if self._flush is not None:
                await self._flush(plog)
            if self._replication is not None:
                await self._replication.replicated(tp[0], tp[1], plog.log_end_offset)
        except KafkaError as exc:
            log.warning("marker on %s-%d not acknowledged: %s", tp[0], tp[1], exc)
            return exc.code
        return ErrorCode.NONE
