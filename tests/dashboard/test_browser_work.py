"""The work lists and a head's page in a real browser (headless Chromium via Playwright)
against a real ``a2pg dashboard`` process on PostgreSQL: a ready list whose picked row is
skipped through its confirmation, and the timeline of a head that failed, then completed.

Screenshots go to ``$A2PG_ARTIFACTS`` (or a temporary folder, printed)."""

from __future__ import annotations

from pathlib import Path

from playwright.async_api import expect

from a2pg import Claimed, Completed, NewEvent, Target
from a2pg.models import HeadQuery
from a2pg.store import Store

from .conftest import Tab
from .processes import dashboard
from .test_browser import shoot

TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "mailer.py", line 12, in send\n'
    "ConnectionError: smtp.example refused the connection"
)


async def failed_then_completed(store: Store) -> None:
    """``order-1``'s event 1 for ``mailer``: attempt 1 fails, attempt 2 completes."""
    await store.append(
        "order-1", [NewEvent("order.placed", {"order": 1}, targets=[Target("mailer")])]
    )
    for attempt, holder in ((1, "worker-a"), (2, "worker-b")):
        claimed = await store.claim_available("order-1", holder=holder, ttl=30)
        assert isinstance(claimed, Claimed) and claimed.heads[0].attempt == attempt
        if attempt == 1:
            await store.fail_attempt(
                "order-1",
                consumer="mailer",
                lane=None,
                index=1,
                attempt=1,
                error=TRACEBACK,
                max_failures=5,
            )
    done = await store.complete_attempt("order-1", consumer="mailer", lane=None, index=1, attempt=2)
    assert isinstance(done, Completed)


async def test_a_work_list_skips_a_picked_head_and_a_head_page_shows_its_attempts(
    postgres_store: Store, postgres_dsn: str, tab: Tab, artifacts: Path
) -> None:
    store = postgres_store
    await failed_then_completed(store)
    for n in (1, 2, 3):
        await store.append(
            f"chat-{n}", [NewEvent("turn", {"n": n}, targets=[Target("reply", "turns")])]
        )
    with dashboard(postgres_dsn) as url:
        page = tab.page
        await page.goto(f"{url}/work")
        rows = page.locator("#work tbody tr")
        await expect(rows).to_have_count(3)
        await expect(page.locator("#states [aria-current=page]")).to_contain_text("Ready")
        await shoot(tab, artifacts, "work-ready")
        # Pick chat-2's head and skip it, through its confirmation.
        skip = page.get_by_role("button", name="Skip selected…")
        await expect(skip).to_be_disabled()  # nothing ticked yet
        await rows.nth(1).locator("input[type=checkbox]").check()
        await skip.click()
        await expect(page.locator("h1")).to_have_text("Skip 1 live head?")
        await expect(page.locator("#confirm-heads")).to_contain_text("chat-2")
        await shoot(tab, artifacts, "work-confirm-skip")
        assert len(await store.find_heads(HeadQuery())) == 3  # nothing changed yet
        await page.get_by_role("button", name="Skip it").click()
        await expect(page.locator("#notice")).to_contain_text("Skipped 1 live head")
        await expect(rows).to_have_count(2)
        left = [f.head.session_id for f in await store.find_heads(HeadQuery())]
        assert left == ["chat-1", "chat-3"]
        # A row's index opens its head's page.
        await rows.first.get_by_role("link", name="1", exact=True).click()
        await expect(page.locator("#state")).to_have_text("ready")
        await expect(page.locator("#event-type")).to_have_text("turn")

        await page.goto(f"{url}/sessions/order-1/heads/mailer/1?cursor=event")
        timeline = page.locator("#attempts tbody tr")
        await expect(timeline).to_have_count(2)
        await expect(timeline.nth(0)).to_contain_text("failed")
        await expect(timeline.nth(0)).to_contain_text("worker-a")
        await expect(timeline.nth(1)).to_contain_text("completed")
        await expect(timeline.nth(1)).to_contain_text("worker-b")
        traceback = timeline.nth(0).locator("details.error")
        await expect(traceback.locator("summary")).to_have_text(
            "ConnectionError: smtp.example refused the connection"
        )
        await expect(traceback.locator("pre")).to_be_hidden()
        await traceback.locator("summary").click()
        await expect(traceback.locator("pre")).to_contain_text('File "mailer.py", line 12')
        await expect(page.locator("#no-dispatch")).to_be_visible()
        await shoot(tab, artifacts, "head-timeline")
    assert tab.dialogs == []
