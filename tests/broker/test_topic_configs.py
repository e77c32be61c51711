"""Every topic config Kafka defines is accepted, stored and described; compression.type recompresses."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
from kafka.protocol.producer import InitProducerIdRequest
from kafka.record.default_records import DefaultRecordBatch

from minikafka.broker.embedded import BrokerThread
from minikafka.config import TOPIC_CONFIG_SOURCES
from minikafka.errors import ErrorCode
from minikafka.storage.batch import split_batches
from tests.kafka_wire import RawClient, build_batch
from tests.scenario_helpers import create_topic, produce

#: One legal, non-default value for each topic config of Kafka 3.9 (TopicConfig and LogConfig).
KAFKA_TOPIC_CONFIGS = {
    "cleanup.policy": "compact,delete", "compression.type": "lz4", "compression.gzip.level": "5",
    "compression.lz4.level": "10", "compression.zstd.level": "7", "delete.retention.ms": "1000",
    "file.delete.delay.ms": "5", "flush.messages": "100000", "flush.ms": "600000",
    "follower.replication.throttled.replicas": "", "index.interval.bytes": "2048",
    "leader.replication.throttled.replicas": "", "local.retention.bytes": "-2", "local.retention.ms": "-2",
    "max.compaction.lag.ms": "86400000", "max.message.bytes": "2000000", "message.downconversion.enable": "false",
    "message.format.version": "3.0-IV1", "message.timestamp.after.max.ms": "3600000",
    "message.timestamp.before.max.ms": "3600000", "message.timestamp.difference.max.ms": "3600000",
    "message.timestamp.type": "LogAppendTime", "min.cleanable.dirty.ratio": "0.25", "min.compaction.lag.ms": "10",
    "min.insync.replicas": "1", "preallocate": "true", "remote.storage.enable": "false",
    "remote.log.copy.disable": "false", "remote.log.delete.on.disable": "false", "retention.bytes": "1000000",
    "retention.ms": "3600000", "segment.bytes": "1048576", "segment.index.bytes": "4096",
    "segment.jitter.ms": "10", "segment.ms": "3600000", "unclean.leader.election.enable": "true",
}


def test_the_list_covers_every_config_minikafka_knows() -> None:
    assert set(KAFKA_TOPIC_CONFIGS) == set(TOPIC_CONFIG_SOURCES)


def test_every_kafka_topic_config_is_accepted_stored_and_described(broker: BrokerThread) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("all-configs", 1, 1, config=KAFKA_TOPIC_CONFIGS)])["all-configs"].result(10)
    resource = ConfigResource(ConfigResource.Type.TOPIC, "all-configs")
    described = admin.describe_configs([resource])[resource].result(10)
    for name, value in KAFKA_TOPIC_CONFIGS.items():
        got = described[name].value
        assert got == value or float(got) == float(value), (name, got, value)
    broker.restart()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    described = admin.describe_configs([resource])[resource].result(10)
    assert described["min.cleanable.dirty.ratio"].value == "0.25"
    assert described["message.downconversion.enable"].value == "false"


def test_defaults_of_new_configs_are_kafkas(broker: BrokerThread) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("defaults", 1, 1)])["defaults"].result(10)
    resource = ConfigResource(ConfigResource.Type.TOPIC, "defaults")
    described = admin.describe_configs([resource])[resource].result(10)
    assert described["delete.retention.ms"].value == "86400000"
    assert described["min.cleanable.dirty.ratio"].value == "0.5"
    assert described["min.compaction.lag.ms"].value == "0"
    assert described["message.downconversion.enable"].value == "true"
    assert described["remote.storage.enable"].value == "false"


@pytest.mark.parametrize(("name", "value"), [
    ("no.such.config", "1"), ("min.cleanable.dirty.ratio", "1.5"), ("compression.lz4.level", "30"),
    ("message.format.version", "banana"), ("max.compaction.lag.ms", "0"), ("preallocate", "maybe"),
])
def test_unknown_names_and_bad_values_are_invalid_config(broker: BrokerThread, name: str, value: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    with pytest.raises(KafkaException, match="INVALID_CONFIG"):
        admin.create_topics([NewTopic("refused", 1, 1, config={name: value})])["refused"].result(10)


def stored(broker: BrokerThread, topic: str) -> list[tuple[int, DefaultRecordBatch]]:
    data = b"".join(p.read_bytes() for p in sorted(Path(broker.broker_config.data_dir, f"{topic}-0").glob("*.log")))
    return [(h.compression, DefaultRecordBatch(data[pos:pos + h.size])) for pos, h in split_batches(data)]


@pytest.mark.parametrize(("topic_codec", "client_codec", "stored_codec"), [
    ("gzip", "none", 1), ("zstd", "lz4", 4), ("uncompressed", "snappy", 0), ("producer", "lz4", 3),
    ("lz4", "lz4", 3),
])
def test_topic_compression_type_recompresses_on_append(broker: BrokerThread, topic_codec: str,
                                                       client_codec: str, stored_codec: int) -> None:
    topic = f"cz-{topic_codec}-{client_codec}"
    values = [b"value-%d " % i * 30 for i in range(10)]
    with RawClient(broker.bootstrap) as c:
        create_topic(c, topic, configs={"compression.type": topic_codec})
        batch = build_batch(values=values, key=b"k", codec=client_codec, headers=[("h", b"1")])
        assert produce(c, topic, batch).error_code == 0
    [(codec, decoded)] = stored(broker, topic)
    assert codec == stored_codec
    assert decoded.validate_crc()
    records = list(decoded)
    assert [r.value for r in records] == values
    assert [r.headers for r in records] == [[("h", b"1")]] * 10


def test_idempotent_producer_on_a_recompressing_topic_keeps_sequences_and_dedup(broker: BrokerThread) -> None:
    with RawClient(broker.bootstrap) as c:
        create_topic(c, "cz-idem", configs={"compression.type": "gzip"})
        init = c.request(InitProducerIdRequest[4](transactional_id=None, transaction_timeout_ms=-1,
                                                  producer_id=-1, producer_epoch=-1))
        pid, epoch = init.producer_id, init.producer_epoch
        first = build_batch(producer_id=pid, epoch=epoch, base_sequence=0, count=5)
        assert produce(c, "cz-idem", first).base_offset == 0
        again = produce(c, "cz-idem", first)
        assert (again.error_code, again.base_offset) == (0, 0)  # a retry: answered from the duplicate cache
        gap = produce(c, "cz-idem", build_batch(producer_id=pid, epoch=epoch, base_sequence=7, count=1))
        assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        nxt = produce(c, "cz-idem", build_batch(producer_id=pid, epoch=epoch, base_sequence=5, count=2))
        assert (nxt.error_code, nxt.base_offset) == (0, 5)
    batches = stored(broker, "cz-idem")
    assert [codec for codec, _b in batches] == [1, 1]
    assert [(b.producer_id, b.base_sequence) for _c, b in batches] == [(pid, 0), (pid, 5)]
    broker.restart(clean=False)
    with RawClient(broker.bootstrap) as c:  # the rebuilt producer state still knows the sequences
        retry = produce(c, "cz-idem", build_batch(producer_id=pid, epoch=epoch, base_sequence=5, count=2))
        assert (retry.error_code, retry.base_offset) == (0, 5)


def test_deprecated_timestamp_difference_bounds_both_sides_unless_before_or_after_is_set(
        broker: BrokerThread) -> None:
    old = 1_000_000  # 1970: far outside an hour either way
    with RawClient(broker.bootstrap) as c:
        create_topic(c, "diff", configs={"message.timestamp.difference.max.ms": "3600000"})
        assert produce(c, "diff", build_batch(timestamp=old)).error_code == ErrorCode.INVALID_TIMESTAMP
        create_topic(c, "diff-before", configs={"message.timestamp.difference.max.ms": "3600000",
                                                "message.timestamp.before.max.ms": str(2**62)})
        assert produce(c, "diff-before", build_batch(timestamp=old)).error_code == 0
        assert produce(c, "diff-before", build_batch(timestamp=2**50)).error_code == ErrorCode.INVALID_TIMESTAMP


@pytest.mark.parametrize("validate_only", [False, True])
def test_librdkafka_admin_test_creates_its_topics_with_their_configs(broker: BrokerThread, validate_only: bool) -> None:
    """The CreateTopics part of librdkafka's tests/0081-admin.c through confluent-kafka: seven
    topics in one request, i*7+1 partitions, odd ones with compression.type=lz4 and
    delete.retention.ms=900, the second also with an unknown name (INVALID_CONFIG for that topic
    alone), every third with an explicit replica assignment, the last with broker defaults
    (-1, -1); with validate_only nothing is created. Then its DescribeConfigs part: the created
    topic, the broker and an unknown topic."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    node = broker.broker_config.node_id
    topics = []
    for i in range(7):
        defaults = i == 6
        parts = -1 if defaults else i * 7 + 1
        config = {"compression.type": "lz4", "delete.retention.ms": "900"} if i & 1 else {}
        if i == 1:
            config["dummy.doesntexist"] = "broker is verifying this"
        if not defaults and i % 3 == 0:
            topics.append(NewTopic(f"rd-admin-{validate_only}-{i}", parts, replica_assignment=[[node]] * parts,
                                   config=config))
        else:
            topics.append(NewTopic(f"rd-admin-{validate_only}-{i}", parts, -1 if defaults else 1, config=config))
    futures = admin.create_topics(topics, validate_only=validate_only, operation_timeout=10)
    for i, t in enumerate(topics):
        if i == 1:
            with pytest.raises(KafkaException, match="INVALID_CONFIG"):
                futures[t.topic].result(10)
        else:
            assert futures[t.topic].result(10) is None
    listed = admin.list_topics(timeout=10).topics
    for i, t in enumerate(topics):
        created = not validate_only and i != 1
        assert (t.topic in listed) == created, t.topic
        if created:
            assert len(listed[t.topic].partitions) == (1 if i == 6 else i * 7 + 1)
    if validate_only:
        return
    resources = [ConfigResource(ConfigResource.Type.TOPIC, topics[3].topic),
                 ConfigResource(ConfigResource.Type.BROKER, str(node)),
                 ConfigResource(ConfigResource.Type.TOPIC, "rd-admin-does-not-exist")]
    described = admin.describe_configs(resources)
    odd = described[resources[0]].result(10)
    assert (odd["compression.type"].value, odd["delete.retention.ms"].value) == ("lz4", "900")
    assert not odd["compression.type"].is_default and odd["min.insync.replicas"].value == "1"
    assert described[resources[1]].result(10)
    with pytest.raises(KafkaException, match="UNKNOWN_TOPIC_OR_PART"):
        described[resources[2]].result(10)
    even = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topics[2].topic)])
    assert next(iter(even.values())).result(10)["compression.type"].value == "producer"


def test_min_insync_replicas_of_the_topic_then_of_the_broker_decides_acks_all(
        start_broker: Callable[..., BrokerThread]) -> None:
    """One broker is an in-sync replica set of one: acks=-1 to a topic whose min.insync.replicas is
    above 1 is refused with NOT_ENOUGH_REPLICAS and appends nothing; acks=1 is not affected. The
    topic's setting wins over the broker's, as in Kafka (Partition.appendRecordsToLeader)."""
    broker = start_broker({"min.insync.replicas": 2})
    with RawClient(broker.bootstrap) as c:
        create_topic(c, "broker-two")
        create_topic(c, "topic-one", configs={"min.insync.replicas": "1"})
        refused = produce(c, "broker-two", build_batch())
        assert refused.error_code == ErrorCode.NOT_ENOUGH_REPLICAS and refused.base_offset == -1
        assert produce(c, "broker-two", build_batch(), acks=1).base_offset == 0  # nothing was appended before
        assert produce(c, "topic-one", build_batch()).error_code == 0

    broker = start_broker()
    with RawClient(broker.bootstrap) as c:
        create_topic(c, "topic-three", configs={"min.insync.replicas": "3"})
        assert produce(c, "topic-three", build_batch()).error_code == ErrorCode.NOT_ENOUGH_REPLICAS
        create_topic(c, "plain")
        assert produce(c, "plain", build_batch()).error_code == 0
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, "plain", incremental_configs=[
        ConfigEntry("min.insync.replicas", "2", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(10)
    with RawClient(broker.bootstrap) as c:
        assert produce(c, "plain", build_batch()).error_code == ErrorCode.NOT_ENOUGH_REPLICAS
