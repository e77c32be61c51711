"""Group commit for ``--fsync``: one fsync per log covers every append waiting on it.

Appends write to the page cache on the event loop; a producer that must not be acknowledged
before its data is on disk awaits :meth:`Flusher.flush`. The fsync runs in a worker thread so
the loop keeps serving other connections, and appends that arrive while one fsync is running
share the next one.
"""

from __future__ import annotations

import asyncio
from typing import Any


class Flusher:
    def __init__(self) -> None:
        self._pending: dict[int, tuple[Any, asyncio.Future[None]]] = {}
        self._running: dict[int, asyncio.Task[None]] = {}

    async def flush(self, partition_log: Any) -> None:
        key = id(partition_log)
        entry = self._pending.get(key)
        if entry is None:
            fut = asyncio.get_running_loop().create_future()
            self._pending[key] = (partition_log, fut)
            if key not in self._running:
                self._running[key] = asyncio.create_task(self._run(key))
        else:
            fut = entry[1]
        await asyncio.shield(fut)

    async def _run(self, key: int) -> None:
        try:
            while key in self._pending:
                partition_log, fut = self._pending.pop(key)
                try:
                    await asyncio.to_thread(partition_log.flush)
                except Exception as exc:
                    fut.set_exception(exc)
                else:
                    fut.set_result(None)
        finally:
            del self._running[key]

    async def drain(self) -> None:
        while self._running:
            await asyncio.gather(*self._running.values(), return_exceptions=True)
