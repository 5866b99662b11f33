"""Who may see the dashboard (a bearer token or basic auth) and which POSTs are genuine (CSRF).

Both secrets come from the environment, never from the command line (where ``ps``
would show them): ``A2PG_DASHBOARD_TOKEN`` accepts ``Authorization: Bearer <token>``
(for scripts and proxies), ``A2PG_DASHBOARD_BASIC`` (``user:password``) accepts HTTP
basic auth (for browsers). With both set, either passes. Comparisons are constant-time.

CSRF is a signed double submit: each browser gets a random cookie (HttpOnly,
SameSite=Strict); every form carries the HMAC of that cookie under a secret made
fresh for each process. A POST whose form token is not the HMAC of its own cookie is
refused with 403 before anything runs, so another site can neither forge a form (it
cannot read the cookie or the page) nor replay one token for another browser.

Over HTTPS the cookie is ``__Host-a2pg_csrf`` (Secure, Path=/, no Domain): a browser
takes it only from this host over TLS, so neither a sibling subdomain nor a plain-HTTP
response can plant one, and the plain name is not read there. Over plain HTTP
(loopback) a browser refuses ``__Host-`` (it needs Secure), so the cookie is
``a2pg_csrf``, scoped to the root path. HTTPS is the request's scheme as the server
sees it: behind a proxy that terminates TLS, the ``X-Forwarded-Proto`` it sends (which
uvicorn takes from 127.0.0.1 and ::1, or ``FORWARDED_ALLOW_IPS``).

Every response (pages, static files, the live tail, refusals) says
``X-Content-Type-Options: nosniff`` (``NoSniff``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass

from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..errors import invalid

TOKEN_ENV = "A2PG_DASHBOARD_TOKEN"
BASIC_ENV = "A2PG_DASHBOARD_BASIC"
REALM = "a2pg dashboard"

CSRF_COOKIE = "a2pg_csrf"
"""The CSRF cookie's name over plain HTTP."""
CSRF_HOST_COOKIE = "__Host-" + CSRF_COOKIE
"""Its name over HTTPS: Secure, Path=/ and no Domain, as the prefix requires."""
CSRF_FIELD = "csrf_token"
_COOKIE_VALUE = re.compile(r"^[0-9a-f]{32}$")
_TOKEN = re.compile(r"[\x21-\x7e]+\Z")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True, slots=True)
class Auth:
    """The credentials a request must carry; neither set means no authentication."""

    token: str | None = None
    basic: tuple[str, str] | None = None

    def __post_init__(self) -> None:
        if self.token is not None and not self.token:
            raise invalid(f"{TOKEN_ENV} is set but empty")
        # A credential no client can send (a header holds no newline; it is read as
        # latin-1 and stripped) would refuse every request, with no hint why.
        if self.token is not None and not _TOKEN.match(self.token):
            raise invalid(
                f"{TOKEN_ENV} must be printable ASCII without spaces (a trailing newline?)"
            )
        if self.basic is not None and (not self.basic[0] or not self.basic[1]):
            raise invalid(f"{BASIC_ENV} must be user:password, both non-empty")
        if self.basic is not None and any(_CONTROL.search(part) for part in self.basic):
            raise invalid(f"{BASIC_ENV} must not hold control characters (a trailing newline?)")

    @property
    def required(self) -> bool:
        return self.token is not None or self.basic is not None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Auth:
        """``A2PG_DASHBOARD_TOKEN`` and ``A2PG_DASHBOARD_BASIC`` (``user:password``)."""
        env = os.environ if environ is None else environ
        token = env.get(TOKEN_ENV)
        basic_text = env.get(BASIC_ENV)
        basic: tuple[str, str] | None = None
        if basic_text is not None:
            user, colon, password = basic_text.partition(":")
            if not colon:
                raise invalid(f"{BASIC_ENV} must be user:password")
            basic = (user, password)
        return cls(token=token, basic=basic)

    def allows(self, authorization: str | None) -> bool:
        """Whether an ``Authorization`` header value carries these credentials."""
        if not self.required:
            return True
        if authorization is None:
            return False
        scheme, _, value = authorization.strip().partition(" ")
        value = value.strip()
        if scheme.lower() == "bearer" and self.token is not None:
            return _same(value, self.token)
        if scheme.lower() == "basic" and self.basic is not None:
            try:
                decoded = base64.b64decode(value, validate=True).decode("utf-8")
            except ValueError:  # not base64 (binascii.Error), not ASCII, or not UTF-8
                return False
            user, colon, password = decoded.partition(":")
            # Both compared, always: the time taken says nothing about which was wrong.
            user_ok = _same(user, self.basic[0])
            password_ok = _same(password, self.basic[1])
            return bool(colon) and user_ok and password_ok
        return False

    def challenge(self) -> str:
        """The ``WWW-Authenticate`` header of a 401: basic when a browser can answer it."""
        if self.basic is not None:
            return f'Basic realm="{REALM}", charset="UTF-8"'
        return f'Bearer realm="{REALM}"'


def _same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))


class RequireAuth:
    """ASGI middleware: every HTTP request (pages, assets, streams, actions) must pass
    ``auth``; others get 401 with a challenge and nothing else."""

    def __init__(self, app: ASGIApp, auth: Auth) -> None:
        self.app = app
        self.auth = auth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.auth.required:
            header = Request(scope).headers.get("authorization")
            if not self.auth.allows(header):
                response = PlainTextResponse(
                    "authentication required\n",
                    status_code=401,
                    headers={"WWW-Authenticate": self.auth.challenge()},
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


class NoSniff:
    """ASGI middleware: every HTTP response says ``X-Content-Type-Options: nosniff``, so
    a browser never runs a response as a type it was not labelled (a static file, an
    error page, the live tail)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message)["X-Content-Type-Options"] = "nosniff"
            await send(message)

        await self.app(scope, receive, sending)


def https(request: Request) -> bool:
    return request.url.scheme == "https"


class Csrf:
    """Issues and checks the signed double-submit tokens of one process."""

    def __init__(self, secret: bytes | None = None) -> None:
        self._secret = secret if secret is not None else secrets.token_bytes(32)

    def _sign(self, cookie: str) -> str:
        return hmac.new(self._secret, cookie.encode("ascii"), hashlib.sha256).hexdigest()

    @staticmethod
    def cookie_name(request: Request) -> str:
        """``__Host-a2pg_csrf`` over HTTPS, ``a2pg_csrf`` over plain HTTP: only that one
        is read (over HTTPS, a plain cookie may have been planted)."""
        return CSRF_HOST_COOKIE if https(request) else CSRF_COOKIE

    @classmethod
    def cookie_of(cls, request: Request) -> str | None:
        value = request.cookies.get(cls.cookie_name(request))
        return value if value is not None and _COOKIE_VALUE.match(value) else None

    def token_for(self, request: Request) -> tuple[str, str | None]:
        """The form token for this browser, and a new cookie value to set if it has none."""
        cookie = self.cookie_of(request)
        if cookie is not None:
            return self._sign(cookie), None
        fresh = secrets.token_hex(16)
        return self._sign(fresh), fresh

    def valid(self, request: Request, token: object) -> bool:
        cookie = self.cookie_of(request)
        if cookie is None or not isinstance(token, str):
            return False
        return hmac.compare_digest(self._sign(cookie).encode(), token.encode("utf-8"))

    @classmethod
    def set_cookie(cls, response: Response, request: Request, value: str, *, root: str) -> None:
        """Over HTTPS the ``__Host-`` cookie (Secure, Path=/); else the plain one, under
        ``root`` (the mount point). Never a Domain: the cookie stays with this host."""
        secure = https(request)
        response.set_cookie(
            cls.cookie_name(request),
            value,
            path="/" if secure else root or "/",
            httponly=True,
            samesite="strict",
            secure=secure,
        )
