"""Raw Fetch requests of any version, by topic name (v0-v12) or topic id (v13+), with the fields of
fetch sessions, followers (ReplicaId, v15+ ReplicaState) and v17's directory id set by the test."""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import MetadataRequest

from tests.kafka_wire import RawClient

SENT_FETCH = "Sent FetchRequest (v"
TOPIC_IDS = 13
REPLICA_STATE = 15
DIRECTORY_ID = 17


def topic_id(client: RawClient, name: str) -> uuid.UUID:
    """The topic's id as Metadata v12 answers it."""
    R = MetadataRequest[12]
    answer = client.request(R(topics=[R.MetadataRequestTopic(name=name, topic_id=uuid.UUID(int=0))],
                              allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    topic = answer.topics[0]
    assert topic.error_code == 0, topic
    return topic.topic_id


def fetch_request(version: int, topics: list[tuple[str | uuid.UUID, list[int]]], offset: int = 0,
                  max_wait_ms: int = 0, min_bytes: int = 0, session_id: int = 0, session_epoch: int = -1,
                  replica_id: int = -1, current_leader_epoch: int = -1, last_fetched_epoch: int = -1,
                  directory_id: uuid.UUID | None = None) -> Any:
    """A Fetch of ``version`` for each (name or id, partitions) from ``offset``. From v15 a
    ``replica_id`` >= 0 goes in ReplicaState, as a follower sends it; ``directory_id`` is v17's
    per-partition ReplicaDirectoryId."""
    R = FetchRequest[version]
    Topic = R.FetchTopic
    fields: dict[str, Any] = {}
    if version >= REPLICA_STATE:
        if replica_id >= 0:
            fields["replica_state"] = R.ReplicaState(replica_id=replica_id, replica_epoch=-1)
    else:
        fields["replica_id"] = replica_id
    out = []
    for key, partitions in topics:
        parts = [Topic.FetchPartition(partition=p, current_leader_epoch=current_leader_epoch, fetch_offset=offset,
                                      last_fetched_epoch=last_fetched_epoch, log_start_offset=-1,
                                      partition_max_bytes=1 << 20,
                                      **({"replica_directory_id": directory_id} if directory_id else {}))
                 for p in partitions]
        named = {"topic_id": key} if version >= TOPIC_IDS else {"topic": key}
        out.append(Topic(partitions=parts, **named))
    return R(max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=1 << 20, isolation_level=0,
             session_id=session_id, session_epoch=session_epoch, topics=out, forgotten_topics_data=[], rack_id="",
             **fields)


class ProtocolLog(logging.Handler):
    """librdkafka's debug lines (give ``logger`` to a client with ``debug`` including
    ``protocol``), and the Fetch versions they show it sent."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.lines: list[str] = []
        self.logger = logging.getLogger(name)
        self.logger.addHandler(self)
        self.logger.propagate = False
        self.logger.setLevel(logging.DEBUG)

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def close_log(self) -> None:
        self.logger.removeHandler(self)

    def fetch_versions(self) -> set[int]:
        return {int(line.split(SENT_FETCH, 1)[1].split(",", 1)[0]) for line in self.lines if SENT_FETCH in line}


def poll_values(consumer: Any, count: int, timeout: float = 30) -> list[bytes]:
    """The values of the next ``count`` records a confluent-kafka consumer polls (errors skipped)."""
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(got) < count:
        assert time.monotonic() < deadline, f"consumed {got}, expected {count} records"
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    return got
