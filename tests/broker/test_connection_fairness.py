"""Connections take turns: a client that pipelines many requests does not hold the broker while
another connection's request waits (Kafka queues the requests of all connections in one FIFO)."""

from __future__ import annotations

import time
from typing import Any

from kafka.protocol.consumer import FetchRequest

from minikafka.broker.embedded import BrokerThread
from tests.fuzz_requests import list_offsets
from tests.kafka_wire import RawClient, build_batch, produce_request
from tests.scenario_helpers import create_topic, produce

WAKE = "wake"  # both long-polls wait on this topic
TARGET = "target"  # the pipelining client appends here; the other one asks for its end offset
PIPELINED = 200


def long_poll(topic: str) -> Any:
    R = FetchRequest[11]
    partition = R.FetchTopic.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=0,
                                            last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20)
    return R(replica_id=-1, max_wait_ms=20_000, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0,
             session_epoch=-1, topics=[R.FetchTopic(topic=topic, partitions=[partition])],
             forgotten_topics_data=[], rack_id="")


def wait_parked(broker: BrokerThread, queued: list[int]) -> None:
    """Wait until the connections inside a request (here: parked on their long-poll) have these
    numbers of further requests read and queued behind it, in ascending order."""

    def read() -> list[int]:
        assert broker.broker is not None
        return sorted(len(c.reader.frames) for c in broker.broker._connections if c.in_request)

    deadline = time.monotonic() + 10
    while (now := broker.call(read)) != queued:
        assert time.monotonic() < deadline, f"requests queued behind parked polls: {now}, expected {queued}"
        time.sleep(0.01)


def test_pipelined_requests_of_one_connection_do_not_starve_another(broker: BrokerThread) -> None:
    with RawClient(broker.bootstrap) as setup:
        create_topic(setup, WAKE)
        create_topic(setup, TARGET)
    with RawClient(broker.bootstrap) as busy, RawClient(broker.bootstrap) as other:
        # Both connections park behind a long-poll, so that everything sent after it is already
        # in the broker's buffers when the poll ends: the busy one has 200 appends queued, the
        # other one a single ListOffsets. One append wakes both polls, busy's first.
        fetch_busy = long_poll(WAKE)
        busy.send(fetch_busy)
        appends = [produce_request(TARGET, 0, build_batch(value=b"x"), acks=1) for _ in range(PIPELINED)]
        for request in appends:
            busy.send(request)
        wait_parked(broker, [PIPELINED])
        fetch_other, latest = long_poll(WAKE), list_offsets(5, TARGET)
        other.send(fetch_other)
        other.send(latest)
        wait_parked(broker, [1, PIPELINED])
        with RawClient(broker.bootstrap) as waker:
            produce(waker, WAKE, build_batch(value=b"wake up"))
        assert other.recv(fetch_other).responses[0].partitions[0].high_watermark == 1
        seen = other.recv(latest).topics[0].partitions[0].offset
        assert busy.recv(fetch_busy).responses[0].partitions[0].high_watermark == 1
        assert all(busy.recv(r).responses[0].partition_responses[0].error_code == 0 for r in appends)
    # Served in turns, the other connection sees only the first few of the 200 appends; a broker
    # that drains one connection's buffered requests before looking at another shows all 200.
    assert seen < PIPELINED // 2, f"ListOffsets waited behind {seen} pipelined appends"
