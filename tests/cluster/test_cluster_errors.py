"""What a client sees when it asks the wrong broker of a 3-broker cluster, per API version, over raw
requests on real sockets: NOT_LEADER_OR_FOLLOWER from a follower and from a broker without a replica
(UNKNOWN_TOPIC_OR_PARTITION for a partition nobody has), FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH
for a stale or future ``current_leader_epoch`` where the version carries one (checked before
leadership), and the KIP-951 leader hints of Produce v10+.

Kafka's answers: ``KafkaApis`` and ``ReplicaManager.getPartitionOrError`` /
``Partition.checkCurrentLeaderEpoch``,
https://github.com/apache/kafka/blob/trunk/core/src/main/scala/kafka/server/KafkaApis.scala."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from minikafka.errors import ErrorCode
from minikafka.testkit import MiniKafkaCluster
from tests.cluster.cluster_wire import (
    Placement,
    delete_records,
    epoch_end,
    fetch,
    list_offsets,
    placement,
    produce,
)
from tests.cluster.test_cluster_failover import wait_for
from tests.kafka_wire import RawClient, build_batch, produce_request

NOT_LEADER = ErrorCode.NOT_LEADER_OR_FOLLOWER
FENCED = ErrorCode.FENCED_LEADER_EPOCH
UNKNOWN_EPOCH = ErrorCode.UNKNOWN_LEADER_EPOCH
UNKNOWN = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
WRONG_BROKERS = ["follower", "outsider"]


@pytest.fixture(scope="module")
def kafka() -> Iterator[MiniKafkaCluster]:
    with MiniKafkaCluster(brokers=3, config={"auto.leader.rebalance.enable": False}) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def where(kafka: MiniKafkaCluster) -> Placement:
    """A partition with two replicas at leader epoch 1 (its leader moved once) holding two records."""
    topic = kafka.create_topic("routed", partitions=1, replication_factor=2)
    first = placement(kafka, topic)
    assert produce(kafka, first.leader, topic, 9).responses[0].partition_responses[0].error_code == 0
    kafka.wait_until_in_sync(topic)
    kafka.move_leader(topic, 0, first.follower)
    now = placement(kafka, topic)
    assert (now.leader, now.epoch) == (first.follower, 1)
    assert produce(kafka, now.leader, topic, 9).responses[0].partition_responses[0].error_code == 0
    wait_for(lambda: fetch(kafka, now.follower, topic, 11).responses[0].partitions[0].high_watermark == 2,
             "the follower to learn the high watermark")
    return now


def node(where: Placement, role: str) -> int:
    return {"leader": where.leader, "follower": where.follower, "outsider": where.outsider}[role]


# ----------------------------------------------------------------------------- Produce


@pytest.mark.parametrize("version", range(13))
@pytest.mark.parametrize("role", WRONG_BROKERS)
def test_produce_to_a_broker_that_does_not_lead_is_not_leader_with_a_hint_from_v10(
        kafka: MiniKafkaCluster, where: Placement, role: str, version: int) -> None:
    answer = produce(kafka, node(where, role), where.topic, version)
    part = answer.responses[0].partition_responses[0]
    assert (part.error_code, part.base_offset) == (NOT_LEADER, -1)
    if version >= 5:
        assert part.log_start_offset == -1
    if version < 10:  # the fields do not exist before v10
        assert not hasattr(part, "current_leader") or part.current_leader is None
        return
    assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (where.leader, where.epoch)
    host, port = kafka.address(where.leader).rsplit(":", 1)
    assert [(e.node_id, e.host, e.port, e.rack) for e in answer.node_endpoints] == [
        (where.leader, host, int(port), None)]


@pytest.mark.parametrize("version", [3, 9, 10, 12])
def test_produce_of_an_unknown_partition_is_unknown_topic_or_partition_without_a_hint(
        kafka: MiniKafkaCluster, where: Placement, version: int) -> None:
    for topic, partition in (("nowhere", 0), (where.topic, 7)):
        with RawClient(kafka.address(where.outsider)) as client:
            answer = client.request(produce_request(topic, partition, build_batch(), version=version))
        part = answer.responses[0].partition_responses[0]
        assert part.error_code == UNKNOWN
        if version >= 10:
            assert part.current_leader is None and not answer.node_endpoints


def test_a_produce_answer_names_each_leader_once_for_partitions_of_several_leaders(kafka: MiniKafkaCluster) -> None:
    topic = kafka.create_topic("spread", partitions=6, replication_factor=1)
    leaders = {p: kafka.leader(topic, p) for p in range(6)}
    asked = 1
    R = produce_request(topic, 0, build_batch(), version=10)
    Topic = type(R).TopicProduceData
    R.topic_data = [Topic(name=topic, partition_data=[Topic.PartitionProduceData(index=p, records=build_batch())
                                                      for p in range(6)])]
    with RawClient(kafka.address(asked)) as client:
        answer = client.request(R)
    seen = {}
    for part in answer.responses[0].partition_responses:
        if leaders[part.index] == asked:
            assert part.error_code == 0 and part.current_leader is None
        else:
            assert part.error_code == NOT_LEADER
            seen[part.index] = part.current_leader.leader_id
    assert seen == {p: n for p, n in leaders.items() if n != asked}
    assert sorted(e.node_id for e in answer.node_endpoints) == sorted(set(seen.values()))


def test_acks_0_produce_to_a_follower_closes_the_connection(kafka: MiniKafkaCluster, where: Placement) -> None:
    with RawClient(kafka.address(where.follower)) as client:
        client.send(produce_request(where.topic, 0, build_batch(), acks=0, version=10))
        assert client.is_closed_by_peer()


# ----------------------------------------------------------------------------- Fetch


@pytest.mark.parametrize("version", range(13))
@pytest.mark.parametrize("role", ["leader", *WRONG_BROKERS])
def test_fetch_is_served_by_the_leader_and_from_v11_by_a_follower(
        kafka: MiniKafkaCluster, where: Placement, role: str, version: int) -> None:
    part = fetch(kafka, node(where, role), where.topic, version).responses[0].partitions[0]
    served = role == "leader" or (role == "follower" and version >= 11)
    assert part.error_code == (0 if served else NOT_LEADER)
    assert part.high_watermark == (2 if served else -1)
    assert bool(part.records) == served
    if version >= 12:  # Kafka fills current_leader (tagged since v12) only from v16
        assert part.current_leader is None or (part.current_leader.leader_id,
                                               part.current_leader.leader_epoch) == (-1, -1)


@pytest.mark.parametrize("version", range(9, 13))
@pytest.mark.parametrize("role", ["leader", "follower"])
def test_fetch_with_a_stale_or_future_epoch_is_fenced_before_leadership_is_checked(
        kafka: MiniKafkaCluster, where: Placement, role: str, version: int) -> None:
    def error(epoch: int) -> int:
        return int(fetch(kafka, node(where, role), where.topic, version, epoch).responses[0].partitions[0].error_code)

    assert error(where.epoch - 1) == FENCED
    assert error(where.epoch + 1) == UNKNOWN_EPOCH
    current = 0 if role == "leader" or version >= 11 else NOT_LEADER
    assert error(where.epoch) == current
    assert error(-1) == current


@pytest.mark.parametrize("version", range(9, 13))
def test_fetch_with_an_epoch_from_a_broker_without_a_replica_is_not_leader(
        kafka: MiniKafkaCluster, where: Placement, version: int) -> None:
    for epoch in (where.epoch - 1, where.epoch + 1):
        part = fetch(kafka, where.outsider, where.topic, version, epoch).responses[0].partitions[0]
        assert part.error_code == NOT_LEADER


@pytest.mark.parametrize("version", [0, 4, 9, 11, 12])
def test_fetch_of_an_unknown_partition_is_unknown_topic_or_partition(
        kafka: MiniKafkaCluster, where: Placement, version: int) -> None:
    assert fetch(kafka, where.outsider, "nowhere", version).responses[0].partitions[0].error_code == UNKNOWN
    assert fetch(kafka, where.leader, where.topic, version, partition=7).responses[0].partitions[0].error_code == UNKNOWN


# ----------------------------------------------------------------------------- ListOffsets


@pytest.mark.parametrize("version", range(9))
@pytest.mark.parametrize("role", ["leader", *WRONG_BROKERS])
def test_list_offsets_is_answered_by_the_leader_only(
        kafka: MiniKafkaCluster, where: Placement, role: str, version: int) -> None:
    part = list_offsets(kafka, node(where, role), where.topic, version)
    if role != "leader":
        assert part.error_code == NOT_LEADER
    elif version == 0:
        assert (part.error_code, part.old_style_offsets) == (0, [2])
    else:
        assert (part.error_code, part.offset) == (0, 2)


@pytest.mark.parametrize("version", range(4, 9))
@pytest.mark.parametrize("role", ["leader", "follower"])
def test_list_offsets_with_a_stale_or_future_epoch_is_fenced_from_v4(
        kafka: MiniKafkaCluster, where: Placement, role: str, version: int) -> None:
    def error(epoch: int) -> int:
        return int(list_offsets(kafka, node(where, role), where.topic, version, epoch).error_code)

    assert error(where.epoch - 1) == FENCED
    assert error(where.epoch + 1) == UNKNOWN_EPOCH
    assert error(where.epoch) == (0 if role == "leader" else NOT_LEADER)


@pytest.mark.parametrize("version", range(1, 9))
def test_list_offsets_for_debugging_reads_a_follower(kafka: MiniKafkaCluster, where: Placement, version: int) -> None:
    """replica_id -2 (Kafka's DEBUGGING_REPLICA_ID) may read any replica; a broker without one still
    answers NOT_LEADER_OR_FOLLOWER."""
    kafka.wait_until_in_sync(where.topic)
    part = list_offsets(kafka, where.follower, where.topic, version, replica_id=-2)
    assert (part.error_code, part.offset) == (0, 2)
    assert list_offsets(kafka, where.outsider, where.topic, version, replica_id=-2).error_code == NOT_LEADER


@pytest.mark.parametrize("version", [0, 1, 4, 8])
def test_list_offsets_of_an_unknown_partition_is_unknown_topic_or_partition(
        kafka: MiniKafkaCluster, where: Placement, version: int) -> None:
    assert list_offsets(kafka, where.outsider, "nowhere", version).error_code == UNKNOWN
    assert list_offsets(kafka, where.leader, where.topic, version, partition=7).error_code == UNKNOWN


# ----------------------------------------------------------------------------- OffsetForLeaderEpoch


@pytest.mark.parametrize("version", range(2, 5))
@pytest.mark.parametrize("role", ["leader", *WRONG_BROKERS])
def test_offset_for_leader_epoch_is_answered_by_the_leader_only(
        kafka: MiniKafkaCluster, where: Placement, role: str, version: int) -> None:
    part = epoch_end(kafka, node(where, role), where.topic, version, leader_epoch=0)
    if role == "leader":  # epoch 0 ended where epoch 1 began: after the first record
        assert (part.error_code, part.leader_epoch, part.end_offset) == (0, 0, 1)
    else:
        assert (part.error_code, part.leader_epoch, part.end_offset) == (NOT_LEADER, -1, -1)


@pytest.mark.parametrize("version", range(2, 5))
@pytest.mark.parametrize("role", ["leader", "follower"])
def test_offset_for_leader_epoch_with_a_stale_or_future_epoch_is_fenced(
        kafka: MiniKafkaCluster, where: Placement, role: str, version: int) -> None:
    def error(epoch: int) -> int:
        return int(epoch_end(kafka, node(where, role), where.topic, version, 0, epoch).error_code)

    assert error(where.epoch - 1) == FENCED
    assert error(where.epoch + 1) == UNKNOWN_EPOCH
    assert error(where.epoch) == (0 if role == "leader" else NOT_LEADER)


@pytest.mark.parametrize("version", range(2, 5))
def test_offset_for_leader_epoch_of_an_unknown_partition_is_unknown_topic_or_partition(
        kafka: MiniKafkaCluster, where: Placement, version: int) -> None:
    assert epoch_end(kafka, where.outsider, "nowhere", version, 0).error_code == UNKNOWN
    assert epoch_end(kafka, where.leader, where.topic, version, 0, partition=7).error_code == UNKNOWN


# ----------------------------------------------------------------------------- DeleteRecords


@pytest.mark.parametrize("version", range(3))
@pytest.mark.parametrize("role", WRONG_BROKERS)
def test_delete_records_on_a_broker_that_does_not_lead_is_not_leader_and_deletes_nothing(
        kafka: MiniKafkaCluster, where: Placement, role: str, version: int) -> None:
    part = delete_records(kafka, node(where, role), where.topic, version, offset=1)
    assert (part.error_code, part.low_watermark) == (NOT_LEADER, -1)
    assert fetch(kafka, where.leader, where.topic, 11).responses[0].partitions[0].log_start_offset == 0
    assert delete_records(kafka, where.outsider, "nowhere", version, offset=0).error_code == UNKNOWN
