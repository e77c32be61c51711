"""acks=all writes are answered as soon as the followers have them, never after a follower's
long poll runs out: the leader's append wakes the followers' parked fetches, their next fetch
(which carries their new log end) moves the high watermark, and that answers the write. With
``replica.fetch.wait.max.ms`` at a minute, any step that waited for a poll to end would show."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from minikafka.broker.embedded import ClusterThread
from tests.cluster.test_cluster_failover import create, wait_for
from tests.kafka_wire import RawClient, build_batch
from tests.scenario_helpers import produce

POLL_MS = 60_000


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterThread]:
    with ClusterThread(brokers=3, data_dir=str(tmp_path / "cluster"),
                       config={"replica.fetch.wait.max.ms": POLL_MS}) as c:
        yield c


def test_acks_all_writes_are_answered_without_waiting_for_a_follower_poll_to_end(cluster: ClusterThread) -> None:
    create(cluster, "prompt", **{"min.insync.replicas": "3"})
    leader = cluster.leader("prompt", 0)
    wait_for(lambda: len(cluster.state("prompt", 0).isr) == 3, "every replica in the ISR")
    with RawClient(cluster.address(leader)) as client:
        for i in range(5):  # each write waits for both followers' next two fetches
            started = time.monotonic()
            answer = produce(client, "prompt", build_batch(values=[b"x" * 1000] * 100), acks=-1)
            took = time.monotonic() - started
            assert answer.error_code == 0 and answer.base_offset == 100 * i
            assert took < POLL_MS / 1000 / 4, f"write {i} took {took:.1f} s: it waited for a poll to end"


def test_a_follower_backing_off_from_a_crashed_leader_follows_the_next_one_at_once(tmp_path: Path) -> None:
    """Its fetch to the crashed leader failed, so that loop backs off ``replica.fetch.backoff.ms``
    (a minute here); when that broker is back and leads again, the follower fetches from it at
    once, and an acks=all write there is answered without waiting for the back-off to end."""
    backoff_ms = 60_000
    with ClusterThread(brokers=3, data_dir=str(tmp_path / "cluster"),
                       config={"replica.fetch.backoff.ms": backoff_ms}) as cluster:
        create(cluster, "moving", **{"min.insync.replicas": "2"})
        first, second, third = cluster.state("moving", 0).replicas
        assert cluster.leader("moving", 0) == first
        write(cluster, first, b"before")
        cluster.crash(first)  # the other two fail to fetch from it and back off
        assert cluster.leader("moving", 0) == second
        cluster.start_broker(first)
        wait_for(lambda: len(cluster.state("moving", 0).isr) == 3, "the restarted broker to rejoin the ISR")
        cluster.crash(second)  # the first replica in assignment order that is in sync leads again
        assert cluster.leader("moving", 0) == first and third in cluster.state("moving", 0).isr
        started = time.monotonic()
        write(cluster, first, b"after")  # answered once the third replica, in the ISR, has it
        took = time.monotonic() - started
        assert took < backoff_ms / 1000 / 4, f"the write took {took:.1f} s: a follower waited out its back-off"


def write(cluster: ClusterThread, leader: int, value: bytes) -> None:
    with RawClient(cluster.address(leader)) as client:
        answer = produce(client, "moving", build_batch(value=value), acks=-1)
    assert answer.error_code == 0
