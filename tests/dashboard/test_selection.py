"""Dead letters picked by hand: a checkbox per row, one CSRF-checked selection form, a
confirmation listing the picked heads that still are dead letters, and ``/redrive/many``
redriving exactly those."""

from __future__ import annotations

import html
import json
import re

import httpx
import pytest

from a2pg.store import Store

from .conftest import Client
from .helpers import csrf_token, dead_letter
from .test_confirmations import hidden, post_forms
from .test_dead_letters import make_dead_letters


def boxes(page: str) -> list[str]:
    """The value of each row's selection checkbox, in page order."""
    found = re.findall(r'<input type="checkbox" name="key" value="([^"]+)" form="selection"', page)
    return [html.unescape(v) for v in found]


def confirmation_keys(page: str) -> list[list[object]]:
    [(action, body)] = post_forms(page)
    assert action == "/redrive/many"
    return [json.loads(html.unescape(v)) for v in re.findall(r'name="key" value="([^"]+)"', body)]


async def select(
    client: httpx.AsyncClient, page: str, keys: list[str], action: str
) -> httpx.Response:
    form = {"csrf_token": csrf_token(page), "next": "/dead-letters?consumer=reply"}
    return await client.post("/dead-letters/confirm", data=form | {"action": action, "key": keys})


async def test_each_row_has_a_box_of_the_one_selection_form(
    store: Store, client: httpx.AsyncClient
) -> None:
    await make_dead_letters(store)
    page = (await client.get("/dead-letters")).text
    keys = boxes(page)
    assert [json.loads(k)[0] for k in keys] == ["a-1", "a-2", "b-1"]
    assert json.loads(keys[2]) == ["b-1", "audit", None, 1]  # an event cursor's: no lane
    selection = [body for action, body in post_forms(page) if action == "/dead-letters/confirm"]
    assert len(selection) == 1
    assert hidden(selection[0]) == {"csrf_token": csrf_token(page), "next": "/dead-letters"}
    assert ">Retry selected…</button>" in selection[0]
    assert ">Skip selected…</button>" in selection[0]
    assert 'id="selection"' in page and 'data-select-all="selection"' in page


async def test_a_selection_is_confirmed_then_exactly_it_is_redriven(
    store: Store, client: httpx.AsyncClient
) -> None:
    await make_dead_letters(store)
    page = (await client.get("/dead-letters")).text
    a1, _, b1 = boxes(page)  # a-2 is left unticked
    confirm = await select(client, page, [b1, a1, b1], "skip")  # a repeat counts once
    assert confirm.status_code == 200, confirm.text
    assert "Skip 2 dead letters?" in confirm.text
    assert "its work is not done" in confirm.text
    assert confirmation_keys(confirm.text) == [json.loads(b1), json.loads(a1)]
    assert len(await dead_letters_now(store)) == 3  # confirming is not doing
    [(_, body)] = post_forms(confirm.text)
    fields = hidden(body)
    assert fields["action"] == "skip" and fields["next"] == "/dead-letters?consumer=reply"
    assert '<a href="/dead-letters?consumer=reply">Cancel</a>' in confirm.text
    keys = [html.unescape(k) for k in re.findall(r'name="key" value="([^"]+)"', body)]
    done = await client.post("/redrive/many", data={**fields, "key": keys})
    assert done.status_code == 303
    assert done.headers["location"] == "/dead-letters?consumer=reply&notice=bulk-skip&count=2"
    assert await dead_letters_now(store) == [("a-2", "reply")]


async def dead_letters_now(store: Store) -> list[tuple[str, str]]:
    return [
        (h.session_id, h.consumer)
        for s in ("a-1", "a-2", "b-1")
        for h in await store.dead_letters(s)
    ]


async def test_what_is_no_longer_dead_is_left_out_and_said(
    store: Store, client: httpx.AsyncClient
) -> None:
    await make_dead_letters(store)
    page = (await client.get("/dead-letters")).text
    a1, a2, _ = boxes(page)
    await store.redrive("a-1", consumer="reply", index=1, action="retry", lane="l")
    confirm = await select(client, page, [a1, a2], "retry")
    assert "Retry 1 dead letters?" in confirm.text
    assert "1 of the selected is no longer dead-lettered, and left out." in confirm.text
    assert confirmation_keys(confirm.text) == [json.loads(a2)]
    await store.redrive("a-2", consumer="reply", index=1, action="retry", lane="l")
    nothing = await select(client, page, [a1, a2], "retry")
    assert "Nothing matches any more." in nothing.text and post_forms(nothing.text) == []


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"action": "retry"}, "nothing was selected"),
        ({"action": "retry", "key": "not json"}, "malformed dead-letter key"),
        ({"action": "retry", "key": '["s", "c", null, true]'}, "malformed dead-letter key"),
        ({"action": "nuke", "key": '["a-1", "reply", "l", 1]'}, "action must be retry or skip"),
        ({"key": '["a-1", "reply", "l", 1]'}, "missing action"),
        ({"action": "skip", "key": '["a\\u0000", "reply", "l", 1]'}, "INVALID_ARGUMENT"),
    ],
)
async def test_a_bad_selection_is_a_400_and_redrives_nothing(
    store: Store, client: httpx.AsyncClient, data: dict[str, str], message: str
) -> None:
    await make_dead_letters(store)
    page = (await client.get("/dead-letters")).text
    response = await client.post(
        "/dead-letters/confirm", data={"csrf_token": csrf_token(page), **data}
    )
    assert response.status_code == 400, response.text
    assert message in response.text
    assert len(await dead_letters_now(store)) == 3


async def test_a_selection_past_the_bulk_limit_is_a_400(
    store: Store, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("a2pg.dashboard.pages.selection.BULK_LIMIT", 2)
    await make_dead_letters(store)
    page = (await client.get("/dead-letters")).text
    response = await select(client, page, boxes(page), "retry")
    assert response.status_code == 400
    assert "at most 2 rows at once" in response.text


async def test_a_selection_needs_the_token_and_a_writable_dashboard(
    store: Store, client: httpx.AsyncClient, client_for: Client
) -> None:
    await make_dead_letters(store)
    page = (await client.get("/dead-letters")).text
    keys = boxes(page)
    no_token = await client.post("/dead-letters/confirm", data={"action": "skip", "key": keys})
    assert no_token.status_code == 403 and "CSRF" in no_token.text
    secret = b"k" * 32
    writable = client_for(store, csrf_secret=secret)
    token = csrf_token((await writable.get("/dead-letters")).text)
    read_only = client_for(store, read_only=True, csrf_secret=secret)
    read_only.cookies = writable.cookies
    refused = await read_only.post(
        "/dead-letters/confirm", data={"csrf_token": token, "action": "skip", "key": keys}
    )
    assert refused.status_code == 403 and "read-only" in refused.text
    shown = (await read_only.get("/dead-letters")).text
    assert boxes(shown) == [] and 'id="selection"' not in shown
    assert len(await dead_letters_now(store)) == 3


async def test_the_selection_form_comes_back_to_the_filtered_page(
    store: Store, client: httpx.AsyncClient
) -> None:
    await make_dead_letters(store)
    await dead_letter(store, "a-3", consumer="reply")
    page = (await client.get("/dead-letters", params={"consumer": "reply"})).text
    [body] = [b for a, b in post_forms(page) if a == "/dead-letters/confirm"]
    assert hidden(body)["next"] == "/dead-letters?consumer=reply"
    assert len(boxes(page)) == 3
