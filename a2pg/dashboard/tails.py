"""One live tail's place among the process's ``MAX_STREAMS``, and its frames not yet sent.

A place is taken in one step with no ``await`` between the count and the taking (so
tails opened in the same instant cannot all pass the cap), and given back in the
response's ``finally``, however it ends.

The frames a client has not taken yet are bounded in bytes, not in events: once
``limit`` bytes are unsent (a slow client, or one that never reads), the feeder stops
reading the store for it, closing its ``Store.stream`` (and the batch of events that
holds), and resumes after the last event it rendered once half has been sent. What a
tail holds is so at most ``limit`` plus one frame, whatever the events' sizes (a frame
is bounded too: ``render.PAYLOAD_SHOWN_BYTES``).
"""

from __future__ import annotations

import asyncio
from collections import deque

TAIL_BUFFER_BYTES = 1 << 20
"""Bytes of rendered events one tail holds for its client at most (plus one frame)."""


class Tail:
    """A live tail's place (in ``places``, until ``release()``) and its unsent frames."""

    def __init__(self, places: set[Tail], limit: int = TAIL_BUFFER_BYTES) -> None:
        self._places = places
        self.limit = limit
        self._frames: deque[bytes] = deque()
        self.unsent = 0
        """Bytes of the frames put and not yet taken."""
        self.peak_unsent = 0
        """The most ``unsent`` has been (for tests and curious operators)."""
        self.ended = False
        self._last: bytes | None = None
        self._ready = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()
        self.feeder: asyncio.Task[None] | None = None
        """The task reading the store into this tail, cancelled by ``release()``."""
        places.add(self)

    @property
    def full(self) -> bool:
        """Whether the feeder should stop reading the store (``room()`` says when not)."""
        return self.unsent >= self.limit

    def put(self, frame: bytes) -> None:
        if self.ended:
            return
        self._frames.append(frame)
        self.unsent += len(frame)
        self.peak_unsent = max(self.peak_unsent, self.unsent)
        if self.full:
            self._room.clear()
        self._ready.set()

    async def room(self) -> None:
        """Until at most half of ``limit`` is unsent."""
        await self._room.wait()

    def end(self, last: bytes | None = None) -> None:
        """No more events: the client gets the frames put, then ``last``, then the end."""
        if not self.ended:
            self.ended = True
            self._last = last
            self._ready.set()

    def stop(self) -> None:
        """Ends at once, unsent frames dropped (the server is stopping)."""
        self._frames.clear()
        self.unsent = 0
        self.end()

    async def next(self, quiet_seconds: float, idle: bytes) -> bytes | None:
        """The next frame to send; ``idle`` after ``quiet_seconds`` without one; None
        once the tail has ended and everything was taken."""
        if not self._frames and not self.ended:
            self._ready.clear()
            try:
                async with asyncio.timeout(quiet_seconds):
                    await self._ready.wait()
            except TimeoutError:
                return idle
        if self._frames:
            frame = self._frames.popleft()
            self.unsent -= len(frame)
            if self.unsent <= self.limit // 2:
                self._room.set()
            return frame
        last, self._last = self._last, None
        return last

    def release(self) -> None:
        """Gives the place back and stops the feeder (again: nothing)."""
        self._places.discard(self)
        self.stop()
        if self.feeder is not None:
            self.feeder.cancel()
