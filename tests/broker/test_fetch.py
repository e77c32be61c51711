"""Fetch: long-polling woken by appends, byte limits that still return one whole batch, out-of-range offsets."""

from __future__ import annotations

import threading
import time
from typing import Any

from kafka.protocol.consumer import FetchRequest

from minikafka.broker.embedded import BrokerThread
from minikafka.storage.batch import split_batches
from tests.kafka_wire import RawClient, build_batch
from tests.scenario_helpers import create_topic, produce

T = "t"


def fetch(client: RawClient, offset: int, max_wait_ms: int = 0, min_bytes: int = 1, max_bytes: int = 1 << 20,
          partition_max_bytes: int = 1 << 20, topic: str = T, version: int = 11) -> Any:
    Request = FetchRequest[version]
    Topic = Request.FetchTopic
    request = Request(
        replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes, isolation_level=0,
        session_id=0, session_epoch=-1,
        topics=[Topic(topic=topic, partitions=[Topic.FetchPartition(partition=0, current_leader_epoch=-1,
                                                                     fetch_offset=offset, last_fetched_epoch=-1,
                                                                     log_start_offset=-1,
                                                                     partition_max_bytes=partition_max_bytes)])],
        forgotten_topics_data=[], rack_id="",
    )
    return client.request(request).responses[0].partitions[0]


def test_long_poll_returns_as_soon_as_data_is_appended(broker: BrokerThread) -> None:
    with RawClient(broker.bootstrap) as c:
        create_topic(c, T)
    result: dict[str, Any] = {}

    def poll() -> None:
        with RawClient(broker.bootstrap) as c:
            started = time.monotonic()
            result["part"] = fetch(c, 0, max_wait_ms=10_000)
            result["seconds"] = time.monotonic() - started

    t = threading.Thread(target=poll)
    t.start()
    # A bounded wait on purpose: the poll must still be waiting (not answered) 0.3 s on, which the
    # lower bound on its duration below checks; no condition can show that nothing happened.
    time.sleep(0.3)
    with RawClient(broker.bootstrap) as c:
        assert produce(c, T, build_batch(value=b"wake")).error_code == 0
    t.join(15)
    assert result["part"].error_code == 0
    assert len(split_batches(result["part"].records)) == 1
    assert 0.25 < result["seconds"] < 5


def test_long_poll_without_data_waits_max_wait(broker: BrokerThread) -> None:
    with RawClient(broker.bootstrap) as c:
        create_topic(c, T)
        started = time.monotonic()
        part = fetch(c, 0, max_wait_ms=400)
        elapsed = time.monotonic() - started
    assert part.error_code == 0 and not part.records
    assert 0.35 < elapsed < 3


def test_one_whole_batch_is_returned_even_above_the_byte_limits(broker: BrokerThread) -> None:
    with RawClient(broker.bootstrap) as c:
        create_topic(c, T)
        big = build_batch(value=b"x" * 5000)
        assert produce(c, T, big).error_code == 0
        assert produce(c, T, build_batch(value=b"y")).error_code == 0
        part = fetch(c, 0, max_bytes=100, partition_max_bytes=100)
        batches = split_batches(part.records)
        assert len(batches) == 1 and batches[0][1].size == len(big)
        assert part.high_watermark == 2


def test_fetch_offset_inside_a_batch_returns_the_batch_containing_it(broker: BrokerThread) -> None:
    with RawClient(broker.bootstrap) as c:
        create_topic(c, T)
        assert produce(c, T, build_batch(count=5)).error_code == 0
        part = fetch(c, 3)
        assert split_batches(part.records)[0][1].base_offset == 0


def test_fetch_beyond_log_end_is_offset_out_of_range(broker: BrokerThread) -> None:
    with RawClient(broker.bootstrap) as c:
        create_topic(c, T)
        assert produce(c, T, build_batch()).error_code == 0
        assert fetch(c, 1).error_code == 0
        assert fetch(c, 2).error_code == 1
        # like Kafka, a partition that could not be read reports every offset as unknown (-1)
        out_of_range = fetch(c, 2)
        assert (out_of_range.high_watermark, out_of_range.log_start_offset) == (-1, -1)
        missing = fetch(c, 0, topic="missing")
        assert (missing.error_code, missing.high_watermark, missing.log_start_offset) == (3, -1, -1)
