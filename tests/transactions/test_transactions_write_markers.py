"""WriteTxnMarkers (key 27) over the wire: what a transaction coordinator's markers do to the
partitions of the broker that receives them, each partition's error code, and in a cluster the
leader-only rule and the coordinator epoch that fences a coordinator which lost its partition."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka.protocol.producer import WriteTxnMarkersRequest

from minikafka.broker.embedded import BrokerThread, ClusterThread
from minikafka.errors import ErrorCode
from tests.cluster.test_cluster_failover import create
from tests.kafka_wire import RawClient
from tests.scenario_helpers import create_topic
from tests.txn_helpers import open_transactions, start_with_data, stored_batches

Request = WriteTxnMarkersRequest[1]
Marker = Request.WritableTxnMarker


def write_markers(client: RawClient, pid: int, epoch: int, commit: bool, partitions: dict[str, list[int]],
                  coordinator_epoch: int = 0) -> dict[tuple[str, int], int]:
    response = client.request(Request(markers=[Marker(
        producer_id=pid, producer_epoch=epoch, transaction_result=commit, coordinator_epoch=coordinator_epoch,
        topics=[Marker.WritableTxnMarkerTopic(name=t, partition_indexes=ps) for t, ps in partitions.items()])]))
    (result,) = response.markers
    assert result.producer_id == pid
    return {(t.name, p.partition_index): p.error_code for t in result.topics for p in t.partitions}


@pytest.fixture
def client(broker: BrokerThread) -> Iterator[RawClient]:
    with RawClient(broker.bootstrap) as c:
        create_topic(c, "t", partitions=2)
        yield c


def test_markers_close_the_producers_transaction_on_each_partition(client: RawClient) -> None:
    pid, epoch = start_with_data(client, "tw-1", [0, 1])
    assert {p for p, _, _ in open_transactions(client, "t", 2)} == {0, 1}
    assert write_markers(client, pid, epoch, True, {"t": [0, 1], "nosuch": [0]}) == {
        ("t", 0): ErrorCode.NONE, ("t", 1): ErrorCode.NONE, ("nosuch", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert open_transactions(client, "t", 2) == []
    control = [b for b in stored_batches(client, "t", 0) if b.is_control]
    assert [(b.producer_id, b.control_type, b.coordinator_epoch) for b in control] == [(pid, 1, 0)]


def test_a_marker_of_an_older_coordinator_epoch_is_fenced(client: RawClient) -> None:
    pid, epoch = start_with_data(client, "tw-2", [0])
    assert write_markers(client, pid, epoch, False, {"t": [0]}, coordinator_epoch=3) == {("t", 0): ErrorCode.NONE}
    assert write_markers(client, pid, epoch, True, {"t": [0]}, coordinator_epoch=2) == {
        ("t", 0): ErrorCode.TRANSACTION_COORDINATOR_FENCED}
    assert write_markers(client, pid, epoch, True, {"t": [0]}, coordinator_epoch=3) == {("t", 0): ErrorCode.NONE}
    assert [b.coordinator_epoch for b in stored_batches(client, "t", 0) if b.is_control] == [3, 3]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterThread]:
    with ClusterThread(brokers=3, data_dir=str(tmp_path / "cluster")) as c:
        yield c


def test_in_a_cluster_only_the_leader_writes_a_marker(cluster: ClusterThread) -> None:
    create(cluster, "tm", partitions=1, rf=2)
    leader = cluster.leader("tm", 0)
    replicas = set(cluster.state("tm", 0).replicas)
    follower = next(iter(replicas - {leader}))
    outsider = next(iter({1, 2, 3} - replicas))
    with RawClient(cluster.address(follower)) as c:
        assert write_markers(c, 1000, 0, True, {"tm": [0]}) == {("tm", 0): ErrorCode.NOT_LEADER_OR_FOLLOWER}
    with RawClient(cluster.address(outsider)) as c:  # no replica there, but the partition exists
        assert write_markers(c, 1000, 0, True, {"tm": [0], "nosuch": [0]}) == {
            ("tm", 0): ErrorCode.NOT_LEADER_OR_FOLLOWER, ("nosuch", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    with RawClient(cluster.address(leader)) as c:  # answered once the follower has it too
        assert write_markers(c, 1000, 0, True, {"tm": [0]}) == {("tm", 0): ErrorCode.NONE}
        ends = cluster.call(lambda: [cluster.cluster.brokers[n].logs.get_log("tm", 0).log_end_offset
                                     for n in sorted(replicas)])
        assert ends == [1, 1]
