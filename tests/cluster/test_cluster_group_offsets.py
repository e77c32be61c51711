"""Committed offsets on a cluster: the group coordinator accepts offsets of every topic in the
cluster, also of topics with no replica on its own broker, as Kafka's coordinator checks them
against the cluster's metadata and not against its local logs (librdkafka's tests 0099 and 0098
on three brokers found the difference)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka.protocol.consumer import OffsetDeleteRequest
from kafka.protocol.metadata import FindCoordinatorRequest

from minikafka.broker.embedded import ClusterThread
from tests.cluster.test_cluster_admin import create
from tests.kafka_wire import RawClient

#: one single-replica topic per broker: whichever broker coordinates the group, two of them have
#: no replica there
PLACED = {"on-1": 1, "on-2": 2, "on-3": 3}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterThread]:
    with ClusterThread(brokers=3, data_dir=str(tmp_path / "cluster")) as c:
        for topic, node in PLACED.items():
            create(c, topic, [[node]])
        yield c


def committed(cluster: ClusterThread, group: str) -> dict[str, tuple[int, int]]:
    """The group's committed offset of partition 0 of each topic, with its error code."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
    try:
        found = consumer.committed([TopicPartition(t, 0) for t in PLACED], timeout=30)
    finally:
        consumer.close()
    return {tp.topic: (tp.offset, tp.error.code() if tp.error else 0) for tp in found}


def test_offsets_commit_for_topics_hosted_by_other_brokers(cluster: ClusterThread) -> None:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "g"})
    try:
        answer = consumer.commit(offsets=[TopicPartition(t, 0, 7 + n) for n, t in enumerate(PLACED)],
                                 asynchronous=False)
    finally:
        consumer.close()
    assert [(tp.topic, tp.error) for tp in answer] == [(t, None) for t in PLACED]
    assert committed(cluster, "g") == {"on-1": (7, 0), "on-2": (8, 0), "on-3": (9, 0)}


def test_transactional_offsets_commit_for_topics_hosted_by_other_brokers(cluster: ClusterThread) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "t"})
    producer.init_transactions(30)
    producer.begin_transaction()
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "tg"})
    try:
        producer.send_offsets_to_transaction([TopicPartition(t, 0, 3) for t in PLACED],
                                             consumer.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
    finally:
        consumer.close()
    assert committed(cluster, "tg") == {t: (3, 0) for t in PLACED}


def test_offsets_of_topics_hosted_by_other_brokers_can_be_deleted(cluster: ClusterThread) -> None:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "d"})
    try:
        consumer.commit(offsets=[TopicPartition(t, 0, 5) for t in PLACED], asynchronous=False)
    finally:
        consumer.close()
    with RawClient(cluster.bootstrap.split(",")[0]) as client:
        coordinator = client.request(FindCoordinatorRequest[3](key="d", key_type=0)).node_id
    R = OffsetDeleteRequest[0]
    T = R.OffsetDeleteRequestTopic
    with RawClient(cluster.address(coordinator)) as client:
        answer = client.request(R(group_id="d", topics=[
            T(name=t, partitions=[T.OffsetDeleteRequestPartition(partition_index=0)]) for t in PLACED]))
    assert (answer.error_code, {t.name: [p.error_code for p in t.partitions] for t in answer.topics}) == (
        0, {t: [0] for t in PLACED})
    assert committed(cluster, "d") == {t: (-1001, 0) for t in PLACED}
