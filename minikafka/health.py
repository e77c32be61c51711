"""``minikafka ping``'s round trip: ApiVersions v0 by hand, one broker at a time.

No asyncio, no Kafka client library: a container's health check runs it every few seconds, so it
costs about 20 ms. A cluster's health check asks every broker the address file names.
"""

from __future__ import annotations

import socket
import ssl
import struct

#: ApiVersions (key 18) v0 with this correlation id ("mk") and client id
CORRELATION_ID = 0x6D6B
CLIENT_ID = b"minikafka-ping"


def ask(host: str, port: int, tls: bool, timeout: float) -> int:
    """How many APIs the broker at ``host:port`` answers it serves; raises OSError (unreachable,
    closed, timed out) or ValueError (the answer is not an ApiVersions answer) with the reason."""
    body = struct.pack(">hhih", 18, 0, CORRELATION_ID, len(CLIENT_ID)) + CLIENT_ID
    with socket.create_connection((host.strip("[]"), port), timeout=timeout) as plain:
        sock = _tls_without_verification(plain) if tls else plain
        sock.settimeout(timeout)
        sock.sendall(struct.pack(">i", len(body)) + body)
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack_from(">i", data)[0]:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            data += chunk
    if len(data) < 14:
        raise ValueError("answer too short to be ApiVersions")
    got_id, error_code, count = struct.unpack_from(">ihi", data, 4)
    if got_id != CORRELATION_ID or error_code != 0 or count <= 0:
        raise ValueError(f"bad ApiVersions answer (correlation {got_id}, error {error_code}, {count} APIs)")
    return int(count)


def _tls_without_verification(sock: socket.socket) -> socket.socket:
    """A health check of a broker whose only listeners use TLS: it asks whether the broker answers,
    not who it is, so the certificate is not checked (a listener that requires client
    certificates cannot be pinged)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context.wrap_socket(sock)
