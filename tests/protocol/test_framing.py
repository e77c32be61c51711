"""Cutting the byte stream of a connection into frames (minikafka.protocol.framing.FrameReader).

The reader is fed the way the event loop feeds a BufferedProtocol: it hands out a buffer, the
bytes of one read are copied into it, and it is told how many arrived. The tests at the end run
the same cases through a real broker over a real socket.
"""

from __future__ import annotations

import logging
import socket
import struct
import time

import pytest
from kafka.protocol.metadata import ApiVersionsRequest

from minikafka.broker.embedded import BrokerThread
from minikafka.protocol.framing import FIRST_FRAME_BUFFER, READ_BUFFER, FrameReader, FrameTooLarge
from tests.kafka_wire import RawClient, build_batch, partition_response, produce_request
from tests.scenario_helpers import create_topic


def framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def read_into(reader: FrameReader, data: bytes) -> int:
    """Deliver ``data`` as one read (or as few reads as the reader's buffers allow); returns the reads."""
    reads = 0
    while data:
        buf = reader.get_buffer(-1)
        assert len(buf) > 0
        n = min(len(buf), len(data))
        buf[:n] = data[:n]
        reader.buffer_updated(n)
        data = data[n:]
        reads += 1
    return reads


def taken(reader: FrameReader) -> list[bytes]:
    out = []
    while reader.frames:
        out.append(bytes(reader.pop()))
    return out


PAYLOADS = [b"", b"a" * 7, bytes(range(256)) * 3, b"z"]
STREAM = b"".join(framed(p) for p in PAYLOADS)


def test_frames_split_across_two_reads_at_every_byte() -> None:
    for cut in range(len(STREAM) + 1):
        reader = FrameReader(1 << 20)
        read_into(reader, STREAM[:cut])
        read_into(reader, STREAM[cut:])
        assert taken(reader) == PAYLOADS, f"split at byte {cut}"
        assert not reader.partial and reader.buffered == 0


def test_frames_delivered_one_byte_per_read() -> None:
    reader = FrameReader(1 << 20)
    seen = []
    for i in range(len(STREAM)):
        read_into(reader, STREAM[i : i + 1])
        seen.extend(taken(reader))
    assert seen == PAYLOADS


def test_every_complete_frame_of_one_read_is_queued_at_once() -> None:
    payloads = [b"request %d" % i for i in range(READ_BUFFER // 20)]
    data = b"".join(framed(p) for p in payloads)
    assert len(data) < READ_BUFFER  # one read
    reader = FrameReader(1 << 20)
    assert read_into(reader, data) == 1
    assert len(reader.frames) == len(payloads)
    assert taken(reader) == payloads


def test_a_frame_larger_than_the_read_buffer_arrives_whole_behind_and_before_small_ones() -> None:
    big = bytes(range(251)) * (3 * READ_BUFFER // 251)
    assert len(big) > READ_BUFFER
    data = framed(b"before") + framed(big) + framed(b"after")
    for chunk in (1000, 4096, READ_BUFFER, len(data)):
        reader = FrameReader(1 << 30)
        seen = []
        for start in range(0, len(data), chunk):
            read_into(reader, data[start : start + chunk])
            seen.extend(taken(reader))
        assert seen == [b"before", big, b"after"], f"reads of {chunk} bytes"


def test_an_announced_size_alone_does_not_reserve_the_frame() -> None:
    reader = FrameReader(1 << 30)
    read_into(reader, struct.pack(">i", 500 << 20) + b"x" * 1000)
    assert reader.partial and not reader.frames
    assert len(reader.get_buffer(-1)) <= FIRST_FRAME_BUFFER  # not 500 MiB


def test_a_trusted_reader_reuses_a_large_frame_buffer_only_once_nothing_refers_to_it() -> None:
    reader = FrameReader(1 << 30, trusted=True)
    big, smaller = b"a" * (4 * READ_BUFFER), b"b" * (2 * READ_BUFFER)
    first = framed(big) + framed(smaller)
    read_into(reader, first[: len(first) - 10])  # the second frame is not whole yet
    held = reader.pop()
    read_into(reader, first[len(first) - 10 :])
    second = reader.pop()
    assert (bytes(held), bytes(second)) == (big, smaller)
    assert second.obj is not held.obj  # the first frame was still in use: a buffer of its own
    buffer = id(second.obj)  # (an id: a reference here would keep it in use)
    del held, second
    read_into(reader, framed(smaller) + framed(b"c" * 100))  # the next frame's bytes stay out of it
    again = reader.pop()
    assert id(again.obj) == buffer and bytes(again) == smaller
    assert taken(reader) == [b"c" * 100]


def test_a_frame_above_the_limit_stops_the_cutting() -> None:
    reader = FrameReader(100)
    read_into(reader, framed(b"ok") + framed(b"x" * 101) + framed(b"never"))
    assert taken(reader) == [b"ok"]
    assert isinstance(reader.error, FrameTooLarge)
    assert "101" in str(reader.error)


def test_a_peer_gone_mid_frame_leaves_a_partial_frame_and_nothing_queued() -> None:
    reader = FrameReader(1 << 20)
    read_into(reader, framed(b"whole") + framed(b"half of it")[:7])
    reader.eof_received()
    assert taken(reader) == [b"whole"]
    assert reader.partial and reader.at_eof()


# ----------------------------------------------------------------------------- through a broker


def test_broker_answers_a_request_sent_one_byte_per_write_and_many_in_one_write(broker: BrokerThread) -> None:
    with RawClient(broker.bootstrap) as c:
        create_topic(c, "framing")
        c.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        request = produce_request("framing", 0, build_batch(value=b"one byte at a time"))
        request.with_header(correlation_id=7, client_id="framing")
        for byte in bytes(request.encode(framed=True, header=True)):
            c.sock.sendall(bytes([byte]))
        assert partition_response(c.recv(request)).error_code == 0
        requests = []
        for i in range(300):
            r = ApiVersionsRequest[3](client_software_name="t", client_software_version="1")
            r.with_header(correlation_id=1000 + i, client_id="framing")
            requests.append(r)
        c.sock.sendall(b"".join(bytes(r.encode(framed=True, header=True)) for r in requests))
        for r in requests:
            frame = c.recv_frame()
            assert struct.unpack_from(">i", frame)[0] == r.header.correlation_id  # in order
        big = build_batch(value=b"v" * (3 * READ_BUFFER))
        assert partition_response(c.request(produce_request("framing", 0, big))).base_offset == 1


def test_broker_survives_a_client_that_disconnects_mid_frame(broker: BrokerThread,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="minikafka.broker.connection")
    with RawClient(broker.bootstrap) as c:
        create_topic(c, "framing")
    for cut in (2, 30, 200):
        request = produce_request("framing", 0, build_batch(value=b"p" * 300))
        request.with_header(correlation_id=1, client_id="gone")
        with socket.create_connection(("127.0.0.1", broker.port)) as s:
            s.sendall(bytes(request.encode(framed=True, header=True))[:cut])
    with RawClient(broker.bootstrap) as c:
        r = produce_request("framing", 0, build_batch(value=b"after"))
        assert partition_response(c.request(r)).base_offset == 0  # none of the halves was appended
    deadline = time.monotonic() + 5
    while sum("in the middle of a frame" in m for m in caplog.messages) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sum("in the middle of a frame" in m for m in caplog.messages) == 3
