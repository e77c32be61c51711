"""Raw requests of the partition APIs with a leader epoch, for the cluster's error tests: every field a
client sets is the test's, at any version the broker serves."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kafka.protocol.admin import DeleteRecordsRequest
from kafka.protocol.consumer import ListOffsetsRequest, OffsetForLeaderEpochRequest
from kafka.protocol.metadata import MetadataRequest

from minikafka.testkit import MiniKafkaCluster
from tests.cluster.test_cluster_failover import wait_for
from tests.fetch_wire import TOPIC_IDS, fetch_request
from tests.kafka_wire import RawClient, build_batch, produce_request

NO_EPOCH = -1  # current_leader_epoch -1: the broker skips the epoch check
LATEST = -1  # ListOffsets timestamp


@dataclass(frozen=True)
class Placement:
    """A partition and the brokers a client may send to: its leader, a follower, and a broker
    with no replica of it."""

    topic: str
    leader: int
    follower: int
    outsider: int
    epoch: int


def racked_cluster() -> Iterator[MiniKafkaCluster]:
    """(A module fixture of the error tests) 3 brokers, one rack each (rack-a, rack-b, rack-c),
    whose leaders move only when a test moves them."""
    with MiniKafkaCluster(brokers=3, config={"auto.leader.rebalance.enable": False,
                                             "broker.rack": "rack-a,rack-b,rack-c"}) as cluster:
        yield cluster


def placement(kafka: MiniKafkaCluster, topic: str) -> Placement:
    state = kafka.partition(topic, 0)
    leader = int(state["leader"])
    follower = next(n for n in state["replicas"] if n != leader)
    outsider = next((n for n in kafka.brokers if n not in state["replicas"]), -1)
    return Placement(topic, leader, follower, outsider, int(state["leader_epoch"]))


def ask(kafka: MiniKafkaCluster, node: int, request: Any) -> Any:
    """``request`` sent to broker ``node`` on a connection of its own; the decoded answer."""
    with RawClient(kafka.address(node)) as client:
        return client.request(request)


def produce(kafka: MiniKafkaCluster, node: int, topic: str, version: int, acks: int = -1,
            partition: int = 0) -> Any:
    """A one-record Produce of ``version``: the whole answer."""
    return ask(kafka, node, produce_request(topic, partition, build_batch(value=b"x"), acks=acks, version=version))


def fetch(kafka: MiniKafkaCluster, node: int, topic: str, version: int, epoch: int = NO_EPOCH,
          partition: int = 0, replica_id: int = -1) -> Any:
    """A consumer's (or with ``replica_id`` a follower's) Fetch of ``version`` from offset 0 with
    ``current_leader_epoch`` (v9+), by topic id from v13: the whole answer."""
    key: str | uuid.UUID = topic if version < TOPIC_IDS else metadata(kafka, node, topic, 12).topic_id
    return ask(kafka, node, fetch_request(version, [(key, [partition])], current_leader_epoch=epoch,
                                          replica_id=replica_id))


def list_offsets(kafka: MiniKafkaCluster, node: int, topic: str, version: int, epoch: int = NO_EPOCH,
                 replica_id: int = -1, partition: int = 0, timestamp: int = LATEST) -> Any:
    """ListOffsets of ``version`` (LATEST unless ``timestamp`` says otherwise) with
    ``current_leader_epoch`` (v4+): the partition's answer."""
    R = ListOffsetsRequest[version]
    part = R.ListOffsetsTopic.ListOffsetsPartition(partition_index=partition, current_leader_epoch=epoch,
                                                   timestamp=timestamp, max_num_offsets=1)
    answer = ask(kafka, node, R(replica_id=replica_id, isolation_level=0, timeout_ms=1000,
                                topics=[R.ListOffsetsTopic(name=topic, partitions=[part])]))
    return answer.topics[0].partitions[0]


def epoch_end(kafka: MiniKafkaCluster, node: int, topic: str, version: int, leader_epoch: int,
              epoch: int = NO_EPOCH, partition: int = 0) -> Any:
    """OffsetForLeaderEpoch of ``version``: where ``leader_epoch`` ends, asked with ``current_leader_epoch``."""
    R = OffsetForLeaderEpochRequest[version]
    Topic = R.OffsetForLeaderTopic
    part = Topic.OffsetForLeaderPartition(partition=partition, current_leader_epoch=epoch, leader_epoch=leader_epoch)
    answer = ask(kafka, node, R(replica_id=-1, topics=[Topic(topic=topic, partitions=[part])]))
    return answer.topics[0].partitions[0]


def delete_records(kafka: MiniKafkaCluster, node: int, topic: str, version: int, offset: int,
                   partition: int = 0) -> Any:
    R = DeleteRecordsRequest[version]
    part = R.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=partition, offset=offset)
    answer = ask(kafka, node, R(topics=[R.DeleteRecordsTopic(name=topic, partitions=[part])], timeout_ms=5000))
    return answer.topics[0].partitions[0]


def metadata(kafka: MiniKafkaCluster, node: int, topic: str, version: int) -> Any:
    """Metadata of ``version`` for ``topic``: the answer's topic."""
    R = MetadataRequest[version]
    answer = ask(kafka, node, R(topics=[R.MetadataRequestTopic(name=topic, topic_id=uuid.UUID(int=0))],
                                allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
                                include_topic_authorized_operations=False))
    return answer.topics[0]


def moved_once(kafka: MiniKafkaCluster, topic: str, records: int) -> Placement:
    """A new partition with two replicas whose leader moved once (epoch 1), holding ``records``
    records, the first written before the move; returned once the follower knows the high watermark."""
    kafka.create_topic(topic, partitions=1, replication_factor=2)
    first = placement(kafka, topic)
    assert produce(kafka, first.leader, topic, 9).responses[0].partition_responses[0].error_code == 0
    kafka.wait_until_in_sync(topic)
    kafka.move_leader(topic, 0, first.follower)
    now = placement(kafka, topic)
    assert (now.leader, now.epoch) == (first.follower, 1)
    for _ in range(records - 1):
        assert produce(kafka, now.leader, topic, 9).responses[0].partition_responses[0].error_code == 0
    wait_for(lambda: fetch(kafka, now.follower, topic, 11).responses[0].partitions[0].high_watermark == records,
             "the follower to learn the high watermark")
    return now
