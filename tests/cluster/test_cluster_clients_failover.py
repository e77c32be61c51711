"""kafka-python and aiokafka against a cluster in a box (3 brokers, RF 3, ``min.insync.replicas=2``)
through leader crashes, as tests/cluster/test_cluster_failover.py and test_cluster_transactions.py do
with confluent-kafka: an idempotent acks=all producer loses and repeats nothing through five leader
crashes, writes are refused with NOT_ENOUGH_REPLICAS while two brokers are down and accepted after,
and transactions commit and abort through the crash of a partition leader (confluent-kafka too: its
cluster tests do not abort through a crash).

One cluster serves the module (each test makes its own topic and leaves every broker up); a test
that failed half-way leaves it whole again for the next through the ``cluster`` fixture."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka.errors import NotEnoughReplicasError as AiokafkaNotEnoughReplicas
from kafka.errors import NotEnoughReplicasError as KafkaPythonNotEnoughReplicas
from kafka.protocol.metadata import MetadataRequest

from minikafka.broker.embedded import ClusterThread
from minikafka.errors import ErrorCode
from minikafka.testkit import MiniKafkaCluster
from tests.client_helpers import ALL_CLIENTS, PYTHON_CLIENTS
from tests.kafka_wire import RawClient

#: Kafka's topic settings for these tests: every record on all three brokers, two needed for acks=all
STRICT = {"min.insync.replicas": "2"}


@pytest.fixture(scope="module")
def kafka() -> Iterator[MiniKafkaCluster]:
    with MiniKafkaCluster(brokers=3, config={"replica.lag.time.max.ms": 3000}) as cluster:
        yield cluster


@pytest.fixture
def cluster(kafka: MiniKafkaCluster) -> MiniKafkaCluster:
    """The module's cluster with every broker up and reachable."""
    for node in kafka.brokers:
        kafka.heal(node)
        kafka.start_broker(node)
    return kafka


@pytest.fixture(params=sorted(PYTHON_CLIENTS))
def client(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def offsets(results: list[Any]) -> list[int]:
    """The acknowledged offsets; fails on any record the client reported as not written."""
    errors = [r for r in results if not isinstance(r, int)]
    assert errors == [], errors[:3]
    return results


def test_an_idempotent_acks_all_producer_writes_through_five_leader_crashes_exactly_once(
        cluster: MiniKafkaCluster, client: str) -> None:
    topic = cluster.new_topic(1, 3, STRICT)
    producer = PYTHON_CLIENTS[client](cluster.bootstrap, enable_idempotence=True, acks="all")
    values: list[bytes] = []
    handles: list[Any] = []
    epochs = []

    def send(count: int) -> None:
        for _ in range(count):
            values.append(f"v{len(values)}".encode())
            handles.append(producer.send(topic, values[-1], 0))

    try:
        for _ in range(5):
            send(40)  # in flight while the leader crashes
            leader = cluster.leader(topic)
            cluster.crash(leader)
            epochs.append(cluster.partition(topic)["leader_epoch"])
            send(40)
            offsets(producer.outcomes(handles))
            cluster.start_broker(leader)
            cluster.wait_until_in_sync(topic)
        acked = dict(zip(offsets(producer.outcomes(handles)), values, strict=True))
        in_log = producer.read_to_end(topic, 1)
    finally:
        producer.close()
    assert epochs == sorted(set(epochs))  # every crash elected a new leader
    assert len(acked) == len(values) == 400  # 400 acknowledgements at 400 distinct offsets
    assert {r.offset: r.value for r in in_log} == acked and len(in_log) == len(acked)


#: a producer that reports NOT_ENOUGH_REPLICAS instead of retrying until the brokers return:
#: kafka-python with no retries; aiokafka retries until its batch expires (request_timeout_ms)
NO_RETRIES = {"kafka-python": {"enable_idempotence": False, "acks": "all", "retries": 0},
              "aiokafka": {"enable_idempotence": False, "acks": "all", "request_timeout_ms": 2000}}
NOT_ENOUGH_REPLICAS = {"kafka-python": KafkaPythonNotEnoughReplicas, "aiokafka": AiokafkaNotEnoughReplicas}


def test_writes_are_refused_with_not_enough_replicas_while_two_brokers_are_down_and_accepted_after(
        cluster: MiniKafkaCluster, client: str) -> None:
    topic = cluster.new_topic(1, 3, STRICT)
    leader = cluster.leader(topic)
    others = [n for n in cluster.brokers if n != leader]
    refusing = PYTHON_CLIENTS[client](cluster.bootstrap, **NO_RETRIES[client])
    patient = PYTHON_CLIENTS[client](cluster.bootstrap, enable_idempotence=True, acks="all")
    try:
        # each has the topic's metadata and a connection to its leader before the others crash
        assert refusing.outcomes([refusing.send(topic, b"first", 0)]) == [0]
        assert patient.outcomes([patient.send(topic, b"second", 0)]) == [1]
        for node in others:
            cluster.crash(node)
        assert cluster.isr(topic) == [leader]
        waiting = patient.send(topic, b"accepted once they are back", 0)  # retried while refused
        [refused] = refusing.outcomes([refusing.send(topic, b"refused", 0)], timeout=30)
        assert isinstance(refused, NOT_ENOUGH_REPLICAS[client]), repr(refused)
        assert [r["log_end_offset"] for r in cluster.partition(topic)["replica_offsets"]] == [2]  # nothing written
        for node in others:
            cluster.start_broker(node)
        assert patient.outcomes([waiting]) == [2]
        assert refusing.outcomes([refusing.send(topic, b"accepted", 0)]) == [3]
        in_log = refusing.read_to_end(topic, 1)
    finally:
        refusing.close()
        patient.close()
    assert [r.value for r in in_log] == [b"first", b"second", b"accepted once they are back", b"accepted"]


@pytest.mark.parametrize("client", sorted(ALL_CLIENTS))
def test_transactions_commit_and_abort_through_the_crash_of_a_partition_leader(
        cluster: MiniKafkaCluster, client: str) -> None:
    topic = cluster.new_topic(2, 3, STRICT)
    cluster.move_leader(topic, 0, 2)  # the partitions led by two different brokers
    cluster.move_leader(topic, 1, 3)
    txn_id = f"{client}-{uuid.uuid4().hex[:8]}"
    producer = ALL_CLIENTS[client](cluster.bootstrap, transactional_id=txn_id)
    sent: dict[str, list[bytes]] = {}

    def write(tag: str) -> None:
        """Three records to each partition, acknowledged before the test goes on."""
        records = [(p, f"{tag}-p{p}-{i}".encode()) for p in range(2) for i in range(3)]
        sent[tag] = [value for _, value in records]
        offsets(producer.outcomes([producer.send(topic, value, p) for p, value in records]))

    def crash_a_partition_leader() -> int:
        """A leader of the topic's that is not the transaction coordinator's broker (its crash is
        tests/cluster/test_cluster_coordinators.py's; kafka-python 3.0.12 loses a transactional
        request whose coordinator refuses the connection)."""
        coordinator = cluster.coordinator(txn_id, "transaction")
        if all(cluster.leader(topic, p) == coordinator for p in range(2)):  # both moved there meanwhile
            cluster.move_leader(topic, 0, next(n for n in cluster.isr(topic, 0) if n != coordinator))
        victim = next(n for n in (cluster.leader(topic, p) for p in range(2)) if n != coordinator)
        cluster.crash(victim)
        return victim

    try:
        producer.init_transactions()
        producer.begin_transaction()
        write("committed-before")
        victim = crash_a_partition_leader()  # its partition moves; the markers must reach the new leader
        write("committed-after")
        producer.commit_transaction()
        cluster.start_broker(victim)
        for p in range(2):
            cluster.wait_until_in_sync(topic, p)
        producer.begin_transaction()
        write("aborted")
        victim = crash_a_partition_leader()
        producer.abort_transaction()
        cluster.start_broker(victim)
        producer.begin_transaction()
        write("committed-last")
        producer.commit_transaction()
        committed = producer.read_to_end(topic, 2, isolation_level="read_committed")
        everything = producer.read_to_end(topic, 2)
    finally:
        producer.close()
    expected = sent["committed-before"] + sent["committed-after"] + sent["committed-last"]
    assert sorted(r.value for r in committed) == sorted(expected)  # each once, nothing aborted
    assert sorted(r.value for r in everything) == sorted(expected + sent["aborted"])  # the aborted ones were written


def test_metadata_names_no_leader_it_does_not_list_as_a_broker(tmp_path: Path) -> None:
    """Between a leader's crash and its fencing, Metadata listed the partition's leader but not the
    broker: kafka-python's producer then failed on every send to the unknown broker id, with no
    metadata refresh (the leader was known), until its metadata aged out. Kafka shows a leader
    without a live endpoint as none, with LEADER_NOT_AVAILABLE."""
    with ClusterThread(brokers=3, data_dir=str(tmp_path / "cluster")) as cluster:
        cluster.call(cluster.cluster.controller.create_topic, "t", 1, 3, None, {})
        leader = cluster.leader("t", 0)
        other = next(n for n in (1, 2, 3) if n != leader)
        cluster.call(cluster.cluster.brokers[leader].stop, False)  # gone, not fenced yet
        down = _metadata(cluster.address(other), "t")
        assert leader not in {b.node_id for b in down.brokers}
        part = down.topics[0].partitions[0]
        assert (part.error_code, part.leader_id) == (ErrorCode.LEADER_NOT_AVAILABLE, -1)
        cluster.call(cluster.cluster.controller.fence, leader)
        part = _metadata(cluster.address(other), "t").topics[0].partitions[0]
        assert part.error_code == 0 and part.leader_id == cluster.leader("t", 0) != leader


def _metadata(address: str, topic: str) -> Any:
    Request = MetadataRequest[12]
    with RawClient(address) as client:
        return client.request(Request(topics=[Request.MetadataRequestTopic(name=topic, topic_id=None)],
                                      allow_auto_topic_creation=False, include_topic_authorized_operations=False))
