"""The HTTP admin endpoint, driven from outside the broker's process.

``minikafka serve --admin-port`` runs as a subprocess; this process only speaks HTTP to it
(and Kafka through confluent-kafka), as a test written in another language would.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer

from tests.client_helpers import CLIENTS, check_consumed, make_records


@dataclass
class Served:
    process: subprocess.Popen[str]
    bootstrap: str
    admin: str
    data_dir: Path


def _read_line(process: subprocess.Popen[str], deadline: float) -> str:
    # byte by byte from the descriptor: a buffered readline would take the next line too, out of
    # select's sight (serve prints its two address lines together)
    assert process.stdout is not None
    fd, line = process.stdout.fileno(), b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.1)
        byte = os.read(fd, 1) if ready else b""
        if byte == b"\n":
            return line.decode().strip()
        line += byte
        if not byte and process.poll() is not None:
            raise AssertionError(f"minikafka serve exited with {process.returncode}: {process.stderr.read()}")
    raise AssertionError("minikafka serve did not report its address within 30 s")


def start_serve(tmp_path: Path, *extra: str) -> Served:
    data_dir = tmp_path / "data"
    process = subprocess.Popen(
        [sys.executable, "-m", "minikafka", "serve", "--port", "0", "--admin-port", "0",
         "--data-dir", str(data_dir), "--log-level", "WARNING", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    deadline = time.monotonic() + 30
    broker_line = _read_line(process, deadline)
    admin_line = _read_line(process, deadline)
    assert broker_line.startswith("minikafka listening on "), broker_line
    assert admin_line.startswith("minikafka admin endpoint on "), admin_line
    return Served(process, broker_line.rsplit(" ", 1)[1], "http://" + admin_line.rsplit(" ", 1)[1], data_dir)


def stop_serve(served: Served) -> float:
    """SIGTERM; returns how long the process took to exit."""
    started = time.monotonic()
    served.process.send_signal(signal.SIGTERM)
    try:
        served.process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        served.process.kill()
        served.process.wait()
        raise
    finally:
        for stream in (served.process.stdout, served.process.stderr):
            if stream is not None:
                stream.close()
    return time.monotonic() - started


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    faults = tmp_path / "faults.yaml"
    faults.write_text(
        "rules:\n"
        "  - id: from-file\n"
        "    action: error_before\n"
        "    api: Produce\n"
        "    topic: file-topic\n"
        "    error: NOT_LEADER_OR_FOLLOWER\n"
        "    trigger: next:2\n"
    )
    served = start_serve(tmp_path, "--faults", str(faults))
    yield served
    if served.process.poll() is None:
        stop_serve(served)


def http(served: Served, method: str, path: str, body: Any = None, raw: bytes | None = None) -> tuple[int, Any]:
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    request = urllib.request.Request(served.admin + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            status, text, ctype = response.status, response.read().decode(), response.headers["Content-Type"]
    except urllib.error.HTTPError as exc:
        status, text, ctype = exc.code, exc.read().decode(), exc.headers["Content-Type"]
        exc.close()
    return status, (json.loads(text) if ctype.startswith("application/json") else text)


def produce(bootstrap: str, topic: str, values: list[bytes], **config: Any) -> list[Any]:
    errors: list[Any] = []
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 0,
                         "retry.backoff.ms": 20, "log_level": 3, **config})
    for value in values:
        producer.produce(topic, value=value, on_delivery=lambda err, msg: errors.append(err) if err else None)
        assert producer.flush(30) == 0
    return errors


def ping(bootstrap: str) -> int:
    return subprocess.run([sys.executable, "-m", "minikafka", "ping", "--bootstrap", bootstrap, "-q",
                           "--timeout", "2"], capture_output=True, timeout=30).returncode


def test_rules_from_the_faults_file_are_installed_at_start_and_fire(served: Served) -> None:
    status, body = http(served, "GET", "/faults")
    assert status == 200
    assert [(r["id"], r["action"], r["fired"]) for r in body["rules"]] == [("from-file", "error_before", 0)]
    assert produce(served.bootstrap, "file-topic", [b"a", b"b"]) == []
    status, rule = http(served, "GET", "/faults/from-file")
    assert (status, rule["fired"], rule["spent"]) == (200, 2, True)


def test_rule_added_over_http_drops_a_response_and_the_retry_is_a_duplicate(served: Served) -> None:
    http(served, "POST", "/topics", {"name": "orders", "partitions": 1})
    status, body = http(served, "POST", "/faults", {"action": "drop_response", "api": "Produce",
                                                    "topic": "orders", "trigger": "nth", "n": 2})
    assert status == 201
    rule_id = body["rules"][0]["id"]
    assert produce(served.bootstrap, "orders", [b"1", b"2", b"3"]) == []
    assert http(served, "GET", f"/faults/{rule_id}")[1]["fired"] == 1
    status, state = http(served, "GET", "/topics/orders/0")
    assert status == 200
    assert state["log_end_offset"] == 3 and state["counters"]["duplicates"] == 1
    assert http(served, "DELETE", f"/faults/{rule_id}")[0] == 200
    assert http(served, "GET", f"/faults/{rule_id}")[0] == 404
    assert http(served, "DELETE", "/faults") == (200, {"removed": 1})  # the file's rule


def test_crash_and_start_over_http(served: Served) -> None:
    records = make_records(100)
    CLIENTS["confluent-kafka"][0](served.bootstrap, "kept", records, **{"enable.idempotence": True})
    status, body = http(served, "POST", "/broker/crash")
    assert status == 200 and body["running"] is False
    assert http(served, "GET", "/health")[0] == 503
    assert ping(served.bootstrap) == 1
    status, body = http(served, "POST", "/broker/start")
    assert status == 200 and body["running"] is True and body["crashes"] == 1
    assert http(served, "GET", "/health") == (200, {"status": "up", "bootstrap": served.bootstrap})
    assert ping(served.bootstrap) == 0
    check_consumed(records, CLIENTS["confluent-kafka"][1](served.bootstrap, "kept", 1, 100, timeout=30))
    status, body = http(served, "POST", "/broker/restart", {"clean": False})
    assert status == 200 and body["crashes"] == 2 and body["restarts"] == 2


def test_roll_and_expire_over_http(served: Served) -> None:
    assert produce(served.bootstrap, "rolled", [b"1", b"2"]) == []
    assert http(served, "POST", "/broker/roll", {"topic": "rolled"}) == (200, {"rolled": ["rolled-0"]})
    assert (served.data_dir / "rolled-0" / "00000000000000000002.snapshot").exists()
    assert http(served, "POST", "/broker/expire-producers", {"topic": "rolled", "partition": 0}) == \
        (200, {"expired": 1})
    assert http(served, "GET", "/topics/rolled/0")[1]["producers"] == {}


def test_cleaner_run_over_http_compacts_and_a_consumer_reads_the_latest_values(served: Served) -> None:
    assert http(served, "POST", "/topics", {"name": "prices", "partitions": 1,
                                            "config": {"cleanup.policy": "compact"}})[0] == 201
    producer = Producer({"bootstrap.servers": served.bootstrap, "linger.ms": 0})
    for i in range(9):
        producer.produce("prices", key=f"item-{i % 3}".encode(), value=f"price-{i}".encode())
    assert producer.flush(30) == 0

    assert http(served, "POST", "/cleaner/run") == (200, {"rolled": [], "cleaned": []})  # the active segment
    status, body = http(served, "POST", "/cleaner/run", {"roll": True, "topic": "prices"})
    assert status == 200 and body["rolled"] == ["prices-0"], body
    assert [(c["topic"], c["partition"], c["records_removed"], c["clean_up_to"]) for c in body["cleaned"]] == \
        [("prices", 0, 6, 9)]
    consumer = Consumer({"bootstrap.servers": served.bootstrap, "group.id": "reader",
                         "auto.offset.reset": "earliest", "enable.partition.eof": True})
    consumer.subscribe(["prices"])
    seen = []
    while (msg := consumer.poll(10)) is not None and not msg.error():
        seen.append((msg.offset(), msg.key(), msg.value()))
    consumer.close()
    assert seen == [(6, b"item-0", b"price-6"), (7, b"item-1", b"price-7"), (8, b"item-2", b"price-8")]

    assert http(served, "POST", "/cleaner/run", {"roll": True, "topic": "nope"})[0] == 404
    status, body = http(served, "POST", "/cleaner/run", {"topic": "prices"})
    assert status == 400 and "roll" in body["error"]
    assert http(served, "POST", "/cleaner/run", {"roll": "yes"})[0] == 400
    assert http(served, "GET", "/cleaner/run")[0] == 405


def test_cleaner_run_is_409_when_the_cleaner_is_off(tmp_path: Path) -> None:
    served = start_serve(tmp_path, "--config", "log.cleaner.enable=false")
    try:
        status, body = http(served, "POST", "/cleaner/run", {"roll": True})
        assert status == 409 and "log.cleaner.enable=false" in body["error"]
    finally:
        stop_serve(served)


def test_bad_requests_get_an_answer_and_do_not_stop_the_endpoint(served: Served) -> None:
    assert http(served, "POST", "/faults", raw=b"{not json")[0] == 400
    status, body = http(served, "POST", "/faults", {"action": "explode"})
    assert status == 400 and "action must be one of" in body["error"]
    assert http(served, "POST", "/faults", [{"action": "close"}, {"action": "close", "trigger": "x"}])[0] == 400
    assert http(served, "GET", "/faults")[1]["rules"][1:] == []  # nothing of the bad list was added
    assert http(served, "GET", "/nowhere")[0] == 404
    assert http(served, "PUT", "/faults", {})[0] == 405
    assert http(served, "POST", "/broker/roll", {"partition": "zero"})[0] == 400
    assert http(served, "GET", "/topics/none/x")[0] == 400
    assert http(served, "GET", "/topics/none/0")[0] == 404
    host, port = served.admin.removeprefix("http://").split(":")
    for garbage in (b"\x00\x01\x02\r\n\r\n", b"GET / HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
                    b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\n\r\n", b"GET / HTTP/1.1\r\nX: " + b"b" * 100_000):
        with socket.create_connection((host, int(port)), timeout=5) as sock:
            sock.sendall(garbage)
            assert sock.recv(100).startswith(b"HTTP/1.1 4")
    assert http(served, "GET", "/health")[0] == 200


def test_keep_alive_connection_serves_several_requests(served: Served) -> None:
    host, port = served.admin.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        for _ in range(3):
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            data = b""
            while b"\r\n\r\n" not in data or not data.endswith(b"}\n"):
                chunk = sock.recv(4096)
                assert chunk, "connection closed"
                data += chunk
            assert data.startswith(b"HTTP/1.1 200 OK")


def test_sigterm_stops_serve_quickly_with_the_admin_endpoint_open(served: Served) -> None:
    assert produce(served.bootstrap, "t", [b"x"]) == []
    host, port = served.admin.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5):  # an idle admin client
        seconds = stop_serve(served)
    assert served.process.returncode == 0
    assert seconds < 1.0, f"SIGTERM took {seconds:.2f} s"


def test_serve_refuses_a_bad_faults_file(tmp_path: Path) -> None:
    bad = tmp_path / "faults.json"
    bad.write_text(json.dumps({"rules": [{"action": "close", "trigger": "whenever"}]}))
    result = subprocess.run([sys.executable, "-m", "minikafka", "serve", "--port", "0", "--faults", str(bad),
                             "--data-dir", str(tmp_path / "d")], capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "trigger must be one of" in result.stderr


def test_sigterm_does_not_wait_for_a_held_response(served: Served) -> None:
    http(served, "POST", "/faults", {"action": "drop_response", "mode": "hold", "hold_ms": 60000, "api": "Produce"})
    producer = Producer({"bootstrap.servers": served.bootstrap, "log_level": 0, "message.timeout.ms": 60000})
    producer.produce("held", value=b"x")
    producer.poll(0)
    deadline = time.monotonic() + 10
    while http(served, "GET", "/faults")[1]["rules"][-1]["fired"] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert stop_serve(served) < 1.0


def test_roll_and_expire_of_a_topic_or_partition_that_does_not_exist_are_404(served: Served) -> None:
    assert produce(served.bootstrap, "present", [b"1"]) == []
    for path in ("/broker/roll", "/broker/expire-producers"):
        status, body = http(served, "POST", path, {"topic": "nope"})
        assert status == 404 and "nope" in body["error"], (path, status, body)
        assert http(served, "POST", path, {"topic": "present", "partition": 5})[0] == 404
        assert http(served, "POST", path, {"topic": "pres*"})[0] == 200  # a glob that matches


def test_head_answers_every_get_route_with_its_headers_and_no_body(served: Served) -> None:
    assert produce(served.bootstrap, "headed", [b"1"]) == []
    host, port = served.admin.removeprefix("http://").split(":")

    def head(path: str) -> tuple[bytes, bytes]:
        with socket.create_connection((host, int(port)), timeout=5) as sock:
            sock.sendall(f"HEAD {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
        headers, _, body = data.partition(b"\r\n\r\n")
        return headers, body

    for path in ("/health", "/metrics", "/status", "/faults", "/topics", "/topics/headed/0"):
        get_status = http(served, "GET", path)[0]
        headers, body = head(path)
        assert headers.startswith(f"HTTP/1.1 {get_status} ".encode()), (path, headers)
        assert b"Content-Length: " in headers and body == b"", (path, headers, body)
    assert head("/topics/nope/0")[0].startswith(b"HTTP/1.1 404 ")


def test_topics_made_over_http_get_num_partitions_by_default(tmp_path: Path) -> None:
    served = start_serve(tmp_path, "--config", "num.partitions=3")
    try:
        assert http(served, "POST", "/topics", {"name": "defaulted"}) == (201, {"name": "defaulted", "partitions": 3})
        assert http(served, "POST", "/topics", {"name": "explicit", "partitions": 2})[1]["partitions"] == 2
    finally:
        stop_serve(served)


def test_the_admin_log_line_names_the_address_it_is_bound_to(tmp_path: Path) -> None:
    served = start_serve(tmp_path, "--log-level", "INFO", "--admin-host", "localhost")
    port = served.admin.rsplit(":", 1)[1]
    served.process.send_signal(signal.SIGTERM)
    _out, err = served.process.communicate(timeout=30)
    assert f"admin endpoint listening on 127.0.0.1:{port} (http://localhost:{port})" in err, err


def test_requests_that_are_not_http_are_answered_400_and_logged_below_warning(caplog: pytest.LogCaptureFixture) -> None:
    from minikafka.testkit import MiniKafka

    caplog.set_level("DEBUG", logger="minikafka.testkit.admin_http")
    with MiniKafka(admin_port=0) as kafka:
        host, port = kafka.admin_url.removeprefix("http://").split(":")  # type: ignore[union-attr]
        for garbage in (b"\x00\x01\x02\r\n\r\n", b"GET /health HTTP/1.1\r\n\r\n"):  # the second has no Host
            with socket.create_connection((host, int(port)), timeout=5) as sock:
                sock.sendall(garbage)
                assert sock.recv(100).startswith(b"HTTP/1.1 400 ")
        with urllib.request.urlopen(kafka.admin_url + "/health", timeout=10) as response:
            assert response.status == 200
    admin_records = [r for r in caplog.records if r.name == "minikafka.testkit.admin_http"]
    assert any(r.levelname == "DEBUG" and r.exc_info for r in admin_records)  # the parse errors, kept for debugging
    assert not [r for r in admin_records if r.levelno >= 30], [r.getMessage() for r in admin_records]
