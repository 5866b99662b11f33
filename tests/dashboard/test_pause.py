"""The dashboard's pause and resume actions: POST /consumers/pause and /consumers/resume,
CSRF-checked like the redrive actions, refused when read-only, a bad name a 400 that
pauses nothing."""

from __future__ import annotations

import httpx
import pytest

from a2pg import NewEvent, Target
from a2pg.store import Store

from .conftest import Client
from .helpers import csrf_token, dead_letter


async def token_of(store: Store, client: httpx.AsyncClient) -> str:
    """A CSRF token of ``client``'s browser, read from a page with a form (a session with
    a dead letter has redrive forms)."""
    await dead_letter(store, "forms")
    page = await client.get("/session", params={"id": "forms"})
    return csrf_token(page.text)


async def mailer_work(store: Store) -> None:
    await store.append("s1", [NewEvent("job", None, targets=[Target("mailer")])])


async def claimable(store: Store) -> list[str]:
    """The consumers of the heads ``claim_any`` takes now for mailer (then handed back)."""
    heads = await store.claim_any(holder="tester", ttl=30, consumers=None, limit=10)
    mine = [h for h in heads if h.consumer == "mailer"]
    for head in heads:
        await store.release_claims(head.session_id, holder="tester", claims=[head.attempt_ref])
    return [h.consumer for h in mine]


async def test_pause_then_resume_from_the_dashboard(
    store: Store, client: httpx.AsyncClient
) -> None:
    token = await token_of(store, client)
    await mailer_work(store)
    paused = await client.post("/consumers/pause", data={"csrf_token": token, "consumer": "mailer"})
    assert paused.status_code == 303
    assert paused.headers["location"] == "/?notice=paused&count=1"
    assert await claimable(store) == []
    resumed = await client.post(
        "/consumers/resume",
        data={"csrf_token": token, "consumer": "mailer", "next": "/sessions"},
    )
    assert resumed.status_code == 303
    assert resumed.headers["location"] == "/sessions?notice=resumed&count=1"
    assert await claimable(store) == ["mailer"]
    page = await client.get("/sessions?notice=resumed&count=1")
    assert "Resumed: the consumer's ready heads are claimable again." in page.text
    page = await client.get("/?notice=paused&count=1")
    assert "Paused: workers skip the consumer's heads" in page.text


@pytest.mark.parametrize("path", ["/consumers/pause", "/consumers/resume"])
async def test_redirects_stay_inside_the_dashboard(
    store: Store, client: httpx.AsyncClient, path: str
) -> None:
    token = await token_of(store, client)
    response = await client.post(
        path, data={"csrf_token": token, "consumer": "mailer", "next": "https://evil.example/"}
    )
    assert response.status_code == 303
    assert response.headers["location"].startswith("/?notice=")


async def test_a_post_without_a_valid_csrf_token_pauses_nothing(
    store: Store, client: httpx.AsyncClient, client_for: Client
) -> None:
    token = await token_of(store, client)
    await mailer_work(store)
    form = {"consumer": "mailer"}
    no_token = await client.post("/consumers/pause", data=form)
    assert no_token.status_code == 403
    assert "CSRF" in no_token.text
    wrong = await client.post("/consumers/pause", data={**form, "csrf_token": "0" * 64})
    assert wrong.status_code == 403
    other = client_for(store)  # another browser: the token is bound to this one's cookie
    stolen = await other.post("/consumers/pause", data={**form, "csrf_token": token})
    assert stolen.status_code == 403
    assert await claimable(store) == ["mailer"]


async def test_a_resume_without_a_valid_csrf_token_resumes_nothing(
    store: Store, client: httpx.AsyncClient
) -> None:
    await token_of(store, client)
    await mailer_work(store)
    await store.pause_consumers(["mailer"])
    refused = await client.post("/consumers/resume", data={"consumer": "mailer"})
    assert refused.status_code == 403
    assert await claimable(store) == []


async def test_read_only_refuses_pause_and_resume(store: Store, client_for: Client) -> None:
    secret = b"k" * 32
    writable = client_for(store, csrf_secret=secret)
    token = await token_of(store, writable)
    read_only = client_for(store, read_only=True, csrf_secret=secret)
    read_only.cookies = writable.cookies
    await mailer_work(store)
    for path in ("/consumers/pause", "/consumers/resume"):
        refused = await read_only.post(path, data={"csrf_token": token, "consumer": "mailer"})
        assert refused.status_code == 403
        assert "read-only" in refused.text
    assert await claimable(store) == ["mailer"]


BAD = [("", "missing consumer"), ("a\x00b", "INVALID_ARGUMENT"), ("x" * 1025, "longer than")]


@pytest.mark.parametrize("path", ["/consumers/pause", "/consumers/resume"])
@pytest.mark.parametrize(("name", "says"), BAD, ids=["empty", "nul", "too-long"])
async def test_a_bad_name_is_a_400_and_pauses_nothing(
    store: Store, client: httpx.AsyncClient, path: str, name: str, says: str
) -> None:
    token = await token_of(store, client)
    await mailer_work(store)
    response = await client.post(path, data={"csrf_token": token, "consumer": name})
    assert response.status_code == 400, response.text
    assert says in response.text
    assert await claimable(store) == ["mailer"]


async def test_a_name_past_the_stores_limit_is_a_400(
    store: Store, client: httpx.AsyncClient
) -> None:
    token = await token_of(store, client)
    await mailer_work(store)
    response = await client.post(
        "/consumers/pause", data={"csrf_token": token, "consumer": "m" * 1000}
    )
    assert response.status_code == 400, response.text
    assert "INVALID_ARGUMENT" in response.text
    assert await claimable(store) == ["mailer"]
