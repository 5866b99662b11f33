"""Workers of one process on one store do not all claim for each notification: a claim
another of them began after it, and that came back short, took what it announced."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from a2pg import Consumer, Head, NewEvent, Target
from a2pg.memory import MemoryStore
from a2pg.worker import App, Worker
from a2pg.worker.claim_news import ClaimNews, news_for
from tests.worker.test_wakeups import until

WORKERS = 4
APPENDS = 20


class CountingStore(MemoryStore):
    """A MemoryStore that counts claims (``claim_any`` and ``complete_and_claim``)."""

    def __init__(self) -> None:
        super().__init__()
        self.claims = 0

    async def claim_any(
        self,
        *,
        holder: str,
        ttl: float,
        consumers: Sequence[Consumer] | None = None,
        limit: int = 10,
        max_failures: int | None = None,
    ) -> list[Head]:
        self.claims += 1
        return await super().claim_any(
            holder=holder, ttl=ttl, consumers=consumers, limit=limit, max_failures=max_failures
        )


def test_a_short_claim_begun_after_a_moment_says_the_work_was_taken() -> None:
    news = ClaimNews()
    assert not news.taken_since(0.0)
    news.claimed(began=5.0, heads=10, limit=10)  # a full claim: more may be left
    assert not news.taken_since(1.0)
    news.claimed(began=5.0, heads=3, limit=10)
    assert news.taken_since(4.9) and not news.taken_since(5.0)
    news.claimed(began=2.0, heads=0, limit=10)  # an older short claim changes nothing
    assert news.taken_since(4.9)


def test_workers_share_news_per_store_and_consumers() -> None:
    store, other = MemoryStore(), MemoryStore()
    mailer, billing = [Consumer("mailer")], [Consumer("billing")]
    assert news_for(store, mailer) is news_for(store, mailer)
    assert news_for(store, mailer) is not news_for(store, billing)
    assert news_for(store, mailer) is not news_for(other, mailer)


def handled(done: list[int], count: int) -> Callable[[], bool]:
    return lambda: len(done) >= count


async def test_one_notification_is_not_claimed_by_every_worker() -> None:
    store = CountingStore()
    app = App()
    done: list[int] = []

    @app.consumer("w")
    async def handle(head: Head) -> None:
        done.append(head.index)

    workers = [Worker(store, app, concurrency=10, poll_interval=30.0) for _ in range(WORKERS)]
    tasks = [asyncio.create_task(w.run()) for w in workers]
    try:
        await until(lambda: store.claims >= WORKERS)  # each claimed once at start
        await asyncio.sleep(0.05)
        before = store.claims
        for n in range(1, APPENDS + 1):
            await store.append("s", [NewEvent("job", targets=[Target("w")])])
            await until(handled(done, n))
            await asyncio.sleep(0.005)
        claims = store.claims - before
    finally:
        for worker in workers:
            worker.stop()
        await asyncio.gather(*tasks)
    # Every worker claiming for every notification makes WORKERS claims an append (and
    # the first's completion claims once more); the others let it go.
    assert claims <= 2 * APPENDS, claims
    assert sorted(done) == list(range(1, APPENDS + 1))
