"""What a client sees when it asks the wrong broker of a 3-broker cluster, per API version, over raw
requests on real sockets: NOT_LEADER_OR_FOLLOWER from a follower and from a broker without a replica
(UNKNOWN_TOPIC_OR_PARTITION for a partition nobody has), FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH
for a stale or future ``current_leader_epoch`` where the version carries one (checked before
leadership), and the KIP-951 leader hints of Produce v10+.

Kafka's answers: ``KafkaApis`` and ``ReplicaManager.getPartitionOrError`` /
``Partition.checkCurrentLeaderEpoch``,
https://github.com/apache/kafka/blob/trunk/core/src/main/scala/kafka/server/KafkaApis.scala."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from kafka.protocol.consumer import ListOffsetsRequest

from minikafka.broker.embedded import ClusterThread
from minikafka.errors import ErrorCode
from minikafka.testkit import MiniKafkaCluster
from minikafka.testkit.cluster_control import ClusterControl
from tests.cluster.cluster_wire import (
    Placement,
    delete_records,
    epoch_end,
    fetch,
    list_offsets,
    metadata,
    moved_once,
    placement,
    produce,
    racked_cluster,
)
from tests.cluster.test_cluster_failover import wait_for
from tests.kafka_wire import RawClient, build_batch, partition_response, produce_request
from tests.storage_helpers import kafka_batches

NOT_LEADER = ErrorCode.NOT_LEADER_OR_FOLLOWER
FENCED = ErrorCode.FENCED_LEADER_EPOCH
UNKNOWN_EPOCH = ErrorCode.UNKNOWN_LEADER_EPOCH
UNKNOWN = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
WRONG_BROKERS = ["follower", "outsider"]
EARLIEST, MAX_TIMESTAMP = -2, -3  # ListOffsets timestamps


kafka = pytest.fixture(scope="module", name="kafka")(racked_cluster)


@pytest.fixture(scope="module")
def where(kafka: MiniKafkaCluster) -> Placement:
    """A partition with two replicas at leader epoch 1 (its leader moved once) holding two records."""
    return moved_once(kafka, "routed", 2)


def node(where: Placement, role: str) -> int:
    return {"leader": where.leader, "follower": where.follower, "outsider": where.outsider}[role]


# ----------------------------------------------------------------------------- Produce


@pytest.mark.parametrize("version", range(13))
@pytest.mark.parametrize("role", WRONG_BROKERS)
def test_produce_to_a_broker_that_does_not_lead_is_not_leader_with_a_hint_from_v10(
        kafka: MiniKafkaCluster, where: Placement, role: str, version: int) -> None:
    request = produce_request(where.topic, 0, build_batch(), version=version)
    with RawClient(kafka.address(node(where, role))) as client:
        client.send(request)
        frame = client.recv_frame()
    answer = request.header.get_response_class().decode(frame, header=True)
    # the answer holds exactly the fields of its version: before v10 there is no room for a hint
    assert bytes(answer.encode(header=True)) == frame
    part = answer.responses[0].partition_responses[0]
    assert (part.error_code, part.base_offset) == (NOT_LEADER, -1)
    if version >= 5:
        assert part.log_start_offset == -1
    if version < 10:
        return
    assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (where.leader, where.epoch)
    host, port = kafka.address(where.leader).rsplit(":", 1)
    rack = next(b["rack"] for b in kafka.describe()["brokers"] if b["id"] == where.leader)
    assert [(e.node_id, e.host, e.port, e.rack) for e in answer.node_endpoints] == [
        (where.leader, host, int(port), rack)]
    assert rack == f"rack-{'abc'[where.leader - 1]}"


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


@pytest.mark.parametrize("version", range(18))
@pytest.mark.parametrize("role", ["leader", *WRONG_BROKERS])
def test_fetch_is_served_by_the_leader_and_from_v11_by_a_follower(
        kafka: MiniKafkaCluster, where: Placement, role: str, version: int) -> None:
    part = fetch(kafka, node(where, role), where.topic, version).responses[0].partitions[0]
    served = role == "leader" or (role == "follower" and version >= 11)
    assert part.error_code == (0 if served else NOT_LEADER)
    assert part.high_watermark == (2 if served else -1)
    assert bool(part.records) == served
    if 12 <= version < 16 or served:  # Kafka fills current_leader (tagged since v12) only from v16, on errors
        assert part.current_leader is None


@pytest.mark.parametrize("version", range(9, 18))
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


@pytest.mark.parametrize("version", range(9, 18))
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


# ----------------------------------------------------------------------------- a partition without a leader


@pytest.fixture(scope="module")
def offline() -> Iterator[tuple[MiniKafkaCluster, Placement]]:
    """A partition both of whose replicas are down: no leader, its epoch raised by the last fence."""
    with MiniKafkaCluster(brokers=3, config={"auto.leader.rebalance.enable": False}) as cluster:
        topic = cluster.create_topic("stranded", partitions=1, replication_factor=2)
        before = placement(cluster, topic)
        cluster.crash(before.follower)
        cluster.crash(before.leader)
        state = cluster.partition(topic)
        assert state["leader"] == -1 and state["leader_epoch"] > before.epoch
        yield cluster, Placement(topic, -1, before.follower, before.outsider, int(state["leader_epoch"]))


@pytest.mark.parametrize("version", range(14))
def test_metadata_of_a_partition_without_a_leader_is_leader_not_available(
        offline: tuple[MiniKafkaCluster, Placement], version: int) -> None:
    kafka, where = offline
    part = metadata(kafka, where.outsider, where.topic, version).partitions[0]
    assert (part.error_code, part.leader_id) == (ErrorCode.LEADER_NOT_AVAILABLE, -1)
    if version >= 7:
        assert part.leader_epoch == where.epoch


@pytest.mark.parametrize("version", range(13))
def test_produce_for_a_partition_without_a_leader_is_not_leader_with_an_epoch_but_no_endpoint(
        offline: tuple[MiniKafkaCluster, Placement], version: int) -> None:
    """Kafka answers LEADER_NOT_AVAILABLE only in Metadata: a Produce reaching a broker that does
    not lead the partition is NOT_LEADER_OR_FOLLOWER, and from v10 its hint names no leader, the
    epoch it knows, and no endpoint."""
    kafka, where = offline
    answer = produce(kafka, where.outsider, where.topic, version)
    part = answer.responses[0].partition_responses[0]
    assert part.error_code == NOT_LEADER
    if version >= 10:
        assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (-1, where.epoch)
        assert not answer.node_endpoints


# ----------------------------------------------------------------------------- acks=all and min.insync.replicas


@pytest.fixture(scope="module")
def short() -> Iterator[tuple[MiniKafkaCluster, Placement]]:
    """min.insync.replicas 2 with the only follower down: the ISR is the leader alone."""
    with MiniKafkaCluster(brokers=3, config={"auto.leader.rebalance.enable": False}) as cluster:
        topic = cluster.create_topic("strict", partitions=1, replication_factor=2,
                                     config={"min.insync.replicas": "2"})
        where = placement(cluster, topic)
        cluster.crash(where.follower)
        assert cluster.isr(topic) == [where.leader]
        yield cluster, where


@pytest.mark.parametrize("version", range(13))
def test_acks_all_below_min_insync_replicas_is_not_enough_replicas_and_writes_nothing(
        short: tuple[MiniKafkaCluster, Placement], version: int) -> None:
    kafka, where = short

    def log_end() -> int:
        offsets = kafka.partition(where.topic)["replica_offsets"]
        return int(next(r["log_end_offset"] for r in offsets if r["broker"] == where.leader))

    before = log_end()
    part = produce(kafka, where.leader, where.topic, version).responses[0].partition_responses[0]
    assert (part.error_code, part.base_offset) == (ErrorCode.NOT_ENOUGH_REPLICAS, -1)
    if version >= 10:
        assert part.current_leader is None
    assert log_end() == before
    # acks=1 is appended (and stays invisible: the high watermark does not move below the minimum)
    assert produce(kafka, where.leader, where.topic, version, acks=1).responses[0].partition_responses[0].error_code == 0
    assert log_end() == before + 1
    assert list_offsets(kafka, where.leader, where.topic, 1).offset == 0


def _three_replicas(data_dir: Path, config: dict[str, str]) -> tuple[ClusterThread, ClusterControl, Placement, int]:
    """A started 3-broker cluster (with its test-kit controls) and a partition on all three:
    leader, one follower, and the other follower (returned last)."""
    thread = ClusterThread(brokers=3, data_dir=str(data_dir),
                           config={"auto.leader.rebalance.enable": False, "replica.lag.time.max.ms": 60000})
    control = ClusterControl(thread.cluster)
    thread.start()
    thread.call(control.create_topic, "acks", 1, 3, config)
    state = thread.call(control.partition, "acks", 0)
    leader = state["leader"]
    first, second = [n for n in state["replicas"] if n != leader]
    return thread, control, Placement("acks", leader, first, -1, state["leader_epoch"]), second


@pytest.mark.parametrize("version", [3, 9, 12])
def test_an_isr_that_shrinks_below_the_minimum_as_the_write_commits_is_not_enough_replicas_after_append(
        tmp_path: Path, version: int) -> None:
    """Follower B does not fetch, so an acks=all write waits for it; then the controller fences B and
    A in one step (their sessions ending together): B's leaving lets the high watermark pass the
    write, A's leaves the ISR below min.insync.replicas before the answer is made. Kafka decides
    the answer when it checks the waiting write (``Partition.checkEnoughReplicasReachOffset``): the
    write is in the log, and the answer is NOT_ENOUGH_REPLICAS_AFTER_APPEND."""
    thread, control, where, other = _three_replicas(tmp_path, {"min.insync.replicas": "2"})
    try:
        thread.call(control.isolate, other, "brokers")
        with RawClient(thread.address(where.leader)) as client:
            request = produce_request("acks", 0, build_batch(), acks=-1, version=version)
            client.send(request)

            async def fence_together() -> None:
                tracking = thread.cluster.brokers[where.leader].replicas.leading[("acks", 0)]
                for _ in range(1000):  # until the leader knows the follower A has the write
                    if tracking.followers[where.follower].log_end_offset >= 1:
                        break
                    await asyncio.sleep(0.01)
                assert tracking.high_watermark == 0
                thread.cluster.controller.fence(other)
                thread.cluster.controller.fence(where.follower)

            thread.call(fence_together)
            part = partition_response(client.recv(request))
        assert (part.error_code, part.base_offset) == (ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, 0)
    finally:
        thread.stop()


@pytest.mark.parametrize("version", [9, 10, 12])
def test_acks_all_waiting_when_leadership_moves_is_not_leader_with_the_new_leader_from_v10(
        tmp_path: Path, version: int) -> None:
    thread, control, where, other = _three_replicas(tmp_path, {})
    try:
        thread.call(control.isolate, other, "brokers")  # it stays in the ISR: the write waits for it
        with RawClient(thread.address(where.leader)) as client:
            request = produce_request("acks", 0, build_batch(), acks=-1, version=version)
            client.send(request)
            wait_for(lambda: thread.call(control.local_log, where.leader, "acks", 0).log_end_offset == 1,
                     "the write in the leader's log")
            moved = thread.call(control.move_leader, "acks", 0, where.follower)
            answer = client.recv(request)
        part = partition_response(answer)
        assert part.error_code == NOT_LEADER
        if version >= 10:
            leader = (part.current_leader.leader_id, part.current_leader.leader_epoch)
            assert leader == (where.follower, moved["leader_epoch"]) == (where.follower, where.epoch + 1)
            host, port = thread.address(where.follower).rsplit(":", 1)
            assert [(e.node_id, e.host, e.port) for e in answer.node_endpoints] == [(where.follower, host, int(port))]
    finally:
        thread.stop()


# ----------------------------------------------------------------------------- a client that uses the hints


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_confluent_kafka_follows_the_leader_hints_of_produce_answers_exactly_once(
        kafka: MiniKafkaCluster) -> None:
    """librdkafka sends Produce v10+ and applies a NOT_LEADER_OR_FOLLOWER answer's hint at once
    (its debug log says "updated with leader N and epoch E"); every record is delivered once, in order."""
    topic = kafka.create_topic("followed", partitions=1, replication_factor=3)
    lines = _Lines()
    logger = logging.getLogger(f"{__name__}.librdkafka")
    logger.addHandler(lines)
    logger.setLevel(logging.DEBUG)
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "enable.idempotence": True, "acks": "all",
                         "debug": "metadata", "logger": logger})
    sent: list[bytes] = []
    failed: list[Any] = []

    def send(value: bytes) -> None:
        producer.produce(topic, value=value, on_delivery=lambda err, msg: failed.append(err) if err else None)
        sent.append(value)
        assert producer.flush(30) == 0

    try:
        send(b"first")
        for round_ in range(4):
            kafka.wait_until_in_sync(topic)
            state = kafka.partition(topic)
            new = next(n for n in state["replicas"] if n != state["leader"])
            kafka.move_leader(topic, 0, new)
            send(f"after move {round_}".encode())  # sent to the old leader, which hints at the new one
            assert f"updated with leader {new} and epoch {state['leader_epoch'] + 1}" in "\n".join(lines.lines)
    finally:
        logger.removeHandler(lines)
    assert failed == []
    part = fetch(kafka, kafka.leader(topic), topic, 11).responses[0].partitions[0]
    assert [r.value for b in kafka_batches(part.records or b"") for r in b] == sent


@pytest.mark.parametrize("version", range(4, 9))
def test_list_offsets_names_the_epoch_of_the_offset_it_answers(
        kafka: MiniKafkaCluster, where: Placement, version: int) -> None:
    """The partition's first record was written at epoch 0, its second at epoch 1."""
    def found(timestamp: int) -> tuple[int, int, int]:
        part = list_offsets(kafka, where.leader, where.topic, version, timestamp=timestamp)
        return int(part.error_code), int(part.offset), int(part.leader_epoch)

    assert found(EARLIEST) == (0, 0, 0)
    assert found(-1) == (0, 2, where.epoch)
    assert found(0) == (0, 0, 0)  # the first record at or after timestamp 0
    if version >= 7:
        assert found(MAX_TIMESTAMP) == (0, 1, where.epoch)


@pytest.mark.parametrize("version", range(1, 9))
def test_list_offsets_from_a_new_leader_before_its_high_watermark_reaches_its_epoch_is_offset_not_available(
        tmp_path: Path, version: int) -> None:
    """The new leader's epoch starts after a record the old one had not committed; until every
    in-sync follower has fetched from it its high watermark stays below that start, and the latest
    offset is OFFSET_NOT_AVAILABLE (LEADER_NOT_AVAILABLE before v5); so is a timestamp lookup past
    the high watermark. The earliest offset is known."""
    thread, control, where, other = _three_replicas(tmp_path, {})
    try:
        thread.call(control.isolate, other, "brokers")  # in the ISR, not fetching: nothing commits
        with RawClient(thread.address(where.leader)) as client:
            assert partition_response(client.request(produce_request("acks", 0, build_batch(), acks=1))).error_code == 0
        wait_for(lambda: thread.call(control.local_log, where.follower, "acks", 0).log_end_offset == 1,
                 "the follower to copy the record")
        thread.call(control.move_leader, "acks", 0, where.follower)  # its epoch starts at offset 1

        def ask(timestamp: int) -> tuple[int, int]:
            R = ListOffsetsRequest[version]
            part = R.ListOffsetsTopic.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1,
                                                           timestamp=timestamp, max_num_offsets=1)
            with RawClient(thread.address(where.follower)) as client:
                answer = client.request(R(replica_id=-1, isolation_level=0, timeout_ms=1000,
                                          topics=[R.ListOffsetsTopic(name="acks", partitions=[part])]))
            p = answer.topics[0].partitions[0]
            return int(p.error_code), int(p.offset)

        lagging = ErrorCode.OFFSET_NOT_AVAILABLE if version >= 5 else ErrorCode.LEADER_NOT_AVAILABLE
        assert ask(-1) == (lagging, -1)
        assert ask(0) == (lagging, -1)
        assert ask(EARLIEST) == (0, 0)
        thread.call(control.heal, other)
        wait_for(lambda: ask(-1) == (0, 1), "the high watermark to pass the start of the epoch")
        assert ask(0) == (0, 0)
    finally:
        thread.stop()


@pytest.mark.parametrize("version", range(14))
def test_metadata_v0_leaves_out_a_replica_that_is_down_with_replica_not_available(
        short: tuple[MiniKafkaCluster, Placement], version: int) -> None:
    """Only Metadata v0 filters the replica lists to brokers that are up, and says so; later versions
    list every replica (and from v5 the ones that are down)."""
    kafka, where = short
    part = metadata(kafka, where.outsider, where.topic, version).partitions[0]
    replicas = kafka.partition(where.topic)["replicas"]
    if version == 0:
        assert (part.error_code, part.replica_nodes, part.isr_nodes) == (
            ErrorCode.REPLICA_NOT_AVAILABLE, [where.leader], [where.leader])
    else:
        assert (part.error_code, part.replica_nodes, part.isr_nodes) == (0, replicas, [where.leader])
    if version >= 5:
        assert part.offline_replicas == [where.follower]
    assert part.leader_id == where.leader
