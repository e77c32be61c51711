"""What ``isolationLevel=read_committed`` may return, decided from the segment files alone.

Kafka's on-disk rules (``storage/src/main/java/org/apache/kafka/storage/internals/log/`` in
Kafka's source: ``ProducerStateManager.java``, ``TransactionIndex.java``, ``LogSegment.java``):

* a data batch written inside a transaction has the transactional attribute (bit 4);
* a transaction ends with a control batch (bit 5) of the same producer id holding one record whose
  key is ``int16 version, int16 type``: 0 = ABORT, 1 = COMMIT;
* a transaction is open from its producer's first transactional data batch until that marker, and
  the last stable offset (LSO) is the first offset of the earliest transaction still open (the
  log end offset when none is): a read_committed consumer never reads at or past it;
* aborted transactions are also listed, per segment, in ``<base>.txnindex``; that index is only
  a shortcut for a broker answering Fetch, and a crash can leave it behind the log.

So the reader walks the batch headers of a partition once, from its first segment (a transaction
that started before the range being read can still be open, or aborted inside it), reading only
the 61-byte headers plus each 78-byte marker (parsed by :mod:`minikafka.storage.control`). Every
producer id's transaction is opened by its first transactional data batch and closed by that
producer id's next marker, which says whether it committed or aborted. Nothing is taken from the ``.txnindex`` or the producer
snapshots, so the answer is the same after a crash that left them stale.
"""

from __future__ import annotations

from dataclasses import dataclass

from minikafka.spark_export.files import Files
from minikafka.spark_export.layout import PartitionDir
from minikafka.spark_export.offsets import iter_headers
from minikafka.storage.control import parse_marker


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """One aborted transaction: its producer id, first offset and the offset of its ABORT marker."""

    producer_id: int
    first_offset: int
    last_offset: int


@dataclass(frozen=True, slots=True)
class TxnState:
    last_stable_offset: int
    aborted: tuple[AbortedTxn, ...]


def transaction_state(files: Files, pdir: PartitionDir, log_end: int) -> TxnState:
    """The LSO of the partition's files (at most ``log_end``) and every aborted transaction in them."""
    open_txns: dict[int, int] = {}  # producer id -> first offset of its open transaction
    aborted: list[AbortedTxn] = []
    for seg in pdir.segments:
        try:
            fd = files.open(seg.log_path)
        except FileNotFoundError:  # removed by retention since it was listed
            continue
        try:
            for position, header in iter_headers(fd, 0, seg.size):
                if header.base_offset >= log_end:
                    break
                if not header.is_transactional:
                    continue
                pid = header.producer_id
                if not header.is_control:
                    open_txns.setdefault(pid, header.base_offset)
                    continue
                first = open_txns.pop(pid, None)
                if first is None:
                    continue  # a marker whose transaction began before the log start
                marker = parse_marker(fd.pread(header.size, position), header)
                if marker is None:  # not a readable marker: keep the transaction open (hold the LSO)
                    open_txns[pid] = first
                elif not marker.commit:
                    aborted.append(AbortedTxn(pid, first, header.base_offset))
        finally:
            fd.close()
    lso = min(open_txns.values(), default=log_end)
    return TxnState(min(lso, log_end), tuple(aborted))


def last_stable_offset(files: Files, pdir: PartitionDir, log_end: int) -> int:
    return transaction_state(files, pdir, log_end).last_stable_offset
