"""A broker's connection to another broker, over the Kafka protocol on a real socket.

Followers fetch from leaders and the transaction coordinator sends markers to partition leaders
through these connections, as Kafka's brokers do (``NetworkClient`` under ``ReplicaFetcherThread``
and ``TransactionMarkerChannelManager``). Going through the listener like any client means that
fault rules and isolation apply to inter-broker traffic too, and that brokers could run in
separate processes. Requests are pipelined: each waits for the answer with its correlation id; a
lost connection fails every request in flight with :class:`PeerUnavailable` and the next request
connects again.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from typing import Any

_SIZE = struct.Struct(">i")


class PeerUnavailable(ConnectionError):
    """The other broker could not be reached, or the connection broke before the answer."""


class PeerClient:
    """Requests from one broker to one other broker (see the module docstring)."""

    def __init__(self, host: str, port: int, client_id: str, *, connect_timeout: float = 5.0) -> None:
        self.host, self.port, self.client_id = host, port, client_id
        self.connect_timeout = connect_timeout
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._pending: dict[int, tuple[asyncio.Future[Any], Any]] = {}
        self._next_correlation = 0
        self._connecting: asyncio.Lock = asyncio.Lock()

    @property
    def connected(self) -> bool:
        return self._writer is not None and not self._writer.is_closing()

    async def request(self, request: Any, timeout: float) -> Any:
        """Send a kafka-python request object and return its decoded response."""
        writer = await self._connection()
        self._next_correlation = (self._next_correlation + 1) & 0x7FFFFFFF
        correlation_id = self._next_correlation
        request.with_header(correlation_id=correlation_id, client_id=self.client_id)
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[correlation_id] = (answer, request.header.get_response_class())
        try:
            writer.write(bytes(request.encode(framed=True, header=True)))
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

    async def _connection(self) -> asyncio.StreamWriter:
        async with self._connecting:
            if self._writer is not None and not self._writer.is_closing():
                return self._writer
            try:
                reader, writer = await asyncio.wait_for(asyncio.open_connection(self.host, self.port),
                                                        self.connect_timeout)
            except (OSError, TimeoutError) as exc:
                raise PeerUnavailable(f"cannot connect to {self.host}:{self.port}: {exc}") from exc
            self._writer = writer
            self._reader_task = asyncio.create_task(self._read_answers(reader, writer))
            return writer

    async def _read_answers(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        reason = "connection closed by the other broker"
        try:
            while True:
                size = _SIZE.unpack(await reader.readexactly(4))[0]
                frame = await reader.readexactly(size)
                correlation_id = _SIZE.unpack_from(frame)[0]
                waiting = self._pending.get(correlation_id)
                if waiting is None:  # its request timed out: the answer is dropped
                    continue
                answer, response_class = waiting
                if not answer.done():
                    answer.set_result(response_class.decode(frame, header=True))
        except (asyncio.IncompleteReadError, OSError) as exc:
            reason = f"{reason} ({exc.__class__.__name__})"
        except Exception as exc:  # an answer that does not decode: the connection cannot be trusted
            reason = f"undecodable answer: {exc}"
        finally:
            writer.close()
            if self._writer is writer:
                self._writer = None
            for answer, _ in list(self._pending.values()):
                if not answer.done():
                    answer.set_exception(PeerUnavailable(f"{self.host}:{self.port}: {reason}"))

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        if self._reader_task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader_task
        self._writer = None
        self._reader_task = None
