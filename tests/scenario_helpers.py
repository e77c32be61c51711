"""Raw-protocol helpers for the end-to-end produce, idempotence and restart tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from kafka.protocol.admin import CreateTopicsRequest, DeleteRecordsRequest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest

from minikafka.storage.batch import BatchHeader, split_batches
from tests.kafka_wire import RawClient, partition_response, produce_request

if TYPE_CHECKING:
    from minikafka.broker.server import Broker

P = 1000
Q = 2000


@contextmanager
def clock_ahead(broker: Broker, ms: int) -> Iterator[None]:
    """Run the block with the broker's injectable clock ``ms`` ahead, instead of sleeping that long."""
    real_clock = broker.clock
    broker.clock = lambda: real_clock() + ms
    try:
        yield
    finally:
        broker.clock = real_clock


def create_topic(client: RawClient, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> None:
    Request = CreateTopicsRequest[5]
    Topic = Request.CreatableTopic
    request = Request(
        topics=[
            Topic(
                name=name,
                num_partitions=partitions,
                replication_factor=1,
                assignments=[],
                configs=[Topic.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()],
            )
        ],
        timeout_ms=5000,
        validate_only=False,
    )
    response = client.request(request)
    assert response.topics[0].error_code == 0, response


def produce(client: RawClient, topic: str, batch: bytes | None, partition: int = 0, acks: int = -1,
            version: int = 9, transactional_id: str | None = None) -> Any:
    """Send one single-partition Produce and return its partition response."""
    response = client.request(produce_request(topic, partition, batch, acks=acks, version=version,
                                              transactional_id=transactional_id))
    return partition_response(response)


def fetch_raw(client: RawClient, topic: str, offset: int = 0, partition: int = 0, version: int = 11) -> Any:
    Request = FetchRequest[version]
    Topic = Request.FetchTopic
    request = Request(
        replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=64 << 20, isolation_level=0, session_id=0,
        session_epoch=-1,
        topics=[Topic(topic=topic, partitions=[Topic.FetchPartition(partition=partition, current_leader_epoch=-1,
                                                                     fetch_offset=offset, last_fetched_epoch=-1,
                                                                     log_start_offset=-1,
                                                                     partition_max_bytes=64 << 20)])],
        forgotten_topics_data=[], rack_id="",
    )
    return client.request(request).responses[0].partitions[0]


def log_start_offset(client: RawClient, topic: str, partition: int = 0) -> int:
    """The partition's log start offset, from ListOffsets EARLIEST, as a client finds it after
    OFFSET_OUT_OF_RANGE (that answer carries no offsets)."""
    Request = ListOffsetsRequest[7]
    Topic = Request.ListOffsetsTopic
    request = Request(replica_id=-1, isolation_level=0, topics=[Topic(name=topic, partitions=[
        Topic.ListOffsetsPartition(partition_index=partition, current_leader_epoch=-1, timestamp=-2)])])
    part = client.request(request).topics[0].partitions[0]
    assert part.error_code == 0, part
    return part.offset


def log_batches(client: RawClient, topic: str, partition: int = 0) -> list[BatchHeader]:
    """Headers of every batch the broker serves from the log start (one fetch reads one segment)."""
    part = fetch_raw(client, topic, offset=0, partition=partition)
    if part.error_code == 1:  # log start moved: fetch from there
        part = fetch_raw(client, topic, offset=log_start_offset(client, topic, partition), partition=partition)
    headers: list[BatchHeader] = []
    for _ in range(10_000):
        assert part.error_code == 0, part
        batches = [header for _pos, header in split_batches(part.records or b"")]
        headers.extend(batches)
        if not batches or batches[-1].next_offset >= part.high_watermark:
            return headers
        part = fetch_raw(client, topic, offset=batches[-1].next_offset, partition=partition)
    raise AssertionError("log did not end within 10,000 fetches")


def log_summary(client: RawClient, topic: str, partition: int = 0) -> list[tuple[int, int, int, int, int]]:
    """(base offset, producer id, epoch, base sequence, record count) per stored batch."""
    return [
        (h.base_offset, h.producer_id, h.producer_epoch, h.base_sequence, h.records_count)
        for h in log_batches(client, topic, partition)
    ]


def delete_records(client: RawClient, topic: str, offset: int, partition: int = 0) -> Any:
    Request = DeleteRecordsRequest[2]
    Topic = Request.DeleteRecordsTopic
    request = Request(topics=[Topic(name=topic, partitions=[Topic.DeleteRecordsPartition(partition_index=partition,
                                                                                        offset=offset)])],
                      timeout_ms=5000)
    return client.request(request).topics[0].partitions[0]
