"""The cluster nemesis's ``unclean-election`` on three real brokers, and the watcher that records
it: the lagging replica is elected, and the log end offset recorded for it is where the records
only the old leader had begin (none of those survives; everything below it does)."""

from __future__ import annotations

import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition

from bench.chaos.nemesis import ClusterTarget, Fault
from bench.chaos.workload import CLIENT_CONFIG
from minikafka.testkit import MiniKafkaCluster

TOPIC = "chaos-watched"


def test_an_unclean_election_is_made_and_recorded_with_the_new_leaders_log_end() -> None:
    with MiniKafkaCluster(brokers=3, config={"replica.lag.time.max.ms": 1000}) as cluster:
        cluster.create_topic(TOPIC, 1, 3, config={"unclean.leader.election.enable": "true"})
        target = ClusterTarget(cluster, unclean=True, out_of_sync_within=15.0)
        before = cluster.partition(TOPIC, 0)
        acked: dict[str, tuple[int, float]] = {}
        stop = threading.Event()

        def produce() -> None:
            producer = Producer({**CLIENT_CONFIG, "bootstrap.servers": cluster.bootstrap, "acks": "all",
                                 "linger.ms": 1, "message.timeout.ms": 5000})

            def report(err: object, msg: object) -> None:
                if err is None:
                    acked[msg.value().decode()] = (msg.offset(), time.monotonic())  # type: ignore[attr-defined]

            n = 0
            while not stop.is_set():
                n += 1
                producer.produce(TOPIC, value=f"v{n}".encode(), partition=0, on_delivery=report)
                producer.poll(0.02)
            producer.flush(10)

        writer = threading.Thread(target=produce)
        writer.start()
        try:
            fault = Fault(0.0, "unclean-election", 0.5, {"pick": 0})
            crashed = target.apply(fault)
            assert isinstance(crashed, list) and len(crashed) == 2, crashed
            deadline = time.monotonic() + 10
            elections = target.elections()
            while not elections and time.monotonic() < deadline:
                time.sleep(0.05)
                elections += target.elections()
            target.undo(fault, crashed)
        finally:
            stop.set()
            writer.join(30)
        [election] = elections
        lagging = next(n for n in before["replicas"] if n not in crashed)
        assert (election.topic, election.partition, election.new_leader, election.exact) == (TOPIC, 0, lagging, True)
        assert election.old_leader in crashed and election.old_leader_end is not None
        assert election.new_leader_end < election.old_leader_end
        lost_before = [v for v, (offset, at) in acked.items() if offset >= election.new_leader_end and at < election.before]
        assert lost_before, "the old leader acknowledged writes the lagging replica lacked"

        cluster.wait_until_in_sync(TOPIC, 0, timeout=30)
        consumer = Consumer({**CLIENT_CONFIG, "bootstrap.servers": cluster.bootstrap, "group.id": "watch",
                             "enable.partition.eof": True, "auto.offset.reset": "earliest"})
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        final: dict[int, str] = {}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                break  # the end of the partition
            final[message.offset()] = message.value().decode()
        consumer.close()
        kept = {v for v, (offset, _) in acked.items() if offset < election.new_leader_end}
        assert kept <= set(final.values())  # everything the new leader had survives
        assert not set(lost_before) & set(final.values())  # nothing only the old leader had
