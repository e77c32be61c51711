"""``--kafka-version X.Y`` (setting ``minikafka.kafka.version``): the broker answers as that Kafka
release does (issue: keeping up with Kafka 4.x clients)."""

from __future__ import annotations

import logging
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import ApiVersionsRequest

from minikafka.broker.embedded import BrokerThread
from minikafka.startup_errors import ConfigError
from tests.groups.consumer_group_wire import join
from tests.kafka_wire import RawClient


def advertised(broker: BrokerThread) -> tuple[dict[int, tuple[int, int]], list[str]]:
    with RawClient(broker.bootstrap) as c:
        r = c.request(ApiVersionsRequest[3](client_software_name="t", client_software_version="1"))
    return ({k.api_key: (k.min_version, k.max_version) for k in r.api_keys},
            [f.name for f in r.finalized_features])


def fetch_v3(broker: BrokerThread) -> bool:
    """Whether a Fetch v3 gets an answer (False: the broker closed the connection)."""
    with RawClient(broker.bootstrap) as c:
        c.send(FetchRequest[3](replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1024, topics=[]))
        try:
            c.recv_frame()
            return True
        except ConnectionError:
            return False


def test_kafka_3_9_has_no_consumer_group_protocol(start_broker: Callable[..., BrokerThread]) -> None:
    broker = start_broker({"minikafka.kafka.version": "3.9"})
    versions, finalized = advertised(broker)
    assert 68 not in versions and 69 not in versions and finalized == []
    assert versions[3] == (0, 12) and versions[1][0] == 0 and fetch_v3(broker)
    lines: list[str] = []

    class Lines(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    logger = logging.getLogger(f"librdkafka-{broker.port}")
    logger.addHandler(Lines())
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g", "group.protocol": "consumer",
                         "debug": "cgrp", "logger": logger})
    try:
        consumer.subscribe(["t"])
        deadline = time.monotonic() + 30
        # as against a real 3.9 broker: librdkafka finds no ConsumerGroupHeartbeat and never joins
        while not any("ConsumerGroupHeartbeatRequest not supported by broker" in line for line in lines):
            assert time.monotonic() < deadline, "librdkafka did not find the consumer protocol missing"
            consumer.poll(0.1)
        assert consumer.assignment() == []
    finally:
        consumer.close()


def test_kafka_4_0_drops_the_versions_kip_896_removed(start_broker: Callable[..., BrokerThread]) -> None:
    broker = start_broker({"minikafka.kafka.version": "4.0"})
    versions, finalized = advertised(broker)
    assert (versions[1], versions[3], versions[8], versions[11]) == ((4, 17), (0, 13), (2, 9), (2, 9))
    assert versions[0] == (0, 12)  # Produce keeps v0 listed: librdkafka reads its compression support from it
    assert (versions[68], versions[69], finalized) == ((0, 1), (0, 1), ["group.version"])
    assert not fetch_v3(broker)  # below the minimum: the connection is closed
    with RawClient(broker.bootstrap) as c:
        assert join(c, "g", "m", []).error_code == 0
    default, _ = advertised(start_broker())
    assert default[1][0] == 0 and default[11][0] == 0  # without the setting nothing is removed


def test_an_unknown_release_is_one_clear_error(start_broker: Callable[..., BrokerThread], tmp_path: Any) -> None:
    with pytest.raises(ConfigError, match="minikafka.kafka.version=5.9: expected one of 3.9, 4.0"):
        start_broker({"minikafka.kafka.version": "5.9"})
    done = subprocess.run([sys.executable, "-m", "minikafka", "serve", "--port", "0", "--data-dir",
                           str(tmp_path / "d"), "--kafka-version", "5.9"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "minikafka: minikafka.kafka.version=5.9: expected one of 3.9, 4.0"]


def test_the_setting_names_every_release_with_a_table() -> None:
    from minikafka.config import KAFKA_RELEASES
    from minikafka.protocol.kafka_versions import RELEASES

    assert set(KAFKA_RELEASES) == {"", *RELEASES}
