"""What the rest of the broker may ask of storage: the narrow interface handlers, the group and
transaction coordinators and the test kit use.

In the spirit of Tansu's ``Storage`` trait, the interface is small and says what, not how: append
(a client's batch, a coordinator's batch, a transaction marker), read, the offsets, topics created
and deleted, and questions about producer state. :class:`~minikafka.storage.log_manager.LogManager`
and :class:`~minikafka.storage.log.PartitionLog` implement it as they are (these are structural
protocols: nothing is wrapped, so the produce path pays no extra call). Loading, recovery, flushing,
retention and checkpoints are the broker's lifecycle calls on the ``LogManager`` it owns, not part
of this interface; segments, indexes and the producer-state manager stay inside storage/.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from minikafka.storage.append_result import AppendResult
    from minikafka.storage.batch import BatchHeader
    from minikafka.storage.leader_epoch import LeaderEpochCache
    from minikafka.storage.log_manager import TopicInfo
    from minikafka.storage.producer_state import ProducerStateEntry

Buffer = bytes | bytearray | memoryview


class PartitionStorage(Protocol):
    """One topic-partition."""

    topic: str
    partition: int
    config: dict[str, Any]
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    replicated: bool  # in a cluster: reads by consumers stop at the high watermark
    leader_epoch: int  # stamped on what this replica appends as leader
    epochs: LeaderEpochCache  # where each leader epoch starts (leader-epoch-checkpoint)

    @property
    def name(self) -> str: ...

    @property
    def last_stable_offset(self) -> int: ...

    # -- append ------------------------------------------------------------------------------

    def append_from_client(self, batch: Buffer, now_ms: int | None = None,
                           header: BatchHeader | None = None) -> AppendResult:
        """Validate and append a producer's batch (a retried duplicate answers its first offsets);
        ``header`` is the batch's, if the caller has parsed it."""
        ...

    def append_as_coordinator(self, batch: Buffer, now_ms: int | None = None) -> AppendResult:
        """Append a batch the broker writes on a producer's behalf (epoch checked, sequences not)."""
        ...

    def append_marker(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                      now_ms: int | None = None) -> AppendResult:
        """Append a COMMIT or ABORT marker and close the producer's transaction here."""
        ...

    # -- read --------------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, min_one: bool = True,
             max_offset: int | None = None) -> bytes | memoryview: ...

    def aborted_transactions_for_read(self, offset: int, max_bytes: int, min_one: bool = True,
                                      max_offset: int | None = None) -> list[tuple[int, int]]: ...

    # -- offsets -----------------------------------------------------------------------------

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None: ...

    def max_timestamp_offset(self) -> tuple[int, int]: ...

    def delete_records(self, offset: int) -> int: ...

    def roll(self) -> None: ...

    def segment_base_offsets(self) -> list[int]: ...

    # -- producer state ----------------------------------------------------------------------

    def producers(self) -> Mapping[int, ProducerStateEntry]: ...

    def producer_counters(self) -> Mapping[str, int]: ...

    def expire_producers(self, now_ms: int | None = None) -> int: ...


class Storage(Protocol):
    """Every topic of the data directory."""

    cluster_id: str

    def topics(self) -> Mapping[str, TopicInfo]: ...

    def get_log(self, topic: str, partition: int) -> PartitionStorage | None: ...

    def all_logs(self) -> Sequence[PartitionStorage]: ...

    def topic_config(self, name: str) -> dict[str, Any]: ...

    def create_topic(self, name: str, partitions: int, configs: dict[str, str]) -> TopicInfo: ...

    def delete_topic(self, name: str) -> None: ...

    def add_partitions(self, name: str, new_total: int) -> None: ...

    def alter_topic_configs(self, name: str, configs: dict[str, Any], *, incremental: bool = False) -> None: ...
