"""No destructive action from one click: Skip and Pause lead to a confirmation page (a
GET that changes nothing), whose one button is the CSRF-checked POST to the action's
own route; bulk actions go through their listing first. Retry and Resume stay one POST."""

from __future__ import annotations

import html
import re

import httpx
import pytest

from a2pg import NewEvent, Target
from a2pg.store import Store

from .conftest import Client
from .helpers import csrf_token, dead_letter
from .test_pause import claimable, mailer_work

POST_FORM = re.compile(r'<form method="post" action="([^"]*)"[^>]*>(.*?)</form>', re.S)


def post_forms(page: str) -> list[tuple[str, str]]:
    """(action, body) of each POST form of a page."""
    return [(action, body) for action, body in POST_FORM.findall(page)]


def hidden(body: str) -> dict[str, str]:
    return {
        name: html.unescape(value)
        for name, value in re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', body)
    }


def skip_link(page: str) -> str:
    [href] = re.findall(r'<a class="button secondary" href="([^"]+)">Skip…</a>', page)
    return html.unescape(href)


async def test_no_list_page_skips_pauses_or_redrives_in_bulk_from_one_click(
    store: Store, client: httpx.AsyncClient
) -> None:
    await dead_letter(store, "s1")
    await dead_letter(store, "s2", lane=None)
    await store.append("s3", [NewEvent("job", 1, targets=[Target("mailer")])])
    pages = [("/", {}), ("/session", {"id": "s1"}), ("/session", {"id": "s2"})]
    pages += [("/dead-letters", {}), ("/sessions", {})]
    seen: set[str] = set()
    for path, params in pages:
        page = (await client.get(path, params=params)).text
        for action, body in post_forms(page):
            seen.add(action)
            assert action in ("/redrive", "/consumers/resume", "/dead-letters/confirm"), action
            if action == "/redrive":
                assert 'value="skip"' not in body and hidden(body).get("action") != "skip"
    assert seen == {"/redrive", "/dead-letters/confirm"}  # retry forms and the selection


async def test_skip_is_confirmed_on_its_own_page_then_done_by_its_post(
    store: Store, client: httpx.AsyncClient
) -> None:
    index = await dead_letter(store, "s1", error="E: it broke")
    session = (await client.get("/session", params={"id": "s1"})).text
    confirm = await client.get(skip_link(session))
    assert confirm.status_code == 200
    assert "Skip this dead letter?" in confirm.text
    assert "its work is not done" in confirm.text
    assert "E: it broke" in confirm.text and 'id="confirm-head"' in confirm.text
    assert len(await store.dead_letters("s1")) == 1  # looking changed nothing
    [(action, body)] = post_forms(confirm.text)
    assert action == "/redrive"
    fields = hidden(body)
    assert fields == {
        "csrf_token": csrf_token(confirm.text),
        "session": "s1",
        "consumer": "c",
        "index": str(index),
        "cursor": "lane",
        "lane": "l",
        "action": "skip",
        "next": "/session?id=s1",
    }
    assert re.search(r'<button type="submit" class="danger">Skip it</button>', body)
    assert '<a href="/session?id=s1">Cancel</a>' in confirm.text
    done = await client.post("/redrive", data=fields)
    assert done.status_code == 303
    assert done.headers["location"] == "/session?id=s1&notice=skip&count=1"
    assert await store.dead_letters("s1") == []


async def test_an_event_cursors_skip_confirmation_names_no_lane(
    store: Store, client: httpx.AsyncClient
) -> None:
    index = await dead_letter(store, "s1", lane=None)
    page = (await client.get("/dead-letters")).text
    confirm = await client.get(skip_link(page))
    [(_, body)] = post_forms(confirm.text)
    fields = hidden(body)
    assert fields["cursor"] == "event" and "lane" not in fields
    assert fields["index"] == str(index) and fields["next"] == "/dead-letters"
    assert (await client.post("/redrive", data=fields)).status_code == 303
    assert await store.dead_letters("s1") == []


async def test_a_skip_confirmation_of_a_head_no_longer_dead_has_no_button(
    store: Store, client: httpx.AsyncClient
) -> None:
    await dead_letter(store, "s1")
    link = skip_link((await client.get("/session", params={"id": "s1"})).text)
    [head] = await store.dead_letters("s1")
    await store.redrive("s1", consumer="c", index=head.index, action="retry", lane="l")
    confirm = await client.get(link)
    assert confirm.status_code == 200
    assert "no longer dead-lettered" in confirm.text
    assert post_forms(confirm.text) == []


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"consumer": "c", "index": "1", "action": "skip"}, "missing session"),
        ({"session": "s1", "index": "1", "action": "skip"}, "missing consumer"),
        ({"session": "s1", "consumer": "c", "action": "skip"}, "missing index"),
        ({"session": "s1", "consumer": "c", "index": "0", "action": "skip"}, "at least 1"),
        ({"session": "s1", "consumer": "c", "index": "x", "action": "skip"}, "whole number"),
        ({"session": "s1", "consumer": "c", "index": "1", "action": "nuke"}, "retry or skip"),
        ({"session": "s1", "consumer": "c", "index": "1", "cursor": "lane"}, "missing lane"),
        ({"session": "s\x00", "consumer": "c", "index": "1", "action": "skip"}, "INVALID_ARG"),
    ],
)
async def test_a_bad_skip_confirmation_is_a_400(
    store: Store, client: httpx.AsyncClient, query: dict[str, str], message: str
) -> None:
    await dead_letter(store, "s1")
    response = await client.get("/redrive/confirm", params=query)
    assert response.status_code == 400, response.text
    assert message in response.text
    assert len(await store.dead_letters("s1")) == 1


async def test_a_confirmation_sends_back_only_inside_the_dashboard(
    store: Store, client: httpx.AsyncClient
) -> None:
    index = await dead_letter(store, "s1")
    query = {"session": "s1", "consumer": "c", "index": str(index), "cursor": "lane"}
    query |= {"lane": "l", "action": "skip", "next": "https://evil.example/"}
    confirm = (await client.get("/redrive/confirm", params=query)).text
    [(_, body)] = post_forms(confirm)
    assert hidden(body)["next"] == "/dead-letters"
    assert "evil.example" not in confirm


async def test_pause_is_confirmed_on_its_own_page_then_done_by_its_post(
    store: Store, client: httpx.AsyncClient
) -> None:
    await mailer_work(store)
    overview = (await client.get("/")).text
    [link] = re.findall(r'href="(/consumers/pause/confirm\?[^"]+)">Pause…</a>', overview)
    confirm = await client.get(html.unescape(link))
    assert confirm.status_code == 200
    assert "Pause mailer?" in confirm.text and "no worker claims its heads" in confirm.text
    row = confirm.text[confirm.text.index('id="confirm-consumer"') :]
    assert re.search(r'<td>mailer</td><td class="num">1</td>', row)  # one ready head
    assert await claimable(store) == ["mailer"]  # looking paused nothing
    [(action, body)] = post_forms(confirm.text)
    assert action == "/consumers/pause"
    fields = hidden(body)
    assert fields == {"csrf_token": csrf_token(confirm.text), "consumer": "mailer", "next": "/"}
    done = await client.post("/consumers/pause", data=fields)
    assert done.status_code == 303 and done.headers["location"] == "/?notice=paused&count=1"
    assert await claimable(store) == []
    overview = (await client.get("/")).text
    assert "Pause…" not in overview and ">Resume</button>" in overview


async def test_a_consumer_with_nothing_yet_may_be_paused_too(
    store: Store, client: httpx.AsyncClient
) -> None:
    confirm = await client.get("/consumers/pause/confirm", params={"consumer": "later"})
    assert confirm.status_code == 200
    assert "No work or live worker is known for it yet" in confirm.text
    [(action, body)] = post_forms(confirm.text)
    assert action == "/consumers/pause" and hidden(body)["consumer"] == "later"


@pytest.mark.parametrize(
    ("query", "message"),
    [({}, "missing consumer"), ({"consumer": "x" * 1025}, "longer than 1024")],
)
async def test_a_bad_pause_confirmation_is_a_400(
    store: Store, client: httpx.AsyncClient, query: dict[str, str], message: str
) -> None:
    response = await client.get("/consumers/pause/confirm", params=query)
    assert response.status_code == 400
    assert message in response.text


async def test_read_only_refuses_the_confirmation_pages(store: Store, client_for: Client) -> None:
    index = await dead_letter(store, "s1")
    client = client_for(store, read_only=True)
    query = {"session": "s1", "consumer": "c", "index": str(index), "cursor": "lane"}
    for path, params in [
        ("/redrive/confirm", query | {"lane": "l", "action": "skip"}),
        ("/consumers/pause/confirm", {"consumer": "c"}),
    ]:
        response = await client.get(path, params=params)
        assert response.status_code == 403
        assert "read-only" in response.text
    page = (await client.get("/dead-letters")).text
    assert "/redrive/confirm" not in page and "Skip…" not in page
    assert "/consumers/pause/confirm" not in (await client.get("/")).text
