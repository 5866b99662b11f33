"""Bad arguments of the monitoring operations: INVALID_ARGUMENT, and nothing written."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, cast

import pytest

from a2pg import DeadLetterKey, DeadLetterQuery, WorkerBeat
from a2pg.store import Store

from .invalid_support import LONG, prepare, refused

GOOD_BEAT = WorkerBeat(
    holder="w-1",
    host="box",
    pid=42,
    consumers=("c",),
    concurrency=4,
    started_at=datetime(2026, 1, 1, tzinfo=UTC),
    in_flight=0,
    version="0.1.0",
    interval=5.0,
)
KEY = DeadLetterKey("s", "c", "", 1)

BAD_QUERIES: dict[str, Any] = {
    "not-a-query": {"consumer": "c"},
    "none": None,
    "limit-zero": DeadLetterQuery(limit=0),
    "limit-negative": DeadLetterQuery(limit=-1),
    "limit-bool": DeadLetterQuery(limit=cast(Any, True)),
    "limit-over-page-size": DeadLetterQuery(limit=10_001),
    "limit-float": DeadLetterQuery(limit=cast(Any, 2.0)),
    "empty-consumer": DeadLetterQuery(consumer=""),
    "nul-consumer": DeadLetterQuery(consumer="c\x00"),
    "long-consumer": DeadLetterQuery(consumer="c" * LONG),
    "consumer-not-text": DeadLetterQuery(consumer=cast(Any, 1)),
    "empty-error": DeadLetterQuery(error=""),
    "nul-error": DeadLetterQuery(error="a\x00"),
    "long-error": DeadLetterQuery(error="e" * 8_193),
    "surrogate-error": DeadLetterQuery(error="\ud800"),
    "empty-prefix": DeadLetterQuery(session_prefix=""),
    "long-prefix": DeadLetterQuery(session_prefix="s" * LONG),
    "after-not-a-key": DeadLetterQuery(after=cast(Any, ("s", "c", "", 1))),
    "after-empty-session": DeadLetterQuery(after=replace(KEY, session_id="")),
    "after-empty-consumer": DeadLetterQuery(after=replace(KEY, consumer="")),
    "after-nul-lane": DeadLetterQuery(after=replace(KEY, lane="x\x00")),
    "after-lane-none": DeadLetterQuery(after=replace(KEY, lane=cast(Any, None))),
    "after-index-zero": DeadLetterQuery(after=replace(KEY, index=0)),
    "after-index-bool": DeadLetterQuery(after=replace(KEY, index=cast(Any, True))),
}


@pytest.mark.parametrize("name", list(BAD_QUERIES))
async def test_bad_dead_letter_queries_are_refused(store: Store, name: str) -> None:
    before = await prepare(store)
    await refused(store, before, lambda: store.find_dead_letters(BAD_QUERIES[name]))


BAD_BEATS: dict[str, dict[str, Any]] = {
    "empty-holder": {"holder": ""},
    "long-holder": {"holder": "h" * LONG},
    "nul-holder": {"holder": "h\x00"},
    "empty-host": {"host": ""},
    "long-host": {"host": "h" * LONG},
    "host-not-text": {"host": None},
    "pid-negative": {"pid": -1},
    "pid-bool": {"pid": True},
    "pid-float": {"pid": 1.0},
    "pid-past-integer": {"pid": 2**31},
    "concurrency-negative": {"concurrency": -1},
    "in-flight-negative": {"in_flight": -2},
    "in-flight-text": {"in_flight": "3"},
    "completed-negative": {"completed": -1},
    "completed-past-bigint": {"completed": 2**63},
    "failed-negative": {"failed": -1},
    "interval-zero": {"interval": 0},
    "interval-negative": {"interval": -5.0},
    "interval-nan": {"interval": math.nan},
    "interval-infinite": {"interval": math.inf},
    "empty-version": {"version": ""},
    "long-version": {"version": "v" * LONG},
    "consumers-a-string": {"consumers": "c"},
    "consumers-none": {"consumers": None},
    "consumers-empty-name": {"consumers": ("c", "")},
    "consumers-nul-name": {"consumers": ("c\x00",)},
    "consumers-twice": {"consumers": ("c", "c")},
    "naive-start": {"started_at": datetime(2026, 1, 1)},
    "start-not-a-time": {"started_at": "2026-01-01"},
}


@pytest.mark.parametrize("name", list(BAD_BEATS))
async def test_bad_heartbeats_are_refused(store: Store, name: str) -> None:
    await store.heartbeat(GOOD_BEAT)
    before = await prepare(store)
    bad = replace(GOOD_BEAT, **BAD_BEATS[name])
    await refused(store, before, lambda: store.heartbeat(bad))


async def test_a_heartbeat_must_be_a_worker_beat(store: Store) -> None:
    before = await prepare(store)
    await refused(store, before, lambda: store.heartbeat(cast(Any, {"holder": "w"})), "WorkerBeat")


@pytest.mark.parametrize(
    "holders",
    [["w-1", ""], ["w\x00"], "w-1", None, ["h" * LONG], [1]],
    ids=["empty", "nul", "a-string", "none", "long", "not-text"],
)
async def test_bad_holders_to_forget_are_refused_and_nothing_is_forgotten(
    store: Store, holders: Any
) -> None:
    await store.heartbeat(GOOD_BEAT)
    before = await prepare(store)
    await refused(store, before, lambda: store.forget_workers(holders))
    assert [w.beat.holder for w in await store.workers()] == ["w-1"]


async def test_the_error_names_the_limit_it_hit(store: Store) -> None:
    before = await prepare(store)
    query = DeadLetterQuery(limit=10_001)
    await refused(store, before, lambda: store.find_dead_letters(query), "Limits.max_page_size")
    long = replace(GOOD_BEAT, host="h" * LONG)
    await refused(store, before, lambda: store.heartbeat(long), "Limits.max_name_length")
