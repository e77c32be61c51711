"""Bad input on the transaction APIs with a known transactional id, and failed writes of the
transaction log: each gets the code Kafka sends, the connection keeps serving and the
coordinator's state is unchanged."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from kafka.protocol.metadata import ApiVersionsRequest
from kafka.protocol.producer import (
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    ProduceRequest,
    TxnOffsetCommitRequest,
)

from minikafka.broker.embedded import BrokerThread
from minikafka.broker.transactions.metadata import TxnState
from tests.groups.test_groups_protocol import join, sync
from tests.kafka_wire import RawClient
from tests.scenario_helpers import create_topic
from tests.txn_helpers import (
    TXN_LOG,
    add_offsets,
    add_partitions,
    describe,
    end_txn,
    init_pid,
    offset_fetch,
    stored_batches,
    transactional_batch,
    txn_offset_commit,
    txn_records,
    wait_state,
)

S = TxnState
T = "t"


@pytest.fixture
def client(broker: BrokerThread) -> Iterator[RawClient]:
    """A client of a fresh broker where topic T has two partitions."""
    with RawClient(broker.bootstrap) as c:
        create_topic(c, T, partitions=2)
        yield c


def test_an_id_too_long_for_the_transaction_log_key_is_an_unknown_server_error(
        start_broker: Callable[..., BrokerThread]) -> None:
    """The key's string has an int16 length: Kafka fails to serialise a longer id (a server error
    answered UNKNOWN_SERVER_ERROR); nothing is kept for it."""
    broker = start_broker()
    long_id = "x" * 40_000
    with RawClient(broker.bootstrap) as client:
        init = init_pid(client, long_id)  # v4 is flexible: the request itself can carry it
        assert (init.error_code, init.producer_id, init.producer_epoch) == (-1, -1, -1)
        assert describe(client, long_id)[0].error_code == 105
        assert init_pid(client, "short").error_code == 0  # the connection keeps serving


def test_a_partition_named_twice_is_answered_once(start_broker: Callable[..., BrokerThread]) -> None:
    broker = start_broker()
    with RawClient(broker.bootstrap) as client:
        create_topic(client, T, partitions=2)
        pid = init_pid(client, "twice").producer_id
        Request = AddPartitionsToTxnRequest[3]
        Topic = Request.AddPartitionsToTxnTopic
        for partitions, expected in (([0, 0, 1], [(0, 0), (1, 0)]), ([0, 7, 7, -1], [(0, 55), (7, 3), (-1, 3)])):
            response = client.request(Request(
                v3_and_below_transactional_id="twice", v3_and_below_producer_id=pid, v3_and_below_producer_epoch=0,
                v3_and_below_topics=[Topic(name=T, partitions=partitions), Topic(name=T, partitions=partitions)]))
            assert [(p.partition_index, p.partition_error_code)
                    for t in response.results_by_topic_v3_and_below for p in t.results_by_partition] == expected


def test_a_failed_write_of_the_transaction_log_answers_kafkas_code_and_changes_nothing(
        start_broker: Callable[..., BrokerThread]) -> None:
    """A write the transaction log refuses (here: its partition is closed, Kafka's "not leader")
    is NOT_COORDINATOR, which clients retry after finding the coordinator again."""
    broker = start_broker()
    with RawClient(broker.bootstrap) as client:
        create_topic(client, T, partitions=1)
        init = init_pid(client, "refused")
        pid, epoch = init.producer_id, init.producer_epoch
        broker.call(lambda: broker.broker.logs.get_log(TXN_LOG, 0).close())
        assert add_partitions(client, "refused", pid, epoch, {T: [0]}) == {(T, 0): 16}
        assert add_offsets(client, "refused", pid, epoch, "g") == 16
        assert init_pid(client, "refused").error_code == 16
        assert init_pid(client, "brand-new").error_code == 16
        (state,) = describe(client, "refused")
        assert (state.transaction_state, state.producer_epoch, state.topics) == ("Empty", epoch, [])
        assert describe(client, "brand-new")[0].error_code == 105
    broker.restart(clean=False)
    with RawClient(broker.bootstrap) as client:
        assert [r.state for r in txn_records(client, "refused")] == [S.EMPTY]
        assert add_partitions(client, "refused", pid, epoch, {T: [0]}) == {(T, 0): 0}
        assert end_txn(client, "refused", pid, epoch, commit=False) == 0


def test_transactional_batches_of_two_producers_in_one_produce_refuse_the_whole_request(client: RawClient) -> None:
    init = init_pid(client, "mixed")
    pid, epoch = init.producer_id, init.producer_epoch
    assert add_partitions(client, "mixed", pid, epoch, {T: [0, 1]}) == {(T, 0): 0, (T, 1): 0}
    Request = ProduceRequest[9]
    Topic = Request.TopicProduceData
    Part = Topic.PartitionProduceData

    def produce_both(second: bytes) -> list[int]:
        response = client.request(Request(transactional_id="mixed", acks=-1, timeout_ms=5000, topic_data=[
            Topic(name=T, partition_data=[Part(index=0, records=bytes(transactional_batch(pid, epoch, 0))),
                                          Part(index=1, records=second)])]))
        return [p.error_code for t in response.responses for p in t.partition_responses]

    assert produce_both(bytes(transactional_batch(pid + 1, epoch, 0))) == [49, 49]  # another producer id
    assert produce_both(bytes(transactional_batch(pid, epoch + 1, 0))) == [49, 49]  # another epoch
    assert [stored_batches(client, T, p) for p in range(2)] == [[], []]  # nothing was appended
    assert produce_both(bytes(transactional_batch(pid, epoch, 0))) == [0, 0]



def test_txn_offset_commit_of_a_member_with_a_stale_generation_is_illegal_generation(
        start_broker: Callable[..., BrokerThread]) -> None:
    broker = start_broker({"group.initial.rebalance.delay.ms": "0"})
    with RawClient(broker.bootstrap) as client:
        create_topic(client, T, partitions=1)
        joined = client.request(join("gen"))
        assert joined.error_code == 0
        member, generation = joined.member_id, joined.generation_id
        assert client.request(sync("gen", generation, member, {member: b""})).error_code == 0
        init = init_pid(client, "stale")
        pid, epoch = init.producer_id, init.producer_epoch
        assert add_offsets(client, "stale", pid, epoch, "gen") == 0
        tp = (T, 0)
        assert txn_offset_commit(client, "stale", "gen", pid, epoch, {tp: 1}, generation=generation - 1,
                                 member=member) == {tp: 22}
        assert txn_offset_commit(client, "stale", "gen", pid, epoch, {tp: 1}, generation=generation,
                                 member=member) == {tp: 0}
        assert txn_offset_commit(client, "stale", "gen", pid, epoch, {tp: 2}) == {tp: 0}  # no membership check


def test_huge_partition_lists_get_a_code_per_partition(client: RawClient) -> None:
    init = init_pid(client, "huge")
    pid, epoch = init.producer_id, init.producer_epoch
    wanted = list(range(-5, 20_000))
    errors = add_partitions(client, "huge", pid, epoch, {T: wanted, "no-such-topic": wanted})
    assert len(errors) == 2 * len(wanted)
    assert {tp for tp, code in errors.items() if code == 55} == {(T, 0), (T, 1)}
    assert set(errors.values()) == {3, 55}
    assert [r.state for r in txn_records(client, "huge")] == [S.EMPTY]
    assert add_offsets(client, "huge", pid, epoch, "g") == 0
    offsets = {("no-such-topic", p): 1 for p in range(20_000)} | {(T, p): 1 for p in range(2, 5_000)}
    results = txn_offset_commit(client, "huge", "g", pid, epoch, offsets)
    assert len(results) == len(offsets) and set(results.values()) == {3}
    assert end_txn(client, "huge", pid, epoch, commit=True) == 0


def test_end_txn_v5_and_transaction_version_2_are_not_advertised(start_broker: Callable[..., BrokerThread]) -> None:
    """EndTxn v5 would switch clients to KIP-890 part 2 (an epoch bump per transaction), which the
    coordinator does not implement; so would a finalized ``transaction.version`` of 2 or more."""
    broker = start_broker()
    with RawClient(broker.bootstrap) as client:
        response = client.request(ApiVersionsRequest[3](client_software_name="t", client_software_version="1"))
        versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        assert versions[26] == (0, 4)
        features = [(f.name, f.max_version_level) for f in response.finalized_features or []]
        assert not [f for f in features if f[0] == "transaction.version" and f[1] >= 2]
        try:
            client.request(EndTxnRequest[5](transactional_id="x", producer_id=0, producer_epoch=0, committed=True))
            raise AssertionError("EndTxn v5 should close the connection")
        except ConnectionError:
            pass


def test_txn_offset_commit_metadata_above_the_limit_is_offset_metadata_too_large(
        broker: BrokerThread, client: RawClient) -> None:
    init = init_pid(client, "meta")
    pid, epoch = init.producer_id, init.producer_epoch
    assert add_offsets(client, "meta", pid, epoch, "gmeta") == 0
    Request = TxnOffsetCommitRequest[3]
    Topic = Request.TxnOffsetCommitRequestTopic
    Part = Topic.TxnOffsetCommitRequestPartition
    response = client.request(Request(
        transactional_id="meta", group_id="gmeta", producer_id=pid, producer_epoch=epoch, generation_id=-1,
        member_id="", group_instance_id=None, topics=[Topic(name=T, partitions=[
            Part(partition_index=0, committed_offset=5, committed_leader_epoch=-1, committed_metadata="m" * 4096),
            Part(partition_index=1, committed_offset=6, committed_leader_epoch=-1, committed_metadata="m" * 4097),
        ])]))
    assert [(p.partition_index, p.error_code) for t in response.topics for p in t.partitions] == [(0, 0), (1, 12)]
    assert end_txn(client, "meta", pid, epoch, commit=True) == 0
    wait_state(broker, "meta", S.COMPLETE_COMMIT)
    assert offset_fetch(client, "gmeta", (T, 0), require_stable=True) == (5, 0)
    assert offset_fetch(client, "gmeta", (T, 1), require_stable=True) == (-1, 0)
