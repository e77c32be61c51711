"""Admin operations through real admin clients, and metadata/offset lookups through consumers."""

from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic

from minikafka.broker.embedded import BrokerThread
from minikafka.errors import ErrorCode
from tests.client_helpers import confluent_produce
from tests.kafka_wire import RawClient, build_batch
from tests.scenario_helpers import create_topic, produce


def test_confluent_admin_creates_lists_describes_grows_and_deletes_topics(broker: BrokerThread) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.create_topics([NewTopic("orders", 3, 1, config={"retention.ms": "3600000"})])
    futures["orders"].result(10)
    with pytest.raises(KafkaException, match="TOPIC_ALREADY_EXISTS"):
        admin.create_topics([NewTopic("orders", 3, 1)])["orders"].result(10)
    with pytest.raises(KafkaException, match="val=17"):
        admin.create_topics([NewTopic("bad name", 1, 1)])["bad name"].result(10)
    with pytest.raises(KafkaException, match="INVALID_REPLICATION_FACTOR"):
        admin.create_topics([NewTopic("replicated", 1, 3)])["replicated"].result(10)

    metadata = admin.list_topics(timeout=10)
    assert len(metadata.topics["orders"].partitions) == 3
    assert metadata.controller_id == broker.broker.node_id
    assert [b.id for b in metadata.brokers.values()] == [broker.broker.node_id]

    resource = ConfigResource(ConfigResource.Type.TOPIC, "orders")
    configs = admin.describe_configs([resource])[resource].result(10)
    assert configs["retention.ms"].value == "3600000"
    assert configs["segment.bytes"].value == "1073741824"

    admin.create_partitions([NewPartitions("orders", 5)])["orders"].result(10)
    assert len(admin.list_topics(timeout=10).topics["orders"].partitions) == 5

    admin.delete_topics(["orders"])["orders"].result(10)
    assert "orders" not in admin.list_topics(timeout=10).topics
    assert not (broker.broker.data_dir / "orders-0").exists()


def test_kafka_python_admin_round_trip(broker: BrokerThread) -> None:
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewTopic as KNewTopic

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([KNewTopic("kp", num_partitions=2, replication_factor=1)])
        assert "kp" in admin.list_topics()
        described = admin.describe_topics(["kp"])
        assert len(described[0]["partitions"]) == 2
        admin.delete_topics(["kp"])
        assert "kp" not in admin.list_topics()
    finally:
        admin.close()


def test_aiokafka_admin_round_trip(broker: BrokerThread) -> None:
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin import NewTopic as ANewTopic

    async def run() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
        await admin.start()
        try:
            await admin.create_topics([ANewTopic("ak", num_partitions=2, replication_factor=1)])
            assert "ak" in await admin.list_topics()
            await admin.delete_topics(["ak"])
            assert "ak" not in await admin.list_topics()
        finally:
            await admin.close()

    asyncio.run(run())


def test_list_offsets_latest_is_true_log_end_and_timestamps_find_first_record_at_or_after(
    broker: BrokerThread,
) -> None:
    with RawClient(broker.bootstrap) as c:
        create_topic(c, "lo")
        base = 1_700_000_000_000
        # three batches of 3 records: timestamps base+0..2, base+10..12, base+20..22
        for i in range(3):
            assert produce(c, "lo", build_batch(count=3, timestamp=base + 10 * i)).error_code == 0
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "x"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition("lo", 0), timeout=10)
        assert (low, high) == (0, 9)
        found = consumer.offsets_for_times([TopicPartition("lo", 0, base + 11)], timeout=10)
        assert found[0].offset == 4
        found = consumer.offsets_for_times([TopicPartition("lo", 0, base + 13)], timeout=10)
        assert found[0].offset == 6
        found = consumer.offsets_for_times([TopicPartition("lo", 0, base + 99)], timeout=10)
        assert found[0].offset == -1
    finally:
        consumer.close()


def test_metadata_auto_creates_with_num_partitions_and_refuses_when_disabled(
    start_broker: object,
) -> None:
    broker = start_broker(config={"num.partitions": "4"})  # type: ignore[operator]
    confluent_produce(broker.bootstrap, "auto", [(b"k", b"v", [], int(time.time() * 1000))])
    assert broker.broker.logs.topics()["auto"].partitions == 4

    strict = start_broker(config={"auto.create.topics.enable": "false"})  # type: ignore[operator]
    from kafka.protocol.metadata import MetadataRequest

    with RawClient(strict.bootstrap) as c:
        response = c.request(MetadataRequest[4](topics=[MetadataRequest[4].MetadataRequestTopic(name="nope")],
                                                allow_auto_topic_creation=True))
    assert response.topics[0].error_code == 3
    assert "nope" not in strict.broker.logs.topics()


def test_delete_records_refuses_internal_topics(broker: BrokerThread) -> None:
    from tests.scenario_helpers import delete_records

    assert "__consumer_offsets" in broker.broker.logs.topics()
    with RawClient(broker.bootstrap) as c:
        assert delete_records(c, "__consumer_offsets", 0).error_code == 17


def test_partition_count_is_bounded_per_topic(start_broker: object) -> None:
    broker = start_broker(config={"minikafka.topic.max.partitions": "8"})  # type: ignore[operator]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    with pytest.raises(KafkaException, match="INVALID_PARTITIONS"):
        admin.create_topics([NewTopic("wide", 9, 1)])["wide"].result(10)
    admin.create_topics([NewTopic("wide", 8, 1)])["wide"].result(10)
    with pytest.raises(KafkaException, match="INVALID_PARTITIONS"):
        admin.create_partitions([NewPartitions("wide", 9)])["wide"].result(10)
    assert broker.broker.logs.topics()["wide"].partitions == 8


def test_elect_leaders_on_a_single_broker_is_never_needed(broker: BrokerThread) -> None:
    """A single broker leads every partition with its only, preferred replica: Kafka answers
    ELECTION_NOT_NEEDED for a known partition and leaves every partition out of a request for all."""
    from confluent_kafka import ElectionType

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("solo", 2, 1)])["solo"].result(10)
    result = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("solo", 1)]).result(10)
    assert result[TopicPartition("solo", 1)].code() == ErrorCode.ELECTION_NOT_NEEDED
    assert admin.elect_leaders(ElectionType.PREFERRED, None).result(10) == {}
    unknown = admin.elect_leaders(ElectionType.UNCLEAN, [TopicPartition("solo", 7)]).result(10)
    assert unknown[TopicPartition("solo", 7)].code() == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
