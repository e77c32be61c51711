"""The controller's records survive a restart of the cluster: topic ids, assignments, ISRs, epochs."""

from __future__ import annotations

from pathlib import Path

import pytest

from minikafka.broker.cluster.controller import Controller
from minikafka.broker.cluster.metadata_file import METADATA_FILE, MetadataFile, MetadataFileError
from minikafka.broker.cluster.partition_state import BrokerState


def started(n: int = 3) -> Controller:
    controller = Controller([(i, None) for i in range(1, n + 1)], seed=1)
    for node in range(1, n + 1):
        controller.unfence(node)
    return controller


def test_a_restarted_controller_has_the_same_topics_and_epochs_and_every_broker_fenced(tmp_path: Path) -> None:
    controller = started()
    store = MetadataFile(tmp_path)
    controller.on_change = lambda changes: store.save(controller)
    controller.create_topic("orders", 3, 3)
    controller.fence(2)
    assert (tmp_path / METADATA_FILE).exists()
    restored = Controller([(i, None) for i in range(1, 4)], seed=2)
    assert store.load_into(restored)
    assert restored.topics == controller.topics
    assert restored.partitions == controller.partitions
    assert restored.cluster_id == controller.cluster_id
    assert all(b.state is BrokerState.FENCED for b in restored.brokers.values())


def test_a_new_cluster_has_no_file(tmp_path: Path) -> None:
    assert not MetadataFile(tmp_path).load_into(started())


@pytest.mark.parametrize(("content", "fragment"), [
    (b"{not json", "not a minikafka cluster metadata file"),
    (b'{"version": 9, "topics": []}', "unknown version 9"),
    (b'{"version": 1, "cluster_id": "x", "topics": [{"name": "t"}]}', "not a minikafka cluster metadata file"),
    (b'{"version": 1, "cluster_id": "x", "topics": [{"name": "t", "id": "6ba7b810-9dad-11d1-80b4-00c04fd430c8", "partitions": '
     b'[{"replicas": [1, 7], "isr": [1], "leader": 1, "leader_epoch": 0, "partition_epoch": 0}]}]}',
     "t-0 has replicas on brokers [7]"),
])
def test_a_file_that_cannot_be_read_back_is_refused_with_its_path(tmp_path: Path, content: bytes,
                                                                  fragment: str) -> None:
    (tmp_path / METADATA_FILE).write_bytes(content)
    with pytest.raises(MetadataFileError, match=str(tmp_path)) as raised:
        MetadataFile(tmp_path).load_into(started())
    assert fragment in str(raised.value)
