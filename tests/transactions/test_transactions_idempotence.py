"""Transactions meet the idempotence rules: retries inside a transaction, snapshots taken while a
transaction is open, DeleteRecords past an open transaction."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from minikafka.broker.embedded import BrokerThread
from minikafka.broker.transactions.metadata import TxnState
from tests.kafka_wire import RawClient, build_batch
from tests.scenario_helpers import create_topic, delete_records, produce
from tests.storage_helpers import TS, make_batch, open_log
from tests.transactions.test_transactions_read import READ_COMMITTED, aborted, fetch, list_offsets, offsets_of
from tests.transactions.test_transactions_read import TS as RECENT
from tests.transactions.test_transactions_read import txn_batch as recent_txn_batch
from tests.transactions.test_transactions_storage import txn_batch
from tests.txn_helpers import ABORT, add_partitions, end_txn, init_pid, markers, wait_state

S = TxnState
T = "t"


def begin(client: RawClient, txn_id: str) -> tuple[int, int]:
    init = init_pid(client, txn_id)
    assert add_partitions(client, txn_id, init.producer_id, init.producer_epoch, {T: [0]}) == {(T, 0): 0}
    return init.producer_id, init.producer_epoch


def test_a_retried_transactional_batch_gets_its_original_offsets(start_broker: Callable[..., BrokerThread]) -> None:
    broker = start_broker()
    with RawClient(broker.bootstrap) as client:
        create_topic(client, T)
        pid, epoch = begin(client, "retry")
        first, second = recent_txn_batch(pid, 0, b"a", 2, epoch), recent_txn_batch(pid, 2, b"b", 1, epoch)
        assert produce(client, T, first, transactional_id="retry").base_offset == 0
        assert produce(client, T, second, transactional_id="retry").base_offset == 2
        for batch, offset in ((first, 0), (second, 2)):  # the answers were lost: the client retries
            answer = produce(client, T, batch, transactional_id="retry")
            assert (answer.error_code, answer.base_offset) == (0, offset)
        assert produce(client, T, recent_txn_batch(pid, 5, b"c", 1, epoch), transactional_id="retry").error_code == 45
        assert end_txn(client, "retry", pid, epoch, commit=True) == 0
        wait_state(broker, "retry", S.COMPLETE_COMMIT)
        assert markers(client, T, 0) == [(3, pid, epoch, 1)]
        part = fetch(client, 0, READ_COMMITTED)
        assert offsets_of(part) == [0, 2, 3] and part.last_stable_offset == 4


def test_snapshot_at_a_roll_inside_a_transaction_keeps_it_open_after_a_crash(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = open_log(d, now_ms=lambda: TS)
    log.append_from_client(txn_batch(7, 0, 0, count=2))  # @0-1
    log.roll()  # snapshot at 2 with the open transaction
    assert 2 in log.producer_state.snapshot_offsets()
    log.append_from_client(make_batch())  # @2
    log.append_from_client(txn_batch(7, 0, 2))  # @3, same transaction
    log.abandon()
    log = open_log(d, now_ms=lambda: TS, clean=False)
    assert (log.first_unstable_offset, log.last_stable_offset) == (0, 0)
    entry = log.producer_state.producers()[7]
    assert entry.current_txn_first_offset == 0 and entry.last_seq == 2
    assert log.append_from_client(txn_batch(7, 0, 2)).base_offset == 3  # still a duplicate
    log.append_marker(7, 0, False, 0)  # @4
    assert log.last_stable_offset == 5
    assert log.aborted_transactions_for_read(2, 1 << 20, max_offset=5) == [(7, 0)]
    log.close()


def test_delete_records_past_an_open_transaction(start_broker: Callable[..., BrokerThread]) -> None:
    """The log start may pass the first offset of an open transaction (DeleteRecords is bounded by
    the high watermark only); the last stable offset is then the log start, and once the
    transaction aborts a read_committed fetch from the log start still lists it."""
    broker = start_broker()
    with RawClient(broker.bootstrap) as client:
        create_topic(client, T)
        pid, epoch = begin(client, "cut")
        assert produce(client, T, recent_txn_batch(pid, 0, b"x", 3, epoch), transactional_id="cut").base_offset == 0
        assert produce(client, T, build_batch(value=b"plain", timestamp=RECENT)).base_offset == 3
        assert produce(client, T, recent_txn_batch(pid, 3, b"y", 1, epoch), transactional_id="cut").base_offset == 4
        assert delete_records(client, T, 4).low_watermark == 4
        assert list_offsets(client, -1, READ_COMMITTED) == (0, 4, -1)
        part = fetch(client, 4, READ_COMMITTED)
        assert (part.error_code, offsets_of(part), part.last_stable_offset, aborted(part)) == (0, [], 4, [])
        assert end_txn(client, "cut", pid, epoch, commit=False) == 0
        wait_state(broker, "cut", S.COMPLETE_ABORT)
        assert markers(client, T, 0) == [(5, pid, epoch, ABORT)]
        part = fetch(client, 4, READ_COMMITTED)
        assert (offsets_of(part), part.last_stable_offset, aborted(part)) == ([4, 5], 6, [(pid, 0)])
