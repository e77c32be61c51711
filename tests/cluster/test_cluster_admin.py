"""Admin APIs across a cluster: ElectLeaders through the controller, automatic preferred-leader
balancing, DeleteTopics reaching every broker (also one that was down) and CreatePartitions with
replicated new partitions, through confluent-kafka's AdminClient and over raw requests per version."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ElectionType, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kafka.protocol.admin import CreatePartitionsRequest, DeleteTopicsRequest, ElectLeadersRequest

from minikafka.broker.embedded import ClusterThread
from minikafka.errors import ErrorCode
from tests.cluster.test_cluster_failover import read_all, wait_for
from tests.kafka_wire import RawClient

NOT_NEEDED = ErrorCode.ELECTION_NOT_NEEDED
PREFERRED, UNCLEAN = 0, 1  # ElectLeaders' election_type on the wire


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterThread]:
    """Three brokers that leave leadership where failover put it, so elections are the test's to make."""
    with ClusterThread(brokers=3, data_dir=str(tmp_path / "cluster"),
                       config={"replica.lag.time.max.ms": 3000, "auto.leader.rebalance.enable": False}) as c:
        yield c


def create(cluster: ClusterThread, topic: str, assignment: list[list[int]]) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=len(assignment), replica_assignment=assignment)])[topic].result(30)


def in_sync_again(cluster: ClusterThread, topic: str, node: int) -> None:
    wait_for(lambda: node in cluster.state(topic, 0).isr, f"broker {node} back in the ISR of {topic}-0")


def elect(cluster: ClusterThread, node: int, version: int, election_type: int,
          partitions: list[tuple[str, int]] | None) -> Any:
    R = ElectLeadersRequest[version]
    wanted = None
    if partitions is not None:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        wanted = [R.TopicPartitions(topic=t, partitions=ps) for t, ps in by_topic.items()]
    with RawClient(cluster.address(node)) as client:
        return client.request(R(election_type=election_type, topic_partitions=wanted, timeout_ms=5000))


def results(response: Any) -> dict[tuple[str, int], tuple[int, str | None]]:
    return {(r.topic, p.partition_id): (p.error_code, p.error_message)
            for r in response.replica_election_results for p in r.partition_result}


def test_a_preferred_election_through_the_admin_client_gives_leadership_back(cluster: ClusterThread) -> None:
    create(cluster, "pref", [[1, 2, 3]])
    cluster.crash(1)
    assert cluster.leader("pref", 0) == 2
    cluster.start_broker(1)
    in_sync_again(cluster, "pref", 1)
    assert cluster.leader("pref", 0) == 2  # balancing is off: leadership stays where failover put it
    epoch = cluster.state("pref", 0).leader_epoch
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    tp = TopicPartition("pref", 0)
    assert admin.elect_leaders(ElectionType.PREFERRED, [tp]).result(30) == {tp: None}
    assert (cluster.leader("pref", 0), cluster.state("pref", 0).leader_epoch) == (1, epoch + 1)
    again = admin.elect_leaders(ElectionType.PREFERRED, [tp]).result(30)
    assert again[tp].code() == NOT_NEEDED
    assert admin.elect_leaders(ElectionType.PREFERRED, None).result(30) == {}  # nothing needed: left out
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    producer.produce("pref", value=b"after the election")
    assert producer.flush(30) == 0
    assert read_all(cluster, "pref", "g") == [b"after the election"]


@pytest.mark.parametrize("version", [0, 1, 2])
def test_elect_leaders_errors_per_version(cluster: ClusterThread, version: int) -> None:
    create(cluster, "pref", [[1, 2, 3]])
    create(cluster, "lonely", [[3]])
    cluster.crash(1)
    cluster.crash(3)  # "lonely" has no leader and no replica to elect
    asked = [("pref", 0), ("lonely", 0), ("nope", 0)]
    failed_preferred = "Failed to elect leader for partition {} under strategy PREFERRED"
    response = elect(cluster, 2, version, PREFERRED, asked)  # v0 has no type: always preferred
    assert response.API_VERSION == version
    assert results(response) == {
        ("pref", 0): (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, failed_preferred.format("pref-0")),
        ("lonely", 0): (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, failed_preferred.format("lonely-0")),
        ("nope", 0): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."),
    }
    assert set(results(elect(cluster, 2, version, PREFERRED, None))) == {("pref", 0), ("lonely", 0)}
    if version >= 1:  # v0 has no top-level error
        assert response.error_code == 0
        unclean = results(elect(cluster, 2, version, UNCLEAN, asked))
        assert {tp: code for tp, (code, _) in unclean.items()} == {
            ("pref", 0): NOT_NEEDED, ("lonely", 0): ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
            ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        bad = elect(cluster, 2, version, 7, [("pref", 0)])
        assert bad.error_code == ErrorCode.INVALID_REQUEST
        assert results(bad) == {("pref", 0): (ErrorCode.INVALID_REQUEST, "Unknown election type 7")}
    cluster.start_broker(1)
    in_sync_again(cluster, "pref", 1)
    assert results(elect(cluster, 2, version, PREFERRED, [("pref", 0)])) == {("pref", 0): (0, None)}
    assert cluster.leader("pref", 0) == 1
    assert results(elect(cluster, 2, version, PREFERRED, None)) == {("lonely", 0): (
        ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, failed_preferred.format("lonely-0"))}


def test_the_preferred_leader_leads_again_once_back_in_sync(tmp_path: Path) -> None:
    config = {"replica.lag.time.max.ms": 3000, "leader.imbalance.check.interval.seconds": 1}
    with ClusterThread(brokers=3, data_dir=str(tmp_path / "cluster"), config=config) as cluster:
        create(cluster, "balanced", [[1, 2, 3]])
        cluster.crash(1)
        assert cluster.leader("balanced", 0) == 2
        cluster.start_broker(1)
        in_sync_again(cluster, "balanced", 1)
        wait_for(lambda: cluster.leader("balanced", 0) == 1, "the preferred leader to lead again")
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        producer.produce("balanced", value=b"led by 1")
        assert producer.flush(30) == 0
        assert read_all(cluster, "balanced", "g") == [b"led by 1"]
