"""A TCP proxy on loopback between worker processes and PostgreSQL that breaks the network.

Faults: ``reset()`` closes every connection at once, ``refuse(seconds)`` goes on
resetting new ones for a while (a server down); ``blackhole(seconds)`` holds all
traffic, and new connections, then lets it through; ``latency`` delays every chunk;
``half_open(direction)`` silently drops one direction of the current connections until
``heal()`` closes them; ``partition(seconds)`` silences every current connection for good
(both directions, no reset: their state died with a load balancer) and holds new ones
for a while; ``cut_after_commit()`` forwards the next COMMIT of a transaction
that inserted events, then drops the server's reply and cuts that connection (the
commit happened; the client cannot know). Clients must connect with ``sslmode=disable``
(``dsn()`` sees to it) so the proxy can read their protocol messages.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, Literal

from a2pg.postgres.dsn import with_options

Direction = Literal["c2s", "s2c"]
CHUNK = 65536
CUT_DELAY = 0.3
"""Seconds between forwarding a cut COMMIT and closing its connection: the server has
committed by then, and the client has heard nothing."""

_INSERT_EVENTS = re.compile(rb"insert\s+into\s+\S*a2_events\b")
_STARTUP_CODES = {80877103, 80877104}  # SSLRequest, GSSENCRequest: a StartupMessage follows


@dataclass
class Transactions:
    """Reads one client's protocol stream; says when a transaction that inserted events
    sends its COMMIT (as a simple query, or a prepared or unnamed extended-protocol one)."""

    buffer: bytearray = field(default_factory=bytearray)
    started: bool = False
    statements: dict[bytes, bytes] = field(default_factory=dict)
    inserted: bool = False

    def feed(self, data: bytes) -> bool:
        self.buffer += data
        committed = False
        while self._startup_done():
            if len(self.buffer) < 5:
                break
            size = int.from_bytes(self.buffer[1:5], "big")
            if len(self.buffer) < 1 + size:
                break
            kind, body = self.buffer[0], bytes(self.buffer[5 : 1 + size])
            del self.buffer[: 1 + size]
            committed |= self._message(kind, body)
        return committed

    def _startup_done(self) -> bool:
        while not self.started:
            if len(self.buffer) < 8:
                return False
            size = int.from_bytes(self.buffer[:4], "big")
            if len(self.buffer) < size:
                return False
            code = int.from_bytes(self.buffer[4:8], "big")
            del self.buffer[:size]
            self.started = code not in _STARTUP_CODES
        return True

    def _message(self, kind: int, body: bytes) -> bool:
        text: bytes | None = None
        if kind == ord("Q"):
            text = body.split(b"\0", 1)[0]
        elif kind == ord("P"):
            name, rest = body.split(b"\0", 1)
            self.statements[name] = rest.split(b"\0", 1)[0]
        elif kind == ord("B"):
            _portal, rest = body.split(b"\0", 1)
            text = self.statements.get(rest.split(b"\0", 1)[0])
        if text is None:
            return False
        statement = text.strip().lower()
        if statement.startswith(b"begin"):
            self.inserted = False
        elif _INSERT_EVENTS.search(statement):
            self.inserted = True
        elif statement.rstrip(b";") == b"commit" and self.inserted:
            self.inserted = False
            return True
        return False


@dataclass(eq=False)
class Link:
    """One client connection and its connection to the server."""

    client: asyncio.StreamWriter
    server: asyncio.StreamWriter
    dropping: set[Direction] = field(default_factory=set)
    transactions: Transactions = field(default_factory=Transactions)

    def abort(self) -> None:
        for writer in (self.client, self.server):
            writer.transport.abort()


class FaultProxy:
    """Forwards ``127.0.0.1:port`` to the server at ``host:port``, with faults on demand."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.latency = 0.0
        """Seconds added before forwarding each chunk, in both directions."""
        self.cuts = 0
        """COMMITs whose reply was dropped (``cut_after_commit``)."""
        self.links: set[Link] = set()
        self.accepted = 0
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._cut_armed = 0
        self._refusing_until = 0.0
        self._half_open: set[Link] = set()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> FaultProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return self

    @property
    def port(self) -> int:
        assert self._server is not None
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    def dsn(self, dsn: str, **options: str) -> str:
        """``dsn`` routed through the proxy."""
        return with_options(
            dsn,
            host="127.0.0.1",
            port=self.port,
            sslmode="disable",
            gssencmode="disable",
            **options,
        )

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        self._flowing.set()
        for link in list(self.links):
            link.abort()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # --- faults -----------------------------------------------------------------------

    def reset(self) -> int:
        """Closes every connection now (both sides see a reset); returns how many."""
        links = list(self.links)
        for link in links:
            link.abort()
        return len(links)

    def refuse(self, seconds: float) -> None:
        """Resets every connection now and each new one for ``seconds`` (the server is down)."""
        self.reset()
        self._refusing_until = asyncio.get_running_loop().time() + seconds

    @property
    def refusing(self) -> bool:
        return asyncio.get_running_loop().time() < self._refusing_until

    def blackhole(self, seconds: float) -> None:
        """For ``seconds``, forwards nothing (held, then delivered) and holds new connections."""
        self._flowing.clear()
        asyncio.get_running_loop().call_later(seconds, self._flowing.set)

    @property
    def blackholed(self) -> bool:
        return not self._flowing.is_set()

    def half_open(self, direction: Direction) -> int:
        """Drops ``direction`` of every current connection, leaving them open; returns how many."""
        for link in self.links:
            link.dropping.add(direction)
            self._half_open.add(link)
        return len(self._half_open)

    def heal(self) -> None:
        """Ends a half-open fault: its connections are closed (as a TCP timeout would)."""
        for link in self._half_open:
            link.abort()
        self._half_open.clear()

    def partition(self, seconds: float) -> int:
        """The network goes silent: every current connection drops both directions from
        now on, for good, and stays open (no reset ever comes, as when a partition or a
        dead load balancer lost their state); new connections are held for ``seconds``,
        then get through. Returns how many connections were silenced. A silenced
        connection ends only when its client closes it (or ``close()``)."""
        for link in self.links:
            link.dropping.update(("c2s", "s2c"))
        self.blackhole(seconds)
        return len(self.links)

    def cut_after_commit(self, times: int = 1) -> None:
        """The next ``times`` COMMITs of transactions that insert events are cut after they
        reach the server: their reply is dropped and their connection closed."""
        self._cut_armed += times

    # --- forwarding ---------------------------------------------------------------------

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        if self.refusing:
            writer.transport.abort()
            return
        await self._flowing.wait()  # a blackhole holds new connections too
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        link = Link(writer, up_writer)
        self.links.add(link)
        pumps = [
            self._spawn(self._pump(link, reader, up_writer, "c2s")),
            self._spawn(self._pump(link, up_reader, writer, "s2c")),
        ]
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            link.abort()
            self.links.discard(link)
            self._half_open.discard(link)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _pump(
        self,
        link: Link,
        source: asyncio.StreamReader,
        sink: asyncio.StreamWriter,
        direction: Direction,
    ) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while data := await source.read(CHUNK):
                committed = direction == "c2s" and link.transactions.feed(data)
                if self.latency:
                    await asyncio.sleep(self.latency)
                await self._flowing.wait()
                if direction in link.dropping:
                    continue
                sink.write(data)
                await sink.drain()
                if committed and self._cut_armed:
                    self._cut_armed -= 1
                    self.cuts += 1
                    link.dropping.add("s2c")
                    asyncio.get_running_loop().call_later(CUT_DELAY, link.abort)
