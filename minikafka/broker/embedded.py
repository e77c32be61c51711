"""A broker on a thread of its own, for synchronous code and tests.

::

    with BrokerThread(data_dir=tmp_path, port=0) as broker:
        producer = Producer({"bootstrap.servers": broker.bootstrap})
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future
from typing import Any

from minikafka.broker.server import Broker
from minikafka.config import BrokerConfig


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop where it is installed, else asyncio's default loop."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class BrokerThread:
    """Runs a :class:`Broker` on its own event loop thread."""

    def __init__(
        self,
        data_dir: str = "./minikafka-data",
        port: int = 0,
        host: str = "127.0.0.1",
        config: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self.broker_config = BrokerConfig(host=host, port=port, data_dir=str(data_dir), settings=dict(config or {}),
                                          **kwargs)
        self.broker: Broker | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def bootstrap(self) -> str:
        assert self.broker is not None, "broker not started"
        return self.broker.bootstrap

    @property
    def port(self) -> int:
        assert self.broker is not None, "broker not started"
        return self.broker.port

    def start(self) -> BrokerThread:
        ready: Future[None] = Future()
        self._loop = new_event_loop()

        def run() -> None:
            assert self._loop is not None
            asyncio.set_event_loop(self._loop)
            self.broker = Broker(self.broker_config)
            try:
                self._loop.run_until_complete(self.broker.start())
            except BaseException as exc:
                ready.set_exception(exc)
                return
            ready.set_result(None)
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name="minikafka-broker", daemon=True)
        self._thread.start()
        ready.result(timeout=120)
        return self

    def call(self, fn: Any, *args: Any, timeout: float = 60) -> Any:
        """Run ``fn(*args)`` on the broker's loop (awaiting it if it is a coroutine function)."""
        assert self._loop is not None

        async def runner() -> Any:
            result = fn(*args)
            if asyncio.iscoroutine(result):
                result = await result
            return result

        return asyncio.run_coroutine_threadsafe(runner(), self._loop).result(timeout)

    def stop(self, clean: bool = True) -> None:
        if self._loop is None or self.broker is None:
            return
        # A later start() comes back on the same port, as a restarted broker would.
        self.broker_config.port = self.broker.port
        try:
            self.call(self.broker.stop, clean)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            if self._thread is not None:
                self._thread.join(timeout=30)
            self._loop.close()
            self._loop = None

    def restart(self, clean: bool = True) -> None:
        """Stop (cleanly, or as a crash) and start again on the same port and data dir."""
        self.stop(clean=clean)
        self.start()

    def __enter__(self) -> BrokerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
