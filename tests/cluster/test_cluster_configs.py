"""Topic configs across a cluster, as Kafka keeps them in its metadata log: a change taken by any
broker (one without a replica too) goes through the controller, is described the same by every
broker, reaches a broker that was down, survives restarts of brokers and of the whole cluster, and
is in force on whichever broker leads. Broker resources stay per broker."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ElectionType, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)
from kafka.admin import ConfigResource as KafkaPythonResource
from kafka.admin import ConfigResourceType, KafkaAdminClient
from kafka.protocol.admin import DescribeConfigsRequest

from minikafka.broker.embedded import ClusterThread
from minikafka.errors import ErrorCode
from tests.broker.test_alter_configs import BROKER, DELETE, SET, TOPIC, alter, incremental
from tests.cluster.test_cluster_failover import wait_for
from tests.kafka_wire import RawClient, build_batch
from tests.scenario_helpers import produce

DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG = 1, 5
SETTINGS = {"replica.lag.time.max.ms": 3000, "auto.leader.rebalance.enable": False}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterThread]:
    with ClusterThread(brokers=3, data_dir=str(tmp_path / "cluster"), config=SETTINGS) as c:
        yield c


def create(cluster: ClusterThread, topic: str, assignment: list[list[int]], **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, len(assignment), replica_assignment=assignment, config=configs)])[topic].result(30)


def describe(cluster: ClusterThread, node: int, resource_type: int, name: str, version: int = 2) -> Any:
    """One DescribeConfigs resource, asked of broker ``node``."""
    with RawClient(cluster.address(node)) as client:
        R = DescribeConfigsRequest[version]
        request = R(resources=[(resource_type, name, None)], **({"include_synonyms": False} if version else {}))
        [result] = client.request(request).results
        return result


def topic_configs(cluster: ClusterThread, node: int, topic: str) -> dict[str, tuple[str, int]]:
    """``name: (value, config_source)`` of ``topic`` as broker ``node`` describes it."""
    result = describe(cluster, node, TOPIC, topic)
    assert result.error_code == ErrorCode.NONE, result
    return {entry.name: (entry.value, entry.config_source) for entry in result.configs}


def local_overrides(cluster: ClusterThread, node: int, topic: str) -> dict[str, Any] | None:
    """The overrides broker ``node`` applies to its replicas of ``topic`` (None: it has none)."""
    def read() -> dict[str, Any] | None:
        logs = cluster.cluster.brokers[node].logs
        info = None if logs is None else logs.topics().get(topic)
        return None if info is None else dict(info.configs)
    return cluster.call(read)


def described_everywhere(cluster: ClusterThread, topic: str, name: str, nodes: tuple[int, ...] = (1, 2, 3)
                         ) -> set[tuple[str, int]]:
    return {topic_configs(cluster, node, topic)[name] for node in nodes}


def test_a_change_through_a_broker_without_a_replica_reaches_every_broker_and_survives_restarts(
        cluster: ClusterThread, tmp_path: Path) -> None:
    create(cluster, "cfg", [[2, 3]])  # broker 1 holds no replica
    with RawClient(cluster.address(1)) as client:
        r = incremental(client, 1, TOPIC, "cfg", [("retention.ms", SET, "3600000"), ("cleanup.policy", SET, "compact")])
        assert r.error_code == ErrorCode.NONE, r
    assert described_everywhere(cluster, "cfg", "retention.ms") == {("3600000", DYNAMIC_TOPIC_CONFIG)}
    assert described_everywhere(cluster, "cfg", "cleanup.policy") == {("compact", DYNAMIC_TOPIC_CONFIG)}
    assert described_everywhere(cluster, "cfg", "segment.ms") == {("604800000", DEFAULT_CONFIG)}
    expected = {"retention.ms": "3600000", "cleanup.policy": "compact"}
    assert [local_overrides(cluster, n, "cfg") for n in (1, 2, 3)] == [None, expected, expected]
    with RawClient(cluster.address(cluster.leader("cfg", 0))) as client:  # compacted now: keys required
        assert produce(client, "cfg", build_batch(value=b"keyless")).error_code == ErrorCode.INVALID_RECORD
        assert produce(client, "cfg", build_batch(key=b"k", value=b"keyed")).error_code == ErrorCode.NONE

    cluster.crash(3)  # down while the topic changes: it learns of it when it starts
    with RawClient(cluster.address(1)) as client:
        [r] = alter(client, 1, [(TOPIC, "cfg", {"retention.ms": "7200000"})])  # replaces every override
        assert r.error_code == ErrorCode.NONE, r
    assert described_everywhere(cluster, "cfg", "cleanup.policy", (1, 2)) == {("delete", DEFAULT_CONFIG)}
    assert local_overrides(cluster, 3, "cfg") == expected  # as it was when the broker went down
    cluster.start_broker(3)
    assert local_overrides(cluster, 3, "cfg") == {"retention.ms": "7200000"}
    plog_config = cluster.call(lambda: cluster.cluster.brokers[3].logs.get_log("cfg", 0).config)  # type: ignore[union-attr]
    assert (plog_config["retention.ms"], plog_config["cleanup.policy"]) == (7200000, "delete")
    assert described_everywhere(cluster, "cfg", "retention.ms") == {("7200000", DYNAMIC_TOPIC_CONFIG)}

    cluster.stop()  # the whole cluster (the fixture's stop then does nothing), then again on its data dir
    with ClusterThread(brokers=3, data_dir=str(tmp_path / "cluster"), config=SETTINGS) as again:
        assert described_everywhere(again, "cfg", "retention.ms") == {("7200000", DYNAMIC_TOPIC_CONFIG)}
        admin = AdminClient({"bootstrap.servers": again.bootstrap})
        resource = ConfigResource(ConfigResource.Type.TOPIC, "cfg")
        entries = admin.describe_configs([resource])[resource].result(10)
        assert (entries["retention.ms"].value, entries["retention.ms"].source) == (
            "7200000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
        assert entries["cleanup.policy"].source == ConfigSource.DEFAULT_CONFIG.value


def test_min_insync_replicas_set_through_the_admin_client_holds_on_whichever_broker_leads(
        cluster: ClusterThread) -> None:
    create(cluster, "strict", [[1, 2, 3]])
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, "strict", incremental_configs=[
        ConfigEntry("min.insync.replicas", "3", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(10)
    with RawClient(cluster.address(1)) as client:
        assert produce(client, "strict", build_batch(value=b"three in sync")).error_code == ErrorCode.NONE
    cluster.crash(1)
    leader = cluster.leader("strict", 0)
    assert leader in (2, 3)
    with RawClient(cluster.address(leader)) as client:
        assert produce(client, "strict", build_batch(value=b"two")).error_code == ErrorCode.NOT_ENOUGH_REPLICAS
        assert produce(client, "strict", build_batch(value=b"acks=1"), acks=1).error_code == ErrorCode.NONE
    back = ConfigResource(ConfigResource.Type.TOPIC, "strict", incremental_configs=[
        ConfigEntry("min.insync.replicas", None, incremental_operation=AlterConfigOpType.DELETE)])
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})  # one that never knew broker 1
    admin.incremental_alter_configs([back])[back].result(10)  # the default (1): two in sync are enough
    with RawClient(cluster.address(leader)) as client:
        assert produce(client, "strict", build_batch(value=b"two suffice")).error_code == ErrorCode.NONE


def test_max_message_bytes_changed_while_a_broker_was_down_holds_when_it_leads_again(cluster: ClusterThread) -> None:
    create(cluster, "sized", [[1, 2, 3]])
    cluster.crash(1)
    with RawClient(cluster.address(3)) as client:
        assert incremental(client, 1, TOPIC, "sized", [("max.message.bytes", SET, "1000")]).error_code == 0
    cluster.start_broker(1)
    wait_for(lambda: 1 in cluster.state("sized", 0).isr, "broker 1 back in the ISR")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    tp = TopicPartition("sized", 0)
    assert admin.elect_leaders(ElectionType.PREFERRED, [tp]).result(30) == {tp: None}
    assert cluster.leader("sized", 0) == 1
    with RawClient(cluster.address(1)) as client:
        assert produce(client, "sized", build_batch(value=b"x" * 3000)).error_code == ErrorCode.MESSAGE_TOO_LARGE
        assert produce(client, "sized", build_batch(value=b"x" * 100)).error_code == ErrorCode.NONE


def test_switching_unclean_election_on_elects_a_leaderless_partition(cluster: ClusterThread) -> None:
    create(cluster, "lossy", [[1, 2]])
    cluster.crash(2)
    cluster.crash(1)  # the last in-sync replica: no leader
    cluster.start_broker(2)  # not in sync: a clean election cannot choose it
    assert cluster.leader("lossy", 0) == -1
    with RawClient(cluster.address(3)) as client:
        r = incremental(client, 1, TOPIC, "lossy", [("unclean.leader.election.enable", SET, "true")])
        assert r.error_code == ErrorCode.NONE, r
    assert (cluster.leader("lossy", 0), cluster.state("lossy", 0).isr) == (2, (2,))


def test_errors_and_validate_only_are_the_single_brokers_on_every_broker(cluster: ClusterThread) -> None:
    create(cluster, "checked", [[2]], **{"retention.ms": "3600000"})
    for node in (1, 2, 3):
        assert describe(cluster, node, TOPIC, "missing").error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert describe(cluster, node, TOPIC, "missing", version=0).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        with RawClient(cluster.address(node)) as client:
            answers = alter(client, 1, [(TOPIC, "missing", {"retention.ms": "1"}),
                                        (TOPIC, "checked", {"no.such.config": "1"})])
            assert [r.error_code for r in answers] == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.INVALID_CONFIG]
            bad = incremental(client, 1, TOPIC, "checked", [("min.cleanable.dirty.ratio", SET, "1.5")])
            assert bad.error_code == ErrorCode.INVALID_CONFIG
            assert incremental(client, 1, TOPIC, "missing", [("retention.ms", DELETE, None)]).error_code == 3
            checked_only = incremental(client, 1, TOPIC, "checked", [("retention.ms", SET, "5")], validate_only=True)
            assert checked_only.error_code == ErrorCode.NONE
    assert described_everywhere(cluster, "checked", "retention.ms") == {("3600000", DYNAMIC_TOPIC_CONFIG)}
    assert local_overrides(cluster, 2, "checked") == {"retention.ms": "3600000"}


def test_a_broker_resource_is_answered_by_the_broker_it_names(cluster: ClusterThread) -> None:
    wrong = describe(cluster, 1, BROKER, "2")
    assert (wrong.error_code, wrong.error_message) == (ErrorCode.INVALID_REQUEST,
                                    "Unexpected broker id, expected 1 or empty string, but received 2")
    assert describe(cluster, 2, BROKER, "2").error_code == ErrorCode.NONE
    admin = AdminClient({"bootstrap.servers": cluster.address(1)})
    for node in (2, 3):  # the admin client sends a broker resource to that broker
        resource = ConfigResource(ConfigResource.Type.BROKER, str(node))
        assert "log.retention.ms" in admin.describe_configs([resource])[resource].result(10)
    inert = "sasl.kerberos.min.time.before.relogin"
    with RawClient(cluster.address(1)) as client:
        r = incremental(client, 1, BROKER, "2", [(inert, SET, "58000")])
        assert (r.error_code, r.error_message) == (ErrorCode.INVALID_REQUEST,
                                                   "Unexpected broker id, expected 1, but received 2")
        [r] = alter(client, 1, [(BROKER, "two", {inert: "58000"})])
        assert (r.error_code, r.error_message) == (ErrorCode.INVALID_REQUEST,
                                                   "Node id must be an integer, but it is: two")
        assert incremental(client, 1, BROKER, "1", [(inert, SET, "58000")]).error_code == ErrorCode.NONE
        assert incremental(client, 1, BROKER, "", [(inert, SET, "58000")]).error_code == ErrorCode.NONE


def test_kafka_python_admin_alters_and_describes_a_topic_across_the_cluster(cluster: ClusterThread) -> None:
    create(cluster, "kp", [[3]])
    admin = KafkaAdminClient(bootstrap_servers=cluster.address(1))
    try:
        admin.alter_configs([KafkaPythonResource(ConfigResourceType.TOPIC, "kp", configs={"segment.ms": "600000"})])
        answer = admin.describe_configs([KafkaPythonResource(ConfigResourceType.TOPIC, "kp")])
    finally:
        admin.close()
    assert answer["topic"]["kp"]["segment.ms"]["value"] == "600000"
    assert described_everywhere(cluster, "kp", "segment.ms") == {("600000", DYNAMIC_TOPIC_CONFIG)}
    assert local_overrides(cluster, 3, "kp") == {"segment.ms": "600000"}

