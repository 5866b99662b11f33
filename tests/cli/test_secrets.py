"""No command shows a DSN's password: not in errors, not in stdout, not in any log line.

Every DSN form a deploy may hand ``a2pg`` (URL, ``postgresql+psycopg://``, key/value,
``?password=``, percent-encoded, and malformed ones) is run through every command that
takes a DSN, against a closed port (exit 3) or as it is (malformed: exit 2). Each
password carries the marker ``Sekr1t``: it must appear nowhere, at DEBUG logging too.
"""

from __future__ import annotations

import logging
import socket
from dataclasses import dataclass
from urllib.parse import quote

import pytest

from .conftest import Cli, run_script

MARKER = "Sekr1t"
HARD = f"{MARKER}-@:/?#%' x"
"""A password with every character that needs care in some DSN form."""


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _kv_quoted(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


@dataclass(frozen=True)
class Form:
    name: str
    dsn: str


def well_formed(port: int) -> list[Form]:
    encoded = quote(HARD, safe="")
    where = f"127.0.0.1:{port}/nothing"
    return [
        Form("url", f"postgresql://postgres:{MARKER}plain42@{where}"),
        Form("url-encoded", f"postgresql://postgres:{encoded}@{where}"),
        Form("sqlalchemy", f"postgresql+psycopg://postgres:{encoded}@{where}"),
        Form("postgres-scheme", f"postgres://postgres:{encoded}@{where}"),
        Form("query", f"postgresql://postgres@{where}?password={encoded}&sslmode=disable"),
        Form(
            "keyword",
            f"host=127.0.0.1 port={port} user=postgres dbname=nothing password={_kv_quoted(HARD)}",
        ),
        Form(
            "keyword-plain",
            f"password={MARKER}kv42 host=127.0.0.1 port={port} user=postgres dbname=nothing",
        ),
        Form("url-space", f"postgresql://postgres:{MARKER}%20spaced@{where}"),
    ]


def malformed(port: int) -> list[Form]:
    where = f"127.0.0.1:{port}/nothing"
    return [
        Form("raw-at", f"postgresql://postgres:pl@in{MARKER}42@{where}"),
        Form("raw-slash", f"postgresql://postgres:pa/ss{MARKER}42@{where}"),
        Form("bad-percent", f"postgresql://postgres:bad%zz{MARKER}@{where}"),
        Form("bad-port", f"postgresql+psycopg://postgres:{MARKER}@127.0.0.1:54x/nothing"),
        Form("ipv6", f"postgresql://postgres:{MARKER}@[::1/nothing"),
        Form("query-junk", f"postgresql://postgres@{where}?password={MARKER}&junk"),
        Form("keyword-space", f"host=127.0.0.1 password=spaced {MARKER} dbname=nothing"),
        Form("keyword-unterminated", f"host=127.0.0.1 password='open{MARKER} dbname=nothing"),
        Form("keyword-typo", f"host=127.0.0.1 passwrd={MARKER} dbname=nothing"),
    ]


PORT = _closed_port()
WELL_FORMED = well_formed(PORT)
MALFORMED = malformed(PORT)

COMMANDS = [
    ["check"],
    ["migrate"],
    ["sessions"],
    ["cursors", "s1"],
    ["dead-letters"],
    ["redrive", "s1", "c", "1", "--skip"],
    ["tail", "s1", "--no-follow"],
    ["worker", "tests.cli.sample_app:app", "--wait", "0"],
    ["worker", "tests.cli.sample_app:app", "--wait", "0.6", "--poll-interval", "0.2"],
    ["demo", "--sessions", "1", "--turns", "1", "--workers", "1"],
]


def _assert_hidden(*texts: str) -> None:
    for text in texts:
        assert MARKER not in text, text


@pytest.mark.parametrize("form", WELL_FORMED, ids=lambda f: f.name)
@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_an_unreachable_database_is_reported_without_the_password(
    cli: Cli, caplog: pytest.LogCaptureFixture, form: Form, argv: list[str]
) -> None:
    caplog.set_level(logging.DEBUG)
    result = cli(*argv, "--dsn", form.dsn)
    assert result.code == 3, result
    assert f"cannot reach the database at postgres@127.0.0.1:{PORT}/nothing" in result.err
    _assert_hidden(result.out, result.err, caplog.text)
    assert "Traceback" not in result.err


@pytest.mark.parametrize("form", MALFORMED, ids=lambda f: f.name)
@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_a_malformed_dsn_exits_2_without_echoing_the_password(
    cli: Cli, caplog: pytest.LogCaptureFixture, form: Form, argv: list[str]
) -> None:
    caplog.set_level(logging.DEBUG)
    result = cli(*argv, "--dsn", form.dsn)
    assert result.code == 2, result
    assert result.err.startswith("a2pg: error: malformed DSN "), result.err
    assert result.err.count("\n") == 1
    assert "***" in result.err  # shown, redacted: the user can see which DSN is meant
    _assert_hidden(result.out, result.err, caplog.text)


@pytest.mark.parametrize("form", [*WELL_FORMED[:3], *MALFORMED[:2]], ids=lambda f: f.name)
def test_the_environment_dsn_is_hidden_as_well(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, form: Form
) -> None:
    monkeypatch.setenv("A2PG_DSN", form.dsn)
    result = cli("sessions")
    assert result.code == (3 if form in WELL_FORMED else 2)
    _assert_hidden(result.out, result.err)


@pytest.mark.parametrize(
    "form", [WELL_FORMED[1], WELL_FORMED[5], MALFORMED[0]], ids=lambda f: f.name
)
def test_the_worker_script_logging_at_debug_never_prints_the_password(form: Form) -> None:
    result = run_script(
        *("worker", "tests.cli.sample_app:app", "--log-level", "DEBUG"),
        *("--wait", "1", "--poll-interval", "0.3"),
        env={"A2PG_DSN": form.dsn},
    )
    assert result.code == (3 if form in WELL_FORMED else 2), result.err
    _assert_hidden(result.out, result.err)
    if form in WELL_FORMED:  # it did log its retries, naming the target
        assert result.err.count(f"cannot reach the database at postgres@127.0.0.1:{PORT}") >= 3


def test_a_failing_command_logs_a_driver_error_quoting_the_password_scrubbed(
    cli: Cli, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defence in depth: whatever logs during a command (here a driver-like message that
    quotes the DSN whole) is scrubbed, whoever the logger."""
    from a2pg.cli import admin

    dsn = WELL_FORMED[1].dsn

    def leaky_settings(args: object) -> object:
        logging.getLogger("psycopg.pool").warning("error connecting to %s", dsn)
        logging.getLogger("psycopg").error("failed", exc_info=RuntimeError(f"bad {dsn}"))
        raise RuntimeError(f"a bug quoting {dsn}")

    monkeypatch.setattr(admin, "worker_settings", leaky_settings)
    caplog.set_level(logging.DEBUG)
    result = cli("worker", "tests.cli.sample_app:app", "--dsn", dsn)
    assert result.code == 1
    assert "a2pg: internal error" in result.err
    assert "RuntimeError: a bug quoting postgresql://postgres:***@127.0.0.1" in result.err
    assert "error connecting to postgresql://postgres:***@" in caplog.text
    _assert_hidden(result.err, caplog.text)
    for record in caplog.records:
        _assert_hidden(record.getMessage(), record.exc_text or "")
