"""Fetch v13-v17 on one broker, over raw requests: topics by id (KIP-516) with the same records
as by name, UNKNOWN_TOPIC_ID and INCONSISTENT_TOPIC_ID where Kafka puts them, fetch sessions
declined as Kafka declines them without a free slot, v17's directory id ignored, and the versions
advertised (Kafka's ``KafkaApis.handleFetchRequest`` and ``FetchManager.newContext``)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from kafka.protocol.admin import DeleteTopicsRequest
from kafka.protocol.metadata import ApiVersionsRequest

from minikafka.broker.embedded import BrokerThread
from minikafka.errors import ErrorCode
from minikafka.storage.batch import split_batches
from tests.fetch_wire import fetch_request, topic_id
from tests.kafka_wire import RawClient, build_batch
from tests.scenario_helpers import create_topic, produce

BY_NAME = range(4, 13)
BY_ID = range(13, 18)


def records_of(partition: Any) -> list[bytes]:
    data = bytes(partition.records or b"")
    return [data[pos : pos + header.size] for pos, header in split_batches(data)]


def filled(client: RawClient, name: str, count: int = 2, partitions: int = 1) -> uuid.UUID:
    create_topic(client, name, partitions=partitions)
    for i in range(count):
        assert produce(client, name, build_batch(value=f"r{i}".encode())).error_code == 0
    return topic_id(client, name)


def delete_topic(client: RawClient, name: str) -> None:
    answer = client.request(DeleteTopicsRequest[4](topic_names=[name], timeout_ms=5000))
    assert answer.responses[0].error_code == 0, answer


def test_fetch_by_id_from_v13_reads_what_fetch_by_name_reads(broker: BrokerThread) -> None:
    with RawClient(broker.bootstrap) as c:
        tid = filled(c, "t")
        by_name = [c.request(fetch_request(v, [("t", [0])])) for v in BY_NAME]
        by_id = [c.request(fetch_request(v, [(tid, [0])])) for v in BY_ID]
    expected = records_of(by_name[0].responses[0].partitions[0])
    assert len(expected) == 2
    for answer in by_name:
        assert answer.responses[0].topic == "t"
        assert records_of(answer.responses[0].partitions[0]) == expected
    for answer in by_id:
        topic = answer.responses[0]
        assert topic.topic_id == tid
        part = topic.partitions[0]
        assert (part.error_code, part.high_watermark, part.log_start_offset) == (0, 2, 0)
        assert records_of(part) == expected
        assert part.current_leader is None and answer.node_endpoints in (None, [])


@pytest.mark.parametrize("version", BY_ID)
def test_an_unknown_topic_id_is_unknown_topic_id_after_the_partitions_read(broker: BrokerThread,
                                                                          version: int) -> None:
    unknown = uuid.uuid4()
    with RawClient(broker.bootstrap) as c:
        tid = filled(c, "t", partitions=2)
        answer = c.request(fetch_request(version, [(unknown, [1, 0]), (uuid.UUID(int=0), [0]), (tid, [0, 1])]))
    assert answer.error_code == 0
    assert [t.topic_id for t in answer.responses] == [tid, unknown, None]  # kafka-python reads the zero id as None
    assert [p.partition_index for p in answer.responses[0].partitions] == [0, 1]
    assert [p.error_code for p in answer.responses[0].partitions] == [0, 0]
    refused = [p for t in answer.responses[1:] for p in t.partitions]
    assert [p.partition_index for p in refused] == [1, 0, 0]
    for p in refused:
        assert (p.error_code, p.high_watermark, p.last_stable_offset, p.log_start_offset) == (
            ErrorCode.UNKNOWN_TOPIC_ID, -1, -1, -1)
        assert not p.records


def test_a_fetch_of_unknown_ids_only_is_answered_without_waiting(broker: BrokerThread) -> None:
    with RawClient(broker.bootstrap) as c:
        started = time.monotonic()
        answer = c.request(fetch_request(13, [(uuid.uuid4(), [0])], max_wait_ms=20_000, min_bytes=1))
        assert time.monotonic() - started < 10  # well before max_wait_ms: nothing was there to wait for
    assert answer.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID


def test_a_topic_created_again_under_its_name_has_a_new_id_and_the_old_one_is_unknown(broker: BrokerThread) -> None:
    with RawClient(broker.bootstrap) as c:
        old = filled(c, "again", count=3)
        delete_topic(c, "again")
        new = filled(c, "again", count=1)
        assert new != old
        gone = c.request(fetch_request(13, [(old, [0])])).responses[0]
        assert (gone.topic_id, gone.partitions[0].error_code) == (old, ErrorCode.UNKNOWN_TOPIC_ID)
        now = c.request(fetch_request(16, [(new, [0])])).responses[0].partitions[0]
        assert (now.error_code, now.high_watermark, len(records_of(now))) == (0, 1, 1)
        by_name = c.request(fetch_request(12, [("again", [0])])).responses[0].partitions[0]
        assert records_of(by_name) == records_of(now)


def test_a_topic_recreated_while_a_fetch_by_id_waits_is_inconsistent_topic_id(broker: BrokerThread) -> None:
    with RawClient(broker.bootstrap) as c:
        old = filled(c, "moving", count=0)
        answers: list[Any] = []
        waiting = threading.Thread(target=lambda: answers.append(
            c.request(fetch_request(13, [(old, [0])], max_wait_ms=20_000, min_bytes=1))))
        waiting.start()
        parked = time.monotonic() + 20
        while broker.broker is not None and not broker.broker.services.fetch_waiters.waiting(("moving", 0)):
            assert time.monotonic() < parked, "the fetch did not start waiting"
            time.sleep(0.01)
        with RawClient(broker.bootstrap) as admin:
            delete_topic(admin, "moving")
            filled(admin, "moving", count=1)  # the append to the new log wakes the waiting fetch
        waiting.join(30)
    assert not waiting.is_alive()
    part = answers[0].responses[0].partitions[0]
    assert (answers[0].responses[0].topic_id, part.error_code) == (old, ErrorCode.INCONSISTENT_TOPIC_ID)
    assert (part.high_watermark, part.log_start_offset, part.records) == (-1, -1, b"")


@pytest.mark.parametrize("version", [7, 12, 13, 17])
def test_an_incremental_fetch_names_a_session_the_broker_never_opened(broker: BrokerThread, version: int) -> None:
    with RawClient(broker.bootstrap) as c:
        tid = filled(c, "t")
        key = tid if version >= 13 else "t"
        full = c.request(fetch_request(version, [(key, [0])], session_epoch=0))  # asks for a new session
        assert (full.error_code, full.session_id) == (0, 0)  # none opened: "send full requests"
        assert len(records_of(full.responses[0].partitions[0])) == 2
        for session_id, epoch in ((0, 1), (123, 1), (123, 7)):
            answer = c.request(fetch_request(version, [(key, [0])], session_id=session_id, session_epoch=epoch))
            assert (answer.error_code, answer.session_id, answer.responses) == (
                ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0, [])
        closing = c.request(fetch_request(version, [(key, [0])], session_id=123, session_epoch=-1))
        assert (closing.error_code, closing.session_id) == (0, 0)  # a full request closing a session is served
        assert len(records_of(closing.responses[0].partitions[0])) == 2


def test_a_session_begun_by_name_and_continued_by_id_finds_no_session(broker: BrokerThread) -> None:
    """Kafka answers FETCH_SESSION_TOPIC_ID_ERROR when a session switches between names (v12) and
    ids (v13), but only for a session it has: without one the request is FETCH_SESSION_ID_NOT_FOUND,
    which it checks first."""
    with RawClient(broker.bootstrap) as c:
        tid = filled(c, "t")
        assert c.request(fetch_request(12, [("t", [0])], session_epoch=0)).session_id == 0
        answer = c.request(fetch_request(13, [(tid, [0])], session_id=1, session_epoch=1))
    assert answer.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_v17_directory_id_is_ignored(broker: BrokerThread) -> None:
    with RawClient(broker.bootstrap) as c:
        tid = filled(c, "t")
        plain = c.request(fetch_request(17, [(tid, [0])])).responses[0].partitions[0]
        with_dir = c.request(fetch_request(17, [(tid, [0])], directory_id=uuid.uuid4())).responses[0].partitions[0]
    assert with_dir.error_code == 0 and records_of(with_dir) == records_of(plain) != []


def test_fetch_is_advertised_up_to_v17(start_broker: Callable[..., BrokerThread]) -> None:
    for config, expected in (({}, (0, 17)), ({"minikafka.kafka.version": "3.9"}, (0, 17)),
                             ({"minikafka.kafka.version": "4.0"}, (4, 17))):
        with RawClient(start_broker(config).bootstrap) as c:
            answer = c.request(ApiVersionsRequest[3](client_software_name="t", client_software_version="1"))
        assert next((k.min_version, k.max_version) for k in answer.api_keys if k.api_key == 1) == expected
