"""Coordinators across the brokers of a cluster: a group's or transactional id's coordinator is the
leader of its partition of ``__consumer_offsets`` / ``__transaction_state``, those partitions are
replicated like any other, and when the leader crashes the coordinator moves with the leadership,
its state rebuilt by the new leader from its replica."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.metadata import FindCoordinatorRequest

from minikafka.broker.embedded import ClusterThread
from minikafka.broker.internal_records import partition_for
from minikafka.errors import ErrorCode
from tests.cluster.test_cluster_failover import create, read_all, wait_for
from tests.groups.consumer_group_wire import describe as describe_group
from tests.groups.consumer_group_wire import join
from tests.groups.test_groups_protocol import commit as commit_offsets
from tests.kafka_wire import RawClient

#: fewer partitions than Kafka's 50 keep these tests light; the rules do not depend on the count
SETTINGS = {"replica.lag.time.max.ms": 3000, "offsets.topic.num.partitions": 6,
            "transaction.state.log.num.partitions": 6}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterThread]:
    with ClusterThread(brokers=3, data_dir=str(tmp_path / "cluster"), config=SETTINGS) as c:
        yield c


def find_coordinator(client: RawClient, key: str, key_type: int) -> tuple[int, int]:
    response = client.request(FindCoordinatorRequest[2](key, key_type))
    return response.error_code, response.node_id


def first_lookup(cluster: ClusterThread, key: str, key_type: int) -> tuple[int, int]:
    """FindCoordinator until it names a broker: the first answer and the coordinator's id."""
    with RawClient(cluster.address(1)) as client:
        first = find_coordinator(client, key, key_type)
        deadline = time.monotonic() + 10
        answer = first
        while answer[0] != ErrorCode.NONE and time.monotonic() < deadline:
            time.sleep(0.05)
            answer = find_coordinator(client, key, key_type)
    assert answer[0] == ErrorCode.NONE, answer
    return first[0], answer[1]


def test_find_coordinator_creates_the_internal_topic_then_names_the_leader_of_the_keys_partition(
        cluster: ClusterThread) -> None:
    first, node = first_lookup(cluster, "g-find", 0)
    assert first == ErrorCode.COORDINATOR_NOT_AVAILABLE  # Kafka creates the topic and asks the client to retry
    partition = partition_for("g-find", 6)
    assert node == cluster.leader("__consumer_offsets", partition)
    state = cluster.state("__consumer_offsets", partition)
    assert sorted(state.replicas) == [1, 2, 3]  # offsets.topic.replication.factor 3, capped at the brokers
    for other in (2, 3):  # every broker gives the same answer
        with RawClient(cluster.address(other)) as client:
            assert find_coordinator(client, "g-find", 0) == (ErrorCode.NONE, node)
    txn_first, txn_node = first_lookup(cluster, "t-find", 1)
    assert txn_first == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert txn_node == cluster.leader("__transaction_state", partition_for("t-find", 6))
    assert cluster.call(lambda: cluster.cluster.controller.topics["__transaction_state"].configs[
        "min.insync.replicas"]) == "2"  # transaction.state.log.min.isr


def test_a_broker_that_does_not_lead_the_groups_partition_answers_not_coordinator(cluster: ClusterThread) -> None:
    _, node = first_lookup(cluster, "g-wrong", 0)
    create(cluster, "wrong-t")
    wait_for(lambda: _commit_error(cluster, node) == ErrorCode.NONE, "the coordinator to load the group")
    for other in (n for n in (1, 2, 3) if n != node):
        assert _commit_error(cluster, other) == ErrorCode.NOT_COORDINATOR


def _commit_error(cluster: ClusterThread, node: int) -> int:
    with RawClient(cluster.address(node)) as client:
        return commit_offsets(client, "g-wrong", {("wrong-t", 0): (5, None)})[("wrong-t", 0)]


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_consumer_group_keeps_consuming_and_its_offsets_survive_a_crash_of_its_coordinator(
        cluster: ClusterThread, protocol: str) -> None:
    """For both group protocols: the classic one (JoinGroup/SyncGroup) and KIP-848's, whose members,
    epochs and assignments the new coordinator rebuilds from its replica."""
    create(cluster, "moving", partitions=3, **{"min.insync.replicas": "2"})
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True})

    def write(prefix: str, count: int) -> set[bytes]:
        values = {f"{prefix}-{i}".encode() for i in range(count)}
        for value in sorted(values):
            producer.produce("moving", value=value)
        assert producer.flush(30) == 0
        return values

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "g-moving",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False, "group.protocol": protocol})
    consumer.subscribe(["moving"])
    seen: list[bytes] = []

    def consume_until(expected: set[bytes]) -> None:
        deadline = time.monotonic() + 60
        while not expected <= set(seen) and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                seen.append(msg.value())
        assert expected <= set(seen), f"{len(expected - set(seen))} records not consumed"

    before = write("before", 30)
    consume_until(before)
    consumer.commit(asynchronous=False)
    coordinator = cluster.coordinator("g-moving")
    assert coordinator in (1, 2, 3)
    cluster.crash(coordinator)
    wait_for(lambda: cluster.coordinator("g-moving") not in (-1, coordinator), "a new coordinator")
    after = write("after", 30)
    consume_until(before | after)
    deadline = time.monotonic() + 30
    while True:  # the commit reaches the new coordinator once the client has found it
        try:
            committed = consumer.commit(asynchronous=False)
            break
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            consumer.poll(0.2)
    assert committed is not None and all(tp.error is None for tp in committed)
    consumer.close()
    assert len(seen) == len(set(seen)) == 60  # nothing consumed twice, nothing lost

    cluster.start_broker(coordinator)
    later = write("later", 10)  # a new member of the group starts at the committed offsets
    assert set(read_all(cluster, "moving", "g-moving", **{"group.protocol": protocol})) == later


def test_transactions_commit_and_abort_through_crashes_of_the_transaction_coordinator(
        cluster: ClusterThread) -> None:
    create(cluster, "txn-moving", partitions=2, **{"min.insync.replicas": "2"})
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "t-moving",
                         "transaction.timeout.ms": 30000})
    producer.init_transactions(30)
    committed: list[bytes] = []
    for n, commit in ((0, True), (1, False), (2, True)):
        values = [f"t{n}-p{p}-{i}".encode() for p in range(2) for i in range(3)]
        producer.begin_transaction()
        for value in values[:3]:
            producer.produce("txn-moving", value=value, partition=0)
        producer.flush(30)
        coordinator = cluster.coordinator("t-moving", "transaction")
        cluster.crash(coordinator)  # the transaction is Ongoing in the coordinator's replicated log
        wait_for(lambda c=coordinator: cluster.coordinator("t-moving", "transaction") not in (-1, c),
                 "a new transaction coordinator")
        for value in values[3:]:
            producer.produce("txn-moving", value=value, partition=1)
        producer.flush(30)
        if commit:
            producer.commit_transaction(60)
            committed += values
        else:
            producer.abort_transaction(60)
        cluster.start_broker(coordinator)
        wait_for(lambda: all(len(cluster.state("__transaction_state", p).isr) == 3 for p in range(6)),
                 "the transaction log's ISRs to be whole again")
    read = read_all(cluster, "txn-moving", "rc-moving", **{"isolation.level": "read_committed"})
    assert sorted(read) == sorted(committed)


def test_offsets_sent_to_a_transaction_are_committed_through_a_crash_of_the_group_coordinator(
        cluster: ClusterThread) -> None:
    create(cluster, "ctp-in", **{"min.insync.replicas": "2"})
    create(cluster, "ctp-out", **{"min.insync.replicas": "2"})
    source = Producer({"bootstrap.servers": cluster.bootstrap})
    for i in range(10):
        source.produce("ctp-in", value=f"in-{i}".encode())
    assert source.flush(30) == 0
    first_lookup(cluster, "g-ctp", 0)  # the offsets topic exists: the group has a coordinator to crash
    group_coordinator = cluster.coordinator("g-ctp")
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "t-ctp"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(10):
        producer.produce("ctp-out", value=f"out-{i}".encode())
    producer.flush(30)
    cluster.crash(group_coordinator)  # the offsets' partition moves before they are sent
    wait_for(lambda: cluster.coordinator("g-ctp") not in (-1, group_coordinator), "a new group coordinator")
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "g-ctp"})
    producer.send_offsets_to_transaction([TopicPartition("ctp-in", 0, 10)], consumer.consumer_group_metadata(), 60)
    producer.commit_transaction(60)
    committed = consumer.committed([TopicPartition("ctp-in", 0)], 30)
    consumer.close()
    assert committed[0].offset == 10
    assert sorted(read_all(cluster, "ctp-out", "rc-ctp", **{"isolation.level": "read_committed"})) == sorted(
        f"out-{i}".encode() for i in range(10))


def test_kafka_python_group_and_transactions_follow_their_coordinators_through_crashes(
        cluster: ClusterThread) -> None:
    """kafka-python's consumer commits through a crash of its group coordinator, and its
    transactional producer commits through a crash of its transaction coordinator."""
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTopicPartition

    create(cluster, "kp-moving", partitions=2, **{"min.insync.replicas": "2"})
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, transactional_id="t-kp", acks="all")
    producer.init_transactions()
    producer.begin_transaction()
    for i in range(10):
        producer.send("kp-moving", value=f"kp-{i}".encode(), partition=i % 2)
    producer.flush(30)
    txn_coordinator = cluster.coordinator("t-kp", "transaction")
    cluster.crash(txn_coordinator)
    wait_for(lambda: cluster.coordinator("t-kp", "transaction") not in (-1, txn_coordinator),
             "a new transaction coordinator")
    # kafka-python 3.0.12 drops a transactional request whose coordinator refuses the connection
    # (Sender._maybe_send_transactional_request: await_ready raises, and the request is neither
    # sent nor retried), so the old coordinator's broker is back, now answering NOT_COORDINATOR,
    # before the commit; the transaction's state is on the new coordinator.
    cluster.start_broker(txn_coordinator)
    producer.commit_transaction()
    producer.close(30)

    consumer = KafkaConsumer("kp-moving", bootstrap_servers=cluster.bootstrap, group_id="g-kp",
                             auto_offset_reset="earliest", enable_auto_commit=False, isolation_level="read_committed")
    seen: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(seen) < 10 and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=200).values():
            seen += [r.value for r in records]
    assert sorted(seen) == sorted(f"kp-{i}".encode() for i in range(10))
    group_coordinator = cluster.coordinator("g-kp")
    cluster.crash(group_coordinator)
    wait_for(lambda: cluster.coordinator("g-kp") not in (-1, group_coordinator), "a new group coordinator")
    deadline = time.monotonic() + 30
    while True:  # kafka-python raises on the dead coordinator, then finds the new one
        try:
            consumer.commit()
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            consumer.poll(timeout_ms=200)
    # five records and the COMMIT marker on each partition: the position is past the marker
    assert {p: consumer.committed(KTopicPartition("kp-moving", p)) for p in (0, 1)} == {0: 6, 1: 6}
    consumer.close()


def test_consumer_group_describe_names_topics_the_coordinator_has_no_replica_of(cluster: ClusterThread) -> None:
    """KIP-848 assignments name topic ids; ConsumerGroupDescribe adds their names from the cluster's
    topics, also for a topic whose replicas are all on other brokers than the coordinator's."""
    _, coordinator = first_lookup(cluster, "g-far", 0)
    others = [n for n in (1, 2, 3) if n != coordinator]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("far", 2, replica_assignment=[others, others])])["far"].result(30)
    tid = cluster.call(lambda: cluster.cluster.controller.topics["far"].topic_id)
    with RawClient(cluster.address(coordinator)) as client:
        wait_for(lambda: join(client, "g-far", "m1", ["far"]).error_code == ErrorCode.NONE,
                 "the coordinator to load the group and take the member")
        [group] = describe_group(client, "g-far")
    assert group.error_code == ErrorCode.NONE
    [member] = group.members
    named = [(tp.topic_id, tp.topic_name, sorted(tp.partitions)) for tp in member.target_assignment.topic_partitions]
    assert named == [(tid, "far", [0, 1])]
