"""The consume-transform-produce writer through librdkafka's wait for a decommissioned group
coordinator (https://github.com/confluentinc/librdkafka/issues/5511): when the broker that
coordinates the group crashes, the controller fences it and Metadata no longer lists it, so
librdkafka 2.16 decommissions it but keeps it cached as the group's coordinator; the next
``send_offsets_to_transaction`` (after AddOffsetsToTxn, answered by the transaction coordinator on
another broker) waits for that broker to come up, past its timeout, until some other connection of
the producer changes state. Found by the cluster chaos run of seed 51 (a 51 s wait from a crash
of the group coordinator's broker until a controlled shutdown of another broker). The writer gives
the call its timeout and a grace period, records the transaction unknown and goes on with a new
producer, which fences the stuck one."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, TopicPartition

from bench.chaos.history import OK, UNKNOWN, History, Rec
from bench.chaos.workload import CLIENT_CONFIG, STUCK_GRACE_SECONDS, Process, Transactions
from minikafka.broker.internal_records import partition_for
from minikafka.testkit import MiniKafkaCluster

TOPIC = "ctp-stuck"
CALL_TIMEOUT = 3.0


def test_a_producer_stuck_on_a_decommissioned_group_coordinator_is_replaced() -> None:
    with MiniKafkaCluster(brokers=3, config={"offsets.topic.num.partitions": 3,
                                             "transaction.state.log.num.partitions": 3}) as cluster:
        cluster.create_topic(TOPIC, 1, 3)
        process = Process("x0", cluster.bootstrap, TOPIC, 1, History(), 0, 0.0, run_id="stuck")
        txns = Transactions(process, "ctp-stuck-txn", call_timeout=CALL_TIMEOUT)
        consumer = Consumer({**CLIENT_CONFIG, "bootstrap.servers": cluster.bootstrap, "group.id": "ctp-stuck"})
        metadata = consumer.consumer_group_metadata()

        def transaction(n: int) -> tuple[str, str]:
            outcome, _, info = txns.run([Rec(TOPIC, 0, f"v{n}")], False, [TopicPartition(TOPIC, 0, n)], metadata)
            return outcome, info

        assert transaction(1) == (OK, "")  # the producer now holds the group's coordinator
        group_coordinator = cluster.coordinator("ctp-stuck")
        txn_coordinator = cluster.coordinator("ctp-stuck-txn", "transaction")
        others = [n for n in cluster.brokers if n != group_coordinator]
        if txn_coordinator == group_coordinator:  # the transaction coordinator must survive the crash
            cluster.move_leader("__transaction_state", partition_for("ctp-stuck-txn", 3), others[0])
        if cluster.leader(TOPIC, 0) == group_coordinator:
            cluster.move_leader(TOPIC, 0, others[0])
        assert transaction(2) == (OK, "")
        stuck = txns.producer
        assert stuck is not None
        cluster.crash(group_coordinator)
        stuck.list_topics(timeout=10)  # Metadata without the crashed broker: librdkafka decommissions it
        started = time.monotonic()
        outcome, info = transaction(3)
        took = time.monotonic() - started
        assert (outcome, "did not return" in info) == (UNKNOWN, True), info
        assert CALL_TIMEOUT + STUCK_GRACE_SECONDS - 0.5 < took < CALL_TIMEOUT + STUCK_GRACE_SECONDS + 5
        assert txns.producer is None  # the next transaction starts a new producer, which fences it
        assert transaction(4) == (OK, "")
        committed = consumer.committed([TopicPartition(TOPIC, 0)], 30)
        consumer.close()
        assert committed[0].offset == 4
        txns.close()
