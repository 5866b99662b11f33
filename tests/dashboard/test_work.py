"""Work by state (``/work``): each state's list, its filters and keyset pages, and the
confirmed bulk cancel (skip, dead-letter) of picked live heads, CSRF-checked and refused
read-only."""

from __future__ import annotations

import html
import re
from datetime import timedelta

import httpx
import pytest

from a2pg import Completed, Consumer, NewEvent, Target
from a2pg.ids import FakeClock
from a2pg.models import HeadQuery
from a2pg.store import Store

from .conftest import Client
from .helpers import HOSTILE, csrf_token

Row = tuple[str, str]


def listed(page: str) -> list[Row]:
    """(session, index) of each row of the work table, in order."""
    if 'id="work"' not in page:
        return []
    table = page[page.index('id="work"') :]
    return re.findall(r'<tr data-session="([^"]*)" data-index="(\d+)">', table)


def keys_of(page: str) -> list[str]:
    """The selection values of the page's rows."""
    return [html.unescape(v) for v in re.findall(r'name="key" value="([^"]+)"', page)]


async def work(store: Store, clock: FakeClock) -> None:
    """s1..s3, a second apart: a ready head of mailer (type ``mail``); s1 also a held lane
    head of billing, s2 a head of billing backing off after a timeout, s3 one of billing
    scheduled in an hour; and a ready head of audit in s2 (type ``note``)."""
    for n in (1, 2, 3):
        await store.append(
            f"s{n}",
            [
                NewEvent("mail", {"n": n}, targets=[Target("mailer")]),
                NewEvent(
                    "bill",
                    targets=[
                        Target("billing", "main", not_before=timedelta(hours=1) if n == 3 else None)
                    ],
                ),
            ],
        )
        clock.advance(1)
    await store.append("s2", [NewEvent("note", targets=[Target("audit")])])
    held = await store.claim_any(holder="w-1", ttl=60, consumers=[Consumer("billing")], limit=2)
    assert sorted(h.session_id for h in held) == ["s1", "s2"]
    [failing] = [h for h in held if h.session_id == "s2"]
    await store.fail_attempt(
        "s2",
        consumer="billing",
        lane="main",
        index=failing.index,
        attempt=failing.attempt,
        error="Traceback (most recent call last):\nTimeoutError: slow",
        max_failures=5,
        retry_after=300,
    )


async def test_each_state_lists_its_heads(
    store: Store, client: httpx.AsyncClient, clock: FakeClock
) -> None:
    await work(store, clock)
    ready = (await client.get("/work")).text
    assert listed(ready) == [("s1", "1"), ("s2", "1"), ("s3", "1"), ("s2", "3")]
    assert 'aria-current="page" data-state="ready"' in ready
    counts = dict(re.findall(r'data-state="(\w+)">[^<]*<span class="count">(\d+)</span>', ready))
    assert counts == {"ready": "4", "held": "1", "backing_off": "1", "scheduled": "1"}
    assert listed((await client.get("/work", params={"state": "held"})).text) == [("s1", "2")]
    backing = (await client.get("/work", params={"state": "backing_off"})).text
    assert listed(backing) == [("s2", "2")]
    assert "TimeoutError: slow" in backing
    assert listed((await client.get("/work", params={"state": "scheduled"})).text) == [("s3", "2")]


async def test_rows_link_to_their_session_and_head_page(
    store: Store, client: httpx.AsyncClient, clock: FakeClock
) -> None:
    await work(store, clock)
    held = (await client.get("/work", params={"state": "held"})).text
    assert 'href="/session?id=s1"' in held
    assert 'href="/sessions/s1/heads/billing/2?lane=main"' in held
    ready = (await client.get("/work")).text
    assert 'href="/sessions/s1/heads/mailer/1?cursor=event"' in ready
    page = await client.get("/sessions/s1/heads/billing/2", params={"lane": "main"})
    assert page.status_code == 200 and 'id="state" class="state-held">held<' in page.text
    assert 'href="/work"' in ready  # the nav link


async def test_filters_narrow_the_list(
    store: Store, client: httpx.AsyncClient, clock: FakeClock
) -> None:
    await work(store, clock)

    async def rows(**params: str) -> list[Row]:
        return listed((await client.get("/work", params=params)).text)

    assert await rows(consumer="audit") == [("s2", "3")]
    assert await rows(type="mail") == [("s1", "1"), ("s2", "1"), ("s3", "1")]
    assert await rows(session="s3") == [("s3", "1")]
    assert await rows(state="backing_off", error="timeouterror") == [("s2", "2")]
    assert await rows(state="backing_off", error="nothing like it") == []
    empty = (await client.get("/work", params={"consumer": "nobody"})).text
    assert 'id="nothing"' in empty and "match the filter" in empty
    # A tab keeps the filters; the form keeps the state.
    filtered = (await client.get("/work", params={"consumer": "billing"})).text
    assert 'href="/work?state=held&amp;consumer=billing"' in filtered
    assert '<input type="hidden" name="state" value="ready">' in filtered


async def test_keyset_pages_follow_each_other(
    store: Store, client: httpx.AsyncClient, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("a2pg.dashboard.pages.work.WORK_PAGE", 2)
    for n in range(5):
        await store.append(f"p{n}", [NewEvent("job", targets=[Target("mailer")])])
        clock.advance(1)
    seen: list[Row] = []
    page = (await client.get("/work", params={"consumer": "mailer"})).text
    for _ in range(5):
        seen.extend(listed(page))
        found = re.search(r'<a rel="next" href="([^"]+)"', page)
        if found is None:
            break
        link = html.unescape(found.group(1))
        assert "consumer=mailer" in link and "state=ready" in link
        page = (await client.get(link)).text
        assert "first page" in page
    assert seen == [(f"p{n}", "1") for n in range(5)]


@pytest.mark.parametrize(
    "params",
    [
        {"state": "dead"},
        {"state": "READY"},
        {"after": "not json"},
        {"after": '["2026-01-01T00:00:00", "s", 1, "c", ""]'},  # a naive time
        {"after": '["2026-01-01T00:00:00+00:00", "s", "1", "c", ""]'},
        {"after": '["2026-01-01T00:00:00+00:00", "s", 0, "c", ""]'},  # the store refuses it
        {"consumer": "c" * 300},
        {"error": "e" * 1025},
    ],
)
async def test_bad_parameters_are_a_400(
    store: Store, client: httpx.AsyncClient, params: dict[str, str]
) -> None:
    response = await client.get("/work", params=params)
    assert response.status_code == 400, response.text


async def test_what_a_store_holds_is_shown_as_text(store: Store, client: httpx.AsyncClient) -> None:
    await store.append("s", [NewEvent(HOSTILE, targets=[Target(HOSTILE)])])
    page = (await client.get("/work")).text
    assert "<script>alert" not in page and "<img src=x" not in page
    assert page.count("&lt;script&gt;alert(") >= 2  # the consumer and the event type, at least


# -- cancelling picked heads -------------------------------------------------------------


async def test_skip_selected_lists_then_skips_exactly_those(
    store: Store, client: httpx.AsyncClient, clock: FakeClock
) -> None:
    await work(store, clock)
    page = (await client.get("/work")).text
    token = csrf_token(page)
    keys = keys_of(page)
    assert len(keys) == 4
    picked = keys[:2]  # s1 and s2's mailer heads
    confirm = await client.post(
        "/work/confirm",
        data={"csrf_token": token, "action": "skip", "key": picked, "next": "/work"},
    )
    assert confirm.status_code == 200
    assert "Skip 2 live heads?" in confirm.text
    listed_keys = re.findall(r'name="key" value="([^"]+)"', confirm.text)
    assert [html.unescape(k) for k in listed_keys] == picked
    # Nothing changed yet.
    assert len(await store.find_heads(HeadQuery())) == 4
    done = await client.post(
        "/work/cancel",
        data={"csrf_token": token, "action": "skip", "key": picked, "next": "/work"},
    )
    assert done.status_code == 303
    assert done.headers["location"] == "/work?notice=cancel-skip&count=2"
    left = [(f.head.session_id, f.head.consumer) for f in await store.find_heads(HeadQuery())]
    assert left == [("s3", "mailer"), ("s2", "audit")]
    assert await store.dead_letters("s1") == []  # skipped, not dead
    notice = (await client.get(done.headers["location"])).text
    assert "Skipped 2 live heads" in notice
    [entry] = await store.audit_log(limit=1)
    assert entry.action == "cancel.skip"
    assert (entry.detail["selected"], entry.detail["cancelled"]) == (2, 2)


async def test_dead_letter_selected_fences_a_held_head(
    store: Store, client: httpx.AsyncClient, clock: FakeClock
) -> None:
    await work(store, clock)
    page = (await client.get("/work", params={"state": "held"})).text
    [key] = keys_of(page)
    token = csrf_token(page)
    form = {"csrf_token": token, "action": "dead_letter", "key": key, "next": "/work?state=held"}
    confirm = (await client.post("/work/confirm", data=form)).text
    assert "Dead-letter 1 live head?" in confirm and "w-1" in confirm
    done = await client.post("/work/cancel", data=form)
    assert done.headers["location"] == "/work?state=held&notice=cancel-dead_letter&count=1"
    [dead] = await store.dead_letters("s1")
    assert (dead.consumer, dead.lane, dead.index) == ("billing", "main", 2)
    assert await store.find_heads(HeadQuery("held")) == []
    [entry] = await store.audit_log(limit=1)
    assert (entry.action, entry.session_id, entry.index) == ("cancel.dead_letter", "s1", 2)


async def test_heads_gone_since_the_list_are_left_out(
    store: Store, client: httpx.AsyncClient, clock: FakeClock
) -> None:
    await work(store, clock)
    page = (await client.get("/work")).text
    token, keys = csrf_token(page), keys_of(page)
    [head] = await store.claim_any(holder="w-2", ttl=30, consumers=[Consumer("mailer")], limit=1)
    result = await store.complete_attempt(
        head.session_id, consumer="mailer", lane=None, index=1, attempt=head.attempt
    )
    assert isinstance(result, Completed)
    form = {"csrf_token": token, "action": "skip", "key": keys, "next": "/work"}
    confirm = (await client.post("/work/confirm", data=form)).text
    assert "Skip 3 live heads?" in confirm and 'id="gone"' in confirm
    # The final POST names a finished head too: it is left alone.
    done = await client.post("/work/cancel", data=form)
    assert done.headers["location"].endswith("count=3")


async def test_cancelling_needs_the_token_and_is_refused_read_only(
    store: Store, client_for: Client, clock: FakeClock
) -> None:
    await work(store, clock)
    client = client_for(store)
    page = (await client.get("/work")).text
    keys = keys_of(page)
    for path in ("/work/confirm", "/work/cancel"):
        for token in (None, "0" * 64):
            data = {"action": "skip", "key": keys}
            if token is not None:
                data["csrf_token"] = token
            assert (await client.post(path, data=data)).status_code == 403
    read_only = client_for(store, read_only=True)
    shown = (await read_only.get("/work")).text
    assert listed(shown) and keys_of(shown) == [] and "Skip selected" not in shown
    token = csrf_token(page)
    refused = await read_only.post(
        "/work/cancel", data={"csrf_token": token, "action": "skip", "key": keys}
    )
    assert refused.status_code == 403
    assert len(await store.find_heads(HeadQuery())) == 4


@pytest.mark.parametrize(
    "form",
    [
        {"action": "skip"},  # nothing selected
        {"action": "retry", "key": '["s1", "mailer", null, 1]'},
        {"action": "", "key": '["s1", "mailer", null, 1]'},
        {"action": "skip", "key": "not a key"},
        {"action": "skip", "key": '["s1", "mailer", null, "1"]'},
        {"action": "skip", "key": '["", "mailer", null, 1]'},  # the store refuses it
    ],
)
async def test_bad_cancel_forms_are_a_400_and_cancel_nothing(
    store: Store, client: httpx.AsyncClient, clock: FakeClock, form: dict[str, str]
) -> None:
    await work(store, clock)
    token = csrf_token((await client.get("/work")).text)
    for path in ("/work/confirm", "/work/cancel"):
        response = await client.post(path, data={"csrf_token": token, **form})
        assert response.status_code == 400, (path, response.text)
    assert len(await store.find_heads(HeadQuery())) == 4


async def test_a_selection_past_the_bulk_limit_is_a_400(
    store: Store, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch, clock: FakeClock
) -> None:
    monkeypatch.setattr("a2pg.dashboard.pages.work.BULK_LIMIT", 2)
    await work(store, clock)
    page = (await client.get("/work")).text
    data = {"csrf_token": csrf_token(page), "action": "skip", "key": keys_of(page)[:3]}
    assert (await client.post("/work/cancel", data=data)).status_code == 400
    assert (await client.post("/work/confirm", data=data)).status_code == 400
    assert len(await store.find_heads(HeadQuery())) == 4
