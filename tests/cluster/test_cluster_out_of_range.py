"""A follower whose fetch offset falls outside its leader's log (OFFSET_OUT_OF_RANGE) finds its
place again as Kafka's follower does: records deleted on the leader while the follower was down
leave its log end below the leader's log start, and it starts its log afresh there, catches up
and rejoins the ISR. A follower that is up takes the leader's new log start from its fetches."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from minikafka.broker.embedded import ClusterThread
from minikafka.storage.log import PartitionLog
from tests.cluster.test_cluster_failover import create, wait_for
from tests.kafka_wire import RawClient, build_batch
from tests.scenario_helpers import delete_records, fetch_raw, produce
from tests.storage_helpers import kafka_batches


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterThread]:
    with ClusterThread(brokers=3, data_dir=str(tmp_path / "cluster"),
                       config={"replica.lag.time.max.ms": 3000, "replica.fetch.backoff.ms": 50}) as c:
        yield c


def replica(cluster: ClusterThread, node: int, topic: str) -> PartitionLog:
    """``node``'s replica of partition 0 (call on the cluster's loop)."""
    plog = cluster.cluster.brokers[node].logs.get_log(topic, 0)
    assert plog is not None
    return plog


def ends(cluster: ClusterThread, node: int, topic: str) -> tuple[int, int]:
    """(log start, log end) of ``node``'s replica, read on the cluster's loop."""

    def read() -> tuple[int, int]:
        plog = replica(cluster, node, topic)
        return plog.log_start_offset, plog.log_end_offset

    return cluster.call(read)


def write(cluster: ClusterThread, leader: int, topic: str, values: list[bytes]) -> None:
    with RawClient(cluster.address(leader)) as client:
        for value in values:
            assert produce(client, topic, build_batch(value=value), acks=-1).error_code == 0


def test_a_follower_below_the_leaders_log_start_starts_afresh_there_and_catches_up(cluster: ClusterThread) -> None:
    create(cluster, "trimmed", **{"segment.bytes": "1024"})
    state = cluster.state("trimmed", 0)
    leader = state.leader
    away, present = (n for n in state.replicas if n != leader)
    write(cluster, leader, "trimmed", [b"r%d" % i for i in range(5)])
    wait_for(lambda: ends(cluster, away, "trimmed") == (0, 5), "every replica to have the first records")
    cluster.crash(away)
    write(cluster, leader, "trimmed", [b"r%d" % i for i in range(5, 20)])
    with RawClient(cluster.address(leader)) as client:
        assert delete_records(client, "trimmed", 15).low_watermark == 15
    write(cluster, leader, "trimmed", [b"r%d" % i for i in range(20, 25)])
    # the follower that stayed up moved its log start with the leader's
    wait_for(lambda: ends(cluster, present, "trimmed") == (15, 25), "the live follower's log start to move")

    cluster.start_broker(away)  # its log ends at 5: below the leader's log start of 15
    wait_for(lambda: away in cluster.state("trimmed", 0).isr, "the restarted follower to rejoin the ISR")
    assert ends(cluster, away, "trimmed") == (15, 25)
    with RawClient(cluster.address(away)) as client:
        fetched = fetch_raw(client, "trimmed", offset=15, version=11)
    assert fetched.error_code == 0
    assert [r.value for b in kafka_batches(fetched.records or b"") for r in b] == [b"r%d" % i for i in range(15, 25)]
    assert cluster.call(lambda: replica(cluster, away, "trimmed").epochs.latest_epoch) == state.leader_epoch


def test_a_follower_truncates_to_a_leader_log_end_below_its_own(cluster: ClusterThread) -> None:
    """A follower with no epochs to compare (so no diverging-epoch answer) whose log runs past the
    leader's: the leader answers its fetch OFFSET_OUT_OF_RANGE and it cuts its log to the leader's end."""
    create(cluster, "ahead")
    state = cluster.state("ahead", 0)
    leader = state.leader
    follower = next(n for n in state.replicas if n != leader)
    write(cluster, leader, "ahead", [b"a", b"b"])
    wait_for(lambda: ends(cluster, follower, "ahead") == (0, 2), "the follower to copy the records")

    def run_ahead() -> None:
        """The follower's log gains records its leader never had, and forgets its epochs."""
        plog = replica(cluster, follower, "ahead")
        plog.append_from_client(build_batch(value=b"stray"))
        plog.append_from_client(build_batch(value=b"stray-too"))
        plog.epochs.clear()

    cluster.call(run_ahead)
    wait_for(lambda: ends(cluster, follower, "ahead")[1] == 2 and follower in cluster.state("ahead", 0).isr,
             "the follower to truncate to the leader's log end and rejoin the ISR")
    write(cluster, leader, "ahead", [b"c"])
    wait_for(lambda: ends(cluster, follower, "ahead") == (0, 3)
             and cluster.call(lambda: replica(cluster, follower, "ahead").high_watermark) == 3,
             "the follower to copy the next record and learn that it is committed")
    with RawClient(cluster.address(follower)) as client:
        fetched = fetch_raw(client, "ahead", version=11)
    assert [r.value for b in kafka_batches(fetched.records or b"") for r in b] == [b"a", b"b", b"c"]
