"""Transactions in the partition log: markers, open transactions and the last stable offset.

Storage level: a real PartitionLog over real files, batches built by kafka-python, markers
written by :meth:`PartitionLog.append_marker` and read back from the ``.log`` file.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from crc32c import crc32c
from kafka.record.default_records import DefaultRecordBatchBuilder

from minikafka.errors import ErrorCode, KafkaError
from minikafka.storage.batch import BatchHeader
from minikafka.storage.control import build_marker, parse_marker
from minikafka.storage.log import PartitionLog
from tests.storage_helpers import TS, kafka_batches, make_batch, open_log


def txn_batch(producer_id: int, epoch: int, base_sequence: int, count: int = 1, value: bytes = b"v") -> bytearray:
    """A transactional client batch built by kafka-python."""
    builder = DefaultRecordBatchBuilder(2, 0, True, producer_id, epoch, base_sequence, 1 << 30)
    for i in range(count):
        builder.append(i, TS + i, b"k", value, [])
    return bytearray(builder.build())


@pytest.fixture
def plog(tmp_path: Path) -> PartitionLog:
    log = open_log(tmp_path / "t-0", now_ms=lambda: TS)
    yield log
    log.close()


def _code(call, *args, **kwargs) -> ErrorCode:  # type: ignore[no-untyped-def]
    with pytest.raises(KafkaError) as info:
        call(*args, **kwargs)
    return info.value.code


# -- the marker bytes ----------------------------------------------------------------------------

KAFKA_COMMIT_EXAMPLE = bytes.fromhex(
    "000000000000002a" "00000042" "00000000" "02"
    "3ab8ddac"
    "0030" "00000000"
    "0000018bcfe56800" "0000018bcfe56800"
    "00000000000003e8" "0005" "ffffffff" "00000001"
    "20" "00" "00" "00" "08" "00000001" "0c" "000000000000" "00"
)


def test_commit_marker_bytes_match_kafkas_layout_crc_included() -> None:
    built = build_marker(1000, 5, True, 0, 1_700_000_000_000, base_offset=42)
    assert len(built) == 78
    assert bytes(built) == KAFKA_COMMIT_EXAMPLE
    assert crc32c(KAFKA_COMMIT_EXAMPLE[21:]) == 0x3AB8DDAC


def test_abort_marker_differs_only_in_key_type_and_crc() -> None:
    commit = build_marker(1000, 5, True, 0, TS)
    abort = build_marker(1000, 5, False, 0, TS)
    diff = [i for i in range(78) if commit[i] != abort[i]]
    assert all(17 <= i < 21 for i in diff if i < 61)  # only the CRC in the header
    assert [i for i in diff if i >= 61] == [61 + 8]  # the type byte of the key
    assert abort[61 + 5: 61 + 9] == b"\x00\x00\x00\x00"
    assert crc32c(bytes(abort[21:])) == int.from_bytes(abort[17:21], "big")


def test_appended_marker_is_in_the_log_file_as_kafka_python_reads_it(plog: PartitionLog) -> None:
    plog.append_from_client(txn_batch(1000, 5, 0, count=3))
    result = plog.append_marker(1000, 5, True, 7, now_ms=TS + 99)
    assert (result.base_offset, result.last_offset, result.duplicate) == (3, 3, False)
    data = (plog.dir / "00000000000000000000.log").read_bytes()
    batches = kafka_batches(data)
    marker = batches[-1]
    assert marker.is_control_batch and marker.is_transactional
    assert (marker.base_offset, marker.producer_id, marker.producer_epoch) == (3, 1000, 5)
    assert marker.base_sequence == -1 and marker.first_timestamp == TS + 99 and marker.max_timestamp == TS + 99
    assert marker.validate_crc()
    raw = data[-78:]
    assert bytes(raw) == bytes(build_marker(1000, 5, True, 7, TS + 99, base_offset=3))
    assert parse_marker(raw, BatchHeader.parse(raw)) == (True, 7)


# -- fencing -------------------------------------------------------------------------------------


def test_marker_with_an_older_producer_epoch_is_invalid_producer_epoch_and_not_written(plog: PartitionLog) -> None:
    plog.append_from_client(txn_batch(7, 5, 0))
    assert _code(plog.append_marker, 7, 4, True, 0) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert plog.log_end_offset == 1
    assert plog.producer_state.producers()[7].current_txn_first_offset == 0


def test_marker_from_an_older_coordinator_epoch_is_coordinator_fenced_and_not_written(plog: PartitionLog) -> None:
    plog.append_marker(7, 0, False, 3)
    assert plog.producer_state.producers()[7].coordinator_epoch == 3
    assert _code(plog.append_marker, 7, 0, True, 2) == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert plog.log_end_offset == 1
    # the producer epoch is checked first
    assert _code(plog.append_marker, 7, -1, True, 2) == ErrorCode.INVALID_PRODUCER_EPOCH
    plog.append_marker(7, 0, True, 3)  # an equal coordinator epoch is fine
    assert plog.log_end_offset == 2


def test_marker_for_a_producer_that_wrote_nothing_here_takes_one_offset(plog: PartitionLog) -> None:
    result = plog.append_marker(42, 0, True, 0)
    assert result.base_offset == 0 and plog.log_end_offset == 1
    entry = plog.producer_state.producers()[42]
    assert (entry.epoch, entry.coordinator_epoch, entry.current_txn_first_offset) == (0, 0, -1)
    assert plog.last_stable_offset == 1


def test_duplicate_marker_is_appended_and_completes_nothing(plog: PartitionLog) -> None:
    plog.append_from_client(txn_batch(1000, 0, 0, count=5))
    plog.append_marker(1000, 0, True, 0)
    plog.append_from_client(txn_batch(9, 0, 0))  # another producer's open transaction @6
    again = plog.append_marker(1000, 0, True, 0)
    assert again.base_offset == 7
    assert plog.first_unstable_offset == 6 and plog.last_stable_offset == 6


def test_marker_with_a_higher_epoch_clears_the_cached_batches(plog: PartitionLog) -> None:
    plog.append_from_client(txn_batch(5, 0, 0, count=2))
    plog.append_marker(5, 1, False, 0)
    entry = plog.producer_state.producers()[5]
    assert entry.epoch == 1 and entry.batches == [] and not entry.has_open_transaction
    assert _code(plog.append_from_client, txn_batch(5, 1, 5)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert plog.append_from_client(txn_batch(5, 1, 0)).base_offset == 3


def test_non_transactional_batch_during_an_open_transaction_is_invalid_txn_state(plog: PartitionLog) -> None:
    plog.append_from_client(txn_batch(1000, 0, 0, count=3))
    assert _code(plog.append_from_client, make_batch(1000, 0, 3)) == ErrorCode.INVALID_TXN_STATE
    plog.append_marker(1000, 0, True, 0)
    assert plog.append_from_client(make_batch(1000, 0, 3)).base_offset == 4


def test_on_append_is_told_about_markers(plog: PartitionLog) -> None:
    seen: list[int] = []
    plog.on_append = lambda log: seen.append(log.last_stable_offset)
    plog.append_from_client(txn_batch(1, 0, 0))
    plog.append_marker(1, 0, True, 0)
    assert seen == [0, 2]


# -- appends on a producer's behalf --------------------------------------------------------------


def test_coordinator_append_checks_the_epoch_but_not_sequences_and_opens_the_transaction(
        plog: PartitionLog) -> None:
    plog.append_from_client(txn_batch(3, 2, 0))
    plog.append_marker(3, 2, True, 0)
    assert _code(plog.append_as_coordinator, txn_batch(3, 1, 0)) == ErrorCode.INVALID_PRODUCER_EPOCH
    result = plog.append_as_coordinator(txn_batch(3, 2, 77))  # any sequence, even a gap
    assert result.base_offset == 2 and not result.duplicate
    again = plog.append_as_coordinator(txn_batch(3, 2, 77))  # never a duplicate
    assert again.base_offset == 3 and not again.duplicate
    assert plog.producer_state.producers()[3].current_txn_first_offset == 2
    assert plog.last_stable_offset == 2
    assert _code(plog.append_as_coordinator, bytearray(build_marker(3, 2, True, 0, TS))) == ErrorCode.INVALID_RECORD
    bad = txn_batch(3, 2, 0)
    bad[-1] ^= 1
    assert _code(plog.append_as_coordinator, bad) == ErrorCode.CORRUPT_MESSAGE


# -- the last stable offset ----------------------------------------------------------------------


def test_lso_worked_example_interleaved_producers(plog: PartitionLog) -> None:
    """pid 7 transactional @0,1; a plain record @2; pid 9 transactional @3; COMMIT(7) @4."""
    plog.append_from_client(txn_batch(7, 0, 0, count=2))
    assert (plog.first_unstable_offset, plog.high_watermark, plog.last_stable_offset) == (0, 2, 0)
    plog.append_from_client(make_batch())
    plog.append_from_client(txn_batch(9, 0, 0))
    assert (plog.first_unstable_offset, plog.high_watermark, plog.last_stable_offset) == (0, 4, 0)
    plog.append_marker(7, 0, True, 0)
    assert (plog.first_unstable_offset, plog.high_watermark, plog.last_stable_offset) == (3, 5, 3)
    plog.append_from_client(txn_batch(7, 0, 2))  # pid 7's next transaction @5
    assert plog.last_stable_offset == 3
    plog.append_marker(9, 0, False, 0)
    assert (plog.first_unstable_offset, plog.last_stable_offset) == (5, 5)
    plog.append_marker(7, 0, True, 0)
    assert (plog.first_unstable_offset, plog.last_stable_offset) == (None, 8)


def test_lso_is_the_high_watermark_without_transactions(plog: PartitionLog) -> None:
    assert plog.first_unstable_offset is None and plog.last_stable_offset == 0
    plog.append_from_client(make_batch(count=3))
    plog.append_from_client(make_batch(11, 0, 0, count=2))  # idempotent, not transactional
    assert plog.first_unstable_offset is None and plog.last_stable_offset == plog.high_watermark == 5


def test_two_interleaved_transactions_closed_in_either_order(plog: PartitionLog) -> None:
    plog.append_from_client(txn_batch(1, 0, 0))  # A @0
    plog.append_from_client(txn_batch(2, 0, 0))  # B @1
    plog.append_marker(2, 0, False, 0)  # B aborted first @2: A still holds the LSO
    assert plog.last_stable_offset == 0
    plog.append_marker(1, 0, True, 0)
    assert plog.last_stable_offset == 4


def test_open_transactions_survive_a_clean_restart_and_a_crash(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = open_log(d, now_ms=lambda: TS)
    log.append_from_client(txn_batch(7, 0, 0, count=2))
    log.append_from_client(make_batch())
    log.append_from_client(txn_batch(9, 0, 0))
    log.append_marker(7, 0, True, 4)
    log.close()
    log = open_log(d, now_ms=lambda: TS)
    assert (log.first_unstable_offset, log.last_stable_offset) == (3, 3)
    assert log.producer_state.producers()[7].coordinator_epoch == 4
    log.append_from_client(txn_batch(1, 0, 0))  # @5
    log.append_marker(9, 0, False, 0)  # @6
    log.abandon()
    # no snapshot at the end: the tail is replayed, markers included
    log = open_log(d, now_ms=lambda: TS, clean=False)
    assert (log.first_unstable_offset, log.last_stable_offset) == (5, 5)
    assert not log.producer_state.producers()[9].has_open_transaction
    log.close()
