"""Admin APIs across a cluster: ElectLeaders through the controller, automatic preferred-leader
balancing, DeleteTopics reaching every broker (also one that was down) and CreatePartitions with
replicated new partitions, through confluent-kafka's AdminClient and over raw requests per version."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, ElectionType, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kafka.protocol.admin import CreatePartitionsRequest, DeleteTopicsRequest, ElectLeadersRequest

from minikafka.broker.embedded import ClusterThread
from minikafka.errors import ErrorCode
from tests.cluster.test_cluster_failover import drain, read_all, wait_for
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


def topic_id(cluster: ClusterThread, topic: str) -> Any:
    return cluster.call(lambda: cluster.cluster.controller.topics[topic].topic_id)


def replica_dirs(cluster: ClusterThread, node: int, topic: str) -> list[str]:
    data_dir = Path(cluster.cluster.data_dir) / f"node-{node}"
    return sorted(p.name for p in data_dir.iterdir() if p.name.startswith(f"{topic}-"))


def read_partition(cluster: ClusterThread, topic: str, partition: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "reader", "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
    return drain(consumer, f"{topic}-{partition}")


def send(cluster: ClusterThread, topic: str, values: list[bytes], partition: int = 0) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True})
    failed: list[Any] = []
    for value in values:
        producer.produce(topic, value=value, partition=partition, on_delivery=lambda err, msg: err and failed.append(err))
    assert producer.flush(30) == 0
    assert failed == []


def test_a_topic_deleted_while_a_broker_is_down_is_gone_from_it_after_its_restart(cluster: ClusterThread) -> None:
    create(cluster, "doomed", [[1, 2, 3], [2, 3, 1]])
    send(cluster, "doomed", [b"old-1", b"old-2"])
    first_id = topic_id(cluster, "doomed")
    cluster.crash(3)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.delete_topics(["doomed"])["doomed"].result(30)
    assert replica_dirs(cluster, 1, "doomed") == replica_dirs(cluster, 2, "doomed") == []
    assert replica_dirs(cluster, 3, "doomed") == ["doomed-0", "doomed-1"]  # it was down: its leftovers stay
    assert "doomed" not in admin.list_topics(timeout=10).topics
    cluster.start_broker(3)
    assert replica_dirs(cluster, 3, "doomed") == []
    create(cluster, "doomed", [[3, 1, 2]])
    assert topic_id(cluster, "doomed") != first_id
    assert cluster.state("doomed", 0).leader_epoch == 0
    send(cluster, "doomed", [b"new"])
    assert read_all(cluster, "doomed", "g") == [b"new"]


def test_a_topic_recreated_while_a_broker_was_down_is_replaced_there(cluster: ClusterThread) -> None:
    create(cluster, "again", [[1, 2, 3]])
    send(cluster, "again", [b"old"])
    cluster.crash(3)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.delete_topics(["again"])["again"].result(30)
    create(cluster, "again", [[1, 2, 3]])
    send(cluster, "again", [b"new-1", b"new-2"])
    cluster.start_broker(3)  # its "again" has the old topic id: dropped, then replicated anew
    wait_for(lambda: cluster.state("again", 0).isr == (1, 2, 3), "broker 3 in sync with the new topic")
    logs = cluster.cluster.brokers[3].logs
    assert cluster.call(lambda: logs.topics()["again"].topic_id) == topic_id(cluster, "again")
    assert cluster.call(lambda: logs.get_log("again", 0).log_end_offset) == 2  # the new records, not "old"


@pytest.mark.parametrize("version", [0, 6])
def test_delete_topics_in_a_cluster_answers_by_the_controllers_topics(cluster: ClusterThread, version: int) -> None:
    create(cluster, "named", [[2, 3, 1]])
    R = DeleteTopicsRequest[version]
    names = ["named", "absent"]
    request = R(topic_names=names, topics=[R.DeleteTopicState(name=n, topic_id=None) for n in names], timeout_ms=5000)
    with RawClient(cluster.address(1)) as client:  # broker 1 hosts a replica but does not lead
        answer = client.request(request)
    assert [(r.name, r.error_code) for r in answer.responses] == [
        ("named", 0), ("absent", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    for node in (1, 2, 3):
        assert replica_dirs(cluster, node, "named") == []


def test_new_partitions_are_replicated_and_take_acks_all_writes(cluster: ClusterThread) -> None:
    create(cluster, "grow", [[1, 2, 3]])
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_partitions([NewPartitions("grow", 4)])["grow"].result(30)
    for p in range(4):
        assert sorted(cluster.state("grow", p).replicas) == [1, 2, 3]
    for node in (1, 2, 3):
        assert replica_dirs(cluster, node, "grow") == [f"grow-{p}" for p in range(4)]
    assert len(admin.list_topics("grow", timeout=10).topics["grow"].partitions) == 4
    for p in range(1, 4):
        send(cluster, "grow", [f"p{p}".encode()], partition=p)
    wait_for(lambda: all(len(cluster.state("grow", p).isr) == 3 for p in range(4)), "every replica in sync")
    assert [read_partition(cluster, "grow", p) for p in range(4)] == [[], [b"p1"], [b"p2"], [b"p3"]]


def test_a_broker_down_while_partitions_are_added_creates_its_replicas_when_it_starts(cluster: ClusterThread) -> None:
    create(cluster, "later", [[1, 2, 3]])
    cluster.crash(3)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_partitions([NewPartitions("later", 2, replica_assignment=[[3, 1, 2]])])["later"].result(30)
    assert cluster.leader("later", 1) == 1  # its preferred leader is down
    assert replica_dirs(cluster, 3, "later") == ["later-0"]
    cluster.start_broker(3)
    assert replica_dirs(cluster, 3, "later") == ["later-0", "later-1"]
    send(cluster, "later", [b"x"], partition=1)
    wait_for(lambda: 3 in cluster.state("later", 1).isr, "broker 3 in sync on the new partition")


@pytest.mark.parametrize("version", [0, 3])
def test_create_partitions_errors_in_a_cluster(cluster: ClusterThread, version: int) -> None:
    create(cluster, "grown", [[1, 2, 3]])
    R = CreatePartitionsRequest[version]
    Assignment = R.CreatePartitionsTopic.CreatePartitionsAssignment

    def ask(name: str, count: int, assignments: list[list[int]] | None = None, validate_only: bool = False) -> Any:
        wanted = None if assignments is None else [Assignment(broker_ids=a) for a in assignments]
        with RawClient(cluster.address(2)) as client:
            answer = client.request(R(topics=[R.CreatePartitionsTopic(name=name, count=count, assignments=wanted)],
                                      timeout_ms=5000, validate_only=validate_only))
        (result,) = answer.results
        return result.error_code, result.error_message

    assert ask("grown", 1)[0] == ErrorCode.INVALID_PARTITIONS
    assert ask("absent", 2)[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert ask("grown", 3, [[1, 2, 3]])[0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT  # two new ones, one assignment
    assert ask("grown", 2, [[1, 1, 2]])[0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert ask("grown", 2, [[1, 2, 9]])[0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert ask("grown", 3, validate_only=True) == (0, None)
    assert cluster.state("grown", 1) is None  # validate_only changed nothing
    assert ask("grown", 3, [[2, 3, 1], [3, 1, 2]]) == (0, None)
    assert [cluster.state("grown", p).replicas for p in (1, 2)] == [(2, 3, 1), (3, 1, 2)]
