"""The acceptor: a connection accepted just as the broker stops is closed, not left to the
garbage collector (a crash right after a client connected left such sockets open)."""

from __future__ import annotations

import asyncio
import gc
import socket
import warnings

from minikafka.broker.acceptor import Acceptor, bind_sockets


async def test_a_connection_accepted_as_the_acceptor_closes_is_closed_with_it() -> None:
    served: list[asyncio.Transport] = []

    async def serve(_reader: object, transport: asyncio.Transport) -> None:
        served.append(transport)

    listening = bind_sockets("127.0.0.1", 0, 16)
    acceptor = Acceptor(listening, serve)
    acceptor.start()
    client = socket.create_connection(listening[0].getsockname()[:2], timeout=5)
    try:
        await asyncio.sleep(0)  # the acceptor takes the connection ...
        await asyncio.sleep(0)  # ... and has yet to start serving it when it closes
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            acceptor.close()
            await acceptor.wait_closed()
            gc.collect()
        assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []
        assert served == []
        assert client.recv(1) == b""  # the broker's end is closed
    finally:
        client.close()
