"""The replica fetcher's codec (minikafka.protocol.replica_fetch) against kafka-python: the same
Fetch v12 request bytes from the same fields, and the same fields from the same answer bytes,
tagged fields (diverging epoch, current leader) and aborted transactions included."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer import FetchRequest, FetchResponse

from minikafka.protocol.replica_fetch import (
    FetchAnswerError,
    FetchPosition,
    decode_fetch_answer,
    encode_fetch_request,
)

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
NAMES = st.text(min_size=0, max_size=200)  # past 127 bytes a compact length takes two varint bytes
RECORDS = st.one_of(st.none(), st.binary(max_size=64), st.binary(min_size=200, max_size=300))
LISTS = {"max_size": 3}
Response = FetchResponse[12]
Topic = Response.FetchableTopicResponse
Partition = Topic.PartitionData

positions = st.builds(FetchPosition, INT32, INT32, INT64, INT32, INT64, INT32)


@settings(max_examples=200, deadline=None)
@given(correlation_id=st.integers(0, 2**31 - 1), client_id=NAMES, replica_id=INT32, max_wait_ms=INT32,
       max_bytes=INT32, topics=st.dictionaries(NAMES, st.lists(positions, **LISTS), max_size=3))
def test_a_fetch_request_is_written_as_kafka_python_writes_it(
        correlation_id: int, client_id: str, replica_id: int, max_wait_ms: int, max_bytes: int,
        topics: dict[str, list[FetchPosition]]) -> None:
    Request = FetchRequest[12]
    request = Request(
        replica_id=replica_id, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=max_bytes, isolation_level=0,
        session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
        topics=[Request.FetchTopic(topic=name, partitions=[Request.FetchTopic.FetchPartition(
            partition=p.partition, current_leader_epoch=p.current_leader_epoch, fetch_offset=p.fetch_offset,
            last_fetched_epoch=p.last_fetched_epoch, log_start_offset=p.log_start_offset,
            partition_max_bytes=p.partition_max_bytes) for p in ps]) for name, ps in topics.items()])
    request.with_header(correlation_id=correlation_id, client_id=client_id)
    expected = bytes(request.encode(framed=True, header=True))
    assert encode_fetch_request(correlation_id, client_id, replica_id, max_wait_ms, max_bytes, topics) == expected


def partitions() -> st.SearchStrategy[Any]:
    aborted = st.builds(Partition.AbortedTransaction, producer_id=INT64, first_offset=INT64)
    tags = st.fixed_dictionaries({}, optional={
        "diverging_epoch": st.builds(Partition.EpochEndOffset, epoch=INT32, end_offset=INT64),
        "current_leader": st.builds(Partition.LeaderIdAndEpoch, leader_id=INT32, leader_epoch=INT32)})
    return st.builds(lambda fields, tagged: Partition(**fields, **tagged), st.fixed_dictionaries({
        "partition_index": INT32, "error_code": st.integers(-1, 120), "high_watermark": INT64,
        "last_stable_offset": INT64, "log_start_offset": INT64, "preferred_read_replica": INT32,
        "aborted_transactions": st.one_of(st.none(), st.lists(aborted, **LISTS)), "records": RECORDS}), tags)


answers = st.builds(Response, throttle_time_ms=INT32, error_code=st.integers(-1, 120), session_id=INT32,
                    responses=st.lists(st.builds(Topic, topic=NAMES, partitions=st.lists(partitions(), **LISTS)),
                                       **LISTS))


@settings(max_examples=200, deadline=None)
@given(answer=answers, correlation_id=st.integers(0, 2**31 - 1))
def test_a_fetch_answer_reads_as_kafka_python_reads_it(answer: Any, correlation_id: int) -> None:
    answer.with_header(correlation_id=correlation_id)
    frame = bytes(answer.encode(header=True))
    expected = Response.decode(frame, header=True)
    got = decode_fetch_answer(bytearray(frame))
    assert got.correlation_id == correlation_id
    assert (got.throttle_time_ms, got.error_code, got.session_id) == (
        expected.throttle_time_ms, expected.error_code, expected.session_id)
    assert [t.topic for t in got.responses] == [t.topic for t in expected.responses]
    for topic, want_topic in zip(got.responses, expected.responses, strict=True):
        for p, want in zip(topic.partitions, want_topic.partitions, strict=True):
            assert (p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset, p.log_start_offset) == (
                want.partition_index, want.error_code, want.high_watermark, want.last_stable_offset,
                want.log_start_offset)
            assert (None if p.records is None else bytes(p.records)) == want.records
            diverging = getattr(want, "diverging_epoch", None)
            want_diverging = (None if diverging is None or "diverging_epoch" not in (want.tags or ())
                              else (diverging.epoch, diverging.end_offset))
            assert (None if p.diverging_epoch is None
                    else (p.diverging_epoch.epoch, p.diverging_epoch.end_offset)) == want_diverging


def test_a_torn_answer_is_refused() -> None:
    answer = Response(throttle_time_ms=0, error_code=0, session_id=0, responses=[Topic(topic="t", partitions=[
        Partition(partition_index=0, error_code=0, high_watermark=5, last_stable_offset=5, log_start_offset=0,
                  aborted_transactions=None, preferred_read_replica=-1, records=b"x" * 100)])])
    answer.with_header(correlation_id=7)
    frame = bytes(answer.encode(header=True))
    for cut in (len(frame) - 1, len(frame) - 60, 20):
        with pytest.raises(FetchAnswerError):
            decode_fetch_answer(frame[:cut])
    with pytest.raises(FetchAnswerError):
        decode_fetch_answer(frame + b"\0")
