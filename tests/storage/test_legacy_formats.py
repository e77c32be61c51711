"""Message formats v0/v1: Produce v0-v2 converts to stored v2 batches, Fetch v0-v3 down-converts them.

Requests are sent raw; message sets are built with kafka-python's legacy builder (an implementation
independent of the broker's), stored batches are read back from the segment files.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.consumer import ListOffsetsRequest
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.legacy_records import LegacyRecordBatch, LegacyRecordBatchBuilder

from minikafka.broker.embedded import BrokerThread
from minikafka.errors import ErrorCode
from minikafka.storage.batch import BatchHeader, split_batches
from tests.batches import CODECS
from tests.broker.test_fetch import fetch
from tests.kafka_wire import RawClient, build_batch
from tests.scenario_helpers import create_topic, produce

LEGACY_CODECS = ["none", "gzip", "snappy", "lz4"]


def message_set(magic: int, codec: str, values: list[bytes], key: bytes | None = b"k",
                timestamp: int | None = None) -> bytes:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=CODECS[codec], batch_size=1 << 30)
    ts = int(time.time() * 1000) if timestamp is None else timestamp
    for i, v in enumerate(values):
        builder.append(i, timestamp=ts + i, key=key, value=v)
    return bytes(builder.build())


def stored_batches(broker: BrokerThread, topic: str) -> list[tuple[BatchHeader, DefaultRecordBatch]]:
    data = b"".join(p.read_bytes() for p in sorted(Path(broker.broker_config.data_dir, f"{topic}-0").glob("*.log")))
    return [(h, DefaultRecordBatch(data[pos:pos + h.size])) for pos, h in split_batches(data)]


def legacy_records(records: bytes, magic: int) -> list[Any]:
    """Every message of a v0/v1 message set, wrappers opened."""
    out: list[Any] = []
    pos = 0
    while pos + 12 <= len(records):
        size = int.from_bytes(records[pos + 8:pos + 12], "big")
        chunk = records[pos:pos + 12 + size]
        if len(chunk) < 12 + size:
            break
        assert chunk[16] == magic
        batch = LegacyRecordBatch(chunk, magic)
        assert batch.validate_crc()
        out.extend(batch)
        pos += 12 + size
    return out


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS)
@pytest.mark.parametrize("version", [0, 1, 2])
def test_produce_of_a_legacy_message_set_is_stored_as_one_v2_batch_with_its_codec(
        broker: BrokerThread, magic: int, codec: str, version: int) -> None:
    topic = f"legacy-{magic}-{codec}-{version}"
    with RawClient(broker.bootstrap) as c:
        create_topic(c, topic)
        assert produce(c, topic, build_batch(value=b"first"), version=9).base_offset == 0
        values = [b"a", b"bb", b"ccc"]
        answer = produce(c, topic, message_set(magic, codec, values, timestamp=1_700_000_000_000), version=version)
    assert answer.error_code == 0, answer
    assert answer.base_offset == 1
    header, batch = stored_batches(broker, topic)[-1]
    assert header.base_offset == 1 and header.records_count == 3
    assert header.compression == CODECS[codec]
    assert header.producer_id == -1
    records = list(batch)
    assert [r.value for r in records] == values
    assert [r.key for r in records] == [b"k"] * 3
    assert [r.offset for r in records] == [1, 2, 3]
    expected_ts = [-1] * 3 if magic == 0 else [1_700_000_000_000 + i for i in range(3)]
    assert [r.timestamp for r in records] == expected_ts


@pytest.mark.parametrize("version", [0, 1, 2, 3])
@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4"])
def test_fetch_of_old_versions_down_converts_to_the_magic_of_the_version(
        broker: BrokerThread, version: int, codec: str) -> None:
    topic = f"down-{codec}-{version}"
    magic = 0 if version <= 1 else 1
    with RawClient(broker.bootstrap) as c:
        create_topic(c, topic)
        for i in range(3):
            batch = build_batch(values=[f"v{i}-{j}".encode() for j in range(4)], key=b"key", codec=codec,
                                timestamp=1_700_000_000_000, headers=[("h", b"dropped")])
            assert produce(c, topic, batch).error_code == 0
        part = fetch(c, 5, topic=topic, version=version)
    assert part.error_code == 0
    messages = legacy_records(part.records, magic)
    offsets = [m.offset for m in messages]
    if codec == "none":
        assert offsets == list(range(5, 12))  # records before the fetch offset are left out
    else:
        assert offsets == list(range(4, 12))  # a compressed batch goes whole
    assert all(m.key == b"key" for m in messages)
    assert messages[-1].value == b"v2-3"
    if magic == 1:
        assert messages[-1].timestamp == 1_700_000_000_000 + 3
    else:
        assert messages[-1].timestamp is None


def test_down_conversion_honours_the_partition_byte_limit_with_whole_messages(broker: BrokerThread) -> None:
    with RawClient(broker.bootstrap) as c:
        create_topic(c, "limit")
        for _ in range(10):
            assert produce(c, "limit", build_batch(values=[b"x" * 100] * 5, key=b"k")).error_code == 0
        small = fetch(c, 0, topic="limit", version=3, partition_max_bytes=1500, max_bytes=1500)
        tiny = fetch(c, 0, topic="limit", version=3, partition_max_bytes=10, max_bytes=10)
        big = fetch(c, 0, topic="limit", version=3)
    message_size = 12 + 22 + 1 + 100 + 4  # offset, size, v1 overhead, key, value (+ its length)
    assert 0 < len(small.records) <= 1500
    messages = legacy_records(small.records, 1)
    assert [m.offset for m in messages] == list(range(len(messages)))
    assert len(small.records) == len(messages) * (message_size - 4)
    # below one message: the first stored batch still goes whole (at least one batch, as Kafka sends)
    assert [m.offset for m in legacy_records(tiny.records, 1)] == list(range(5))
    assert [m.offset for m in legacy_records(big.records, 1)] == list(range(50))


def test_produce_v2_with_a_v2_batch_is_accepted(broker: BrokerThread) -> None:
    with RawClient(broker.bootstrap) as c:
        create_topic(c, "v2in")
        answer = produce(c, "v2in", build_batch(producer_id=-1, values=[b"a", b"b"]), version=2)
    assert answer.error_code == 0 and answer.base_offset == 0


def corrupt_crc(data: bytes) -> bytes:
    out = bytearray(data)
    out[-1] ^= 0xFF
    return bytes(out)


@pytest.mark.parametrize(("name", "records", "configs", "error"), [
    ("crc", corrupt_crc(message_set(1, "none", [b"a"])), {}, ErrorCode.CORRUPT_MESSAGE),
    ("wrapped-crc", corrupt_crc(message_set(1, "gzip", [b"a", b"b"])), {}, ErrorCode.CORRUPT_MESSAGE),
    ("mixed-magic", message_set(0, "none", [b"a"]) + message_set(1, "none", [b"b"]), {}, ErrorCode.INVALID_RECORD),
    ("two-wrappers", message_set(1, "gzip", [b"a"]) + message_set(1, "gzip", [b"b"]), {}, ErrorCode.INVALID_RECORD),
    ("null-key-compacted", message_set(1, "none", [b"a"], key=None), {"cleanup.policy": "compact"},
     ErrorCode.INVALID_RECORD),
    ("too-large", message_set(1, "none", [b"x" * 2000]), {"max.message.bytes": "1000"},
     ErrorCode.MESSAGE_TOO_LARGE),
    ("old-timestamp", message_set(1, "none", [b"a"], timestamp=1000), {"message.timestamp.before.max.ms": "60000"},
     ErrorCode.INVALID_TIMESTAMP),
    ("short-size", b"\x00" * 8 + (5).to_bytes(4, "big") + b"\x00" * 5, {}, ErrorCode.CORRUPT_MESSAGE),
])
def test_invalid_legacy_message_sets_get_kafkas_error(broker: BrokerThread, name: str, records: bytes,
                                                      configs: dict[str, str], error: int) -> None:
    with RawClient(broker.bootstrap) as c:
        create_topic(c, f"bad-{name}", configs=configs)
        answer = produce(c, f"bad-{name}", records, version=2)
        assert answer.error_code == error, answer
        assert fetch(c, 0, topic=f"bad-{name}").high_watermark == 0


def test_a_partial_message_set_appends_nothing_and_answers_no_error(broker: BrokerThread) -> None:
    with RawClient(broker.bootstrap) as c:
        create_topic(c, "partial")
        answer = produce(c, "partial", message_set(1, "none", [b"abc"])[:-3], version=1)
        assert answer.error_code == 0 and answer.base_offset == -1
        assert fetch(c, 0, topic="partial").high_watermark == 0


def test_log_append_time_topic_stamps_legacy_messages(broker: BrokerThread) -> None:
    with RawClient(broker.bootstrap) as c:
        create_topic(c, "lat", configs={"message.timestamp.type": "LogAppendTime"})
        before = int(time.time() * 1000)
        answer = produce(c, "lat", message_set(1, "gzip", [b"a", b"b"], timestamp=5), version=2)
        assert answer.error_code == 0
        assert answer.log_append_time_ms >= before
        messages = legacy_records(fetch(c, 0, topic="lat", version=2).records, 1)
    assert [m.timestamp for m in messages] == [answer.log_append_time_ms] * 2
    assert all(m.timestamp_type == 1 for m in messages)


def test_down_conversion_can_be_disabled_per_topic(broker: BrokerThread) -> None:
    with RawClient(broker.bootstrap) as c:
        create_topic(c, "nodown", configs={"message.downconversion.enable": "false"})
        assert produce(c, "nodown", build_batch()).error_code == 0
        assert fetch(c, 0, topic="nodown", version=3).error_code == ErrorCode.UNSUPPORTED_VERSION
        assert fetch(c, 0, topic="nodown", version=4).error_code == 0


def test_zstd_batches_are_not_down_converted(broker: BrokerThread) -> None:
    with RawClient(broker.bootstrap) as c:
        create_topic(c, "zs")
        assert produce(c, "zs", build_batch(codec="zstd", values=[b"z" * 1000] * 3)).error_code == 0
        assert fetch(c, 0, topic="zs", version=3).error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


def test_list_offsets_v0_answers_segment_offsets(broker: BrokerThread) -> None:
    with RawClient(broker.bootstrap) as c:
        create_topic(c, "lo0")
        for _ in range(3):
            assert produce(c, "lo0", build_batch(count=2)).error_code == 0
        R = ListOffsetsRequest[0]

        def offsets(timestamp: int, count: int) -> tuple[int, list[int]]:
            request = R(replica_id=-1, topics=[R.ListOffsetsTopic(name="lo0", partitions=[
                R.ListOffsetsTopic.ListOffsetsPartition(partition_index=0, timestamp=timestamp,
                                                        max_num_offsets=count)])])
            p = c.request(request).topics[0].partitions[0]
            return p.error_code, list(p.old_style_offsets)

        assert offsets(-1, 1) == (0, [6])
        assert offsets(-2, 1) == (0, [0])
        assert offsets(-1, 10) == (0, [6, 0])
        assert offsets(0, 10) == (0, [])  # no segment modified before the epoch
        assert offsets(-1, -1)[0] == ErrorCode.INVALID_REQUEST


def test_mutated_legacy_message_sets_are_refused_or_stored_whole(broker: BrokerThread) -> None:
    """Byte-level edits of v0/v1 message sets: the broker answers every one, refuses with one of
    Kafka's errors and an unchanged log, or appends exactly one v2 batch."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from tests.protocol.test_fuzz import BATCH_ERRORS, mutate

    errors = {ErrorCode.CORRUPT_MESSAGE, ErrorCode.INVALID_RECORD, ErrorCode.MESSAGE_TOO_LARGE,
              ErrorCode.INVALID_TIMESTAMP, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE}
    with RawClient(broker.bootstrap) as c:
        create_topic(c, "lfuzz")

    @st.composite
    def message_sets(draw: st.DrawFn) -> bytes:
        magic = draw(st.sampled_from([0, 1]))
        codec = draw(st.sampled_from(LEGACY_CODECS))
        values = draw(st.lists(st.binary(max_size=20), min_size=1, max_size=4))
        return draw(mutate(message_set(magic, codec, values, timestamp=1_700_000_000_000)))

    @settings(max_examples=300, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(records=message_sets(), version=st.integers(0, 2))
    def case(records: bytes, version: int) -> None:
        with RawClient(broker.bootstrap) as c:
            before = fetch(c, 0, topic="lfuzz").high_watermark
            answer = produce(c, "lfuzz", records, version=version)
            after = fetch(c, 0, topic="lfuzz").high_watermark
            if answer.error_code or answer.base_offset == -1:
                # a mutation can turn the set into a (broken) v2 batch: the v2 batch errors apply
                assert answer.error_code in errors | BATCH_ERRORS | {ErrorCode.NONE}, answer
                assert after == before
            else:
                assert answer.base_offset == before and after > before
                batches = stored_batches(broker, "lfuzz")
                assert batches[-1][0].base_offset == before and batches[-1][0].next_offset == after

    case()


@pytest.mark.parametrize("api_version", [(0, 9), (0, 10, 1)], ids=["magic0", "magic1"])
@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4"])
def test_kafka_python_pinned_to_old_brokers_produces_and_consumes(
        broker: BrokerThread, api_version: tuple[int, ...], codec: str) -> None:
    """kafka-python with api_version 0.9 (Produce/Fetch v1, magic 0) or 0.10.1 (Produce v2, Fetch v3,
    magic 1): the stored batches carry its codec, its consumer reads everything back."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = f"kp-{codec}-{len(api_version)}"
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, api_version=api_version,
                             compression_type=codec, linger_ms=20)
    sent = [(f"k{i}".encode(), f"value {i} ".encode() * 10) for i in range(50)]
    for key, val in sent:
        producer.send(topic, key=key, value=val)
    producer.flush()
    producer.close()
    batches = stored_batches(broker, topic)
    assert batches and {h.compression for h, _b in batches} == {CODECS[codec]}
    assert {h.producer_id for h, _b in batches} == {-1}
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, api_version=api_version,
                             auto_offset_reset="earliest")
    consumer.assign([TopicPartition(topic, 0)])
    got: list[tuple[int, bytes, bytes]] = []
    deadline = time.monotonic() + 30
    while len(got) < len(sent) and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=200).values():
            got.extend((m.offset, m.key, m.value) for m in records)
    consumer.close()
    assert got == [(i, k, v) for i, (k, v) in enumerate(sent)]


def test_fetch_v2_limits_are_hard_and_v3_sends_at_least_one_message(broker: BrokerThread) -> None:
    with RawClient(broker.bootstrap) as c:
        create_topic(c, "hard")
        assert produce(c, "hard", build_batch(value=b"x" * 300, key=b"k")).error_code == 0
        cut = fetch(c, 0, topic="hard", version=2, partition_max_bytes=100)
        whole = fetch(c, 0, topic="hard", version=3, partition_max_bytes=100, max_bytes=100)
        roomy = fetch(c, 0, topic="hard", version=2)
    assert len(cut.records) == 100 and legacy_records(cut.records, 1) == []  # a partial message
    assert [m.value for m in legacy_records(whole.records, 1)] == [b"x" * 300]
    assert [m.value for m in legacy_records(roomy.records, 1)] == [b"x" * 300]


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_old_offset_commit_and_fetch_versions_round_trip(broker: BrokerThread, version: int) -> None:
    from kafka.protocol.consumer.group import OffsetCommitRequest, OffsetFetchRequest

    with RawClient(broker.bootstrap) as c:
        create_topic(c, f"oc{version}")
        R = OffsetCommitRequest[version]
        T = R.OffsetCommitRequestTopic
        commit = R(group_id=f"g{version}", generation_id_or_member_epoch=-1, member_id="", retention_time_ms=-1,
                   topics=[T(name=f"oc{version}", partitions=[T.OffsetCommitRequestPartition(
                       partition_index=0, committed_offset=40 + version, commit_timestamp=-1,
                       committed_metadata="meta")])])
        answer = c.request(commit)
        assert answer.topics[0].partitions[0].error_code == 0
        F = OffsetFetchRequest[version]
        fetched = c.request(F(group_id=f"g{version}", topics=[F.OffsetFetchRequestTopic(
            name=f"oc{version}", partition_indexes=[0])]))
        part = fetched.topics[0].partitions[0]
        assert (part.error_code, part.committed_offset, part.metadata) == (0, 40 + version, "meta")
