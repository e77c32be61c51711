"""The transaction coordinator over the wire: exact error codes per API version, the records it
writes to ``__transaction_state`` and the markers it leaves in the data partitions."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kafka.protocol.metadata import FindCoordinatorRequest

from minikafka.broker.embedded import BrokerThread
from minikafka.broker.transactions.metadata import TxnState
from minikafka.broker.transactions.records import txn_key
from tests.kafka_wire import RawClient, build_batch
from tests.scenario_helpers import clock_ahead, create_topic, produce
from tests.txn_helpers import (
    ABORT,
    COMMIT,
    OFFSETS,
    add_offsets,
    add_partitions,
    commit_offsets,
    describe,
    end_txn,
    init_pid,
    list_txns,
    markers,
    offset_fetch,
    stored_batches,
    transactional_batch,
    txn_offset_commit,
    txn_records,
    wait_for,
    wait_state,
)

T = "t"
S = TxnState


@pytest.fixture
def client(broker: BrokerThread) -> Iterator[RawClient]:
    with RawClient(broker.bootstrap) as c:
        create_topic(c, T, partitions=2)
        create_topic(c, "u", partitions=1)
        yield c


@pytest.fixture
def txn_id() -> str:
    return f"x-{uuid.uuid4().hex[:8]}"


def coordinator(broker: BrokerThread) -> Any:
    assert broker.broker is not None and broker.broker.transactions is not None
    return broker.broker.transactions




def state_of(broker: BrokerThread, txn_id: str) -> TxnState:
    return coordinator(broker).txns[txn_id].state




def begin(client: RawClient, txn_id: str, partitions: dict[str, list[int]] | None = None,
          timeout_ms: int = 60000) -> tuple[int, int]:
    init = init_pid(client, txn_id, timeout_ms)
    assert init.error_code == 0, init
    pid, epoch = init.producer_id, init.producer_epoch
    errors = add_partitions(client, txn_id, pid, epoch, partitions or {T: [0, 1]})
    assert set(errors.values()) == {0}, errors
    return pid, epoch


# ---------------------------------------------------------------- FindCoordinator


def test_find_coordinator_answers_this_broker_for_transactional_ids(broker: BrokerThread, client: RawClient) -> None:
    for version in (1, 2, 3):
        response = client.request(FindCoordinatorRequest[version](key="x", key_type=1))
        assert response.error_code == 0 and response.port == broker.port
    response = client.request(FindCoordinatorRequest[4](key_type=1, coordinator_keys=["a", "b"]))
    assert [(c.key, c.error_code, c.port) for c in response.coordinators] == [("a", 0, broker.port),
                                                                               ("b", 0, broker.port)]


# ---------------------------------------------------------------- InitProducerId


def test_new_transactional_id_gets_epoch_0_and_an_empty_record(client: RawClient) -> None:
    init = init_pid(client, "txn-1", 60000)
    assert (init.error_code, init.producer_epoch) == (0, 0) and init.producer_id >= 0
    (record,) = txn_records(client, "txn-1")
    assert (record.producer_id, record.producer_epoch, record.state, record.partitions, record.start_ms,
            record.timeout_ms) == (init.producer_id, 0, S.EMPTY, None, -1, 60000)
    stored = stored_batches(client, "__transaction_state")
    assert stored[0].records[0][0] == bytes.fromhex("0000000574786e2d31") == txn_key("txn-1")
    assert stored[0].producer_id == -1 and not stored[0].is_control


def test_second_init_bumps_the_epoch_and_fences_the_first_instance(client: RawClient, txn_id: str) -> None:
    first = init_pid(client, txn_id)
    second = init_pid(client, txn_id)
    assert (second.error_code, second.producer_id, second.producer_epoch) == (0, first.producer_id, 1)
    assert add_partitions(client, txn_id, first.producer_id, 0, {T: [0]}) == {(T, 0): 90}
    assert add_partitions(client, txn_id, first.producer_id, 0, {T: [0]}, version=1) == {(T, 0): 47}
    assert [r.producer_epoch for r in txn_records(client, txn_id)] == [0, 1]


def test_init_on_an_open_transaction_aborts_it_with_a_higher_epoch(broker: BrokerThread, client: RawClient,
                                                                     txn_id: str) -> None:
    pid, epoch = begin(client, txn_id, {T: [0]})
    assert produce(client, T, transactional_batch(pid, epoch, 0, 3), transactional_id=txn_id).error_code == 0
    assert init_pid(client, txn_id).error_code == 51
    wait_state(broker, txn_id, S.COMPLETE_ABORT)
    assert markers(client, T, 0) == [(3, pid, 1, ABORT)]
    states = [(r.state, r.producer_epoch) for r in txn_records(client, txn_id)]
    assert states[-2:] == [(S.PREPARE_ABORT, 1), (S.COMPLETE_ABORT, 1)]
    retry = init_pid(client, txn_id)
    assert (retry.error_code, retry.producer_id, retry.producer_epoch) == (0, pid, 2)
    # the zombie: its data and its commit are refused
    assert produce(client, T, transactional_batch(pid, 0, 3), transactional_id=txn_id).error_code == 47
    assert end_txn(client, txn_id, pid, 0, commit=True, version=3) == 90
    assert end_txn(client, txn_id, pid, 0, commit=True, version=1) == 47


def test_init_while_a_commit_is_being_completed_is_concurrent(broker: BrokerThread, client: RawClient,
                                                               txn_id: str) -> None:
    pid, epoch = begin(client, txn_id)
    before = len(txn_records(client, txn_id))
    assert broker.call(coordinator(broker).end_transaction, txn_id, pid, epoch, True, False) == 0
    assert state_of(broker, txn_id) is S.PREPARE_COMMIT
    assert init_pid(client, txn_id).error_code == 51
    assert end_txn(client, txn_id, pid, epoch, commit=True) == 51
    assert end_txn(client, txn_id, pid, epoch, commit=False) == 48
    assert add_partitions(client, txn_id, pid, epoch, {"u": [0]}) == {("u", 0): 51}
    assert len(txn_records(client, txn_id)) == before + 1  # only PrepareCommit
    broker.call(coordinator(broker).resume_markers)
    wait_state(broker, txn_id, S.COMPLETE_COMMIT)
    assert init_pid(client, txn_id).producer_epoch == epoch + 1


@pytest.mark.parametrize("timeout", [0, -1, 900001])
def test_transaction_timeout_out_of_range(client: RawClient, timeout: int) -> None:
    init = init_pid(client, "x", timeout)
    assert (init.error_code, init.producer_id, init.producer_epoch) == (50, -1, -1)


def test_empty_id_and_half_set_producer_are_invalid(client: RawClient) -> None:
    assert init_pid(client, "", 60000).error_code == 42
    assert init_pid(client, "x", 60000, version=3, producer_id=1000, producer_epoch=-1).error_code == 42
    assert init_pid(client, "x", 60000, version=3, producer_id=-1, producer_epoch=0).error_code == 42


def test_kip360_bump_retry_stale_epoch_and_wrong_producer(client: RawClient, txn_id: str) -> None:
    pid = init_pid(client, txn_id).producer_id
    for _ in range(3):
        init_pid(client, txn_id)  # epoch 3
    bumped = init_pid(client, txn_id, producer_id=pid, producer_epoch=3)
    assert (bumped.error_code, bumped.producer_id, bumped.producer_epoch) == (0, pid, 4)
    retried = init_pid(client, txn_id, producer_id=pid, producer_epoch=3)  # the answer above was "lost"
    assert (retried.error_code, retried.producer_epoch) == (0, 4)
    assert init_pid(client, txn_id, producer_id=pid, producer_epoch=2).error_code == 90
    assert init_pid(client, txn_id, version=3, producer_id=pid, producer_epoch=2).error_code == 47
    assert init_pid(client, txn_id, producer_id=pid + 12345, producer_epoch=4).error_code == 90
    current = init_pid(client, txn_id, producer_id=pid, producer_epoch=4)
    assert (current.error_code, current.producer_epoch) == (0, 5)


def test_epoch_exhaustion_rotates_to_a_new_producer_id(broker: BrokerThread, client: RawClient,
                                                       txn_id: str) -> None:
    pid = init_pid(client, txn_id).producer_id
    meta = coordinator(broker).txns[txn_id]
    broker.call(lambda: setattr(meta, "producer_epoch", 32766))  # as if 32766 inits had happened
    rotated = init_pid(client, txn_id, producer_id=pid, producer_epoch=32766)
    assert rotated.error_code == 0 and rotated.producer_id != pid and rotated.producer_epoch == 0
    record = txn_records(client, txn_id)[-1]
    assert (record.producer_id, record.producer_epoch, record.state) == (rotated.producer_id, 0, S.EMPTY)
    # a retry of the same request (its answer lost) gets the same values, no second bump
    again = init_pid(client, txn_id, producer_id=pid, producer_epoch=32766)
    assert (again.error_code, again.producer_id, again.producer_epoch) == (0, rotated.producer_id, 0)
    # without KIP-360 fields an exhausted epoch also rotates
    broker.call(lambda: setattr(meta, "producer_epoch", 32766))
    plain = init_pid(client, txn_id)
    assert plain.producer_id not in (pid, rotated.producer_id) and plain.producer_epoch == 0


# ---------------------------------------------------------------- AddPartitionsToTxn / AddOffsetsToTxn


def test_add_partitions_writes_ongoing_once(broker: BrokerThread, client: RawClient, txn_id: str) -> None:
    init = init_pid(client, txn_id)
    pid = init.producer_id
    before = broker.call(lambda: broker.broker.clock())
    assert add_partitions(client, txn_id, pid, 0, {T: [0, 1]}) == {(T, 0): 0, (T, 1): 0}
    record = txn_records(client, txn_id)[-1]
    assert record.state == S.ONGOING and record.partitions == {(T, 0), (T, 1)} and record.start_ms >= before
    count = len(txn_records(client, txn_id))
    assert add_partitions(client, txn_id, pid, 0, {T: [1]}) == {(T, 1): 0}
    assert len(txn_records(client, txn_id)) == count  # nothing new to write
    assert add_partitions(client, txn_id, pid, 0, {"u": [0]}) == {("u", 0): 0}
    latest = txn_records(client, txn_id)[-1]
    assert latest.partitions == {(T, 0), (T, 1), ("u", 0)} and latest.start_ms == record.start_ms


def test_add_partitions_partition_errors_and_coordinator_errors(client: RawClient, txn_id: str) -> None:
    pid = init_pid(client, txn_id).producer_id
    assert add_partitions(client, txn_id, pid, 0, {T: [0, 7]}) == {(T, 7): 3, (T, 0): 55}
    assert add_partitions(client, txn_id, pid, 0, {OFFSETS: [0], T: [0]}) == {(OFFSETS, 0): 29, (T, 0): 55}
    assert txn_records(client, txn_id)[-1].state == S.EMPTY  # nothing was added
    assert add_partitions(client, "nope", 5, 0, {T: [0, 1]}) == {(T, 0): 49, (T, 1): 49}
    assert add_partitions(client, txn_id, pid + 1, 0, {T: [0]}) == {(T, 0): 49}
    assert add_partitions(client, txn_id, pid, 1, {T: [0]}, version=2) == {(T, 0): 90}
    assert add_partitions(client, txn_id, pid, 1, {T: [0]}, version=0) == {(T, 0): 47}
    assert add_partitions(client, "", pid, 0, {T: [0]}) == {(T, 0): 42}


def test_add_partitions_v4_needs_cluster_action(client: RawClient) -> None:
    from kafka.protocol.producer import AddPartitionsToTxnRequest

    Request = AddPartitionsToTxnRequest[4]
    response = client.request(Request(transactions=[]))
    assert response.error_code == 31


def test_add_offsets_adds_the_groups_offsets_partition(client: RawClient, txn_id: str) -> None:
    pid = init_pid(client, txn_id).producer_id
    assert add_offsets(client, txn_id, pid, 0, "g") == 0
    assert txn_records(client, txn_id)[-1].partitions == {(OFFSETS, 0)}
    assert add_offsets(client, txn_id, pid, 1, "g") == 90
    assert add_offsets(client, txn_id, pid, 1, "g", version=1) == 47
    assert add_offsets(client, "nope", pid, 0, "g") == 49


# ---------------------------------------------------------------- Produce


def test_transactional_produce_needs_the_partition_in_the_transaction(client: RawClient, txn_id: str) -> None:
    pid, epoch = begin(client, txn_id, {T: [0]})
    batch = transactional_batch(pid, epoch, 0)
    assert produce(client, T, batch, partition=1, transactional_id=txn_id).error_code == 48
    assert produce(client, T, batch, partition=1, transactional_id=txn_id, version=11).error_code == 120
    assert produce(client, T, batch, partition=0, transactional_id="other").error_code == 49
    assert produce(client, T, batch, partition=0, transactional_id=None).error_code == 53
    assert produce(client, T, transactional_batch(pid, epoch + 1, 0), transactional_id=txn_id).error_code == 47
    assert produce(client, T, batch, partition=0, transactional_id=txn_id).error_code == 0
    # a non-transactional batch of the same producer while its transaction is open
    plain = build_batch(producer_id=pid, epoch=epoch, base_sequence=1)
    assert produce(client, T, plain, partition=0).error_code == 48


def test_idempotent_producers_are_unchanged(client: RawClient) -> None:
    from kafka.protocol.producer import InitProducerIdRequest

    init = client.request(InitProducerIdRequest[4](transactional_id=None, transaction_timeout_ms=-1,
                                                   producer_id=-1, producer_epoch=-1))
    assert init.error_code == 0
    batch = build_batch(producer_id=init.producer_id, epoch=0, base_sequence=0)
    assert produce(client, T, batch).error_code == 0
    assert produce(client, T, batch).base_offset == 0  # duplicate


# ---------------------------------------------------------------- EndTxn


def test_commit_writes_markers_to_every_partition_then_complete(broker: BrokerThread, client: RawClient,
                                                                txn_id: str) -> None:
    pid, epoch = begin(client, txn_id, {T: [0, 1], "u": [0]})
    assert produce(client, T, transactional_batch(pid, epoch, 0, 3), transactional_id=txn_id).error_code == 0
    assert produce(client, "u", transactional_batch(pid, epoch, 0, 2), transactional_id=txn_id).error_code == 0
    assert end_txn(client, txn_id, pid, epoch, commit=True) == 0
    wait_state(broker, txn_id, S.COMPLETE_COMMIT)
    assert markers(client, T, 0) == [(3, pid, epoch, COMMIT)]
    assert markers(client, T, 1) == [(0, pid, epoch, COMMIT)]  # a partition without data still gets one
    assert markers(client, "u", 0) == [(2, pid, epoch, COMMIT)]
    states = [r.state for r in txn_records(client, txn_id)]
    assert states == [S.EMPTY, S.ONGOING, S.PREPARE_COMMIT, S.COMPLETE_COMMIT]
    assert txn_records(client, txn_id)[-1].partitions == frozenset()
    # retries and wrong results
    count = len(states)
    assert end_txn(client, txn_id, pid, epoch, commit=True) == 0
    assert end_txn(client, txn_id, pid, epoch, commit=False) == 48
    assert len(txn_records(client, txn_id)) == count
    # the next transaction of the same producer
    assert add_partitions(client, txn_id, pid, epoch, {T: [0]}) == {(T, 0): 0}
    assert produce(client, T, transactional_batch(pid, epoch, 3, 1), transactional_id=txn_id).error_code == 0
    assert end_txn(client, txn_id, pid, epoch, commit=False) == 0
    wait_state(broker, txn_id, S.COMPLETE_ABORT)
    assert markers(client, T, 0) == [(3, pid, epoch, COMMIT), (5, pid, epoch, ABORT)]
    assert end_txn(client, txn_id, pid, epoch, commit=False) == 0
    assert end_txn(client, txn_id, pid, epoch, commit=True) == 48


def test_end_txn_errors(client: RawClient, txn_id: str) -> None:
    pid = init_pid(client, txn_id).producer_id
    assert end_txn(client, txn_id, pid, 0, commit=True) == 48  # nothing begun
    assert end_txn(client, txn_id, pid, 0, commit=False) == 48
    assert end_txn(client, "nope", pid, 0, commit=True) == 49
    assert end_txn(client, txn_id, pid + 1, 0, commit=True) == 49
    assert end_txn(client, txn_id, pid, 3, commit=True, version=2) == 90
    assert end_txn(client, txn_id, pid, 3, commit=True, version=0) == 47
    assert end_txn(client, "", pid, 0, commit=True) == 42


def test_timed_out_transaction_is_fenced_and_aborted(start_broker: Callable[..., BrokerThread],
                                                     txn_id: str) -> None:
    broker = start_broker({"transaction.abort.timed.out.transaction.cleanup.interval.ms": 50})
    with RawClient(broker.bootstrap) as client:
        create_topic(client, T, partitions=2)
        pid, epoch = begin(client, txn_id, {T: [0, 1]}, timeout_ms=60000)
        assert produce(client, T, transactional_batch(pid, epoch, 0, 2), transactional_id=txn_id).error_code == 0
        assert broker.call(coordinator(broker).abort_timed_out) == 0  # not yet
        with clock_ahead(broker.broker, 61_000):
            wait_state(broker, txn_id, S.COMPLETE_ABORT)
        assert markers(client, T, 0) == [(2, pid, epoch + 1, ABORT)]
        assert markers(client, T, 1) == [(0, pid, epoch + 1, ABORT)]
        assert end_txn(client, txn_id, pid, epoch, commit=True, version=3) == 90
        assert end_txn(client, txn_id, pid, epoch, commit=True, version=1) == 47
        assert produce(client, T, transactional_batch(pid, epoch, 2), transactional_id=txn_id).error_code == 47
        again = init_pid(client, txn_id)
        assert (again.error_code, again.producer_id, again.producer_epoch) == (0, pid, epoch + 2)


def test_idle_transactional_ids_expire(start_broker: Callable[..., BrokerThread], txn_id: str) -> None:
    broker = start_broker({"transactional.id.expiration.ms": 1000,
                           "transaction.remove.expired.transaction.cleanup.interval.ms": 50})
    with RawClient(broker.bootstrap) as client:
        create_topic(client, T, partitions=2)
        pid, epoch = begin(client, txn_id)  # Ongoing: never expires
        other = init_pid(client, "idle").producer_id
        with clock_ahead(broker.broker, 5_000):
            wait_for(broker, lambda: "idle" not in coordinator(broker).txns, "the idle id to expire")
        assert txn_id in broker.call(lambda: dict(coordinator(broker).txns))
        assert txn_records(client, "idle")[-1] is None  # tombstone
        fresh = init_pid(client, "idle")
        assert fresh.producer_id != other and fresh.producer_epoch == 0


# ---------------------------------------------------------------- transactional offsets


def test_transactional_offsets_are_pending_until_the_commit_marker(broker: BrokerThread, client: RawClient,
                                                                    txn_id: str) -> None:
    pid, epoch = begin(client, txn_id, {T: [0]})
    tp = (T, 0)
    assert txn_offset_commit(client, txn_id, "g", pid, epoch, {tp: 42}) == {tp: 48}  # no AddOffsetsToTxn
    assert txn_offset_commit(client, txn_id, "g", pid, epoch, {tp: 42}, version=4) == {tp: 120}
    assert add_offsets(client, txn_id, pid, epoch, "g") == 0
    assert txn_offset_commit(client, txn_id, "g", pid, epoch, {tp: 42}) == {tp: 0}
    assert offset_fetch(client, "g", tp) == (-1, 0)
    assert offset_fetch(client, "g", tp, require_stable=True) == (-1, 88)
    offsets_log = stored_batches(client, OFFSETS)
    txn_batch = offsets_log[-1]
    assert (txn_batch.producer_id, txn_batch.producer_epoch, txn_batch.attributes & 0x30) == (pid, epoch, 0x10)
    assert end_txn(client, txn_id, pid, epoch, commit=True) == 0
    wait_state(broker, txn_id, S.COMPLETE_COMMIT)
    assert offset_fetch(client, "g", tp, require_stable=True) == (42, 0)
    assert markers(client, OFFSETS)[-1] == (txn_batch.offset + 1, pid, epoch, COMMIT)


def test_aborted_transactional_offsets_are_dropped(broker: BrokerThread, client: RawClient, txn_id: str) -> None:
    tp = (T, 0)
    commit_offsets(client, "g2", {tp: 7})
    pid, epoch = begin(client, txn_id, {T: [0]})
    assert add_offsets(client, txn_id, pid, epoch, "g2") == 0
    assert txn_offset_commit(client, txn_id, "g2", pid, epoch, {tp: 42}) == {tp: 0}
    assert offset_fetch(client, "g2", tp) == (7, 0)
    assert end_txn(client, txn_id, pid, epoch, commit=False) == 0
    wait_state(broker, txn_id, S.COMPLETE_ABORT)
    assert offset_fetch(client, "g2", tp, require_stable=True) == (7, 0)


def test_a_newer_normal_commit_wins_over_an_older_transactional_one(broker: BrokerThread, client: RawClient,
                                                                    txn_id: str) -> None:
    tp = (T, 0)
    pid, epoch = begin(client, txn_id, {T: [0]})
    assert add_offsets(client, txn_id, pid, epoch, "g3") == 0
    assert txn_offset_commit(client, txn_id, "g3", pid, epoch, {tp: 42}) == {tp: 0}
    commit_offsets(client, "g3", {tp: 50})
    assert end_txn(client, txn_id, pid, epoch, commit=True) == 0
    wait_state(broker, txn_id, S.COMPLETE_COMMIT)
    assert offset_fetch(client, "g3", tp) == (50, 0)


# ---------------------------------------------------------------- admin


def test_describe_and_list_transactions(client: RawClient, txn_id: str) -> None:
    pid, epoch = begin(client, txn_id, {T: [1, 0]})
    init_pid(client, "idle-one")
    (state,) = describe(client, txn_id)
    assert (state.error_code, state.transaction_state, state.producer_id, state.producer_epoch,
            state.transaction_timeout_ms) == (0, "Ongoing", pid, epoch, 60000)
    assert state.transaction_start_time_ms > 0
    assert [(t.topic, t.partitions) for t in state.topics] == [(T, [0, 1])]
    (missing, empty) = describe(client, "nope", "")
    assert (missing.error_code, empty.error_code) == (105, 42)
    listed = list_txns(client)
    assert {(s.transactional_id, s.transaction_state) for s in listed.transaction_states} >= {
        (txn_id, "Ongoing"), ("idle-one", "Empty")}
    only = list_txns(client, states=["Ongoing", "Bogus"])
    assert [s.transactional_id for s in only.transaction_states] == [txn_id]
    assert only.unknown_state_filters == ["Bogus"]
    assert list_txns(client, states=["Bogus"]).transaction_states == []
    assert [s.transactional_id for s in list_txns(client, pids=[pid]).transaction_states] == [txn_id]
    assert list_txns(client, states=["Ongoing"], duration=3_600_000).transaction_states == []
    assert [s.transactional_id for s in list_txns(client, states=["Ongoing"], version=0).transaction_states] == [
        txn_id]


def test_clients_cannot_produce_to_the_transaction_log(client: RawClient) -> None:
    assert init_pid(client, "internal").error_code == 0
    assert produce(client, "__transaction_state", build_batch(key=b"k")).error_code == 17


def test_txn_offset_commit_checks_the_member_when_one_is_named(client: RawClient, txn_id: str) -> None:
    pid, epoch = begin(client, txn_id, {T: [0]})
    assert add_offsets(client, txn_id, pid, epoch, "gm") == 0
    tp = (T, 0)
    assert txn_offset_commit(client, txn_id, "gm", pid, epoch, {tp: 1}, generation=4, member="ghost") == {tp: 25}
    assert txn_offset_commit(client, txn_id, "gm", pid, epoch, {tp: 1}) == {tp: 0}  # no group management
    assert txn_offset_commit(client, txn_id, "", pid, epoch, {tp: 1}) == {tp: 24}
    assert txn_offset_commit(client, txn_id, "gm", pid, epoch + 1, {tp: 1}) == {tp: 47}
    assert txn_offset_commit(client, txn_id, "gm", pid, epoch, {(T, 9): 1}) == {(T, 9): 3}


def test_offset_fetch_v8_reports_unstable_offsets(client: RawClient, txn_id: str) -> None:
    from kafka.protocol.consumer import OffsetFetchRequest

    pid, epoch = begin(client, txn_id, {T: [0]})
    assert add_offsets(client, txn_id, pid, epoch, "g8") == 0
    assert txn_offset_commit(client, txn_id, "g8", pid, epoch, {(T, 0): 5}) == {(T, 0): 0}
    Request = OffsetFetchRequest[8]
    Group = Request.OffsetFetchRequestGroup
    Topic = Group.OffsetFetchRequestTopics
    for stable, expected in ((True, (-1, 88)), (False, (-1, 0))):
        response = client.request(Request(groups=[Group(group_id="g8", topics=[Topic(name=T, partition_indexes=[0])])],
                                           require_stable=stable))
        part = response.groups[0].topics[0].partitions[0]
        assert (part.committed_offset, part.error_code) == expected


def test_state_log_compaction_keeps_every_id(start_broker: Callable[..., BrokerThread]) -> None:
    broker = start_broker()
    with RawClient(broker.bootstrap) as client:
        create_topic(client, T, partitions=2)
        for i in range(5):
            for _ in range(4):
                init_pid(client, f"c-{i}")
        pid, epoch = begin(client, "c-open")
        store = coordinator(broker).stores[0]
        broker.call(store.compact)
        batches = stored_batches(client, "__transaction_state")
        assert sum(len(b.records) for b in batches) == 6  # one live record per id
    broker.restart(clean=False)
    with RawClient(broker.bootstrap) as client:
        assert [init_pid(client, f"c-{i}").producer_epoch for i in range(5)] == [4] * 5
        (state,) = describe(client, "c-open")
        assert (state.transaction_state, state.producer_id, state.producer_epoch) == ("Ongoing", pid, epoch)


def test_offsets_log_compaction_keeps_pending_transactional_offsets(start_broker: Callable[..., BrokerThread]
                                                                    ) -> None:
    broker = start_broker()
    with RawClient(broker.bootstrap) as client:
        create_topic(client, T, partitions=2)
        commit_offsets(client, "gc", {(T, 1): 3})
        commit_offsets(client, "gc", {(T, 1): 4})
        pid, epoch = begin(client, "keeps", {T: [0]})
        assert add_offsets(client, "keeps", pid, epoch, "gc") == 0
        assert txn_offset_commit(client, "keeps", "gc", pid, epoch, {(T, 0): 9}) == {(T, 0): 0}
        before = len(stored_batches(client, OFFSETS))
        broker.call(broker.broker.groups.table.store_of("gc").compact)  # refuses: the pending batch must stay
        assert len(stored_batches(client, OFFSETS)) == before
    broker.restart(clean=False)
    with RawClient(broker.bootstrap) as client:
        assert offset_fetch(client, "gc", (T, 0), require_stable=True) == (-1, 88)
        assert end_txn(client, "keeps", pid, epoch, commit=True) == 0
        wait_state(broker, "keeps", S.COMPLETE_COMMIT)
        assert offset_fetch(client, "gc", (T, 0), require_stable=True) == (9, 0)
        broker.call(broker.broker.groups.table.store_of("gc").compact)  # nothing pending any more
        assert offset_fetch(client, "gc", (T, 1)) == (4, 0)
    broker.restart(clean=False)
    with RawClient(broker.bootstrap) as client:
        assert offset_fetch(client, "gc", (T, 0)) == (9, 0)
        assert offset_fetch(client, "gc", (T, 1)) == (4, 0)


def test_a_transaction_with_fsync(start_broker: Callable[..., BrokerThread], txn_id: str) -> None:
    broker = start_broker(fsync=True)
    with RawClient(broker.bootstrap) as client:
        create_topic(client, T, partitions=2)
        pid, epoch = begin(client, txn_id, {T: [0]})
        assert produce(client, T, transactional_batch(pid, epoch, 0, 2), transactional_id=txn_id).error_code == 0
        assert end_txn(client, txn_id, pid, epoch, commit=True) == 0
        wait_state(broker, txn_id, S.COMPLETE_COMMIT)
        assert markers(client, T, 0) == [(2, pid, epoch, COMMIT)]


def test_two_transactions_interleaved_on_one_partition(broker: BrokerThread, client: RawClient) -> None:
    pid_a, epoch_a = begin(client, "inter-a", {T: [0]})
    pid_b, epoch_b = begin(client, "inter-b", {T: [0]})
    assert produce(client, T, transactional_batch(pid_a, epoch_a, 0), transactional_id="inter-a").base_offset == 0
    assert produce(client, T, transactional_batch(pid_b, epoch_b, 0), transactional_id="inter-b").base_offset == 1
    assert produce(client, T, build_batch(value=b"plain")).base_offset == 2
    assert end_txn(client, "inter-a", pid_a, epoch_a, commit=True) == 0
    wait_state(broker, "inter-a", S.COMPLETE_COMMIT)
    assert produce(client, T, transactional_batch(pid_b, epoch_b, 1), transactional_id="inter-b").base_offset == 4
    assert end_txn(client, "inter-b", pid_b, epoch_b, commit=False) == 0
    wait_state(broker, "inter-b", S.COMPLETE_ABORT)
    assert markers(client, T, 0) == [(3, pid_a, epoch_a, COMMIT), (5, pid_b, epoch_b, ABORT)]
    log = broker.call(lambda: broker.broker.logs.get_log(T, 0))
    assert broker.call(lambda: log.last_stable_offset) == 6
