"""Transactions in the partition log: markers, open transactions and the last stable offset.

Storage level: a real PartitionLog over real files, batches built by kafka-python, markers
written by :meth:`PartitionLog.append_marker` and read back from the ``.log`` file.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

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


# -- the aborted-transaction index ---------------------------------------------------------------


def txnindex_entry(pid: int, first: int, last: int, lso: int) -> bytes:
    """One entry in Kafka's layout, written out field by field."""
    return (b"\x00\x00" + pid.to_bytes(8, "big", signed=True) + first.to_bytes(8, "big", signed=True)
            + last.to_bytes(8, "big", signed=True) + lso.to_bytes(8, "big", signed=True))


def txnindex_bytes(log: PartitionLog, base: int = 0) -> bytes | None:
    path = log.dir / f"{base:020d}.txnindex"
    return path.read_bytes() if path.exists() else None


def test_abort_after_another_commit_indexes_the_offset_after_the_marker(plog: PartitionLog) -> None:
    plog.append_from_client(txn_batch(1, 0, 0))  # A @0
    plog.append_from_client(txn_batch(2, 0, 0))  # B @1
    plog.append_marker(1, 0, True, 0)  # C(A) @2
    assert plog.last_stable_offset == 1
    plog.append_marker(2, 0, False, 0)  # A(B) @3
    assert plog.last_stable_offset == 4
    data = txnindex_bytes(plog)
    assert data == txnindex_entry(2, 1, 3, 4) and len(data) == 34


def test_abort_while_another_transaction_is_open_indexes_that_transactions_first_offset(plog: PartitionLog) -> None:
    plog.append_from_client(txn_batch(1, 0, 0))  # A @0
    plog.append_from_client(txn_batch(2, 0, 0))  # B @1
    plog.append_marker(2, 0, False, 0)  # A(B) @2 while A is open
    assert txnindex_bytes(plog) == txnindex_entry(2, 1, 2, 0)
    plog.append_marker(1, 0, False, 0)  # A(A) @3
    assert txnindex_bytes(plog) == txnindex_entry(2, 1, 2, 0) + txnindex_entry(1, 0, 3, 4)


def test_no_index_file_without_an_abort_that_closes_a_transaction(plog: PartitionLog) -> None:
    plog.append_from_client(txn_batch(1, 0, 0, count=3))
    plog.append_marker(1, 0, True, 0)
    plog.append_marker(2, 0, False, 0)  # abort of a transaction that wrote nothing here
    plog.append_marker(1, 0, False, 0)  # duplicate-style abort: nothing open
    assert txnindex_bytes(plog) is None


def test_aborted_transaction_that_started_in_an_older_segment(plog: PartitionLog) -> None:
    for _ in range(100):
        plog.append_from_client(make_batch())
    plog.append_from_client(txn_batch(7, 0, 0, count=50))  # @100-149
    plog.roll()  # segment 150
    for _ in range(10):
        plog.append_from_client(make_batch())  # @150-159
    plog.append_marker(7, 0, False, 0)  # @160
    assert txnindex_bytes(plog, 0) is None
    assert txnindex_bytes(plog, 150) == txnindex_entry(7, 100, 160, 161)
    assert plog.collect_aborted_transactions(120, 161) == [(7, 100)]
    assert plog.aborted_transactions_for_read(120, 1 << 20) == [(7, 100)]
    assert plog.collect_aborted_transactions(161, 162) == []


def _abort(plog: PartitionLog, pid: int, count: int = 1) -> None:
    plog.append_from_client(txn_batch(pid, 0, 0, count=count))
    plog.append_marker(pid, 0, False, 0)


def test_collect_selects_overlapping_entries_and_stops_at_the_first_stable_one(plog: PartitionLog) -> None:
    _abort(plog, 1)  # @0, A @1: entry (1, 0, 1, 2)
    _abort(plog, 2)  # @2, A @3: entry (2, 2, 3, 4)
    _abort(plog, 3)  # @4, A @5: entry (3, 4, 5, 6)
    assert plog.collect_aborted_transactions(0, 1) == [(1, 0)]
    assert plog.collect_aborted_transactions(0, 2) == [(1, 0)]  # lso 2 reaches the bound: stop
    assert plog.collect_aborted_transactions(0, 3) == [(1, 0), (2, 2)]
    assert plog.collect_aborted_transactions(1, 100) == [(1, 0), (2, 2), (3, 4)]
    assert plog.collect_aborted_transactions(2, 5) == [(2, 2), (3, 4)]
    assert plog.collect_aborted_transactions(6, 7) == []


def test_read_up_to_a_max_offset_returns_whole_batches_below_it(plog: PartitionLog) -> None:
    plog.append_from_client(make_batch(count=2))  # @0-1
    plog.append_from_client(txn_batch(1, 0, 0, count=3))  # @2-4, open
    plog.append_from_client(make_batch(count=2))  # @5-6
    lso = plog.last_stable_offset
    assert lso == 2
    data = plog.read(0, 1 << 20, max_offset=lso)
    assert [(b.base_offset, b.next_offset) for b in kafka_batches(data)] == [(0, 2)]
    assert plog.read(1, 1 << 20, max_offset=lso) == data
    assert plog.read(2, 1 << 20, max_offset=lso) == b""
    assert plog.read(6, 1 << 20, max_offset=lso) == b""
    assert plog.read(7, 1 << 20, max_offset=lso) == b""
    with pytest.raises(KafkaError):
        plog.read(8, 1 << 20, max_offset=lso)
    assert plog.aborted_transactions_for_read(2, 1 << 20, max_offset=lso) == []
    plog.append_marker(1, 0, True, 0)  # @7
    everything = plog.read(0, 1 << 20, max_offset=plog.last_stable_offset)
    assert [b.base_offset for b in kafka_batches(everything)] == [0, 2, 5, 7]


# -- retention, DeleteRecords, expiry ------------------------------------------------------------


def test_index_file_goes_with_its_segment_and_open_transactions_stay_open(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", now_ms=lambda: TS)
    _abort(log, 1)  # @0-1, entry in segment 0
    log.append_from_client(txn_batch(2, 0, 0))  # @2, stays open
    log.roll()  # segment 3
    _abort(log, 3)  # @3-4, entry in segment 3
    log.roll()  # segment 5
    log.append_from_client(make_batch())  # @5
    assert txnindex_bytes(log, 0) is not None and txnindex_bytes(log, 3) is not None
    log.delete_records(4)
    assert txnindex_bytes(log, 0) is None and txnindex_bytes(log, 3) is not None
    # the open transaction of pid 2 started below the log start: the LSO is the log start
    assert (log.first_unstable_offset, log.last_stable_offset) == (4, 4)
    log.update_config({**log.config, "retention.ms": "1"})
    log.apply_retention(TS + 10_000_000)
    assert txnindex_bytes(log, 3) is None
    assert log.producer_state.producers()[2].current_txn_first_offset == 2
    assert log.last_stable_offset == log.log_start_offset
    log.append_marker(2, 0, True, 0)
    assert log.last_stable_offset == log.log_end_offset
    log.close()


def test_producers_with_an_open_transaction_never_expire(plog: PartitionLog) -> None:
    plog.append_from_client(txn_batch(1, 0, 0))
    plog.append_from_client(make_batch(2, 0, 0))
    assert plog.producer_state.expire(TS + 10 ** 12) == 1
    assert list(plog.producer_state.producers()) == [1]
    plog.close()
    reopened = open_log(plog.dir, now_ms=lambda: TS + 10 ** 12)
    assert list(reopened.producer_state.producers()) == [1] and reopened.last_stable_offset == 0
    reopened.close()


# -- recovery ------------------------------------------------------------------------------------


def _mixed_log(log: PartitionLog) -> None:
    """Aborted, committed, plain and open transactions over three segments."""
    _abort(log, 1, count=3)  # @0-2, A @3
    log.append_from_client(txn_batch(2, 0, 0, count=2))  # @4-5
    log.roll()
    log.append_from_client(make_batch())  # @6
    log.append_from_client(txn_batch(3, 0, 0))  # @7
    log.append_marker(2, 0, False, 0)  # @8: entry (2, 4, 8, 7)
    log.append_marker(3, 0, True, 0)  # @9
    log.roll()
    log.append_from_client(txn_batch(4, 0, 0, count=2))  # @10-11
    _abort(log, 5)  # @12, A @13: entry (5, 12, 13, 10)
    log.append_marker(4, 0, False, 0)  # @14: entry (4, 10, 14, 15)
    log.append_from_client(txn_batch(6, 0, 0))  # @15, open


def _read_committed_view(log: PartitionLog) -> list[tuple[int, bytes, list[tuple[int, int]]]]:
    lso = log.last_stable_offset
    return [(offset, bytes(log.read(offset, 200, max_offset=lso)),
             log.aborted_transactions_for_read(offset, 200, max_offset=lso))
            for offset in range(log.log_start_offset, log.log_end_offset + 1)]


def _index_files(log: PartitionLog) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(log.dir.glob("*.txnindex"))}


def test_index_entries_of_a_mixed_log(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", now_ms=lambda: TS)
    _mixed_log(log)
    assert _index_files(log) == {
        "00000000000000000000.txnindex": txnindex_entry(1, 0, 3, 4),
        "00000000000000000006.txnindex": txnindex_entry(2, 4, 8, 7),
        "00000000000000000010.txnindex": txnindex_entry(5, 12, 13, 10) + txnindex_entry(4, 10, 14, 15),
    }
    assert log.last_stable_offset == 15
    log.close()


def _restart_mixed_log(d: Path, crash: bool, damage: Callable[[Path], None] = lambda d: None,
                       **open_kwargs: Any) -> PartitionLog:
    """Write the mixed log, stop (crash or close), damage the files, reopen; assert the index
    files and everything a read_committed reader gets are as before. Returns the reopened log."""
    log = open_log(d, now_ms=lambda: TS)
    _mixed_log(log)
    files, view, lso = _index_files(log), _read_committed_view(log), log.last_stable_offset
    if crash:
        log.abandon()
    else:
        log.close()
    damage(d)
    log = open_log(d, now_ms=lambda: TS, clean=not crash, **open_kwargs)
    assert _index_files(log) == files
    assert log.last_stable_offset == lso == 15
    assert _read_committed_view(log) == view
    return log


def _remove_index_files(d: Path) -> None:
    for path in d.glob("*.txnindex"):
        path.unlink()


@pytest.mark.parametrize("lose_index_files", [False, True])
def test_crash_rebuilds_the_index_of_unflushed_segments_and_read_committed_is_unchanged(
        tmp_path: Path, lose_index_files: bool) -> None:
    # never fsynced index files: a crash may leave them missing
    damage = _remove_index_files if lose_index_files else (lambda d: None)
    _restart_mixed_log(tmp_path / "t-0", True, damage, recovery_point=0).close()


def test_crash_keeps_the_index_of_flushed_segments_and_rebuilds_only_the_rest(tmp_path: Path) -> None:
    # the recovery point says segments 0 and 6 were flushed: only segment 10 is replayed into the index
    def damage(d: Path) -> None:
        (d / "00000000000000000010.txnindex").unlink()

    _restart_mixed_log(tmp_path / "t-0", True, damage, recovery_point=10).close()


def test_index_entry_below_its_segment_makes_that_segment_recovered_at_load(tmp_path: Path) -> None:
    def damage(d: Path) -> None:
        with open(d / "00000000000000000006.txnindex", "ab") as f:
            f.write(txnindex_entry(9, 0, 2, 3))  # marker offset 2 cannot be in segment 6

    _restart_mixed_log(tmp_path / "t-0", False, damage).close()


def test_a_clean_restart_reloads_the_index_without_rewriting_it(tmp_path: Path) -> None:
    mtimes: dict[str, int] = {}

    def remember(d: Path) -> None:
        mtimes.update({p.name: p.stat().st_mtime_ns for p in d.glob("*.txnindex")})

    log = _restart_mixed_log(tmp_path / "t-0", False, remember)
    assert {p.name: p.stat().st_mtime_ns for p in log.dir.glob("*.txnindex")} == mtimes
    log.append_marker(6, 0, False, 0)  # the transaction left open keeps working after the restart
    assert txnindex_bytes(log, 10).endswith(txnindex_entry(6, 15, 16, 17))
    log.close()


def test_open_transaction_from_a_kafka_v1_snapshot_holds_the_lso(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = open_log(d, now_ms=lambda: TS)
    for _ in range(3):
        log.append_from_client(make_batch())  # @0-2
    log.close()
    for path in d.glob("*.snapshot"):
        path.unlink()
    # Kafka's version 1: pid 7 epoch 2, last sequence 0 at offset 1, coordinator epoch 4, open since 1
    body = struct.pack(">i", 1) + struct.pack(">qhiqiqiq", 7, 2, 0, 1, 0, TS, 4, 1)
    (d / "00000000000000000003.snapshot").write_bytes(struct.pack(">hI", 1, crc32c(body)) + body)
    log = open_log(d, now_ms=lambda: TS)
    assert (log.first_unstable_offset, log.last_stable_offset) == (1, 1)
    assert _code(log.append_marker, 7, 2, False, 3) == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    log.append_marker(7, 2, False, 4)
    assert log.last_stable_offset == 4 and txnindex_bytes(log) == txnindex_entry(7, 1, 3, 4)
    log.close()


def test_crash_after_delete_records_rebuilds_the_index_from_the_snapshot_at_the_log_start(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = open_log(d, now_ms=lambda: TS)
    log.append_from_client(txn_batch(1, 0, 0, count=3))  # @0-2, aborted below
    log.append_from_client(make_batch(count=2))  # @3-4
    log.delete_records(5)
    log.producer_state.take_snapshot(5)  # what a roll or a clean shutdown at this point would leave
    log.append_from_client(make_batch())  # @5
    log.append_marker(1, 0, False, 0)  # @6: entry (1, 0, 6, 7)
    files, view = _index_files(log), _read_committed_view(log)
    assert files == {"00000000000000000000.txnindex": txnindex_entry(1, 0, 6, 7)}
    log.abandon()
    log = open_log(d, now_ms=lambda: TS, clean=False, log_start_offset=5, recovery_point=0)
    assert log.log_start_offset == 5 and log.last_stable_offset == 7
    assert _index_files(log) == files
    assert _read_committed_view(log) == view
    log.close()
