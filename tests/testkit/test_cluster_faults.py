"""Fault rules in a cluster, from Python: rules that name the brokers they are in force on, rules on
the brokers' own traffic (a follower's Fetch), and a slowed follower that leaves the ISR and comes
back when healed. Real brokers on 127.0.0.1, raw Kafka requests and a real consumer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest

from minikafka.errors import ErrorCode
from minikafka.testkit import FaultRuleError, MiniKafkaCluster
from tests.kafka_wire import RawClient, build_batch
from tests.scenario_helpers import fetch_raw, produce
from tests.testkit.test_cluster_testkit import read_all, wait_for

LAG_MS = 500


def log_ends(kafka: MiniKafkaCluster, topic: str, partition: int = 0) -> dict[int, int]:
    return {r["broker"]: r["log_end_offset"] for r in kafka.partition(topic, partition)["replica_offsets"]}


def fired_on(rule: Any, node_id: int) -> int:
    return int(rule.by_broker.get(node_id, {}).get("fired", 0))


def test_a_rule_on_broker_2_fires_only_on_broker_2() -> None:
    with MiniKafkaCluster(brokers=3) as kafka:
        topic = kafka.new_topic(partitions=3, replication_factor=3)
        for partition, node in enumerate((1, 2, 3)):
            kafka.wait_until_in_sync(topic, partition)
            kafka.move_leader(topic, partition, node)
        rule = kafka.faults.error_before("NOT_LEADER_OR_FOLLOWER", api="Produce", topic=topic, broker=2,
                                         trigger="always")
        answers = {}
        for partition, node in enumerate((1, 2, 3)):
            with RawClient(kafka.address(node)) as client:
                answers[node] = produce(client, topic, build_batch(value=b"%d" % node), partition, acks=1).error_code
        assert answers == {1: ErrorCode.NONE, 2: ErrorCode.NOT_LEADER_OR_FOLLOWER, 3: ErrorCode.NONE}
        assert (rule.matched, rule.fired, rule.by_broker) == (1, 1, {2: {"matched": 1, "fired": 1}})
        assert set(log_ends(kafka, topic, 1).values()) == {0}  # broker 2's partition: nothing appended
        assert rule.to_dict()["broker"] == [2] and rule.to_dict()["by_broker"] == {"2": {"matched": 1, "fired": 1}}
        # a list of brokers, and every broker when the rule names none
        both = kafka.faults.add("error_before", api="Produce", topic=topic, broker=[1, 3], trigger="always")
        everywhere = kafka.faults.add("close", api="Metadata", trigger="always")
        for partition, node in enumerate((1, 2, 3)):
            with RawClient(kafka.address(node)) as client:
                produce(client, topic, build_batch(), partition, acks=1)
        assert sorted(both.by_broker) == [1, 3] and rule.by_broker[2]["fired"] == 2
        for node in (1, 2, 3):
            with RawClient(kafka.address(node)) as client:
                client.send(_metadata_request())
                assert client.is_closed_by_peer()
        assert {node: counts["fired"] for node, counts in everywhere.by_broker.items()} == {1: 1, 2: 1, 3: 1}


def _metadata_request() -> Any:
    return MetadataRequest[1](topics=[])


def test_a_rule_on_a_followers_fetch_stops_only_its_replication() -> None:
    with MiniKafkaCluster(brokers=3, config={"replica.lag.time.max.ms": LAG_MS}) as kafka:
        topic = kafka.new_topic(partitions=1, replication_factor=3)
        kafka.wait_until_in_sync(topic)
        leader = kafka.leader(topic)
        cut, other = (n for n in kafka.brokers if n != leader)
        rule = kafka.faults.error_before("NOT_LEADER_OR_FOLLOWER", api="Fetch", from_broker=cut, trigger="always")
        wait_for(lambda: fired_on(rule, leader) > 0, f"broker {cut}'s fetch refused by its leader")
        with RawClient(kafka.address(leader)) as client:
            assert produce(client, topic, build_batch(value=b"one"), acks=1).error_code == 0
        wait_for(lambda: log_ends(kafka, topic)[other] == 1, f"broker {other} replicating")
        wait_for(lambda: cut not in kafka.isr(topic), f"broker {cut} out of the ISR", timeout=LAG_MS / 1000 + 20)
        assert log_ends(kafka, topic)[cut] == 0
        assert read_all(kafka.bootstrap, topic, 1) == [b"one"]  # a consumer's Fetch is no broker's
        # its fetches of the consumer group's __consumer_offsets partitions count at their leaders too
        assert leader in rule.by_broker and rule.fired == rule.matched
        clients_only = kafka.faults.add("error_before", api="Fetch", from_broker=False, trigger="always")
        with RawClient(kafka.address(leader)) as client:
            answer = fetch_raw(client, topic)
            assert answer.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert clients_only.fired == 1  # the other follower's fetches are not a client's
        kafka.faults.clear()
        kafka.wait_until_in_sync(topic)
        assert set(log_ends(kafka, topic).values()) == {1}


def test_a_slowed_follower_leaves_the_isr_refuses_acks_all_and_rejoins_when_healed() -> None:
    with MiniKafkaCluster(brokers=2, config={"replica.lag.time.max.ms": LAG_MS}) as kafka:
        topic = kafka.new_topic(partitions=1, replication_factor=2, config={"min.insync.replicas": "2"})
        kafka.wait_until_in_sync(topic)
        leader = kafka.leader(topic)
        follower = 3 - leader
        rule = kafka.slow(follower, 120_000)  # far longer than the test: only heal ends it
        assert [b["slowed_ms"] for b in kafka.describe()["brokers"]] == \
            [120_000 if n == follower else None for n in (1, 2)]
        assert [r.id for r in kafka.faults.rules] == [f"slow-{follower}"]
        assert fired_on(rule, leader) == 1  # slow() returned once a fetch of it was held at the leader
        with RawClient(kafka.address(leader)) as client:
            assert produce(client, topic, build_batch(value=b"one"), acks=1).error_code == 0
        kafka.wait_for_isr(topic, [leader], timeout=LAG_MS / 1000 + 20)  # the slowed follower has left it
        assert log_ends(kafka, topic) == {leader: 1, follower: 0}
        with RawClient(kafka.address(leader)) as client:
            assert produce(client, topic, build_batch(value=b"refused")).error_code == ErrorCode.NOT_ENOUGH_REPLICAS
        kafka.heal(follower)
        assert kafka.faults.rules == [] and kafka.describe()["brokers"][follower - 1]["slowed_ms"] is None
        kafka.wait_until_in_sync(topic)  # the held fetch is answered at once, not after 120 s
        with RawClient(kafka.address(leader)) as client:
            assert produce(client, topic, build_batch(value=b"accepted")).error_code == 0
        assert log_ends(kafka, topic) == {leader: 2, follower: 2}


def test_bad_rules_and_slow_arguments_are_refused(tmp_path: Path) -> None:
    with pytest.raises(FaultRuleError, match=r"broker 4: no such broker \(the brokers are 1, 2, 3\)"):
        MiniKafkaCluster(brokers=3, data_dir=tmp_path / "d", faults=[{"action": "close", "broker": 4}])
    with pytest.raises(FaultRuleError, match="from_broker must be a node id"):
        MiniKafkaCluster(brokers=3, data_dir=tmp_path / "d", faults=[{"action": "close", "from_broker": "two"}])
    with MiniKafkaCluster(brokers=2, faults=[{"id": "early", "action": "delay", "delay_ms": 1, "api": "Fetch",
                                              "from_broker": True, "trigger": "always"}]) as kafka:
        topic = kafka.new_topic(partitions=1, replication_factor=2)
        kafka.wait_until_in_sync(topic)
        (early,) = kafka.faults.rules
        assert early.id == "early" and early.fired > 0  # in force from the brokers' first fetches
        with pytest.raises(ValueError, match="milliseconds > 0"):
            kafka.slow(1, 0)
        with pytest.raises(KeyError, match="no broker 5"):
            kafka.slow(5, 100)
        with pytest.raises(FaultRuleError, match="no such broker"):
            kafka.faults.delay(10, from_broker=[2, 7])


def test_a_crash_rule_crashes_the_broker_it_names_and_starts_it_again() -> None:
    with MiniKafkaCluster(brokers=3, faults=[{"id": "down", "action": "crash", "api": "ApiVersions", "broker": 3,
                                              "restart_after_ms": 200}]) as kafka:
        for node in (1, 2):
            with RawClient(kafka.address(node)) as client:
                assert client.request(_api_versions_request()).error_code == 0
        with RawClient(kafka.address(3)) as client:
            client.send(_api_versions_request())
            assert client.is_closed_by_peer()
        wait_for(lambda: kafka.control.crashes == 1 and kafka.control.restarts == 1, "broker 3 crashed and started")
        wait_for(lambda: kafka.describe()["brokers"][2]["state"] == "active", "broker 3 active again")
        (down,) = kafka.faults.rules
        assert (down.fired, down.by_broker) == (1, {3: {"matched": 1, "fired": 1}})
        with RawClient(kafka.address(3)) as client:  # spent: it fired once
            assert client.request(_api_versions_request()).error_code == 0


def _api_versions_request() -> Any:
    return ApiVersionsRequest[0]()
