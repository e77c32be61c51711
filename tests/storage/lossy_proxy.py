"""A loopback TCP proxy that loses chosen responses after the broker has acted on the request.

The broker advertises the proxy's port, so clients reach it for every connection. The proxy
forwards frames both ways and, when a response matches a rule, closes the client's
connection instead of delivering it: the broker appended the batch, the client never heard.
That is the failure idempotence exists for.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field


@dataclass
class DropRule:
    """Lose the response of matching requests: ``api_key`` and a predicate on the match count."""

    api_key: int
    should_drop: Callable[[int], bool]  # called with the 1-based count of matching responses
    seen: int = 0
    dropped: int = 0


@dataclass
class LossyProxy:
    target_port: int
    rules: list[DropRule] = field(default_factory=list)
    port: int = 0

    def __post_init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="lossy-proxy")
        self._server: asyncio.base_events.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._lock = threading.Lock()

    @staticmethod
    def reserve_port() -> int:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return int(s.getsockname()[1])

    def start(self, port: int = 0) -> LossyProxy:
        self._thread.start()
        fut: Future[int] = asyncio.run_coroutine_threadsafe(self._start(port), self._loop)
        self.port = fut.result(10)
        return self

    async def _start(self, port: int) -> int:
        self._server = await asyncio.start_server(self._on_client, "127.0.0.1", port, reuse_address=True)
        return int(self._server.sockets[0].getsockname()[1])

    def stop(self) -> None:
        async def shutdown() -> None:
            if self._server is not None:
                self._server.close()
            for w in list(self._writers):
                w.close()

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def drop(self, api_key: int, should_drop: Callable[[int], bool]) -> DropRule:
        rule = DropRule(api_key, should_drop)
        with self._lock:
            self.rules.append(rule)
        return rule

    async def _on_client(self, c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter) -> None:
        try:
            b_reader, b_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            c_writer.close()
            return
        self._writers.update((c_writer, b_writer))
        pending: dict[int, int] = {}  # correlation id -> api key

        async def upstream() -> None:
            while True:
                size = struct.unpack(">i", await c_reader.readexactly(4))[0]
                body = await c_reader.readexactly(size)
                api_key, _version, correlation = struct.unpack_from(">hhi", body, 0)
                pending[correlation] = api_key
                b_writer.write(struct.pack(">i", size) + body)
                await b_writer.drain()

        async def downstream() -> None:
            while True:
                size = struct.unpack(">i", await b_reader.readexactly(4))[0]
                body = await b_reader.readexactly(size)
                correlation = struct.unpack_from(">i", body, 0)[0]
                api_key = pending.pop(correlation, -1)
                with self._lock:
                    for rule in self.rules:
                        if rule.api_key == api_key:
                            rule.seen += 1
                            if rule.should_drop(rule.seen):
                                rule.dropped += 1
                                raise ConnectionResetError("response dropped by rule")
                c_writer.write(struct.pack(">i", size) + body)
                await c_writer.drain()

        tasks = [asyncio.ensure_future(upstream()), asyncio.ensure_future(downstream())]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for w in (c_writer, b_writer):
                w.close()
                self._writers.discard(w)
