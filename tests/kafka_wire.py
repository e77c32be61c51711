"""Test helpers that speak the Kafka protocol over a real socket, byte for byte.

Scenario tests build their batches with kafka-python's record batch builder and send raw
requests, so that they control every field a client would (sequence, epoch, acks, version)
and see exactly what the broker answers.
"""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

from kafka.protocol.producer import ProduceRequest

from tests.batches import batch_of_records


def build_batch(
    producer_id: int = -1,
    epoch: int = -1,
    base_sequence: int = -1,
    count: int = 1,
    value: bytes = b"v",
    key: bytes | None = None,
    timestamp: int | None = None,
    codec: str = "none",
    headers: list[tuple[str, bytes]] | None = None,
    values: list[bytes] | None = None,
) -> bytearray:
    """One RecordBatch v2 as a producer would send it (baseOffset 0)."""
    ts = int(time.time() * 1000) if timestamp is None else timestamp
    vals = values if values is not None else [value] * count
    return batch_of_records([(key, v, ts + i, headers or []) for i, v in enumerate(vals)], codec,
                            producer_id, epoch, base_sequence)


class RawClient:
    """A blocking Kafka protocol connection for tests."""

    def __init__(self, bootstrap: str, client_id: str = "minikafka-tests", timeout: float = 10.0) -> None:
        host, _, port = bootstrap.rpartition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.client_id = client_id
        self._correlation = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, request: Any, correlation_id: int | None = None) -> int:
        if correlation_id is None:
            self._correlation += 1
            correlation_id = self._correlation
        request.with_header(correlation_id=correlation_id, client_id=self.client_id)
        self.sock.sendall(bytes(request.encode(framed=True, header=True)))
        return correlation_id

    def send_raw(self, payload: bytes) -> None:
        self.sock.sendall(payload)

    def recv_frame(self) -> bytes:
        size = struct.unpack(">i", self._recv_exact(4))[0]
        return self._recv_exact(size)

    def _recv_exact(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(n)
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def recv(self, request: Any) -> Any:
        """Read and decode the response to ``request`` (sent earlier on this connection)."""
        frame = self.recv_frame()
        resp_class = request.header.get_response_class()
        return resp_class.decode(frame, header=True)

    def request(self, request: Any) -> Any:
        self.send(request)
        return self.recv(request)

    def is_closed_by_peer(self, wait: float = 2.0) -> bool:
        """True when the broker closed this connection (EOF) within ``wait`` seconds."""
        self.sock.settimeout(wait)
        try:
            return self.sock.recv(1) == b""
        except TimeoutError:
            return False
        except ConnectionError:
            return True


def produce_request(
    topic: str,
    partition: int,
    batch: bytes | None,
    acks: int = -1,
    version: int = 9,
    transactional_id: str | None = None,
) -> Any:
    Request = ProduceRequest[version]
    Topic = Request.TopicProduceData
    return Request(
        transactional_id=transactional_id,
        acks=acks,
        timeout_ms=5000,
        topic_data=[Topic(name=topic, partition_data=[Topic.PartitionProduceData(index=partition, records=batch)])],
    )


def partition_response(response: Any) -> Any:
    """The single partition response of a single-partition Produce."""
    return response.responses[0].partition_responses[0]
