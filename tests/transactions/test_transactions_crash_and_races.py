"""Transactions under crashes between the coordinator's writes, and under racing connections.

The write order (the coordinator's Prepare* record, then every marker, then Complete*) must leave
every partition's transaction decided after a crash at any point, and a committed transaction
never half-visible to read_committed readers once the broker is back. Requests that race a
Prepare* write waiting for its fsync are answered CONCURRENT_TRANSACTIONS and write nothing.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable
from typing import Any

import pytest

from minikafka.broker.embedded import BrokerThread
from minikafka.broker.transactions.metadata import TxnState
from tests.kafka_wire import RawClient
from tests.scenario_helpers import clock_ahead, create_topic, produce
from tests.transactions.test_transactions_read import READ_COMMITTED, batches, fetch
from tests.txn_helpers import (
    COMMIT,
    OFFSETS,
    add_offsets,
    add_partitions,
    end_txn,
    init_pid,
    markers,
    offset_fetch,
    open_transactions,
    start_with_data,
    transactional_batch,
    txn_offset_commit,
    txn_records,
    wait_for,
    wait_state,
)

S = TxnState
T = "t"


def committed_values(client: RawClient, partition: int) -> list[bytes]:
    """Every non-control record value a read_committed fetch from 0 returns (no aborts here)."""
    part = fetch(client, 0, READ_COMMITTED, topic=T, partition=partition)
    assert part.error_code == 0 and part.aborted_transactions == []
    return [bytes(r.value) for b in batches(part) if not b.is_control_batch for r in b]


def test_crash_after_some_markers_of_a_commit_completes_every_partition_and_the_offsets(
        start_broker: Callable[..., BrokerThread]) -> None:
    broker = start_broker(fsync=True)
    with RawClient(broker.bootstrap) as client:
        create_topic(client, T, partitions=3)
        init = init_pid(client, "half")
        pid, epoch = init.producer_id, init.producer_epoch
        assert add_partitions(client, "half", pid, epoch, {T: [0, 1, 2]}) == {(T, p): 0 for p in range(3)}
        for p in range(3):
            batch = transactional_batch(pid, epoch, 0, 2, value=b"v%d" % p)
            assert produce(client, T, batch, partition=p, transactional_id="half").error_code == 0
        assert add_offsets(client, "half", pid, epoch, "g") == 0
        assert txn_offset_commit(client, "half", "g", pid, epoch, {(T, 0): 2}) == {(T, 0): 0}
        # t-2 refuses appends (a retriable marker error): the coordinator writes the other
        # markers and waits to try t-2 again; the broker crashes in that wait.
        logs = broker.broker.logs
        broker.call(lambda: logs.get_log(T, 2).close())
        assert end_txn(client, "half", pid, epoch, commit=True) == 0
        wait_for(broker, lambda: logs.get_log(T, 1).first_unstable_offset is None, "the marker on t-1")
        assert broker.call(lambda: broker.broker.transactions.txns["half"].state) is S.PREPARE_COMMIT
        assert markers(client, T, 0) == [(2, pid, epoch, COMMIT)]
        assert markers(client, OFFSETS)[-1][1:] == (pid, epoch, COMMIT)
    broker.restart(clean=False)
    wait_state(broker, "half", S.COMPLETE_COMMIT)
    with RawClient(broker.bootstrap) as client:
        # the markers written before the crash are written again (they complete nothing)
        assert markers(client, T, 0) == [(2, pid, epoch, COMMIT), (3, pid, epoch, COMMIT)]
        assert markers(client, T, 1) == [(2, pid, epoch, COMMIT), (3, pid, epoch, COMMIT)]
        assert markers(client, T, 2) == [(2, pid, epoch, COMMIT)]
        assert [m[1:] for m in markers(client, OFFSETS)] == [(pid, epoch, COMMIT)] * 2
        for p in range(3):
            assert committed_values(client, p) == [b"v%d" % p] * 2
        assert offset_fetch(client, "g", (T, 0), require_stable=True) == (2, 0)
        assert open_transactions(client, T, 3) == []
        assert [r.state for r in txn_records(client, "half")][-2:] == [S.PREPARE_COMMIT, S.COMPLETE_COMMIT]
        assert end_txn(client, "half", pid, epoch, commit=True) == 0  # the client's retry


# ---------------------------------------------------------------- races on the event loop


@pytest.fixture
def fsync_broker(start_broker: Callable[..., BrokerThread]) -> BrokerThread:
    """A broker with ``--fsync`` (each coordinator write waits for an fsync in a worker thread)
    and topic ``t`` with two partitions."""
    broker = start_broker(fsync=True)
    with RawClient(broker.bootstrap) as client:
        create_topic(client, T, partitions=2)
    return broker


async def _race(coordinator: Any, first: Any, *others: Any) -> tuple[Any, list[Any]]:
    """Start ``first`` (a coroutine that writes a record and waits for its fsync), then run
    ``others`` one after the other while that write is still pending; their answers, then
    ``first``'s."""
    task = asyncio.ensure_future(first)
    for _ in range(100):  # until the write is pending (the fsync runs in a worker thread)
        await asyncio.sleep(0)
        if any(m.pending is not None for m in coordinator.txns.values()):
            break
    answers = [await other for other in others]
    return await task, answers


def test_requests_racing_a_prepare_commit_fsync_are_concurrent_and_markers_are_written_once(
        fsync_broker: BrokerThread) -> None:
    broker = fsync_broker
    tc = broker.broker.transactions
    with RawClient(broker.bootstrap) as client:
        init = init_pid(client, "race")
        pid, epoch = init.producer_id, init.producer_epoch
        assert add_partitions(client, "race", pid, epoch, {T: [0, 1]}) == {(T, 0): 0, (T, 1): 0}
        assert produce(client, T, transactional_batch(pid, epoch, 0, 2), transactional_id="race").error_code == 0
        before = len(txn_records(client, "race"))
        ended, answers = broker.call(_race, tc, tc.end_transaction("race", pid, epoch, True),
                                     tc.init_producer_id("race", 60000),
                                     tc.end_transaction("race", pid, epoch, True),
                                     tc.end_transaction("race", pid, epoch, False),
                                     tc.add_partitions("race", pid, epoch, [(T, 0)]))
        assert ended == 0
        assert answers == [(51, -1, -1), 51, 51, 51]
        wait_state(broker, "race", S.COMPLETE_COMMIT)
        assert markers(client, T, 0) == [(2, pid, epoch, COMMIT)]
        assert markers(client, T, 1) == [(0, pid, epoch, COMMIT)]
        states = [r.state for r in txn_records(client, "race")][before:]
        assert states == [S.PREPARE_COMMIT, S.COMPLETE_COMMIT]


def test_the_old_producer_is_fenced_while_the_fencing_abort_is_written(
        fsync_broker: BrokerThread) -> None:
    """A new instance's InitProducerId raises the epoch before its PrepareAbort is on disk: the old
    instance's EndTxn and AddPartitionsToTxn in that window are PRODUCER_FENCED, not retried."""
    broker = fsync_broker
    tc = broker.broker.transactions
    with RawClient(broker.bootstrap) as client:
        pid, epoch = start_with_data(client, "zombie", [0])
        fenced, answers = broker.call(_race, tc, tc.init_producer_id("zombie", 60000),
                                      tc.end_transaction("zombie", pid, epoch, True),
                                      tc.add_partitions("zombie", pid, epoch, [(T, 1)]),
                                      tc.init_producer_id("zombie", 60000))
        assert fenced == (51, -1, -1)
        assert answers == [90, 90, (51, -1, -1)]
        wait_state(broker, "zombie", S.COMPLETE_ABORT)
        assert markers(client, T, 0) == [(2, pid, epoch + 1, 0)]
        assert markers(client, T, 1) == []
        index = [f.read_bytes() for f in broker.broker.logs.get_log(T, 0).dir.glob("*.txnindex")]
        assert index == [struct.pack(">hqqqq", 0, pid, 0, 2, 3)]  # (pid, first offset, marker, LSO)
        part = fetch(client, 0, READ_COMMITTED)
        assert [(a.producer_id, a.first_offset) for a in part.aborted_transactions] == [(pid, 0)]
        again = init_pid(client, "zombie")
        assert (again.error_code, again.producer_id, again.producer_epoch) == (0, pid, epoch + 2)


def test_end_txn_of_a_transaction_the_timeout_task_is_fencing_is_producer_fenced(
        fsync_broker: BrokerThread) -> None:
    broker = fsync_broker
    tc = broker.broker.transactions
    with RawClient(broker.bootstrap) as client:
        pid, epoch = start_with_data(client, "late", [0])

        async def time_out_then_commit() -> tuple[int, int]:
            with clock_ahead(broker.broker, 61_000):
                started = tc.abort_timed_out()
            return started, await tc.end_transaction("late", pid, epoch, True)

        assert broker.call(time_out_then_commit) == (1, 90)
        wait_state(broker, "late", S.COMPLETE_ABORT)
        assert markers(client, T, 0) == [(2, pid, epoch + 1, 0)]
        assert end_txn(client, "late", pid, epoch, commit=True, version=1) == 47
        # the old producer's data: refused by the partition's epoch where the marker landed, and
        # by the coordinator's epoch where the transaction never went
        for partition, seq in ((0, 2), (1, 0)):
            batch = transactional_batch(pid, epoch, seq)
            assert produce(client, T, batch, partition=partition, transactional_id="late").error_code == 47


def test_two_first_inits_of_a_new_id_racing_one_fsync(fsync_broker: BrokerThread) -> None:
    broker = fsync_broker
    tc = broker.broker.transactions
    first, answers = broker.call(_race, tc, tc.init_producer_id("fresh", 60000), tc.init_producer_id("fresh", 60000))
    assert first[0] == 0 and first[2] == 0
    assert answers == [(51, -1, -1)]
    with RawClient(broker.bootstrap) as client:
        assert [(r.producer_id, r.producer_epoch) for r in txn_records(client, "fresh")] == [first[1:]]
        again = init_pid(client, "fresh")
        assert (again.error_code, again.producer_id, again.producer_epoch) == (0, first[1], 1)
