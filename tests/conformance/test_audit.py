"""record_audit / audit_log: the operators' audit log, on every backend.

An entry comes back with the store's id and time; the log reads newest first, in keyset
pages by (at, id); every bad entry or page argument is INVALID_ARGUMENT and writes nothing.
"""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, cast

import pytest

from a2pg import A2Error, Limits
from a2pg.ids import FakeClock, SequentialIds
from a2pg.models import AUDIT_ACTIONS, AuditAction, AuditEntry
from a2pg.store import Store

from ..backends import Backend
from .helpers import assert_code
from .invalid_support import LONG, prepare, refused

REDRIVE = AuditEntry(
    actor="alice",
    action="redrive.retry",
    session_id="s",
    consumer="mail",
    lane="x",
    index=3,
    detail={"outcome": "redriven", "cursor": "lane"},
)


async def test_an_entry_comes_back_with_the_stores_id_and_time(
    store: Store, clock: FakeClock
) -> None:
    stored = await store.record_audit(REDRIVE)
    assert stored == replace(REDRIVE, id="id-00000001", at=clock())
    assert await store.audit_log() == [stored]


async def test_every_action_of_the_set_is_recorded(store: Store) -> None:
    for action in AUDIT_ACTIONS:
        await store.record_audit(AuditEntry("cli:ops@box", action))
    logged = await store.audit_log()
    assert [entry.action for entry in logged] == list(reversed(AUDIT_ACTIONS))
    assert all(entry.session_id is None and entry.detail == {} for entry in logged)


async def test_the_log_is_newest_first_and_ties_of_time_go_by_id(
    store: Store, clock: FakeClock
) -> None:
    first = await store.record_audit(AuditEntry("a", "pause", consumer="c"))
    clock.advance(1)
    second = await store.record_audit(AuditEntry("b", "resume", consumer="c"))
    third = await store.record_audit(AuditEntry("c", "clear", session_id="s"))
    assert second.at == third.at
    assert await store.audit_log() == [third, second, first]


async def test_pages_follow_one_another_by_the_last_id(store: Store, clock: FakeClock) -> None:
    recorded = []
    for n in range(7):
        if n % 3 == 0:
            clock.advance(0.5)  # ties of `at` within a page and across pages' ends
        recorded.append(await store.record_audit(AuditEntry("ops", "reclaim", detail={"n": n})))
    newest_first = list(reversed(recorded))
    pages: list[list[AuditEntry]] = []
    after: str | None = None
    while True:
        page = await store.audit_log(after=after, limit=3)
        pages.append(page)
        if len(page) < 3:
            break
        after = page[-1].id
    assert [entry for page in pages for entry in page] == newest_first
    assert [len(page) for page in pages] == [3, 3, 1]
    assert await store.audit_log(after=newest_first[-1].id) == []


async def test_an_after_naming_no_entry_is_an_empty_page(store: Store) -> None:
    await store.record_audit(REDRIVE)
    assert await store.audit_log(after="no-such-entry") == []


async def test_details_keep_their_json(store: Store) -> None:
    detail: dict[str, Any] = {
        "matched": 2,
        "filters": {"consumer": "mail", "error": None, "session": "s-1"},
        "ratio": 0.5,
        "heads": ["s-1", "é\U0001f600"],
        "dry_run": False,
    }
    stored = await store.record_audit(replace(REDRIVE, detail=detail))
    detail["matched"] = 99  # the caller's dict, changed later, is not the entry's
    [logged] = await store.audit_log()
    assert logged == stored
    assert logged.detail["matched"] == 2
    assert logged.detail["heads"] == ["s-1", "é\U0001f600"]


async def test_an_event_cursor_or_no_head_at_all(store: Store) -> None:
    event = await store.record_audit(replace(REDRIVE, lane=None))
    bulk = await store.record_audit(AuditEntry("bob", "redrive.skip", detail={"matched": 0}))
    assert (event.lane, event.index) == (None, 3)
    assert (bulk.session_id, bulk.consumer, bulk.lane, bulk.index) == (None, None, None, None)
    assert await store.audit_log() == [bulk, event]


async def test_the_log_is_kept_apart_from_sessions(store: Store) -> None:
    await store.record_audit(REDRIVE)
    assert await store.sessions() == []
    assert await store.read("s") == []


async def test_a_second_client_reads_what_the_first_recorded(make_store: Any) -> None:
    one: Store = await make_store()
    two: Store = await make_store()
    stored = await one.record_audit(REDRIVE)
    assert await two.audit_log() == [stored]


# -- bad input --------------------------------------------------------------------------

BAD_ENTRIES: dict[str, dict[str, Any]] = {
    "empty-actor": {"actor": ""},
    "long-actor": {"actor": "a" * LONG},
    "nul-actor": {"actor": "a\x00"},
    "surrogate-actor": {"actor": "\ud800"},
    "actor-not-text": {"actor": None},
    "unknown-action": {"action": "delete"},
    "action-case": {"action": "Pause"},
    "action-not-text": {"action": 1},
    "action-none": {"action": None},
    "empty-session": {"session_id": ""},
    "long-session": {"session_id": "s" * LONG},
    "session-not-text": {"session_id": 1},
    "empty-consumer": {"consumer": ""},
    "nul-consumer": {"consumer": "c\x00"},
    "empty-lane": {"lane": ""},
    "long-lane": {"lane": "l" * LONG},
    "index-zero": {"index": 0},
    "index-negative": {"index": -1},
    "index-bool": {"index": True},
    "index-float": {"index": 1.0},
    "index-past-bigint": {"index": 2**63},
    "detail-none": {"detail": None},
    "detail-a-list": {"detail": [1]},
    "detail-text": {"detail": "{}"},
    "detail-int-key": {"detail": {1: 2}},
    "detail-nan": {"detail": {"x": math.nan}},
    "detail-nul": {"detail": {"x": "a\x00"}},
    "detail-not-json": {"detail": {"x": object()}},
    "detail-too-big": {"detail": {"x": "x" * 65_536}},
    "id-given": {"id": "mine"},
    "at-given": {"at": datetime(2026, 1, 1, tzinfo=UTC)},
}


@pytest.mark.parametrize("name", list(BAD_ENTRIES))
async def test_bad_entries_are_refused_and_nothing_is_recorded(store: Store, name: str) -> None:
    kept = await store.record_audit(REDRIVE)
    before = await prepare(store)
    bad = replace(REDRIVE, **BAD_ENTRIES[name])
    await refused(store, before, lambda: store.record_audit(bad))
    assert await store.audit_log() == [kept]


async def test_an_entry_must_be_an_audit_entry(store: Store) -> None:
    before = await prepare(store)
    not_entry = cast(Any, {"actor": "a", "action": "pause"})
    await refused(store, before, lambda: store.record_audit(not_entry), "AuditEntry")
    assert await store.audit_log() == []


async def test_the_errors_say_what_was_wrong(store: Store) -> None:
    before = await prepare(store)
    unknown = replace(REDRIVE, action=cast(AuditAction, "delete"))
    await refused(store, before, lambda: store.record_audit(unknown), "redrive.retry", "'delete'")
    big = replace(REDRIVE, detail={"x": "x" * 65_536})
    await refused(store, before, lambda: store.record_audit(big), "Limits.max_presence_value_bytes")
    mine = replace(REDRIVE, id="mine")
    await refused(store, before, lambda: store.record_audit(mine), "the store's to set")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"limit": 0},
        {"limit": -1},
        {"limit": True},
        {"limit": 1.5},
        {"limit": 10_001},
        {"limit": None},
        {"after": ""},
        {"after": "a\x00"},
        {"after": "i" * LONG},
        {"after": 1},
    ],
    ids=[
        "limit-zero",
        "limit-negative",
        "limit-bool",
        "limit-float",
        "limit-over-page-size",
        "limit-none",
        "after-empty",
        "after-nul",
        "after-long",
        "after-not-text",
    ],
)
async def test_bad_pages_are_refused(store: Store, kwargs: dict[str, Any]) -> None:
    with pytest.raises(A2Error) as error:
        await store.audit_log(**kwargs)
    assert_code(error, "INVALID_ARGUMENT")


# -- the store's own limits -------------------------------------------------------------

SMALL = Limits(max_name_length=8, max_presence_value_bytes=64, max_page_size=5)
"""Small names and values, so the limits are reached at once."""


async def test_the_limits_are_the_stores(
    backend: Backend, request: pytest.FixtureRequest, clock: FakeClock, ids: SequentialIds
) -> None:
    store = await backend.open(backend.storage(request), clock, ids, SMALL)
    try:
        with pytest.raises(A2Error) as error:
            await store.record_audit(replace(REDRIVE, actor="a" * 9))
        assert_code(error, "INVALID_ARGUMENT", "Limits.max_name_length=8")
        with pytest.raises(A2Error) as error:
            await store.record_audit(replace(REDRIVE, detail={"x": "y" * 60}))
        assert_code(error, "INVALID_ARGUMENT", "Limits.max_presence_value_bytes=64")
        with pytest.raises(A2Error) as error:
            await store.audit_log(limit=6)
        assert_code(error, "INVALID_ARGUMENT", "Limits.max_page_size=5")
        assert await store.audit_log(limit=5) == []
    finally:
        await store.close()


async def test_an_id_handed_out_twice_returns_the_entry_stored_under_it(
    backend: Backend, request: pytest.FixtureRequest, clock: FakeClock
) -> None:
    """As a PostgreSQL retry after a lost connection finds its own row (the id is made
    once, before the insert): every backend answers alike."""
    same = cast(SequentialIds, lambda: "same-id")
    store = await backend.open(backend.storage(request), clock, same, Limits())
    try:
        first = await store.record_audit(REDRIVE)
        clock.advance(5)
        again = await store.record_audit(AuditEntry("bob", "pause", consumer="c"))
        assert again == first
        assert await store.audit_log() == [first]
    finally:
        await store.close()
