"""Streams and wakeups on SQLite: a cheap change signal, polled, instead of LISTEN.

SQLite has no notifications between processes. What it has is ``PRAGMA data_version``:
on one connection, a number that changes whenever another connection (of this process
or any other) commits to the file, read without touching any table. The watcher reads
it on the store's reader connection every ``change_interval`` (15 ms by default); when
it changed, it looks: which sessions have claimable heads (for wakeups) and whether a
streamed session's head moved (for streams). It also looks every ``poll_interval``
whatever the signal says, for lease and backoff expiries, which commit nothing. So a
worker in another process wakes within about ``change_interval`` of a commit, and the
cost of watching an idle file is one pragma per interval.

As on PostgreSQL, a signal only says "look": streams read the events from the table
and wakeups lead to claims that check it, so nothing is carried twice or lost between
signals. Writes of this store signal its own subscribers at once, without the watcher.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3

from ..backoff import Backoff
from ..feeds import Feed
from ..ids import Clock
from . import codec
from .database import Database, one, rows, session_head

log = logging.getLogger("a2pg.sqlite.streams")

CHANGE_INTERVAL = 0.015
"""Seconds between two reads of ``PRAGMA data_version``: the wake latency across processes."""

READY_POLL_LIMIT = 1000
"""Oldest ready heads a look reads (their sessions are announced)."""


class Watcher:
    """Feeds this store's streams and wakeups (``feed``); owns the polling task."""

    def __init__(
        self,
        db: Database,
        *,
        clock: Clock,
        change_interval: float = CHANGE_INTERVAL,
        poll_interval: float = 1.0,
        reconnect: Backoff | None = None,
    ) -> None:
        self._db = db
        self._clock = clock
        self._change_interval = change_interval
        self._poll_interval = poll_interval
        self._retry = reconnect or Backoff(base=0.1, cap=5.0)
        self.feed = Feed(self, retry=self._retry)
        self._task: asyncio.Task[None] | None = None

    # -- the watching task (the feed's source) ---------------------------------------------

    def start(self) -> None:
        """Starts the watching task (once; restarted if it died)."""
        if self.feed.closed or (self._task is not None and not self._task.done()):
            return
        self._task = asyncio.get_running_loop().create_task(self._run(), name="a2pg sqlite watcher")

    async def stop(self) -> None:
        """Stops watching."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        failures = 0
        while not self.feed.closed:
            try:
                await self._watch()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the watcher must outlive anything but close()
                failures += 1
                delay = self._retry.delay(failures)
                log.warning("a2pg sqlite watcher failed (%s); again in %.2fs", exc, delay)
                await asyncio.sleep(delay)

    async def _watch(self) -> None:
        loop = asyncio.get_running_loop()
        version = await self._db.reader.call(data_version)
        await self._look()
        self.feed.work(None)  # a subscriber may have missed something before the first look
        looked = loop.time()
        while not self.feed.closed:
            await asyncio.sleep(self._change_interval)
            now_version = await self._db.reader.call(data_version)
            if now_version != version or loop.time() - looked >= self._poll_interval:
                version = now_version
                looked = loop.time()
                await self._look()

    async def _look(self) -> None:
        """Sessions with claimable heads (for wakeups) and the heads of streamed sessions."""
        wanted = self.feed.wants_work
        streamed = self.feed.streamed()
        if not wanted and not streamed:
            return
        now = codec.micros(self._clock())

        def look(conn: sqlite3.Connection) -> tuple[list[str], dict[str, int]]:
            ready = []
            if wanted:
                params = {"now": now, "limit": READY_POLL_LIMIT}
                ready = [row["session_id"] for row in rows(conn, "ready_sessions", params)]
            heads = {sid: session_head(conn, sid).head for sid in streamed}
            return ready, heads

        ready, heads = await self._db.reader.call(look)
        for session_id in ready:
            self.feed.work(session_id)
        for session_id, head in heads.items():
            self.feed.head_seen(session_id, head)


def data_version(conn: sqlite3.Connection) -> int:
    """Changes whenever another connection commits to the file (``PRAGMA data_version``)."""
    row = one(conn, "data_version")
    assert row is not None
    return int(row[0])
