"""A coordinator serves the groups and transactional ids of the internal partitions it has loaded.

Each coordinator loads and unloads one partition of its internal topic at a time (Kafka's
onElection/onResignation). The tests unload partition 0 of ``__consumer_offsets`` or
``__transaction_state`` of a running broker (every key hashes there: one partition each), check
over the wire that its keys get NOT_COORDINATOR, load it again and check that the state read back
from the log is intact; and check that keys of a partition being loaded get
COORDINATOR_LOAD_IN_PROGRESS. Transaction states move only along Kafka's table of valid previous states.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kafka.protocol.metadata import FindCoordinatorRequest

from minikafka.broker.embedded import BrokerThread
from minikafka.broker.transactions.metadata import (
    VALID_PREVIOUS_STATES,
    IllegalTxnTransition,
    TxnMetadata,
    TxnState,
)
from tests.groups.test_groups_protocol import CONFIG, commit, fetch, heartbeat, join, stable_member
from tests.kafka_wire import RawClient
from tests.scenario_helpers import create_topic
from tests.transactions.test_transactions_protocol import begin
from tests.txn_helpers import init_pid, wait_for

NONE = 0
COORDINATOR_LOAD_IN_PROGRESS = 14
NOT_COORDINATOR = 16
GROUP, TRANSACTION = 0, 1
T = "orders"


def find_coordinator(client: RawClient, key: str, key_type: int) -> list[int]:
    """The error FindCoordinator v3 and v4 give for ``key``."""
    v3 = client.request(FindCoordinatorRequest[3](key=key, key_type=key_type))
    v4 = client.request(FindCoordinatorRequest[4](key_type=key_type, coordinator_keys=[key]))
    return [v3.error_code, v4.coordinators[0].error_code]


@pytest.fixture
def gbroker(start_broker: Any) -> BrokerThread:
    return start_broker(CONFIG)


def test_an_unloaded_offsets_partition_answers_not_coordinator_until_it_is_loaded_again(gbroker: BrokerThread
                                                                                       ) -> None:
    groups = gbroker.broker.groups
    assert groups is not None and groups.partitions.partition_of("g") == 0
    with RawClient(gbroker.bootstrap) as c:
        create_topic(c, T, partitions=2)
        member_id, generation = stable_member(c, "g")
        assert commit(c, "g", {(T, 0): (7, "m"), (T, 1): (9, None)}, generation=generation,
                      member_id=member_id) == {(T, 0): NONE, (T, 1): NONE}

        assert gbroker.call(groups.unload_partition, 0) == 1
        assert find_coordinator(c, "g", GROUP) == [NOT_COORDINATOR] * 2
        assert c.request(join("g")).error_code == NOT_COORDINATOR
        assert c.request(join("other-group")).error_code == NOT_COORDINATOR
        assert commit(c, "g", {(T, 0): (8, None)}) == {(T, 0): NOT_COORDINATOR}
        assert fetch(c, "g", [(T, 0)])[0] == NOT_COORDINATOR
        assert heartbeat(c, "g", generation, member_id) == NOT_COORDINATOR
        assert find_coordinator(c, "txn", TRANSACTION) == [NONE] * 2  # the other coordinator is untouched

        assert gbroker.call(groups.load_partition, 0) is True
        assert find_coordinator(c, "g", GROUP) == [NONE] * 2
        error, offsets = fetch(c, "g", [(T, 0), (T, 1)])
        assert error == NONE
        assert {tp: (o[0], o[2]) for tp, o in offsets.items()} == {(T, 0): (7, "m"), (T, 1): (9, "")}
        assert heartbeat(c, "g", generation, member_id) == NONE  # the stored generation and member are back


def test_a_parked_join_is_answered_not_coordinator_when_its_partition_is_unloaded(gbroker: BrokerThread) -> None:
    groups = gbroker.broker.groups
    assert groups is not None
    with RawClient(gbroker.bootstrap) as a, RawClient(gbroker.bootstrap) as b:
        stable_member(a, "g", rebalance=60000)
        # b's join starts a rebalance that waits for a to rejoin: b's JoinGroup is parked
        parked = join("g", rebalance=60000)
        b.send(parked)
        wait_for(gbroker, lambda: groups.groups["g"].state.value == "PreparingRebalance", "a rebalance")
        gbroker.call(groups.unload_partition, 0)
        assert b.recv(parked).error_code == NOT_COORDINATOR


def test_keys_of_a_loading_partition_answer_load_in_progress(gbroker: BrokerThread) -> None:
    groups, transactions = gbroker.broker.groups, gbroker.broker.transactions
    assert groups is not None and transactions is not None
    with RawClient(gbroker.bootstrap) as c:
        create_topic(c, T, partitions=1)
        assert commit(c, "g", {(T, 0): (5, None)}) == {(T, 0): NONE}
        pid = init_pid(c, "txn").producer_id
    gbroker.call(groups.unload_partition, 0)
    gbroker.call(transactions.unload_partition, 0)

    async def while_loading() -> list[Any]:
        group_load = asyncio.create_task(groups.load_partition(0))
        txn_load = asyncio.create_task(transactions.load_partition(0))
        await asyncio.sleep(0)  # both loads have begun and let waiting requests through
        during = [groups.offsets.fetch_offsets("g", None)[0], groups.admin.list_groups([], [])[0],
                  (await transactions.init_producer_id("txn", 60000))[0],
                  transactions.list_transactions([], [])[0]]
        loaded = [await group_load, await txn_load]
        after = [groups.offsets.fetch_offsets("g", None), await transactions.init_producer_id("txn", 60000)]
        return [during, loaded, after]

    during, loaded, (fetched, (init_error, init_pid_after, _epoch)) = gbroker.call(while_loading)
    assert during == [COORDINATOR_LOAD_IN_PROGRESS] * 4
    assert loaded == [True, True]
    assert fetched[0] == NONE and fetched[1][(T, 0)].offset == 5
    assert (init_error, init_pid_after) == (NONE, pid)


def test_an_unloaded_transaction_partition_answers_not_coordinator_until_it_is_loaded_again(
        gbroker: BrokerThread) -> None:
    transactions = gbroker.broker.transactions
    assert transactions is not None
    with RawClient(gbroker.bootstrap) as c:
        create_topic(c, T, partitions=1)
        pid, epoch = begin(c, "txn", {T: [0]})
        assert gbroker.call(transactions.unload_partition, 0) == 1
        assert find_coordinator(c, "txn", TRANSACTION) == [NOT_COORDINATOR] * 2
        assert init_pid(c, "txn").error_code == NOT_COORDINATOR
        assert find_coordinator(c, "g", GROUP) == [NONE] * 2

        assert gbroker.call(transactions.load_partition, 0) is True
        assert find_coordinator(c, "txn", TRANSACTION) == [NONE] * 2
        meta = gbroker.call(lambda: transactions.txns["txn"])
        assert (meta.producer_id, meta.producer_epoch, meta.state, meta.partitions) == (
            pid, epoch, TxnState.ONGOING, {(T, 0)})


def test_load_refuses_a_partition_the_topic_does_not_have_or_that_is_already_loaded(gbroker: BrokerThread
                                                                                      ) -> None:
    groups, transactions = gbroker.broker.groups, gbroker.broker.transactions
    assert groups is not None and transactions is not None
    with pytest.raises(ValueError, match="partition 1 is not one of the 1 partition"):
        gbroker.call(groups.load_partition, 1)
    assert gbroker.call(groups.unload_partition, 1) == 0
    with pytest.raises(ValueError, match="__consumer_offsets-0 is already loaded"):
        gbroker.call(groups.load_partition, 0)
    with pytest.raises(ValueError, match="__transaction_state-0 is already loaded"):
        gbroker.call(transactions.load_partition, 0)
    with RawClient(gbroker.bootstrap) as c:  # both still serve their keys
        assert find_coordinator(c, "g", GROUP) == [NONE] * 2
        assert init_pid(c, "txn").error_code == NONE


# ============================================================================ transaction state transitions

S = TxnState


def test_transaction_states_follow_kafkas_valid_previous_states() -> None:
    # Kafka's TransactionState.validPreviousStates, target <- allowed current states
    idle = {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
    expected = {
        S.EMPTY: idle, S.ONGOING: idle | {S.ONGOING}, S.PREPARE_COMMIT: {S.ONGOING},
        S.PREPARE_ABORT: {S.ONGOING, S.PREPARE_EPOCH_FENCE}, S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
        S.COMPLETE_ABORT: {S.PREPARE_ABORT}, S.DEAD: idle, S.PREPARE_EPOCH_FENCE: {S.ONGOING},
    }
    assert {target: set(previous) for target, previous in VALID_PREVIOUS_STATES.items()} == expected
    for target in S:
        for current in S:
            meta = TxnMetadata("t", 1, 0, 60000, state=current)
            if current in expected[target]:
                meta.check_transition(target)
            else:
                with pytest.raises(IllegalTxnTransition, match=f"from {current.display} to {target.display}"):
                    meta.check_transition(target)


def test_an_illegal_transition_fails_before_a_record_is_made() -> None:
    meta = TxnMetadata("t", 1, 0, 60000, state=S.ONGOING)
    with pytest.raises(IllegalTxnTransition):
        meta.record(S.COMPLETE_COMMIT, now_ms=1)
    assert meta.state is S.ONGOING and meta.pending is None
    assert meta.record(S.PREPARE_COMMIT, now_ms=1).state == S.PREPARE_COMMIT
