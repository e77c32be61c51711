"""One client connection: frames in, responses out, strictly in arrival order.

Kafka mutes a connection while one of its requests is in progress, so pipelined requests are
handled one after another (reference §0.1 rule 9). Here the same falls out of a single loop per
connection: read a frame, handle it to completion, queue its response, read the next.
Different connections run concurrently on the event loop and take turns, one request each.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from typing import TYPE_CHECKING, Any

from minikafka.broker.context import CloseConnection, RequestContext
from minikafka.protocol.framing import FrameTooLarge, frame, read_frame
from minikafka.protocol.headers import MalformedRequest, RequestHeader, parse_request_header, response_header
from minikafka.protocol.nulls import check_request_nulls

if TYPE_CHECKING:
    from minikafka.broker.listeners import Listener
    from minikafka.broker.sasl import SaslSession
    from minikafka.broker.server import Broker

log = logging.getLogger("minikafka.connection")

API_VERSIONS_KEY = 18
#: Pause reading when this many response bytes wait for a slow reader.
WRITE_HIGH_WATER = 4 * 1024 * 1024


class Connection:
    def __init__(self, broker: Broker, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 listener: Listener | None = None) -> None:
        self.broker = broker
        self.listener = listener
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        sock = writer.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        self.closed = False
        self.in_request = False
        #: monotonic time of the last complete request or response; the idle sweeper reads it
        self.last_active = time.monotonic()
        self.sasl: SaslSession | None = None
        if listener is not None and listener.uses_sasl:
            from minikafka.broker.sasl import SaslSession

            self.sasl = SaslSession(listener, broker.sasl_users)

    async def run(self) -> None:
        broker = self.broker
        max_bytes = broker.config.get("socket.request.max.bytes")
        # Kafka reads at most sasl.server.max.receive.size bytes per frame before authentication.
        pre_auth_max = min(max_bytes, broker.config.get("sasl.server.max.receive.size"))
        try:
            while not self.closed:
                limit = pre_auth_max if self.sasl is not None and not self.sasl.complete else max_bytes
                try:
                    payload = await read_frame(self.reader, limit)
                except FrameTooLarge as exc:
                    log.warning("closing connection from %s: %s", self.peer, exc)
                    return
                except asyncio.IncompleteReadError:
                    log.debug("connection from %s closed in the middle of a frame", self.peer)
                    return
                if payload is None:
                    return
                self.last_active = time.monotonic()
                self.in_request = True
                try:
                    keep_open = await self.handle_frame(payload)
                finally:
                    self.in_request = False
                if not keep_open:
                    return
                if self.writer.transport.get_write_buffer_size() > WRITE_HIGH_WATER:
                    await self.writer.drain()
                else:
                    # One request per connection per turn of the event loop: a client that
                    # pipelines must not hold the loop while other connections wait (Kafka
                    # queues requests from all connections in one FIFO).
                    await asyncio.sleep(0)
        except ConnectionError as exc:  # reset by peer, broken pipe: a client went away, which is routine
            log.debug("connection from %s ended: %s", self.peer, exc)
        except OSError as exc:
            log.info("connection from %s ended: %s", self.peer, exc)
        finally:
            self.close()

    async def handle_frame(self, payload: bytes) -> bool:
        """Handle one request; False when the connection must be closed."""
        if self.sasl is not None and not self.sasl.complete:
            verdict = await self.sasl.screen(self, payload)  # before authentication: Kafka's SASL sequence
            if verdict is not None:
                return verdict
        broker = self.broker
        table = broker.api_table
        try:
            header = parse_request_header(payload, broker.request_is_flexible)
        except MalformedRequest as exc:
            log.warning("closing connection from %s: malformed request header: %s", self.peer, exc)
            return False
        spec = table.get(header.api_key)
        if spec is None:
            log.warning(
                "closing connection from %s: unknown API key %d (client %r)",
                self.peer,
                header.api_key,
                header.client_id,
            )
            return False
        started = time.perf_counter()
        if not spec.supports(header.api_version):
            if header.api_key == API_VERSIONS_KEY:
                self.send(header.correlation_id, False, broker.unsupported_api_versions_body())
                return True
            log.warning(
                "closing connection from %s: unsupported version %d of %s (client %r)",
                self.peer,
                header.api_version,
                spec.name,
                header.client_id,
            )
            return False
        try:
            request = spec.request.decode(memoryview(payload)[header.size :], version=header.api_version)
            check_request_nulls(spec.request, request, header.api_version)  # Kafka's parser refuses these
        except Exception as exc:  # the codec raises assorted errors on garbage
            log.warning(
                "closing connection from %s: cannot decode %s v%d: %s: %s",
                self.peer,
                spec.name,
                header.api_version,
                type(exc).__name__,
                exc,
            )
            return False
        ctx = RequestContext(broker, self, header)
        try:
            response = await broker.dispatch(spec, ctx, request)
        except CloseConnection as exc:
            log.info("closing connection from %s after %s: %s", self.peer, spec.name, exc)
            return False
        except Exception:
            log.exception("unexpected error handling %s v%d from %s", spec.name, header.api_version, self.peer)
            return False
        if response is not None:
            self.answer(header, response)
        broker.metrics.observe_request(spec.name, time.perf_counter() - started, len(payload) + 4)
        return True

    def answer(self, header: RequestHeader, response: Any) -> None:
        """Queue ``response`` to the request ``header`` describes, in that request's version.

        Flexible requests get response header v1, except ApiVersions, whose response header is
        always v0 (KIP-511).
        """
        flexible = header.flexible and header.api_key != API_VERSIONS_KEY
        self.send(header.correlation_id, flexible, response.encode(version=header.api_version))

    def send(self, correlation_id: int, flexible: bool, body: bytes | bytearray) -> None:
        if self.closed:
            return
        data = frame([response_header(correlation_id, flexible), body])
        self.broker.metrics.bytes_out += len(data)
        self.writer.write(data)
        self.last_active = time.monotonic()

    def write_raw(self, data: bytes) -> None:
        """Bytes without a response header (SASL tokens after SaslHandshake v0)."""
        if not self.closed:
            self.writer.write(data)
            self.last_active = time.monotonic()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self.writer.close()
        except Exception:  # transport already gone
            pass
