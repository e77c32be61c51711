"""Fault rules and slowed followers of a cluster run as ``minikafka serve --brokers 3`` in a
subprocess: rules from ``--faults`` (and ``MINIKAFKA_FAULTS``), over HTTP (``/faults``,
``/brokers/<id>/slow``, ``/brokers/<id>/heal``), seen through raw Kafka requests on real sockets."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from minikafka.errors import ErrorCode
from tests.kafka_wire import RawClient, build_batch
from tests.scenario_helpers import produce
from tests.testkit.test_admin_http import Served, http, start_serve, stop_serve
from tests.testkit.test_cluster_admin_http import in_sync, partition, wait_for

LAG_MS = 1000


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Served]:
    rules = tmp_path / "faults.yaml"
    rules.write_text("rules:\n"
                     "  - id: refuse-on-2\n"
                     "    action: error_before\n"
                     "    api: Produce\n"
                     "    topic: orders\n"
                     "    broker: 2\n"
                     "    trigger: always\n")
    served = start_serve(tmp_path, "--brokers", "3", "--faults", str(rules),
                         "--config", f"replica.lag.time.max.ms={LAG_MS}")
    yield served
    if served.process.poll() is None:
        stop_serve(served)


def address(served: Served, node_id: int) -> str:
    broker = http(served, "GET", "/cluster")[1]["brokers"][node_id - 1]
    return f"{broker['host']}:{broker['port']}"


def send(served: Served, node_id: int, topic: str, value: bytes, number: int = 0, acks: int = -1) -> int:
    with RawClient(address(served, node_id)) as client:
        return int(produce(client, topic, build_batch(value=value), number, acks=acks).error_code)


def log_ends(served: Served, topic: str, number: int = 0) -> dict[int, int]:
    return {r["broker"]: r["log_end_offset"] for r in partition(served, topic, number)["replica_offsets"]}


def rule(served: Served, rule_id: str) -> dict[str, Any]:
    status, body = http(served, "GET", f"/faults/{rule_id}")
    assert status == 200, body
    return body


def test_serve_brokers_3_with_faults_applies_each_rule_on_the_brokers_it_names(cluster: Served) -> None:
    assert http(cluster, "POST", "/topics", {"name": "orders", "partitions": 3, "replication_factor": 3})[0] == 201
    for number, node in enumerate((1, 2, 3)):
        wait_for(lambda n=number: sorted(partition(cluster, "orders", n)["isr"]) == [1, 2, 3], "in sync")
        assert http(cluster, "POST", f"/topics/orders/{number}/leader", {"broker": node})[0] == 200
    answers = {node: send(cluster, node, "orders", b"x", number, acks=1) for number, node in enumerate((1, 2, 3))}
    assert answers == {1: ErrorCode.NONE, 2: ErrorCode.NOT_LEADER_OR_FOLLOWER, 3: ErrorCode.NONE}
    from_file = rule(cluster, "refuse-on-2")
    assert (from_file["broker"], from_file["matched"], from_file["by_broker"]) == ([2], 1, {"2": {"matched": 1,
                                                                                                  "fired": 1}})
    wait_for(lambda: set(log_ends(cluster, "orders").values()) == {1}, "partition 0 copied")
    # a rule on one follower's fetches at one leader: broker 3 stops copying partition 0 from broker 1
    status, body = http(cluster, "POST", "/faults", {"id": "follower", "action": "error_before", "api": "Fetch",
                                                     "broker": 1, "from_broker": 3, "trigger": "always"})
    assert status == 201 and body["rules"][0]["from_broker"] == [3]
    wait_for(lambda: rule(cluster, "follower")["fired"] > 0, "broker 3's fetch from broker 1 refused")
    assert send(cluster, 1, "orders", b"y", 0, acks=1) == 0
    wait_for(lambda: log_ends(cluster, "orders")[2] == 2, "broker 2 copying partition 0")
    wait_for(lambda: 3 not in partition(cluster, "orders")["isr"], "broker 3 out of partition 0's ISR")
    assert log_ends(cluster, "orders")[3] == 1
    assert list(rule(cluster, "follower")["by_broker"]) == ["1"]
    assert send(cluster, 3, "orders", b"z", 2, acks=-1) == 0  # broker 3 leads partition 2, replicated by 1 and 2
    assert http(cluster, "DELETE", "/faults/follower") == (200, {"removed": 1})
    wait_for(lambda: in_sync(cluster, "orders"), "broker 3 back in partition 0's ISR")
    assert [r["id"] for r in http(cluster, "GET", "/faults")[1]["rules"]] == ["refuse-on-2"]
    assert cluster.process.poll() is None


def test_a_follower_slowed_over_http_leaves_the_isr_and_comes_back_when_healed(cluster: Served) -> None:
    http(cluster, "POST", "/topics", {"name": "slow", "partitions": 1, "replication_factor": 2,
                                      "config": {"min.insync.replicas": "2"}})
    wait_for(lambda: in_sync(cluster, "slow"), "a new topic in sync")
    leader, follower = partition(cluster, "slow")["replicas"]
    status, body = http(cluster, "POST", f"/brokers/{follower}/slow", {"ms": 120_000})
    assert status == 200 and body["brokers"][follower - 1]["slowed_ms"] == 120_000
    held = rule(cluster, f"slow-{follower}")  # slow answered once a fetch of the follower was held at the leader
    assert held["by_broker"][str(leader)] == {"matched": 1, "fired": 1}
    assert send(cluster, leader, "slow", b"one", acks=1) == 0
    wait_for(lambda: partition(cluster, "slow")["isr"] == [leader], "the slowed follower out of the ISR",
             timeout=LAG_MS / 1000 + 20)
    assert log_ends(cluster, "slow") == {leader: 1, follower: 0}
    assert send(cluster, leader, "slow", b"refused") == ErrorCode.NOT_ENOUGH_REPLICAS
    status, body = http(cluster, "POST", f"/brokers/{follower}/heal")
    assert status == 200 and body["brokers"][follower - 1]["slowed_ms"] is None
    wait_for(lambda: in_sync(cluster, "slow"), "the healed follower back in the ISR")
    assert send(cluster, leader, "slow", b"accepted") == 0


@pytest.mark.parametrize(("brokers", "rules", "expected"), [
    (3, "rules:\n  - action: close\n    broker: 4\n", "rule 1: broker 4: no such broker (the brokers are 1, 2, 3)"),
    (3, "- action: delay\n  delay_ms: 5\n  from_broker: [2, 9]\n", "from_broker 9: no such broker"),
    (3, "- action: close\n  broker: yes\n", "broker must be a node id or a list of them"),
    (1, "- action: close\n  broker: 2\n", "rule 1: broker 2: no such broker (the brokers are 1)"),
])
def test_serve_refuses_a_rule_naming_a_broker_it_does_not_have_with_one_line(
        tmp_path: Path, brokers: int, rules: str, expected: str) -> None:
    (tmp_path / "bad.yaml").write_text(rules)
    result = subprocess.run([sys.executable, "-m", "minikafka", "serve", "--brokers", str(brokers), "--port", "0",
                             "--data-dir", str(tmp_path / "d")], capture_output=True, text=True, timeout=60,
                            env={**os.environ, "MINIKAFKA_FAULTS": str(tmp_path / "bad.yaml")})
    assert result.returncode == 6
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"minikafka: MINIKAFKA_FAULTS={tmp_path / 'bad.yaml'}: ") and expected in result.stderr
    assert not (tmp_path / "d").exists()
