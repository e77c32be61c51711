"""The log cleaner: compaction of ``cleanup.policy=compact`` (and ``compact,delete``) partitions.

Kafka's algorithm for one broker (``core/src/main/scala/kafka/log/LogCleaner.scala``,
``LogCleanerManager.scala``):

* **What is cleanable.** A partition's log splits at its *first dirty offset* (from
  ``cleaner-offset-checkpoint``; the log start when unknown) and its *first uncleanable offset*:
  the active segment's base, or the base of the first segment holding records newer than
  ``min.compaction.lag.ms``. The dirty ratio is the bytes of the dirty segments over the bytes of
  all segments up to the first uncleanable offset. A log is cleaned when its ratio reaches
  ``min.cleanable.dirty.ratio``, or when its first dirty batch is older than ``max.compaction.lag.ms``.
* **Offset map.** The dirty segments are read and the latest offset of each key noted (up to
  ``log.cleaner.dedupe.buffer.size`` worth of keys, stopping at a segment boundary).
* **Cleaning.** Every segment from the log start up to the end of the map is rewritten, in groups
  of consecutive segments whose sizes add up to at most ``segment.bytes`` (Kafka's
  ``groupSegmentsBySize``), each group into one cleaned segment: a record is kept unless a later
  record of its key is in the map, or it has no key, or it is a tombstone (null value) that was
  already in the clean part of the log and is older than ``delete.retention.ms``. Kept records keep
  their offsets; a batch that loses records keeps its base offset, last offset delta, producer id,
  epoch and base sequence. A batch that loses all its records is dropped, except the last batch of
  each producer (an empty batch, as Kafka keeps, so producer state and deduplication are the same
  after a restart) and the last batch of the group (so the cleaned segment ends where the group
  ended, which makes the crash recovery of :mod:`minikafka.storage.swap` exact).
* **Transactions.** The dirty part ends at the segment holding the last stable offset, so every
  transaction in the cleaned range is complete. Records of aborted transactions (found through the
  ``.txnindex`` entries) are removed and shadow nothing; committed transactional records are
  compacted like any other. A marker (control batch) goes once nothing needs it, as in Kafka's
  ``CleanedTransactionMetadata``: the cleaning reads the range in offset order and notes, per
  producer, whether a batch of the transaction a marker closes (data or a kept empty batch) lies
  before the marker in what it read. While one does, the marker stays, and an ABORT marker also
  keeps its ``.txnindex`` entry (written into the cleaned segment's index); so a read_committed
  reader that still meets aborted records always meets their entry and then their marker. A marker
  whose transaction has nothing left is removed in two passes, as Kafka does since KIP-534: the
  first cleaning that finds it so writes a *delete horizon* into it (attribute bit 6, the base
  timestamp set to cleaning time + ``delete.retention.ms``, record timestamp deltas rebased so
  record timestamps are unchanged) and drops its ``.txnindex`` entry; a later cleaning at or past
  the horizon removes it. A consumer that read the transaction's records before they were cleaned
  away thus has ``delete.retention.ms`` to read on to the marker, as for tombstones. A marker that
  is the last thing producer state needs stays whole: when a producer has no cached batches left
  (its last write was a marker that bumped its epoch), its markers of its current epoch are kept
  (Kafka's ``isBatchLastRecordOfProducer``), as is the last batch of each group.

The package follows Kafka's seams: :mod:`.manager` (which log to clean, and the checkpoint),
:mod:`.offset_map` (the offset map and the transaction bookkeeping), :mod:`.rewrite` (the rewrite
of the segments and their swap into the log), :mod:`.service` (the background service, and its
threading); :mod:`.reading` reads segment files under the I/O bound for both passes.
"""

from minikafka.storage.cleaner.manager import (
    CLEANER_CHECKPOINT,
    Cleanable,
    CleanerConfig,
    LogCleanerManager,
    Plan,
    cleanable,
    is_compacted,
)
from minikafka.storage.cleaner.reading import Cancelled, Throttler
from minikafka.storage.cleaner.rewrite import CleanResult, install, remove_cleaned, write_cleaned
from minikafka.storage.cleaner.service import CleanerStats, LogCleaner

__all__ = [
    "CLEANER_CHECKPOINT",
    "Cancelled",
    "CleanResult",
    "Cleanable",
    "CleanerConfig",
    "CleanerStats",
    "LogCleaner",
    "LogCleanerManager",
    "Plan",
    "Throttler",
    "cleanable",
    "install",
    "is_compacted",
    "remove_cleaned",
    "write_cleaned",
]
