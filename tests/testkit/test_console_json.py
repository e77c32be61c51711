"""The JSON the live console renders: ``GET /partitions``, ``GET /groups`` and the ``GET /events``
stream, from ``minikafka serve --admin-port`` in a child process, with real clients."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.client import HTTPConnection
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer

from tests.testkit.test_admin_http import Served, http, produce, start_serve, stop_serve


@pytest.fixture(name="served")
def plain_served(tmp_path: Path) -> Iterator[Served]:
    """``minikafka serve --admin-port 0`` with no fault rules, stopped after the test."""
    served = start_serve(tmp_path)
    yield served
    if served.process.poll() is None:
        stop_serve(served)


class Events:
    """One ``GET /events`` subscription, read event by event."""

    def __init__(self, served: Served) -> None:
        host, port = served.admin.removeprefix("http://").split(":")
        self.connection = HTTPConnection(host, int(port), timeout=30)
        self.connection.request("GET", "/events")
        self.response = self.connection.getresponse()

    def next(self) -> dict[str, Any]:
        """The next snapshot event's data (keep-alive comments and the retry field skipped)."""
        event, data = "", b""
        while True:
            line = self.response.readline()  # chunks decoded
            assert line, "the stream ended"
            if line.startswith(b"event: "):
                event = line[7:].strip().decode()
            elif line.startswith(b"data: "):
                data = line[6:]
            elif line == b"\n" and data:
                assert event == "snapshot"
                return json.loads(data)

    def close(self) -> None:
        self.response.close()
        self.connection.close()


def partition(served: Served, name: str) -> dict[str, Any]:
    (found,) = [p for p in http(served, "GET", "/partitions")[1]["partitions"] if f"{p['topic']}-{p['partition']}" == name]
    return found


def test_partitions_list_offsets_segments_and_each_producers_window(served: Served) -> None:
    assert produce(served.bootstrap, "listed", [b"1", b"2", b"3"]) == []
    node = http(served, "GET", "/status")[1]["node_id"]
    p = partition(served, "listed-0")
    assert (p["leader"], p["replicas"], p["isr"]) == (node, [node], [node])
    assert (p["log_start_offset"], p["high_watermark"], p["last_stable_offset"], p["log_end_offset"]) == (0, 3, 3, 3)
    assert p["replica_offsets"] == [{"broker": node, "log_start_offset": 0, "log_end_offset": 3}]
    assert p["segments"] == 1 and p["size_bytes"] > 0
    (producer,) = p["producers"]
    assert list(http(served, "GET", "/topics/listed/0")[1]["producers"]) == [str(producer["producer_id"])]
    assert [(b["first_sequence"], b["last_sequence"], b["first_offset"], b["last_offset"]) for b in producer["batches"]] \
        == [(0, 0, 0, 0), (1, 1, 1, 1), (2, 2, 2, 2)]
    assert producer["current_txn_first_offset"] == -1 and p["producer_count"] == 1
    assert http(served, "POST", "/broker/roll", {"topic": "listed"})[0] == 200
    assert partition(served, "listed-0")["segments"] == 2
    topics = {p["topic"] for p in http(served, "GET", "/partitions")[1]["partitions"]}
    assert not any(t.startswith("__") for t in topics)  # Kafka's internal topics are left out


def test_groups_show_members_assignment_committed_offsets_and_lag(served: Served) -> None:
    assert produce(served.bootstrap, "billed", [b"%d" % i for i in range(5)]) == []
    consumer = Consumer({"bootstrap.servers": served.bootstrap, "group.id": "billing", "log_level": 2,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe(["billed"])
        read = 0
        while read < 3:  # poll's timeout bounds each wait; the test's timeout bounds the loop
            message = consumer.poll(1)
            if message is not None and message.error() is None:
                read += 1
                if read == 3:
                    consumer.commit(message=message, asynchronous=False)
        (group,) = http(served, "GET", "/groups")[1]["groups"]
        assert (group["group_id"], group["state"], group["protocol_type"]) == ("billing", "Stable", "consumer")
        (member,) = group["members"]
        assert member["member_id"] == group["leader"]
        assert member["assignment"] == [{"topic": "billed", "partitions": [0]}]
        assert group["offsets"] == [{"topic": "billed", "partition": 0, "committed": 3, "high_watermark": 5, "lag": 2}]
        assert group["lag"] == 2
    finally:
        consumer.close()
    (group,) = http(served, "GET", "/groups")[1]["groups"]
    assert (group["state"], group["members"], group["lag"]) == ("Empty", [], 2)


def test_groups_show_both_protocols_in_one_shape(served: Served) -> None:
    """A KIP-848 group (group.protocol=consumer) beside a classic one: the same fields, plus its
    epochs and each member's reconciliation."""
    assert produce(served.bootstrap, "shared", [b"1"]) == []
    classic = Consumer({"bootstrap.servers": served.bootstrap, "group.id": "old", "log_level": 2,
                        "auto.offset.reset": "earliest"})
    modern = Consumer({"bootstrap.servers": served.bootstrap, "group.id": "new", "log_level": 2,
                       "group.protocol": "consumer", "auto.offset.reset": "earliest"})
    try:
        for consumer in (classic, modern):
            consumer.subscribe(["shared"])
        by_id: dict[str, Any] = {}
        while [m["assignment"] for g in by_id.values() for m in g["members"]] != [
                [{"topic": "shared", "partitions": [0]}]] * 2:
            for consumer in (classic, modern):
                consumer.poll(0.2)
            by_id = {g["group_id"]: g for g in http(served, "GET", "/groups")[1]["groups"]}
        old, new = by_id["old"], by_id["new"]
        assert (old["type"], new["type"]) == ("classic", "consumer")
        assert set(old) <= set(new) and set(old["members"][0]) <= set(new["members"][0])
        assert (new["state"], new["protocol_type"], new["assignor"], new["leader"]) == (
            "Stable", "consumer", "uniform", None)
        assert new["group_epoch"] == new["assignment_epoch"] == new["generation"] >= 1
        (member,) = new["members"]
        assert (member["member_epoch"], member["member_state"]) == (new["group_epoch"], "STABLE")
        assert (member["subscribed_topics"], member["pending_revocation"]) == (["shared"], [])
        assert member["target_assignment"] == member["assignment"]
    finally:
        classic.close()
        modern.close()


def test_the_event_stream_sends_a_snapshot_then_each_change(served: Served) -> None:
    events = Events(served)
    try:
        assert events.response.status == 200
        assert events.response.getheader("Content-Type") == "text/event-stream"
        first = events.next()
        assert first["status"]["running"] is True and first["partitions"] == [] and first["cluster"] is None
        assert first["feed"]["subscribers"] == 1 and first["feed"]["interval_ms"] == 500
        assert set(first) >= {"now_ms", "transactions", "groups", "faults"}
        second_page = Events(served)
        assert second_page.next()["feed"]["subscribers"] == 2
        second_page.close()
        assert produce(served.bootstrap, "streamed", [b"1"]) == []
        # snapshots come only when something changed: the topic made, then its first record
        watermarks: list[int] = []
        while watermarks != [1]:
            assert watermarks in ([], [0])
            snapshot = events.next()
            watermarks = [p["high_watermark"] for p in snapshot["partitions"]]
        assert snapshot["partitions"] == http(served, "GET", "/partitions")[1]["partitions"]
    finally:
        events.close()
    # both pages gone (noticed within a second): a new subscriber is told when it is the only one
    again = Events(served)
    try:
        while again.next()["feed"]["subscribers"] != 1:
            pass
    finally:
        again.close()


def test_the_page_and_its_files_are_served_and_nothing_else(served: Served) -> None:
    for path in ("/", "/ui", "/ui/"):
        status, body = http(served, "GET", path)
        assert status == 200 and "<title>minikafka console</title>" in body, path
    for name in ("console.js", "render.js", "console.css"):
        assert http(served, "GET", f"/ui/{name}")[0] == 200
    for path in ("/ui/nope.js", "/ui/..%2Fadmin_http.py", "/ui/index.html/x"):
        assert http(served, "GET", path)[0] == 404, path
    assert 'src="http' not in http(served, "GET", "/ui")[1]  # nothing from the internet
    assert http(served, "POST", "/partitions")[0] == 405


def test_head_answers_the_consoles_routes_without_a_body(served: Served) -> None:
    host, port = served.admin.removeprefix("http://").split(":")
    for path in ("/partitions", "/groups", "/ui", "/ui/console.js", "/events"):
        connection = HTTPConnection(host, int(port), timeout=10)
        try:
            connection.request("HEAD", path)
            response = connection.getresponse()
            assert (response.status, response.read()) == (200, b""), path
        finally:
            connection.close()


def test_sigterm_stops_serve_quickly_with_a_page_subscribed(served: Served) -> None:
    events = Events(served)
    try:
        assert events.next()["status"]["running"] is True
        seconds = stop_serve(served)
        assert served.process.returncode == 0
        assert seconds < 1.0, f"SIGTERM took {seconds:.2f} s with a page subscribed"
        assert events.response.read() == b""  # the stream ended with the process
    finally:
        events.close()
