"""A cluster broker keeps its replicas' high watermarks in ``replication-offset-checkpoint`` and a
restarted replica starts from them (Kafka: min(checkpoint, log end)), not from its log end.

A real client writes to a 3-broker cluster; one follower is cut off from the other brokers so the
leader cannot commit what it writes next with acks=1; the other follower copies those records
(its log end is above the high watermark). That follower is stopped cleanly, then crashed, and
each time started again while cut off from its leader: its high watermark must be the committed
one, not its log end. Healed, the cluster commits everything and every replica learns it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from minikafka.storage.checkpoints import read_offset_checkpoint
from minikafka.testkit import MiniKafkaCluster
from tests.cluster.test_cluster_failover import wait_for


def produce(bootstrap: str, topic: str, acks: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0})
    errors: list[Any] = []
    for value in values:
        producer.produce(topic, value=value, partition=0, on_delivery=lambda e, m: e and errors.append(e))
    assert producer.flush(30) == 0 and not errors, errors


def offsets(kafka: MiniKafkaCluster, node: int, topic: str, partition: int = 0) -> tuple[int, int] | None:
    """(high watermark, log end) of broker ``node``'s replica, while it runs."""
    plog = kafka.control.local_log(node, topic, partition)
    return None if plog is None else (plog.high_watermark, plog.log_end_offset)


def checkpointed(kafka: MiniKafkaCluster, node: int, topic: str) -> int | None:
    return read_offset_checkpoint(Path(kafka.data_dir) / f"node-{node}" / "replication-offset-checkpoint").get((topic, 0))


def test_a_restarted_follower_keeps_the_committed_high_watermark_clean_or_crashed() -> None:
    config = {"replica.lag.time.max.ms": 60000, "replica.high.watermark.checkpoint.interval.ms": 50,
              "auto.leader.rebalance.enable": False}
    with MiniKafkaCluster(brokers=3, config=config) as kafka:
        topic = kafka.new_topic(partitions=1, replication_factor=3)
        leader = kafka.leader(topic)
        ahead, cut = (n for n in kafka.brokers if n != leader)
        produce(kafka.bootstrap, topic, "all", [b"committed-%d" % i for i in range(10)])
        wait_for(lambda: all(offsets(kafka, n, topic) == (10, 10) for n in kafka.brokers), "every replica at 10")

        kafka.isolate(cut, "brokers")  # stays in the ISR (lag time 60 s): nothing more is committed
        produce(kafka.bootstrap, topic, "1", [b"uncommitted-%d" % i for i in range(5)])
        wait_for(lambda: offsets(kafka, ahead, topic) == (10, 15), "the follower copying the uncommitted records")
        wait_for(lambda: checkpointed(kafka, ahead, topic) == 10, "the periodic checkpoint")
        assert offsets(kafka, leader, topic) == (10, 15)

        kafka.shutdown(ahead)
        assert checkpointed(kafka, ahead, topic) == 10
        kafka.isolate(ahead, "brokers")  # started again, it cannot hear from its leader
        kafka.start_broker(ahead)
        assert offsets(kafka, ahead, topic) == (10, 15)

        kafka.crash(ahead)
        kafka.start_broker(ahead)
        assert offsets(kafka, ahead, topic) == (10, 15)

        kafka.heal(ahead)
        kafka.heal(cut)
        wait_for(lambda: all(offsets(kafka, n, topic) == (15, 15) for n in kafka.brokers), "every replica at 15")
        wait_for(lambda: all(checkpointed(kafka, n, topic) == 15 for n in kafka.brokers), "every checkpoint at 15")
