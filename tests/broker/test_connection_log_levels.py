"""A client that goes away is routine: its disconnect is logged at DEBUG, never above."""

from __future__ import annotations

import logging
import socket
import struct
import time

import pytest

from minikafka.testkit import MiniKafka


@pytest.mark.parametrize("how", ["reset", "close mid-frame"])
def test_a_client_that_goes_away_is_logged_at_debug_only(caplog: pytest.LogCaptureFixture, how: str) -> None:
    caplog.set_level(logging.DEBUG, logger="minikafka")
    with MiniKafka() as kafka:
        sock = socket.create_connection(("127.0.0.1", kafka.port), timeout=5)
        host, port = sock.getsockname()[:2]
        local = f"{host}:{port}"
        # one whole ApiVersions v0 round trip first: the broker has accepted this connection
        body = struct.pack(">hhih", 18, 0, 1, 4) + b"test"
        sock.sendall(struct.pack(">i", len(body)) + body)
        answer = b""
        while len(answer) < 4 or len(answer) < 4 + struct.unpack_from(">i", answer)[0]:
            chunk = sock.recv(65536)
            assert chunk, "the broker closed the connection"
            answer += chunk
        sock.sendall(struct.pack(">i", 100) + b"\x00\x12")  # then a frame cut short
        if how == "reset":
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close sends RST
        sock.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            mine = [r for r in caplog.records if r.name == "minikafka.broker.connection" and local in r.getMessage()]
            if mine:
                break
            time.sleep(0.01)
    assert mine, "the disconnect was not logged at all"
    assert all(r.levelno == logging.DEBUG for r in mine), [(r.levelname, r.getMessage()) for r in mine]
