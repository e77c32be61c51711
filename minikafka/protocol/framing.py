"""Size-prefixed frames: ``int32 size`` then ``size`` bytes (docs/semantics.md#framing).

:class:`FrameReader` is the read side of a client connection: an asyncio ``BufferedProtocol``,
so the event loop reads the socket straight into a buffer of ours instead of handing over a new
``bytes`` per read that a ``StreamReader`` then copies into its own buffer and out again. Every
complete frame of a read is cut out at once and queued for the connection, which handles them
one by one. Small frames are copied out of a reused read buffer (one short copy each); a frame
larger than that buffer gets a buffer of its own, which the socket fills in place and which
becomes the frame, so a 1 MiB Produce is not copied on its way in.
"""

from __future__ import annotations

import asyncio
import struct
import sys
from collections import deque

_SIZE = struct.Struct(">i")

#: The reused read buffer (every connection has one: 16 MB for 1,000 connections); frames that do
#: not fit get a buffer of their own.
READ_BUFFER = 16 * 1024
#: A frame's own buffer starts at this size (or the frame's, if smaller) and grows to at most four
#: times what has arrived, so a client that announces a huge frame and sends little of it cannot
#: make the broker set aside the announced size.
FIRST_FRAME_BUFFER = 256 * 1024
#: Stop reading the socket while this many bytes of complete frames wait to be handled.
QUEUED_HIGH_WATER = 1024 * 1024


class FrameTooLarge(Exception):
    """A frame whose size is negative or above ``socket.request.max.bytes``: Kafka closes."""


def frame(payload_parts: list[bytes | bytearray | memoryview]) -> bytes:
    """Prefix the joined parts with their total size."""
    size = sum(len(p) for p in payload_parts)
    return b"".join([_SIZE.pack(size), *payload_parts])


class FrameReader(asyncio.BufferedProtocol):
    """Cuts the byte stream of one connection into frames and queues them.

    ``limit`` is the largest frame accepted (the connection lowers it before SASL
    authentication). The write side's flow control is here too, since an asyncio transport
    reports it to its protocol: :meth:`drained` waits while the transport holds more than its
    high-water mark of unsent bytes.

    ``trusted``: the other end is one of the cluster's brokers (a follower reading 1 MB Fetch
    answers), so a large frame gets a buffer of its announced size at once, without growing (and
    copying) it, and the buffer of the last large frame is used again once nothing refers to it
    any more (the frame and every view of it are gone), instead of allocating a fresh one.
    """

    def __init__(self, limit: int, *, trusted: bool = False) -> None:
        self.limit = limit
        self.trusted = trusted
        self.frames: deque[bytes | memoryview] = deque()
        self.queued_bytes = 0  # sizes of the frames in ``frames``
        self.error: FrameTooLarge | None = None  # a bad size prefix: nothing after it is read
        self.eof = False  # the peer closed its side (or the connection was lost)
        self.transport: asyncio.Transport | None = None
        self._buf = bytearray(READ_BUFFER)
        self._start = 0  # first byte of the first incomplete frame in _buf
        self._end = 0  # end of the bytes read into _buf
        self._big: bytearray | None = None  # the own buffer of a frame larger than _buf
        self._big_size = 0
        self._big_filled = 0
        self._spare: bytearray | None = None  # trusted: the last large frame's buffer, to reuse
        self._reading_paused = False
        self._writing_paused = False
        self._waiter: asyncio.Future[None] | None = None
        self._drain_waiter: asyncio.Future[None] | None = None

    # ---------------------------------------------------------------- what the connection sees
    @property
    def partial(self) -> bool:
        """Whether bytes of an incomplete frame have been read."""
        return self._big is not None or self._end > self._start

    @property
    def buffered(self) -> int:
        """Bytes received and not yet handled (queued frames and the incomplete one)."""
        return self.queued_bytes + (self._big_filled if self._big is not None else self._end - self._start)

    def at_eof(self) -> bool:
        """The peer has gone and every frame it sent has been taken."""
        return self.eof and not self.frames

    def pop(self) -> bytes | memoryview:
        payload = self.frames.popleft()
        self.queued_bytes -= len(payload)
        return payload

    async def wait(self) -> None:
        """Wait until a frame is queued, the stream ends or a bad frame arrives."""
        if self.frames or self.eof or self.error is not None:
            return
        if self._reading_paused and self.transport is not None:
            self._reading_paused = False
            self.transport.resume_reading()
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    async def drained(self) -> None:
        """Wait while the transport holds more unsent bytes than its high-water mark."""
        if not self._writing_paused or self.eof:
            return
        self._drain_waiter = asyncio.get_running_loop().create_future()
        try:
            await self._drain_waiter
        finally:
            self._drain_waiter = None

    # ---------------------------------------------------------------- asyncio protocol callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's are not asyncio.Transport subclasses

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._big is not None:
            return memoryview(self._big)[self._big_filled : self._big_size]
        if self._end == len(self._buf):  # full: move the incomplete frame to the front
            tail = self._end - self._start
            self._buf[:tail] = self._buf[self._start : self._end]
            self._start, self._end = 0, tail
        return memoryview(self._buf)[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        if self._big is not None:
            self._fill_big(nbytes)
        else:
            self._end += nbytes
            self._cut_frames()
        if self.frames:
            self._wake()
            if self.queued_bytes > QUEUED_HIGH_WATER and not self._reading_paused and self.transport is not None:
                self._reading_paused = True
                self.transport.pause_reading()

    def eof_received(self) -> bool:
        self.eof = True
        self._wake()
        # Keep a plain TCP transport open so answers to frames already read still go out; a TLS
        # transport cannot be half-closed.
        return self.transport is not None and self.transport.get_extra_info("sslcontext") is None

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = True
        self._writing_paused = False
        self._wake()
        if self._drain_waiter is not None and not self._drain_waiter.done():
            self._drain_waiter.set_result(None)

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        if self._drain_waiter is not None and not self._drain_waiter.done():
            self._drain_waiter.set_result(None)

    # ---------------------------------------------------------------- cutting frames
    def _cut_frames(self) -> None:
        buf, start, end = self._buf, self._start, self._end
        frames = self.frames
        unpack = _SIZE.unpack_from
        while end - start >= 4:
            (size,) = unpack(buf, start)
            if size < 0 or size > self.limit:
                self._refuse(size)
                break
            if end - start - 4 >= size:
                frames.append(bytes(buf[start + 4 : start + 4 + size]))
                self.queued_bytes += size
                start += 4 + size
            elif size + 4 > len(buf):
                self._start_big(size, memoryview(buf)[start + 4 : end])
                start = end = 0
                break
            else:
                break
        if start == end:
            start = end = 0
        self._start, self._end = start, end

    def _start_big(self, size: int, head: memoryview) -> None:
        if self.trusted:
            big = self._spare_for(size)
        else:
            big = bytearray(min(size, max(FIRST_FRAME_BUFFER, 4 * len(head))))
        big[: len(head)] = head
        self._big, self._big_size, self._big_filled = big, size, len(head)

    def _fill_big(self, nbytes: int) -> None:
        big = self._big
        assert big is not None
        self._big_filled += nbytes
        if self._big_filled == self._big_size:
            self._big = None
            self.frames.append(memoryview(big)[: self._big_size])
            self.queued_bytes += self._big_size
            if self.trusted:
                self._spare = big
        elif self._big_filled == len(big):
            grown = bytearray(min(self._big_size, 4 * len(big)))
            grown[: len(big)] = big
            self._big = grown

    def _spare_for(self, size: int) -> bytearray:
        """The last large frame's buffer if it is big enough and nothing refers to it any more
        (the only references left: this reader's, this frame's and getrefcount's own), else a new one."""
        spare = self._spare
        if spare is not None and len(spare) >= size and sys.getrefcount(spare) == 3:
            return spare
        return bytearray(size)

    def _refuse(self, size: int) -> None:
        self.error = FrameTooLarge(f"frame size {size} outside 0..{self.limit}")
        self._wake()
        if self.transport is not None and not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)
