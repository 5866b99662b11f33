"""read: after (exclusive), through (inclusive), types, limit; never below the clear marker."""

from __future__ import annotations

import pytest

from a2pg import CLEAR_EVENT_TYPE
from a2pg.store import Store

from .helpers import append, ev


async def five(store: Store) -> None:
    await append(store, "s", ev("a"), ev("b"), ev("a"), ev("c"), ev("a"))


async def indexes(store: Store, **options: object) -> list[int]:
    return [e.index for e in await store.read("s", **options)]  # type: ignore[arg-type]


async def test_unknown_session_reads_empty(store: Store) -> None:
    assert await store.read("nobody") == []


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({}, [1, 2, 3, 4, 5]),
        ({"after": 0}, [1, 2, 3, 4, 5]),
        ({"after": 2}, [3, 4, 5]),
        ({"after": 5}, []),
        ({"after": 9}, []),
        ({"through": 3}, [1, 2, 3]),
        ({"through": 0}, []),
        ({"through": 9}, [1, 2, 3, 4, 5]),
        ({"after": 1, "through": 3}, [2, 3]),
        ({"after": 3, "through": 3}, []),
        ({"after": 4, "through": 2}, []),
        ({"types": ["a"]}, [1, 3, 5]),
        ({"types": ["b", "c"]}, [2, 4]),
        ({"types": ["zzz"]}, []),
        ({"limit": 2}, [1, 2]),
        ({"after": 2, "limit": 2}, [3, 4]),
        ({"types": ["a"], "after": 1, "limit": 1}, [3]),
        ({"types": ["a"], "through": 4}, [1, 3]),
    ],
    ids=lambda o: repr(o),
)
async def test_window(store: Store, options: dict[str, object], expected: list[int]) -> None:
    await five(store)
    assert await indexes(store, **options) == expected


async def test_events_come_back_whole(store: Store) -> None:
    stored = await append(store, "s", ev("a", {"v": 1}, id="e1"), ev("b", [2], id="e2"))
    assert await store.read("s") == stored


async def test_reads_start_at_the_clear_marker(store: Store) -> None:
    await five(store)
    result = await store.clear("s")
    await append(store, "s", ev("after"))
    events = await store.read("s")
    assert [(e.index, e.type) for e in events] == [(6, CLEAR_EVENT_TYPE), (7, "after")]
    assert events[0].payload is None
    assert result.clear_index == 6


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"after": 2}, [6, 7]),
        ({"through": 4}, []),
        ({"through": 6}, [6]),
        ({"types": ["a"]}, []),
        ({"types": ["after"]}, [7]),
        ({"types": [CLEAR_EVENT_TYPE]}, [6]),
        ({"after": 6}, [7]),
    ],
    ids=lambda o: repr(o),
)
async def test_windows_below_the_marker_see_nothing_below_it(
    store: Store, options: dict[str, object], expected: list[int]
) -> None:
    await five(store)
    await store.clear("s")
    await append(store, "s", ev("after"))
    assert await indexes(store, **options) == expected


async def test_sessions_are_separate_logs(store: Store) -> None:
    await append(store, "s1", ev("one"))
    await append(store, "s2", ev("two"), ev("three"))
    assert [e.type for e in await store.read("s1")] == ["one"]
    assert [(e.index, e.type) for e in await store.read("s2")] == [(1, "two"), (2, "three")]
