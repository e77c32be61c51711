"""Dynamic group configs (config resource type GROUP = 32): DescribeConfigs, IncrementalAlterConfigs
and AlterConfigs on a group as Kafka 4.0 answers them, with its validation, codes and messages; the
overrides survive a restart and the deletion of the group; ``--kafka-version 3.9`` has none."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)
from kafka.protocol.admin import DeleteGroupsRequest, DescribeConfigsRequest

from minikafka.broker.embedded import BrokerThread
from minikafka.broker.group_configs import GroupConfigFile
from minikafka.errors import ErrorCode
from minikafka.startup_errors import DataDirError
from tests.broker.test_alter_configs import APPEND, DELETE, SET, SUBTRACT, TOPIC, alter, incremental
from tests.groups.consumer_group_wire import heartbeat_request, join
from tests.kafka_wire import RawClient
from tests.scenario_helpers import create_topic

GROUP = 32
GROUP_CONFIG, DEFAULT_CONFIG = 8, 5
SESSION = "consumer.session.timeout.ms"
HEARTBEAT = "consumer.heartbeat.interval.ms"
NAMES = [HEARTBEAT, SESSION, "share.auto.offset.reset", "share.heartbeat.interval.ms",
         "share.record.lock.duration.ms", "share.session.timeout.ms"]


def describe(client: RawClient, version: int, *resources: tuple[int, str], keys: list[str] | None = None,
             synonyms: bool = False, documentation: bool = False) -> list[Any]:
    R = DescribeConfigsRequest[version]
    fields: dict[str, Any] = {"include_synonyms": synonyms}
    if version >= 3:
        fields["include_documentation"] = documentation
    request = R(resources=[R.DescribeConfigsResource(resource_type=t, resource_name=n, configuration_keys=keys)
                           for t, n in resources], **fields)
    return list(client.request(request).results)


def group_configs(client: RawClient, group: str) -> dict[str, tuple[str, int]]:
    """``name: (value, config_source)`` of ``group``."""
    [result] = describe(client, 4, (GROUP, group))
    assert result.error_code == ErrorCode.NONE, result
    return {c.name: (c.value, c.config_source) for c in result.configs}


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_describe_a_group_that_does_not_exist(start_broker: Callable[..., BrokerThread], version: int) -> None:
    broker = start_broker({"group.consumer.heartbeat.interval.ms": "6000"})
    with RawClient(broker.bootstrap) as c:
        [result] = describe(c, version, (GROUP, "nobody"), synonyms=True, documentation=True)
        assert (result.error_code, result.resource_type, result.resource_name) == (0, GROUP, "nobody")
        configs = {e.name: e for e in result.configs}
        assert sorted(configs) == NAMES
        values = {name: (e.value, e.config_source) for name, e in configs.items()}
        assert values[SESSION] == ("45000", DEFAULT_CONFIG)
        assert values[HEARTBEAT] == ("6000", DEFAULT_CONFIG)  # the broker's setting, still a default source
        assert values["share.auto.offset.reset"] == ("latest", DEFAULT_CONFIG)
        assert values["share.record.lock.duration.ms"] == ("30000", DEFAULT_CONFIG)
        session = configs[SESSION]
        assert [(s.name, s.value, s.source) for s in session.synonyms] == [(SESSION, "45000", DEFAULT_CONFIG)]
        assert (session.read_only, session.is_sensitive) == (False, False)
        if version >= 3:
            assert (session.config_type, configs["share.auto.offset.reset"].config_type) == (3, 2)  # INT, STRING
            assert session.documentation == ("The timeout to detect client failures when using the consumer "
                                             "group protocol.")
        [plain] = describe(c, version, (GROUP, "nobody"), keys=[HEARTBEAT])
        assert [(e.name, list(e.synonyms)) for e in plain.configs] == [(HEARTBEAT, [])]
        if version >= 3:
            assert plain.configs[0].documentation is None
        [empty] = describe(c, version, (GROUP, ""))
        assert (empty.error_code, empty.error_message, list(empty.configs)) == (
            ErrorCode.INVALID_REQUEST, "Group name must not be empty", [])


@pytest.mark.parametrize("version", [0, 1])
def test_incremental_set_delete_and_validate_only(broker: BrokerThread, version: int) -> None:
    with RawClient(broker.bootstrap) as c:
        r = incremental(c, version, GROUP, "g", [(SESSION, SET, " 50000"), (HEARTBEAT, SET, "6000")])
        assert (r.error_code, r.error_message, r.resource_type, r.resource_name) == (0, None, GROUP, "g")
        configs = group_configs(c, "g")
        assert (configs[SESSION], configs[HEARTBEAT]) == (("50000", GROUP_CONFIG), ("6000", GROUP_CONFIG))
        assert configs["share.session.timeout.ms"] == ("45000", DEFAULT_CONFIG)
        assert group_configs(c, "other")[SESSION] == ("45000", DEFAULT_CONFIG)
        r = incremental(c, version, GROUP, "g", [(SESSION, SET, "55000")], validate_only=True)
        assert r.error_code == 0
        assert group_configs(c, "g")[SESSION] == ("50000", GROUP_CONFIG)
        r = incremental(c, version, GROUP, "g", [(SESSION, DELETE, None), ("share.auto.offset.reset", SET,
                                                                           "by_duration:P1DT2H")])
        assert r.error_code == 0, r
        configs = group_configs(c, "g")
        assert configs[SESSION] == ("45000", DEFAULT_CONFIG)
        assert configs["share.auto.offset.reset"] == ("by_duration:P1DT2H", GROUP_CONFIG)


MIN_SESSION = "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms"


@pytest.mark.parametrize("ops, code, message", [
    ([("no.such.config", SET, "1")], ErrorCode.INVALID_CONFIG, "Unknown group config name: no.such.config"),
    ([(SESSION, SET, "abc")], ErrorCode.INVALID_CONFIG,
     "Invalid value abc for configuration consumer.session.timeout.ms: Not a number of type INT"),
    ([(SESSION, SET, "2147483648")], ErrorCode.INVALID_CONFIG,
     "Invalid value 2147483648 for configuration consumer.session.timeout.ms: Not a number of type INT"),
    ([(SESSION, SET, "0")], ErrorCode.INVALID_CONFIG,
     "Invalid value 0 for configuration consumer.session.timeout.ms: Value must be at least 1"),
    ([(SESSION, SET, "44999")], ErrorCode.INVALID_CONFIG, MIN_SESSION),
    ([(SESSION, SET, "60001")], ErrorCode.INVALID_CONFIG,
     "consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms"),
    ([(HEARTBEAT, SET, "4999")], ErrorCode.INVALID_CONFIG,
     "consumer.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms"),
    ([(HEARTBEAT, SET, "15001"), (SESSION, SET, "1")], ErrorCode.INVALID_CONFIG,  # heartbeat is checked first
     "consumer.heartbeat.interval.ms must be less than or equal to group.consumer.max.heartbeat.interval.ms"),
    ([("share.record.lock.duration.ms", SET, "999")], ErrorCode.INVALID_CONFIG,
     "Invalid value 999 for configuration share.record.lock.duration.ms: Value must be at least 1000"),
    ([("share.record.lock.duration.ms", SET, "14999")], ErrorCode.INVALID_CONFIG,
     "share.record.lock.duration.ms must be greater than or equal to group.share.min.record.lock.duration.ms"),
    ([("share.session.timeout.ms", SET, "70000")], ErrorCode.INVALID_CONFIG,
     "share.session.timeout.ms must be less than or equal to group.share.max.session.timeout.ms"),
    ([("share.auto.offset.reset", SET, "none")], ErrorCode.INVALID_CONFIG,
     "Invalid value none for configuration share.auto.offset.reset: Invalid value `none` for configuration "
     "share.auto.offset.reset. The value must be either 'earliest', 'latest' or of the format "
     "'by_duration:<PnDTnHnMn.nS.>'."),
    ([("share.auto.offset.reset", SET, "by_duration:-PT1H")], ErrorCode.INVALID_CONFIG, None),
    ([(SESSION, APPEND, "1")], ErrorCode.INVALID_CONFIG,
     "Can't APPEND to key consumer.session.timeout.ms because its type is not LIST."),
    ([(HEARTBEAT, SUBTRACT, "1")], ErrorCode.INVALID_CONFIG,
     "Can't SUBTRACT to key consumer.heartbeat.interval.ms because its type is not LIST."),
    ([(SESSION, SET, None), (HEARTBEAT, SET, None)], ErrorCode.INVALID_REQUEST,
     "Null value not supported for : consumer.session.timeout.ms, consumer.heartbeat.interval.ms"),
    ([(SESSION, SET, "50000"), (SESSION, DELETE, None)], ErrorCode.INVALID_REQUEST,
     "Error due to duplicate config keys"),
])
def test_incremental_errors(broker: BrokerThread, ops: list[tuple[str, int, str | None]], code: int,
                            message: str | None) -> None:
    with RawClient(broker.bootstrap) as c:
        assert incremental(c, 1, GROUP, "g", [(HEARTBEAT, SET, "7000")]).error_code == 0
        r = incremental(c, 1, GROUP, "g", ops)
        assert r.error_code == code
        if message is not None:
            assert r.error_message == message
        assert {n: v for n, (v, source) in group_configs(c, "g").items() if source == GROUP_CONFIG} == {
            HEARTBEAT: "7000"}


def test_the_checks_see_the_groups_other_overrides_and_the_broker_bounds(
        start_broker: Callable[..., BrokerThread]) -> None:
    broker = start_broker({"group.consumer.max.heartbeat.interval.ms": "50000"})
    greater = "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms"
    with RawClient(broker.bootstrap) as c:
        r = incremental(c, 1, GROUP, "g", [(HEARTBEAT, SET, "46000")])  # the broker's session timeout: 45000
        assert (r.error_code, r.error_message) == (ErrorCode.INVALID_CONFIG, greater)
        assert incremental(c, 1, GROUP, "g", [(HEARTBEAT, SET, "46000"), (SESSION, SET, "46001")]).error_code == 0
        r = incremental(c, 1, GROUP, "g", [(SESSION, SET, "46000")])  # against the group's own heartbeat
        assert (r.error_code, r.error_message) == (ErrorCode.INVALID_CONFIG, greater)
        r = incremental(c, 1, GROUP, "", [(SESSION, SET, "50000")])
        assert (r.error_code, r.error_message) == (ErrorCode.INVALID_REQUEST, "Default group resources are not allowed.")


@pytest.mark.parametrize("version", [0, 1, 2])
def test_alter_configs_replaces_a_groups_overrides(broker: BrokerThread, version: int) -> None:
    with RawClient(broker.bootstrap) as c:
        assert incremental(c, 1, GROUP, "g", [(SESSION, SET, "50000"), (HEARTBEAT, SET, "6000")]).error_code == 0
        [r] = alter(c, version, [(GROUP, "g", {HEARTBEAT: "7000"})])
        assert (r.error_code, r.resource_type, r.resource_name) == (0, GROUP, "g")
        configs = group_configs(c, "g")
        assert (configs[SESSION], configs[HEARTBEAT]) == (("45000", DEFAULT_CONFIG), ("7000", GROUP_CONFIG))
        bad, null = alter(c, version, [(GROUP, "g", {SESSION: "1"}), (GROUP, "h", {SESSION: None})])
        assert (bad.error_code, bad.error_message) == (ErrorCode.INVALID_CONFIG, MIN_SESSION)
        assert (null.error_code, null.error_message) == (
            ErrorCode.INVALID_REQUEST, "Null value not supported for : consumer.session.timeout.ms")
        [cleared] = alter(c, version, [(GROUP, "g", {})], validate_only=True)
        assert cleared.error_code == 0 and group_configs(c, "g")[HEARTBEAT] == ("7000", GROUP_CONFIG)
        [cleared] = alter(c, version, [(GROUP, "g", {})])
        assert cleared.error_code == 0 and group_configs(c, "g")[HEARTBEAT] == ("5000", DEFAULT_CONFIG)


def test_overrides_survive_a_restart_and_the_deletion_of_the_group(broker: BrokerThread) -> None:
    with RawClient(broker.bootstrap) as c:
        create_topic(c, "t")
        assert join(c, "g", "m1", ["t"]).heartbeat_interval_ms == 5000
        assert incremental(c, 1, GROUP, "g", [(SESSION, SET, "50000"), (HEARTBEAT, SET, "6000")]).error_code == 0
        assert join(c, "g", "m1", ["t"]).heartbeat_interval_ms == 6000
    broker.restart()
    with RawClient(broker.bootstrap) as c:
        assert group_configs(c, "g")[SESSION] == ("50000", GROUP_CONFIG)
        assert join(c, "g", "m2", ["t"]).heartbeat_interval_ms == 6000
        for member in ("m1", "m2"):
            assert c.request(heartbeat_request("g", member, -1)).error_code == 0  # they leave
        [deleted] = c.request(DeleteGroupsRequest[2](groups_names=["g"])).results
        assert deleted.error_code == 0
        assert group_configs(c, "g")[HEARTBEAT] == ("6000", GROUP_CONFIG)  # Kafka 4.0 keeps them too


def test_a_damaged_group_configs_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / GroupConfigFile.NAME).write_text('{"version": 1, "groups": {"g": {"a": 1}}}')
    with pytest.raises(DataDirError, match="not a minikafka group configs file"):
        GroupConfigFile(tmp_path)
    (tmp_path / GroupConfigFile.NAME).write_text("{")
    with pytest.raises(DataDirError, match="not a minikafka group configs file"):
        GroupConfigFile(tmp_path)


def test_kafka_3_9_has_no_group_configs(start_broker: Callable[..., BrokerThread]) -> None:
    broker = start_broker({"minikafka.kafka.version": "3.9"})
    with RawClient(broker.bootstrap) as c:
        create_topic(c, "t")
        # 3.9's broker checks every resource's type first: one it does not know fails the request
        results = describe(c, 2, (TOPIC, "t"), (GROUP, "g"))
        assert [(r.resource_name, r.error_code, list(r.configs)) for r in results] == [
            ("t", ErrorCode.INVALID_REQUEST, []), ("g", ErrorCode.INVALID_REQUEST, [])]
        assert results[0].error_message.startswith("This most likely occurs because of a request being malformed")
        r = incremental(c, 1, GROUP, "g", [(SESSION, SET, "50000")])
        assert (r.error_code, r.error_message) == (ErrorCode.INVALID_REQUEST, "Unknown resource type 32")
        [r] = alter(c, 1, [(GROUP, "g", {SESSION: "50000"})])
        assert (r.error_code, r.error_message) == (ErrorCode.INVALID_REQUEST, "Unknown resource type 32")
        [topic] = describe(c, 2, (TOPIC, "t"))
        assert topic.error_code == 0


def test_confluent_admin_client_sets_and_describes_a_group(broker: BrokerThread) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ResourceType.GROUP, "g", incremental_configs=[
        ConfigEntry(SESSION, "50000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(30)
    described = admin.describe_configs([ConfigResource(ResourceType.GROUP, "g")])
    [entries] = [future.result(30) for future in described.values()]
    assert (entries[SESSION].value, entries[SESSION].source) == ("50000", ConfigSource.GROUP_CONFIG.value)
    assert (entries[HEARTBEAT].value, entries[HEARTBEAT].source) == ("5000", ConfigSource.DEFAULT_CONFIG.value)
    bad = ConfigResource(ResourceType.GROUP, "g", incremental_configs=[
        ConfigEntry(SESSION, "1000", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(Exception, match="group.consumer.min.session.timeout.ms"):
        admin.incremental_alter_configs([bad])[bad].result(30)


def test_a_resource_type_kafka_does_not_know_fails_the_whole_describe(broker: BrokerThread) -> None:
    with RawClient(broker.bootstrap) as c:
        create_topic(c, "t")
        results = describe(c, 4, (TOPIC, "t"), (GROUP, "g"), (99, "x"))
        assert [(r.resource_type, r.error_code, list(r.configs)) for r in results] == [
            (TOPIC, ErrorCode.INVALID_REQUEST, []), (GROUP, ErrorCode.INVALID_REQUEST, []),
            (99, ErrorCode.INVALID_REQUEST, [])]
        [topic, group] = describe(c, 4, (TOPIC, "t"), (GROUP, "g"), keys=[])  # no keys: every config
        assert (topic.error_code, group.error_code, len(group.configs)) == (0, 0, len(NAMES))
        assert len(topic.configs) > 10
