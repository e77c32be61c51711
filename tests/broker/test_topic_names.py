"""Path traversal through topic names: every API refuses the name and nothing is written outside
(or oddly inside) the data directory — over the raw protocol and through a real admin client."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from kafka.protocol.admin import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
)
from kafka.protocol.consumer import ListOffsetsRequest
from kafka.protocol.metadata import MetadataRequest

from minikafka.broker.embedded import BrokerThread
from tests.kafka_wire import RawClient, build_batch
from tests.scenario_helpers import fetch_raw, produce

TRAVERSALS = ["../escape", "../../etc/passwd", "..", ".", "a/../../b", "/tmp/abs", "..\\win", "sub/dir", "a\x00b",
              "%2e%2e%2fx", "line\nbreak", "x" * 250]


def tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.mark.parametrize("name", TRAVERSALS, ids=[repr(n)[:20] for n in TRAVERSALS])
def test_every_api_refuses_a_traversal_name_and_no_file_appears(broker: BrokerThread, name: str) -> None:
    assert broker.broker is not None
    data_dir = broker.broker.data_dir
    root = data_dir.parent
    before = tree(root)
    with RawClient(broker.bootstrap) as c:
        C = CreateTopicsRequest[5]
        created = c.request(C(topics=[C.CreatableTopic(name=name, num_partitions=1, replication_factor=1,
                                                       assignments=[], configs=[])],
                              timeout_ms=1000, validate_only=False))
        assert created.topics[0].error_code == 17
        meta = c.request(MetadataRequest[4](topics=[MetadataRequest[4].MetadataRequestTopic(name=name)],
                                            allow_auto_topic_creation=True))
        assert meta.topics[0].error_code == 17
        assert produce(c, name, build_batch()).error_code in (3, 17)
        assert fetch_raw(c, name).error_code in (3, 17)
        L = ListOffsetsRequest[5]
        offsets = c.request(L(replica_id=-1, isolation_level=0, topics=[L.ListOffsetsTopic(name=name, partitions=[
            L.ListOffsetsTopic.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-1)])]))
        assert offsets.topics[0].partitions[0].error_code in (3, 17)
        P = CreatePartitionsRequest[1]
        grown = c.request(P(topics=[P.CreatePartitionsTopic(name=name, count=3, assignments=None)], timeout_ms=1000,
                            validate_only=False))
        assert grown.results[0].error_code in (3, 17)
        R = DeleteRecordsRequest[1]
        deleted = c.request(R(topics=[R.DeleteRecordsTopic(name=name, partitions=[
            R.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=0, offset=0)])], timeout_ms=1000))
        assert deleted.topics[0].partitions[0].error_code in (3, 17)
        gone = c.request(DeleteTopicsRequest[4](topic_names=[name], timeout_ms=1000))
        assert gone.responses[0].error_code in (3, 17)
    new = tree(root) - before
    assert all(p.startswith(data_dir.name + os.sep) for p in new), f"written outside the data dir: {new}"
    new_dirs = {Path(p).parts[1] for p in new if (data_dir / Path(p).parts[1]).is_dir()}
    assert all(d.startswith("__") for d in new_dirs), f"a partition directory appeared: {new_dirs}"


def test_admin_client_cannot_create_a_topic_outside_the_data_dir(broker: BrokerThread) -> None:
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.create_topics([NewTopic("../../escaped", 1, 1), NewTopic("fine-name", 1, 1)])
    with pytest.raises(KafkaException) as refused:
        futures["../../escaped"].result(10)
    assert refused.value.args[0].code() == KafkaError.TOPIC_EXCEPTION  # INVALID_TOPIC_EXCEPTION (17)
    futures["fine-name"].result(10)
    assert broker.broker is not None
    root = broker.broker.data_dir.parent
    assert not list(root.rglob("*escaped*")) and not list(root.parent.glob("*escaped*"))
