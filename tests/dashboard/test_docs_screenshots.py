"""The screenshots of the dashboard's docs, taken of a real workload and checked first.

One small deployment, as an operator meets it: ``a2pg worker`` processes serving two
consumers (replies on a lane, scores on event cursors), two poison turns dead-lettered
(one retried from its head's page), an unserved consumer with a backlog, mail held
under a lease and backing off after an error, and a login (basic auth) whose retry,
pause and skip land in the audit log. Each page is checked for what it must show, then
shot into the artifacts folder; with ``A2PG_README_SCREENSHOT=1`` the shots also
become docs/images/{activity,work,head,audit}.png (docs/operating/dashboard.md shows
them), so the docs' pictures are of pages that passed their checks.
"""

from __future__ import annotations

import base64
import os
import shutil
from pathlib import Path

from playwright.async_api import FloatRect, Page, ViewportSize, expect

from a2pg import DeadLetterQuery, NewEvent, Target
from a2pg.store import Store

from .conftest import Tab
from .processes import ROOT, dashboard, workers
from .test_browser import (
    WORKER_APP,
    WORKER_OPTIONS,
    _held_and_backing_off,
    eventually,
    replies,
    turn,
)
from .test_browser_work import failed_then_completed
from .worker_app import LANE, REPLY, SCORE

DOCS_IMAGES = ROOT / "docs" / "images"
VIEWPORT: ViewportSize = {"width": 1280, "height": 720}
MAX_PNG_BYTES = 250_000
"""What one docs image may weigh (the docs site serves them as they are)."""
LOGIN, PASSWORD = "ops", "correct horse"
UNSERVED = "billing"
"""A consumer no worker runs: its backlog waits, oldest first, on the Ready list."""
MAIL = "email"
"""Mail this test claims itself: one held under a lease, one backing off, one ready."""


async def shoot_content(tab: Tab, folder: Path, name: str) -> Path:
    """The page down to the end of its content (``main``), the viewport's width: a short
    page makes a short picture, not one padded with the viewport's empty height."""
    page = tab.page
    bottom = await page.evaluate(
        "() => Math.ceil(document.querySelector('main').getBoundingClientRect().bottom"
        " + window.scrollY)"
    )
    assert isinstance(bottom, int) and bottom > 0, bottom
    path = folder / f"{name}.png"
    clip: FloatRect = {"x": 0, "y": 0, "width": VIEWPORT["width"], "height": bottom}
    await page.screenshot(path=str(path), full_page=True, clip=clip)
    return path


def keep_for_docs(path: Path, name: str) -> None:
    """Copies a screenshot to docs/images/NAME.png when asked to (checking its size)."""
    assert path.stat().st_size < MAX_PNG_BYTES, f"{path} is {path.stat().st_size} bytes"
    if os.environ.get("A2PG_README_SCREENSHOT") == "1":
        DOCS_IMAGES.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, DOCS_IMAGES / f"{name}.png")


async def workload(store: Store) -> None:
    """Everything but the workers' part: the unserved backlog, the mail claimed here, an
    order mailed on its second attempt, and the chats the workers will answer."""
    for n in range(3):
        await store.append(
            f"invoice-{n}", [NewEvent("invoice.due", {"n": n}, targets=[Target(UNSERVED)])]
        )
    await _held_and_backing_off(store, MAIL)  # mail-1 held, mail-2 backing off
    await store.append("mail-3", [NewEvent("send", {"to": "mail-3"}, targets=[Target(MAIL)])])
    await failed_then_completed(store)  # mailer: a failure, then a completion
    await store.append("chat-1", [turn(1), turn(2, poison=True), turn(3)])
    await store.append("chat-2", [turn(1), turn(2)])
    await store.append("chat-3", [turn(1), turn(2, poison=True)])


async def _worked_through(store: Store) -> bool:
    """The workers did what they can: both poison turns dead, the rest answered and scored."""
    dead = {(h.session_id, h.index) for h in await store.find_dead_letters(DeadLetterQuery())}
    if dead != {("chat-1", 2), ("chat-3", 2)}:
        return False
    stats = {s.consumer: s for s in await store.consumer_stats()}
    busy = [s for s in stats.values() if s.consumer in (REPLY, SCORE) and (s.ready or s.claimed)]
    return not busy and await replies(store, "chat-2") == [1, 2]


async def _lane_moved_on(store: Store) -> bool:
    stats = {s.consumer: s for s in await store.consumer_stats()}
    scored = stats.get(SCORE)
    return await replies(store, "chat-1") == [1, 2, 3] and not (
        scored and (scored.ready or scored.claimed)
    )


async def column(page: Page, table: str, field: str) -> list[str]:
    cells = page.locator(f"#{table} tbody td[data-field={field}]")
    return [text.strip() for text in await cells.all_inner_texts()]


async def test_the_docs_screenshots_show_checked_pages(
    postgres_store: Store, postgres_dsn: str, tab: Tab, artifacts: Path
) -> None:
    store = postgres_store
    await workload(store)
    page = tab.page
    await page.set_viewport_size(VIEWPORT)
    pair = base64.b64encode(f"{LOGIN}:{PASSWORD}".encode()).decode()
    await page.set_extra_http_headers({"Authorization": f"Basic {pair}"})
    login = {"A2PG_DASHBOARD_BASIC": f"{LOGIN}:{PASSWORD}"}
    with workers(postgres_dsn, WORKER_APP, options=WORKER_OPTIONS):
        await eventually(lambda: _worked_through(store), "the workers to do what they can")
        with dashboard(postgres_dsn, env=login) as url:
            # A head's page: the poison turn, retried from here, then answered.
            head_url = f"{url}/sessions/chat-1/heads/{REPLY}/2?lane={LANE}"
            await page.goto(head_url)
            await expect(page.locator("#state")).to_have_text("BLOCKED")  # its lane waits on it
            await expect(page.locator("#attempts tbody tr")).to_have_count(1)
            await page.locator("#head-actions").get_by_role("link", name="Retry…").click()
            await expect(page.locator("h1")).to_have_text("Retry this dead letter?")
            await page.get_by_role("button", name="Retry it").click()
            await expect(page.locator("#notice")).to_contain_text("Retried")
            await eventually(lambda: _lane_moved_on(store), "chat-1's lane to move on")
            await page.goto(head_url)
            history = await store.attempts("chat-1", consumer=REPLY, index=2, lane=LANE)
            assert [a.outcome for a in history] == ["dead_lettered", "completed"]
            rows = page.locator("#attempts tbody tr")
            await expect(rows).to_have_count(len(history))
            for row, attempt in zip(await rows.all(), history, strict=True):
                await expect(row).to_have_attribute("data-attempt", str(attempt.attempt))
                await expect(row).to_have_attribute("data-outcome", attempt.outcome)
                assert attempt.holder is not None
                await expect(row).to_contain_text(attempt.holder)
            error = rows.first.locator("details.error")
            await expect(error.locator("summary")).to_contain_text("poisoned turn 2")
            await error.locator("summary").click()
            await expect(error.locator("pre")).to_contain_text("Traceback")
            await expect(page.locator("#no-dispatch")).to_be_visible()  # it finished
            keep_for_docs(await shoot_content(tab, artifacts, "docs-head"), "head")

            # Pausing the unserved consumer from the overview: the audit log's second entry.
            await page.goto(url + "/")
            billing = page.locator(f"#consumers tr[data-consumer={UNSERVED}]")
            await billing.get_by_role("link", name="Pause…").click()
            await expect(page.locator("h1")).to_have_text(f"Pause {UNSERVED}?")
            await page.get_by_role("button", name="Pause it").click()
            await expect(page.locator("#notice")).to_contain_text("Paused")

            # Work by state: the backlog oldest first, the mail on its own tabs, a filter.
            await page.goto(url + "/work")
            ready = page.locator("#work tbody tr")
            expected = ["invoice-0", "invoice-1", "invoice-2", "mail-3"]
            await expect(ready).to_have_count(len(expected))
            sessions = [await r.get_attribute("data-session") for r in await ready.all()]
            assert sessions == expected
            counts = page.locator("#states .count")
            assert await counts.all_inner_texts() == ["4", "1", "1", "0"]
            await page.locator("#states [data-state=held]").click()
            await expect(ready).to_have_count(1)
            await expect(ready.first).to_contain_text("ops-test")
            await page.locator("#states [data-state=backing_off]").click()
            await expect(ready).to_have_count(1)
            await expect(ready.first).to_contain_text("SMTP 451: try later")
            await page.locator("#states [data-state=ready]").click()
            await page.fill("input[name=consumer]", UNSERVED)
            await page.get_by_role("button", name="Filter").click()
            await expect(ready).to_have_count(3)
            await page.fill("input[name=consumer]", "")
            await page.get_by_role("button", name="Filter").click()
            await expect(ready).to_have_count(len(expected))
            skip = page.get_by_role("button", name="Skip selected…")
            await expect(skip).to_be_disabled()
            await ready.nth(3).locator("input[type=checkbox]").check()
            await expect(skip).to_be_enabled()  # one picked: the bulk buttons wake
            keep_for_docs(await shoot_content(tab, artifacts, "docs-work"), "work")
            await skip.click()  # the audit log's third entry, once confirmed
            await expect(page.locator("h1")).to_have_text("Skip 1 live head?")
            await expect(page.locator("#confirm-heads")).to_contain_text("mail-3")
            await page.get_by_role("button", name="Skip it").click()
            await expect(page.locator("#notice")).to_contain_text("Skipped 1 live head")
            await expect(ready).to_have_count(len(expected) - 1)

            # Activity: a section per consumer that finished attempts, three charts each.
            await page.goto(url + "/activity")
            sections = page.locator("section.activity")
            names = [await s.get_attribute("data-consumer") for s in await sections.all()]
            assert names == [REPLY, SCORE, MAIL, "mailer"]  # by name
            reply = page.locator(f"section.activity[data-consumer={REPLY}]")
            await expect(reply.locator("figure.chart")).to_have_count(3)
            await expect(reply).to_contain_text("completed 6")  # chat-1's 3, 2 and 1
            await expect(reply).to_contain_text("dead-lettered 2")
            await expect(reply.locator("polyline[data-series='longest wait']")).to_have_count(1)
            scores = page.locator(f"section.activity[data-consumer={SCORE}]")
            await expect(scores).to_contain_text("completed 7")
            mailer = page.locator("section.activity[data-consumer=mailer]")
            await expect(mailer).to_contain_text("completed 1")
            await expect(mailer).to_contain_text("failed 1")
            keep_for_docs(await shoot_content(tab, artifacts, "docs-activity"), "activity")

            # The audit log: both actions, by the login, newest first.
            await page.goto(url + "/audit")
            entries = await store.audit_log()
            actions = ["cancel.skip", "pause", "redrive.retry"]
            assert [(e.actor, e.action) for e in entries] == [(LOGIN, a) for a in actions]
            await expect(page.locator("#audit tbody tr")).to_have_count(len(entries))
            assert await column(page, "audit", "action") == actions
            assert await column(page, "audit", "actor") == [LOGIN] * len(actions)
            assert await column(page, "audit", "consumer") == [MAIL, UNSERVED, REPLY]
            detail = await column(page, "audit", "detail")
            assert '"cancelled":1' in detail[0], detail
            assert '"outcome":"redriven"' in detail[2], detail
            keep_for_docs(await shoot_content(tab, artifacts, "docs-audit"), "audit")
    assert tab.dialogs == []
