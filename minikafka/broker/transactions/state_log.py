"""The transaction coordinator's durable state: the internal topic ``__transaction_state``.

Every state change of a transactional id is one record (one batch) appended to the id's partition
before the coordinator changes its memory or answers; a null value removes the id. When the
coordinator loads a partition, the partition is replayed (last record of an id wins). minikafka
runs one broker, so the topic has one partition; Kafka's partition of each id
(``abs(hashCode) % transaction.state.log.num.partitions``) is still computed for display. The log is kept bounded like every internal log
(:mod:`minikafka.broker.internal_log`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import ClassVar

from minikafka.broker.internal_log import (
    NO_WAITS,
    InternalLog,
    WriteWaits,
    build_batch,
    replay,
    rewrite_live,
    should_compact,
)
from minikafka.broker.internal_records import RecordFormatError
from minikafka.broker.transactions.records import (
    TRANSACTION_STATE_TOPIC,
    TxnRecord,
    parse_txn_key,
    parse_txn_value,
    txn_key,
    txn_value,
)
from minikafka.errors import KafkaError
from minikafka.storage.facade import Storage

log = logging.getLogger(__name__)

#: Compact only logs of at least this many records.
COMPACT_MIN_RECORDS = 10_000


class TxnStateLog(InternalLog):
    """Appends and replays the records of one partition of ``__transaction_state``."""

    topic: ClassVar[str] = TRANSACTION_STATE_TOPIC

    def __init__(self, logs: Storage, partition: int, now_ms: Callable[[], int], topic_configs: dict[str, str],
                 waits: WriteWaits = NO_WAITS) -> None:
        super().__init__(logs, partition, now_ms, topic_configs, waits)
        self._values: dict[str, bytes] = {}  # the last value written per live id (for compaction)

    def load(self) -> dict[str, TxnRecord]:
        """Open (creating if needed) the partition and replay it: the stored record of every live id."""
        plog = self._open()
        stored: dict[str, TxnRecord] = {}
        for batch in replay(plog):
            for _offset, key, value in batch.records or ():
                try:
                    if key is None:
                        raise RecordFormatError("record without a key")
                    txn_id = parse_txn_key(key)
                    if value is None:
                        stored.pop(txn_id, None)
                        self._values.pop(txn_id, None)
                    else:
                        stored[txn_id] = parse_txn_value(value)
                        self._values[txn_id] = value
                except RecordFormatError as exc:
                    self.skipped_records += 1
                    log.warning("%s: skipping a record: %s", TRANSACTION_STATE_TOPIC, exc)
        self._maybe_compact()
        return stored

    def append(self, transactional_id: str, record: TxnRecord | None) -> None:
        """Append one record (None: a tombstone); KafkaError if the append fails."""
        self.append_many([(transactional_id, record)])

    def append_many(self, records: list[tuple[str, TxnRecord | None]]) -> None:
        plog = self._writable("transaction log")
        encoded = [(txn_id, txn_key(txn_id), None if r is None else txn_value(r)) for txn_id, r in records]
        plog.append_from_client(build_batch([(k, v) for _, k, v in encoded], self._now_ms()))
        for txn_id, _key, value in encoded:
            if value is None:
                self._values.pop(txn_id, None)
            else:
                self._values[txn_id] = value
        self._maybe_compact()

    def _maybe_compact(self) -> None:
        plog = self._log
        if plog is not None and should_compact(plog, len(self._values), COMPACT_MIN_RECORDS):
            self.compact()

    def compact(self) -> None:
        if self._log is None:
            return
        try:
            plog = self._writable("transaction log")
        except KafkaError:
            return  # no longer the leader: the next one compacts
        live = [(txn_key(txn_id), value) for txn_id, value in self._values.items()]
        before = rewrite_live(plog, live, self._now_ms())
        if before is not None:
            log.info("%s: compacted %d record(s) to %d", plog.name, before, len(live))
