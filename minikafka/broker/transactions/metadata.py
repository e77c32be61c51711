"""What the coordinator knows about one transactional id, and the states it moves through.

States, their ids and the transitions allowed between them are Kafka's (``TransactionState``:
https://github.com/apache/kafka/blob/trunk/transaction-coordinator/src/main/java/org/apache/kafka/coordinator/transaction/TransactionState.java);
Dead and PrepareEpochFence are never written to the log (Dead is the tombstone, the fence is
immediately followed by PrepareAbort). A transition the table does not allow is a bug of the
coordinator, not of a client: it raises :class:`IllegalTxnTransition` before anything is written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

from minikafka.broker.transactions.records import TxnRecord
from minikafka.storage.disk_format import TopicPartition

#: The TC never hands out an epoch at or above this, so that it can always fence with +1.
EXHAUSTED_EPOCH = 32766


class TxnState(IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def display(self) -> str:
        """The state's name as DescribeTransactions and ListTransactions spell it."""
        return "".join(part.capitalize() for part in self.name.split("_"))

    @property
    def is_prepare(self) -> bool:
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    @property
    def is_idle(self) -> bool:
        """Empty or Complete*: no transaction in progress."""
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


STATES_BY_NAME = {s.display: s for s in TxnState if s is not TxnState.DEAD}

_IDLE = (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
#: The states each state may be entered from (Kafka's ``validPreviousStates``).
VALID_PREVIOUS_STATES: dict[TxnState, frozenset[TxnState]] = {
    TxnState.EMPTY: frozenset(_IDLE),
    TxnState.ONGOING: frozenset({TxnState.ONGOING, *_IDLE}),
    TxnState.PREPARE_COMMIT: frozenset({TxnState.ONGOING}),
    TxnState.PREPARE_ABORT: frozenset({TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE}),
    TxnState.COMPLETE_COMMIT: frozenset({TxnState.PREPARE_COMMIT}),
    TxnState.COMPLETE_ABORT: frozenset({TxnState.PREPARE_ABORT}),
    TxnState.DEAD: frozenset(_IDLE),
    TxnState.PREPARE_EPOCH_FENCE: frozenset({TxnState.ONGOING}),
}


class IllegalTxnTransition(RuntimeError):
    """A transition :data:`VALID_PREVIOUS_STATES` does not allow (Kafka: IllegalStateException)."""



@dataclass(slots=True)
class TxnMetadata:
    """One transactional id. ``pending`` is the state being written (a transition in flight)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    last_producer_epoch: int = -1  # not persisted, as in Kafka
    previous_producer_id: int = -1  # not persisted in value version 0
    pending: TxnState | None = None
    markers_in_flight: bool = False
    fence_failed: bool = False  # the epoch was raised to fence but PrepareAbort was not written

    def check_transition(self, target: TxnState) -> None:
        """Raise :class:`IllegalTxnTransition` unless this id may move from its state to ``target``."""
        if self.state not in VALID_PREVIOUS_STATES[target]:
            raise IllegalTxnTransition(f"transactional id {self.transactional_id!r}: no transition from "
                                       f"{self.state.display} to {target.display}")

    def record(self, state: TxnState, *, producer_id: int | None = None, epoch: int | None = None,
               timeout_ms: int | None = None, partitions: set[TopicPartition] | None = None,
               start_ms: int | None = None, now_ms: int) -> TxnRecord:
        """The record of this id after a transition to ``state`` (fields not given are unchanged);
        :class:`IllegalTxnTransition` when the transition is not allowed."""
        self.check_transition(state)
        parts = self.partitions if partitions is None else partitions
        return TxnRecord(
            producer_id=self.producer_id if producer_id is None else producer_id,
            producer_epoch=self.producer_epoch if epoch is None else epoch,
            timeout_ms=self.timeout_ms if timeout_ms is None else timeout_ms,
            state=int(state),
            partitions=None if state is TxnState.EMPTY else frozenset(parts),
            last_update_ms=now_ms,
            start_ms=self.start_ms if start_ms is None else start_ms,
        )

    def apply(self, r: TxnRecord) -> None:
        """Take the values of a record that is now in the log."""
        self.producer_id = r.producer_id
        self.producer_epoch = r.producer_epoch
        self.timeout_ms = r.timeout_ms
        self.state = TxnState(r.state)
        self.partitions = set(r.partitions or ())
        self.last_update_ms = r.last_update_ms
        self.start_ms = r.start_ms

    @classmethod
    def from_record(cls, transactional_id: str, r: TxnRecord) -> TxnMetadata:
        meta = cls(transactional_id, r.producer_id, r.producer_epoch, r.timeout_ms)
        meta.apply(r)
        meta.previous_producer_id = r.previous_producer_id
        return meta
