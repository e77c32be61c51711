"""The fast paths of minikafka.protocol.fast against kafka-python's classes, for every version in
their tables: the same objects from the same bytes, the same bytes from the same objects."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer import FetchResponse
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from minikafka.broker.dispatch import build_api_table
from minikafka.protocol import fast
from minikafka.protocol.nulls import NullInRequest, check_request_nulls

INT16 = st.integers(-(2**15), 2**15 - 1)
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
NAMES = st.text(min_size=0, max_size=40)
RECORDS = st.one_of(st.none(), st.binary(max_size=64), st.binary(min_size=4096, max_size=5000))
LISTS = {"max_size": 3}

PRODUCE = build_api_table()[0]


def produce_requests(version: int) -> st.SearchStrategy[Any]:
    R = ProduceRequest[version]
    Topic = R.TopicProduceData
    partition = st.builds(Topic.PartitionProduceData, index=INT32, records=RECORDS)
    topic = st.builds(Topic, name=NAMES, partition_data=st.lists(partition, **LISTS))
    return st.builds(R, transactional_id=st.one_of(st.none(), NAMES), acks=INT16, timeout_ms=INT32,
                     topic_data=st.lists(topic, **LISTS))


def produce_responses(version: int) -> st.SearchStrategy[Any]:
    R = ProduceResponse[version]
    Topic = R.TopicProduceResponse
    Partition = Topic.PartitionProduceResponse
    record_error = st.builds(Partition.BatchIndexAndErrorMessage, batch_index=INT32,
                             batch_index_error_message=st.one_of(st.none(), NAMES))
    partition = st.builds(Partition, index=INT32, error_code=INT16, base_offset=INT64, log_append_time_ms=INT64,
                          log_start_offset=INT64, record_errors=st.lists(record_error, **LISTS),
                          error_message=st.one_of(st.none(), NAMES))
    topic = st.builds(Topic, name=NAMES, partition_responses=st.lists(partition, **LISTS))
    return st.builds(R, responses=st.lists(topic, **LISTS), throttle_time_ms=INT32)


def fetch_responses(version: int) -> st.SearchStrategy[Any]:
    R = FetchResponse[version]
    Topic = R.FetchableTopicResponse
    Partition = Topic.PartitionData
    aborted = st.builds(Partition.AbortedTransaction, producer_id=INT64, first_offset=INT64)
    partition = st.builds(Partition, partition_index=INT32, error_code=INT16, high_watermark=INT64,
                          last_stable_offset=INT64, log_start_offset=INT64,
                          aborted_transactions=st.one_of(st.none(), st.lists(aborted, **LISTS)),
                          preferred_read_replica=INT32, records=RECORDS)
    if version >= fast.FETCH_TOPIC_IDS:  # topics by id, without names
        topic = st.builds(Topic, topic_id=st.one_of(st.uuids(), st.just(uuid.UUID(int=0))),
                          partitions=st.lists(partition, **LISTS))
    else:
        topic = st.builds(Topic, topic=NAMES, partitions=st.lists(partition, **LISTS))
    return st.builds(R, throttle_time_ms=INT32, error_code=INT16, session_id=INT32,
                     responses=st.lists(topic, **LISTS))


def parts_bytes(parts: list[Any] | None) -> bytes:
    assert parts is not None, "the fast path stepped aside"
    return b"".join(bytes(p) for p in parts)


@pytest.mark.parametrize("version", fast.PRODUCE_REQUEST_VERSIONS)
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_produce_request_decodes_as_kafka_python_does(version: int, data: st.DataObject) -> None:
    request = data.draw(produce_requests(version))
    body = memoryview(bytes(request.encode(version=version)))
    expected = ProduceRequest.decode(body, version=version)
    got = fast.decode_request(PRODUCE, version, body)
    assert got == expected
    assert got.to_dict() == expected.to_dict()
    assert got.version == version


@pytest.mark.parametrize("version", fast.PRODUCE_REQUEST_VERSIONS)
def test_produce_request_with_a_null_where_kafka_refuses_one_is_refused(version: int) -> None:
    R = ProduceRequest[version]
    Topic = R.TopicProduceData
    nulls = [
        R(transactional_id=None, acks=1, timeout_ms=1, topic_data=None),
        R(transactional_id=None, acks=1, timeout_ms=1, topic_data=[Topic(name=None, partition_data=[])]),
        R(transactional_id=None, acks=1, timeout_ms=1, topic_data=[Topic(name="t", partition_data=None)]),
    ]
    for request in nulls:
        with pytest.raises(NullInRequest):
            fast.decode_request(PRODUCE, version, memoryview(bytes(request.encode(version=version))))


@pytest.mark.parametrize("version", [v for v in fast.PRODUCE_REQUEST_VERSIONS if v >= fast.PRODUCE_FLEXIBLE])
def test_produce_request_with_tagged_fields_goes_to_kafka_python(version: int) -> None:
    R = ProduceRequest[version]
    plain = R(transactional_id="t", acks=-1, timeout_ms=5, topic_data=[])
    body = bytearray(plain.encode(version=version))
    assert body[-1] == 0  # the empty top-level tagged-field section
    body[-1:] = bytes([1, 7, 2]) + b"hi"  # one unknown tag (7) of two bytes
    expected = ProduceRequest.decode(memoryview(bytes(body)), version=version)
    assert expected.unknown_tags
    got = fast.decode_request(PRODUCE, version, memoryview(bytes(body)))
    assert got == expected and got.unknown_tags == expected.unknown_tags


def kafka_python_decode(version: int, body: bytes) -> Any:
    request = ProduceRequest.decode(memoryview(body), version=version)
    check_request_nulls(ProduceRequest, request, version)
    return request


@pytest.mark.parametrize("version", [8, 9])
def test_produce_request_cut_short_or_garbled_is_refused_or_read_as_kafka_python_does(version: int) -> None:
    R = ProduceRequest[version]
    Topic = R.TopicProduceData
    request = R(transactional_id="tx", acks=-1, timeout_ms=5, topic_data=[
        Topic(name="t", partition_data=[Topic.PartitionProduceData(index=0, records=b"r" * 100)])])
    body = bytes(request.encode(version=version))
    variants = [body[:cut] for cut in range(len(body))]
    variants += [body[:i] + bytes([b]) + body[i + 1 :] for i in range(len(body) - 100) for b in (0x00, 0x80, 0xFF)]
    for variant in variants:
        try:
            expected = kafka_python_decode(version, variant)
        except Exception:
            with pytest.raises(Exception):  # noqa: B017 - any decode error closes the connection
                fast.decode_request(PRODUCE, version, memoryview(variant))
        else:
            assert fast.decode_request(PRODUCE, version, memoryview(variant)) == expected, variant


RESPONSE_CASES = [pytest.param(0, produce_responses, v, id=f"produce-v{v}") for v in fast.PRODUCE_RESPONSE_VERSIONS]
RESPONSE_CASES += [pytest.param(1, fetch_responses, v, id=f"fetch-v{v}") for v in fast.FETCH_RESPONSE_VERSIONS]


@pytest.mark.parametrize(("api_key", "responses", "version"), RESPONSE_CASES)
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_produce_and_fetch_responses_encode_as_kafka_python_does(
        api_key: int, responses: Callable[[int], st.SearchStrategy[Any]], version: int, data: st.DataObject) -> None:
    response = data.draw(responses(version))
    assert parts_bytes(fast.encode_response(api_key, version, response)) == bytes(response.encode(version=version))


def test_fetch_records_are_written_without_a_copy() -> None:
    R = FetchResponse[11]
    Partition = R.FetchableTopicResponse.PartitionData
    records = memoryview(b"r" * 100_000)
    response = R(throttle_time_ms=0, error_code=0, session_id=0, responses=[R.FetchableTopicResponse(
        topic="t", partitions=[Partition(partition_index=0, error_code=0, high_watermark=1, last_stable_offset=1,
                                         log_start_offset=0, aborted_transactions=[], preferred_read_replica=-1,
                                         records=records)])])
    parts = fast.encode_response(1, 11, response)
    assert parts is not None and any(p is records for p in parts)
    assert parts_bytes(parts) == bytes(response.encode(version=11))


def test_tagged_fields_and_untested_versions_go_to_kafka_python() -> None:
    R = FetchResponse[12]
    Partition = R.FetchableTopicResponse.PartitionData
    tagged = R(throttle_time_ms=0, error_code=0, session_id=0, responses=[R.FetchableTopicResponse(
        topic="t", partitions=[Partition(partition_index=0, error_code=0, high_watermark=1, last_stable_offset=1,
                                         log_start_offset=0, aborted_transactions=None, preferred_read_replica=-1,
                                         records=b"", diverging_epoch=Partition.EpochEndOffset(epoch=1,
                                                                                                end_offset=2))])])
    assert fast.encode_response(1, 12, tagged) is None
    R16 = FetchResponse[16]
    P16 = R16.FetchableTopicResponse.PartitionData
    hinted = R16(throttle_time_ms=0, error_code=0, session_id=0, responses=[R16.FetchableTopicResponse(
        topic_id=uuid.uuid4(), partitions=[P16(partition_index=0, error_code=6, high_watermark=-1, last_stable_offset=-1,
                                               log_start_offset=-1, aborted_transactions=None, preferred_read_replica=-1,
                                               records=b"", current_leader=P16.LeaderIdAndEpoch(leader_id=2,
                                                                                                 leader_epoch=3))])],
        node_endpoints=[R16.NodeEndpoint(node_id=2, host="h", port=1, rack=None)])
    assert fast.encode_response(1, 16, hinted) is None
    P = ProduceResponse[10]
    Part = P.TopicProduceResponse.PartitionProduceResponse
    leader = P(throttle_time_ms=0, responses=[P.TopicProduceResponse(name="t", partition_responses=[
        Part(index=0, error_code=6, base_offset=-1, current_leader=Part.LeaderIdAndEpoch(leader_id=1,
                                                                                          leader_epoch=0))])])
    assert fast.encode_response(0, 10, leader) is None
    old = FetchResponse[3](throttle_time_ms=0, responses=[])
    assert fast.encode_response(1, 3, old) is None
    assert fast.encode_response(0, 13, ProduceResponse[13](throttle_time_ms=0, responses=[])) is None


@pytest.mark.parametrize("version", range(ProduceResponse.max_version + 1))
@settings(max_examples=50, deadline=None)
@given(data=st.data())
def test_make_builds_what_the_constructor_builds(version: int, data: st.DataObject) -> None:
    built = data.draw(produce_responses(version))
    R = ProduceResponse[version]
    Topic = R.TopicProduceResponse
    Partition = Topic.PartitionProduceResponse
    made = fast.make(R, throttle_time_ms=built.throttle_time_ms, responses=[
        fast.make(Topic, name=t.name, partition_responses=[
            fast.make(Partition, index=p.index, error_code=p.error_code, base_offset=p.base_offset,
                      log_append_time_ms=p.log_append_time_ms, log_start_offset=p.log_start_offset,
                      error_message=p.error_message, record_errors=[
                          fast.make(Partition.BatchIndexAndErrorMessage, batch_index=e.batch_index,
                                    batch_index_error_message=e.batch_index_error_message)
                          for e in p.record_errors])
            for p in t.partition_responses])
        for t in built.responses])
    assert made == built and made.version == version
    assert made.to_dict() == built.to_dict()
    assert bytes(made.encode(version=version)) == bytes(built.encode(version=version))
    tagged = fast.make(Partition, index=0, current_leader=Partition.LeaderIdAndEpoch(leader_id=1, leader_epoch=2))
    assert tagged.tags == Partition(index=0, current_leader=tagged.current_leader).tags == {"current_leader"}


def handler_answer(drawn: Any, version: int) -> tuple[Any, Any]:
    """The answer the Produce handler builds from ``drawn``'s values, by fast.produce_response and
    fast.produce_partition_response, and by kafka-python's constructors (error_message and
    record_errors exist from v8; the handler sets them there only, and never throttles)."""
    since_v8 = version >= 8
    R = ProduceResponse[version]
    Partition = R.TopicProduceResponse.PartitionProduceResponse
    built = R(throttle_time_ms=0, responses=[R.TopicProduceResponse(name=t.name, partition_responses=[
        Partition(index=p.index, error_code=p.error_code, base_offset=p.base_offset,
                  log_append_time_ms=p.log_append_time_ms, log_start_offset=p.log_start_offset,
                  **({"error_message": p.error_message, "record_errors": [
                      Partition.BatchIndexAndErrorMessage(batch_index=e.batch_index,
                                                          batch_index_error_message=e.batch_index_error_message)
                      for e in p.record_errors]} if since_v8 else {}))
        for p in t.partition_responses]) for t in drawn.responses])
    made = fast.produce_response(version, [
        (t.name, [fast.produce_partition_response(
            version, p.index, p.error_code, p.base_offset, p.log_append_time_ms, p.log_start_offset,
            p.error_message if since_v8 else None,
            [(e.batch_index, e.batch_index_error_message) for e in p.record_errors] if since_v8 else [])
            for p in t.partition_responses])
        for t in drawn.responses])
    return made, built


@pytest.mark.parametrize("version", range(ProduceResponse.max_version + 1))
@settings(max_examples=50, deadline=None)
@given(data=st.data())
def test_produce_response_builders_build_what_the_constructor_builds(version: int, data: st.DataObject) -> None:
    made, built = handler_answer(data.draw(produce_responses(version)), version)
    assert (made, made.version, made.to_dict()) == (built, version, built.to_dict())
    assert bytes(made.encode(version=version)) == bytes(built.encode(version=version))


def test_large_records_of_a_writable_request_are_a_view_of_it() -> None:
    R = ProduceRequest[9]
    Topic = R.TopicProduceData
    large, small = b"L" * fast.SHARED_RECORDS, b"s" * 100
    request = R(transactional_id=None, acks=-1, timeout_ms=5, topic_data=[Topic(name="t", partition_data=[
        Topic.PartitionProduceData(index=0, records=large), Topic.PartitionProduceData(index=1, records=small)])])
    frame = bytearray(request.encode(version=9))  # a large frame's own buffer is writable
    got = fast.decode_request(PRODUCE, 9, memoryview(frame))
    assert got == ProduceRequest.decode(memoryview(bytes(frame)), version=9)
    shared, copied = (p.records for p in got.topic_data[0].partition_data)
    assert isinstance(shared, memoryview) and shared.obj is frame and not shared.readonly
    assert isinstance(copied, bytes) and copied == small
    readonly = fast.decode_request(PRODUCE, 9, memoryview(bytes(frame)))
    assert isinstance(readonly.topic_data[0].partition_data[0].records, bytes)
