"""The bytes of KIP-848: the ConsumerGroupHeartbeat/ConsumerGroupDescribe codec against hand-built
frames, and the consumer group records minikafka writes to ``__consumer_offsets`` against Kafka's
record formats (issue: the new consumer group protocol)."""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable

from minikafka.broker.embedded import BrokerThread
from minikafka.broker.groups.consumer_records import (
    ConsumerKey,
    ConsumerRecord,
    GroupEpoch,
    MemberAssignment,
    MemberSubscription,
    ResolvedRegex,
    TargetAssignment,
    encode_value,
    parse_consumer_value,
)
from minikafka.broker.groups.records import parse_key
from minikafka.broker.internal_log import replay
from minikafka.protocol.consumer_group_apis import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from tests.groups.consumer_group_wire import beat, join
from tests.kafka_wire import RawClient
from tests.scenario_helpers import create_topic

TOPIC = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")


def compact(text: str | None) -> bytes:
    return b"\x00" if text is None else bytes([len(text) + 1]) + text.encode()


def test_heartbeat_request_bytes_per_version() -> None:
    v0 = (compact("g") + compact("m") + struct.pack(">i", 0) + compact(None) + compact(None)
          + struct.pack(">i", 300000) + b"\x02" + compact("t") + compact("range")
          + b"\x02" + TOPIC.bytes + b"\x03" + struct.pack(">ii", 0, 1) + b"\x00" + b"\x00")
    decoded = ConsumerGroupHeartbeatRequest[0].decode(v0)
    assert (decoded.group_id, decoded.member_id, decoded.subscribed_topic_names, decoded.server_assignor) == (
        "g", "m", ["t"], "range")
    assert [(tp.topic_id, tp.partitions) for tp in decoded.topic_partitions] == [(TOPIC, [0, 1])]
    assert bytes(decoded.encode()) == v0
    # v1 adds SubscribedTopicRegex after the names; null lists and strings are a 0 length
    v1 = (compact("g") + compact("m") + struct.pack(">i", 5) + compact("i") + compact(None)
          + struct.pack(">i", -1) + b"\x00" + compact("a.*") + compact(None) + b"\x00" + b"\x00")
    decoded = ConsumerGroupHeartbeatRequest[1].decode(v1)
    assert (decoded.member_epoch, decoded.instance_id, decoded.subscribed_topic_names,
            decoded.subscribed_topic_regex, decoded.topic_partitions) == (5, "i", None, "a.*", None)
    assert bytes(decoded.encode()) == v1


def test_heartbeat_response_assignment_is_a_nullable_struct() -> None:
    Response = ConsumerGroupHeartbeatResponse[1]
    head = struct.pack(">ih", 0, 0) + compact(None) + compact("m") + struct.pack(">ii", 3, 5000)
    null = Response(throttle_time_ms=0, error_code=0, error_message=None, member_id="m", member_epoch=3,
                    heartbeat_interval_ms=5000, assignment=None)
    assert bytes(null.encode()) == head + b"\xff" + b"\x00"
    present = Response(throttle_time_ms=0, error_code=0, error_message=None, member_id="m", member_epoch=3,
                       heartbeat_interval_ms=5000, assignment=Response.Assignment(topic_partitions=[
                           Response.Assignment.TopicPartitions(topic_id=TOPIC, partitions=[2])]))
    expected = head + b"\x01" + b"\x02" + TOPIC.bytes + b"\x02" + struct.pack(">i", 2) + b"\x00" + b"\x00" + b"\x00"
    assert bytes(present.encode()) == expected
    assert Response.decode(expected).assignment.topic_partitions[0].partitions == [2]


def test_describe_request_bytes() -> None:
    frame = b"\x03" + compact("a") + compact("b") + b"\x01" + b"\x00"
    decoded = ConsumerGroupDescribeRequest[1].decode(frame)
    assert (decoded.group_ids, decoded.include_authorized_operations) == (["a", "b"], True)
    assert bytes(decoded.encode()) == frame


def test_record_bytes_follow_kafka_formats() -> None:
    assert ConsumerKey(8, "g", "m").encode() == struct.pack(">hh", 8, 1) + b"g" + struct.pack(">h", 1) + b"m"
    assert ConsumerKey(3, "g").encode() == struct.pack(">hh", 3, 1) + b"g"
    current = MemberAssignment(4, 3, 1, {TOPIC: frozenset({1, 0})}, {TOPIC: frozenset({2})})
    partitions = b"\x02" + TOPIC.bytes + b"\x03" + struct.pack(">ii", 0, 1) + b"\x00"
    pending = b"\x02" + TOPIC.bytes + b"\x02" + struct.pack(">i", 2) + b"\x00"
    assert encode_value(current) == struct.pack(">hiib", 0, 4, 3, 1) + partitions + pending + b"\x00"
    sub = MemberSubscription("i", None, "c", "/h", ("t",), "r.*", 300000, "range")
    assert encode_value(sub) == (struct.pack(">h", 0) + compact("i") + compact(None) + compact("c") + compact("/h")
                                 + b"\x02" + compact("t") + compact("r.*") + struct.pack(">i", 300000)
                                 + compact("range") + b"\x00")
    assert encode_value(GroupEpoch(7)) == struct.pack(">hi", 0, 7) + b"\x00"
    hashed = encode_value(GroupEpoch(7, 99))  # tag 0 holds the metadata hash (Kafka 4.1+)
    assert hashed == struct.pack(">hi", 0, 7) + b"\x01\x00\x08" + struct.pack(">q", 99)
    for record_type, value in [(3, GroupEpoch(7, 99)), (5, sub), (7, TargetAssignment({TOPIC: frozenset({3})})),
                               (8, current), (16, ResolvedRegex(("a", "b"), 2, 1700))]:
        assert parse_consumer_value(record_type, encode_value(value)) == value  # type: ignore[arg-type]
    assert parse_key(ConsumerRecord(ConsumerKey(16, "g", "r.*"), None).encode()[0]) == ConsumerKey(16, "g", "r.*")


def test_a_join_is_one_batch_in_kafka_order(start_broker: Callable[..., BrokerThread]) -> None:
    broker = start_broker()
    with RawClient(broker.bootstrap) as c:
        create_topic(c, "t", 2)
        join(c, "g", "m1", ["t"])
        join(c, "g", "m2", ["t"])
        beat(c, "g", "m2", -1)

    def batches() -> list[list[tuple[int, str | None, bool]]]:
        assert broker.broker is not None and broker.broker.logs is not None
        plog = broker.broker.logs.get_log("__consumer_offsets", 0)
        assert plog is not None
        out = []
        for batch in replay(plog):
            keys = []
            for _offset, key, value in batch.records or ():
                parsed = parse_key(key)
                assert isinstance(parsed, ConsumerKey)
                keys.append((parsed.type, parsed.sub, value is None))
            out.append(keys)
        return out

    first, second, leave = broker.call(batches)
    assert first == [(5, "m1", False), (3, None, False), (7, "m1", False), (6, None, False), (8, "m1", False)]
    assert [k[:2] for k in second] == [(5, "m2"), (3, None), (7, "m1"), (7, "m2"), (6, None), (8, "m2")]
    assert leave == [(8, "m2", True), (7, "m2", True), (5, "m2", True), (3, None, False)]
