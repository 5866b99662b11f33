"""What the dashboard refuses: forged or token-less POSTs, any write when read-only,
requests without credentials; and what it never does: print store data as markup."""

from __future__ import annotations

import base64

import httpx
import pytest

from a2pg.dashboard import Auth
from a2pg.errors import A2Error
from a2pg.store import Store

from .conftest import Client
from .helpers import HOSTILE, append_plain, csrf_token, dead_letter


async def test_hostile_text_is_escaped_everywhere(store: Store, client: httpx.AsyncClient) -> None:
    session = "s<b>x</b>"
    await dead_letter(
        store, session, consumer="c<i>", lane="l<u>", error=HOSTILE, payload={"text": HOSTILE}
    )
    for path, params in [
        ("/session", {"id": session}),
        ("/sessions", {"q": "s<"}),
        ("/sessions", {"q": HOSTILE}),
    ]:
        response = await client.get(path, params=params)
        assert response.status_code == 200, response.text
        page = response.text
        assert "<script>alert" not in page
        assert "<img src=x" not in page
        assert "<b>x</b>" not in page and "<i>" not in page and "<u>" not in page
        csp = response.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    page = (await client.get("/session", params={"id": session})).text
    assert "&lt;script&gt;alert(&#39;pwned&#39;)&lt;/script&gt;" in page
    assert "s&lt;b&gt;x&lt;/b&gt;" in page


async def test_post_without_a_valid_csrf_token_is_refused_and_changes_nothing(
    store: Store, client: httpx.AsyncClient, client_for: Client
) -> None:
    index = await dead_letter(store, "s1")
    form = {
        "session": "s1",
        "consumer": "c",
        "cursor": "lane",
        "lane": "l",
        "index": str(index),
        "action": "retry",
    }
    page = await client.get("/session", params={"id": "s1"})
    token = csrf_token(page.text)

    no_token = await client.post("/redrive", data=form)
    assert no_token.status_code == 403
    assert "CSRF" in no_token.text
    wrong = await client.post("/redrive", data={**form, "csrf_token": "0" * 64})
    assert wrong.status_code == 403
    # A token is bound to the browser's own cookie: another browser cannot use it.
    other = client_for(store)
    stolen = await other.post("/redrive", data={**form, "csrf_token": token})
    assert stolen.status_code == 403
    assert len(await store.dead_letters("s1")) == 1

    done = await client.post("/redrive", data={**form, "csrf_token": token})
    assert done.status_code == 303
    assert done.headers["location"].startswith("/session?id=s1") or done.headers[
        "location"
    ].startswith("/dead-letters")
    assert await store.dead_letters("s1") == []


async def test_the_redrive_form_returns_to_the_page_it_was_on(
    store: Store, client: httpx.AsyncClient
) -> None:
    index = await dead_letter(store, "s1", lane=None)
    page = await client.get("/session", params={"id": "s1"})
    assert 'name="cursor" value="event"' in page.text
    response = await client.post(
        "/redrive",
        data={
            "csrf_token": csrf_token(page.text),
            "session": "s1",
            "consumer": "c",
            "cursor": "event",
            "index": str(index),
            "action": "skip",
            "next": "/session?id=s1",
        },
    )
    assert response.status_code == 303
    assert response.headers["location"] == "/session?id=s1&notice=skip&count=1"
    assert await store.dead_letters("s1") == []
    again = await client.get(response.headers["location"])
    assert "Skipped" in again.text


@pytest.mark.parametrize("target", ["https://evil.example/", "//evil.example/", "\\\\evil"])
async def test_redirects_stay_inside_the_dashboard(
    store: Store, client: httpx.AsyncClient, target: str
) -> None:
    index = await dead_letter(store, "s1")
    page = await client.get("/session", params={"id": "s1"})
    response = await client.post(
        "/redrive",
        data={
            "csrf_token": csrf_token(page.text),
            "session": "s1",
            "consumer": "c",
            "cursor": "lane",
            "lane": "l",
            "index": str(index),
            "action": "retry",
            "next": target,
        },
    )
    assert response.status_code == 303
    assert response.headers["location"].startswith("/dead-letters?")


async def test_read_only_shows_no_action_and_refuses_posts(
    store: Store, client_for: Client
) -> None:
    index = await dead_letter(store, "s1")
    secret = b"k" * 32
    client = client_for(store, read_only=True, csrf_secret=secret)
    for path, params in [("/session", {"id": "s1"}), ("/sessions", {})]:
        page = (await client.get(path, params=params)).text
        assert "read-only" in page
        assert 'method="post"' not in page
        assert "<button" not in page.replace('<button type="submit">Search</button>', "")
    # Even a valid token (from a dashboard with actions, same secret, same browser) fails.
    writable = client_for(store, csrf_secret=secret)
    page = (await writable.get("/session", params={"id": "s1"})).text
    client.cookies = writable.cookies
    refused = await client.post(
        "/redrive",
        data={
            "csrf_token": csrf_token(page),
            "session": "s1",
            "consumer": "c",
            "cursor": "lane",
            "lane": "l",
            "index": str(index),
            "action": "retry",
        },
    )
    assert refused.status_code == 403
    assert "read-only" in refused.text
    assert (await client.post("/redrive/many", data={})).status_code == 403
    assert len(await store.dead_letters("s1")) == 1


def _basic(user: str, password: str) -> dict[str, str]:
    encoded = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {encoded}"}


async def test_a_bearer_token_is_required_when_set(store: Store, client_for: Client) -> None:
    client = client_for(store, auth=Auth(token="s3cret-token"))
    for path in ("/", "/sessions", "/static/dashboard.js", "/session/stream?id=x"):
        response = await client.get(path)
        assert response.status_code == 401, path
        assert response.headers["www-authenticate"].startswith("Bearer")
    assert (await client.post("/redrive", data={})).status_code == 401
    wrong = await client.get("/sessions", headers={"Authorization": "Bearer s3cret-tokeN"})
    assert wrong.status_code == 401
    basic = await client.get("/sessions", headers=_basic("s3cret-token", "x"))
    assert basic.status_code == 401
    right = await client.get("/sessions", headers={"Authorization": "Bearer s3cret-token"})
    assert right.status_code == 200


async def test_basic_auth_is_required_when_set(store: Store, client_for: Client) -> None:
    client = client_for(store, auth=Auth(basic=("ops", "pa:ss")))
    response = await client.get("/sessions")
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Basic realm=")
    assert (await client.get("/sessions", headers=_basic("ops", "pa:sx"))).status_code == 401
    assert (await client.get("/sessions", headers=_basic("opz", "pa:ss"))).status_code == 401
    garbage = {"Authorization": "Basic !!!notbase64"}
    assert (await client.get("/sessions", headers=garbage)).status_code == 401
    assert (await client.get("/sessions", headers=_basic("ops", "pa:ss"))).status_code == 200


def test_auth_settings_from_the_environment() -> None:
    assert not Auth.from_env({}).required
    assert Auth.from_env({"A2PG_DASHBOARD_TOKEN": "t"}) == Auth(token="t")
    assert Auth.from_env({"A2PG_DASHBOARD_BASIC": "u:p:q"}) == Auth(basic=("u", "p:q"))
    for bad in (
        {"A2PG_DASHBOARD_TOKEN": ""},
        {"A2PG_DASHBOARD_BASIC": "nocolon"},
        {"A2PG_DASHBOARD_BASIC": ":p"},
        {"A2PG_DASHBOARD_BASIC": "u:"},
    ):
        with pytest.raises(A2Error, match="A2PG_DASHBOARD"):
            Auth.from_env(bad)


async def test_a_non_ascii_authorization_header_is_a_401_not_a_500(
    store: Store, client_for: Client
) -> None:
    """HTTP headers are latin-1: a basic value with such bytes is not base64, so refused."""
    client = client_for(store, auth=Auth(token="t", basic=("ops", "pw")))
    for value in (b"Basic \xe9t\xe9", b"Bearer \xe9t\xe9", b"\xe9 x"):
        response = await client.get("/sessions", headers={b"Authorization": value})
        assert response.status_code == 401, value


async def test_every_response_forbids_content_sniffing(store: Store, client_for: Client) -> None:
    """Static files too: a browser must not run a file it was told is CSS as script."""
    await append_plain(store, "s1", [1])
    client = client_for(store)
    for path in (
        "/static/dashboard.js",
        "/static/dashboard.css",
        "/static/missing.js",
        "/",
        "/sessions",
        "/session?id=s1",
        "/session?id=nobody",
        "/dead-letters",
        "/nowhere",
        "/session/stream?id=s1&after=nope",
    ):
        response = await client.get(path)
        assert response.headers.get("x-content-type-options") == "nosniff", path
    assert (await client.get("/static/dashboard.js")).status_code == 200
    refused = await client.post("/redrive", data={})
    assert refused.status_code == 403
    assert refused.headers.get("x-content-type-options") == "nosniff"
    locked = client_for(store, auth=Auth(token="t"))
    for path in ("/static/dashboard.js", "/"):
        response = await locked.get(path)
        assert response.status_code == 401
        assert response.headers.get("x-content-type-options") == "nosniff", path


def _set_cookie(response: httpx.Response) -> str:
    [cookie] = response.headers.get_list("set-cookie")
    return cookie


@pytest.mark.parametrize("root_path", ["", "/a2pg"])
async def test_over_https_the_csrf_cookie_is_a_host_cookie(
    store: Store, client_for: Client, root_path: str
) -> None:
    """``__Host-``: Secure, Path=/ and no Domain, so neither plain HTTP nor another host
    (a sibling subdomain) can set it; under a root path too, which then cannot scope it."""
    index = await dead_letter(store, "s1")
    client = client_for(store, base_url="https://dashboard.test", root_path=root_path)
    page = await client.get(f"{root_path}/session", params={"id": "s1"})
    assert page.status_code == 200
    cookie = _set_cookie(page)
    attributes = [part.strip().lower() for part in cookie.split(";")]
    assert cookie.startswith("__Host-a2pg_csrf=")
    assert "secure" in attributes and "path=/" in attributes and "httponly" in attributes
    assert "samesite=strict" in attributes
    assert not [a for a in attributes if a.startswith("domain")]
    form = {
        "session": "s1",
        "consumer": "c",
        "cursor": "lane",
        "lane": "l",
        "index": str(index),
        "action": "skip",
        "csrf_token": csrf_token(page.text),
    }
    # The same value under the plain name (planted over HTTP, say) is not taken over HTTPS.
    value = cookie.split(";")[0].split("=", 1)[1]
    planted = client_for(store, base_url="https://dashboard.test", root_path=root_path)
    planted.cookies.set("a2pg_csrf", value)
    refused = await planted.post(f"{root_path}/redrive", data=form)
    assert refused.status_code == 403
    assert len(await store.dead_letters("s1")) == 1
    done = await client.post(f"{root_path}/redrive", data=form)
    assert done.status_code == 303
    assert await store.dead_letters("s1") == []
    again = await client.get(f"{root_path}/session", params={"id": "s1"})
    assert "set-cookie" not in again.headers  # the browser keeps the one it has


@pytest.mark.parametrize("root_path", ["", "/a2pg"])
async def test_over_plain_http_the_csrf_cookie_keeps_its_plain_name(
    store: Store, client_for: Client, root_path: str
) -> None:
    """A browser refuses a ``__Host-`` cookie without Secure, and a Secure one over HTTP:
    on plain HTTP (loopback) it is ``a2pg_csrf``, scoped to the root path."""
    index = await dead_letter(store, "s1")
    client = client_for(store, root_path=root_path)
    page = await client.get(f"{root_path}/session", params={"id": "s1"})
    cookie = _set_cookie(page)
    attributes = [part.strip().lower() for part in cookie.split(";")]
    assert cookie.startswith("a2pg_csrf=")
    assert "secure" not in attributes and f"path={root_path or '/'}" in attributes
    done = await client.post(
        f"{root_path}/redrive",
        data={
            "session": "s1",
            "consumer": "c",
            "cursor": "lane",
            "lane": "l",
            "index": str(index),
            "action": "skip",
            "csrf_token": csrf_token(page.text),
        },
    )
    assert done.status_code == 303
    assert await store.dead_letters("s1") == []
