"""One client connection: frames in, responses out, strictly in arrival order.

Kafka mutes a connection while one of its requests is in progress, so pipelined requests are
handled one after another (docs/semantics.md#request-order). Here the same falls out of a single loop per
connection: take a frame, handle it to completion, queue its response, take the next.
Different connections run concurrently on the event loop and take turns, one request each.

The answers to the frames of one read go out together, in one write per connection, when the
last of them is handled; a handler that has to wait (a long poll, an fsync, a fault's delay)
sends the answers queued before it first, so no answer waits for a later request.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import socket
import time
import types
from collections.abc import Coroutine, Generator
from typing import TYPE_CHECKING, Any

from minikafka.broker.context import CloseConnection, RequestContext
from minikafka.protocol import fast
from minikafka.protocol.apis import ApiKey
from minikafka.protocol.framing import FrameReader
from minikafka.protocol.headers import MalformedRequest, RequestHeader, parse_request_header

if TYPE_CHECKING:
    from minikafka.broker.dispatch import ApiSpec
    from minikafka.broker.listeners import Listener
    from minikafka.broker.sasl import SaslSession
    from minikafka.broker.server import Broker

log = logging.getLogger(__name__)

#: read on every answer: a module constant, cheaper than the enum's attribute
API_VERSIONS_KEY = ApiKey.API_VERSIONS
#: Pause reading when this many response bytes wait for a slow reader.
WRITE_HIGH_WATER = 4 * 1024 * 1024
#: Queued answers are written at once when they reach this many bytes, without waiting for the
#: rest of their read's requests.
FLUSH_BYTES = 256 * 1024


class Connection:
    def __init__(self, broker: Broker, reader: FrameReader, transport: asyncio.Transport,
                 listener: Listener | None = None) -> None:
        self.broker = broker
        self.listener = listener
        self.reader = reader
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        self.closed = False
        self.in_request = False
        self.request_started = 0.0  # monotonic time the request being handled was read
        #: monotonic time of the last complete request or response; the idle sweeper reads it
        self.last_active = time.monotonic()
        #: answers not yet handed to the transport, in request order
        self._out: list[bytes | bytearray | memoryview] = []
        self._out_bytes = 0
        #: whether an (API key, version) uses header v2: the broker's answer, remembered (it never changes)
        self._flexible_of = functools.cache(broker.request_is_flexible)
        #: runs this connection's handlers, one at a time (see _run_handlers); None until needed
        self._runner: Generator[Any, Any, None] | None = None
        self.sasl: SaslSession | None = None
        if listener is not None and listener.uses_sasl:
            from minikafka.broker.sasl import SaslSession

            assert broker.sasl_users is not None  # loaded at start when a listener uses SASL
            self.sasl = SaslSession(listener, broker.sasl_users)

    async def run(self) -> None:
        broker = self.broker
        reader = self.reader
        max_bytes = broker.config.get("socket.request.max.bytes")
        # Kafka reads at most sasl.server.max.receive.size bytes per frame before authentication.
        pre_auth_max = min(max_bytes, broker.config.get("sasl.server.max.receive.size"))
        try:
            while not self.closed:
                reader.limit = pre_auth_max if self.sasl is not None and not self.sasl.complete else max_bytes
                if not reader.frames:
                    await reader.wait()
                    if not reader.frames:
                        if reader.error is not None:
                            log.warning("closing connection from %s: %s", self.peer, reader.error)
                        elif reader.partial:
                            log.debug("connection from %s closed in the middle of a frame", self.peer)
                        return
                payload = reader.pop()
                self.last_active = self.request_started = time.monotonic()
                self.in_request = True
                try:
                    outcome = self.handle_frame(payload)
                    keep_open = outcome if outcome.__class__ is bool else await outcome  # type: ignore[misc]
                finally:
                    self.in_request = False
                if not keep_open:
                    return
                if not reader.frames or self._out_bytes >= FLUSH_BYTES:
                    self.flush()  # the last request read so far is done: the answers go out in one write
                if self.transport.get_write_buffer_size() > WRITE_HIGH_WATER:
                    await reader.drained()
                else:
                    # One request per connection per turn of the event loop: a client that
                    # pipelines must not hold the loop while other connections wait (Kafka
                    # queues requests from all connections in one FIFO).
                    await _next_turn()
        except ConnectionError as exc:  # reset by peer, broken pipe: a client went away, which is routine
            log.debug("connection from %s ended: %s", self.peer, exc)
        except OSError as exc:
            log.info("connection from %s ended: %s", self.peer, exc)
        finally:
            self.close()

    def handle_frame(self, payload: bytes | memoryview) -> bool | Coroutine[Any, Any, bool]:
        """Handle one request: whether the connection stays open, or, for a request that has to
        wait (a handler that awaits, SASL's screening), a coroutine that tells it when done.

        Most handlers finish without waiting: their coroutine is stepped once here, by hand, and
        answered at once, without a task step or a coroutine of ours around it. One that does
        wait first sends the answers queued before it."""
        if self.sasl is not None and not self.sasl.complete:
            return self._screened(bytes(payload))
        return self._handle(payload)

    def _handle(self, payload: bytes | memoryview) -> bool | Coroutine[Any, Any, bool]:
        broker = self.broker
        try:
            header = parse_request_header(payload, self._flexible_of)
        except MalformedRequest as exc:
            log.warning("closing connection from %s: malformed request header: %s", self.peer, exc)
            return False
        spec = broker.api_table.get(header.api_key)
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
            request = fast.decode_request(spec, header.api_version, memoryview(payload)[header.size :])
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
        ctx = RequestContext(broker.services, self, header)
        interceptor = broker.interceptor
        handling = spec.handler(ctx, request) if interceptor is None else interceptor.dispatch(spec, ctx, request)
        runner = self._runner
        if runner is None:
            runner = self._runner = _run_handlers()
            runner.send(None)
        try:
            step = runner.send(handling)
        except BaseException as exc:
            self._runner = None  # the handler's error ended the runner too
            if not isinstance(exc, Exception):
                raise
            return self._failed(spec, header, exc)
        if step.__class__ is _Done:
            return self._answered(spec, header, step.response, started, len(payload))
        self.flush()
        return self._finish(runner, step, spec, header, started, len(payload))

    async def _screened(self, payload: bytes) -> bool:
        """A frame before SASL authentication completes: Kafka's SASL sequence screens it first."""
        assert self.sasl is not None
        verdict = await self.sasl.screen(self, payload)
        if verdict is not None:
            return verdict
        outcome = self._handle(payload)
        return outcome if outcome.__class__ is bool else await outcome  # type: ignore[misc]

    async def _finish(self, runner: Generator[Any, Any, None], waiting_on: Any, spec: ApiSpec,
                      header: RequestHeader, started: float, size: int) -> bool:
        """Finish a handler that had to wait, inside the connection's task."""
        try:
            response = await _resume(runner, waiting_on)
        except BaseException as exc:
            self._runner = None
            if not isinstance(exc, Exception):
                raise
            return self._failed(spec, header, exc)
        return self._answered(spec, header, response, started, size)

    def _answered(self, spec: ApiSpec, header: RequestHeader, response: Any, started: float, size: int) -> bool:
        if response is not None:
            self.answer(header, response)
        self.broker.metrics.observe_request(spec.name, time.perf_counter() - started, size + 4)
        return True

    def _failed(self, spec: ApiSpec, header: RequestHeader, exc: Exception) -> bool:
        """A handler that raised: Kafka closes the connection (logged as routine when asked for)."""
        if isinstance(exc, CloseConnection):
            log.info("closing connection from %s after %s: %s", self.peer, spec.name, exc)
        else:
            log.error("unexpected error handling %s v%d from %s", spec.name, header.api_version, self.peer,
                      exc_info=exc)
        return False

    def answer(self, header: RequestHeader, response: Any) -> None:
        """Queue ``response`` to the request ``header`` describes, in that request's version.

        Flexible requests get response header v1, except ApiVersions, whose response header is
        always v0 (KIP-511).
        """
        flexible = header.flexible and header.api_key != API_VERSIONS_KEY
        parts = fast.encode_response(header.api_key, header.api_version, response)
        if parts is None:
            self.send(header.correlation_id, flexible, response.encode(version=header.api_version))
        else:
            self.send_parts(header.correlation_id, flexible, parts)

    def send(self, correlation_id: int, flexible: bool, body: bytes | bytearray) -> None:
        self.send_parts(correlation_id, flexible, [body])

    def send_parts(self, correlation_id: int, flexible: bool, body: list[bytes | bytearray | memoryview]) -> None:
        """Queue an answer whose body is ``body`` joined (parts are not copied)."""
        if self.closed:
            return
        size = sum(map(len, body))
        head = fast.frame_head(size, correlation_id, flexible)
        self._out.append(head)
        self._out.extend(body)
        self._out_bytes += len(head) + size
        self.broker.metrics.bytes_out += len(head) + size
        self.last_active = time.monotonic()

    def write_raw(self, data: bytes) -> None:
        """Bytes without a response header (SASL tokens after SaslHandshake v0)."""
        if not self.closed:
            self._out.append(data)
            self._out_bytes += len(data)
            self.last_active = time.monotonic()

    def flush(self) -> None:
        """Hand the queued answers to the transport in one call."""
        if self._out:
            out = self._out
            self._out = []
            self._out_bytes = 0
            if not self.transport.is_closing():
                self.transport.writelines(out)

    def close(self) -> None:
        if self.closed:
            return
        self.flush()
        self.closed = True
        try:
            self.transport.close()
        except Exception:  # transport already gone
            pass


@types.coroutine
def _next_turn() -> Generator[None, None, None]:
    """Let the event loop run everything else that is ready, then come back: what
    ``asyncio.sleep(0)`` does, without its coroutine around the bare yield."""
    yield


class _Done:
    """What the handler runner yields when a handler has returned: its answer (or None)."""

    __slots__ = ("response",)

    def __init__(self, response: Any) -> None:
        self.response = response


@types.coroutine
def _run_handlers() -> Generator[Any, Any, None]:
    """Run the handler coroutines sent in, one after another, each to its end or its first wait.

    A coroutine that returns ends in StopIteration, and creating and catching that exception
    for every request costs more than the rest of a small handler's frame. Run by ``yield
    from`` inside this generator, the handler's return value arrives without one: the runner
    yields it as :class:`_Done`. Anything else it yields is what the handler waits on (a
    future), for the connection's task to wait on (:func:`_resume`). A handler's exception ends
    the runner with it (the connection starts another). The answer is not kept here between
    requests: the yield hands it over."""
    handling = yield
    while True:
        handling = yield _Done((yield from handling))


@types.coroutine
def _resume(runner: Generator[Any, Any, None], waiting_on: Any) -> Generator[Any, Any, Any]:
    """Finish a handler the runner started and that waits on ``waiting_on``, inside the current
    task: pass what it waits on to the task, and the task's results (or cancellation) back to
    it, until the runner reports its answer."""
    while True:
        try:
            result = yield waiting_on
        except BaseException as exc:  # noqa: B036 - cancellation and errors go to the handler
            step = runner.throw(exc)
        else:
            step = runner.send(result)
        if step.__class__ is _Done:
            return step.response
        waiting_on = step
