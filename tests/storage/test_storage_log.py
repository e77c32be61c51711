"""PartitionLog: append checks and offsets, reads, timestamps, roll, retention, flush (docs/semantics.md#append-rules, docs/semantics.md#offset-assignment, docs/semantics.md#on-disk-layout)."""

from __future__ import annotations

import os
import struct
import threading
from pathlib import Path

import pytest
from crc32c import crc32c
from kafka.record.default_records import DefaultRecordBatchBuilder

from minikafka.errors import ErrorCode, KafkaError
from minikafka.storage import segment
from minikafka.storage.log import PartitionLog
from tests.batches import CODECS
from tests.storage_helpers import (
    TS,
    batch_positions,
    kafka_batches,
    make_batch,
    open_log,
    segment_files,
    topic_config,
)

P = 1000


def _fix_crc(batch: bytearray) -> bytearray:
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    return batch


def _code(plog: PartitionLog, batch: bytearray, now_ms: int | None = None) -> ErrorCode:
    with pytest.raises(KafkaError) as info:
        plog.append_from_client(batch, now_ms)
    return info.value.code


@pytest.fixture
def plog(tmp_path: Path) -> PartitionLog:
    return open_log(tmp_path / "t-0")


# ---------------------------------------------------------------------- on-disk bytes


def test_log_file_holds_client_batches_with_assigned_base_offset_and_leader_epoch_zero(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    sent = [make_batch(P, 0, 0, count=3), make_batch(P, 0, 3, count=1), make_batch(count=2, codec=1)]
    for batch in sent:
        plog.append_from_client(bytearray(batch))
    plog.close()
    expected = b""
    for base, batch in zip([0, 3, 4], sent, strict=True):
        expected += struct.pack(">q", base) + batch[8:12] + struct.pack(">i", 0) + batch[16:]
    assert (tmp_path / "t-0" / "00000000000000000000.log").read_bytes() == expected


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_kafka_python_reads_every_record_back_from_the_segment_file(tmp_path: Path, codec: str) -> None:
    plog = open_log(tmp_path / "t-0")
    expected = []
    sequence = 0
    for b in range(6):
        builder = DefaultRecordBatchBuilder(2, CODECS[codec], False, P, 0, sequence, 1 << 30)
        for r in range(1 + b):
            key = None if r % 2 else b"k%d" % r
            value = (b"value-%d-%d-" % (b, r)) * (5 + r)  # compressible, so the codec is kept
            headers = [("h", b"%d" % b)]
            builder.append(r, TS + 10 * b + r, key, value, headers)
            expected.append((key, value, TS + 10 * b + r, headers))
        sequence += 1 + b
        plog.append_from_client(bytearray(builder.build()))
    plog.close()
    batches = kafka_batches((tmp_path / "t-0" / "00000000000000000000.log").read_bytes())
    assert len(batches) == 6
    got = []
    next_offset = 0
    for batch in batches:
        assert batch.validate_crc()
        assert batch.base_offset == next_offset
        assert batch.compression_type == CODECS[codec]
        for record in batch:
            assert record.offset == next_offset
            next_offset += 1
            got.append((record.key, record.value, record.timestamp, record.headers))
    assert got == expected


def test_assigned_offsets_are_contiguous_and_leo_and_hw_advance(plog: PartitionLog) -> None:
    results = [plog.append_from_client(make_batch(count=n)) for n in (1, 5, 2)]
    assert [(r.base_offset, r.last_offset) for r in results] == [(0, 0), (1, 5), (6, 7)]
    assert all(r.log_append_time == -1 and not r.duplicate and r.log_start_offset == 0 for r in results)
    assert plog.log_end_offset == plog.high_watermark == 8


def test_on_append_is_called_after_each_successful_append_only(plog: PartitionLog) -> None:
    seen: list[int] = []
    plog.on_append = lambda log: seen.append(log.log_end_offset)
    plog.append_from_client(make_batch(count=2))
    with pytest.raises(KafkaError):
        plog.append_from_client(make_batch(P, 0, -1))
    plog.append_from_client(make_batch())
    assert seen == [2, 3]


# ---------------------------------------------------------------------- validation (docs/semantics.md#append-rules)


def test_nonzero_base_offset_is_invalid_record(plog: PartitionLog) -> None:
    batch = make_batch()
    struct.pack_into(">q", batch, 0, 7)
    assert _code(plog, batch) == ErrorCode.INVALID_RECORD


def test_batch_above_max_message_bytes_is_message_too_large_before_the_crc_check(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", topic_config(max_message_bytes=200))
    batch = make_batch(value=b"x" * 300)
    batch[100] ^= 0xFF  # also corrupt: the size check comes first
    assert _code(plog, batch) == ErrorCode.MESSAGE_TOO_LARGE


def test_crc_mismatch_and_short_batch_are_corrupt_message(plog: PartitionLog) -> None:
    batch = make_batch()
    batch[-1] ^= 0x01
    assert _code(plog, batch) == ErrorCode.CORRUPT_MESSAGE
    short = make_batch()[:60]
    struct.pack_into(">i", short, 8, 48)
    assert _code(plog, short) == ErrorCode.CORRUPT_MESSAGE


def _corrupt(producer_id: int, epoch: int, base_sequence: int) -> bytearray:
    batch = make_batch(producer_id, epoch, base_sequence)
    batch[-1] ^= 0x01
    return batch


def test_corrupt_batch_is_corrupt_message_before_sequence_epoch_and_duplicate_answers(plog: PartitionLog) -> None:
    plog.append_from_client(make_batch(P, 1, 0))
    size = plog.segments[-1].size
    assert _code(plog, _corrupt(P, 1, 7)) == ErrorCode.CORRUPT_MESSAGE  # not 45
    assert _code(plog, _corrupt(P, 0, 1)) == ErrorCode.CORRUPT_MESSAGE  # not 47
    assert _code(plog, _corrupt(P, 1, 0)) == ErrorCode.CORRUPT_MESSAGE  # not a duplicate answer
    assert plog.log_end_offset == 1 and plog.segments[-1].size == size
    assert plog.append_from_client(make_batch(P, 1, 1)).base_offset == 1  # the state did not move


def test_undefined_codec_is_corrupt_message(plog: PartitionLog) -> None:
    batch = make_batch()
    struct.pack_into(">h", batch, 21, 5)
    assert _code(plog, _fix_crc(batch)) == ErrorCode.CORRUPT_MESSAGE


def test_count_and_offset_delta_mismatch_control_bit_and_missing_sequence_are_invalid_record(
    plog: PartitionLog,
) -> None:
    batch = make_batch(count=3)
    struct.pack_into(">i", batch, 23, 1)  # lastOffsetDelta 1 with 3 records
    assert _code(plog, _fix_crc(batch)) == ErrorCode.INVALID_RECORD
    batch = make_batch(count=1)
    struct.pack_into(">i", batch, 57, 0)  # recordsCount 0
    struct.pack_into(">i", batch, 23, -1)
    assert _code(plog, _fix_crc(batch)) == ErrorCode.INVALID_RECORD
    batch = make_batch()
    struct.pack_into(">h", batch, 21, 0x20)
    assert _code(plog, _fix_crc(batch)) == ErrorCode.INVALID_RECORD
    assert _code(plog, make_batch(P, 0, -1)) == ErrorCode.INVALID_RECORD
    assert plog.log_end_offset == 0


def test_batch_above_segment_bytes_is_record_list_too_large(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", topic_config(segment_bytes=150))
    assert _code(plog, make_batch(value=b"x" * 200)) == ErrorCode.RECORD_LIST_TOO_LARGE


def test_default_topic_never_decodes_records_but_a_bounded_one_does(tmp_path: Path) -> None:
    # A batch whose records section is garbage but whose CRC is right: the header-only path
    # accepts it; a topic with timestamp bounds must decode and so rejects it as INVALID_RECORD.
    batch = make_batch(count=1, value=b"v" * 20)
    batch[61:] = b"\xff" * (len(batch) - 61)
    _fix_crc(batch)
    assert open_log(tmp_path / "a-0").append_from_client(bytearray(batch)).base_offset == 0
    bounded = open_log(tmp_path / "b-0", topic_config(**{"message.timestamp.before.max.ms": 10**12}))
    assert _code(bounded, bytearray(batch), now_ms=TS) == ErrorCode.INVALID_RECORD


def test_out_of_range_record_timestamps_are_invalid_timestamp_with_record_errors(tmp_path: Path) -> None:
    config = topic_config(**{"message.timestamp.before.max.ms": 1000, "message.timestamp.after.max.ms": 500})
    plog = open_log(tmp_path / "t-0", config)
    now = TS + 10_000
    batch = make_batch(timestamps=[now, now - 2000, -1, now + 400, now + 501], codec=CODECS["gzip"])
    with pytest.raises(KafkaError) as info:
        plog.append_from_client(batch, now)
    assert info.value.code == ErrorCode.INVALID_TIMESTAMP
    assert [i for i, _ in info.value.record_errors] == [1, 4]
    ok = plog.append_from_client(make_batch(timestamps=[now, -1, now + 500, now - 1000]), now)
    assert ok.base_offset == 0 and plog.log_end_offset == 4


def test_log_append_time_topic_stamps_batches_with_broker_time_and_a_valid_crc(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", topic_config(**{"message.timestamp.type": "LogAppendTime"}))
    result = plog.append_from_client(make_batch(count=3, timestamp=TS), now_ms=TS + 777)
    assert result.log_append_time == TS + 777
    [batch] = kafka_batches(plog.read(0, 1 << 20))
    assert batch.validate_crc()
    assert batch.timestamp_type == 1
    assert [r.timestamp for r in batch] == [TS + 777] * 3


def test_client_batch_with_log_append_time_bit_is_invalid_timestamp_on_a_log_append_time_topic(
    tmp_path: Path,
) -> None:
    plog = open_log(tmp_path / "t-0", topic_config(**{"message.timestamp.type": "LogAppendTime"}))
    batch = make_batch(count=2)
    struct.pack_into(">h", batch, 21, 0x08)
    with pytest.raises(KafkaError) as info:
        plog.append_from_client(_fix_crc(batch))
    assert info.value.code == ErrorCode.INVALID_TIMESTAMP
    assert [i for i, _ in info.value.record_errors] == [0, 1]


def test_compacted_topic_refuses_null_keys_with_record_errors(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", topic_config(**{"cleanup.policy": "compact"}))
    with pytest.raises(KafkaError) as info:
        plog.append_from_client(make_batch(key=None, count=2))
    assert info.value.code == ErrorCode.INVALID_RECORD
    assert [i for i, _ in info.value.record_errors] == [0, 1]
    assert plog.append_from_client(make_batch(key=b"k")).base_offset == 0


# ---------------------------------------------------------------------- duplicates and producer state


def test_duplicate_returns_original_offsets_and_appends_nothing(plog: PartitionLog) -> None:
    plog.append_from_client(make_batch(P, 0, 0, count=2, timestamp=TS))
    plog.append_from_client(make_batch(P, 0, 2, count=3, timestamp=TS + 100))
    size = plog.segments[-1].size
    dup = plog.append_from_client(make_batch(P, 0, 0, count=2, timestamp=TS + 5000))
    assert (dup.duplicate, dup.base_offset, dup.last_offset, dup.log_append_time) == (True, 0, 1, TS + 1)
    assert plog.log_end_offset == 5 and plog.segments[-1].size == size
    assert _code(plog, make_batch(P, 0, 7)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_short_pwrites_are_continued_until_the_whole_batch_is_in_the_file(
        plog: PartitionLog, monkeypatch: pytest.MonkeyPatch) -> None:
    real_pwrite = os.pwrite
    calls = []

    def short_pwrite(fd: int, data: bytes, position: int) -> int:  # the kernel may write less than asked
        calls.append(len(data))
        return real_pwrite(fd, bytes(data)[:50], position)

    monkeypatch.setattr(segment.os, "pwrite", short_pwrite)
    batches = [make_batch(P, 0, 0, value=b"v" * 120), make_batch(P, 0, 1, value=b"w" * 30)]
    results = [plog.append_from_client(bytearray(batch)) for batch in batches]
    monkeypatch.undo()
    assert [r.base_offset for r in results] == [0, 1]
    assert calls[0] == len(batches[0]) and len(calls) == sum(-(-len(b) // 50) for b in batches)
    expected = b"".join(struct.pack(">q", base) + batch[8:12] + struct.pack(">i", 0) + batch[16:]
                        for base, batch in zip([0, 1], batches, strict=True))
    assert plog.segments[-1].log_path.read_bytes() == expected


def test_failed_write_leaves_log_and_producer_state_unchanged(plog: PartitionLog) -> None:
    plog.append_from_client(make_batch(P, 0, 0))
    seg = plog.segments[-1]
    good_fd = seg.fd
    seg.fd = os.open(seg.log_path, os.O_RDONLY)  # writes now fail with EBADF
    try:
        assert _code(plog, make_batch(P, 0, 1)) == ErrorCode.KAFKA_STORAGE_ERROR
    finally:
        os.close(seg.fd)
        seg.fd = good_fd
    assert plog.log_end_offset == 1 and seg.size == seg.log_path.stat().st_size
    result = plog.append_from_client(make_batch(P, 0, 1))  # same sequence is still the next one
    assert (result.base_offset, result.duplicate) == (1, False)


# ---------------------------------------------------------------------- reads


def test_read_returns_whole_batches_from_the_one_containing_the_offset(plog: PartitionLog) -> None:
    for n in (3, 4, 5):
        plog.append_from_client(make_batch(count=n))
    assert [b.base_offset for b in kafka_batches(plog.read(0, 1 << 20))] == [0, 3, 7]
    assert [b.base_offset for b in kafka_batches(plog.read(5, 1 << 20))] == [3, 7]
    assert [b.base_offset for b in kafka_batches(plog.read(11, 1 << 20))] == [7]
    assert plog.read(12, 1 << 20) == b""


def test_read_cuts_at_whole_batches_and_min_one_returns_a_batch_larger_than_max_bytes(plog: PartitionLog) -> None:
    sizes = []
    for _ in range(3):
        batch = make_batch(value=b"x" * 100)
        sizes.append(len(batch))
        plog.append_from_client(batch)
    assert len(plog.read(0, sizes[0] + sizes[1] + 10)) == sizes[0] + sizes[1]
    assert len(plog.read(0, 10)) == sizes[0]
    assert plog.read(0, 10, min_one=False) == b""


def test_read_returns_the_longest_run_of_whole_batches_that_fits_in_max_bytes(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", topic_config(index_interval_bytes=150))
    for i in range(80):
        plog.append_from_client(make_batch(count=1 + i % 3, value=b"q" * (i % 23)))
    layout = batch_positions(tmp_path / "t-0" / "00000000000000000000.log")
    for start_batch in (0, 7, 40):
        start_pos, start_offset, _ = layout[start_batch]
        for max_bytes in range(layout[start_batch][2], 3000, 97):
            fits = [pos + size - start_pos for pos, _, size in layout[start_batch:]
                    if pos + size - start_pos <= max_bytes]
            data = plog.read(start_offset, max_bytes)
            assert len(data) == fits[-1]
            assert [b.base_offset for b in kafka_batches(data)] == [b for _, b, _ in layout[start_batch:]][:len(fits)]


def test_read_outside_log_start_and_leo_is_offset_out_of_range(plog: PartitionLog) -> None:
    plog.append_from_client(make_batch(count=4))
    for offset in (5, -1):
        with pytest.raises(KafkaError) as info:
            plog.read(offset, 100)
        assert info.value.code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_reads_of_every_offset_across_rolled_segments_find_their_batch(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", topic_config(segment_bytes=2000, index_interval_bytes=200))
    bases = []
    for i in range(60):
        bases.append(plog.append_from_client(make_batch(count=1 + i % 3)).base_offset)
    assert len(plog.segments) >= 3
    for offset in range(plog.log_end_offset):
        first = kafka_batches(plog.read(offset, 1))[0]
        assert first.base_offset <= offset <= first.base_offset + first.last_offset_delta
        assert first.base_offset in bases


# ---------------------------------------------------------------------- roll


def test_roll_on_segment_bytes_writes_a_producer_snapshot_at_the_new_base(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", topic_config(segment_bytes=500))
    sizes = []
    for seq in range(10):
        batch = make_batch(P, 0, seq, value=b"x" * 40)
        sizes.append(len(batch))
        plog.append_from_client(batch)
    per_segment = 500 // sizes[0]
    bases = [g.base_offset for g in plog.segments]
    assert bases == list(range(0, 10, per_segment))
    assert all(g.size <= 500 for g in plog.segments)
    snapshots = segment_files(tmp_path / "t-0", ".snapshot")
    assert [f"{b:020d}.snapshot" for b in bases[1:]] == [s for s in snapshots if s != "00000000000000000000.snapshot"]


def test_roll_on_segment_ms_uses_the_first_batch_timestamp(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", topic_config(segment_ms=1000))
    plog.append_from_client(make_batch(timestamp=TS))
    plog.append_from_client(make_batch(timestamp=TS + 1000))
    assert len(plog.segments) == 1
    plog.append_from_client(make_batch(timestamp=TS + 1001))
    assert [g.base_offset for g in plog.segments] == [0, 2]


def test_roll_when_the_offset_index_is_full(tmp_path: Path) -> None:
    # 24 bytes: 3 offset-index entries, 2 time-index entries (equal timestamps add only one)
    plog = open_log(tmp_path / "t-0", topic_config(segment_index_bytes=24, index_interval_bytes=0))
    for _ in range(6):
        plog.append_from_client(make_batch(timestamp=TS))
    # entries are added from the 2nd append on, so appends 2-4 fill the index
    assert [g.base_offset for g in plog.segments] == [0, 4]
    plog.close()
    assert (tmp_path / "t-0" / "00000000000000000000.index").stat().st_size == 24


def test_roll_when_the_time_index_is_full(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", topic_config(segment_index_bytes=16, index_interval_bytes=0))
    for i in range(4):
        plog.append_from_client(make_batch(timestamp=TS + i))
    # a 16-byte time index holds one 12-byte entry, written at the 2nd append
    assert [g.base_offset for g in plog.segments] == [0, 2]


def test_roll_of_an_empty_active_segment_does_nothing(plog: PartitionLog) -> None:
    plog.roll()
    assert len(plog.segments) == 1
    plog.append_from_client(make_batch())
    plog.roll()
    assert [g.base_offset for g in plog.segments] == [0, 1]


# ---------------------------------------------------------------------- timestamps


def test_offset_for_timestamp_finds_the_first_record_at_or_after_the_target(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", topic_config(segment_bytes=700, index_interval_bytes=100))
    stamps = []
    for i in range(30):
        batch_ts = [TS + ((i * 37) % 50) * 10 + r for r in range(3)]
        stamps.extend(batch_ts)
        plog.append_from_client(make_batch(timestamps=batch_ts, codec=CODECS["lz4"] if i % 2 else 0))
    assert len(plog.segments) > 3
    for target in [TS - 5, TS, TS + 3, TS + 251, TS + 490, TS + 492, TS + 493]:
        expected = next(((o, t) for o, t in enumerate(stamps) if t >= target), None)
        assert plog.offset_for_timestamp(target) == expected, target


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_timestamp_lookups_decode_records_inside_compressed_batches(plog: PartitionLog, codec: str) -> None:
    plog.append_from_client(make_batch(timestamps=[TS + 5, TS + 1, TS + 9, TS + 7], codec=CODECS[codec],
                                       value=b"compress me " * 8))
    [batch] = kafka_batches(plog.read(0, 1 << 20))
    assert batch.compression_type == CODECS[codec]
    assert plog.offset_for_timestamp(TS + 6) == (2, TS + 9)
    assert plog.offset_for_timestamp(TS + 2) == (0, TS + 5)
    assert plog.offset_for_timestamp(TS + 10) is None
    assert plog.max_timestamp_offset() == (2, TS + 9)


def test_a_compressed_stream_that_does_not_decompress_is_corrupt_message_when_decoded(tmp_path: Path) -> None:
    batch = make_batch(count=2, codec=CODECS["zstd"], value=b"squeeze " * 20)
    batch[70:80] = b"\x00" * 10
    _fix_crc(batch)
    bounded = open_log(tmp_path / "t-0", topic_config(**{"message.timestamp.before.max.ms": 10**12}))
    assert _code(bounded, batch, now_ms=TS) == ErrorCode.CORRUPT_MESSAGE


def test_max_timestamp_offset_is_the_first_record_with_the_largest_timestamp(plog: PartitionLog) -> None:
    assert plog.max_timestamp_offset() == (-1, -1)
    plog.append_from_client(make_batch(timestamps=[TS, TS + 9, TS + 3]))
    plog.append_from_client(make_batch(timestamps=[TS + 1, TS + 50, TS + 50]))
    plog.append_from_client(make_batch(timestamps=[TS + 2]))
    assert plog.max_timestamp_offset() == (4, TS + 50)


# ---------------------------------------------------------------------- retention and DeleteRecords


def _fill(plog: PartitionLog, batches: int, timestamp: int = TS) -> None:
    for i in range(batches):
        plog.append_from_client(make_batch(P, 0, i, timestamp=timestamp + i, value=b"x" * 40))


def test_retention_ms_deletes_whole_old_segments_and_their_snapshots(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", topic_config(segment_bytes=500, retention_ms=1000))
    _fill(plog, 12)
    bases = [g.base_offset for g in plog.segments]
    assert len(bases) >= 3
    deleted = plog.apply_retention(now_ms=TS + bases[2] + 1000)  # segments 0 and 1 expired
    assert deleted == 2
    assert plog.log_start_offset == bases[2]
    assert segment_files(tmp_path / "t-0", ".log")[0] == f"{bases[2]:020d}.log"
    assert f"{bases[1]:020d}.snapshot" not in segment_files(tmp_path / "t-0", ".snapshot")
    with pytest.raises(KafkaError):
        plog.read(0, 100)


def test_retention_of_an_expired_active_segment_rolls_a_new_empty_one_at_the_leo(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", topic_config(retention_ms=1000))
    _fill(plog, 3)
    assert plog.apply_retention(now_ms=TS + 10**6) == 1
    assert [g.base_offset for g in plog.segments] == [3]
    assert plog.log_start_offset == plog.log_end_offset == 3
    assert plog.append_from_client(make_batch(P, 0, 3)).base_offset == 3


def test_retention_bytes_keeps_the_newest_segments_within_the_limit(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", topic_config(segment_bytes=500, retention_bytes=1000))
    _fill(plog, 20)
    sizes = [g.size for g in plog.segments]
    plog.apply_retention(now_ms=TS)
    assert plog.size_bytes <= 1000 + sizes[-1] and sum(g.size for g in plog.segments[1:]) <= 1000
    assert plog.size_bytes - plog.segments[0].size < 1000 < plog.size_bytes + sizes[0]


def test_retention_leaves_compact_only_topics_alone(tmp_path: Path) -> None:
    config = topic_config(segment_bytes=500, retention_ms=1000, retention_bytes=100)
    config["cleanup.policy"] = "compact"
    plog = open_log(tmp_path / "t-0", config)
    for i in range(12):
        plog.append_from_client(make_batch(P, 0, i, timestamp=TS + i, value=b"x" * 40, key=b"k"))
    segments = len(plog.segments)
    assert plog.apply_retention(now_ms=TS + 10**9) == 0
    assert len(plog.segments) == segments and plog.log_start_offset == 0


def test_delete_records_moves_log_start_and_drops_segments_below_it(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", topic_config(segment_bytes=500))
    _fill(plog, 12)
    bases = [g.base_offset for g in plog.segments]
    with pytest.raises(KafkaError) as info:
        plog.delete_records(13)
    assert info.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert plog.delete_records(bases[1] + 1) == bases[1] + 1
    assert plog.segments[0].base_offset == bases[1]
    assert kafka_batches(plog.read(bases[1] + 1, 100))[0].base_offset == bases[1] + 1
    assert plog.delete_records(-1) == 12 == plog.log_start_offset
    assert plog.delete_records(5) == 12
    assert plog.read(12, 100) == b""


# ---------------------------------------------------------------------- durability


def test_dirty_until_flush_then_recovery_point_is_the_leo(plog: PartitionLog) -> None:
    assert not plog.dirty
    plog.append_from_client(make_batch(count=3))
    assert plog.dirty and plog.recovery_point == 0
    plog.flush()
    assert not plog.dirty and plog.recovery_point == 3


def test_flush_messages_one_flushes_inside_every_append(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", topic_config(flush_messages=1))
    plog.append_from_client(make_batch())
    assert not plog.dirty and plog.recovery_point == 1


def test_flush_due_after_a_roll_and_after_flush_ms(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", topic_config(flush_ms=5000), now_ms=lambda: TS)
    plog.append_from_client(make_batch())
    assert not plog.flush_due(TS + 4999) and plog.flush_due(TS + 5000)
    plog.roll()
    assert plog.flush_due(TS)
    plog.flush()
    assert not plog.flush_due(TS + 10**6)


def test_flush_from_a_thread_while_appending_loses_nothing(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", topic_config(segment_bytes=3000))
    stop = threading.Event()
    errors: list[BaseException] = []

    def flusher() -> None:
        while not stop.is_set():
            try:
                plog.flush()
            except BaseException as e:  # pragma: no cover - reported below
                errors.append(e)
                return

    thread = threading.Thread(target=flusher)
    thread.start()
    try:
        for seq in range(300):
            plog.append_from_client(make_batch(P, 0, seq, value=b"y" * 30))
    finally:
        stop.set()
        thread.join(10)
    assert not errors
    plog.flush()
    assert plog.recovery_point == 300
    plog.close()
    reopened = open_log(tmp_path / "t-0", clean=False, recovery_point=0)
    assert reopened.log_end_offset == 300


def test_clean_close_trims_indexes_and_reopens_with_the_same_offsets_and_producers(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", topic_config(segment_bytes=1000, index_interval_bytes=100))
    _fill(plog, 30)
    plog.close()
    directory = tmp_path / "t-0"
    for name in segment_files(directory, ".index"):
        assert (directory / name).stat().st_size % 8 == 0 and (directory / name).stat().st_size < 1000
    assert f"{30:020d}.snapshot" in segment_files(directory, ".snapshot")
    reopened = open_log(directory, topic_config(segment_bytes=1000, index_interval_bytes=100))
    assert reopened.log_end_offset == 30
    assert [g.base_offset for g in reopened.segments] == [g.base_offset for g in plog.segments]
    assert reopened.append_from_client(make_batch(P, 0, 29)).duplicate
    assert reopened.append_from_client(make_batch(P, 0, 30)).base_offset == 30
    positions = batch_positions(directory / segment_files(directory, ".log")[-1])
    assert positions[-1][1] == 30
