"""``a2pg.postgres.dsn``: every accepted DSN form reaches libpq, and none is ever shown whole."""

from __future__ import annotations

from urllib.parse import quote

import psycopg
import pytest

from a2pg.errors import A2Error
from a2pg.postgres import dsn as dsns
from a2pg.postgres.dsn import HIDDEN, describe, password_of, redact, scrub, to_libpq, with_options

SECRET = "Sekr1t-@:/?#%' x"
ENCODED = quote(SECRET, safe="")
KV = "'" + SECRET.replace("\\", "\\\\").replace("'", "\\'") + "'"


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("postgresql+psycopg://u:p@h:5/db", "postgresql://u:p@h:5/db"),
        ("postgresql+psycopg2://u@h/db", "postgresql://u@h/db"),
        ("POSTGRESQL+PSYCOPG://u@h/db", "postgresql://u@h/db"),
        ("postgres://u@h/db?sslmode=disable", "postgresql://u@h/db?sslmode=disable"),
        ("postgresql://u@h/db", "postgresql://u@h/db"),
        ("host=h dbname=db", "host=h dbname=db"),
        ("", ""),
    ],
)
def test_to_libpq_accepts_the_sqlalchemy_and_short_forms(given: str, expected: str) -> None:
    assert to_libpq(given) == expected


@pytest.mark.parametrize(
    ("dsn", "shown"),
    [
        (f"postgresql://u:{ENCODED}@h:5432/db", "postgresql://u:***@h:5432/db"),
        (f"postgresql+psycopg://u:{ENCODED}@h/db", "postgresql+psycopg://u:***@h/db"),
        ("postgres://u:plain@h/db", "postgres://u:***@h/db"),
        (f"postgresql://u@h/db?password={ENCODED}&x=1", "postgresql://u@h/db?password=***&x=1"),
        (f"host=h password={KV} dbname=db", "host=h password=*** dbname=db"),
        ("password=plain host=h", "password=*** host=h"),
        ("host=h password = spaced out dbname=db", "host=h password = *** dbname=db"),
        ("postgresql://u:p@ss@h/db", "postgresql://u:***@h/db"),  # unencoded @: all hidden
        ("postgresql://u:pa/ss@h/db", "postgresql://u:***@h/db"),
        ("postgresql://u:pa?ss@h/db", "postgresql://u:***@h/db"),
        ("host=h passwrd=typo", "host=h passwrd=***"),
        ("postgresql://u@h/db", "postgresql://u@h/db"),
        ("postgresql://h:5432/db?user=a@b", "postgresql://h:5432/db?user=a@b"),
    ],
)
def test_redact_hides_the_password_in_every_form(dsn: str, shown: str) -> None:
    assert redact(dsn) == shown


@pytest.mark.parametrize(
    ("dsn", "password"),
    [
        (f"postgresql://u:{ENCODED}@h/db", SECRET),
        (f"postgresql://u@h/db?password={ENCODED}", SECRET),
        (f"host=h password={KV}", SECRET),
        ("postgresql://u:p@ss@h/db", "p@ss"),  # what was meant, not libpq's "p"
        ("host=h password='open", "open"),
        ("postgresql://u@h/db", None),
        ("host=h", None),
    ],
)
def test_password_of_finds_it_even_unparsable(dsn: str, password: str | None) -> None:
    assert password_of(dsn) == password


def test_scrub_hides_every_form_the_password_could_be_quoted_in() -> None:
    dsn = f"postgresql://u:{ENCODED}@h/db"
    text = f"failed: {SECRET} / {ENCODED} / {dsn}"
    assert scrub(text, dsn) == f"failed: {HIDDEN} / {HIDDEN} / postgresql://u:{HIDDEN}@h/db"
    assert scrub("no password here", dsn) == "no password here"
    assert scrub(text, None) == text
    assert scrub("pass at 'ab' and abacus", "postgresql://u:ab@h/db") == "pass at '***' and abacus"


def test_describe_says_where_without_secrets() -> None:
    assert describe(f"postgresql+psycopg://u:{ENCODED}@h:5433/db") == "u@h:5433/db"
    assert describe(f"host=h port=6 user=u password={KV} dbname=d") == "u@h:6/d"
    assert describe("postgresql:///db") == "localhost/db"
    assert describe("postgresql://u:p@ss@h/db") == "the given DSN"
    assert describe("host=h password='open") == "the given DSN"


@pytest.mark.parametrize(
    ("dsn", "reason"),
    [
        ("postgresql://u:p@ss@h/db", "percent-encode"),
        ("postgresql://u:pa/ss@h/db", "percent-encode"),
        ("postgresql://u:bad%zzSekr1t@h/db", 'invalid percent-encoded token: "***"'),
        ("postgresql://u:Sekr1t@h:54x/db", "the port is not a number"),
        ("host=h port=x5 password=Sekr1t", "the port is not a number"),
        ("postgresql://u:Sekr1t@[::1/db", 'in URI: "postgresql://u:***@[::1/db"'),
        ("postgresql://u@h/db?password=Sekr1t&junk", 'query parameter: "***"'),
        ("host=h password=spaced Sekr1t dbname=d", 'missing "=" after "***"'),
        ("host=h password='openSekr1t dbname=d", "unterminated quoted string"),
        ("host=h passwrd=Sekr1t", 'invalid connection option "passwrd"'),
    ],
)
def test_a_malformed_dsn_is_invalid_argument_shown_redacted(dsn: str, reason: str) -> None:
    with pytest.raises(A2Error) as refused:
        to_libpq(dsn)
    assert refused.value.code == "INVALID_ARGUMENT"
    assert refused.value.message.startswith(f"malformed DSN {redact(dsn)}: ")
    assert reason in refused.value.message
    assert "Sekr1t" not in refused.value.message and "ss@h" not in refused.value.message
    cause = refused.value.__cause__ or (
        None if refused.value.__suppress_context__ else refused.value.__context__
    )
    assert cause is None  # libpq's own error, quoting the DSN, is not chained


def test_a_dsn_that_is_not_text_is_invalid() -> None:
    with pytest.raises(A2Error, match="a DSN must be a str"):
        to_libpq(b"host=h")  # type: ignore[arg-type]


def test_with_options_adds_to_any_form() -> None:
    added = with_options("postgresql+psycopg://u:pw@h:5/db", application_name="w1")
    assert psycopg.conninfo.conninfo_to_dict(added) == {
        "user": "u",
        "password": "pw",
        "host": "h",
        "port": "5",
        "dbname": "db",
        "application_name": "w1",
    }
    with pytest.raises(A2Error):
        with_options("postgresql://u:p@ss@h/db", application_name="w1")


def test_scrubber_is_scrub_with_the_secrets_found_once() -> None:
    hide = dsns.scrubber("password=Sekr1t host=h")
    assert hide("a Sekr1t b") == "a *** b"
    assert dsns.scrubber(None)("a Sekr1t b") == "a Sekr1t b"


async def test_every_form_connects_to_the_real_server(postgres_dsn: str) -> None:
    parts = psycopg.conninfo.conninfo_to_dict(postgres_dsn)
    where = f"{parts.get('host', 'localhost')}:{parts.get('port', 5432)}/{parts['dbname']}"
    user = parts.get("user", "postgres")
    for form in (
        f"postgresql+psycopg://{user}@{where}",
        f"postgres://{user}@{where}",
        f"host={parts.get('host', 'localhost')} port={parts.get('port', 5432)} user={user} "
        f"dbname={parts['dbname']}",
    ):
        async with await psycopg.AsyncConnection.connect(to_libpq(form)) as conn:
            cur = await conn.execute("select current_database()")
            assert await cur.fetchone() == (parts["dbname"],)
