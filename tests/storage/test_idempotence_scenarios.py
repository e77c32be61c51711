"""The produce and idempotence rules of docs/semantics.md, end to end: raw requests over a real socket.

Each test builds its batches with kafka-python's record batch builder, sends them exactly as
a producer would, and checks the exact error code, offsets and what the log then holds.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kafka.protocol.metadata import ApiVersionsRequest
from kafka.protocol.producer import InitProducerIdRequest

from minikafka.broker.embedded import BrokerThread
from minikafka.storage.batch import compute_crc
from tests.kafka_wire import RawClient, build_batch, produce_request
from tests.scenario_helpers import P, Q, clock_ahead, create_topic, delete_records, log_summary, produce

T = "t"


@pytest.fixture
def client(broker: BrokerThread) -> Iterator[RawClient]:
    with RawClient(broker.bootstrap) as c:
        create_topic(c, T)
        yield c


def B(pid: int, epoch: int, first: int, last: int | None = None, **kwargs: Any) -> bytearray:
    """B(pid, e, s..t): one batch with sequences first..last."""
    count = 1 if last is None else last - first + 1
    return build_batch(producer_id=pid, epoch=epoch, base_sequence=first, count=count, **kwargs)


def with_attribute(batch: bytearray, bit: int) -> bytearray:
    """``batch`` with one more attribute bit set (0x10 transactional, 0x20 control) and its CRC fixed."""
    attributes = struct.unpack_from(">h", batch, 21)[0] | bit
    struct.pack_into(">h", batch, 21, attributes)
    struct.pack_into(">I", batch, 17, compute_crc(batch))
    return batch


def ok_at(response: Any, offset: int) -> None:
    assert (response.error_code, response.base_offset) == (0, offset), response


def rejected(response: Any, code: int) -> None:
    assert response.error_code == code, response
    assert response.base_offset == -1
    assert response.log_append_time_ms == -1


def leo(client: RawClient, topic: str = T) -> int:
    batches = log_summary(client, topic)
    return batches[-1][0] + batches[-1][4] if batches else 0


# --------------------------------------------------------------------------- A. sequencing


def test_first_batch_of_new_producer_is_appended_at_zero(client: RawClient) -> None:
    ok_at(produce(client, T, B(P, 0, 0)), 0)
    assert log_summary(client, T) == [(0, P, 0, 0, 1)]


def test_next_batch_in_sequence_is_appended(client: RawClient) -> None:
    produce(client, T, B(P, 0, 0))
    ok_at(produce(client, T, B(P, 0, 1)), 1)
    assert leo(client) == 2


def test_sequence_gap_is_rejected_and_appends_nothing(client: RawClient) -> None:
    produce(client, T, B(P, 0, 0))
    rejected(produce(client, T, B(P, 0, 2)), 45)
    assert leo(client) == 1


def test_exact_duplicate_of_newest_batch_returns_original_offset_and_timestamp(client: RawClient) -> None:
    batch = B(P, 0, 0, timestamp=1_700_000_000_000)
    first = produce(client, T, batch)
    ok_at(first, 0)
    assert first.log_append_time_ms == -1
    again = produce(client, T, B(P, 0, 0, timestamp=1_700_000_000_000))
    ok_at(again, 0)
    assert again.log_append_time_ms == 1_700_000_000_000
    assert again.log_start_offset == 0
    assert leo(client) == 1


def _six_then_triple(client: RawClient) -> None:
    for seq in range(6):
        ok_at(produce(client, T, B(P, 0, seq)), seq)
    ok_at(produce(client, T, B(P, 0, 6, 8)), 6)


def test_duplicate_of_multi_record_batch_returns_its_first_offset(client: RawClient) -> None:
    _six_then_triple(client)
    ok_at(produce(client, T, B(P, 0, 6, 8)), 6)
    assert leo(client) == 9


def test_duplicate_of_fifth_most_recent_batch_returns_original_offset(client: RawClient) -> None:
    _six_then_triple(client)
    ok_at(produce(client, T, B(P, 0, 2)), 2)
    assert leo(client) == 9


def test_duplicate_of_evicted_sixth_batch_is_out_of_order(client: RawClient) -> None:
    _six_then_triple(client)
    rejected(produce(client, T, B(P, 0, 1)), 45)
    assert leo(client) == 9


def test_duplicate_from_middle_of_window_returns_original_offset(client: RawClient) -> None:
    _six_then_triple(client)
    ok_at(produce(client, T, B(P, 0, 4)), 4)


def test_partial_overlap_with_newest_batch_is_out_of_order(client: RawClient) -> None:
    _six_then_triple(client)
    rejected(produce(client, T, B(P, 0, 7, 8)), 45)


def test_superset_of_newest_batch_is_out_of_order(client: RawClient) -> None:
    _six_then_triple(client)
    rejected(produce(client, T, B(P, 0, 6, 9)), 45)
    assert leo(client) == 9


def test_same_sequence_range_with_other_payload_is_a_duplicate_and_not_stored(
    client: RawClient, broker: BrokerThread
) -> None:
    ok_at(produce(client, T, B(P, 0, 0, value=b"A")), 0)
    ok_at(produce(client, T, B(P, 0, 0, value=b"B")), 0)
    assert leo(client) == 1
    raw = b"".join(p.read_bytes() for p in sorted((broker.broker.data_dir / f"{T}-0").glob("*.log")))
    assert b"B" not in raw[61:]


def test_duplicate_after_segment_roll_is_recognised(client: RawClient, broker: BrokerThread) -> None:
    create_topic(client, "small", configs={"segment.bytes": "1024"})
    ok_at(produce(client, "small", B(P, 0, 0, value=b"x" * 512)), 0)
    ok_at(produce(client, "small", B(P, 0, 1, value=b"x" * 512)), 1)
    directory = broker.broker.data_dir / "small-0"
    assert (directory / "00000000000000000001.snapshot").exists()
    ok_at(produce(client, "small", B(P, 0, 0, value=b"x" * 512)), 0)
    assert leo(client, "small") == 2


def test_duplicate_below_log_start_offset_still_returns_original_offset(client: RawClient) -> None:
    ok_at(produce(client, T, B(P, 0, 0)), 0)
    ok_at(produce(client, T, B(Q, 0, 0)), 1)
    assert delete_records(client, T, 1).error_code == 0
    again = produce(client, T, B(P, 0, 0))
    ok_at(again, 0)
    assert again.log_start_offset == 1


def test_duplicate_with_acks_zero_gets_no_response_and_appends_nothing(client: RawClient) -> None:
    ok_at(produce(client, T, B(P, 0, 0)), 0)
    client.send(produce_request(T, 0, B(P, 0, 0), acks=0))
    # The next response on the connection must belong to the next request: acks=0 got none.
    ok_at(produce(client, T, B(P, 0, 1)), 1)
    assert leo(client) == 2


def test_duplicate_that_now_fails_timestamp_validation_gets_invalid_timestamp(
    client: RawClient, broker: BrokerThread
) -> None:
    create_topic(client, "ts", configs={"message.timestamp.before.max.ms": "60000"})
    now = int(time.time() * 1000)
    ok_at(produce(client, "ts", B(P, 0, 0, timestamp=now)), 0)
    with clock_ahead(broker.broker, 120_000):
        response = produce(client, "ts", B(P, 0, 0, timestamp=now))
    assert response.error_code == 32
    assert [e.batch_index for e in response.record_errors] == [0]
    assert leo(client, "ts") == 1


def test_sequences_are_tracked_per_producer_id(client: RawClient) -> None:
    ok_at(produce(client, T, B(P, 0, 0)), 0)
    ok_at(produce(client, T, B(Q, 0, 0)), 1)
    ok_at(produce(client, T, B(P, 0, 1)), 2)
    ok_at(produce(client, T, B(Q, 0, 1)), 3)
    ok_at(produce(client, T, B(Q, 0, 0)), 1)
    assert leo(client) == 4


# --------------------------------------------------------------------------- B. epochs


def _five(client: RawClient) -> None:
    for seq in range(5):
        ok_at(produce(client, T, B(P, 0, seq)), seq)


def test_epoch_bump_with_sequence_zero_starts_new_window(client: RawClient, broker: BrokerThread) -> None:
    _five(client)
    ok_at(produce(client, T, B(P, 1, 0)), 5)
    entry = broker.broker.logs.get_log(T, 0).producer_state.producers()[P]
    assert entry.epoch == 1
    assert [(b.first_seq, b.first_offset) for b in entry.batches] == [(0, 5)]


def test_epoch_bump_with_nonzero_sequence_is_out_of_order(client: RawClient, broker: BrokerThread) -> None:
    _five(client)
    rejected(produce(client, T, B(P, 1, 5)), 45)
    assert broker.broker.logs.get_log(T, 0).producer_state.producers()[P].epoch == 0


def test_epoch_jump_larger_than_one_is_accepted(client: RawClient, broker: BrokerThread) -> None:
    _five(client)
    ok_at(produce(client, T, B(P, 7, 0)), 5)
    assert broker.broker.logs.get_log(T, 0).producer_state.producers()[P].epoch == 7


def test_zombie_with_older_epoch_is_fenced_with_47(client: RawClient) -> None:
    _five(client)
    ok_at(produce(client, T, B(P, 1, 0)), 5)
    response = produce(client, T, B(P, 0, 5))
    rejected(response, 47)
    assert response.log_start_offset == 0


def test_retry_of_pre_bump_batch_is_fenced_not_duplicate(client: RawClient) -> None:
    _five(client)
    ok_at(produce(client, T, B(P, 1, 0)), 5)
    rejected(produce(client, T, B(P, 0, 4)), 47)


def test_older_epoch_with_sequence_zero_is_fenced(client: RawClient) -> None:
    _five(client)
    ok_at(produce(client, T, B(P, 1, 0)), 5)
    rejected(produce(client, T, B(P, 0, 0)), 47)
    assert leo(client) == 6


# --------------------------------------------------------------------------- C. unknown / expired


def test_unknown_producer_with_nonzero_sequence_is_accepted(client: RawClient) -> None:
    ok_at(produce(client, T, B(2000, 0, 42)), 0)
    ok_at(produce(client, T, B(2000, 0, 43)), 1)
    rejected(produce(client, T, B(2000, 0, 45)), 45)


def test_unknown_producer_with_nonzero_epoch_and_sequence_is_accepted(client: RawClient) -> None:
    ok_at(produce(client, T, B(23, 1, 3, 4)), 0)


def test_producer_expired_after_idling_is_treated_as_new(client: RawClient, broker: BrokerThread) -> None:
    ok_at(produce(client, T, B(P, 5, 0)), 0)
    with clock_ahead(broker.broker, 86_400_000 + 1):
        broker.call(broker.broker._expire_producers)
    assert P not in broker.broker.logs.get_log(T, 0).producer_state.producers()
    ok_at(produce(client, T, B(P, 5, 7)), 1)


def test_old_record_timestamps_do_not_expire_producer_on_broker_clock(
    client: RawClient, broker: BrokerThread
) -> None:
    # minikafka measures expiry on the broker's clock from the last append (docs/semantics.md#expiry-on-the-broker-clock).
    day_old = int(time.time() * 1000) - 25 * 3_600_000
    ok_at(produce(client, T, B(P, 0, 0, timestamp=day_old)), 0)
    broker.call(broker.broker._expire_producers)
    ok_at(produce(client, T, B(P, 0, 0, timestamp=day_old)), 0)
    assert leo(client) == 1


# --------------------------------------------------------------------------- D. wrap-around

MAX = 2147483647


def test_sequence_wraps_from_int32_max_to_zero(client: RawClient) -> None:
    ok_at(produce(client, T, B(P, 15, MAX)), 0)
    ok_at(produce(client, T, B(P, 15, 0)), 1)


def test_sequence_after_int32_max_other_than_zero_is_out_of_order(client: RawClient) -> None:
    ok_at(produce(client, T, B(P, 15, MAX)), 0)
    rejected(produce(client, T, B(P, 15, 1)), 45)


def test_batch_straddling_wrap_is_deduplicated_and_continues_at_ten(client: RawClient) -> None:
    ok_at(produce(client, T, B(P, 0, MAX - 11)), 0)  # last sequence 2147483636
    straddle = build_batch(producer_id=P, epoch=0, base_sequence=MAX - 10, count=21)
    ok_at(produce(client, T, straddle), 1)
    ok_at(produce(client, T, bytearray(straddle)), 1)
    ok_at(produce(client, T, B(P, 0, 10)), 22)
    rejected(produce(client, T, B(P, 0, 12)), 45)


@pytest.mark.parametrize("sequence", [-2147483648, -1])
def test_negative_base_sequence_with_producer_id_is_invalid_record(client: RawClient, sequence: int) -> None:
    rejected(produce(client, T, B(P, 0, sequence)), 87)


# --------------------------------------------------------------------------- E. validation


def test_nonzero_base_offset_from_client_is_invalid_record(client: RawClient) -> None:
    batch = B(P, 0, 0)
    struct.pack_into(">q", batch, 0, 5)
    rejected(produce(client, T, batch), 87)
    assert leo(client) == 0


def test_batch_shorter_than_a_header_is_corrupt_message_but_a_nonzero_base_offset_comes_first(
        client: RawClient) -> None:
    short = B(P, 0, 0)[:40]
    struct.pack_into(">i", short, 8, len(short) - 12)  # one complete magic-2 batch of 40 bytes
    response = produce(client, T, short)
    rejected(response, 2)
    assert response.log_start_offset == -1
    struct.pack_into(">q", short, 0, 5)
    rejected(produce(client, T, short), 87)
    assert leo(client) == 0


def test_record_count_disagreeing_with_last_offset_delta_is_invalid_record(client: RawClient) -> None:
    batch = B(P, 0, 0, 1)  # two records, lastOffsetDelta 1
    struct.pack_into(">i", batch, 57, 3)
    struct.pack_into(">I", batch, 17, compute_crc(batch))
    rejected(produce(client, T, batch), 87)


def test_bad_crc_is_corrupt_message_and_leaves_state_unchanged(client: RawClient) -> None:
    batch = B(P, 0, 0)
    batch[-1] ^= 0xFF
    response = produce(client, T, batch)
    rejected(response, 2)
    assert response.log_start_offset == -1
    ok_at(produce(client, T, B(P, 0, 0)), 0)


def test_batch_over_max_message_bytes_is_message_too_large(client: RawClient) -> None:
    batch = B(P, 0, 0, value=b"\x00" * 1048589)
    assert len(batch) > 1048588
    rejected(produce(client, T, batch), 10)


def test_magic_1_batch_in_produce_v3_plus_is_invalid_record(client: RawClient) -> None:
    batch = B(P, 0, 0)
    batch[16] = 1
    rejected(produce(client, T, batch), 87)


def test_two_batches_in_one_partition_are_invalid_record(client: RawClient) -> None:
    rejected(produce(client, T, B(P, 0, 0) + B(P, 0, 1)), 87)
    assert leo(client) == 0


def test_zstd_needs_produce_v7(client: RawClient) -> None:
    batch = B(P, 0, 0, codec="zstd", value=b"z" * 1000)
    assert batch[22] & 0x07 == 4  # compressed (the builder keeps small batches uncompressed)
    rejected(produce(client, T, batch, version=5), 76)
    ok_at(produce(client, T, batch, version=7), 0)


def test_control_batch_from_client_is_invalid_record(client: RawClient) -> None:
    rejected(produce(client, T, with_attribute(B(P, 0, 0), 0x20)), 87)


def test_invalid_acks_is_rejected_on_every_partition(client: RawClient) -> None:
    rejected(produce(client, T, B(P, 0, 0), acks=2), 21)
    assert leo(client) == 0


def test_produce_to_unknown_topic_does_not_create_it(client: RawClient, broker: BrokerThread) -> None:
    rejected(produce(client, "nosuch", B(P, 0, 0)), 3)
    assert "nosuch" not in broker.broker.logs.topics()


def test_produce_to_internal_topic_is_invalid_topic(client: RawClient, broker: BrokerThread) -> None:
    if "__consumer_offsets" not in broker.broker.logs.topics():  # the group coordinator may have made it
        create_topic(client, "__consumer_offsets")
    rejected(produce(client, "__consumer_offsets", B(P, 0, 0)), 17)


def test_transactional_batch_without_transactional_id_is_refused(client: RawClient) -> None:
    rejected(produce(client, T, with_attribute(B(P, 0, 0), 0x10)), 53)


# --------------------------------------------------------------------------- H. protocol


def test_api_versions_with_unknown_version_answers_v0_body_and_keeps_connection(broker: BrokerThread) -> None:
    with RawClient(broker.bootstrap) as c:
        # ApiVersions v99 with request header v2 (client id, empty tagged fields) and an empty body.
        payload = struct.pack(">hhih", 18, 99, 7, 2) + b"me" + b"\x00" + b"\x00\x00\x00"
        c.send_raw(struct.pack(">i", len(payload)) + payload)
        frame = c.recv_frame()
        correlation, error, count = struct.unpack_from(">ihi", frame, 0)
        assert (correlation, error, count) == (7, 35, 1)
        assert struct.unpack_from(">hhh", frame, 10) == (18, 0, 5)
        assert len(frame) == 16
        assert c.request(ApiVersionsRequest[3](client_software_name="t", client_software_version="1")).error_code == 0


def test_unsupported_version_of_other_api_closes_connection(broker: BrokerThread) -> None:
    with RawClient(broker.bootstrap) as c:
        payload = struct.pack(">hhih", 0, 99, 1, -1) + b"\x00" * 16
        c.send_raw(struct.pack(">i", len(payload)) + payload)
        assert c.is_closed_by_peer()


def _init_pid(client: RawClient, version: int, pid: int = -1, epoch: int = -1) -> Any:
    fields: dict[str, Any] = {"transactional_id": None, "transaction_timeout_ms": 60000}
    if version >= 3:
        fields.update(producer_id=pid, producer_epoch=epoch)
    return client.request(InitProducerIdRequest[version](**fields))


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4, 5])
def test_init_producer_id_gives_fresh_ids_with_epoch_zero(broker: BrokerThread, version: int) -> None:
    with RawClient(broker.bootstrap) as c:
        first, second = _init_pid(c, version), _init_pid(c, version)
    assert (first.error_code, first.producer_epoch) == (0, 0)
    assert (second.error_code, second.producer_epoch) == (0, 0)
    assert first.producer_id != second.producer_id


def test_init_producer_id_ignores_pid_and_epoch_without_transactional_id(broker: BrokerThread) -> None:
    with RawClient(broker.bootstrap) as c:
        response = _init_pid(c, 4, pid=1000, epoch=5)
    assert response.error_code == 0
    assert response.producer_epoch == 0
    assert response.producer_id != 1000


def test_init_producer_id_with_half_set_pair_is_invalid_request(broker: BrokerThread) -> None:
    with RawClient(broker.bootstrap) as c:
        assert _init_pid(c, 4, pid=-1, epoch=3).error_code == 42


def test_pipelined_produce_requests_are_answered_in_order(client: RawClient) -> None:
    ids = [client.send(produce_request(T, 0, B(P, 0, seq))) for seq in range(5)]
    responses = []
    for _ in ids:
        frame = client.recv_frame()
        responses.append(struct.unpack_from(">i", frame, 0)[0])
    assert responses == ids
    assert log_summary(client, T) == [(seq, P, 0, seq, 1) for seq in range(5)]


def test_producer_ids_are_never_reused_across_restarts(start_broker: Any, tmp_path: Any) -> None:
    broker = start_broker(data_dir=tmp_path / "pid")
    with RawClient(broker.bootstrap) as c:
        before = {_init_pid(c, 4).producer_id for _ in range(3)}
    broker.restart(clean=False)
    with RawClient(broker.bootstrap) as c:
        after = {_init_pid(c, 4).producer_id for _ in range(3)}
    assert not before & after
