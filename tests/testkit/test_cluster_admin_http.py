"""The HTTP admin endpoint of a cluster, driven from outside its process.

``minikafka serve --brokers 3 --admin-port 0`` runs as a subprocess; this process speaks HTTP to
it and Kafka through confluent-kafka, as a failover test written in another language would.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.testkit.test_admin_http import Served, http, produce, start_serve, stop_serve

#: each broker of a cluster allocates producer ids on its own (not yet cluster-wide): two idempotent
#: producers that start on different brokers can get the same id, so the failover tests here use plain ones
NOT_IDEMPOTENT = {"enable.idempotence": False}


@pytest.fixture(name="served")
def cluster_served(tmp_path: Path) -> Iterator[Served]:
    """``minikafka serve --brokers 3 --admin-port 0`` (as the fixture ``served``)."""
    served = start_serve(tmp_path, "--brokers", "3", "--config", "replica.lag.time.max.ms=2000")
    yield served
    if served.process.poll() is None:
        stop_serve(served)


def wait_for(condition: Callable[[], Any], what: str, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while not (result := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
    return result


def partition(served: Served, topic: str, number: int = 0) -> dict[str, Any]:
    status, body = http(served, "GET", f"/topics/{topic}/{number}")
    assert status == 200, body
    return body


def in_sync(served: Served, topic: str) -> bool:
    part = partition(served, topic)
    return sorted(part["isr"]) == sorted(part["replicas"])


def test_get_cluster_reports_brokers_leaders_isr_and_each_replicas_offsets(served: Served) -> None:
    status, body = http(served, "POST", "/topics", {"name": "orders", "partitions": 2, "replication_factor": 3,
                                                    "config": {"min.insync.replicas": "2"}})
    assert (status, body) == (201, {"name": "orders", "partitions": 2})
    assert produce(served.bootstrap, "orders", [b"%d" % i for i in range(10)], acks="all") == []

    status, cluster = http(served, "GET", "/cluster")
    assert status == 200
    assert [(b["id"], b["state"], b["isolated"]) for b in cluster["brokers"]] == [
        (1, "active", "none"), (2, "active", "none"), (3, "active", "none")]
    assert {f"{b['host']}:{b['port']}" for b in cluster["brokers"]} == set(served.bootstrap.split(","))
    assert cluster["controller"] in (1, 2, 3)
    parts = {p["partition"]: p for p in cluster["partitions"] if p["topic"] == "orders"}
    assert sorted(parts) == [0, 1]
    # every record went to partition 0 or 1 under acks=all: each one's leader counted it
    assert sum(p["high_watermark"] for p in parts.values()) == 10
    for p in parts.values():
        assert sorted(p["replicas"]) == [1, 2, 3] and p["leader"] == p["replicas"][0] and p["offline"] == []
        assert sorted(p["isr"]) == [1, 2, 3]

    def replicas_caught_up() -> bool:
        part = partition(served, "orders", 0)
        ends = {r["broker"]: r["log_end_offset"] for r in part["replica_offsets"]}
        return sorted(ends) == [1, 2, 3] and set(ends.values()) == {part["high_watermark"]}

    wait_for(replicas_caught_up, "every replica's log end at the high watermark")
    status, health = http(served, "GET", "/health")
    assert (status, health["status"], health["brokers"]) == (200, "up", {"1": "active", "2": "active", "3": "active"})


def test_a_crashed_leader_is_fenced_a_new_one_takes_over_and_it_rejoins_after_start(served: Served) -> None:
    http(served, "POST", "/topics", {"name": "t", "partitions": 1, "replication_factor": 3})
    assert produce(served.bootstrap, "t", [b"before"], acks="all", **NOT_IDEMPOTENT) == []
    before = partition(served, "t")
    old = before["leader"]

    status, cluster = http(served, "POST", f"/brokers/{old}/crash")
    assert status == 200
    assert {b["id"]: b["state"] for b in cluster["brokers"]}[old] == "fenced"
    after = partition(served, "t")
    assert after["leader"] not in (old, -1)
    assert after["leader_epoch"] == before["leader_epoch"] + 1
    assert old not in after["isr"] and after["offline"] == [old]
    status, health = http(served, "GET", "/health")
    assert (status, health["status"]) == (503, "degraded")
    status, body = http(served, "GET", "/status")
    assert (body["crashes"], body["brokers"][str(old)], body["running"]) == (1, "fenced", False)

    # the crashed broker cannot be made leader: it is neither active nor in sync
    status, body = http(served, "POST", "/topics/t/0/leader", {"broker": old})
    assert status == 400 and "not an active in-sync replica" in body["error"]
    assert produce(served.bootstrap, "t", [b"after"], acks="all", **NOT_IDEMPOTENT) == []

    assert http(served, "POST", f"/brokers/{old}/start")[0] == 200
    wait_for(lambda: in_sync(served, "t"), "the restarted broker back in the ISR")
    status, moved = http(served, "POST", "/topics/t/0/leader", {"broker": old})
    assert (status, moved["leader"], moved["leader_epoch"]) == (200, old, after["leader_epoch"] + 1)
    # the new leader's high watermark is what it last learned as a follower, until its followers fetch
    wait_for(lambda: partition(served, "t")["high_watermark"] == 2, "the new leader's high watermark at 2")
    status, health = http(served, "GET", "/health")
    assert (status, health["status"]) == (200, "up")


def test_restart_and_controlled_shutdown_move_leadership_first(served: Served) -> None:
    http(served, "POST", "/topics", {"name": "r", "partitions": 1, "replication_factor": 3})
    leader = partition(served, "r")["leader"]
    status, cluster = http(served, "POST", f"/brokers/{leader}/shutdown")
    assert status == 200
    assert {b["id"]: b["state"] for b in cluster["brokers"]}[leader] == "fenced"
    assert partition(served, "r")["leader"] not in (leader, -1)
    http(served, "POST", f"/brokers/{leader}/start")
    wait_for(lambda: in_sync(served, "r"), "the broker back in the ISR")

    follower = next(r for r in partition(served, "r")["replicas"] if r != partition(served, "r")["leader"])
    status, cluster = http(served, "POST", f"/brokers/{follower}/restart", {"clean": False})
    assert status == 200 and {b["id"]: b["state"] for b in cluster["brokers"]}[follower] == "active"
    status, body = http(served, "GET", "/status")
    assert (body["crashes"], body["restarts"]) == (1, 2)
    wait_for(lambda: in_sync(served, "r"), "the crashed follower back in the ISR")
    assert produce(served.bootstrap, "r", [b"x"], acks="all") == []


def test_bad_requests_get_4xx_and_single_broker_routes_say_what_to_use(served: Served) -> None:
    http(served, "POST", "/topics", {"name": "b", "partitions": 1, "replication_factor": 2})
    status, body = http(served, "POST", "/broker/crash")
    assert status == 409 and "/brokers/<id>/" in body["error"]
    assert http(served, "GET", "/faults") == (200, {"rules": []})
    assert http(served, "POST", "/faults", {"action": "close", "broker": 9}) == \
        (400, {"error": "broker 9: no such broker (the brokers are 1, 2, 3)"})
    assert http(served, "POST", "/brokers/2/slow", {})[0] == 400
    assert http(served, "POST", "/brokers/2/slow", {"ms": 0})[0] == 400
    assert http(served, "POST", "/brokers/2/slow", {"ms": "soon"})[0] == 400
    assert http(served, "POST", "/brokers/9/slow", {"ms": 10})[0] == 404
    assert http(served, "GET", "/faults") == (200, {"rules": []})
    assert http(served, "POST", "/brokers/9/crash") == (404, {"error": "no broker 9 (the cluster has brokers 1 to 3)"})
    assert http(served, "POST", "/brokers/one/crash")[0] == 400
    assert http(served, "POST", "/brokers/1/explode")[0] == 404
    assert http(served, "GET", "/brokers/1/crash")[0] == 405
    assert http(served, "POST", "/brokers/1/isolate", {"from": "moon"})[0] == 400
    assert http(served, "POST", "/topics/b/0/leader", {})[0] == 400
    assert http(served, "POST", "/topics/b/7/leader", {"broker": 1})[0] == 404
    assert http(served, "GET", "/topics/nope/0")[0] == 404
    status, body = http(served, "POST", "/topics", {"name": "big", "replication_factor": 4})
    assert status == 400 and "replication factor" in body["error"].lower()
    # the console's routes answer for the whole cluster
    status, body = http(served, "GET", "/partitions")
    assert status == 200 and [(p["topic"], p["partition"]) for p in body["partitions"]] == [("b", 0)]
    assert len(body["partitions"][0]["replicas"]) == 2
    assert http(served, "GET", "/groups") == (200, {"groups": []})
    assert http(served, "GET", "/")[0] == 200
    assert served.process.poll() is None


def test_serve_refuses_what_a_cluster_does_not_support_yet_with_one_line(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "minikafka", "serve", "--brokers", "3",
                             "--data-dir", str(tmp_path / "d"), "--config", "listeners=PLAINTEXT://:0"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert result.stderr.count("\n") == 1 and "--brokers 3: not yet with listeners" in result.stderr
    assert not (tmp_path / "d").exists()


def ping_file(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "minikafka", "ping", "--address-file", str(path)],
                          capture_output=True, text=True, timeout=60)


def test_the_address_file_names_every_broker_and_ping_needs_them_all(tmp_path: Path) -> None:
    # a container's health check: healthy while every broker answers, not while one is down
    address = tmp_path / "address"
    served = start_serve(tmp_path, "--brokers", "3", "--address-file", str(address))
    try:
        ports = [int(a.rsplit(":", 1)[1]) for a in served.bootstrap.split(",")]
        assert address.read_text().splitlines() == [f"PLAINTEXT 127.0.0.1:{port} broker={node}"
                                                    for node, port in enumerate(ports, 1)]
        result = ping_file(address)
        assert result.returncode == 0, result.stderr
        assert [line.split(" answers")[0] for line in result.stdout.splitlines()] == \
            [f"minikafka at 127.0.0.1:{port}" for port in ports]
        assert http(served, "POST", "/brokers/2/crash")[0] == 200
        result = ping_file(address)
        assert result.returncode == 1
        assert result.stderr.startswith(f"minikafka ping 127.0.0.1:{ports[1]}: ") and result.stderr.count("\n") == 1
        assert http(served, "POST", "/brokers/2/start")[0] == 200
        assert ping_file(address).returncode == 0
    finally:
        stop_serve(served)
    assert not address.exists()


def test_an_admin_port_among_the_brokers_ports_is_refused_in_one_line(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "minikafka", "serve", "--brokers", "3", "--port", "19092",
                             "--admin-port", "19093", "--data-dir", str(tmp_path / "d")], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr == ("minikafka: --admin-port 19093 is broker 2's port (--port 19092, --brokers 3): "
                             "choose one outside 19092-19094\n")
    assert not (tmp_path / "d").exists()


def test_the_console_feed_carries_the_cluster_view(served: Served) -> None:
    from tests.testkit.test_console_json import Events

    http(served, "POST", "/topics", {"name": "shown", "partitions": 1, "replication_factor": 3})
    events = Events(served)
    try:
        snapshot = events.next()
    finally:
        events.close()
    assert snapshot["cluster"] == http(served, "GET", "/cluster")[1]
    assert snapshot["status"]["node_id"] == "cluster" and snapshot["faults"] == []
    (shown,) = snapshot["partitions"]
    assert (shown["topic"], sorted(shown["replicas"]), shown["leader"]) == ("shown", [1, 2, 3], shown["replicas"][0])


def test_a_broker_isolated_from_clients_over_http_refuses_them_until_healed(served: Served) -> None:
    from tests.testkit.test_admin_http import ping

    status, cluster = http(served, "POST", "/brokers/2/isolate", {"from": "clients"})
    assert status == 200
    assert [b["isolated"] for b in cluster["brokers"]] == ["none", "clients", "none"]
    second = f"{cluster['brokers'][1]['host']}:{cluster['brokers'][1]['port']}"
    first = f"{cluster['brokers'][0]['host']}:{cluster['brokers'][0]['port']}"
    assert ping(second) != 0 and ping(first) == 0
    status, cluster = http(served, "POST", "/brokers/2/heal")
    assert status == 200 and cluster["brokers"][1]["isolated"] == "none"
    assert ping(second) == 0
