"""``GET /events``: the console's snapshot pushed to subscribed pages as server-sent events.

The cost stays off the broker's data path: nothing is built while no page is subscribed; while
one is, a single task on the broker's loop builds the snapshot at most every ``interval``
seconds (further apart when one takes long to build, so they never take more than
:data:`MAX_SHARE` of the loop's time), encodes it once, hands the same bytes to every
subscriber, and sends nothing when it did not change (a comment line every ``keepalive``
seconds keeps proxies and the browser's connection check happy). A subscriber that cannot keep up only ever gets the newest snapshot:
each one holds one pending message, replaced, never a queue that grows.

The snapshot also says what it cost to build (``feed.build_ms``), so a busy broker's page shows
how much the page itself takes. ``retry`` tells the browser's EventSource how soon to reconnect
after the endpoint went away (the process restarted, say).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

log = logging.getLogger(__name__)

#: seconds between two snapshots while a page is subscribed
INTERVAL = 0.5
#: the most of the broker's loop time the snapshots may take (a slow build spaces them further)
MAX_SHARE = 0.02
#: seconds between two keep-alive comments when nothing changed
KEEPALIVE = 15.0
#: seconds between two checks that a quiet page is still connected
GONE_CHECK = 1.0
#: milliseconds the browser waits before reconnecting (the SSE ``retry`` field)
RETRY_MS = 1000


class _Subscriber:
    """One open page: the newest message not yet written, and a wake-up for its writer."""

    def __init__(self) -> None:
        self.pending: bytes | None = None
        self.ready = asyncio.Event()
        self.closed = False

    def offer(self, message: bytes) -> None:
        self.pending = message
        self.ready.set()


class LiveFeed:
    """Snapshots of ``build()`` for every subscribed page (see the module docstring)."""

    def __init__(self, build: Callable[[], Awaitable[dict[str, Any]]], interval: float = INTERVAL,
                 keepalive: float = KEEPALIVE) -> None:
        self.build = build
        self.interval = interval
        self.keepalive = keepalive
        self._subscribers: set[_Subscriber] = set()
        self._ticker: asyncio.Task[None] | None = None
        self._last: bytes = b""
        self._error = ""  # the last snapshot's failure, if it failed
        self.snapshots = 0  # built since start: the cost a page adds, counted
        self.build_ms = 0.0  # how long the last one took

    @property
    def subscribers(self) -> int:
        return len(self._subscribers)

    async def stream(self, request: web.BaseRequest) -> web.StreamResponse:
        """Answer one ``GET /events``: the current snapshot at once, then each change, until the
        page goes away or the endpoint stops."""
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                                               "X-Accel-Buffering": "no"})
        await response.prepare(request)
        subscriber = _Subscriber()
        self._subscribers.add(subscriber)
        subscriber.offer(f"retry: {RETRY_MS}\n\n".encode() + self._message(await self._encode()))
        if self._ticker is None or self._ticker.done():
            self._ticker = asyncio.get_running_loop().create_task(self._tick())
        loop = asyncio.get_running_loop()
        written = loop.time()
        try:
            while not subscriber.closed:
                try:
                    await asyncio.wait_for(subscriber.ready.wait(), GONE_CHECK)
                except TimeoutError:
                    if request.transport is None or request.transport.is_closing():
                        break  # the page went away: aiohttp does not cancel a handler for that
                    if loop.time() - written >= self.keepalive:
                        await response.write(b": keepalive\n\n")
                        written = loop.time()
                    continue
                subscriber.ready.clear()
                message, subscriber.pending = subscriber.pending, None
                if message:
                    await response.write(message)
                    written = loop.time()
        except (ConnectionError, asyncio.CancelledError):
            pass  # the page closed (or the endpoint is stopping): nothing to answer
        finally:
            self._subscribers.discard(subscriber)
        return response

    async def close(self) -> None:
        """End every stream (the endpoint is stopping) and the ticker."""
        for subscriber in self._subscribers:
            subscriber.closed = True
            subscriber.ready.set()
        if self._ticker is not None:
            self._ticker.cancel()
            await asyncio.gather(self._ticker, return_exceptions=True)
            self._ticker = None

    async def _tick(self) -> None:
        """While anyone is subscribed: a snapshot every ``interval``, sent when it changed."""
        while self._subscribers:
            # a big broker's snapshot takes longer to build: space them so they stay under MAX_SHARE
            await asyncio.sleep(max(self.interval, self.build_ms / 1000 / MAX_SHARE))
            if not self._subscribers:
                break
            previous = self._last
            data = await self._encode()
            if self._last != previous:
                message = self._message(data)
                for subscriber in self._subscribers:
                    subscriber.offer(message)
        self._last = b""  # the next subscriber starts from a fresh snapshot

    async def _encode(self) -> bytes:
        """The snapshot as JSON; ``self._last`` keeps it without the parts that change every time
        (the clock, the feed's cost), which is what "changed" compares."""
        started = time.perf_counter()
        try:
            body = await self.build()
        except Exception as exc:  # the page shows the error and the feed goes on
            error = f"{type(exc).__name__}: {exc}"
            if error != self._error:  # logged once, not twice a second
                log.warning("the console's snapshot failed: %s", error, exc_info=True)
            self._error = error
            body = {"error": error}
        else:
            self._error = ""
        tail = {"now_ms": body.pop("now_ms", None),
                "feed": {"interval_ms": int(self.interval * 1000), "subscribers": len(self._subscribers),
                         "build_ms": round(self.build_ms, 3), "snapshots": self.snapshots}}
        core = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
        self.snapshots += 1
        self.build_ms = (time.perf_counter() - started) * 1000
        self._last = core + b"%d" % len(self._subscribers)  # a page more or less is a change too
        # the body is a non-empty object: splice the tail in before its closing brace
        return core[:-1] + b"," + json.dumps(tail, separators=(",", ":")).encode()[1:]

    @staticmethod
    def _message(data: bytes) -> bytes:
        return b"event: snapshot\ndata: " + data + b"\n\n"
