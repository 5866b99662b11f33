"""The dashboard in a real browser (headless Chromium via Playwright) against a real
``a2pg dashboard`` process on PostgreSQL, with real ``a2pg worker`` processes.

Screenshots of every page go to ``$A2PG_ARTIFACTS`` (or a temporary folder, printed);
with ``A2PG_README_SCREENSHOT=1`` the overview's also goes to docs/images/dashboard.png.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path

from playwright.async_api import expect

from a2pg import Claimed, DeadLetterQuery, NewEvent, Target
from a2pg.store import Store

from .conftest import Tab
from .helpers import HOSTILE, dead_letter
from .processes import ROOT, dashboard, workers
from .test_overview import overview_numbers, store_numbers
from .worker_app import LANE, REPLY, SCORE

WAIT = 20.0
"""Bound of every wait on the store or the workers."""
WORKER_APP = "tests.dashboard.worker_app:app"
WORKER_OPTIONS = ("--max-failures", "1", "--poll-interval", "0.2", "--concurrency", "4")
README_SCREENSHOT = ROOT / "docs" / "images" / "dashboard.png"


async def eventually(check: Callable[[], Awaitable[bool]], what: str) -> None:
    """Polls ``check`` until it holds, for at most ``WAIT`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT
    while not await check():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.1)


async def shoot(tab: Tab, folder: Path, name: str) -> Path:
    path = folder / f"{name}.png"
    await tab.page.screenshot(path=str(path), full_page=True)
    return path


def turn(n: int, *, poison: bool = False) -> NewEvent:
    return NewEvent(
        "turn",
        {"turn": n, "text": f"message {n}", "poison": poison},
        id=f"turn-{n}",
        targets=[Target(REPLY, LANE), Target(SCORE)],
    )


async def replies(store: Store, session_id: str) -> list[int]:
    return [e.payload["turn"] for e in await store.read(session_id) if e.type == "reply"]


async def test_a_dead_letter_is_retried_with_its_button_and_the_lane_moves_on(
    postgres_store: Store, postgres_dsn: str, tab: Tab, artifacts: Path
) -> None:
    store = postgres_store
    await store.append("chat-1", [turn(1), turn(2, poison=True), turn(3)])
    with workers(postgres_dsn, WORKER_APP, options=WORKER_OPTIONS):
        await eventually(
            lambda: _dead_at(store, "chat-1", 2), "the poison turn to be dead-lettered"
        )
        assert await replies(store, "chat-1") == [1]  # turn 3 waits behind the poison
        with dashboard(postgres_dsn) as url:
            page = tab.page
            await page.goto(f"{url}/session?id=chat-1")
            dead = page.locator("#session-dead-letters tbody tr")
            await expect(dead).to_have_count(1)
            await expect(dead.first).to_contain_text("BLOCKED")
            await expect(dead.first).to_contain_text("poisoned turn 2")
            await expect(page.locator("#cursors")).to_contain_text("BLOCKED")
            await shoot(tab, artifacts, "session-dead-letter")
            await dead.first.get_by_role("button", name="Retry").click()
            await expect(page.locator("#notice")).to_contain_text("Retried")
            await eventually(
                lambda: _replied(store, "chat-1", [1, 2, 3]), "the lane to move on after retry"
            )
            assert await store.dead_letters("chat-1") == []
            await page.reload()
            await expect(page.locator("#session-dead-letters")).to_have_count(0)
            await shoot(tab, artifacts, "session")
    assert tab.dialogs == []


async def _dead_at(store: Store, session_id: str, index: int) -> bool:
    return any(h.index == index for h in await store.dead_letters(session_id))


async def _replied(store: Store, session_id: str, turns: list[int]) -> bool:
    return await replies(store, session_id) == turns


async def test_the_live_tail_shows_events_appended_after_the_page_opened(
    postgres_store: Store, postgres_dsn: str, tab: Tab, artifacts: Path
) -> None:
    store = postgres_store
    await store.append("tail-1", [NewEvent("note", {"n": 1})])
    with dashboard(postgres_dsn) as url:
        page = tab.page
        await page.goto(f"{url}/session?id=tail-1")
        await expect(page.locator("#tail-status")).to_have_text("live.")
        await expect(page.locator("#tail li")).to_have_count(0)  # only what comes next
        await store.append("tail-1", [NewEvent("note", {"text": "appended later"})])
        await store.append("tail-1", [NewEvent("note", {"big": "y" * 1000})])
        items = page.locator("#tail li")
        await expect(items).to_have_count(2)
        await expect(items.nth(0)).to_contain_text("appended later")
        await expect(items.nth(0)).to_contain_text("2")
        await expect(items.nth(1).locator("details.payload")).to_have_count(1)
        await shoot(tab, artifacts, "live-tail")


async def test_a_hostile_payload_renders_inert(
    postgres_store: Store, postgres_dsn: str, tab: Tab, artifacts: Path
) -> None:
    store = postgres_store
    await dead_letter(store, "evil<b>1</b>", error=HOSTILE, payload={"text": HOSTILE})
    await store.append("evil<b>1</b>", [NewEvent(HOSTILE, HOSTILE)])
    with dashboard(postgres_dsn) as url:
        page = tab.page
        await page.goto(f"{url}/sessions")
        await expect(page.locator("#sessions")).to_contain_text("evil<b>1</b>")
        await page.get_by_role("link", name="evil<b>1</b>").click()
        await expect(page.locator("#session-id")).to_have_text("evil<b>1</b>")
        await expect(page.locator("#events")).to_contain_text("<script>alert('pwned')</script>")
        await expect(page.locator("#tail-status")).to_have_text("live.")
        await store.append("evil<b>1</b>", [NewEvent("note", {"later": HOSTILE})])
        await expect(page.locator("#tail")).to_contain_text("onerror=")
        assert await page.locator("main img, main script, main b").count() == 0
        await shoot(tab, artifacts, "hostile")
    assert tab.dialogs == []


async def test_read_only_has_no_buttons_and_refuses_posts(
    postgres_store: Store, postgres_dsn: str, tab: Tab, artifacts: Path
) -> None:
    store = postgres_store
    index = await dead_letter(store, "ro-1")
    with dashboard(postgres_dsn, "--read-only") as url:
        page = tab.page
        for path in ("/session?id=ro-1", "/sessions"):
            await page.goto(url + path)
            await expect(page.locator("#read-only")).to_be_visible()
            assert await page.locator("form[method=post]").count() == 0
            assert await page.get_by_role("button", name="Retry").count() == 0
            assert await page.get_by_role("button", name="Skip").count() == 0
        await page.goto(url + "/session?id=ro-1")
        await expect(page.locator("#session-dead-letters")).to_contain_text("BLOCKED")
        await shoot(tab, artifacts, "read-only")
        response = await page.request.post(
            url + "/redrive",
            form={
                "session": "ro-1",
                "consumer": "c",
                "cursor": "lane",
                "lane": "l",
                "index": str(index),
                "action": "retry",
            },
        )
        assert response.status == 403
    assert len(await store.dead_letters("ro-1")) == 1


async def test_a_post_without_the_csrf_token_is_refused(
    postgres_store: Store, postgres_dsn: str, tab: Tab
) -> None:
    store = postgres_store
    index = await dead_letter(store, "csrf-1")
    with dashboard(postgres_dsn) as url:
        page = tab.page
        await page.goto(url + "/session?id=csrf-1")  # the browser has its CSRF cookie now
        form: dict[str, str | float | bool] = {
            "session": "csrf-1",
            "consumer": "c",
            "cursor": "lane",
            "lane": "l",
            "index": str(index),
            "action": "retry",
        }
        refused = await page.request.post(url + "/redrive", form=form)
        assert refused.status == 403
        forged = await page.request.post(url + "/redrive", form={**form, "csrf_token": "ab" * 32})
        assert forged.status == 403
        assert len(await store.dead_letters("csrf-1")) == 1
        # The page's own form carries the token, and works.
        await page.get_by_role("button", name="Retry").click()
        await expect(page.locator("#notice")).to_contain_text("Retried")
    assert await store.dead_letters("csrf-1") == []


async def test_the_overview_matches_the_store_and_a_bulk_retry_moves_the_lane_on(
    postgres_store: Store, postgres_dsn: str, tab: Tab, artifacts: Path
) -> None:
    store = postgres_store
    for n in range(3):  # work for a consumer no worker runs: ready, and lagging
        await store.append(f"queue-{n}", [NewEvent("job", {"n": n}, targets=[Target("billing")])])
    await _held_and_backing_off(store, "email")
    await store.append("chat-1", [turn(1), turn(2, poison=True), turn(3)])
    await store.append("chat-2", [turn(1), turn(2)])
    with workers(postgres_dsn, WORKER_APP, options=WORKER_OPTIONS):
        await eventually(lambda: _dead_at(store, "chat-1", 2), "the poison to be dead-lettered")
        await eventually(lambda: _replied(store, "chat-2", [1, 2]), "chat-2 to be answered")
        await eventually(lambda: _settled(store), "the workers to finish what they can")
        with dashboard(postgres_dsn) as url:
            page = tab.page
            await page.goto(url + "/")
            await expect(page.locator("#consumers")).to_contain_text("billing")
            expected = await store_numbers(store)
            assert expected["billing"]["ready"] == 3
            assert expected["email"]["claimed"] == 1 and expected["email"]["backing_off"] == 1
            assert expected[REPLY]["dead_letters"] == 1 and expected[REPLY]["blocked_lanes"] == 1
            assert overview_numbers(await page.content()) == expected
            if await store.workers():  # once workers send heartbeats
                await expect(page.locator("#workers tbody tr")).to_have_count(
                    len(await store.workers())
                )
            keep_for_readme(await shoot(tab, artifacts, "overview"))

            await page.goto(url + "/sessions")
            await expect(page.locator("#sessions tbody tr")).to_have_count(7)
            await shoot(tab, artifacts, "sessions")

            await page.goto(url + "/dead-letters")
            await page.fill("input[name=consumer]", REPLY)
            await page.get_by_role("button", name="Filter").click()
            rows = page.locator("#dead-letters tbody tr")
            await expect(rows).to_have_count(1)
            await expect(rows.first).to_contain_text("chat-1")
            await shoot(tab, artifacts, "dead-letters")
            await page.get_by_role("button", name="Retry all…").click()
            await expect(page.locator("h1")).to_have_text("Retry 1 dead letters?")
            await shoot(tab, artifacts, "confirm")
            await page.get_by_role("button", name="Retry these 1").click()
            await expect(page.locator("#notice")).to_contain_text("Retried 1 dead letters")
            await eventually(lambda: _replied(store, "chat-1", [1, 2, 3]), "the lane to move on")
            assert await store.find_dead_letters(DeadLetterQuery()) == []
    assert tab.dialogs == []


async def _held_and_backing_off(store: Store, consumer: str) -> None:
    """A head under a lease and one waiting for its retry, claimed by this test."""
    heads = []
    for session_id in ("mail-1", "mail-2"):
        await store.append(
            session_id, [NewEvent("send", {"to": session_id}, targets=[Target(consumer)])]
        )
        claimed = await store.claim_available(session_id, holder="ops-test", ttl=600)
        assert isinstance(claimed, Claimed)
        heads += claimed.heads
    head = heads[-1]
    await store.fail_attempt(
        "mail-2",
        consumer=consumer,
        lane=None,
        index=head.index,
        attempt=head.attempt,
        error="SMTP 451: try later",
        max_failures=5,
        retry_after=600,
    )


async def _settled(store: Store) -> bool:
    """Nothing claimed or ready but the unserved consumer's work."""
    stats = {s.consumer: s for s in await store.consumer_stats()}
    busy = [s for name, s in stats.items() if name in (REPLY, SCORE) and (s.ready or s.claimed)]
    return not busy and REPLY in stats and stats[REPLY].blocked == 1


def keep_for_readme(path: Path) -> None:
    """Copies a screenshot to docs/images/dashboard.png when asked to."""
    if os.environ.get("A2PG_README_SCREENSHOT") == "1":
        README_SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, README_SCREENSHOT)
