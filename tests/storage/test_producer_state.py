"""ProducerStateManager's idempotence rules, rule by rule (docs/semantics.md#producer-state).

Each test drives the real manager the way the partition log does: ``check()`` before the
write, ``update()`` with the assigned offset after it. Offsets come from a running log end.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minikafka.errors import ErrorCode, KafkaError
from minikafka.storage.batch import CONTROL_FLAG, INT32_MAX, TRANSACTIONAL_FLAG
from minikafka.storage.producer_state import BatchMetadata, ProducerStateManager
from tests.producer_state_helpers import DAY_MS, NOW, Clock, P, Partition, Q, header


@pytest.fixture
def log(tmp_path: Path, clock: Clock) -> Partition:
    return Partition(tmp_path, clock)


def expect_error(code: ErrorCode, log: Partition, *args, **kw) -> None:
    leo, state = log.leo, snapshot_of_state(log.mgr)
    with pytest.raises(KafkaError) as info:
        log.produce(*args, **kw)
    assert info.value.code == code
    assert log.leo == leo and log.mgr.map_end_offset == leo
    assert snapshot_of_state(log.mgr) == state, "a refused batch must not change producer state"


def snapshot_of_state(mgr: ProducerStateManager) -> dict:
    return {
        pid: (
            e.epoch,
            [(m.first_seq, m.last_seq, m.first_offset, m.last_offset) for m in e.batches],
            e.last_timestamp,
        )
        for pid, e in mgr.producers().items()
    }


def six_batches_then_three_records(log: Partition) -> None:
    """Setup of the window tests: B(P,0,0)..B(P,0,5) at 0-5, then B(P,0,6..8) at 6."""
    for seq in range(6):
        assert log.produce(P, 0, seq) == seq
    assert log.produce(P, 0, 6, 3) == 6
    assert log.leo == 9


# -- A. Sequencing and duplicates -----------------------------------------------------------------


def test_first_batch_of_new_producer_is_accepted_and_cached(log: Partition) -> None:
    assert log.produce(P, 0, 0) == 0
    assert log.leo == 1
    assert log.mgr.producers()[P].epoch == 0
    assert log.window(P) == ["0@0"]


def test_next_batch_in_sequence_is_appended_after_the_first(log: Partition) -> None:
    log.produce(P, 0, 0)
    assert log.produce(P, 0, 1) == 1
    assert log.leo == 2
    assert log.window(P) == ["0@0", "1@1"]


def test_sequence_gap_is_out_of_order_and_changes_nothing(log: Partition) -> None:
    log.produce(P, 0, 0)
    expect_error(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, log, P, 0, 2)
    assert log.window(P) == ["0@0"]


def test_exact_retry_of_newest_batch_returns_original_offset_and_timestamp(log: Partition) -> None:
    log.produce(P, 0, 0, ts=NOW - 5)
    dup = log.mgr.check(header(P, 0, 0, ts=NOW + 999))
    assert dup == BatchMetadata(0, 0, 0, 0, NOW - 5)  # original maxTimestamp, not the retry's
    assert log.mgr.map_end_offset == 1


def test_duplicate_of_multi_record_batch_returns_its_base_offset(log: Partition) -> None:
    six_batches_then_three_records(log)
    assert log.produce(P, 0, 6, 3) == 6
    assert log.leo == 9


def test_duplicate_of_fifth_most_recent_batch_returns_original_offset(log: Partition) -> None:
    six_batches_then_three_records(log)
    assert log.window(P) == ["2@2", "3@3", "4@4", "5@5", "6..8@6"]
    assert log.produce(P, 0, 2) == 2
    assert log.leo == 9


def test_retry_of_evicted_sixth_most_recent_batch_is_out_of_order(log: Partition) -> None:
    six_batches_then_three_records(log)
    expect_error(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, log, P, 0, 1)


def test_duplicate_from_middle_of_window_returns_its_offset(log: Partition) -> None:
    six_batches_then_three_records(log)
    assert log.produce(P, 0, 4) == 4
    assert log.leo == 9


def test_partial_overlap_with_cached_batch_is_out_of_order(log: Partition) -> None:
    six_batches_then_three_records(log)
    expect_error(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, log, P, 0, 7, 2)


def test_superset_of_cached_batch_is_out_of_order(log: Partition) -> None:
    six_batches_then_three_records(log)
    expect_error(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, log, P, 0, 6, 4)


def test_same_sequence_range_with_different_payload_is_a_duplicate(log: Partition) -> None:
    log.produce(P, 0, 0, crc=0x1111, ts=NOW)
    other = header(P, 0, 0, crc=0x2222, ts=NOW + 1)  # different contents, same range
    dup = log.mgr.check(other)
    assert dup is not None and dup.first_offset == 0 and dup.timestamp == NOW
    assert log.leo == 1


def test_duplicate_is_recognised_after_a_roll_snapshot(log: Partition, tmp_path: Path) -> None:
    log.produce(P, 0, 0)
    assert log.mgr.take_snapshot(1, fsync=False) == tmp_path / "00000000000000000001.snapshot"  # roll at 1
    log.produce(P, 0, 1)
    assert log.produce(P, 0, 0) == 0
    assert log.leo == 2


def test_duplicate_below_log_start_offset_is_still_recognised(log: Partition) -> None:
    # Moving the log start offset (DeleteRecords, retention) does not touch producer state.
    log.produce(P, 0, 0)
    log.produce(Q, 0, 0)
    assert log.produce(P, 0, 0) == 0
    assert log.leo == 2


def test_sequences_are_tracked_per_producer(log: Partition) -> None:
    assert log.produce(P, 0, 0) == 0
    assert log.produce(Q, 0, 0) == 1
    assert log.produce(P, 0, 1) == 2
    assert log.produce(Q, 0, 1) == 3
    assert log.produce(Q, 0, 0) == 1
    assert log.window(P) == ["0@0", "1@2"] and log.window(Q) == ["0@1", "1@3"]


# -- B. Epochs --------------------------------------------------------------------------------------


def five_batches(log: Partition) -> None:
    for seq in range(5):
        log.produce(P, 0, seq)


def test_higher_epoch_starting_at_zero_replaces_the_window(log: Partition) -> None:
    five_batches(log)
    assert log.produce(P, 1, 0) == 5
    assert log.mgr.producers()[P].epoch == 1
    assert log.window(P) == ["0@5"]


def test_higher_epoch_with_nonzero_sequence_is_out_of_order_and_keeps_old_epoch(log: Partition) -> None:
    five_batches(log)
    expect_error(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, log, P, 1, 5)
    assert log.mgr.producers()[P].epoch == 0


def test_epoch_jump_larger_than_one_is_accepted(log: Partition) -> None:
    five_batches(log)
    assert log.produce(P, 7, 0) == 5
    assert log.mgr.producers()[P].epoch == 7


def test_older_epoch_is_fenced_with_invalid_producer_epoch(log: Partition) -> None:
    five_batches(log)
    log.produce(P, 1, 0)
    expect_error(ErrorCode.INVALID_PRODUCER_EPOCH, log, P, 0, 5)


def test_retry_of_pre_bump_batch_is_fenced_not_a_duplicate(log: Partition) -> None:
    five_batches(log)
    log.produce(P, 1, 0)
    expect_error(ErrorCode.INVALID_PRODUCER_EPOCH, log, P, 0, 4)


def test_older_epoch_is_fenced_before_sequence_is_checked(log: Partition) -> None:
    five_batches(log)
    log.produce(P, 1, 0)
    expect_error(ErrorCode.INVALID_PRODUCER_EPOCH, log, P, 0, 0)


# -- C. Unknown and expired producers ---------------------------------------------------------------


def test_unknown_producer_may_start_at_any_sequence(log: Partition) -> None:
    assert log.produce(Q, 0, 42) == 0
    expect_error(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, log, Q, 0, 44)
    assert log.produce(Q, 0, 43) == 1


def test_unknown_producer_may_start_at_any_epoch_and_sequence(log: Partition) -> None:
    assert log.produce(23, 1, 3, 2, attributes=TRANSACTIONAL_FLAG) == 0
    assert log.window(23) == ["3..4@0"]


def test_known_epoch_without_batches_accepts_only_sequence_zero(log: Partition) -> None:
    # A transaction marker (control batch, in a log Kafka wrote) leaves epoch 2 and no batches.
    marker = header(P, 2, -1, attributes=CONTROL_FLAG | TRANSACTIONAL_FLAG)
    log.append(marker)
    assert log.mgr.producers()[P].epoch == 2 and log.window(P) == []
    expect_error(ErrorCode.INVALID_PRODUCER_EPOCH, log, P, 0, 0)
    expect_error(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, log, P, 2, 17)
    assert log.produce(P, 2, 0) == 1


def test_producer_expires_after_idle_period_on_broker_clock(log: Partition, clock: Clock) -> None:
    log.produce(P, 5, 0)
    clock.now += DAY_MS - 1
    assert log.mgr.expire() == 0
    assert P in log.mgr.producers()
    clock.now += 1  # exactly producer.id.expiration.ms since the last append
    assert log.mgr.expire() == 1
    assert P not in log.mgr.producers()
    assert log.produce(P, 5, 7) == 1  # unknown again: any sequence accepted
    assert log.mgr.counters["expired"] == 1


def test_expiry_uses_broker_clock_not_record_timestamps(log: Partition, clock: Clock) -> None:
    # minikafka deviation (docs/semantics.md#expiry-on-the-broker-clock): records stamped 25 h ago do not make the producer expire.
    log.produce(P, 0, 0, ts=NOW - 25 * 3_600_000)
    assert log.mgr.expire() == 0
    assert log.produce(P, 0, 0) == 0  # still a duplicate, not written twice
    assert log.leo == 1
    assert log.mgr.producers()[P].last_timestamp == NOW - 25 * 3_600_000


def test_duplicate_does_not_refresh_expiry_clock(log: Partition, clock: Clock) -> None:
    log.produce(P, 0, 0)
    clock.now += DAY_MS - 10
    assert log.produce(P, 0, 0) == 0
    clock.now += 10
    assert log.mgr.expire() == 1


def test_expire_accepts_explicit_time_and_new_expiration_setting(log: Partition) -> None:
    log.produce(P, 0, 0)
    log.produce(Q, 0, 0)
    assert log.mgr.expire(NOW + 60_000) == 0
    log.mgr.set_expiration_ms(60_000)
    assert log.mgr.expire(NOW + 59_999) == 0
    assert log.mgr.expire(NOW + 60_000) == 2
    assert log.mgr.producers() == {}


def test_open_transaction_blocks_expiry(log: Partition, clock: Clock) -> None:
    log.log_start = 99
    assert log.produce(P, 5, 0, attributes=TRANSACTIONAL_FLAG) == 99
    assert log.mgr.producers()[P].current_txn_first_offset == 99
    clock.now += 2 * DAY_MS
    assert log.mgr.expire() == 0
    assert P in log.mgr.producers()


def test_non_transactional_batch_during_open_transaction_is_invalid_txn_state(log: Partition) -> None:
    log.produce(P, 0, 0, attributes=TRANSACTIONAL_FLAG)
    expect_error(ErrorCode.INVALID_TXN_STATE, log, P, 0, 1)
    assert log.produce(P, 0, 1, attributes=TRANSACTIONAL_FLAG) == 1


def test_transaction_marker_closes_open_transaction(log: Partition, clock: Clock) -> None:
    log.produce(P, 0, 0, attributes=TRANSACTIONAL_FLAG)
    marker = header(P, 0, -1, attributes=CONTROL_FLAG | TRANSACTIONAL_FLAG)
    log.append(marker)
    entry = log.mgr.producers()[P]
    assert entry.current_txn_first_offset == -1 and log.window(P) == ["0@0"]
    assert log.produce(P, 0, 1) == 2
    clock.now += DAY_MS
    assert log.mgr.expire() == 1


# -- D. Sequence wrap-around ------------------------------------------------------------------------


def test_sequence_wraps_from_int32_max_to_zero(log: Partition) -> None:
    log.produce(P, 15, INT32_MAX)
    assert log.produce(P, 15, 0) == 1
    assert log.mgr.producers()[P].last_seq == 0


@pytest.mark.parametrize("seq", [1, INT32_MAX - 1, -(2**31)])
def test_invalid_wrap_from_int32_max_is_out_of_order(log: Partition, seq: int) -> None:
    log.produce(P, 15, INT32_MAX)
    expect_error(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, log, P, 15, seq)


def test_batch_straddling_the_wrap_is_cached_with_wrapped_last_sequence(log: Partition) -> None:
    log.produce(P, 0, INT32_MAX - 11)  # last sequence 2147483636
    assert log.produce(P, 0, 2147483637, 21) == 1
    cached = log.mgr.producers()[P].batches[-1]
    assert cached == BatchMetadata(2147483637, 9, 1, 21, NOW)
    assert log.produce(P, 0, 2147483637, 21) == 1  # identical retry
    assert log.leo == 22
    expect_error(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, log, P, 0, 11)
    assert log.produce(P, 0, 10) == 22


def test_negative_base_sequence_from_known_producer_is_never_accepted(log: Partition) -> None:
    # The INVALID_RECORD for a negative base sequence comes from batch validation before check(); check() itself
    # must still not accept or deduplicate such a batch.
    log.produce(P, 0, 0)
    expect_error(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, log, P, 0, -1)
    expect_error(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, log, P, 0, -(2**31))


# -- manager behaviour outside the scenarios --------------------------------------------------------


def test_check_never_changes_state_even_when_accepting(log: Partition) -> None:
    log.produce(P, 0, 0)
    before = snapshot_of_state(log.mgr)
    assert log.mgr.check(header(P, 0, 1)) is None
    assert log.mgr.check(header(P, 3, 0)) is None
    assert log.mgr.check(header(Q, 4, 9)) is None
    assert snapshot_of_state(log.mgr) == before
    assert log.mgr.map_end_offset == 1


def test_batches_without_producer_id_only_advance_map_end_offset(log: Partition) -> None:
    h = header(-1, -1, -1, 4)
    assert log.mgr.check(h) is None
    h.base_offset = 10
    log.mgr.update(h)
    assert log.mgr.map_end_offset == 14
    assert log.mgr.producers() == {}


def test_window_keeps_the_five_newest_batches_oldest_first(log: Partition) -> None:
    for seq in range(12):
        log.produce(P, 0, seq)
    assert log.window(P) == ["7@7", "8@8", "9@9", "10@10", "11@11"]


def test_replay_update_accepts_gaps_and_takes_each_batch_epoch(tmp_path: Path) -> None:
    mgr = ProducerStateManager(tmp_path, now_ms=Clock())
    for offset, (epoch, seq) in enumerate([(0, 0), (0, 5), (3, 9), (1, 2), (1, 3)]):
        h = header(P, epoch, seq)
        h.base_offset = offset
        mgr.update(h)
    entry = mgr.producers()[P]
    assert entry.epoch == 1  # replay never refuses: the entry follows the log
    assert [(m.first_seq, m.first_offset) for m in entry.batches] == [(2, 3), (3, 4)]
    assert mgr.map_end_offset == 5


def test_update_records_broker_append_time_and_max_timestamp(log: Partition, clock: Clock) -> None:
    h = header(P, 0, 0, ts=NOW - 123)
    log.mgr.update(h, append_ms=NOW + 7)
    entry = log.mgr.producers()[P]
    assert (entry.last_timestamp, entry.last_append_ms) == (NOW - 123, NOW + 7)
    h2 = header(P, 0, 1)
    h2.base_offset = 1
    clock.now = NOW + 50
    log.mgr.update(h2)
    assert entry.last_append_ms == NOW + 50


def test_counters_count_duplicates_out_of_order_and_fenced(log: Partition) -> None:
    log.produce(P, 1, 0)
    log.produce(P, 1, 0)
    log.produce(P, 1, 0)
    for args in [(P, 1, 5), (P, 2, 3), (P, 0, 1)]:
        with pytest.raises(KafkaError):
            log.produce(*args)
    assert log.mgr.counters == {"duplicates": 2, "out_of_order": 2, "fenced": 1, "expired": 0}


def test_producers_view_is_read_only_and_live(log: Partition) -> None:
    view = log.mgr.producers()
    with pytest.raises(TypeError):
        view[P] = None  # type: ignore[index]
    log.produce(P, 0, 0)
    assert list(view) == [P]


# -- property: duplicates are exactly the retries of the window -------------------------------------

PID_INDEX = st.integers(0, 1)
NEXT = st.tuples(st.just("next"), PID_INDEX, st.integers(1, 3))
RETRY = st.tuples(st.just("retry"), PID_INDEX, st.integers(1, 7))
OPS = st.lists(
    st.one_of(
        NEXT,
        NEXT,
        NEXT,
        RETRY,
        RETRY,
        st.tuples(st.just("burst"), PID_INDEX, st.integers(4, 7)),  # fill the window, then retries bite
        st.tuples(st.just("resize"), PID_INDEX, st.integers(1, 6), st.sampled_from([-1, 1])),
        st.tuples(st.just("bump"), PID_INDEX, st.integers(1, 3)),
        st.tuples(
            st.just("any"),
            PID_INDEX,
            st.integers(0, 4),
            st.one_of(st.integers(0, 12), st.integers(INT32_MAX - 3, INT32_MAX)),
            st.integers(1, 3),
        ),
        st.tuples(st.just("restart")),
    ),
    max_size=80,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS)
def test_check_flags_exactly_the_retries_of_the_last_five_same_epoch_batches(ops) -> None:
    """A duplicate answer always names an earlier append of the same range and epoch, and a
    retry of any of the last five same-epoch appends is always answered with its offsets,
    including after a snapshot-and-reload restart."""
    pids = [P, Q]
    with tempfile.TemporaryDirectory() as d:
        mgr = ProducerStateManager(Path(d), now_ms=Clock())
        leo = 0
        # per producer: (epoch, first_seq, last_seq, first_offset, last_offset) of its appends
        history: dict[int, list[tuple[int, ...]]] = {pid: [] for pid in pids}
        window: dict[int, list[tuple[int, ...]]] = {pid: [] for pid in pids}  # appends in the current epoch
        epoch_of: dict[int, int] = {}

        def next_seq(pid: int) -> int:
            if not window[pid]:
                return 0
            last = window[pid][-1][2]
            return 0 if last == INT32_MAX else last + 1

        def send(pid: int, epoch: int, seq: int, count: int) -> None:
            nonlocal leo
            h = header(pid, epoch, seq, count)
            key = (epoch, h.base_sequence, h.last_sequence)
            try:
                dup = mgr.check(h)
            except KafkaError:
                assert key not in [b[:3] for b in window[pid][-5:]], "a retry of the window was refused"
                return
            if dup is not None:
                earlier = [b for b in history[pid] if b[:3] == key]
                assert earlier, f"non-duplicate {pid} {key} declared a duplicate"
                assert epoch == epoch_of[pid]
                assert (dup.first_offset, dup.last_offset) == earlier[-1][3:]
                return
            assert key not in [b[:3] for b in window[pid][-5:]], "a retry of the window was appended again"
            h.base_offset = leo
            mgr.update(h)
            leo = h.next_offset
            record = (*key, h.base_offset, h.last_offset)
            if epoch_of.get(pid) != epoch:
                window[pid] = []
            epoch_of[pid] = epoch
            window[pid].append(record)
            history[pid].append(record)

        for op in ops:
            kind = op[0]
            if kind == "restart":
                mgr.take_snapshot(fsync=False)
                mgr = ProducerStateManager(Path(d), now_ms=Clock())
                mgr.truncate_and_reload(0, leo)
                assert mgr.map_end_offset == leo
                continue
            pid = pids[op[1]]
            if kind == "next":
                send(pid, epoch_of.get(pid, 0), next_seq(pid), op[2])
            elif kind == "burst":
                for _ in range(op[2]):
                    send(pid, epoch_of.get(pid, 0), next_seq(pid), 1)
            elif kind == "retry":
                if len(history[pid]) >= op[2]:
                    epoch, first, _last, first_off, last_off = history[pid][-op[2]]
                    send(pid, epoch, first, last_off - first_off + 1)
            elif kind == "resize":  # same first sequence as a recent batch, one record more or fewer
                if len(history[pid]) >= op[2]:
                    epoch, first, _last, first_off, last_off = history[pid][-op[2]]
                    count = last_off - first_off + 1 + op[3]
                    if count >= 1:
                        send(pid, epoch, first, count)
            elif kind == "bump":
                send(pid, epoch_of.get(pid, 0) + op[2], 0, 1)
            else:
                send(pid, op[2], op[3], op[4])
