"""``a2pg.testing.run_until_idle``: what a user's handler test asserts on, on MemoryStore
and on PostgresStore alike (each with its real clock, as a user's test would have)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from a2pg import App, Head, LogSpec, NewEvent, Target
from a2pg.ids import FakeClock
from a2pg.memory import MemoryStore
from a2pg.store import Store
from a2pg.testing import run_until_idle
from a2pg.worker.results import STILL_BACKING_OFF


@pytest.fixture(params=["memory", pytest.param("postgres", marks=pytest.mark.postgres)])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[Store]:
    if request.param == "memory":
        yield MemoryStore()
        return
    from a2pg.postgres import PostgresStore

    opened = await PostgresStore.open(request.getfixturevalue("postgres_dsn"))
    try:
        yield opened
    finally:
        await opened.close()


def chat_app(flaky_failures: int = 1) -> App:
    app = App()
    failures_left = {"n": flaky_failures}

    @app.consumer("reply")
    async def reply(head: Head) -> list[NewEvent]:
        return [NewEvent("answer", {"to": head.index}, id=f"answer-{head.index}")]

    @app.consumer("flaky")
    async def flaky(head: Head) -> None:
        if failures_left["n"] > 0:
            failures_left["n"] -= 1
            raise RuntimeError("flaky once")

    @app.consumer("poison")
    async def poison(head: Head) -> None:
        raise ValueError(f"cannot digest {head.index}")

    @app.consumer("audit", log=LogSpec(types=("answer",)))
    async def audit(head: Head) -> None:
        pass

    @app.consumer("idle")
    async def idle(head: Head) -> None:
        raise AssertionError("never targeted")

    return app


async def append_work(store: Store) -> None:
    await store.append(
        "chat",
        [
            NewEvent("ask", targets=[Target("reply", lane="turns")]),
            NewEvent("ask", targets=[Target("reply", lane="turns")]),
            NewEvent("job", targets=[Target("flaky")]),
            NewEvent("bad", targets=[Target("poison")]),
        ],
    )


async def test_each_consumer_reports_what_it_completed_dead_lettered_and_appended(
    store: Store,
) -> None:
    await append_work(store)
    result = await run_until_idle(store, chat_app(), max_failures=2)

    reply = result["reply"]
    assert [(head.session_id, head.lane, head.index) for head in reply.completed] == [
        ("chat", "turns", 1),
        ("chat", "turns", 2),
    ]
    assert [event.id for event in reply.appended] == ["answer-1", "answer-2"]
    assert [event.cause.index for event in reply.appended if event.cause] == [1, 2]
    assert reply.failures == [] and reply.dead_lettered == []

    flaky = result["flaky"]
    assert [head.index for head in flaky.completed] == [3]
    [failure] = flaky.failures
    assert (failure.head.index, failure.dead_lettered) == (3, False)
    assert failure.error.endswith("RuntimeError: flaky once\n")  # the traceback, as stored

    poison = result["poison"]
    assert poison.completed == []
    assert [head.index for head in poison.dead_lettered] == [4]
    assert [(f.head.attempt, f.dead_lettered) for f in poison.failures] == [(1, False), (2, True)]
    assert all("cannot digest 4" in f.error for f in poison.failures)

    assert sorted(e.index for e in result["audit"].completed_events) == [5, 6]
    assert result["idle"].completed == [] and result["idle"].failures == []
    assert [event.id for event in result.appended] == ["answer-1", "answer-2"]
    assert result.stats.completed == 5
    assert [head.index for head in await store.dead_letters("chat")] == [4]


async def test_without_retries_a_failed_head_stays_failed(store: Store) -> None:
    await append_work(store)
    result = await run_until_idle(store, chat_app(), retries=False, max_failures=2)
    assert result["flaky"].completed == []
    assert [f.dead_lettered for f in result["flaky"].failures] == [False]
    assert result["poison"].dead_lettered == []


async def test_an_unknown_consumer_name_is_a_key_error_naming_the_known_ones() -> None:
    result = await run_until_idle(MemoryStore(), chat_app())
    with pytest.raises(KeyError, match=r"the app has no consumer 'replies'.*reply"):
        result["replies"]


async def test_a_store_whose_clock_stands_still_is_reported_not_waited_for() -> None:
    store = MemoryStore(clock=FakeClock())
    await append_work(store)
    with pytest.raises(TimeoutError, match="FakeClock"):
        await run_until_idle(store, chat_app(), max_failures=2)
    assert "retries=False" in STILL_BACKING_OFF
