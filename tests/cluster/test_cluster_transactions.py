"""Transactions on a cluster: a transaction's partitions are led by different brokers, its markers
go to each partition's leader, and read_committed consumers see committed records only, through
the crash of a partition leader."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from minikafka.broker.embedded import ClusterThread
from tests.cluster.test_cluster_admin import create as create_placed
from tests.cluster.test_cluster_failover import create, read_all, wait_for


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterThread]:
    with ClusterThread(brokers=3, data_dir=str(tmp_path / "cluster"), config={"replica.lag.time.max.ms": 3000}) as c:
        yield c


def transactional(cluster: ClusterThread, tid: str) -> Producer:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": tid,
                         "transaction.timeout.ms": 20000})
    producer.init_transactions(30)
    return producer


def test_committed_and_aborted_transactions_over_partitions_led_by_different_brokers(
        cluster: ClusterThread) -> None:
    create(cluster, "txn", partitions=3, **{"min.insync.replicas": "2"})
    assert {cluster.leader("txn", p) for p in range(3)} == {1, 2, 3}
    producer = transactional(cluster, "mover")
    for n, commit in ((0, True), (1, False), (2, True)):
        producer.begin_transaction()
        for p in range(3):
            producer.produce("txn", value=f"t{n}-p{p}".encode(), partition=p)
        producer.flush(30)  # written to every leader before the outcome (abort would purge unsent ones)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    committed = read_all(cluster, "txn", "rc", **{"isolation.level": "read_committed"})
    assert sorted(committed) == sorted(f"t{n}-p{p}".encode() for n in (0, 2) for p in range(3))
    everything = read_all(cluster, "txn", "ru", **{"isolation.level": "read_uncommitted"})
    assert len(everything) == 9


def test_a_transaction_writes_to_topics_with_no_replica_on_the_coordinators_broker(cluster: ClusterThread) -> None:
    """The transaction coordinator adds partitions of topics that have no replica on its own broker
    (librdkafka's test 0129 on three brokers stalled on them with UNKNOWN_TOPIC_OR_PARTITION)."""
    topics = [f"only-on-{node}" for node in (1, 2, 3)]  # whichever broker coordinates, two are elsewhere
    for node, topic in enumerate(topics, 1):
        create_placed(cluster, topic, [[node]])
    producer = transactional(cluster, "spreader")
    producer.begin_transaction()
    for topic in topics:
        producer.produce(topic, value=topic.encode())
    assert producer.flush(20) == 0
    producer.commit_transaction(20)
    for topic in topics:
        assert read_all(cluster, topic, "rc", **{"isolation.level": "read_committed"}) == [topic.encode()]


def test_a_transaction_commits_through_the_crash_of_a_partition_leader(cluster: ClusterThread) -> None:
    create(cluster, "txn2", partitions=2, **{"min.insync.replicas": "2"})
    victim = next(cluster.leader("txn2", p) for p in range(2) if cluster.leader("txn2", p) != 1)
    producer = transactional(cluster, "survivor")
    producer.begin_transaction()
    for p in range(2):
        producer.produce("txn2", value=f"before-{p}".encode(), partition=p)
    producer.flush(30)
    cluster.crash(victim)  # its partitions get new leaders; the markers must find them
    for p in range(2):
        producer.produce("txn2", value=f"after-{p}".encode(), partition=p)
    producer.commit_transaction(60)
    cluster.start_broker(victim)
    wait_for(lambda: all(len(cluster.state("txn2", p).isr) == 3 for p in range(2)), "the ISRs to be whole again")
    committed = read_all(cluster, "txn2", "rc", **{"isolation.level": "read_committed"})
    assert sorted(committed) == sorted([b"before-0", b"before-1", b"after-0", b"after-1"])
