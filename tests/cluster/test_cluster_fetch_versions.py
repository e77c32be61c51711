"""Fetch v13-v17 in a 3-broker cluster, over raw requests on real sockets: the KIP-951 hints of
v16+ (``current_leader`` per partition answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH,
``node_endpoints`` at the top), topic ids resolved through the cluster's topics on a broker that
hosts none of the topic, and a follower's id in v15's ReplicaState (KIP-903).

Kafka: ``KafkaApis.handleFetchRequest`` / ``getCurrentLeader``,
https://github.com/apache/kafka/blob/trunk/core/src/main/scala/kafka/server/KafkaApis.scala."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import Consumer, Producer

from minikafka.errors import ErrorCode
from minikafka.testkit import MiniKafkaCluster
from tests.cluster import cluster_wire
from tests.cluster.cluster_wire import Placement, metadata, moved_once, placement, racked_cluster
from tests.cluster.test_cluster_failover import wait_for
from tests.fetch_wire import ProtocolLog, fetch_request, poll_values
from tests.kafka_wire import RawClient

NOT_LEADER = ErrorCode.NOT_LEADER_OR_FOLLOWER
FENCED = ErrorCode.FENCED_LEADER_EPOCH


kafka = pytest.fixture(scope="module", name="kafka")(racked_cluster)


@pytest.fixture(scope="module")
def where(kafka: MiniKafkaCluster) -> Placement:
    """A partition with two replicas whose leader moved once (epoch 1), holding one record."""
    return moved_once(kafka, "hinted", 1)


def fetch_frame(kafka: MiniKafkaCluster, node: int, request: Any) -> Any:
    """The answer to ``request``, checked to hold exactly the fields it decodes to (a tagged
    field is written only when set)."""
    with RawClient(kafka.address(node)) as client:
        client.send(request)
        frame = client.recv_frame()
    answer = request.header.get_response_class().decode(frame, header=True)
    assert bytes(answer.encode(header=True)) == frame
    return answer


def endpoint(kafka: MiniKafkaCluster, node: int) -> tuple[int, str, int, str]:
    host, port = kafka.address(node).rsplit(":", 1)
    return node, host, int(port), f"rack-{'abc'[node - 1]}"


@pytest.mark.parametrize("version", range(12, 18))
def test_not_leader_names_the_leader_and_its_endpoint_from_v16(kafka: MiniKafkaCluster, where: Placement,
                                                                 version: int) -> None:
    tid = metadata(kafka, where.outsider, where.topic, 12).topic_id  # the outsider hosts no replica of it
    key = tid if version >= 13 else where.topic
    answer = fetch_frame(kafka, where.outsider, fetch_request(version, [(key, [0])]))
    if version >= 13:
        assert answer.responses[0].topic_id == tid
    part = answer.responses[0].partitions[0]
    assert (part.error_code, part.high_watermark) == (NOT_LEADER, -1)
    if version < 16:
        assert part.current_leader is None and not getattr(answer, "node_endpoints", None)
        return
    assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (where.leader, where.epoch)
    assert [(e.node_id, e.host, e.port, e.rack) for e in answer.node_endpoints] == [endpoint(kafka, where.leader)]


@pytest.mark.parametrize("role", ["leader", "follower"])
def test_a_stale_epoch_is_fenced_with_the_current_leader_and_a_future_one_without(
        kafka: MiniKafkaCluster, where: Placement, role: str) -> None:
    asked = where.leader if role == "leader" else where.follower
    tid = metadata(kafka, asked, where.topic, 12).topic_id
    stale = fetch_frame(kafka, asked, fetch_request(16, [(tid, [0])], current_leader_epoch=where.epoch - 1))
    part = stale.responses[0].partitions[0]
    assert part.error_code == FENCED
    assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (where.leader, where.epoch)
    assert [(e.node_id, e.host, e.port, e.rack) for e in stale.node_endpoints] == [endpoint(kafka, where.leader)]
    future = fetch_frame(kafka, asked, fetch_request(16, [(tid, [0])], current_leader_epoch=where.epoch + 1))
    part = future.responses[0].partitions[0]
    assert part.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert part.current_leader is None and not future.node_endpoints


def test_a_fetch_answer_names_each_leader_once_for_partitions_of_several_leaders(kafka: MiniKafkaCluster) -> None:
    topic = kafka.create_topic("spread-fetch", partitions=6, replication_factor=1)
    leaders = {p: kafka.leader(topic, p) for p in range(6)}
    asked = 1
    tid = metadata(kafka, asked, topic, 12).topic_id
    answer = fetch_frame(kafka, asked, fetch_request(17, [(tid, list(range(6)))]))
    seen = {}
    for part in answer.responses[0].partitions:
        if leaders[part.partition_index] == asked:
            assert part.error_code == 0 and part.current_leader is None
        else:
            assert part.error_code == NOT_LEADER
            seen[part.partition_index] = (part.current_leader.leader_id, part.current_leader.leader_epoch)
    assert seen == {p: (n, 0) for p, n in leaders.items() if n != asked}
    assert [e.node_id for e in answer.node_endpoints] == sorted({n for n, _ in seen.values()})


@pytest.mark.parametrize("version", [15, 16, 17])
def test_a_follower_id_in_replica_state_is_served_by_the_leader_only(kafka: MiniKafkaCluster, version: int) -> None:
    """From v15 a follower's id travels in ReplicaState: the leader serves it (up to its log end,
    here also the high watermark), a follower refuses it as it refuses any replica's fetch,
    while it serves the same request from a consumer (v11+)."""
    topic = kafka.create_topic(f"replica-state-{version}", partitions=1, replication_factor=2)
    at = placement(kafka, topic)
    assert cluster_wire.produce(kafka, at.leader, topic, 9).responses[0].partition_responses[0].error_code == 0
    kafka.wait_until_in_sync(topic)
    tid = metadata(kafka, at.leader, topic, 12).topic_id
    wait_for(lambda: cluster_wire.fetch(kafka, at.follower, topic, 11).responses[0].partitions[0].high_watermark == 1,
             "the follower to learn the high watermark")
    as_follower = fetch_request(version, [(tid, [0])], replica_id=at.follower, offset=1)
    led = fetch_frame(kafka, at.leader, as_follower).responses[0].partitions[0]
    assert (led.error_code, led.high_watermark) == (0, 1)
    refused = fetch_frame(kafka, at.follower, as_follower)
    assert refused.responses[0].partitions[0].error_code == NOT_LEADER
    if version >= 16:
        hint = refused.responses[0].partitions[0].current_leader
        assert (hint.leader_id, hint.leader_epoch) == (at.leader, at.epoch)
    as_consumer = fetch_frame(kafka, at.follower, fetch_request(version, [(tid, [0])]))
    assert as_consumer.responses[0].partitions[0].error_code == 0


def test_a_fault_rule_on_a_brokers_fetch_reads_its_id_from_replica_state(kafka: MiniKafkaCluster,
                                                                          where: Placement) -> None:
    """``from_broker`` matches a v15+ Fetch by the id in its ReplicaState, and a topic by its id."""
    rule = kafka.faults.add("error_before", api="Fetch", topic=where.topic, from_broker=where.outsider,
                            error="KAFKA_STORAGE_ERROR", trigger="always")
    try:
        tid = metadata(kafka, where.leader, where.topic, 12).topic_id
        for version in (15, 17):
            as_broker = fetch_frame(kafka, where.leader, fetch_request(version, [(tid, [0])],
                                                                       replica_id=where.outsider))
            assert as_broker.responses[0].partitions[0].error_code == ErrorCode.KAFKA_STORAGE_ERROR
            as_consumer = fetch_frame(kafka, where.leader, fetch_request(version, [(tid, [0])]))
            assert as_consumer.responses[0].partitions[0].error_code == 0
        assert rule.fired == 2
    finally:
        kafka.faults.clear()


def test_confluent_kafka_consumes_with_v16_through_a_leader_move_and_a_leader_crash(kafka: MiniKafkaCluster) -> None:
    """librdkafka fetches with v16; when leadership moves, the old leader answers its next fetch
    FENCED_LEADER_EPOCH with the new leader, which librdkafka applies at once ("updated with leader
    N and epoch E" in its log, as for Produce's hints); after the new leader crashes it finds the
    next one through Metadata. Every record is consumed once, in order."""
    topic = kafka.create_topic("consumed-through", partitions=1, replication_factor=3)
    log = ProtocolLog(f"{__name__}.librdkafka")
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "enable.idempotence": True})
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": "through", "auto.offset.reset": "earliest",
                         "debug": "protocol,metadata", "logger": log.logger})
    sent: list[bytes] = []

    def send(count: int) -> None:
        for _ in range(count):
            sent.append(f"v{len(sent)}".encode())
            producer.produce(topic, value=sent[-1])
        assert producer.flush(60) == 0

    try:
        consumer.subscribe([topic])
        send(10)
        got = poll_values(consumer, 10)
        kafka.wait_until_in_sync(topic)
        before = kafka.partition(topic)
        moved_to = next(n for n in before["replicas"] if n != before["leader"])
        kafka.move_leader(topic, 0, moved_to)
        send(10)
        got += poll_values(consumer, 10)
        hint = f"updated with leader {moved_to} and epoch {before['leader_epoch'] + 1}"
        wait_for(lambda: hint in "\n".join(log.lines), "librdkafka to apply the fetch answer's leader hint")
        kafka.wait_until_in_sync(topic)
        kafka.crash(moved_to)
        try:
            send(10)
            got += poll_values(consumer, 10, timeout=60)
        finally:
            kafka.start_broker(moved_to)
    finally:
        consumer.close()
        log.close_log()
    assert got == sent
    assert log.fetch_versions() == {16}
