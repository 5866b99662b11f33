"""The Feed on its own, with a fake log and a fake source: what every backend's feeds share."""

from __future__ import annotations

import ast
import asyncio
import logging
import pathlib
from collections.abc import AsyncGenerator
from datetime import UTC, datetime
from typing import cast

import pytest

import a2pg.feeds
from a2pg.backoff import Backoff
from a2pg.feeds import Feed
from a2pg.models import StoredEvent

TIMEOUT = 5.0


class Log:
    """One session's events, counting the reads a stream makes (each signal costs one)."""

    def __init__(self) -> None:
        self.events: list[StoredEvent] = []
        self.reads = 0

    def add(self, count: int = 1) -> None:
        for _ in range(count):
            index = len(self.events) + 1
            now = datetime.now(UTC)
            self.events.append(StoredEvent(f"e{index}", "t", None, index, "s", now))

    async def read_after(self, last: int) -> list[StoredEvent]:
        self.reads += 1
        return [event for event in self.events if event.index > last][:2]


class Source:
    """Counts starts and stops; like a real one, it cannot start without a running loop."""

    def __init__(self) -> None:
        self.starts = 0
        self.stops = 0

    def start(self) -> None:
        asyncio.get_running_loop()
        self.starts += 1

    async def stop(self) -> None:
        self.stops += 1


def open_stream(feed: Feed, log: Log, session_id: str = "s") -> AsyncGenerator[StoredEvent]:
    return cast(AsyncGenerator[StoredEvent], feed.stream(session_id, 0, log.read_after))


async def settle() -> None:
    """Lets every task that can run do so (a signalled stream reads, then waits again)."""
    for _ in range(10):
        await asyncio.sleep(0)


async def waiting(stream: AsyncGenerator[StoredEvent]) -> asyncio.Future[StoredEvent | None]:
    """The stream's next event (None once it ended), asked for and not there yet."""
    pending = asyncio.ensure_future(anext(stream, None))
    await settle()
    assert not pending.done()
    return pending


async def cancel(pending: asyncio.Future[StoredEvent | None]) -> None:
    """Ends a waiting stream as a cancelled consumer does."""
    pending.cancel()
    await asyncio.gather(pending, return_exceptions=True)


async def test_a_stream_yields_stored_events_then_live_ones_after_committed() -> None:
    feed, log = Feed(), Log()
    log.add(3)
    stream = open_stream(feed, log)
    assert [(await anext(stream)).index for _ in range(3)] == [1, 2, 3]
    pending = await waiting(stream)
    log.add()
    feed.committed("other")
    await settle()
    assert not pending.done(), "a stream reads again only when its own session is signalled"
    feed.committed("s")
    event = await asyncio.wait_for(pending, TIMEOUT)
    assert event is not None and event.index == 4
    await stream.aclose()
    assert feed.streamed() == []


async def test_close_ends_streams_waiting_and_new() -> None:
    feed, log = Feed(), Log()
    pending = await waiting(open_stream(feed, log))
    await feed.close()
    assert feed.closed
    assert await asyncio.wait_for(pending, TIMEOUT) is None
    log.add()
    assert [event async for event in open_stream(feed, log)] == []


async def test_the_last_stream_of_a_session_takes_its_bookkeeping_with_it() -> None:
    feed, log = Feed(), Log()
    first, second = open_stream(feed, log), open_stream(feed, log)
    pending_first, pending_second = await waiting(first), await waiting(second)
    assert feed.streamed() == ["s"]
    feed.head_seen("s", 1)
    await settle()
    reads = log.reads
    await cancel(pending_first)
    assert feed.streamed() == ["s"]
    feed.head_seen("s", 1)
    await settle()
    assert log.reads == reads, "the head seen survives while another stream reads the session"
    await cancel(pending_second)
    assert feed.streamed() == []
    pending = await waiting(open_stream(feed, log))
    reads = log.reads
    feed.head_seen("s", 1)
    await settle()
    assert log.reads == reads + 1, "a new stream starts with no head seen"
    await cancel(pending)


async def test_head_seen_signals_only_a_change() -> None:
    feed, log = Feed(), Log()
    feed.head_seen("s", 3)  # no stream yet: nothing to keep
    pending = await waiting(open_stream(feed, log))
    expected = log.reads
    steps = [("s", 3, True), ("s", 3, False), ("s", 4, True), ("x", 5, False)]
    for session_id, head, news in steps:
        feed.head_seen(session_id, head)
        await settle()
        expected += news
        assert log.reads == expected, (session_id, head)
    await cancel(pending)


async def test_streamed_lists_live_sessions_sorted() -> None:
    feed = Feed()
    pendings = [await waiting(open_stream(feed, Log(), sid)) for sid in ("b", "c", "a")]
    assert feed.streamed() == ["a", "b", "c"]
    for pending in pendings:
        await cancel(pending)
    assert feed.streamed() == []


async def test_wakeups_hear_each_pending_id_once_in_first_signalled_order() -> None:
    feed = Feed()
    assert not feed.wants_work
    wakeups, other = feed.wakeups(), feed.wakeups()
    assert feed.wants_work
    feed.work("a")
    feed.work("b")
    feed.work("a")
    feed.work(None)
    feed.announce(["s"], ["c", "b"])
    got = [await asyncio.wait_for(anext(wakeups), TIMEOUT) for _ in range(4)]
    assert got == ["a", "b", None, "c"]
    await other.aclose()
    assert feed.wants_work
    pending = asyncio.ensure_future(anext(wakeups, "ended"))
    await settle()
    assert not pending.done()
    await feed.close()
    assert await asyncio.wait_for(pending, TIMEOUT) == "ended"
    assert await anext(feed.wakeups(), "ended") == "ended"


async def test_an_unsubscribed_wakeups_leaves_the_feed() -> None:
    feed = Feed()
    wakeups = feed.wakeups()
    await wakeups.aclose()
    assert not feed.wants_work
    feed.work("a")
    assert await anext(wakeups, "ended") == "ended"


async def test_announce_reads_the_appended_sessions_streams() -> None:
    feed, log = Feed(), Log()
    pending = await waiting(open_stream(feed, log))
    log.add()
    feed.announce([], ["s"])
    await settle()
    assert not pending.done(), "work alone is no news for a stream"
    feed.announce(["s"], [])
    event = await asyncio.wait_for(pending, TIMEOUT)
    assert event is not None and event.index == 1


async def test_a_transient_read_error_is_retried_with_backoff(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log = Log()
    log.add(2)
    script: list[Exception | None] = [ConnectionError("lost secret")] * 2 + [None]
    script += [ConnectionError("lost secret"), None]

    async def read_after(last: int) -> list[StoredEvent]:
        step = script.pop(0) if script else None
        if step is not None:
            raise step
        return (await log.read_after(last))[:1]

    feed = Feed(
        transient=lambda exc: isinstance(exc, ConnectionError),
        scrub=lambda text: text.replace("secret", "***"),
        retry=Backoff(base=0.01, cap=1.0, jitter=0),
    )
    stream = cast(AsyncGenerator[StoredEvent], feed.stream("s", 0, read_after))
    with caplog.at_level(logging.WARNING, logger="a2pg.feeds"):
        got = [(await asyncio.wait_for(anext(stream), TIMEOUT)).index for _ in range(2)]
    assert got == [1, 2]
    said = [record.getMessage() for record in caplog.records if record.name == "a2pg.feeds"]
    delays = ["0.01", "0.02", "0.01"]  # doubling, and back to the base once a read succeeds
    assert said == [f"a2pg stream cannot read (lost ***); again in {d}s" for d in delays]
    await stream.aclose()


async def test_any_other_read_error_ends_the_stream() -> None:
    async def read_after(last: int) -> list[StoredEvent]:
        raise ValueError("refused")

    feed = Feed(transient=lambda exc: isinstance(exc, ConnectionError))
    stream = feed.stream("s", 0, read_after)
    with pytest.raises(ValueError, match="refused"):
        await asyncio.wait_for(anext(stream), TIMEOUT)
    assert feed.streamed() == []


async def test_by_default_no_error_is_transient() -> None:
    async def read_after(last: int) -> list[StoredEvent]:
        raise ConnectionError("lost")

    with pytest.raises(ConnectionError):
        await asyncio.wait_for(anext(Feed().stream("s", 0, read_after)), TIMEOUT)


async def test_subscribers_start_the_source_and_close_stops_it() -> None:
    source = Source()
    feed = Feed(source)
    stream = open_stream(feed, Log())
    assert source.starts == 0, "a stream subscribes on its first read, not before"
    pending = await waiting(stream)
    assert source.starts == 1
    wakeups = feed.wakeups()
    assert source.starts == 2
    waking = asyncio.ensure_future(anext(wakeups, "ended"))
    await settle()
    assert source.starts == 3, "each wait makes sure the source still runs"
    await feed.close()
    assert source.stops == 1
    assert await asyncio.wait_for(pending, TIMEOUT) is None
    assert await asyncio.wait_for(waking, TIMEOUT) == "ended"
    feed.start()
    feed.wakeups()
    assert source.starts == 3, "a closed feed never starts its source again"


def test_wakeups_made_before_a_loop_runs_start_the_source_later() -> None:
    source = Source()
    feed = Feed(source)
    wakeups = feed.wakeups()
    assert source.starts == 0
    feed.work("a")

    async def first() -> str | None:
        return await anext(wakeups)

    assert asyncio.run(first()) == "a"
    assert source.starts == 1


def test_the_feed_knows_no_driver() -> None:
    """It sits with the package's face: a backend's driver stays in the backend."""
    path = pathlib.Path(a2pg.feeds.__file__)  # the checkout's, or the installed wheel's
    imported: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            imported.add(node.module.split(".")[0])
    assert "asyncio" in imported  # the scan sees imports at all
    assert not imported & {"psycopg", "psycopg_pool", "sqlite3", "aiosqlite"}
