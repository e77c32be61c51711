"""Accept connections promptly even while the event loop is busy serving requests.

``asyncio.start_server`` on uvloop accepts about one connection per event-loop iteration. When
hundreds of connections keep the loop busy, an iteration takes tens of milliseconds, so a burst
of new clients waits seconds to be accepted — their first request looks starved. Kafka has a
dedicated acceptor thread; here a listening socket is drained each time it becomes readable:
every pending connection is accepted at once (up to :data:`ACCEPTS_PER_WAKEUP`) and handed to
the same stream machinery ``start_server`` uses.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import logging
import socket
import ssl
from collections.abc import Callable, Coroutine
from typing import Any

from minikafka.protocol.framing import FrameReader

log = logging.getLogger(__name__)

#: At most this many connections are accepted per readiness event, so a flood of connects
#: cannot hold the loop for long either.
ACCEPTS_PER_WAKEUP = 512

#: ``client_connected(reader, transport)`` serves one accepted connection (in a task of its own).
ClientCallback = Callable[[FrameReader, asyncio.Transport], Coroutine[Any, Any, None]]


def bind_sockets(host: str, port: int, backlog: int) -> list[socket.socket]:
    """Listening sockets for every address of ``host`` (one port for all, even when 0 picks it)."""
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    sockets: list[socket.socket] = []
    seen: set[tuple[int, Any]] = set()
    try:
        for family, kind, proto, _name, address in infos:
            if (family, address[0]) in seen:
                continue
            seen.add((family, address[0]))
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            if sockets[0] is not sock:  # the other addresses share the first one's port
                address = (address[0], sockets[0].getsockname()[1], *address[2:])
            sock.bind(address)
            sock.listen(backlog)
            sock.setblocking(False)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def _close_if_never_served(conn: socket.socket, task: asyncio.Task[None]) -> None:
    """A serving task cancelled before its first step (the acceptor closed, as a broker stops, in
    the same loop iteration as it accepted) never ran the code that owns the socket: close it here
    rather than leave it to the garbage collector. A task cancelled later closed it itself."""
    if task.cancelled():
        conn.close()


class Acceptor:
    """Serves one or more listening sockets with ``client_connected`` (as ``start_server`` would).

    ``limit`` is the largest frame read from a new connection until its handler changes it."""

    def __init__(self, sockets: list[socket.socket], client_connected: ClientCallback,
                 ssl_context: ssl.SSLContext | None = None, ssl_handshake_timeout: float | None = None,
                 limit: int = 100 * 1024 * 1024) -> None:
        self.sockets = sockets
        self._client_connected = client_connected
        self._ssl = ssl_context
        self._handshake_timeout = ssl_handshake_timeout
        self._limit = limit
        self._loop = asyncio.get_running_loop()
        self._pending: set[asyncio.Task[None]] = set()
        self._serving = False

    def start(self) -> None:
        for sock in self.sockets:
            self._loop.add_reader(sock.fileno(), self._accept_all, sock)
        self._serving = True

    def _accept_all(self, sock: socket.socket) -> None:
        for _ in range(ACCEPTS_PER_WAKEUP):
            try:
                conn, _address = sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    log.error("cannot accept connections: %s (out of file descriptors or memory?)", exc)
                return
            conn.setblocking(False)
            with contextlib.suppress(OSError):
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            task = self._loop.create_task(self._serve(conn))
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)
            task.add_done_callback(functools.partial(_close_if_never_served, conn))

    async def _serve(self, conn: socket.socket) -> None:
        reader = FrameReader(self._limit)
        try:
            transport, _ = await self._loop.connect_accepted_socket(
                lambda: reader, conn, ssl=self._ssl,
                ssl_handshake_timeout=self._handshake_timeout if self._ssl is not None else None)
        except (OSError, ssl.SSLError, TimeoutError, asyncio.CancelledError) as exc:
            # a failed TLS handshake, or a client gone before we got to it
            log.debug("dropped a connection before it was served: %s", exc)
            conn.close()
            return
        # The connection is served in a task of its own, as start_server does: closing the
        # acceptor cancels connections still being accepted, not the ones being served.
        self._loop.create_task(self._client_connected(reader, transport))

    def close(self) -> None:
        if self._serving:
            for sock in self.sockets:
                with contextlib.suppress(Exception):
                    self._loop.remove_reader(sock.fileno())
            self._serving = False
        for sock in self.sockets:
            sock.close()
        for task in list(self._pending):
            task.cancel()

    async def wait_closed(self) -> None:
        if self._pending:
            await asyncio.wait(list(self._pending), timeout=1)
