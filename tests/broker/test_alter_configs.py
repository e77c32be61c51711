"""AlterConfigs (33) and IncrementalAlterConfigs (44): topic overrides changed as Kafka changes them,
applied to the live logs and kept across a restart; broker and logger resources answered as Kafka does."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource
from kafka.protocol.admin import AlterConfigsRequest, IncrementalAlterConfigsRequest

from minikafka.broker.embedded import BrokerThread
from minikafka.errors import ErrorCode
from tests.kafka_wire import RawClient, build_batch
from tests.scenario_helpers import create_topic, produce

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def alter(client: RawClient, version: int, resources: list[tuple[int, str, dict[str, str | None]]],
          validate_only: bool = False) -> list[Any]:
    R = AlterConfigsRequest[version]
    Resource = R.AlterConfigsResource
    request = R(resources=[Resource(resource_type=t, resource_name=n, configs=[
        Resource.AlterableConfig(name=k, value=v) for k, v in configs.items()]) for t, n, configs in resources],
        validate_only=validate_only)
    return list(client.request(request).responses)


def incremental(client: RawClient, version: int, resource_type: int, name: str,
                ops: list[tuple[str, int, str | None]], validate_only: bool = False) -> Any:
    R = IncrementalAlterConfigsRequest[version]
    Resource = R.AlterConfigsResource
    request = R(resources=[Resource(resource_type=resource_type, resource_name=name, configs=[
        Resource.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops])],
        validate_only=validate_only)
    return client.request(request).responses[0]


def overrides(broker: BrokerThread, topic: str) -> dict[str, Any]:
    assert broker.broker is not None and broker.broker.logs is not None
    return dict(broker.broker.logs.topics()[topic].configs)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_alter_configs_replaces_every_override_of_a_topic(broker: BrokerThread, version: int) -> None:
    with RawClient(broker.bootstrap) as c:
        create_topic(c, "t", configs={"retention.ms": "3600000", "cleanup.policy": "compact"})
        [result] = alter(c, version, [(TOPIC, "t", {"max.message.bytes": "2000"})])
        assert (result.error_code, result.resource_type, result.resource_name) == (0, TOPIC, "t")
    assert overrides(broker, "t") == {"max.message.bytes": "2000"}


@pytest.mark.parametrize("version", [0, 1, 2])
def test_alter_configs_errors_per_resource(broker: BrokerThread, version: int) -> None:
    with RawClient(broker.bootstrap) as c:
        create_topic(c, "t", configs={"retention.ms": "3600000"})
        results = alter(c, version, [(TOPIC, "missing", {"retention.ms": "1"}),
                                     (TOPIC, "t", {"no.such.config": "1"}),
                                     (BROKER_LOGGER, "1", {"kafka": "DEBUG"})])
        codes = [(r.resource_name, r.error_code) for r in results]
        assert codes == [("missing", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), ("t", ErrorCode.INVALID_CONFIG),
                         ("1", ErrorCode.INVALID_REQUEST)]
        assert "no.such.config" in results[1].error_message
        [bad] = alter(c, version, [(TOPIC, "t", {"min.cleanable.dirty.ratio": "1.5"})])
        assert bad.error_code == ErrorCode.INVALID_CONFIG
    assert overrides(broker, "t") == {"retention.ms": "3600000"}


@pytest.mark.parametrize("version", [0, 1])
def test_incremental_set_delete_append_subtract(broker: BrokerThread, version: int) -> None:
    with RawClient(broker.bootstrap) as c:
        create_topic(c, "t", configs={"retention.ms": "3600000"})
        r = incremental(c, version, TOPIC, "t", [("max.message.bytes", SET, "5000"), ("retention.ms", DELETE, None),
                                                 ("cleanup.policy", APPEND, "compact")])
        assert r.error_code == 0, r
        assert overrides(broker, "t") == {"max.message.bytes": "5000", "cleanup.policy": "delete,compact"}
        r = incremental(c, version, TOPIC, "t", [("cleanup.policy", SUBTRACT, "delete")])
        assert r.error_code == 0, r
        assert overrides(broker, "t")["cleanup.policy"] == "compact"
        r = incremental(c, version, TOPIC, "t", [("cleanup.policy", APPEND, "compact")])  # already there
        assert (r.error_code, overrides(broker, "t")["cleanup.policy"]) == (0, "compact")


@pytest.mark.parametrize("version", [0, 1])
def test_incremental_refusals_change_nothing(broker: BrokerThread, version: int) -> None:
    with RawClient(broker.bootstrap) as c:
        create_topic(c, "t", configs={"retention.ms": "3600000"})
        cases = [
            ("t", [("retention.ms", APPEND, "5")], ErrorCode.INVALID_CONFIG, "not LIST"),
            ("t", [("retention.ms", SET, "5"), ("no.such.config", DELETE, None)], ErrorCode.INVALID_CONFIG,
             "no.such.config"),
            ("t", [("cleanup.policy", SET, "sometimes")], ErrorCode.INVALID_CONFIG, "cleanup.policy"),
            ("t", [("retention.ms", 7, "5")], ErrorCode.INVALID_REQUEST, "operation"),
            ("t", [("retention.ms", SET, "5"), ("retention.ms", DELETE, None)], ErrorCode.INVALID_REQUEST,
             "duplicate"),
            ("missing", [("retention.ms", SET, "5")], ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "missing"),
        ]
        for name, ops, code, text in cases:
            r = incremental(c, version, TOPIC, name, ops)
            assert r.error_code == code, (ops, r)
            assert text in r.error_message, r
    assert overrides(broker, "t") == {"retention.ms": "3600000"}


@pytest.mark.parametrize("validate_only", [True, False])
def test_validate_only_checks_but_changes_nothing(broker: BrokerThread, validate_only: bool) -> None:
    with RawClient(broker.bootstrap) as c:
        create_topic(c, "t", configs={"retention.ms": "3600000"})
        [r] = alter(c, 1, [(TOPIC, "t", {"retention.ms": "1000"})], validate_only=validate_only)
        assert r.error_code == 0
        r = incremental(c, 1, TOPIC, "t", [("segment.ms", SET, "60000")], validate_only=validate_only)
        assert r.error_code == 0
        [bad] = alter(c, 1, [(TOPIC, "t", {"retention.ms": "x"})], validate_only=validate_only)
        assert bad.error_code == ErrorCode.INVALID_CONFIG
    expected = {"retention.ms": "3600000"} if validate_only else {"retention.ms": "1000", "segment.ms": "60000"}
    assert overrides(broker, "t") == expected


def test_broker_resource_accepts_kafkas_inert_dynamic_settings_and_refuses_others(broker: BrokerThread) -> None:
    with RawClient(broker.bootstrap) as c:
        # librdkafka's admin test (0081) sets this one on the broker and expects success
        r = incremental(c, 1, BROKER, "1", [("sasl.kerberos.min.time.before.relogin", SET, "58000")])
        assert r.error_code == 0, r
        [r] = alter(c, 1, [(BROKER, "", {"sasl.kerberos.min.time.before.relogin": "58000"})])
        assert r.error_code == 0, r
        r = incremental(c, 1, BROKER, "1", [("log.retention.ms", SET, "1000")])
        assert (r.error_code, "log.retention.ms" in r.error_message) == (ErrorCode.INVALID_REQUEST, True)
        r = incremental(c, 1, BROKER, "7", [("sasl.kerberos.min.time.before.relogin", SET, "58000")])
        assert r.error_code == ErrorCode.INVALID_REQUEST
        r = incremental(c, 1, BROKER_LOGGER, "1", [("kafka.server", SET, "DEBUG")])
        assert r.error_code == ErrorCode.INVALID_REQUEST


def described(admin: AdminClient, topic: str) -> dict[str, Any]:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return admin.describe_configs([resource])[resource].result(10)


def test_confluent_round_trips_and_a_restart_keeps_them(broker: BrokerThread) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    with RawClient(broker.bootstrap) as c:
        create_topic(c, "a", configs={"retention.ms": "3600000"})
        create_topic(c, "b")
    a = ConfigResource(ConfigResource.Type.TOPIC, "a", set_config={"segment.ms": "600000"})
    with pytest.deprecated_call():  # confluent-kafka warns that AlterConfigs is deprecated
        admin.alter_configs([a])[a].result(10)
    entries = described(admin, "a")
    assert entries["segment.ms"].value == "600000"
    assert entries["retention.ms"].value == "604800000"  # AlterConfigs dropped the old override
    assert entries["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    b = ConfigResource(ConfigResource.Type.TOPIC, "b", incremental_configs=[
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
        ConfigEntry("max.message.bytes", "4096", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([b])[b].result(10)
    assert described(admin, "b")["cleanup.policy"].value == "delete,compact"
    missing = ConfigResource(ConfigResource.Type.TOPIC, "missing", set_config={"segment.ms": "600000"})
    with pytest.raises(KafkaException, match="UNKNOWN_TOPIC_OR_PART"), pytest.deprecated_call():
        admin.alter_configs([missing])[missing].result(10)
    broker.restart()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert described(admin, "a")["segment.ms"].value == "600000"
    after = described(admin, "b")
    assert (after["cleanup.policy"].value, after["max.message.bytes"].value) == ("delete,compact", "4096")


def test_lowering_max_message_bytes_refuses_a_larger_produce(broker: BrokerThread) -> None:
    with RawClient(broker.bootstrap) as c:
        create_topic(c, "t")
        assert produce(c, "t", build_batch(value=b"x" * 3000)).error_code == 0
        assert incremental(c, 1, TOPIC, "t", [("max.message.bytes", SET, "1000")]).error_code == 0
        assert produce(c, "t", build_batch(value=b"x" * 3000)).error_code == ErrorCode.MESSAGE_TOO_LARGE
        assert produce(c, "t", build_batch(value=b"x" * 100)).error_code == 0


def test_lowering_retention_ms_deletes_old_segments(broker: BrokerThread) -> None:
    day_ago = int(time.time() * 1000) - 86_400_000
    with RawClient(broker.bootstrap) as c:
        create_topic(c, "t", configs={"segment.bytes": "200"})
        for i in range(3):
            assert produce(c, "t", build_batch(value=b"x" * 80, timestamp=day_ago + i)).error_code == 0
        assert broker.broker is not None and broker.broker.logs is not None
        logs = broker.broker.logs
        assert broker.call(logs.apply_retention) == 0  # a day old: the default week keeps them
        assert incremental(c, 1, TOPIC, "t", [("retention.ms", SET, "60000")]).error_code == 0
        assert broker.call(logs.apply_retention) == 3  # one batch per segment: each was full
        plog = logs.get_log("t", 0)
        assert plog is not None and plog.log_start_offset == 3


def test_librdkafka_admin_test_mix_of_topic_broker_and_missing_topic(broker: BrokerThread) -> None:
    """The IncrementalAlterConfigs case of librdkafka's tests/0081-admin.c through confluent-kafka:
    one request with a topic, this broker and an unknown topic; only the unknown topic fails."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    with RawClient(broker.bootstrap) as c:
        create_topic(c, "rd-alter")
    topic = ConfigResource(ConfigResource.Type.TOPIC, "rd-alter", incremental_configs=[
        ConfigEntry("compression.type", "gzip", incremental_operation=AlterConfigOpType.SET)])
    node = ConfigResource(ConfigResource.Type.BROKER, str(broker.broker_config.node_id), incremental_configs=[
        ConfigEntry("sasl.kerberos.min.time.before.relogin", "58000", incremental_operation=AlterConfigOpType.SET)])
    missing = ConfigResource(ConfigResource.Type.TOPIC, "rd-alter-missing", incremental_configs=[
        ConfigEntry("compression.type", "gzip", incremental_operation=AlterConfigOpType.SET)])
    futures = admin.incremental_alter_configs([topic, node, missing])
    assert futures[topic].result(10) is None
    assert futures[node].result(10) is None
    with pytest.raises(KafkaException, match="UNKNOWN_TOPIC_OR_PART"):
        futures[missing].result(10)
    assert described(admin, "rd-alter")["compression.type"].value == "gzip"


@pytest.mark.parametrize("incremental", [None, False])
def test_kafka_python_alter_configs(broker: BrokerThread, incremental: bool | None) -> None:
    """kafka-python picks IncrementalAlterConfigs when the broker offers it (None); forced to
    AlterConfigs it first reads the topic's dynamic settings with DescribeConfigs and sends them
    along, so the other override is kept either way."""
    from kafka.admin import ConfigResource as KpResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient

    with RawClient(broker.bootstrap) as c:
        create_topic(c, "kp", configs={"segment.ms": "600000"})
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        response = admin.alter_configs([KpResource(ConfigResourceType.TOPIC, "kp", configs={"retention.ms": "1000"})],
                                       incremental=incremental)
    finally:
        admin.close()
    assert response == {"topic": {"kp": "OK"}}
    assert overrides(broker, "kp") == {"segment.ms": "600000", "retention.ms": "1000"}


def test_internal_topic_settings_change_but_compaction_comes_back_at_start_up(broker: BrokerThread) -> None:
    """Kafka lets an admin change ``__consumer_offsets`` like any topic; minikafka's offset store
    puts its compaction and unlimited retention back when it opens the log."""
    from tests.groups.test_groups_protocol import commit

    with RawClient(broker.bootstrap) as c:
        create_topic(c, "t")
        assert commit(c, "g", {("t", 0): (5, None)}) == {("t", 0): 0}
        r = incremental(c, 1, TOPIC, "__consumer_offsets", [("cleanup.policy", SET, "delete"),
                                                            ("min.compaction.lag.ms", SET, "1000")])
        assert r.error_code == 0, r
    assert overrides(broker, "__consumer_offsets")["cleanup.policy"] == "delete"
    broker.restart()
    with RawClient(broker.bootstrap) as c:
        assert commit(c, "g", {("t", 0): (6, None)}) == {("t", 0): 0}  # opens the offset store
    after = overrides(broker, "__consumer_offsets")
    assert (after["cleanup.policy"], after["min.compaction.lag.ms"]) == ("compact", "1000")
