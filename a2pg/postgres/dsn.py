"""Connection strings: the forms a2pg accepts, and the one way any of them is shown.

A DSN is accepted as a libpq key/value string or as a URL, including the SQLAlchemy
forms Alembic users have (``postgresql+psycopg://``) and ``postgres://``. Whatever
a2pg prints or logs about a DSN, and any driver message that may quote one, goes
through :func:`redact`, :func:`describe` or :func:`scrub` first, so a password
never reaches a terminal or a log. They work on DSNs libpq cannot parse too, and
hide more than the password rather than less when a DSN is ambiguous.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from urllib.parse import unquote

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ..errors import invalid

HIDDEN = "***"
"""What stands where a password was."""

_SCHEME = re.compile(r"^postgres(?:ql)?(?:\+[\w.-]+)?://", re.IGNORECASE)
_SECRET_KEY = r"(?:pass\w*|pwd)"
"""Option names taken for a password when hiding one (``password``, and misspellings of it)."""
_QUERY_PASSWORD = re.compile(rf"([?&]{_SECRET_KEY}=)([^&#]*)", re.IGNORECASE)
_KEYWORD_PASSWORD = re.compile(
    rf"((?:^|\s){_SECRET_KEY}\s*=\s*)('(?:[^'\\]|\\.)*'?|.*?)(?=\s+[A-Za-z_]\w*\s*=|\s*$)",
    re.IGNORECASE | re.DOTALL,
)
_QUOTED = re.compile(r'"([^"]*)"')
_SHORT = 3
"""Passwords shorter than this are hidden only where they stand alone, not inside words."""

ENCODE_HINT = "percent-encode '@', '/', ':' and '%' in a URL's user name and password (@ is %40)"


def to_libpq(dsn: str) -> str:
    """``dsn`` as libpq reads it (``postgresql+psycopg://`` and ``postgres://`` URLs become
    ``postgresql://``). A DSN libpq cannot parse, or a URL libpq would read other than
    meant (an unencoded ``@`` or ``/`` in its password), is ``INVALID_ARGUMENT`` with a
    message that shows the DSN redacted. An empty DSN stays empty (libpq's defaults)."""
    if not isinstance(dsn, str):
        raise invalid(f"a DSN must be a str, got {type(dsn).__name__}")
    _parse(dsn)
    return _libpq_form(dsn)


def redact(dsn: str) -> str:
    """``dsn`` with its password replaced by ``***``, in the form it was given."""
    text = dsn
    if _SCHEME.match(dsn):
        for secret in _url_passwords(dsn):
            text = text.replace(f":{secret}@", f":{HIDDEN}@", 1)
    text = _QUERY_PASSWORD.sub(lambda m: m.group(1) + HIDDEN, text)
    text = _KEYWORD_PASSWORD.sub(lambda m: m.group(1) + HIDDEN, text)
    return scrub(text, dsn)


def describe(dsn: str) -> str:
    """Where a DSN points, without its password: ``user@host:port/dbname``."""
    try:
        parts = _parse(dsn)
    except Exception:  # A2Error: libpq cannot parse it
        return "the given DSN"
    host = parts.get("host") or parts.get("hostaddr") or "localhost"
    port = parts.get("port")
    user = parts.get("user")
    where = f"{host}:{port}" if port else host
    who = f"{user}@" if user else ""
    return scrub(f"{who}{where}/{parts.get('dbname') or ''}", dsn)


def password_of(dsn: str) -> str | None:
    """The password ``dsn`` carries, if any: as libpq reads it, or where libpq cannot parse
    ``dsn`` or would misread it, as it was most likely meant."""
    url = _SCHEME.match(dsn) is not None
    if not (url and _url_problem(dsn)):
        try:
            value = conninfo_to_dict(_libpq_form(dsn)).get("password")
            return str(value) if value else None
        except psycopg.Error:
            pass
    guesses = _url_passwords(dsn) if url else []
    guesses += [m.group(2) for m in _QUERY_PASSWORD.finditer(dsn)]
    guesses += [_unquoted(m.group(2).strip()) for m in _KEYWORD_PASSWORD.finditer(dsn)]
    return next((unquote(g) if url else g for g in guesses if g), None)


def scrub(text: str, dsn: str | None) -> str:
    """``text`` (a driver's or pool's message, a traceback) with ``dsn``'s password hidden
    in every form it could be quoted in: as given, percent-decoded, unquoted."""
    return scrubber(dsn)(text)


def scrubber(dsn: str | None) -> Callable[[str], str]:
    """:func:`scrub` for one DSN, its secrets found once (for a logging hook)."""
    secrets = _secrets(dsn) if dsn else []
    if not secrets:
        return _unchanged
    long = [s for s in secrets if len(s) >= _SHORT]
    short = [
        re.compile(rf"(?<![A-Za-z0-9]){re.escape(s)}(?![A-Za-z0-9])")
        for s in secrets
        if len(s) < _SHORT
    ]

    def hide(text: str) -> str:
        for secret in long:
            text = text.replace(secret, HIDDEN)
        for pattern in short:
            text = pattern.sub(HIDDEN, text)
        return text

    return hide


def with_options(dsn: str, **options: str | int | None) -> str:
    """``dsn`` (any accepted form) as a libpq string with ``options`` added or replaced."""
    return make_conninfo(to_libpq(dsn), **options)


# --- parsing --------------------------------------------------------------------------------


def _libpq_form(dsn: str) -> str:
    return _SCHEME.sub("postgresql://", dsn, count=1)


def _parse(dsn: str) -> dict[str, str]:
    """libpq's reading of ``dsn``, refused (``INVALID_ARGUMENT``) when it fails or is ambiguous."""
    try:
        parts = {k: str(v) for k, v in conninfo_to_dict(_libpq_form(dsn)).items()}
    except psycopg.Error as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        reason = reason.removeprefix("couldn't parse connection string: ")
        raise invalid(
            f"malformed DSN {redact(dsn)}: {_hide_quoted(reason, dsn) or 'libpq cannot parse it'}"
        ) from None
    problem = _url_problem(dsn) if _SCHEME.match(dsn) else None
    ports = parts.get("port", "").split(",")
    if problem is None and not all(p.strip().isdigit() or not p.strip() for p in ports):
        problem = "the port is not a number"
        if _SCHEME.match(dsn):
            problem += f" ({ENCODE_HINT})"
    if problem is not None:
        raise invalid(f"malformed DSN {redact(dsn)}: {problem}")
    return parts


def _url_problem(dsn: str) -> str | None:
    """Why libpq would read this URL other than it was meant, if it would."""
    head = dsn.split("://", 1)[1].split("?", 1)[0]
    authority, _slash, path = head.partition("/")
    if authority.count("@") > 1 or "@" in path:
        return f"'@' or '/' in the user name or password: {ENCODE_HINT}"
    return None


def _url_passwords(dsn: str) -> list[str]:
    """The password parts of a URL's user info, as written, by every plausible reading."""
    rest = dsn.split("://", 1)[1]
    head = rest.split("?", 1)[0]
    infos = []
    if "@" in head:
        infos.append(head[: head.rfind("@")])  # RFC 3986: user info ends at the last '@'
    first = rest.find("@")
    if first >= 0 and "/" not in rest[:first]:
        infos.append(rest[:first])  # libpq: it ends at the first '@'
    return [info.split(":", 1)[1] for info in infos if ":" in info and info.split(":", 1)[1]]


def _secrets(dsn: str | None) -> list[str]:
    """Every form in which ``dsn``'s password could appear, longest first."""
    if not dsn:
        return []
    found: list[str] = []
    try:
        value = conninfo_to_dict(_libpq_form(dsn)).get("password")
    except psycopg.Error:
        value = None
    if value:
        found.append(str(value))
    if _SCHEME.match(dsn):
        found.extend(_url_passwords(dsn))
    found.extend(m.group(2) for m in _QUERY_PASSWORD.finditer(dsn))
    for match in _KEYWORD_PASSWORD.finditer(dsn):
        raw = match.group(2).strip()
        found.extend((raw, _unquoted(raw)))
        if raw.startswith("'"):
            found.append(raw[1:-1] if raw.endswith("'") and len(raw) > 1 else raw[1:])
    forms = {form for secret in found for form in (secret, unquote(secret)) if form.strip()}
    return sorted(forms, key=lambda s: (-len(s), s))


def _hide_quoted(reason: str, dsn: str) -> str:
    """libpq's parse error with the DSN fragments it quotes hidden, unless a fragment is
    the whole DSN (shown redacted), one punctuation mark, or an option name."""
    secrets = _secrets(dsn)

    def shown(match: re.Match[str]) -> str:
        fragment = match.group(1)
        if fragment in (dsn, _libpq_form(dsn)):
            return f'"{redact(dsn)}"'
        if len(fragment) == 1 and not fragment.isalnum():
            return match.group(0)
        is_key = re.search(rf"(?:^|[\s?&]){re.escape(fragment)}\s*=", dsn) is not None
        if re.fullmatch(r"[A-Za-z_]\w*", fragment) and is_key and fragment not in secrets:
            return match.group(0)
        return f'"{HIDDEN}"'

    return scrub(_QUOTED.sub(shown, reason), dsn)


def _unquoted(value: str) -> str:
    """A key/value string's value as libpq reads it: quotes removed, escapes resolved."""
    if not value.startswith("'"):
        return value
    inner = value[1:-1] if value.endswith("'") and len(value) > 1 else value[1:]
    return re.sub(r"\\(.)", r"\1", inner)


def _unchanged(text: str) -> str:
    return text
