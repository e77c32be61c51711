"""Metadata in a cluster never names a leader that the same answer does not list: while a broker
is going down and the controller has not fenced it yet (the moment between a crash's stop and its
fence), its partitions are answered without a leader, LEADER_NOT_AVAILABLE. kafka-python 3.0.12's
producer, given a leader missing from the brokers, raised UnknownBrokerIdError in its sender thread
on every loop and never sent or expired a record again (found by the chaos run, seed 21)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from minikafka.broker.embedded import ClusterThread


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterThread]:
    with ClusterThread(brokers=3, data_dir=str(tmp_path / "cluster")) as c:
        yield c


def test_a_broker_down_but_not_yet_fenced_is_nobodys_leader_in_metadata(cluster: ClusterThread) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
    for future in admin.create_topics([NewTopic("orders", 3, 3)], request_timeout=15).values():
        future.result(30)
    controller = cluster.cluster.controller
    led = {p: cluster.call(lambda p=p: controller.partitions[("orders", p)].leader) for p in range(3)}
    down = led[0]
    cluster.call(cluster.cluster.brokers[down].stop, False)  # stopped as a crash stops it, not fenced yet
    assert cluster.call(lambda: controller.partitions[("orders", 0)].leader) == down

    others = ",".join(cluster.address(n) for n in (1, 2, 3) if n != down)
    metadata = AdminClient({"bootstrap.servers": others, "log_level": 0}).list_topics("orders", timeout=15)
    assert down not in metadata.brokers
    partitions = metadata.topics["orders"].partitions
    for p, answer in partitions.items():
        if led[p] == down:
            assert answer.leader == -1 and answer.error is not None and answer.error.code() == 5  # LEADER_NOT_AVAILABLE
        else:
            assert answer.leader == led[p] and answer.leader in metadata.brokers and answer.error is None
