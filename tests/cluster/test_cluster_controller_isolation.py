"""A broker cut off from the controller, as a KRaft broker cut off from the quorum: fenced once
``broker.session.timeout.ms`` passes, its partitions led elsewhere, and until it hears from the
controller again it still believes it leads them, a zombie. Its acks=1 writes are appended and
acknowledged, then lost when it truncates to the new leader's log; its acks=all writes never
commit, because the followers fetch from the new leader. Isolated from ``all``, a leader is failed
over the same way, and an idempotent producer's records are all there once.
"""

from __future__ import annotations

from typing import Any

from confluent_kafka import Producer

from minikafka.errors import ErrorCode
from minikafka.testkit import MiniKafkaCluster
from tests.client_helpers import kafka_python_read_to_end
from tests.cluster.test_cluster_failover import wait_for
from tests.kafka_wire import RawClient, build_batch, partition_response, produce_request

CONFIG = {"broker.session.timeout.ms": 500, "replica.lag.time.max.ms": 1000, "auto.leader.rebalance.enable": False}


def write(bootstrap: str, topic: str, values: list[bytes], **config: Any) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0} | config)
    errors: list[Any] = []
    for value in values:
        producer.produce(topic, value=value, partition=0, on_delivery=lambda e, m: e and errors.append(e))
    assert producer.flush(30) == 0 and not errors, errors


def produce_to(client: RawClient, topic: str, value: bytes, acks: int, timeout_ms: int = 5000) -> Any:
    request = produce_request(topic, 0, build_batch(value=value), acks=acks)
    request.timeout_ms = timeout_ms
    return partition_response(client.request(request))


def values_in(kafka: MiniKafkaCluster, topic: str) -> list[tuple[int, bytes]]:
    return [(r.offset, r.value) for r in kafka_python_read_to_end(kafka.bootstrap, topic, 1)]


def test_a_leader_cut_off_from_the_controller_is_a_zombie_until_it_hears_from_it_again() -> None:
    with MiniKafkaCluster(brokers=3, config=CONFIG) as kafka:
        topic = kafka.new_topic(1, 3, {"min.insync.replicas": "2"})
        zombie = kafka.leader(topic)
        committed = [b"committed-%d" % i for i in range(5)]
        write(kafka.bootstrap, topic, committed)
        epoch = kafka.partition(topic)["leader_epoch"]
        with RawClient(kafka.address(zombie)) as client:
            kafka.isolate(zombie, "controller")
            wait_for(lambda: kafka.leader(topic) not in (zombie, -1), "a new leader once the zombie's session expired")
            state = kafka.partition(topic)
            assert zombie not in state["isr"] and state["leader_epoch"] == epoch + 1
            assert kafka.describe()["brokers"][zombie - 1]["state"] == "fenced"

            # it still leads at the old epoch as far as it knows
            acks_1 = produce_to(client, topic, b"zombie-acks-1", acks=1)
            assert (acks_1.error_code, acks_1.base_offset) == (ErrorCode.NONE, 5)
            acks_all = produce_to(client, topic, b"zombie-acks-all", acks=-1, timeout_ms=300)
            assert acks_all.error_code == ErrorCode.REQUEST_TIMED_OUT  # appended at 6, never committed
            zombie_log = kafka.control.local_log(zombie, topic, 0)
            assert zombie_log is not None and zombie_log.log_end_offset == 7 and zombie_log.high_watermark == 5

        after = [b"after-%d" % i for i in range(3)]
        write(kafka.bootstrap, topic, after)  # to the new leader, which never had the zombie's records
        kafka.heal(zombie)
        kafka.wait_until_in_sync(topic)  # the zombie truncated to 5 and copied the new leader's records
        expected = list(enumerate(committed + after))
        assert values_in(kafka, topic) == expected
        wait_for(lambda: (log := kafka.control.local_log(zombie, topic, 0)) is not None and log.log_end_offset == 8,
                 "the zombie's replica at the new leader's log end")
        assert kafka.describe()["brokers"][zombie - 1]["state"] == "active"


def test_a_leader_isolated_from_everything_is_failed_over_and_an_idempotent_producer_writes_through() -> None:
    with MiniKafkaCluster(brokers=3, config=CONFIG) as kafka:
        topic = kafka.new_topic(1, 3, {"min.insync.replicas": "2"})
        leader = kafka.leader(topic)
        before = [b"before-%d" % i for i in range(20)]
        write(kafka.bootstrap, topic, before, **{"enable.idempotence": True})
        kafka.isolate(leader, "all")
        wait_for(lambda: kafka.leader(topic) not in (leader, -1), "a new leader once the isolated one's session expired")
        during = [b"during-%d" % i for i in range(20)]
        write(kafka.bootstrap, topic, during, **{"enable.idempotence": True})
        kafka.heal(leader)
        kafka.wait_until_in_sync(topic)
        assert values_in(kafka, topic) == list(enumerate(before + during))


def test_healed_before_its_session_expires_a_leader_keeps_leading_and_its_isr_change_is_sent_then() -> None:
    config = {**CONFIG, "broker.session.timeout.ms": 60000}
    with MiniKafkaCluster(brokers=3, config=config) as kafka:
        topic = kafka.new_topic(1, 3, {"min.insync.replicas": "2"})
        leader = kafka.leader(topic)
        epoch = kafka.partition(topic)["leader_epoch"]
        lagging, other = (n for n in kafka.brokers if n != leader)
        write(kafka.bootstrap, topic, [b"one"])
        replicas = kafka.control.cluster.brokers[leader].replicas
        assert replicas is not None
        kafka.isolate(leader, "controller")
        kafka.isolate(lagging, "brokers")
        write(kafka.bootstrap, topic, [b"two"], acks="1")  # the lagging follower never fetches it
        # after the lag time the leader drops it from the ISR, but the controller is out of reach:
        # the change waits, and the controller's ISR stays whole
        wait_for(lambda: sorted(replicas.leading[(topic, 0)].pending_isr or ()) == sorted([leader, other]),
                 "the leader's waiting ISR change", timeout=10)
        assert sorted(kafka.isr(topic)) == sorted(kafka.brokers)
        assert kafka.describe()["brokers"][leader - 1]["state"] == "active"

        kafka.heal(leader)
        kafka.wait_for_isr(topic, [leader, other], timeout=10)  # asked again, and accepted
        kafka.heal(lagging)
        kafka.wait_until_in_sync(topic)
        assert (kafka.leader(topic), kafka.partition(topic)["leader_epoch"]) == (leader, epoch)
        assert values_in(kafka, topic) == [(0, b"one"), (1, b"two")]


def test_a_broker_started_while_cut_off_stays_fenced_until_it_reaches_the_controller() -> None:
    with MiniKafkaCluster(brokers=3, config=CONFIG) as kafka:
        topic = kafka.new_topic(1, 3, {"min.insync.replicas": "2"})
        follower = next(n for n in kafka.brokers if n != kafka.leader(topic))
        kafka.isolate(follower, "controller")
        kafka.crash(follower)
        kafka.start_broker(follower)
        assert kafka.describe()["brokers"][follower - 1]["state"] == "fenced"
        assert follower not in kafka.isr(topic)
        kafka.heal(follower)
        assert kafka.describe()["brokers"][follower - 1]["state"] == "active"
        write(kafka.bootstrap, topic, [b"x"])
        kafka.wait_until_in_sync(topic)
