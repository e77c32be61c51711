"""The replica fetcher's codec: its Fetch v12 requests, and the answers with the fields a
follower uses and each partition's records as a view of the answer's bytes.

kafka-python's generic decoder builds an object per field through its schema machinery and copies
every partition's records out of the frame. A follower receiving ~1 MB answers from each leader
spends a large share of its time there (see docs/benchmarks.md, "Replication and leader
failover"). This reads the same wire format (Kafka's ``FetchResponse.json``, version 12: flexible,
compact arrays and strings, tagged fields) straight from the frame that the connection received
into a buffer of its own, so the records are appended from where they arrived. Tagged fields other
than ``diverging_epoch`` (tag 0) are skipped, as Kafka's parser skips the tags it does not need.
The request, sent after every answer, is written directly for the same reason.
tests/protocol/test_replica_fetch_codec.py checks both against kafka-python.

https://github.com/apache/kafka/blob/trunk/clients/src/main/resources/common/message/FetchRequest.json,
https://github.com/apache/kafka/blob/trunk/clients/src/main/resources/common/message/FetchResponse.json
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from minikafka.protocol.fast import _length, _string

_REQUEST_HEAD = struct.Struct(">hhih")  # api key, version, correlation id, client id length
_REQUEST_TOP = struct.Struct(">iiiibii")  # replica, max wait, min bytes, max bytes, isolation, session, epoch
_FETCH_PARTITION = struct.Struct(">iiqiqi")  # partition, leader epoch, offset, last epoch, log start, max bytes
_FETCH_KEY = 1
_HEAD = struct.Struct(">i")  # correlation id
_TOP = struct.Struct(">ihi")  # throttle time, error code, session id
_PARTITION = struct.Struct(">ihqqq")  # index, error code, high watermark, last stable offset, log start
_EPOCH_END = struct.Struct(">iq")  # diverging epoch: epoch, end offset
_ABORTED_SIZE = 8 + 8 + 1  # producer id, first offset, empty tagged fields
_PREFERRED_REPLICA_SIZE = 4
DIVERGING_EPOCH_TAG = 0
VERSION = 12


@dataclass(slots=True)
class FetchPosition:
    """One partition of a follower's Fetch: where its log ends and what it knows of epochs."""

    partition: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    log_start_offset: int
    partition_max_bytes: int


def encode_fetch_request(correlation_id: int, client_id: str, replica_id: int, max_wait_ms: int, max_bytes: int,
                         topics: dict[str, list[FetchPosition]]) -> bytes:
    """A whole Fetch v12 frame (size, header v2, body) with min_bytes 1, read_uncommitted, no
    fetch session, no forgotten topics and an empty rack id, as the fetcher sends it."""
    client = client_id.encode()
    out = bytearray(4)
    out += _REQUEST_HEAD.pack(_FETCH_KEY, VERSION, correlation_id, len(client))
    out += client
    out.append(0)  # header tagged fields
    out += _REQUEST_TOP.pack(replica_id, max_wait_ms, 1, max_bytes, 0, 0, -1)
    _put_uvarint(out, len(topics) + 1)
    for name, positions in topics.items():
        encoded = name.encode()
        _put_uvarint(out, len(encoded) + 1)
        out += encoded
        _put_uvarint(out, len(positions) + 1)
        for p in positions:
            out += _FETCH_PARTITION.pack(p.partition, p.current_leader_epoch, p.fetch_offset, p.last_fetched_epoch,
                                         p.log_start_offset, p.partition_max_bytes)
            out.append(0)
        out.append(0)
    out += b"\x01\x01\x00"  # no forgotten topics, rack id "", no tagged fields
    _HEAD.pack_into(out, 0, len(out) - 4)
    return bytes(out)


def _put_uvarint(out: bytearray, n: int) -> None:
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


class FetchAnswerError(ValueError):
    """The bytes are not a Fetch v12 answer (torn or malformed): the connection cannot be trusted."""


@dataclass(slots=True)
class EpochEndOffset:
    epoch: int
    end_offset: int


@dataclass(slots=True)
class PartitionAnswer:
    partition_index: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: memoryview | None
    diverging_epoch: EpochEndOffset | None = None


@dataclass(slots=True)
class TopicAnswer:
    topic: str
    partitions: list[PartitionAnswer] = field(default_factory=list)


@dataclass(slots=True)
class FetchAnswer:
    correlation_id: int
    throttle_time_ms: int
    error_code: int
    session_id: int
    responses: list[TopicAnswer] = field(default_factory=list)


def decode_fetch_answer(frame: bytes | bytearray | memoryview) -> FetchAnswer:
    """A Fetch v12 answer with its response header (v1), from a whole frame without its size."""
    body = memoryview(frame)
    try:
        return _decode(body)
    except (IndexError, struct.error, UnicodeDecodeError) as exc:
        raise FetchAnswerError(f"not a Fetch v{VERSION} answer: {exc}") from exc


def _decode(body: memoryview) -> FetchAnswer:
    (correlation_id,) = _HEAD.unpack_from(body, 0)
    pos = _skip_tags(body, 4)
    answer = FetchAnswer(correlation_id, *_TOP.unpack_from(body, pos))
    pos += _TOP.size
    topics, pos = _array(body, pos)
    for _ in range(topics):
        name, pos = _string(body, pos, True, "topic", False)
        topic = TopicAnswer(name or "")
        partitions, pos = _array(body, pos)
        for _ in range(partitions):
            index, error, hw, lso, start = _PARTITION.unpack_from(body, pos)
            aborted, pos = _length(body, pos + _PARTITION.size, True, True)
            pos += max(aborted, 0) * _ABORTED_SIZE + _PREFERRED_REPLICA_SIZE
            size, pos = _length(body, pos, True, True)
            records = None
            if size >= 0:
                records = body[pos : pos + size]
                if len(records) != size:
                    raise FetchAnswerError(f"records of partition {index} end past the answer")
                pos += size
            part = PartitionAnswer(index, error, hw, lso, start, records)
            pos = _partition_tags(body, pos, part)
            topic.partitions.append(part)
        pos = _skip_tags(body, pos)
        answer.responses.append(topic)
    pos = _skip_tags(body, pos)
    if pos != len(body):
        raise FetchAnswerError(f"{len(body) - pos} bytes after the answer")
    return answer


def _array(body: memoryview, pos: int) -> tuple[int, int]:
    n, pos = _length(body, pos, True, True)
    return max(n, 0), pos


def _varint(body: memoryview, pos: int) -> tuple[int, int]:
    n, pos = _length(body, pos, True, True)
    return n + 1, pos


def _skip_tags(body: memoryview, pos: int) -> int:
    count, pos = _varint(body, pos)
    for _ in range(count):
        _tag, pos = _varint(body, pos)
        size, pos = _varint(body, pos)
        pos += size
    return pos


def _partition_tags(body: memoryview, pos: int, part: PartitionAnswer) -> int:
    count, pos = _varint(body, pos)
    for _ in range(count):
        tag, pos = _varint(body, pos)
        size, pos = _varint(body, pos)
        if tag == DIVERGING_EPOCH_TAG:
            part.diverging_epoch = EpochEndOffset(*_EPOCH_END.unpack_from(body, pos))
        pos += size
    return pos
