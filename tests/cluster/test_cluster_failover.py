"""A cluster in a box under failures, seen by real clients and over raw requests: leaders crash and
come back, followers catch up and rejoin the ISR, acks=all survives failover exactly once,
min.insync.replicas refuses writes, and an unclean election loses exactly the old leader's tail."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from minikafka.broker.embedded import ClusterThread
from minikafka.errors import ErrorCode
from tests.kafka_wire import RawClient, build_batch
from tests.scenario_helpers import fetch_raw, produce
from tests.storage_helpers import kafka_batches


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterThread]:
    with ClusterThread(brokers=3, data_dir=str(tmp_path / "cluster"), config={"replica.lag.time.max.ms": 3000}) as c:
        yield c


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def create(cluster: ClusterThread, topic: str, partitions: int = 1, rf: int = 3, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, rf, config=configs)]).values():
        future.result(30)


def read_all(cluster: ClusterThread, topic: str, group: str, **extra: Any) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.partition.eof": True, **extra})
    consumer.subscribe([topic])
    return drain(consumer, topic, cluster.call(lambda: cluster.cluster.controller.topics[topic].partitions))


def drain(consumer: Consumer, what: str, partitions: int = 1) -> list[bytes]:
    """The values ``consumer`` reads until it has reached the end of ``partitions`` partitions;
    it is closed then."""
    values: list[bytes] = []
    ended: set[int] = set()
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    ended.add(msg.partition())
                    if len(ended) >= partitions:
                        return values
                continue
            values.append(msg.value())
    finally:
        consumer.close()
    raise AssertionError(f"{what} was not read to its end: {len(values)} records")


def test_an_idempotent_acks_all_producer_writes_through_five_leader_crashes_exactly_once(
        cluster: ClusterThread) -> None:
    create(cluster, "orders", **{"min.insync.replicas": "2"})
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True, "acks": "all",
                         "linger.ms": 5})
    acked: list[bytes] = []
    failed: list[Any] = []
    epochs = []
    n = 0

    def delivered(err: Any, msg: Any) -> None:
        (failed if err else acked).append(err or msg.value())

    def send(count: int) -> None:
        nonlocal n
        for _ in range(count):
            producer.produce("orders", value=f"v{n}".encode(), on_delivery=delivered)
            n += 1
        producer.poll(0)

    for _ in range(5):
        send(200)  # in flight while the leader crashes
        leader = cluster.leader("orders", 0)
        cluster.crash(leader)
        epochs.append(cluster.state("orders", 0).leader_epoch)
        send(200)
        assert producer.flush(30) == 0
        cluster.start_broker(leader)
        wait_for(lambda: len(cluster.state("orders", 0).isr) == 3, "the restarted broker to rejoin the ISR")
    assert failed == []
    assert len(acked) == n == 2000
    assert epochs == sorted(set(epochs)) and len(epochs) == 5  # every crash elected a new leader
    seen = read_all(cluster, "orders", "check")
    assert sorted(seen) == sorted(acked)  # every acknowledged record, once


def test_writes_are_refused_with_not_enough_replicas_while_two_brokers_are_down(cluster: ClusterThread) -> None:
    create(cluster, "strict", **{"min.insync.replicas": "2"})
    leader = cluster.leader("strict", 0)
    others = [n for n in (1, 2, 3) if n != leader]
    for node in others:
        cluster.crash(node)
    assert cluster.state("strict", 0).isr == (leader,)
    with RawClient(cluster.address(leader)) as client:
        answer = produce(client, "strict", build_batch(value=b"refused"))
        assert answer.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
        assert produce(client, "strict", build_batch(value=b"acks=1 is taken"), acks=1).error_code == 0
    for node in others:
        cluster.start_broker(node)
    wait_for(lambda: len(cluster.state("strict", 0).isr) >= 2, "a follower back in the ISR")
    with RawClient(cluster.address(leader)) as client:
        assert produce(client, "strict", build_batch(value=b"accepted")).error_code == 0
    assert read_all(cluster, "strict", "g") == [b"acks=1 is taken", b"accepted"]


def test_a_follower_answers_not_leader_and_fetches_are_fenced_by_epoch(cluster: ClusterThread) -> None:
    create(cluster, "routed")
    part = cluster.state("routed", 0)
    follower = next(n for n in part.replicas if n != part.leader)
    with RawClient(cluster.address(follower)) as client:
        assert produce(client, "routed", build_batch()).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    with RawClient(cluster.address(part.leader)) as client:
        assert produce(client, "routed", build_batch()).error_code == 0
        assert fetch_raw(client, "routed", version=11).error_code == 0
    cluster.crash(part.leader)
    cluster.start_broker(part.leader)
    now = cluster.state("routed", 0)
    with RawClient(cluster.address(now.leader)) as client:
        stale = _fetch_with_epoch(client, "routed", part.leader_epoch)
        assert stale.error_code == ErrorCode.FENCED_LEADER_EPOCH
        ahead = _fetch_with_epoch(client, "routed", now.leader_epoch + 1)
        assert ahead.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
        current = _fetch_with_epoch(client, "routed", now.leader_epoch)
        assert current.error_code == 0 and current.high_watermark == 1


def _fetch_with_epoch(client: RawClient, topic: str, epoch: int) -> Any:
    from kafka.protocol.consumer import FetchRequest

    Request = FetchRequest[12]
    Topic = Request.FetchTopic
    request = Request(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0,
                      session_epoch=-1, topics=[Topic(topic=topic, partitions=[Topic.FetchPartition(
                          partition=0, current_leader_epoch=epoch, fetch_offset=0, last_fetched_epoch=-1,
                          log_start_offset=-1, partition_max_bytes=1 << 20)])],
                      forgotten_topics_data=[], rack_id="")
    return client.request(request).responses[0].partitions[0]


def test_an_unclean_election_loses_exactly_the_records_only_the_old_leader_had(tmp_path: Path) -> None:
    with ClusterThread(brokers=3, data_dir=str(tmp_path / "c"),
                       config={"unclean.leader.election.enable": "true"}) as cluster:
        create(cluster, "risky")
        old = cluster.state("risky", 0)
        followers = [n for n in old.replicas if n != old.leader]
        with RawClient(cluster.address(old.leader)) as client:
            assert produce(client, "risky", build_batch(value=b"everywhere"), acks=-1).error_code == 0
        for node in followers:
            cluster.crash(node)
        with RawClient(cluster.address(old.leader)) as client:
            assert produce(client, "risky", build_batch(value=b"only-old-leader"), acks=1).error_code == 0
        cluster.crash(old.leader)
        cluster.start_broker(followers[0])  # the only active replica: elected uncleanly
        new = cluster.state("risky", 0)
        assert (new.leader, new.isr) == (followers[0], (followers[0],))
        with RawClient(cluster.address(new.leader)) as client:
            assert produce(client, "risky", build_batch(value=b"after"), acks=1).error_code == 0
        cluster.start_broker(old.leader)  # comes back as a follower and truncates its own tail
        wait_for(lambda: old.leader in cluster.state("risky", 0).isr, "the old leader to rejoin")
        with RawClient(cluster.address(old.leader)) as client:
            fetched = fetch_raw(client, "risky", version=11)
        assert [r.value for b in kafka_batches(fetched.records or b"") for r in b] == [b"everywhere", b"after"]
        assert read_all(cluster, "risky", "g") == [b"everywhere", b"after"]


def test_producers_that_start_on_different_brokers_never_share_a_producer_id(cluster: ClusterThread) -> None:
    from kafka.protocol.producer import InitProducerIdRequest

    ids = []
    for node in (1, 2, 3, 1, 2, 3):
        with RawClient(cluster.address(node)) as client:
            answer = client.request(InitProducerIdRequest[1](transactional_id=None, transaction_timeout_ms=-1))
            assert answer.error_code == 0
            ids.append(answer.producer_id)
    assert len(set(ids)) == len(ids), ids
