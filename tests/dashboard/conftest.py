"""Dashboard fixtures: in-process clients (the ASGI app called through httpx, on the
test's store) and a real headless Chromium driven by Playwright."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from a2pg.dashboard import create_app
from a2pg.store import Store
from tests.cli.conftest import _no_ambient_database, cli  # noqa: F401 - the CLI's fixtures

if TYPE_CHECKING:
    from playwright.async_api import Browser, Dialog, Page

Client = Callable[..., httpx.AsyncClient]


@pytest.fixture
async def client_for() -> AsyncIterator[Client]:
    """``client_for(store, read_only=..., auth=...)``: an httpx client of a dashboard app
    over ``store``, running in the test's event loop (where the store's connections are);
    ``base_url`` (``https://...`` for a request over TLS) and ``root_path`` are the
    server's."""
    opened: list[httpx.AsyncClient] = []

    def make(
        store: Store,
        *,
        base_url: str = "http://dashboard.test",
        root_path: str = "",
        **options: Any,
    ) -> httpx.AsyncClient:
        app = create_app(store, **options)
        client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app, root_path=root_path), base_url=base_url
        )
        opened.append(client)
        return client

    yield make
    for client in opened:
        await client.aclose()


@pytest.fixture
async def client(store: Store, client_for: Client) -> httpx.AsyncClient:
    """A dashboard with actions, no authentication, over the backend under test."""
    return client_for(store)


# -- a real browser --------------------------------------------------------------------

CHROMIUM = "/usr/bin/chromium"
"""Debian's chromium (``apt-get install chromium``; ``.ci/run`` installs it). Playwright
never downloads a browser here."""
ARTIFACTS_ENV = "A2PG_ARTIFACTS"


def _unavailable(reason: str) -> None:
    """No browser: a skip on a developer's machine, a failure in CI."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"browser tests cannot run in CI: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
async def browser() -> AsyncIterator[Browser]:
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        _unavailable("playwright is not installed (pip install -e '.[dev]')")
    if not os.access(CHROMIUM, os.X_OK):
        _unavailable(f"{CHROMIUM} is missing (apt-get install chromium)")
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        yield launched
        await launched.close()


@dataclass
class Tab:
    """A page of its own browser context, and every dialog (``alert``...) it opened."""

    page: Page
    dialogs: list[str] = field(default_factory=list)


@pytest.fixture
async def tab(browser: Browser) -> AsyncIterator[Tab]:
    context = await browser.new_context(viewport={"width": 1360, "height": 560})
    page = await context.new_page()
    page.set_default_timeout(10_000)
    opened = Tab(page)

    async def on_dialog(dialog: Dialog) -> None:
        opened.dialogs.append(dialog.message)
        await dialog.dismiss()

    page.on("dialog", on_dialog)
    yield opened
    await context.close()


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where screenshots go: ``$A2PG_ARTIFACTS`` or a temporary folder (printed)."""
    given = os.environ.get(ARTIFACTS_ENV)
    folder = Path(given) if given else tmp_path_factory.mktemp("dashboard-artifacts")
    folder.mkdir(parents=True, exist_ok=True)
    print(f"\ndashboard screenshots: {folder}")
    return folder
