"""Transactions across crashes: the coordinator's state is reloaded from ``__transaction_state``.

A transaction found in PrepareCommit/PrepareAbort gets its markers written again and completes;
one found Ongoing is aborted (with a higher epoch) when its timeout passes; pending transactional
offsets are replayed from the offsets log. After each, no partition keeps an open transaction.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from minikafka.broker.embedded import BrokerThread
from minikafka.broker.transactions.metadata import TxnState
from tests.kafka_wire import RawClient
from tests.scenario_helpers import clock_ahead, create_topic
from tests.storage.test_crash_recovery import BrokerProcess, _free_port
from tests.txn_helpers import (
    ABORT,
    COMMIT,
    add_offsets,
    describe,
    end_txn,
    init_pid,
    markers,
    offset_fetch,
    open_transactions,
    start_with_data,
    txn_offset_commit,
    txn_records,
    wait_state,
)

S = TxnState
FAST_ABORT = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": 50}


def test_prepare_commit_and_prepare_abort_complete_after_a_crash(start_broker: Callable[..., BrokerThread]) -> None:
    broker = start_broker(FAST_ABORT)
    with RawClient(broker.bootstrap) as client:
        create_topic(client, "t", partitions=3)
        pid_c, epoch_c = start_with_data(client, "to-commit", [0, 1])
        assert add_offsets(client, "to-commit", pid_c, epoch_c, "g") == 0
        assert txn_offset_commit(client, "to-commit", "g", pid_c, epoch_c, {("t", 0): 2}) == {("t", 0): 0}
        pid_a, epoch_a = start_with_data(client, "to-abort", [1, 2])
        coordinator = broker.broker.transactions
        assert broker.call(coordinator.end_transaction, "to-commit", pid_c, epoch_c, True, False) == 0
        assert broker.call(coordinator.end_transaction, "to-abort", pid_a, epoch_a, False, False) == 0
        assert markers(client, "t", 1) == []  # the crash comes before any marker
    broker.restart(clean=False)
    wait_state(broker, "to-commit", S.COMPLETE_COMMIT)
    wait_state(broker, "to-abort", S.COMPLETE_ABORT)
    with RawClient(broker.bootstrap) as client:
        assert markers(client, "t", 0) == [(2, pid_c, epoch_c, COMMIT)]
        assert markers(client, "t", 1) == [(4, pid_c, epoch_c, COMMIT), (5, pid_a, epoch_a, ABORT)]
        assert markers(client, "t", 2) == [(2, pid_a, epoch_a, ABORT)]
        assert offset_fetch(client, "g", ("t", 0), require_stable=True) == (2, 0)
        assert open_transactions(client, "t", 3) == []
        assert [r.state for r in txn_records(client, "to-commit")][-2:] == [S.PREPARE_COMMIT, S.COMPLETE_COMMIT]
        assert end_txn(client, "to-commit", pid_c, epoch_c, commit=True) == 0  # the client's retry
        assert end_txn(client, "to-abort", pid_a, epoch_a, commit=False) == 0


def test_ongoing_transaction_is_aborted_after_a_crash_when_it_times_out(
        start_broker: Callable[..., BrokerThread]) -> None:
    broker = start_broker(FAST_ABORT)
    with RawClient(broker.bootstrap) as client:
        create_topic(client, "t", partitions=2)
        pid, epoch = start_with_data(client, "open", [0, 1], timeout_ms=60000)
        assert add_offsets(client, "open", pid, epoch, "g") == 0
        assert txn_offset_commit(client, "open", "g", pid, epoch, {("t", 1): 2}) == {("t", 1): 0}
    broker.restart(clean=False)
    with RawClient(broker.bootstrap) as client:
        assert describe(client, "open")[0].transaction_state == "Ongoing"
        assert sorted(open_transactions(client, "t", 2)) == [(0, pid, 0), (1, pid, 0)]
        assert offset_fetch(client, "g", ("t", 1), require_stable=True) == (-1, 88)  # replayed as pending
        with clock_ahead(broker.broker, 61_000):
            wait_state(broker, "open", S.COMPLETE_ABORT)
        assert markers(client, "t", 0) == [(2, pid, epoch + 1, ABORT)]
        assert open_transactions(client, "t", 2) == []
        assert offset_fetch(client, "g", ("t", 1), require_stable=True) == (-1, 0)
        assert end_txn(client, "open", pid, epoch, commit=True) == 90


def test_completed_transactions_and_epochs_survive_a_crash(start_broker: Callable[..., BrokerThread]) -> None:
    broker = start_broker()
    with RawClient(broker.bootstrap) as client:
        create_topic(client, "t", partitions=1)
        pid, epoch = start_with_data(client, "done", [0])
        assert end_txn(client, "done", pid, epoch, commit=True) == 0
        wait_state(broker, "done", S.COMPLETE_COMMIT)
    broker.restart(clean=False)
    with RawClient(broker.bootstrap) as client:
        assert end_txn(client, "done", pid, epoch, commit=True) == 0
        again = init_pid(client, "done")
        assert (again.producer_id, again.producer_epoch) == (pid, epoch + 1)
        assert markers(client, "t", 0) == [(2, pid, epoch, COMMIT)]


def test_sigkill_of_the_serving_process_with_open_and_committed_transactions(tmp_path: Path) -> None:
    proc = BrokerProcess(tmp_path / "data", _free_port())
    proc.start()
    bootstrap = f"127.0.0.1:{proc.port}"
    try:
        with RawClient(bootstrap) as client:
            create_topic(client, "t", partitions=2)
            pid_open, epoch_open = start_with_data(client, "killed-open", [0], timeout_ms=1500)
            pid_done, epoch_done = start_with_data(client, "killed-done", [1])
            assert end_txn(client, "killed-done", pid_done, epoch_done, commit=True) == 0
            for _ in range(500):
                if describe(client, "killed-done")[0].transaction_state == "CompleteCommit":
                    break
                time.sleep(0.01)
        proc.kill()  # SIGKILL: no flush, no snapshot, no clean-shutdown marker
        proc.proc = subprocess.Popen(
            [sys.executable, "-m", "minikafka", "serve", "--port", str(proc.port), "--data-dir",
             str(proc.data_dir), "--config", "transaction.abort.timed.out.transaction.cleanup.interval.ms=100"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        with connect_when_up(bootstrap, deadline) as client:
            assert describe(client, "killed-done")[0].transaction_state == "CompleteCommit"
            state = ""
            while time.monotonic() < deadline:  # the 1.5 s timeout passes on the broker's own clock
                state = describe(client, "killed-open")[0].transaction_state
                if state == "CompleteAbort":
                    break
                time.sleep(0.05)
            assert state == "CompleteAbort"
            assert markers(client, "t", 0) == [(2, pid_open, epoch_open + 1, ABORT)]
            assert markers(client, "t", 1) == [(2, pid_done, epoch_done, COMMIT)]
            assert open_transactions(client, "t", 2) == []
    finally:
        proc.stop()


def connect_when_up(bootstrap: str, deadline: float) -> RawClient:
    while True:
        try:
            return RawClient(bootstrap)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_replayed_pending_offsets_lose_to_a_later_normal_commit(start_broker: Callable[..., BrokerThread]) -> None:
    from tests.txn_helpers import commit_offsets

    broker = start_broker()
    with RawClient(broker.bootstrap) as client:
        create_topic(client, "t", partitions=1)
        pid, epoch = start_with_data(client, "older", [0])
        assert add_offsets(client, "older", pid, epoch, "gr") == 0
        assert txn_offset_commit(client, "older", "gr", pid, epoch, {("t", 0): 1, ("t", 1): 1}) == {
            ("t", 0): 0, ("t", 1): 3}
        commit_offsets(client, "gr", {("t", 0): 7})  # appended after the transactional offsets
    broker.restart(clean=False)
    with RawClient(broker.bootstrap) as client:
        assert offset_fetch(client, "gr", ("t", 0), require_stable=True) == (-1, 88)
        assert offset_fetch(client, "gr", ("t", 0)) == (7, 0)
        assert end_txn(client, "older", pid, epoch, commit=True) == 0
        wait_state(broker, "older", S.COMPLETE_COMMIT)
        assert offset_fetch(client, "gr", ("t", 0), require_stable=True) == (7, 0)
