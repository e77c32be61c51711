"""Hostile bytes on a real socket: the broker closes or answers as Kafka does, logs it, and keeps serving.

After every case a healthy client produces and reads back, and the stored log is unchanged by
the rejected input.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable

import pytest
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest

from minikafka.broker.embedded import BrokerThread
from tests.kafka_wire import RawClient, build_batch
from tests.scenario_helpers import create_topic, log_summary, produce

T = "t"


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def header(api_key: int, version: int, correlation: int = 1, client: bytes = b"c", flexible: bool = False) -> bytes:
    h = struct.pack(">hhih", api_key, version, correlation, len(client)) + client
    return h + (b"\x00" if flexible else b"")


CLOSING_INPUT: dict[str, bytes] = {
    "negative-size": struct.pack(">i", -5) + b"xxxx",
    "size-over-socket-request-max-bytes": struct.pack(">i", 104857601),
    "header-shorter-than-fixed-part": frame(b"\x00\x03\x00"),
    "client-id-past-frame": frame(struct.pack(">hhih", 3, 1, 1, 50) + b"abc"),
    "unknown-api-key": frame(header(9999, 0)),
    "unsupported-produce-version": frame(header(0, 99) + b"\x00" * 20),
    # Produce v0-v2 are served (message formats v0/v1); a truncated v2 body still closes
    "produce-v2-truncated-body": frame(header(0, 2) + b"\x00\x01\x00\x00"),
    "garbage-produce-body": frame(header(0, 9, flexible=True) + b"\xff" * 7),
    "truncated-metadata-body": frame(header(3, 1) + b"\x00\x00"),
    "random-bytes": frame(bytes(range(256)) * 3),
}


@pytest.fixture
def seeded(broker: BrokerThread) -> BrokerThread:
    with RawClient(broker.bootstrap) as c:
        create_topic(c, T)
        assert produce(c, T, build_batch(value=b"before")).error_code == 0
    return broker


def healthy(broker: BrokerThread) -> None:
    """A well-behaved client still gets served, and the log holds exactly what it should."""
    with RawClient(broker.bootstrap) as c:
        assert c.request(MetadataRequest[1](topics=None)).brokers[0].node_id == broker.broker.node_id
        before = log_summary(c, T)
        assert produce(c, T, build_batch(value=b"after")).error_code == 0
        assert log_summary(c, T)[:-1] == before


@pytest.mark.parametrize("name", list(CLOSING_INPUT))
def test_malformed_input_closes_only_that_connection_with_a_log_line(
    seeded: BrokerThread, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="minikafka"):
        with RawClient(seeded.bootstrap) as bad, RawClient(seeded.bootstrap) as bystander:
            bad.send_raw(CLOSING_INPUT[name])
            assert bad.is_closed_by_peer(), f"{name}: connection left open"
            assert bystander.request(ApiVersionsRequest[2]()).error_code == 0
    assert any("closing connection" in r.getMessage() or "closed" in r.getMessage() for r in caplog.records)
    healthy(seeded)


def test_truncated_frame_then_disconnect_is_harmless(seeded: BrokerThread) -> None:
    with RawClient(seeded.bootstrap) as bad:
        bad.send_raw(struct.pack(">i", 1000) + b"\x00" * 10)
    healthy(seeded)


def test_api_versions_with_invalid_software_name_gets_invalid_request(seeded: BrokerThread) -> None:
    with RawClient(seeded.bootstrap) as c:
        c.send(ApiVersionsRequest[3](client_software_name="bad name!", client_software_version="1"))
        body = memoryview(c.recv_frame())[4:]  # response header v0: the correlation id
        # Kafka answers in the request's version; kafka-python would re-read any error body as v0.
        response = ApiMessage.decode.__func__(ApiVersionsResponse, body, version=3)
        assert response.error_code == 42
        assert response.api_keys == []
        assert c.request(ApiVersionsRequest[3](client_software_name="ok", client_software_version="1")).error_code == 0


@pytest.mark.parametrize(
    "mutate",
    [
        pytest.param(lambda b: b[:30], id="batch-cut-short"),
        pytest.param(lambda b: b[:8] + struct.pack(">i", 3) + b[12:], id="length-field-below-14"),
        pytest.param(lambda b: b[:16] + b"\x07" + b[17:], id="magic-7"),
        pytest.param(lambda b: b[:-1] + bytes([b[-1] ^ 1]), id="crc-mismatch"),
        pytest.param(lambda b: b"", id="empty-records"),
    ],
)
def test_corrupt_batches_are_refused_and_the_log_is_unchanged(
    seeded: BrokerThread, mutate: Callable[[bytes], bytes]
) -> None:
    with RawClient(seeded.bootstrap) as c:
        before = log_summary(c, T)
        response = produce(c, T, bytearray(mutate(bytes(build_batch(value=b"bad")))))
        assert response.error_code in (2, 87), response
        assert log_summary(c, T) == before
    healthy(seeded)


@pytest.mark.parametrize("name", ["bad/name", "..", "a" * 250, "space name", "ü"])
def test_illegal_topic_names_get_invalid_topic_and_touch_no_file(seeded: BrokerThread, name: str) -> None:
    data_dir = seeded.broker.data_dir
    entries = set(p.name for p in data_dir.iterdir())
    with RawClient(seeded.bootstrap) as c:
        response = c.request(MetadataRequest[4](topics=[MetadataRequest[4].MetadataRequestTopic(name=name)],
                                                allow_auto_topic_creation=True))
        assert response.topics[0].error_code == 17
    assert set(p.name for p in data_dir.iterdir()) == entries
    assert not (data_dir.parent / "name-0").exists()
