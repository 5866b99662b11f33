"""``/healthz`` and ``/readyz``: answered without credentials, cookies or data; readiness
follows the store (503 while its database is unreachable) and loads it at most once per
``FRESH_SECONDS`` however often it is asked."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
from starlette.responses import PlainTextResponse
from starlette.types import Receive, Scope, Send

from a2pg import StoreUnavailable
from a2pg.dashboard import Auth
from a2pg.dashboard.app import close_tails
from a2pg.dashboard.probes import Probes, Readiness
from a2pg.store import Store

from .conftest import Client
from .test_outages import Down, outages

PROBE_HEADERS = {"cache-control", "content-type", "content-length", "x-content-type-options"}


def plain(response: httpx.Response) -> None:
    """What every probe answer is: text, never cached, no cookie, nothing else."""
    assert response.headers["cache-control"] == "no-store"
    assert response.headers["content-type"].startswith("text/plain")
    assert response.headers["x-content-type-options"] == "nosniff"
    assert "set-cookie" not in response.headers
    assert set(response.headers) <= PROBE_HEADERS | {"allow"}


async def test_both_answer_without_credentials_while_pages_still_need_them(
    store: Store, client_for: Client
) -> None:
    client = client_for(store, auth=Auth(token="tok", basic=("ops", "pw")))
    health = await client.get("/healthz")
    assert (health.status_code, health.text) == (200, "ok\n")
    plain(health)
    ready = await client.get("/readyz")
    assert (ready.status_code, ready.text) == (200, "ready\n")
    plain(ready)
    assert (await client.get("/")).status_code == 401
    assert (await client.get("/healthz/x")).status_code == 401
    assert (await client.get("/readyz", params={"x": 1})).status_code == 200  # a query is ok


@pytest.mark.parametrize(
    "kind",
    [
        "postgres refused",
        "postgres pool timeout",
        "sqlite cannot open",
        "a store's STORE_UNAVAILABLE",
    ],
)
async def test_readiness_is_a_503_while_the_database_is_unreachable(
    kind: str, tmp_path: Path, client_for: Client
) -> None:
    client = client_for(cast(Store, Down((await outages(tmp_path))[kind])))
    ready = await client.get("/readyz")
    assert (ready.status_code, ready.text) == (503, "not ready: database unavailable\n")
    plain(ready)
    health = await client.get("/healthz")  # the process serves: restarting it cures nothing
    assert (health.status_code, health.text) == (200, "ok\n")
    assert (await client.get("/")).status_code == 503


async def test_any_other_failure_is_not_ready_without_its_message(client_for: Client) -> None:
    client = client_for(cast(Store, Down(RuntimeError("secret detail at db.internal:5432"))))
    ready = await client.get("/readyz")
    assert (ready.status_code, ready.text) == (503, "not ready: store check failed\n")


async def test_head_has_no_body_and_other_methods_are_refused(
    store: Store, client_for: Client
) -> None:
    client = client_for(store)
    for path in ("/healthz", "/readyz"):
        head = await client.head(path)
        assert head.status_code == 200 and head.content == b""
        plain(head)
        posted = await client.post(path)
        assert posted.status_code == 405 and posted.headers["allow"] == "GET, HEAD"
        plain(posted)


@pytest.mark.parametrize("root_path", ["/a2pg", "/ops/a2pg"])
async def test_they_live_under_the_root_path(
    store: Store, client_for: Client, root_path: str
) -> None:
    client = client_for(store, root_path=root_path, auth=Auth(token="tok"))
    assert (await client.get(f"{root_path}/healthz")).text == "ok\n"
    assert (await client.get(f"{root_path}/readyz")).text == "ready\n"


async def test_a_stopping_server_is_not_ready(store: Store) -> None:
    from a2pg.dashboard import create_app

    app = create_app(store)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://dashboard.test"
    ) as client:
        assert (await client.get("/readyz")).status_code == 200
        close_tails(app)  # what the server calls on SIGTERM
        ready = await client.get("/readyz")
        assert (ready.status_code, ready.text) == (503, "not ready: shutting down\n")
        assert (await client.get("/healthz")).status_code == 200


# -- readiness over time: a store that comes and goes, a clock the test turns -----------


class Switch:
    """A store whose ``registered_consumers`` answers, fails as an outage, or hangs."""

    def __init__(self) -> None:
        self.state = "up"
        self.calls = 0
        self.release = asyncio.Event()

    async def registered_consumers(self) -> list[Any]:
        self.calls += 1
        if self.state == "down":
            raise StoreUnavailable(message="connection refused")
        if self.state == "hung":
            await self.release.wait()
        return []


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def _nothing(scope: Scope, receive: Receive, send: Send) -> None:
    await PlainTextResponse("the app", status_code=418)(scope, receive, send)


@pytest.fixture
async def probed() -> AsyncIterator[tuple[httpx.AsyncClient, Switch, Clock]]:
    switch, clock = Switch(), Clock()
    readiness = Readiness(cast(Store, switch), fresh=5.0, deadline=0.2, clock=clock)
    app = Probes(_nothing, readiness=readiness)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://d.test") as client:
        yield client, switch, clock


async def status(client: httpx.AsyncClient) -> tuple[int, str]:
    response = await client.get("/readyz")
    return response.status_code, response.text


async def test_an_answer_counts_for_a_few_seconds_then_is_asked_again(
    probed: tuple[httpx.AsyncClient, Switch, Clock],
) -> None:
    client, switch, clock = probed
    assert await status(client) == (200, "ready\n")
    for _ in range(20):
        assert await status(client) == (200, "ready\n")
    assert switch.calls == 1  # however often it is asked
    switch.state = "down"
    clock.now += 4.9
    assert (await status(client))[0] == 200  # still fresh
    clock.now += 0.2
    assert await status(client) == (503, "not ready: database unavailable\n")
    assert await status(client) == (503, "not ready: database unavailable\n")
    assert switch.calls == 3  # a failure is not kept: each probe asks again
    switch.state = "up"
    assert await status(client) == (200, "ready\n")
    assert (await client.get("/other")).status_code == 418  # the rest passes on


async def test_a_store_that_hangs_is_not_ready_past_the_deadline_and_asked_once(
    probed: tuple[httpx.AsyncClient, Switch, Clock],
) -> None:
    client, switch, _ = probed
    switch.state = "hung"
    answers = await asyncio.gather(*(status(client) for _ in range(5)))
    assert answers == [(503, "not ready: the store did not answer within 0.2s\n")] * 5
    assert switch.calls == 1  # one read in flight, shared
    assert await status(client) == (503, "not ready: the store did not answer within 0.2s\n")
    assert switch.calls == 1  # still that one: never a pile of hung reads
    switch.release.set()
    await asyncio.sleep(0)
    assert await status(client) == (200, "ready\n")
    assert switch.calls == 1
