"""Limits with Kafka's names: connection counts, idle time, frame sizes, slow readers and slowloris.

Each test starts a broker with small limits, pushes past them over real sockets, and checks
both the refusal (closed connection or Kafka's error, with a log line) and that well-behaved
clients keep being served meanwhile.
"""

from __future__ import annotations

import logging
import socket
import struct
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest

from minikafka.broker.connection import WRITE_HIGH_WATER
from minikafka.broker.embedded import BrokerThread
from tests.kafka_wire import RawClient, build_batch
from tests.scenario_helpers import clock_ahead, create_topic, produce


def served(bootstrap: str, timeout: float = 5.0) -> bool:
    """A new connection gets an ApiVersions answer."""
    try:
        with RawClient(bootstrap, timeout=timeout) as c:
            return c.request(ApiVersionsRequest[2]()).error_code == 0
    except OSError:
        return False


def api_versions_latency(bootstrap: str) -> float:
    started = time.monotonic()
    assert served(bootstrap)
    return time.monotonic() - started


# ----------------------------------------------------------------------------- connection counts


def test_max_connections_per_ip_refuses_the_next_one_with_a_log_line(
    start_broker: Callable[..., BrokerThread], caplog: pytest.LogCaptureFixture
) -> None:
    broker = start_broker(config={"max.connections.per.ip": 3})
    with caplog.at_level(logging.WARNING, logger="minikafka"):
        held = [RawClient(broker.bootstrap) for _ in range(3)]
        try:
            for c in held:
                assert c.request(ApiVersionsRequest[2]()).error_code == 0
            with RawClient(broker.bootstrap) as extra:
                assert extra.is_closed_by_peer()
        finally:
            held.pop().close()
        deadline = time.monotonic() + 5
        while not served(broker.bootstrap) and time.monotonic() < deadline:
            time.sleep(0.05)  # the freed slot is released when the broker sees the close
        assert served(broker.bootstrap)
        for c in held:
            c.close()
    assert any("Rejected connection from 127.0.0.1" in r.getMessage() and "max.connections.per.ip" in r.getMessage()
               for r in caplog.records)


def test_per_ip_override_raises_the_limit_for_that_address(start_broker: Callable[..., BrokerThread]) -> None:
    broker = start_broker(config={"max.connections.per.ip": 1, "max.connections.per.ip.overrides": "127.0.0.1:4"})
    held = [RawClient(broker.bootstrap) for _ in range(4)]
    try:
        assert all(c.request(ApiVersionsRequest[2]()).error_code == 0 for c in held)
        with RawClient(broker.bootstrap) as extra:
            assert extra.is_closed_by_peer()
    finally:
        for c in held:
            c.close()


def test_max_connections_caps_the_whole_broker(start_broker: Callable[..., BrokerThread]) -> None:
    broker = start_broker(config={"max.connections": 2})
    with RawClient(broker.bootstrap) as a, RawClient(broker.bootstrap) as b:
        assert a.request(ApiVersionsRequest[2]()).error_code == 0
        assert b.request(ApiVersionsRequest[2]()).error_code == 0
        with RawClient(broker.bootstrap) as c:
            assert c.is_closed_by_peer()
        assert broker.broker is not None and broker.broker.quotas.refused >= 1


# ----------------------------------------------------------------------------- idle connections


def test_idle_connection_is_closed_and_a_busy_one_is_not(
    start_broker: Callable[..., BrokerThread], caplog: pytest.LogCaptureFixture
) -> None:
    broker = start_broker(config={"connections.max.idle.ms": 400})
    with caplog.at_level(logging.INFO, logger="minikafka"), RawClient(broker.bootstrap) as idle, \
            RawClient(broker.bootstrap) as busy:
        # Real time on purpose: the idle sweeper measures on the monotonic clock, and the busy
        # connection must NOT be closed while it keeps asking, for well over the idle limit.
        started = time.monotonic()
        while time.monotonic() - started < 1.5:
            assert busy.request(ApiVersionsRequest[2]()).error_code == 0
            time.sleep(0.1)
        assert idle.is_closed_by_peer(wait=0.1)
    assert any("connections.max.idle.ms" in r.getMessage() for r in caplog.records)


def test_a_long_poll_fetch_longer_than_the_idle_limit_is_answered(start_broker: Callable[..., BrokerThread]) -> None:
    broker = start_broker(config={"connections.max.idle.ms": 300})
    with RawClient(broker.bootstrap) as c:
        create_topic(c, "poll")
        R = FetchRequest[11]
        request = R(replica_id=-1, max_wait_ms=1200, min_bytes=1, max_bytes=1024, isolation_level=0, session_id=0,
                    session_epoch=-1, topics=[R.FetchTopic(topic="poll", partitions=[R.FetchTopic.FetchPartition(
                        partition=0, current_leader_epoch=-1, fetch_offset=0, log_start_offset=-1,
                        partition_max_bytes=1024)])], forgotten_topics_data=[], rack_id="")
        started = time.monotonic()
        response = c.request(request)
        assert 1.0 <= time.monotonic() - started < 5
        assert response.responses[0].partitions[0].error_code == 0


def test_slowloris_trickling_a_frame_is_closed_and_others_are_not_slowed(
    start_broker: Callable[..., BrokerThread],
) -> None:
    broker = start_broker(config={"connections.max.idle.ms": 600})
    trickling = [RawClient(broker.bootstrap) for _ in range(20)]
    closed = [False] * len(trickling)
    stop = threading.Event()

    def trickle(i: int, c: RawClient) -> None:
        try:
            c.send_raw(struct.pack(">i", 1000))
            while not stop.is_set():
                c.send_raw(b"\x00")
                time.sleep(0.1)
        except OSError:
            closed[i] = True

    threads = [threading.Thread(target=trickle, args=(i, c), daemon=True) for i, c in enumerate(trickling)]
    for t in threads:
        t.start()
    try:
        latencies = [api_versions_latency(broker.bootstrap) for _ in range(10)]
        assert max(latencies) < 0.5, latencies
        deadline = time.monotonic() + 5
        while not all(closed) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert all(closed), f"{closed.count(False)} trickling connections still open"
    finally:
        stop.set()
        for t in threads:
            t.join(5)
        for c in trickling:
            c.close()


# ----------------------------------------------------------------------------- slow readers


def _broker_buffers(broker: BrokerThread) -> list[tuple[int, int]]:
    """(bytes queued to send, bytes received but not yet read) per open connection."""

    def read() -> list[tuple[int, int]]:
        assert broker.broker is not None
        return [(conn.transport.get_write_buffer_size(), conn.reader.buffered)
                for conn in broker.broker._connections]

    return broker.call(read)


def test_a_reader_that_never_reads_cannot_make_the_broker_buffer_without_limit(
    start_broker: Callable[..., BrokerThread],
) -> None:
    broker = start_broker(config={"connections.max.idle.ms": 3000})
    with RawClient(broker.bootstrap) as c:
        create_topic(c, "big")
        for i in range(8):
            assert produce(c, "big", build_batch(value=bytes([i]) * 250_000)).error_code == 0
    R = FetchRequest[11]
    request = R(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=2 << 20, isolation_level=0, session_id=0,
                session_epoch=-1, topics=[R.FetchTopic(topic="big", partitions=[R.FetchTopic.FetchPartition(
                    partition=0, current_leader_epoch=-1, fetch_offset=0, log_start_offset=-1,
                    partition_max_bytes=2 << 20)])], forgotten_topics_data=[], rack_id="")
    slow = socket.create_connection(("127.0.0.1", broker.port))
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    try:
        request.with_header(correlation_id=1, client_id="slow")
        one = bytes(request.encode(framed=True, header=True))
        slow.sendall(one * 200)  # 200 pipelined fetches of ~2 MB each = ~400 MB of answers, never read
        peak = (0, 0)
        deadline = time.monotonic() + 2  # a bounded watch: the buffers must NOT grow past their limits
        while time.monotonic() < deadline:
            for queued, unread in _broker_buffers(broker):
                peak = (max(peak[0], queued), max(peak[1], unread))
            time.sleep(0.05)
        # at most one answer above the high-water mark, and the unread requests are small
        assert peak[0] <= WRITE_HIGH_WATER + (2 << 20) + (1 << 20), peak
        assert peak[1] <= 2 << 20, peak
        assert api_versions_latency(broker.bootstrap) < 0.5  # others are served meanwhile
        # and the stuck reader is eventually dropped as idle (its queued answers are discarded)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(_broker_buffers(broker)) > 0:
            time.sleep(0.2)
        assert _broker_buffers(broker) == []
    finally:
        slow.close()


# ----------------------------------------------------------------------------- request limits


def test_frame_above_a_configured_socket_request_max_bytes_closes(start_broker: Callable[..., BrokerThread]) -> None:
    broker = start_broker(config={"socket.request.max.bytes": 4096})
    with RawClient(broker.bootstrap) as c:
        create_topic(c, "small")
        assert produce(c, "small", build_batch(value=b"x" * 1000)).error_code == 0
        c.send_raw(struct.pack(">i", 4097))
        assert c.is_closed_by_peer()
    assert served(broker.bootstrap)


def test_message_max_bytes_and_the_topic_override(start_broker: Callable[..., BrokerThread]) -> None:
    broker = start_broker(config={"message.max.bytes": 2000})
    with RawClient(broker.bootstrap) as c:
        create_topic(c, "capped")
        create_topic(c, "roomy", configs={"max.message.bytes": "100000"})
        assert produce(c, "capped", build_batch(value=b"x" * 1000)).error_code == 0
        assert produce(c, "capped", build_batch(value=b"x" * 5000)).error_code == 10  # MESSAGE_TOO_LARGE
        assert produce(c, "roomy", build_batch(value=b"x" * 5000)).error_code == 0


def test_a_null_where_the_schema_forbids_one_closes_like_an_unparsable_request(
    start_broker: Callable[..., BrokerThread],
) -> None:
    broker = start_broker()
    with RawClient(broker.bootstrap) as c:
        create_topic(c, "nulls")
        R = ListOffsetsRequest[5]
        c.send(R(replica_id=-1, isolation_level=0, topics=[R.ListOffsetsTopic(name="nulls", partitions=None)]))
        assert c.is_closed_by_peer()
    assert served(broker.bootstrap)


def test_fetch_naming_no_partitions_waits_without_blocking_the_broker(
    start_broker: Callable[..., BrokerThread],
) -> None:
    broker = start_broker()
    R = FetchRequest[7]
    request = R(replica_id=-1, max_wait_ms=1000, min_bytes=1, max_bytes=1024, isolation_level=0, session_id=0,
                session_epoch=-1, topics=[], forgotten_topics_data=[])
    with RawClient(broker.bootstrap) as c:
        started = time.monotonic()
        c.send(request)
        assert api_versions_latency(broker.bootstrap) < 0.5  # the event loop is not spinning
        response = c.recv(request)
        assert time.monotonic() - started >= 0.9
        assert response.error_code == 0


def test_fetch_sessions_are_declined_so_none_are_kept(start_broker: Callable[..., BrokerThread]) -> None:
    """Kafka bounds its session cache (max.incremental.fetch.session.cache.slots); minikafka keeps
    none: a request for a new session (epoch 0) is answered with session id 0, a full fetch."""
    broker = start_broker()
    with RawClient(broker.bootstrap) as c:
        create_topic(c, "sessions")
        R = FetchRequest[12]
        for _ in range(50):
            response = c.request(R(
                replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1024, isolation_level=0, session_id=0,
                session_epoch=0, topics=[R.FetchTopic(topic="sessions", topic_id=None, partitions=[
                    R.FetchTopic.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=0,
                                                last_fetched_epoch=-1, log_start_offset=-1,
                                                partition_max_bytes=1024)])],
                forgotten_topics_data=[], rack_id=""))
            assert response.error_code == 0 and response.session_id == 0


def test_metadata_from_a_second_plaintext_listener_advertises_that_listener(
    start_broker: Callable[..., BrokerThread],
) -> None:
    broker = start_broker(config={"listeners": "PLAINTEXT://127.0.0.1:0,REPLICATION://127.0.0.1:0",
                                  "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,REPLICATION:PLAINTEXT"})
    assert broker.broker is not None and broker.broker.listeners is not None
    for listener in broker.broker.listeners.listeners:
        with RawClient(listener.bootstrap) as c:
            response: Any = c.request(MetadataRequest[1](topics=None))
            assert (response.brokers[0].host, response.brokers[0].port) == (listener.endpoint_host,
                                                                            listener.endpoint_port)


# ----------------------------------------------------------------------------- producer state


def test_producer_state_is_bounded_per_partition_and_frees_up_on_expiry(
    start_broker: Callable[..., BrokerThread],
) -> None:
    from tests.scenario_helpers import log_summary

    broker = start_broker(config={"minikafka.producer.state.max.entries": 5, "producer.id.expiration.ms": 500})
    with RawClient(broker.bootstrap) as c:
        create_topic(c, "pids")
        for pid in range(1000, 1005):
            assert produce(c, "pids", build_batch(producer_id=pid, epoch=0, base_sequence=0)).error_code == 0
        before = log_summary(c, "pids")
        refused = produce(c, "pids", build_batch(producer_id=1005, epoch=0, base_sequence=0), version=9)
        assert refused.error_code == 89  # THROTTLING_QUOTA_EXCEEDED
        assert "max.entries" in (refused.error_message or "")
        assert log_summary(c, "pids") == before
        # producers already tracked keep their exact semantics: next batch and a duplicate retry
        assert produce(c, "pids", build_batch(producer_id=1000, epoch=0, base_sequence=1)).error_code == 0
        duplicate = produce(c, "pids", build_batch(producer_id=1000, epoch=0, base_sequence=1))
        assert duplicate.error_code == 0 and len(log_summary(c, "pids")) == len(before) + 1
        with clock_ahead(broker.broker, 700):  # every producer is now past producer.id.expiration.ms
            assert produce(c, "pids", build_batch(producer_id=1005, epoch=0, base_sequence=0)).error_code == 0
