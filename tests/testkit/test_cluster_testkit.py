"""The test kit's cluster from Python: MiniKafkaCluster's controls, isolating a broker from the
other brokers or from clients (seen by real clients and raw requests), and the pytest fixture
``minikafka_cluster`` run through pytester."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer

from minikafka.errors import ErrorCode
from minikafka.testkit import MiniKafkaCluster
from tests.kafka_wire import RawClient, build_batch
from tests.scenario_helpers import produce

pytest_plugins = ["pytester"]

LAG_MS = 1500


@pytest.fixture
def kafka() -> Iterator[MiniKafkaCluster]:
    with MiniKafkaCluster(brokers=3, config={"replica.lag.time.max.ms": LAG_MS}) as cluster:
        yield cluster


def wait_for(condition: Callable[[], Any], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def read_all(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while len(values) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
    finally:
        consumer.close()
    return values


def test_controls_crash_restart_shutdown_and_move_the_leader(kafka: MiniKafkaCluster) -> None:
    topic = kafka.new_topic(partitions=1, replication_factor=3, config={"min.insync.replicas": "2"})
    assert kafka.brokers == [1, 2, 3] and kafka.topics() == {topic: 1}
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "acks": "all", "linger.ms": 0})
    leader = kafka.leader(topic)
    kafka.crash(leader)
    assert kafka.leader(topic) not in (leader, -1) and leader not in kafka.isr(topic)
    producer.produce(topic, value=b"while one is down")
    assert producer.flush(30) == 0
    kafka.start_broker(leader)
    kafka.wait_until_in_sync(topic)
    assert kafka.move_leader(topic, 0, leader)["leader"] == leader
    kafka.shutdown(leader)  # controlled: leadership moves first
    assert kafka.leader(topic) != leader
    kafka.restart(leader, clean=False)
    kafka.wait_until_in_sync(topic)
    assert kafka.describe()["brokers"][leader - 1]["state"] == "active"
    assert read_all(kafka.bootstrap, topic, 1) == [b"while one is down"]
    follower = next(n for n in kafka.brokers if n != kafka.leader(topic))
    kafka.crash(follower)
    with pytest.raises(ValueError, match="not an active in-sync replica"):
        kafka.move_leader(topic, 0, follower)


def test_a_follower_cut_off_from_the_brokers_leaves_the_isr_and_rejoins_when_healed(kafka: MiniKafkaCluster) -> None:
    topic = kafka.new_topic(partitions=1, replication_factor=3)
    leader = kafka.leader(topic)
    follower = next(n for n in kafka.brokers if n != leader)
    kafka.isolate(follower, "brokers")
    assert kafka.describe()["brokers"][follower - 1]["isolated"] == "brokers"
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "acks": "1", "linger.ms": 0})
    producer.produce(topic, value=b"one")
    assert producer.flush(30) == 0
    wait_for(lambda: follower not in kafka.isr(topic), f"broker {follower} out of the ISR", timeout=LAG_MS / 1000 + 20)
    offsets = {r["broker"]: r["log_end_offset"] for r in kafka.partition(topic)["replica_offsets"]}
    assert offsets[follower] == 0 and offsets[leader] == 1  # its fetches fail: it did not get the record
    kafka.heal(follower)
    kafka.wait_until_in_sync(topic)
    assert {r["log_end_offset"] for r in kafka.partition(topic)["replica_offsets"]} == {1}


def test_a_leader_cut_off_from_its_followers_refuses_acks_all_writes_below_min_isr(kafka: MiniKafkaCluster) -> None:
    topic = kafka.new_topic(partitions=1, replication_factor=3, config={"min.insync.replicas": "2"})
    leader = kafka.leader(topic)
    kafka.isolate(leader, "brokers")
    with RawClient(kafka.address(leader)) as client:  # clients still reach it; its followers cannot
        assert produce(client, topic, build_batch(value=b"only on the leader"), acks=1).error_code == 0
    wait_for(lambda: kafka.isr(topic) == [leader], "the isolated leader's ISR shrunk to itself",
             timeout=LAG_MS / 1000 + 20)
    with RawClient(kafka.address(leader)) as client:
        assert produce(client, topic, build_batch(value=b"refused")).error_code == ErrorCode.NOT_ENOUGH_REPLICAS
        assert produce(client, topic, build_batch(value=b"acks=1"), acks=1).error_code == 0
    kafka.heal(leader)
    kafka.wait_until_in_sync(topic)
    with RawClient(kafka.address(leader)) as client:
        assert produce(client, topic, build_batch(value=b"accepted")).error_code == 0


def test_a_broker_cut_off_from_clients_closes_their_connections_but_keeps_replicating(
        kafka: MiniKafkaCluster) -> None:
    topic = kafka.new_topic(partitions=1, replication_factor=3)
    leader = kafka.leader(topic)
    follower = next(n for n in kafka.brokers if n != leader)
    kafka.isolate(follower, "clients")
    with RawClient(kafka.address(follower)) as client, pytest.raises(ConnectionError):
        produce(client, topic, build_batch())
    with RawClient(kafka.address(leader)) as client:
        assert produce(client, topic, build_batch(value=b"replicated")).error_code == 0
    wait_for(lambda: {r["log_end_offset"] for r in kafka.partition(topic)["replica_offsets"]} == {1},
             "the client-isolated follower replicating")
    assert follower in kafka.isr(topic)
    kafka.heal(follower)
    with RawClient(kafka.address(follower)) as client:
        assert produce(client, topic, build_batch()).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    with pytest.raises(ValueError, match="expected one of"):
        kafka.isolate(follower, "moon")
    with pytest.raises(KeyError, match="no broker 7"):
        kafka.isolate(7)


def test_the_minikafka_cluster_fixture_and_its_marker(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(
        test_user="""
        import pytest
        from confluent_kafka import Producer


        def test_three_brokers_by_default(minikafka_cluster):
            assert minikafka_cluster.brokers == [1, 2, 3]
            assert len(minikafka_cluster.bootstrap.split(",")) == 3
            assert minikafka_cluster.admin_url is None


        @pytest.mark.minikafka_cluster(brokers=2, config={"default.replication.factor": 2}, admin_port=0)
        def test_marker_settings(minikafka_cluster):
            topic = minikafka_cluster.new_topic()
            assert sorted(minikafka_cluster.partition(topic)["replicas"]) == [1, 2]
            producer = Producer({"bootstrap.servers": minikafka_cluster.bootstrap, "acks": "all"})
            leader = minikafka_cluster.leader(topic)
            minikafka_cluster.crash(leader)
            producer.produce(topic, value=b"v")
            assert producer.flush(30) == 0
            assert minikafka_cluster.admin_url.startswith("http://127.0.0.1:")
            pytest.data_dir = minikafka_cluster.data_dir


        def test_its_data_dir_is_gone(minikafka_cluster):
            assert not pytest.data_dir.exists()
            assert minikafka_cluster.topics() == {}
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-W", "error",
                                           "-W", "ignore:read_text is deprecated:DeprecationWarning",
                                           "-W", "ignore:open_text is deprecated:DeprecationWarning")
    result.assert_outcomes(passed=3)
