"""The pages read what the store holds: sessions by prefix in keyset pages, a session's
events by index window, its cursors and dead letters; bad input is a 400, never a 500."""

from __future__ import annotations

import json
import re

import httpx
import pytest

from a2pg import NewEvent, Target
from a2pg.dashboard.lookup import find_sessions, just_before
from a2pg.store import Store

from .helpers import append_plain, dead_letter


def _session_links(html: str) -> list[str]:
    return re.findall(r'<a href="/session\?id=([^"&]+)">', html)


@pytest.mark.parametrize(
    "prefix", ["a", "ab", "a\x01", "a\x01\x01", "\x01", "\ue000", "é", "z" * 255]
)
def test_just_before_sorts_below_the_prefix(prefix: str) -> None:
    before = just_before(prefix)
    if before is not None:
        assert before < prefix
        assert not before.startswith(prefix)
        before.encode("utf-8")  # text, no lone surrogate


async def test_sessions_by_prefix_in_keyset_pages(store: Store) -> None:
    ids = ["a", "a-1", "a-2", "a-3", "a-30", "a.", "b", "`z", "a\U0010ffff"]
    for session_id in ids:
        await append_plain(store, session_id, [1])

    async def walk(prefix: str, limit: int) -> list[str]:
        seen: list[str] = []
        after: str | None = None
        while True:
            page = await find_sessions(store, prefix=prefix, after=after, limit=limit)
            seen += [s.session_id for s in page.sessions]
            if page.next_after is None:
                return seen
            after = page.next_after

    for limit in (1, 2, 50):
        assert await walk("a-", limit) == ["a-1", "a-2", "a-3", "a-30"]
        assert await walk("a", limit) == ["a", "a-1", "a-2", "a-3", "a-30", "a.", "a\U0010ffff"]
        assert await walk("", limit) == sorted(ids)
        assert await walk("c", limit) == []
        assert await walk("a-3", limit) == ["a-3", "a-30"]


async def test_sessions_page_searches_and_pages(store: Store, client: httpx.AsyncClient) -> None:
    for n in range(3):
        await append_plain(store, f"chat-{n}", [n])
    await append_plain(store, "other", [0])
    page = await client.get("/sessions", params={"q": "chat-"})
    assert _session_links(page.text) == ["chat-0", "chat-1", "chat-2"]
    everything = await client.get("/sessions")
    assert _session_links(everything.text) == ["chat-0", "chat-1", "chat-2", "other"]
    after = await client.get("/sessions", params={"after": "chat-1"})
    assert _session_links(after.text) == ["chat-2", "other"]


async def test_sessions_sorted_by_lag_within_the_page(
    store: Store, client: httpx.AsyncClient
) -> None:
    await store.append("idle", [NewEvent("note", 1)])
    await store.append("busy", [NewEvent("job", 1, targets=[Target("w")])])
    page = await client.get("/sessions", params={"sort": "lag"})
    assert page.status_code == 200
    assert _session_links(page.text) == ["busy", "idle"]
    assert "within this page only" in page.text


async def test_sessions_list_shows_blocked_events_beside_pending_heads(
    store: Store, client: httpx.AsyncClient
) -> None:
    """A session whose only work waits behind a dead letter reads pending 0, blocked 2."""
    await dead_letter(store, "stuck", consumer="c", lane="l")
    await store.append("stuck", [NewEvent("job", n, targets=[Target("c", "l")]) for n in (2, 3)])
    page = (await client.get("/sessions")).text
    headers = re.findall(r"<th[^>]*>([^<]*)</th>", page)
    assert headers[3:6] == ["pending heads", "blocked events", "dead letters"]
    [row] = re.findall(r"<tr>(.*?)</tr>", page.split("<tbody>")[1], re.S)
    cells = dict(re.findall(r'data-field="(\w+)">(\d+)</td>', row))
    assert cells == {"pending": "0", "blocked": "2", "dead_letters": "1"}
    assert "idle only when nothing is blocked" in page


async def test_session_page_shows_events_cursors_and_dead_letters(
    store: Store, client: httpx.AsyncClient
) -> None:
    await append_plain(store, "s1", [{"n": n} for n in range(3)])
    index = await dead_letter(store, "s1", consumer="reply", lane="turns", error="E: bad")
    page = (await client.get("/session", params={"id": "s1"})).text
    assert 'id="head">4<' in page
    cursors = page[page.index('id="cursors"') :]
    assert "reply" in cursors and "turns" in cursors and "BLOCKED" in cursors
    dead = page[page.index('id="session-dead-letters"') : page.index('id="cursors"')]
    assert f'<td class="num">{index}</td>' in dead and "E: bad" in dead
    assert 'value="retry"' in dead  # one POST; Skip leads to its confirmation first
    assert 'href="/redrive/confirm?session=s1&amp;consumer=reply&amp;cursor=lane' in dead
    assert "action=skip" in dead and 'value="skip"' not in dead
    assert 'data-stream="/session/stream?id=s1&amp;after=4"' in page


async def test_session_events_are_paged_by_index(store: Store, client: httpx.AsyncClient) -> None:
    await store.append("s1", [NewEvent("note", {"n": n}) for n in range(1, 121)])

    def indexes(html: str) -> list[int]:
        events = html[html.index('id="events"') :]
        return [int(i) for i in re.findall(r'<tr>\s*<td class="num">(\d+)</td>', events)]

    newest = (await client.get("/session", params={"id": "s1"})).text
    assert indexes(newest) == list(range(71, 121))
    assert 'after=20">← older' in newest and 'after=0">oldest' in newest
    oldest = (await client.get("/session", params={"id": "s1", "after": "0"})).text
    assert indexes(oldest) == list(range(1, 51))
    past_end = (await client.get("/session", params={"id": "s1", "after": "500"})).text
    assert indexes(past_end) == list(range(71, 121))


async def test_large_payloads_are_collapsed(store: Store, client: httpx.AsyncClient) -> None:
    await append_plain(store, "s1", [{"big": "x" * 2000}, {"small": 1}])
    page = (await client.get("/session", params={"id": "s1"})).text
    assert page.count('<details class="payload">') == 1
    assert '<pre class="payload">{\n  &#34;small&#34;: 1\n}</pre>' in page


async def test_a_session_page_of_1_mib_payloads_is_bounded_in_bytes(
    store: Store, client: httpx.AsyncClient
) -> None:
    """50 payloads of 1 MiB (each ``<``, 4 bytes escaped) once made a 210 MB page: each is
    shown cut, with a marker giving its whole size, and the page stays a few MiB."""
    text = "<" * ((1 << 20) - 40)
    payloads = [{"n": n, "text": text} for n in range(50)]
    for start in range(0, 50, 10):  # one append writes at most 16 MiB
        await store.append("huge", [NewEvent("big", p) for p in payloads[start : start + 10]])
    response = await client.get("/session", params={"id": "huge"})
    assert response.status_code == 200
    assert len(response.content) < 4 << 20, len(response.content)
    page = response.text
    events = page[page.index('id="events"') :]
    assert len(re.findall(r'<tr>\s*<td class="num">(\d+)</td>', events)) == 50
    sizes = [len(json.dumps(p, separators=(",", ":")).encode()) for p in payloads]
    assert re.findall(r"\(truncated: (\d+) bytes in all\)</pre>", events) == [str(n) for n in sizes]
    assert events.count('<details class="payload">') == 50


async def test_unknown_session_is_404(store: Store, client: httpx.AsyncClient) -> None:
    response = await client.get("/session", params={"id": "nobody"})
    assert response.status_code == 404
    assert "no session" in response.text


@pytest.mark.parametrize(
    ("path", "params", "message"),
    [
        ("/session", {}, "missing id"),
        ("/session", {"id": "s1", "after": "x"}, "after must be a whole number"),
        ("/session", {"id": "s1", "after": "-1"}, "after must be at least 0"),
        ("/session", {"id": "x" * 300}, "session id"),
        ("/sessions", {"after": "y" * 2000}, "after is longer than"),
        ("/session/stream", {"id": "s1", "after": "nope"}, "after must be a whole number"),
    ],
)
async def test_bad_input_is_a_400(
    store: Store, client: httpx.AsyncClient, path: str, params: dict[str, str], message: str
) -> None:
    await append_plain(store, "s1", [1])
    response = await client.get(path, params=params)
    assert response.status_code == 400, response.text
    assert message in response.text


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"index": "abc"}, "index must be a whole number"),
        ({"index": "0"}, "index must be at least 1"),
        ({"action": "delete"}, "action must be retry or skip"),
        ({"cursor": "lane", "lane": ""}, "missing lane"),
        ({"consumer": ""}, "missing consumer"),
    ],
)
async def test_bad_redrive_forms_are_a_400_and_change_nothing(
    store: Store, client: httpx.AsyncClient, change: dict[str, str], message: str
) -> None:
    from .helpers import csrf_token

    index = await dead_letter(store, "s1")
    page = await client.get("/session", params={"id": "s1"})
    form = {
        "csrf_token": csrf_token(page.text),
        "session": "s1",
        "consumer": "c",
        "cursor": "lane",
        "lane": "l",
        "index": str(index),
        "action": "retry",
        **change,
    }
    response = await client.post("/redrive", data=form)
    assert response.status_code == 400, response.text
    assert message in response.text
    assert len(await store.dead_letters("s1")) == 1


async def test_a_redrive_of_what_is_no_longer_dead_says_so(
    store: Store, client: httpx.AsyncClient
) -> None:
    from .helpers import csrf_token

    index = await dead_letter(store, "s1")
    page = await client.get("/session", params={"id": "s1"})
    form = {
        "csrf_token": csrf_token(page.text),
        "session": "s1",
        "consumer": "c",
        "cursor": "lane",
        "lane": "l",
        "index": str(index),
        "action": "retry",
        "next": "/session?id=s1",
    }
    first = await client.post("/redrive", data=form)
    assert first.headers["location"].endswith("notice=retry&count=1")
    second = await client.post("/redrive", data=form)
    assert second.headers["location"].endswith("notice=missing&count=0")
    shown = await client.get(second.headers["location"])
    assert "no longer dead-lettered" in shown.text


async def test_a_session_page_lists_a_bounded_number_of_cursors(
    store: Store, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("a2pg.dashboard.pages.sessions.ROWS_SHOWN", 2)
    await store.append("s1", [NewEvent("job", n, targets=[Target("w")]) for n in range(5)])
    page = (await client.get("/session", params={"id": "s1"})).text
    cursors = page[page.index('id="cursors"') : page.index('id="events"')]
    assert cursors.count("<tr>") == 1 + 2  # the header and two rows
    assert "and 3 more" in cursors
