"""A head's page (``/sessions/{session}/heads/{consumer}/{index}``): its event, its cursor's
dispatch now, the timeline of every finished attempt, and the actions its state allows
(cancel a live head, redrive a dead one, each confirmed first)."""

from __future__ import annotations

import html
import re
from urllib.parse import quote

import httpx
import pytest

from a2pg import Claimed, Completed, Head, NewEvent, Target
from a2pg.ids import FakeClock
from a2pg.store import Store

from .conftest import Client
from .helpers import HOSTILE, csrf_token, dead_letter

TRACEBACK = 'Traceback (most recent call last):\n  File "job.py", line 3\nValueError: bad turn'


def attempt_rows(page: str) -> list[tuple[str, str]]:
    """(attempt, outcome) of each timeline row."""
    return re.findall(r'<tr data-attempt="(\d+)" data-outcome="(\w+)">', page)


def head_url(session_id: str, consumer: str, index: int, query: str = "cursor=event") -> str:
    names = (quote(session_id, safe=""), quote(consumer, safe=""))
    return f"/sessions/{names[0]}/heads/{names[1]}/{index}" + (f"?{query}" if query else "")


async def claim(store: Store, session_id: str, holder: str = "w-1") -> Head:
    claimed = await store.claim_available(session_id, holder=holder, ttl=30)
    assert isinstance(claimed, Claimed)
    [head] = claimed.heads
    return head


async def failed_then_completed(store: Store, clock: FakeClock) -> None:
    """s1's event 1 for mailer: attempt 1 fails (a traceback), attempt 2 completes."""
    await store.append("s1", [NewEvent("send", {"to": "ann"}, targets=[Target("mailer")])])
    first = await claim(store, "s1")
    clock.advance(2)
    await store.fail_attempt(
        "s1",
        consumer="mailer",
        lane=None,
        index=1,
        attempt=first.attempt,
        error=TRACEBACK,
        max_failures=5,
    )
    second = await claim(store, "s1", holder="w-2")
    clock.advance(0.5)
    done = await store.complete_attempt(
        "s1", consumer="mailer", lane=None, index=1, attempt=second.attempt
    )
    assert isinstance(done, Completed)


async def test_a_finished_heads_timeline_shows_each_attempt(
    store: Store, client: httpx.AsyncClient, clock: FakeClock
) -> None:
    await failed_then_completed(store, clock)
    response = await client.get(head_url("s1", "mailer", 1))
    assert response.status_code == 200
    page = response.text
    assert 'id="event-type">send<' in page and "ann" in page
    assert 'id="no-dispatch"' in page  # finished: no cursor has it as its head
    assert attempt_rows(page) == [("1", "failed"), ("2", "completed")]
    timeline = page[page.index('id="attempts"') :]
    assert "<summary>ValueError: bad turn</summary>" in timeline
    assert "<pre>Traceback (most recent call last):\n  File &#34;job.py&#34;, line 3" in timeline
    assert "2.0 s" in timeline and "500 ms" in timeline  # how long each took
    assert "w-1" in timeline and "w-2" in timeline
    assert 'id="head-actions"' not in page  # nothing to cancel or redrive


async def test_a_held_head_shows_its_running_attempt_and_is_cancelled_after_confirming(
    store: Store, client: httpx.AsyncClient
) -> None:
    await store.append("s1", [NewEvent("job", targets=[Target("billing", "main")])])
    await claim(store, "s1")
    url = head_url("s1", "billing", 1, "lane=main")
    page = (await client.get(url)).text
    assert 'id="state" class="state-held">held<' in page
    assert attempt_rows(page) == [("1", "running")]
    [form] = re.findall(r'<form method="post" action="/work/confirm"[^>]*>(.*?)</form>', page, re.S)
    [key] = re.findall(r'name="key" value="([^"]+)"', form)
    key = html.unescape(key)
    assert key == '["s1", "billing", "main", 1]'
    data = {"csrf_token": csrf_token(page), "action": "skip", "key": key, "next": url}
    confirm = await client.post("/work/confirm", data=data)
    assert "Skip 1 live head?" in confirm.text
    assert (await store.cursors("s1"))[0].head == 1  # not yet
    done = await client.post("/work/cancel", data=data)
    assert done.status_code == 303
    assert done.headers["location"] == url + "&notice=cancel-skip&count=1"
    after = (await client.get(done.headers["location"])).text
    assert "Skipped 1 live head" in after
    assert attempt_rows(after) == [("1", "cancelled")]
    assert 'id="no-dispatch"' in after


async def test_a_dead_head_offers_its_redrive_confirmations(
    store: Store, client: httpx.AsyncClient
) -> None:
    index = await dead_letter(store, "s1", consumer="reply", lane="turns", error=TRACEBACK)
    url = head_url("s1", "reply", index, "lane=turns")
    page = (await client.get(url)).text
    assert 'class="state-blocked">BLOCKED<' in page
    assert attempt_rows(page) == [("1", "dead_lettered")]
    actions = page[page.index('id="head-actions"') :]
    for action in ("retry", "skip"):
        href = (
            "/redrive/confirm?session=s1&amp;consumer=reply&amp;cursor=lane&amp;lane=turns"
            f"&amp;index={index}&amp;action={action}&amp;next="
        )
        assert href in actions
    assert '<form method="post" action="/work/confirm"' not in page
    # The confirmation's button redrives it, and sends the browser back here.
    link = html.unescape(re.findall(r'href="(/redrive/confirm[^"]*action=retry[^"]*)"', page)[0])
    confirm = (await client.get(link)).text
    assert f'name="next" value="{html.escape(url)}"' in confirm


async def test_the_session_and_dead_letter_pages_link_here(
    store: Store, client: httpx.AsyncClient
) -> None:
    index = await dead_letter(store, "s1", consumer="reply", lane="turns")
    await store.append("s1", [NewEvent("job", targets=[Target("mailer")])])
    session = (await client.get("/session", params={"id": "s1"})).text
    lane_link = f'href="/sessions/s1/heads/reply/{index}?lane=turns"'
    assert session.count(lane_link) == 2  # its dead letter row and its cursor row
    assert 'href="/sessions/s1/heads/mailer/2?cursor=event"' in session
    dead = (await client.get("/dead-letters")).text
    assert lane_link in dead


async def test_names_holding_slashes_and_spaces_are_linked_and_read_back(
    store: Store, client: httpx.AsyncClient
) -> None:
    session_id, consumer = "team/a b?x=1", "mail/out"
    await store.append(session_id, [NewEvent("job", targets=[Target(consumer)])])
    page = (await client.get("/session", params={"id": session_id})).text
    [link] = re.findall(r'<a href="(/sessions/[^"]+)">1</a>', page)
    assert html.unescape(link) == head_url(session_id, consumer, 1)
    head = await client.get(html.unescape(link))
    assert head.status_code == 200
    assert 'id="state" class="state-ready">ready<' in head.text
    assert html.escape(session_id) in head.text


async def test_without_a_cursor_named_every_cursor_at_the_index_counts(
    store: Store, client: httpx.AsyncClient
) -> None:
    await store.append("s1", [NewEvent("job", targets=[Target("c"), Target("c", "l")])])
    heads = await store.claim_available("s1", holder="w", ttl=30)
    assert isinstance(heads, Claimed)
    for head in heads.heads:
        await store.fail_attempt(
            "s1",
            consumer="c",
            lane=head.lane,
            index=1,
            attempt=head.attempt,
            error="boom",
            max_failures=5,
        )
    page = (await client.get(head_url("s1", "c", 1, ""))).text
    assert "<th>lane</th>" in page.split('id="attempts"')[1]
    assert len(attempt_rows(page)) == 2
    event_only = (await client.get(head_url("s1", "c", 1))).text
    assert len(attempt_rows(event_only)) == 1


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/sessions/s1/heads/mailer/9", 404),  # no such head
        ("/sessions/nobody/heads/mailer/1", 404),
        ("/sessions/s1/heads/mailer", 404),  # not a head's path
        ("/sessions/s1/mailer/1", 404),
        ("/sessions/s1/heads/mailer/x", 400),
        ("/sessions/s1/heads/mailer/0", 400),
        ("/sessions/s1/heads/mailer/99999999999999999999", 400),
        ("/sessions/s1/heads/%FF/1", 400),  # not UTF-8
        ("/sessions/" + "s" * 300 + "/heads/mailer/1", 400),  # past the store's limit
    ],
)
async def test_bad_head_paths(
    store: Store, client: httpx.AsyncClient, path: str, status: int
) -> None:
    await store.append("s1", [NewEvent("job", targets=[Target("mailer")])])
    response = await client.get(path)
    assert response.status_code == status, response.text


async def test_read_only_shows_no_action(store: Store, client_for: Client) -> None:
    await store.append("s1", [NewEvent("job", targets=[Target("mailer")])])
    await dead_letter(store, "s2", consumer="reply")
    read_only = client_for(store, read_only=True)
    for url in (head_url("s1", "mailer", 1), head_url("s2", "reply", 1, "lane=l")):
        page = (await read_only.get(url)).text
        assert 'id="state"' in page and 'id="head-actions"' not in page


async def test_a_hostile_error_and_payload_are_shown_as_text(
    store: Store, client: httpx.AsyncClient
) -> None:
    await dead_letter(store, "s1", consumer="reply", error=HOSTILE, payload=HOSTILE)
    page = (await client.get(head_url("s1", "reply", 1, "lane=l"))).text
    assert "<script>alert" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(" in page
