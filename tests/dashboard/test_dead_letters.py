"""Dead letters across sessions: filters, keyset pages, and bulk redrive with a
confirmation step that redrives exactly what it listed."""

from __future__ import annotations

import re

import httpx
import pytest

from a2pg.store import Store

from .conftest import Client
from .helpers import csrf_token, dead_letter


def listed(html: str) -> list[tuple[str, str, int]]:
    """(session, consumer, index) of each row of the dead-letters table."""
    table = html[html.index('id="dead-letters"') :] if 'id="dead-letters"' in html else ""
    rows = re.findall(
        r'<a href="/session\?id=([^"]+)">[^<]*</a></td><td>([^<]*)</td><td>[^<]*</td>\s*'
        r'<td class="num">(\d+)</td>',
        table,
    )
    return [(s, c, int(i)) for s, c, i in rows]


async def make_dead_letters(store: Store) -> None:
    await dead_letter(store, "a-1", consumer="reply", error="TimeoutError: model slow")
    await dead_letter(store, "a-2", consumer="reply", error="ValueError: bad turn")
    await dead_letter(store, "b-1", consumer="audit", lane=None, error="TimeoutError: db")


async def test_filters(store: Store, client: httpx.AsyncClient) -> None:
    await make_dead_letters(store)
    everything = listed((await client.get("/dead-letters")).text)
    assert [(s, c) for s, c, _ in everything] == [
        ("a-1", "reply"),
        ("a-2", "reply"),
        ("b-1", "audit"),
    ]
    by_consumer = listed((await client.get("/dead-letters", params={"consumer": "audit"})).text)
    assert [s for s, _, _ in by_consumer] == ["b-1"]
    by_error = listed((await client.get("/dead-letters", params={"error": "timeouterror"})).text)
    assert [s for s, _, _ in by_error] == ["a-1", "b-1"]
    by_session = listed((await client.get("/dead-letters", params={"session": "a-"})).text)
    assert [s for s, _, _ in by_session] == ["a-1", "a-2"]
    none = await client.get("/dead-letters", params={"consumer": "nobody"})
    assert "No dead letters match the filter" in none.text


async def test_keyset_pages(
    store: Store, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("a2pg.dashboard.pages.dead_letters.DEAD_LETTERS_PAGE", 2)
    await make_dead_letters(store)
    first = (await client.get("/dead-letters")).text
    assert [s for s, _, _ in listed(first)] == ["a-1", "a-2"]
    next_link = re.search(r'<a rel="next" href="([^"]+)"', first)
    assert next_link is not None
    second = (await client.get(next_link.group(1).replace("&amp;", "&"))).text
    assert [s for s, _, _ in listed(second)] == ["b-1"]
    assert 'rel="next"' not in second


async def test_bulk_retry_lists_then_redrives_exactly_that(
    store: Store, client: httpx.AsyncClient
) -> None:
    await make_dead_letters(store)
    confirm = await client.get(
        "/dead-letters/confirm", params={"action": "retry", "error": "timeout"}
    )
    assert confirm.status_code == 200
    assert "Retry 2 dead letters?" in confirm.text
    keys = re.findall(r'name="key" value="([^"]+)"', confirm.text)
    assert len(keys) == 2
    # A dead letter that appears after the confirmation is not redriven by it.
    await dead_letter(store, "a-3", consumer="reply", error="TimeoutError: late")
    form = [
        ("csrf_token", csrf_token(confirm.text)),
        ("action", "retry"),
        ("next", "/dead-letters"),
    ]
    form += [("key", key.replace("&#34;", '"')) for key in keys]
    done = await client.post(
        "/redrive/many", data=dict(form[:3]) | {"key": [k for _, k in form[3:]]}
    )
    assert done.status_code == 303
    assert done.headers["location"] == "/dead-letters?notice=bulk-retry&count=2"
    left = {
        (h.session_id, h.consumer)
        for s in ("a-1", "a-2", "a-3", "b-1")
        for h in await store.dead_letters(s)
    }
    assert left == {("a-2", "reply"), ("a-3", "reply")}


async def test_bulk_actions_need_the_token_and_are_refused_read_only(
    store: Store, client: httpx.AsyncClient, client_for: Client
) -> None:
    await make_dead_letters(store)
    confirm = await client.get("/dead-letters/confirm", params={"action": "skip"})
    keys = [
        k.replace("&#34;", '"') for k in re.findall(r'name="key" value="([^"]+)"', confirm.text)
    ]
    assert len(keys) == 3
    refused = await client.post("/redrive/many", data={"action": "skip", "key": keys})
    assert refused.status_code == 403
    read_only = client_for(store, read_only=True)
    assert (
        await read_only.get("/dead-letters/confirm", params={"action": "skip"})
    ).status_code == 403
    page = (await read_only.get("/dead-letters")).text
    assert "Retry all" not in page and 'method="post"' not in page
    assert len(listed(page)) == 3


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"action": "retry"}, "no dead letters were selected"),
        ({"action": "retry", "key": "not json"}, "malformed dead-letter key"),
        ({"action": "retry", "key": '["s", "c", null, "1"]'}, "malformed dead-letter key"),
        ({"action": "nuke", "key": '["s", "c", null, 1]'}, "action must be retry or skip"),
    ],
)
async def test_bad_bulk_forms_are_a_400(
    store: Store, client: httpx.AsyncClient, data: dict[str, str], message: str
) -> None:
    await make_dead_letters(store)
    page = await client.get("/dead-letters")
    response = await client.post(
        "/redrive/many", data={"csrf_token": csrf_token(page.text), **data}
    )
    assert response.status_code == 400
    assert message in response.text
