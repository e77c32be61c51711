"""Property-based fuzzing over a real socket: random and mutated frames, headers, request bodies
(every API and version in the dispatch table), record batches, names and SASL tokens.

For every case the broker must

* answer or close the connection as Kafka would — close for a malformed header, an unknown API
  key, an unsupported version (ApiVersions excepted) or a body that does not decode; answer,
  with the request's correlation id and a response of the request's version, for any request
  that does decode (a request that may legitimately wait — a long-polling Fetch, a JoinGroup,
  an acks=0 Produce — may also stay silent for the case's few seconds);
* never crash or log an unexpected error, never hang (every wait below is bounded), and keep
  serving: a healthy connection opened before the test answers after every case;
* leave the stored log exactly as it was whenever it refused the request.

Each test ends with a healthy client producing and reading back. The number of cases run is
printed at the end of the module (``pytest -s`` shows it; the last test also checks it).
"""

from __future__ import annotations

import logging
import os
import re
import struct
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from kafka.net.sasl.scram import ScramClient
from kafka.protocol.admin import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    DescribeConfigsRequest,
)
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.consumer.group import JoinGroupRequest, OffsetCommitRequest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.producer import InitProducerIdRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from minikafka.broker.embedded import BrokerThread
from minikafka.broker.topics import INTERNAL_TOPICS
from minikafka.protocol.apis import ApiKey
from minikafka.protocol.headers import MalformedRequest, parse_request_header
from minikafka.protocol.nulls import check_request_nulls
from minikafka.storage.batch import BatchHeader, crc_is_valid, split_batches
from tests.fuzz_requests import encode, request_for
from tests.kafka_wire import RawClient, build_batch, produce_request
from tests.scenario_helpers import create_topic, fetch_raw, log_batches, log_start_offset, produce

TOPIC = "fuzz"
CASES_RUN: Counter[str] = Counter()
#: How the broker reacted, per kind of case ("body:closed", "record-batch:error-87", ...), for the record.
OUTCOMES: Counter[str] = Counter()
#: How long one case may wait for an answer before it counts as silent.
ANSWER_WAIT = 10.0
#: APIs whose valid requests may wait longer than ANSWER_WAIT before answering.
MAY_WAIT = {ApiKey.FETCH, ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP}
INTERESTING_INTS = [0, 1, -1, 0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFF, 0x7FFFFFFF, -0x80000000, 0x100]

# No shrinking: every example costs socket round trips, and the failing example is printed as found.
FUZZ = settings(deadline=None, derandomize=False, print_blob=True, database=None,
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                       HealthCheck.data_too_large])


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


# ----------------------------------------------------------------------------- broker and its state


class Fuzzed:
    """The broker under test, a healthy connection kept open across cases, and what it stores."""

    def __init__(self, broker: BrokerThread) -> None:
        self.thread = broker
        assert broker.broker is not None
        self.broker = broker.broker
        self.max_request = int(self.broker.config.get("socket.request.max.bytes"))
        self.healthy = RawClient(broker.bootstrap, client_id="healthy", timeout=10)

    def stored(self) -> dict[str, Any]:
        """Per user partition: (log start, log end, bytes), plus the data dir's entries."""

        def snapshot() -> dict[str, Any]:
            logs = self.broker.logs
            assert logs is not None
            state: dict[str, Any] = {
                f"{plog.topic}-{plog.partition}": (plog.log_start_offset, plog.log_end_offset, plog.size_bytes)
                for plog in logs.all_logs() if plog.topic not in INTERNAL_TOPICS
            }
            state["<dirs>"] = sorted(p.name for p in self.broker.data_dir.iterdir()
                                     if p.is_dir() and not p.name.startswith("__"))
            return state

        return self.thread.call(snapshot)

    def assert_alive(self) -> None:
        assert self.thread._thread is not None and self.thread._thread.is_alive(), "broker thread died"
        assert self.broker.started, "broker stopped"
        response = self.healthy.request(ApiVersionsRequest[2]())
        assert response.error_code == 0, "the healthy connection stopped being served"

    def exchange(self, data: bytes, wait: float = ANSWER_WAIT) -> tuple[str, bytes | None]:
        """Send raw bytes on a new connection: ("answer", frame) | ("closed", None) | ("silent", None)."""
        with RawClient(self.thread.bootstrap, client_id="fuzz", timeout=wait) as c:
            try:
                c.send_raw(data)
            except OSError:
                return "closed", None
            try:
                return "answer", c.recv_frame()
            except TimeoutError:
                return "silent", None
            except OSError:
                return "closed", None


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fuzzed]:
    root = tmp_path_factory.mktemp("fuzz")
    broker = BrokerThread(data_dir=str(root / "data"), port=0, config={
        "group.initial.rebalance.delay.ms": 0,
        "connection.failed.authentication.delay.ms": 0,
        # a mutated DeleteTopics can name the seeded topic itself (a shortened name's length
        # prefix): every later case would then meet UNKNOWN_TOPIC_OR_PARTITION
        "delete.topic.enable": False,
    }).start()
    with RawClient(broker.bootstrap) as c:
        create_topic(c, TOPIC)
        for i in range(3):
            assert produce(c, TOPIC, build_batch(value=b"seed-%d" % i, count=2)).error_code == 0
    fuzzed = Fuzzed(broker)
    yield fuzzed
    fuzzed.healthy.close()
    broker.stop()
    print(f"\nfuzz cases run: {sum(CASES_RUN.values())} ({dict(CASES_RUN)})")
    print(f"broker reactions: {dict(sorted(OUTCOMES.items()))}")


@pytest.fixture
def watch_logs(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """No unexpected errors in the broker's log, and no control characters smuggled into a line."""
    with caplog.at_level(logging.INFO, logger="minikafka"):
        yield
    bad = [r for r in caplog.records if r.name.startswith("minikafka") and r.levelno >= logging.ERROR]
    assert not bad, [r.getMessage() for r in bad[:3]]
    for record in caplog.records:
        if record.name.startswith("minikafka"):
            message = record.getMessage()
            assert message.isprintable(), f"control characters in a log line: {message[:200]!r}"


def healthy_roundtrip(fuzzed: Fuzzed) -> None:
    with RawClient(fuzzed.thread.bootstrap) as c:
        before = log_batches(c, TOPIC)
        assert produce(c, TOPIC, build_batch(value=b"healthy")).error_code == 0
        after = log_batches(c, TOPIC)
        assert len(after) == len(before) + 1


# ----------------------------------------------------------------------------- the oracle


def all_cases(fuzzed: Fuzzed) -> list[tuple[int, int]]:
    return [(spec.key, v) for spec in fuzzed.broker.api_table.values()
            for v in range(spec.min_version, spec.max_version + 1)]


def judge(fuzzed: Fuzzed, payload: bytes, outcome: str, answer: bytes | None) -> bool:
    """Check the broker's reaction to ``payload``; True when it refused the request (log must not change)."""
    broker = fuzzed.broker
    try:
        header = parse_request_header(payload, broker.request_is_flexible)
    except MalformedRequest:
        assert outcome == "closed", f"malformed header answered with {outcome}"
        return True
    spec = broker.api_table.get(header.api_key)
    if spec is None:
        assert outcome == "closed", f"unknown API key {header.api_key}: {outcome}"
        return True
    if not spec.supports(header.api_version):
        if header.api_key == 18:
            assert outcome == "answer" and answer is not None
            assert struct.unpack_from(">ih", answer) == (header.correlation_id, 35)
            return True
        assert outcome == "closed", f"unsupported {spec.name} v{header.api_version}: {outcome}"
        return True
    try:
        request = spec.request.decode(memoryview(payload)[header.size:], version=header.api_version)
        check_request_nulls(spec.request, request, header.api_version)
    except Exception:
        assert outcome == "closed", f"undecodable {spec.name} v{header.api_version} body: {outcome}"
        return True
    acks_zero = header.api_key == 0 and request.acks == 0
    if outcome == "silent":
        assert header.api_key in MAY_WAIT or acks_zero, f"{spec.name} v{header.api_version} hung: {request}"
        return not acks_zero
    if outcome == "closed":
        # Kafka closes after a failed acks=0 produce; any other decodable request gets an answer
        assert acks_zero, f"decodable {spec.name} v{header.api_version} closed the connection: {request}"
        return False
    assert answer is not None
    flexible = spec.flexible(header.api_version) and header.api_key != ApiKey.API_VERSIONS
    (correlation,) = struct.unpack_from(">i", answer)
    assert correlation == header.correlation_id
    body = memoryview(answer)[5 if flexible else 4:]
    if header.api_key == 18:  # kafka-python re-reads an ApiVersions error body as v0; Kafka answers in v
        response = ApiMessage.decode.__func__(spec.response, body, version=header.api_version)
    else:
        response = spec.response.decode(body, version=header.api_version)
    if header.api_key == 0:
        codes = [p.error_code for t in response.responses for p in t.partition_responses]
        return bool(codes) and all(codes)
    return False


def may_stay_silent(fuzzed: Fuzzed, payload: bytes) -> bool:
    """A decodable request that may legitimately wait (so the case waits less for it)."""
    try:
        header = parse_request_header(payload, fuzzed.broker.request_is_flexible)
        spec = fuzzed.broker.api_table[header.api_key]
        if not spec.supports(header.api_version):
            return False
        request = spec.request.decode(memoryview(payload)[header.size:], version=header.api_version)
        check_request_nulls(spec.request, request, header.api_version)
    except Exception:
        return False
    return header.api_key in MAY_WAIT or (header.api_key == 0 and request.acks == 0)


def run_case(fuzzed: Fuzzed, payload: bytes, name: str) -> None:
    CASES_RUN[name] += 1
    before = fuzzed.stored()
    outcome, answer = fuzzed.exchange(frame(payload), wait=0.5 if may_stay_silent(fuzzed, payload) else ANSWER_WAIT)
    refused = judge(fuzzed, payload, outcome, answer)
    OUTCOMES[f"{name}:{outcome}"] += 1
    if refused:
        assert fuzzed.stored() == before, f"a refused request changed the stored log ({outcome})"
    fuzzed.assert_alive()


# ----------------------------------------------------------------------------- mutations


@st.composite
def mutate(draw: st.DrawFn, data: bytes, start: int = 0, end: int | None = None) -> bytes:
    """1-4 byte-level edits of ``data`` within [start, end): flips, overwrites with edge values,
    deletions, insertions, truncation and duplication."""
    buf = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        hi = len(buf) if end is None else min(end, len(buf))
        if hi <= start:
            buf[start:start] = draw(st.binary(min_size=1, max_size=8))
            continue
        pos = draw(st.integers(start, hi - 1))
        op = draw(st.sampled_from(["flip", "byte", "int16", "int32", "varint", "delete", "insert", "truncate",
                                   "duplicate"]))
        if op == "flip":
            buf[pos] ^= 1 << draw(st.integers(0, 7))
        elif op == "byte":
            buf[pos] = draw(st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFF]))
        elif op in ("int16", "int32"):
            size = 2 if op == "int16" else 4
            value = draw(st.sampled_from(INTERESTING_INTS)) & ((1 << (8 * size)) - 1)
            buf[pos:pos + size] = value.to_bytes(size, "big")
        elif op == "varint":
            buf[pos:pos + 1] = draw(st.sampled_from([b"\x80\x80\x80\x80\x0f", b"\xff\xff\xff\xff\x7f", b"\x00",
                                                     b"\x80\x01"]))
        elif op == "delete":
            del buf[pos:pos + draw(st.integers(1, 16))]
        elif op == "insert":
            buf[pos:pos] = draw(st.binary(min_size=1, max_size=16))
        elif op == "truncate":
            del buf[pos:]
        else:
            length = draw(st.integers(1, 32))
            buf[pos:pos] = buf[pos:pos + length]
    return bytes(buf)


@st.composite
def seed_request(draw: st.DrawFn, fuzzed: Fuzzed) -> tuple[bytes, int]:
    """A valid request payload for a random (API, version) and the size of its header."""
    key, version = draw(st.sampled_from(all_cases(fuzzed)))
    spec = fuzzed.broker.api_table[key]
    payload = encode(request_for(spec, version, TOPIC), draw(st.integers(0, 2**31 - 1)))
    header = parse_request_header(payload, fuzzed.broker.request_is_flexible)
    return payload, header.size


# ----------------------------------------------------------------------------- tests


@pytest.mark.timeout(120)
def test_valid_request_of_every_api_and_version_is_answered(fuzzed: Fuzzed, watch_logs: None) -> None:
    for key, version in all_cases(fuzzed):
        spec = fuzzed.broker.api_table[key]
        payload = encode(request_for(spec, version, TOPIC), 4242)
        outcome, answer = fuzzed.exchange(frame(payload), wait=0.5 if key in MAY_WAIT else ANSWER_WAIT)
        # a JoinGroup may wait for the members of earlier cases to rejoin
        assert outcome == "answer" or (outcome == "silent" and key in MAY_WAIT), f"{spec.name} v{version}: {outcome}"
        judge(fuzzed, payload, outcome, answer)
        CASES_RUN["valid"] += 1
    healthy_roundtrip(fuzzed)


def fuzz_mutated_requests(fuzzed: Fuzzed, where: str, examples: int) -> None:
    """``examples`` valid requests, each mutated in its body or in its header (``where``), then a
    healthy round trip."""
    @settings(FUZZ, max_examples=examples)
    @given(data=st.data())
    def case(data: st.DataObject) -> None:
        payload, header_size = data.draw(seed_request(fuzzed))
        span = {"start": header_size} if where == "body" else {"start": 0, "end": header_size + 2}
        run_case(fuzzed, data.draw(mutate(payload, **span)), where)

    case()
    healthy_roundtrip(fuzzed)


@pytest.mark.timeout(300)
def test_mutated_request_bodies_are_answered_or_closed(fuzzed: Fuzzed, watch_logs: None) -> None:
    fuzz_mutated_requests(fuzzed, "body", examples=4000)


@pytest.mark.timeout(300)
def test_mutated_request_headers_are_answered_or_closed(fuzzed: Fuzzed, watch_logs: None) -> None:
    fuzz_mutated_requests(fuzzed, "header", examples=1200)


@pytest.mark.timeout(300)
def test_random_frames_are_answered_or_closed(fuzzed: Fuzzed, watch_logs: None) -> None:
    keys = sorted(fuzzed.broker.api_table)

    @st.composite
    def random_payload(draw: st.DrawFn) -> bytes:
        if draw(st.booleans()):
            return draw(st.binary(max_size=400))
        # a plausible header (known key, any version, maybe flexible) and a random body
        key = draw(st.sampled_from(keys + [-1, 7, 9999]))
        version = draw(st.integers(-2, 20))
        client = draw(st.one_of(st.just(b""), st.binary(max_size=20)))
        head = struct.pack(">hhih", key, version, draw(st.integers(-2**31, 2**31 - 1)), len(client)) + client
        tags = draw(st.sampled_from([b"", b"\x00", b"\x01\x00\x00", b"\x02\x05\x01x"]))
        return head + tags + draw(st.binary(max_size=300))

    @settings(FUZZ, max_examples=1500)
    @given(payload=random_payload())
    def case(payload: bytes) -> None:
        run_case(fuzzed, payload, "random")

    case()
    healthy_roundtrip(fuzzed)


@pytest.mark.timeout(300)
def test_frame_sizes_that_lie_close_or_wait_without_harm(fuzzed: Fuzzed, watch_logs: None) -> None:
    @settings(FUZZ, max_examples=80)
    @given(size=st.one_of(st.integers(-2**31, -1), st.integers(fuzzed.max_request + 1, 2**31 - 1),
                          st.integers(1, 10_000)),
           body=st.binary(max_size=64))
    def case(size: int, body: bytes) -> None:
        CASES_RUN["frame-size"] += 1
        before = fuzzed.stored()
        claimed_more = 0 < size <= fuzzed.max_request and size > len(body)
        outcome, _answer = fuzzed.exchange(struct.pack(">i", size) + body, wait=0.3 if claimed_more else 3.0)
        if size < 0 or size > fuzzed.max_request:
            assert outcome == "closed", f"frame size {size}: {outcome}"
        elif claimed_more:
            assert outcome == "silent", "a frame still arriving was answered"
        assert fuzzed.stored() == before or outcome == "answer"
        fuzzed.assert_alive()

    case()
    healthy_roundtrip(fuzzed)


#: Produce errors a corrupt or odd batch may get (docs/semantics.md#produce-errors).
BATCH_ERRORS = {2, 10, 32, 45, 47, 48, 53, 76, 87}


@pytest.mark.timeout(300)
def test_mutated_record_batches_are_refused_without_touching_the_log(fuzzed: Fuzzed, watch_logs: None) -> None:
    with RawClient(fuzzed.thread.bootstrap) as c:
        init = c.request(InitProducerIdRequest[4](transactional_id=None, transaction_timeout_ms=-1,
                                                  producer_id=-1, producer_epoch=-1))
    producer_id = init.producer_id
    produce_spec = fuzzed.broker.api_table[ApiKey.PRODUCE]

    @st.composite
    def batch(draw: st.DrawFn) -> bytes:
        idempotent = draw(st.booleans())
        raw = build_batch(producer_id=producer_id if idempotent else -1, epoch=0 if idempotent else -1,
                          base_sequence=draw(st.integers(0, 50)) if idempotent else -1,
                          count=draw(st.integers(1, 5)), codec=draw(st.sampled_from(["none", "gzip", "zstd",
                                                                                     "lz4", "snappy"])),
                          value=draw(st.binary(max_size=64)))
        return draw(mutate(bytes(raw)))

    @settings(FUZZ, max_examples=2000)
    # v2 batches in the versions that require them; v0-v2 message sets: tests/storage/test_legacy_formats.py
    @given(records=batch(), version=st.integers(max(3, produce_spec.min_version), produce_spec.max_version),
           acks=st.sampled_from([-1, 1]))
    def case(records: bytes, version: int, acks: int) -> None:
        CASES_RUN["record-batch"] += 1
        before = fuzzed.stored()
        with RawClient(fuzzed.thread.bootstrap, timeout=ANSWER_WAIT) as c:
            response = c.request(produce_request(TOPIC, 0, bytearray(records), acks=acks, version=version))
        part = response.responses[0].partition_responses[0]
        after = fuzzed.stored()
        key = f"{TOPIC}-0"
        OUTCOMES[f"record-batch:error-{part.error_code}"] += 1
        if part.error_code:
            assert part.error_code in BATCH_ERRORS, part
            assert after == before, "a refused batch changed the stored log"
        else:
            # accepted: it is stored once, as one well-formed batch (or answered as a duplicate)
            header = BatchHeader.parse(records, 0)
            grown = after[key][1] - before[key][1]
            assert grown in (0, header.last_offset_delta + 1)
            assert grown or part.base_offset < before[key][1]
        fuzzed.assert_alive()

    case()
    with RawClient(fuzzed.thread.bootstrap) as c:  # whatever was accepted is stored intact
        part = fetch_raw(c, TOPIC, offset=0)
        if part.error_code == 1:
            part = fetch_raw(c, TOPIC, offset=log_start_offset(c, TOPIC))
        records = part.records or b""
        for pos, header in split_batches(records):
            assert crc_is_valid(records, pos, header), f"stored batch at offset {header.base_offset} is corrupt"
    healthy_roundtrip(fuzzed)


NAMES = st.one_of(
    st.sampled_from(["..", ".", "../escape", "../../etc/passwd", "a/b", "/abs", "..\\win", "a\x00b", "a\nb",
                     "x" * 250, "%2e%2e", "__consumer_offsets", "a.b", "a_b", " lead", "ünï", "\u202etxt", "",
                     "CON", "dir/../x"]),
    st.text(max_size=40),
    st.text(alphabet="abc./_-\\\x00\n", max_size=12),
)


@pytest.mark.timeout(300)
def test_hostile_topic_and_group_names_never_reach_the_file_system(
    fuzzed: Fuzzed, watch_logs: None, tmp_path: Path
) -> None:
    data_dir = fuzzed.broker.data_dir
    outside = sorted(os.listdir(data_dir.parent))
    legal_dir = re.compile(r"^[a-zA-Z0-9._-]{1,249}-\d+$")

    def requests(name: str) -> list[Any]:
        C, D, DR, DC, CP = (CreateTopicsRequest[5], DeleteTopicsRequest[4], DeleteRecordsRequest[1],
                            DescribeConfigsRequest[2], CreatePartitionsRequest[1])
        F, L, OC, J = FetchRequest[11], ListOffsetsRequest[5], OffsetCommitRequest[7], JoinGroupRequest[5]
        return [
            C(topics=[C.CreatableTopic(name=name, num_partitions=1, replication_factor=1, assignments=[],
                                       configs=[])], timeout_ms=1000, validate_only=False),
            MetadataRequest[4](topics=[MetadataRequest[4].MetadataRequestTopic(name=name)],
                               allow_auto_topic_creation=True),
            produce_request(name, 0, build_batch(value=b"n")),
            F(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1024, isolation_level=0, session_id=0,
              session_epoch=-1, topics=[F.FetchTopic(topic=name, partitions=[F.FetchTopic.FetchPartition(
                  partition=0, current_leader_epoch=-1, fetch_offset=0, log_start_offset=-1,
                  partition_max_bytes=1024)])], forgotten_topics_data=[], rack_id=""),
            L(replica_id=-1, isolation_level=0, topics=[L.ListOffsetsTopic(name=name, partitions=[
                L.ListOffsetsTopic.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-1)])]),
            DC(resources=[DC.DescribeConfigsResource(resource_type=2, resource_name=name, configuration_keys=None)],
               include_synonyms=False),
            CP(topics=[CP.CreatePartitionsTopic(name=name, count=2, assignments=None)], timeout_ms=1000,
               validate_only=False),
            DR(topics=[DR.DeleteRecordsTopic(name=name, partitions=[
                DR.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=0, offset=0)])], timeout_ms=1000),
            OC(group_id=name, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None, topics=[
                OC.OffsetCommitRequestTopic(name=name, partitions=[OC.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                    partition_index=0, committed_offset=0, committed_leader_epoch=-1, committed_metadata="")])]),
            J(group_id=name, session_timeout_ms=10000, rebalance_timeout_ms=1000, member_id="",
              group_instance_id=None, protocol_type="consumer",
              protocols=[J.JoinGroupRequestProtocol(name="range", metadata=b"")]),
            D(topic_names=[name], timeout_ms=1000),
        ]

    @settings(FUZZ, max_examples=300)
    @given(name=NAMES)
    def case(name: str) -> None:
        CASES_RUN["names"] += 1
        with RawClient(fuzzed.thread.bootstrap, timeout=ANSWER_WAIT) as c:
            for request in requests(name):
                c.request(request)  # every one is answered; none closes the connection
        for entry in os.listdir(data_dir):
            path = data_dir / entry
            if path.is_dir() and not entry.startswith("__"):
                assert legal_dir.match(entry) or entry.endswith("-delete"), f"unexpected directory {entry!r}"
        assert sorted(os.listdir(data_dir.parent)) == outside, "something was written outside the data dir"
        fuzzed.assert_alive()

    case()
    healthy_roundtrip(fuzzed)


# ----------------------------------------------------------------------------- SASL before authentication


@pytest.fixture(scope="module")
def sasl_fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerThread]:
    broker = BrokerThread(data_dir=str(tmp_path_factory.mktemp("fuzz-sasl")), port=0, config={
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "minikafka.sasl.users": "alice:alice-secret",
        "connection.failed.authentication.delay.ms": 0,
    }).start()
    yield broker
    broker.stop()


def _plain_is_valid(token: bytes) -> bool:
    parts = token.split(b"\x00")
    return len(parts) == 3 and parts[1] == b"alice" and parts[2] == b"alice-secret" and parts[0] in (b"", b"alice")


@pytest.mark.timeout(300)
def test_mutated_sasl_exchanges_never_authenticate_a_wrong_secret(
    sasl_fuzzed: BrokerThread, watch_logs: None
) -> None:
    good_plain = b"\x00alice\x00alice-secret"

    def metadata_served(c: RawClient) -> bool:
        try:
            c.send(MetadataRequest[1](topics=None))
            c.recv_frame()
            return True
        except OSError:
            return False

    @settings(FUZZ, max_examples=600)
    @given(data=st.data())
    def case(data: st.DataObject) -> None:
        CASES_RUN["sasl"] += 1
        kind = data.draw(st.sampled_from(["plain-v1", "plain-v0", "scram", "handshake", "frames"]))
        with RawClient(sasl_fuzzed.bootstrap, timeout=ANSWER_WAIT) as c:
            authenticated = False
            try:
                if kind in ("plain-v1", "plain-v0"):
                    token = data.draw(mutate(good_plain))
                    version = 1 if kind == "plain-v1" else 0
                    assert c.request(SaslHandshakeRequest[version](mechanism="PLAIN")).error_code == 0
                    if version:
                        authenticated = c.request(SaslAuthenticateRequest[1](auth_bytes=token)).error_code == 0
                    else:
                        c.send_raw(frame(token))
                        authenticated = c.recv_frame() == b""
                    assert authenticated == _plain_is_valid(token), token
                elif kind == "scram":
                    client = ScramClient("alice", "alice-secret", "SCRAM-SHA-256")
                    assert c.request(SaslHandshakeRequest[1](mechanism="SCRAM-SHA-256")).error_code == 0
                    first = c.request(SaslAuthenticateRequest[1](auth_bytes=client.first_message()))
                    client.process_server_first_message(first.auth_bytes)
                    final = client.final_message()
                    mutated = data.draw(mutate(final))
                    answer = c.request(SaslAuthenticateRequest[1](auth_bytes=mutated))
                    authenticated = answer.error_code == 0
                    assert not authenticated or mutated == final, mutated
                elif kind == "handshake":
                    payload = encode(SaslHandshakeRequest[1](mechanism="PLAIN"), 1)
                    c.send_raw(frame(data.draw(mutate(payload))))
                    c.recv_frame()
                else:
                    c.send_raw(frame(data.draw(st.binary(max_size=200))))
                    c.recv_frame()
            except (OSError, ValueError):
                pass  # closed by the broker, or a mutated answer the client cannot parse
            served = metadata_served(c)
            OUTCOMES[f"sasl:{kind}:{'authenticated' if authenticated else 'refused'}"] += 1
            assert served == authenticated, f"{kind}: authenticated={authenticated} served={served}"
        with RawClient(sasl_fuzzed.bootstrap) as c:
            assert c.request(ApiVersionsRequest[2]()).error_code == 0

    case()
    with RawClient(sasl_fuzzed.bootstrap) as c:
        assert c.request(SaslHandshakeRequest[1](mechanism="PLAIN")).error_code == 0
        assert c.request(SaslAuthenticateRequest[1](auth_bytes=good_plain)).error_code == 0
        create_topic(c, "after-sasl-fuzz")


def test_fuzz_case_count(fuzzed: Fuzzed, capsys: pytest.CaptureFixture[str]) -> None:
    """Runs last in this module: the cases above really ran (and how many, for the record)."""
    if not CASES_RUN:
        pytest.skip("no fuzz test ran before this one")
    total = sum(CASES_RUN.values())
    with capsys.disabled():
        print(f"\nfuzz cases run so far: {total} {dict(sorted(CASES_RUN.items()))}")
        print(f"broker reactions: {dict(sorted(OUTCOMES.items()))}")
    assert all(count > 0 for count in CASES_RUN.values()), CASES_RUN
