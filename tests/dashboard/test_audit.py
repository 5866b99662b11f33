"""The audit log of the dashboard's actions, read back after each (on every backend): who
(the authenticated login, ``token``, or ``anonymous`` without authentication), what, how
it went; nothing for a refused request; and the ``/audit`` page listing it in pages."""

from __future__ import annotations

import base64
import json
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from a2pg.dashboard.pages import audit
from a2pg.dashboard.security import Auth
from a2pg.models import AuditEntry
from a2pg.store import Store

from .conftest import Client
from .helpers import HOSTILE, csrf_token, dead_letter
from .processes import dashboard

if TYPE_CHECKING:
    from playwright.async_api import Browser


async def token_of(store: Store, client: httpx.AsyncClient) -> str:
    """A CSRF token of ``client``'s browser, from a session page with redrive forms."""
    await dead_letter(store, "forms")
    page = await client.get("/session", params={"id": "forms"})
    assert page.status_code == 200, page.text
    return csrf_token(page.text)


def basic(user: str, password: str) -> dict[str, str]:
    pair = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {pair}"}


def key(session_id: str, consumer: str, lane: str | None, index: int) -> str:
    return json.dumps([session_id, consumer, lane, index])


async def test_redriving_one_head_records_who_and_what(
    store: Store, client: httpx.AsyncClient
) -> None:
    token = await token_of(store, client)
    index = await dead_letter(store, "s1", lane="l")
    form = {
        "csrf_token": token,
        "session": "s1",
        "consumer": "c",
        "cursor": "lane",
        "lane": "l",
        "index": str(index),
        "action": "retry",
    }
    assert (await client.post("/redrive", data=form)).status_code == 303
    [entry] = await store.audit_log()
    assert (entry.actor, entry.action) == ("anonymous", "redrive.retry")
    assert (entry.session_id, entry.consumer, entry.lane, entry.index) == ("s1", "c", "l", index)
    assert entry.detail == {"outcome": "redriven", "cursor": "lane"}
    # Again: the head is no longer dead-lettered; the attempt is recorded, saying so.
    form["action"] = "skip"
    assert (await client.post("/redrive", data=form)).status_code == 303
    again, first = await store.audit_log()
    assert first == entry
    assert (again.action, again.detail["outcome"]) == ("redrive.skip", "not_found")


async def test_a_bulk_redrive_records_one_entry_with_its_counts(
    store: Store, client: httpx.AsyncClient
) -> None:
    token = await token_of(store, client)
    one = await dead_letter(store, "b1", lane=None)
    two = await dead_letter(store, "b2", lane="l")
    keys = [key("b1", "c", None, one), key("b2", "c", "l", two), key("b2", "c", "l", 99)]
    response = await client.post(
        "/redrive/many", data={"csrf_token": token, "action": "skip", "key": keys}
    )
    assert response.status_code == 303, response.text
    [entry] = await store.audit_log()
    assert (entry.action, entry.session_id, entry.consumer, entry.index) == (
        "redrive.skip",
        None,
        None,
        None,
    )
    assert entry.detail == {"selected": 3, "redriven": 2, "gone": 1, "outcome": "redriven"}


async def test_pause_and_resume_are_recorded_with_the_basic_login(
    store: Store, client_for: Client
) -> None:
    client = client_for(store, auth=Auth(basic=("alice", "pw")))
    client.headers.update(basic("alice", "pw"))
    token = await token_of(store, client)
    for path in ("/consumers/pause", "/consumers/resume"):
        done = await client.post(path, data={"csrf_token": token, "consumer": "mailer"})
        assert done.status_code == 303, done.text
    resumed, paused = await store.audit_log()
    assert [(e.actor, e.action, e.consumer) for e in (paused, resumed)] == [
        ("alice", "pause", "mailer"),
        ("alice", "resume", "mailer"),
    ]
    assert paused.detail == resumed.detail == {}


async def test_the_bearer_token_is_recorded_as_token(store: Store, client_for: Client) -> None:
    client = client_for(store, auth=Auth(token="s3cret-token", basic=("ops", "pw")))
    client.headers["Authorization"] = "Bearer s3cret-token"
    token = await token_of(store, client)
    done = await client.post("/consumers/pause", data={"csrf_token": token, "consumer": "m"})
    assert done.status_code == 303
    [entry] = await store.audit_log()
    assert entry.actor == "token"
    assert "s3cret" not in json.dumps([entry.actor, entry.detail])


async def test_without_authentication_a_header_proves_nothing(
    store: Store, client: httpx.AsyncClient
) -> None:
    """An ``Authorization`` header sent to a dashboard without auth names no one."""
    client.headers.update(basic("mallory", "any"))
    token = await token_of(store, client)
    await client.post("/consumers/pause", data={"csrf_token": token, "consumer": "m"})
    [entry] = await store.audit_log()
    assert entry.actor == "anonymous"


async def test_refused_requests_record_nothing(
    store: Store, client: httpx.AsyncClient, client_for: Client
) -> None:
    token = await token_of(store, client)
    no_token = await client.post("/consumers/pause", data={"consumer": "m"})
    assert no_token.status_code == 403
    bad_name = await client.post("/consumers/pause", data={"csrf_token": token, "consumer": "\x00"})
    assert bad_name.status_code == 400  # the store refused it: nothing paused, nothing logged
    empty = await client.post("/redrive/many", data={"csrf_token": token, "action": "retry"})
    assert empty.status_code == 400
    read_only = client_for(store, read_only=True)
    assert (await read_only.post("/consumers/pause", data={"consumer": "m"})).status_code == 403
    assert await store.audit_log() == []


async def test_a_long_login_is_cut_to_fit_the_store(store: Store, client_for: Client) -> None:
    login = "o" * 300
    client = client_for(store, auth=Auth(basic=(login, "pw")))
    client.headers.update(basic(login, "pw"))
    token = await token_of(store, client)
    done = await client.post("/consumers/pause", data={"csrf_token": token, "consumer": "m"})
    assert done.status_code == 303
    [entry] = await store.audit_log()
    assert entry.actor == "o" * audit.ACTOR_CHARS


# -- the page ---------------------------------------------------------------------------


async def test_the_page_lists_the_newest_first_in_keyset_pages(
    store: Store, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(audit, "AUDIT_PAGE", 2)
    empty = await client.get("/audit")
    assert empty.status_code == 200
    assert "No actions recorded." in empty.text
    recorded = [
        await store.record_audit(AuditEntry(f"user-{n}", "pause", consumer=f"c{n}"))
        for n in range(3)
    ]
    first = await client.get("/audit")
    assert 'aria-current="page">Audit log</a>' in first.text
    rows = first.text.split('<tr data-id="')[1:]
    assert [row.split('"')[0] for row in rows] == [recorded[2].id, recorded[1].id]
    assert f"/audit?after={recorded[1].id}" in first.text
    second = await client.get("/audit", params={"after": recorded[1].id})
    rows = second.text.split('<tr data-id="')[1:]
    assert [row.split('"')[0] for row in rows] == [recorded[0].id]
    assert "older →" not in second.text


async def test_the_page_escapes_what_it_shows(store: Store, client: httpx.AsyncClient) -> None:
    entry = AuditEntry(HOSTILE[:100], "clear", session_id="s<1>", detail={"note": HOSTILE})
    await store.record_audit(entry)
    await store.record_audit(replace(entry, actor="cli:ops@box", lane="l", index=3))
    page = await client.get("/audit")
    assert page.status_code == 200
    assert "<script>" not in page.text and "&lt;script&gt;" in page.text
    assert 'href="/session?id=s%3C1%3E"' in page.text
    assert "cli:ops@box" in page.text


async def test_a_bad_after_is_a_400(store: Store, client: httpx.AsyncClient) -> None:
    response = await client.get("/audit", params={"after": "x" * 300})
    assert response.status_code == 400


# -- in a real browser ------------------------------------------------------------------


async def test_in_chromium_an_action_shows_on_the_audit_page_under_its_login(
    postgres_store: Store, postgres_dsn: str, browser: Browser, artifacts: Path
) -> None:
    """A real ``a2pg dashboard`` behind basic auth: the retry button, then the nav link to
    the audit log, which names the login the browser sent."""
    from playwright.async_api import expect

    await dead_letter(postgres_store, "audit-1")
    env = {"A2PG_DASHBOARD_BASIC": "alice:pw"}
    context = await browser.new_context(http_credentials={"username": "alice", "password": "pw"})
    try:
        page = await context.new_page()
        page.set_default_timeout(10_000)
        with dashboard(postgres_dsn, env=env) as url:
            await page.goto(f"{url}/session?id=audit-1")
            await page.get_by_role("button", name="Retry").click()
            await expect(page.locator("#notice")).to_contain_text("Retried")
            await page.get_by_role("link", name="Audit log").click()
            rows = page.locator("#audit tbody tr")
            await expect(rows).to_have_count(1)
            await expect(rows.first.locator("[data-field=actor]")).to_have_text("alice")
            await expect(rows.first.locator("[data-field=action]")).to_have_text("redrive.retry")
            await expect(rows.first).to_contain_text("audit-1")
            await expect(rows.first.locator("[data-field=detail]")).to_contain_text("redriven")
            await page.screenshot(path=str(artifacts / "audit.png"), full_page=True)
    finally:
        await context.close()
    [entry] = await postgres_store.audit_log()
    assert (entry.actor, entry.session_id) == ("alice", "audit-1")
