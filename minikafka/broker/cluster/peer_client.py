"""A broker's connection to another broker, over the Kafka protocol on a real socket.

Followers fetch from leaders and the transaction coordinator sends markers to partition leaders
through these connections, as Kafka's brokers do (``NetworkClient`` under ``ReplicaFetcherThread``
and ``TransactionMarkerChannelManager``). Going through the listener like any client means that
fault rules and isolation apply to inter-broker traffic too, and that brokers could run in
separate processes. Requests are pipelined: each waits for the answer with its correlation id; a
lost connection fails every request in flight with :class:`PeerUnavailable` and the next request
connects again.

Answers are read with the brokers' own :class:`~minikafka.protocol.framing.FrameReader`: a
1 MB Fetch answer is received into a buffer of its own and handed over as it is, not copied
through a ``StreamReader``'s buffer and out again. :meth:`PeerClient.send` takes a request's own
encoder and decoder (the replica fetcher's, :mod:`minikafka.protocol.replica_fetch`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from minikafka.protocol.framing import FrameReader

#: The largest answer accepted: a Fetch answer is bounded by replica.fetch.response.max.bytes, but
#: a first batch larger than that comes whole; FrameReader grows a frame's buffer only as bytes arrive.
MAX_ANSWER_BYTES = 1 << 30

Decoder = Callable[[bytes | memoryview], Any]


class PeerUnavailable(ConnectionError):
    """The other broker could not be reached, or the connection broke before the answer."""


class PeerClient:
    """Requests from one broker to one other broker (see the module docstring)."""

    def __init__(self, host: str, port: int, client_id: str, *, connect_timeout: float = 5.0) -> None:
        self.host, self.port, self.client_id = host, port, client_id
        self.connect_timeout = connect_timeout
        self._transport: asyncio.Transport | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._pending: dict[int, tuple[asyncio.Future[Any], Decoder]] = {}
        self._next_correlation = 0
        self._connecting: asyncio.Lock = asyncio.Lock()

    @property
    def connected(self) -> bool:
        return self._transport is not None and not self._transport.is_closing()

    async def request(self, request: Any, timeout: float) -> Any:
        """Send a kafka-python request object and return kafka-python's decoding of the answer."""

        def encode(correlation_id: int) -> bytes:
            request.with_header(correlation_id=correlation_id, client_id=self.client_id)
            return bytes(request.encode(framed=True, header=True))

        def decode(frame: bytes | memoryview) -> Any:
            return request.header.get_response_class().decode(bytes(frame), header=True)

        return await self.send(encode, decode, timeout)

    async def send(self, encode: Callable[[int], bytes], decode: Decoder, timeout: float) -> Any:
        """Send the frame ``encode`` writes for a correlation id, and return ``decode`` of the
        answer's frame (its response header included)."""
        transport = await self._connection()
        self._next_correlation = (self._next_correlation + 1) & 0x7FFFFFFF
        correlation_id = self._next_correlation
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[correlation_id] = (answer, decode)
        try:
            transport.write(encode(correlation_id))
            return await asyncio.wait_for(answer, timeout)
        except PeerUnavailable:
            # Python 3.11's wait_for drops a cancellation that arrives as the answer fails (the
            # connection closing while this broker stops): the caller is being cancelled, say so.
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise asyncio.CancelledError from None
            raise
        finally:
            self._pending.pop(correlation_id, None)

    async def _connection(self) -> asyncio.Transport:
        async with self._connecting:
            if self._transport is not None and not self._transport.is_closing():
                return self._transport
            loop = asyncio.get_running_loop()
            try:
                transport, reader = await asyncio.wait_for(
                    loop.create_connection(lambda: FrameReader(MAX_ANSWER_BYTES, trusted=True), self.host, self.port),
                    self.connect_timeout)
            except (OSError, TimeoutError) as exc:
                raise PeerUnavailable(f"cannot connect to {self.host}:{self.port}: {exc}") from exc
            self._transport = transport
            self._reader_task = asyncio.create_task(self._read_answers(reader, transport),
                                                    name=f"peer-client-{self.host}:{self.port}")
            return transport

    async def _read_answers(self, reader: FrameReader, transport: asyncio.Transport) -> None:
        reason = "connection closed by the other broker"
        try:
            while True:
                await reader.wait()
                if reader.error is not None:
                    raise reader.error
                if reader.at_eof():
                    break
                while reader.frames:
                    self._answer(reader.pop())
        except Exception as exc:  # an answer that does not decode: the connection cannot be trusted
            reason = f"bad answer: {exc}"
        finally:
            transport.close()
            if self._transport is transport:
                self._transport = None
            for answer, _ in list(self._pending.values()):
                if not answer.done():
                    answer.set_exception(PeerUnavailable(f"{self.host}:{self.port}: {reason}"))

    def _answer(self, frame: bytes | memoryview) -> None:
        correlation_id = int.from_bytes(frame[:4], "big", signed=True)
        waiting = self._pending.get(correlation_id)
        if waiting is None:  # its request timed out: the answer is dropped
            return
        answer, decode = waiting
        if not answer.done():
            answer.set_result(decode(frame))

    async def close(self) -> None:
        """Drop the connection and wait for the answer reader to end. Aborted, not closed: a
        close waits to send what is still buffered, which a peer that stopped reading (wedged,
        or cut off by the test kit's isolation) never takes, and nobody waits for those answers."""
        if self._transport is not None:
            self._transport.abort()
        if self._reader_task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader_task
        self._transport = None
        self._reader_task = None
