"""Producer-state snapshots: format, restart behaviour, invalid files, which files are kept.

Real files in tmp_path; each "restart" is a fresh ProducerStateManager that reloads from disk,
followed by the lenient replay of the log tail that the partition log performs.
"""

from __future__ import annotations

import logging
import os
import struct
from pathlib import Path

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from minikafka.errors import ErrorCode, KafkaError
from minikafka.storage import snapshot as snapfmt
from minikafka.storage.batch import INT32_MAX, TRANSACTIONAL_FLAG
from minikafka.storage.producer_state import BatchMetadata, ProducerStateManager
from tests.producer_state_helpers import DAY_MS, NOW, Clock, P, Partition, Q, header

# docs/producer-snapshot-format.md: Kafka's version-1 snapshot of producer 1000, epoch 3, last batch = sequences
# 7-8 at offsets 0-1, maxTimestamp 1700000000005, no transaction.
# fmt: off
KAFKA_V1_EXAMPLE = bytes.fromhex(
    "0001"
    "8bc04497"
    "00000001"
    "00000000000003e8" "0003" "00000008"
    "0000000000000001" "00000001"
    "0000018bcfe56805"
    "ffffffff" "ffffffffffffffff"
)
KAFKA_V1_EMPTY = bytes.fromhex("0001" "48674bc7" "00000000")
# fmt: on


@pytest.fixture
def log(tmp_path: Path, clock: Clock) -> Partition:
    return Partition(tmp_path, clock)


def snap_name(offset: int) -> str:
    return f"{offset:020d}.snapshot"


def load_snapshot(log: Partition, offset: int, data: bytes) -> None:
    """Reload ``log``'s producer state from a snapshot file at ``offset`` holding ``data``."""
    (log.directory / snap_name(offset)).write_bytes(data)
    log.mgr.truncate_and_reload(0, offset)


def files(directory: Path) -> list[str]:
    return sorted(os.listdir(directory))


def produce_code(log: Partition, *args, **kw) -> ErrorCode:
    with pytest.raises(KafkaError) as info:
        log.produce(*args, **kw)
    return info.value.code


# -- format ---------------------------------------------------------------------------------------


def test_snapshot_file_layout_matches_documented_format(log: Partition, tmp_path: Path) -> None:
    log.produce(P, 3, 7, 2, ts=NOW + 1)
    log.produce(P, 3, 9, ts=NOW + 2)
    path = log.mgr.take_snapshot()
    assert path == tmp_path / snap_name(3)
    # docs/producer-snapshot-format.md, packed by hand
    body = struct.pack(">i", 1)
    body += struct.pack(">qhiqqqB", P, 3, -1, -1, NOW + 2, NOW, 2)
    body += struct.pack(">iiqiq", 7, 8, 1, 1, NOW + 1)
    body += struct.pack(">iiqiq", 9, 9, 2, 0, NOW + 2)
    expected = b"M1" + struct.pack(">I", crc32c(body)) + body
    assert path.read_bytes() == expected
    assert len(expected) == 10 + 39 + 2 * 28


def test_empty_state_snapshot_is_ten_bytes(log: Partition, tmp_path: Path) -> None:
    path = log.mgr.take_snapshot()
    assert path == tmp_path / snap_name(0)
    assert path.read_bytes() == b"M1" + struct.pack(">I", crc32c(b"\0\0\0\0")) + b"\0\0\0\0"


def all_fields(mgr: ProducerStateManager) -> dict[int, tuple]:
    return {
        pid: (e.producer_id, e.epoch, list(e.batches), e.coordinator_epoch, e.current_txn_first_offset)
        + (e.last_timestamp, e.last_append_ms)
        for pid, e in mgr.producers().items()
    }


def test_snapshot_round_trip_keeps_full_windows_and_all_fields(log: Partition, clock: Clock) -> None:
    seq = 0
    for i in range(7):  # offsets 0-12
        log.produce(P, 7, seq, 1 + i % 3, ts=NOW + i)
        seq += 1 + i % 3
    log.produce(Q, 2, INT32_MAX - 1, 5)  # a window whose batch wraps
    log.produce(Q, 2, 3)
    clock.now += 5
    log.produce(3000, 0, 0, 2, attributes=TRANSACTIONAL_FLAG)  # open transaction
    log.mgr.producers()[3000].coordinator_epoch = 4
    log.mgr.update(header(-1, -1, -1, 3, offset=log.leo))  # non-idempotent batch at the end
    before = all_fields(log.mgr)
    assert len(log.mgr.producers()[P].batches) == 5
    end = log.mgr.map_end_offset
    log.mgr.take_snapshot()

    reloaded = ProducerStateManager(log.directory, now_ms=clock)
    reloaded.truncate_and_reload(0, end)
    assert all_fields(reloaded) == before
    assert reloaded.map_end_offset == end
    assert reloaded.producers()[Q].batches[0] == BatchMetadata(INT32_MAX - 1, 2, 13, 17, NOW)


# -- restarts (minikafka keeps the whole window) ----------------------------------------------------


def test_retry_of_any_of_last_five_batches_is_duplicate_after_clean_restart(
    log: Partition, tmp_path: Path
) -> None:
    # A clean restart, minikafka behaviour (docs/semantics.md#the-whole-window-survives-a-restart): Kafka would answer 45 for sequences 0-3 here.
    for seq in range(5):
        log.produce(P, 0, seq)
    assert log.mgr.take_snapshot() == tmp_path / snap_name(5)  # clean close at the LEO
    assert log.restart() == 5  # nothing to replay
    for seq in (4, 3, 2, 1, 0):
        assert log.produce(P, 0, seq) == seq
    assert log.leo == 5
    assert log.produce(P, 0, 5) == 5


def test_unclean_restart_replays_tail_after_roll_snapshot_and_keeps_window(log: Partition) -> None:
    # An unclean restart after a roll, minikafka behaviour: the retry of sequence 7 is a duplicate, not 45.
    for seq in range(5):
        log.produce(P, 0, seq)
    log.mgr.take_snapshot(fsync=False)  # roll at 5
    for seq in range(5, 10):
        log.produce(P, 0, seq)
    assert log.restart() == 5  # crash: no snapshot at 10, so 5..9 are replayed
    assert log.mgr.snapshot_offsets() == [5, 10]
    assert log.window(P) == ["5@5", "6@6", "7@7", "8@8", "9@9"]
    assert log.produce(P, 0, 9) == 9
    assert log.produce(P, 0, 7) == 7
    assert produce_code(log, P, 0, 4) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.restart() == 10  # the snapshot taken at the LEO carries the full window
    assert log.produce(P, 0, 5) == 5
    assert log.produce(P, 0, 10) == 10


def test_restart_preserves_epoch_fencing_and_sequence_continuity(log: Partition) -> None:
    log.produce(P, 0, 0)
    log.produce(P, 1, 0)
    log.produce(P, 1, 1, 3)
    log.mgr.take_snapshot()
    log.restart()
    assert produce_code(log, P, 0, 1) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert produce_code(log, P, 1, 5) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.produce(P, 1, 1, 3) == 2
    assert log.produce(P, 1, 4) == 5


# -- Kafka version 1 files --------------------------------------------------------------------------


def test_kafka_v1_snapshot_from_reference_loads_as_one_batch_entry(log: Partition, tmp_path: Path) -> None:
    path = tmp_path / snap_name(2)
    path.write_bytes(KAFKA_V1_EXAMPLE)
    os.utime(path, ns=((NOW - 1000) * 1_000_000, (NOW - 1000) * 1_000_000))
    log.mgr.truncate_and_reload(0, 2)
    entry = log.mgr.producers()[P]
    assert entry.epoch == 3
    assert list(entry.batches) == [BatchMetadata(7, 8, 0, 1, 1700000000005)]
    assert (entry.coordinator_epoch, entry.current_txn_first_offset) == (-1, -1)
    assert entry.last_timestamp == 1700000000005
    assert entry.last_append_ms == NOW - 1000  # Kafka files have no append time: the file's mtime
    assert log.mgr.map_end_offset == 2
    log.headers = [header(P, 3, 7, 2, offset=0)]
    assert log.produce(P, 3, 7, 2) == 0
    assert produce_code(log, P, 3, 6) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert produce_code(log, P, 2, 9) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert log.produce(P, 3, 9) == 2


def test_kafka_v1_snapshot_is_rewritten_in_minikafka_format(log: Partition, tmp_path: Path) -> None:
    load_snapshot(log, 2, KAFKA_V1_EXAMPLE)
    log.mgr.update(header(P, 3, 9, offset=2))
    path = log.mgr.take_snapshot()
    assert path.read_bytes()[:2] == b"M1"
    again = ProducerStateManager(tmp_path, now_ms=log.clock)
    again.truncate_and_reload(0, 3)
    assert [(m.first_seq, m.last_seq) for m in again.producers()[P].batches] == [(7, 8), (9, 9)]


def test_kafka_v1_entry_without_batch_keeps_only_the_epoch(log: Partition) -> None:
    # A known epoch without batches (docs/semantics.md#sequences), through a snapshot: epoch 2, last_offset -1 (no batch).
    body = struct.pack(">i", 1) + struct.pack(">qhiqiqiq", P, 2, -1, -1, 0, NOW, 7, -1)
    load_snapshot(log, 4, struct.pack(">hI", 1, crc32c(body)) + body)
    log.log_start = 4
    entry = log.mgr.producers()[P]
    assert (entry.epoch, len(entry.batches), entry.coordinator_epoch) == (2, 0, 7)
    assert produce_code(log, P, 0, 0) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert produce_code(log, P, 2, 17) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.produce(P, 2, 0) == 4


def test_kafka_v1_empty_snapshot_loads_no_producers(log: Partition) -> None:
    load_snapshot(log, 9, KAFKA_V1_EMPTY)
    assert log.mgr.producers() == {}
    assert log.mgr.map_end_offset == 9
    assert log.mgr.snapshot_offsets() == [9]


def test_kafka_v1_open_transaction_is_reopened_and_old_entries_expire(log: Partition, tmp_path: Path) -> None:
    body = struct.pack(">i", 2)
    body += struct.pack(">qhiqiqiq", P, 0, 4, 10, 0, NOW, 3, 8)  # open txn since offset 8
    body += struct.pack(">qhiqiqiq", Q, 0, 0, 11, 0, NOW, -1, -1)
    path = tmp_path / snap_name(12)
    path.write_bytes(struct.pack(">hI", 1, crc32c(body)) + body)
    old = (NOW - DAY_MS) * 1_000_000
    os.utime(path, ns=(old, old))  # the file, hence the last append, is a day old
    log.mgr.truncate_and_reload(0, 12)
    assert list(log.mgr.producers()) == [P]
    assert log.mgr.producers()[P].current_txn_first_offset == 8
    assert log.mgr.counters["expired"] == 1


# -- invalid snapshots ----------------------------------------------------------------------------


def two_snapshots(log: Partition) -> Path:
    """Two snapshots to fall back between: B(P,0,0) @0, snapshot at 1; B(P,0,1) @1, snapshot at 2."""
    log.produce(P, 0, 0)
    log.mgr.take_snapshot()
    log.produce(P, 0, 1)
    return log.mgr.take_snapshot()


def assert_fell_back_to_snapshot_at_1(log: Partition, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="minikafka.storage.producer_state"):
        assert log.restart() == 1  # loaded the snapshot at 1, replayed offset 1
    assert "00000000000000000002.snapshot" in caplog.text
    assert log.window(P) == ["0@0", "1@1"]
    assert log.mgr.producers()[P].last_seq == 1
    assert log.produce(P, 0, 0) == 0
    assert log.produce(P, 0, 2) == 2


def test_corrupt_newest_snapshot_is_deleted_and_older_one_used(log: Partition, caplog) -> None:
    newest = two_snapshots(log)
    data = bytearray(newest.read_bytes())
    data[20] ^= 0x40
    newest.write_bytes(bytes(data))
    assert_fell_back_to_snapshot_at_1(log, caplog)


@pytest.mark.parametrize("keep", ["empty", "half", "all but one byte"])
def test_empty_or_half_written_newest_snapshot_falls_back(log: Partition, caplog, keep: str) -> None:
    newest = two_snapshots(log)
    data = newest.read_bytes()
    size = {"empty": 0, "half": len(data) // 2, "all but one byte": len(data) - 1}[keep]
    newest.write_bytes(data[:size])
    assert_fell_back_to_snapshot_at_1(log, caplog)


@pytest.mark.parametrize("fix_crc", [False, True])
def test_trailing_bytes_make_snapshot_corrupt(log: Partition, caplog, fix_crc: bool) -> None:
    newest = two_snapshots(log)
    data = newest.read_bytes() + bytes(snapfmt.BATCH_SIZE)
    if fix_crc:  # even with a matching checksum, bytes after the last entry are refused
        data = data[:2] + struct.pack(">I", crc32c(data[6:])) + data[6:]
    newest.write_bytes(data)
    assert_fell_back_to_snapshot_at_1(log, caplog)


@pytest.mark.parametrize("version", [b"\x00\x02", b"\x00\x00", b"M2", b"\xff\xff"])
def test_unknown_version_snapshot_is_deleted(log: Partition, caplog, version: bytes) -> None:
    newest = two_snapshots(log)
    newest.write_bytes(version + newest.read_bytes()[2:])
    assert_fell_back_to_snapshot_at_1(log, caplog)


def test_minikafka_file_relabelled_as_kafka_v1_is_rejected_not_misread(log: Partition, caplog) -> None:
    newest = two_snapshots(log)
    newest.write_bytes(b"\x00\x01" + newest.read_bytes()[2:])  # CRC still matches the body
    assert_fell_back_to_snapshot_at_1(log, caplog)


def test_snapshot_that_cannot_be_read_is_skipped(log: Partition, tmp_path: Path, caplog) -> None:
    two_snapshots(log)
    (tmp_path / snap_name(2)).unlink()
    (tmp_path / snap_name(2)).mkdir()  # unreadable and undeletable as a file
    mgr = ProducerStateManager(tmp_path, now_ms=log.clock)
    with caplog.at_level(logging.WARNING, logger="minikafka.storage.producer_state"):
        mgr.truncate_and_reload(0, 2)
    assert "00000000000000000002.snapshot" in caplog.text
    assert mgr.map_end_offset == 1
    assert [m.first_seq for m in mgr.producers()[P].batches] == [0]


def test_no_usable_snapshot_gives_empty_state_at_log_start(log: Partition, tmp_path: Path) -> None:
    two_snapshots(log)
    for offset in (1, 2):
        (tmp_path / snap_name(offset)).write_bytes(b"garbage")
    log.mgr = ProducerStateManager(tmp_path, now_ms=log.clock)
    log.mgr.truncate_and_reload(0, 2)
    assert log.mgr.producers() == {}
    assert log.mgr.map_end_offset == 0
    assert log.mgr.snapshot_offsets() == []
    assert log.restart() == 0  # full replay rebuilds both batches
    assert log.window(P) == ["0@0", "1@1"]


def test_any_single_bit_flip_is_detected(tmp_path: Path) -> None:
    mgr = ProducerStateManager(tmp_path, now_ms=Clock())
    for offset, (pid, seq, count) in enumerate([(P, 0, 1), (Q, 5, 3), (P, 1, 2), (Q, 8, 1)]):
        mgr.update(header(pid, 0, seq, count, offset=offset * 4))
    data = bytes(snapfmt.encode_snapshot(mgr.producers().values()))
    assert len(snapfmt.decode_snapshot(data, 0)) == 2
    for bit in range(len(data) * 8):
        flipped = bytearray(data)
        flipped[bit // 8] ^= 1 << (bit % 8)
        with pytest.raises(snapfmt.CorruptSnapshotError):
            snapfmt.decode_snapshot(bytes(flipped), 0)


@settings(max_examples=300, deadline=None)
@given(data=st.one_of(st.binary(max_size=200), st.binary(max_size=60).map(lambda b: b"M1" + b)))
def test_decoding_arbitrary_bytes_only_ever_raises_corrupt_snapshot(data: bytes) -> None:
    try:
        snapfmt.decode_snapshot(data, 0)
    except snapfmt.CorruptSnapshotError:
        pass


@settings(max_examples=200, deadline=None)
@given(count=st.integers(-(2**31), 2**31 - 1), tail=st.binary(max_size=120))
def test_checksummed_garbage_with_any_count_is_rejected_or_parsed_exactly(count: int, tail: bytes) -> None:
    for version in (snapfmt.MINIKAFKA_VERSION, snapfmt.KAFKA_VERSION_1):
        body = struct.pack(">i", count) + tail
        data = struct.pack(">hI", version, crc32c(body)) + body
        try:
            entries = snapfmt.decode_snapshot(data, 0)
        except snapfmt.CorruptSnapshotError:
            continue
        assert len(entries) == count  # only a body that is exactly `count` entries parses


# -- which snapshots are kept -----------------------------------------------------------------------


def test_snapshots_outside_log_range_are_deleted_but_log_start_one_kept(tmp_path: Path, clock: Clock) -> None:
    # Snapshots out of the log's range (docs/semantics.md#snapshot-retention), with minikafka's choice: the snapshot AT the log start offset stays.
    log = Partition(tmp_path, clock, max_snapshots=10)
    log.mgr.take_snapshot()  # at 0, below the log start below
    for seq in range(5):
        log.produce(P, 0, seq)
        log.mgr.take_snapshot()
    assert log.mgr.snapshot_offsets() == [0, 1, 2, 3, 4, 5]
    log.truncate(3)
    log.log_start = 1
    log.mgr.truncate_and_reload(1, 3)
    assert log.mgr.snapshot_offsets() == [1, 2, 3]
    assert log.mgr.map_end_offset == 3
    assert log.window(P) == ["0@0", "1@1", "2@2"]


def test_snapshot_at_log_start_keeps_producers_whose_batches_were_deleted(log: Partition) -> None:
    # A producer only in deleted segments, minikafka behaviour (docs/semantics.md#producers-of-deleted-segments-are-kept): Kafka forgets P after an unclean restart and writes
    # B(P,0,0) a second time; minikafka still answers it as a duplicate.
    log.produce(P, 0, 0)
    log.mgr.take_snapshot(fsync=False)  # roll at 1
    log.produce(Q, 0, 0)
    log.log_start = 1  # segment 0 deleted; its base offset 0 had no snapshot
    log.mgr.delete_snapshot(0)
    log.headers = [h for h in log.headers if h.base_offset >= 1]
    assert log.restart() == 1  # crash: no snapshot at the LEO
    assert sorted(log.mgr.producers()) == [P, Q]
    assert log.produce(P, 0, 0) == 0
    assert log.leo == 2


def test_stray_snapshots_removed_except_newest_above_segments(tmp_path: Path) -> None:
    mgr = ProducerStateManager(tmp_path, now_ms=Clock())
    for offset in (2, 5, 42):
        mgr.take_snapshot(offset, fsync=False)
    mgr.remove_stray_snapshots([5])  # the clean-shutdown snapshot above every segment base stays
    assert mgr.snapshot_offsets() == [5, 42]


def test_all_stray_snapshots_removed_when_none_is_above_segments(tmp_path: Path) -> None:
    mgr = ProducerStateManager(tmp_path, now_ms=Clock())
    for offset in (2, 5, 42):
        mgr.take_snapshot(offset, fsync=False)
    mgr.remove_stray_snapshots([42])  # no snapshot above the segment bases: only those at a base stay
    assert mgr.snapshot_offsets() == [42]


def test_stray_rule_keeps_segment_snapshots_and_only_the_newest_stray(tmp_path: Path) -> None:
    mgr = ProducerStateManager(tmp_path, now_ms=Clock(), max_snapshots=10)
    for offset in (0, 3, 5, 7, 9):
        mgr.take_snapshot(offset, fsync=False)
    mgr.remove_stray_snapshots([0, 5])
    assert mgr.snapshot_offsets() == [0, 5, 9]
    mgr.remove_stray_snapshots([])
    assert mgr.snapshot_offsets() == [9]


def test_snapshot_count_is_bounded(tmp_path: Path) -> None:
    mgr = ProducerStateManager(tmp_path, now_ms=Clock(), max_snapshots=3)
    for offset in range(1, 8):
        mgr.update(header(P, 0, offset - 1, offset=offset - 1))
        mgr.take_snapshot(fsync=False)
    assert mgr.snapshot_offsets() == [5, 6, 7]
    default = ProducerStateManager(tmp_path / "d", now_ms=Clock())
    (tmp_path / "d").mkdir()
    for offset in range(20):
        default.take_snapshot(offset, fsync=False)
    assert len(default.snapshot_offsets()) == 5


# -- take_snapshot, delete, listing ---------------------------------------------------------------


def test_take_snapshot_skips_when_nothing_changed(log: Partition) -> None:
    log.produce(P, 0, 0)
    assert log.mgr.take_snapshot() is not None
    assert log.mgr.take_snapshot() is None
    assert log.mgr.take_snapshot(1) is None
    log.produce(P, 0, 1)
    assert log.mgr.take_snapshot() is not None
    assert log.mgr.snapshot_offsets() == [1, 2]


def test_take_snapshot_rewrites_after_expiry_and_after_the_file_vanished(
    log: Partition, clock: Clock
) -> None:
    log.produce(P, 0, 0)
    path = log.mgr.take_snapshot()
    clock.now += DAY_MS
    assert log.mgr.expire() == 1
    assert log.mgr.take_snapshot() == path
    assert snapfmt.decode_snapshot(path.read_bytes(), 0) == []
    path.unlink()
    assert log.mgr.take_snapshot() == path


def test_reloaded_snapshot_at_log_end_is_not_rewritten_unless_entries_expired(
    log: Partition, clock: Clock
) -> None:
    log.produce(P, 0, 0)
    log.produce(Q, 0, 0)
    log.mgr.producers()[Q].last_append_ms = NOW - DAY_MS  # Q idle for a day
    path = log.mgr.take_snapshot()
    log.mgr = ProducerStateManager(log.directory, now_ms=clock)
    log.mgr.truncate_and_reload(0, 2)
    assert list(log.mgr.producers()) == [P]
    assert log.mgr.counters["expired"] == 1
    assert log.mgr.take_snapshot(2) == path  # rewritten without Q
    assert log.mgr.take_snapshot(2) is None
    log.mgr = ProducerStateManager(log.directory, now_ms=clock)
    log.mgr.truncate_and_reload(0, 2)
    assert log.mgr.take_snapshot(2) is None


def test_take_snapshot_below_map_end_offset_is_refused(log: Partition) -> None:
    log.produce(P, 0, 0, 3)
    with pytest.raises(ValueError):
        log.mgr.take_snapshot(2)
    assert log.mgr.snapshot_offsets() == []


def test_take_snapshot_at_roll_offset_advances_map_end_offset(log: Partition, tmp_path: Path) -> None:
    log.produce(P, 0, 0)
    assert log.mgr.take_snapshot(7, fsync=False) == tmp_path / snap_name(7)
    assert log.mgr.map_end_offset == 7


def test_snapshot_write_leaves_no_temp_file_and_leftovers_are_removed_on_reload(
    log: Partition, tmp_path: Path
) -> None:
    log.produce(P, 0, 0)
    log.mgr.take_snapshot()
    assert files(tmp_path) == [snap_name(1)]
    (tmp_path / (snap_name(9) + ".tmp")).write_bytes(b"half")
    (tmp_path / (snap_name(0) + ".deleted")).write_bytes(b"old")
    (tmp_path / "00000000000000000000.log").write_bytes(b"")
    (tmp_path / "12.snapshot").write_bytes(b"not ours")
    log.mgr.truncate_and_reload(0, 1)
    assert files(tmp_path) == ["00000000000000000000.log", snap_name(1), "12.snapshot"]
    assert log.mgr.snapshot_offsets() == [1]


def test_delete_snapshot_and_listing(log: Partition) -> None:
    assert log.mgr.latest_snapshot_offset() is None
    log.mgr.take_snapshot(3, fsync=False)
    log.mgr.take_snapshot(10, fsync=False)
    assert log.mgr.snapshot_offsets() == [3, 10]
    assert log.mgr.latest_snapshot_offset() == 10
    log.mgr.delete_snapshot(10)
    log.mgr.delete_snapshot(11)  # absent: no error
    assert log.mgr.snapshot_offsets() == [3]
    assert log.mgr.take_snapshot(10) is not None  # deleted, so written again


def test_listing_a_missing_directory_is_empty(tmp_path: Path) -> None:
    mgr = ProducerStateManager(tmp_path / "gone", now_ms=Clock())
    assert mgr.snapshot_offsets() == []
    mgr.truncate_and_reload(5, 9)
    assert mgr.map_end_offset == 5
