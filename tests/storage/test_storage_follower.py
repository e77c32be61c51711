"""The follower's writes: appending the leader's batches as they are, and truncating the log.

Storage level, real files: a "leader" PartitionLog takes client batches (built by kafka-python) and
markers; its batches, read back from its files, are appended to a "follower" PartitionLog in another
directory. The follower must end with the same bytes, indexes and producer state as the leader,
and truncation must leave exactly what a log that never had the cut batches holds.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from minikafka.errors import ErrorCode, KafkaError
from minikafka.storage.batch import set_base_offset, set_partition_leader_epoch, split_batches
from minikafka.storage.log import PartitionLog
from minikafka.storage.log_validator import OffsetsOutOfOrderError, UnexpectedAppendOffsetError
from tests.storage_helpers import (
    TS,
    batch_positions,
    crash,
    make_batch,
    open_log,
    segment_files,
    topic_config,
)
from tests.transactions.test_transactions_storage import txn_batch

EPOCH = 7


@pytest.fixture
def logs(tmp_path: Path) -> Iterator[tuple[PartitionLog, PartitionLog]]:
    config = topic_config(segment_bytes=1000)
    leader = open_log(tmp_path / "leader" / "t-0", config, now_ms=lambda: TS)
    follower = open_log(tmp_path / "follower" / "t-0", config, now_ms=lambda: TS)
    yield leader, follower
    for plog in (leader, follower):
        plog.close()


def copied(leader: PartitionLog, start: int = 0, epoch: int = EPOCH) -> bytearray:
    """The leader's batches from ``start`` to its log end, as a fetch returns them, stamped
    with the leader epoch ``epoch`` (what the leader of that epoch would have written)."""
    out = bytearray()
    offset = start
    while offset < leader.log_end_offset:
        data = leader.read(offset, 1 << 20)
        out += data
        offset = split_batches(data)[-1][1].next_offset
    for pos, _header in split_batches(out):
        set_partition_leader_epoch(out, pos, epoch)
    return out


def replicate(leader: PartitionLog, follower: PartitionLog, upto: int | None = None) -> None:
    """Copy the leader's batches from the follower's log end (below ``upto``) one fetch of one
    batch at a time, as a fetcher with a small fetch size does."""
    data = copied(leader, follower.log_end_offset)
    for pos, header in split_batches(data):
        if upto is not None and header.base_offset >= upto:
            break
        follower.append_as_follower(data[pos : pos + header.size])


def state(plog: PartitionLog) -> dict[int, tuple[Any, ...]]:
    """Everything a producer entry holds that decides later answers."""
    return {pid: (e.epoch, [(b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.timestamp) for b in e.batches],
                  e.coordinator_epoch, e.current_txn_first_offset)
            for pid, e in plog.producers().items()}


def write_history(leader: PartitionLog) -> None:
    """Idempotent and transactional producers, one aborted and one open transaction, several segments."""
    for i in range(6):
        leader.append_from_client(make_batch(1, 0, i * 2, count=2))
        leader.append_from_client(make_batch(-1, -1, -1))
    leader.append_from_client(txn_batch(2, 0, 0, count=3))
    leader.append_from_client(make_batch(1, 0, 12))
    leader.append_marker(2, 0, False, 4)
    leader.append_from_client(txn_batch(3, 1, 0))


# -- append_as_follower --------------------------------------------------------------------------


def test_follower_append_keeps_the_leaders_offsets_epochs_bytes_and_producer_state(
        logs: tuple[PartitionLog, PartitionLog]) -> None:
    leader, follower = logs
    write_history(leader)
    data = copied(leader)
    replicate(leader, follower)
    assert follower.log_end_offset == leader.log_end_offset
    assert follower.high_watermark == 0  # learned from the leader, not moved by the append
    assert follower.update_high_watermark(10**9) == follower.log_end_offset
    assert bytes(copied(follower, epoch=EPOCH)) == bytes(data)
    assert follower.segment_base_offsets() == leader.segment_base_offsets() and len(follower.segments) > 1
    assert all(header.partition_leader_epoch == EPOCH for _, header in split_batches(follower.read(0, 1 << 20)))
    assert state(follower) == state(leader)
    assert follower.last_stable_offset == leader.last_stable_offset < leader.log_end_offset
    assert (follower.collect_aborted_transactions(0, follower.log_end_offset)
            == leader.collect_aborted_transactions(0, leader.log_end_offset) == [(2, 18)])


def test_a_follower_that_becomes_leader_answers_a_retry_as_a_duplicate_of_the_original(
        logs: tuple[PartitionLog, PartitionLog]) -> None:
    leader, follower = logs
    retried = make_batch(9, 3, 0, count=4)
    first = leader.append_from_client(bytearray(retried))
    replicate(leader, follower)
    answer = follower.append_from_client(bytearray(retried))
    assert answer.duplicate and (answer.base_offset, answer.last_offset) == (first.base_offset, first.last_offset)
    assert follower.log_end_offset == leader.log_end_offset


def test_follower_append_of_several_batches_returns_their_offsets_and_survives_a_restart(
        logs: tuple[PartitionLog, PartitionLog]) -> None:
    leader, follower = logs
    write_history(leader)
    data = copied(leader)
    batches = split_batches(data)
    first = sum(h.size for _, h in batches[:3])
    result = follower.append_as_follower(data[:first])
    assert result is not None and (result.base_offset, result.last_offset) == (0, batches[2][1].last_offset)
    replicate(leader, follower)
    expected = state(leader)
    follower.close()
    reopened = open_log(follower.dir, topic_config(segment_bytes=1000), now_ms=lambda: TS)
    try:
        assert reopened.log_end_offset == leader.log_end_offset and state(reopened) == expected
    finally:
        reopened.close()


def test_follower_rolls_at_the_first_copied_offset_when_the_leaders_log_has_a_gap(
        logs: tuple[PartitionLog, PartitionLog]) -> None:
    _leader, follower = logs
    follower.append_as_follower(_at(make_batch(count=3, value=b"x" * 200), 0))
    follower.append_as_follower(_at(make_batch(count=1, value=b"y" * 400), 40))  # offsets 3..39 compacted away
    assert follower.segment_base_offsets() == [0, 40]
    assert follower.log_end_offset == 41
    assert [h.base_offset for _, h in split_batches(follower.read(3, 1 << 20))] == [40]


def _at(batch: bytearray, base_offset: int) -> bytearray:
    set_base_offset(batch, 0, base_offset)
    return batch


def test_follower_append_below_the_log_end_or_out_of_order_is_refused_and_changes_nothing(
        logs: tuple[PartitionLog, PartitionLog]) -> None:
    _leader, follower = logs
    follower.append_as_follower(_at(make_batch(1, 0, 0, count=2), 0))
    before = (follower.log_end_offset, follower.size_bytes, state(follower))
    with pytest.raises(UnexpectedAppendOffsetError) as below:
        follower.append_as_follower(_at(make_batch(1, 0, 2), 1))
    assert below.value.first_offset == 1
    with pytest.raises(OffsetsOutOfOrderError):
        follower.append_as_follower(_at(make_batch(1, 0, 2), 5) + _at(make_batch(1, 0, 3), 3))
    corrupt = _at(make_batch(1, 0, 2), 2)
    corrupt[-1] ^= 0xFF
    with pytest.raises(KafkaError) as bad_crc:
        follower.append_as_follower(_at(make_batch(1, 0, 2), 2) + corrupt)
    assert bad_crc.value.code == ErrorCode.CORRUPT_MESSAGE
    with pytest.raises(KafkaError) as torn:
        follower.append_as_follower(_at(make_batch(1, 0, 2), 2)[:-1])
    assert torn.value.code == ErrorCode.CORRUPT_MESSAGE
    with pytest.raises(KafkaError) as too_big:
        follower.append_as_follower(_at(make_batch(1, 0, 2, value=b"z" * 1200), 2))
    assert too_big.value.code == ErrorCode.RECORD_LIST_TOO_LARGE
    assert (follower.log_end_offset, follower.size_bytes, state(follower)) == before
    assert follower.append_as_follower(b"") is None


def test_follower_accepts_an_older_producer_epoch_and_a_sequence_gap_the_leader_wrote(
        logs: tuple[PartitionLog, PartitionLog]) -> None:
    _leader, follower = logs
    follower.append_as_follower(_at(make_batch(5, 3, 0), 0) + _at(make_batch(5, 2, 9), 1))
    assert state(follower)[5][0] == 2 and follower.log_end_offset == 2


# -- truncate_to ---------------------------------------------------------------------------------


def test_truncation_leaves_what_a_log_without_the_cut_batches_holds(
        tmp_path: Path, logs: tuple[PartitionLog, PartitionLog]) -> None:
    leader, follower = logs
    write_history(leader)
    replicate(leader, follower)
    follower.update_high_watermark(leader.high_watermark)
    cut = 18  # the first offset of producer 2's aborted transaction, in a later segment than 0
    assert leader.collect_aborted_transactions(0, leader.log_end_offset) == [(2, cut)]
    reference = open_log(tmp_path / "reference" / "t-0", topic_config(segment_bytes=1000), now_ms=lambda: TS)
    replicate(leader, reference, upto=cut)
    try:
        assert follower.truncate_to(cut) is True
        assert follower.log_end_offset == cut and follower.high_watermark <= cut
        assert state(follower) == state(reference)
        assert follower.last_stable_offset == follower.log_end_offset
        assert follower.collect_aborted_transactions(0, cut) == []
        assert follower.segment_base_offsets() == reference.segment_base_offsets()
        active = follower.segments[-1]
        assert [base for _, base, _ in batch_positions(active.log_path)] == [
            base for _, base, _ in batch_positions(reference.segments[-1].log_path)]
        assert all(offset < cut for offset, _ in active.offset_index.entries())
        assert all(offset < cut for _, offset in active.time_index.entries())
        assert [int(name[:20]) for name in segment_files(follower.dir, ".snapshot")][-1] == cut
        assert all(int(name[:20]) <= cut for name in segment_files(follower.dir, ".snapshot"))
        # the log goes on from the cut, as a leader and as a follower
        assert follower.append_from_client(make_batch(1, 0, 12)).base_offset == cut
        assert follower.append_as_follower(_at(make_batch(-1, -1, -1), cut + 5)) is not None
        assert follower.log_end_offset == cut + 6
    finally:
        reference.close()


def test_truncation_inside_a_transaction_reopens_it_and_the_state_survives_restarts(
        logs: tuple[PartitionLog, PartitionLog]) -> None:
    leader, follower = logs
    leader.append_from_client(txn_batch(4, 0, 0, count=2))  # 0-1
    leader.append_from_client(make_batch(-1, -1, -1))  # 2
    leader.append_marker(4, 0, False, 1)  # 3
    replicate(leader, follower)
    follower.update_high_watermark(leader.high_watermark)
    assert follower.last_stable_offset == 4 and follower.collect_aborted_transactions(0, 4) == [(4, 0)]
    follower.truncate_to(3)
    assert follower.first_unstable_offset == 0 and follower.last_stable_offset == 0
    assert follower.collect_aborted_transactions(0, 3) == [] and follower.segments[0].txn_index.entries == []
    expected = state(follower)
    crash(follower)
    reopened = open_log(follower.dir, topic_config(segment_bytes=1000), clean=False, now_ms=lambda: TS)
    try:
        assert (reopened.log_end_offset, state(reopened)) == (3, expected)
        assert reopened.collect_aborted_transactions(0, 3) == []
    finally:
        reopened.close()


def test_truncation_mid_batch_drops_the_whole_batch(logs: tuple[PartitionLog, PartitionLog]) -> None:
    leader, follower = logs
    leader.append_from_client(make_batch(1, 0, 0, count=3))  # 0-2
    leader.append_from_client(make_batch(1, 0, 3, count=3))  # 3-5
    replicate(leader, follower)
    assert follower.truncate_to(4) is True
    assert follower.log_end_offset == 3
    assert [b.last_seq for b in follower.producers()[1].batches] == [2]


def test_truncation_at_or_past_the_log_end_changes_nothing(logs: tuple[PartitionLog, PartitionLog]) -> None:
    leader, follower = logs
    leader.append_from_client(make_batch(1, 0, 0, count=3))
    replicate(leader, follower)
    files = sorted(p.name for p in follower.dir.iterdir())
    assert follower.truncate_to(3) is False and follower.truncate_to(10) is False
    assert follower.log_end_offset == 3 and sorted(p.name for p in follower.dir.iterdir()) == files
    with pytest.raises(ValueError):
        follower.truncate_to(-1)


def test_truncation_below_every_segment_starts_the_log_again_there(
        logs: tuple[PartitionLog, PartitionLog]) -> None:
    leader, follower = logs
    write_history(leader)
    replicate(leader, follower)
    follower.update_high_watermark(follower.log_end_offset)
    follower.delete_records(follower.segment_base_offsets()[1])
    first_base = follower.segment_base_offsets()[0]
    assert first_base > 2
    assert follower.truncate_to(2) is True
    assert follower.segment_base_offsets() == [2]
    assert (follower.log_start_offset, follower.log_end_offset, follower.high_watermark) == (2, 2, 2)
    assert state(follower) == {}
    assert segment_files(follower.dir, ".log") == ["00000000000000000002.log"]
    assert segment_files(follower.dir, ".snapshot") == ["00000000000000000002.snapshot"]
    assert follower.append_as_follower(_at(make_batch(1, 0, 0), 2)) is not None


def test_truncation_into_an_inactive_segment_makes_it_active_with_indexes_a_restart_trusts(
        tmp_path: Path, logs: tuple[PartitionLog, PartitionLog], caplog: pytest.LogCaptureFixture) -> None:
    leader, follower = logs
    write_history(leader)
    replicate(leader, follower)
    assert len(follower.segments) == 2
    cut = follower.segment_base_offsets()[1] - 3
    reference = open_log(tmp_path / "reference" / "t-0", topic_config(segment_bytes=1000), now_ms=lambda: TS)
    replicate(leader, reference, upto=cut)
    try:
        assert follower.truncate_to(cut) is True
        assert follower.segment_base_offsets() == [0] and segment_files(follower.dir, ".log") == [
            "00000000000000000000.log"]
        assert follower.log_end_offset == cut and state(follower) == state(reference)
        assert follower.segments[0].offset_index.entries() == reference.segments[0].offset_index.entries()
        for _ in range(3):  # the active segment takes appends, indexes included, and rolls again
            follower.append_from_client(make_batch(value=b"v" * 300))
        expected = (follower.log_end_offset, follower.segment_base_offsets(), state(follower))
        assert len(expected[1]) > 1
    finally:
        reference.close()
    follower.close()
    caplog.clear()
    reopened = open_log(follower.dir, topic_config(segment_bytes=1000), now_ms=lambda: TS)
    try:
        assert (reopened.log_end_offset, reopened.segment_base_offsets(), state(reopened)) == expected
        assert not [r for r in caplog.records if "rebuilding segment" in r.getMessage()]
    finally:
        reopened.close()


def test_follower_copy_too_far_from_an_empty_segments_base_starts_a_segment_at_the_copy(
        logs: tuple[PartitionLog, PartitionLog]) -> None:
    _leader, follower = logs
    far = 2**31 + 100  # a compacted leader log may jump this far; offset-index entries are relative int32
    follower.append_as_follower(_at(make_batch(1, 0, 0, count=2), far))
    assert follower.segment_base_offsets() == [0, far]
    assert follower.log_end_offset == far + 2
    assert [h.base_offset for _, h in split_batches(follower.read(far, 1 << 20))] == [far]
    follower.roll()
    follower.roll()  # the active segment is now empty and at the log end: nothing to roll
    assert follower.segment_base_offsets() == [0, far, far + 2]
