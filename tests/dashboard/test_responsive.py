"""The dashboard at phone width (390 x 844) in headless Chromium against a real
``a2pg dashboard`` process: no page scrolls sideways (a wide table scrolls inside its
own box), and at desktop width every table still fits as it did. Then the confirmations
and the row selection, clicked through as an operator would.

Screenshots go to ``$A2PG_ARTIFACTS``; with ``A2PG_README_SCREENSHOT=1`` the phone
overview also goes to docs/images/dashboard-phone.png.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest
from playwright.async_api import Browser, Page, ViewportSize, expect

from a2pg import NewEvent, Target
from a2pg.store import Store

from .conftest import Tab
from .helpers import dead_letter
from .processes import ROOT, dashboard
from .test_overview import beat

PHONE: ViewportSize = {"width": 390, "height": 844}
DESKTOP: ViewportSize = {"width": 1360, "height": 800}
PHONE_SCREENSHOT = ROOT / "docs" / "images" / "dashboard-phone.png"
LONG = "chat-session-" + "with-a-long-id-" * 3
ERROR = "TimeoutError: the model did not answer within 30 s " * 4

WIDTH = "document.documentElement.scrollWidth"
BOXES = """Array.from(document.querySelectorAll('main table')).map(t => {
  const box = t.closest('.scroll');
  return box ? [t.id || t.className, box.scrollWidth - box.clientWidth] : [t.id, null];
})"""
"""Each table, and how far its scroll box overflows (None: a table in no box)."""


async def make_everything(store: Store) -> None:
    """Wide data on every page: long ids and errors, big payloads, many consumers."""
    for n in range(3):
        await dead_letter(
            store, f"{LONG}{n}", consumer="reply-consumer", error=ERROR, payload={"n": n}
        )
    await dead_letter(store, "s-event", consumer="audit-log-consumer", lane=None, error=ERROR)
    await store.append(f"{LONG}0", [NewEvent("note", {"text": "y" * 600, "list": list(range(80))})])
    targets = [Target(name) for name in ("billing", "email-sender", "search-indexer")]
    await store.append("queue-1", [NewEvent("job", {"n": 1}, targets=targets)])
    await store.heartbeat(replace(beat("worker-host-1-4242-0123456789abcdef", 10), interval=600))


@pytest.fixture
async def phone(browser: Browser) -> AsyncIterator[Page]:
    context = await browser.new_context(viewport=PHONE)
    page = await context.new_page()
    page.set_default_timeout(10_000)
    yield page
    await context.close()


async def widths(page: Page) -> tuple[int, list[list[object]]]:
    return await page.evaluate(WIDTH), await page.evaluate(BOXES)


async def pages_of(page: Page, url: str) -> AsyncIterator[str]:
    """Goes to each page an operator sees; yields its name once it is shown."""
    for name, path in [
        ("overview", "/"),
        ("sessions", "/sessions"),
        ("session", f"/session?id={LONG}0"),
        ("dead-letters", "/dead-letters"),
        ("confirm-all", "/dead-letters/confirm?action=skip"),
        ("missing", "/session?id=nobody"),
        ("activity", "/activity"),
        ("audit", "/audit"),
    ]:
        await page.goto(url + path)
        yield name
    await page.goto(url + "/dead-letters")
    await page.get_by_role("link", name="Skip…").first.click()
    await expect(page.locator("h1")).to_have_text("Skip this dead letter?")
    yield "confirm-skip"
    await page.goto(url + "/")
    await page.get_by_role("link", name="Pause…").first.click()
    await expect(page.locator("h1")).to_contain_text("Pause ")
    yield "confirm-pause"


async def test_no_page_scrolls_sideways_on_a_phone(
    postgres_store: Store, postgres_dsn: str, phone: Page, artifacts: Path
) -> None:
    await make_everything(postgres_store)
    with dashboard(postgres_dsn) as url:
        async for name in pages_of(phone, url):
            if name == "session":  # the live tail too, with an event in it
                await expect(phone.locator("#tail-status")).to_have_text("live.")
                await postgres_store.append(f"{LONG}0", [NewEvent(LONG, {"text": "z" * 900})])
                await expect(phone.locator("#tail li")).to_have_count(1)
            page_width, boxes = await widths(phone)
            assert page_width <= PHONE["width"], (name, page_width)
            assert all(overflow is not None for _, overflow in boxes), (name, boxes)
            await phone.screenshot(path=str(artifacts / f"phone-{name}.png"), full_page=True)
            if name == "overview":
                # The wide consumer table is all there: its own box scrolls.
                overflow = dict((str(k), v) for k, v in boxes)["consumers"]
                assert isinstance(overflow, int) and overflow > 0
                keep_for_docs(artifacts / "phone-overview.png")


async def test_at_desktop_width_every_table_still_fits(
    postgres_store: Store, postgres_dsn: str, tab: Tab
) -> None:
    await make_everything(postgres_store)
    await tab.page.set_viewport_size(DESKTOP)
    with dashboard(postgres_dsn) as url:
        async for name in pages_of(tab.page, url):
            page_width, boxes = await widths(tab.page)
            assert page_width <= DESKTOP["width"], (name, page_width)
            assert [b for b in boxes if b[1]] == [], (name, boxes)  # every table fits


def keep_for_docs(path: Path) -> None:
    if os.environ.get("A2PG_README_SCREENSHOT") == "1":
        shutil.copyfile(path, PHONE_SCREENSHOT)


# -- the confirmations and the selection, clicked ------------------------------------------


async def test_skip_and_pause_are_confirmed_before_anything_changes(
    postgres_store: Store, postgres_dsn: str, tab: Tab, artifacts: Path
) -> None:
    store = postgres_store
    await dead_letter(store, "skip-1", error="E: skip me")
    await store.append("mail-1", [NewEvent("send", None, targets=[Target("mailer")])])
    with dashboard(postgres_dsn) as url:
        page = tab.page
        await page.goto(url + "/session?id=skip-1")
        await page.get_by_role("link", name="Skip…").click()
        await expect(page.locator("h1")).to_have_text("Skip this dead letter?")
        await expect(page.locator("#confirm-head")).to_contain_text("E: skip me")
        await tab.page.screenshot(path=str(artifacts / "confirm-skip.png"), full_page=True)
        assert len(await store.dead_letters("skip-1")) == 1
        await page.get_by_role("link", name="Cancel").click()
        await expect(page.locator("#session-id")).to_have_text("skip-1")
        assert len(await store.dead_letters("skip-1")) == 1
        await page.get_by_role("link", name="Skip…").click()
        await page.get_by_role("button", name="Skip it").click()
        await expect(page.locator("#notice")).to_contain_text("Skipped")
        assert await store.dead_letters("skip-1") == []

        await page.goto(url + "/")
        row = page.locator('tr[data-consumer="mailer"]')
        await row.get_by_role("link", name="Pause…").click()
        await expect(page.locator("h1")).to_have_text("Pause mailer?")
        assert not [s for s in await store.consumer_stats() if s.paused]
        await page.get_by_role("button", name="Pause it").click()
        await expect(page.locator("#notice")).to_contain_text("Paused")
        assert [s.consumer for s in await store.consumer_stats() if s.paused] == ["mailer"]
        await row.get_by_role("button", name="Resume").click()  # one click: undoes nothing
        await expect(page.locator("#notice")).to_contain_text("Resumed")
        assert not [s for s in await store.consumer_stats() if s.paused]
    assert tab.dialogs == []


async def test_rows_are_selected_then_confirmed_then_retried(
    postgres_store: Store, postgres_dsn: str, tab: Tab, artifacts: Path
) -> None:
    store = postgres_store
    for n in range(3):
        await dead_letter(store, f"pick-{n}", consumer="reply")
    with dashboard(postgres_dsn) as url:
        page = tab.page
        await page.goto(url + "/dead-letters")
        retry = page.get_by_role("button", name="Retry selected…")
        await expect(retry).to_be_disabled()  # nothing ticked yet
        boxes = page.locator('#dead-letters input[name="key"]')
        await expect(boxes).to_have_count(3)
        select_all = page.locator("input[data-select-all]")
        await select_all.check()
        for n in range(3):
            await expect(boxes.nth(n)).to_be_checked()
        await select_all.uncheck()
        await expect(retry).to_be_disabled()
        await boxes.nth(0).check()
        await boxes.nth(2).check()
        await expect(select_all).not_to_be_checked()
        await retry.click()
        await expect(page.locator("h1")).to_have_text("Retry 2 dead letters?")
        await expect(page.locator("table.dead-letters tbody tr")).to_have_count(2)
        await tab.page.screenshot(path=str(artifacts / "confirm-selection.png"), full_page=True)
        for n in range(3):
            assert len(await store.dead_letters(f"pick-{n}")) == 1  # not yet
        await page.get_by_role("button", name="Retry these 2").click()
        await expect(page.locator("#notice")).to_contain_text("Retried 2 dead letters")
        left = [n for n in range(3) if await store.dead_letters(f"pick-{n}")]
        assert left == [1]
    assert tab.dialogs == []
